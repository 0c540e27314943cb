// passes.h (internal): the trace passes (pure Graph -> Graph functions; their order and
// switches: NOTE [Pass table] in trace/pass_table.h) and the graph facts they share.
#pragma once

#include "trace/graph.h"

namespace oneflow::trace {

Graph dce(const Graph& g);
Graph cse(const Graph& g);
Graph fold(const Graph& g);
Graph remat(const Graph& g);
// Moves nodes that free memory above independent nodes that allocate (NOTE [Memory-aware
// scheduling]).
Graph schedule(const Graph& g);
// The inference rewrites (CPU graphs; NOTE [Fused attention], [Add and norm], [GEMM
// epilogue rewrite] in trace/rewrite_*.cpp): each leaves what it replaced dead for dce.
Graph fuse_attention(const Graph& g);
Graph fuse_add_norm(const Graph& g);
Graph fuse_epilogue(const Graph& g);
// TraceOptions::quantize_int8 (off by default; NOTE [Dynamic int8 linear]).
Graph quantize_int8(const Graph& g);
Graph fuse(const Graph& g);
// The fuse pass for a graph of CUDA tensors: groups only nodes that have a generated kernel
// (fused_unsupported in trace/fusion_codegen.h); the executor compiles each group with NVRTC.
Graph fuse_cuda(const Graph& g);
Graph inplace(const Graph& g);
Graph memplan(const Graph& g);

// ---- helpers the passes share (pass_util.cpp)
// Removes the nodes marked dead; values keep their ids.
Graph compact(Graph g, const std::vector<bool>& dead);
// Whether v is returned or bound as a .grad.
bool is_graph_output(const Graph& g, int v);
// The value of a one-element constant as a double (false: v is not one).
bool constant_scalar(const Graph& g, int v, double& out);
struct Uses {
  std::vector<std::vector<int>> of_value;  // node indices reading each value (sorted)
  std::vector<int> last_of_buffer;         // last node touching each buffer
  std::vector<std::vector<int>> writers;   // node indices writing each buffer (views excepted)
};
Uses uses_of(const Graph& g);

// Bytes of every intermediate buffer (what eager allocates for them, one after another).
size_t intermediate_bytes(const Graph& g);
// The arena size memplan chose (0 before memplan).
size_t arena_bytes(const Graph& g);
struct Interval {
  int first = -1, last = -1;
};
// First and last execution step at which each buffer's memory is used (-1: never).
std::vector<Interval> buffer_intervals(const Graph& g);
// Values a node reads or writes, per execution step: steps are nodes, except that a fused
// group is one step at the position of its last node. Returns each node's step.
std::vector<int> step_of_nodes(const Graph& g);

}  // namespace oneflow::trace

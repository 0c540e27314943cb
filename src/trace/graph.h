// graph.h (internal): the traced-graph IR, its passes and the CPU executor.
// NOTE [Trace IR]: a Graph is what one recording saw, in execution order. A Buffer is one
// storage (an intermediate allocated by an op, or a root the trace did not create: an input,
// an external tensor bound by identity, a leaf's .grad, a host scalar, a constant). A Value is
// a tensor geometry over a buffer; views and in-place writes share their buffer. A Node is one
// dispatched op with its attrs; `writes_existing` marks in-place/out= nodes that write a value
// that existed before. Passes are pure Graph -> Graph functions; the executor lowers the final
// graph to a flat plan of kernel calls over tensors prebuilt on one arena.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dispatch.h"
#include "oneflow/jit.h"

namespace oneflow::trace {

enum class BufKind : uint8_t { Intermediate, Input, External, GradOf, HostScalar, Constant };
const char* buf_kind_name(BufKind k);

struct Buffer {
  BufKind kind = BufKind::Intermediate;
  size_t nbytes = 0;  // bytes of the storage (intermediates: what the planner places)
  Device device;
  int input = -1;           // Input: the flattened input index
  int64_t base_offset = 0;  // Input: the input tensor's storage offset (elements) when recorded
  // External: every impl seen on this storage (checked each call: a re-bound parameter
  // retraces); GradOf: [the leaf]; Constant/HostScalar: the tensor holding the value.
  std::vector<std::shared_ptr<TensorImpl>> impls;
  const StorageImpl* recorded_storage = nullptr;  // External: the storage they pointed to
  std::function<double()> getter;                 // HostScalar: read at every replay
  std::weak_ptr<void> owner;  // HostScalar: the getter is valid while this lives
  int root_value = -1;        // roots: the value first seen on it (its recorded geometry)
  bool escapes = false;       // returned or bound as a .grad: lives outside the arena
  int64_t arena_offset = -1;  // planned byte offset in the arena (memplan)
};

struct Value {
  int buffer = -1;
  DimVector sizes, strides;
  int64_t offset = 0;  // elements from the start of the buffer's storage
  ScalarType dtype = kFloat32;
  Device device;
  int producer = -1;     // the node whose kernel created it (-1: a root or an alias)
  bool is_view = false;  // output of a view op (no kernel)
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  bool contiguous() const;
};

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  SmallVector<int, 4> inputs;    // value ids (-1: an undefined optional input)
  SmallVector<int, 2> outputs;   // value ids
  bool writes_existing = false;  // outputs[0] is a value that existed before (in-place, out=)
  int rng = -1;                  // index of the generator draw whose (seed, offset) its attrs carry
  int group = -1;                // fused group (fuse pass)
};

// NOTE [Traced boxing]: a traced step of global tensors is a graph of the local pieces (the
// collectives are boxing_axis nodes). An output or a .grad that was a global tensor is wrapped
// as one again on every replay: its placement and SBP (`meta`, whose local piece is unused)
// and its logical sizes. Null meta: a local tensor.
struct GlobalWrap {
  std::shared_ptr<GlobalMeta> meta;
  DimVector logical;
};

// A leaf's .grad after the call: bound to `value`, or dropped (value = -1).
struct GradEffect {
  std::shared_ptr<TensorImpl> leaf;
  int value = -1;
  GlobalWrap wrap;
};

struct Graph {
  std::vector<Buffer> buffers;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;               // per flattened input: its value
  std::vector<int> outputs;              // returned values, in order
  std::vector<GlobalWrap> output_wraps;  // per output (NOTE [Traced boxing])
  std::vector<GradEffect> grad_effects;
  // Leaves whose .grad the recorded call's backward set from nothing (NOTE [Traced fresh .grad]
  // in recorder.cpp): a replay that finds one defined records again.
  std::vector<std::shared_ptr<TensorImpl>> fresh_grads;
  std::vector<uint64_t> rng_counters;  // generator draws in eager order (counters each)
  // rng_reset[d]: the generator state set (manual_seed inside the call) before draw d;
  // rng_reset[draws]: the state set after the last draw. {0, 0, false}: none.
  struct RngReset {
    uint64_t seed = 0, offset = 0;
    bool set = false;
  };
  std::vector<RngReset> rng_reset;
  // A loaded training step's own generator ({seed, offset} as two uint64; NOTE [Saved training
  // steps] in serialize.cpp): its draws advance this state instead of the default generator's.
  Storage rng_state;
  // Fused groups (node ids, in execution order); materialized[v] = a group value written to
  // its buffer because something outside the group reads it.
  std::vector<std::vector<int>> groups;
  std::vector<bool> materialized;
  // What the inference rewrites did and refused (TraceStats::rewrites), in pass order.
  std::vector<std::string> rewrites;

  int add_value(Value v) {
    values.push_back(std::move(v));
    return int(values.size()) - 1;
  }
  size_t live_nodes() const { return nodes.size(); }
};

// ---- passes (each pure; see passes.cpp)
Graph dce(const Graph& g);
Graph cse(const Graph& g);
Graph fold(const Graph& g);
Graph remat(const Graph& g);
// Moves nodes that free memory above independent nodes that allocate (NOTE [Memory-aware
// scheduling]).
Graph schedule(const Graph& g);
// The inference rewrites (CPU graphs; NOTE [Fused attention], [Add and norm], [GEMM
// epilogues] in passes.cpp): each leaves what it replaced dead for dce.
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

// ---- helpers the passes share (passes.cpp)
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

// ---- printing
std::string to_string(const Graph& g);
std::string to_dot(const Graph& g);

// ---- the executor (executor.cpp)
// A tensor with `v`'s geometry over `s` (null data: a geometry only, for infer_meta).
std::shared_ptr<TensorImpl> value_impl(const Storage& s, const Value& v);
class Plan;
std::shared_ptr<Plan> lower(const Graph& g, bool arena_outputs);
// Binds the call's inputs, runs every step, applies the .grad effects; returns the outputs.
std::vector<Tensor> replay(Plan& p, const std::vector<Tensor>& inputs);
// Why a compiled plan cannot run for these externals (empty: it can).
std::string check_externals(const Plan& p);
size_t plan_steps(const Plan& p);

// NOTE [Concurrent replay]: a plan holds per-call state (its tensors are re-pointed at each
// call's inputs, its arena holds the intermediates), so one plan serves one call at a time.
// A PlanPool serves concurrent calls: a graph that writes nothing outside itself (an inference
// graph: no in-place writes to roots, no .grad effects, no host scalars, no generator draws,
// no collectives, CPU tensors, results not handed out from the arena) gets one plan per
// concurrent call — lowered on demand from the same graph, sharing its weights and constants
// (their storages), each with its own arena; idle plans are kept for reuse, so the pool holds
// at most as many plans as calls ever ran at once. Any other graph serializes its calls on one
// plan: a training step's updates never interleave.
class PlanPool {
 public:
  PlanPool(Graph g, bool arena_outputs, std::shared_ptr<Plan> first);
  // Replays on a free plan (lowering a new one when every plan is busy).
  std::vector<Tensor> replay(const std::vector<Tensor>& inputs);
  // The first plan (stats, check_externals).
  const Plan& primary() const { return *primary_; }
  bool concurrent() const { return concurrent_; }
  // Plans lowered so far (1 + the concurrent calls that found every plan busy).
  size_t plans() const;

 private:
  Graph graph_;
  bool arena_outputs_;
  bool concurrent_;
  std::shared_ptr<Plan> primary_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Plan>> idle_;
  size_t plans_ = 1;
  std::mutex serial_mu_;
};
// Why a graph's calls must be serialized ("" when concurrent calls may each get a plan).
std::string serial_reason(const Graph& g, bool arena_outputs);
size_t plan_arena_bytes(const Plan& p);
// Fused groups that run as generated CUDA kernels (TraceStats::fused_kernels).
size_t plan_fused_kernels(const Plan& p);
// How a plan replays: "cpu", "cuda graph", or "cuda steps: <why>" (TraceStats::replay_mode).
std::string plan_graph_state(const Plan& p);
// Tests: while on, CPU plans copy their inputs into buffers of their own at each replay, as a
// CUDA Graph's plan does (NOTE [CUDA Graph replay]), so that path runs without a GPU.
void set_static_inputs_for_testing(bool on);

// ---- recording (recorder.cpp)
struct Recording {
  Graph graph;
  std::vector<Tensor> outputs;  // what the eager call returned (detached)
  std::string not_committable;  // why this recording cannot become a graph (empty: it can)
  size_t eager_peak_bytes = 0;
  double ms = 0;
};
using EagerFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// Runs fn once eagerly on `inputs` while recording it.
Recording record(const EagerFn& fn, const std::vector<Tensor>& inputs);
bool recording();
// Makes the call being recorded (if any) run eagerly only, the next call recording again, and
// lets the rest of it read tensor data on the host: for a call that cannot be a graph anyway
// (it creates optimizer state) but must read to stay exact (GradScaler's first skipped step).
void give_up_recording(std::string why);
// A 0-d float64 CPU tensor holding `value` (made without dispatch). While recording it is a
// root that every replay refreshes from `getter` (an error once `owner` has died): how
// optimizers hand the learning rate of a schedule to a traced step.
Tensor host_scalar(double value, std::function<double()> getter, std::weak_ptr<void> owner);

// ---- serialization (serialize.cpp)
void save_graph(const Graph& g, const std::string& path);
// Whether a graph is a training step (it reads or sets the .grad of tensors).
bool is_training_step(const Graph& g);
// Saves a training step with its state (NOTE [Saved training steps]); `names` name the
// tensors it reads or updates (parameters, buffers, optimizer state), the rest get generic ones.
void save_training(const Graph& g, const std::string& path,
                   const std::vector<std::pair<std::string, Tensor>>& names);
Graph load_graph(const std::string& path);

}  // namespace oneflow::trace

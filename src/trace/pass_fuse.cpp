// pass_fuse.cpp: elementwise fusion (fuse, and fuse_cuda for a graph of CUDA tensors).
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ops/shape_attrs.h"
#include "trace/fusion_codegen.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/passes.h"

#include "trace/pass_util.h"

namespace oneflow::trace {
using namespace pass_util;

namespace {
constexpr int64_t kMinFuseNumel = 1024;  // below this a group costs more than it saves
constexpr size_t kMaxGroupNodes = 48;
}  // namespace

// ---------------------------------------------------------------- elementwise fusion

namespace {
// CPU groups run each member's CPU kernel; CUDA groups become one generated kernel (every
// member on the output's device and with a generated form).
bool fusible(const Graph& g, const Node& n, bool cuda) {
  if (!n.op->has(kElementwise) || n.op->has(kRandom) || n.rng >= 0) return false;
  if (!(cuda ? n.op->cuda : n.op->cpu)) return false;
  if (n.outputs.size() != 1) return false;
  const Value& o = g.values[size_t(n.outputs[0])];
  if ((cuda ? !o.device.is_cuda() : !o.device.is_cpu()) || !o.contiguous() ||
      o.numel() < kMinFuseNumel)
    return false;
  for (int v : n.inputs)
    if (v < 0 || g.values[size_t(v)].device != o.device) return false;
  return !cuda || fused_unsupported(g, n).empty();
}

Graph fuse_groups(const Graph& g0, bool cuda);
}  // namespace

Graph fuse(const Graph& g0) { return fuse_groups(g0, false); }
Graph fuse_cuda(const Graph& g0) { return fuse_groups(g0, true); }

namespace {
Graph fuse_groups(const Graph& g0, bool cuda) {
  Graph g = g0;
  g.groups.clear();
  for (Node& n : g.nodes) n.group = -1;
  std::vector<int> cur;
  DimVector shape;
  std::unordered_map<int, int> written;             // buffer -> the value written in `cur`
  std::unordered_map<int, std::vector<int>> reads;  // buffer -> values read in `cur`
  // A group saves memory passes when a member reads another's result or members share an
  // input; side-by-side members with neither (the head split's three transposing copies) only
  // add a gather per block.
  auto pays = [&] {
    std::unordered_set<int> made, read;
    for (int i : cur) made.insert(g.nodes[size_t(i)].outputs[0]);
    for (int i : cur)
      for (int v : g.nodes[size_t(i)].inputs) {
        if (v < 0) continue;
        if (made.count(v) || !read.insert(v).second) return true;
      }
    return false;
  };
  auto close = [&] {
    if (cur.size() >= 2 && pays()) {
      const int id = int(g.groups.size());
      for (int i : cur) g.nodes[size_t(i)].group = id;
      g.groups.push_back(cur);
    }
    cur.clear();
    written.clear();
    reads.clear();
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (is_view_node(n)) continue;  // views run nothing; a view of a group value materializes it
    if (!fusible(g, n, cuda)) {
      close();
      continue;
    }
    const Value& o = g.values[size_t(n.outputs[0])];
    bool join =
        !cur.empty() && IntArrayRef(o.sizes) == IntArrayRef(shape) && cur.size() < kMaxGroupNodes;
    // Consecutive same-shape nodes share one pass over memory, connected or side by side
    // (Adam's moment updates read the gradient next to each other).
    if (join) {
      bool conflict = false;
      // reading memory the group writes through another geometry breaks block locality
      for (int v : n.inputs) {
        auto w = written.find(g.values[size_t(v)].buffer);
        if (w != written.end() && w->second != v) conflict = true;
      }
      const int ob = o.buffer;
      auto w = written.find(ob);
      if (w != written.end() && w->second != n.outputs[0]) conflict = true;
      auto r = reads.find(ob);
      if (r != reads.end())
        for (int v : r->second)
          if (v != n.outputs[0]) conflict = true;
      join = !conflict;
    }
    if (!join) {
      close();
      shape = o.sizes;
    }
    cur.push_back(int(i));
    for (int v : n.inputs) reads[g.values[size_t(v)].buffer].push_back(v);
    written[o.buffer] = n.outputs[0];
  }
  close();
  // Group values that something outside the group reads (or that outlive the call) are
  // written to their buffers; the rest live only in per-thread block scratch.
  g.materialized.assign(g.values.size(), false);
  const std::vector<int> refs = referenced_values_per_buffer(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (int v : n.inputs) {
      if (v < 0) continue;
      const Value& val = g.values[size_t(v)];
      if (val.producer >= 0 && g.nodes[size_t(val.producer)].group >= 0 &&
          g.nodes[size_t(val.producer)].group != n.group)
        g.materialized[size_t(v)] = true;
    }
  }
  for (int v : g.outputs) g.materialized[size_t(v)] = true;
  for (const GradEffect& e : g.grad_effects)
    if (e.value >= 0) g.materialized[size_t(e.value)] = true;
  for (const Node& n : g.nodes) {
    if (n.group < 0) continue;
    const int v = n.outputs[0];
    const Value& val = g.values[size_t(v)];
    const Buffer& b = g.buffers[size_t(val.buffer)];
    if (n.writes_existing || b.kind != BufKind::Intermediate || b.escapes ||
        refs[size_t(val.buffer)] > 1)
      g.materialized[size_t(v)] = true;
  }
  return g;
}
}  // namespace

}  // namespace oneflow::trace

// pass_util.cpp: the graph facts the passes share (trace/passes.h, trace/pass_util.h).
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

namespace pass_util {

void apply_remap(Graph& g, const std::vector<int>& remap) {
  auto r = [&](int& v) {
    while (v >= 0 && remap[size_t(v)] >= 0 && remap[size_t(v)] != v) v = remap[size_t(v)];
  };
  for (Node& n : g.nodes)
    for (int& v : n.inputs) r(v);
  for (int& v : g.outputs) r(v);
  for (GradEffect& e : g.grad_effects) r(e.value);
}

// Per buffer: the distinct values anything references (node inputs/outputs, outputs, effects).
std::vector<int> referenced_values_per_buffer(const Graph& g) {
  std::vector<char> seen(g.values.size(), 0);
  std::vector<int> count(g.buffers.size(), 0);
  auto see = [&](int v) {
    if (v < 0 || seen[size_t(v)]) return;
    seen[size_t(v)] = 1;
    ++count[size_t(g.values[size_t(v)].buffer)];
  };
  for (const Node& n : g.nodes) {
    for (int v : n.inputs) see(v);
    for (int v : n.outputs) see(v);
  }
  for (int v : g.outputs) see(v);
  for (const GradEffect& e : g.grad_effects) see(e.value);
  return count;
}

// Per buffer: the last node index that writes it (-1: none).
std::vector<int> last_writer(const Graph& g) {
  std::vector<int> w(g.buffers.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (is_view_node(g.nodes[i])) continue;
    for (int v : g.nodes[i].outputs) w[size_t(g.values[size_t(v)].buffer)] = int(i);
  }
  return w;
}

// Whether node i's outputs can be replaced by other values (CSE, folding): fresh intermediates
// that nothing else aliases, writes, returns or binds.
bool replaceable_outputs(const Graph& g, size_t i, const std::vector<int>& refs,
                         const std::vector<int>& writer) {
  const Node& n = g.nodes[i];
  if (n.writes_existing || is_view_node(n) || n.op->has(kRandom) || n.op->has(kEffect) ||
      n.rng >= 0)
    return false;
  for (int v : n.outputs) {
    const Value& val = g.values[size_t(v)];
    const Buffer& b = g.buffers[size_t(val.buffer)];
    if (b.kind != BufKind::Intermediate || b.escapes) return false;
    if (refs[size_t(val.buffer)] != 1 || writer[size_t(val.buffer)] != int(i)) return false;
  }
  return true;
}

}  // namespace pass_util

using namespace pass_util;

// Removes dead nodes; values they produced keep their ids (nothing reads them any more).
Graph compact(Graph g, const std::vector<bool>& dead) {
  std::vector<int> new_id(g.nodes.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dead[i]) continue;
    new_id[i] = int(kept.size());
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (Value& v : g.values)
    if (v.producer >= 0) v.producer = new_id[size_t(v.producer)];
  return g;
}

bool is_graph_output(const Graph& g, int v) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return true;
  for (const GradEffect& e : g.grad_effects)
    if (e.value == v) return true;
  return false;
}

// The value of a constant buffer as a double, if it is one element (for x*1, x+0 rules).
bool constant_scalar(const Graph& g, int v, double& out) {
  if (v < 0) return false;
  const Value& val = g.values[size_t(v)];
  const Buffer& b = g.buffers[size_t(val.buffer)];
  if (b.kind != BufKind::Constant || val.numel() != 1 || b.impls.empty()) return false;
  Tensor t(b.impls[0]);
  dispatch_dtype(val.dtype, [&](auto z) {
    using T = decltype(z);
    const char* base = static_cast<const char*>(t.impl()->storage->data);
    T x;
    std::memcpy(&x, base + val.offset * int64_t(sizeof(T)), sizeof(T));
    out = double(compute_t<T>(x));
  });
  return true;
}

// ---------------------------------------------------------------- steps and lifetimes

std::vector<int> step_of_nodes(const Graph& g) {
  std::vector<int> last_of_group(g.groups.size(), -1);
  for (size_t k = 0; k < g.groups.size(); ++k) last_of_group[k] = g.groups[k].back();
  std::vector<int> step(g.nodes.size(), -1);
  int s = 0;
  // a group runs where its last node was; its other nodes take that step too
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (is_view_node(n)) continue;
    if (n.group >= 0 && last_of_group[size_t(n.group)] != int(i)) continue;
    step[i] = s++;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].group >= 0) step[i] = step[size_t(last_of_group[size_t(g.nodes[i].group)])];
  return step;
}

namespace {
// Whether value v needs its buffer at run time (fused-away group values do not).
bool needs_memory(const Graph& g, int v) {
  const Value& val = g.values[size_t(v)];
  if (val.producer >= 0 && g.nodes[size_t(val.producer)].group >= 0 && !g.materialized.empty())
    return g.materialized[size_t(v)];
  return true;
}

}  // namespace

// First and last step at which each buffer is used (-1, -1: never).
std::vector<Interval> buffer_intervals(const Graph& g) {
  const std::vector<int> step = step_of_nodes(g);
  std::vector<Interval> iv(g.buffers.size());
  auto use = [&](int v, int s) {
    if (v < 0 || s < 0 || !needs_memory(g, v)) return;
    Interval& x = iv[size_t(g.values[size_t(v)].buffer)];
    if (x.first < 0 || s < x.first) x.first = s;
    x.last = std::max(x.last, s);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (is_view_node(g.nodes[i])) continue;
    for (int v : g.nodes[i].inputs) use(v, step[i]);
    for (int v : g.nodes[i].outputs) use(v, step[i]);
  }
  return iv;
}

Uses uses_of(const Graph& g) {
  Uses u;
  u.of_value.assign(g.values.size(), {});
  u.last_of_buffer.assign(g.buffers.size(), -1);
  u.writers.assign(g.buffers.size(), {});
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (int v : n.inputs) {
      if (v < 0) continue;
      u.of_value[size_t(v)].push_back(int(i));
      u.last_of_buffer[size_t(g.values[size_t(v)].buffer)] = int(i);
    }
    for (int v : n.outputs) {
      u.last_of_buffer[size_t(g.values[size_t(v)].buffer)] = int(i);
      if (!n.op->has(kView)) u.writers[size_t(g.values[size_t(v)].buffer)].push_back(int(i));
    }
  }
  return u;
}

}  // namespace oneflow::trace

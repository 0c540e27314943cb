// pass_schedule.cpp: memory-aware scheduling (schedule).
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

// ---------------------------------------------------------------- memory-aware scheduling

// NOTE [Memory-aware scheduling]: recorded order is eager order, and eager order is not always
// kind to memory: backward computes a linear layer's input gradient (a new large buffer) before
// its weight gradient, the last reader of the layer's input activation, so both are alive
// together. The pass first moves every view node up to just after the node that made its
// input (a view runs nothing and reads no data where it stands), then moves each node that
// frees memory (the last reader of arena buffers worth more than the ones it makes) above the
// independent nodes before it that make an arena buffer, as far as each such step holds:
// between the two, the freed buffers and the new one no longer coexist. Independent means: no
// value of one is an input of the other, neither writes a buffer the other reads or writes,
// and neither is a collective, has effects or reads data on the host (every rank keeps one
// order of collectives). An elementwise node feeding an elementwise reader of its shape is not
// moved (that would split a fused group). Both orders run the same kernels on the same data,
// so results are bitwise the same.
namespace {
Graph reordered(Graph g, const std::vector<int>& order) {
  std::vector<int> new_id(g.nodes.size(), -1);
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t k = 0; k < order.size(); ++k) {
    new_id[size_t(order[k])] = int(k);
    nodes.push_back(std::move(g.nodes[size_t(order[k])]));
  }
  g.nodes = std::move(nodes);
  for (Value& v : g.values)
    if (v.producer >= 0) v.producer = new_id[size_t(v.producer)];
  for (std::vector<int>& grp : g.groups)
    for (int& i : grp) i = new_id[size_t(i)];
  return g;
}

Graph hoist_views(const Graph& g) {
  const size_t n = g.nodes.size();
  // a view goes right after the latest node before it that wrote one of its inputs (an
  // in-place write lists the value it writes as its output; ties keep recorded order)
  std::vector<int> writer(g.values.size(), -1);
  std::vector<std::pair<double, int>> key(n);
  for (size_t i = 0; i < n; ++i) {
    double k = double(i);
    if (is_view_node(g.nodes[i])) {
      int after = -1;
      for (int v : g.nodes[i].inputs)
        if (v >= 0) after = std::max(after, writer[size_t(v)]);
      k = double(after) + 0.5 + double(i) / double(4 * n + 4);  // between `after` and the next
    }
    key[i] = {k, int(i)};
    for (int v : g.nodes[i].outputs) writer[size_t(v)] = int(i);
  }
  std::stable_sort(key.begin(), key.end());
  std::vector<int> order(n);
  bool moved = false;
  for (size_t k = 0; k < n; ++k) {
    order[k] = key[k].second;
    moved = moved || order[k] != int(k);
  }
  return moved ? reordered(g, order) : g;
}
}  // namespace

Graph schedule(const Graph& g0) {
  Graph g = hoist_views(g0);
  const size_t n = g.nodes.size();
  if (n < 2) return g;
  auto placed = [&](int b) {  // an arena buffer: intermediate, not outliving the call
    const Buffer& B = g.buffers[size_t(b)];
    return B.kind == BufKind::Intermediate && !B.escapes;
  };
  std::vector<int> first(g.buffers.size(), -1), last(g.buffers.size(), -1);
  std::vector<std::vector<int>> reads(n), writes(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& nd = g.nodes[i];
    for (int v : nd.inputs)
      if (v >= 0) reads[i].push_back(g.values[size_t(v)].buffer);
    if (!is_view_node(nd))
      for (int v : nd.outputs) writes[i].push_back(g.values[size_t(v)].buffer);
    for (const std::vector<int>* l : {&reads[i], &writes[i]})
      for (int b : *l) {
        if (first[size_t(b)] < 0) first[size_t(b)] = int(i);
        last[size_t(b)] = int(i);
      }
  }
  for (int v : g.outputs) last[size_t(g.values[size_t(v)].buffer)] = int(n);  // never freed
  auto uses = [&](int i, int b) {
    const std::vector<int>& r = reads[size_t(i)];
    const std::vector<int>& w = writes[size_t(i)];
    return std::find(r.begin(), r.end(), b) != r.end() ||
           std::find(w.begin(), w.end(), b) != w.end();
  };
  auto barrier = [&](int i) {
    const OpDef* op = g.nodes[size_t(i)].op;
    return op->has(kCollective) || op->has(kEffect) || op->has(kSyncsHost);
  };
  auto independent = [&](int a, int b) {            // a runs before b today
    const auto& made = g.nodes[size_t(a)].outputs;  // in place or not, b may read what a makes
    for (int v : g.nodes[size_t(b)].inputs)
      if (v >= 0 && std::find(made.begin(), made.end(), v) != made.end()) return false;
    for (int w : writes[size_t(a)])
      if (uses(b, w)) return false;
    for (int w : writes[size_t(b)])
      if (uses(a, w)) return false;
    return true;
  };
  auto made = [&](int i) {  // bytes of arena buffers node i is the first to use
    size_t m = 0;
    for (int b : writes[size_t(i)])
      if (placed(b) && first[size_t(b)] == i) m += g.buffers[size_t(b)].nbytes;
    return m;
  };
  auto freed = [&](int i, int other) {  // ... the last to use, untouched by `other`
    size_t f = 0;
    std::vector<int> seen;
    for (const std::vector<int>* l : {&reads[size_t(i)], &writes[size_t(i)]})
      for (int b : *l)
        if (placed(b) && last[size_t(b)] == i && !uses(other, b) &&
            std::find(seen.begin(), seen.end(), b) == seen.end()) {
          seen.push_back(b);
          f += g.buffers[size_t(b)].nbytes;
        }
    return f;
  };
  // an elementwise node whose result an elementwise node of its shape reads stays put: moving
  // it away from that reader would split a fused group (relu's backward: gt, then where)
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t i = 0; i < n; ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0) readers[size_t(v)].push_back(int(i));
  auto feeds_fusion = [&](int i) {
    const Node& nd = g.nodes[size_t(i)];
    if (!nd.op->has(kElementwise) || nd.outputs.size() != 1) return false;
    const Value& o = g.values[size_t(nd.outputs[0])];
    for (int r : readers[size_t(nd.outputs[0])]) {
      const Node& rn = g.nodes[size_t(r)];
      if (rn.op->has(kElementwise) && rn.outputs.size() == 1 &&
          IntArrayRef(g.values[size_t(rn.outputs[0])].sizes) == IntArrayRef(o.sizes))
        return true;
    }
    return false;
  };
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = int(i);
  bool moved = false;
  for (size_t i = 1; i < n; ++i) {
    const int b = order[i];
    if (barrier(b) || is_view_node(g.nodes[size_t(b)]) || feeds_fusion(b)) continue;
    const size_t own = made(b);
    size_t target = i;
    for (size_t j = i; j > 0; --j) {
      const int a = order[j - 1];
      if (barrier(a) || !independent(a, b)) break;
      if (is_view_node(g.nodes[size_t(a)])) continue;  // passed only on the way to a gain
      if (made(a) == 0 || freed(b, a) <= own) break;
      target = j - 1;
    }
    if (target == i) continue;
    std::rotate(order.begin() + std::ptrdiff_t(target), order.begin() + std::ptrdiff_t(i),
                order.begin() + std::ptrdiff_t(i) + 1);
    moved = true;
  }
  return moved ? reordered(g, order) : g;
}

}  // namespace oneflow::trace

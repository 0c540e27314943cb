// pass_memory.cpp: in-place reuse (inplace) and memory planning (memplan), and the
// byte counts of a graph's intermediates.
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
constexpr size_t kArenaAlign = 64;
}  // namespace

// ---------------------------------------------------------------- in-place reuse

namespace {
// Whether result oo may be written over input xo, which dies at step `at`: two arena buffers
// (intermediate, not outliving the call), x's at least as large, one dtype, shape and dense
// layout from the buffers' start. (Callers check that x's buffer is read under no other
// geometry there.)
bool can_take(const Graph& g, const std::vector<Interval>& iv, int xo, int oo, int at) {
  const Value &x = g.values[size_t(xo)], &o = g.values[size_t(oo)];
  const int bx = x.buffer, bo = o.buffer;
  if (bx == bo) return false;
  const Buffer &X = g.buffers[size_t(bx)], &O = g.buffers[size_t(bo)];
  if (X.kind != BufKind::Intermediate || O.kind != BufKind::Intermediate || X.escapes ||
      O.escapes || X.nbytes < O.nbytes)
    return false;
  if (x.dtype != o.dtype || !(IntArrayRef(x.sizes) == IntArrayRef(o.sizes)) || !x.contiguous() ||
      !o.contiguous() || x.offset != 0 || o.offset != 0)
    return false;
  return iv[size_t(bx)].last == at;  // x is read no later
}

// The result's buffer `from` is given up: it and every value on it (views too) move to `to`.
void move_buffer(Graph& g, std::vector<Interval>& iv, int from, int to) {
  for (Value& v : g.values)
    if (v.buffer == from) v.buffer = to;
  iv[size_t(to)].last = std::max(iv[size_t(to)].last, iv[size_t(from)].last);
  iv[size_t(from)] = Interval{};
  g.buffers[size_t(from)].nbytes = 0;
}
}  // namespace

Graph inplace(const Graph& g0) {
  Graph g = g0;
  const std::vector<int> refs = referenced_values_per_buffer(g);
  const std::vector<int> step = step_of_nodes(g);
  std::vector<Interval> iv = buffer_intervals(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.group >= 0 || n.writes_existing || !n.op->has(kInplaceOk) || n.inputs.empty() ||
        n.inputs[0] < 0 || n.outputs.size() != 1)
      continue;
    const int xo = n.inputs[0], oo = n.outputs[0];
    const int bx = g.values[size_t(xo)].buffer;
    // other inputs must not be x's memory under another geometry: refs == 1 ensures it
    if (refs[size_t(bx)] == 1 && can_take(g, iv, xo, oo, step[i]))
      move_buffer(g, iv, g.values[size_t(oo)].buffer, bx);
  }
  // NOTE [In-place fused groups]: a group's result written by its last member may take the
  // buffer of an input that dies at the group (the GELU backward writing over the incoming
  // gradient): the group runs block by block and every member reads a block of its inputs
  // before the last member writes that block of the result, and blocks are disjoint.
  for (const std::vector<int>& grp : g.groups) {
    const Node& last = g.nodes[size_t(grp.back())];
    if (last.writes_existing || last.outputs.size() != 1) continue;
    const int oo = last.outputs[0];
    if (g.materialized.empty() || !g.materialized[size_t(oo)]) continue;
    // per buffer: the distinct values the group's members read on it
    std::unordered_map<int, std::vector<int>> read_on;
    for (int ni : grp)
      for (int v : g.nodes[size_t(ni)].inputs) {
        if (v < 0) continue;
        std::vector<int>& l = read_on[g.values[size_t(v)].buffer];
        if (std::find(l.begin(), l.end(), v) == l.end()) l.push_back(v);
      }
    auto take_one = [&] {  // the first input, in member order, whose buffer the result can take
      for (int ni : grp)
        for (int xo : g.nodes[size_t(ni)].inputs) {
          if (xo < 0) continue;
          const Value& x = g.values[size_t(xo)];
          if (x.producer >= 0 && g.nodes[size_t(x.producer)].group == last.group) continue;
          if (read_on[x.buffer].size() == 1 && can_take(g, iv, xo, oo, step[size_t(grp.back())])) {
            move_buffer(g, iv, g.values[size_t(oo)].buffer, x.buffer);
            return;
          }
        }
    };
    take_one();
  }
  return g;
}

// ---------------------------------------------------------------- memory planning

size_t intermediate_bytes(const Graph& g) {
  size_t total = 0;
  for (const Buffer& b : g.buffers)
    if (b.kind == BufKind::Intermediate && !b.escapes) total += b.nbytes;
  return total;
}

size_t arena_bytes(const Graph& g) {
  size_t end = 0;
  for (const Buffer& b : g.buffers)
    if (b.arena_offset >= 0) end = std::max(end, size_t(b.arena_offset) + b.nbytes);
  return (end + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

// NOTE [Memory plan]: two placements of the arena buffers (intermediates that do not outlive
// the call), the smaller arena kept:
// - a sweep over the steps: at step s the buffers first used at s are placed in the
//   best-fitting free block (the smallest that holds them; else the end of the arena grows),
//   then the buffers last used at s are freed and merged with free neighbours;
// - greedy by size: largest buffers first, each at the lowest offset where it overlaps no
//   placed buffer whose lifetime overlaps its own (the sweep cannot see that a large buffer
//   born later wants the room a small one takes now; this order can).
// Both keep buffers of overlapping lifetimes apart. Inputs, outputs, externals and
// .grad-bound buffers are never placed here.
namespace {
size_t arena_round(size_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

// candidates: the buffers to place; returns each one's offset (by buffer id) and the arena end
std::pair<std::vector<int64_t>, size_t> plan_sweep(const Graph& g, const std::vector<Interval>& iv,
                                                   const std::vector<int>& candidates) {
  std::vector<int64_t> at(g.buffers.size(), -1);
  int nsteps = 0;
  for (int b : candidates) nsteps = std::max(nsteps, iv[size_t(b)].last + 1);
  std::vector<std::vector<int>> starts(static_cast<size_t>(nsteps)),
      ends(static_cast<size_t>(nsteps));
  for (int b : candidates) {
    starts[size_t(iv[size_t(b)].first)].push_back(b);
    ends[size_t(iv[size_t(b)].last)].push_back(b);
  }
  std::map<size_t, size_t> free_blocks;  // offset -> size
  size_t end = 0;
  for (int s = 0; s < nsteps; ++s) {
    // larger buffers first: they are the hardest to fit
    std::vector<int>& st = starts[size_t(s)];
    std::sort(st.begin(), st.end(), [&](int a, int b) {
      return g.buffers[size_t(a)].nbytes > g.buffers[size_t(b)].nbytes;
    });
    for (int b : st) {
      const size_t need = arena_round(g.buffers[size_t(b)].nbytes);
      auto best = free_blocks.end();
      for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it)
        if (it->second >= need && (best == free_blocks.end() || it->second < best->second))
          best = it;
      size_t off;
      if (best != free_blocks.end()) {
        off = best->first;
        const size_t rest = best->second - need;
        free_blocks.erase(best);
        if (rest) free_blocks[off + need] = rest;
      } else if (!free_blocks.empty() &&
                 std::prev(free_blocks.end())->first + std::prev(free_blocks.end())->second ==
                     end) {
        // the last free block touches the end: grow it
        auto last = std::prev(free_blocks.end());
        off = last->first;
        free_blocks.erase(last);
        end = off + need;
      } else {
        off = end;
        end += need;
      }
      at[size_t(b)] = int64_t(off);
    }
    for (int b : ends[size_t(s)]) {
      size_t off = size_t(at[size_t(b)]);
      size_t size = arena_round(g.buffers[size_t(b)].nbytes);
      auto next = free_blocks.lower_bound(off);
      if (next != free_blocks.end() && off + size == next->first) {
        size += next->second;
        next = free_blocks.erase(next);
      }
      if (next != free_blocks.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
          off = prev->first;
          size += prev->second;
          free_blocks.erase(prev);
        }
      }
      free_blocks[off] = size;
    }
  }
  return {std::move(at), end};
}

std::pair<std::vector<int64_t>, size_t> plan_by_size(const Graph& g,
                                                     const std::vector<Interval>& iv,
                                                     std::vector<int> order) {
  std::vector<int64_t> at(g.buffers.size(), -1);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const size_t sa = arena_round(g.buffers[size_t(a)].nbytes);
    const size_t sb = arena_round(g.buffers[size_t(b)].nbytes);
    if (sa != sb) return sa > sb;
    return iv[size_t(a)].first < iv[size_t(b)].first;
  });
  std::vector<int> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed, time-overlapping
  size_t end = 0;
  for (int b : order) {
    const size_t need = arena_round(g.buffers[size_t(b)].nbytes);
    const Interval& t = iv[size_t(b)];
    busy.clear();
    for (int p : placed) {
      const Interval& u = iv[size_t(p)];
      if (u.first <= t.last && t.first <= u.last)
        busy.push_back({size_t(at[size_t(p)]),
                        size_t(at[size_t(p)]) + arena_round(g.buffers[size_t(p)].nbytes)});
    }
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo >= off + need) break;  // the gap before this one holds it
      off = std::max(off, hi);
    }
    at[size_t(b)] = int64_t(off);
    end = std::max(end, off + need);
    placed.push_back(b);
  }
  return {std::move(at), end};
}
}  // namespace

Graph memplan(const Graph& g0) {
  Graph g = g0;
  const std::vector<Interval> iv = buffer_intervals(g);
  std::vector<int> candidates;
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    Buffer& buf = g.buffers[b];
    buf.arena_offset = -1;
    if (buf.kind != BufKind::Intermediate || buf.escapes || buf.nbytes == 0 || iv[b].first < 0)
      continue;
    candidates.push_back(int(b));
  }
  auto sweep = plan_sweep(g, iv, candidates);
  auto by_size = plan_by_size(g, iv, candidates);
  const std::vector<int64_t>& at = by_size.second < sweep.second ? by_size.first : sweep.first;
  for (int b : candidates) g.buffers[size_t(b)].arena_offset = at[size_t(b)];
  return g;
}

}  // namespace oneflow::trace

// pass_remat.cpp: rematerialization (remat): cheap ops run again instead of keeping
// their results alive.
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

// ---------------------------------------------------------------- rematerialization

namespace {

// Ops cheap enough to run twice: elementwise ones, one-pass ones (kCheapRecompute: layer
// norm, softmax), and random per-element ops (dropout) whose replay draws are fixed per call
// (a second run of the node gives the same bits).
bool cheap_to_recompute(const Graph& g, const Node& n) {
  if (n.writes_existing) return false;
  if (n.op->has(kView)) return n.inputs.size() == 1 && n.outputs.size() == 1;
  if (!n.op->cpu) return false;
  if ((n.op->has(kElementwise) || n.op->has(kCheapRecompute)) && !n.op->has(kRandom)) return true;
  if (n.op->has(kRandom) && n.rng >= 0 && n.inputs.size() == 1 && n.inputs[0] >= 0) {
    const int64_t in = g.values[size_t(n.inputs[0])].numel();
    for (int v : n.outputs)
      if (g.values[size_t(v)].numel() != in) return false;
    return true;
  }
  return false;
}

}  // namespace

namespace {

// Whether value v (read at node `at`) holds the same data at `at` as when it was made, and is
// still alive there without help: a root, or an intermediate someone reads at or after `at`.
bool available_at(const Graph& g, const Uses& u, int v, int at, int freeing) {
  const Value& val = g.values[size_t(v)];
  if (val.buffer == freeing) return false;  // the buffer being freed is what we recompute
  const Buffer& b = g.buffers[size_t(val.buffer)];
  const int made = val.producer;
  for (int w : u.writers[size_t(val.buffer)])
    if (w > made && w < at) return false;  // rewritten in between
  if (b.kind != BufKind::Intermediate)
    return b.kind == BufKind::Constant || b.kind == BufKind::External || b.kind == BufKind::Input ||
           b.kind == BufKind::HostScalar;
  return u.last_of_buffer[size_t(val.buffer)] >= at;
}

// The nodes (in order) that recompute v from values available at `at`; false if none do.
bool chain_for(const Graph& g, const Uses& u, int v, int at, int freeing, int depth,
               std::vector<int>& chain) {
  const Value& val = g.values[size_t(v)];
  if (val.producer < 0 || depth > 3) return false;
  const Node& n = g.nodes[size_t(val.producer)];
  if (!cheap_to_recompute(g, n)) return false;
  for (int in : n.inputs) {
    if (in < 0 || available_at(g, u, in, at, freeing)) continue;
    if (!chain_for(g, u, in, at, freeing, depth + 1, chain)) return false;
  }
  if (std::find(chain.begin(), chain.end(), val.producer) == chain.end())
    chain.push_back(val.producer);
  return true;
}

}  // namespace

// NOTE [Rematerialization]: a large intermediate made by a cheap op and read again only much
// later (an activation saved for backward) need not stay in memory in between: its late reads
// get a copy of its producing ops, run just before them from inputs that are alive there
// anyway. Recomputed values are bitwise the originals (same kernels, same inputs, the same
// generator draw for dropout).
Graph remat(const Graph& g0) {
  Graph g = g0;
  constexpr int kGap = 24;                  // nodes between two reads before it pays
  constexpr size_t kMinBytes = 256 * 1024;  // small tensors are not worth an extra pass
  static const bool debug = std::getenv("OF_TRACE_DEBUG_REMAT") != nullptr;
  for (int round = 0; round < 64; ++round) {
    const Uses u = uses_of(g);
    // the largest candidate first: a buffer written once by a cheap op, read through its value
    // and views of it, with a long gap between two reads
    std::vector<std::vector<int>> on_buffer(g.buffers.size());
    for (size_t v = 0; v < g.values.size(); ++v)
      on_buffer[size_t(g.values[v].buffer)].push_back(int(v));
    int best = -1, at = -1;
    size_t best_bytes = 0;
    std::vector<int> late;
    for (size_t b = 0; b < g.buffers.size(); ++b) {
      const Buffer& buf = g.buffers[b];
      if (buf.kind != BufKind::Intermediate || buf.escapes || buf.nbytes < kMinBytes ||
          buf.nbytes <= best_bytes || u.writers[b].size() != 1)
        continue;
      bool ok = true;
      std::vector<std::pair<int, int>> reads;  // (node, value)
      for (int v : on_buffer[b]) {
        const Value& val = g.values[size_t(v)];
        if (is_graph_output(g, v) || (val.producer < 0 && !u.of_value[size_t(v)].empty()))
          ok = false;
        for (int r : u.of_value[size_t(v)])
          if (!g.nodes[size_t(r)].op->has(kView)) reads.push_back({r, v});
      }
      if (!ok || reads.size() < 2) continue;
      std::sort(reads.begin(), reads.end());
      for (size_t k = 1; k < reads.size(); ++k) {
        if (reads[k].first - reads[k - 1].first <= kGap) continue;
        bool buildable = true;
        for (size_t j = k; j < reads.size() && buildable; ++j) {
          std::vector<int> chain;
          buildable = chain_for(g, u, reads[j].second, reads[k].first, int(b), 0, chain);
        }
        if (!buildable && debug)
          std::fprintf(stderr,
                       "[jit.trace] remat: buffer %zu (%zu bytes, made by %s) cannot be rebuilt at "
                       "node %d\n",
                       b, buf.nbytes, g.nodes[size_t(u.writers[b][0])].op->name.c_str(),
                       reads[k].first);
        if (buildable) {
          best = int(b);
          best_bytes = buf.nbytes;
          at = reads[k].first;
          late.clear();
          for (size_t j = k; j < reads.size(); ++j) late.push_back(reads[j].first);
        }
        break;
      }
    }
    if (best < 0) break;
    std::sort(late.begin(), late.end());
    late.erase(std::unique(late.begin(), late.end()), late.end());
    std::vector<int> chain;
    for (int r : late)
      for (int in : g.nodes[size_t(r)].inputs)
        if (in >= 0 && g.values[size_t(in)].buffer == best) chain_for(g, u, in, at, best, 0, chain);
    std::sort(chain.begin(), chain.end());  // node order is a valid order for the clones
    if (debug) {
      std::string ops;
      for (int c : chain) ops += g.nodes[size_t(c)].op->name + " ";
      std::fprintf(stderr,
                   "[jit.trace] remat: buffer %d (%zu bytes) before node %d (%zu late reads): %s\n",
                   best, best_bytes, at, late.size(), ops.c_str());
    }
    // clone the chain right before `at`; late readers read the clones
    std::vector<int> remap(g.values.size(), -1);
    std::vector<Node> clones;
    for (int ni : chain) {
      Node c = g.nodes[size_t(ni)];
      for (int& in : c.inputs)
        if (in >= 0 && remap[size_t(in)] >= 0) in = remap[size_t(in)];
      for (int& out : c.outputs) {
        Value nv = g.values[size_t(out)];
        if (c.op->has(kView)) {
          nv.buffer = g.values[size_t(c.inputs[0])].buffer;  // a view of the recomputed value
        } else {
          Buffer nb = g.buffers[size_t(nv.buffer)];
          nb.arena_offset = -1;
          g.buffers.push_back(nb);
          nv.buffer = int(g.buffers.size()) - 1;
        }
        nv.producer = -1;  // set below, once the node's index is known
        const int id = g.add_value(std::move(nv));
        remap.push_back(-1);
        remap[size_t(out)] = id;
        out = id;
      }
      clones.push_back(std::move(c));
    }
    for (int r : late) {
      Node& n = g.nodes[size_t(r)];
      for (int& in : n.inputs)
        if (in >= 0 && remap[size_t(in)] >= 0) in = remap[size_t(in)];
    }
    std::vector<Node> nodes;
    nodes.reserve(g.nodes.size() + clones.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (int(i) == at)
        for (Node& c : clones) nodes.push_back(std::move(c));
      nodes.push_back(std::move(g.nodes[i]));
    }
    g.nodes = std::move(nodes);
    for (Value& v : g.values) v.producer = -1;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (size_t k = 0; k < g.nodes[i].outputs.size(); ++k) {
        Value& v = g.values[size_t(g.nodes[i].outputs[k])];
        if (g.nodes[i].writes_existing && k == 0) continue;
        if (v.producer < 0) v.producer = int(i);
      }
  }
  return g;
}

}  // namespace oneflow::trace

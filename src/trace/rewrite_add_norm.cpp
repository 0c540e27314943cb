// rewrite_add_norm.cpp: the add-and-norm and embeddings-and-norm rewrites
// (TraceOptions::add_norm).
#include <algorithm>
#include <cmath>

#include "trace/executor.h"
#include "trace/rewrite_match.h"

namespace oneflow::trace {
using namespace rewrite;

// ---------------------------------------------------------------- add and norm
// NOTE [Add and norm]: a residual add read by a LayerNorm (or RMSNorm) over its rows
//   s = add(x, residual); y, mean, rstd = layer_norm(s, weight, bias)
// becomes add_layer_norm(x, residual, weight, bias) -> y, s, mean, rstd: each row is summed
// and normalized while it sits in cache, and s is written only when something else reads it
// (write_sum; else the op's sum output is empty). The kernel sums and normalizes with the
// add's and the norm's own arithmetic, so the result is bitwise the unfused one. Conditions:
// x and residual of s's shape (no broadcast), contiguous, float32/float64 on the CPU; nothing
// reads s between the add and the norm, and nothing writes x or residual in between; nothing
// reads the norm's mean and rstd (inference: a training graph keeps them for backward, and
// there remat recomputes the plain norm instead of keeping its output).
namespace {
// NOTE [Embeddings and norm] (the kernel: src/cpu/norm.cpp): an add_layer_norm whose summands are
// embedding lookups, or one lookup and the add of two, as BERT's embeddings are summed:
//   e_k = embedding(table_k, ids_k); s = add(e0, e1); y = add_layer_norm(s, e2) (or (e0, e1))
// becomes embedding_layer_norm(table0, ids0, table1, ids1[, table2, ids2], weight, bias), each
// row gathered, summed in the recorded order ((e0 + e1) + e2) and normalized in one pass:
// bitwise the unfused replay. Conditions: every lookup and the inner add read once, by the
// chain; the sum not written (write_sum false); the norm over the last dim; float32/float64 on
// the CPU; nothing writes a table or an index between its lookup and the norm.
Graph fuse_embedding_norm(const Graph& g0) {
  Graph g = g0;
  const Uses u = uses_of(g);
  std::vector<bool> dead(g.nodes.size(), false);
  const OpDef *aln = &OF_OP("add_layer_norm"), *emb = &OF_OP("embedding"), *add = &OF_OP("add");
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    if (n.op != aln || n.writes_existing || AddNormAttrs::get<"write_sum">(n.attrs)) continue;
    // a lookup read only by `reader`: its node (-1: none)
    auto lookup = [&](int val, int reader) {
      const int p = g.values[size_t(val)].producer;
      return p >= 0 && g.nodes[size_t(p)].op == emb && !g.nodes[size_t(p)].writes_existing &&
                     single_use(g, u, val) == reader
                 ? p
                 : -1;
    };
    std::vector<int> looks;
    int inner = -1;
    for (int side = 0; side < 2 && looks.empty(); ++side) {
      const int a = n.inputs[size_t(side)], b = n.inputs[size_t(1 - side)];
      const int lb = lookup(b, int(ni));
      if (lb < 0) continue;
      if (const int la = lookup(a, int(ni)); la >= 0) {
        looks = {la, lb};
        break;
      }
      const int p = g.values[size_t(a)].producer;
      if (p < 0 || g.nodes[size_t(p)].op != add || g.nodes[size_t(p)].writes_existing ||
          single_use(g, u, a) != int(ni))
        continue;
      const int l0 = lookup(g.nodes[size_t(p)].inputs[0], p),
                l1 = lookup(g.nodes[size_t(p)].inputs[1], p);
      if (l0 >= 0 && l1 >= 0) {
        looks = {l0, l1, lb};
        inner = p;
      }
    }
    if (looks.empty()) continue;
    auto refuse = [&](const std::string& why) {
      g.rewrites.push_back(
          fmt::format("add_norm: embeddings into add_layer_norm at node {} refused: {}", ni, why));
    };
    const Value& yv = g.values[size_t(n.outputs[0])];
    std::string why;
    if (!yv.device.is_cpu() || (yv.dtype != kFloat32 && yv.dtype != kFloat64))
      why = fmt::format("{} on {} (the fused kernel is float32/float64 on the CPU)",
                        dtype_name(yv.dtype), yv.device.str());
    else if (AddNormAttrs::get<"axis">(n.attrs) != int64_t(yv.sizes.size()) - 1)
      why = "the norm is not over the last dim";
    for (int l : looks) {
      const Node& e = g.nodes[size_t(l)];
      if (!why.empty()) break;
      if (g.values[size_t(e.inputs[0])].dtype != yv.dtype)
        why = "a table's dtype is not the norm's";
      for (int val : {e.inputs[0], e.inputs[1]})
        if (why.empty() && written_between(u, g.values[size_t(val)].buffer, l, int(ni)))
          why = "a table or its indices are written between the lookup and the norm";
    }
    if (!why.empty()) {
      refuse(why);
      continue;
    }
    Node f;
    f.op = &OF_OP("embedding_layer_norm");
    f.attrs = NormAttrs::make(AddNormAttrs::get<"axis">(n.attrs), AddNormAttrs::get<"eps">(n.attrs),
                              AddNormAttrs::get<"has_weight">(n.attrs),
                              AddNormAttrs::get<"has_bias">(n.attrs));
    for (int l : looks) {
      f.inputs.push_back(g.nodes[size_t(l)].inputs[0]);
      f.inputs.push_back(g.nodes[size_t(l)].inputs[1]);
      dead[size_t(l)] = true;
    }
    for (size_t k = 2 * looks.size(); k < 6; ++k) f.inputs.push_back(-1);
    f.inputs.push_back(n.inputs[2]);
    f.inputs.push_back(n.inputs.size() > 3 ? n.inputs[3] : -1);
    f.outputs = {n.outputs[0], n.outputs[2], n.outputs[3]};
    g.values[size_t(n.outputs[1])].producer = -1;  // the empty sum
    if (inner >= 0) dead[size_t(inner)] = true;
    g.rewrites.push_back(fmt::format(
        "add_norm: {} embedding lookups{} + add_layer_norm at node {} -> embedding_layer_norm ({})",
        looks.size(), inner >= 0 ? " + add" : "", ni, shape_str(yv.sizes)));
    g.nodes[ni] = std::move(f);
  }
  return compact(std::move(g), dead);
}
}  // namespace

Graph fuse_add_norm(const Graph& g0) {
  Graph g = g0;
  const Uses u = uses_of(g);
  std::vector<bool> dead(g.nodes.size(), false);
  const OpDef* add = &OF_OP("add");
  const OpDef* layer = &OF_OP("layer_norm");
  const OpDef* rms = &OF_OP("rms_norm");
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    if ((n.op != layer && n.op != rms) || n.writes_existing || n.inputs[0] < 0) continue;
    const int s = n.inputs[0];
    const Value sv = g.values[size_t(s)];  // a copy: values grow below
    const int ai = sv.producer;
    if (ai < 0 || g.nodes[size_t(ai)].op != add || dead[size_t(ai)]) continue;
    const Node& a = g.nodes[size_t(ai)];  // (nodes do not grow: replaced in place)
    const bool is_layer = n.op == layer;
    auto refuse = [&](const std::string& why) {
      g.rewrites.push_back(fmt::format("add_norm: {} at node {} refused: {}", n.op->name, ni, why));
    };
    bool stats_read = false;
    for (size_t k = 1; k < n.outputs.size(); ++k)
      stats_read = stats_read || !u.of_value[size_t(n.outputs[k])].empty() ||
                   is_graph_output(g, n.outputs[k]);
    std::string why;
    if (stats_read)
      why =
          "the norm's statistics are read (a training graph keeps them for backward, and "
          "remat recomputes the plain norm)";
    else if (a.writes_existing) why = "the add writes in place";
    else if (!sv.device.is_cpu() || (sv.dtype != kFloat32 && sv.dtype != kFloat64))
      why = fmt::format("{} on {} (the fused kernel is float32/float64 on the CPU)",
                        dtype_name(sv.dtype), sv.device.str());
    for (int k = 0; k < 2 && why.empty(); ++k) {
      const Value& iv = g.values[size_t(a.inputs[size_t(k)])];
      if (iv.sizes != sv.sizes || !iv.contiguous() || iv.dtype != sv.dtype)
        why = fmt::format("the add's operands {} and {} are not both contiguous {} {}",
                          shape_str(g.values[size_t(a.inputs[0])].sizes),
                          shape_str(g.values[size_t(a.inputs[1])].sizes), dtype_name(sv.dtype),
                          shape_str(sv.sizes));
      else if (written_between(u, iv.buffer, ai, int(ni)))
        why = "an operand of the add is written before the norm";
    }
    bool write_sum = is_graph_output(g, s);
    for (int r : u.of_value[size_t(s)]) {
      if (r == int(ni)) continue;
      write_sum = true;
      if (r < int(ni) && why.empty()) why = fmt::format("node {} reads the sum before the norm", r);
    }
    const Buffer& sb = g.buffers[size_t(sv.buffer)];
    if (why.empty() &&
        (sb.kind != BufKind::Intermediate || u.writers[size_t(sv.buffer)].size() != 1))
      why = "the sum's buffer is written by other nodes";
    if (!why.empty()) {
      refuse(why);
      continue;
    }
    Node f;
    f.op = is_layer ? &OF_OP("add_layer_norm") : &OF_OP("add_rms_norm");
    Attrs at = n.attrs;
    at.values.push_back(write_sum);
    f.attrs = std::move(at);
    f.inputs = {a.inputs[0], a.inputs[1]};
    for (size_t k = 1; k < n.inputs.size(); ++k) f.inputs.push_back(n.inputs[k]);
    int sum_out = s;
    if (!write_sum) {  // an empty sum output of its own
      Buffer nb;
      nb.kind = BufKind::Intermediate;
      nb.device = sv.device;
      g.buffers.push_back(std::move(nb));
      Value e;
      e.buffer = int(g.buffers.size()) - 1;
      e.sizes = DimVector{0};
      e.strides = DimVector{1};
      e.dtype = sv.dtype;
      e.device = sv.device;
      e.producer = int(ni);
      sum_out = g.add_value(std::move(e));
    } else {
      g.values[size_t(s)].producer = int(ni);
    }
    f.outputs = {n.outputs[0], sum_out};
    for (size_t k = 1; k < n.outputs.size(); ++k) f.outputs.push_back(n.outputs[k]);
    dead[size_t(ai)] = true;
    g.rewrites.push_back(fmt::format("add_norm: add at node {} + {} at node {} -> {} ({}{})", ai,
                                     n.op->name, ni, f.op->name, shape_str(sv.sizes),
                                     write_sum ? ", the sum also written" : ""));
    g.nodes[ni] = std::move(f);
  }
  return fuse_embedding_norm(compact(std::move(g), dead));
}

}  // namespace oneflow::trace

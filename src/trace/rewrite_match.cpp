// rewrite_match.cpp: the matching helpers of the inference rewrites (rewrite_match.h).
#include "trace/rewrite_match.h"

#include <algorithm>
#include <utility>

namespace oneflow::trace::rewrite {

// A view node that only regroups the leading dims of a contiguous tensor (the last two dims,
// the offset and the element order unchanged): how matmul folds batch dims for bmm.
bool is_lead_reshape(const Graph& g, const Node& n) {
  if (!is_view(n) || n.inputs.size() != 1 || n.outputs.size() != 1 || n.inputs[0] < 0) return false;
  const Value& in = g.values[size_t(n.inputs[0])];
  const Value& out = g.values[size_t(n.outputs[0])];
  const size_t a = in.sizes.size(), b = out.sizes.size();
  return a >= 2 && b >= 2 && in.contiguous() && out.contiguous() && in.offset == out.offset &&
         in.numel() == out.numel() && in.sizes[a - 1] == out.sizes[b - 1] &&
         in.sizes[a - 2] == out.sizes[b - 2];
}

// What a bmm operand holds, back through lead reshapes and same-dtype copies (a copy's input
// may have any strides): vals[0] is the operand, vals[i + 1] the value nodes[i] made vals[i]
// from. The fused node reads one of them in place of the copies.
OperandChain operand_chain(const Graph& g, int v) {
  OperandChain c{{v}, {}};
  for (;;) {
    const Value& val = g.values[size_t(v)];
    if (val.producer < 0) return c;
    const Node& n = g.nodes[size_t(val.producer)];
    if (n.writes_existing || n.outputs.size() != 1) return c;
    const bool copy = n.op == &OF_OP("copy") && n.inputs.size() == 1 && n.inputs[0] >= 0 &&
                      CopyAttrs::get<"dtype">(n.attrs) == g.values[size_t(n.inputs[0])].dtype &&
                      g.values[size_t(n.inputs[0])].sizes == val.sizes;
    if (!copy && !is_lead_reshape(g, n)) return c;
    c.nodes.push_back(val.producer);
    v = n.inputs[0];
    c.vals.push_back(v);
  }
}

int64_t prod_of(const DimVector& d) {
  int64_t p = 1;
  for (int64_t x : d) p *= x;
  return p;
}

// The single node reading v (-1: none, several, or v is returned).
int single_use(const Graph& g, const Uses& u, int v) {
  if (is_graph_output(g, v) || u.of_value[size_t(v)].size() != 1) return -1;
  const Buffer& b = g.buffers[size_t(g.values[size_t(v)].buffer)];
  if (b.kind != BufKind::Intermediate || b.escapes) return -1;
  return u.of_value[size_t(v)][0];
}

// Whether any node in (from, to) writes buffer b.
bool written_between(const Uses& u, int b, int from, int to) {
  for (int w : u.writers[size_t(b)])
    if (w > from && w < to) return true;
  return false;
}

// Whether `val` is x with its last two dims swapped: a view of x's storage with that geometry,
// or a same-dtype copy of one.
bool is_transposed_of(const Graph& g, int val, int x) {
  if (val < 0) return false;
  const Value* w = &g.values[size_t(val)];
  if (w->producer >= 0) {
    const Node& c = g.nodes[size_t(w->producer)];
    if (c.op == &OF_OP("copy") && !c.writes_existing && c.inputs.size() == 1 && c.inputs[0] >= 0 &&
        g.values[size_t(c.inputs[0])].dtype == w->dtype)
      w = &g.values[size_t(c.inputs[0])];
  }
  const Value& xv = g.values[size_t(x)];
  const size_t n = xv.sizes.size();
  if (n < 2 || w->sizes.size() != n || w->buffer != xv.buffer || w->offset != xv.offset ||
      w->producer < 0 || !is_view(g.nodes[size_t(w->producer)]))
    return false;
  DimVector ts = xv.sizes, tt = xv.strides;
  std::swap(ts[n - 1], ts[n - 2]);
  std::swap(tt[n - 1], tt[n - 2]);
  return w->sizes == ts && w->strides == tt;
}
// The nodes that made a transposed operand (is_transposed_of): its copy and its view.
void transposed_nodes(const Graph& g, int val, std::vector<int>& nodes) {
  for (int k = 0; k < 2 && val >= 0 && g.values[size_t(val)].producer >= 0; ++k) {
    const int p = g.values[size_t(val)].producer;
    nodes.push_back(p);
    if (is_view(g.nodes[size_t(p)])) break;
    val = g.nodes[size_t(p)].inputs[0];
  }
}

}  // namespace oneflow::trace::rewrite

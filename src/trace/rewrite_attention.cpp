// rewrite_attention.cpp: the attention rewrite (TraceOptions::attention), inference and training
// forms. The inference rewrites replace a chain of recorded ops by one op whose kernel does the
// chain's work in one pass, on CPU graphs whose intermediates nothing else reads; each is a pure
// Graph -> Graph pass that leaves the nodes it replaced dead (dce removes them: NOTE [Pass
// table]) and reports in Graph::rewrites what it did and, for a candidate it refused, why.
#include <algorithm>
#include <cmath>

#include "trace/executor.h"
#include "trace/rewrite_match.h"

namespace oneflow::trace {
using namespace rewrite;

namespace {

// NOTE [Fused attention, training]: the backward that autograd records for the chain
//   P = softmax(S), S = scale * (Q3 KT3) (+ mask), O = P3 V3 (P3, Q3, KT3, V3 the bmm operands)
// is, from the output's gradient dO:
//   dP = bmm(dO, V3^T) -> reshape to P's shape,
//   dS = P * (dP - sum(dP * P, last dim, keepdim)) -> * scale (or / the divisor) -> reshape,
//   and, for the operands that need them, dV = bmm(P3^T, dO), dQ = bmm(dS, KT3^T),
//   dKT = bmm(Q3^T, dS)
// (each transposed operand a view, usually copied). match_backward finds it from the softmax's
// gradient, or says why what it found is not it; the pass then makes fused_attention_forward
// (also writing the rows' log-sum-exp, a new value) and one fused_attention_backward writing
// dQ, dKT and dV where the bmms wrote them (a gradient nothing needs: a new value).
struct TrainBackward {
  std::string why;     // empty: matched
  bool found = false;  // P has a gradient (softmax's VJP reads it): a training graph
  int pos = -1;        // the first of the backward's bmms: where the fused backward goes
  int dout = -1, dq = -1, dkt = -1, dv = -1;  // (-1: not needed)
  std::vector<int> nodes;  // what the fused backward replaces (the only other readers of P, P3)
};
TrainBackward match_backward(const Graph& g, const Uses& u, int P, int P3, int q3, int kt3, int v3,
                             int scale_node, double scale_c, int scores3, int drop) {
  TrainBackward tb;
  const OpDef *bmm = &OF_OP("bmm"), *mul = &OF_OP("mul"), *sub = &OF_OP("sub"),
              *sum = &OF_OP("sum");
  auto op_is = [&](int node, const OpDef* op) {
    return node >= 0 && g.nodes[size_t(node)].op == op && !g.nodes[size_t(node)].writes_existing;
  };
  auto fail = [&](const std::string& w) {
    tb.why = w;
    return tb;
  };
  auto out_of = [&](int node) { return g.nodes[size_t(node)].outputs[0]; };
  // softmax's VJP: m1 = dP * P, s1 = sum(m1, last, keepdim), d = dP - s1, m2 = P * d
  // (it reads P as autograd saved it: P, or P3 when that is P's geometry, as 3-D matmul views it)
  const Value& pv = g.values[size_t(P)];
  const Value& p3v = g.values[size_t(P3)];
  const int Ps =
      p3v.sizes == pv.sizes && p3v.strides == pv.strides && p3v.offset == pv.offset ? P3 : P;
  auto is_p = [&](int val) { return val == P || val == Ps; };
  int m1 = -1, s1 = -1, sb = -1, m2 = -1, dP = -1;
  std::vector<int> preaders = u.of_value[size_t(P)];
  if (Ps != P)
    preaders.insert(preaders.end(), u.of_value[size_t(P3)].begin(), u.of_value[size_t(P3)].end());
  for (int r : preaders) {
    if (!op_is(r, mul)) continue;
    const Node& n = g.nodes[size_t(r)];
    if (!is_p(n.inputs[0]) && !is_p(n.inputs[1])) continue;
    const int y = is_p(n.inputs[0]) ? n.inputs[1] : n.inputs[0];
    const int s = single_use(g, u, out_of(r));
    if (y < 0 || !op_is(s, sum)) continue;
    for (int r2 : u.of_value[size_t(y)])
      if (op_is(r2, sub) && g.nodes[size_t(r2)].inputs[0] == y &&
          g.nodes[size_t(r2)].inputs[1] == out_of(s))
        m1 = r, s1 = s, sb = r2, dP = y;
  }
  if (m1 < 0) {
    tb.why = "no backward";
    return tb;
  }
  tb.found = true;
  {
    const Attrs& a = g.nodes[size_t(s1)].attrs;
    const DimVector& dims = reduce_detail::ReduceAttrs::get<"dims">(a);
    const int64_t last = int64_t(pv.sizes.size()) - 1;
    m2 = single_use(g, u, out_of(sb));
    if (dims.size() != 1 || (dims[0] != last && dims[0] != -1) ||
        !reduce_detail::ReduceAttrs::get<"keepdim">(a) ||
        g.values[size_t(out_of(s1))].dtype != pv.dtype || single_use(g, u, out_of(s1)) != sb ||
        u.of_value[size_t(dP)].size() != 2 || !op_is(m2, mul) ||
        !((is_p(g.nodes[size_t(m2)].inputs[0]) && g.nodes[size_t(m2)].inputs[1] == out_of(sb)) ||
          (is_p(g.nodes[size_t(m2)].inputs[1]) && g.nodes[size_t(m2)].inputs[0] == out_of(sb))))
      return fail("the softmax's gradient is not P * (dP - sum(dP * P, last dim)) read once");
  }
  tb.nodes = {m1, s1, sb, m2};
  // dropout's VJP: dP = where(keep, dP' * (1 / (1 - p)), 0)
  int dP3 = dP;
  if (drop >= 0) {
    const Node& dn = g.nodes[size_t(drop)];
    const double p = nn_detail::DropoutAttrs::get<"p">(dn.attrs), want = 1.0 / (1.0 - p);
    const int w = g.values[size_t(dP)].producer;
    double zero = 1, c = 0;
    const int x = op_is(w, &OF_OP("where")) && g.nodes[size_t(w)].inputs[0] == dn.outputs[1] &&
                          constant_scalar(g, g.nodes[size_t(w)].inputs[2], zero) && zero == 0
                      ? g.nodes[size_t(w)].inputs[1]
                      : -1;
    const int m = x >= 0 ? g.values[size_t(x)].producer : -1;
    if (!op_is(m, mul) || !constant_scalar(g, g.nodes[size_t(m)].inputs[1], c) ||
        std::abs(c - want) > 1e-6 * want)
      return fail("the dropout's gradient is not where(kept, dP * (1 / (1 - p)), 0)");
    tb.nodes.insert(tb.nodes.end(), {w, m});
    dP3 = g.nodes[size_t(m)].inputs[0];
  }
  // dP: bmm(dO, V3^T), through a lead reshape
  if (const int p = g.values[size_t(dP3)].producer;
      p >= 0 && is_lead_reshape(g, g.nodes[size_t(p)])) {
    tb.nodes.push_back(p);
    dP3 = g.nodes[size_t(p)].inputs[0];
  }
  const int nP = g.values[size_t(dP3)].producer;
  if (!op_is(nP, bmm) || !is_transposed_of(g, g.nodes[size_t(nP)].inputs[1], v3))
    return fail("the probabilities' gradient is not made by one bmm(dO, V^T)");
  tb.nodes.push_back(nP);
  transposed_nodes(g, g.nodes[size_t(nP)].inputs[1], tb.nodes);
  tb.dout = g.nodes[size_t(nP)].inputs[0];
  int x = out_of(m2);
  if (u.of_value[size_t(x)].size() != 1 || is_graph_output(g, x))
    return fail("the scores' gradient is read elsewhere (a mask that needs a gradient?)");
  if (scale_node >= 0) {  // the scale's VJP: the same constant, the same op
    const int r = single_use(g, u, x);
    double c = 0;
    if (r < 0 || g.nodes[size_t(r)].op != g.nodes[size_t(scale_node)].op ||
        g.nodes[size_t(r)].writes_existing || g.nodes[size_t(r)].inputs[0] != x ||
        !constant_scalar(g, g.nodes[size_t(r)].inputs[1], c) || c != scale_c)
      return fail("the scores' gradient is not scaled as the scores are");
    tb.nodes.push_back(r);
    x = out_of(r);
  }
  int dS = x;  // as the scores' bmm made them (through a lead reshape, maybe to the same shape)
  if (const int r = single_use(g, u, x);
      r >= 0 && is_lead_reshape(g, g.nodes[size_t(r)]) &&
      g.values[size_t(out_of(r))].sizes == g.values[size_t(scores3)].sizes) {
    tb.nodes.push_back(r);
    dS = out_of(r);
  }
  if (g.values[size_t(dS)].sizes != g.values[size_t(scores3)].sizes)
    return fail("the scores' gradient is read elsewhere (a mask that needs a gradient?)");
  // the gradients the operands need: dQ = bmm(dS, KT3^T), dKT = bmm(Q3^T, dS), dV = bmm(P3^T, dO)
  std::vector<int> bmms = {nP};
  for (int r : u.of_value[size_t(dS)]) {
    const Node& n = g.nodes[size_t(r)];
    if (op_is(r, bmm) && n.inputs[0] == dS && tb.dq < 0 && is_transposed_of(g, n.inputs[1], kt3)) {
      tb.dq = out_of(r);
      transposed_nodes(g, n.inputs[1], tb.nodes);
    } else if (op_is(r, bmm) && n.inputs[1] == dS && tb.dkt < 0 &&
               is_transposed_of(g, n.inputs[0], q3)) {
      tb.dkt = out_of(r);
      transposed_nodes(g, n.inputs[0], tb.nodes);
    } else {
      return fail(
          "the scores' gradient is read by something other than bmm(dS, K) and "
          "bmm(Q^T, dS)");
    }
    bmms.push_back(r);
  }
  for (int r : u.of_value[size_t(tb.dout)]) {
    const Node& n = g.nodes[size_t(r)];
    if (op_is(r, bmm) && n.inputs[1] == tb.dout && is_transposed_of(g, n.inputs[0], P3)) {
      tb.dv = out_of(r);
      transposed_nodes(g, n.inputs[0], tb.nodes);
      bmms.push_back(r);
      break;
    }
  }
  tb.nodes.insert(tb.nodes.end(), bmms.begin(), bmms.end());
  tb.pos = *std::min_element(bmms.begin(), bmms.end());
  // every value the replaced nodes make is read by them alone (the gradients excepted)
  std::vector<bool> in_set(g.nodes.size(), false);
  for (int k : tb.nodes) in_set[size_t(k)] = true;
  for (int k : tb.nodes)
    for (int o : g.nodes[size_t(k)].outputs) {
      if (o == tb.dq || o == tb.dkt || o == tb.dv) continue;
      if (is_graph_output(g, o)) return fail("a value of the backward is returned");
      for (int r : u.of_value[size_t(o)])
        if (!in_set[size_t(r)])
          return fail(fmt::format("the value made by node {} ({}) is read elsewhere", k,
                                  g.nodes[size_t(k)].op->name));
    }
  const int dop = g.values[size_t(tb.dout)].producer;
  if (dop >= tb.pos) return fail("the output's gradient is made after the backward begins");
  return tb;
}

}  // namespace

// ---------------------------------------------------------------- attention
// NOTE [Fused attention] (the kernel: src/cpu/attention.cpp). The chain, as matmul records it
// for q [..., L, E], k^T [..., E, S], v [..., S, Ev] (head-split views of the projections):
//   copies of q and k^T, lead reshapes -> bmm -> lead reshape -> mul/div by a constant
//   (optional) -> add of a mask broadcasting to the scores (optional) -> softmax over the last
//   dim -> lead reshape -> bmm with v's copy -> lead reshape
// becomes fused_attention(q, k^T, v, mask) at the last bmm, writing its [B, L, Ev] output (B
// the product of the batch dims) and reading the operands where the copies read them. Conditions
// (else a refusal in Graph::rewrites): every intermediate of the chain (scores, probabilities, the
// bmm output) is read once, by the chain, and not returned (a training graph keeps the
// probabilities for backward: no match); float32/float64 on the CPU; q, k^T and v share their batch
// dims, and the scores have them too; nothing writes the operands between the copies and the fused
// node. The fused kernel applies the scale as the GEMM's alpha and sums the softmax in double:
// results differ from the unfused replay by rounding (tests/test_trace.cpp states the tolerance);
// attention(false) keeps the chain.
// NOTE [Merged heads]: when the output's only reader is the merge of the heads — a view chain to
// [b, L, h, Ev] (batch b * h + j at [b, :, j, :]) and a copy of it into a contiguous value, as
// `o.transpose(1, 2).reshape({b, L, h * Ev})` records — the fused node takes `heads = h` and
// writes the copy's value itself, each row h * Ev apart (the copy goes; the bits are the same).
Graph fuse_attention(const Graph& g0) {
  Graph g = g0;
  const Uses u = uses_of(g);
  std::vector<bool> dead(g.nodes.size(), false);
  const OpDef* softmax = &OF_OP("softmax");
  const OpDef* bmm = &OF_OP("bmm");
  const OpDef* mul = &OF_OP("mul");
  const OpDef* div = &OF_OP("div");
  const OpDef* add = &OF_OP("add");
  for (size_t si = 0; si < g.nodes.size(); ++si) {
    const Node& sm = g.nodes[si];
    if (sm.op != softmax || sm.writes_existing || dead[si]) continue;
    const int U = sm.inputs[0], P = sm.outputs[0];
    const Value& uv = g.values[size_t(U)];
    // the probabilities, through a lead reshape, into a bmm as its left operand
    // (found among all readers: one read elsewhere is a refusal below, not a non-candidate)
    std::vector<int> chain = {int(si)};
    auto bmm_reading = [&](int val) {
      for (int r : u.of_value[size_t(val)])
        if (g.nodes[size_t(r)].op == bmm && g.nodes[size_t(r)].inputs[0] == val) return r;
      return -1;
    };
    // (a dropout in between: its kept probabilities; NOTE [Fused attention, training])
    auto bmm_after = [&](int val) {
      int n = bmm_reading(val);
      for (size_t k = 0; n < 0 && k < u.of_value[size_t(val)].size(); ++k) {
        const int r = u.of_value[size_t(val)][k];
        if (!is_lead_reshape(g, g.nodes[size_t(r)])) continue;
        n = bmm_reading(g.nodes[size_t(r)].outputs[0]);
        if (n >= 0) chain.push_back(r);
      }
      return n;
    };
    int n2 = bmm_after(P), drop = -1;
    for (size_t k = 0; n2 < 0 && k < u.of_value[size_t(P)].size(); ++k) {
      const int r = u.of_value[size_t(P)][k];
      const Node& dn = g.nodes[size_t(r)];
      if (dn.op != &OF_OP("dropout") || dn.writes_existing || dn.inputs[0] != P) continue;
      n2 = bmm_after(dn.outputs[0]);
      if (n2 >= 0) {
        drop = r;
        chain.push_back(r);
      }
    }
    if (n2 < 0) continue;
    auto refuse = [&](const std::string& why) {
      g.rewrites.push_back(fmt::format("attention: softmax at node {} refused: {}", si, why));
    };
    const int64_t rank = int64_t(uv.sizes.size());
    int64_t dim = SoftmaxAttrs::get<"dim">(sm.attrs);
    if (dim < 0) dim += rank;
    if (dim != rank - 1 || rank < 3) {
      refuse(
          fmt::format("softmax over dim {} of {} (the last dim of a batch of score "
                      "matrices is fused)",
                      SoftmaxAttrs::get<"dim">(sm.attrs), shape_str(uv.sizes)));
      continue;
    }
    if (!uv.device.is_cpu() || (uv.dtype != kFloat32 && uv.dtype != kFloat64)) {
      refuse(fmt::format("{} on {} (the fused kernel is float32/float64 on the CPU)",
                         dtype_name(uv.dtype), uv.device.str()));
      continue;
    }
    chain.push_back(n2);
    // the output: the bmm's [B, L, Ev] (B the product of the batch dims), as the fused op's
    const int out = g.nodes[size_t(n2)].outputs[0], out_node = n2;
    // back from the scores: add(mask), mul/div(constant), lead reshape, bmm
    int x = U, mask = -1, scale_node = -1;
    double scale = 1.0, scale_c = 1.0;
    std::string why;
    if (const Value& xv = g.values[size_t(x)];
        xv.producer >= 0 && g.nodes[size_t(xv.producer)].op == add) {
      const Node& a = g.nodes[size_t(xv.producer)];
      for (int side = 0; side < 2 && mask < 0; ++side) {
        const int s = a.inputs[size_t(side)], m = a.inputs[size_t(1 - side)];
        const Value& sv = g.values[size_t(s)];
        const Value& mv = g.values[size_t(m)];
        if (sv.sizes == xv.sizes && sv.producer >= 0 && single_use(g, u, s) == xv.producer &&
            mv.dtype == xv.dtype && mv.device == xv.device && m != s) {
          mask = m;
          chain.push_back(xv.producer);
          x = s;
        }
      }
      if (mask < 0) why = "the add before the softmax has no operand that is a mask";
    }
    if (why.empty()) {
      const Value& xv = g.values[size_t(x)];
      if (xv.producer >= 0 &&
          (g.nodes[size_t(xv.producer)].op == mul || g.nodes[size_t(xv.producer)].op == div)) {
        const Node& m = g.nodes[size_t(xv.producer)];
        const bool is_div = m.op == div;
        double cval = 0;
        int s = -1;
        if (constant_scalar(g, m.inputs[1], cval)) s = m.inputs[0];
        else if (!is_div && constant_scalar(g, m.inputs[0], cval)) s = m.inputs[1];
        if (s >= 0 && g.values[size_t(s)].sizes == xv.sizes && single_use(g, u, s) == xv.producer) {
          scale = is_div ? 1.0 / cval : cval;
          scale_node = xv.producer;
          scale_c = cval;
          chain.push_back(xv.producer);
          x = s;
        }
      }
    }
    int n1 = -1;
    if (why.empty()) {
      const Value& xv = g.values[size_t(x)];
      int p = xv.producer;
      if (p >= 0 && is_lead_reshape(g, g.nodes[size_t(p)]) &&
          single_use(g, u, g.nodes[size_t(p)].inputs[0]) == p) {
        chain.push_back(p);
        p = g.values[size_t(g.nodes[size_t(p)].inputs[0])].producer;
      }
      if (p >= 0 && g.nodes[size_t(p)].op == bmm && !g.nodes[size_t(p)].writes_existing) {
        n1 = p;
        chain.push_back(n1);
      } else {
        why = "the scores are not made by a matmul (times a constant, plus a mask)";
      }
    }
    // a training graph: the chain's backward (NOTE [Fused attention, training])
    const int P3 = g.nodes[size_t(n2)].inputs[0];
    TrainBackward tb;
    if (why.empty()) {
      const Node& b1 = g.nodes[size_t(n1)];
      tb = match_backward(g, u, P, P3, b1.inputs[0], b1.inputs[1], g.nodes[size_t(n2)].inputs[1],
                          scale_node, scale_c, b1.outputs[0], drop);
      if (tb.found && !tb.why.empty()) why = "training graph: " + tb.why;
    }
    const bool training = tb.found && tb.why.empty();
    double drop_p = 0;
    if (why.empty() && drop >= 0) {
      drop_p = nn_detail::DropoutAttrs::get<"p">(g.nodes[size_t(drop)].attrs);
      if (!training)
        why =
            "a dropout between the softmax and the matmul outside a training graph (the "
            "inference kernel has none)";
      else if (g.nodes[size_t(drop)].rng < 0 || !(drop_p > 0 && drop_p < 1))
        why = fmt::format("the dropout (p {}) draws no numbers the trace refreshes", drop_p);
    }
    // every intermediate of the chain read once, by the chain (training: P and P3 also by the
    // backward that goes with it)
    std::vector<bool> in_chain(g.nodes.size(), false);
    for (int k : chain) in_chain[size_t(k)] = true;
    if (training)
      for (int k : tb.nodes) in_chain[size_t(k)] = true;
    for (size_t k = 0; why.empty() && k < chain.size(); ++k) {
      const Node& n = g.nodes[size_t(chain[k])];
      if (n.writes_existing) why = fmt::format("node {} writes in place", chain[k]);
      for (int o : n.outputs) {
        if (!why.empty() || o == out) continue;
        bool ok = single_use(g, u, o) >= 0;
        if (training) {  // read by the chain and the backward that goes too
          ok = !is_graph_output(g, o) &&
               g.buffers[size_t(g.values[size_t(o)].buffer)].kind == BufKind::Intermediate;
          for (int r : u.of_value[size_t(o)]) ok = ok && in_chain[size_t(r)];
        }
        if (!ok)
          why = fmt::format("the value made by node {} ({}) is read elsewhere or returned",
                            chain[k], n.op->name);
      }
    }
    std::vector<int> through;
    int q = -1, kt = -1, v = -1;
    if (why.empty()) {
      // per operand the deepest value of its chain whose batch dims all three share
      const OperandChain cq = operand_chain(g, g.nodes[size_t(n1)].inputs[0]),
                         ck = operand_chain(g, g.nodes[size_t(n1)].inputs[1]),
                         cv = operand_chain(g, g.nodes[size_t(n2)].inputs[1]);
      auto deepest = [&](const OperandChain& c, const DimVector& lead) {
        for (size_t i = c.vals.size(); i-- > 0;)
          if (g.values[size_t(c.vals[i])].sizes.size() >= 3 &&
              lead_of(g.values[size_t(c.vals[i])]) == lead)
            return int(i);
        return -1;
      };
      int iq = 0, ik = deepest(ck, lead_of(g.values[size_t(cq.vals[0])])),
          iv = deepest(cv, lead_of(g.values[size_t(cq.vals[0])]));
      for (size_t i = cq.vals.size(); i-- > 0;) {
        if (g.values[size_t(cq.vals[i])].sizes.size() < 3) continue;
        const DimVector lead = lead_of(g.values[size_t(cq.vals[i])]);
        const int a = deepest(ck, lead), b = deepest(cv, lead);
        if (a >= 0 && b >= 0) {
          iq = int(i), ik = a, iv = b;
          break;
        }
      }
      q = cq.vals[size_t(iq)];
      kt = ck.vals[size_t(std::max(ik, 0))];
      v = cv.vals[size_t(std::max(iv, 0))];
      through.insert(through.end(), cq.nodes.begin(), cq.nodes.begin() + iq);
      through.insert(through.end(), ck.nodes.begin(), ck.nodes.begin() + std::max(ik, 0));
      through.insert(through.end(), cv.nodes.begin(), cv.nodes.begin() + std::max(iv, 0));
      const DimVector lead = lead_of(g.values[size_t(q)]);
      DimVector want = lead;
      want.push_back(g.values[size_t(q)].sizes.back());
      if (g.values[size_t(q)].sizes.size() < 3 || lead_of(g.values[size_t(kt)]) != lead ||
          lead_of(g.values[size_t(v)]) != lead)
        why =
            fmt::format("query {}, key {} and value {} do not share their batch dims",
                        shape_str(g.values[size_t(q)].sizes), shape_str(g.values[size_t(kt)].sizes),
                        shape_str(g.values[size_t(v)].sizes));
      else if (lead_of(uv) != lead && (prod_of(lead_of(uv)) != prod_of(lead) ||
                                       (mask >= 0 && g.values[size_t(mask)].sizes.size() > 2 &&
                                        prod_of(lead_of(g.values[size_t(mask)])) != 1)))
        // (scores batched otherwise, [1, H] against the query's [H], say, are the same
        // batches in the same order; a mask with batch dims of its own must follow them)
        why = fmt::format("the scores {} are not batched as the query {}", shape_str(uv.sizes),
                          shape_str(g.values[size_t(q)].sizes));
      else if (!g.values[size_t(out)].contiguous()) why = "the attention output is not contiguous";
    }
    if (why.empty()) {  // the operands hold at the fused node what the copies read
      int first = n1;
      for (int t : through) first = std::min(first, t);
      const int last = training ? tb.pos : out_node;
      for (int val : {q, kt, v, mask})
        if (val >= 0 && why.empty() &&
            written_between(u, g.values[size_t(val)].buffer, first, last))
          why = training ? "an operand is written between the copies and the attention's backward"
                         : "an operand is written between the copies and the attention";
    }
    if (why.empty() && training) {
      const Value& qv = g.values[size_t(q)];
      const int64_t B = prod_of(lead_of(qv)), L = qv.sizes.end()[-2];
      const int64_t E = qv.sizes.back(), S = g.values[size_t(kt)].sizes.back(),
                    Ev = g.values[size_t(v)].sizes.back();
      auto is = [&](int val, const DimVector& d) {
        return g.values[size_t(val)].sizes == d && g.values[size_t(val)].contiguous();
      };
      if ((tb.dq >= 0 && !is(tb.dq, {B, L, E})) || (tb.dkt >= 0 && !is(tb.dkt, {B, E, S})) ||
          (tb.dv >= 0 && !is(tb.dv, {B, S, Ev})) ||
          g.values[size_t(tb.dout)].sizes != DimVector{B, L, Ev})
        why = "the gradients are not the contiguous [B, L, E], [B, E, S], [B, S, Ev] of the bmms";
      else if (written_between(u, g.values[size_t(out)].buffer, out_node, tb.pos))
        why = "the attention's output is written before its backward";
    }
    if (!why.empty()) {
      refuse(why);
      continue;
    }
    const std::string scores_str = shape_str(uv.sizes);  // (uv: gone once a value is added)
    if (training) {
      // the forward also writes the rows' log-sum-exp (a new value on a new buffer), which
      // the backward reads with the output
      // (so does a gradient nothing needs, for the backward)
      const ScalarType dt = g.values[size_t(out)].dtype;
      const Device dev = g.values[size_t(out)].device;
      auto fresh = [&](const DimVector& sizes, int producer) {
        Buffer nb;
        nb.kind = BufKind::Intermediate;
        nb.nbytes = size_t(prod_of(sizes)) * itemsize(dt);
        nb.device = dev;
        g.buffers.push_back(std::move(nb));
        Value nv;
        nv.buffer = int(g.buffers.size()) - 1;
        nv.sizes = sizes;
        nv.strides = DimVector(sizes.size(), 1);
        for (size_t d = sizes.size(); d-- > 1;) nv.strides[d - 1] = nv.strides[d] * sizes[d];
        nv.dtype = dt;
        nv.device = dev;
        nv.producer = producer;
        return g.add_value(std::move(nv));
      };
      const DimVector qlead = lead_of(g.values[size_t(q)]);  // (values grow below)
      const int64_t B = prod_of(qlead), L = g.values[size_t(q)].sizes.end()[-2],
                    E = g.values[size_t(q)].sizes.back(), S = g.values[size_t(kt)].sizes.back(),
                    Ev = g.values[size_t(v)].sizes.back();
      const int lse = fresh({B, L}, out_node);
      if (tb.dq < 0) tb.dq = fresh({B, L, E}, tb.pos);
      if (tb.dkt < 0) tb.dkt = fresh({B, E, S}, tb.pos);
      if (tb.dv < 0) tb.dv = fresh({B, S, Ev}, tb.pos);
      const Attrs* da = drop >= 0 ? &g.nodes[size_t(drop)].attrs : nullptr;
      using DA = nn_detail::DropoutAttrs;
      const Attrs attrs = nn_detail::SdpaAttrs::make(
          scale, false, drop_p, da ? DA::get<"seed">(*da) : int64_t(0),
          da ? DA::get<"offset">(*da) : int64_t(0), int64_t(mask >= 0 ? 2 : 0));
      const int rng = drop >= 0 ? g.nodes[size_t(drop)].rng : -1;
      Node f;
      f.op = &OF_OP("fused_attention_forward");
      f.attrs = attrs;
      f.inputs = {q, kt, v, mask};
      f.outputs = {out, lse};
      f.rng = rng;
      // the output's gradient where the head split left it (a strided view of the merged
      // gradient) instead of its copy, when nothing writes it up to the backward
      int dout = tb.dout;
      {
        DimVector want = qlead;
        want.push_back(L);
        want.push_back(Ev);
        const OperandChain c = operand_chain(g, tb.dout);
        for (size_t i = c.vals.size(); i-- > 1;)
          if (g.values[size_t(c.vals[i])].sizes == want &&
              !written_between(u, g.values[size_t(c.vals[i])].buffer, c.nodes[i - 1], tb.pos)) {
            dout = c.vals[i];
            break;
          }
      }
      Node b;
      b.op = &OF_OP("fused_attention_backward");
      b.attrs = attrs;
      b.inputs = {dout, q, kt, v, mask, out, lse};
      b.outputs = {tb.dq, tb.dkt, tb.dv};
      b.rng = rng;
      for (int k : chain) dead[size_t(k)] = true;
      for (int k : tb.nodes) dead[size_t(k)] = true;
      dead[size_t(out_node)] = dead[size_t(tb.pos)] = false;
      for (int o : g.nodes[size_t(tb.pos)].outputs) g.values[size_t(o)].producer = -1;
      g.nodes[size_t(out_node)] = std::move(f);
      g.nodes[size_t(tb.pos)] = std::move(b);
      for (int val : {tb.dq, tb.dkt, tb.dv}) g.values[size_t(val)].producer = tb.pos;
      g.rewrites.push_back(fmt::format(
          "attention: softmax at node {} over scores {} -> fused_attention_forward (scale {:.6g}, "
          "{}{}) and its backward at node {} -> fused_attention_backward",
          si, scores_str, scale,
          mask >= 0 ? "additive mask " + shape_str(g.values[size_t(mask)].sizes) : "no mask",
          drop >= 0 ? fmt::format(", dropout {:.6g}", drop_p) : std::string(), tb.pos));
      continue;
    }
    // NOTE [Merged heads]: the output's only reader a view chain to [b, L, h, Ev] (the heads
    // moved next to the features) and a copy of it: the kernel writes the copy's value itself
    int64_t heads = 1;
    int merged = -1;
    std::vector<int> merge_nodes;
    {
      const Value& ov = g.values[size_t(out)];
      int val = out, c = single_use(g, u, out);
      std::vector<int> views;
      while (c >= 0 && is_view(g.nodes[size_t(c)]) && g.nodes[size_t(c)].outputs.size() == 1) {
        views.push_back(c);
        val = g.nodes[size_t(c)].outputs[0];
        c = single_use(g, u, val);
      }
      const Value& vv = g.values[size_t(val)];
      if (c >= 0 && !views.empty() && g.nodes[size_t(c)].op == &OF_OP("copy") &&
          !g.nodes[size_t(c)].writes_existing && g.nodes[size_t(c)].inputs[0] == val &&
          ov.contiguous() && ov.sizes.size() == 3 && vv.buffer == ov.buffer &&
          vv.offset == ov.offset && vv.sizes.size() == 4) {
        const int64_t L = ov.sizes[1], E = ov.sizes[2], h = vv.sizes[2];
        const Value& cv = g.values[size_t(g.nodes[size_t(c)].outputs[0])];
        if (h > 1 && vv.sizes[0] * h == ov.sizes[0] && vv.sizes[1] == L && vv.sizes[3] == E &&
            vv.strides == DimVector{h * L * E, E, L * E, 1} && cv.sizes == vv.sizes &&
            cv.contiguous() && cv.dtype == ov.dtype && u.writers[size_t(cv.buffer)].size() == 1) {
          heads = h;
          merged = g.nodes[size_t(c)].outputs[0];
          merge_nodes = views;
          merge_nodes.push_back(c);
        }
      }
    }
    Node f;
    f.op = &OF_OP("fused_attention");
    f.attrs = FusedAttnAttrs::make(scale, int64_t(mask >= 0 ? 2 : 0), heads);
    f.inputs = {q, kt, v, mask};
    f.outputs = {merged >= 0 ? merged : out};
    for (int k : chain) dead[size_t(k)] = true;
    dead[size_t(out_node)] = false;
    g.nodes[size_t(out_node)] = std::move(f);
    if (merged >= 0) {
      for (int k : merge_nodes) dead[size_t(k)] = true;
      g.values[size_t(merged)].producer = out_node;
      g.values[size_t(out)].producer = -1;
    }
    g.rewrites.push_back(fmt::format(
        "attention: softmax at node {} over scores {} -> fused_attention (scale {:.6g}, {}{})", si,
        shape_str(uv.sizes), scale,
        mask >= 0 ? "additive mask " + shape_str(g.values[size_t(mask)].sizes) : "no mask",
        merged >= 0 ? fmt::format(", {} heads merged in the output", heads) : std::string()));
  }
  return compact(std::move(g), dead);
}

}  // namespace oneflow::trace

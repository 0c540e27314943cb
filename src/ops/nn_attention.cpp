// scaled_dot_product_attention: the op (meta, its decomposition for devices without a kernel:
// NOTE [Decompositions], VJP, registration; kernels: src/cpu/attention.cpp), its backward, and
// the public function (masks, causal, dropout, global tensors).
#include <algorithm>
#include <cmath>
#include <limits>

#include "autocast.h"
#include "cpu/attention.h"
#include "generator.h"
#include "global/rules.h"
#include "oneflow/ops_nn.h"
#include "ops/nn_common.h"
#include "ops/nn_op_helpers.h"

namespace oneflow {
using namespace nn_detail;
namespace {

// ================================================================ scaled dot product attention
// inputs: q [B, L, E], k [B, S, E], v [B, S, Ev], mask [B, L, S] (optional: bool, true = attend,
// or additive float); attrs: scale, is_causal, dropout_p, seed, offset, mask_kind (0 none,
// 1 bool, 2 additive), and optionally draw_map (below); outputs: out [B, L, Ev], lse [B, L]
// (log-sum-exp of each score row).
// The kernels (src/cpu/attention.cpp, NOTE [Attention kernel]) and the decompositions below
// agree: a row with nothing to attend to gives NaN outputs and lse -inf, and no gradient;
// dropout keeps element (b, i, j) by Philox word ((b * L + i) * S + j) of the op's counters.
// NOTE [Attention draw map]: attr 6, when present and not empty, says that the B batches are a
// piece of a larger batch (attention split by heads with dropout, NOTE [Attention split by
// heads]): triples (logical size, start, local size) per batch dim, outer first, whose local
// sizes multiply to B. Batch b then draws as the batch it is in the whole: b unravelled over
// the local sizes, shifted by the starts, ravelled over the logical sizes. Each rank's piece
// so keeps exactly the elements one process keeps.

// (AttnGeom, attn_geom: ops/nn_common.h)

// The attrs every attention op with SdpaAttrs checks: mask_kind 0, 1 or 2, dropout_p in [0, 1).
void check_sdpa_attrs(const Attrs& a, const char* op) {
  const int64_t kind = SdpaAttrs::get<"mask_kind">(a);
  if (kind < 0 || kind > 2) fail("[{}] mask_kind {} is not 0, 1 or 2", op, kind);
  const double p = SdpaAttrs::get<"dropout_p">(a);
  if (!(p >= 0.0 && p < 1.0)) fail("[{}] dropout_p must be in [0, 1), got {}", op, p);
}

// The op's own checks (its inputs come flattened from scaled_dot_product_attention(), or from
// a direct dispatch or a loaded graph): q [B, L, E], k [B, S, E], v [B, S, Ev] of one float
// dtype, the mask [B, L, S] of the kind mask_kind names, dropout_p in [0, 1).
AttnGeom attn_check(const TensorList& in, const Attrs& a, const char* op) {
  const Tensor &q = in[0], &k = in[1], &v = in[2], &mask = in[3];
  check_float(op, q, "query");
  check_saved(k, q, k.sizes(), op, "key");
  check_saved(v, q, v.sizes(), op, "value");
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3 || k.size(0) != q.size(0) ||
      v.size(0) != q.size(0) || k.size(2) != q.size(2) || v.size(1) != k.size(1))
    fail("[{}] expected query [B, L, E], key [B, S, E] and value [B, S, Ev], got {}, {} and {}", op,
         shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  const AttnGeom g = attn_geom(in);
  check_sdpa_attrs(a, op);
  const int64_t kind = SdpaAttrs::get<"mask_kind">(a);
  if (kind != 0) {
    const ScalarType mt = kind == 1 ? kBool : q.dtype();
    if (!mask.defined()) fail("[{}] mask_kind {} needs an attn_mask, got none", op, kind);
    if (kind == 2 && mask.dtype() != mt)
      fail("[{}] an additive attn_mask must have the query's dtype {}, got {} (shape {})", op,
           dtype_name(mt), dtype_name(mask.dtype()), shape_str(mask.sizes()));
    if (mask.dtype() != mt || !(mask.sizes() == IntArrayRef(DimVector{g.B, g.L, g.S})))
      fail("[{}] mask_kind {} expects an attn_mask of dtype {} and shape ({}, {}, {}), got {} {}",
           op, kind, dtype_name(mt), g.B, g.L, g.S, dtype_name(mask.dtype()),
           shape_str(mask.sizes()));
  }
  if (SdpaDrawAttrs::has<"draw_map">(a)) {
    const DimVector& m = SdpaDrawAttrs::get<"draw_map">(a);
    int64_t n = 1;
    bool ok = m.size() % 3 == 0;
    for (size_t d = 0; ok && d < m.size(); d += 3) {
      ok = m[d + 1] >= 0 && m[d + 2] >= 0 && m[d + 1] + m[d + 2] <= m[d];
      n *= m[d + 2];
    }
    if (!ok || (!m.empty() && n != g.B))
      fail(
          "[{}] draw_map {} is not (logical size, start, local size) triples whose local sizes "
          "multiply to the {} batches",
          op, shape_str(m), g.B);
  }
  return g;
}

void sdpa_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const AttnGeom g = attn_check(in, a, "scaled_dot_product_attention");
  const Tensor& q = in[0];
  out.push_back({{g.B, g.L, g.Ev}, {}, 0, q.dtype(), q.device()});
  out.push_back({{g.B, g.L}, {}, 0, q.dtype(), q.device()});
}

// Backward inputs: dout, q, k, v, mask, out, lse; outputs: dq, dk, dv.
void sdpa_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "scaled_dot_product_attention_backward";
  const AttnGeom g = attn_check({in[1], in[2], in[3], in[4]}, a, op);
  const Tensor& q = in[1];
  check_saved(in[0], q, DimVector{g.B, g.L, g.Ev}, op, "grad_output");
  check_saved(in[5], q, DimVector{g.B, g.L, g.Ev}, op, "output");
  check_saved(in[6], q, DimVector{g.B, g.L}, op, "logsumexp");
  for (size_t i = 1; i <= 3; ++i)
    out.push_back({in[i].sizes().dims(), {}, 0, in[i].dtype(), in[i].device()});
}

// The decompositions (NOTE [Decompositions]), for devices without an attention kernel (CUDA):
// the kernels' semantics from public ops, materializing the [B, L, S] scores: the same mask
// kinds and causal rule, the saved lse, and the dropout elements drawn by the dropout op at
// the op's (seed, offset) over the [B, L, S] scores (Philox word (b * L + i) * S + j, as the
// kernels). A draw map (attention split by heads) is not decomposed.
struct AttnScores {
  Tensor s;  // scaled scores, -inf where not attended
  Tensor z;  // dropout multiplier (undefined without dropout)
};
AttnScores attn_scores(const Tensor& q, const Tensor& k, const Tensor& mask, const Attrs& a) {
  const int64_t L = q.size(1), S = k.size(1);
  AttnScores r;
  using A = SdpaAttrs;
  Tensor s = q.bmm(k.transpose(1, 2)) * A::get<"scale">(a);
  const int64_t kind = A::get<"mask_kind">(a);
  if (kind == 2) s = s + mask;
  Tensor allowed;
  if (kind == 1) allowed = mask;
  if (A::get<"is_causal">(a)) {
    const TensorOptions o = TensorOptions(kInt64).device(q.device());
    const Tensor causal = arange(0, S, 1, o).view({1, S}) <= arange(0, L, 1, o).view({L, 1});
    allowed = allowed.defined() ? (allowed & causal) : causal;
  }
  if (allowed.defined()) s = where(allowed, s, Scalar(-std::numeric_limits<double>::infinity()));
  r.s = s;
  const double p = A::get<"dropout_p">(a);
  OF_CHECK(
      p == 0 || !SdpaDrawAttrs::has<"draw_map">(a) || SdpaDrawAttrs::get<"draw_map">(a).empty(),
      "[scaled_dot_product_attention] on {}: dropout with a draw map (attention split by "
      "heads over ranks) has no decomposition",
      q.device().str());
  if (p > 0)
    r.z = dispatch(OF_OP("dropout"), {ones(s.sizes(), s.options())},
                   DropoutAttrs::make(p, A::get<"seed">(a), A::get<"offset">(a)))[0];
  return r;
}
TensorList sdpa_decompose(const TensorList& in, const Attrs& a) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const AttnScores sc = attn_scores(q, k, in[3], a);
  const Tensor lse = logsumexp(sc.s, {2}, true);  // all -inf row: -inf (its output is NaN)
  Tensor p = (sc.s - lse).exp();
  if (sc.z.defined()) p = p * sc.z;
  return {p.bmm(v), lse.view({q.size(0), q.size(1)})};
}
// inputs dout, q, k, v, mask, out, lse; outputs dq, dk, dv
TensorList sdpa_bwd_decompose(const TensorList& in, const Attrs& a) {
  const Tensor &dout = in[0], &q = in[1], &key = in[2], &v = in[3];
  const Tensor &out = in[5], &lse_in = in[6];
  const AttnScores sc = attn_scores(q, key, in[4], a);
  const Tensor lse = lse_in.view({q.size(0), q.size(1), 1});
  // rows with no attended key (lse not finite) get no gradient, as in the kernels
  const Tensor finite = lse.abs() < Scalar(std::numeric_limits<double>::infinity());
  const Tensor p = where(finite, (sc.s - lse).exp(), Scalar(0.0));
  const Tensor d = (dout * out).sum({2}, true);
  Tensor dpz = dout.bmm(v.transpose(1, 2));
  Tensor pz = p;
  if (sc.z.defined()) {
    dpz = dpz * sc.z;
    pz = p * sc.z;
  }
  const Tensor ds = p * (dpz - d) * SdpaAttrs::get<"scale">(a);
  return {ds.bmm(key), ds.transpose(1, 2).bmm(q), pz.transpose(1, 2).bmm(dout)};
}

TensorList sdpa_vjp(const VjpCtx& c, const TensorList& g) {
  const bool has_mask = SdpaAttrs::get<"mask_kind">(c.attrs()) != 0;
  Tensor mask = has_mask ? c.input(3) : Tensor();
  TensorList r = dispatch(
      OF_OP("scaled_dot_product_attention_backward"),
      {g[0], c.input(0), c.input(1), c.input(2), mask, c.output(0), c.output(1)}, c.attrs());
  return {c.needs_input_grad(0) ? r[0] : Tensor(), c.needs_input_grad(1) ? r[1] : Tensor(),
          c.needs_input_grad(2) ? r[2] : Tensor(), Tensor()};
}

// ================================================================ fused attention operands
// The operands of the fused attention ops: q [..., L, E], kt [..., E, S], v [..., S, Ev] of one
// float dtype and the same batch dims (at least one), and the mask of `kind` (0 none, 1 bool,
// 2 additive of q's dtype) broadcasting to the scores [..., L, S] (leading size-1 dims past
// that rank allowed: a [1, 1, 1, S] mask against scores [H, L, S]). Returns the geometry, B
// the product of the batch dims.
AttnGeom fused_operands(const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor& mask,
                        int64_t kind, const char* op) {
  check_float(op, q, "query");
  check_saved(kt, q, kt.sizes(), op, "key (transposed)");
  check_saved(v, q, v.sizes(), op, "value");
  const int64_t nd = q.dim();
  const IntArrayRef lead = q.sizes().slice(0, size_t(std::max<int64_t>(nd - 2, 0)));
  auto lead_of = [](const Tensor& t) { return t.sizes().slice(0, size_t(t.dim() - 2)); };
  if (nd < 3 || kt.dim() != nd || v.dim() != nd || lead_of(kt) != lead || lead_of(v) != lead ||
      kt.size(-2) != q.size(-1) || v.size(-2) != kt.size(-1))
    fail(
        "[{}] expected query [..., L, E], transposed key [..., E, S] and value [..., S, Ev] with "
        "the same batch dims (at least one), got {}, {} and {}",
        op, shape_str(q.sizes()), shape_str(kt.sizes()), shape_str(v.sizes()));
  DimVector scores(lead.begin(), lead.end());
  scores.push_back(q.size(-2));
  scores.push_back(kt.size(-1));
  if (kind != 0) {
    check_defined(op, mask, "mask");
    const ScalarType mt = kind == 1 ? kBool : q.dtype();
    size_t skip = 0;
    while (mask.dim() - int64_t(skip) > int64_t(scores.size()) && mask.size(int64_t(skip)) == 1)
      ++skip;
    if (mask.dtype() != mt || mask.device() != q.device() ||
        !broadcasts_to(mask.sizes().slice(skip), scores))
      fail("[{}] the {} mask must be {} on {} and broadcast to the scores {}, got {} {} on {}", op,
           kind == 1 ? "boolean" : "additive", dtype_name(mt), q.device().str(), shape_str(scores),
           dtype_name(mask.dtype()), shape_str(mask.sizes()), mask.device().str());
  }
  checked_numel(scores, op);
  return {prod_range(lead, 0, lead.size()), q.size(-2), kt.size(-1), q.size(-1), v.size(-1)};
}

// ================================================================ fused attention
// inputs: q [..., L, E], kt [..., E, S], v [..., S, Ev] (fused_operands), mask (mask_kind 2:
// additive; 0: none); attrs: scale, mask_kind; output: softmax(scale * q kt + mask) v,
// contiguous [B, L, Ev] with B the product of the batch dims (the shape of the bmm it replaces).
// Made by the trace's attention pass (NOTE [Fused attention] in src/cpu/attention.cpp), which
// gives it the operands where the head split left them.
void fused_attn_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "fused_attention";
  const int64_t kind = FusedAttnAttrs::get<"mask_kind">(a);
  if (kind != 0 && kind != 2) fail("[{}] mask_kind {} is not 0 (none) or 2 (additive)", op, kind);
  const AttnGeom g = fused_operands(in[0], in[1], in[2], in[3], kind, op);
  const Tensor& q = in[0];
  const int64_t heads = FusedAttnAttrs::has<"heads">(a) ? FusedAttnAttrs::get<"heads">(a) : 1;
  if (heads < 1 || g.B % heads != 0)
    fail("[{}] heads {} must be at least 1 and divide the {} batch matrices", op, heads, g.B);
  // NOTE [Merged heads]: heads > 1 writes batch b * heads + h at [b, :, h, :]
  const DimVector o =
      heads == 1 ? DimVector{g.B, g.L, g.Ev} : DimVector{g.B / heads, g.L, heads, g.Ev};
  out.push_back({o, {}, 0, q.dtype(), q.device()});
}

// ================================================================ fused attention, training
// NOTE [Fused attention, training]: fused_attention_forward(q, kt, v, mask) -> out [B, L, Ev],
// lse [B, L] and fused_attention_backward(dout, q, kt, v, mask, out, lse) -> dq [B, L, E],
// dkt [B, E, S], dv [B, S, Ev] (dout [B, L, Ev] or with q's batch dims, any strides) are
// scaled_dot_product_attention and its backward (the same
// attrs: scale, is_causal, dropout_p, seed, offset, mask_kind; the same kernels, NOTE
// [Attention operands]) over the fused operands: the transposed key, the head split's strided
// views, a mask broadcast in place. Outputs and gradients are contiguous with B flat, the
// shapes of the bmm outputs the trace's attention pass replaces in a training graph.
AttnGeom fused_train_check(const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor& mask,
                           const Attrs& a, const char* op) {
  check_sdpa_attrs(a, op);
  return fused_operands(q, kt, v, mask, SdpaAttrs::get<"mask_kind">(a), op);
}
void fused_fwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const AttnGeom g = fused_train_check(in[0], in[1], in[2], in[3], a, "fused_attention_forward");
  const Tensor& q = in[0];
  out.push_back({{g.B, g.L, g.Ev}, {}, 0, q.dtype(), q.device()});
  out.push_back({{g.B, g.L}, {}, 0, q.dtype(), q.device()});
}
// inputs: dout, q, kt, v, mask, out, lse; outputs: dq, dkt, dv
void fused_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "fused_attention_backward";
  const AttnGeom g = fused_train_check(in[1], in[2], in[3], in[4], a, op);
  const Tensor& q = in[1];
  // grad_output: [B, L, Ev], or with q's batch dims (a head view of the merged gradient)
  DimVector dshape{g.B, g.L, g.Ev};
  if (in[0].defined() && in[0].dim() == q.dim() && q.dim() != 3) {
    dshape = q.sizes().dims();
    dshape.back() = g.Ev;
  }
  check_saved(in[0], q, dshape, op, "grad_output");
  check_saved(in[5], q, DimVector{g.B, g.L, g.Ev}, op, "output");
  check_saved(in[6], q, DimVector{g.B, g.L}, op, "logsumexp");
  for (const DimVector& d :
       {DimVector{g.B, g.L, g.E}, DimVector{g.B, g.E, g.S}, DimVector{g.B, g.S, g.Ev}})
    out.push_back({d, {}, 0, q.dtype(), q.device()});
}
TensorList fused_fwd_vjp(const VjpCtx& c, const TensorList& g) {
  const Tensor mask = SdpaAttrs::get<"mask_kind">(c.attrs()) != 0 ? c.input(3) : Tensor();
  TensorList r = dispatch(
      OF_OP("fused_attention_backward"),
      {g[0], c.input(0), c.input(1), c.input(2), mask, c.output(0), c.output(1)}, c.attrs());
  Tensor grads[3];
  for (int i = 0; i < 3; ++i)
    if (c.needs_input_grad(size_t(i))) grads[i] = r[size_t(i)].view(c.input(size_t(i)).sizes());
  return {grads[0], grads[1], grads[2], Tensor()};
}

}  // namespace

void register_attention_ops() {
  register_op({.name = "fused_attention",
               .attr_names = FusedAttnAttrs::names(),
               .attr_types = FusedAttnAttrs::types(),
               .infer_meta = fused_attn_meta,
               .cpu = cpu::fused_attention,
               .sbp_rule = &sbp_rules::kWholeValues});  // CPU graphs only: no CUDA kernel
  register_op({.name = "fused_attention_forward",
               .traits = kRandom,
               .attr_names = SdpaAttrs::names(),
               .attr_types = SdpaAttrs::types(),
               .infer_meta = fused_fwd_meta,
               .cpu = cpu::fused_attention_forward,  // CPU graphs only: no CUDA kernel
               .vjp = fused_fwd_vjp,
               .save_inputs = in(0) | in(1) | in(2) | in(3),
               .save_outputs = out(0) | out(1),
               .nondiff_inputs = in(3),
               .sbp_rule = &sbp_rules::kWholeValues,
               .rng_seed_attr = int(SdpaAttrs::index<"seed">())});
  register_op({.name = "fused_attention_backward",
               .attr_names = SdpaAttrs::names(),
               .attr_types = SdpaAttrs::types(),
               .infer_meta = fused_bwd_meta,
               .cpu = cpu::fused_attention_backward,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kWholeValues,
               .rng_seed_attr = int(SdpaAttrs::index<"seed">())});
  register_op({.name = "scaled_dot_product_attention",
               .traits = kRandom | kWidens16Bit,
               .attr_names = SdpaDrawAttrs::names(),
               .attr_types = SdpaDrawAttrs::types(),
               .infer_meta = sdpa_meta,
               .cpu = cpu::scaled_dot_product_attention,
               .decompose = sdpa_decompose,
               .vjp = sdpa_vjp,
               .save_inputs = in(0) | in(1) | in(2) | in(3),
               .save_outputs = out(0) | out(1),
               .nondiff_inputs = in(3),
               .sbp_rule = &sbp_rules::kSamplesSplitWithoutDropout,
               .rng_seed_attr = int(SdpaAttrs::index<"seed">()),
               .contiguous_inputs = in(0) | in(1) | in(2),
               .autocast = AutocastPolicy::kLower});  // the mask: any strides
  register_op({.name = "scaled_dot_product_attention_backward",
               .traits = kWidens16Bit,
               .attr_names = SdpaDrawAttrs::names(),
               .attr_types = SdpaDrawAttrs::types(),
               .infer_meta = sdpa_bwd_meta,
               .cpu = cpu::scaled_dot_product_attention_backward,
               .decompose = sdpa_bwd_decompose,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kSamplesSplitWithoutDropout,
               .rng_seed_attr = int(SdpaAttrs::index<"seed">()),
               .contiguous_inputs = in(0) | in(1) | in(2) | in(3) | in(5) | in(6)});
}

// ================================================================ public functions

namespace {
// The attention op on checked operands whose batch dims broadcast, flattened to [B, L, E] etc.
// `draw_map`: NOTE [Attention draw map] (empty: the batches are the whole). The dropout draws
// reserved are those of the whole: its logical batches (the map's) times L * S.
Tensor attend_flat(const Tensor& query, const Tensor& key, const Tensor& value,
                   const Tensor& attn_mask, double dropout_p, bool is_causal, double sc,
                   const DimVector& draw_map) {
  const char* op = "scaled_dot_product_attention";
  const int64_t L = query.size(-2), E = query.size(-1), S = key.size(-2), Ev = value.size(-1);
  // batch dims: broadcast of the three operands (and the mask's)
  auto batch_of = [](const Tensor& t) { return DimVector(t.sizes().begin(), t.sizes().end() - 2); };
  DimVector bs;
  auto merge = [&](const DimVector& d, const char* what, IntArrayRef full) {
    const size_t n = std::max(bs.size(), d.size());
    DimVector r(n, 1);
    for (size_t i = 0; i < n; ++i) {
      const int64_t a = i + bs.size() >= n ? bs[i + bs.size() - n] : 1;
      const int64_t b = i + d.size() >= n ? d[i + d.size() - n] : 1;
      if (a != b && a != 1 && b != 1)
        fail("[{}] batch dims of {} (shape {}) do not broadcast with {}", op, what, shape_str(full),
             shape_str(bs));
      r[i] = a == 1 ? b : a;
    }
    bs = r;
  };
  merge(batch_of(query), "query", query.sizes());
  merge(batch_of(key), "key", key.sizes());
  merge(batch_of(value), "value", value.sizes());
  int64_t mask_kind = 0;
  DimVector mshape = bs;
  mshape.push_back(L);
  mshape.push_back(S);
  if (attn_mask.defined()) {
    // (an additive mask's dtype is the op's check, after autocast's casts)
    if (attn_mask.dtype() == kBool) mask_kind = 1;
    else if (is_floating_point(attn_mask.dtype())) mask_kind = 2;
    else
      fail("[{}] attn_mask must be bool or floating (additive, of the query's dtype {}), got {}",
           op, dtype_name(query.dtype()), dtype_name(attn_mask.dtype()));
    if (!broadcasts_to(attn_mask.sizes(), mshape))
      fail("[{}] attn_mask of shape {} does not broadcast to {}", op, shape_str(attn_mask.sizes()),
           shape_str(mshape));
  }
  const int64_t B = prod_range(bs, 0, bs.size());
  auto flat = [&](const Tensor& t, int64_t r, int64_t c) {
    DimVector full = bs;
    full.push_back(r);
    full.push_back(c);
    Tensor e = t.sizes() == IntArrayRef(full) ? t : t.expand(full);
    return e.reshape({B, r, c});
  };
  int64_t whole = B;
  if (!draw_map.empty()) {
    whole = 1;
    for (size_t d = 0; d < draw_map.size(); d += 3) whole *= draw_map[d];
  }
  GeneratorState st{0, 0};
  if (dropout_p > 0) st = reserve_random(uint64_t((whole * L * S + 3) / 4));
  Tensor mask = attn_mask.defined() ? flat(attn_mask, L, S) : Tensor();
  Attrs a =
      SdpaAttrs::make(sc, is_causal, dropout_p, int64_t(st.seed), int64_t(st.offset), mask_kind);
  if (!draw_map.empty()) a.values.push_back(draw_map);
  TensorList r =
      dispatch(OF_OP("scaled_dot_product_attention"),
               {flat(query, L, E), flat(key, S, E), flat(value, S, Ev), mask}, std::move(a));
  DimVector oshape = bs;
  oshape.push_back(L);
  oshape.push_back(Ev);
  return r[0].reshape(oshape);
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  // dtypes agreeing is the op's check (after autocast's casts, before any 16-bit widening):
  // this wrapper only shapes the call, once
  check_float(op, query, "query");
  check_float(op, key, "key");
  check_float(op, value, "value");
  if (query.dim() < 2 || key.dim() < 2 || value.dim() < 2)
    fail(
        "[{}] expected query, key and value of at least 2 dims ([..., L, E]), got shapes {}, {} "
        "and {}",
        op, shape_str(query.sizes()), shape_str(key.sizes()), shape_str(value.sizes()));
  const int64_t E = query.size(-1), S = key.size(-2);
  if (key.size(-1) != E || value.size(-2) != S)
    fail(
        "[{}] query {}, key {} and value {} do not fit: need key [..., S, {}] and value "
        "[..., {}, Ev]",
        op, shape_str(query.sizes()), shape_str(key.sizes()), shape_str(value.sizes()), E, S);
  if (!(dropout_p >= 0.0 && dropout_p < 1.0))
    fail("[{}] dropout_p must be in [0, 1), got {}", op, dropout_p);
  if (is_causal && attn_mask.defined())
    fail("[{}] pass either attn_mask or is_causal = true, not both", op);
  const double sc = scale.value_or(1.0 / std::sqrt(double(E)));
  // global q, k, v split by heads (or batch) alike: attention on each rank's pieces
  // (NOTE [Attention split by heads], global/rules.cpp)
  if (Tensor o = sbp_rules::attention_by_batch_pieces(
          query, key, value, attn_mask, dropout_p,
          [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m,
              const DimVector& draw_map) {
            return attend_flat(q, k, v, m, dropout_p, is_causal, sc, draw_map);
          });
      o.defined())
    return o;
  return attend_flat(query, key, value, attn_mask, dropout_p, is_causal, sc, {});
}

}  // namespace oneflow

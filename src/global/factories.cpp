// factories.cpp: the global factories (randn, rand, zeros, ones, full on a placement and SBP, the
// *_like of a global tensor): the logical tensor drawn in full on every rank, each keeping its
// piece, so the numbers do not depend on the placement.
#include <functional>

#include "global/global.h"

namespace oneflow {

namespace {

// The logical tensor drawn (or filled) in full on every rank, each keeping its piece.
Tensor from_full(const Tensor& full, const Placement& pl, const NdSbp& sbp) {
  // a rank outside the placement drew the same numbers (its generator stays in step) and keeps
  // a handle
  const std::vector<int64_t> coord = global::coord_in(pl, "factory");
  if (coord.empty()) return global::make_handle(full.sizes(), full.dtype(), full.device(), pl, sbp);
  const global::Box b = global::piece_box(full.sizes(), sbp, pl, coord);
  Tensor piece = global::partial_keeper(sbp, coord) ? global::box_slice(full, b).contiguous()
                                                    : zeros(b.size, full.options());
  if (piece.is_same(full)) piece = full.clone();
  return global::make_global(piece, full.sizes(), pl, sbp);
}

}  // namespace

Tensor global::global_factory(const char* op, IntArrayRef size, const Placement& pl,
                              const NdSbp& sbp, const TensorOptions& o,
                              const std::function<Tensor(IntArrayRef, TensorOptions)>& make) {
  global::check_sbp(op, pl, sbp, int64_t(size.size()));
  checked_numel(size, op);
  NoGradGuard ng;
  TensorOptions lo = o.requires_grad(false);
  Tensor t = from_full(make(size, lo), pl, sbp);
  if (o.requires_grad()) t.set_requires_grad(true);
  return t;
}

Tensor randn(IntArrayRef size, const Placement& pl, const NdSbp& sbp, TensorOptions o) {
  return global::global_factory("randn", size, pl, sbp, o,
                                [](IntArrayRef s, TensorOptions lo) { return randn(s, lo); });
}
Tensor rand(IntArrayRef size, const Placement& pl, const NdSbp& sbp, TensorOptions o) {
  return global::global_factory("rand", size, pl, sbp, o,
                                [](IntArrayRef s, TensorOptions lo) { return rand(s, lo); });
}
Tensor zeros(IntArrayRef size, const Placement& pl, const NdSbp& sbp, TensorOptions o) {
  return global::global_factory("zeros", size, pl, sbp, o,
                                [](IntArrayRef s, TensorOptions lo) { return zeros(s, lo); });
}
Tensor ones(IntArrayRef size, const Placement& pl, const NdSbp& sbp, TensorOptions o) {
  return global::global_factory("ones", size, pl, sbp, o,
                                [](IntArrayRef s, TensorOptions lo) { return ones(s, lo); });
}
Tensor full(IntArrayRef size, const Scalar& v, const Placement& pl, const NdSbp& sbp,
            TensorOptions o) {
  return global::global_factory("full", size, pl, sbp, o,
                                [&](IntArrayRef s, TensorOptions lo) { return full(s, v, lo); });
}

namespace global {

NdSbp partial_to_broadcast(NdSbp s) {
  for (Sbp& x : s)
    if (x.is_partial_sum()) x = Sbp::broadcast();
  return s;
}

Tensor logical_value(const Tensor& t) {
  NoGradGuard ng;
  const GlobalMeta& m = meta(t);
  if (!holds_piece(m.placement, "global"))
    fail(
        "[global] rank {} holds no piece of this {} tensor on {}: read its value on a rank of "
        "the placement, or move it here first (to_global)",
        this_rank(), shape_str(t.sizes()), m.placement.str());
  return t.detach()
      .to_global(m.placement, NdSbp(size_t(m.placement.ndim()), Sbp::broadcast()))
      .to_local();
}

Tensor zeros_for(IntArrayRef sizes, ScalarType dtype, const GlobalMeta& m) {
  return zeros(sizes, m.placement, partial_to_broadcast(m.sbp), TensorOptions().dtype(dtype));
}

Tensor zeros_shaped_like(IntArrayRef sizes, const Tensor& like) {
  if (!like.is_global()) return zeros(sizes, like.options());
  const GlobalMeta& m = meta(like);
  NdSbp s = partial_to_broadcast(m.sbp);
  for (Sbp& x : s)
    if (x.is_split() && x.dim() >= int64_t(sizes.size())) x = Sbp::broadcast();
  return zeros(sizes, m.placement, s, like.options());
}

Tensor constant_like(const Tensor& value, const Tensor& like) {
  if (!like.is_global() || value.is_global()) return value;
  const GlobalMeta& m = meta(like);
  return make_global(value.clone(MemoryFormat::Contiguous), value.sizes(), m.placement,
                     NdSbp(m.sbp.size(), Sbp::broadcast()));
}

Tensor broadcast_zeros_like(IntArrayRef sizes, const Tensor& like) {
  if (!like.is_global()) return zeros(sizes, like.options());
  const GlobalMeta& m = meta(like);
  return zeros(sizes, m.placement, NdSbp(m.sbp.size(), Sbp::broadcast()), like.options());
}

Tensor like_global(const Tensor& t, const TensorOptions& o,
                   const std::function<Tensor(IntArrayRef, TensorOptions)>& make) {
  const GlobalMeta& m = meta(t);
  return global_factory("like", t.sizes(), m.placement, partial_to_broadcast(m.sbp), o, make);
}
}  // namespace global

}  // namespace oneflow

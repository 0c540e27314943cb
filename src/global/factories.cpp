// factories.cpp: the global factories (randn, rand, zeros, ones, full on a placement and SBP)
// draw the logical tensor in full on every rank, each keeping its piece, so the numbers do not
// depend on the placement. The factories that follow a tensor (*_like, Tensor::new_*,
// broadcast_like) live here too: of a local tensor they make a local one, of a global tensor a
// global one on its placement and SBP, so op files and VJPs call them on either.
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

}  // namespace global

// ---------------------------------------------------------------- factories that follow a tensor

namespace {
using Make = std::function<Tensor(IntArrayRef, TensorOptions)>;

// `make` of `size` following `t`: local when t is; else a global tensor on t's placement under
// t's SBP, partial sums as broadcast and splits of dims `size` lacks as broadcast.
Tensor follow(const char* op, const Tensor& t, IntArrayRef size, const TensorOptions& o,
              const Make& make) {
  if (!t.is_global()) return make(size, o);
  const GlobalMeta& m = global::meta(t);
  NdSbp s = partial_to_broadcast(m.sbp);
  for (Sbp& x : s)
    if (x.is_split() && x.dim() >= int64_t(size.size())) x = Sbp::broadcast();
  return global::global_factory(op, size, m.placement, s, o, make);
}

TensorOptions like(const Tensor& t, const std::optional<TensorOptions>& o) {
  TensorOptions r = t.options();
  if (o) {
    if (o->has_dtype()) r = r.dtype(o->dtype());
    if (o->has_device()) r = r.device(o->device());
    r = r.requires_grad(o->requires_grad());
  }
  return r;
}
// This tensor's dtype and device where `o` names none (libtorch's new_* factories).
TensorOptions inherit(const Tensor& t, TensorOptions o) {
  if (!o.has_dtype()) o = o.dtype(t.dtype());
  if (!o.has_device()) o = o.device(t.device());
  return o;
}
}  // namespace

#define OF_LIKE(name, expr) \
  follow(name, t, t.sizes(), like(t, o), [&](IntArrayRef s, TensorOptions lo) { return expr; })
Tensor empty_like(const Tensor& t, std::optional<TensorOptions> o) {
  return OF_LIKE("empty_like", empty(s, lo));
}
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> o) {
  return OF_LIKE("zeros_like", zeros(s, lo));
}
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> o) {
  return OF_LIKE("ones_like", ones(s, lo));
}
Tensor full_like(const Tensor& t, const Scalar& v, std::optional<TensorOptions> o) {
  return OF_LIKE("full_like", full(s, v, lo));
}
Tensor rand_like(const Tensor& t, std::optional<TensorOptions> o) {
  return OF_LIKE("rand_like", rand(s, lo));
}
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> o) {
  return OF_LIKE("randn_like", randn(s, lo));
}
#undef OF_LIKE

Tensor Tensor::new_empty(IntArrayRef size, TensorOptions o) const {
  return follow("new_empty", *this, size, inherit(*this, o),
                [](IntArrayRef s, TensorOptions lo) { return empty(s, lo); });
}
Tensor Tensor::new_zeros(IntArrayRef size, TensorOptions o) const {
  return follow("new_zeros", *this, size, inherit(*this, o),
                [](IntArrayRef s, TensorOptions lo) { return zeros(s, lo); });
}
Tensor Tensor::new_ones(IntArrayRef size, TensorOptions o) const {
  return follow("new_ones", *this, size, inherit(*this, o),
                [](IntArrayRef s, TensorOptions lo) { return ones(s, lo); });
}
Tensor Tensor::new_full(IntArrayRef size, const Scalar& v, TensorOptions o) const {
  return follow("new_full", *this, size, inherit(*this, o),
                [&](IntArrayRef s, TensorOptions lo) { return full(s, v, lo); });
}

Tensor broadcast_like(const Tensor& value, const Tensor& like) {
  if (!value.defined()) fail("[broadcast_like] value is undefined");
  if (!like.defined()) fail("[broadcast_like] like is undefined");
  if (!like.is_global() || value.is_global()) return value;
  const GlobalMeta& m = global::meta(like);
  const NdSbp sbp(m.sbp.size(), Sbp::broadcast());
  // a rank outside the placement keeps a handle, as the global factories give it
  if (global::coord_in(m.placement, "broadcast_like").empty())
    return global::make_handle(value.sizes(), value.dtype(), value.device(), m.placement, sbp);
  return global::make_global(value.clone(MemoryFormat::Contiguous), value.sizes(), m.placement,
                             sbp);
}

}  // namespace oneflow

// Shape moves: cat, pad, tril/triu, flip, roll, repeat (meta, VJPs, SBP rules, registration,
// public functions); plus the compositions built from them and from views (stack, split, chunk,
// unbind, repeat_interleave). Kernels: cpu/moves.cpp. NOTE [Index validation] in ops/index.cpp
// holds here too.
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "cpu/moves.h"
#include "oneflow/global.h"
#include "global/rules.h"
#include "dispatch.h"
#include "ops/checks.h"
#include "ops/index_common.h"

namespace oneflow {
using namespace index_detail;
namespace {

// ---------------------------------------------------------------- cat

// Shapes must agree except along dim; 0-d tensors are rejected.
void check_cat(const TensorList& ts, int64_t d) {
  OF_CHECK(!ts.empty(), "[cat] expected a non-empty list of tensors");
  const Tensor& f = ts[0];
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    OF_CHECK(t.defined(), "[cat] tensor number {} in the list is undefined", i);
    OF_CHECK(t.dim() > 0, "[cat] zero-dimensional tensor (at position {}) cannot be concatenated",
             i);
    OF_CHECK(t.dim() == f.dim(),
             "[cat] tensors must have the same number of dimensions: got {} ({}) and {} ({}) for "
             "tensor number {}",
             f.dim(), shape_str(f.sizes()), t.dim(), shape_str(t.sizes()), i);
    OF_CHECK(t.device() == f.device(),
             "[cat] expected all tensors on the same device, got {} and {}", f.device().str(),
             t.device().str());
    for (int64_t k = 0; k < t.dim(); ++k)
      if (k != d && t.sizes()[k] != f.sizes()[k])
        fail(
            "[cat] sizes of tensors must match except in dimension {}: expected size {} but got "
            "size {} for tensor number {} in the list (shapes {} and {})",
            d, f.sizes()[k], t.sizes()[k], i, shape_str(f.sizes()), shape_str(t.sizes()));
  }
}
void cat_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  OF_CHECK(!in.empty(), "[cat] expected a non-empty list of tensors");
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(a), in[0].dim(), "cat");
  check_cat(in, d);
  DimVector sz = in[0].sizes().dims();
  sz[d] = 0;
  for (const Tensor& t : in) {
    OF_CHECK(t.dtype() == in[0].dtype(), "[cat] internal error: inputs must share a dtype");
    sz[d] += t.sizes()[d];
  }
  out.push_back({sz, {}, 0, in[0].dtype(), in[0].device()});
}
TensorList cat_vjp(const VjpCtx& c, const TensorList& g) {
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(c.attrs()), g[0].dim(), "cat");
  TensorList r;
  int64_t off = 0;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const int64_t n = c.input_sizes(i)[d];
    r.push_back(c.needs_input_grad(i) ? g[0].narrow(d, off, n) : Tensor());
    off += n;
  }
  return r;
}

// ---------------------------------------------------------------- pad

// Output sizes of pad; validates the pads against the mode.
DimVector pad_sizes(IntArrayRef in, const DimVector& pads, PadMode mode) {
  const int64_t nd = int64_t(in.size());
  OF_CHECK(pads.size() % 2 == 0, "[pad] padding length must be divisible by 2, got {}",
           pads.size());
  const int64_t np = int64_t(pads.size()) / 2;
  OF_CHECK(np <= nd, "[pad] padding length {} is too large for an input with {} dimensions {}",
           pads.size(), nd, shape_str(in));
  DimVector out = in.dims();
  for (int64_t p = 0; p < np; ++p) {
    const int64_t d = nd - 1 - p, l = pads[2 * p], r = pads[2 * p + 1], n = in[d];
    if (mode != PadMode::kConstant) {
      OF_CHECK(l >= 0 && r >= 0,
               "[pad] negative padding ({}, {}) at dimension {} is only supported "
               "in constant mode",
               l, r, d);
      if (mode == PadMode::kReflect)
        OF_CHECK(l < n && r < n,
                 "[pad] reflect padding ({}, {}) at dimension {} must be smaller than "
                 "the dimension's size {} (input {})",
                 l, r, d, n, shape_str(in));
      if (mode == PadMode::kReplicate)
        OF_CHECK(n > 0 || (l == 0 && r == 0),
                 "[pad] replicate padding needs a non-empty dimension {} "
                 "(input {})",
                 d, shape_str(in));
      if (mode == PadMode::kCircular)
        OF_CHECK(l <= n && r <= n,
                 "[pad] circular padding ({}, {}) at dimension {} must not exceed "
                 "the dimension's size {} (input {})",
                 l, r, d, n, shape_str(in));
    }
    OF_CHECK(!__builtin_add_overflow(n, l, &out[d]) && !__builtin_add_overflow(out[d], r, &out[d]),
             "[pad] padding ({}, {}) of dimension {} of input {} overflows its size", l, r, d,
             shape_str(in));
    OF_CHECK(out[d] >= 0, "[pad] padding ({}, {}) makes dimension {} of input {} negative ({})", l,
             r, d, shape_str(in), out[d]);
  }
  return out;
}

void pad_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  DimVector sz =
      pad_sizes(in[0].sizes(), PadAttrs::get<"pad">(a), pad_mode(PadAttrs::get<"mode">(a)));
  out.push_back({sz, {}, 0, in[0].dtype(), in[0].device()});
}
TensorList pad_vjp(const VjpCtx& c, const TensorList& g) {
  const DimVector& pads = PadAttrs::get<"pad">(c.attrs());
  const std::string& mode = PadAttrs::get<"mode">(c.attrs());
  if (pad_mode(mode) == PadMode::kConstant) {
    DimVector neg;
    for (int64_t p : pads) neg.push_back(-p);
    return {pad(g[0], neg, "constant", 0.0)};
  }
  return {dispatch1(OF_OP("pad_backward"), {g[0]},
                    PadBackwardAttrs::make(c.input_sizes(0).dims(), pads, mode))};
}
// pad_backward(grad; input_size, pads, mode): the adjoint of reflect/replicate/circular pad.
void pad_backward_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  using A = PadBackwardAttrs;
  const DimVector& isz = A::get<"input_size">(a);
  DimVector osz = pad_sizes(isz, A::get<"pad">(a), pad_mode(A::get<"mode">(a)));
  OF_CHECK(in[0].sizes() == IntArrayRef(osz),
           "[pad_backward] gradient shape {} does not match the "
           "padded shape {}",
           shape_str(in[0].sizes()), shape_str(osz));
  out.push_back({isz, {}, 0, in[0].dtype(), in[0].device()});
}
TensorList pad_backward_vjp(const VjpCtx& c, const TensorList& g) {
  return {
      pad(g[0], PadBackwardAttrs::get<"pad">(c.attrs()), PadBackwardAttrs::get<"mode">(c.attrs()))};
}

// ---------------------------------------------------------------- tril / triu

template <bool Lower> void tri_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& x = in[0];
  OF_CHECK(x.dim() >= 2, "[{}] input tensor must have at least 2 dimensions, got shape {}",
           Lower ? "tril" : "triu", shape_str(x.sizes()));
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}
TensorList tril_vjp(const VjpCtx& c, const TensorList& g) {
  return {tril(g[0], TriAttrs::get<"diagonal">(c.attrs()))};
}
TensorList triu_vjp(const VjpCtx& c, const TensorList& g) {
  return {triu(g[0], TriAttrs::get<"diagonal">(c.attrs()))};
}

// ---------------------------------------------------------------- flip / roll / repeat

void flip_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  flip_dims(in[0], DimsAttrs::get<"dims">(a));
  out.push_back({in[0].sizes().dims(), {}, 0, in[0].dtype(), in[0].device()});
}
TensorList flip_vjp(const VjpCtx& c, const TensorList& g) {
  return {flip(g[0], DimsAttrs::get<"dims">(c.attrs()))};
}

void roll_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const DimVector &shifts = RollAttrs::get<"shifts">(a), &dims = RollAttrs::get<"dims">(a);
  OF_CHECK(shifts.size() == dims.size(),
           "[roll] shifts and dimensions must align: got {} shifts and "
           "{} dims",
           shifts.size(), dims.size());
  for (int64_t d : dims) wrap_dim(d, x.dim(), "roll");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}
TensorList roll_vjp(const VjpCtx& c, const TensorList& g) {
  const IntArrayRef sz = c.input_sizes(0);
  const DimVector& dims = RollAttrs::get<"dims">(c.attrs());
  DimVector neg;  // -(shift % size): -INT64_MIN would overflow
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = sz.empty() ? 1 : sz[size_t(wrap_dim(dims[i], int64_t(sz.size()), "roll"))];
    neg.push_back(n ? -(RollAttrs::get<"shifts">(c.attrs())[i] % n) : 0);
  }
  return {roll(g[0], neg, RollAttrs::get<"dims">(c.attrs()))};
}

void repeat_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const DimVector& r = RepeatAttrs::get<"repeats">(a);
  OF_CHECK(int64_t(r.size()) >= x.dim(),
           "[repeat] number of dimensions of repeat dims {} can not be "
           "smaller than number of dimensions of tensor {}",
           shape_str(r), shape_str(x.sizes()));
  DimVector sz(r.size());
  const int64_t lead = int64_t(r.size()) - x.dim();
  for (int64_t d = 0; d < int64_t(r.size()); ++d) {
    OF_CHECK(r[d] >= 0, "[repeat] repeats must be non-negative, got {}", shape_str(r));
    OF_CHECK(!__builtin_mul_overflow(r[d], d < lead ? 1 : x.sizes()[d - lead], &sz[d]),
             "[repeat] repeats {} of a tensor of shape {} overflow the size of a dimension",
             shape_str(r), shape_str(x.sizes()));
  }
  checked_numel(sz, "repeat");
  out.push_back({sz, {}, 0, x.dtype(), x.device()});
}
TensorList repeat_vjp(const VjpCtx& c, const TensorList& g) {
  const DimVector& r = RepeatAttrs::get<"repeats">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const int64_t nd = int64_t(r.size()), lead = nd - int64_t(in.size());
  DimVector split, sum_dims;
  for (int64_t d = 0; d < nd; ++d) {
    split.push_back(r[d]);
    split.push_back(d < lead ? 1 : in[d - lead]);
    sum_dims.push_back(2 * d);
  }
  return {g[0].reshape(split).sum(sum_dims).reshape(in)};
}

}  // namespace

void register_move_ops() {
  register_op({.name = "cat",
               .attr_names = DimAttrs::names(),
               .attr_types = DimAttrs::types(),
               .infer_meta = cat_meta,
               .cpu = cpu::cat,
               .vjp = cat_vjp,
               .sbp_rule = &sbp_rules::kLinearAlongOneDim,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "pad",
               .attr_names = PadAttrs::names(),
               .attr_types = PadAttrs::types(),
               .infer_meta = pad_meta,
               .cpu = cpu::pad,
               .vjp = pad_vjp,
               .sbp_rule = &sbp_rules::kAlongPaddedDims});
  register_op({.name = "pad_backward",
               .attr_names = PadBackwardAttrs::names(),
               .attr_types = PadBackwardAttrs::types(),
               .infer_meta = pad_backward_meta,
               .cpu = cpu::pad_backward,
               .vjp = pad_backward_vjp,
               .sbp_rule = &sbp_rules::kWholeValues});
  register_op({.name = "tril",
               .attr_names = TriAttrs::names(),
               .attr_types = TriAttrs::types(),
               .infer_meta = tri_meta<true>,
               .cpu = cpu::tril,
               .vjp = tril_vjp,
               .sbp_rule = &sbp_rules::kLinearAlongLastTwoDims});
  register_op({.name = "triu",
               .attr_names = TriAttrs::names(),
               .attr_types = TriAttrs::types(),
               .infer_meta = tri_meta<false>,
               .cpu = cpu::triu,
               .vjp = triu_vjp,
               .sbp_rule = &sbp_rules::kLinearAlongLastTwoDims});
  register_op({.name = "flip",
               .attr_names = DimsAttrs::names(),
               .attr_types = DimsAttrs::types(),
               .infer_meta = flip_meta,
               .cpu = cpu::flip,
               .vjp = flip_vjp,
               .sbp_rule = &sbp_rules::kLinearAlongDims});
  register_op({.name = "roll",
               .attr_names = RollAttrs::names(),
               .attr_types = RollAttrs::types(),
               .infer_meta = roll_meta,
               .cpu = cpu::roll,
               .vjp = roll_vjp,
               .sbp_rule = &sbp_rules::kLinearAlongDimsOrFlat});
  register_op({.name = "repeat",
               .attr_names = RepeatAttrs::names(),
               .attr_types = RepeatAttrs::types(),
               .infer_meta = repeat_meta,
               .cpu = cpu::repeat,
               .vjp = repeat_vjp,
               .sbp_rule = &sbp_rules::kRepeatedDims});
}

// ---------------------------------------------------------------- public functions

namespace {
// PyTorch's legacy rule: 1-D empty tensors of shape (0,) are skipped by cat.
bool legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }
}  // namespace

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  OF_CHECK(!ts.empty(), "[cat] expected a non-empty list of tensors");
  TensorList all;
  for (size_t i = 0; i < ts.size(); ++i) {
    OF_CHECK(ts[i].defined(), "[cat] tensor number {} in the list is undefined", i);
    all.push_back(ts[i]);
  }
  TensorList use;
  for (const Tensor& t : all)
    if (!legacy_empty(t)) use.push_back(t);
  if (use.empty()) use.push_back(all[0]);
  const int64_t d = wrap_dim(dim, use[0].dim(), "cat");
  check_cat(use, d);
  const ScalarType dt = result_type(all);
  for (Tensor& t : use) t = cast_if_needed(t, dt);
  if (use.size() == 1) return dispatch1(OF_OP("cat"), {use[0]}, DimAttrs::make(d));
  // Autograd masks hold 32 inputs: concatenate longer lists in groups.
  if (use.size() > 32) {
    std::vector<Tensor> parts;
    for (size_t b = 0; b < use.size(); b += 32) {
      std::vector<Tensor> grp(use.begin() + b, use.begin() + std::min(use.size(), b + 32));
      parts.push_back(cat(grp, d));
    }
    return cat(parts, d);
  }
  return dispatch1(OF_OP("cat"), use, DimAttrs::make(d));
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  OF_CHECK(!ts.empty(), "[stack] expects a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    OF_CHECK(ts[i].defined(), "[stack] tensor number {} in the list is undefined", i);
    if (!(ts[i].sizes() == ts[0].sizes()))
      fail("[stack] expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
           shape_str(ts[0].sizes()), shape_str(ts[i].sizes()), i);
  }
  const int64_t d = wrap_dim(dim, ts[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  u.reserve(ts.size());
  for (const Tensor& t : ts) u.push_back(t.unsqueeze(d));
  return cat(u, d);
}

std::vector<Tensor> split(const Tensor& x, IntArrayRef split_sizes, int64_t dim) {
  check_defined("split", x);
  OF_CHECK(x.dim() > 0, "[split] expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.sizes()[d];
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    OF_CHECK(s >= 0, "[split] split sizes must be non-negative, got {}", shape_str(split_sizes));
    total += s;
  }
  OF_CHECK(total == n, "[split] split sizes {} must sum to the size {} of dimension {} (input {})",
           shape_str(split_sizes), n, d, shape_str(x.sizes()));
  std::vector<Tensor> r;
  int64_t off = 0;
  for (int64_t s : split_sizes) {
    r.push_back(x.narrow(d, off, s));
    off += s;
  }
  return r;
}
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined("split", x);
  OF_CHECK(x.dim() > 0, "[split] expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.sizes()[d];
  OF_CHECK(split_size > 0 || (split_size == 0 && n == 0),
           "[split] split_size must be positive, got {} (dimension {} has size {})", split_size, d,
           n);
  if (n == 0) return {x.narrow(d, 0, 0)};
  std::vector<Tensor> r;
  for (int64_t off = 0; off < n; off += split_size)
    r.push_back(x.narrow(d, off, std::min(split_size, n - off)));
  return r;
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_defined("chunk", x);
  OF_CHECK(chunks > 0, "[chunk] number of chunks must be greater than 0, got {}", chunks);
  OF_CHECK(x.dim() > 0, "[chunk] expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.sizes()[d];
  if (n == 0) return split(x, DimVector(size_t(chunks), 0), d);
  return split(x, (n + chunks - 1) / chunks, d);
}
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  check_defined("unbind", x);
  OF_CHECK(x.dim() > 0, "[unbind] dimension specified as {} but tensor has no dimensions", dim);
  const int64_t d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> r;
  for (int64_t i = 0; i < x.sizes()[d]; ++i) r.push_back(x.select(d, i));
  return r;
}

Tensor pad(const Tensor& x, IntArrayRef pads, std::string_view mode, double value) {
  check_defined("pad", x);
  PadMode m = pad_mode(mode);
  OF_CHECK(m == PadMode::kConstant || value == 0,
           "[pad] padding mode '{}' doesn't take in value argument (got {})", mode, value);
  pad_sizes(x.sizes(), pads.dims(), m);
  return dispatch1(OF_OP("pad"), {x}, PadAttrs::make(pads.dims(), std::string(mode), value));
}
Tensor tril(const Tensor& x, int64_t diagonal) {
  check_defined("tril", x);
  return dispatch1(OF_OP("tril"), {x}, TriAttrs::make(diagonal));
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  check_defined("triu", x);
  return dispatch1(OF_OP("triu"), {x}, TriAttrs::make(diagonal));
}
Tensor flip(const Tensor& x, IntArrayRef dims) {
  check_defined("flip", x);
  return dispatch1(OF_OP("flip"), {x}, DimsAttrs::make(dims.dims()));
}
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  check_defined("roll", x);
  if (dims.empty()) {
    OF_CHECK(shifts.size() == 1,
             "[roll] without dims, shifts must have exactly one element, got {}",
             shape_str(shifts));
    DimVector shape = x.sizes().dims();
    return dispatch1(OF_OP("roll"), {x.reshape({-1})}, RollAttrs::make(shifts.dims(), DimVector{0}))
        .view(shape);
  }
  return dispatch1(OF_OP("roll"), {x}, RollAttrs::make(shifts.dims(), dims.dims()));
}
Tensor repeat(const Tensor& x, IntArrayRef repeats) {
  check_defined("repeat", x);
  return dispatch1(OF_OP("repeat"), {x}, RepeatAttrs::make(repeats.dims()));
}
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  check_defined("repeat_interleave", x);
  OF_CHECK(repeats >= 0, "[repeat_interleave] repeats must be non-negative, got {}", repeats);
  Tensor src = dim ? x : x.reshape({-1});
  if (src.dim() == 0) src = src.reshape({1});
  const int64_t d = dim ? wrap_dim(*dim, src.dim(), "repeat_interleave") : 0;
  const int64_t n = src.sizes()[d];
  std::vector<int64_t> idx;
  idx.reserve(size_t(n * repeats));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < repeats; ++r) idx.push_back(i);
  Tensor it = tensor(idx, {int64_t(idx.size())}, TensorOptions(kInt64).device(x.device()));
  return index_select(src, d, broadcast_like(it, x));
}
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  check_defined("repeat_interleave", x);
  check_defined("repeat_interleave", repeats, "repeats");
  check_index_dtype(repeats, "repeat_interleave", true, "repeats");
  OF_CHECK(repeats.dim() <= 1, "[repeat_interleave] repeats must be 0-d or 1-D, got shape {}",
           shape_str(repeats.sizes()));
  Tensor src = dim ? x : x.reshape({-1});
  if (src.dim() == 0) src = src.reshape({1});
  const int64_t d = dim ? wrap_dim(*dim, src.dim(), "repeat_interleave") : 0;
  const int64_t n = src.sizes()[d];
  std::vector<int64_t> reps = repeats.to_vector<int64_t>();  // host read: the shape depends on data
  if (reps.size() == 1 && n != 1) reps.assign(size_t(n), reps[0]);
  OF_CHECK(int64_t(reps.size()) == n,
           "[repeat_interleave] repeats must have the same size as input "
           "along dim {}: got {} repeats for size {}",
           d, reps.size(), n);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) {
    OF_CHECK(reps[i] >= 0, "[repeat_interleave] repeats can not be negative, got {}", reps[i]);
    for (int64_t r = 0; r < reps[i]; ++r) idx.push_back(i);
  }
  Tensor it = tensor(idx, {int64_t(idx.size())}, TensorOptions(kInt64).device(x.device()));
  return index_select(src, d, broadcast_like(it, x));
}

// ---------------------------------------------------------------- Tensor methods

std::vector<Tensor> Tensor::split(int64_t s, int64_t dim) const {
  return oneflow::split(*this, s, dim);
}
std::vector<Tensor> Tensor::split(IntArrayRef s, int64_t dim) const {
  return oneflow::split(*this, s, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t c, int64_t dim) const {
  return oneflow::chunk(*this, c, dim);
}
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return oneflow::unbind(*this, dim); }
Tensor Tensor::tril(int64_t diagonal) const { return oneflow::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return oneflow::triu(*this, diagonal); }
Tensor Tensor::flip(IntArrayRef dims) const { return oneflow::flip(*this, dims); }
Tensor Tensor::roll(IntArrayRef shifts, IntArrayRef dims) const {
  return oneflow::roll(*this, shifts, dims);
}
Tensor Tensor::repeat(IntArrayRef repeats) const { return oneflow::repeat(*this, repeats); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return oneflow::repeat_interleave(*this, repeats, dim);
}

}  // namespace oneflow

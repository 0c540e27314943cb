// Reductions beyond sum/mean/all/any: prod, amax/amin (max()/min()), max/min over a dim,
// argmax/argmin, var/std, logsumexp, norm, cumsum/cumprod, softmax/log_softmax: their meta,
// VJPs, registration and public functions. Kernels: src/cpu/reduce_extra.cpp (NOTE [Reduce extra
// kernels]).
#include <cmath>

#include "autograd/node.h"
#include "cpu/reduce_extra.h"
#include "oneflow/global.h"
#include "global/rules.h"
#include "ops/checks.h"
#include "ops/reduce_common.h"

namespace oneflow {

using namespace reduce_detail;

namespace {

// ---------------------------------------------------------------- validation

// Reductions without an identity (max, argmax, ...) refuse zero-size reduced dims.
void check_nonempty(const Tensor& x, const DimVector& dims, const char* op) {
  if (x.dim() == 0) return;
  for (int64_t d : dims)
    if (x.sizes()[d] == 0)
      fail(
          "[{}] cannot reduce over dimension {} of size 0 (input shape {}): the operation has "
          "no identity",
          op, d, shape_str(x.sizes()));
}
DimVector all_dims(const Tensor& x) {
  DimVector r;
  for (int64_t d = 0; d < x.dim(); ++d) r.push_back(d);
  return r;
}
int64_t reduced_count(IntArrayRef sizes, const DimVector& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[d];
  return n;
}
// g of a reduction output, reshaped to keepdim form (broadcastable against the input).
Tensor keepdim_view(const Tensor& g, IntArrayRef in_sizes, const DimVector& dims, bool keepdim) {
  return keepdim ? g : g.reshape(reduced_shape(in_sizes, dims, true));
}

// ---------------------------------------------------------------- infer_meta

void prod_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  reduce_meta(in, a, out, "prod");
}
template <bool IsMax> void extreme_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = IsMax ? "amax" : "amin";
  reduce_meta(in, a, out, op);  // checks the dims check_nonempty reads
  check_nonempty(in[0], ReduceAttrs::get<"dims">(a), op);
  out[0].dtype = in[0].dtype();
}
template <bool IsMax> void max_dim_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = IsMax ? "max" : "min";
  const Tensor& x = in[0];
  const int64_t d = wrap_dim(DimReduceAttrs::get<"dim">(a), x.dim(), op);
  DimVector dims;
  if (x.dim() > 0) dims.push_back(d);
  check_nonempty(x, dims, op);
  DimVector shape = reduced_shape(x.sizes(), dims, DimReduceAttrs::get<"keepdim">(a));
  out.push_back({shape, {}, 0, x.dtype(), x.device()});
  out.push_back({shape, {}, 0, kInt64, x.device()});
}
template <bool IsMax> void argmax_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = IsMax ? "argmax" : "argmin";
  const Tensor& x = in[0];
  DimVector shape;
  if (const std::optional<int64_t> dim = ArgExtremeAttrs::get<"dim">(a)) {
    const int64_t d = wrap_dim(*dim, x.dim(), op);
    DimVector dims;
    if (x.dim() > 0) dims.push_back(d);
    check_nonempty(x, dims, op);
    shape = reduced_shape(x.sizes(), dims, ArgExtremeAttrs::get<"keepdim">(a));
  } else {
    if (x.numel() == 0)
      fail("[{}] cannot take the {} of an empty tensor of shape {}: specify a dim of nonzero size",
           op, op, shape_str(x.sizes()));
    if (ArgExtremeAttrs::get<"keepdim">(a)) shape = DimVector(size_t(x.dim()), 1);
  }
  out.push_back({shape, {}, 0, kInt64, x.device()});
}
template <bool Sqrt> void var_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = Sqrt ? "std" : "var";
  check_float(op, in[0], "tensor");
  reduce_meta(in, a, out, op);
  out[0].dtype = in[0].dtype();
}
void logsumexp_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  check_float("logsumexp", in[0], "tensor");
  reduce_meta(in, a, out, "logsumexp");
  out[0].dtype = in[0].dtype();
}
void norm_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  check_float("norm", in[0], "tensor");
  reduce_meta(in, a, out, "norm");
  const double p = NormReduceAttrs::get<"p">(a);
  if (std::isnan(p)) fail("[norm] p must not be NaN");
  if (std::isinf(p)) check_nonempty(in[0], NormReduceAttrs::get<"dims">(a), "norm");
  out[0].dtype = in[0].dtype();
}
template <bool Log> void softmax_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = Log ? "log_softmax" : "softmax";
  check_float(op, in[0], "tensor");
  wrap_dim(SoftmaxAttrs::get<"dim">(a), in[0].dim(), op);
  out.push_back({in[0].sizes().dims(), {}, 0, in[0].dtype(), in[0].device()});
}
template <bool Prod> void scan_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = Prod ? "cumprod" : "cumsum";
  const ScalarType t = in[0].dtype();
  if (t != kInt64 && !is_floating_point(t))
    fail("[{}] internal: input must be int64 or floating point, got {}", op, dtype_name(t));
  wrap_dim(ScanAttrs::get<"dim">(a), in[0].dim(), op);
  out.push_back({in[0].sizes().dims(), {}, 0, t, in[0].device()});
}

// ---------------------------------------------------------------- dispatch helpers

Tensor prod_impl(const Tensor& x, const DimVector& dims, bool keepdim, ScalarType out) {
  return dispatch1(OF_OP("prod"), {x}, ReduceAttrs::make(dims, keepdim, out));
}
Tensor extreme_impl(bool is_max, const Tensor& x, IntArrayRef dims, bool keepdim, const char* op) {
  check_defined(op, x);
  DimVector d = normalize_reduce_dims(x, dims, op);
  check_nonempty(x, d, op);
  return dispatch1(is_max ? OF_OP("amax") : OF_OP("amin"), {x},
                   ReduceAttrs::make(d, keepdim, x.dtype()));
}
Tensor scan_impl(bool prod, const Tensor& x, int64_t dim, bool reverse) {
  return dispatch1(prod ? OF_OP("cumprod") : OF_OP("cumsum"), {x}, ScanAttrs::make(dim, reverse));
}

// ---------------------------------------------------------------- VJPs (public ops only)

TensorList prod_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  const DimVector& dims = ReduceAttrs::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  Tensor gk = keepdim_view(g[0], in, dims, ReduceAttrs::get<"keepdim">(c.attrs()));
  // zeros handled like PyTorch: one zero gets the product of the others, two or more give 0
  Tensor z = x == 0;
  Tensor cnt = sum(z, dims, true);
  Tensor xs = where(z, Scalar(1.0), x);
  Tensor p = prod_impl(xs, dims, true, x.dtype());
  Tensor r = where(cnt == 0, p / xs, where(z & (cnt == 1), p, Scalar(0.0)));
  return {r * gk};
}
TensorList extreme_vjp(const VjpCtx& c, const TensorList& g) {
  // ties: the gradient is split evenly among the extreme elements
  Tensor x = c.input(0);
  const DimVector& dims = ReduceAttrs::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = ReduceAttrs::get<"keepdim">(c.attrs());
  Tensor yk = keepdim_view(c.output(0), in, dims, keep);
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  Tensor mask = (x == yk).to(g[0].dtype());
  Tensor cnt = sum(mask, dims, true);
  return {gk * mask / cnt};
}
TensorList max_dim_vjp(const VjpCtx& c, const TensorList& g) {
  IntArrayRef in = c.input_sizes(0);
  const int64_t nd = int64_t(in.size());
  if (nd == 0) return {g[0]};
  const int64_t d = wrap_dim(DimReduceAttrs::get<"dim">(c.attrs()), nd, "max");
  Tensor idx = c.output(1), gv = g[0];
  if (!DimReduceAttrs::get<"keepdim">(c.attrs())) {
    idx = idx.unsqueeze(d);
    gv = gv.unsqueeze(d);
  }
  DimVector ar_shape(size_t(nd - d), 1);
  ar_shape[0] = in[d];
  // the arange on the indices' device (a global one's is its pieces')
  Tensor ar = broadcast_like(
      arange(in[d], TensorOptions(kInt64).device(idx.device())).reshape(ar_shape), idx);
  return {where(ar == idx, gv, Scalar(0.0))};
}
template <bool Sqrt> TensorList var_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  using A = VarAttrs;
  const DimVector& dims = A::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = A::get<"keepdim">(c.attrs());
  const double denom =
      std::max(0.0, double(reduced_count(in, dims)) - double(A::get<"correction">(c.attrs())));
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  Tensor centered = x - mean(x, dims, true);
  if constexpr (Sqrt) {
    Tensor yk = keepdim_view(c.output(0), in, dims, keep);
    Tensor gs = where(yk == 0, Scalar(0.0), gk / yk);  // PyTorch: zero std gives zero grad
    return {gs * centered / denom};
  } else {
    return {gk * centered * (2.0 / denom)};
  }
}
TensorList logsumexp_vjp(const VjpCtx& c, const TensorList& g) {
  const DimVector& dims = ReduceAttrs::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = ReduceAttrs::get<"keepdim">(c.attrs());
  Tensor yk = keepdim_view(c.output(0), in, dims, keep);
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  return {gk * (c.input(0) - yk).exp()};
}
TensorList norm_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  using A = NormReduceAttrs;
  const DimVector& dims = A::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = A::get<"keepdim">(c.attrs());
  const double p = A::get<"p">(c.attrs());
  Tensor yk = keepdim_view(c.output(0), in, dims, keep);
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  if (p == 0) return {zeros_like(x)};
  if (p == 1) return {gk * x.sign()};
  if (p == 2) return {where(yk == 0, Scalar(0.0), gk / yk) * x};
  if (std::isinf(p)) {
    Tensor mask = (x.abs() == yk).to(g[0].dtype());
    Tensor cnt = sum(mask, dims, true);
    return {gk * x.sign() * mask / cnt};
  }
  Tensor scale = where(yk == 0, Scalar(0.0), gk / yk.pow(p - 1));
  return {scale * x * x.abs().pow(p - 2)};
}
TensorList softmax_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  const int64_t d = SoftmaxAttrs::get<"dim">(c.attrs());
  return {y * (g[0] - sum(g[0] * y, {d}, true))};
}
TensorList log_softmax_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  const int64_t d = SoftmaxAttrs::get<"dim">(c.attrs());
  return {g[0] - y.exp() * sum(g[0], {d}, true)};
}
TensorList cumsum_vjp(const VjpCtx& c, const TensorList& g) {
  return {scan_impl(false, g[0], ScanAttrs::get<"dim">(c.attrs()),
                    !ScanAttrs::get<"reverse">(c.attrs()))};
}
TensorList cumprod_vjp(const VjpCtx& c, const TensorList& g) {
  // PyTorch-correct with zeros: before the first zero of a line, grad_i = sum_{j>=i} g_j y_j / x_i;
  // at the first zero, grad = sum_{j>=k} g_j * (cumprod with that zero replaced by 1)_j; after, 0.
  Tensor x = c.input(0), y = c.output(0);
  if (x.dim() == 0) return {g[0]};
  const int64_t d = ScanAttrs::get<"dim">(c.attrs());
  const bool rev = ScanAttrs::get<"reverse">(c.attrs());
  Tensor z = x == 0;
  Tensor zc = scan_impl(false, z.to(kInt64), d, rev);
  Tensor before = zc == 0;
  Tensor first = z & (zc == 1);
  Tensor part1 = where(before, scan_impl(false, g[0] * y, d, !rev) / where(before, x, Scalar(1.0)),
                       Scalar(0.0));
  Tensor y1 = scan_impl(true, where(first, Scalar(1.0), x), d, rev);
  Tensor part2 = where(first, scan_impl(false, g[0] * y1, d, !rev), Scalar(0.0));
  return {part1 + part2};
}

}  // namespace

void register_reduce_ops_extra() {
  register_op({.name = "prod",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = prod_meta,
               .cpu = cpu::prod,
               .vjp = prod_vjp,
               .save_inputs = in(0),
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "amax",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = extreme_meta<true>,
               .cpu = cpu::amax,
               .vjp = extreme_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0)});
  register_op({.name = "amin",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = extreme_meta<false>,
               .cpu = cpu::amin,
               .vjp = extreme_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0)});
  register_op({.name = "max_dim",
               .traits = kReduction,
               .attr_names = DimReduceAttrs::names(),
               .attr_types = DimReduceAttrs::types(),
               .infer_meta = max_dim_meta<true>,
               .cpu = cpu::max_dim,
               .vjp = max_dim_vjp,
               .save_outputs = out(1),
               .contiguous_inputs = kEveryInput});
  register_op({.name = "min_dim",
               .traits = kReduction,
               .attr_names = DimReduceAttrs::names(),
               .attr_types = DimReduceAttrs::types(),
               .infer_meta = max_dim_meta<false>,
               .cpu = cpu::min_dim,
               .vjp = max_dim_vjp,
               .save_outputs = out(1),
               .contiguous_inputs = kEveryInput});
  register_op({.name = "argmax",
               .traits = kReduction,
               .attr_names = ArgExtremeAttrs::names(),
               .attr_types = ArgExtremeAttrs::types(),
               .infer_meta = argmax_meta<true>,
               .cpu = cpu::argmax,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "argmin",
               .traits = kReduction,
               .attr_names = ArgExtremeAttrs::names(),
               .attr_types = ArgExtremeAttrs::types(),
               .infer_meta = argmax_meta<false>,
               .cpu = cpu::argmin,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "var",
               .traits = kReduction,
               .attr_names = VarAttrs::names(),
               .attr_types = VarAttrs::types(),
               .infer_meta = var_meta<false>,
               .cpu = cpu::var,
               .vjp = var_vjp<false>,
               .save_inputs = in(0),
               .contiguous_inputs = kEveryInput});
  register_op({.name = "std",
               .traits = kReduction,
               .attr_names = VarAttrs::names(),
               .attr_types = VarAttrs::types(),
               .infer_meta = var_meta<true>,
               .cpu = cpu::std,
               .vjp = var_vjp<true>,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .contiguous_inputs = kEveryInput});
  register_op({.name = "logsumexp",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = logsumexp_meta,
               .cpu = cpu::logsumexp,
               .vjp = logsumexp_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "norm",
               .traits = kReduction,
               .attr_names = NormReduceAttrs::names(),
               .attr_types = NormReduceAttrs::types(),
               .infer_meta = norm_meta,
               .cpu = cpu::norm,
               .vjp = norm_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cumsum",
               .attr_names = ScanAttrs::names(),
               .attr_types = ScanAttrs::types(),
               .infer_meta = scan_meta<false>,
               .cpu = cpu::cumsum,
               .vjp = cumsum_vjp,
               .sbp_rule = &sbp_rules::kLinearAlongOneDim,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cumprod",
               .attr_names = ScanAttrs::names(),
               .attr_types = ScanAttrs::types(),
               .infer_meta = scan_meta<true>,
               .cpu = cpu::cumprod,
               .vjp = cumprod_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .sbp_rule = &sbp_rules::kAlongOneDim,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "softmax",
               .traits = kCheapRecompute,
               .attr_names = SoftmaxAttrs::names(),
               .attr_types = SoftmaxAttrs::types(),
               .infer_meta = softmax_meta<false>,
               .cpu = cpu::softmax,
               .vjp = softmax_vjp,
               .save_outputs = out(0),
               .sbp_rule = &sbp_rules::kAlongOneDim,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "log_softmax",
               .traits = kCheapRecompute,
               .attr_names = SoftmaxAttrs::names(),
               .attr_types = SoftmaxAttrs::types(),
               .infer_meta = softmax_meta<true>,
               .cpu = cpu::log_softmax,
               .vjp = log_softmax_vjp,
               .save_outputs = out(0),
               .sbp_rule = &sbp_rules::kAlongOneDim,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
}

// ---------------------------------------------------------------- public functions

// prod: integers (and bool) accumulate into int64 like sum; dtype= casts the input first.
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  check_defined("prod", x);
  DimVector d = normalize_reduce_dims(x, {dim}, "prod");
  Tensor in = dtype ? cast_if_needed(x, *dtype) : x;
  ScalarType out = is_floating_point(in.dtype()) || dtype ? in.dtype() : kInt64;
  return prod_impl(in, d, keepdim, out);
}
Tensor prod(const Tensor& x, std::optional<ScalarType> dtype) {
  check_defined("prod", x);
  Tensor in = dtype ? cast_if_needed(x, *dtype) : x;
  ScalarType out = is_floating_point(in.dtype()) || dtype ? in.dtype() : kInt64;
  return prod_impl(in, all_dims(x), false, out);
}

Tensor max(const Tensor& x) {
  check_defined("max", x);
  return extreme_impl(true, x, {}, false, "max");
}
Tensor min(const Tensor& x) {
  check_defined("min", x);
  return extreme_impl(false, x, {}, false, "min");
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_impl(true, x, dims, keepdim, "amax");
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_impl(false, x, dims, keepdim, "amin");
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("max", x);
  int64_t d = wrap_dim(dim, x.dim(), "max");
  TensorList r = dispatch(OF_OP("max_dim"), {x}, DimReduceAttrs::make(d, keepdim));
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("min", x);
  int64_t d = wrap_dim(dim, x.dim(), "min");
  TensorList r = dispatch(OF_OP("min_dim"), {x}, DimReduceAttrs::make(d, keepdim));
  return {r[0], r[1]};
}
namespace {
Tensor argext(bool is_max, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  const char* op = is_max ? "argmax" : "argmin";
  check_defined(op, x);
  std::optional<int64_t> d;
  if (dim) d = wrap_dim(*dim, x.dim(), op);
  return dispatch1(is_max ? OF_OP("argmax") : OF_OP("argmin"), {x},
                   ArgExtremeAttrs::make(d, keepdim));
}
Tensor var_std(bool is_std, const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  const char* op = is_std ? "std" : "var";
  check_defined(op, x);
  check_float(op, x, "tensor");
  DimVector d = normalize_reduce_dims(x, dims, op);
  return dispatch1(is_std ? OF_OP("std") : OF_OP("var"), {x},
                   VarAttrs::make(d, keepdim, x.dtype(), correction));
}
Tensor softmax_impl(bool log, const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  const char* op = log ? "log_softmax" : "softmax";
  check_defined(op, x);
  Tensor in = dtype ? cast_if_needed(x, *dtype) : x;
  check_float(op, in, "tensor");
  int64_t d = wrap_dim(dim, x.dim(), op);
  return dispatch1(log ? OF_OP("log_softmax") : OF_OP("softmax"), {in}, SoftmaxAttrs::make(d));
}
Tensor scan_public(bool prod, const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  const char* op = prod ? "cumprod" : "cumsum";
  check_defined(op, x);
  int64_t d = wrap_dim(dim, x.dim(), op);
  ScalarType t = dtype.value_or(is_floating_point(x.dtype()) ? x.dtype() : kInt64);
  if (!is_floating_point(t) && t != kInt64)
    fail("[{}] dtype {} is not supported: use int64 or a floating-point dtype", op, dtype_name(t));
  return scan_impl(prod, cast_if_needed(x, t), d, false);
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return argext(true, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return argext(false, x, dim, keepdim);
}

Tensor var(const Tensor& x, bool unbiased) {
  return var_std(false, x, {}, unbiased ? 1 : 0, false);
}
Tensor var(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return var_std(false, x, dims, unbiased ? 1 : 0, keepdim);
}
Tensor var(const Tensor& x, std::optional<IntArrayRef> dims, std::optional<int64_t> correction,
           bool keepdim) {
  return var_std(false, x, dims ? *dims : IntArrayRef(), correction.value_or(1), keepdim);
}
Tensor std(const Tensor& x, bool unbiased) { return var_std(true, x, {}, unbiased ? 1 : 0, false); }
Tensor std(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return var_std(true, x, dims, unbiased ? 1 : 0, keepdim);
}
Tensor std(const Tensor& x, std::optional<IntArrayRef> dims, std::optional<int64_t> correction,
           bool keepdim) {
  return var_std(true, x, dims ? *dims : IntArrayRef(), correction.value_or(1), keepdim);
}

Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) {
  check_defined("logsumexp", x);
  check_float("logsumexp", x, "tensor");
  DimVector d = normalize_reduce_dims(x, dims, "logsumexp");
  return dispatch1(OF_OP("logsumexp"), {x}, ReduceAttrs::make(d, keepdim, x.dtype()));
}

Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dims, bool keepdim) {
  check_defined("norm", x);
  check_float("norm", x, "tensor");
  DimVector d = normalize_reduce_dims(x, dims, "norm");
  return dispatch1(OF_OP("norm"), {x}, NormReduceAttrs::make(d, keepdim, x.dtype(), p.to_double()));
}
Tensor norm(const Tensor& x, const Scalar& p) { return norm(x, p, {}, false); }

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_public(false, x, dim, dtype);
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_public(true, x, dim, dtype);
}
Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl(false, x, dim, dtype);
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl(true, x, dim, dtype);
}

// ---------------------------------------------------------------- Tensor methods

Tensor Tensor::prod(std::optional<ScalarType> dtype) const { return oneflow::prod(*this, dtype); }
Tensor Tensor::prod(int64_t dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return oneflow::prod(*this, dim, keepdim, dtype);
}
Tensor Tensor::max() const { return oneflow::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return oneflow::max(*this, dim, keepdim);
}
Tensor Tensor::min() const { return oneflow::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return oneflow::min(*this, dim, keepdim);
}
Tensor Tensor::amax(IntArrayRef dims, bool keepdim) const {
  return oneflow::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(IntArrayRef dims, bool keepdim) const {
  return oneflow::amin(*this, dims, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return oneflow::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return oneflow::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(bool unbiased) const { return oneflow::var(*this, unbiased); }
Tensor Tensor::var(IntArrayRef dims, bool unbiased, bool keepdim) const {
  return oneflow::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(bool unbiased) const { return oneflow::std(*this, unbiased); }
Tensor Tensor::std(IntArrayRef dims, bool unbiased, bool keepdim) const {
  return oneflow::std(*this, dims, unbiased, keepdim);
}
Tensor Tensor::logsumexp(IntArrayRef dims, bool keepdim) const {
  return oneflow::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(const Scalar& p) const { return oneflow::norm(*this, p); }
Tensor Tensor::norm(const Scalar& p, IntArrayRef dims, bool keepdim) const {
  return oneflow::norm(*this, p, dims, keepdim);
}
Tensor Tensor::cumsum(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::cumsum(*this, dim, dtype);
}
Tensor Tensor::cumprod(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::cumprod(*this, dim, dtype);
}
Tensor Tensor::softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::softmax(*this, dim, dtype);
}
Tensor Tensor::log_softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::log_softmax(*this, dim, dtype);
}

}  // namespace oneflow

// reduce.cpp: host side of the CUDA reductions, softmax and scans (NOTE [CUDA reductions] in
// reduce.cu): the input canonicalized to [outer, n, inner] as the CPU kernels do it
// (ops/reduce_common.h), the output written in the op's natural dtype (through a temporary and
// copy_ when another one was asked for), and the kernels the module puts into the op table.
#include <cmath>
#include <string>
#include <variant>

#include "cuda/cuda_check.h"
#include "cuda/elementwise.h"
#include "cuda/module.h"
#include "cuda/reduce.h"
#include "ops/reduce_common.h"

namespace oneflow::cuda_module {
namespace {

// the ops' attribute schemas (ops/reduce_common.h)
using reduce_detail::ArgExtremeAttrs;
using reduce_detail::DimAttrs;
using reduce_detail::DimReduceAttrs;
using reduce_detail::NormReduceAttrs;
using reduce_detail::ReduceAttrs;
using reduce_detail::ScanAttrs;
using reduce_detail::VarAttrs;

const char* op_name(RedOp op) {
  switch (op) {
    case RedOp::sum:
      return "sum";
    case RedOp::prod:
      return "prod";
    case RedOp::mean:
      return "mean";
    case RedOp::amax:
      return "amax";
    case RedOp::amin:
      return "amin";
    case RedOp::all:
      return "all";
    case RedOp::any:
      return "any";
    case RedOp::norm0:
    case RedOp::norm1:
    case RedOp::norm2:
    case RedOp::norm_inf:
    case RedOp::norm_neginf:
      return "norm";
    case RedOp::mean_d:
    case RedOp::sqdev:
      return "var";
    case RedOp::max_shift:
    case RedOp::logsumexp:
      return "logsumexp";
    case RedOp::argmax:
      return "argmax";
    case RedOp::argmin:
      return "argmin";
  }
  return "reduction";
}

void check_cuda(const Tensor& x, const Tensor& out, const char* op) {
  OF_CHECK(x.is_cuda() && out.device() == x.device(),
           "[{}] cuda: the input is on {} and the output on {}", op, x.device().str(),
           out.device().str());
}

ReduceParams params_of(const Canon& c, ReduceParams p = {}) {
  p.outer = c.outer;
  p.n = c.n;
  p.inner = c.inner;
  p.in = c.x.impl()->raw_data();
  p.dtype = c.x.dtype();
  return p;
}

// One launch of op over c into out (dense, outer * inner elements of the op's dtype).
// `extra` carries the op's own fields (idx, shift, denom, take_sqrt).
void launch(RedOp op, const Canon& c, void* out, const ReduceParams& extra, const char* name) {
  ReduceParams p = params_of(c, extra);
  p.out = out;
  const int device = resolve_device(c.x.device().index());
  DeviceGuard guard(device);
  const size_t ws_bytes = reduce_workspace_bytes(op, p);
  Storage ws = ws_bytes ? allocate_storage(ws_bytes, device) : Storage();
  check_launch(launch_reduce(op, p, ws ? ws->data : nullptr, current_stream_of(device)), name,
               p.dtype);
}

// The op's result into `out`: directly when out has the op's natural dtype, else through a
// temporary of that dtype.
void reduce_into(RedOp op, const Canon& c, const Tensor& out, ScalarType natural, const char* name,
                 ReduceParams extra = {}) {
  if (out.numel() == 0) return;
  OF_CHECK(out.is_contiguous() && out.numel() == c.outer * c.inner,
           "[{}] cuda: expected a dense output of {} elements, got shape {}", name,
           c.outer * c.inner, shape_str(out.sizes()));
  if (out.dtype() == natural) {
    launch(op, c, out.impl()->raw_data(), extra, name);
    return;
  }
  Tensor tmp = make_empty(out.sizes(), natural, out.device());
  launch(op, c, tmp.impl()->raw_data(), extra, name);
  kernel_copy_into(out, tmp);
}

ScalarType sum_dtype(ScalarType t) { return is_floating_point(t) ? t : kInt64; }

void need_float(const Tensor& x, const char* op) {
  if (!is_floating_point(x.dtype()))
    fail("[{}] cuda: expected a floating-point input, got {}", op, dtype_name(x.dtype()));
}

template <RedOp Op> void reduce_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  const char* name = op_name(Op);
  check_cuda(x, out, name);
  if constexpr (Op == RedOp::mean) need_float(x, name);
  const Canon c = canon_reduce(x, ReduceAttrs::get<"dims">(k.attrs));
  ScalarType natural = x.dtype();
  if constexpr (Op == RedOp::sum || Op == RedOp::prod) natural = sum_dtype(x.dtype());
  if constexpr (Op == RedOp::all || Op == RedOp::any) natural = kBool;
  reduce_into(Op, c, out, natural, name);
}

void norm_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& o = k.outputs[0];
  check_cuda(x, o, "norm");
  need_float(x, "norm");
  const DimVector& dims = NormReduceAttrs::get<"dims">(k.attrs);
  const double p = NormReduceAttrs::get<"p">(k.attrs);
  RedOp op;
  if (p == 2) op = RedOp::norm2;
  else if (p == 1) op = RedOp::norm1;
  else if (p == 0) op = RedOp::norm0;
  else if (std::isinf(p)) op = p > 0 ? RedOp::norm_inf : RedOp::norm_neginf;
  else {  // any other p: (sum |x|^p)^(1/p) in float64, as the CPU kernel
    const Tensor xd = kernel_cast(x, kFloat64);
    elementwise_into(ElemOp::abs, xd, {xd}, kFloat64);
    elementwise_into(ElemOp::pow_scalar, xd, {xd}, kFloat64, p);
    const Tensor s = make_empty(o.sizes(), kFloat64, x.device());
    reduce_into(RedOp::sum, canon_reduce(xd, dims), s, kFloat64, "norm");
    elementwise_into(ElemOp::pow_scalar, s, {s}, kFloat64, 1.0 / p);
    kernel_copy_into(o, s);
    return;
  }
  reduce_into(op, canon_reduce(x, dims), o, x.dtype(), "norm");
}

// var/std: the mean of each output in float64, then the squared deviations from it.
template <bool Sqrt> void var_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  const char* name = Sqrt ? "std" : "var";
  check_cuda(x, out, name);
  need_float(x, name);
  const Canon c = canon_reduce(x, VarAttrs::get<"dims">(k.attrs));
  if (out.numel() == 0) return;
  Tensor mean = make_empty(out.sizes(), kFloat64, out.device());
  launch(RedOp::mean_d, c, mean.impl()->raw_data(), {}, name);
  ReduceParams extra;
  extra.shift = mean.impl()->raw_data();
  extra.denom = std::max(0.0, double(c.n) - double(VarAttrs::get<"correction">(k.attrs)));
  extra.take_sqrt = Sqrt;
  reduce_into(RedOp::sqdev, c, out, x.dtype(), name, extra);
}

// logsumexp: each output's max (ignoring NaN; an infinite one shifts by 0), then
// max + log(sum(exp(x - max))).
void logsumexp_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  check_cuda(x, out, "logsumexp");
  need_float(x, "logsumexp");
  const Canon c = canon_reduce(x, ReduceAttrs::get<"dims">(k.attrs));
  if (out.numel() == 0) return;
  Tensor shift = make_empty(out.sizes(), x.dtype(), out.device());
  launch(RedOp::max_shift, c, shift.impl()->raw_data(), {}, "logsumexp");
  ReduceParams extra;
  extra.shift = shift.impl()->raw_data();
  reduce_into(RedOp::logsumexp, c, out, x.dtype(), "logsumexp", extra);
}

// max_dim/min_dim (DimReduceAttrs): values and int64 indices; argmax/argmin (ArgExtremeAttrs:
// a dim or none, keepdim).
template <bool IsMax> void max_dim_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const char* name = IsMax ? "max_dim" : "min_dim";
  check_cuda(x, k.outputs[0], name);
  const Canon c = canon_dim(x, DimReduceAttrs::get<"dim">(k.attrs));
  if (k.outputs[0].numel() == 0) return;
  ReduceParams extra;
  extra.idx = static_cast<int64_t*>(k.outputs[1].impl()->raw_data());
  launch(IsMax ? RedOp::argmax : RedOp::argmin, c, k.outputs[0].impl()->raw_data(), extra, name);
}
template <bool IsMax> void argmax_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const char* name = IsMax ? "argmax" : "argmin";
  check_cuda(x, k.outputs[0], name);
  Canon c;
  if (const std::optional<int64_t> dim = ArgExtremeAttrs::get<"dim">(k.attrs)) {
    c = canon_dim(x, *dim);
  } else {
    c.x = kernel_contiguous(x);
    c.n = x.numel();
  }
  if (k.outputs[0].numel() == 0) return;
  ReduceParams extra;
  extra.idx = static_cast<int64_t*>(k.outputs[0].impl()->raw_data());
  launch(IsMax ? RedOp::argmax : RedOp::argmin, c, nullptr, extra, name);
}

// softmax/log_softmax/cumsum/cumprod: x along their dim (DimAttrs: SoftmaxAttrs, and the first
// field of ScanAttrs) into the dense output, same dtype.
template <class Launch> void along_dim(const KernelArgs& k, const char* name, const Launch& go) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  check_cuda(x, out, name);
  OF_CHECK(out.is_contiguous() && out.dtype() == x.dtype(), "[{}] cuda: expected a dense {} output",
           name, dtype_name(x.dtype()));
  const Canon c = canon_dim(x, DimAttrs::get<"dim">(k.attrs));
  ReduceParams p = params_of(c);
  p.out = out.impl()->raw_data();
  const int device = resolve_device(x.device().index());
  DeviceGuard guard(device);
  check_launch(go(p, current_stream_of(device)), name, p.dtype);
}

template <bool Log> void softmax_kernel(const KernelArgs& k) {
  const char* name = Log ? "log_softmax" : "softmax";
  need_float(k.inputs[0], name);
  along_dim(k, name,
            [](const ReduceParams& p, cudaStream_t s) { return launch_softmax(Log, p, s); });
}

template <bool Prod> void scan_kernel(const KernelArgs& k) {
  const char* name = Prod ? "cumprod" : "cumsum";
  const ScalarType t = k.inputs[0].dtype();
  OF_CHECK(t == kInt64 || is_floating_point(t),
           "[{}] cuda: expected an int64 or floating input, got {}", name, dtype_name(t));
  const bool reverse = ScanAttrs::get<"reverse">(k.attrs);
  along_dim(k, name, [reverse](const ReduceParams& p, cudaStream_t s) {
    return launch_scan(Prod, reverse, p, s);
  });
}

}  // namespace

void sum_into(const Tensor& out, const Tensor& x, IntArrayRef dims) {
  reduce_into(RedOp::sum, canon_reduce(x, dims.dims()), out, sum_dtype(x.dtype()), "sum");
}

void register_reduce_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("sum", reduce_kernel<RedOp::sum>);
  core.set_cuda_kernel("mean", reduce_kernel<RedOp::mean>);
  core.set_cuda_kernel("prod", reduce_kernel<RedOp::prod>);
  core.set_cuda_kernel("amax", reduce_kernel<RedOp::amax>);
  core.set_cuda_kernel("amin", reduce_kernel<RedOp::amin>);
  core.set_cuda_kernel("all", reduce_kernel<RedOp::all>);
  core.set_cuda_kernel("any", reduce_kernel<RedOp::any>);
  core.set_cuda_kernel("norm", norm_kernel);
  core.set_cuda_kernel("var", var_kernel<false>);
  core.set_cuda_kernel("std", var_kernel<true>);
  core.set_cuda_kernel("logsumexp", logsumexp_kernel);
  core.set_cuda_kernel("max_dim", max_dim_kernel<true>);
  core.set_cuda_kernel("min_dim", max_dim_kernel<false>);
  core.set_cuda_kernel("argmax", argmax_kernel<true>);
  core.set_cuda_kernel("argmin", argmax_kernel<false>);
  core.set_cuda_kernel("softmax", softmax_kernel<false>);
  core.set_cuda_kernel("log_softmax", softmax_kernel<true>);
  core.set_cuda_kernel("cumsum", scan_kernel<false>);
  core.set_cuda_kernel("cumprod", scan_kernel<true>);
}

}  // namespace oneflow::cuda_module

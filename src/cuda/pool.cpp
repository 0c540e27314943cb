// pool.cpp: the host side of the pooling kernels on CUDA (pool.cu, built with or without
// cuDNN): max / average pooling, 2-D and 3-D, fixed and adaptive windows, and the average
// pools' backward, with the CPU kernels' attrs (NOTE [CUDA pooling] in cudnn.h).
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/cudnn.h"
#include "cuda/dims.h"
#include "cuda/host_checks.h"
#include "cuda/module.h"
#include "ops/conv_common.h"

namespace oneflow::cuda_module {
namespace {

// ================================================================ pooling (pool.cu)

// The depth/height/width axes of a [N, C, (D,) H, W] tensor pair: `in` from the input's sizes,
// `out` from the output's; a 2-D pool leaves the depth axis the identity.
PoolParams pool_params(PoolKind kind, IntArrayRef in, IntArrayRef out, ScalarType dtype) {
  PoolParams p;
  p.kind = kind;
  p.dtype = dtype;
  const size_t sp = in.size() - 2;
  p.planes = in[0] * in[1];
  for (size_t i = 0; i < sp; ++i) {
    PoolAxis& a = p.ax[3 - sp + i];
    a.in = in[2 + i];
    a.out = out[2 + i];
  }
  return p;
}

// kernel_size, stride, padding (and dilation) lists of `sp` values into the axes.
void set_windows(PoolParams& p, size_t sp, const DimVector& k, const DimVector& s,
                 const DimVector& pad, const DimVector* d) {
  for (size_t i = 0; i < sp; ++i) {
    PoolAxis& a = p.ax[3 - sp + i];
    a.k = k[i];
    a.s = s[i];
    a.p = pad[i];
    a.d = d ? (*d)[i] : 1;
  }
}

const char* pool_name(PoolKind kind, int sp, bool backward) {
  switch (kind) {
    case PoolKind::kMax:
      return sp == 3 ? "max_pool3d_with_indices" : "max_pool2d_with_indices";
    case PoolKind::kAdaptiveMax:
      return sp == 3 ? "adaptive_max_pool3d" : "adaptive_max_pool2d";
    case PoolKind::kAvg:
      return sp == 3 ? (backward ? "avg_pool3d_backward" : "avg_pool3d")
                     : (backward ? "avg_pool2d_backward" : "avg_pool2d");
    case PoolKind::kAdaptiveAvg:
      return sp == 3 ? (backward ? "adaptive_avg_pool3d_backward" : "adaptive_avg_pool3d")
                     : (backward ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool2d");
  }
  return "";
}

// The checks and parameters every pooling kernel shares: `in` is the pooled tensor (the input,
// or the gradient's input side), `out` the pooled result; the window attrs by kind: max
// (kernel_size, stride, padding, dilation, ceil_mode), avg (kernel_size, stride, padding,
// ceil_mode, count_include_pad, divisor_override), the adaptive ones only their output size.
PoolParams pool_setup(PoolKind kind, int sp, IntArrayRef in, IntArrayRef out, const Tensor& x,
                      const Attrs& a, const char* op) {
  check_dtype(x, op);
  PoolParams p = pool_params(kind, in, out, x.dtype());
  if (kind == PoolKind::kMax) {
    using A = conv_detail::MaxPoolAttrs;
    set_windows(p, size_t(sp), A::get<"kernel_size">(a), A::get<"stride">(a), A::get<"padding">(a),
                &A::get<"dilation">(a));
  }
  if (kind == PoolKind::kAvg) {
    using A = conv_detail::AvgPoolAttrs;
    set_windows(p, size_t(sp), A::get<"kernel_size">(a), A::get<"stride">(a), A::get<"padding">(a),
                nullptr);
    p.count_include_pad = A::get<"count_include_pad">(a);
    p.divisor = A::get<"divisor_override">(a);
  }
  return p;
}

// max_pool{2,3}d_with_indices and adaptive_max_pool{2,3}d (x) -> (values, int64 indices flat
// in the plane).
template <PoolKind K, int Sp> void max_pool_kernel(const KernelArgs& k) {
  const char* op = pool_name(K, Sp, false);
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor &y = k.outputs[0], &idx = k.outputs[1];
  const int device = device_of(x, op);
  if (y.numel() == 0) return;
  check_dense_output(y, op);
  check_dense_output(idx, op);
  DeviceGuard guard(device);
  PoolParams p = pool_setup(K, Sp, x.sizes(), y.sizes(), x, k.attrs, op);
  p.x = cptr(x);
  p.y = mptr(y);
  p.indices = static_cast<int64_t*>(mptr(idx));
  check_launch(launch_pool(p, current_stream_of(device)), op, p.dtype);
}

// avg_pool{2,3}d and adaptive_avg_pool{2,3}d (x).
template <PoolKind K, int Sp> void avg_pool_kernel(const KernelArgs& k) {
  const char* op = pool_name(K, Sp, false);
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor& y = k.outputs[0];
  const int device = device_of(x, op);
  if (y.numel() == 0) return;
  check_dense_output(y, op);
  DeviceGuard guard(device);
  PoolParams p = pool_setup(K, Sp, x.sizes(), y.sizes(), x, k.attrs, op);
  p.x = cptr(x);
  p.y = mptr(y);
  check_launch(launch_pool(p, current_stream_of(device)), op, p.dtype);
}

// The *_backward ops: (grad_output; the forward's attrs, input_size) -> grad_input.
template <PoolKind K, int Sp> void avg_pool_backward_kernel(const KernelArgs& k) {
  const char* op = pool_name(K, Sp, true);
  const Tensor g = kernel_contiguous(k.inputs[0]);
  const Tensor& gx = k.outputs[0];
  const int device = device_of(g, op);
  if (gx.numel() == 0) return;
  check_dense_output(gx, op);
  DeviceGuard guard(device);
  if (g.numel() == 0) {  // no windows: nothing flows back (as the CPU kernel)
    check_dtype(g, op);
    kernel_fill(gx, 0);
    return;
  }
  PoolParams p = pool_setup(K, Sp, gx.sizes(), g.sizes(), g, k.attrs, op);
  p.grad_out = cptr(g);
  p.grad_in = mptr(gx);
  check_launch(launch_pool_backward(p, current_stream_of(device)), op, p.dtype);
}

}  // namespace

void register_pool_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("max_pool2d_with_indices", max_pool_kernel<PoolKind::kMax, 2>);
  core.set_cuda_kernel("max_pool3d_with_indices", max_pool_kernel<PoolKind::kMax, 3>);
  core.set_cuda_kernel("adaptive_max_pool2d", max_pool_kernel<PoolKind::kAdaptiveMax, 2>);
  core.set_cuda_kernel("adaptive_max_pool3d", max_pool_kernel<PoolKind::kAdaptiveMax, 3>);
  core.set_cuda_kernel("avg_pool2d", avg_pool_kernel<PoolKind::kAvg, 2>);
  core.set_cuda_kernel("avg_pool3d", avg_pool_kernel<PoolKind::kAvg, 3>);
  core.set_cuda_kernel("adaptive_avg_pool2d", avg_pool_kernel<PoolKind::kAdaptiveAvg, 2>);
  core.set_cuda_kernel("adaptive_avg_pool3d", avg_pool_kernel<PoolKind::kAdaptiveAvg, 3>);
  core.set_cuda_kernel("avg_pool2d_backward", avg_pool_backward_kernel<PoolKind::kAvg, 2>);
  core.set_cuda_kernel("avg_pool3d_backward", avg_pool_backward_kernel<PoolKind::kAvg, 3>);
  core.set_cuda_kernel("adaptive_avg_pool2d_backward",
                       avg_pool_backward_kernel<PoolKind::kAdaptiveAvg, 2>);
  core.set_cuda_kernel("adaptive_avg_pool3d_backward",
                       avg_pool_backward_kernel<PoolKind::kAdaptiveAvg, 3>);
}

}  // namespace oneflow::cuda_module

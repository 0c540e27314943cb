// nn.cpp: host side of the CUDA nn kernels (nn.cu): cross entropy, layer/rms/group norm,
// linear, index_select, embedding and index_add, with the CPU kernels' attrs and checks.
// Index and class-target values are checked before a kernel reads them: on the host from one
// copy of them (a synchronization), or inside a CUDA Graph capture on the device into the flag
// the executor reads (NOTE [CUDA index checks]).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/dims.h"
#include "cuda/module.h"
#include "cuda/nn.h"
#include "ops/index_attrs.h"
#include "ops/nn_attrs.h"

namespace oneflow::cuda_module {
namespace {

const void* data_or_null(const Tensor& t) { return t.defined() ? t.impl()->raw_data() : nullptr; }

// NOTE [CUDA index checks]: the values of `index` that are not `allowed` must lie in [0, size);
// else the CPU kernels' error, naming an offending value.
void check_index_values(const Tensor& index, int64_t size, const char* op, const char* what,
                        int64_t dim, const Tensor& input, std::optional<int64_t> allowed = {}) {
  if (index.numel() == 0) return;
  if (capturing()) {  // NOTE [CUDA Graph capture]: no host read; the executor reads the flag
    int* flag = graph_flag();
    OF_CHECK(flag != nullptr,
             "[{}] cuda: checking the indices synchronizes the host, which a "
             "CUDA Graph capture cannot contain",
             op);
    const Tensor idx = kernel_contiguous(index);
    const int device = resolve_device(idx.device().index());
    const cudaError_t err = launch_index_flag(idx.impl()->raw_data(), idx.dtype() == kInt64,
                                              idx.numel(), size, allowed.has_value(),
                                              allowed.value_or(0), flag, current_stream_of(device));
    if (err != cudaSuccess) throw_cuda_error(err, op, __FILE__, __LINE__);
    return;
  }
  // the values on the host (one copy; the kernel dispatches no op: NOTE [No kernel
  // dispatches]): the smallest negative one, else the largest one past the end
  const Tensor idx = kernel_contiguous(index);
  std::vector<int64_t> host(size_t(idx.numel()));
  if (idx.dtype() == kInt64) {
    copy_bytes(host.data(), Device(kCPU), idx.impl()->raw_data(), idx.device(), host.size() * 8);
  } else {
    std::vector<int32_t> h32(host.size());
    copy_bytes(h32.data(), Device(kCPU), idx.impl()->raw_data(), idx.device(), h32.size() * 4);
    for (size_t i = 0; i < h32.size(); ++i) host[i] = h32[i];
  }
  int64_t lo = 0, hi = 0;
  bool bad = false;
  for (int64_t v : host) {
    if ((v >= 0 && v < size) || (allowed && v == *allowed)) continue;
    bad = true;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (!bad) return;
  const int64_t v = lo < 0 ? lo : hi;
  if (std::string_view(what) == "target")
    fail("[{}] target index {} is out of range for {} classes (input shape {})", op, v, size,
         shape_str(input.sizes()));
  fail("[{}] index {} is out of bounds for dimension {} with size {}", op, v, dim, size);
}

// ---------------------------------------------------------------- cross entropy
// inputs x [N, C, ...], target int64, weight [C] (optional); attrs reduction, ignore_index,
// label_smoothing; outputs loss, lse [rows], total weight [].

CeParams ce_params(const Tensor& x, const Tensor& t, const Tensor& w, const Attrs& a) {
  CeParams p;
  p.N = x.size(0);
  p.C = x.size(1);
  p.inner = 1;
  for (int64_t d = 2; d < x.dim(); ++d) p.inner *= x.size(d);
  p.rows = p.N * p.inner;
  p.x = x.impl()->raw_data();
  p.target = static_cast<const int64_t*>(t.impl()->raw_data());
  p.weight = data_or_null(w);
  using A = nn_detail::CrossEntropyAttrs;
  p.reduction = int(A::get<"reduction">(a));
  p.ignore_index = A::get<"ignore_index">(a);
  p.label_smoothing = A::get<"label_smoothing">(a);
  p.dtype = x.dtype();
  return p;
}

void ce_kernel(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor t = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const int device = device_of(x, "cross_entropy");
  DeviceGuard guard(device);
  check_index_values(t, x.size(1), "cross_entropy", "target", 1, x,
                     nn_detail::CrossEntropyAttrs::get<"ignore_index">(k.attrs));
  CeParams p = ce_params(x, t, w, k.attrs);
  Tensor work = make_empty({3 * p.rows + 4}, kFloat64, x.device());
  p.work = static_cast<double*>(work.impl()->raw_data());
  p.loss = k.outputs[0].impl()->raw_data();
  p.lse = k.outputs[1].impl()->raw_data();
  p.total_weight = k.outputs[2].impl()->raw_data();
  check_launch(launch_cross_entropy(p, current_stream_of(device)), "cross_entropy", p.dtype);
}

// inputs g, x, target, weight, lse, total_weight; output gx
void ce_backward_kernel(const KernelArgs& k) {
  const Tensor g = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor t = kernel_contiguous(k.inputs[2]);
  const Tensor w = kernel_contiguous(k.inputs[3]);
  const Tensor lse = kernel_contiguous(k.inputs[4]);
  const Tensor total = kernel_contiguous(k.inputs[5]);
  const int device = device_of(x, "cross_entropy_backward");
  DeviceGuard guard(device);
  check_index_values(t, x.size(1), "cross_entropy_backward", "target", 1, x,
                     nn_detail::CrossEntropyAttrs::get<"ignore_index">(k.attrs));
  CeParams p = ce_params(x, t, w, k.attrs);
  Tensor work = make_empty({3 * p.rows + 4}, kFloat64, x.device());
  p.work = static_cast<double*>(work.impl()->raw_data());
  p.grad = g.impl()->raw_data();
  p.lse_in = lse.impl()->raw_data();
  p.total_in = total.impl()->raw_data();
  p.grad_x = k.outputs[0].impl()->raw_data();
  check_launch(launch_cross_entropy_backward(p, current_stream_of(device)),
               "cross_entropy_backward", p.dtype);
}

// ---------------------------------------------------------------- norms
// layer_norm/rms_norm attrs {axis, eps, ...}, group_norm {groups, eps, ...}; inputs x, weight,
// bias (rms: none); outputs y, mean (not rms), rstd. Backward inputs dy, x, weight, mean, rstd;
// outputs gx, gweight, gbias.

enum Mode { kLayer = 0, kRms = 1, kGroup = 2 };
const char* norm_name(int mode) {
  return mode == kLayer ? "layer_norm" : mode == kRms ? "rms_norm" : "group_norm";
}

NormParams norm_params(int mode, const Tensor& x, const Attrs& a) {
  NormParams p;
  p.mode = mode;
  p.eps = nn_detail::NormAttrs::get<"eps">(a);  // group_norm's too (GroupNormAttrs)
  p.dtype = x.dtype();
  const IntArrayRef s = x.sizes();
  if (mode == kGroup) {
    p.G = nn_detail::GroupNormAttrs::get<"num_groups">(a);
    p.cg = s[1] / p.G;
    p.hw = 1;
    for (size_t d = 2; d < s.size(); ++d) p.hw *= s[d];
    p.M = s[0] * p.G;
    p.N = p.cg * p.hw;
  } else {
    const size_t axis = size_t(nn_detail::NormAttrs::get<"axis">(a));
    p.M = 1;
    p.N = 1;
    for (size_t d = 0; d < s.size(); ++d) (d < axis ? p.M : p.N) *= s[d];
    p.cg = p.N;
  }
  return p;
}

template <int M> void norm_kernel(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor w = kernel_contiguous(k.inputs[1]);
  const Tensor b = M == kRms ? Tensor() : kernel_contiguous(k.inputs[2]);
  const int device = device_of(x, norm_name(M));
  DeviceGuard guard(device);
  NormParams p = norm_params(M, x, k.attrs);
  p.x = x.impl()->raw_data();
  p.weight = data_or_null(w);
  p.bias = data_or_null(b);
  p.y = k.outputs[0].impl()->raw_data();
  p.mean = M == kRms ? nullptr : k.outputs[1].impl()->raw_data();
  p.rstd = k.outputs[M == kRms ? 1 : 2].impl()->raw_data();
  check_launch(launch_norm(p, current_stream_of(device)), norm_name(M), p.dtype);
}

template <int M> void norm_backward_kernel(const KernelArgs& k) {
  const Tensor dy = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const Tensor mean = kernel_contiguous(k.inputs[3]);
  const Tensor rstd = kernel_contiguous(k.inputs[4]);
  const int device = device_of(x, norm_name(M));
  DeviceGuard guard(device);
  NormParams p = norm_params(M, x, k.attrs);
  p.dy = dy.impl()->raw_data();
  p.x = x.impl()->raw_data();
  p.weight = data_or_null(w);
  p.mean_in = M == kRms ? nullptr : data_or_null(mean);
  p.rstd_in = rstd.impl()->raw_data();
  p.gx = k.outputs[0].impl()->raw_data();
  p.gw = k.outputs[1].impl()->raw_data();
  p.gb = k.outputs[2].impl()->raw_data();
  p.splits = norm_param_splits(p);
  const Storage ws = allocate_storage(
      std::max<size_t>(1, size_t(2 * p.splits * p.G * p.cg)) * sizeof(double), device);
  p.ws = static_cast<double*>(ws->data);
  check_launch(launch_norm_backward(p, current_stream_of(device)), norm_name(M), p.dtype);
}

// ---------------------------------------------------------------- linear
// x [R, in] @ weight[out, in]^T (+ bias [out]): one cuBLASLt call with the bias epilogue (NOTE
// [Linear on cuBLASLt]); else one cuBLAS GEMM reading weight transposed in place and the bias
// added in place by the elementwise kernel.
void linear_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& w = k.inputs[1];
  const Tensor& out = k.outputs[0];
  const int device = device_of(x, "linear");
  if (out.numel() > 0 && lt_linear(x, w, k.inputs[2], out, device)) return;
  const Attrs none{};
  const TensorList ins{x, kernel_transpose(w)};
  TensorList outs{out};
  mm_kernel(KernelArgs{ins, none, outs});
  if (k.inputs[2].defined() && out.numel() > 0) add_into(out, k.inputs[2]);
}

// ---------------------------------------------------------------- index_select / embedding /
// index_add

IndexParams index_params(const Tensor& x, int64_t d, const Tensor& index) {
  IndexParams p;
  const IntArrayRef s = x.sizes();
  for (int64_t i = 0; i < int64_t(s.size()); ++i) {
    if (i < d) p.outer *= s[size_t(i)];
    else if (i > d) p.inner *= s[size_t(i)];
  }
  p.size = s.empty() ? 1 : s[size_t(d)];
  p.count = index.numel();
  p.index = index.impl()->raw_data();
  p.index64 = index.dtype() == kInt64;
  p.dtype = x.dtype();
  return p;
}

void check_index_dtype(const Tensor& index, const char* op) {
  OF_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32,
           "[{}] cuda: expected int64 or int32 indices, got {}", op, dtype_name(index.dtype()));
}

// inputs x, index (1-D or 0-d); attr dim
void index_select_kernel(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor index = kernel_contiguous(k.inputs[1]);
  const int device = device_of(x, "index_select");
  DeviceGuard guard(device);
  check_index_dtype(index, "index_select");
  const int64_t d =
      x.dim() == 0 ? 0
                   : wrap_dim(index_detail::DimAttrs::get<"dim">(k.attrs), x.dim(), "index_select");
  IndexParams p = index_params(x, d, index);
  check_index_values(index, p.size, "index_select", "index", d, x);
  p.src = x.impl()->raw_data();
  p.out = k.outputs[0].impl()->raw_data();
  check_launch(launch_index_select(p, current_stream_of(device)), "index_select", p.dtype);
}

// inputs weight [V, D], indices (any shape); out [indices..., D]
void embedding_kernel(const KernelArgs& k) {
  const Tensor w = kernel_contiguous(k.inputs[0]);
  const Tensor index = kernel_contiguous(k.inputs[1]);
  const int device = device_of(w, "embedding");
  DeviceGuard guard(device);
  check_index_dtype(index, "embedding");
  IndexParams p = index_params(w, 0, index);
  check_index_values(index, p.size, "embedding", "index", 0, w);
  p.src = w.impl()->raw_data();
  p.out = k.outputs[0].impl()->raw_data();
  check_launch(launch_index_select(p, current_stream_of(device)), "embedding", p.dtype);
}

// inputs self, index (1-D), src; attrs dim, alpha: out = self, then out[idx[i]] += alpha * src[i]
void index_add_kernel(const KernelArgs& k) {
  const Tensor& self = k.inputs[0];
  const Tensor index = kernel_contiguous(k.inputs[1]);
  const Tensor src = kernel_contiguous(k.inputs[2]);
  const Tensor& out = k.outputs[0];
  const int device = device_of(self, "index_add");
  DeviceGuard guard(device);
  check_index_dtype(index, "index_add");
  const int64_t d =
      wrap_dim(index_detail::IndexAddAttrs::get<"dim">(k.attrs), self.dim(), "index_add");
  OF_CHECK(out.is_contiguous(), "[index_add] cuda: expected a dense output");
  const ScalarType t = self.dtype();
  OF_CHECK(t == kFloat32 || t == kFloat64 || t == kInt32 || t == kInt64,
           "[index_add] cuda: unsupported dtype {} (float32, float64, int32, int64)",
           dtype_name(t));
  IndexParams p = index_params(out, d, index);
  check_index_values(index, p.size, "index_add", "index", d, self);
  kernel_copy_into(out, self);
  p.src = src.impl()->raw_data();
  p.out = out.impl()->raw_data();
  p.alpha = index_detail::IndexAddAttrs::get<"alpha">(k.attrs).to_double();
  check_launch(launch_index_add(p, current_stream_of(device)), "index_add", p.dtype);
}

}  // namespace

void register_nn_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("cross_entropy", ce_kernel);
  core.set_cuda_kernel("cross_entropy_backward", ce_backward_kernel);
  core.set_cuda_kernel("layer_norm", norm_kernel<kLayer>);
  core.set_cuda_kernel("layer_norm_backward", norm_backward_kernel<kLayer>);
  core.set_cuda_kernel("rms_norm", norm_kernel<kRms>);
  core.set_cuda_kernel("rms_norm_backward", norm_backward_kernel<kRms>);
  core.set_cuda_kernel("group_norm", norm_kernel<kGroup>);
  core.set_cuda_kernel("group_norm_backward", norm_backward_kernel<kGroup>);
  core.set_cuda_kernel("linear", linear_kernel);
  core.set_cuda_16bit("linear");  // cuBLASLt / cuBLAS with float accumulation
  core.set_cuda_kernel("index_select", index_select_kernel);
  core.set_cuda_kernel("embedding", embedding_kernel);
  core.set_cuda_kernel("index_add", index_add_kernel);
}

}  // namespace oneflow::cuda_module

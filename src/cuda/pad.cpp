// pad.cpp: host side of pad_backward on CUDA (its kernel is in sort.cu), with the CPU kernel's
// attrs, checks and messages (src/ops/moves.cpp). Nothing here reads device memory back.
#include <array>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/dims.h"
#include "cuda/module.h"
#include "cuda/sort.h"
#include "ops/index_attrs.h"
#include "ops/index_common.h"

namespace oneflow::cuda_module {
namespace {

// ---------------------------------------------------------------- pad_backward

// input grad (the padded shape); attrs input_size, pad, mode; output the input's gradient
void pad_backward_kernel(const KernelArgs& k) {
  const Tensor& g = k.inputs[0];
  const Tensor& out = k.outputs[0];
  const int device = device_of(g, "pad_backward");
  DeviceGuard guard(device);
  using A = index_detail::PadBackwardAttrs;
  const DimVector& pads = A::get<"pad">(k.attrs);
  PadBwdKind kind = PadBwdKind::kConstant;  // the CPU's parse and message (ops/index_common.h)
  switch (index_detail::pad_mode(A::get<"mode">(k.attrs))) {
    case index_detail::PadMode::kConstant:
      kind = PadBwdKind::kConstant;
      break;
    case index_detail::PadMode::kReflect:
      kind = PadBwdKind::kReflect;
      break;
    case index_detail::PadMode::kReplicate:
      kind = PadBwdKind::kReplicate;
      break;
    case index_detail::PadMode::kCircular:
      kind = PadBwdKind::kCircular;
      break;
  }
  const int64_t nd = out.dim(), np = int64_t(pads.size()) / 2;
  OF_CHECK(pads.size() % 2 == 0 && np <= nd && g.dim() == nd,
           "[pad_backward] cuda: {} pads for a gradient of shape {} and an input of shape {}",
           pads.size(), shape_str(g.sizes()), shape_str(out.sizes()));
  if (out.numel() == 0) return;
  if (g.numel() == 0) {
    kernel_fill(out, 0);
    return;
  }
  struct D {
    int64_t size, gin_stride, g_stride, l, r;
    PadBwdKind kind;
  };
  std::vector<D> dims;
  for (int64_t d = 0; d < nd; ++d)
    dims.push_back({out.sizes()[d], out.strides()[d], g.strides()[d], 0, 0, PadBwdKind::kIdentity});
  for (int64_t q = 0; q < np; ++q) {
    const int64_t d = nd - 1 - q, l = pads[size_t(2 * q)], r = pads[size_t(2 * q + 1)];
    OF_CHECK(g.sizes()[d] == out.sizes()[d] + l + r,
             "[pad_backward] cuda: gradient size {} of "
             "dimension {} is not {} + {} + {}",
             g.sizes()[d], d, out.sizes()[d], l, r);
    if (l == 0 && r == 0) continue;
    dims[size_t(d)].kind = kind;
    dims[size_t(d)].l = l;
    dims[size_t(d)].r = r;
  }
  std::vector<D> m;  // identity dims of size 1 dropped, back-to-back identity dims merged
  for (const D& e : dims) {
    const bool id = e.kind == PadBwdKind::kIdentity;
    if (id && e.size == 1) continue;
    if (id && !m.empty() && m.back().kind == PadBwdKind::kIdentity &&
        m.back().gin_stride == e.gin_stride * e.size && m.back().g_stride == e.g_stride * e.size) {
      m.back().size *= e.size;
      m.back().gin_stride = e.gin_stride;
      m.back().g_stride = e.g_stride;
      continue;
    }
    m.push_back(e);
  }
  OF_CHECK(m.size() <= size_t(kMaxSortDims),
           "[pad_backward] cuda: at most {} non-mergeable "
           "dims, got shape {}",
           kMaxSortDims, shape_str(out.sizes()));
  PadBackwardParams p;
  p.ndim = int(m.size());
  p.numel = out.numel();
  for (int d = 0; d < p.ndim; ++d) {
    const D& e = m[size_t(d)];
    p.sizes[d] = e.size;
    p.gin_strides[d] = e.gin_stride;
    p.g_strides[d] = e.g_stride;
    p.left[d] = e.l;
    p.right[d] = e.r;
    p.kind[d] = e.kind;
  }
  p.g = g.impl()->raw_data();
  p.gin = out.impl()->raw_data();
  p.dtype = out.dtype();
  check_launch(launch_pad_backward(p, current_stream_of(device)), "pad_backward", p.dtype);
}

}  // namespace

void register_pad_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("pad_backward", pad_backward_kernel);
}

}  // namespace oneflow::cuda_module

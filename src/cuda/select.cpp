// select.cpp: host side of select.h — the CUDA kernels of nonzero, masked_select and
// masked_select_backward, with the CPU kernels' results (row-major order) and checks.
#include "cuda/select.h"

#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/dims.h"
#include "cuda/module.h"

namespace oneflow::cuda_module {
namespace {

SelectShape shape_of(IntArrayRef sizes, const char* op) {
  OF_CHECK(sizes.size() <= size_t(kMaxSelectDims), "[{}] cuda: at most {} dims, got shape {}", op,
           kMaxSelectDims, shape_str(sizes));
  SelectShape s;
  s.ndim = int(sizes.size());
  s.numel = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    s.sizes[d] = sizes[d];
    s.numel *= sizes[d];
  }
  return s;
}

// t's strides over `shape` (t broadcasts to it): 0 where t has no dim or a size-1 one.
std::vector<int64_t> strides_over(const Tensor& t, IntArrayRef shape) {
  std::vector<int64_t> st(shape.size(), 0);
  const size_t off = shape.size() - size_t(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d)
    st[off + size_t(d)] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  return st;
}

// The flat row-major indices (over `shape`) of the elements of `src` that are not zero, on
// device memory of the caching allocator; `rows` of them are expected (the meta's count).
struct Selected {
  Storage idx, scratch;
  const int64_t* ptr() const { return static_cast<const int64_t*>(idx->data); }
};
Selected select_flat(const SelectShape& shape, const std::vector<int64_t>& strides,
                     const Tensor& src, int device, cudaStream_t stream, const char* op) {
  Selected r;
  const int64_t n = shape.numel;
  r.idx = allocate_storage(size_t(std::max<int64_t>(n, 1)) * sizeof(int64_t), device);
  if (n == 0) return r;
  size_t temp = 0;
  OF_CUDA_CHECK(compact_flags(nullptr, temp, nullptr, n, nullptr, nullptr, stream));
  // flags, then the count, then CUB's temporary storage, in one block
  const size_t flags_bytes = (size_t(n) + 15) / 16 * 16;
  r.scratch = allocate_storage(flags_bytes + 16 + temp, device);
  auto* base = static_cast<unsigned char*>(r.scratch->data);
  uint8_t* flags = base;
  auto* count = reinterpret_cast<int64_t*>(base + flags_bytes);
  void* cub_temp = base + flags_bytes + 16;
  check_launch(launch_select_flags(shape, strides.data(), src.impl()->raw_data(), src.dtype(),
                                   flags, stream),
               op, src.dtype());
  OF_CUDA_CHECK(
      compact_flags(cub_temp, temp, flags, n, static_cast<int64_t*>(r.idx->data), count, stream));
  return r;
}

void nonzero_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];  // [count, x.dim()] int64, dense
  const int device = device_of(x, "nonzero");
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream_of(device);
  const SelectShape shape = shape_of(x.sizes(), "nonzero");
  const std::vector<int64_t> xs(x.strides().begin(), x.strides().end());
  const Selected sel = select_flat(shape, xs, x, device, stream, "nonzero");
  check_launch(launch_unravel(shape, sel.ptr(), out.size(0),
                              static_cast<int64_t*>(out.impl()->raw_data()), stream),
               "nonzero", kInt64);
}

void masked_select_kernel(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &mask = k.inputs[1];
  const Tensor& out = k.outputs[0];  // [count], dense
  const int device = device_of(x, "masked_select");
  OF_CHECK(mask.is_cuda() && resolve_device(mask.device().index()) == device,
           "[masked_select] cuda: the mask is on {}, the input on {}", mask.device().str(),
           x.device().str());
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream_of(device);
  const DimVector b = broadcast_shapes(x.sizes(), mask.sizes());
  const SelectShape shape = shape_of(b, "masked_select");
  const Selected sel =
      select_flat(shape, strides_over(mask, b), mask, device, stream, "masked_select");
  const std::vector<int64_t> xs = strides_over(x, b);
  check_launch(launch_gather_flat(shape, xs.data(), x.impl()->raw_data(), x.dtype(), sel.ptr(),
                                  out.numel(), out.impl()->raw_data(), stream),
               "masked_select", x.dtype());
}

void masked_select_backward_kernel(const KernelArgs& k) {
  const Tensor &g = k.inputs[0], &mask = k.inputs[1];
  const Tensor& out = k.outputs[0];  // `size`, dense
  const int device = device_of(g, "masked_select_backward");
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream_of(device);
  OF_CHECK(out.is_contiguous(), "[masked_select_backward] cuda: the output must be dense");
  const SelectShape shape = shape_of(out.sizes(), "masked_select_backward");
  const Selected sel = select_flat(shape, strides_over(mask, out.sizes()), mask, device, stream,
                                   "masked_select_backward");
  // the count, on the host: a too-short gradient is refused before out is written
  int64_t selected = 0;
  if (shape.numel > 0) {
    const size_t flags_bytes = (size_t(shape.numel) + 15) / 16 * 16;
    copy_bytes(&selected, Device(kCPU),
               static_cast<unsigned char*>(sel.scratch->data) + flags_bytes, g.device(),
               sizeof(selected));
  }
  OF_CHECK(selected <= g.size(0),
           "[masked_select_backward] gradient has {} elements, fewer than "
           "the {} the mask selects",
           g.size(0), selected);
  OF_CUDA_CHECK(cudaMemsetAsync(out.impl()->raw_data(), 0, out.nbytes(), stream));
  const std::vector<int64_t> os(out.strides().begin(), out.strides().end());
  check_launch(launch_scatter_flat(shape, os.data(), out.impl()->raw_data(), out.dtype(), sel.ptr(),
                                   selected, g.impl()->raw_data(), g.stride(0), stream),
               "masked_select_backward", out.dtype());
}

}  // namespace

void register_select_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("nonzero", nonzero_kernel);
  core.set_cuda_kernel("masked_select", masked_select_kernel);
  core.set_cuda_kernel("masked_select_backward", masked_select_backward_kernel);
}

}  // namespace oneflow::cuda_module

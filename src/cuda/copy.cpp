// copy.cpp: host side of the strided copy ("contiguous", "to" with a dtype change): merges
// dimensions, takes the cudaMemcpy fast path when it can, else launches strided_copy.cu.
#include <vector>

#include "cuda/module.h"
#include "cuda/cuda_check.h"
#include "cuda/strided_copy.h"
#include "strided_dims.h"

namespace oneflow::cuda_module {

void copy_to_contiguous(const TensorImpl& src, ScalarType dst_dtype, void* dst, const char* op) {
  if (src.numel == 0) return;
  // Merged dims (NOTE [Merged dims]): most views (slices, contiguous tensors) need 1-2 dims of
  // index arithmetic.
  std::vector<int64_t> sizes, strides;
  for (const MergedDim& m : merge_dims(
           src.sizes.size(), 1, [&](size_t d) { return src.sizes[d]; },
           [&](size_t, size_t d) { return src.strides[d]; })) {
    sizes.push_back(m.size);
    strides.push_back(src.strides[m.inner]);
  }
  const void* src_ptr = src.raw_data();
  const bool dense = sizes.empty() || (sizes.size() == 1 && strides[0] == 1);
  if (dense && src.dtype == dst_dtype) {
    OF_CUDA_CHECK(cudaMemcpyAsync(dst, src_ptr, size_t(src.numel) * itemsize(src.dtype),
                                  cudaMemcpyDeviceToDevice, current_stream_of(-1)));
    return;
  }
  OF_CHECK(sizes.size() <= size_t(kMaxCopyDims),
           "[{}] cuda: the strided copy supports up to {} non-mergeable dims, got sizes {} with "
           "strides {}",
           op, kMaxCopyDims, shape_str(src.sizes), shape_str(src.strides));
  StridedCopyParams p;
  p.ndim = int(sizes.size());
  p.numel = src.numel;
  for (int d = 0; d < p.ndim; ++d) {
    p.sizes[d] = sizes[size_t(d)];
    p.strides[d] = strides[size_t(d)];
  }
  p.src = src_ptr;
  p.dst = dst;
  p.src_dtype = src.dtype;
  p.dst_dtype = dst_dtype;
  const cudaError_t err = launch_strided_copy(p, current_stream_of(-1));
  if (err != cudaSuccess) throw_cuda_error(err, "launch_strided_copy", __FILE__, __LINE__);
  after_launch(op);
}

void copy_strided_kernel(const KernelArgs& args) {
  OF_CHECK(args.inputs.size() == 1 && args.outputs.size() == 1,
           "[contiguous] cuda: expected 1 input and 1 output, got {} and {}", args.inputs.size(),
           args.outputs.size());
  const Tensor& in = args.inputs[0];
  const Tensor& out = args.outputs[0];
  OF_CHECK(in.is_cuda() && out.is_cuda() && in.device() == out.device(),
           "[contiguous] cuda: input ({}) and output ({}) must be on the same CUDA device",
           in.device().str(), out.device().str());
  OF_CHECK(out.is_contiguous(), "[contiguous] cuda: the output must be contiguous");
  OF_CHECK(in.sizes() == out.sizes(), "[contiguous] cuda: input shape {} != output shape {}",
           shape_str(in.sizes()), shape_str(out.sizes()));
  DeviceGuard guard(resolve_device(in.device().index()));
  copy_to_contiguous(*in.impl(), out.dtype(), out.impl()->raw_data(), "contiguous");
}

}  // namespace oneflow::cuda_module

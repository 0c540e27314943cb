// strided_copy.cu: the one CUDA kernel behind "contiguous" and dtype conversion ("to"):
// reads any-strided input, writes a dense output, converting between any two dtypes.
#include <algorithm>
#include <type_traits>

#include "cuda/strided_copy.h"
#include "cuda/fusion_device.h"
#include "oneflow/dtype.h"

namespace oneflow::cuda_module {
namespace {

// the conversion rules (bool is "!= 0", 16-bit floats through float), shared with the
// generated fused kernels
using fused::convert;

template <class In, class Out> __global__ void strided_copy_kernel(StridedCopyParams p) {
  const In* src = static_cast<const In*>(p.src);
  Out* dst = static_cast<Out*>(p.dst);
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    int64_t rem = i, off = 0;
#pragma unroll
    for (int d = kMaxCopyDims - 1; d >= 0; --d) {
      if (d < p.ndim) {
        const int64_t s = p.sizes[d];
        off += (rem % s) * p.strides[d];
        rem /= s;
      }
    }
    dst[i] = convert<Out>(src[off]);
  }
}

// Calls f(T{}) for the C++ type of `t`; false for an unknown dtype.
template <class F> bool visit_dtype(ScalarType t, F&& f) {
  switch (t) {
    case kFloat32:
      f(float{});
      return true;
    case kFloat64:
      f(double{});
      return true;
    case kFloat16:
      f(Half{});
      return true;
    case kBFloat16:
      f(BFloat16{});
      return true;
    case kInt32:
      f(int32_t{});
      return true;
    case kInt64:
      f(int64_t{});
      return true;
    case kUInt8:
      f(uint8_t{});
      return true;
    case kBool:
      f(bool{});
      return true;
  }
  return false;
}

}  // namespace

cudaError_t launch_strided_copy(const StridedCopyParams& params, cudaStream_t stream) {
  if (params.numel <= 0) return cudaSuccess;
  if (params.ndim < 0 || params.ndim > kMaxCopyDims) return cudaErrorInvalidValue;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((params.numel + kThreads - 1) / kThreads, 1 << 16);
  bool known_out = false;
  const bool known_in = visit_dtype(params.src_dtype, [&](auto in_tag) {
    known_out = visit_dtype(params.dst_dtype, [&](auto out_tag) {
      using In = decltype(in_tag);
      using Out = decltype(out_tag);
      strided_copy_kernel<In, Out><<<unsigned(blocks), kThreads, 0, stream>>>(params);
    });
  });
  if (!known_in || !known_out) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace oneflow::cuda_module

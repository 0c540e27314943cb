// strided_copy.h (internal): the strided-copy/convert kernel behind "contiguous" and "to".
// The launcher half is plain C++ (no fmt, no Tensor) so that strided_copy.cu stays light for
// nvcc; copy_to_contiguous is the host-side entry used by copy.cpp and blas.cpp.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h
struct TensorImpl;               // oneflow/tensor.h

namespace cuda_module {

inline constexpr int kMaxCopyDims = 8;

// dst[i] = convert(src[offset(i)]) for the row-major index i over `sizes`; strides and the
// base pointer `src` (already including the storage offset) are in source elements.
struct StridedCopyParams {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxCopyDims] = {};
  int64_t strides[kMaxCopyDims] = {};
  const void* src = nullptr;
  void* dst = nullptr;
  ScalarType src_dtype;
  ScalarType dst_dtype;
};

// One grid-stride launch on `stream`; returns the launch status (cudaGetLastError).
cudaError_t launch_strided_copy(const StridedCopyParams& params, cudaStream_t stream);

// Writes `src` (any strides, on the current device) densely into `dst` as `dst_dtype`, on the
// device's current stream. `op` names the caller in errors. Throws of::Error on failure.
void copy_to_contiguous(const TensorImpl& src, ScalarType dst_dtype, void* dst, const char* op);

}  // namespace cuda_module
}  // namespace oneflow

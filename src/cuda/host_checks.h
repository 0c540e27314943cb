// host_checks.h (internal, host code of the CUDA module): the checks and raw pointers the
// cuDNN and pooling host code share (cudnn.cpp, pool.cpp).
#pragma once
#include "kernel_support.h"

namespace oneflow::cuda_module {

inline void check_dtype(const Tensor& t, const char* op) {
  OF_CHECK(t.dtype() == kFloat32 || t.dtype() == kFloat64,
           "[{}] cuda: expected a float32 or float64 input (float16/bfloat16 are widened by "
           "dispatch), got {} (shape {})",
           op, dtype_name(t.dtype()), shape_str(t.sizes()));
}

inline void check_dense_output(const Tensor& t, const char* op) {
  OF_CHECK(t.is_contiguous(), "[{}] cuda: expected a dense output, got strides {} for shape {}", op,
           shape_str(t.impl()->strides), shape_str(t.sizes()));
}

inline const void* cptr(const Tensor& t) { return t.impl()->raw_data(); }
inline void* mptr(const Tensor& t) { return t.impl()->raw_data(); }

}  // namespace oneflow::cuda_module

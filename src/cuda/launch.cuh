// launch.cuh (internal, .cu files only): what every CUDA kernel file of the module shares —
// the block size, the grid of a grid-stride loop, and the dtype switch that instantiates a
// kernel per scalar type (a dtype the caller does not instantiate returns
// cudaErrorInvalidValue, which the host side reports as "[op] cuda: unsupported dtype").
#pragma once
#include <algorithm>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "oneflow/dtype.h"

namespace oneflow::cuda_module {

inline constexpr int kThreads = 256;

// Blocks of kThreads for `threads` work items, at most 2^16 (the kernels loop grid-stride).
inline unsigned blocks_for(int64_t threads) {
  return unsigned(
      std::max<int64_t>(1, std::min<int64_t>((threads + kThreads - 1) / kThreads, 1 << 16)));
}

// go(T{}) for the C++ type of dtype t.
template <class G> cudaError_t visit(ScalarType t, G&& go) {
  switch (t) {
    case ScalarType::Float32:
      return go(float{});
    case ScalarType::Float64:
      return go(double{});
    case ScalarType::Float16:
      return go(Half{});
    case ScalarType::BFloat16:
      return go(BFloat16{});
    case ScalarType::Int32:
      return go(int32_t{});
    case ScalarType::Int64:
      return go(int64_t{});
    case ScalarType::UInt8:
      return go(uint8_t{});
    case ScalarType::Bool:
      return go(bool{});
  }
  return cudaErrorInvalidValue;
}
// The floating dtypes only.
template <class G> cudaError_t visit_float(ScalarType t, G&& go) {
  return visit(t, [&](auto tag) -> cudaError_t {
    if constexpr (is_floating_v<decltype(tag)>) return go(tag);
    else return cudaErrorInvalidValue;
  });
}

}  // namespace oneflow::cuda_module

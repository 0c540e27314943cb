// select.h (internal): the CUDA kernels of the ops that size their result from data — nonzero,
// masked_select and masked_select_backward (src/ops/index.cpp). Their meta counts on the
// device (a reduction and one copy to the host: the ops have the kSyncsHost trait); the kernels
// then mark the selected elements, compact their flat indices in row-major order with CUB's
// DeviceSelect (so the order is the CPU kernels'), and gather or scatter through them. Plain C++
// for the host side (select.cpp); select.cu holds the device code.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h
namespace cuda_backend {
struct CoreV1;  // cuda/module_abi.h
}

namespace cuda_module {

// select.cpp: the kernels of "nonzero", "masked_select" and "masked_select_backward".
void register_select_kernels(const cuda_backend::CoreV1& core);

inline constexpr int kMaxSelectDims = 12;

// A row-major walk over `sizes` reading an operand at its own strides (in elements; 0 where it
// broadcasts).
struct SelectShape {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxSelectDims] = {};
};

// flags[i] = (element i of src != 0), src of dtype `dtype` at `strides` over `shape`.
cudaError_t launch_select_flags(const SelectShape& shape, const int64_t* strides, const void* src,
                                ScalarType dtype, uint8_t* flags, cudaStream_t stream);
// CUB's temporary bytes for compacting n flat indices (temp == nullptr: the size query), and
// the compaction: out[k] = the k-th i with flags[i] set, count[0] = how many.
cudaError_t compact_flags(void* temp, size_t& temp_bytes, const uint8_t* flags, int64_t n,
                          int64_t* out, int64_t* count, cudaStream_t stream);
// nonzero: coords[k, d] = coordinate d of flat index idx[k] over `shape` (k < rows).
cudaError_t launch_unravel(const SelectShape& shape, const int64_t* idx, int64_t rows,
                           int64_t* coords, cudaStream_t stream);
// masked_select: dst[k] = src at flat index idx[k] (src at `strides` over `shape`).
cudaError_t launch_gather_flat(const SelectShape& shape, const int64_t* strides, const void* src,
                               ScalarType dtype, const int64_t* idx, int64_t rows, void* dst,
                               cudaStream_t stream);
// masked_select_backward: dst at flat index idx[k] (dst at `strides` over `shape`) = g[k * gs].
cudaError_t launch_scatter_flat(const SelectShape& shape, const int64_t* strides, void* dst,
                                ScalarType dtype, const int64_t* idx, int64_t rows, const void* g,
                                int64_t gs, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

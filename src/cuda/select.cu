// select.cu: device code of select.h (flags, CUB compaction, unravel, flat gather/scatter).
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "cuda/launch.cuh"
#include "cuda/select.h"

namespace oneflow::cuda_module {
namespace {

struct Walk {
  SelectShape shape;
  int64_t strides[kMaxSelectDims] = {};
};

Walk walk_of(const SelectShape& shape, const int64_t* strides) {
  Walk w;
  w.shape = shape;
  for (int d = 0; d < shape.ndim; ++d) w.strides[d] = strides ? strides[d] : 0;
  return w;
}

// Element offset of row-major flat index i.
__device__ int64_t offset_of(const Walk& w, int64_t i) {
  int64_t off = 0;
  for (int d = w.shape.ndim - 1; d >= 0; --d) {
    const int64_t s = w.shape.sizes[d];
    off += (i % s) * w.strides[d];
    i /= s;
  }
  return off;
}

#define OF_GRID_LOOP(i, n)                                                  \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

template <class T> __global__ void flags_kernel(Walk w, const T* src, uint8_t* flags) {
  OF_GRID_LOOP(i, w.shape.numel) {
    flags[i] = uint8_t(compute_t<T>(src[offset_of(w, i)]) != compute_t<T>(0));
  }
}

__global__ void unravel_kernel(SelectShape shape, const int64_t* idx, int64_t rows,
                               int64_t* coords) {
  OF_GRID_LOOP(k, rows * shape.ndim) {
    const int64_t r = k / shape.ndim;
    const int d = int(k % shape.ndim);
    int64_t i = idx[r];
    for (int e = shape.ndim - 1; e > d; --e) i /= shape.sizes[e];
    coords[k] = i % shape.sizes[d];
  }
}

template <class T>
__global__ void gather_flat_kernel(Walk w, const T* src, const int64_t* idx, int64_t rows, T* dst) {
  OF_GRID_LOOP(k, rows) { dst[k] = src[offset_of(w, idx[k])]; }
}

template <class T>
__global__ void scatter_flat_kernel(Walk w, T* dst, const int64_t* idx, int64_t rows, const T* g,
                                    int64_t gs) {
  OF_GRID_LOOP(k, rows) { dst[offset_of(w, idx[k])] = g[k * gs]; }
}

}  // namespace

cudaError_t launch_select_flags(const SelectShape& shape, const int64_t* strides, const void* src,
                                ScalarType dtype, uint8_t* flags, cudaStream_t stream) {
  if (shape.numel == 0) return cudaSuccess;
  const Walk w = walk_of(shape, strides);
  return visit(dtype, [&](auto tag) {
    using T = decltype(tag);
    flags_kernel<T>
        <<<blocks_for(shape.numel), kThreads, 0, stream>>>(w, static_cast<const T*>(src), flags);
    return cudaGetLastError();
  });
}

cudaError_t compact_flags(void* temp, size_t& temp_bytes, const uint8_t* flags, int64_t n,
                          int64_t* out, int64_t* count, cudaStream_t stream) {
  return cub::DeviceSelect::Flagged(temp, temp_bytes, thrust::counting_iterator<int64_t>(0), flags,
                                    out, count, n, stream);
}

cudaError_t launch_unravel(const SelectShape& shape, const int64_t* idx, int64_t rows,
                           int64_t* coords, cudaStream_t stream) {
  if (rows == 0 || shape.ndim == 0) return cudaSuccess;
  unravel_kernel<<<blocks_for(rows * shape.ndim), kThreads, 0, stream>>>(shape, idx, rows, coords);
  return cudaGetLastError();
}

cudaError_t launch_gather_flat(const SelectShape& shape, const int64_t* strides, const void* src,
                               ScalarType dtype, const int64_t* idx, int64_t rows, void* dst,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const Walk w = walk_of(shape, strides);
  return visit(dtype, [&](auto tag) {
    using T = decltype(tag);
    gather_flat_kernel<T><<<blocks_for(rows), kThreads, 0, stream>>>(
        w, static_cast<const T*>(src), idx, rows, static_cast<T*>(dst));
    return cudaGetLastError();
  });
}

cudaError_t launch_scatter_flat(const SelectShape& shape, const int64_t* strides, void* dst,
                                ScalarType dtype, const int64_t* idx, int64_t rows, const void* g,
                                int64_t gs, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const Walk w = walk_of(shape, strides);
  return visit(dtype, [&](auto tag) {
    using T = decltype(tag);
    scatter_flat_kernel<T><<<blocks_for(rows), kThreads, 0, stream>>>(
        w, static_cast<T*>(dst), idx, rows, static_cast<const T*>(g), gs);
    return cudaGetLastError();
  });
}

}  // namespace oneflow::cuda_module

// index.cu: cat, gather, scatter/scatter_add, tril/triu, flip, roll, repeat, pad and one_hot on
// CUDA (index.h). Pure data movement copies elements as same-sized unsigned words, so results
// are the CPU's bit for bit whatever the dtype; scatter_add adds in the CPU kernel's order and
// arithmetic (compute_t, one thread per line along the dim).
#include <cstring>
#include <type_traits>

#include "cuda/index.h"
#include "cuda/launch.cuh"

namespace oneflow::cuda_module {
namespace {

// The unsigned word of a dtype's size: copies through it are exact for every dtype.
template <class G> cudaError_t visit_bits(ScalarType t, G&& go) {
  switch (itemsize(t)) {
    case 1:
      return go(uint8_t{});
    case 2:
      return go(uint16_t{});
    case 4:
      return go(uint32_t{});
    case 8:
      return go(uint64_t{});
    default:
      return cudaErrorInvalidValue;
  }
}

__device__ __forceinline__ int64_t grid_start() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() { return int64_t(blockDim.x) * gridDim.x; }

// Element offset of row-major position e over sizes[0, ndim) with `strides`.
__device__ __forceinline__ int64_t offset_of(int64_t e, int ndim, const int64_t* sizes,
                                             const int64_t* strides) {
  int64_t off = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    const int64_t s = sizes[d];
    off += (e % s) * strides[d];
    e /= s;
  }
  return off;
}

// ---------------------------------------------------------------- remap (cat flip roll repeat pad)

template <class W> __global__ void remap_kernel(RemapParams p) {
  const W* src = static_cast<const W*>(p.src);
  W* dst = static_cast<W*>(p.dst);
  W fill;
  memcpy(&fill, &p.fill_bits, sizeof(W));
  for (int64_t e = grid_start(); e < p.numel; e += grid_step()) {
    int64_t rem = e, so = 0, dof = 0;
    bool inside = true;
    for (int d = p.ndim - 1; d >= 0; --d) {
      const int64_t s = p.sizes[d];
      const int64_t i = rem % s;
      rem /= s;
      dof += i * p.dst_strides[d];
      const int64_t n = p.src_sizes[d], a = p.arg[d];
      int64_t j = i;
      switch (p.kind[d]) {
        case MapKind::kIdentity:
          break;
        case MapKind::kFlip:
          j = n - 1 - i;
          break;
        case MapKind::kRoll:
          j = i - a;
          if (j < 0) j += n;
          break;
        case MapKind::kRepeat:
          j = i % n;
          break;
        case MapKind::kConstant:
          j = i - a;
          if (j < 0 || j >= n) {
            inside = false;
            j = 0;
          }
          break;
        case MapKind::kReflect:
          j = i - a;
          if (j < 0) j = -j;
          if (j >= n) j = 2 * (n - 1) - j;
          break;
        case MapKind::kReplicate:
          j = i - a;
          j = j < 0 ? 0 : (j > n - 1 ? n - 1 : j);
          break;
        case MapKind::kCircular:
          j = ((i - a) % n + n) % n;
          break;
      }
      so += j * p.src_strides[d];
    }
    dst[dof] = inside ? src[so] : fill;
  }
}

// ---------------------------------------------------------------- tril / triu

template <class W> __global__ void tri_kernel(TriParams p) {
  const W* src = static_cast<const W*>(p.src);
  W* dst = static_cast<W*>(p.dst);
  for (int64_t e = grid_start(); e < p.numel; e += grid_step()) {
    const int64_t j = e % p.cols, i = (e / p.cols) % p.rows;
    const bool keep = p.lower ? (j - i <= p.diag) : (j - i >= p.diag);
    // zero is all bits clear in every dtype (+0.0, false, 0)
    dst[e] = keep ? src[offset_of(e, p.ndim, p.sizes, p.src_strides)] : W(0);
  }
}

// ---------------------------------------------------------------- gather

template <class W> __global__ void gather_kernel(GatherParams p) {
  const W* x = static_cast<const W*>(p.x);
  W* out = static_cast<W*>(p.out);
  for (int64_t e = grid_start(); e < p.numel; e += grid_step()) {
    int64_t rem = e, oo = 0, io = 0, xo = 0;
    for (int d = p.ndim - 1; d >= 0; --d) {
      const int64_t s = p.sizes[d], i = rem % s;
      rem /= s;
      oo += i * p.strides[0][d];
      io += i * p.strides[1][d];
      xo += i * p.strides[2][d];
    }
    const int64_t k = p.index[io];  // checked before the launch; never read out of bounds
    out[oo] = k >= 0 && k < p.dim_size ? x[xo + k * p.dim_stride] : W(0);
  }
}

// ---------------------------------------------------------------- scatter / scatter_add

__device__ __forceinline__ void line_offsets(const ScatterParams& p, int64_t l, int64_t& io,
                                             int64_t& so, int64_t& oo) {
  io = so = oo = 0;
  for (int d = p.ndim - 1; d >= 0; --d) {
    const int64_t s = p.sizes[d], i = l % s;
    l /= s;
    io += i * p.strides[0][d];
    so += i * p.strides[1][d];
    oo += i * p.strides[2][d];
  }
}

// A thread per line, walking it in index order (the CPU's order: see index.h).
template <class T, bool Add> __global__ void scatter_lines_kernel(ScatterParams p) {
  const T* src = static_cast<const T*>(p.src);
  T* out = static_cast<T*>(p.out);
  for (int64_t l = grid_start(); l < p.lines; l += grid_step()) {
    int64_t io, so, oo;
    line_offsets(p, l, io, so, oo);
    for (int64_t j = 0; j < p.n; ++j) {
      const int64_t k = p.index[io + j * p.index_step];
      if (k < 0 || k >= p.dim_size) continue;  // checked before the launch
      T& dst = out[oo + k * p.dim_stride];
      const T v = src[so + j * p.src_step];
      if constexpr (Add) {
        dst = T(compute_t<T>(dst) + compute_t<T>(1) * compute_t<T>(v));
      } else {
        dst = v;
      }
    }
  }
}

// Integer sums: exact in any order, so a thread per element with atomics.
template <class T> __global__ void scatter_add_atomic_kernel(ScatterParams p) {
  const T* src = static_cast<const T*>(p.src);
  T* out = static_cast<T*>(p.out);
  const int64_t total = p.lines * p.n;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t j = e % p.n;
    int64_t io, so, oo;
    line_offsets(p, e / p.n, io, so, oo);
    const int64_t k = p.index[io + j * p.index_step];
    if (k < 0 || k >= p.dim_size) continue;
    const T v = src[so + j * p.src_step];
    if constexpr (std::is_same_v<T, int64_t>) {
      atomicAdd(reinterpret_cast<unsigned long long*>(out + oo + k * p.dim_stride),
                static_cast<unsigned long long>(v));
    } else {
      atomicAdd(out + oo + k * p.dim_stride, v);
    }
  }
}

// ---------------------------------------------------------------- one_hot

__global__ void one_hot_kernel(OneHotParams p) {
  const int64_t total = p.numel * p.classes;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t i = e / p.classes, k = e % p.classes;
    p.out[e] = p.x[offset_of(i, p.ndim, p.sizes, p.strides)] == k ? 1 : 0;
  }
}

// ---------------------------------------------------------------- index checks

template <class I> __global__ void first_bad_kernel(IndexCheckParams p) {
  const I* idx = static_cast<const I*>(p.index);
  auto* pos = reinterpret_cast<unsigned long long*>(p.result);
  for (int64_t e = grid_start(); e < p.numel; e += grid_step()) {
    const int64_t v = int64_t(idx[offset_of(e, p.ndim, p.sizes, p.strides)]);
    if (v < 0 || v >= p.size) atomicMin(pos, static_cast<unsigned long long>(e));
  }
}

template <class I> __global__ void bad_value_kernel(IndexCheckParams p) {
  const I* idx = static_cast<const I*>(p.index);
  const unsigned long long e = *reinterpret_cast<const unsigned long long*>(p.result);
  if (e == ~0ull) return;
  p.result[1] = int64_t(idx[offset_of(int64_t(e), p.ndim, p.sizes, p.strides)]);
}

}  // namespace

cudaError_t launch_remap(const RemapParams& p, cudaStream_t stream) {
  if (p.numel <= 0) return cudaSuccess;
  if (p.ndim < 0 || p.ndim > kMaxIndexDims) return cudaErrorInvalidValue;
  return visit_bits(p.dtype, [&](auto tag) {
    remap_kernel<decltype(tag)><<<blocks_for(p.numel), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_tri(const TriParams& p, cudaStream_t stream) {
  if (p.numel <= 0) return cudaSuccess;
  if (p.ndim < 2 || p.ndim > kMaxIndexDims) return cudaErrorInvalidValue;
  return visit_bits(p.dtype, [&](auto tag) {
    tri_kernel<decltype(tag)><<<blocks_for(p.numel), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_gather(const GatherParams& p, cudaStream_t stream) {
  if (p.numel <= 0) return cudaSuccess;
  if (p.ndim < 0 || p.ndim > kMaxIndexDims) return cudaErrorInvalidValue;
  return visit_bits(p.dtype, [&](auto tag) {
    gather_kernel<decltype(tag)><<<blocks_for(p.numel), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_scatter(const ScatterParams& p, cudaStream_t stream) {
  if (p.lines <= 0 || p.n <= 0) return cudaSuccess;
  if (p.ndim < 0 || p.ndim > kMaxIndexDims) return cudaErrorInvalidValue;
  if (!p.add) {
    return visit_bits(p.dtype, [&](auto tag) {
      scatter_lines_kernel<decltype(tag), false><<<blocks_for(p.lines), kThreads, 0, stream>>>(p);
      return cudaGetLastError();
    });
  }
  return visit(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      scatter_add_atomic_kernel<T><<<blocks_for(p.lines * p.n), kThreads, 0, stream>>>(p);
    } else {
      scatter_lines_kernel<T, true><<<blocks_for(p.lines), kThreads, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_one_hot(const OneHotParams& p, cudaStream_t stream) {
  if (p.numel <= 0 || p.classes <= 0) return cudaSuccess;
  if (p.ndim < 0 || p.ndim > kMaxIndexDims) return cudaErrorInvalidValue;
  one_hot_kernel<<<blocks_for(p.numel * p.classes), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_first_bad_index(const IndexCheckParams& p, cudaStream_t stream) {
  if (p.numel <= 0) return cudaSuccess;
  if (p.ndim < 0 || p.ndim > kMaxIndexDims) return cudaErrorInvalidValue;
  if (p.index64) {
    first_bad_kernel<int64_t><<<blocks_for(p.numel), kThreads, 0, stream>>>(p);
    bad_value_kernel<int64_t><<<1, 1, 0, stream>>>(p);
  } else {
    first_bad_kernel<int32_t><<<blocks_for(p.numel), kThreads, 0, stream>>>(p);
    bad_value_kernel<int32_t><<<1, 1, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace oneflow::cuda_module

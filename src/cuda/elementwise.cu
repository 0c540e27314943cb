// elementwise.cu: one launch template for the elementwise ops on CUDA over the functors the CPU
// kernels use (ops/functors.h), so both compute the same expression. NOTE [CUDA elementwise]:
//  - Index space: the output's row-major order over coalesced dims; each operand reads at its
//    own strides (0 on broadcast dims). A grid-stride loop; 64-bit indices.
//  - Dense operands (same shape, contiguous) skip the index math, and when every pointer is
//    16-byte aligned each thread moves 16 bytes per operand per step (vectorized loads/stores).
//  - 16-bit floats compute in float (compute_t), as on the CPU; results are stored rounded.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cuda/elementwise.h"
#include "cuda/launch.cuh"
#include "ops/functors.h"
#include "cuda/fusion_device.h"

namespace oneflow::cuda_module {
namespace {

template <class T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };

template <int N>
__device__ __forceinline__ void offsets(const ElemParams& p, int64_t i, int64_t (&off)[N + 1]) {
#pragma unroll
  for (int k = 0; k <= N; ++k) off[k] = 0;
  for (int d = p.ndim - 1; d >= 0; --d) {
    const int64_t idx = i % p.sizes[d];
    i /= p.sizes[d];
#pragma unroll
    for (int k = 0; k <= N; ++k) off[k] += idx * p.strides[k][d];
  }
}

// N inputs of type T (where: bool, T, T), output Out.
template <class T, class Out, int N, class F>
__device__ __forceinline__ Out apply(const F& f, const ElemParams& p, const int64_t (&off)[N + 1]) {
  using C = compute_t<T>;
  if constexpr (N == 0) {
    return Out(f.template value<C>());
  } else if constexpr (N == 1) {
    return Out(f(C(static_cast<const T*>(p.in[0])[off[1]])));
  } else if constexpr (N == 2) {
    return Out(
        f(C(static_cast<const T*>(p.in[0])[off[1]]), C(static_cast<const T*>(p.in[1])[off[2]])));
  } else {
    const bool c = static_cast<const bool*>(p.in[0])[off[1]];
    return c ? static_cast<const T*>(p.in[1])[off[2]] : static_cast<const T*>(p.in[2])[off[3]];
  }
}

template <class T, class Out, int N, class F> __global__ void strided_kernel(ElemParams p, F f) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    int64_t off[N + 1];
    offsets<N>(p, i, off);
    static_cast<Out*>(p.out)[off[0]] = apply<T, Out, N>(f, p, off);
  }
}

template <class T, class Out, int N, class F> __global__ void dense_kernel(ElemParams p, F f) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    int64_t off[N + 1];
#pragma unroll
    for (int k = 0; k <= N; ++k) off[k] = i;
    static_cast<Out*>(p.out)[i] = apply<T, Out, N>(f, p, off);
  }
}

// Dense and aligned: V elements per thread and step (16 bytes of the widest operand).
template <class T, class Out, int N, int V, class F>
__global__ void vector_kernel(ElemParams p, F f) {
  using C = compute_t<T>;
  const int64_t nvec = p.numel / V;
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < nvec; j += step) {
    Vec<Out, V> o;
    if constexpr (N == 0) {
      const Out v = Out(f.template value<C>());
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = v;
    } else if constexpr (N == 1) {
      const Vec<T, V> a = reinterpret_cast<const Vec<T, V>*>(p.in[0])[j];
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = Out(f(C(a.v[k])));
    } else if constexpr (N == 2) {
      const Vec<T, V> a = reinterpret_cast<const Vec<T, V>*>(p.in[0])[j];
      const Vec<T, V> b = reinterpret_cast<const Vec<T, V>*>(p.in[1])[j];
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = Out(f(C(a.v[k]), C(b.v[k])));
    } else {
      const Vec<bool, V> c = reinterpret_cast<const Vec<bool, V>*>(p.in[0])[j];
      const Vec<T, V> a = reinterpret_cast<const Vec<T, V>*>(p.in[1])[j];
      const Vec<T, V> b = reinterpret_cast<const Vec<T, V>*>(p.in[2])[j];
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = c.v[k] ? a.v[k] : b.v[k];
    }
    reinterpret_cast<Vec<Out, V>*>(p.out)[j] = o;
  }
  // the tail (numel % V elements), one per thread of the first block
  const int64_t t = nvec * V + threadIdx.x;
  if (blockIdx.x == 0 && t < p.numel) {
    int64_t off[N + 1];
#pragma unroll
    for (int k = 0; k <= N; ++k) off[k] = t;
    static_cast<Out*>(p.out)[t] = apply<T, Out, N>(f, p, off);
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

struct WhereFn {};  // where selects in apply(); no functor

// The ops with scalar attrs, computing in C = compute_t<T> exactly as their CPU kernels do
// (src/cpu/core.cpp fill_cpu, src/cpu/elementwise.cpp pow_scalar and clamp).
struct FillFn {  // Scalar::to<C>()
  double d;
  int64_t i;
  bool b;
  template <class C> __device__ C value() const {
    if constexpr (std::is_same_v<C, bool>) return b;
    else if constexpr (std::is_integral_v<C>) return C(i);
    else return C(d);
  }
};
struct IdentityFn {
  template <class C> __device__ C operator()(C x) const { return x; }
};
// the scalar-attr ops, shared with the generated fused kernels
using fused::ClampFn;
using fused::PowScalarFn;

template <class T, class Out, int N, class F>
cudaError_t launch(const ElemParams& p, F f, cudaStream_t stream) {
  if (p.numel <= 0) return cudaSuccess;
  constexpr int kBytes = sizeof(T) > sizeof(Out) ? sizeof(T) : sizeof(Out);
  constexpr int V = 16 / kBytes;
  bool vec = p.contiguous && V > 1 && aligned16(p.out);
  for (int k = 0; k < N; ++k) vec = vec && aligned16(p.in[k]);
  const int64_t work = vec ? (p.numel + V - 1) / V : p.numel;
  const unsigned blocks = blocks_for(work);
  if (vec) {
    if constexpr (V > 1) vector_kernel<T, Out, N, V><<<blocks, kThreads, 0, stream>>>(p, f);
  } else if (p.contiguous) {
    dense_kernel<T, Out, N><<<blocks, kThreads, 0, stream>>>(p, f);
  } else {
    strided_kernel<T, Out, N><<<blocks, kThreads, 0, stream>>>(p, f);
  }
  return cudaGetLastError();
}

// f(T{}) for the dtype `t` as the functor's kind takes it (NOTE [Elementwise kinds]);
// cudaErrorInvalidValue for an unknown one.
template <int N, class F> cudaError_t launch_kind(const ElemParams& p, cudaStream_t stream) {
  constexpr ElemKind K = F::kind;
  return visit(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    using Out = std::conditional_t<K == ElemKind::kCompare || K == ElemKind::kLogical, bool, T>;
    if constexpr ((K == ElemKind::kFloat || K == ElemKind::kIntUnsafe) && !is_floating_v<T>) {
      return cudaErrorInvalidValue;
    } else {
      return launch<T, Out, N>(p, F{}, stream);
    }
  });
}

// Every dtype, result in the input dtype, with a functor carrying the op's scalars.
template <int N, class F>
cudaError_t launch_with(const ElemParams& p, const F& f, cudaStream_t stream) {
  return visit(p.dtype,
               [&](auto tag) { return launch<decltype(tag), decltype(tag), N>(p, f, stream); });
}

cudaError_t launch_where(const ElemParams& p, cudaStream_t stream) {
  return visit(p.dtype, [&](auto tag) {
    return launch<decltype(tag), decltype(tag), 3>(p, WhereFn{}, stream);
  });
}

}  // namespace

cudaError_t launch_elementwise(ElemOp op, const ElemParams& p, cudaStream_t stream) {
  switch (op) {
#define OF_UNARY_CASE(name, functor) \
  case ElemOp::name:                 \
    return launch_kind<1, fn::functor>(p, stream);
#define OF_BINARY_CASE(name, functor) \
  case ElemOp::name:                  \
    return launch_kind<2, fn::functor>(p, stream);
    OF_CUDA_UNARY_OPS(OF_UNARY_CASE)
    OF_CUDA_BINARY_OPS(OF_BINARY_CASE)
#undef OF_UNARY_CASE
#undef OF_BINARY_CASE
    case ElemOp::gelu_erf:
      return launch_kind<1, fn::GeluErf>(p, stream);
    case ElemOp::gelu_tanh:
      return launch_kind<1, fn::GeluTanh>(p, stream);
    case ElemOp::where:
      return launch_where(p, stream);
    case ElemOp::fill:
      return launch_with<0>(p, FillFn{p.scalars[0], p.iscalar, p.bscalar}, stream);
    case ElemOp::identity:
      return launch_with<1>(p, IdentityFn{}, stream);
    case ElemOp::pow_scalar:
      return launch_with<1>(p, PowScalarFn{p.scalars[0]}, stream);
    case ElemOp::clamp:
      return launch_with<1>(
          p, ClampFn{p.scalars[0] != 0, p.scalars[2] != 0, p.scalars[1], p.scalars[3]}, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace oneflow::cuda_module

// random.cu: NOTE [CUDA random numbers] (random.h). A thread per Philox counter, four elements
// each, exactly the CPU kernels' arithmetic (in double, then saturate_cast to the dtype).
#include <algorithm>
#include <cmath>

#include "cuda/random.h"
#include "cuda/launch.cuh"
#include "generator.h"

namespace oneflow::cuda_module {
namespace {

template <class T> __global__ void random_kernel(RandParams p) {
  using C = compute_t<T>;
  T* out = static_cast<T*>(p.out);
  const int64_t nctr = (p.numel + 3) / 4, step = int64_t(blockDim.x) * gridDim.x;
  const bool dbl = std::is_same_v<T, double>;
  const uint64_t seed = p.philox ? p.philox[0] : p.seed, offset = p.philox ? p.philox[1] : p.offset;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < nctr; c += step) {
    uint32_t w[4];
    Philox::generate(seed, offset + uint64_t(c), w);
    for (int j = 0; j < 4 && c * 4 + j < p.numel; ++j) {
      double v;
      if (p.kind == RandKind::uniform) {
        const double u = dbl ? Philox::u01d(w[j], w[(j + 1) & 3]) : double(Philox::u01f(w[j]));
        v = p.a + (p.b - p.a) * u;
      } else if (p.kind == RandKind::normal) {  // Box-Muller on word pairs (0,1) and (2,3)
        const int q = j & 2;
        const double u1 = (double(w[q]) + 1.0) * (1.0 / 4294967297.0);
        const double u2 = double(w[q + 1]) * (1.0 / 4294967296.0);
        const double r = ::sqrt(-2.0 * ::log(u1));
        const double z = (j & 1) ? r * ::sin(2 * M_PI * u2) : r * ::cos(2 * M_PI * u2);
        v = p.a + p.b * z;
      } else {
        const uint64_t bits = (uint64_t(w[j]) << 32) | w[(j + 1) & 3];
        v = double(p.lo + int64_t(bits % p.range));
      }
      out[c * 4 + j] = T(saturate_cast<C>(v));
    }
  }
}

template <class T> __global__ void dropout_kernel(DropoutParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const T s = T(p.scale);
  const int64_t nctr = (p.numel + 3) / 4, step = int64_t(blockDim.x) * gridDim.x;
  const uint64_t seed = p.philox ? p.philox[0] : p.seed, offset = p.philox ? p.philox[1] : p.offset;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < nctr; c += step) {
    uint32_t w[4];
    Philox::generate(seed, offset + uint64_t(c), w);
    for (int j = 0; j < 4 && c * 4 + j < p.numel; ++j) {
      const int64_t i = c * 4 + j;
      const bool keep = (w[j] >> 8) >= p.threshold;
      p.mask[i] = keep;
      y[i] = keep ? T(x[i] * s) : T(0);
    }
  }
}

template <class T> __global__ void factory_kernel(FactoryParams p) {
  using C = compute_t<T>;
  T* out = static_cast<T*>(p.out);
  const int64_t n = p.numel, step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (p.kind == IndexFactory::arange) {
      out[i] = T(saturate_cast<C>(p.a + double(i) * p.step));
    } else if (p.kind == IndexFactory::linspace) {
      const double v = i < n / 2 ? p.a + p.step * double(i) : p.b - p.step * double(n - 1 - i);
      out[i] = T(saturate_cast<C>(v));
    } else {
      out[i] = T(C(i / p.cols == i % p.cols ? 1 : 0));
    }
  }
}

}  // namespace

cudaError_t launch_random(const RandParams& p, cudaStream_t stream) {
  if (p.numel == 0) return cudaSuccess;
  return visit(p.dtype, [&](auto tag) {
    random_kernel<decltype(tag)><<<blocks_for((p.numel + 3) / 4), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_dropout(const DropoutParams& p, cudaStream_t stream) {
  if (p.numel == 0) return cudaSuccess;
  return visit(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    if constexpr (is_floating_v<T>) {
      dropout_kernel<T><<<blocks_for((p.numel + 3) / 4), kThreads, 0, stream>>>(p);
      return cudaGetLastError();
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

cudaError_t launch_factory(const FactoryParams& p, cudaStream_t stream) {
  if (p.numel == 0) return cudaSuccess;
  return visit(p.dtype, [&](auto tag) {
    factory_kernel<decltype(tag)><<<blocks_for(p.numel), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace oneflow::cuda_module

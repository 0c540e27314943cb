// nn.cu: cross entropy, layer/rms/group norm, index_select/embedding and index_add on CUDA
// (nn.h). The formulas are the CPU kernels' (src/cpu/norm.cpp, src/cpu/losses.cpp,
// src/cpu/index.cpp): per-row sums in double, merged in a fixed tree within a warp or block,
// so results do not change from run to run (index_add's floating atomics excepted: see nn.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cuda/nn.h"
#include "cuda/launch.cuh"
#include "ops/functors.h"

namespace oneflow::cuda_module {
namespace {

// Sum of v over the block (every thread gets it); sh holds kThreads doubles.
__device__ double block_sum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();
  return r;
}
template <class T> __device__ T block_max(T v, T* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w)
      sh[threadIdx.x] =
          sh[threadIdx.x + w] > sh[threadIdx.x] ? sh[threadIdx.x + w] : sh[threadIdx.x];
    __syncthreads();
  }
  const T r = sh[0];
  __syncthreads();
  return r;
}

// ---------------------------------------------------------------- cross entropy

// Sum of the weights of every class (the smoothing term's), into work[3 * rows].
template <class T> __global__ void ce_weight_sum(CeParams p) {
  __shared__ double sh[kThreads];
  const T* w = static_cast<const T*>(p.weight);
  double s = 0;
  for (int64_t c = threadIdx.x; c < p.C; c += kThreads) s += w ? double(w[c]) : 1.0;
  s = block_sum(s, sh);
  if (threadIdx.x == 0) p.work[3 * p.rows] = s;
}

// A block per row: lse, and per row nll, smoothing term and target weight into work.
template <class T> __global__ void ce_rows(CeParams p) {
  __shared__ double sh[kThreads];
  __shared__ T shm[kThreads];
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  T* lse_out = static_cast<T*>(p.lse);
  const double eps = p.label_smoothing, wsum_all = p.work[3 * p.rows];
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const int64_t n = r / p.inner, d = r % p.inner;
    const T* row = x + n * p.C * p.inner + d;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t c = threadIdx.x; c < p.C; c += kThreads)
      mx = row[c * p.inner] > mx ? row[c * p.inner] : mx;
    mx = block_max(mx, shm);
    double s = 0, sx = 0;
    for (int64_t c = threadIdx.x; c < p.C; c += kThreads) {
      const T v = row[c * p.inner];
      s += double(fn::exp_<T>(v - mx));
      if (eps > 0) sx += (w ? double(w[c]) : 1.0) * double(v);
    }
    s = block_sum(s, sh);
    if (eps > 0) sx = block_sum(sx, sh);
    if (threadIdx.x == 0) {
      const double lse = double(mx) + ::log(s);
      lse_out[r] = T(lse);
      const int64_t t = p.target[r];
      double nll = 0, smooth = 0, wt = 0;
      if (t != p.ignore_index && (t < 0 || t >= p.C)) {  // checked before; never out of bounds
        nll = smooth = wt = NAN;
      } else if (t != p.ignore_index) {
        wt = w ? double(w[t]) : 1.0;
        nll = wt * (lse - double(row[t * p.inner]));
        if (eps > 0) smooth = wsum_all * lse - sx;
      }
      p.work[r] = nll;
      p.work[p.rows + r] = smooth;
      p.work[2 * p.rows + r] = wt;
      if (p.reduction == 0)
        static_cast<T*>(p.loss)[r] = T((1 - eps) * nll + eps / double(p.C) * smooth);
    }
  }
}

// One block: the sums over rows (in a fixed order) and the reduced loss.
template <class T> __global__ void ce_finish(CeParams p) {
  __shared__ double sh[kThreads];
  double sn = 0, ss = 0, sw = 0;
  for (int64_t r = threadIdx.x; r < p.rows; r += kThreads) {
    sn += p.work[r];
    ss += p.work[p.rows + r];
    sw += p.work[2 * p.rows + r];
  }
  sn = block_sum(sn, sh);
  ss = block_sum(ss, sh);
  sw = block_sum(sw, sh);
  if (threadIdx.x != 0) return;
  T* total = static_cast<T*>(p.total_weight);
  if (p.reduction == 0) {
    total[0] = T(0);
    return;
  }
  total[0] = T(sw);
  const double eps = p.label_smoothing, sc = eps / double(p.C);
  double loss;
  if (p.reduction == 2) {
    loss = (1 - eps) * sn + sc * ss;
  } else {
    loss = (1 - eps) * (sn / sw);
    if (eps > 0) loss += sc * (p.weight ? ss / sw : ss / double(p.rows));
  }
  static_cast<T*>(p.loss)[0] = T(loss);
}

// A thread per element of grad_x: the CPU kernel's expression for its row.
template <class T> __global__ void ce_backward(CeParams p) {
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const T* g = static_cast<const T*>(p.grad);
  const T* lse = static_cast<const T*>(p.lse_in);
  T* gx = static_cast<T*>(p.grad_x);
  const double eps = p.label_smoothing, sc = eps / double(p.C),
               tw = double(static_cast<const T*>(p.total_in)[0]);
  const double wsum_all = p.work[3 * p.rows];
  const int64_t total = p.rows * p.C, step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    // e indexes x [N, C, inner] row-major
    const int64_t d = e % p.inner, c = (e / p.inner) % p.C, n = e / (p.inner * p.C);
    const int64_t r = n * p.inner + d;
    const int64_t t = p.target[r];
    if (t == p.ignore_index || t < 0 || t >= p.C) {  // an invalid one was reported before
      gx[e] = t == p.ignore_index ? T(0) : T(NAN);
      continue;
    }
    double gn, gs;
    if (p.reduction == 0) {
      gn = gs = double(g[r]);
    } else if (p.reduction == 2) {
      gn = gs = double(g[0]);
    } else {
      gn = double(g[0]) / tw;
      gs = w ? gn : double(g[0]) / double(p.rows);
    }
    const double wr = w ? double(w[t]) : 1.0;
    const double a = (1 - eps) * gn * wr, b = sc * gs;
    const T coef = T(a + b * wsum_all);
    T v = fn::exp_<T>(x[e] - lse[r]) * coef;
    if (b != 0) v -= T(b * (w ? double(w[c]) : 1.0));
    if (c == t) v -= T(a);
    gx[e] = v;
  }
}

// ---------------------------------------------------------------- norms

template <class T> __global__ void norm_forward(NormParams p) {
  __shared__ double sh[kThreads];
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  const int64_t N = p.N;
  for (int64_t r = blockIdx.x; r < p.M; r += gridDim.x) {
    const T* px = x + r * N;
    T* py = y + r * N;
    double mu = 0;
    if (p.mode != 1 && N > 0) {
      double s = 0;
      for (int64_t i = threadIdx.x; i < N; i += kThreads) s += double(px[i]);
      mu = block_sum(s, sh) / double(N);
    }
    double ss = 0;
    for (int64_t i = threadIdx.x; i < N; i += kThreads) {
      const double dv = double(px[i]) - mu;
      ss += dv * dv;
    }
    const double var = N == 0 ? 0.0 : block_sum(ss, sh) / double(N);
    const double rs = 1.0 / ::sqrt(var + p.eps);
    if (threadIdx.x == 0) {
      if (p.mean) static_cast<T*>(p.mean)[r] = T(mu);
      static_cast<T*>(p.rstd)[r] = T(rs);
    }
    const T m = T(mu), s = T(rs);
    const int64_t c0 = (r % p.G) * p.cg;
    for (int64_t i = threadIdx.x; i < N; i += kThreads) {
      if (p.hw == 1) {
        T v = (px[i] - m) * s;
        if (w) v = v * w[c0 + i];
        if (b) v = v + b[c0 + i];
        py[i] = v;
      } else {
        const int64_t j = i / p.hw;
        const T a = s * (w ? w[c0 + j] : T(1));
        const T c = (b ? b[c0 + j] : T(0)) - m * a;
        py[i] = px[i] * a + c;
      }
    }
  }
}

// gx, a block per row: rstd * (dy*w - mean(dy*w) - xhat * mean(dy*w*xhat)).
template <class T> __global__ void norm_backward_rows(NormParams p) {
  __shared__ double sh[kThreads];
  const T* dy = static_cast<const T*>(p.dy);
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const T* mean = static_cast<const T*>(p.mean_in);
  const T* rstd = static_cast<const T*>(p.rstd_in);
  T* gx = static_cast<T*>(p.gx);
  const int64_t N = p.N;
  for (int64_t r = blockIdx.x; r < p.M; r += gridDim.x) {
    const T* d = dy + r * N;
    const T* px = x + r * N;
    T* q = gx + r * N;
    const double m = mean ? double(mean[r]) : 0.0, s = double(rstd[r]);
    const int64_t c0 = (r % p.G) * p.cg;
    double a1 = 0, a2 = 0;
    for (int64_t i = threadIdx.x; i < N; i += kThreads) {
      const double wj = w ? double(w[c0 + i / p.hw]) : 1.0;
      const double dw = double(d[i]) * wj;
      a1 += dw;
      a2 += dw * (double(px[i]) - m);
    }
    const double s1 = block_sum(a1, sh), s2 = block_sum(a2, sh);
    if (p.hw == 1) {
      const T c1 = T(p.mode == 1 || N == 0 ? 0.0 : s1 / double(N));
      const T c2 = T(N == 0 ? 0.0 : s2 * s / double(N));
      const T ts = T(s), tm = T(m);
      for (int64_t i = threadIdx.x; i < N; i += kThreads) {
        const T dw = w ? w[c0 + i] * d[i] : d[i];
        q[i] = ts * (dw - c1 - (px[i] - tm) * ts * c2);
      }
    } else {
      const double c1 = p.mode == 1 || N == 0 ? 0.0 : s1 / double(N);
      const double c2 = N == 0 ? 0.0 : s2 * s / double(N);
      for (int64_t i = threadIdx.x; i < N; i += kThreads) {
        const double wj = w ? double(w[c0 + i / p.hw]) : 1.0;
        const double xh = (double(px[i]) - m) * s;
        q[i] = T(s * (wj * double(d[i]) - c1 - xh * c2));
      }
    }
  }
}

// gweight/gbias in two passes (deterministic: a fixed order of partial sums). Pass 1: a thread
// per (row chunk s, channel c) sums its chunk's rows in row order into ws[s][c] (consecutive
// threads read consecutive columns); pass 2: a thread per channel adds its chunks in order.
// (One thread per channel over every row, as before, left an H200 idle: BERT-base's layer norm
// backward took 4.1 ms for [8192, 768] on the first GPU run.)
template <class T> __global__ void norm_param_partials(NormParams p) {
  const T* dy = static_cast<const T*>(p.dy);
  const T* x = static_cast<const T*>(p.x);
  const T* mean = static_cast<const T*>(p.mean_in);
  const T* rstd = static_cast<const T*>(p.rstd_in);
  const int64_t C = p.G * p.cg, per = p.M / (p.G > 0 ? p.G : 1), S = p.splits;
  const int64_t chunk = (per + S - 1) / S;
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < C * S; t += step) {
    const int64_t sp = t / C, c = t % C;
    const int64_t grp = c / p.cg, j = c % p.cg;
    const int64_t n1 = (sp + 1) * chunk < per ? (sp + 1) * chunk : per;
    double aw = 0, ab = 0;
    for (int64_t n = sp * chunk; n < n1; ++n) {
      const int64_t r = n * p.G + grp;
      const double m = mean ? double(mean[r]) : 0.0, s = double(rstd[r]);
      const T* d = dy + r * p.N + j * p.hw;
      const T* px = x + r * p.N + j * p.hw;
      for (int64_t i = 0; i < p.hw; ++i) {
        aw += double(d[i]) * ((double(px[i]) - m) * s);
        ab += double(d[i]);
      }
    }
    p.ws[sp * C + c] = aw;
    p.ws[(S + sp) * C + c] = ab;
  }
}
template <class T> __global__ void norm_param_finish(NormParams p) {
  T* gw = static_cast<T*>(p.gw);
  T* gb = static_cast<T*>(p.gb);
  const int64_t C = p.G * p.cg, S = p.splits;
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += step) {
    double aw = 0, ab = 0;
    for (int64_t sp = 0; sp < S; ++sp) {
      aw += p.ws[sp * C + c];
      ab += p.ws[(S + sp) * C + c];
    }
    gw[c] = T(aw);
    gb[c] = T(ab);
  }
}

// ---------------------------------------------------------------- index_select / index_add

template <class T, class I> __global__ void index_select_kernel(IndexParams p) {
  const T* x = static_cast<const T*>(p.src);
  const I* idx = static_cast<const I*>(p.index);
  T* out = static_cast<T*>(p.out);
  const int64_t total = p.outer * p.count * p.inner, step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t j = e % p.inner, i = (e / p.inner) % p.count, o = e / (p.inner * p.count);
    const int64_t k = int64_t(idx[i]);  // checked before the launch; never read out of bounds
    out[e] = k >= 0 && k < p.size ? x[(o * p.size + k) * p.inner + j] : T(0);
  }
}

template <class I>
__global__ void index_flag_kernel(const I* idx, int64_t n, int64_t size, bool has_allowed,
                                  int64_t allowed, int* flag) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t v = int64_t(idx[i]);
    if ((v < 0 || v >= size) && !(has_allowed && v == allowed)) *flag = 1;
  }
}

template <class T> __device__ void atomic_add(T* a, T v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(a), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(a, v);
  }
}

template <class T, class I> __global__ void index_add_kernel(IndexParams p) {
  const T* src = static_cast<const T*>(p.src);
  const I* idx = static_cast<const I*>(p.index);
  T* out = static_cast<T*>(p.out);
  const T alpha = T(p.alpha);
  const int64_t total = p.outer * p.count * p.inner, step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t j = e % p.inner, i = (e / p.inner) % p.count, o = e / (p.inner * p.count);
    const int64_t k = int64_t(idx[i]);
    if (k >= 0 && k < p.size) atomic_add(out + (o * p.size + k) * p.inner + j, T(alpha * src[e]));
  }
}

template <class G> cudaError_t visit_f(ScalarType t, G&& go) {
  switch (t) {
    case ScalarType::Float32:
      return go(float{});
    case ScalarType::Float64:
      return go(double{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_cross_entropy(const CeParams& p, cudaStream_t stream) {
  return visit_f(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    ce_weight_sum<T><<<1, kThreads, 0, stream>>>(p);
    if (p.rows > 0)
      ce_rows<T><<<unsigned(std::min<int64_t>(p.rows, 1 << 16)), kThreads, 0, stream>>>(p);
    ce_finish<T><<<1, kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_cross_entropy_backward(const CeParams& p, cudaStream_t stream) {
  return visit_f(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    ce_weight_sum<T><<<1, kThreads, 0, stream>>>(p);
    if (p.rows * p.C > 0) ce_backward<T><<<blocks_for(p.rows * p.C), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_norm(const NormParams& p, cudaStream_t stream) {
  if (p.M == 0) return cudaSuccess;
  return visit_f(p.dtype, [&](auto tag) {
    norm_forward<decltype(tag)>
        <<<unsigned(std::min<int64_t>(p.M, 1 << 16)), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

int64_t norm_param_splits(const NormParams& p) {
  const int64_t C = p.G * p.cg, per = p.M / (p.G > 0 ? p.G : 1);
  if (C <= 0 || per <= 0) return 1;
  // ~2^17 threads in all, chunks of at least 16 rows
  const int64_t want = std::max<int64_t>(1, (int64_t(1) << 17) / C);
  return std::max<int64_t>(1, std::min(want, (per + 15) / 16));
}

cudaError_t launch_norm_backward(const NormParams& p, cudaStream_t stream) {
  return visit_f(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.M > 0)
      norm_backward_rows<T><<<unsigned(std::min<int64_t>(p.M, 1 << 16)), kThreads, 0, stream>>>(p);
    const int64_t C = p.G * p.cg;
    if (C > 0) {
      if (p.ws == nullptr || p.splits < 1) return cudaErrorInvalidValue;
      norm_param_partials<T><<<blocks_for(C * p.splits), kThreads, 0, stream>>>(p);
      norm_param_finish<T><<<blocks_for(C), kThreads, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_index_select(const IndexParams& p, cudaStream_t stream) {
  const int64_t total = p.outer * p.count * p.inner;
  if (total == 0) return cudaSuccess;
  return visit(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.index64) index_select_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream>>>(p);
    else index_select_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_index_flag(const void* index, bool index64, int64_t n, int64_t size,
                              bool has_allowed, int64_t allowed, int* flag, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (index64)
    index_flag_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const int64_t*>(index), n,
                                                              size, has_allowed, allowed, flag);
  else
    index_flag_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const int32_t*>(index), n,
                                                              size, has_allowed, allowed, flag);
  return cudaGetLastError();
}

cudaError_t launch_index_add(const IndexParams& p, cudaStream_t stream) {
  const int64_t total = p.outer * p.count * p.inner;
  if (total == 0) return cudaSuccess;
  return visit(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      if (p.index64) index_add_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream>>>(p);
      else index_add_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream>>>(p);
      return cudaGetLastError();
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

}  // namespace oneflow::cuda_module

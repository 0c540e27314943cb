// reduce.cu: the CUDA reductions, softmax/log_softmax and cumsum/cumprod.
// NOTE [CUDA reductions]:
//  - Input: a dense [outer, n, inner] buffer (reduce.cpp canonicalizes, as the CPU kernels do).
//  - inner == 1 (rows): a warp per (row, split); each lane accumulates elements lane, lane+32,
//    ... of its range in order, then the warp merges lanes in a fixed tree. inner > 1 (columns):
//    a thread per (output, split) walks its range of k in order (consecutive threads read
//    consecutive j: coalesced).
//  - Splits: when the outputs alone give fewer than kTargetThreads threads, n is cut into S
//    fixed chunks whose partial accumulators go to a workspace and a second kernel merges them
//    in chunk order. S depends only on the shape (never on the GPU), so a result is the same
//    on every run and every device.
//  - Accumulators as on the CPU: double for floating sums/norms/variances, int64 (wrapping)
//    for integer sums and products, the input's compute type for max/min.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cuda/reduce.h"
#include "cuda/launch.cuh"
#include "ops/functors.h"

namespace oneflow::cuda_module {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr int64_t kTargetThreads = int64_t(1) << 17;
constexpr int64_t kMaxSplits = 1024;

// The number of chunks n is cut into (1: no workspace, no second kernel).
int64_t splits_of(const ReduceParams& p) {
  const int64_t outputs = p.outer * p.inner;
  if (outputs == 0 || p.n == 0) return 1;
  const int64_t per = p.inner == 1 ? 32 : 1;  // threads per (output, split)
  if (outputs * per >= kTargetThreads) return 1;
  const int64_t min_chunk = p.inner == 1 ? 2048 : 256;
  int64_t s = kTargetThreads / (outputs * per);
  s = std::min<int64_t>(s, (p.n + min_chunk - 1) / min_chunk);
  return std::max<int64_t>(1, std::min(s, kMaxSplits));
}

template <class C> __device__ constexpr C lowest_v() {
  if constexpr (is_floating_v<C>) return -std::numeric_limits<C>::infinity();
  else return std::numeric_limits<C>::lowest();
}
template <class C> __device__ constexpr C highest_v() {
  if constexpr (is_floating_v<C>) return std::numeric_limits<C>::infinity();
  else return std::numeric_limits<C>::max();
}
template <class C> __device__ bool nan_v(C v) {
  if constexpr (is_floating_v<C>) return v != v;
  else return false;
}

// ---------------------------------------------------------------- the ops
// Each: Acc, init(), step(acc, x, k) for element k of the reduced range, merge(a, b) (a holds
// the earlier elements), begin(o) before an output's elements, write(o, acc).

template <class T> struct SumR {
  using C = compute_t<T>;
  static constexpr bool kFloat = is_floating_v<T>;
  using Acc = std::conditional_t<kFloat, double, int64_t>;
  using Out = std::conditional_t<kFloat, T, int64_t>;
  bool prod = false;
  Out* out;
  __device__ Acc init() const { return Acc(prod ? 1 : 0); }
  __device__ Acc merge(Acc a, Acc b) const {
    if constexpr (kFloat) return prod ? a * b : a + b;
    else return prod ? fn::wrap_mul(a, b) : Acc(uint64_t(a) + uint64_t(b));
  }
  __device__ Acc step(Acc a, C x, int64_t) const { return merge(a, Acc(x)); }
  __device__ void begin(int64_t) {}
  __device__ void write(int64_t o, Acc a) const {
    if constexpr (kFloat) out[o] = T(C(a));
    else out[o] = a;
  }
};

template <class T> struct MeanR {  // also mean_d (Out double)
  using C = compute_t<T>;
  using Acc = double;
  T* out = nullptr;
  double* out_d = nullptr;
  int64_t n;
  __device__ Acc init() const { return 0; }
  __device__ Acc merge(Acc a, Acc b) const { return a + b; }
  __device__ Acc step(Acc a, C x, int64_t) const { return a + double(x); }
  __device__ void begin(int64_t) {}
  __device__ void write(int64_t o, Acc a) const {
    const double m = n ? a / double(n) : NAN;
    if (out_d) out_d[o] = m;
    else out[o] = T(C(m));
  }
};

template <class T, bool IsMax, bool Propagate> struct ExtremeR {  // amax/amin; max_shift
  using C = compute_t<T>;
  using Acc = C;
  T* out;
  __device__ Acc init() const { return IsMax ? lowest_v<C>() : highest_v<C>(); }
  __device__ Acc step(Acc a, C x, int64_t) const {
    const bool b = IsMax ? x > a : x < a;
    if constexpr (Propagate) return b || nan_v(x) ? x : a;
    else return b ? x : a;
  }
  __device__ Acc merge(Acc a, Acc b) const { return step(a, b, 0); }
  __device__ void begin(int64_t) {}
  __device__ void write(int64_t o, Acc a) const { out[o] = T(a); }
};

template <class T, bool All> struct LogicR {
  using C = compute_t<T>;
  using Acc = bool;
  bool* out;
  __device__ Acc init() const { return All; }
  __device__ Acc merge(Acc a, Acc b) const { return All ? a && b : a || b; }
  __device__ Acc step(Acc a, C x, int64_t) const { return merge(a, bool(x)); }
  __device__ void begin(int64_t) {}
  __device__ void write(int64_t o, Acc a) const { out[o] = a; }
};

// p = 0, 1, 2, +inf, -inf (the CPU's Norm*Op)
template <class T, int P> struct NormR {
  using C = compute_t<T>;
  using Acc = double;
  T* out;
  __device__ Acc init() const { return P == -1 ? INFINITY : 0.0; }
  __device__ Acc merge(Acc a, Acc b) const {
    if constexpr (P == 3) return b > a || b != b ? b : a;
    else if constexpr (P == -1) return b < a || b != b ? b : a;
    else return a + b;
  }
  __device__ Acc step(Acc a, C x, int64_t) const {
    const double v = ::fabs(double(x));
    if constexpr (P == 0) return a + (x != C(0) ? 1.0 : 0.0);
    else if constexpr (P == 1) return a + v;
    else if constexpr (P == 2) return a + double(x) * double(x);
    else return merge(a, v);
  }
  __device__ void begin(int64_t) {}
  __device__ void write(int64_t o, Acc a) const { out[o] = T(C(P == 2 ? ::sqrt(a) : a)); }
};

template <class T> struct SqDevR {  // var/std's second pass
  using C = compute_t<T>;
  using Acc = double;
  T* out;
  const double* mean;
  double denom;
  bool take_sqrt;
  double m = 0;
  __device__ Acc init() const { return 0; }
  __device__ Acc merge(Acc a, Acc b) const { return a + b; }
  __device__ Acc step(Acc a, C x, int64_t) const {
    const double d = double(x) - m;
    return a + d * d;
  }
  __device__ void begin(int64_t o) { m = mean[o]; }
  __device__ void write(int64_t o, Acc a) const {
    const double v = a / denom;
    out[o] = T(C(take_sqrt ? ::sqrt(v) : v));
  }
};

template <class T> struct LogSumExpR {
  using C = compute_t<T>;
  using Acc = double;
  T* out;
  const T* shift;
  C m = 0;
  __device__ Acc init() const { return 0; }
  __device__ Acc merge(Acc a, Acc b) const { return a + b; }
  __device__ Acc step(Acc a, C x, int64_t) const { return a + double(fn::exp_<C>(x - m)); }
  __device__ void begin(int64_t o) {
    const C s = C(shift[o]);
    m = ::isinf(s) ? C(0) : s;  // all -inf: log(0) = -inf
  }
  __device__ void write(int64_t o, Acc a) const {
    C mm = C(shift[o]);
    mm = ::isinf(mm) ? C(0) : mm;
    out[o] = T(C(double(mm) + ::log(a)));
  }
};

template <class C> struct ArgAcc {
  C v;
  int64_t i;  // -1: no element yet
};
template <class T, bool IsMax> struct ArgR {
  using C = compute_t<T>;
  using Acc = ArgAcc<C>;
  T* out;  // may be null
  int64_t* idx;
  __device__ Acc init() const { return {C(0), -1}; }
  __device__ Acc merge(Acc a, Acc b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = nan_v(a.v), bn = nan_v(b.v);
    if (an || bn) {
      if (an && bn) return a.i <= b.i ? a : b;
      return an ? a : b;
    }
    if (IsMax ? b.v > a.v : b.v < a.v) return b;
    if (b.v == a.v && b.i < a.i) return b;
    return a;
  }
  __device__ Acc step(Acc a, C x, int64_t k) const { return merge(a, Acc{x, k}); }
  __device__ void begin(int64_t) {}
  __device__ void write(int64_t o, Acc a) const {
    idx[o] = a.i;
    if (out) out[o] = T(a.v);
  }
};

// ---------------------------------------------------------------- the kernels

// Chunk s of n: [b, e).
__device__ inline void chunk(int64_t n, int64_t splits, int64_t s, int64_t& b, int64_t& e) {
  const int64_t len = (n + splits - 1) / splits;
  b = s * len;
  e = b + len < n ? b + len : n;
}

template <class T, class R>
__global__ void rows_kernel(ReduceParams p, R r, int64_t splits, typename R::Acc* ws) {
  using Acc = typename R::Acc;
  using C = compute_t<T>;
  __shared__ alignas(16) unsigned char smem[kThreads * sizeof(Acc)];
  Acc* sh = reinterpret_cast<Acc*>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T* x = static_cast<const T*>(p.in);
  const int64_t tasks = p.outer * splits;
  for (int64_t t0 = int64_t(blockIdx.x) * kWarps; t0 < tasks; t0 += int64_t(gridDim.x) * kWarps) {
    const int64_t t = t0 + warp;
    Acc a = r.init();
    int64_t o = 0, s = 0;
    if (t < tasks) {
      o = t / splits;
      s = t % splits;
      R rr = r;
      rr.begin(o);
      int64_t b, e;
      chunk(p.n, splits, s, b, e);
      const T* row = x + o * p.n;
      for (int64_t k = b + lane; k < e; k += 32) a = rr.step(a, C(row[k]), k);
      sh[threadIdx.x] = a;
    }
    __syncwarp();
    for (int w = 16; w > 0; w >>= 1) {
      if (t < tasks && lane < w) sh[threadIdx.x] = r.merge(sh[threadIdx.x], sh[threadIdx.x + w]);
      __syncwarp();
    }
    if (t < tasks && lane == 0) {
      if (splits == 1) r.write(o, sh[threadIdx.x]);
      else ws[o * splits + s] = sh[threadIdx.x];
    }
    __syncwarp();
  }
}

template <class T, class R>
__global__ void cols_kernel(ReduceParams p, R r, int64_t splits, typename R::Acc* ws) {
  using Acc = typename R::Acc;
  using C = compute_t<T>;
  const T* x = static_cast<const T*>(p.in);
  const int64_t outputs = p.outer * p.inner, tasks = outputs * splits;
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < tasks; t += step) {
    const int64_t s = t / outputs, q = t % outputs;  // consecutive threads: consecutive j
    const int64_t o = q / p.inner, j = q % p.inner;
    R rr = r;
    rr.begin(q);
    int64_t b, e;
    chunk(p.n, splits, s, b, e);
    const T* base = x + o * p.n * p.inner + j;
    Acc a = rr.init();
    for (int64_t k = b; k < e; ++k) a = rr.step(a, C(base[k * p.inner]), k);
    if (splits == 1) rr.write(q, a);
    else ws[q * splits + s] = a;
  }
}

template <class R>
__global__ void merge_kernel(int64_t outputs, R r, int64_t splits, const typename R::Acc* ws) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < outputs; q += step) {
    typename R::Acc a = ws[q * splits];
    for (int64_t s = 1; s < splits; ++s) a = r.merge(a, ws[q * splits + s]);
    r.write(q, a);
  }
}

template <class T, class R>
cudaError_t run(const ReduceParams& p, R r, void* workspace, cudaStream_t stream) {
  using Acc = typename R::Acc;
  const int64_t outputs = p.outer * p.inner;
  if (outputs == 0) return cudaSuccess;
  const int64_t splits = splits_of(p);
  Acc* ws = static_cast<Acc*>(workspace);
  if (splits > 1 && ws == nullptr) return cudaErrorInvalidValue;
  if (p.inner == 1) {
    const int64_t tasks = p.outer * splits;
    rows_kernel<T><<<blocks_for(tasks * 32), kThreads, 0, stream>>>(p, r, splits, ws);
  } else {
    cols_kernel<T><<<blocks_for(outputs * splits), kThreads, 0, stream>>>(p, r, splits, ws);
  }
  if (splits > 1)
    merge_kernel<<<blocks_for(outputs), kThreads, 0, stream>>>(outputs, r, splits, ws);
  return cudaGetLastError();
}

template <class T> T* out_as(const ReduceParams& p) { return static_cast<T*>(p.out); }

// The accumulator size of op for dtype t (the workspace's element).
size_t acc_size(RedOp op, ScalarType t) {
  size_t sz = 0;
  visit(t, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    switch (op) {
      case RedOp::sum:
      case RedOp::prod:
        sz = sizeof(typename SumR<T>::Acc);
        break;
      case RedOp::amax:
      case RedOp::amin:
      case RedOp::max_shift:
        sz = sizeof(C);
        break;
      case RedOp::all:
      case RedOp::any:
        sz = sizeof(bool);
        break;
      case RedOp::argmax:
      case RedOp::argmin:
        sz = sizeof(ArgAcc<C>);
        break;
      default:
        sz = sizeof(double);
        break;
    }
    return cudaSuccess;
  });
  return sz;
}

// ---------------------------------------------------------------- softmax

template <class T, bool Log, int TPR> __global__ void softmax_rows(ReduceParams p) {
  using C = compute_t<T>;
  constexpr int kRows = kThreads / TPR;
  __shared__ C sh[kThreads];
  const int lane = threadIdx.x % TPR, g = threadIdx.x / TPR;
  const T* x = static_cast<const T*>(p.in);
  T* y = static_cast<T*>(p.out);
  const int64_t n = p.n;
  for (int64_t r0 = int64_t(blockIdx.x) * kRows; r0 < p.outer; r0 += int64_t(gridDim.x) * kRows) {
    const int64_t row = r0 + g;
    const bool live = row < p.outer;
    const T* px = x + (live ? row : 0) * n;
    T* py = y + (live ? row : 0) * n;
    // the max, ignoring NaN (the CPU's row_max_shift)
    C m = -std::numeric_limits<C>::infinity();
    if (live)
      for (int64_t k = lane; k < n; k += TPR) {
        const C v = C(px[k]);
        m = v > m ? v : m;
      }
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int w = TPR / 2; w > 0; w >>= 1) {
      if (lane < w) {
        const C o = sh[threadIdx.x + w];
        sh[threadIdx.x] = o > sh[threadIdx.x] ? o : sh[threadIdx.x];
      }
      __syncthreads();
    }
    m = sh[g * TPR];
    __syncthreads();
    C s = 0;
    if (live)
      for (int64_t k = lane; k < n; k += TPR) s += fn::exp_<C>(C(px[k]) - m);
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = TPR / 2; w > 0; w >>= 1) {
      if (lane < w) sh[threadIdx.x] += sh[threadIdx.x + w];
      __syncthreads();
    }
    s = sh[g * TPR];
    __syncthreads();
    if (live) {
      if constexpr (Log) {
        const C ls = ::log(s);
        for (int64_t k = lane; k < n; k += TPR) py[k] = T((C(px[k]) - m) - ls);
      } else {
        const C inv = C(1) / s;  // as the CPU: exp rounded to T, then scaled
        for (int64_t k = lane; k < n; k += TPR) py[k] = T(C(T(fn::exp_<C>(C(px[k]) - m))) * inv);
      }
    }
  }
}

template <class T, bool Log> __global__ void softmax_cols(ReduceParams p) {
  using C = compute_t<T>;
  const T* x = static_cast<const T*>(p.in);
  T* y = static_cast<T*>(p.out);
  const int64_t outputs = p.outer * p.inner, step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < outputs; q += step) {
    const int64_t o = q / p.inner, j = q % p.inner;
    const T* px = x + o * p.n * p.inner + j;
    T* py = y + o * p.n * p.inner + j;
    C m = -std::numeric_limits<C>::infinity(), s = 0;
    for (int64_t k = 0; k < p.n; ++k) {
      const C v = C(px[k * p.inner]);
      m = v > m ? v : m;
    }
    for (int64_t k = 0; k < p.n; ++k) {
      const C e = fn::exp_<C>(C(px[k * p.inner]) - m);
      if constexpr (!Log) py[k * p.inner] = T(e);
      s += e;
    }
    const C f = Log ? C(::log(s)) : C(1) / s;
    for (int64_t k = 0; k < p.n; ++k) {
      if constexpr (Log) py[k * p.inner] = T((C(px[k * p.inner]) - m) - f);
      else py[k * p.inner] = T(C(py[k * p.inner]) * f);
    }
  }
}

// ---------------------------------------------------------------- scans

template <class T> __global__ void scan_kernel(ReduceParams p, bool prod, bool reverse) {
  using C = compute_t<T>;
  using Acc = std::conditional_t<is_floating_v<T>, double, int64_t>;
  const T* x = static_cast<const T*>(p.in);
  T* y = static_cast<T*>(p.out);
  const int64_t outputs = p.outer * p.inner, step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < outputs; q += step) {
    const int64_t o = q / p.inner, j = q % p.inner;
    const T* px = x + o * p.n * p.inner + j;
    T* py = y + o * p.n * p.inner + j;
    Acc a = Acc(prod ? 1 : 0);
    for (int64_t i = 0; i < p.n; ++i) {
      const int64_t k = reverse ? p.n - 1 - i : i;
      const Acc v = Acc(C(px[k * p.inner]));
      if constexpr (is_floating_v<T>) a = prod ? a * v : a + v;
      else a = Acc(prod ? uint64_t(a) * uint64_t(v) : uint64_t(a) + uint64_t(v));
      py[k * p.inner] = T(C(a));
    }
  }
}

}  // namespace

size_t reduce_workspace_bytes(RedOp op, const ReduceParams& p) {
  const int64_t s = splits_of(p);
  return s > 1 ? size_t(s * p.outer * p.inner) * acc_size(op, p.dtype) : 0;
}

cudaError_t launch_reduce(RedOp op, const ReduceParams& p, void* ws, cudaStream_t stream) {
  switch (op) {
    case RedOp::sum:
    case RedOp::prod:
      return visit(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        using R = SumR<T>;
        return run<T>(p, R{op == RedOp::prod, out_as<typename R::Out>(p)}, ws, stream);
      });
    case RedOp::mean:
    case RedOp::mean_d:
      return visit_float(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        MeanR<T> r{op == RedOp::mean ? out_as<T>(p) : nullptr,
                   op == RedOp::mean_d ? out_as<double>(p) : nullptr, p.n};
        return run<T>(p, r, ws, stream);
      });
    case RedOp::amax:
      return visit(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        return run<T>(p, ExtremeR<T, true, true>{out_as<T>(p)}, ws, stream);
      });
    case RedOp::amin:
      return visit(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        return run<T>(p, ExtremeR<T, false, true>{out_as<T>(p)}, ws, stream);
      });
    case RedOp::max_shift:
      return visit_float(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        return run<T>(p, ExtremeR<T, true, false>{out_as<T>(p)}, ws, stream);
      });
    case RedOp::all:
      return visit(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        return run<T>(p, LogicR<T, true>{out_as<bool>(p)}, ws, stream);
      });
    case RedOp::any:
      return visit(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        return run<T>(p, LogicR<T, false>{out_as<bool>(p)}, ws, stream);
      });
    case RedOp::norm0:
    case RedOp::norm1:
    case RedOp::norm2:
    case RedOp::norm_inf:
    case RedOp::norm_neginf:
      return visit_float(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        T* o = out_as<T>(p);
        switch (op) {
          case RedOp::norm0:
            return run<T>(p, NormR<T, 0>{o}, ws, stream);
          case RedOp::norm1:
            return run<T>(p, NormR<T, 1>{o}, ws, stream);
          case RedOp::norm2:
            return run<T>(p, NormR<T, 2>{o}, ws, stream);
          case RedOp::norm_inf:
            return run<T>(p, NormR<T, 3>{o}, ws, stream);
          default:
            return run<T>(p, NormR<T, -1>{o}, ws, stream);
        }
      });
    case RedOp::sqdev:
      return visit_float(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        SqDevR<T> r{out_as<T>(p), static_cast<const double*>(p.shift), p.denom, p.take_sqrt};
        return run<T>(p, r, ws, stream);
      });
    case RedOp::logsumexp:
      return visit_float(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        LogSumExpR<T> r{out_as<T>(p), static_cast<const T*>(p.shift)};
        return run<T>(p, r, ws, stream);
      });
    case RedOp::argmax:
      return visit(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        return run<T>(p, ArgR<T, true>{out_as<T>(p), p.idx}, ws, stream);
      });
    case RedOp::argmin:
      return visit(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        return run<T>(p, ArgR<T, false>{out_as<T>(p), p.idx}, ws, stream);
      });
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_softmax(bool log, const ReduceParams& p, cudaStream_t stream) {
  if (p.outer * p.inner == 0 || p.n == 0) return cudaSuccess;
  return visit_float(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.inner > 1) {
      if (log) softmax_cols<T, true><<<blocks_for(p.outer * p.inner), kThreads, 0, stream>>>(p);
      else softmax_cols<T, false><<<blocks_for(p.outer * p.inner), kThreads, 0, stream>>>(p);
    } else if (p.n <= 1024) {  // a warp per row
      const unsigned b = blocks_for(p.outer * 32);
      if (log) softmax_rows<T, true, 32><<<b, kThreads, 0, stream>>>(p);
      else softmax_rows<T, false, 32><<<b, kThreads, 0, stream>>>(p);
    } else {  // a block per row
      const unsigned b = unsigned(std::min<int64_t>(p.outer, 1 << 16));
      if (log) softmax_rows<T, true, kThreads><<<b, kThreads, 0, stream>>>(p);
      else softmax_rows<T, false, kThreads><<<b, kThreads, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_scan(bool prod, bool reverse, const ReduceParams& p, cudaStream_t stream) {
  if (p.outer * p.inner == 0 || p.n == 0) return cudaSuccess;
  return visit(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    if constexpr (is_floating_v<T> || std::is_same_v<T, int64_t>) {
      scan_kernel<T><<<blocks_for(p.outer * p.inner), kThreads, 0, stream>>>(p, prod, reverse);
      return cudaGetLastError();
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

}  // namespace oneflow::cuda_module

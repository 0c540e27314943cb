// reduce_extra.cpp: the CPU kernels of the reductions beyond sum/mean/all/any (prod, amax/amin,
// max_dim/min_dim, argmax/argmin, var/std, logsumexp, norm), of cumsum/cumprod and of
// softmax/log_softmax; ops/reduce_extra.cpp registers them.
// NOTE [Reduce extra kernels]: order-free reductions (prod, amax, norm) run on the shared engine
// (cpu/reduce.h). The others view the input as [outer, n, inner] (reduced/scanned dims in the
// middle, contiguous; non-contiguous inputs or scattered dims are copied once) and run either a
// row loop (inner == 1: lane accumulators, vectorizable) or a column loop (blocks of kW lanes
// along inner, walked over n). Work is split over outputs only, or over fixed blocks of a single
// long row merged in order, so results do not depend on the thread count.
// Compare-and-select loops (max, NaN checks, the clamps in fn::fast_exp) only vectorize when
// GCC may assume comparisons do not trap; nothing here reads floating-point exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/loops.h"
#include "cpu/reduce.h"
#include "cpu/reduce_extra.h"
#include "ops/functors.h"
#include "ops/reduce_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {

using namespace reduce_detail;

namespace {

constexpr int kL = 16;               // lane accumulators in row loops
constexpr int64_t kW = 64;           // lanes per block in column loops
constexpr int64_t kBlock = 1 << 16;  // fixed block of a single long row

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_item));
}

// Runs row(o) for each row (inner == 1) or col(o, j0, w) for lane blocks (inner > 1), in
// parallel over outputs.
template <class Row, class Col>
void drive(int64_t outer, int64_t n, int64_t inner, const Row& row, const Col& col) {
  if (outer * inner == 0) return;
  if (inner == 1) {
    parallel_for(0, outer, grain_for(n), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) row(o);
    });
  } else {
    const int64_t nblk = (inner + kW - 1) / kW;
    parallel_for(0, outer * nblk, grain_for(n * std::min(kW, inner)), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / nblk, j0 = (t % nblk) * kW;
        col(o, j0, std::min(kW, inner - j0));
      }
    });
  }
}

// Fixed blocks of [0, n) reduced by f(b0, b1) in parallel and merged in order.
template <class Acc, class F, class M> Acc blocked(int64_t n, const F& f, const M& merge) {
  const int64_t nb = (n + kBlock - 1) / kBlock;
  if (nb <= 1) return f(0, n);
  std::vector<Acc> part(static_cast<size_t>(nb));
  parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      part[size_t(b)] = f(b * kBlock, std::min(n, (b + 1) * kBlock));
  });
  Acc acc = part[0];
  for (int64_t b = 1; b < nb; ++b) acc = merge(acc, part[size_t(b)]);
  return acc;
}

// ---------------------------------------------------------------- row helpers (lane accumulators)

template <class C> constexpr C lowest_v() {
  if constexpr (std::is_floating_point_v<C>) return -std::numeric_limits<C>::infinity();
  else return std::numeric_limits<C>::lowest();
}
template <class C> constexpr C highest_v() {
  if constexpr (std::is_floating_point_v<C>) return std::numeric_limits<C>::infinity();
  else return std::numeric_limits<C>::max();
}
template <class C> inline bool is_nan_v(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}
// v replaces best: strictly better, or the first NaN (NaN propagates).
template <bool IsMax, class C> inline bool better(C v, C best) {
  bool b = IsMax ? v > best : v < best;
  if constexpr (std::is_floating_point_v<C>) b = b || (v != v && best == best);
  return b;
}

// max (or min) of a row, NaN-propagating.
template <bool IsMax, class T> compute_t<T> row_extreme(const T* p, int64_t n) {
  using C = compute_t<T>;
  C m[kL];
  for (int l = 0; l < kL; ++l) m[l] = IsMax ? lowest_v<C>() : highest_v<C>();
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) {
      C v = C(p[k + l]);
      m[l] = (IsMax ? v > m[l] : v < m[l]) || is_nan_v(v) ? v : m[l];
    }
  for (; k < n; ++k) {
    C v = C(p[k]);
    m[0] = (IsMax ? v > m[0] : v < m[0]) || is_nan_v(v) ? v : m[0];
  }
  C r = m[0];
  for (int l = 1; l < kL; ++l) r = (IsMax ? m[l] > r : m[l] < r) || is_nan_v(m[l]) ? m[l] : r;
  return r;
}
// max of a row ignoring NaN (-inf for an empty/all-NaN row): the shift for exp sums.
template <class T> compute_t<T> row_max_shift(const T* p, int64_t n) {
  using C = compute_t<T>;
  C m[kL];
  for (int l = 0; l < kL; ++l) m[l] = -std::numeric_limits<C>::infinity();
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) {
      C v = C(p[k + l]);
      m[l] = v > m[l] ? v : m[l];
    }
  for (; k < n; ++k) {
    C v = C(p[k]);
    m[0] = v > m[0] ? v : m[0];
  }
  C r = m[0];
  for (int l = 1; l < kL; ++l) r = m[l] > r ? m[l] : r;
  return r;
}
template <class T> double row_sum_d(const T* p, int64_t n) {
  double s[kL] = {};
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) s[l] += double(compute_t<T>(p[k + l]));
  for (; k < n; ++k) s[0] += double(compute_t<T>(p[k]));
  double r = 0;
  for (int l = 0; l < kL; ++l) r += s[l];
  return r;
}
template <class T> double row_sqdev_d(const T* p, int64_t n, double mean) {
  double s[kL] = {};
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) {
      double d = double(compute_t<T>(p[k + l])) - mean;
      s[l] += d * d;
    }
  for (; k < n; ++k) {
    double d = double(compute_t<T>(p[k])) - mean;
    s[0] += d * d;
  }
  double r = 0;
  for (int l = 0; l < kL; ++l) r += s[l];
  return r;
}
template <class T> double row_sumexp_d(const T* p, int64_t n, compute_t<T> m) {
  using C = compute_t<T>;
  double s[kL] = {};
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) s[l] += double(fn::exp_<C>(C(p[k + l]) - m));
  for (; k < n; ++k) s[0] += double(fn::exp_<C>(C(p[k]) - m));
  double r = 0;
  for (int l = 0; l < kL; ++l) r += s[l];
  return r;
}

// ---------------------------------------------------------------- engine-based reductions

template <class C> struct ProdOp {
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
  static Acc init() { return Acc(1); }
  static Acc step(Acc a, C x) { return fn::wrap_mul(a, Acc(x)); }  // NOTE [Integer wrap]
  static Acc merge(Acc a, Acc b) { return fn::wrap_mul(a, b); }
  static Acc finish(Acc a, int64_t) { return a; }
};
template <class C, bool IsMax> struct ExtremeOp {
  using Acc = C;
  static Acc init() { return IsMax ? lowest_v<C>() : highest_v<C>(); }
  static Acc step(Acc a, C x) { return (IsMax ? x > a : x < a) || is_nan_v(x) ? x : a; }
  static Acc merge(Acc a, Acc b) { return step(a, b); }
  static Acc finish(Acc a, int64_t) { return a; }
};
template <class C> using MaxOp = ExtremeOp<C, true>;
template <class C> using MinOp = ExtremeOp<C, false>;
// Vector norms (float inputs only; accumulate in double).
template <class C> struct Norm1Op {
  using Acc = double;
  static Acc init() { return 0; }
  static Acc step(Acc a, C x) { return a + std::fabs(double(x)); }
  static Acc merge(Acc a, Acc b) { return a + b; }
  static Acc finish(Acc a, int64_t) { return a; }
};
template <class C> struct Norm2Op : Norm1Op<C> {
  static double step(double a, C x) { return a + double(x) * double(x); }
  static double finish(double a, int64_t) { return std::sqrt(a); }
};
template <class C> struct Norm0Op : Norm1Op<C> {
  static double step(double a, C x) { return a + (x != C(0) ? 1.0 : 0.0); }
};
template <class C> struct NormInfOp {
  using Acc = double;
  static Acc init() { return 0; }
  static Acc step(Acc a, C x) {
    double v = std::fabs(double(x));
    return v > a || v != v ? v : a;
  }
  static Acc merge(Acc a, Acc b) { return b > a || b != b ? b : a; }
  static Acc finish(Acc a, int64_t) { return a; }
};
template <class C> struct NormNegInfOp {
  using Acc = double;
  static Acc init() { return INFINITY; }
  static Acc step(Acc a, C x) {
    double v = std::fabs(double(x));
    return v < a || v != v ? v : a;
  }
  static Acc merge(Acc a, Acc b) { return b < a || b != b ? b : a; }
  static Acc finish(Acc a, int64_t) { return a; }
};

template <bool IsMax> void extreme_cpu(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto zi) {
    using T = decltype(zi);
    const DimVector& dims = ReduceAttrs::get<"dims">(k.attrs);
    if constexpr (IsMax) cpu::reduce_as<MaxOp, T, T>(k.inputs[0], dims, k.outputs[0]);
    else cpu::reduce_as<MinOp, T, T>(k.inputs[0], dims, k.outputs[0]);
  });
}

// ---------------------------------------------------------------- max/min over a dim, argmax

// For each lane of [outer, n, inner]: the extreme value (NaN-propagating) and its first index.
template <bool IsMax, class T> void arg_extreme(const Canon& c, T* vals, int64_t* idx) {
  using C = compute_t<T>;
  const T* x = static_cast<const T*>(c.x.data_ptr());
  const int64_t n = c.n, inner = c.inner;
  auto find_first = [&](const T* p, int64_t b, int64_t e, C m) {
    int64_t k = b;
    if (is_nan_v(m)) {
      while (k < e && !is_nan_v(C(p[k]))) ++k;
    } else {
      while (k < e && C(p[k]) != m) ++k;
    }
    return k;
  };
  auto row = [&](int64_t o) {
    const T* p = x + o * n;
    C m = row_extreme<IsMax>(p, n);
    if (vals) vals[o] = T(m);
    idx[o] = find_first(p, 0, n, m);
  };
  auto col = [&](int64_t o, int64_t j0, int64_t w) {
    const T* p = x + o * n * inner + j0;
    C best[kW];
    int64_t bi[kW];
    for (int64_t j = 0; j < w; ++j) {
      best[j] = C(p[j]);
      bi[j] = 0;
    }
    for (int64_t k = 1; k < n; ++k) {
      const T* q = p + k * inner;
      for (int64_t j = 0; j < w; ++j) {
        C v = C(q[j]);
        bool b = better<IsMax>(v, best[j]);
        best[j] = b ? v : best[j];
        bi[j] = b ? k : bi[j];
      }
    }
    for (int64_t j = 0; j < w; ++j) {
      if (vals) vals[o * inner + j0 + j] = T(best[j]);
      idx[o * inner + j0 + j] = bi[j];
    }
  };
  if (c.outer == 1 && inner == 1 && n > 2 * kBlock) {
    struct Best {
      C v;
      int64_t i;
    };
    Best r = blocked<Best>(
        n,
        [&](int64_t b, int64_t e) {
          C m = row_extreme<IsMax>(x + b, e - b);
          return Best{m, find_first(x, b, e, m)};
        },
        [](Best a, Best b) { return better<IsMax>(b.v, a.v) ? b : a; });
    if (vals) vals[0] = T(r.v);
    idx[0] = r.i;
    return;
  }
  drive(c.outer, n, inner, row, col);
}

template <bool IsMax> void max_dim_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  Canon c = canon_dim(x, DimReduceAttrs::get<"dim">(k.attrs));
  dispatch_dtype(x.dtype(), [&](auto zi) {
    using T = decltype(zi);
    arg_extreme<IsMax, T>(c, static_cast<T*>(k.outputs[0].data_ptr()),
                          static_cast<int64_t*>(k.outputs[1].data_ptr()));
  });
}
template <bool IsMax> void argmax_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  Canon c;
  if (const std::optional<int64_t> dim = ArgExtremeAttrs::get<"dim">(k.attrs)) {
    c = canon_dim(x, *dim);
  } else {
    c.x = kernel_contiguous(x);
    c.n = x.numel();
  }
  dispatch_dtype(x.dtype(), [&](auto zi) {
    using T = decltype(zi);
    arg_extreme<IsMax, T>(c, nullptr, static_cast<int64_t*>(k.outputs[0].data_ptr()));
  });
}

// ---------------------------------------------------------------- var/std, logsumexp

template <class T> void var_kernel(const Canon& c, T* out, double correction, bool take_sqrt) {
  using C = compute_t<T>;
  const T* x = static_cast<const T*>(c.x.data_ptr());
  const int64_t n = c.n, inner = c.inner;
  const double denom = std::max(0.0, double(n) - correction);
  auto fin = [&](double ss) {
    double v = ss / denom;
    return T(C(take_sqrt ? std::sqrt(v) : v));
  };
  if (c.outer == 1 && inner == 1 && n > 2 * kBlock) {
    auto add = [](double a, double b) { return a + b; };
    double s = blocked<double>(
        n, [&](int64_t b, int64_t e) { return row_sum_d(x + b, e - b); }, add);
    const double mean = s / double(n);
    double ss = blocked<double>(
        n, [&](int64_t b, int64_t e) { return row_sqdev_d(x + b, e - b, mean); }, add);
    out[0] = fin(ss);
    return;
  }
  auto row = [&](int64_t o) {
    const T* p = x + o * n;
    const double mean = row_sum_d(p, n) / double(n);
    out[o] = fin(row_sqdev_d(p, n, mean));
  };
  auto col = [&](int64_t o, int64_t j0, int64_t w) {
    const T* p = x + o * n * inner + j0;
    double s[kW] = {}, ss[kW] = {};
    for (int64_t k = 0; k < n; ++k) {
      const T* q = p + k * inner;
      for (int64_t j = 0; j < w; ++j) s[j] += double(C(q[j]));
    }
    for (int64_t j = 0; j < w; ++j) s[j] /= double(n);
    for (int64_t k = 0; k < n; ++k) {
      const T* q = p + k * inner;
      for (int64_t j = 0; j < w; ++j) {
        double d = double(C(q[j])) - s[j];
        ss[j] += d * d;
      }
    }
    for (int64_t j = 0; j < w; ++j) out[o * inner + j0 + j] = fin(ss[j]);
  };
  drive(c.outer, n, inner, row, col);
}
template <bool Sqrt> void var_cpu(const KernelArgs& k) {
  Canon c = canon_reduce(k.inputs[0], VarAttrs::get<"dims">(k.attrs));
  dispatch_float(k.inputs[0].dtype(), Sqrt ? "std" : "var", [&](auto zi) {
    using T = decltype(zi);
    var_kernel<T>(c, static_cast<T*>(k.outputs[0].data_ptr()),
                  double(VarAttrs::get<"correction">(k.attrs)), Sqrt);
  });
}

template <class T> void logsumexp_kernel(const Canon& c, T* out) {
  using C = compute_t<T>;
  const T* x = static_cast<const T*>(c.x.data_ptr());
  const int64_t n = c.n, inner = c.inner;
  auto shift_of = [](C m) { return std::isinf(m) ? C(0) : m; };  // all -inf rows: log(0) = -inf
  if (c.outer == 1 && inner == 1 && n > 2 * kBlock) {
    C m = blocked<C>(
        n, [&](int64_t b, int64_t e) { return row_max_shift(x + b, e - b); },
        [](C a, C b) { return b > a ? b : a; });
    m = shift_of(m);
    double s = blocked<double>(
        n, [&](int64_t b, int64_t e) { return row_sumexp_d(x + b, e - b, m); },
        [](double a, double b) { return a + b; });
    out[0] = T(C(double(m) + std::log(s)));
    return;
  }
  auto row = [&](int64_t o) {
    const T* p = x + o * n;
    C m = shift_of(row_max_shift(p, n));
    out[o] = T(C(double(m) + std::log(row_sumexp_d(p, n, m))));
  };
  auto col = [&](int64_t o, int64_t j0, int64_t w) {
    const T* p = x + o * n * inner + j0;
    C m[kW];
    double s[kW] = {};
    for (int64_t j = 0; j < w; ++j) m[j] = -std::numeric_limits<C>::infinity();
    for (int64_t k = 0; k < n; ++k) {
      const T* q = p + k * inner;
      for (int64_t j = 0; j < w; ++j) {
        C v = C(q[j]);
        m[j] = v > m[j] ? v : m[j];
      }
    }
    for (int64_t j = 0; j < w; ++j) m[j] = shift_of(m[j]);
    for (int64_t k = 0; k < n; ++k) {
      const T* q = p + k * inner;
      for (int64_t j = 0; j < w; ++j) s[j] += double(fn::exp_<C>(C(q[j]) - m[j]));
    }
    for (int64_t j = 0; j < w; ++j) out[o * inner + j0 + j] = T(C(double(m[j]) + std::log(s[j])));
  };
  drive(c.outer, n, inner, row, col);
}

// ---------------------------------------------------------------- softmax, log_softmax

template <bool Log, class T> void softmax_kernel(const Canon& c, T* y) {
  using C = compute_t<T>;
  const T* x = static_cast<const T*>(c.x.data_ptr());
  const int64_t n = c.n, inner = c.inner;
  auto row = [&](int64_t o) {
    const T* __restrict p = x + o * n;
    T* __restrict q = y + o * n;
    const C m = row_max_shift(p, n);
    C s[kL] = {};
    int64_t k = 0;
    if constexpr (Log) {
      for (; k + kL <= n; k += kL)
        for (int l = 0; l < kL; ++l) s[l] += fn::exp_<C>(C(p[k + l]) - m);
      for (; k < n; ++k) s[0] += fn::exp_<C>(C(p[k]) - m);
    } else {
      for (; k + kL <= n; k += kL)
        for (int l = 0; l < kL; ++l) {
          C e = fn::exp_<C>(C(p[k + l]) - m);
          q[k + l] = T(e);
          s[l] += e;
        }
      for (; k < n; ++k) {
        C e = fn::exp_<C>(C(p[k]) - m);
        q[k] = T(e);
        s[0] += e;
      }
    }
    C sum = 0;
    for (int l = 0; l < kL; ++l) sum += s[l];
    if constexpr (Log) {
      const C ls = std::log(sum);  // (x - max) - log(sum): no rounding of a large max + log
      for (int64_t i = 0; i < n; ++i) q[i] = T((C(p[i]) - m) - ls);
    } else {
      const C inv = C(1) / sum;
      for (int64_t i = 0; i < n; ++i) q[i] = T(C(q[i]) * inv);
    }
  };
  auto col = [&](int64_t o, int64_t j0, int64_t w) {
    const T* p = x + o * n * inner + j0;
    T* q = y + o * n * inner + j0;
    C m[kW], s[kW];
    for (int64_t j = 0; j < w; ++j) {
      m[j] = -std::numeric_limits<C>::infinity();
      s[j] = 0;
    }
    for (int64_t k = 0; k < n; ++k) {
      const T* pk = p + k * inner;
      for (int64_t j = 0; j < w; ++j) {
        C v = C(pk[j]);
        m[j] = v > m[j] ? v : m[j];
      }
    }
    for (int64_t k = 0; k < n; ++k) {
      const T* pk = p + k * inner;
      T* qk = q + k * inner;
      for (int64_t j = 0; j < w; ++j) {
        C e = fn::exp_<C>(C(pk[j]) - m[j]);
        if constexpr (!Log) qk[j] = T(e);
        s[j] += e;
      }
    }
    if constexpr (Log) {
      for (int64_t j = 0; j < w; ++j) s[j] = std::log(s[j]);
    } else {
      for (int64_t j = 0; j < w; ++j) s[j] = C(1) / s[j];
    }
    for (int64_t k = 0; k < n; ++k) {
      const T* pk = p + k * inner;
      T* qk = q + k * inner;
      for (int64_t j = 0; j < w; ++j) {
        if constexpr (Log) qk[j] = T((C(pk[j]) - m[j]) - s[j]);
        else qk[j] = T(C(qk[j]) * s[j]);
      }
    }
  };
  drive(c.outer, n, inner, row, col);
}
template <bool Log> void softmax_cpu(const KernelArgs& k) {
  Canon c = canon_dim(k.inputs[0], SoftmaxAttrs::get<"dim">(k.attrs));
  dispatch_float(k.inputs[0].dtype(), Log ? "log_softmax" : "softmax", [&](auto zi) {
    using T = decltype(zi);
    softmax_kernel<Log, T>(c, static_cast<T*>(k.outputs[0].data_ptr()));
  });
}

// ---------------------------------------------------------------- cumsum, cumprod

// Integer running sums and products wrap in two's complement (NOTE [Integer wrap]; fuzz_ops:
// a cumprod of int64 extremes overflowed).
template <class Acc> inline Acc scan_step(Acc a, Acc x, bool prod) {
  if constexpr (std::is_floating_point_v<Acc>) return prod ? a * x : a + x;
  else return Acc(prod ? uint64_t(a) * uint64_t(x) : uint64_t(a) + uint64_t(x));
}
template <bool Prod, bool Reverse, class T> void scan_kernel(const Canon& c, T* y) {
  using C = compute_t<T>;
  using Acc = std::conditional_t<is_floating_v<T>, double, int64_t>;
  const T* x = static_cast<const T*>(c.x.data_ptr());
  const int64_t n = c.n, inner = c.inner;
  auto row = [&](int64_t o) {
    const T* p = x + o * n;
    T* q = y + o * n;
    Acc a = Acc(Prod ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = Reverse ? n - 1 - i : i;
      a = scan_step(a, Acc(C(p[k])), Prod);
      q[k] = T(C(a));
    }
  };
  auto col = [&](int64_t o, int64_t j0, int64_t w) {
    const T* p = x + o * n * inner + j0;
    T* q = y + o * n * inner + j0;
    Acc a[kW];
    for (int64_t j = 0; j < w; ++j) a[j] = Acc(Prod ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = Reverse ? n - 1 - i : i;
      const T* pk = p + k * inner;
      T* qk = q + k * inner;
      for (int64_t j = 0; j < w; ++j) {
        a[j] = scan_step(a[j], Acc(C(pk[j])), Prod);
        qk[j] = T(C(a[j]));
      }
    }
  };
  drive(c.outer, n, inner, row, col);
}
template <bool Prod> void scan_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  Canon c = canon_dim(x, ScanAttrs::get<"dim">(k.attrs));
  const bool reverse = ScanAttrs::get<"reverse">(k.attrs);
  dispatch_dtype(x.dtype(), [&](auto zi) {
    using T = decltype(zi);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> ||
                  std::is_same_v<T, int32_t>) {
      fail("[{}] internal: expected int64 or floating input, got {}", Prod ? "cumprod" : "cumsum",
           dtype_name(x.dtype()));
    } else {
      T* y = static_cast<T*>(k.outputs[0].data_ptr());
      if (reverse) scan_kernel<Prod, true, T>(c, y);
      else scan_kernel<Prod, false, T>(c, y);
    }
  });
}

}  // namespace

// ---------------------------------------------------------------- the kernels

void prod(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  dispatch_dtype(x.dtype(), [&](auto zi) {
    using T = decltype(zi);
    if (out.dtype() == x.dtype())
      cpu::reduce_as<ProdOp, T, T>(x, ReduceAttrs::get<"dims">(k.attrs), out);
    else if (out.dtype() == kInt64)
      cpu::reduce_as<ProdOp, T, int64_t>(x, ReduceAttrs::get<"dims">(k.attrs), out);
    else
      fail("[prod] unsupported output dtype {} for input {}", dtype_name(out.dtype()),
           dtype_name(x.dtype()));
  });
}

void norm(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const DimVector& dims = NormReduceAttrs::get<"dims">(k.attrs);
  const double p = NormReduceAttrs::get<"p">(k.attrs);
  dispatch_float(x.dtype(), "norm", [&](auto zi) {
    using T = decltype(zi);
    const Tensor& o = k.outputs[0];
    if (p == 2) cpu::reduce_as<Norm2Op, T, T>(x, dims, o);
    else if (p == 1) cpu::reduce_as<Norm1Op, T, T>(x, dims, o);
    else if (p == 0) cpu::reduce_as<Norm0Op, T, T>(x, dims, o);
    else if (std::isinf(p) && p > 0) cpu::reduce_as<NormInfOp, T, T>(x, dims, o);
    else if (std::isinf(p)) cpu::reduce_as<NormNegInfOp, T, T>(x, dims, o);
    else {
      // general p: (sum |x|^p)^(1/p), accumulated in float64 over a float64 scratch of |x|^p
      // (a kernel dispatches no op: NOTE [No kernel dispatches])
      const Tensor pw = make_empty(x.sizes(), kFloat64, x.device());
      cpu::cpu_kernel<double, T>(pw, {&x},
                                 [p](compute_t<T> v) { return std::pow(std::fabs(double(v)), p); });
      const Tensor sum = make_empty(o.sizes(), kFloat64, x.device());
      cpu::reduce_as<Norm1Op, double, double>(pw, dims, sum);  // |v| = v: a plain sum
      cpu::cpu_kernel<T, double>(o, {&sum}, [p](double v) { return std::pow(v, 1.0 / p); });
    }
  });
}

void logsumexp(const KernelArgs& k) {
  Canon c = canon_reduce(k.inputs[0], ReduceAttrs::get<"dims">(k.attrs));
  dispatch_float(k.inputs[0].dtype(), "logsumexp", [&](auto zi) {
    using T = decltype(zi);
    logsumexp_kernel<T>(c, static_cast<T*>(k.outputs[0].data_ptr()));
  });
}
void amax(const KernelArgs& k) { extreme_cpu<true>(k); }
void amin(const KernelArgs& k) { extreme_cpu<false>(k); }
void max_dim(const KernelArgs& k) { max_dim_cpu<true>(k); }
void min_dim(const KernelArgs& k) { max_dim_cpu<false>(k); }
void argmax(const KernelArgs& k) { argmax_cpu<true>(k); }
void argmin(const KernelArgs& k) { argmax_cpu<false>(k); }
void var(const KernelArgs& k) { var_cpu<false>(k); }
void std(const KernelArgs& k) { var_cpu<true>(k); }
void softmax(const KernelArgs& k) { softmax_cpu<false>(k); }
void log_softmax(const KernelArgs& k) { softmax_cpu<true>(k); }
void cumsum(const KernelArgs& k) { scan_cpu<false>(k); }
void cumprod(const KernelArgs& k) { scan_cpu<true>(k); }

}  // namespace oneflow::cpu

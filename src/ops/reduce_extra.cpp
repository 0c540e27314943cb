// Reductions beyond sum/mean/all/any: prod, amax/amin (max()/min()), max/min over a dim,
// argmax/argmin, var/std, logsumexp, norm, cumsum/cumprod, softmax/log_softmax.
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

#include "autograd/node.h"
#include "global/global.h"
#include "global/rules.h"
#include "cpu/loops.h"
#include "cpu/reduce.h"
#include "ops/functors.h"
#include "ops/reduce_common.h"
#include "thread_pool.h"
#include "ops/checks.h"

namespace oneflow {

using namespace reduce_detail;

namespace {

// The op table is built lazily (on first find_op/dispatch through it): make sure it exists
// before dereferencing the OpDef pointers registered below.

constexpr int kL = 16;               // lane accumulators in row loops
constexpr int64_t kW = 64;           // lanes per block in column loops
constexpr int64_t kBlock = 1 << 16;  // fixed block of a single long row

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_item));
}

// ---------------------------------------------------------------- validation

// Reductions without an identity (max, argmax, ...) refuse zero-size reduced dims.
void check_nonempty(const Tensor& x, const DimVector& dims, const char* op) {
  if (x.dim() == 0) return;
  for (int64_t d : dims)
    if (x.sizes()[d] == 0)
      fail(
          "[{}] cannot reduce over dimension {} of size 0 (input shape {}): the operation has "
          "no identity",
          op, d, shape_str(x.sizes()));
}
DimVector all_dims(const Tensor& x) {
  DimVector r;
  for (int64_t d = 0; d < x.dim(); ++d) r.push_back(d);
  return r;
}
int64_t reduced_count(IntArrayRef sizes, const DimVector& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[d];
  return n;
}
// g of a reduction output, reshaped to keepdim form (broadcastable against the input).
Tensor keepdim_view(const Tensor& g, IntArrayRef in_sizes, const DimVector& dims, bool keepdim) {
  return keepdim ? g : g.reshape(reduced_shape(in_sizes, dims, true));
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

void prod_cpu(const KernelArgs& k) {
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
template <bool IsMax> void extreme_cpu(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto zi) {
    using T = decltype(zi);
    const DimVector& dims = ReduceAttrs::get<"dims">(k.attrs);
    if constexpr (IsMax) cpu::reduce_as<MaxOp, T, T>(k.inputs[0], dims, k.outputs[0]);
    else cpu::reduce_as<MinOp, T, T>(k.inputs[0], dims, k.outputs[0]);
  });
}
void norm_cpu(const KernelArgs& k) {
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
bool has_dim(const Attrs& a) {
  return a.size() > 0 && std::holds_alternative<int64_t>(a.values[0]);
}
template <bool IsMax> void argmax_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  Canon c;
  if (has_dim(k.attrs)) {
    c = canon_dim(x, k.attrs.i(0));
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
void logsumexp_cpu(const KernelArgs& k) {
  Canon c = canon_reduce(k.inputs[0], ReduceAttrs::get<"dims">(k.attrs));
  dispatch_float(k.inputs[0].dtype(), "logsumexp", [&](auto zi) {
    using T = decltype(zi);
    logsumexp_kernel<T>(c, static_cast<T*>(k.outputs[0].data_ptr()));
  });
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

// ---------------------------------------------------------------- infer_meta

void prod_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  reduce_meta(in, a, out, "prod");
}
template <bool IsMax> void extreme_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = IsMax ? "amax" : "amin";
  reduce_meta(in, a, out, op);  // checks the dims check_nonempty reads
  check_nonempty(in[0], ReduceAttrs::get<"dims">(a), op);
  out[0].dtype = in[0].dtype();
}
template <bool IsMax> void max_dim_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = IsMax ? "max" : "min";
  const Tensor& x = in[0];
  const int64_t d = wrap_dim(DimReduceAttrs::get<"dim">(a), x.dim(), op);
  DimVector dims;
  if (x.dim() > 0) dims.push_back(d);
  check_nonempty(x, dims, op);
  DimVector shape = reduced_shape(x.sizes(), dims, DimReduceAttrs::get<"keepdim">(a));
  out.push_back({shape, {}, 0, x.dtype(), x.device()});
  out.push_back({shape, {}, 0, kInt64, x.device()});
}
template <bool IsMax> void argmax_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = IsMax ? "argmax" : "argmin";
  const Tensor& x = in[0];
  DimVector shape;
  if (has_dim(a)) {
    const int64_t d = wrap_dim(a.i(0), x.dim(), op);
    DimVector dims;
    if (x.dim() > 0) dims.push_back(d);
    check_nonempty(x, dims, op);
    shape = reduced_shape(x.sizes(), dims, a.b(1));
  } else {
    if (x.numel() == 0)
      fail("[{}] cannot take the {} of an empty tensor of shape {}: specify a dim of nonzero size",
           op, op, shape_str(x.sizes()));
    if (a.b(1)) shape = DimVector(size_t(x.dim()), 1);
  }
  out.push_back({shape, {}, 0, kInt64, x.device()});
}
template <bool Sqrt> void var_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = Sqrt ? "std" : "var";
  check_float(op, in[0], "tensor");
  reduce_meta(in, a, out, op);
  out[0].dtype = in[0].dtype();
}
void logsumexp_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  check_float("logsumexp", in[0], "tensor");
  reduce_meta(in, a, out, "logsumexp");
  out[0].dtype = in[0].dtype();
}
void norm_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  check_float("norm", in[0], "tensor");
  reduce_meta(in, a, out, "norm");
  const double p = NormReduceAttrs::get<"p">(a);
  if (std::isnan(p)) fail("[norm] p must not be NaN");
  if (std::isinf(p)) check_nonempty(in[0], NormReduceAttrs::get<"dims">(a), "norm");
  out[0].dtype = in[0].dtype();
}
template <bool Log> void softmax_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = Log ? "log_softmax" : "softmax";
  check_float(op, in[0], "tensor");
  wrap_dim(SoftmaxAttrs::get<"dim">(a), in[0].dim(), op);
  out.push_back({in[0].sizes().dims(), {}, 0, in[0].dtype(), in[0].device()});
}
template <bool Prod> void scan_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = Prod ? "cumprod" : "cumsum";
  const ScalarType t = in[0].dtype();
  if (t != kInt64 && !is_floating_point(t))
    fail("[{}] internal: input must be int64 or floating point, got {}", op, dtype_name(t));
  wrap_dim(ScanAttrs::get<"dim">(a), in[0].dim(), op);
  out.push_back({in[0].sizes().dims(), {}, 0, t, in[0].device()});
}

// ---------------------------------------------------------------- dispatch helpers

Tensor prod_impl(const Tensor& x, const DimVector& dims, bool keepdim, ScalarType out) {
  return dispatch1(OF_OP("prod"), {x}, ReduceAttrs::make(dims, keepdim, out));
}
Tensor extreme_impl(bool is_max, const Tensor& x, IntArrayRef dims, bool keepdim, const char* op) {
  check_defined(op, x);
  DimVector d = normalize_reduce_dims(x, dims, op);
  check_nonempty(x, d, op);
  return dispatch1(is_max ? OF_OP("amax") : OF_OP("amin"), {x},
                   ReduceAttrs::make(d, keepdim, x.dtype()));
}
Tensor scan_impl(bool prod, const Tensor& x, int64_t dim, bool reverse) {
  return dispatch1(prod ? OF_OP("cumprod") : OF_OP("cumsum"), {x}, ScanAttrs::make(dim, reverse));
}

// ---------------------------------------------------------------- VJPs (public ops only)

TensorList prod_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  const DimVector& dims = ReduceAttrs::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  Tensor gk = keepdim_view(g[0], in, dims, ReduceAttrs::get<"keepdim">(c.attrs()));
  // zeros handled like PyTorch: one zero gets the product of the others, two or more give 0
  Tensor z = x == 0;
  Tensor cnt = sum(z, dims, true);
  Tensor xs = where(z, Scalar(1.0), x);
  Tensor p = prod_impl(xs, dims, true, x.dtype());
  Tensor r = where(cnt == 0, p / xs, where(z & (cnt == 1), p, Scalar(0.0)));
  return {r * gk};
}
TensorList extreme_vjp(const VjpCtx& c, const TensorList& g) {
  // ties: the gradient is split evenly among the extreme elements
  Tensor x = c.input(0);
  const DimVector& dims = ReduceAttrs::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = ReduceAttrs::get<"keepdim">(c.attrs());
  Tensor yk = keepdim_view(c.output(0), in, dims, keep);
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  Tensor mask = (x == yk).to(g[0].dtype());
  Tensor cnt = sum(mask, dims, true);
  return {gk * mask / cnt};
}
TensorList max_dim_vjp(const VjpCtx& c, const TensorList& g) {
  IntArrayRef in = c.input_sizes(0);
  const int64_t nd = int64_t(in.size());
  if (nd == 0) return {g[0]};
  const int64_t d = wrap_dim(DimReduceAttrs::get<"dim">(c.attrs()), nd, "max");
  Tensor idx = c.output(1), gv = g[0];
  if (!DimReduceAttrs::get<"keepdim">(c.attrs())) {
    idx = idx.unsqueeze(d);
    gv = gv.unsqueeze(d);
  }
  DimVector ar_shape(size_t(nd - d), 1);
  ar_shape[0] = in[d];
  // the arange on the indices' device (a global one's: its local piece's)
  const Device dev = idx.is_global() ? global::meta(idx).local.device() : idx.device();
  Tensor ar = global::constant_like(
      arange(in[d], TensorOptions(kInt64).device(dev)).reshape(ar_shape), idx);
  return {where(ar == idx, gv, Scalar(0.0))};
}
template <bool Sqrt> TensorList var_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  using A = VarAttrs;
  const DimVector& dims = A::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = A::get<"keepdim">(c.attrs());
  const double denom =
      std::max(0.0, double(reduced_count(in, dims)) - double(A::get<"correction">(c.attrs())));
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  Tensor centered = x - mean(x, dims, true);
  if constexpr (Sqrt) {
    Tensor yk = keepdim_view(c.output(0), in, dims, keep);
    Tensor gs = where(yk == 0, Scalar(0.0), gk / yk);  // PyTorch: zero std gives zero grad
    return {gs * centered / denom};
  } else {
    return {gk * centered * (2.0 / denom)};
  }
}
TensorList logsumexp_vjp(const VjpCtx& c, const TensorList& g) {
  const DimVector& dims = ReduceAttrs::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = ReduceAttrs::get<"keepdim">(c.attrs());
  Tensor yk = keepdim_view(c.output(0), in, dims, keep);
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  return {gk * (c.input(0) - yk).exp()};
}
TensorList norm_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  using A = NormReduceAttrs;
  const DimVector& dims = A::get<"dims">(c.attrs());
  IntArrayRef in = c.input_sizes(0);
  const bool keep = A::get<"keepdim">(c.attrs());
  const double p = A::get<"p">(c.attrs());
  Tensor yk = keepdim_view(c.output(0), in, dims, keep);
  Tensor gk = keepdim_view(g[0], in, dims, keep);
  if (p == 0) return {zeros_like(x)};
  if (p == 1) return {gk * x.sign()};
  if (p == 2) return {where(yk == 0, Scalar(0.0), gk / yk) * x};
  if (std::isinf(p)) {
    Tensor mask = (x.abs() == yk).to(g[0].dtype());
    Tensor cnt = sum(mask, dims, true);
    return {gk * x.sign() * mask / cnt};
  }
  Tensor scale = where(yk == 0, Scalar(0.0), gk / yk.pow(p - 1));
  return {scale * x * x.abs().pow(p - 2)};
}
TensorList softmax_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  const int64_t d = SoftmaxAttrs::get<"dim">(c.attrs());
  return {y * (g[0] - sum(g[0] * y, {d}, true))};
}
TensorList log_softmax_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  const int64_t d = SoftmaxAttrs::get<"dim">(c.attrs());
  return {g[0] - y.exp() * sum(g[0], {d}, true)};
}
TensorList cumsum_vjp(const VjpCtx& c, const TensorList& g) {
  return {scan_impl(false, g[0], ScanAttrs::get<"dim">(c.attrs()),
                    !ScanAttrs::get<"reverse">(c.attrs()))};
}
TensorList cumprod_vjp(const VjpCtx& c, const TensorList& g) {
  // PyTorch-correct with zeros: before the first zero of a line, grad_i = sum_{j>=i} g_j y_j / x_i;
  // at the first zero, grad = sum_{j>=k} g_j * (cumprod with that zero replaced by 1)_j; after, 0.
  Tensor x = c.input(0), y = c.output(0);
  if (x.dim() == 0) return {g[0]};
  const int64_t d = ScanAttrs::get<"dim">(c.attrs());
  const bool rev = ScanAttrs::get<"reverse">(c.attrs());
  Tensor z = x == 0;
  Tensor zc = scan_impl(false, z.to(kInt64), d, rev);
  Tensor before = zc == 0;
  Tensor first = z & (zc == 1);
  Tensor part1 = where(before, scan_impl(false, g[0] * y, d, !rev) / where(before, x, Scalar(1.0)),
                       Scalar(0.0));
  Tensor y1 = scan_impl(true, where(first, Scalar(1.0), x), d, rev);
  Tensor part2 = where(first, scan_impl(false, g[0] * y1, d, !rev), Scalar(0.0));
  return {part1 + part2};
}

}  // namespace

void register_reduce_ops_extra() {
  register_op({.name = "prod",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = prod_meta,
               .cpu = prod_cpu,
               .vjp = prod_vjp,
               .save_inputs = in(0),
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "amax",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = extreme_meta<true>,
               .cpu = extreme_cpu<true>,
               .vjp = extreme_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0)});
  register_op({.name = "amin",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = extreme_meta<false>,
               .cpu = extreme_cpu<false>,
               .vjp = extreme_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0)});
  register_op({.name = "max_dim",
               .traits = kReduction,
               .attr_names = DimReduceAttrs::names(),
               .attr_types = DimReduceAttrs::types(),
               .infer_meta = max_dim_meta<true>,
               .cpu = max_dim_cpu<true>,
               .vjp = max_dim_vjp,
               .save_outputs = out(1),
               .contiguous_inputs = kEveryInput});
  register_op({.name = "min_dim",
               .traits = kReduction,
               .attr_names = DimReduceAttrs::names(),
               .attr_types = DimReduceAttrs::types(),
               .infer_meta = max_dim_meta<false>,
               .cpu = max_dim_cpu<false>,
               .vjp = max_dim_vjp,
               .save_outputs = out(1),
               .contiguous_inputs = kEveryInput});
  // argmax/argmin: dim and keepdim, but no types: dim is absent (a monostate) for the index
  // into the flattened tensor, so its reads stay positional (has_dim)
  register_op({.name = "argmax",
               .traits = kReduction | kNonDifferentiable,
               .attr_names = {"dim", "keepdim"},
               .infer_meta = argmax_meta<true>,
               .cpu = argmax_cpu<true>,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "argmin",
               .traits = kReduction | kNonDifferentiable,
               .attr_names = {"dim", "keepdim"},
               .infer_meta = argmax_meta<false>,
               .cpu = argmax_cpu<false>,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "var",
               .traits = kReduction,
               .attr_names = VarAttrs::names(),
               .attr_types = VarAttrs::types(),
               .infer_meta = var_meta<false>,
               .cpu = var_cpu<false>,
               .vjp = var_vjp<false>,
               .save_inputs = in(0),
               .contiguous_inputs = kEveryInput});
  register_op({.name = "std",
               .traits = kReduction,
               .attr_names = VarAttrs::names(),
               .attr_types = VarAttrs::types(),
               .infer_meta = var_meta<true>,
               .cpu = var_cpu<true>,
               .vjp = var_vjp<true>,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .contiguous_inputs = kEveryInput});
  register_op({.name = "logsumexp",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = logsumexp_meta,
               .cpu = logsumexp_cpu,
               .vjp = logsumexp_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "norm",
               .traits = kReduction,
               .attr_names = NormReduceAttrs::names(),
               .attr_types = NormReduceAttrs::types(),
               .infer_meta = norm_meta,
               .cpu = norm_cpu,
               .vjp = norm_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cumsum",
               .attr_names = ScanAttrs::names(),
               .attr_types = ScanAttrs::types(),
               .infer_meta = scan_meta<false>,
               .cpu = scan_cpu<false>,
               .vjp = cumsum_vjp,
               .sbp_rule = &sbp_rules::kCumsum,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cumprod",
               .attr_names = ScanAttrs::names(),
               .attr_types = ScanAttrs::types(),
               .infer_meta = scan_meta<true>,
               .cpu = scan_cpu<true>,
               .vjp = cumprod_vjp,
               .save_inputs = in(0),
               .save_outputs = out(0),
               .sbp_rule = &sbp_rules::kCumprod,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "softmax",
               .traits = kCheapRecompute,
               .attr_names = SoftmaxAttrs::names(),
               .attr_types = SoftmaxAttrs::types(),
               .infer_meta = softmax_meta<false>,
               .cpu = softmax_cpu<false>,
               .vjp = softmax_vjp,
               .save_outputs = out(0),
               .sbp_rule = &sbp_rules::kSoftmax,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "log_softmax",
               .traits = kCheapRecompute,
               .attr_names = SoftmaxAttrs::names(),
               .attr_types = SoftmaxAttrs::types(),
               .infer_meta = softmax_meta<true>,
               .cpu = softmax_cpu<true>,
               .vjp = log_softmax_vjp,
               .save_outputs = out(0),
               .sbp_rule = &sbp_rules::kSoftmax,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
}

// ---------------------------------------------------------------- public functions

// prod: integers (and bool) accumulate into int64 like sum; dtype= casts the input first.
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  check_defined("prod", x);
  DimVector d = normalize_reduce_dims(x, {dim}, "prod");
  Tensor in = dtype ? cast_if_needed(x, *dtype) : x;
  ScalarType out = is_floating_point(in.dtype()) || dtype ? in.dtype() : kInt64;
  return prod_impl(in, d, keepdim, out);
}
Tensor prod(const Tensor& x, std::optional<ScalarType> dtype) {
  check_defined("prod", x);
  Tensor in = dtype ? cast_if_needed(x, *dtype) : x;
  ScalarType out = is_floating_point(in.dtype()) || dtype ? in.dtype() : kInt64;
  return prod_impl(in, all_dims(x), false, out);
}

Tensor max(const Tensor& x) {
  check_defined("max", x);
  return extreme_impl(true, x, {}, false, "max");
}
Tensor min(const Tensor& x) {
  check_defined("min", x);
  return extreme_impl(false, x, {}, false, "min");
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_impl(true, x, dims, keepdim, "amax");
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_impl(false, x, dims, keepdim, "amin");
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("max", x);
  int64_t d = wrap_dim(dim, x.dim(), "max");
  TensorList r = dispatch(OF_OP("max_dim"), {x}, DimReduceAttrs::make(d, keepdim));
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("min", x);
  int64_t d = wrap_dim(dim, x.dim(), "min");
  TensorList r = dispatch(OF_OP("min_dim"), {x}, DimReduceAttrs::make(d, keepdim));
  return {r[0], r[1]};
}
namespace {
Tensor argext(bool is_max, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  const char* op = is_max ? "argmax" : "argmin";
  check_defined(op, x);
  AttrValue d;
  if (dim) d = wrap_dim(*dim, x.dim(), op);
  return dispatch1(is_max ? OF_OP("argmax") : OF_OP("argmin"), {x}, {d, keepdim});
}
Tensor var_std(bool is_std, const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  const char* op = is_std ? "std" : "var";
  check_defined(op, x);
  check_float(op, x, "tensor");
  DimVector d = normalize_reduce_dims(x, dims, op);
  return dispatch1(is_std ? OF_OP("std") : OF_OP("var"), {x},
                   VarAttrs::make(d, keepdim, x.dtype(), correction));
}
Tensor softmax_impl(bool log, const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  const char* op = log ? "log_softmax" : "softmax";
  check_defined(op, x);
  Tensor in = dtype ? cast_if_needed(x, *dtype) : x;
  check_float(op, in, "tensor");
  int64_t d = wrap_dim(dim, x.dim(), op);
  return dispatch1(log ? OF_OP("log_softmax") : OF_OP("softmax"), {in}, SoftmaxAttrs::make(d));
}
Tensor scan_public(bool prod, const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  const char* op = prod ? "cumprod" : "cumsum";
  check_defined(op, x);
  int64_t d = wrap_dim(dim, x.dim(), op);
  ScalarType t = dtype.value_or(is_floating_point(x.dtype()) ? x.dtype() : kInt64);
  if (!is_floating_point(t) && t != kInt64)
    fail("[{}] dtype {} is not supported: use int64 or a floating-point dtype", op, dtype_name(t));
  return scan_impl(prod, cast_if_needed(x, t), d, false);
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return argext(true, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return argext(false, x, dim, keepdim);
}

Tensor var(const Tensor& x, bool unbiased) {
  return var_std(false, x, {}, unbiased ? 1 : 0, false);
}
Tensor var(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return var_std(false, x, dims, unbiased ? 1 : 0, keepdim);
}
Tensor var(const Tensor& x, std::optional<IntArrayRef> dims, std::optional<int64_t> correction,
           bool keepdim) {
  return var_std(false, x, dims ? *dims : IntArrayRef(), correction.value_or(1), keepdim);
}
Tensor std(const Tensor& x, bool unbiased) { return var_std(true, x, {}, unbiased ? 1 : 0, false); }
Tensor std(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return var_std(true, x, dims, unbiased ? 1 : 0, keepdim);
}
Tensor std(const Tensor& x, std::optional<IntArrayRef> dims, std::optional<int64_t> correction,
           bool keepdim) {
  return var_std(true, x, dims ? *dims : IntArrayRef(), correction.value_or(1), keepdim);
}

Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) {
  check_defined("logsumexp", x);
  check_float("logsumexp", x, "tensor");
  DimVector d = normalize_reduce_dims(x, dims, "logsumexp");
  return dispatch1(OF_OP("logsumexp"), {x}, ReduceAttrs::make(d, keepdim, x.dtype()));
}

Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dims, bool keepdim) {
  check_defined("norm", x);
  check_float("norm", x, "tensor");
  DimVector d = normalize_reduce_dims(x, dims, "norm");
  return dispatch1(OF_OP("norm"), {x}, NormReduceAttrs::make(d, keepdim, x.dtype(), p.to_double()));
}
Tensor norm(const Tensor& x, const Scalar& p) { return norm(x, p, {}, false); }

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_public(false, x, dim, dtype);
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_public(true, x, dim, dtype);
}
Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl(false, x, dim, dtype);
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl(true, x, dim, dtype);
}

// ---------------------------------------------------------------- Tensor methods

Tensor Tensor::prod(std::optional<ScalarType> dtype) const { return oneflow::prod(*this, dtype); }
Tensor Tensor::prod(int64_t dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return oneflow::prod(*this, dim, keepdim, dtype);
}
Tensor Tensor::max() const { return oneflow::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return oneflow::max(*this, dim, keepdim);
}
Tensor Tensor::min() const { return oneflow::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return oneflow::min(*this, dim, keepdim);
}
Tensor Tensor::amax(IntArrayRef dims, bool keepdim) const {
  return oneflow::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(IntArrayRef dims, bool keepdim) const {
  return oneflow::amin(*this, dims, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return oneflow::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return oneflow::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(bool unbiased) const { return oneflow::var(*this, unbiased); }
Tensor Tensor::var(IntArrayRef dims, bool unbiased, bool keepdim) const {
  return oneflow::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(bool unbiased) const { return oneflow::std(*this, unbiased); }
Tensor Tensor::std(IntArrayRef dims, bool unbiased, bool keepdim) const {
  return oneflow::std(*this, dims, unbiased, keepdim);
}
Tensor Tensor::logsumexp(IntArrayRef dims, bool keepdim) const {
  return oneflow::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(const Scalar& p) const { return oneflow::norm(*this, p); }
Tensor Tensor::norm(const Scalar& p, IntArrayRef dims, bool keepdim) const {
  return oneflow::norm(*this, p, dims, keepdim);
}
Tensor Tensor::cumsum(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::cumsum(*this, dim, dtype);
}
Tensor Tensor::cumprod(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::cumprod(*this, dim, dtype);
}
Tensor Tensor::softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::softmax(*this, dim, dtype);
}
Tensor Tensor::log_softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return oneflow::log_softmax(*this, dim, dtype);
}

}  // namespace oneflow

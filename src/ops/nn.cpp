// Normalization, dropout, linear, losses and attention ops.
// NOTE [nn kernels]: the fused ops (batch_norm, layer_norm, group_norm, rms_norm, dropout,
// cross_entropy) and their backward ops run on contiguous copies of their inputs. Statistics
// accumulate in double (two passes over data that is in cache: mean, then squared deviations),
// work is split over rows/channels only and reductions across rows are merged in a fixed order,
// so results do not depend on the thread count. The backward ops are not differentiable
// themselves: their VJP raises a clear error if a create_graph gradient is differentiated
// again (see fused_backward_vjp), never a silently missing term. linear and the elementwise losses
// are compositions of public ops.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "global/global.h"
#include "global/rules.h"
#include "cpu/blas.h"
#include "dispatch.h"
#include "generator.h"
#include "oneflow/ops_nn.h"
#include "ops/functors.h"
#include "thread_pool.h"
#include "autocast.h"
#include "ops/checks.h"

namespace oneflow {
namespace {

// The op table is built lazily: build it before dereferencing a registration-time pointer.

constexpr int kL = 8;  // lane accumulators

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_item));
}

// ---------------------------------------------------------------- validation

template <class F> decltype(auto) dispatch_f(ScalarType t, const char* op, F&& f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    default:
      break;
  }
  fail("[{}] expected a float32 or float64 tensor, got {}", op, dtype_name(t));
}

// An optional parameter: undefined, or of x's dtype and exactly `shape`.
void check_param(const Tensor& p, const Tensor& x, IntArrayRef shape, const char* op,
                 const char* what) {
  if (!p.defined()) return;
  if (p.dtype() != x.dtype())
    fail("[{}] expected {} to have the input's dtype {}, got {}", op, what, dtype_name(x.dtype()),
         dtype_name(p.dtype()));
  if (!(p.sizes() == shape))
    fail("[{}] expected {} of shape {}, got {} (input shape {})", op, what, shape_str(shape),
         shape_str(p.sizes()), shape_str(x.sizes()));
  if (p.device() != x.device())
    fail("[{}] expected {} on {}, got {}", op, what, x.device().str(), p.device().str());
}
void check_reduction(int64_t r, const char* op) {
  if (r < Reduction::None || r > Reduction::Sum)
    fail("[{}] invalid reduction {} (expected Reduction::None (0), Mean (1) or Sum (2))", op, r);
}
void check_same_shape(const Tensor& input, const Tensor& target, const char* op,
                      const char* note = "") {
  if (!target.defined()) fail("[{}] target is undefined", op);
  if (!(input.sizes() == target.sizes()))
    fail("[{}] target shape {} does not match input shape {}{}", op, shape_str(target.sizes()),
         shape_str(input.sizes()), note);
}
// Whether s broadcasts to exactly `target`.
bool broadcasts_to(IntArrayRef s, IntArrayRef target) {
  if (s.size() > target.size()) return false;
  const size_t off = target.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != target[off + i]) return false;
  return true;
}

// Every class index of a contiguous int64 target is ignore_index or in [0, C).
void check_target_range(const Tensor& target, int64_t C, int64_t ignore_index, const char* op,
                        const Tensor& input) {
  const int64_t* p = target.data_ptr<int64_t>();
  for (int64_t i = 0; i < target.numel(); ++i)
    if (p[i] != ignore_index && (p[i] < 0 || p[i] >= C))
      fail("[{}] target index {} is out of range for {} classes (input shape {})", op, p[i], C,
           shape_str(input.sizes()));
}
// Validates class-index targets against input [N, C, d...] (or [C] with a 0-d target): the
// shapes and dtypes only when `values` is false (an op's infer_meta; its kernel checks them).
void check_class_targets(const Tensor& input, const Tensor& target, const Tensor& weight,
                         int64_t ignore_index, const char* op, bool values = true) {
  if (!target.defined()) fail("[{}] target is undefined", op);
  if (target.dtype() != kInt64)
    fail("[{}] expected class-index targets of dtype int64, got {} (shape {})", op,
         dtype_name(target.dtype()), shape_str(target.sizes()));
  if (input.dim() < 1)
    fail("[{}] expected an input of shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor", op);
  DimVector expect;
  if (input.dim() >= 2) {
    expect.push_back(input.size(0));
    for (int64_t d = 2; d < input.dim(); ++d) expect.push_back(input.size(d));
  }
  if (!(target.sizes() == IntArrayRef(expect)))
    fail("[{}] target shape {} does not match input shape {}: expected target shape {}", op,
         shape_str(target.sizes()), shape_str(input.sizes()), shape_str(expect));
  const int64_t C = input.dim() >= 2 ? input.size(1) : input.size(0);
  if (weight.defined()) {
    if (weight.dtype() != input.dtype())
      fail("[{}] expected weight to have the input's dtype {}, got {}", op,
           dtype_name(input.dtype()), dtype_name(weight.dtype()));
    if (!(weight.sizes() == IntArrayRef(DimVector{C})))
      fail("[{}] expected weight of shape ({},) (one per class), got {}", op, C,
           shape_str(weight.sizes()));
  }
  // (a global target is checked piece by piece when the op runs on the local pieces)
  if (values && target.is_cpu() && !target.is_global())
    check_target_range(target.contiguous(), C, ignore_index, op, input);
}

// A required input the kernel reads with x's geometry: defined, x's dtype and device, `shape`.
void check_saved(const Tensor& t, const Tensor& x, IntArrayRef shape, const char* op,
                 const char* what) {
  check_defined(op, t, what);
  check_param(t, x, shape, op, what);
}
// Overflow-checked: an empty tensor may have huge other dims whose partial products overflow
// (fuzz_ops: layer_norm's row count 4 * INT64_MAX).
int64_t prod_range(IntArrayRef s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i)
    if (__builtin_mul_overflow(p, s[i], &p))
      fail("[nn] the sizes {} give a product of dims {}..{} that overflows", shape_str(s), b,
           e - 1);
  return p;
}
template <class T> const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <class T> T* mptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// ---------------------------------------------------------------- row statistics

template <class T> double sum_d(const T* p, int64_t n) {
  double s[kL] = {};
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) s[l] += double(p[k + l]);
  for (; k < n; ++k) s[0] += double(p[k]);
  double r = 0;
  for (int l = 0; l < kL; ++l) r += s[l];
  return r;
}
template <class T> double sqdev_d(const T* p, int64_t n, double mean) {
  double s[kL] = {};
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) {
      double d = double(p[k + l]) - mean;
      s[l] += d * d;
    }
  for (; k < n; ++k) {
    double d = double(p[k]) - mean;
    s[0] += d * d;
  }
  double r = 0;
  for (int l = 0; l < kL; ++l) r += s[l];
  return r;
}

// ================================================================ row norms (layer/group/rms)
// NOTE [Row norm geometry]: the input is M rows of N = cg * hw elements; row r is normalized
// with its own mean/rstd, and element (j, i) of row r (j < cg channels, i < hw) uses affine
// channel (r % G) * cg + j. layer_norm/rms_norm: G = 1, cg = N, hw = 1; group_norm: rows are
// (sample, group), cg = C / G channels of hw elements each.

enum NormMode { kLayer = 0, kGroup = 1, kRms = 2 };
const char* norm_name(int mode) {
  return mode == kLayer ? "layer_norm" : mode == kGroup ? "group_norm" : "rms_norm";
}

struct Geom {
  int64_t M = 0, N = 1, G = 1, cg = 1, hw = 1;
  DimVector param_shape;  // shape of weight/bias
};
// attrs: (axis or groups, eps)
Geom norm_geom(int mode, IntArrayRef s, const Attrs& a) {
  Geom g;
  if (mode == kGroup) {
    g.G = a.i(0);
    if (s.size() < 2)
      fail("[group_norm] expected an input with at least 2 dims (N, C, ...), got {}", shape_str(s));
    const int64_t C = s[1];
    if (g.G <= 0 || C % g.G != 0)
      fail("[group_norm] num_groups {} must be positive and divide the {} channels", g.G, C);
    g.cg = C / g.G;
    g.hw = prod_range(s, 2, s.size());
    if (__builtin_mul_overflow(s[0], g.G, &g.M) || __builtin_mul_overflow(g.cg, g.hw, &g.N))
      fail("[group_norm] input {} with {} groups gives row counts that overflow", shape_str(s),
           g.G);
    g.param_shape = {C};
  } else {
    if (a.i(0) < 0 || size_t(a.i(0)) > s.size())
      fail("[{}] normalized axis {} is outside the input's {} dims", norm_name(mode), a.i(0),
           s.size());
    const size_t axis = size_t(a.i(0));
    g.M = prod_range(s, 0, axis);
    g.N = prod_range(s, axis, s.size());
    g.cg = g.N;
    g.param_shape = DimVector(s.begin() + int64_t(axis), s.end());
  }
  return g;
}

// inputs: x, weight, bias (rms: x, weight); outputs: y, mean, rstd (rms: y, rstd).
template <int Mode> void norm_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = norm_name(Mode);
  const Tensor& x = in[0];
  check_float(op, x, "input");
  Geom g = norm_geom(Mode, x.sizes(), a);
  check_param(in[1], x, g.param_shape, op, "weight");
  if (Mode != kRms) check_param(in[2], x, g.param_shape, op, "bias");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  if (Mode != kRms) out.push_back({{g.M}, {}, 0, x.dtype(), x.device()});
  out.push_back({{g.M}, {}, 0, x.dtype(), x.device()});
}

template <int Mode> void norm_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor w = kernel_contiguous(k.inputs[1]);
  const Tensor b = Mode == kRms ? Tensor() : kernel_contiguous(k.inputs[2]);
  const Geom g = norm_geom(Mode, x.sizes(), k.attrs);
  const double eps = k.attrs.f(1);
  dispatch_f(x.dtype(), norm_name(Mode), [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    const T* pw = cptr<T>(w);
    const T* pb = cptr<T>(b);
    T* py = mptr<T>(k.outputs[0]);
    T* pmean = Mode == kRms ? nullptr : mptr<T>(k.outputs[1]);
    T* prstd = mptr<T>(k.outputs[Mode == kRms ? 1 : 2]);
    const int64_t N = g.N;
    parallel_for(0, g.M, grain_for(2 * N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict p = px + r * N;
        T* __restrict q = py + r * N;
        const double mu = Mode == kRms || N == 0 ? 0.0 : sum_d(p, N) / double(N);
        const double var = N == 0 ? 0.0 : sqdev_d(p, N, mu) / double(N);
        const double rs = 1.0 / std::sqrt(var + eps);
        if (Mode != kRms) pmean[r] = T(mu);
        prstd[r] = T(rs);
        const T m = T(mu), s = T(rs);
        const int64_t c0 = (r % g.G) * g.cg;
        if (g.hw == 1) {
          const T* __restrict wr = pw ? pw + c0 : nullptr;
          const T* __restrict br = pb ? pb + c0 : nullptr;
          if (wr && br)
            for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s * wr[i] + br[i];
          else if (wr)
            for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s * wr[i];
          else if (br)
            for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s + br[i];
          else
            for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s;
        } else {
          for (int64_t j = 0; j < g.cg; ++j) {
            const T a = s * (pw ? pw[c0 + j] : T(1));
            const T c = (pb ? pb[c0 + j] : T(0)) - m * a;
            const T* __restrict pj = p + j * g.hw;
            T* __restrict qj = q + j * g.hw;
            for (int64_t i = 0; i < g.hw; ++i) qj[i] = pj[i] * a + c;
          }
        }
      }
    });
  });
}

// Backward inputs: dy, x, weight, mean, rstd (rms: no mean, passed undefined);
// outputs: gx, gweight, gbias (param-shaped; zero-filled when that parameter is absent).
// Dispatched directly (or from a loaded graph) its inputs are arbitrary: every one the kernel
// reads with x's geometry is checked here.
template <int Mode> void norm_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const std::string name = std::string(norm_name(Mode)) + "_backward";
  const char* op = name.c_str();
  const Tensor& x = in[1];
  check_float(op, x, "input");
  Geom g = norm_geom(Mode, x.sizes(), a);
  check_saved(in[0], x, x.sizes(), op, "grad_output");
  check_param(in[2], x, g.param_shape, op, "weight");
  const DimVector rows{g.M};
  if (Mode == kRms) check_param(in[3], x, rows, op, "mean");  // rms_norm has none: unused
  else check_saved(in[3], x, rows, op, "mean");
  check_saved(in[4], x, rows, op, "rstd");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({g.param_shape, {}, 0, x.dtype(), x.device()});
  out.push_back({g.param_shape, {}, 0, x.dtype(), x.device()});
}

template <int Mode> void norm_bwd_cpu(const KernelArgs& k) {
  const Tensor dy = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const Tensor mean = kernel_contiguous(k.inputs[3]);
  const Tensor rstd = kernel_contiguous(k.inputs[4]);
  const Geom g = norm_geom(Mode, x.sizes(), k.attrs);
  dispatch_f(x.dtype(), norm_name(Mode), [&](auto z) {
    using T = decltype(z);
    const T* pdy = cptr<T>(dy);
    const T* px = cptr<T>(x);
    const T* pw = cptr<T>(w);
    const T* pm = cptr<T>(mean);
    const T* ps = cptr<T>(rstd);
    T* pgx = mptr<T>(k.outputs[0]);
    T* pgw = mptr<T>(k.outputs[1]);
    T* pgb = mptr<T>(k.outputs[2]);
    const int64_t N = g.N, hw = g.hw, cg = g.cg;
    // gx, row by row: rstd * (dy*w - mean(dy*w) - xhat * mean(dy*w*xhat))
    parallel_for(0, g.M, grain_for(3 * N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict d = pdy + r * N;
        const T* __restrict p = px + r * N;
        T* __restrict q = pgx + r * N;
        const double m = pm ? double(pm[r]) : 0.0, s = double(ps[r]);
        const int64_t c0 = (r % g.G) * cg;
        if (hw == 1) {
          // one element per channel: flat loops (vectorizable)
          const T* __restrict wr = pw ? pw + c0 : nullptr;
          double a1[kL] = {}, a2[kL] = {};
          int64_t e = 0;
          for (; e + kL <= N; e += kL)
            for (int l = 0; l < kL; ++l) {
              const double dw = double(d[e + l]) * (wr ? double(wr[e + l]) : 1.0);
              a1[l] += dw;
              a2[l] += dw * (double(p[e + l]) - m);
            }
          for (; e < N; ++e) {
            const double dw = double(d[e]) * (wr ? double(wr[e]) : 1.0);
            a1[0] += dw;
            a2[0] += dw * (double(p[e]) - m);
          }
          double s1 = 0, s2 = 0;
          for (int l = 0; l < kL; ++l) {
            s1 += a1[l];
            s2 += a2[l];
          }
          const T c1 = T(Mode == kRms || N == 0 ? 0.0 : s1 / double(N));
          const T c2 = T(N == 0 ? 0.0 : s2 * s / double(N));
          const T ts = T(s), tm = T(m);
          if (wr)
            for (int64_t i = 0; i < N; ++i) q[i] = ts * (wr[i] * d[i] - c1 - (p[i] - tm) * ts * c2);
          else
            for (int64_t i = 0; i < N; ++i) q[i] = ts * (d[i] - c1 - (p[i] - tm) * ts * c2);
          continue;
        }
        double s1 = 0, s2 = 0;
        for (int64_t j = 0; j < cg; ++j) {
          const double wj = pw ? double(pw[c0 + j]) : 1.0;
          double a1 = 0, a2 = 0;
          for (int64_t i = 0; i < hw; ++i) {
            const double dv = double(d[j * hw + i]);
            a1 += dv;
            a2 += dv * (double(p[j * hw + i]) - m);
          }
          s1 += wj * a1;
          s2 += wj * a2 * s;
        }
        const double c1 = Mode == kRms || N == 0 ? 0.0 : s1 / double(N);
        const double c2 = N == 0 ? 0.0 : s2 / double(N);
        for (int64_t j = 0; j < cg; ++j) {
          const double wj = pw ? double(pw[c0 + j]) : 1.0;
          for (int64_t i = 0; i < hw; ++i) {
            const int64_t e = j * hw + i;
            const double xh = (double(p[e]) - m) * s;
            q[e] = T(s * (wj * double(d[e]) - c1 - xh * c2));
          }
        }
      }
    });
    // gweight/gbias: sums over the rows sharing an affine channel, in row order.
    if (g.G == 1 && hw == 1) {
      // layer/rms norm: blocks of kW columns walked down the rows (row-major reads)
      constexpr int64_t kW = 64;
      const int64_t nblk = (N + kW - 1) / kW;
      parallel_for(0, nblk, grain_for(g.M * kW * 2), [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t j0 = blk * kW, w = std::min(kW, N - j0);
          double aw[kW] = {}, ab[kW] = {};
          for (int64_t r = 0; r < g.M; ++r) {
            const double m = pm ? double(pm[r]) : 0.0, s = double(ps[r]);
            const T* __restrict d = pdy + r * N + j0;
            const T* __restrict p = px + r * N + j0;
            for (int64_t j = 0; j < w; ++j) {
              aw[j] += double(d[j]) * ((double(p[j]) - m) * s);
              ab[j] += double(d[j]);
            }
          }
          for (int64_t j = 0; j < w; ++j) {
            pgw[j0 + j] = T(aw[j]);
            pgb[j0 + j] = T(ab[j]);
          }
        }
      });
      return;
    }
    const int64_t C = g.G * cg;
    const int64_t per = g.M / std::max<int64_t>(g.G, 1);
    parallel_for(0, C, grain_for(per * hw * 2), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t grp = c / cg, j = c % cg;
        double aw = 0, ab = 0;
        for (int64_t n = 0; n < per; ++n) {
          const int64_t r = n * g.G + grp;
          const double m = pm ? double(pm[r]) : 0.0, s = double(ps[r]);
          const T* __restrict d = pdy + r * N + j * hw;
          const T* __restrict p = px + r * N + j * hw;
          for (int64_t i = 0; i < hw; ++i) {
            aw += double(d[i]) * (double(p[i]) - m) * s;
            ab += double(d[i]);
          }
        }
        pgw[c] = T(aw);
        pgb[c] = T(ab);
      }
    });
  });
}

template <int Mode> TensorList norm_vjp(const VjpCtx& c, const TensorList& g) {
  const bool has_w = c.attrs().b(2);
  Tensor w = has_w ? c.input(1) : Tensor();
  Tensor mean = Mode == kRms ? Tensor() : c.output(1);
  Tensor rstd = c.output(Mode == kRms ? 1 : 2);
  const OpDef& bop = Mode == kLayer   ? OF_OP("layer_norm_backward")
                     : Mode == kGroup ? OF_OP("group_norm_backward")
                                      : OF_OP("rms_norm_backward");
  TensorList r = dispatch(bop, {g[0], c.input(0), w, mean, rstd}, c.attrs());
  TensorList res;
  res.push_back(c.needs_input_grad(0) ? r[0] : Tensor());
  res.push_back(c.needs_input_grad(1) ? r[1] : Tensor());
  if (Mode != kRms) res.push_back(c.needs_input_grad(2) ? r[2] : Tensor());
  return res;
}

// ================================================================ batch norm
// inputs: x [N, C, *], weight, bias, running_mean, running_var (each optional [C]);
// attrs: training, eps, has_weight; outputs: y, save_mean, save_invstd, batch var (unbiased).

struct BnGeom {
  int64_t N, C, HW;
};
BnGeom bn_geom(IntArrayRef s) { return {s[0], s[1], prod_range(s, 2, s.size())}; }

void bn_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  check_float("batch_norm", x, "input");
  if (x.dim() < 2)
    fail("[batch_norm] expected an input of at least 2 dims (N, C[, *]), got shape {}",
         shape_str(x.sizes()));
  const int64_t C = x.size(1);
  const DimVector cs{C};
  check_param(in[1], x, cs, "batch_norm", "weight");
  check_param(in[2], x, cs, "batch_norm", "bias");
  check_param(in[3], x, cs, "batch_norm", "running_mean");
  check_param(in[4], x, cs, "batch_norm", "running_var");
  const bool training = a.b(0);
  if (!training && (!in[3].defined() || !in[4].defined()))
    fail(
        "[batch_norm] running_mean and running_var must be defined in evaluation mode "
        "(training = false)");
  // values per channel: N times the spatial size (a piece with no channels has them too)
  if (training && x.size(0) * prod_range(x.sizes(), 2, size_t(x.dim())) <= 1)
    fail(
        "[batch_norm] expected more than 1 value per channel when training, got input of "
        "shape {}",
        shape_str(x.sizes()));
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  for (int i = 0; i < 3; ++i) out.push_back({cs, {}, 0, x.dtype(), x.device()});
}

void bn_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor w = kernel_contiguous(k.inputs[1]);
  const Tensor b = kernel_contiguous(k.inputs[2]);
  const Tensor rm = kernel_contiguous(k.inputs[3]);
  const Tensor rv = kernel_contiguous(k.inputs[4]);
  const bool training = k.attrs.b(0);
  const double eps = k.attrs.f(1);
  const BnGeom g = bn_geom(x.sizes());
  dispatch_f(x.dtype(), "batch_norm", [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    const T* pw = cptr<T>(w);
    const T* pb = cptr<T>(b);
    const T* prm = cptr<T>(rm);
    const T* prv = cptr<T>(rv);
    T* py = mptr<T>(k.outputs[0]);
    T* pmean = mptr<T>(k.outputs[1]);
    T* pinv = mptr<T>(k.outputs[2]);
    T* pvar = mptr<T>(k.outputs[3]);
    const int64_t N = g.N, C = g.C, HW = g.HW;
    const double cnt = double(N * HW);
    parallel_for(0, C, grain_for(3 * N * HW), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double mu, inv;
        if (training) {
          double s = 0;
          for (int64_t n = 0; n < N; ++n) s += sum_d(px + (n * C + c) * HW, HW);
          mu = s / cnt;
          double ss = 0;
          for (int64_t n = 0; n < N; ++n) ss += sqdev_d(px + (n * C + c) * HW, HW, mu);
          inv = 1.0 / std::sqrt(ss / cnt + eps);
          pvar[c] = T(ss / (cnt - 1));
        } else {
          mu = double(prm[c]);
          inv = 1.0 / std::sqrt(double(prv[c]) + eps);
          pvar[c] = prv[c];
        }
        pmean[c] = T(mu);
        pinv[c] = T(inv);
        const double a = inv * (pw ? double(pw[c]) : 1.0);
        const T ta = T(a), tb = T((pb ? double(pb[c]) : 0.0) - mu * a);
        for (int64_t n = 0; n < N; ++n) {
          const T* __restrict p = px + (n * C + c) * HW;
          T* __restrict q = py + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) q[i] = p[i] * ta + tb;
        }
      }
    });
  });
}

// Backward inputs: dy, x, weight, save_mean, save_invstd; attrs as forward;
// outputs: gx, gweight [C], gbias [C].
void bn_bwd_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const char* op = "batch_norm_backward";
  const Tensor& x = in[1];
  check_float(op, x, "input");
  if (x.dim() < 2)
    fail("[{}] expected an input of at least 2 dims (N, C[, *]), got shape {}", op,
         shape_str(x.sizes()));
  const DimVector cs{x.size(1)};
  check_saved(in[0], x, x.sizes(), op, "grad_output");
  check_param(in[2], x, cs, op, "weight");
  check_saved(in[3], x, cs, op, "save_mean");
  check_saved(in[4], x, cs, op, "save_invstd");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({{x.size(1)}, {}, 0, x.dtype(), x.device()});
  out.push_back({{x.size(1)}, {}, 0, x.dtype(), x.device()});
}

void bn_bwd_cpu(const KernelArgs& k) {
  const Tensor dy = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const Tensor mean = kernel_contiguous(k.inputs[3]);
  const Tensor inv = kernel_contiguous(k.inputs[4]);
  const bool training = k.attrs.b(0);
  const BnGeom g = bn_geom(x.sizes());
  dispatch_f(x.dtype(), "batch_norm", [&](auto z) {
    using T = decltype(z);
    const T* pdy = cptr<T>(dy);
    const T* px = cptr<T>(x);
    const T* pw = cptr<T>(w);
    const T* pm = cptr<T>(mean);
    const T* pi = cptr<T>(inv);
    T* pgx = mptr<T>(k.outputs[0]);
    T* pgw = mptr<T>(k.outputs[1]);
    T* pgb = mptr<T>(k.outputs[2]);
    const int64_t N = g.N, C = g.C, HW = g.HW;
    const double cnt = double(N * HW);
    parallel_for(0, C, grain_for(3 * N * HW), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const double mu = double(pm[c]), is = double(pi[c]);
        double sd = 0, sdx = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* __restrict d = pdy + (n * C + c) * HW;
          const T* __restrict p = px + (n * C + c) * HW;
          double a[kL] = {}, bsum[kL] = {};
          int64_t i = 0;
          for (; i + kL <= HW; i += kL)
            for (int l = 0; l < kL; ++l) {
              a[l] += double(d[i + l]);
              bsum[l] += double(d[i + l]) * (double(p[i + l]) - mu);
            }
          for (; i < HW; ++i) {
            a[0] += double(d[i]);
            bsum[0] += double(d[i]) * (double(p[i]) - mu);
          }
          for (int l = 0; l < kL; ++l) {
            sd += a[l];
            sdx += bsum[l];
          }
        }
        pgw[c] = T(sdx * is);
        pgb[c] = T(sd);
        const double wc = pw ? double(pw[c]) : 1.0;
        // gx = (dy - mean(dy) - (x - mu) * is^2 * mean(dy * (x - mu))) * is * w  (training)
        const double kx = training ? sdx * is * is / cnt : 0.0;
        const double gm = training ? sd / cnt : 0.0;
        const T ts = T(is * wc), tk = T(kx), tm = T(gm), tmu = T(mu);
        for (int64_t n = 0; n < N; ++n) {
          const T* __restrict d = pdy + (n * C + c) * HW;
          const T* __restrict p = px + (n * C + c) * HW;
          T* __restrict q = pgx + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) q[i] = (d[i] - tm - (p[i] - tmu) * tk) * ts;
        }
      }
    });
  });
}

TensorList bn_vjp(const VjpCtx& c, const TensorList& g) {
  const bool has_w = c.attrs().b(2);
  Tensor w = has_w ? c.input(1) : Tensor();
  TensorList r = dispatch(OF_OP("batch_norm_backward"),
                          {g[0], c.input(0), w, c.output(1), c.output(2)}, c.attrs());
  return {c.needs_input_grad(0) ? r[0] : Tensor(), c.needs_input_grad(1) ? r[1] : Tensor(),
          c.needs_input_grad(2) ? r[2] : Tensor(), Tensor(), Tensor()};
}

// ================================================================ dropout
// inputs: x; attrs: p, seed, offset; outputs: y, keep mask (bool). Element i (row-major)
// is kept when the top 24 bits of word i % 4 of Philox counter (offset + i / 4) are >= p * 2^24.

void dropout_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  check_float("dropout", x, "input");
  if (!(a.f(0) >= 0.0 && a.f(0) <= 1.0))
    fail("[dropout] dropout probability has to be between 0 and 1, but got {}", a.f(0));
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({x.sizes().dims(), {}, 0, kBool, x.device()});
}

void dropout_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const double p = k.attrs.f(0);
  const uint64_t seed = uint64_t(k.attrs.i(1)), offset = uint64_t(k.attrs.i(2));
  const uint32_t thr = uint32_t(std::ceil(p * 16777216.0));
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  dispatch_f(x.dtype(), "dropout", [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    T* py = mptr<T>(k.outputs[0]);
    bool* pm = mptr<bool>(k.outputs[1]);
    const int64_t n = x.numel();
    const T s = T(scale);
    parallel_for(0, (n + 3) / 4, 4096, [&](int64_t c0, int64_t c1) {
      constexpr int64_t kChunk = 1024;
      alignas(64) uint32_t wd[kChunk];
      const int64_t e1 = std::min(c1 * 4, n);
      for (int64_t e0 = c0 * 4; e0 < e1; e0 += kChunk) {
        const int64_t m = std::min(kChunk, e1 - e0);
        philox_words(seed, offset, uint64_t(e0), m, wd);
        // restrict: the bool stores could alias anything otherwise, and the loop would not
        // vectorize
        const T* __restrict xi = px + e0;
        T* __restrict yi = py + e0;
        bool* __restrict mi = pm + e0;
        const uint32_t* __restrict wi = wd;
        for (int64_t j = 0; j < m; ++j) {
          const bool keep = (wi[j] >> 8) >= thr;
          const T v = xi[j] * s;  // computed either way: a select, not a mispredicted branch
          mi[j] = keep;
          yi[j] = keep ? v : T(0);
        }
      }
    });
  });
}

TensorList dropout_vjp(const VjpCtx& c, const TensorList& g) {
  const double p = c.attrs().f(0);
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  return {where(c.output(1), g[0] * scale, Scalar(0.0))};
}

// ================================================================ cross entropy (class indices)
// inputs: x [N, C, inner] (any rank >= 2; class dim 1), target int64 [N, inner...], weight [C]
// (optional); attrs: reduction, ignore_index, label_smoothing;
// outputs: loss, per-row logsumexp [rows], total weight [] (sum of weights of kept targets).

struct CeGeom {
  int64_t N, C, inner, rows;
};
CeGeom ce_geom(IntArrayRef s) {
  CeGeom g{s[0], s[1], prod_range(s, 2, s.size()), 0};
  g.rows = g.N * g.inner;
  return g;
}

// The checks of cross_entropy() for a direct dispatch (the op takes x of at least 2 dims);
// the class indices' values are checked by the kernels, before they write.
CeGeom ce_check(const Tensor& x, const Tensor& t, const Tensor& w, const Attrs& a, const char* op) {
  check_float(op, x, "input");
  if (x.dim() < 2)
    fail("[{}] expected an input of shape (N, C, d1, ...), got {}", op, shape_str(x.sizes()));
  check_reduction(a.i(0), op);
  if (!(a.f(2) >= 0.0 && a.f(2) <= 1.0))
    fail("[{}] label_smoothing must be between 0.0 and 1.0, got {}", op, a.f(2));
  check_class_targets(x, t, w, a.i(1), op, false);
  if (w.defined()) check_param(w, x, DimVector{x.size(1)}, op, "weight");
  return ce_geom(x.sizes());
}

void ce_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const Tensor& t = in[1];
  const CeGeom g = ce_check(x, t, in[2], a, "cross_entropy");
  const int64_t reduction = a.i(0);
  if (reduction == Reduction::None) out.push_back({t.sizes().dims(), {}, 0, x.dtype(), x.device()});
  else out.push_back({{}, {}, 0, x.dtype(), x.device()});
  out.push_back({{g.rows}, {}, 0, x.dtype(), x.device()});
  out.push_back({{}, {}, 0, x.dtype(), x.device()});
}

void ce_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor t = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const int64_t reduction = k.attrs.i(0), ignore = k.attrs.i(1);
  const double eps = k.attrs.f(2);
  const CeGeom g = ce_geom(x.sizes());
  check_target_range(t, g.C, ignore, "cross_entropy", x);
  dispatch_f(x.dtype(), "cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    const int64_t* pt = cptr<int64_t>(t);
    const T* pw = cptr<T>(w);
    T* ploss = mptr<T>(k.outputs[0]);
    T* plse = mptr<T>(k.outputs[1]);
    const int64_t C = g.C, inner = g.inner;
    double wsum_all = 0;
    if (pw)
      for (int64_t c = 0; c < C; ++c) wsum_all += double(pw[c]);
    else wsum_all = double(C);
    // per row: nll (weighted), smoothing term (weighted), weight of the target
    std::vector<double> nll(size_t(g.rows)), smooth(size_t(g.rows)), wt(size_t(g.rows));
    parallel_for(0, g.rows, grain_for(3 * C), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / inner, d = r % inner;
        const T* __restrict p = px + n * C * inner + d;
        T mx = -std::numeric_limits<T>::infinity();
        double lse;
        if (inner == 1) {
          T m[kL];
          for (int l = 0; l < kL; ++l) m[l] = mx;
          int64_t c = 0;
          for (; c + kL <= C; c += kL)
            for (int l = 0; l < kL; ++l) m[l] = p[c + l] > m[l] ? p[c + l] : m[l];
          for (; c < C; ++c) m[0] = p[c] > m[0] ? p[c] : m[0];
          for (int l = 0; l < kL; ++l) mx = m[l] > mx ? m[l] : mx;
          T s[kL] = {};
          c = 0;
          for (; c + kL <= C; c += kL)
            for (int l = 0; l < kL; ++l) s[l] += fn::exp_<T>(p[c + l] - mx);
          double sum = 0;
          for (; c < C; ++c) sum += double(fn::exp_<T>(p[c] - mx));
          for (int l = 0; l < kL; ++l) sum += double(s[l]);
          lse = double(mx) + std::log(sum);
        } else {
          for (int64_t c = 0; c < C; ++c) mx = p[c * inner] > mx ? p[c * inner] : mx;
          double sum = 0;
          for (int64_t c = 0; c < C; ++c) sum += double(fn::exp_<T>(p[c * inner] - mx));
          lse = double(mx) + std::log(sum);
        }
        plse[r] = T(lse);
        const int64_t tr = pt[r];
        if (tr == ignore) {
          nll[size_t(r)] = smooth[size_t(r)] = wt[size_t(r)] = 0;
          continue;
        }
        const double wr = pw ? double(pw[tr]) : 1.0;
        wt[size_t(r)] = wr;
        nll[size_t(r)] = wr * (lse - double(p[tr * inner]));
        if (eps > 0) {
          double sx = 0;
          if (pw)
            for (int64_t c = 0; c < C; ++c) sx += double(pw[c]) * double(p[c * inner]);
          else
            for (int64_t c = 0; c < C; ++c) sx += double(p[c * inner]);
          smooth[size_t(r)] = wsum_all * lse - sx;
        } else {
          smooth[size_t(r)] = 0;
        }
      }
    });
    const double sc = eps / double(C);
    if (reduction == Reduction::None) {
      for (int64_t r = 0; r < g.rows; ++r)
        ploss[r] = T((1 - eps) * nll[size_t(r)] + sc * smooth[size_t(r)]);
      mptr<T>(k.outputs[2])[0] = T(0);
      return;
    }
    double sn = 0, ss = 0, sw = 0;
    for (int64_t r = 0; r < g.rows; ++r) {
      sn += nll[size_t(r)];
      ss += smooth[size_t(r)];
      sw += wt[size_t(r)];
    }
    mptr<T>(k.outputs[2])[0] = T(sw);
    double loss;
    if (reduction == Reduction::Sum) {
      loss = (1 - eps) * sn + sc * ss;
    } else {
      loss = (1 - eps) * (sn / sw);
      // PyTorch: the smoothing term's mean divides by the weight sum when weighted, else by
      // the number of rows (ignored rows included).
      if (eps > 0) loss += sc * (pw ? ss / sw : ss / double(g.rows));
    }
    ploss[0] = T(loss);
  });
}

// Backward inputs: g, x, target, weight, lse, total_weight; output: gx.
void ce_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "cross_entropy_backward";
  const Tensor& x = in[1];
  const CeGeom g = ce_check(x, in[2], in[3], a, op);
  check_saved(in[0], x, a.i(0) == Reduction::None ? in[2].sizes() : IntArrayRef(), op,
              "grad_output");
  check_saved(in[4], x, DimVector{g.rows}, op, "logsumexp");
  check_saved(in[5], x, IntArrayRef(), op, "total_weight");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}

void ce_bwd_cpu(const KernelArgs& k) {
  const Tensor go = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor t = kernel_contiguous(k.inputs[2]);
  const Tensor w = kernel_contiguous(k.inputs[3]);
  const Tensor lse = kernel_contiguous(k.inputs[4]);
  const int64_t reduction = k.attrs.i(0), ignore = k.attrs.i(1);
  const double eps = k.attrs.f(2);
  const CeGeom g = ce_geom(x.sizes());
  check_target_range(t, g.C, ignore, "cross_entropy_backward", x);
  dispatch_f(x.dtype(), "cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* pg = cptr<T>(go);
    const T* px = cptr<T>(x);
    const int64_t* pt = cptr<int64_t>(t);
    const T* pw = cptr<T>(w);
    const T* pl = cptr<T>(lse);
    T* pgx = mptr<T>(k.outputs[0]);
    const int64_t C = g.C, inner = g.inner;
    const double tw = double(k.inputs[5].item<T>());
    double wsum_all = 0;
    if (pw)
      for (int64_t c = 0; c < C; ++c) wsum_all += double(pw[c]);
    else wsum_all = double(C);
    const double sc = eps / double(C);
    parallel_for(0, g.rows, grain_for(2 * C), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / inner, d = r % inner;
        const T* __restrict p = px + n * C * inner + d;
        T* __restrict q = pgx + n * C * inner + d;
        const int64_t tr = pt[r];
        if (tr == ignore) {
          for (int64_t c = 0; c < C; ++c) q[c * inner] = T(0);
          continue;
        }
        double gn, gs;  // scales of the nll and smoothing terms for this row
        if (reduction == Reduction::None) {
          gn = gs = double(pg[r]);
        } else if (reduction == Reduction::Sum) {
          gn = gs = double(pg[0]);
        } else {
          gn = double(pg[0]) / tw;
          gs = pw ? gn : double(pg[0]) / double(g.rows);
        }
        const double wr = pw ? double(pw[tr]) : 1.0;
        const double a = (1 - eps) * gn * wr;  // * (p_c - [c == t])
        const double b = sc * gs;              // * (wsum * p_c - w_c)
        const T coef = T(a + b * wsum_all), l = pl[r];
        if (inner == 1) {
          for (int64_t c = 0; c < C; ++c) q[c] = fn::exp_<T>(p[c] - l) * coef;
        } else {
          for (int64_t c = 0; c < C; ++c) q[c * inner] = fn::exp_<T>(p[c * inner] - l) * coef;
        }
        if (b != 0) {
          if (pw)
            for (int64_t c = 0; c < C; ++c) q[c * inner] -= T(b * double(pw[c]));
          else
            for (int64_t c = 0; c < C; ++c) q[c * inner] -= T(b);
        }
        q[tr * inner] -= T(a);
      }
    });
  });
}

TensorList ce_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor w = c.attrs().b(3) ? c.input(2) : Tensor();
  Tensor gx = dispatch1(OF_OP("cross_entropy_backward"),
                        {g[0], c.input(0), c.input(1), w, c.output(1), c.output(2)}, c.attrs());
  return {gx, Tensor(), Tensor()};
}

// ================================================================ linear
// inputs: x [R, in], weight [out, in], bias [out] (optional); output [R, out]. One GEMM with
// the bias preloaded into the output (beta = 1), as addmm. The VJP computes the weight
// gradient as g^T x, already in weight's [out, in] layout (no transposed copy).

void linear_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& x = in[0];
  check_float("linear", x, "input");
  check_float("linear", in[1], "weight");
  if (x.dim() != 2 || in[1].dim() != 2 || x.size(1) != in[1].size(1))
    fail("[linear] expected input [rows, in] and weight [out, in], got shapes {} and {}",
         shape_str(x.sizes()), shape_str(in[1].sizes()));
  check_param(in[1], x, in[1].sizes(), "linear", "weight");
  check_param(in[2], x, DimVector{in[1].size(0)}, "linear", "bias");
  out.push_back({{x.size(0), in[1].size(0)}, {}, 0, x.dtype(), x.device()});
}

void linear_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& w = k.inputs[1];
  const Tensor& out = k.outputs[0];
  const bool has_bias = k.inputs[2].defined();
  if (has_bias && out.numel() > 0) {
    const Tensor b = kernel_contiguous(k.inputs[2]);
    const int64_t R = out.size(0), O = out.size(1);
    const size_t bytes = size_t(O) * b.element_size();
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t r = 0; r < R; ++r) std::memcpy(dst + size_t(r) * bytes, b.data_ptr(), bytes);
  }
  cpu::gemm(x, kernel_transpose(w), out, Scalar(1), has_bias ? Scalar(1) : Scalar(0), "linear");
}

TensorList linear_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor gx, gw, gb;
  if (c.needs_input_grad(0)) gx = g[0].mm(c.input(1));
  if (c.needs_input_grad(1)) gw = g[0].t().mm(c.input(0));
  if (c.needs_input_grad(2)) gb = g[0].sum({0});
  return {gx, gw, gb};
}

// ================================================================ scaled dot product attention
// inputs: q [B, L, E], k [B, S, E], v [B, S, Ev], mask [B, L, S] (optional: bool, true = attend,
// or additive float); attrs: scale, is_causal, dropout_p, seed, offset, mask_kind (0 none,
// 1 bool, 2 additive), and optionally draw_map (below); outputs: out [B, L, Ev], lse [B, L]
// (log-sum-exp of each score row).
// NOTE [Attention kernel]: the softmax of each score row is taken over all its keys at once
// (the row max, then exp and sum), in blocks of query rows whose scores stay in cache (NOTE
// [CPU attention blocks]), so no [L, S] matrix of the whole batch is materialized. Backward
// recomputes the probabilities from the saved lse. A row with nothing to attend to gives NaN
// outputs and lse -inf, and no gradient. Dropout keeps element (b, i, j) by Philox word
// ((b * L + i) * S + j) of the op's counters, in both passes.
// NOTE [Attention draw map]: attr 6, when present and not empty, says that the B batches are a
// piece of a larger batch (attention split by heads with dropout, NOTE [Attention split by
// heads]): triples (logical size, start, local size) per batch dim, outer first, whose local
// sizes multiply to B. Batch b then draws as the batch it is in the whole: b unravelled over
// the local sizes, shifted by the starts, ravelled over the logical sizes. Each rank's piece
// so keeps exactly the elements one process keeps.

struct AttnGeom {
  int64_t B, L, S, E, Ev;
};
AttnGeom attn_geom(const TensorList& in) {
  return {in[0].size(0), in[0].size(1), in[1].size(1), in[0].size(2), in[2].size(2)};
}
// The op's own checks (its inputs come flattened from scaled_dot_product_attention(), or from
// a direct dispatch or a loaded graph): q [B, L, E], k [B, S, E], v [B, S, Ev] of one float
// dtype, the mask [B, L, S] of the kind mask_kind names, dropout_p in [0, 1).
AttnGeom attn_check(const TensorList& in, const Attrs& a, const char* op) {
  const Tensor &q = in[0], &k = in[1], &v = in[2], &mask = in[3];
  check_float(op, q, "query");
  check_saved(k, q, k.sizes(), op, "key");
  check_saved(v, q, v.sizes(), op, "value");
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3 || k.size(0) != q.size(0) ||
      v.size(0) != q.size(0) || k.size(2) != q.size(2) || v.size(1) != k.size(1))
    fail("[{}] expected query [B, L, E], key [B, S, E] and value [B, S, Ev], got {}, {} and {}", op,
         shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  const AttnGeom g = attn_geom(in);
  const int64_t kind = a.i(5);
  if (kind < 0 || kind > 2) fail("[{}] mask_kind {} is not 0, 1 or 2", op, kind);
  if (kind != 0) {
    const ScalarType mt = kind == 1 ? kBool : q.dtype();
    if (!mask.defined()) fail("[{}] mask_kind {} needs an attn_mask, got none", op, kind);
    if (kind == 2 && mask.dtype() != mt)
      fail("[{}] an additive attn_mask must have the query's dtype {}, got {} (shape {})", op,
           dtype_name(mt), dtype_name(mask.dtype()), shape_str(mask.sizes()));
    if (mask.dtype() != mt || !(mask.sizes() == IntArrayRef(DimVector{g.B, g.L, g.S})))
      fail("[{}] mask_kind {} expects an attn_mask of dtype {} and shape ({}, {}, {}), got {} {}",
           op, kind, dtype_name(mt), g.B, g.L, g.S, dtype_name(mask.dtype()),
           shape_str(mask.sizes()));
  }
  if (!(a.f(2) >= 0.0 && a.f(2) < 1.0))
    fail("[{}] dropout_p must be in [0, 1), got {}", op, a.f(2));
  if (a.size() > 6) {
    const DimVector& m = a.ints(6);
    int64_t n = 1;
    bool ok = m.size() % 3 == 0;
    for (size_t d = 0; ok && d < m.size(); d += 3) {
      ok = m[d + 1] >= 0 && m[d + 2] >= 0 && m[d + 1] + m[d + 2] <= m[d];
      n *= m[d + 2];
    }
    if (!ok || (!m.empty() && n != g.B))
      fail(
          "[{}] draw_map {} is not (logical size, start, local size) triples whose local sizes "
          "multiply to the {} batches",
          op, shape_str(m), g.B);
  }
  return g;
}

// Per batch, the batch it draws as (NOTE [Attention draw map]); empty: itself.
std::vector<int64_t> draw_batches(const AttnGeom& g, const Attrs& a) {
  std::vector<int64_t> r;
  if (a.size() <= 6 || a.ints(6).empty() || a.f(2) == 0.0) return r;
  const DimVector& m = a.ints(6);
  r.resize(size_t(g.B));
  for (int64_t b = 0; b < g.B; ++b) {
    int64_t rest = b, global = 0, stride = 1;
    for (size_t d = m.size(); d >= 3; d -= 3) {
      const int64_t local = m[d - 1], start = m[d - 2], logical = m[d - 3];
      global += (start + rest % local) * stride;
      rest /= local;
      stride *= logical;
    }
    r[size_t(b)] = global;
  }
  return r;
}

void sdpa_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const AttnGeom g = attn_check(in, a, "scaled_dot_product_attention");
  const Tensor& q = in[0];
  out.push_back({{g.B, g.L, g.Ev}, {}, 0, q.dtype(), q.device()});
  out.push_back({{g.B, g.L}, {}, 0, q.dtype(), q.device()});
}

template <class T> double dot_d(const T* a, const T* b, int64_t n) {
  double s[4] = {};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int l = 0; l < 4; ++l) s[l] += double(a[k + l]) * double(b[k + l]);
  for (; k < n; ++k) s[0] += double(a[k]) * double(b[k]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// NOTE [CPU attention blocks]: a task is one batch b and a block of R query rows, R fixed by S
// alone (about kScoreBlock scores, so the block stays in L2). Forward: scores = scale * Q K^T
// by one GEMM into the block, the mask, causality, row max, exp and sum in place, the dropout
// elements multiplied in, then O = P V by a second GEMM. Backward (one task per batch, its
// blocks in row order): P again from the block's GEMM and the saved lse, dP = dO V^T by a GEMM,
// dS = P (z dP - D) scale in place, then dV += (P z)^T dO, dQ = dS K and dK += dS^T Q. The
// blocks depend on (L, S) only and a batch's rows are reduced in one thread in row order, so
// results do not depend on the thread count, and a piece of the batch (NOTE [Attention draw
// map]) computes its batches bitwise as the whole does.
constexpr int64_t kScoreBlock = 16384;

struct AttnBlocks {
  int64_t rows, count;  // rows per block, blocks per batch
};
AttnBlocks attn_blocks(const AttnGeom& g) {
  const int64_t r =
      std::clamp<int64_t>(kScoreBlock / std::max<int64_t>(g.S, 1), 1, std::max<int64_t>(g.L, 1));
  return {r, (g.L + r - 1) / r};
}

// What a score row needs besides Q K^T: the mask, causality, the dropout elements.
struct AttnRows {
  const AttnGeom& g;
  double scale, keep_scale;
  bool causal;
  int64_t mask_kind;
  uint32_t thr;
  uint64_t seed, offset;
  bool dropout;
  const int64_t* batch_of;  // NOTE [Attention draw map] (null: b itself)
  const Tensor& mask;       // [B, L, S] (any strides) or undefined
  std::vector<uint32_t> words;

  AttnRows(const AttnGeom& geom, const Attrs& a, const std::vector<int64_t>& batches,
           const Tensor& m)
      : g(geom),
        scale(a.f(0)),
        keep_scale(a.f(2) >= 1.0 ? 0.0 : 1.0 / (1.0 - a.f(2))),
        causal(a.b(1)),
        mask_kind(a.i(5)),
        thr(uint32_t(std::ceil(a.f(2) * 16777216.0))),
        seed(uint64_t(a.i(3))),
        offset(uint64_t(a.i(4))),
        dropout(a.f(2) > 0),
        batch_of(batches.empty() ? nullptr : batches.data()),
        mask(m),
        words(size_t(dropout ? g.S : 0)) {}

  // Adds the mask to the scores of row (b, i) and sets what it may not attend to -inf.
  template <class T> void apply_mask(T* s, int64_t b, int64_t i) const {
    if (mask_kind != 0) {
      const int64_t ms = mask.stride(2);
      if (mask_kind == 1) {
        const bool* m = cptr<bool>(mask) + b * mask.stride(0) + i * mask.stride(1);
        for (int64_t j = 0; j < g.S; ++j)
          if (!m[j * ms]) s[j] = T(-INFINITY);
      } else {
        const T* m = cptr<T>(mask) + b * mask.stride(0) + i * mask.stride(1);
        for (int64_t j = 0; j < g.S; ++j) s[j] += m[j * ms];
      }
    }
    if (causal)
      for (int64_t j = i + 1; j < g.S; ++j) s[j] = T(-INFINITY);
  }
  // Fills `words` with the Philox words of row (b, i): element (b, i, j) is kept when its top
  // 24 bits are >= thr (the same elements as dropout's, NOTE [Random numbers]).
  void draw_row(int64_t b, int64_t i) {
    const int64_t gb = batch_of ? batch_of[b] : b;
    philox_words(seed, offset, uint64_t((gb * g.L + i) * g.S), g.S, words.data());
  }
  template <class T> T keep(int64_t j) const {
    return (words[size_t(j)] >> 8) >= thr ? T(keep_scale) : T(0);
  }
};

// The largest of s[0 .. n) that is not NaN (-inf when there is none), in kL lanes.
template <class T> T row_max(const T* s, int64_t n) {
  T m[kL];
  for (int l = 0; l < kL; ++l) m[l] = T(-INFINITY);
  int64_t j = 0;
  for (; j + kL <= n; j += kL)
    for (int l = 0; l < kL; ++l) m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
  for (; j < n; ++j) m[0] = s[j] > m[0] ? s[j] : m[0];
  T r = m[0];
  for (int l = 1; l < kL; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

void sdpa_cpu(const KernelArgs& k) {
  const Tensor &q = k.inputs[0], &kk = k.inputs[1], &v = k.inputs[2], &mask = k.inputs[3];
  const AttnGeom g = attn_geom(k.inputs);
  const AttnBlocks blk = attn_blocks(g);
  const std::vector<int64_t> batches = draw_batches(g, k.attrs);
  dispatch_f(q.dtype(), "scaled_dot_product_attention", [&](auto z) {
    using T = decltype(z);
    const T* pq = cptr<T>(q);
    const T* pk = cptr<T>(kk);
    const T* pv = cptr<T>(v);
    T* po = mptr<T>(k.outputs[0]);
    T* plse = mptr<T>(k.outputs[1]);
    const int64_t work = blk.rows * g.S * (g.E + g.Ev);
    cpu::SerialBlas serial;  // the tasks' GEMMs run on the pool's threads
    parallel_for(0, g.B * blk.count, grain_for(work), [&](int64_t t0, int64_t t1) {
      AttnRows ar(g, k.attrs, batches, mask);
      std::vector<T> sc(size_t(blk.rows * g.S));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / blk.count, i0 = (t % blk.count) * blk.rows;
        const int64_t R = std::min(blk.rows, g.L - i0);
        if (g.S == 0 || g.E == 0) std::fill(sc.begin(), sc.end(), T(0));
        else
          cpu::gemm_raw(false, true, R, g.S, g.E, T(ar.scale), pq + (b * g.L + i0) * g.E, g.E,
                        pk + b * g.S * g.E, g.E, T(0), sc.data(), g.S);
        for (int64_t r = 0; r < R; ++r) {
          const int64_t i = i0 + r;
          T* s = sc.data() + r * g.S;
          ar.apply_mask(s, b, i);
          const T m = row_max(s, g.S);
          if (m == T(-INFINITY)) {  // nothing to attend to: a NaN row (below), lse -inf
            std::fill(s, s + g.S, T(0));
            plse[b * g.L + i] = T(-INFINITY);
            continue;
          }
          for (int64_t j = 0; j < g.S; ++j) s[j] = fn::exp_(T(s[j] - m));
          const double l = sum_d(s, g.S);
          plse[b * g.L + i] = T(double(m) + std::log(l));
          const T inv = T(1.0 / l);
          if (ar.dropout) {
            ar.draw_row(b, i);
            for (int64_t j = 0; j < g.S; ++j) s[j] = s[j] * inv * ar.template keep<T>(j);
          } else {
            for (int64_t j = 0; j < g.S; ++j) s[j] *= inv;
          }
        }
        T* o = po + (b * g.L + i0) * g.Ev;
        if (g.S == 0) std::fill(o, o + R * g.Ev, T(0));
        else
          cpu::gemm_raw(false, false, R, g.Ev, g.S, T(1), sc.data(), g.S, pv + b * g.S * g.Ev, g.Ev,
                        T(0), o, g.Ev);
        for (int64_t r = 0; r < R; ++r)  // an empty row's lse is -inf (a finite one never is)
          if (plse[b * g.L + i0 + r] == T(-INFINITY))
            std::fill(o + r * g.Ev, o + (r + 1) * g.Ev, T(NAN));
      }
    });
  });
}

// Backward inputs: dout, q, k, v, mask, out, lse; outputs: dq, dk, dv.
void sdpa_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "scaled_dot_product_attention_backward";
  const AttnGeom g = attn_check({in[1], in[2], in[3], in[4]}, a, op);
  const Tensor& q = in[1];
  check_saved(in[0], q, DimVector{g.B, g.L, g.Ev}, op, "grad_output");
  check_saved(in[5], q, DimVector{g.B, g.L, g.Ev}, op, "output");
  check_saved(in[6], q, DimVector{g.B, g.L}, op, "logsumexp");
  for (size_t i = 1; i <= 3; ++i)
    out.push_back({in[i].sizes().dims(), {}, 0, in[i].dtype(), in[i].device()});
}

void sdpa_bwd_cpu(const KernelArgs& k) {
  const Tensor &dout = k.inputs[0], &q = k.inputs[1], &kk = k.inputs[2], &v = k.inputs[3];
  const Tensor &mask = k.inputs[4], &o = k.inputs[5], &lse = k.inputs[6];
  const AttnGeom g = attn_geom({q, kk, v});
  const AttnBlocks blk = attn_blocks(g);
  const std::vector<int64_t> batches = draw_batches(g, k.attrs);
  dispatch_f(q.dtype(), "scaled_dot_product_attention", [&](auto z) {
    using T = decltype(z);
    const T* pdo = cptr<T>(dout);
    const T* pq = cptr<T>(q);
    const T* pk = cptr<T>(kk);
    const T* pv = cptr<T>(v);
    const T* po = cptr<T>(o);
    const T* pl = cptr<T>(lse);
    T* pdq = mptr<T>(k.outputs[0]);
    T* pdk = mptr<T>(k.outputs[1]);
    T* pdv = mptr<T>(k.outputs[2]);
    // one batch per task: dK and dV accumulate over its row blocks in order
    const int64_t work = g.L * g.S * (2 * g.E + 2 * g.Ev);
    cpu::SerialBlas serial;  // the tasks' GEMMs run on the pool's threads
    parallel_for(0, g.B, grain_for(work), [&](int64_t b0, int64_t b1) {
      AttnRows ar(g, k.attrs, batches, mask);
      std::vector<T> ps(size_t(blk.rows * g.S)), ds(size_t(blk.rows * g.S));
      for (int64_t b = b0; b < b1; ++b) {
        T* dk = pdk + b * g.S * g.E;
        T* dv = pdv + b * g.S * g.Ev;
        std::fill(dk, dk + g.S * g.E, T(0));
        std::fill(dv, dv + g.S * g.Ev, T(0));
        if (g.S == 0) {
          std::fill(pdq + b * g.L * g.E, pdq + (b + 1) * g.L * g.E, T(0));
          continue;
        }
        for (int64_t i0 = 0; i0 < g.L; i0 += blk.rows) {
          const int64_t R = std::min(blk.rows, g.L - i0);
          const T* qb = pq + (b * g.L + i0) * g.E;
          const T* dob = pdo + (b * g.L + i0) * g.Ev;
          if (g.E == 0) std::fill(ps.begin(), ps.end(), T(0));
          else
            cpu::gemm_raw(false, true, R, g.S, g.E, T(ar.scale), qb, g.E, pk + b * g.S * g.E, g.E,
                          T(0), ps.data(), g.S);
          if (g.Ev == 0) std::fill(ds.begin(), ds.end(), T(0));
          else
            cpu::gemm_raw(false, true, R, g.S, g.Ev, T(1), dob, g.Ev, pv + b * g.S * g.Ev, g.Ev,
                          T(0), ds.data(), g.S);
          for (int64_t r = 0; r < R; ++r) {
            const int64_t i = i0 + r;
            T* p = ps.data() + r * g.S;
            T* d = ds.data() + r * g.S;
            const T li = pl[b * g.L + i];
            if (!std::isfinite(double(li))) {  // an empty row: no gradient flows through it
              std::fill(p, p + g.S, T(0));
              std::fill(d, d + g.S, T(0));
              continue;
            }
            ar.apply_mask(p, b, i);
            const T D = T(dot_d(dob + r * g.Ev, po + (b * g.L + i) * g.Ev, g.Ev));
            const T sc = T(ar.scale);
            for (int64_t j = 0; j < g.S; ++j) p[j] = fn::exp_(T(p[j] - li));
            if (ar.dropout) {
              ar.draw_row(b, i);
              for (int64_t j = 0; j < g.S; ++j) {
                const T zf = ar.template keep<T>(j);
                d[j] = p[j] * (zf * d[j] - D) * sc;
                p[j] *= zf;
              }
            } else {
              for (int64_t j = 0; j < g.S; ++j) d[j] = p[j] * (d[j] - D) * sc;
            }
          }
          // dV += (P z)^T dO, dQ = dS K, dK += dS^T Q
          if (g.Ev > 0)
            cpu::gemm_raw(true, false, g.S, g.Ev, R, T(1), ps.data(), g.S, dob, g.Ev, T(1), dv,
                          g.Ev);
          if (g.E > 0) {
            cpu::gemm_raw(false, false, R, g.E, g.S, T(1), ds.data(), g.S, pk + b * g.S * g.E, g.E,
                          T(0), pdq + (b * g.L + i0) * g.E, g.E);
            cpu::gemm_raw(true, false, g.S, g.E, R, T(1), ds.data(), g.S, qb, g.E, T(1), dk, g.E);
          }
        }
      }
    });
  });
}

// The decompositions (NOTE [Decompositions]), for devices without an attention kernel (CUDA):
// the kernels' semantics from public ops, materializing the [B, L, S] scores: the same mask
// kinds and causal rule, the saved lse, and the dropout elements drawn by the dropout op at
// the op's (seed, offset) over the [B, L, S] scores (Philox word (b * L + i) * S + j, as the
// kernels). A draw map (attention split by heads) is not decomposed.
struct AttnScores {
  Tensor s;  // scaled scores, -inf where not attended
  Tensor z;  // dropout multiplier (undefined without dropout)
};
AttnScores attn_scores(const Tensor& q, const Tensor& k, const Tensor& mask, const Attrs& a) {
  const int64_t L = q.size(1), S = k.size(1);
  AttnScores r;
  Tensor s = q.bmm(k.transpose(1, 2)) * a.f(0);
  const int64_t kind = a.i(5);
  if (kind == 2) s = s + mask;
  Tensor allowed;
  if (kind == 1) allowed = mask;
  if (a.b(1)) {
    const TensorOptions o = TensorOptions(kInt64).device(q.device());
    const Tensor causal = arange(0, S, 1, o).view({1, S}) <= arange(0, L, 1, o).view({L, 1});
    allowed = allowed.defined() ? (allowed & causal) : causal;
  }
  if (allowed.defined()) s = where(allowed, s, Scalar(-std::numeric_limits<double>::infinity()));
  r.s = s;
  const double p = a.f(2);
  OF_CHECK(p == 0 || a.size() <= 6 || a.ints(6).empty(),
           "[scaled_dot_product_attention] on {}: dropout with a draw map (attention split by "
           "heads over ranks) has no decomposition",
           q.device().str());
  if (p > 0)
    r.z = dispatch(OF_OP("dropout"), {ones(s.sizes(), s.options())}, {p, a.i(3), a.i(4)})[0];
  return r;
}
TensorList sdpa_decompose(const TensorList& in, const Attrs& a) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const AttnScores sc = attn_scores(q, k, in[3], a);
  const Tensor lse = logsumexp(sc.s, {2}, true);  // all -inf row: -inf (its output is NaN)
  Tensor p = (sc.s - lse).exp();
  if (sc.z.defined()) p = p * sc.z;
  return {p.bmm(v), lse.view({q.size(0), q.size(1)})};
}
// inputs dout, q, k, v, mask, out, lse; outputs dq, dk, dv
TensorList sdpa_bwd_decompose(const TensorList& in, const Attrs& a) {
  const Tensor &dout = in[0], &q = in[1], &key = in[2], &v = in[3];
  const Tensor &out = in[5], &lse_in = in[6];
  const AttnScores sc = attn_scores(q, key, in[4], a);
  const Tensor lse = lse_in.view({q.size(0), q.size(1), 1});
  // rows with no attended key (lse not finite) get no gradient, as in the kernels
  const Tensor finite = lse.abs() < Scalar(std::numeric_limits<double>::infinity());
  const Tensor p = where(finite, (sc.s - lse).exp(), Scalar(0.0));
  const Tensor d = (dout * out).sum({2}, true);
  Tensor dpz = dout.bmm(v.transpose(1, 2));
  Tensor pz = p;
  if (sc.z.defined()) {
    dpz = dpz * sc.z;
    pz = p * sc.z;
  }
  const Tensor ds = p * (dpz - d) * a.f(0);
  return {ds.bmm(key), ds.transpose(1, 2).bmm(q), pz.transpose(1, 2).bmm(dout)};
}

TensorList sdpa_vjp(const VjpCtx& c, const TensorList& g) {
  const bool has_mask = c.attrs().i(5) != 0;
  Tensor mask = has_mask ? c.input(3) : Tensor();
  TensorList r = dispatch(
      OF_OP("scaled_dot_product_attention_backward"),
      {g[0], c.input(0), c.input(1), c.input(2), mask, c.output(0), c.output(1)}, c.attrs());
  return {c.needs_input_grad(0) ? r[0] : Tensor(), c.needs_input_grad(1) ? r[1] : Tensor(),
          c.needs_input_grad(2) ? r[2] : Tensor(), Tensor()};
}

// ---------------------------------------------------------------- losses: helpers

Tensor reduce_loss(const Tensor& l, int64_t reduction) {
  if (reduction == Reduction::Mean) return l.mean();
  if (reduction == Reduction::Sum) return l.sum();
  return l;
}

// The fused backward ops are recorded under create_graph like any op, but their own VJP is
// not implemented: differentiating through one again is an error when that backward runs
// (as PyTorch's "derivative ... is not implemented"), never a silently missing term.
TensorList fused_backward_vjp(const VjpCtx& c, const TensorList&) {
  std::string fwd = c.op().name;
  fwd.resize(fwd.size() - std::string("_backward").size());
  fail(
      "[{}] double backward through the fused {} op is not implemented (a gradient taken "
      "with create_graph=true was differentiated again)",
      c.op().name, fwd);
}

}  // namespace

void register_nn_ops() {
  const std::vector<std::string> nattrs = {"axis", "eps", "has_weight", "has_bias"};
  register_op({.name = "layer_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = nattrs,
               .infer_meta = norm_meta<kLayer>,
               .cpu = norm_cpu<kLayer>,
               .vjp = norm_vjp<kLayer>,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1) | out(2),
               .sbp_rule = &sbp_rules::kNorm,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "layer_norm_backward",
               .traits = kNonDifferentiable | kWidens16Bit,
               .attr_names = nattrs,
               .infer_meta = norm_bwd_meta<kLayer>,
               .cpu = norm_bwd_cpu<kLayer>,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kNormBackward});
  const std::vector<std::string> gattrs = {"num_groups", "eps", "has_weight", "has_bias"};
  register_op({.name = "group_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = gattrs,
               .infer_meta = norm_meta<kGroup>,
               .cpu = norm_cpu<kGroup>,
               .vjp = norm_vjp<kGroup>,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1) | out(2),
               .sbp_rule = &sbp_rules::kGroupNorm,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "group_norm_backward",
               .traits = kNonDifferentiable | kWidens16Bit,
               .attr_names = gattrs,
               .infer_meta = norm_bwd_meta<kGroup>,
               .cpu = norm_bwd_cpu<kGroup>,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kGroupNormBackward});
  register_op({.name = "rms_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = nattrs,
               .infer_meta = norm_meta<kRms>,
               .cpu = norm_cpu<kRms>,
               .vjp = norm_vjp<kRms>,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kNorm,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "rms_norm_backward",
               .traits = kNonDifferentiable | kWidens16Bit,
               .attr_names = nattrs,
               .infer_meta = norm_bwd_meta<kRms>,
               .cpu = norm_bwd_cpu<kRms>,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kNormBackward});
  const std::vector<std::string> battrs = {"training", "eps", "has_weight"};
  register_op({.name = "batch_norm",
               .traits = kWidens16Bit,
               .attr_names = battrs,
               .infer_meta = bn_meta,
               .cpu = bn_cpu,
               .vjp = bn_vjp,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1) | out(2),
               .nondiff_inputs = in(3) | in(4),
               .sbp_rule = &sbp_rules::kBatchNorm,
               .contiguous_inputs = in(0) | in(1) | in(2),
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "batch_norm_backward",
               .traits = kNonDifferentiable | kWidens16Bit,
               .attr_names = battrs,
               .infer_meta = bn_bwd_meta,
               .cpu = bn_bwd_cpu,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kBatchNormBackward});
  register_op({.name = "dropout",
               .traits = kRandom | kWidens16Bit,
               .attr_names = {"p", "seed", "offset"},
               .infer_meta = dropout_meta,
               .cpu = dropout_cpu,
               .vjp = dropout_vjp,
               .save_outputs = out(1),
               .rng_seed_attr = 1,
               .contiguous_inputs = kEveryInput});
  const std::vector<std::string> cattrs = {"reduction", "ignore_index", "label_smoothing",
                                           "has_weight"};
  register_op({.name = "cross_entropy",
               .traits = kWidens16Bit | kChecksIndices,
               .attr_names = cattrs,
               .infer_meta = ce_meta,
               .cpu = ce_cpu,
               .vjp = ce_vjp,
               .save_inputs = in(0) | in(1) | in(2),
               .save_outputs = out(1) | out(2),
               .nondiff_inputs = in(1) | in(2),
               .sbp_rule = &sbp_rules::kCrossEntropy,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cross_entropy_backward",
               .traits = kWidens16Bit | kChecksIndices,
               .attr_names = cattrs,
               .infer_meta = ce_bwd_meta,
               .cpu = ce_bwd_cpu,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kCrossEntropyBackward});
  register_op({.name = "linear",
               .traits = kWidens16Bit,
               .attr_names = {},
               .infer_meta = linear_meta,
               .cpu = linear_cpu,
               .vjp = linear_vjp,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kLinear,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  const std::vector<std::string> aattrs = {"scale",  "is_causal", "dropout_p", "seed",
                                           "offset", "mask_kind", "draw_map"};
  register_op({.name = "scaled_dot_product_attention",
               .traits = kRandom | kWidens16Bit,
               .attr_names = aattrs,
               .infer_meta = sdpa_meta,
               .cpu = sdpa_cpu,
               .decompose = sdpa_decompose,
               .vjp = sdpa_vjp,
               .save_inputs = in(0) | in(1) | in(2) | in(3),
               .save_outputs = out(0) | out(1),
               .nondiff_inputs = in(3),
               .sbp_rule = &sbp_rules::kAttention,
               .rng_seed_attr = 3,
               .contiguous_inputs = in(0) | in(1) | in(2),
               .autocast = AutocastPolicy::kLower});  // the mask: any strides
  register_op({.name = "scaled_dot_product_attention_backward",
               .traits = kWidens16Bit,
               .attr_names = aattrs,
               .infer_meta = sdpa_bwd_meta,
               .cpu = sdpa_bwd_cpu,
               .decompose = sdpa_bwd_decompose,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kAttention,
               .rng_seed_attr = 3,
               .contiguous_inputs = in(0) | in(1) | in(2) | in(3) | in(5) | in(6)});
}

// ================================================================ public functions

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  // Only what the [rows, in] view needs is checked here; dtypes, devices and the bias are
  // linear_meta's, after autocast's casts and before any 16-bit widening (dispatch steps 0, 2).
  check_defined("linear", input, "input");
  check_defined("linear", weight, "weight");
  if (weight.dim() != 2)
    fail("[linear] expected a 2-D weight [out_features, in_features], got shape {}",
         shape_str(weight.sizes()));
  if (input.dim() < 1) fail("[linear] expected an input of at least 1 dim, got a 0-d tensor");
  const int64_t in = weight.size(1), outf = weight.size(0);
  if (input.size(-1) != in)
    fail("[linear] input of shape {} does not match weight of shape {}: in_features {} != {}",
         shape_str(input.sizes()), shape_str(weight.sizes()), input.size(-1), in);
  DimVector out_shape(input.sizes().begin(), input.sizes().end() - 1);
  out_shape.push_back(outf);
  const int64_t rows = prod_range(input.sizes(), 0, size_t(input.dim() - 1));
  const Tensor x2 = input.dim() == 2 ? input : input.reshape({rows, in});
  // one op on every device: the CUDA module's kernel is cuBLASLt with the bias epilogue
  const Tensor r = dispatch1(OF_OP("linear"), {x2, weight, bias});
  return input.dim() == 2 ? r : r.reshape(out_shape);
}

namespace {
// Whether a global input's samples are spread over ranks: split on a dim other than the
// channels, or a partial sum, on some mesh axis.
bool splits_samples(const Tensor& x) {
  for (const Sbp& s : x.sbp())
    if (s.is_partial_sum() || (s.is_split() && s.dim() != 1)) return true;
  return false;
}
// NOTE [Synchronized batch norm]: training on a batch spread over ranks needs the statistics
// of the whole batch. They are composed from global ops: the per-channel sums of the pieces
// are partial sums, made whole by one small all-reduce each (the mean, then the variance), so
// the activations never move; the normalization runs on each rank's samples and autograd
// differentiates the composition (its gradient needs two more small all-reduces). The
// arithmetic is the single-process batch norm's (biased variance for normalizing, unbiased for
// the running variance), so results agree to rounding.
Tensor synchronized_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var,
                               double momentum, double eps) {
  MetaList metas;  // the kernel's checks on the logical shapes, before any collective
  bn_meta({x, weight, bias, running_mean, running_var}, Attrs{true, eps, weight.defined()}, metas);
  DimVector dims{0}, pshape(size_t(x.dim()), 1);
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const int64_t C = x.size(1);
  pshape[1] = C;
  const double cnt = double(x.numel() / std::max<int64_t>(C, 1));
  // the per-channel statistics made whole (partial sums all-reduced) where they are partial,
  // so that the elementwise steps keep the samples split
  auto whole = [](const Tensor& t) {
    return t.to_global(t.placement(), global::partial_to_broadcast(t.sbp()));
  };
  Tensor mean = whole(x.sum(dims, true) / cnt);
  Tensor xc = x - mean;
  Tensor var = whole((xc * xc).sum(dims, true) / cnt);
  Tensor y = xc * (var + eps).rsqrt();
  if (weight.defined()) y = y * weight.reshape(pshape);
  if (bias.defined()) y = y + bias.reshape(pshape);
  NoGradGuard ng;
  if (running_mean.defined()) {
    Tensor rm = running_mean;
    rm.mul_(1.0 - momentum).add_(mean.detach().reshape({C}), momentum);
  }
  if (running_var.defined()) {
    Tensor rv = running_var;
    rv.mul_(1.0 - momentum).add_(var.detach().reshape({C}) * (cnt / (cnt - 1)), momentum);
  }
  return y;
}
}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps, bool cudnn_enabled) {
  (void)cudnn_enabled;
  if (!input.defined()) fail("[batch_norm] input is undefined");
  if (!(eps >= 0)) fail("[batch_norm] eps must be non-negative, got {}", eps);
  if (training && input.is_global() && splits_samples(input)) {
    // a composite of public ops: its arguments cast once as dispatch would cast the op's
    Tensor x = input, w = weight, b = bias;
    autocast_detail::autocast_args(OF_OP("batch_norm"), {&x, &w, &b});
    return synchronized_batch_norm(x, w, b, running_mean, running_var, momentum, eps);
  }
  TensorList r = dispatch(OF_OP("batch_norm"), {input, weight, bias, running_mean, running_var},
                          {training, eps, weight.defined()});
  if (training && (running_mean.defined() || running_var.defined())) {
    NoGradGuard ng;
    if (running_mean.defined()) {
      Tensor rm = running_mean;
      rm.mul_(1.0 - momentum).add_(r[1], momentum);
    }
    if (running_var.defined()) {
      Tensor rv = running_var;
      rv.mul_(1.0 - momentum).add_(r[3], momentum);
    }
  }
  return r[0];
}

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_float("layer_norm", input, "input");
  const int64_t nd = int64_t(normalized_shape.size());
  bool ok = nd >= 1 && nd <= input.dim();
  for (int64_t i = 0; ok && i < nd; ++i)
    ok = input.size(input.dim() - nd + i) == normalized_shape[size_t(i)];
  if (!ok)
    fail("[layer_norm] normalized_shape {} does not match the trailing dims of input of shape {}",
         shape_str(normalized_shape), shape_str(input.sizes()));
  return dispatch1(OF_OP("layer_norm"), {input, weight, bias},
                   {input.dim() - nd, eps, weight.defined(), bias.defined()});
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_float("group_norm", input, "input");
  if (input.dim() < 2)
    fail("[group_norm] expected an input of at least 2 dims (N, C[, *]), got shape {}",
         shape_str(input.sizes()));
  const int64_t C = input.size(1);
  if (num_groups <= 0 || C % num_groups != 0)
    fail(
        "[group_norm] num_groups {} must be positive and divide the number of channels {} "
        "(input shape {})",
        num_groups, C, shape_str(input.sizes()));
  return dispatch1(OF_OP("group_norm"), {input, weight, bias},
                   {num_groups, eps, weight.defined(), bias.defined()});
}

Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  check_float("rms_norm", input, "input");
  const int64_t nd = int64_t(normalized_shape.size());
  bool ok = nd >= 1 && nd <= input.dim();
  for (int64_t i = 0; ok && i < nd; ++i)
    ok = input.size(input.dim() - nd + i) == normalized_shape[size_t(i)];
  if (!ok)
    fail("[rms_norm] normalized_shape {} does not match the trailing dims of input of shape {}",
         shape_str(normalized_shape), shape_str(input.sizes()));
  // the machine epsilon of the dtype the op runs in (PyTorch's default: torch.finfo(dtype).eps),
  // after autocast's cast of the input
  const ScalarType dt = autocast_detail::dtype_for(OF_OP("rms_norm"), input);
  const double e = eps.value_or(dt == kFloat32    ? double(std::numeric_limits<float>::epsilon())
                                : dt == kBFloat16 ? 0.0078125     // 2^-7
                                : dt == kFloat16  ? 0.0009765625  // 2^-10
                                                  : std::numeric_limits<double>::epsilon());
  return dispatch1(OF_OP("rms_norm"), {input, weight},
                   {input.dim() - nd, e, weight.defined(), false});
}

Tensor dropout(const Tensor& input, double p, bool train) {
  if (!input.defined()) fail("[dropout] input is undefined");
  if (!(p >= 0.0 && p <= 1.0))
    fail("[dropout] dropout probability has to be between 0 and 1, but got {}", p);
  check_float("dropout", input, "input");
  if (!train || p == 0.0 || input.numel() == 0) return input;
  GeneratorState s = reserve_random(uint64_t((input.numel() + 3) / 4));
  return dispatch1(OF_OP("dropout"), {input}, {p, int64_t(s.seed), int64_t(s.offset)});
}

Tensor& dropout_(Tensor& input, double p, bool train) {
  Tensor y = dropout(input, p, train);
  if (!y.is_same(input)) input.copy_(y);
  return input;
}

namespace {
// The attention op on checked operands whose batch dims broadcast, flattened to [B, L, E] etc.
// `draw_map`: NOTE [Attention draw map] (empty: the batches are the whole). The dropout draws
// reserved are those of the whole: its logical batches (the map's) times L * S.
Tensor attend_flat(const Tensor& query, const Tensor& key, const Tensor& value,
                   const Tensor& attn_mask, double dropout_p, bool is_causal, double sc,
                   const DimVector& draw_map) {
  const char* op = "scaled_dot_product_attention";
  const int64_t L = query.size(-2), E = query.size(-1), S = key.size(-2), Ev = value.size(-1);
  // batch dims: broadcast of the three operands (and the mask's)
  auto batch_of = [](const Tensor& t) { return DimVector(t.sizes().begin(), t.sizes().end() - 2); };
  DimVector bs;
  auto merge = [&](const DimVector& d, const char* what, IntArrayRef full) {
    const size_t n = std::max(bs.size(), d.size());
    DimVector r(n, 1);
    for (size_t i = 0; i < n; ++i) {
      const int64_t a = i + bs.size() >= n ? bs[i + bs.size() - n] : 1;
      const int64_t b = i + d.size() >= n ? d[i + d.size() - n] : 1;
      if (a != b && a != 1 && b != 1)
        fail("[{}] batch dims of {} (shape {}) do not broadcast with {}", op, what, shape_str(full),
             shape_str(bs));
      r[i] = a == 1 ? b : a;
    }
    bs = r;
  };
  merge(batch_of(query), "query", query.sizes());
  merge(batch_of(key), "key", key.sizes());
  merge(batch_of(value), "value", value.sizes());
  int64_t mask_kind = 0;
  DimVector mshape = bs;
  mshape.push_back(L);
  mshape.push_back(S);
  if (attn_mask.defined()) {
    // (an additive mask's dtype is the op's check, after autocast's casts)
    if (attn_mask.dtype() == kBool) mask_kind = 1;
    else if (is_floating_point(attn_mask.dtype())) mask_kind = 2;
    else
      fail("[{}] attn_mask must be bool or floating (additive, of the query's dtype {}), got {}",
           op, dtype_name(query.dtype()), dtype_name(attn_mask.dtype()));
    if (!broadcasts_to(attn_mask.sizes(), mshape))
      fail("[{}] attn_mask of shape {} does not broadcast to {}", op, shape_str(attn_mask.sizes()),
           shape_str(mshape));
  }
  const int64_t B = prod_range(bs, 0, bs.size());
  auto flat = [&](const Tensor& t, int64_t r, int64_t c) {
    DimVector full = bs;
    full.push_back(r);
    full.push_back(c);
    Tensor e = t.sizes() == IntArrayRef(full) ? t : t.expand(full);
    return e.reshape({B, r, c});
  };
  int64_t whole = B;
  if (!draw_map.empty()) {
    whole = 1;
    for (size_t d = 0; d < draw_map.size(); d += 3) whole *= draw_map[d];
  }
  GeneratorState st{0, 0};
  if (dropout_p > 0) st = reserve_random(uint64_t((whole * L * S + 3) / 4));
  Tensor mask = attn_mask.defined() ? flat(attn_mask, L, S) : Tensor();
  Attrs a{sc, is_causal, dropout_p, int64_t(st.seed), int64_t(st.offset), mask_kind};
  if (!draw_map.empty()) a.values.push_back(draw_map);
  TensorList r =
      dispatch(OF_OP("scaled_dot_product_attention"),
               {flat(query, L, E), flat(key, S, E), flat(value, S, Ev), mask}, std::move(a));
  DimVector oshape = bs;
  oshape.push_back(L);
  oshape.push_back(Ev);
  return r[0].reshape(oshape);
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  // dtypes agreeing is the op's check (after autocast's casts, before any 16-bit widening):
  // this wrapper only shapes the call, once
  check_float(op, query, "query");
  check_float(op, key, "key");
  check_float(op, value, "value");
  if (query.dim() < 2 || key.dim() < 2 || value.dim() < 2)
    fail(
        "[{}] expected query, key and value of at least 2 dims ([..., L, E]), got shapes {}, {} "
        "and {}",
        op, shape_str(query.sizes()), shape_str(key.sizes()), shape_str(value.sizes()));
  const int64_t L = query.size(-2), E = query.size(-1), S = key.size(-2), Ev = value.size(-1);
  if (key.size(-1) != E || value.size(-2) != S)
    fail(
        "[{}] query {}, key {} and value {} do not fit: need key [..., S, {}] and value "
        "[..., {}, Ev]",
        op, shape_str(query.sizes()), shape_str(key.sizes()), shape_str(value.sizes()), E, S);
  if (!(dropout_p >= 0.0 && dropout_p < 1.0))
    fail("[{}] dropout_p must be in [0, 1), got {}", op, dropout_p);
  if (is_causal && attn_mask.defined())
    fail("[{}] pass either attn_mask or is_causal = true, not both", op);
  // NOTE [Attention split by heads]: global q, k, v of the same batch dims under one SBP that
  // splits only batch dims (the heads of [B, H, L, E], Megatron's tensor parallel attention,
  // or the batch) are attended piece by piece: every rank runs attention on its heads, with no
  // communication, and the result has the same SBP. A mask goes with them: split where it has
  // the split dim at full size, broadcast where it broadcasts over it (a global mask is boxed
  // so; a local one must broadcast over every split dim). With dropout each piece draws as
  // the batches it holds would in one process (NOTE [Attention draw map]): the generator
  // reserves the logical count on every rank, and each rank keeps its elements of that draw.
  if (query.is_global() && key.is_global() && value.is_global() && query.dim() == key.dim() &&
      query.dim() == value.dim()) {
    const NdSbp sbp = query.sbp();
    // (a rank outside the placement takes the op below, which gives it handles)
    bool pieces = key.sbp() == sbp && value.sbp() == sbp && key.placement() == query.placement() &&
                  value.placement() == query.placement() &&
                  global::holds_piece(query.placement(), op);
    bool any_split = false;
    for (const Sbp& s : sbp) {
      if (s.is_partial_sum() || (s.is_split() && s.dim() >= query.dim() - 2)) pieces = false;
      any_split |= s.is_split();
    }
    for (int64_t d = 0; pieces && d < query.dim() - 2; ++d)
      pieces = query.size(d) == key.size(d) && query.size(d) == value.size(d);
    // with dropout the draws are numbered over q's batch dims: a mask must not widen them
    DimVector qshape(query.sizes().begin(), query.sizes().end() - 2);
    qshape.push_back(L);
    qshape.push_back(S);
    if (dropout_p > 0 && attn_mask.defined() && !broadcasts_to(attn_mask.sizes(), qshape))
      pieces = false;
    // the mask's SBP that lines its pieces up with the operands' (or none: not piece by piece)
    Tensor mask_piece;
    if (pieces && any_split && attn_mask.defined()) {
      NdSbp msbp(sbp.size(), Sbp::broadcast());
      const int64_t shift = query.dim() - attn_mask.dim();
      for (size_t a = 0; a < sbp.size() && pieces; ++a) {
        if (!sbp[a].is_split()) continue;
        const int64_t k = sbp[a].dim() - shift;
        if (k >= 0 && attn_mask.size(k) == query.size(sbp[a].dim())) {
          if (!attn_mask.is_global()) pieces = false;  // a local mask with the split dim
          else msbp[a] = Sbp::split(k);
        } else if (k >= 0 && attn_mask.size(k) != 1) {
          pieces = false;  // does not broadcast: the op's checks raise below
        }
      }
      if (pieces && attn_mask.is_global()) {
        if (attn_mask.placement() != query.placement()) pieces = false;
        else mask_piece = global::piece_of(attn_mask.to_global(attn_mask.placement(), msbp));
      } else if (pieces) {
        mask_piece = attn_mask;
      }
    }
    if (pieces && any_split) {
      DimVector draw_map;
      if (dropout_p > 0) {
        const global::Box box = global::piece_box(query.sizes(), sbp, query.placement(),
                                                  global::my_coord(query.placement(), op));
        for (int64_t d = 0; d < query.dim() - 2; ++d)
          for (int64_t x : {query.size(d), box.start[size_t(d)], box.size[size_t(d)]})
            draw_map.push_back(x);
      }
      Tensor o = attend_flat(global::piece_of(query), global::piece_of(key),
                             global::piece_of(value), mask_piece, dropout_p, is_causal,
                             scale.value_or(1.0 / std::sqrt(double(E))), draw_map);
      DimVector oshape(query.sizes().begin(), query.sizes().end() - 2);
      oshape.push_back(L);
      oshape.push_back(Ev);
      return global::piece_to_global(o, query.placement(), sbp, oshape);
    }
  }
  return attend_flat(query, key, value, attn_mask, dropout_p, is_causal,
                     scale.value_or(1.0 / std::sqrt(double(E))), {});
}

Tensor cross_entropy(const Tensor& input_arg, const Tensor& target, const Tensor& weight_arg,
                     int64_t reduction, int64_t ignore_index, double label_smoothing) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  // The probability-target form below is a composite of public ops that compares dtypes: the
  // arguments are cast once, as dispatch casts the op's (no second pass over the function).
  Tensor input = input_arg, weight = weight_arg;
  autocast_detail::autocast_args(OF_OP("cross_entropy"), {&input, &weight});
  const char* op = "cross_entropy";
  check_float(op, input, "input");
  check_reduction(reduction, op);
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    fail("[cross_entropy] label_smoothing must be between 0.0 and 1.0, got {}", label_smoothing);
  if (!target.defined()) fail("[cross_entropy] target is undefined");
  if (target.is_floating_point()) {
    // class probabilities: same shape as input
    check_same_shape(input, target, op,
                     " (floating-point targets are class probabilities of the input's shape; "
                     "class indices must be int64)");
    if (target.dtype() != input.dtype())
      fail("[cross_entropy] expected probability targets of the input's dtype {}, got {}",
           dtype_name(input.dtype()), dtype_name(target.dtype()));
    if (ignore_index >= 0)
      fail("[cross_entropy] ignore_index ({}) is not supported for probability targets",
           ignore_index);
    const int64_t cdim = input.dim() >= 2 ? 1 : 0;
    const int64_t C = input.size(cdim);
    if (weight.defined()) check_param(weight, input, DimVector{C}, op, "weight");
    Tensor t = target;
    if (label_smoothing > 0) t = t * (1.0 - label_smoothing) + label_smoothing / double(C);
    Tensor lp = log_softmax(input, cdim);
    Tensor prod = lp * t;
    if (weight.defined()) {
      DimVector ws(size_t(input.dim()), 1);
      ws[size_t(cdim)] = C;
      prod = prod * weight.reshape(ws);
    }
    Tensor l = -sum(prod, {cdim});
    if (reduction == Reduction::Mean) {
      const int64_t rows = input.numel() / std::max<int64_t>(C, 1);
      return l.sum() / double(rows);
    }
    return reduce_loss(l, reduction);
  }
  check_class_targets(input, target, weight, ignore_index, op);
  if (input.dim() == 1) {
    // unbatched: [C] with a 0-d target
    Tensor r = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight, reduction,
                             ignore_index, label_smoothing);
    return reduction == Reduction::None ? r.squeeze(0) : r;
  }
  // A global mean is the global sum over the global total weight: a mean of split rows would
  // average the pieces' means (the op's SBP rule splits rows for None and Sum only). Unweighted
  // label smoothing divides its term by the row count instead: that case runs on whole values.
  if (input.is_global() && reduction == Reduction::Mean && input.dim() == 2 &&
      (label_smoothing == 0.0 || weight.defined())) {
    TensorList r =
        dispatch(OF_OP("cross_entropy"), {input, target, weight},
                 {int64_t(Reduction::Sum), ignore_index, label_smoothing, weight.defined()});
    return r[0] / r[2].detach();
  }
  TensorList r = dispatch(OF_OP("cross_entropy"), {input, target, weight},
                          {reduction, ignore_index, label_smoothing, weight.defined()});
  return r[0];
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                int64_t ignore_index) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "nll_loss";
  check_float(op, input, "input");
  check_reduction(reduction, op);
  check_class_targets(input, target, weight, ignore_index, op);
  if (input.dim() == 1) {
    Tensor r = nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, reduction, ignore_index);
    return reduction == Reduction::None ? r.squeeze(0) : r;
  }
  const Tensor valid = target != ignore_index;
  const Tensor t0 = where(valid, target, Scalar(int64_t(0)));
  const Tensor picked = gather(input, 1, t0.unsqueeze(1)).squeeze(1);
  Tensor w = valid.to(input.dtype());
  if (weight.defined()) w = w * index_select(weight, 0, t0.flatten()).reshape(target.sizes());
  const Tensor l = -picked * w;
  if (reduction == Reduction::Mean) return l.sum() / w.sum();
  return reduce_loss(l, reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("mse_loss", input, "input");
  check_same_shape(input, target, "mse_loss");
  check_float("mse_loss", target, "target");
  check_reduction(reduction, "mse_loss");
  return reduce_loss((input - target).square(), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("l1_loss", input, "input");
  check_same_shape(input, target, "l1_loss");
  check_float("l1_loss", target, "target");
  check_reduction(reduction, "l1_loss");
  return reduce_loss((input - target).abs(), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, int64_t reduction, double beta) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("smooth_l1_loss", input, "input");
  check_same_shape(input, target, "smooth_l1_loss");
  check_float("smooth_l1_loss", target, "target");
  check_reduction(reduction, "smooth_l1_loss");
  if (!(beta >= 0)) fail("[smooth_l1_loss] beta must be non-negative, got {}", beta);
  const Tensor ad = (input - target).abs();
  if (beta == 0) return reduce_loss(ad, reduction);
  const Tensor l = where(ad < beta, ad.square() * (0.5 / beta), ad - 0.5 * beta);
  return reduce_loss(l, reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "binary_cross_entropy";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  if (weight.defined()) {
    check_float(op, weight, "weight");
    if (!broadcasts_to(weight.sizes(), input.sizes()))
      fail("[{}] weight of shape {} does not broadcast to the input shape {}", op,
           shape_str(weight.sizes()), shape_str(input.sizes()));
  }
  if (input.is_cpu() && input.numel() > 0) {
    const Tensor bad = (input < 0) | (input > 1);
    if (bad.any().item<bool>()) fail("[{}] all elements of input should be between 0 and 1", op);
  }
  Tensor l = -(target * input.log().clamp_min(-100.0) +
               (1.0 - target) * (1.0 - input).log().clamp_min(-100.0));
  if (weight.defined()) l = l * weight;
  return reduce_loss(l, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "binary_cross_entropy_with_logits";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  for (const Tensor* t : {&weight, &pos_weight}) {
    if (!t->defined()) continue;
    const char* what = t == &weight ? "weight" : "pos_weight";
    check_float(op, *t, what);
    if (!broadcasts_to(t->sizes(), input.sizes()))
      fail("[{}] {} of shape {} does not broadcast to the input shape {}", op, what,
           shape_str(t->sizes()), shape_str(input.sizes()));
  }
  // (1 - t) x + lw * (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t
  const Tensor sp = (-input.abs()).exp().log1p() + (-input).relu();
  Tensor l;
  if (pos_weight.defined()) l = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * sp;
  else l = (1.0 - target) * input + sp;
  if (weight.defined()) l = l * weight;
  return reduce_loss(l, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, int64_t reduction, bool log_target) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "kl_div";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  Tensor l;
  if (log_target) {
    l = target.exp() * (target - input);
  } else {
    // xlogy(t, t) - t * input, with 0 * log(0) = 0
    const Tensor safe = where(target > 0, target, Scalar(1.0));
    l = target * safe.log() - target * input;
  }
  return reduce_loss(l, reduction);
}

}  // namespace oneflow

// Normalization ops: layer_norm, group_norm and rms_norm (the row norms) and batch_norm,
// with their fused backward ops (NOTE [nn kernels] in ops/nn.cpp), and their public
// functions (synchronized batch norm over global tensors among them).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autocast.h"
#include "global/global.h"
#include "global/rules.h"
#include "oneflow/ops_nn.h"
#include "ops/nn_common.h"

namespace oneflow {
using namespace nn_detail;
namespace {

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
    g.G = GroupNormAttrs::get<"num_groups">(a);
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
    const int64_t ax = NormAttrs::get<"axis">(a);
    if (ax < 0 || size_t(ax) > s.size())
      fail("[{}] normalized axis {} is outside the input's {} dims", norm_name(mode), ax, s.size());
    const size_t axis = size_t(ax);
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
  const double eps = NormAttrs::get<"eps">(k.attrs);
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
  const bool has_w = NormAttrs::get<"has_weight">(c.attrs());
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
  const bool training = BatchNormAttrs::get<"training">(a);
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
  const bool training = BatchNormAttrs::get<"training">(k.attrs);
  const double eps = BatchNormAttrs::get<"eps">(k.attrs);
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
  const bool training = BatchNormAttrs::get<"training">(k.attrs);
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
  const bool has_w = BatchNormAttrs::get<"has_weight">(c.attrs());
  Tensor w = has_w ? c.input(1) : Tensor();
  TensorList r = dispatch(OF_OP("batch_norm_backward"),
                          {g[0], c.input(0), w, c.output(1), c.output(2)}, c.attrs());
  return {c.needs_input_grad(0) ? r[0] : Tensor(), c.needs_input_grad(1) ? r[1] : Tensor(),
          c.needs_input_grad(2) ? r[2] : Tensor(), Tensor(), Tensor()};
}

}  // namespace

void register_norm_ops() {
  register_op({.name = "layer_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
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
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
               .infer_meta = norm_bwd_meta<kLayer>,
               .cpu = norm_bwd_cpu<kLayer>,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kNormBackward});
  register_op({.name = "group_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = GroupNormAttrs::names(),
               .attr_types = GroupNormAttrs::types(),
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
               .attr_names = GroupNormAttrs::names(),
               .attr_types = GroupNormAttrs::types(),
               .infer_meta = norm_bwd_meta<kGroup>,
               .cpu = norm_bwd_cpu<kGroup>,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kGroupNormBackward});
  register_op({.name = "rms_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
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
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
               .infer_meta = norm_bwd_meta<kRms>,
               .cpu = norm_bwd_cpu<kRms>,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kNormBackward});
  register_op({.name = "batch_norm",
               .traits = kWidens16Bit,
               .attr_names = BatchNormAttrs::names(),
               .attr_types = BatchNormAttrs::types(),
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
               .attr_names = BatchNormAttrs::names(),
               .attr_types = BatchNormAttrs::types(),
               .infer_meta = bn_bwd_meta,
               .cpu = bn_bwd_cpu,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kBatchNormBackward});
}

// ================================================================ public functions

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
                          BatchNormAttrs::make(training, eps, weight.defined()));
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
                   NormAttrs::make(input.dim() - nd, eps, weight.defined(), bias.defined()));
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
                   GroupNormAttrs::make(num_groups, eps, weight.defined(), bias.defined()));
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
                   NormAttrs::make(input.dim() - nd, e, weight.defined(), false));
}

}  // namespace oneflow

// nn_extra.cpp: im2col / col2im (nn::Unfold / nn::Fold) and the CTC loss.
// NOTE [im2col and col2im]: im2col copies every kernel window of [N, C, H, W] into a column of
// [N, C*kh*kw, L] (zeros where a window reaches into the padding); col2im is its adjoint (sums
// each column entry back onto its pixel), so each one's VJP is the other.
// NOTE [CTC]: ctc_loss runs the alpha recursion in log space per sample (double accumulation)
// and returns the negative log likelihood [N] and the log alphas [N, T, 2S+1]; its VJP is
// ctc_loss_backward, which runs the beta recursion and combines both (the alpha-beta method).
// The gradient w.r.t. log_probs is the true one, -exp(log(sum alpha*beta over the positions
// of c) - lp + nll); libtorch's adds exp(lp), which is the same after a log_softmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "dispatch.h"
#include "global/rules.h"
#include "oneflow/nn/extra.h"
#include "oneflow/nn/losses.h"
#include "ops/nn_attrs.h"
#include "thread_pool.h"
#include "ops/checks.h"

namespace oneflow {
using nn_detail::Col2imAttrs;
using nn_detail::CtcAttrs;
using nn_detail::Im2colAttrs;
namespace {

template <class F> void float_or_double(ScalarType t, const char* op, F&& f) {
  if (t == kFloat32) return f(float{});
  if (t == kFloat64) return f(double{});
  fail("[{}] expected a float32 or float64 tensor, got {}", op, dtype_name(t));
}

std::string vals(const DimVector& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

DimVector two(IntArrayRef v, const char* op, const char* name) {
  if (v.size() == 2) return v.dims();
  if (v.size() == 1) return DimVector(2, v[0]);
  fail("[{}] {} must have 1 or 2 values, got {}", op, name, shape_str(v));
}

// ---------------------------------------------------------------- im2col / col2im geometry

struct ColGeom {
  int64_t N, C, H, W, kh, kw, dh, dw, ph, pw, sh, sw, OH, OW;
  int64_t L() const { return OH * OW; }
};

// The window of im2col or col2im (S: its schema). H, W: the image size.
template <class S>
ColGeom col_geom(const char* op, int64_t N, int64_t C, int64_t H, int64_t W, const Attrs& a) {
  const DimVector& k = S::template get<"kernel_size">(a);
  const DimVector& d = S::template get<"dilation">(a);
  const DimVector& p = S::template get<"padding">(a);
  const DimVector& s = S::template get<"stride">(a);
  if (k.size() != 2 || d.size() != 2 || p.size() != 2 || s.size() != 2)
    fail(
        "[{}] expected kernel_size, dilation, padding and stride of 2 values each, got {}, {}, "
        "{} and {}",
        op, vals(k), vals(d), vals(p), vals(s));
  if (k[0] <= 0 || k[1] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
  if (d[0] <= 0 || d[1] <= 0) fail("[{}] dilation must be positive, got {}", op, vals(d));
  if (p[0] < 0 || p[1] < 0) fail("[{}] padding must be non-negative, got {}", op, vals(p));
  if (s[0] <= 0 || s[1] <= 0) fail("[{}] stride must be positive, got {}", op, vals(s));
  ColGeom g{N, C, H, W, k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1], 0, 0};
  // overflow-checked: the attrs of a direct dispatch may hold any values (fuzz_ops)
  auto extent = [&](int64_t n, int64_t pad, int64_t dil, int64_t ker) {
    int64_t twice, padded, reach, e;
    if (__builtin_mul_overflow(pad, 2, &twice) || __builtin_add_overflow(n, twice, &padded) ||
        __builtin_mul_overflow(dil, ker - 1, &reach) || __builtin_sub_overflow(padded, reach, &e))
      fail("[{}] kernel_size {}, dilation {} and padding {} overflow the sizes", op, vals(k),
           vals(d), vals(p));
    return e - 1;
  };
  const int64_t eh = extent(H, g.ph, g.dh, g.kh), ew = extent(W, g.pw, g.dw, g.kw);
  if (eh < 0 || ew < 0)
    fail(
        "[{}] the dilated kernel {} does not fit the padded input of size ({}, {}) "
        "(padding {}, dilation {})",
        op, vals(k), H + 2 * g.ph, W + 2 * g.pw, vals(p), vals(d));
  g.OH = eh / g.sh + 1;
  g.OW = ew / g.sw + 1;
  // the products the metas and the loops form
  checked_mul(checked_mul(C, checked_mul(g.kh, g.kw, op, "the kernel size"), op,
                          "channels times the kernel size"),
              checked_mul(g.OH, g.OW, op, "the number of sliding blocks"), op,
              "the column matrix size");
  return g;
}

void check_floating(const char* op, const Tensor& x, const char* what) {
  check_defined(op, x, what);
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64)
    fail("[{}] expected a float32 or float64 {}, got {} (shape {})", op, what,
         dtype_name(x.dtype()), shape_str(x.sizes()));
}

ColGeom im2col_geom(const Tensor& x, const Attrs& a) {
  const char* op = "im2col";
  check_floating(op, x, "input");
  if (x.dim() != 4)
    fail("[{}] expected a 4-D input [N, C, H, W], got shape {}", op, shape_str(x.sizes()));
  return col_geom<Im2colAttrs>(op, x.size(0), x.size(1), x.size(2), x.size(3), a);
}

// attrs (col2im): output_size, kernel_size, dilation, padding, stride.
ColGeom col2im_geom(const Tensor& x, const Attrs& a) {
  const char* op = "col2im";
  check_floating(op, x, "input");
  if (x.dim() != 3)
    fail("[{}] expected a 3-D input [N, C*kh*kw, L], got shape {}", op, shape_str(x.sizes()));
  using A = Col2imAttrs;
  const DimVector& os = A::get<"output_size">(a);
  const DimVector& k = A::get<"kernel_size">(a);
  if (os.size() != 2 || k.size() != 2)
    fail("[{}] expected output_size and kernel_size of 2 values each, got {} and {}", op, vals(os),
         vals(k));
  if (os[0] <= 0 || os[1] <= 0) fail("[{}] output_size must be positive, got {}", op, vals(os));
  if (k[0] <= 0 || k[1] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
  const int64_t kk = checked_mul(k[0], k[1], op, "the kernel size");
  if (x.size(1) % kk != 0)
    fail(
        "[{}] expected size of input's dimension 1 ({}, input shape {}) to be divisible by the "
        "product of kernel_size {} = {}",
        op, x.size(1), shape_str(x.sizes()), vals(k), kk);
  const ColGeom g = col_geom<A>(op, x.size(0), x.size(1) / kk, os[0], os[1], a);
  if (x.size(2) != g.L())
    fail(
        "[{}] given output_size={}, kernel_size={}, dilation={}, padding={}, stride={}, "
        "expected size of input's dimension 2 to match the calculated number of sliding "
        "blocks {} * {} = {}, but got input.size(2)={} (input shape {})",
        op, vals(os), vals(k), vals(A::get<"dilation">(a)), vals(A::get<"padding">(a)),
        vals(A::get<"stride">(a)), g.OH, g.OW, g.L(), x.size(2), shape_str(x.sizes()));
  return g;
}

// Calls f(n, c, i, j, col_row, image_plane_offset) for every (image, channel, kernel tap),
// split over threads by (n, c): each (n, c) plane is touched by one thread only.
template <class T, bool kToCols> void col_loop(const ColGeom& g, const T* src, T* dst) {
  const int64_t K = g.kh * g.kw, L = g.L(), HW = g.H * g.W;
  parallel_for(0, g.N * g.C, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, K * L)),
               [&](int64_t b, int64_t e) {
                 for (int64_t nc = b; nc < e; ++nc) {
                   const T* img = kToCols ? src + nc * HW : nullptr;
                   T* out_img = kToCols ? nullptr : dst + nc * HW;
                   if (!kToCols) std::fill(out_img, out_img + HW, T(0));
                   for (int64_t i = 0; i < g.kh; ++i)
                     for (int64_t j = 0; j < g.kw; ++j) {
                       const int64_t row = nc * K + i * g.kw + j;
                       T* col = kToCols ? dst + row * L : nullptr;
                       const T* ccol = kToCols ? nullptr : src + row * L;
                       for (int64_t oh = 0; oh < g.OH; ++oh) {
                         const int64_t ih = oh * g.sh - g.ph + i * g.dh;
                         const bool hin = ih >= 0 && ih < g.H;
                         for (int64_t ow = 0; ow < g.OW; ++ow) {
                           const int64_t iw = ow * g.sw - g.pw + j * g.dw;
                           const bool in = hin && iw >= 0 && iw < g.W;
                           if constexpr (kToCols)
                             col[oh * g.OW + ow] = in ? img[ih * g.W + iw] : T(0);
                           else if (in) out_img[ih * g.W + iw] += ccol[oh * g.OW + ow];
                         }
                       }
                     }
                 }
               });
}

void im2col_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const ColGeom g = im2col_geom(in[0], a);
  out.push_back({{g.N, g.C * g.kh * g.kw, g.L()}, {}, 0, in[0].dtype(), in[0].device()});
}
void im2col_cpu(const KernelArgs& k) {
  const ColGeom g = im2col_geom(k.inputs[0], k.attrs);
  float_or_double(k.inputs[0].dtype(), "im2col", [&](auto z) {
    using T = decltype(z);
    col_loop<T, true>(g, k.inputs[0].data_ptr<T>(), k.outputs[0].data_ptr<T>());
  });
}
TensorList im2col_vjp(const VjpCtx& c, const TensorList& g) {
  const Attrs& a = c.attrs();
  IntArrayRef s = c.input_sizes(0);
  using A = Im2colAttrs;
  return {col2im(g[0], {s[2], s[3]}, A::get<"kernel_size">(a), A::get<"dilation">(a),
                 A::get<"padding">(a), A::get<"stride">(a))};
}

void col2im_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const ColGeom g = col2im_geom(in[0], a);
  out.push_back({{g.N, g.C, g.H, g.W}, {}, 0, in[0].dtype(), in[0].device()});
}
void col2im_cpu(const KernelArgs& k) {
  const ColGeom g = col2im_geom(k.inputs[0], k.attrs);
  float_or_double(k.inputs[0].dtype(), "col2im", [&](auto z) {
    using T = decltype(z);
    col_loop<T, false>(g, k.inputs[0].data_ptr<T>(), k.outputs[0].data_ptr<T>());
  });
}
TensorList col2im_vjp(const VjpCtx& c, const TensorList& g) {
  const Attrs& a = c.attrs();
  using A = Col2imAttrs;
  return {im2col(g[0], A::get<"kernel_size">(a), A::get<"dilation">(a), A::get<"padding">(a),
                 A::get<"stride">(a))};
}

// ---------------------------------------------------------------- ctc_loss

// Inputs: log_probs [T, N, C] (float), targets [N, S] or 1-D concatenated (int64),
// input_lengths [N], target_lengths [N] (int64). Attrs: blank, zero_infinity.
struct CtcGeom {
  int64_t T, N, C, S;  // S: the most target labels a sample can have
  bool concat;
};

CtcGeom ctc_geom(const char* op, const TensorList& in, int64_t blank) {
  const Tensor &lp = in[0], &tg = in[1], &il = in[2], &tl = in[3];
  check_floating(op, lp, "log_probs");
  if (lp.dim() != 3)
    fail("[{}] expected log_probs of shape [T, N, C], got {}", op, shape_str(lp.sizes()));
  const int64_t T = lp.size(0), N = lp.size(1), C = lp.size(2);
  for (auto [t, what] :
       {std::pair{&tg, "targets"}, {&il, "input_lengths"}, {&tl, "target_lengths"}})
    if (!t->defined() || t->dtype() != kInt64)
      fail("[{}] expected {} to be an int64 tensor, got {}", op, what,
           t->defined() ? dtype_name(t->dtype()) : "an undefined tensor");
  if (il.dim() != 1 || il.size(0) != N || tl.dim() != 1 || tl.size(0) != N)
    fail(
        "[{}] expected input_lengths and target_lengths of shape [N] = ({}), got {} and {} "
        "(log_probs {})",
        op, N, shape_str(il.sizes()), shape_str(tl.sizes()), shape_str(lp.sizes()));
  if (!(tg.dim() == 1 || (tg.dim() == 2 && tg.size(0) == N)))
    fail("[{}] expected targets of shape [N, S] with N = {} or 1-D concatenated targets, got {}",
         op, N, shape_str(tg.sizes()));
  if (blank < 0 || blank >= C)
    fail("[{}] blank {} must be in [0, {}) (log_probs {})", op, blank, C, shape_str(lp.sizes()));
  return {T, N, C, tg.dim() == 2 ? tg.size(1) : tg.numel(), tg.dim() == 1};
}

// Per-sample lengths and target offsets, checked against the shapes (kernels read the data).
struct CtcSamples {
  std::vector<int64_t> in_len, tg_len, offset;
};
CtcSamples ctc_samples(const char* op, const TensorList& in, const CtcGeom& g) {
  const int64_t* il = in[2].data_ptr<int64_t>();
  const int64_t* tl = in[3].data_ptr<int64_t>();
  const int64_t* tg = in[1].data_ptr<int64_t>();
  CtcSamples s{std::vector<int64_t>(il, il + g.N), std::vector<int64_t>(tl, tl + g.N), {}};
  int64_t off = 0;
  for (int64_t b = 0; b < g.N; ++b) {
    if (s.in_len[b] < 0 || s.in_len[b] > g.T)
      fail("[{}] expected input_lengths to have values in [0, {}] (T), got {} for sample {}", op,
           g.T, s.in_len[b], b);
    if (s.tg_len[b] < 0 || (!g.concat && s.tg_len[b] > g.S))
      fail("[{}] expected target_lengths to have values in [0, {}], got {} for sample {}", op, g.S,
           s.tg_len[b], b);
    s.offset.push_back(g.concat ? off : b * g.S);
    off += s.tg_len[b];
  }
  if (g.concat && off > g.S)
    fail("[{}] target_lengths sum to {} but the concatenated targets hold {} labels", op, off, g.S);
  for (int64_t b = 0; b < g.N; ++b)
    for (int64_t i = 0; i < s.tg_len[b]; ++i) {
      const int64_t v = tg[s.offset[b] + i];
      if (v < 0 || v >= g.C)
        fail("[{}] target label {} of sample {} is {}, outside [0, {})", op, i, b, v, g.C);
    }
  return s;
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double lse2(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

// One sample's extended label l'(s): blank at even s, the target at odd s.
struct Labels {
  const int64_t* tg;
  int64_t blank;
  int64_t operator()(int64_t s) const { return s % 2 == 0 ? blank : tg[s / 2]; }
};

void ctc_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const CtcGeom g = ctc_geom("ctc_loss", in, CtcAttrs::get<"blank">(a));
  out.push_back({{g.N}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{g.N, g.T, 2 * g.S + 1}, {}, 0, in[0].dtype(), in[0].device()});
}

void ctc_cpu(const KernelArgs& k) {
  const char* op = "ctc_loss";
  const int64_t blank = CtcAttrs::get<"blank">(k.attrs);
  const bool zero_inf = CtcAttrs::get<"zero_infinity">(k.attrs);
  const CtcGeom g = ctc_geom(op, k.inputs, blank);
  const CtcSamples smp = ctc_samples(op, k.inputs, g);
  const int64_t* tg = k.inputs[1].data_ptr<int64_t>();
  const int64_t SA = 2 * g.S + 1;
  float_or_double(k.inputs[0].dtype(), op, [&](auto z) {
    using T = decltype(z);
    const T* lp = k.inputs[0].data_ptr<T>();
    T* nll = k.outputs[0].data_ptr<T>();
    T* la = k.outputs[1].data_ptr<T>();
    std::fill(la, la + g.N * g.T * SA, T(kNegInf));
    parallel_for(0, g.N, 1, [&](int64_t b0, int64_t b1) {
      std::vector<double> prev(static_cast<size_t>(SA)), cur(static_cast<size_t>(SA));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t Tb = smp.in_len[b], Lp = 2 * smp.tg_len[b] + 1;
        const Labels lab{tg + smp.offset[b], blank};
        auto lpv = [&](int64_t t, int64_t c) { return double(lp[(t * g.N + b) * g.C + c]); };
        T* lab_b = la + b * g.T * SA;
        double r;
        if (Tb == 0) {
          r = smp.tg_len[b] == 0 ? 0.0 : std::numeric_limits<double>::infinity();
        } else {
          std::fill(prev.begin(), prev.end(), kNegInf);
          prev[0] = lpv(0, blank);
          if (Lp > 1) prev[1] = lpv(0, lab(1));
          for (int64_t s = 0; s < Lp; ++s) lab_b[s] = T(prev[size_t(s)]);
          for (int64_t t = 1; t < Tb; ++t) {
            for (int64_t s = 0; s < Lp; ++s) {
              double v = prev[size_t(s)];
              if (s > 0) v = lse2(v, prev[size_t(s - 1)]);
              if (s > 1 && lab(s) != blank && lab(s) != lab(s - 2))
                v = lse2(v, prev[size_t(s - 2)]);
              cur[size_t(s)] = v == kNegInf ? kNegInf : v + lpv(t, lab(s));
              lab_b[t * SA + s] = T(cur[size_t(s)]);
            }
            std::swap(prev, cur);
          }
          double ll = prev[size_t(Lp - 1)];
          if (Lp > 1) ll = lse2(ll, prev[size_t(Lp - 2)]);
          r = -ll;
        }
        if (zero_inf && std::isinf(r)) r = 0;
        nll[b] = T(r);
      }
    });
  });
}

TensorList ctc_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor gx =
      dispatch1(OF_OP("ctc_loss_backward"),
                {g[0], c.input(0), c.input(1), c.input(2), c.input(3), c.output(1)}, c.attrs());
  return {gx, Tensor(), Tensor(), Tensor()};
}

// ctc_loss_backward(grad [N], log_probs, targets, input_lengths, target_lengths, log_alpha)
void ctc_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "ctc_loss_backward";
  const CtcGeom g = ctc_geom(op, {in[1], in[2], in[3], in[4]}, CtcAttrs::get<"blank">(a));
  if (in[0].dim() != 1 || in[0].size(0) != g.N || in[0].dtype() != in[1].dtype())
    fail("[{}] expected grad of shape ({}) and dtype {}, got {} ({})", op, g.N,
         dtype_name(in[1].dtype()), shape_str(in[0].sizes()), dtype_name(in[0].dtype()));
  if (!(in[5].sizes() == IntArrayRef(DimVector{g.N, g.T, 2 * g.S + 1})))
    fail("[{}] log_alpha has shape {}, expected ({}, {}, {})", op, shape_str(in[5].sizes()), g.N,
         g.T, 2 * g.S + 1);
  out.push_back({in[1].sizes().dims(), {}, 0, in[1].dtype(), in[1].device()});
}

void ctc_bwd_cpu(const KernelArgs& k) {
  const char* op = "ctc_loss_backward";
  const int64_t blank = CtcAttrs::get<"blank">(k.attrs);
  const bool zero_inf = CtcAttrs::get<"zero_infinity">(k.attrs);
  const TensorList fin{k.inputs[1], k.inputs[2], k.inputs[3], k.inputs[4]};
  const CtcGeom g = ctc_geom(op, fin, blank);
  const CtcSamples smp = ctc_samples(op, fin, g);
  const int64_t* tg = k.inputs[2].data_ptr<int64_t>();
  const int64_t SA = 2 * g.S + 1;
  float_or_double(k.inputs[1].dtype(), op, [&](auto z) {
    using T = decltype(z);
    const T* gr = k.inputs[0].data_ptr<T>();
    const T* lp = k.inputs[1].data_ptr<T>();
    const T* la = k.inputs[5].data_ptr<T>();
    T* gx = k.outputs[0].data_ptr<T>();
    std::fill(gx, gx + g.T * g.N * g.C, T(0));
    parallel_for(0, g.N, 1, [&](int64_t b0, int64_t b1) {
      std::vector<double> beta(static_cast<size_t>(g.T * SA)), lcab(static_cast<size_t>(g.C));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t Tb = smp.in_len[b], Lp = 2 * smp.tg_len[b] + 1;
        if (Tb == 0) continue;
        const Labels lab{tg + smp.offset[b], blank};
        auto lpv = [&](int64_t t, int64_t c) { return double(lp[(t * g.N + b) * g.C + c]); };
        std::fill(beta.begin(), beta.end(), kNegInf);
        double* last = beta.data() + (Tb - 1) * SA;
        last[Lp - 1] = lpv(Tb - 1, lab(Lp - 1));
        if (Lp > 1) last[Lp - 2] = lpv(Tb - 1, lab(Lp - 2));
        for (int64_t t = Tb - 2; t >= 0; --t) {
          const double* nx = beta.data() + (t + 1) * SA;
          double* cu = beta.data() + t * SA;
          for (int64_t s = 0; s < Lp; ++s) {
            double v = nx[s];
            if (s + 1 < Lp) v = lse2(v, nx[s + 1]);
            if (s + 2 < Lp && lab(s) != blank && lab(s) != lab(s + 2)) v = lse2(v, nx[s + 2]);
            cu[s] = v == kNegInf ? kNegInf : v + lpv(t, lab(s));
          }
        }
        double nll = -(Lp > 1 ? lse2(beta[0], beta[1]) : beta[0]);
        if (std::isinf(nll) && zero_inf) continue;  // zero_infinity: no gradient either
        const double gb = double(gr[b]);
        const T* lab_b = la + b * g.T * SA;
        for (int64_t t = 0; t < Tb; ++t) {
          std::fill(lcab.begin(), lcab.end(), kNegInf);
          for (int64_t s = 0; s < Lp; ++s) {
            const double ab = double(lab_b[t * SA + s]) + beta[size_t(t * SA + s)];
            lcab[size_t(lab(s))] = lse2(lcab[size_t(lab(s))], ab);
          }
          for (int64_t c = 0; c < g.C; ++c) {
            const double l = lcab[size_t(c)];
            if (l == kNegInf && !std::isinf(nll)) continue;
            gx[(t * g.N + b) * g.C + c] = T(-std::exp(l + nll - lpv(t, c)) * gb);
          }
        }
      }
    });
  });
}

TensorList ctc_bwd_vjp(const VjpCtx& c, const TensorList&) {
  fail(
      "[{}] double backward through ctc_loss is not implemented (a gradient taken with "
      "create_graph=true was differentiated again)",
      c.op().name);
}

}  // namespace

void register_nn_extra_ops() {
  register_op({.name = "im2col",
               .traits = kWidens16Bit,
               .attr_names = Im2colAttrs::names(),
               .attr_types = Im2colAttrs::types(),
               .infer_meta = im2col_meta,
               .cpu = im2col_cpu,
               .vjp = im2col_vjp,
               .sbp_rule = &sbp_rules::kIm2col,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "col2im",
               .traits = kWidens16Bit,
               .attr_names = Col2imAttrs::names(),
               .attr_types = Col2imAttrs::types(),
               .infer_meta = col2im_meta,
               .cpu = col2im_cpu,
               .vjp = col2im_vjp,
               .sbp_rule = &sbp_rules::kCol2im,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "ctc_loss",
               .traits = kWidens16Bit,
               .attr_names = CtcAttrs::names(),
               .attr_types = CtcAttrs::types(),
               .infer_meta = ctc_meta,
               .cpu = ctc_cpu,
               .vjp = ctc_vjp,
               .save_inputs = in(0) | in(1) | in(2) | in(3),
               .save_outputs = out(1),
               .nondiff_inputs = in(1) | in(2) | in(3),
               .sbp_rule = &sbp_rules::kCtc,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "ctc_loss_backward",
               .traits = kWidens16Bit,
               .attr_names = CtcAttrs::names(),
               .attr_types = CtcAttrs::types(),
               .infer_meta = ctc_bwd_meta,
               .cpu = ctc_bwd_cpu,
               .vjp = ctc_bwd_vjp,
               .sbp_rule = &sbp_rules::kCtc,
               .contiguous_inputs = kEveryInput});
}

// ---------------------------------------------------------------- public functions

Tensor im2col(const Tensor& input, IntArrayRef kernel_size, IntArrayRef dilation,
              IntArrayRef padding, IntArrayRef stride) {
  const char* op = "im2col";
  check_floating(op, input, "input");
  if (input.dim() != 3 && input.dim() != 4)
    fail("[{}] expected a 3-D (unbatched) or 4-D input, got shape {}", op,
         shape_str(input.sizes()));
  const Tensor x = input.dim() == 3 ? input.unsqueeze(0) : input;
  Tensor y = dispatch1(
      OF_OP("im2col"), {x},
      Im2colAttrs::make(two(kernel_size, op, "kernel_size"), two(dilation, op, "dilation"),
                        two(padding, op, "padding"), two(stride, op, "stride")));
  return input.dim() == 3 ? y.squeeze(0) : y;
}

Tensor col2im(const Tensor& input, IntArrayRef output_size, IntArrayRef kernel_size,
              IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  const char* op = "col2im";
  check_floating(op, input, "input");
  if (input.dim() != 2 && input.dim() != 3)
    fail("[{}] expected a 2-D (unbatched) or 3-D input, got shape {}", op,
         shape_str(input.sizes()));
  const Tensor x = input.dim() == 2 ? input.unsqueeze(0) : input;
  Tensor y = dispatch1(
      OF_OP("col2im"), {x},
      Col2imAttrs::make(two(output_size, op, "output_size"), two(kernel_size, op, "kernel_size"),
                        two(dilation, op, "dilation"), two(padding, op, "padding"),
                        two(stride, op, "stride")));
  return input.dim() == 2 ? y.squeeze(0) : y;
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, int64_t reduction,
                bool zero_infinity) {
  const char* op = "ctc_loss";
  auto as_long = [&](const Tensor& t, const char* what) {
    check_defined(op, t, what);
    if (t.dtype() != kInt64 && t.dtype() != kInt32)
      fail("[{}] expected {} to be an integer (int32 or int64) tensor, got {} (shape {})", op, what,
           dtype_name(t.dtype()), shape_str(t.sizes()));
    return t.to(kInt64);
  };
  if (reduction < Reduction::None || reduction > Reduction::Sum)
    fail("[{}] unknown reduction {}", op, reduction);
  const Tensor tl = as_long(target_lengths, "target_lengths");
  TensorList r = dispatch(
      OF_OP("ctc_loss"),
      {log_probs, as_long(targets, "targets"), as_long(input_lengths, "input_lengths"), tl},
      CtcAttrs::make(blank, zero_infinity));
  const Tensor& nll = r[0];
  if (reduction == Reduction::Sum) return nll.sum();
  if (reduction == Reduction::Mean) return (nll / tl.clamp_min(1).to(nll.dtype())).mean();
  return nll;
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths,
                IntArrayRef target_lengths, int64_t blank, int64_t reduction, bool zero_infinity) {
  return ctc_loss(log_probs, targets,
                  tensor(std::vector<int64_t>(input_lengths.begin(), input_lengths.end())),
                  tensor(std::vector<int64_t>(target_lengths.begin(), target_lengths.end())), blank,
                  reduction, zero_infinity);
}

}  // namespace oneflow

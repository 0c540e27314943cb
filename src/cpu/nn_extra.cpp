// nn_extra.cpp: the CPU kernels of im2col / col2im (nn::Unfold / nn::Fold) and the CTC loss
// (their metas, VJPs and registrations: ops/nn_extra.cpp; the geometry both use:
// ops/nn_extra_common.h).
// NOTE [im2col and col2im]: im2col copies every kernel window of [N, C, H, W] into a column of
// [N, C*kh*kw, L] (zeros where a window reaches into the padding); col2im is its adjoint (sums
// each column entry back onto its pixel), so each one's VJP is the other.
// NOTE [CTC]: ctc_loss runs the alpha recursion in log space per sample (double accumulation)
// and returns the negative log likelihood [N] and the log alphas [N, T, 2S+1]; its VJP is
// ctc_loss_backward, which runs the beta recursion and combines both (the alpha-beta method).
// The gradient w.r.t. log_probs is the true one, -exp(log(sum alpha*beta over the positions
// of c) - lp + nll); libtorch's adds exp(lp), which is the same after a log_softmax.
#include "cpu/nn_extra.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernel_support.h"
#include "ops/nn_extra_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace nn_extra_detail;
namespace {

// ---------------------------------------------------------------- im2col / col2im

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

// ---------------------------------------------------------------- ctc_loss

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

}  // namespace

// ---------------------------------------------------------------- im2col / col2im

void im2col(const KernelArgs& k) {
  const ColGeom g = im2col_geom(k.inputs[0], k.attrs);
  dispatch_f(k.inputs[0].dtype(), "im2col", [&](auto z) {
    using T = decltype(z);
    col_loop<T, true>(g, k.inputs[0].data_ptr<T>(), k.outputs[0].data_ptr<T>());
  });
}

void col2im(const KernelArgs& k) {
  const ColGeom g = col2im_geom(k.inputs[0], k.attrs);
  dispatch_f(k.inputs[0].dtype(), "col2im", [&](auto z) {
    using T = decltype(z);
    col_loop<T, false>(g, k.inputs[0].data_ptr<T>(), k.outputs[0].data_ptr<T>());
  });
}

// ---------------------------------------------------------------- ctc_loss

void ctc_loss(const KernelArgs& k) {
  const char* op = "ctc_loss";
  const int64_t blank = CtcAttrs::get<"blank">(k.attrs);
  const bool zero_inf = CtcAttrs::get<"zero_infinity">(k.attrs);
  const CtcGeom g = ctc_geom(op, k.inputs, blank);
  const CtcSamples smp = ctc_samples(op, k.inputs, g);
  const int64_t* tg = k.inputs[1].data_ptr<int64_t>();
  const int64_t SA = 2 * g.S + 1;
  dispatch_f(k.inputs[0].dtype(), op, [&](auto z) {
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

void ctc_loss_backward(const KernelArgs& k) {
  const char* op = "ctc_loss_backward";
  const int64_t blank = CtcAttrs::get<"blank">(k.attrs);
  const bool zero_inf = CtcAttrs::get<"zero_infinity">(k.attrs);
  const TensorList fin{k.inputs[1], k.inputs[2], k.inputs[3], k.inputs[4]};
  const CtcGeom g = ctc_geom(op, fin, blank);
  const CtcSamples smp = ctc_samples(op, fin, g);
  const int64_t* tg = k.inputs[2].data_ptr<int64_t>();
  const int64_t SA = 2 * g.S + 1;
  dispatch_f(k.inputs[1].dtype(), op, [&](auto z) {
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

}  // namespace oneflow::cpu

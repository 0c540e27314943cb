// pool.cpp: the CPU kernels of the pooling and resampling ops (their metas, VJPs and
// registrations: ops/nn_pool.cpp; the geometry both use: ops/pool_common.h).
// NOTE [Separable resampling]: avg_pool2d, adaptive_avg_pool2d, upsample_nearest2d and
// upsample_bilinear2d are all y = Rh * x * Rw^T per plane with sparse rows: one forward and
// one adjoint kernel (the *_backward ops) serve the four, each with its own index maps.
// avg_pool3d and adaptive_avg_pool3d add a depth map Rd (the 2-D modes' Rd is the identity).
// NOTE [Window maxima]: max_pool3d_with_indices and adaptive_max_pool2d/3d share one kernel
// over per-axis windows (start, end, step); their VJP scatters into the flattened planes.
// max_pool2d keeps its own kernel (with the branch-free 2x2 path).
#include "cpu/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/loops.h"
#include "kernel_support.h"
#include "ops/pool_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace conv_detail;
using namespace pool_detail;
namespace {

// ---------------------------------------------------------------- window maxima

// One axis of a window maximum: output o scans lo[o], lo[o] + step, ... below hi[o].
struct MaxAxis {
  int64_t in = 1, out = 1, step = 1;
  std::vector<int64_t> lo{0}, hi{1};
};
MaxAxis pool_axis(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out) {
  MaxAxis a{in, out, d, {}, {}};
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * s - p;
    const int64_t end = std::min(start + (k - 1) * d + 1, in);
    while (start < 0) start += d;
    a.lo.push_back(start);
    a.hi.push_back(end);
  }
  return a;
}
// Adaptive windows [floor(o*in/out), ceil((o+1)*in/out)).
MaxAxis adaptive_axis(int64_t in, int64_t out) {
  MaxAxis a{in, out, 1, {}, {}};
  for (int64_t o = 0; o < out; ++o) {
    a.lo.push_back((o * in) / out);
    a.hi.push_back(((o + 1) * in + out - 1) / out);
  }
  return a;
}

// y, idx [P, OD, OH, OW] = the maximum of each window of x [P, D, H, W] and its flat index in
// the plane; the first maximum wins and NaN propagates (PyTorch's rule).
template <class T>
void window_max(const T* x, T* y, int64_t* idx, int64_t planes, const MaxAxis& ad,
                const MaxAxis& ah, const MaxAxis& aw) {
  const int64_t in_sz = ad.in * ah.in * aw.in, out_sz = ad.out * ah.out * aw.out;
  const int64_t taps =
      std::max<int64_t>(1, (ad.hi[0] - ad.lo[0]) * (ah.hi[0] - ah.lo[0]) * (aw.hi[0] - aw.lo[0]));
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(out_sz * taps, 1));
  parallel_for(0, planes, grain, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* src = x + pl * in_sz;
      T* dst = y + pl * out_sz;
      int64_t* ix = idx + pl * out_sz;
      for (int64_t od = 0; od < ad.out; ++od)
        for (int64_t oh = 0; oh < ah.out; ++oh)
          for (int64_t ow = 0; ow < aw.out; ++ow) {
            int64_t best = (ad.lo[od] * ah.in + ah.lo[oh]) * aw.in + aw.lo[ow];
            T mv = -std::numeric_limits<T>::infinity();
            for (int64_t id = ad.lo[od]; id < ad.hi[od]; id += ad.step)
              for (int64_t ih = ah.lo[oh]; ih < ah.hi[oh]; ih += ah.step) {
                const int64_t base = (id * ah.in + ih) * aw.in;
                const T* row = src + base;
                for (int64_t iw = aw.lo[ow]; iw < aw.hi[ow]; iw += aw.step) {
                  const T v = row[iw];
                  if (v > mv || std::isnan(v)) {
                    mv = v;
                    best = base + iw;
                  }
                }
              }
            const int64_t o = (od * ah.out + oh) * aw.out + ow;
            dst[o] = mv;
            ix[o] = best;
          }
    }
  });
}

template <int Sp> void adaptive_max_cpu(const KernelArgs& k) {
  if (k.outputs[0].numel() == 0) return;  // no planes (as max_pool3d_with_indices)
  const Tensor x = kernel_contiguous(k.inputs[0]);
  adaptive_max_check<Sp>(x, k.attrs);
  const DimVector& os = AdaptivePoolAttrs::get<"output_size">(k.attrs);
  MaxAxis ax[3];
  for (int64_t i = 0; i < Sp; ++i) ax[3 - Sp + i] = adaptive_axis(x.size(2 + i), os[size_t(i)]);
  dispatch_f(x.dtype(), adaptive_max_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    window_max<T>(x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), k.outputs[1].data_ptr<int64_t>(),
                  x.size(0) * x.size(1), ax[0], ax[1], ax[2]);
  });
}

}  // namespace

// ---------------------------------------------------------------- max_pool2d

void max_pool2d_with_indices(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const PoolGeom g = max_geom(x, k.attrs);
  dispatch_f(x.dtype(), "max_pool2d_with_indices", [&](auto z) {
    using T = decltype(z);
    const T* xp = x.data_ptr<T>();
    T* yp = k.outputs[0].data_ptr<T>();
    int64_t* ip = k.outputs[1].data_ptr<int64_t>();
    const int64_t planes = g.N * g.C, in_sz = g.H * g.W, out_sz = g.OH * g.OW;
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(out_sz * g.kh * g.kw, 1));
    // 2x2 windows, stride 2, no padding or dilation (the common case): the same scan order
    // and NaN rule as the general loop below, without its per-window bounds and branches
    const bool k2s2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 &&
                      g.dh == 1 && g.dw == 1 && 2 * g.OH <= g.H && 2 * g.OW <= g.W;
    parallel_for(0, planes, grain, [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const T* src = xp + pl * in_sz;
        T* dst = yp + pl * out_sz;
        int64_t* idx = ip + pl * out_sz;
        if (k2s2) {
          // one pass over an output row, the window's four values compared in the general
          // loop's scan order with selects (no data-dependent branches: they mispredict)
          const int64_t W = g.W;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const T* __restrict r0 = src + 2 * oh * W;
            const T* __restrict r1 = r0 + W;
            const int64_t base = 2 * oh * W;
            T* __restrict d = dst + oh * g.OW;
            int64_t* __restrict ix = idx + oh * g.OW;
            auto take = [](T v, T& m, uint64_t& at, uint64_t cand) {
              const bool up = (v > m) | (v != v);  // `|`: both compares, no branch
              m = cpu::bit_select(up, v, m);
              at = cpu::bit_select(up, cand, at);
            };
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              T m = r0[2 * ow];
              uint64_t at = 0;
              take(r0[2 * ow + 1], m, at, 1);
              take(r1[2 * ow], m, at, uint64_t(W));
              take(r1[2 * ow + 1], m, at, uint64_t(W + 1));
              d[ow] = m;
              ix[ow] = base + 2 * ow + int64_t(at);
            }
          }
          continue;
        }
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          int64_t h0 = oh * g.sh - g.ph;
          const int64_t h1 = std::min(h0 + (g.kh - 1) * g.dh + 1, g.H);
          while (h0 < 0) h0 += g.dh;
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            int64_t w0 = ow * g.sw - g.pw;
            const int64_t w1 = std::min(w0 + (g.kw - 1) * g.dw + 1, g.W);
            while (w0 < 0) w0 += g.dw;
            int64_t best = h0 * g.W + w0;
            T mv = -std::numeric_limits<T>::infinity();
            for (int64_t ih = h0; ih < h1; ih += g.dh)
              for (int64_t iw = w0; iw < w1; iw += g.dw) {
                const T v = src[ih * g.W + iw];
                if (v > mv || std::isnan(v)) {
                  mv = v;
                  best = ih * g.W + iw;
                }
              }
            dst[oh * g.OW + ow] = mv;
            idx[oh * g.OW + ow] = best;
          }
        }
      }
    });
  });
}

// ---------------------------------------------------------------- max_pool3d

void max_pool3d_with_indices(const KernelArgs& k) {
  // no planes: the per-output windows (O(output extent)) are not built, and an empty batch may
  // come with huge spatial sizes (fuzz_ops)
  if (k.outputs[0].numel() == 0) return;
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const PoolGeom g = max3_geom(x, k.attrs);
  const MaxAxis ad = pool_axis(g.D, g.kd, g.sd, g.pd, g.dd, g.OD);
  const MaxAxis ah = pool_axis(g.H, g.kh, g.sh, g.ph, g.dh, g.OH);
  const MaxAxis aw = pool_axis(g.W, g.kw, g.sw, g.pw, g.dw, g.OW);
  dispatch_f(x.dtype(), "max_pool3d_with_indices", [&](auto z) {
    using T = decltype(z);
    window_max<T>(x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), k.outputs[1].data_ptr<int64_t>(),
                  g.N * g.C, ad, ah, aw);
  });
}

// ---------------------------------------------------------------- adaptive_max_pool2d / 3d

void adaptive_max_pool2d(const KernelArgs& k) { adaptive_max_cpu<2>(k); }
void adaptive_max_pool3d(const KernelArgs& k) { adaptive_max_cpu<3>(k); }

// ---------------------------------------------------------------- separable resampling

namespace {

// y [P, (OD,) OH, OW] = (Rd ⊗ Rh ⊗ Rw) x per plane (forward) or its transpose (adjoint); the
// 2-D modes' Rd is the 1x1 identity (weight 1, so their results are unchanged by it).
template <class T>
void resample_planes(const Resample& r, const T* src, T* dst, int64_t planes, bool adjoint) {
  const AxisMap &d = r.d, &h = r.h, &w = r.w;
  std::vector<T> wd(d.wt.begin(), d.wt.end()), wh(h.wt.begin(), h.wt.end()),
      ww(w.wt.begin(), w.wt.end());
  const int64_t in_hw = h.in * w.in, out_hw = h.out * w.out;
  const int64_t in_sz = d.in * in_hw, out_sz = d.out * out_hw;
  // taps per output element, averaged over each axis
  const int64_t td = int64_t(d.src.size()) / std::max<int64_t>(d.out, 1);
  const int64_t th = int64_t(h.src.size()) / std::max<int64_t>(h.out, 1);
  const int64_t tw = int64_t(w.src.size()) / std::max<int64_t>(w.out, 1);
  const int64_t work = std::max<int64_t>(
      1, out_sz * std::max<int64_t>(td, 1) * std::max<int64_t>(th, 1) * std::max<int64_t>(tw, 1));
  const int64_t grain = std::max<int64_t>(1, 32768 / work);
  parallel_for(0, planes, grain, [&](int64_t b, int64_t e) {
    std::vector<T> acc(size_t(w.out));
    for (int64_t pl = b; pl < e; ++pl) {
      if (!adjoint) {
        const T* x = src + pl * in_sz;
        T* y = dst + pl * out_sz;
        for (int64_t od = 0; od < d.out; ++od) {
          for (int64_t oh = 0; oh < h.out; ++oh) {
            std::fill(acc.begin(), acc.end(), T(0));
            for (int64_t ed = d.off[od]; ed < d.off[od + 1]; ++ed) {
              const T* xs = x + d.src[ed] * in_hw;
              for (int64_t eh = h.off[oh]; eh < h.off[oh + 1]; ++eh) {
                const T a = wd[ed] * wh[eh];
                const T* row = xs + h.src[eh] * w.in;
                for (int64_t ow = 0; ow < w.out; ++ow) {
                  T s = 0;
                  for (int64_t ew = w.off[ow]; ew < w.off[ow + 1]; ++ew)
                    s += ww[ew] * row[w.src[ew]];
                  acc[ow] += a * s;
                }
              }
            }
            std::copy(acc.begin(), acc.end(), y + (od * h.out + oh) * w.out);
          }
        }
      } else {
        const T* g = src + pl * out_sz;
        T* x = dst + pl * in_sz;
        std::fill(x, x + in_sz, T(0));
        for (int64_t od = 0; od < d.out; ++od) {
          for (int64_t oh = 0; oh < h.out; ++oh) {
            const T* grow = g + (od * h.out + oh) * w.out;
            for (int64_t ed = d.off[od]; ed < d.off[od + 1]; ++ed) {
              T* xs = x + d.src[ed] * in_hw;
              for (int64_t eh = h.off[oh]; eh < h.off[oh + 1]; ++eh) {
                const T a = wd[ed] * wh[eh];
                T* row = xs + h.src[eh] * w.in;
                for (int64_t ow = 0; ow < w.out; ++ow) {
                  const T gv = a * grow[ow];
                  for (int64_t ew = w.off[ow]; ew < w.off[ow + 1]; ++ew)
                    row[w.src[ew]] += ww[ew] * gv;
                }
              }
            }
          }
        }
      }
    }
  });
}

template <Mode M> void resample_cpu(const KernelArgs& k) {
  // no planes: the maps (O(output extent)) are not needed, and an empty batch may come with a
  // huge output_size (fuzz_ops)
  if (k.outputs[0].numel() == 0) return;
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Resample r = make_resample(M, x.sizes(), k.attrs, mode_name(M, false), true);
  dispatch_f(x.dtype(), mode_name(M, false), [&](auto z) {
    using T = decltype(z);
    resample_planes<T>(r, x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), x.size(0) * x.size(1),
                       false);
  });
}
template <Mode M> void resample_backward_cpu(const KernelArgs& k) {
  const Tensor g = kernel_contiguous(k.inputs[0]);
  const Tensor& out = k.outputs[0];
  if (g.numel() == 0) {  // no planes (as above): nothing flows back
    if (out.numel() != 0) kernel_fill(out, 0);
    return;
  }
  const Resample r = make_resample(M, out.sizes(), k.attrs, mode_name(M, true), true);
  dispatch_f(g.dtype(), mode_name(M, true), [&](auto z) {
    using T = decltype(z);
    resample_planes<T>(r, g.data_ptr<T>(), out.data_ptr<T>(), out.size(0) * out.size(1), true);
  });
}

}  // namespace

void avg_pool2d(const KernelArgs& k) { resample_cpu<Mode::kAvg>(k); }
void avg_pool2d_backward(const KernelArgs& k) { resample_backward_cpu<Mode::kAvg>(k); }
void adaptive_avg_pool2d(const KernelArgs& k) { resample_cpu<Mode::kAdaptive>(k); }
void adaptive_avg_pool2d_backward(const KernelArgs& k) {
  resample_backward_cpu<Mode::kAdaptive>(k);
}
void avg_pool3d(const KernelArgs& k) { resample_cpu<Mode::kAvg3d>(k); }
void avg_pool3d_backward(const KernelArgs& k) { resample_backward_cpu<Mode::kAvg3d>(k); }
void adaptive_avg_pool3d(const KernelArgs& k) { resample_cpu<Mode::kAdaptive3d>(k); }
void adaptive_avg_pool3d_backward(const KernelArgs& k) {
  resample_backward_cpu<Mode::kAdaptive3d>(k);
}
void upsample_nearest2d(const KernelArgs& k) { resample_cpu<Mode::kNearest>(k); }
void upsample_nearest2d_backward(const KernelArgs& k) { resample_backward_cpu<Mode::kNearest>(k); }
void upsample_bilinear2d(const KernelArgs& k) { resample_cpu<Mode::kBilinear>(k); }
void upsample_bilinear2d_backward(const KernelArgs& k) {
  resample_backward_cpu<Mode::kBilinear>(k);
}

}  // namespace oneflow::cpu

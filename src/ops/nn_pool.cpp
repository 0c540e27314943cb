// nn_pool.cpp: pooling and resampling ops (max/avg/adaptive pooling in 1-3 D, nearest and
// bilinear upsampling) and their public functions.
// NOTE [Separable resampling]: avg_pool2d, adaptive_avg_pool2d, upsample_nearest2d and
// upsample_bilinear2d are all y = Rh * x * Rw^T per plane with sparse rows: one forward and
// one adjoint kernel (the *_backward ops) serve the four, each with its own index maps.
// avg_pool3d and adaptive_avg_pool3d add a depth map Rd (the 2-D modes' Rd is the identity).
// NOTE [Window maxima]: max_pool3d_with_indices and adaptive_max_pool2d/3d share one kernel
// over per-axis windows (start, end, step); their VJP scatters into the flattened planes.
// max_pool2d keeps its own kernel (with the branch-free 2x2 path).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "global/global.h"
#include "global/rules.h"
#include "cpu/blas.h"
#include "cpu/loops.h"
#include "dispatch.h"
#include "oneflow/ops_conv.h"
#include "thread_pool.h"
#include "ops/checks.h"
#include "ops/conv_common.h"

namespace oneflow {
using namespace conv_detail;
namespace {

// ---------------------------------------------------------------- max_pool2d

struct PoolGeom {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
  int64_t D = 1, kd = 1, sd = 1, pd = 0, dd = 1, OD = 1;
};

// max_pool2d/3d and avg_pool2d parameter checks and output size (PyTorch's pool2d_shape_check);
// the spatial rank is k.size() (2 or 3).
PoolGeom pool_geom(const char* op, const Tensor& x, const DimVector& k, const DimVector& s,
                   const DimVector& p, const DimVector& d, bool ceil_mode) {
  const int64_t sp = int64_t(k.size());
  check_float(op, x, "input");
  // a direct dispatch may pass lists of any lengths (fuzz_ops: a 1-entry kernel_size indexed
  // the lists at -1); the op takes 2 or 3 of each
  if (sp < 2 || sp > 3 || s.size() != k.size() || p.size() != k.size() || d.size() != k.size())
    fail(
        "[{}] expected kernel_size, stride, padding and dilation of 2 (or 3) values each, got "
        "{}, {}, {} and {}",
        op, vals(k), vals(s), vals(p), vals(d));
  if (x.dim() != sp + 2)
    fail("[{}] expected a {}-D or {}-D input, got shape {}", op, sp + 1, sp + 2,
         shape_str(x.sizes()));
  for (size_t i = 0; i < size_t(sp); ++i) {
    if (k[i] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
    if (s[i] <= 0) fail("[{}] stride must be positive, got {}", op, vals(s));
    if (d[i] <= 0) fail("[{}] dilation must be positive, got {}", op, vals(d));
    if (p[i] < 0 || p[i] > k[i] / 2)
      fail("[{}] padding {} must be non-negative and at most half of kernel_size {}", op, vals(p),
           vals(k));
  }
  const size_t o = size_t(sp - 2);  // index of H in the parameter lists
  PoolGeom g{x.size(0), x.size(1), x.size(-2), x.size(-1), k[o],     k[o + 1], s[o],
             s[o + 1],  p[o],      p[o + 1],   d[o],       d[o + 1], 0,        0};
  g.OH = pool_out(g.H, g.kh, g.ph, g.sh, g.dh, ceil_mode);
  g.OW = pool_out(g.W, g.kw, g.pw, g.sw, g.dw, ceil_mode);
  DimVector outs{g.OH, g.OW};
  if (sp == 3) {
    g.D = x.size(2), g.kd = k[0], g.sd = s[0], g.pd = p[0], g.dd = d[0];
    g.OD = pool_out(g.D, g.kd, g.pd, g.sd, g.dd, ceil_mode);
    outs.insert(outs.begin(), g.OD);
  }
  if (g.OD <= 0 || g.OH <= 0 || g.OW <= 0)
    fail(
        "[{}] input {} with kernel_size {}, stride {}, padding {}, dilation {} gives output size "
        "{}, which is too small",
        op, shape_str(x.sizes()), vals(k), vals(s), vals(p), vals(d), vals(outs));
  return g;
}

// attrs: kernel_size, stride, padding, dilation, ceil_mode
PoolGeom max_geom(const Tensor& x, const Attrs& a) {
  using A = MaxPoolAttrs;
  return pool_geom("max_pool2d_with_indices", x, A::get<"kernel_size">(a), A::get<"stride">(a),
                   A::get<"padding">(a), A::get<"dilation">(a), A::get<"ceil_mode">(a));
}
void max_pool2d_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const PoolGeom g = max_geom(in[0], a);
  out.push_back({{g.N, g.C, g.OH, g.OW}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{g.N, g.C, g.OH, g.OW}, {}, 0, kInt64, in[0].device()});
}
void max_pool2d_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const PoolGeom g = max_geom(x, k.attrs);
  float_or_double(x.dtype(), "max_pool2d_with_indices", [&](auto z) {
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
// The gradient of a max op with indices: each output's gradient lands at its index, within the
// flattened spatial dims of its plane.
TensorList max_indices_vjp(const VjpCtx& c, const TensorList& gr) {
  const IntArrayRef s = c.input_sizes(0);
  const int64_t N = s[0], C = s[1];
  int64_t S = 1;
  for (size_t i = 2; i < s.size(); ++i) S *= s[i];
  Tensor gx = global::zeros_shaped_like({N, C, S}, gr[0])
                  .scatter_add(2, c.output(1).reshape({N, C, -1}), gr[0].reshape({N, C, -1}));
  return {gx.view(s)};
}

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

// ---------------------------------------------------------------- max_pool3d

// max_pool3d_with_indices(x [N, C, D, H, W]; kernel_size, stride, padding, dilation, ceil_mode)
PoolGeom max3_geom(const Tensor& x, const Attrs& a) {
  using A = MaxPoolAttrs;
  return pool_geom("max_pool3d_with_indices", x, A::get<"kernel_size">(a), A::get<"stride">(a),
                   A::get<"padding">(a), A::get<"dilation">(a), A::get<"ceil_mode">(a));
}
void max_pool3d_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const PoolGeom g = max3_geom(in[0], a);
  out.push_back({{g.N, g.C, g.OD, g.OH, g.OW}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{g.N, g.C, g.OD, g.OH, g.OW}, {}, 0, kInt64, in[0].device()});
}
void max_pool3d_cpu(const KernelArgs& k) {
  // no planes: the per-output windows (O(output extent)) are not built, and an empty batch may
  // come with huge spatial sizes (fuzz_ops)
  if (k.outputs[0].numel() == 0) return;
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const PoolGeom g = max3_geom(x, k.attrs);
  const MaxAxis ad = pool_axis(g.D, g.kd, g.sd, g.pd, g.dd, g.OD);
  const MaxAxis ah = pool_axis(g.H, g.kh, g.sh, g.ph, g.dh, g.OH);
  const MaxAxis aw = pool_axis(g.W, g.kw, g.sw, g.pw, g.dw, g.OW);
  float_or_double(x.dtype(), "max_pool3d_with_indices", [&](auto z) {
    using T = decltype(z);
    window_max<T>(x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), k.outputs[1].data_ptr<int64_t>(),
                  g.N * g.C, ad, ah, aw);
  });
}

// ---------------------------------------------------------------- adaptive_max_pool2d / 3d

template <int Sp> const char* adaptive_max_name() {
  return Sp == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
}
// adaptive_max_pool2d / 3d (x [N, C, (D,) H, W]; output_size) -> (values, indices)
template <int Sp> DimVector adaptive_max_check(const Tensor& x, const Attrs& a) {
  const char* op = adaptive_max_name<Sp>();
  check_float(op, x, "input");
  if (x.dim() != Sp + 2)
    fail("[{}] expected a {}-D or {}-D input, got shape {}", op, Sp + 1, Sp + 2,
         shape_str(x.sizes()));
  const DimVector& os = AdaptivePoolAttrs::get<"output_size">(a);
  if (os.size() != size_t(Sp))
    fail("[{}] output_size must have {} values, got {}", op, Sp, vals(os));
  for (int64_t i = 0; i < Sp; ++i) {
    if (os[size_t(i)] <= 0)
      fail("[{}] output_size must be positive, got {} for input {}", op, vals(os),
           shape_str(x.sizes()));
    if (x.size(2 + i) <= 0)
      fail("[{}] input {} has an empty spatial dimension", op, shape_str(x.sizes()));
  }
  DimVector shape{x.size(0), x.size(1)};
  for (int64_t v : os) shape.push_back(v);
  return shape;
}
template <int Sp> void adaptive_max_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const DimVector shape = adaptive_max_check<Sp>(in[0], a);
  out.push_back({shape, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({shape, {}, 0, kInt64, in[0].device()});
}
template <int Sp> void adaptive_max_cpu(const KernelArgs& k) {
  if (k.outputs[0].numel() == 0) return;  // no planes (as max_pool3d_cpu)
  const Tensor x = kernel_contiguous(k.inputs[0]);
  adaptive_max_check<Sp>(x, k.attrs);
  const DimVector& os = AdaptivePoolAttrs::get<"output_size">(k.attrs);
  MaxAxis ax[3];
  for (int64_t i = 0; i < Sp; ++i) ax[3 - Sp + i] = adaptive_axis(x.size(2 + i), os[size_t(i)]);
  float_or_double(x.dtype(), adaptive_max_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    window_max<T>(x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), k.outputs[1].data_ptr<int64_t>(),
                  x.size(0) * x.size(1), ax[0], ax[1], ax[2]);
  });
}

// ---------------------------------------------------------------- separable resampling

enum class Mode { kAvg, kAdaptive, kNearest, kBilinear, kAvg3d, kAdaptive3d };

// Spatial rank of a mode's op (the 3-D modes map depth, height and width).
constexpr int mode_rank(Mode m) { return m == Mode::kAvg3d || m == Mode::kAdaptive3d ? 3 : 2; }

const char* mode_name(Mode m, bool backward) {
  switch (m) {
    case Mode::kAvg:
      return backward ? "avg_pool2d_backward" : "avg_pool2d";
    case Mode::kAdaptive:
      return backward ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool2d";
    case Mode::kNearest:
      return backward ? "upsample_nearest2d_backward" : "upsample_nearest2d";
    case Mode::kBilinear:
      return backward ? "upsample_bilinear2d_backward" : "upsample_bilinear2d";
    case Mode::kAvg3d:
      return backward ? "avg_pool3d_backward" : "avg_pool3d";
    case Mode::kAdaptive3d:
      return backward ? "adaptive_avg_pool3d_backward" : "adaptive_avg_pool3d";
  }
  return "";
}

// One axis of a separable map: output o reads src[off[o] .. off[o+1]) with weights wt.
struct AxisMap {
  int64_t in = 0, out = 0;
  std::vector<int64_t> off, src;
  std::vector<double> wt;
  static AxisMap identity() { return {1, 1, {0, 1}, {0}, {1.0}}; }
  void add(int64_t s, double w) {
    src.push_back(s);
    wt.push_back(w);
  }
  void next() { off.push_back(int64_t(src.size())); }
};

// Attrs per mode (the *_backward ops append input_size):
//   avg, avg3d: kernel_size, stride, padding, ceil_mode, count_include_pad, divisor (0: none)
//   adaptive, adaptive3d: output_size;   nearest: output_size, scales_h, scales_w;
//   bilinear: output_size, align_corners, scales_h, scales_w
// A scale (double) <= 0 means "none": the source step is then in/out; a given scale s makes the
// step 1/s, as at::upsample_*2d's optional scales (interpolate's scale_factor).
// The 2-D modes leave the depth axis d at the identity.
struct Resample {
  AxisMap d = AxisMap::identity(), h, w;
};

void check_output_size(const char* op, const DimVector& os, IntArrayRef in) {
  for (int64_t v : os)
    if (v <= 0)
      fail("[{}] output_size must be positive, got {} for input {}", op, vals(os), shape_str(in));
}

// NOTE [Resample maps]: the checks and output sizes cost O(axes); the per-output source maps
// cost O(output extent x window) and are built only for a kernel (with_maps), after its output
// was allocated: an infer_meta asked for a huge output_size (fuzz_ops) raises or allocates
// instead of looping over the requested extent first.
Resample make_resample(Mode mode, IntArrayRef in, const Attrs& a, const char* op, bool with_maps) {
  const size_t nax = size_t(mode_rank(mode));
  if (in.size() != nax + 2)
    fail("[{}] expected a {}-D or {}-D input, got shape {}", op, nax + 1, nax + 2, shape_str(in));
  Resample r;
  AxisMap* axes[3] = {&r.h, &r.w, nullptr};
  if (nax == 3) {
    r.d = AxisMap{};
    axes[0] = &r.d, axes[1] = &r.h, axes[2] = &r.w;
  }
  int64_t insz[3];
  for (size_t i = 0; i < nax; ++i) insz[i] = in[2 + i];
  if (mode == Mode::kAvg || mode == Mode::kAvg3d) {
    using A = AvgPoolAttrs;
    const DimVector &k = A::get<"kernel_size">(a), &s = A::get<"stride">(a),
                    &p = A::get<"padding">(a);
    if (k.size() != nax || s.size() != nax || p.size() != nax)
      fail("[{}] expected kernel_size, stride and padding of {} values each, got {}, {} and {}", op,
           nax, vals(k), vals(s), vals(p));
    const bool ceil_mode = A::get<"ceil_mode">(a), include_pad = A::get<"count_include_pad">(a);
    const int64_t divisor = A::get<"divisor_override">(a);
    for (size_t i = 0; i < nax; ++i) {
      if (k[i] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
      if (s[i] <= 0) fail("[{}] stride must be positive, got {}", op, vals(s));
      if (p[i] < 0 || p[i] > k[i] / 2)
        fail("[{}] padding {} must be non-negative and at most half of kernel_size {}", op, vals(p),
             vals(k));
    }
    if (divisor < 0) fail("[{}] divisor_override must be positive, got {}", op, divisor);
    DimVector outsz;
    bool small = false;
    for (size_t i = 0; i < nax; ++i) {
      outsz.push_back(pool_out(insz[i], k[i], p[i], s[i], 1, ceil_mode));
      small = small || outsz.back() <= 0;
    }
    if (small)
      fail(
          "[{}] input {} with kernel_size {}, stride {}, padding {} gives output size {}, "
          "which is too small",
          op, shape_str(in), vals(k), vals(s), vals(p), vals(outsz));
    for (size_t i = 0; i < nax; ++i) {
      AxisMap& m = *axes[i];
      m.in = insz[i];
      m.out = outsz[i];
      if (!with_maps) continue;
      m.next();
      for (int64_t o = 0; o < m.out; ++o) {
        int64_t a0 = o * s[i] - p[i];
        int64_t a1 = std::min(a0 + k[i], m.in + p[i]);
        const int64_t pool = a1 - a0;
        a0 = std::max<int64_t>(a0, 0);
        a1 = std::min(a1, m.in);
        // the divisor (and any product of per-axis factors) is applied once, on the last axis
        double f = divisor > 0 ? (i + 1 < nax ? 1.0 : 1.0 / double(divisor))
                               : 1.0 / double(include_pad ? pool : std::max<int64_t>(a1 - a0, 1));
        for (int64_t t = a0; t < a1; ++t) m.add(t, f);
        m.next();
      }
    }
    return r;
  }
  // output_size leads every other mode's attributes
  const DimVector& os = AdaptivePoolAttrs::get<"output_size">(a);
  if (os.size() != nax)
    fail("[{}] expected an output_size of {} values, got {}", op, nax, vals(os));
  check_output_size(op, os, in);
  // the given scale of axis i (h, w); none for the adaptive modes
  auto scale = [&](size_t i) {
    if (mode == Mode::kNearest)
      return i == 0 ? UpsampleNearestAttrs::get<"scales_h">(a)
                    : UpsampleNearestAttrs::get<"scales_w">(a);
    return i == 0 ? UpsampleBilinearAttrs::get<"scales_h">(a)
                  : UpsampleBilinearAttrs::get<"scales_w">(a);
  };
  const bool adaptive = mode == Mode::kAdaptive || mode == Mode::kAdaptive3d;
  for (size_t i = 0; i < nax; ++i) {
    AxisMap& m = *axes[i];
    m.in = insz[i];
    m.out = os[i];
    if (m.in <= 0) fail("[{}] input {} has an empty spatial dimension", op, shape_str(in));
    const double given = adaptive ? 0.0 : scale(i);
    if (!std::isfinite(given) || (given > 0 && !std::isfinite(1.0 / given)))
      fail("[{}] scale factor {} is not finite (or its inverse is not)", op, given);
    if (!with_maps) continue;
    m.next();
    for (int64_t o = 0; o < m.out; ++o) {
      if (adaptive) {
        const int64_t a0 = (o * m.in) / m.out, a1 = ((o + 1) * m.in + m.out - 1) / m.out;
        for (int64_t t = a0; t < a1; ++t) m.add(t, 1.0 / double(a1 - a0));
      } else if (mode == Mode::kNearest) {
        int64_t sidx;
        if (m.out == m.in) {
          sidx = o;
        } else if (m.out == 2 * m.in) {
          sidx = o >> 1;
        } else {
          const float scale = given > 0 ? float(1.0 / given) : float(m.in) / float(m.out);
          // saturating: a scale of 1e-30 still maps far past the input (clamped)
          sidx = std::min(saturate_cast<int64_t>(std::floor(float(o) * scale)), m.in - 1);
        }
        m.add(sidx, 1.0);
      } else {
        const bool align = UpsampleBilinearAttrs::get<"align_corners">(a);
        double srcf;
        if (align) {
          const double scale = m.out > 1 ? double(m.in - 1) / double(m.out - 1) : 0.0;
          srcf = scale * double(o);
        } else {
          const double scale = given > 0 ? 1.0 / given : double(m.in) / double(m.out);
          srcf = std::max(scale * (double(o) + 0.5) - 0.5, 0.0);
        }
        const int64_t i0 = std::min(saturate_cast<int64_t>(srcf), m.in - 1);
        const int64_t i1 = i0 + (i0 < m.in - 1 ? 1 : 0);
        const double l1 = std::clamp(srcf - double(i0), 0.0, 1.0);
        m.add(i0, 1.0 - l1);
        m.add(i1, l1);
      }
      m.next();
    }
  }
  return r;
}

// the input_size a *_backward op's attributes end with (WithInputSize)
DimVector in_size_attr(const Attrs& a) {
  OF_CHECK(a.size() > 0, "[attrs] a resampling backward op was given no attributes");
  return std::get<DimVector>(a.values.back());
}

template <Mode M> void resample_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = mode_name(M, false);
  check_float(op, in[0], "input");
  const Resample r = make_resample(M, in[0].sizes(), a, op, false);
  DimVector shape{in[0].size(0), in[0].size(1), r.h.out, r.w.out};
  if (mode_rank(M) == 3) shape.insert(shape.begin() + 2, r.d.out);
  out.push_back({shape, {}, 0, in[0].dtype(), in[0].device()});
}
template <Mode M> void resample_backward_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = mode_name(M, true);
  check_float(op, in[0], "grad_output");
  const DimVector isz = in_size_attr(a);
  const Resample r = make_resample(M, isz, a, op, false);
  DimVector expect{isz[0], isz[1], r.h.out, r.w.out};
  if (mode_rank(M) == 3) expect.insert(expect.begin() + 2, r.d.out);
  if (!(in[0].sizes() == IntArrayRef(expect)))
    fail("[{}] grad_output {} does not match the output size {}", op, shape_str(in[0].sizes()),
         vals(expect));
  out.push_back({isz, {}, 0, in[0].dtype(), in[0].device()});
}

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
  float_or_double(x.dtype(), mode_name(M, false), [&](auto z) {
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
  float_or_double(g.dtype(), mode_name(M, true), [&](auto z) {
    using T = decltype(z);
    resample_planes<T>(r, g.data_ptr<T>(), out.data_ptr<T>(), out.size(0) * out.size(1), true);
  });
}

const OpDef* backward_op(Mode m) {
  switch (m) {
    case Mode::kAvg:
      return &OF_OP("avg_pool2d_backward");
    case Mode::kAdaptive:
      return &OF_OP("adaptive_avg_pool2d_backward");
    case Mode::kNearest:
      return &OF_OP("upsample_nearest2d_backward");
    case Mode::kBilinear:
      return &OF_OP("upsample_bilinear2d_backward");
    case Mode::kAvg3d:
      return &OF_OP("avg_pool3d_backward");
    case Mode::kAdaptive3d:
      return &OF_OP("adaptive_avg_pool3d_backward");
  }
  return nullptr;
}
const OpDef* forward_op(Mode m) {
  switch (m) {
    case Mode::kAvg:
      return &OF_OP("avg_pool2d");
    case Mode::kAdaptive:
      return &OF_OP("adaptive_avg_pool2d");
    case Mode::kNearest:
      return &OF_OP("upsample_nearest2d");
    case Mode::kBilinear:
      return &OF_OP("upsample_bilinear2d");
    case Mode::kAvg3d:
      return &OF_OP("avg_pool3d");
    case Mode::kAdaptive3d:
      return &OF_OP("adaptive_avg_pool3d");
  }
  return nullptr;
}

template <Mode M> TensorList resample_vjp(const VjpCtx& c, const TensorList& g) {
  Attrs a = c.attrs();
  a.values.push_back(c.input_sizes(0).dims());
  return {dispatch1(*backward_op(M), {g[0]}, std::move(a))};
}
template <Mode M> TensorList resample_backward_vjp(const VjpCtx& c, const TensorList& g) {
  Attrs a = c.attrs();
  a.values.pop_back();
  return {dispatch1(*forward_op(M), {g[0]}, std::move(a))};
}

}  // namespace

void register_pool_ops() {
  register_op({.name = "max_pool3d_with_indices",
               .traits = kWidens16Bit,
               .attr_names = MaxPoolAttrs::names(),
               .attr_types = MaxPoolAttrs::types(),
               .infer_meta = max_pool3d_meta,
               .cpu = max_pool3d_cpu,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_max_pool2d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = adaptive_max_meta<2>,
               .cpu = adaptive_max_cpu<2>,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_max_pool3d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = adaptive_max_meta<3>,
               .cpu = adaptive_max_cpu<3>,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "max_pool2d_with_indices",
               .traits = kWidens16Bit,
               .attr_names = MaxPoolAttrs::names(),
               .attr_types = MaxPoolAttrs::types(),
               .infer_meta = max_pool2d_meta,
               .cpu = max_pool2d_cpu,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool2d",
               .traits = kWidens16Bit,
               .attr_names = AvgPoolAttrs::names(),
               .attr_types = AvgPoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAvg>,
               .cpu = resample_cpu<Mode::kAvg>,
               .vjp = resample_vjp<Mode::kAvg>,
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AvgPoolAttrs>::names(),
               .attr_types = WithInputSize<AvgPoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAvg>,
               .cpu = resample_backward_cpu<Mode::kAvg>,
               .vjp = resample_backward_vjp<Mode::kAvg>,
               .sbp_rule = &sbp_rules::kResampleBackward,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool2d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAdaptive>,
               .cpu = resample_cpu<Mode::kAdaptive>,
               .vjp = resample_vjp<Mode::kAdaptive>,
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AdaptivePoolAttrs>::names(),
               .attr_types = WithInputSize<AdaptivePoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAdaptive>,
               .cpu = resample_backward_cpu<Mode::kAdaptive>,
               .vjp = resample_backward_vjp<Mode::kAdaptive>,
               .sbp_rule = &sbp_rules::kResampleBackward,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool3d",
               .traits = kWidens16Bit,
               .attr_names = AvgPoolAttrs::names(),
               .attr_types = AvgPoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAvg3d>,
               .cpu = resample_cpu<Mode::kAvg3d>,
               .vjp = resample_vjp<Mode::kAvg3d>,
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool3d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AvgPoolAttrs>::names(),
               .attr_types = WithInputSize<AvgPoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAvg3d>,
               .cpu = resample_backward_cpu<Mode::kAvg3d>,
               .vjp = resample_backward_vjp<Mode::kAvg3d>,
               .sbp_rule = &sbp_rules::kResampleBackward,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool3d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAdaptive3d>,
               .cpu = resample_cpu<Mode::kAdaptive3d>,
               .vjp = resample_vjp<Mode::kAdaptive3d>,
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool3d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AdaptivePoolAttrs>::names(),
               .attr_types = WithInputSize<AdaptivePoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAdaptive3d>,
               .cpu = resample_backward_cpu<Mode::kAdaptive3d>,
               .vjp = resample_backward_vjp<Mode::kAdaptive3d>,
               .sbp_rule = &sbp_rules::kResampleBackward,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_nearest2d",
               .traits = kWidens16Bit,
               .attr_names = UpsampleNearestAttrs::names(),
               .attr_types = UpsampleNearestAttrs::types(),
               .infer_meta = resample_meta<Mode::kNearest>,
               .cpu = resample_cpu<Mode::kNearest>,
               .vjp = resample_vjp<Mode::kNearest>,
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_nearest2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<UpsampleNearestAttrs>::names(),
               .attr_types = WithInputSize<UpsampleNearestAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kNearest>,
               .cpu = resample_backward_cpu<Mode::kNearest>,
               .vjp = resample_backward_vjp<Mode::kNearest>,
               .sbp_rule = &sbp_rules::kResampleBackward,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_bilinear2d",
               .traits = kWidens16Bit,
               .attr_names = UpsampleBilinearAttrs::names(),
               .attr_types = UpsampleBilinearAttrs::types(),
               .infer_meta = resample_meta<Mode::kBilinear>,
               .cpu = resample_cpu<Mode::kBilinear>,
               .vjp = resample_vjp<Mode::kBilinear>,
               .sbp_rule = &sbp_rules::kPool,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_bilinear2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<UpsampleBilinearAttrs>::names(),
               .attr_types = WithInputSize<UpsampleBilinearAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kBilinear>,
               .cpu = resample_backward_cpu<Mode::kBilinear>,
               .vjp = resample_backward_vjp<Mode::kBilinear>,
               .sbp_rule = &sbp_rules::kResampleBackward,
               .contiguous_inputs = kEveryInput});
}

// ---------------------------------------------------------------- public functions

namespace {
// The 1-D pooling checks in 1-D terms (the ops then run as 2-D over a unit H dim); returns the
// batched [N, C, L] input.
Tensor pool1d_input(const char* op, const Tensor& input, int64_t k, int64_t s, int64_t p, int64_t d,
                    bool ceil_mode) {
  check_float(op, input, "input");
  const Tensor x = batched(op, input, 1);
  if (k <= 0) fail("[{}] kernel_size must be positive, got {}", op, k);
  if (s <= 0) fail("[{}] stride must be positive, got {}", op, s);
  if (d <= 0) fail("[{}] dilation must be positive, got {}", op, d);
  if (p < 0 || p > k / 2)
    fail("[{}] padding {} must be non-negative and at most half of kernel_size {}", op, p, k);
  const int64_t out = pool_out(x.size(2), k, p, s, d, ceil_mode);
  if (out <= 0)
    fail(
        "[{}] input {} with kernel_size {}, stride {}, padding {}, dilation {} gives output size "
        "{}, which is too small",
        op, shape_str(input.sizes()), k, s, p, d, out);
  return x;
}

// Restores the rank of a max pool's (values, indices).
std::tuple<Tensor, Tensor> finish_indices(const Tensor& input, TensorList r, int64_t sp,
                                          bool one_d) {
  Tensor y = r[0];
  Tensor idx = r[1];
  if (one_d) {
    y = y.squeeze(2);
    idx = idx.squeeze(2);
  }
  if (input.dim() == sp + 1) {
    y = y.squeeze(0);
    idx = idx.squeeze(0);
  }
  return {y, idx};
}

// max_poolNd and max_poolNd_with_indices (sp = 1, 2, 3); `op` is the name errors carry.
std::tuple<Tensor, Tensor> max_pool_impl(const char* op, int64_t sp, const Tensor& input,
                                         IntArrayRef kernel_size, IntArrayRef stride,
                                         IntArrayRef padding, IntArrayRef dilation,
                                         bool ceil_mode) {
  DimVector k = expand_param(kernel_size, sp, op, "kernel_size");
  DimVector s = stride.empty() ? k : expand_param(stride, sp, op, "stride");
  DimVector p = expand_param(padding, sp, op, "padding");
  DimVector d = expand_param(dilation, sp, op, "dilation");
  Tensor x;
  if (sp == 1) {
    x = pool1d_input(op, input, k[0], s[0], p[0], d[0], ceil_mode).unsqueeze(2);
    k.insert(k.begin(), 1), s.insert(s.begin(), 1), p.insert(p.begin(), 0), d.insert(d.begin(), 1);
  } else {
    check_float(op, input, "input");
    x = batched(op, input, sp);
  }
  pool_geom(op, x, k, s, p, d, ceil_mode);
  const OpDef& def = sp == 3 ? OF_OP("max_pool3d_with_indices") : OF_OP("max_pool2d_with_indices");
  return finish_indices(input, dispatch(def, {x}, MaxPoolAttrs::make(k, s, p, d, ceil_mode)), sp,
                        sp == 1);
}

// adaptive_max_poolNd (sp = 1, 2, 3).
std::tuple<Tensor, Tensor> adaptive_max_impl(const char* op, int64_t sp, const Tensor& input,
                                             IntArrayRef output_size) {
  DimVector os = expand_param(output_size, sp, op, "output_size");
  check_float(op, input, "input");
  Tensor x = batched(op, input, sp);
  for (int64_t i = 0; i < sp; ++i) {
    if (os[size_t(i)] <= 0)
      fail("[{}] output_size must be positive, got {} for input {}", op, vals(os),
           shape_str(input.sizes()));
    if (x.size(2 + i) <= 0)
      fail("[{}] input {} has an empty spatial dimension", op, shape_str(input.sizes()));
  }
  if (sp == 1) {
    x = x.unsqueeze(2);
    os.insert(os.begin(), 1);
  }
  const OpDef& def = sp == 3 ? OF_OP("adaptive_max_pool3d") : OF_OP("adaptive_max_pool2d");
  return finish_indices(input, dispatch(def, {x}, AdaptivePoolAttrs::make(os)), sp, sp == 1);
}
}  // namespace

std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return max_pool_impl("max_pool1d_with_indices", 1, input, kernel_size, stride, padding, dilation,
                       ceil_mode);
}
Tensor max_pool1d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_impl("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode));
}
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return max_pool_impl("max_pool2d_with_indices", 2, input, kernel_size, stride, padding, dilation,
                       ceil_mode);
}
Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_impl("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode));
}
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return max_pool_impl("max_pool3d_with_indices", 3, input, kernel_size, stride, padding, dilation,
                       ceil_mode);
}
Tensor max_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_impl("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool1d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool1d";
  const DimVector k = expand_param(kernel_size, 1, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 1, op, "stride");
  const DimVector p = expand_param(padding, 1, op, "padding");
  pool1d_input(op, input, k[0], s[0], p[0], 1, ceil_mode);
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        Attrs a =
            AvgPoolAttrs::make({1, k[0]}, {1, s[0]}, {0, p[0]}, ceil_mode, count_include_pad, 0);
        return dispatch1(OF_OP("avg_pool2d"), {x.unsqueeze(2)}, std::move(a)).squeeze(2);
      },
      1);
}

Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  const DimVector k = expand_param(kernel_size, 2, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 2, op, "stride");
  const DimVector p = expand_param(padding, 2, op, "padding");
  if (divisor_override && *divisor_override <= 0)
    fail("[{}] divisor_override must be positive, got {}", op, *divisor_override);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a =
        AvgPoolAttrs::make(k, s, p, ceil_mode, count_include_pad, divisor_override.value_or(0));
    make_resample(Mode::kAvg, x.sizes(), a, op, false);
    return dispatch1(OF_OP("avg_pool2d"), {x}, std::move(a));
  });
}

Tensor avg_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool3d";
  const DimVector k = expand_param(kernel_size, 3, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 3, op, "stride");
  const DimVector p = expand_param(padding, 3, op, "padding");
  if (divisor_override && *divisor_override <= 0)
    fail("[{}] divisor_override must be positive, got {}", op, *divisor_override);
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        Attrs a =
            AvgPoolAttrs::make(k, s, p, ceil_mode, count_include_pad, divisor_override.value_or(0));
        make_resample(Mode::kAvg3d, x.sizes(), a, op, false);
        return dispatch1(OF_OP("avg_pool3d"), {x}, std::move(a));
      },
      3);
}

Tensor adaptive_avg_pool1d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool1d";
  const DimVector os = expand_param(output_size, 1, op, "output_size");
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        if (os[0] <= 0)
          fail("[{}] output_size must be positive, got {} for input {}", op, os[0],
               shape_str(input.sizes()));
        if (x.size(2) <= 0)
          fail("[{}] input {} has an empty spatial dimension", op, shape_str(input.sizes()));
        return dispatch1(OF_OP("adaptive_avg_pool2d"), {x.unsqueeze(2)},
                         AdaptivePoolAttrs::make({1, os[0]}))
            .squeeze(2);
      },
      1);
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a = AdaptivePoolAttrs::make(os);
    make_resample(Mode::kAdaptive, x.sizes(), a, op, false);
    return dispatch1(OF_OP("adaptive_avg_pool2d"), {x}, std::move(a));
  });
}

Tensor adaptive_avg_pool3d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool3d";
  const DimVector os = expand_param(output_size, 3, op, "output_size");
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        Attrs a = AdaptivePoolAttrs::make(os);
        make_resample(Mode::kAdaptive3d, x.sizes(), a, op, false);
        return dispatch1(OF_OP("adaptive_avg_pool3d"), {x}, std::move(a));
      },
      3);
}

std::tuple<Tensor, Tensor> adaptive_max_pool1d(const Tensor& input, IntArrayRef output_size) {
  return adaptive_max_impl("adaptive_max_pool1d", 1, input, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& input, IntArrayRef output_size) {
  return adaptive_max_impl("adaptive_max_pool2d", 2, input, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool3d(const Tensor& input, IntArrayRef output_size) {
  return adaptive_max_impl("adaptive_max_pool3d", 3, input, output_size);
}

namespace {
double scale_value(const char* op, const char* name, std::optional<double> s) {
  if (!s) return 0.0;
  if (!(*s > 0) || !std::isfinite(*s))
    fail("[{}] {} must be positive and finite, got {}", op, name, *s);
  return *s;
}
}  // namespace

Tensor upsample_nearest2d(const Tensor& input, IntArrayRef output_size,
                          std::optional<double> scales_h, std::optional<double> scales_w) {
  const char* op = "upsample_nearest2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  const double sh = scale_value(op, "scales_h", scales_h),
               sw = scale_value(op, "scales_w", scales_w);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a = UpsampleNearestAttrs::make(os, sh, sw);
    make_resample(Mode::kNearest, x.sizes(), a, op, false);
    return dispatch1(OF_OP("upsample_nearest2d"), {x}, std::move(a));
  });
}

Tensor upsample_bilinear2d(const Tensor& input, IntArrayRef output_size, bool align_corners,
                           std::optional<double> scales_h, std::optional<double> scales_w) {
  const char* op = "upsample_bilinear2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  const double sh = scale_value(op, "scales_h", scales_h),
               sw = scale_value(op, "scales_w", scales_w);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a = UpsampleBilinearAttrs::make(os, align_corners, sh, sw);
    make_resample(Mode::kBilinear, x.sizes(), a, op, false);
    return dispatch1(OF_OP("upsample_bilinear2d"), {x}, std::move(a));
  });
}

}  // namespace oneflow

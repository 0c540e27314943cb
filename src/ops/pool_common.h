// pool_common.h: what the pooling and resampling ops (ops/nn_pool.cpp) and their CPU kernels
// (cpu/pool.cpp) share: the max pools' geometry and checks (PoolGeom), the adaptive max pools'
// checks, and the separable resampling maps (Mode, AxisMap, Resample, make_resample), which the
// metas build without their per-output maps and the kernels with them.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_support.h"
#include "ops/checks.h"
#include "ops/conv_common.h"

namespace oneflow::pool_detail {
using namespace conv_detail;

// ---------------------------------------------------------------- max_pool2d / 3d

struct PoolGeom {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
  int64_t D = 1, kd = 1, sd = 1, pd = 0, dd = 1, OD = 1;
};

// max_pool2d/3d and avg_pool2d parameter checks and output size (PyTorch's pool2d_shape_check);
// the spatial rank is k.size() (2 or 3).
inline PoolGeom pool_geom(const char* op, const Tensor& x, const DimVector& k, const DimVector& s,
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
inline PoolGeom max_geom(const Tensor& x, const Attrs& a) {
  using A = MaxPoolAttrs;
  return pool_geom("max_pool2d_with_indices", x, A::get<"kernel_size">(a), A::get<"stride">(a),
                   A::get<"padding">(a), A::get<"dilation">(a), A::get<"ceil_mode">(a));
}
// max_pool3d_with_indices(x [N, C, D, H, W]; kernel_size, stride, padding, dilation, ceil_mode)
inline PoolGeom max3_geom(const Tensor& x, const Attrs& a) {
  using A = MaxPoolAttrs;
  return pool_geom("max_pool3d_with_indices", x, A::get<"kernel_size">(a), A::get<"stride">(a),
                   A::get<"padding">(a), A::get<"dilation">(a), A::get<"ceil_mode">(a));
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

// ---------------------------------------------------------------- separable resampling

enum class Mode { kAvg, kAdaptive, kNearest, kBilinear, kAvg3d, kAdaptive3d };

// Spatial rank of a mode's op (the 3-D modes map depth, height and width).
constexpr int mode_rank(Mode m) { return m == Mode::kAvg3d || m == Mode::kAdaptive3d ? 3 : 2; }

inline const char* mode_name(Mode m, bool backward) {
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

inline void check_output_size(const char* op, const DimVector& os, IntArrayRef in) {
  for (int64_t v : os)
    if (v <= 0)
      fail("[{}] output_size must be positive, got {} for input {}", op, vals(os), shape_str(in));
}

// NOTE [Resample maps]: the checks and output sizes cost O(axes); the per-output source maps
// cost O(output extent x window) and are built only for a kernel (with_maps), after its output
// was allocated: an infer_meta asked for a huge output_size (fuzz_ops) raises or allocates
// instead of looping over the requested extent first.
inline Resample make_resample(Mode mode, IntArrayRef in, const Attrs& a, const char* op,
                              bool with_maps) {
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

}  // namespace oneflow::pool_detail

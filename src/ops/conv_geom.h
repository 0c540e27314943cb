// conv_geom.h: the geometry of a convolution, computed once from sizes and parameters. The op
// file (ops/nn_conv.cpp) validates a call in infer_meta (conv_check) and derives its VJPs'
// output paddings from it; the CPU kernels (cpu/conv.cpp) derive their loops from it without
// checking anything again (NOTE [Conv geometry]).
#pragma once
#include <cstdint>

#include "kernel_support.h"
#include "ops/conv_common.h"

namespace oneflow::conv_detail {

// NOTE [Conv geometry]: a convolution in "forward" terms: x [N, C, (D,) H, W] *
// w [M, C/G, (kd,) kh, kw] -> y [N, M, (OD,) OH, OW]. conv_transpose is the adjoint, so it uses
// the same geometry with x and y swapped. 2-D convolutions have a unit depth (D = kd = OD = 1).
// conv_geometry is pure arithmetic over the sizes; conv_check (nn_conv.cpp, called from each
// op's infer_meta and from the 1-D wrappers, which word their messages in 1-D terms) is the only
// place that validates, so kernels and VJPs, which run after infer_meta, just compute.
struct Geom {
  int64_t N, C, H, W, M, G, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
  int64_t D = 1, kd = 1, sd = 1, pd = 0, dd = 1, OD = 1;
  bool overflow = false;  // some size overflowed int64 (conv_check refuses the call)
  int64_t K() const { return (C / G) * kd * kh * kw; }  // GEMM depth per group
  int64_t L() const { return OD * OH * OW; }
  int64_t img() const { return C * D * H * W; }
  bool direct() const {  // 1x1, stride 1, no padding: the image is its own column matrix
    return kd == 1 && kh == 1 && kw == 1 && sd == 1 && sh == 1 && sw == 1 && pd == 0 && ph == 0 &&
           pw == 0;
  }
};

// The geometry of input sizes `xs` [N, C, spatial...] and weight sizes `ws` [M, C/G, k...] (for a
// transposed convolution xs is the convolution's output, ws [Cin, Cout/G, k...]); the spatial rank
// is p.stride.size() (2 or 3). Expects positive strides and dilations, non-negative paddings and
// sizes of rank sp + 2 (conv_check's first checks). A window larger than the padded input gives a
// non-positive output extent (floor division).
inline Geom conv_geometry(IntArrayRef xs, IntArrayRef ws, const ConvParams& p, bool transposed) {
  const size_t sp = p.stride.size(), o3 = 3 - sp;
  Geom g{};
  auto mul = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    g.overflow = __builtin_mul_overflow(a, b, &r) || g.overflow;
    return r;
  };
  auto add = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    g.overflow = __builtin_add_overflow(a, b, &r) || g.overflow;
    return r;
  };
  auto sub = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    g.overflow = __builtin_sub_overflow(a, b, &r) || g.overflow;
    return r;
  };
  // per-axis values, depth first; a 2-D convolution leaves the depth axis at its unit defaults
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, opad[3] = {0, 0, 0};
  for (size_t i = 0; i < sp; ++i) {
    k[o3 + i] = ws[2 + i];
    s[o3 + i] = p.stride[i];
    pad[o3 + i] = p.padding[i];
    dil[o3 + i] = p.dilation[i];
    if (transposed) opad[o3 + i] = p.output_padding[i];
  }
  g.N = xs[0];
  g.G = p.groups;
  if (!transposed) {
    g.C = xs[1];
    g.M = ws[0];
    for (size_t i = 0; i < sp; ++i) in[o3 + i] = xs[2 + i];
    for (size_t i = 0; i < 3; ++i) {
      // padded input - dilated window, floor-divided by the stride (once a size overflowed
      // the values are meaningless, but every step stays defined)
      const int64_t span = sub(add(in[i], mul(2, pad[i])), add(mul(dil[i], k[i] - 1), 1));
      const int64_t q = span / s[i] - (span % s[i] != 0 && span < 0 ? 1 : 0);
      out[i] = add(q, 1);
    }
  } else {
    g.M = xs[1];
    g.C = mul(ws[1], p.groups);
    for (size_t i = 0; i < sp; ++i) out[o3 + i] = xs[2 + i];
    for (size_t i = 0; i < 3; ++i)
      in[i] = add(add(sub(mul(out[i] - 1, s[i]), mul(2, pad[i])), mul(dil[i], k[i] - 1)),
                  add(opad[i], 1));
  }
  g.D = in[0], g.H = in[1], g.W = in[2];
  g.kd = k[0], g.kh = k[1], g.kw = k[2];
  g.sd = s[0], g.sh = s[1], g.sw = s[2];
  g.pd = pad[0], g.ph = pad[1], g.pw = pad[2];
  g.dd = dil[0], g.dh = dil[1], g.dw = dil[2];
  g.OD = out[0], g.OH = out[1], g.OW = out[2];
  return g;
}

// [N, channels, (D,) H, W] for Sp = 2 or 3.
template <int Sp> DimVector conv_shape(int64_t N, int64_t ch, int64_t D, int64_t H, int64_t W) {
  if constexpr (Sp == 2) return {N, ch, H, W};
  else return {N, ch, D, H, W};
}

}  // namespace oneflow::conv_detail

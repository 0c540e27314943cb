// test_conv.cpp: convolution, pooling and resampling (src/ops/nn_conv.cpp).
// Table rows compare each op with float64 plain-loop references (direct sums over windows,
// independent of the im2col/GEMM and separable-map kernels); plain cases cover indices,
// padding modes, unbatched and half inputs, thread-count independence and error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch.h"
#include "harness.h"

using th::OpRow;
using th::Ref;
using th::Shape;
using T = of::Tensor;
using V = std::vector<T>;
using R = std::vector<Ref>;

namespace {

OpRow row(std::string name, std::vector<std::string> ops, std::vector<Shape> shapes,
          std::function<T(const V&)> fn, std::function<Ref(const R&)> ref) {
  return th::make_row_tol(std::move(name), std::move(ops), std::move(shapes), std::move(fn),
                          std::move(ref), 1e-5, 1e-6);
}
// Sums of many float32 products: relative and absolute error grow with the depth.
OpRow loose(OpRow r) {
  r.rtol = 1e-4;
  r.atol = 1e-4;
  return r;
}

int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// PyTorch's pooling output size.
int64_t pool_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
  int64_t o = floordiv(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

struct Conv {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1, oph = 0, opw = 0;
};

// y[n, m, oh, ow] = b[m] + sum_{c, i, j} x[n, g*Cg + c, oh*s - p + i*d, ...] * w[m, c, i, j]
Ref ref_conv2d(const Ref& x, const Ref& w, const Ref* b, const Conv& c) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t OH = (H + 2 * c.ph - c.dh * (kh - 1) - 1) / c.sh + 1;
  const int64_t OW = (W + 2 * c.pw - c.dw * (kw - 1) - 1) / c.sw + 1;
  const int64_t Mg = M / c.groups;
  Ref y({N, M, OH, OW});
  (void)C;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = b ? b->v[size_t(m)] : 0.0;
          const int64_t g = m / Mg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * c.sh - c.ph + i * c.dh, iw = ow * c.sw - c.pw + j * c.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x.at({n, g * Cg + ci, ih, iw}) * w.at({m, ci, i, j});
              }
          y.v[size_t(y.flat({n, m, oh, ow}))] = s;
        }
  return y;
}

// Scatter form: every x[n, ci, ih, iw] * w[ci, co, i, j] lands on y[n, g*Cog + co, ih*s - p + i*d].
Ref ref_conv_transpose2d(const Ref& x, const Ref& w, const Ref* b, const Conv& c) {
  const int64_t N = x.shape[0], Cin = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t Cog = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t Cout = Cog * c.groups, Cig = Cin / c.groups;
  const int64_t OH = (H - 1) * c.sh - 2 * c.ph + c.dh * (kh - 1) + c.oph + 1;
  const int64_t OW = (W - 1) * c.sw - 2 * c.pw + c.dw * (kw - 1) + c.opw + 1;
  Ref y({N, Cout, OH, OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < Cin; ++ci)
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw) {
          const double xv = x.at({n, ci, ih, iw});
          const int64_t g = ci / Cig;
          for (int64_t co = 0; co < Cog; ++co)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t oh = ih * c.sh - c.ph + i * c.dh, ow = iw * c.sw - c.pw + j * c.dw;
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                y.v[size_t(y.flat({n, g * Cog + co, oh, ow}))] += xv * w.at({ci, co, i, j});
              }
        }
  if (b)
    for (int64_t i = 0; i < y.numel(); ++i) y.v[size_t(i)] += b->v[size_t(y.index(i)[1])];
  return y;
}

// dW[m, c, i, j] = sum_{n, oh, ow} dy[n, m, oh, ow] * x[n, g*Cg + c, oh*s - p + i*d, ...]
Ref ref_conv_weight_grad(const Ref& dy, const Ref& x, const Shape& wsz, const Conv& c) {
  const int64_t N = x.shape[0], H = x.shape[2], W = x.shape[3];
  const int64_t M = wsz[0], Cg = wsz[1], kh = wsz[2], kw = wsz[3], Mg = M / c.groups;
  const int64_t OH = dy.shape[2], OW = dy.shape[3];
  Ref dw(wsz);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t ci = 0; ci < Cg; ++ci)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) {
          double s = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t ih = oh * c.sh - c.ph + i * c.dh, iw = ow * c.sw - c.pw + j * c.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += dy.at({n, m, oh, ow}) * x.at({n, (m / Mg) * Cg + ci, ih, iw});
              }
          dw.v[size_t(dw.flat({m, ci, i, j}))] = s;
        }
  return dw;
}

// Zero-pads H and W of a 4-D reference: (top, bottom, left, right).
Ref ref_pad(const Ref& x, int64_t t, int64_t bo, int64_t l, int64_t r) {
  Ref y({x.shape[0], x.shape[1], x.shape[2] + t + bo, x.shape[3] + l + r});
  for (int64_t i = 0; i < x.numel(); ++i) {
    Shape idx = x.index(i);
    idx[2] += t;
    idx[3] += l;
    y.v[size_t(y.flat(idx))] = x.v[size_t(i)];
  }
  return y;
}

// 3-D (N, C, L) <-> 4-D (N, C, 1, L) views of reference data.
Ref as4(const Ref& r) { return Ref({r.shape[0], r.shape[1], 1, r.shape[2]}, r.v); }
Ref as3(const Ref& r) { return Ref({r.shape[0], r.shape[1], r.shape[3]}, r.v); }
// Unbatched (C, H, W) <-> (1, C, H, W).
Ref add_batch(const Ref& r) {
  Shape s = r.shape;
  s.insert(s.begin(), 1);
  return Ref(s, r.v);
}
Ref drop_batch(const Ref& r) { return Ref(Shape(r.shape.begin() + 1, r.shape.end()), r.v); }

// Max over the dilated window (NaN wins, first maximum kept), with its flat H*W index.
std::pair<Ref, Ref> ref_max_pool(const Ref& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                 int64_t ph, int64_t pw, int64_t dh, int64_t dw, bool ceil_mode) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = pool_size(H, kh, ph, sh, dh, ceil_mode);
  const int64_t OW = pool_size(W, kw, pw, sw, dw, ceil_mode);
  Ref y({N, C, OH, OW}), idx({N, C, OH, OW});
  for (int64_t i = 0; i < y.numel(); ++i) {
    const Shape o = y.index(i);
    double best = -INFINITY;
    int64_t bi = -1;
    for (int64_t a = 0; a < kh; ++a)
      for (int64_t b = 0; b < kw; ++b) {
        const int64_t ih = o[2] * sh - ph + a * dh, iw = o[3] * sw - pw + b * dw;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        const double v = x.at({o[0], o[1], ih, iw});
        if (bi < 0 || v > best || std::isnan(v)) {
          best = v;
          bi = ih * W + iw;
        }
      }
    y.v[size_t(i)] = best;
    idx.v[size_t(i)] = double(bi);
  }
  return {y, idx};
}

// A linear map on 4-D data as (output flat index, input flat index, weight) entries.
struct Lin {
  Shape in, out;
  std::vector<std::tuple<int64_t, int64_t, double>> e;
};
Ref apply(const Lin& l, const Ref& x) {
  Ref y(l.out);
  for (auto& [o, i, w] : l.e) y.v[size_t(o)] += w * x.v[size_t(i)];
  return y;
}
Ref apply_adjoint(const Lin& l, const Ref& g) {
  Ref x(l.in);
  for (auto& [o, i, w] : l.e) x.v[size_t(i)] += w * g.v[size_t(o)];
  return x;
}

// PyTorch's avg_pool2d: window clipped to the padded input for the divisor when
// count_include_pad, to the input otherwise; divisor_override replaces both.
Lin lin_avg_pool(const Shape& in, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                 int64_t pw, bool ceil_mode, bool include_pad, std::optional<int64_t> div) {
  const int64_t N = in[0], C = in[1], H = in[2], W = in[3];
  const int64_t OH = pool_size(H, kh, ph, sh, 1, ceil_mode);
  const int64_t OW = pool_size(W, kw, pw, sw, 1, ceil_mode);
  Lin l{in, {N, C, OH, OW}, {}};
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
        int64_t h1 = std::min(h0 + kh, H + ph), w1 = std::min(w0 + kw, W + pw);
        const int64_t padded = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, H);
        w1 = std::min(w1, W);
        const int64_t valid = (h1 - h0) * (w1 - w0);
        const double d = div ? double(*div) : double(include_pad ? padded : valid);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw)
            l.e.emplace_back((p * OH + oh) * OW + ow, (p * H + ih) * W + iw, 1.0 / d);
      }
  return l;
}

Lin lin_adaptive(const Shape& in, int64_t OH, int64_t OW) {
  const int64_t N = in[0], C = in[1], H = in[2], W = in[3];
  Lin l{in, {N, C, OH, OW}, {}};
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = int64_t(std::floor(double(oh * H) / double(OH)));
        const int64_t h1 = int64_t(std::ceil(double((oh + 1) * H) / double(OH)));
        const int64_t w0 = int64_t(std::floor(double(ow * W) / double(OW)));
        const int64_t w1 = int64_t(std::ceil(double((ow + 1) * W) / double(OW)));
        const double n = double((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw)
            l.e.emplace_back((p * OH + oh) * OW + ow, (p * H + ih) * W + iw, 1.0 / n);
      }
  return l;
}

// sh / sw > 0: interpolate's scale_factor (the source step is 1/scale instead of in/out).
Lin lin_nearest(const Shape& in, int64_t OH, int64_t OW, double sh = 0, double sw = 0) {
  const int64_t N = in[0], C = in[1], H = in[2], W = in[3];
  Lin l{in, {N, C, OH, OW}, {}};
  auto src = [](int64_t o, int64_t i, int64_t out, double scale) {
    const double step = scale > 0 ? 1.0 / scale : double(i) / double(out);
    return std::min(int64_t(std::floor(double(o) * step)), i - 1);
  };
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        l.e.emplace_back((p * OH + oh) * OW + ow,
                         (p * H + src(oh, H, OH, sh)) * W + src(ow, W, OW, sw), 1.0);
  return l;
}

Lin lin_bilinear(const Shape& in, int64_t OH, int64_t OW, bool align, double sh = 0,
                 double sw = 0) {
  const int64_t N = in[0], C = in[1], H = in[2], W = in[3];
  Lin l{in, {N, C, OH, OW}, {}};
  // Source position, the two neighbours and the weight of the upper one.
  auto pos = [&](int64_t o, int64_t i, int64_t out, double scale, int64_t& a, int64_t& b,
                 double& t) {
    double s;
    const double step = scale > 0 ? 1.0 / scale : double(i) / double(out);
    if (align) s = out > 1 ? double(o) * double(i - 1) / double(out - 1) : 0.0;
    else s = std::max((double(o) + 0.5) * step - 0.5, 0.0);
    a = std::min(int64_t(std::floor(s)), i - 1);
    b = std::min(a + 1, i - 1);
    t = s - double(a);
  };
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0, h1, w0, w1;
        double th, tw;
        pos(oh, H, OH, sh, h0, h1, th);
        pos(ow, W, OW, sw, w0, w1, tw);
        const int64_t o = (p * OH + oh) * OW + ow;
        l.e.emplace_back(o, (p * H + h0) * W + w0, (1 - th) * (1 - tw));
        l.e.emplace_back(o, (p * H + h0) * W + w1, (1 - th) * tw);
        l.e.emplace_back(o, (p * H + h1) * W + w0, th * (1 - tw));
        l.e.emplace_back(o, (p * H + h1) * W + w1, th * tw);
      }
  return l;
}

T conv_bw_weight(const T& dy, const T& x, of::DimVector wsz, of::DimVector s, of::DimVector p,
                 of::DimVector d, int64_t groups) {
  // attrs in the family's order (stride, padding, dilation, groups, weight_size)
  return of::dispatch1(of::find_op("conv2d_backward_weight"), {dy, x}, {s, p, d, groups, wsz});
}
// Runs a *_backward resampling op directly: attrs are the forward attrs plus input_size.
T resample_bw(const char* op, const T& g, of::Attrs a, of::DimVector in) {
  a.values.push_back(in);
  return of::dispatch1(of::find_op(op), {g}, a);
}

// ---------------------------------------------------------------- conv rows

// clang-format off
TH_ROWS({
    loose(row("conv2d/basic_bias", {"conv2d"}, {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}},
              [](const V& in) { return of::conv2d(in[0], in[1], in[2]); },
              [](const R& in) { return ref_conv2d(in[0], in[1], &in[2], {}); })),
    loose(row("conv2d/stride_padding_rect", {"conv2d"}, {{2, 2, 6, 5}, {3, 2, 3, 2}, {3}},
              [](const V& in) { return of::conv2d(in[0], in[1], in[2], {2, 1}, {1, 2}); },
              [](const R& in) {
                return ref_conv2d(in[0], in[1], &in[2], {.sh = 2, .sw = 1, .ph = 1, .pw = 2});
              })),
    loose(row("conv2d/dilation_no_bias_batch1", {"conv2d"}, {{1, 2, 7, 6}, {2, 2, 2, 3}},
              [](const V& in) { return of::conv2d(in[0], in[1], {}, 1, 1, {2, 1}); },
              [](const R& in) {
                return ref_conv2d(in[0], in[1], nullptr, {.ph = 1, .pw = 1, .dh = 2, .dw = 1});
              })),
    loose(row("conv2d/groups_stride", {"conv2d"}, {{2, 4, 5, 4}, {6, 2, 3, 3}, {6}},
              [](const V& in) { return of::conv2d(in[0], in[1], in[2], 2, 1, 1, 2); },
              [](const R& in) {
                return ref_conv2d(in[0], in[1], &in[2],
                                  {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 2});
              })),
    loose(row("conv2d/1x1", {"conv2d"}, {{3, 3, 4, 3}, {5, 3, 1, 1}, {5}},
              [](const V& in) { return of::conv2d(in[0], in[1], in[2]); },
              [](const R& in) { return ref_conv2d(in[0], in[1], &in[2], {}); })),
    loose(row("conv2d/1x1_stride_groups", {"conv2d"}, {{2, 4, 5, 5}, {2, 2, 1, 1}},
              [](const V& in) { return of::conv2d(in[0], in[1], {}, 2, 0, 1, 2); },
              [](const R& in) {
                return ref_conv2d(in[0], in[1], nullptr, {.sh = 2, .sw = 2, .groups = 2});
              })),
    loose(row("conv2d/depthwise_dilated", {"conv2d"}, {{2, 3, 5, 5}, {3, 1, 3, 3}, {3}},
              [](const V& in) { return of::conv2d(in[0], in[1], in[2], 1, 2, 2, 3); },
              [](const R& in) {
                return ref_conv2d(in[0], in[1], &in[2],
                                  {.ph = 2, .pw = 2, .dh = 2, .dw = 2, .groups = 3});
              })),
    // batches of 4-5: a thread's images share one GEMM (chunked columns)
    loose(row("conv2d/batch5_groups_dilation", {"conv2d"}, {{5, 4, 6, 5}, {6, 2, 3, 2}, {6}},
              [](const V& in) {
                return of::conv2d(in[0], in[1], in[2], {1, 2}, {2, 1}, {2, 1}, 2);
              },
              [](const R& in) {
                return ref_conv2d(in[0], in[1], &in[2],
                                  {.sh = 1, .sw = 2, .ph = 2, .pw = 1, .dh = 2, .dw = 1,
                                   .groups = 2});
              })),
    loose(row("conv2d/batch4_1x1_groups", {"conv2d"}, {{4, 4, 3, 3}, {4, 2, 1, 1}},
              [](const V& in) { return of::conv2d(in[0], in[1], {}, 1, 0, 1, 2); },
              [](const R& in) { return ref_conv2d(in[0], in[1], nullptr, {.groups = 2}); })),
    loose(row("conv_transpose2d/batch4_groups", {"conv_transpose2d"},
              {{4, 4, 3, 3}, {4, 1, 3, 3}, {2}},
              [](const V& in) { return of::conv_transpose2d(in[0], in[1], in[2], 2, 1, 1, 2); },
              [](const R& in) {
                return ref_conv_transpose2d(in[0], in[1], &in[2],
                                            {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 2,
                                             .oph = 1, .opw = 1});
              })),
    loose(row("conv2d/same_odd_total", {"conv2d", "pad"}, {{1, 2, 5, 6}, {2, 2, 4, 3}, {2}},
              [](const V& in) { return of::conv2d(in[0], in[1], in[2], 1, "same"); },
              [](const R& in) {
                // kh 4: total 3 -> 1 before, 2 after; kw 3: 1 and 1
                return ref_conv2d(ref_pad(in[0], 1, 2, 1, 1), in[1], &in[2], {});
              })),
    loose(row("conv2d/same_dilated_valid", {"conv2d"}, {{2, 2, 6, 5}, {3, 2, 3, 2}},
              [](const V& in) {
                return of::conv2d(in[0], in[1], {}, 1, "same", {2, 2}) +
                       of::conv2d(in[0], in[1], {}, 1, "valid").sum();
              },
              [](const R& in) {
                Ref a = ref_conv2d(ref_pad(in[0], 2, 2, 1, 1), in[1], nullptr,
                                   {.dh = 2, .dw = 2});
                Ref v = ref_conv2d(in[0], in[1], nullptr, {});
                double s = 0;
                for (double e : v.v) s += e;
                for (double& e : a.v) e += s;
                return a;
              })),
    loose(row("conv2d/unbatched", {"conv2d"}, {{3, 5, 4}, {2, 3, 2, 2}, {2}},
              [](const V& in) { return of::conv2d(in[0], in[1], in[2], 1, 1); },
              [](const R& in) {
                return drop_batch(ref_conv2d(add_batch(in[0]), in[1], &in[2], {.ph = 1, .pw = 1}));
              })),
    loose(row("conv1d/stride_padding_bias", {"conv2d"}, {{2, 3, 9}, {4, 3, 3}, {4}},
              [](const V& in) { return of::conv1d(in[0], in[1], in[2], 2, 1); },
              [](const R& in) {
                Ref w4({in[1].shape[0], in[1].shape[1], 1, in[1].shape[2]}, in[1].v);
                return as3(ref_conv2d(as4(in[0]), w4, &in[2], {.sw = 2, .pw = 1}));
              })),
    loose(row("conv1d/groups_dilation_unbatched", {"conv2d"}, {{4, 8}, {2, 2, 3}},
              [](const V& in) { return of::conv1d(in[0], in[1], {}, 1, 0, 2, 2); },
              [](const R& in) {
                Ref x4({1, 4, 1, 8}, in[0].v);
                Ref w4({2, 2, 1, 3}, in[1].v);
                Ref y = ref_conv2d(x4, w4, nullptr, {.dw = 2, .groups = 2});
                return Ref({y.shape[1], y.shape[3]}, y.v);
              })),
    loose(row("conv1d/same_even_kernel", {"conv2d", "pad"}, {{1, 2, 6}, {3, 2, 4}},
              [](const V& in) { return of::conv1d(in[0], in[1], {}, 1, "same"); },
              [](const R& in) {
                Ref w4({3, 2, 1, 4}, in[1].v);
                return as3(ref_conv2d(ref_pad(as4(in[0]), 0, 0, 1, 2), w4, nullptr, {}));
              })),
    loose(row("conv_transpose2d/stride_padding_output_padding", {"conv_transpose2d"},
              {{2, 3, 4, 3}, {3, 2, 3, 3}, {2}},
              [](const V& in) { return of::conv_transpose2d(in[0], in[1], in[2], 2, 1, 1); },
              [](const R& in) {
                return ref_conv_transpose2d(in[0], in[1], &in[2],
                                            {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .oph = 1,
                                             .opw = 1});
              })),
    loose(row("conv_transpose2d/groups_dilation_rect", {"conv_transpose2d"},
              {{1, 4, 3, 4}, {4, 3, 2, 3}},
              [](const V& in) {
                return of::conv_transpose2d(in[0], in[1], {}, {1, 2}, {0, 1}, {0, 1}, 2, {2, 1});
              },
              [](const R& in) {
                return ref_conv_transpose2d(in[0], in[1], nullptr,
                                            {.sh = 1, .sw = 2, .ph = 0, .pw = 1, .dh = 2,
                                             .dw = 1, .groups = 2, .oph = 0, .opw = 1});
              })),
    // output_padding >= stride (allowed below the dilation): the gradients drop / zero-pad
    // the rows the convolution of the output has beyond the input
    loose(row("conv_transpose2d/output_padding_beyond_stride", {"conv_transpose2d"},
              {{2, 3, 6, 5}, {3, 4, 3, 2}, {4}},
              [](const V& in) {
                return of::conv_transpose2d(in[0], in[1], in[2], 1, {1, 0}, {1, 1}, 1, 2);
              },
              [](const R& in) {
                return ref_conv_transpose2d(in[0], in[1], &in[2],
                                            {.sh = 1, .sw = 1, .ph = 1, .pw = 0, .dh = 2,
                                             .dw = 2, .oph = 1, .opw = 1});
              })),
    loose(row("conv_transpose2d/1x1_unbatched", {"conv_transpose2d"}, {{3, 4, 3}, {3, 2, 1, 1}},
              [](const V& in) { return of::conv_transpose2d(in[0], in[1]); },
              [](const R& in) {
                return drop_batch(ref_conv_transpose2d(add_batch(in[0]), in[1], nullptr, {}));
              })),
    loose(row("conv2d_backward_weight/basic", {"conv2d_backward_weight"},
              {{2, 4, 3, 3}, {2, 3, 5, 5}},
              [](const V& in) { return conv_bw_weight(in[0], in[1], {4, 3, 3, 3}, {1, 1},
                                                      {0, 0}, {1, 1}, 1); },
              [](const R& in) { return ref_conv_weight_grad(in[0], in[1], {4, 3, 3, 3}, {}); })),
    loose(row("conv2d_backward_weight/groups_stride_dilation", {"conv2d_backward_weight"},
              {{3, 4, 3, 3}, {3, 2, 6, 5}},
              [](const V& in) { return conv_bw_weight(in[0], in[1], {4, 1, 2, 3}, {2, 2},
                                                      {1, 1}, {2, 1}, 2); },
              [](const R& in) {
                return ref_conv_weight_grad(in[0], in[1], {4, 1, 2, 3},
                                            {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 2,
                                             .dw = 1, .groups = 2});
              })),
});
// clang-format on

// ---------------------------------------------------------------- pooling and resampling rows

// clang-format off
TH_ROWS({
    row("max_pool2d/k2s2", {"max_pool2d_with_indices"}, {{2, 3, 6, 5}},
        [](const V& in) { return of::max_pool2d(in[0], 2); },
        [](const R& in) { return ref_max_pool(in[0], 2, 2, 2, 2, 0, 0, 1, 1, false).first; }),
    row("max_pool2d/pad_dilation_ceil", {"max_pool2d_with_indices"}, {{1, 2, 8, 7}},
        [](const V& in) { return of::max_pool2d(in[0], {3, 2}, 2, 1, {2, 1}, true); },
        [](const R& in) { return ref_max_pool(in[0], 3, 2, 2, 2, 1, 1, 2, 1, true).first; }),
    row("max_pool2d/unbatched_stride1", {"max_pool2d_with_indices"}, {{2, 4, 5}},
        [](const V& in) { return of::max_pool2d(in[0], {2, 3}, 1); },
        [](const R& in) {
          return drop_batch(ref_max_pool(add_batch(in[0]), 2, 3, 1, 1, 0, 0, 1, 1, false).first);
        }),
    row("avg_pool2d/pad_include", {"avg_pool2d"}, {{2, 2, 5, 6}},
        [](const V& in) { return of::avg_pool2d(in[0], 3, 2, 1); },
        [](const R& in) {
          return apply(lin_avg_pool(in[0].shape, 3, 3, 2, 2, 1, 1, false, true, {}), in[0]);
        }),
    row("avg_pool2d/ceil_exclude_pad", {"avg_pool2d"}, {{1, 3, 6, 7}},
        [](const V& in) { return of::avg_pool2d(in[0], {3, 2}, {2, 2}, {1, 1}, true, false); },
        [](const R& in) {
          return apply(lin_avg_pool(in[0].shape, 3, 2, 2, 2, 1, 1, true, false, {}), in[0]);
        }),
    row("avg_pool2d/divisor_override_default_stride", {"avg_pool2d"}, {{2, 2, 7, 4}},
        [](const V& in) { return of::avg_pool2d(in[0], 2, {}, 0, true, true, 3); },
        [](const R& in) {
          return apply(lin_avg_pool(in[0].shape, 2, 2, 2, 2, 0, 0, true, true, 3), in[0]);
        }),
    row("avg_pool2d/unbatched", {"avg_pool2d"}, {{3, 5, 5}},
        [](const V& in) { return of::avg_pool2d(in[0], 2, 1); },
        [](const R& in) {
          const Ref x = add_batch(in[0]);
          return drop_batch(apply(lin_avg_pool(x.shape, 2, 2, 1, 1, 0, 0, false, true, {}), x));
        }),
    row("avg_pool2d_backward/ceil_pad", {"avg_pool2d_backward"}, {{2, 2, 4, 4}},
        [](const V& in) {
          return resample_bw("avg_pool2d_backward", in[0],
                             {of::DimVector{3, 2}, of::DimVector{2, 2}, of::DimVector{1, 1}, true,
                              false, int64_t(0)},
                             {2, 2, 6, 7});
        },
        [](const R& in) {
          return apply_adjoint(lin_avg_pool({2, 2, 6, 7}, 3, 2, 2, 2, 1, 1, true, false, {}),
                               in[0]);
        }),
    row("adaptive_avg_pool2d/down", {"adaptive_avg_pool2d"}, {{2, 3, 7, 5}},
        [](const V& in) { return of::adaptive_avg_pool2d(in[0], {3, 4}); },
        [](const R& in) { return apply(lin_adaptive(in[0].shape, 3, 4), in[0]); }),
    row("adaptive_avg_pool2d/up_unbatched_global", {"adaptive_avg_pool2d"}, {{2, 3, 4}},
        [](const V& in) {
          return of::adaptive_avg_pool2d(in[0], {5, 7}) + of::adaptive_avg_pool2d(in[0], 1);
        },
        [](const R& in) {
          const Ref x = add_batch(in[0]);
          Ref a = apply(lin_adaptive(x.shape, 5, 7), x);
          Ref g = apply(lin_adaptive(x.shape, 1, 1), x);
          for (int64_t i = 0; i < a.numel(); ++i) a.v[size_t(i)] += g.v[size_t(a.index(i)[1])];
          return drop_batch(a);
        }),
    row("adaptive_avg_pool2d_backward", {"adaptive_avg_pool2d_backward"}, {{1, 2, 3, 4}},
        [](const V& in) {
          return resample_bw("adaptive_avg_pool2d_backward", in[0], {of::DimVector{3, 4}},
                             {1, 2, 7, 5});
        },
        [](const R& in) { return apply_adjoint(lin_adaptive({1, 2, 7, 5}, 3, 4), in[0]); }),
    row("upsample_nearest2d/up_odd", {"upsample_nearest2d"}, {{2, 2, 3, 4}},
        [](const V& in) { return of::upsample_nearest2d(in[0], {5, 7}); },
        [](const R& in) { return apply(lin_nearest(in[0].shape, 5, 7), in[0]); }),
    row("upsample_nearest2d/x2_and_down", {"upsample_nearest2d"}, {{1, 2, 4, 6}},
        [](const V& in) {
          return of::upsample_nearest2d(in[0], {8, 12}) +
                 of::upsample_nearest2d(in[0], {3, 4}).sum();
        },
        [](const R& in) {
          Ref a = apply(lin_nearest(in[0].shape, 8, 12), in[0]);
          Ref d = apply(lin_nearest(in[0].shape, 3, 4), in[0]);
          double s = 0;
          for (double e : d.v) s += e;
          for (double& e : a.v) e += s;
          return a;
        }),
    row("upsample_nearest2d_backward", {"upsample_nearest2d_backward"}, {{2, 1, 5, 7}},
        [](const V& in) {
          return resample_bw("upsample_nearest2d_backward", in[0], {of::DimVector{5, 7}, 0.0, 0.0},
                             {2, 1, 3, 4});
        },
        [](const R& in) { return apply_adjoint(lin_nearest({2, 1, 3, 4}, 5, 7), in[0]); }),
    row("upsample_bilinear2d/up", {"upsample_bilinear2d"}, {{2, 2, 3, 4}},
        [](const V& in) { return of::upsample_bilinear2d(in[0], {5, 7}, false); },
        [](const R& in) { return apply(lin_bilinear(in[0].shape, 5, 7, false), in[0]); }),
    row("upsample_bilinear2d/align_corners", {"upsample_bilinear2d"}, {{1, 3, 4, 3}},
        [](const V& in) { return of::upsample_bilinear2d(in[0], {7, 5}, true); },
        [](const R& in) { return apply(lin_bilinear(in[0].shape, 7, 5, true), in[0]); }),
    row("upsample_bilinear2d/down_and_single", {"upsample_bilinear2d"}, {{1, 2, 7, 6}},
        [](const V& in) {
          return of::upsample_bilinear2d(in[0], {3, 4}, false) +
                 of::upsample_bilinear2d(in[0], {1, 1}, true).sum();
        },
        [](const R& in) {
          Ref a = apply(lin_bilinear(in[0].shape, 3, 4, false), in[0]);
          Ref o = apply(lin_bilinear(in[0].shape, 1, 1, true), in[0]);
          double s = 0;
          for (double e : o.v) s += e;
          for (double& e : a.v) e += s;
          return a;
        }),
    row("upsample_nearest2d/scales", {"upsample_nearest2d"}, {{1, 2, 5, 4}},
        [](const V& in) { return of::upsample_nearest2d(in[0], {7, 10}, 1.5, 2.7); },
        [](const R& in) { return apply(lin_nearest(in[0].shape, 7, 10, 1.5, 2.7), in[0]); }),
    row("upsample_bilinear2d/scales", {"upsample_bilinear2d"}, {{1, 2, 5, 4}},
        [](const V& in) { return of::upsample_bilinear2d(in[0], {7, 10}, false, 1.5, 2.7); },
        [](const R& in) {
          return apply(lin_bilinear(in[0].shape, 7, 10, false, 1.5, 2.7), in[0]);
        }),
    row("upsample_bilinear2d/unbatched", {"upsample_bilinear2d"}, {{2, 3, 3}},
        [](const V& in) { return of::upsample_bilinear2d(in[0], {4, 6}, false); },
        [](const R& in) {
          const Ref x = add_batch(in[0]);
          return drop_batch(apply(lin_bilinear(x.shape, 4, 6, false), x));
        }),
    row("upsample_bilinear2d_backward", {"upsample_bilinear2d_backward"}, {{1, 2, 5, 7}},
        [](const V& in) {
          return resample_bw("upsample_bilinear2d_backward", in[0],
                             {of::DimVector{5, 7}, true, 0.0, 0.0}, {1, 2, 3, 4});
        },
        [](const R& in) { return apply_adjoint(lin_bilinear({1, 2, 3, 4}, 5, 7, true), in[0]); }),
});
// clang-format on

T uniform(Shape s, uint64_t seed) {
  of::manual_seed(seed);
  return of::rand(s, of::kFloat64) * 4 - 2;
}

bool close(const T& a, const T& b, double tol) {
  return a.sizes() == b.sizes() && of::allclose(a.to(of::kFloat64), b.to(of::kFloat64), tol, tol);
}

}  // namespace

TEST_CASE("conv: max_pool2d_with_indices returns flat H*W indices") {
  T x = uniform({2, 3, 7, 6}, 3);
  auto [y, idx] = of::max_pool2d_with_indices(x, 3, 2, 1, 1, true);
  auto [ry, ridx] = ref_max_pool(th::to_ref(x), 3, 3, 2, 2, 1, 1, 1, 1, true);
  CHECK(idx.dtype() == of::kInt64);
  CHECK(th::compare(y, ry, 0, 0) == "");
  CHECK(th::compare(idx.to(of::kFloat64), ridx, 0, 0) == "");
  // The values gathered from the flattened planes at the indices are the maxima.
  T g = x.flatten(2).gather(2, idx.flatten(2)).view(y.sizes());
  CHECK(of::equal(g, y));
  // NaN propagates and is reported at its own position.
  T z = of::zeros({1, 1, 2, 2}, of::kFloat64);
  z.view({4})[3].fill_(std::nan(""));
  auto [zy, zi] = of::max_pool2d_with_indices(z, 2);
  CHECK(std::isnan(zy.item<double>()));
  CHECK(zi.item<int64_t>() == 3);
}

TEST_CASE("conv: conv2d results do not depend on the thread count") {
  const int prev = of::get_num_threads();
  T x = uniform({5, 4, 9, 8}, 11).to(of::kFloat32), w = uniform({6, 2, 3, 3}, 12).to(of::kFloat32);
  T b = uniform({6}, 13).to(of::kFloat32);
  auto run = [&] {
    T xx = x.detach().clone().requires_grad_(), ww = w.detach().clone().requires_grad_();
    T y = of::conv2d(xx, ww, b, 2, 1, 1, 2);
    (y * y).sum().backward();
    return std::tuple<T, T, T>{y.detach(), xx.grad(), ww.grad()};
  };
  of::set_num_threads(1);
  auto [y1, gx1, gw1] = run();
  of::set_num_threads(2);
  auto [y2, gx2, gw2] = run();
  auto [y3, gx3, gw3] = run();
  of::set_num_threads(prev);
  CHECK(close(y1, y2, 1e-5));
  CHECK(close(gx1, gx2, 1e-5));
  CHECK(close(gw1, gw2, 1e-4));
  // same thread count: bitwise equal
  CHECK(of::equal(y2, y3));
  CHECK(of::equal(gx2, gx3));
  CHECK(of::equal(gw2, gw3));
}

TEST_CASE("conv: float16 and bfloat16 compute in float32") {
  T x = uniform({2, 3, 6, 6}, 5).to(of::kFloat32), w = uniform({4, 3, 3, 3}, 6).to(of::kFloat32);
  for (of::ScalarType dt : {of::kFloat16, of::kBFloat16}) {
    T xh = x.to(dt), wh = w.to(dt);
    T y = of::conv2d(xh, wh, {}, 1, 1);
    CHECK(y.dtype() == dt);
    T expect = of::conv2d(xh.to(of::kFloat32), wh.to(of::kFloat32), {}, 1, 1);
    CHECK(close(y, expect, dt == of::kFloat16 ? 2e-2 : 1e-1));
    CHECK(of::max_pool2d(xh, 2).dtype() == dt);
    CHECK(of::avg_pool2d(xh, 2).dtype() == dt);
    CHECK(of::upsample_bilinear2d(xh, {9, 9}, false).dtype() == dt);
  }
}

TEST_CASE("conv: second-order gradient of conv2d through conv_transpose2d") {
  T x = uniform({2, 2, 5, 4}, 21), w = uniform({3, 2, 3, 2}, 22);
  auto fn = [](const std::vector<T>& in) {
    of::EnableGradGuard eg;  // finite differences evaluate fn under no_grad
    T xx = in[0].detach().clone().requires_grad_();
    T y = of::conv2d(xx, in[1], {}, 2, 1);
    T gx = of::autograd::grad({(y * y).sum()}, {xx}, {}, std::nullopt, true)[0];
    return gx;
  };
  CHECK(th::gradcheck(fn, {x, w}, {0}) == "");
}

TEST_CASE("conv: error messages name the op and the offending values") {
  T x = of::zeros({2, 3, 5, 5}), w = of::zeros({4, 3, 3, 3});
  CHECK(th::throws_with(
      [&] {
        of::conv2d(x, of::zeros({4, 2, 3, 3}));
      },
      {"[conv2d]", "(2, 3, 5, 5)", "(4, 2, 3, 3)", "groups=1"}));
  CHECK(th::throws_with(
      [&] {
        of::conv2d(x, of::zeros({4, 1, 3, 3}), {}, 1, 0, 1, 2);
      },
      {"[conv2d]", "groups=2", "(2, 3, 5, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv2d(of::zeros({2, 3, 5}).unsqueeze(0).unsqueeze(0), w);
      },
      {"[conv2d]", "(1, 1, 2, 3, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv2d(x, of::zeros({4, 3, 3}));
      },
      {"[conv2d]", "4-D weight", "(4, 3, 3)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv2d(x, of::zeros({4, 3, 7, 3}));
      },
      {"[conv2d]", "(7, 3)", "(5, 5)", "(2, 3, 5, 5)"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, {}, 0); }, {"[conv2d]", "stride", "(0, 0)"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, {}, {1, 2, 3}); }, {"[conv2d]", "stride", "3"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, {}, 1, -1); }, {"[conv2d]", "padding", "(-1, -1)"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, {}, 1, 0, 0); }, {"[conv2d]", "dilation"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, {}, 1, 0, 1, 0); }, {"[conv2d]", "groups", "0"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w.to(of::kFloat64)); },
                        {"[conv2d]", "float32", "float64", "(2, 3, 5, 5)"}));
  CHECK(th::throws_with([&] { of::conv2d(x.to(of::kInt64), w); }, {"[conv2d]", "int64"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, of::zeros({5})); }, {"[conv2d]", "bias", "(5,)"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, {}, 2, "same"); }, {"[conv2d]", "same", "stride"}));
  CHECK(th::throws_with([&] { of::conv2d(x, w, {}, 1, "full"); }, {"[conv2d]", "full"}));
  CHECK(th::throws_with(
      [&] {
        of::conv1d(of::zeros({2, 3, 4}), of::zeros({1, 3, 6}));
      },
      {"[conv1d]", "(2, 3, 4)", "6"}));
  CHECK(th::throws_with(
      [&] {
        of::conv1d(of::zeros({2, 3, 4, 4}), of::zeros({1, 3, 2}));
      },
      {"[conv1d]", "(2, 3, 4, 4)"}));
  CHECK(th::throws_with([&] { of::conv_transpose2d(x, w); },
                        {"[conv_transpose2d]", "(4, 3, 3, 3)", "(2, 3, 5, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv_transpose2d(x, of::zeros({3, 2, 3, 3}), {}, 1, 0, 1);
      },
      {"[conv_transpose2d]", "output_padding"}));
  CHECK(th::throws_with(
      [&] {
        of::conv_transpose2d(of::zeros({1, 3, 1, 1}), of::zeros({3, 2, 1, 1}), {}, 1, 1);
      },
      {"[conv_transpose2d]", "non-positive", "(-1, -1)"}));
  CHECK(th::throws_with([&] { of::max_pool2d(x, 0); }, {"[max_pool2d]", "kernel_size"}));
  CHECK(th::throws_with([&] { of::max_pool2d(x, 2, 1, 2); },
                        {"[max_pool2d]", "padding", "(2, 2)", "half"}));
  CHECK(th::throws_with(
      [&] {
        of::max_pool2d(of::zeros({1, 1, 2, 2}), 3);
      },
      {"[max_pool2d]", "(1, 1, 2, 2)", "too small"}));
  CHECK(th::throws_with([&] { of::max_pool2d(of::zeros({5}), 1); }, {"[max_pool2d]", "(5,)"}));
  CHECK(th::throws_with([&] { of::max_pool2d(x.to(of::kInt32), 2); }, {"[max_pool2d]", "int32"}));
  CHECK(th::throws_with([&] { of::max_pool2d_with_indices(x, 2, 0); },
                        {"[max_pool2d_with_indices]", "stride", "(0, 0)"}));
  CHECK(th::throws_with([&] { of::avg_pool2d(x, 2, -1); }, {"[avg_pool2d]", "stride", "(-1, -1)"}));
  CHECK(th::throws_with([&] { of::avg_pool2d(x, 2, {}, 0, false, true, 0); },
                        {"[avg_pool2d]", "divisor_override", "0"}));
  CHECK(th::throws_with([&] { of::avg_pool2d(x, 6); },
                        {"[avg_pool2d]", "(2, 3, 5, 5)", "too small"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_avg_pool2d(x, {0, 2});
      },
      {"[adaptive_avg_pool2d]", "output_size", "(0, 2)"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_avg_pool2d(of::zeros({2, 3, 0, 4}), 2);
      },
      {"[adaptive_avg_pool2d]", "(2, 3, 0, 4)"}));
  CHECK(th::throws_with(
      [&] {
        of::upsample_nearest2d(x, {4, -1});
      },
      {"[upsample_nearest2d]", "(4, -1)"}));
  CHECK(th::throws_with(
      [&] {
        of::upsample_bilinear2d(x.to(of::kInt64), {4, 4}, false);
      },
      {"[upsample_bilinear2d]", "int64"}));
  CHECK(th::throws_with(
      [&] {
        of::upsample_bilinear2d(of::zeros({2, 3}), {4, 4}, false);
      },
      {"[upsample_bilinear2d]", "(2, 3)"}));
  // no state change on failure: a leaf that requires grad is left without a grad_fn or .grad
  T xl = of::zeros({2, 3, 5, 5}).requires_grad_();
  CHECK(th::throws_with([&] { of::conv2d(xl, of::zeros({4, 2, 3, 3})); }, {"[conv2d]"}));
  CHECK(!xl.grad().defined());
}

// test_conv3d.cpp: 1-D and 3-D convolution and pooling, adaptive pools (src/ops/nn_conv.cpp).
// Table rows compare each op with float64 plain-loop references written for any spatial rank
// (direct sums over windows, independent of the vol2col/GEMM, window-max and separable-map
// kernels); plain cases cover indices, unbatched inputs, second order and error messages.
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
// Sums of many float32 products.
OpRow loose(OpRow r) {
  r.rtol = 1e-4;
  r.atol = 1e-4;
  return r;
}

int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t pool_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
  int64_t o = floordiv(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}
int64_t prod(const Shape& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}
// Multi-index of flat position i in a box of extents `ext`.
Shape unflat(int64_t i, const Shape& ext) {
  Shape r(ext.size());
  for (size_t d = ext.size(); d-- > 0;) {
    r[d] = i % ext[d];
    i /= ext[d];
  }
  return r;
}
Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }
Shape cat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Per-dim convolution parameters (one value per spatial dim).
struct CP {
  Shape s, p, d, op;
  int64_t groups = 1;
};
CP cp(size_t n, int64_t s = 1, int64_t p = 0, int64_t d = 1, int64_t groups = 1, int64_t op = 0) {
  return {Shape(n, s), Shape(n, p), Shape(n, d), Shape(n, op), groups};
}

// y[n, m, o...] = b[m] + sum_{c, k...} x[n, g*Cg + c, o*s - p + k*d] * w[m, c, k...]
Ref ref_conv(const Ref& x, const Ref& w, const Ref* b, const CP& c) {
  const size_t S = x.shape.size() - 2;
  const int64_t N = x.shape[0], M = w.shape[0], Cg = w.shape[1], Mg = M / c.groups;
  const Shape in = spatial(x.shape), k = spatial(w.shape);
  Shape out(S);
  for (size_t i = 0; i < S; ++i)
    out[i] = (in[i] + 2 * c.p[i] - c.d[i] * (k[i] - 1) - 1) / c.s[i] + 1;
  Ref y(cat({N, M}, out));
  for (int64_t f = 0; f < y.numel(); ++f) {
    const Shape o = y.index(f);
    double acc = b ? b->v[size_t(o[1])] : 0.0;
    const int64_t g = o[1] / Mg;
    for (int64_t ci = 0; ci < Cg; ++ci)
      for (int64_t t = 0; t < prod(k); ++t) {
        const Shape kk = unflat(t, k);
        Shape xi{o[0], g * Cg + ci};
        bool ok = true;
        for (size_t i = 0; i < S; ++i) {
          const int64_t v = o[2 + i] * c.s[i] - c.p[i] + kk[i] * c.d[i];
          ok = ok && v >= 0 && v < in[i];
          xi.push_back(v);
        }
        if (ok) acc += x.at(xi) * w.at(cat({o[1], ci}, kk));
      }
    y.v[size_t(f)] = acc;
  }
  (void)N;
  return y;
}

// Scatter form: x[n, ci, i...] * w[ci, co, k...] lands on y[n, g*Cog + co, i*s - p + k*d].
Ref ref_conv_t(const Ref& x, const Ref& w, const Ref* b, const CP& c) {
  const size_t S = x.shape.size() - 2;
  const int64_t N = x.shape[0], Cin = x.shape[1], Cog = w.shape[1], Cig = Cin / c.groups;
  const Shape in = spatial(x.shape), k = spatial(w.shape);
  Shape out(S);
  for (size_t i = 0; i < S; ++i)
    out[i] = (in[i] - 1) * c.s[i] - 2 * c.p[i] + c.d[i] * (k[i] - 1) + c.op[i] + 1;
  Ref y(cat({N, Cog * c.groups}, out));
  for (int64_t f = 0; f < x.numel(); ++f) {
    const Shape xi = x.index(f);
    const int64_t g = xi[1] / Cig;
    for (int64_t co = 0; co < Cog; ++co)
      for (int64_t t = 0; t < prod(k); ++t) {
        const Shape kk = unflat(t, k);
        Shape yi{xi[0], g * Cog + co};
        bool ok = true;
        for (size_t i = 0; i < S; ++i) {
          const int64_t v = xi[2 + i] * c.s[i] - c.p[i] + kk[i] * c.d[i];
          ok = ok && v >= 0 && v < out[i];
          yi.push_back(v);
        }
        if (ok) y.v[size_t(y.flat(yi))] += x.v[size_t(f)] * w.at(cat({xi[1], co}, kk));
      }
  }
  if (b)
    for (int64_t i = 0; i < y.numel(); ++i) y.v[size_t(i)] += b->v[size_t(y.index(i)[1])];
  return y;
}

// dW[m, c, k...] = sum_{n, o...} dy[n, m, o...] * x[n, g*Cg + c, o*s - p + k*d]
Ref ref_conv_wgrad(const Ref& dy, const Ref& x, const Shape& wsz, const CP& c) {
  const size_t S = x.shape.size() - 2;
  const int64_t Cg = wsz[1], Mg = wsz[0] / c.groups;
  const Shape in = spatial(x.shape);
  Ref dw(wsz);
  for (int64_t f = 0; f < dy.numel(); ++f) {
    const Shape o = dy.index(f);
    const int64_t g = o[1] / Mg;
    for (int64_t wi = 0; wi < dw.numel(); ++wi) {
      const Shape ww = dw.index(wi);
      if (ww[0] != o[1]) continue;
      Shape xi{o[0], g * Cg + ww[1]};
      bool ok = true;
      for (size_t i = 0; i < S; ++i) {
        const int64_t v = o[2 + i] * c.s[i] - c.p[i] + ww[2 + i] * c.d[i];
        ok = ok && v >= 0 && v < in[i];
        xi.push_back(v);
      }
      if (ok) dw.v[size_t(wi)] += dy.v[size_t(f)] * x.at(xi);
    }
  }
  return dw;
}

// Max over the dilated window (NaN wins, first maximum kept), with its index flat over the
// spatial dims.
std::pair<Ref, Ref> ref_max_pool(const Ref& x, const Shape& k, const Shape& s, const Shape& p,
                                 const Shape& d, bool ceil_mode) {
  const size_t S = k.size();
  const Shape in = spatial(x.shape);
  Shape out(S);
  for (size_t i = 0; i < S; ++i) out[i] = pool_size(in[i], k[i], p[i], s[i], d[i], ceil_mode);
  Ref y(cat({x.shape[0], x.shape[1]}, out)), idx(y.shape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    const Shape o = y.index(f);
    double best = -INFINITY;
    int64_t bi = -1;
    for (int64_t t = 0; t < prod(k); ++t) {
      const Shape kk = unflat(t, k);
      Shape xi{o[0], o[1]};
      bool ok = true;
      int64_t flat = 0;
      for (size_t i = 0; i < S; ++i) {
        const int64_t v = o[2 + i] * s[i] - p[i] + kk[i] * d[i];
        ok = ok && v >= 0 && v < in[i];
        xi.push_back(v);
        flat = flat * in[i] + v;
      }
      if (!ok) continue;
      const double v = x.at(xi);
      if (bi < 0 || v > best || std::isnan(v)) {
        best = v;
        bi = flat;
      }
    }
    y.v[size_t(f)] = best;
    idx.v[size_t(f)] = double(bi);
  }
  return {y, idx};
}

// Adaptive windows [floor(o*in/out), ceil((o+1)*in/out)) per dim: average or max (+ index).
std::pair<Ref, Ref> ref_adaptive(const Ref& x, const Shape& out, bool max) {
  const size_t S = out.size();
  const Shape in = spatial(x.shape);
  Ref y(cat({x.shape[0], x.shape[1]}, out)), idx(y.shape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    const Shape o = y.index(f);
    Shape lo(S), ext(S);
    for (size_t i = 0; i < S; ++i) {
      lo[i] = int64_t(std::floor(double(o[2 + i] * in[i]) / double(out[i])));
      ext[i] = int64_t(std::ceil(double((o[2 + i] + 1) * in[i]) / double(out[i]))) - lo[i];
    }
    double acc = 0, best = -INFINITY;
    int64_t bi = -1;
    for (int64_t t = 0; t < prod(ext); ++t) {
      const Shape kk = unflat(t, ext);
      Shape xi{o[0], o[1]};
      int64_t flat = 0;
      for (size_t i = 0; i < S; ++i) {
        xi.push_back(lo[i] + kk[i]);
        flat = flat * in[i] + lo[i] + kk[i];
      }
      const double v = x.at(xi);
      acc += v;
      if (bi < 0 || v > best || std::isnan(v)) {
        best = v;
        bi = flat;
      }
    }
    y.v[size_t(f)] = max ? best : acc / double(prod(ext));
    idx.v[size_t(f)] = double(bi);
  }
  return {y, idx};
}

// A linear map as (output flat index, input flat index, weight) entries.
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

// PyTorch's avg_pool: the divisor counts the window clipped to the padded input
// (count_include_pad) or to the input; divisor_override replaces both.
Lin lin_avg_pool(const Shape& inshape, const Shape& k, const Shape& s, const Shape& p,
                 bool ceil_mode, bool include_pad, std::optional<int64_t> div) {
  const size_t S = k.size();
  const Shape in = spatial(inshape);
  Shape out(S);
  for (size_t i = 0; i < S; ++i) out[i] = pool_size(in[i], k[i], p[i], s[i], 1, ceil_mode);
  Lin l{inshape, cat({inshape[0], inshape[1]}, out), {}};
  Ref y(l.out), xr(inshape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    const Shape o = y.index(f);
    Shape lo(S), hi(S);
    int64_t padded = 1, valid = 1;
    for (size_t i = 0; i < S; ++i) {
      lo[i] = o[2 + i] * s[i] - p[i];
      hi[i] = std::min(lo[i] + k[i], in[i] + p[i]);
      padded *= hi[i] - lo[i];
      lo[i] = std::max<int64_t>(lo[i], 0);
      hi[i] = std::min(hi[i], in[i]);
      valid *= hi[i] - lo[i];
    }
    const double dv = div ? double(*div) : double(include_pad ? padded : valid);
    Shape ext(S);
    for (size_t i = 0; i < S; ++i) ext[i] = hi[i] - lo[i];
    for (int64_t t = 0; t < prod(ext); ++t) {
      const Shape kk = unflat(t, ext);
      Shape xi{o[0], o[1]};
      for (size_t i = 0; i < S; ++i) xi.push_back(lo[i] + kk[i]);
      l.e.emplace_back(f, xr.flat(xi), 1.0 / dv);
    }
  }
  return l;
}

Lin lin_adaptive(const Shape& inshape, const Shape& out) {
  const size_t S = out.size();
  const Shape in = spatial(inshape);
  Lin l{inshape, cat({inshape[0], inshape[1]}, out), {}};
  Ref y(l.out), xr(inshape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    const Shape o = y.index(f);
    Shape lo(S), ext(S);
    for (size_t i = 0; i < S; ++i) {
      lo[i] = (o[2 + i] * in[i]) / out[i];
      ext[i] = ((o[2 + i] + 1) * in[i] + out[i] - 1) / out[i] - lo[i];
    }
    for (int64_t t = 0; t < prod(ext); ++t) {
      const Shape kk = unflat(t, ext);
      Shape xi{o[0], o[1]};
      for (size_t i = 0; i < S; ++i) xi.push_back(lo[i] + kk[i]);
      l.e.emplace_back(f, xr.flat(xi), 1.0 / double(prod(ext)));
    }
  }
  return l;
}

Ref add_batch(const Ref& r) { return Ref(cat({1}, r.shape), r.v); }
Ref drop_batch(const Ref& r) { return Ref(Shape(r.shape.begin() + 1, r.shape.end()), r.v); }

of::DimVector dv(const Shape& s) { return of::DimVector(s.begin(), s.end()); }
T conv3d_bw_weight(const T& dy, const T& x, of::DimVector wsz, const CP& c) {
  return of::dispatch1(of::find_op("conv3d_backward_weight"), {dy, x},
                       {dv(c.s), dv(c.p), dv(c.d), c.groups, wsz});  // the family's order
}
T resample_bw(const char* op, const T& g, of::Attrs a, of::DimVector in) {
  a.values.push_back(in);
  return of::dispatch1(of::find_op(op), {g}, a);
}

// ---------------------------------------------------------------- conv rows

// clang-format off
TH_ROWS({
    loose(row("conv3d/basic_bias", {"conv3d"}, {{2, 3, 4, 5, 4}, {4, 3, 2, 3, 2}, {4}},
              [](const V& in) { return of::conv3d(in[0], in[1], in[2]); },
              [](const R& in) { return ref_conv(in[0], in[1], &in[2], cp(3)); })),
    loose(row("conv3d/stride_padding_dilation_rect", {"conv3d"},
              {{1, 2, 5, 6, 5}, {3, 2, 2, 3, 2}, {3}},
              [](const V& in) {
                return of::conv3d(in[0], in[1], in[2], {2, 1, 2}, {1, 0, 2}, {2, 1, 1});
              },
              [](const R& in) {
                return ref_conv(in[0], in[1], &in[2],
                                {{2, 1, 2}, {1, 0, 2}, {2, 1, 1}, {0, 0, 0}, 1});
              })),
    loose(row("conv3d/groups_batch5", {"conv3d"}, {{5, 4, 3, 4, 3}, {6, 2, 2, 2, 2}},
              [](const V& in) { return of::conv3d(in[0], in[1], {}, 1, 1, 1, 2); },
              [](const R& in) { return ref_conv(in[0], in[1], nullptr, cp(3, 1, 1, 1, 2)); })),
    loose(row("conv3d/1x1x1", {"conv3d"}, {{2, 3, 3, 2, 4}, {5, 3, 1, 1, 1}, {5}},
              [](const V& in) { return of::conv3d(in[0], in[1], in[2]); },
              [](const R& in) { return ref_conv(in[0], in[1], &in[2], cp(3)); })),
    loose(row("conv3d/unbatched_same", {"conv3d", "pad"}, {{2, 4, 3, 4}, {3, 2, 2, 3, 3}, {3}},
              [](const V& in) { return of::conv3d(in[0], in[1], in[2], 1, "same"); },
              [](const R& in) {
                // total padding (1, 2, 2): the odd unit of depth goes at the end
                const Ref& x = in[0];
                Ref xp({1, 2, 5, 5, 6});
                for (int64_t i = 0; i < x.numel(); ++i) {
                  Shape idx = x.index(i);
                  xp.v[size_t(xp.flat({0, idx[0], idx[1], idx[2] + 1, idx[3] + 1}))] = x.v[size_t(i)];
                }
                return drop_batch(ref_conv(xp, in[1], &in[2], cp(3)));
              })),
    loose(row("conv_transpose3d/stride_padding_output_padding", {"conv_transpose3d"},
              {{2, 3, 3, 2, 3}, {3, 2, 2, 3, 2}, {2}},
              [](const V& in) {
                return of::conv_transpose3d(in[0], in[1], in[2], {2, 1, 2}, {1, 0, 1}, {1, 0, 0});
              },
              [](const R& in) {
                return ref_conv_t(in[0], in[1], &in[2],
                                  {{2, 1, 2}, {1, 0, 1}, {1, 1, 1}, {1, 0, 0}, 1});
              })),
    loose(row("conv_transpose3d/groups_dilation_unbatched", {"conv_transpose3d"},
              {{4, 2, 3, 2}, {4, 1, 2, 2, 2}},
              [](const V& in) {
                return of::conv_transpose3d(in[0], in[1], {}, 1, 0, 0, 2, {1, 2, 1});
              },
              [](const R& in) {
                return drop_batch(ref_conv_t(add_batch(in[0]), in[1], nullptr,
                                             {{1, 1, 1}, {0, 0, 0}, {1, 2, 1}, {0, 0, 0}, 2}));
              })),
    loose(row("conv3d_backward_weight/groups_stride", {"conv3d_backward_weight"},
              {{2, 4, 3, 3, 3}, {2, 2, 4, 5, 4}},
              [](const V& in) {
                return conv3d_bw_weight(in[0], in[1], {4, 1, 2, 2, 2}, cp(3, 2, 1, 1, 2));
              },
              [](const R& in) {
                return ref_conv_wgrad(in[0], in[1], {4, 1, 2, 2, 2}, cp(3, 2, 1, 1, 2));
              })),
    loose(row("conv_transpose1d/stride_padding_output_padding", {"conv_transpose2d"},
              {{2, 3, 5}, {3, 2, 3}, {2}},
              [](const V& in) { return of::conv_transpose1d(in[0], in[1], in[2], 2, 1, 1); },
              [](const R& in) { return ref_conv_t(in[0], in[1], &in[2], cp(1, 2, 1, 1, 1, 1)); })),
    loose(row("conv_transpose1d/groups_dilation_unbatched", {"conv_transpose2d"},
              {{4, 6}, {4, 3, 2}},
              [](const V& in) { return of::conv_transpose1d(in[0], in[1], {}, 1, 1, 0, 2, 2); },
              [](const R& in) {
                return drop_batch(ref_conv_t(add_batch(in[0]), in[1], nullptr, cp(1, 1, 1, 2, 2)));
              })),
});
// clang-format on

// ---------------------------------------------------------------- pooling rows

// clang-format off
TH_ROWS({
    row("max_pool1d/k3s2_pad_ceil", {"max_pool2d_with_indices"}, {{2, 3, 9}},
        [](const V& in) { return of::max_pool1d(in[0], 3, 2, 1, 1, true); },
        [](const R& in) { return ref_max_pool(in[0], {3}, {2}, {1}, {2 - 1}, true).first; }),
    row("max_pool1d/dilation_unbatched", {"max_pool2d_with_indices"}, {{3, 10}},
        [](const V& in) { return of::max_pool1d(in[0], 2, 1, 0, 3); },
        [](const R& in) {
          return drop_batch(ref_max_pool(add_batch(in[0]), {2}, {1}, {0}, {3}, false).first);
        }),
    row("max_pool3d/k2", {"max_pool3d_with_indices"}, {{2, 2, 4, 5, 4}},
        [](const V& in) { return of::max_pool3d(in[0], 2); },
        [](const R& in) { return ref_max_pool(in[0], {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false).first; }),
    row("max_pool3d/pad_dilation_ceil_rect", {"max_pool3d_with_indices"}, {{1, 2, 5, 6, 7}},
        [](const V& in) { return of::max_pool3d(in[0], {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, true); },
        [](const R& in) {
          return ref_max_pool(in[0], {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, true).first;
        }),
    row("max_pool3d_with_indices/unbatched", {"max_pool3d_with_indices"}, {{2, 4, 4, 3}},
        [](const V& in) { return std::get<0>(of::max_pool3d_with_indices(in[0], 2, 1)); },
        [](const R& in) {
          return drop_batch(
              ref_max_pool(add_batch(in[0]), {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, false).first);
        }),
    row("avg_pool1d/pad_ceil_exclude_pad", {"avg_pool2d"}, {{2, 3, 8}},
        [](const V& in) { return of::avg_pool1d(in[0], 3, 2, 1, true, false); },
        [](const R& in) { return apply(lin_avg_pool(in[0].shape, {3}, {2}, {1}, true, false, {}), in[0]); }),
    row("avg_pool1d/unbatched_include_pad", {"avg_pool2d"}, {{3, 7}},
        [](const V& in) { return of::avg_pool1d(in[0], 4, 1, 2); },
        [](const R& in) {
          return drop_batch(apply(lin_avg_pool(add_batch(in[0]).shape, {4}, {1}, {2}, false, true, {}),
                                  add_batch(in[0])));
        }),
    row("avg_pool3d/k2", {"avg_pool3d"}, {{2, 3, 4, 4, 5}},
        [](const V& in) { return of::avg_pool3d(in[0], 2); },
        [](const R& in) {
          return apply(lin_avg_pool(in[0].shape, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false, true, {}), in[0]);
        }),
    row("avg_pool3d/pad_ceil_exclude_pad_rect", {"avg_pool3d"}, {{1, 2, 5, 6, 5}},
        [](const V& in) { return of::avg_pool3d(in[0], {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, true, false); },
        [](const R& in) {
          return apply(lin_avg_pool(in[0].shape, {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, true, false, {}), in[0]);
        }),
    row("avg_pool3d/divisor_unbatched", {"avg_pool3d"}, {{2, 4, 3, 5}},
        [](const V& in) { return of::avg_pool3d(in[0], 2, 1, 1, false, true, 5); },
        [](const R& in) {
          const Ref x = add_batch(in[0]);
          return drop_batch(apply(lin_avg_pool(x.shape, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false, true, 5), x));
        }),
    row("avg_pool3d_backward/pad_ceil", {"avg_pool3d_backward"}, {{1, 2, 3, 7, 3}},
        [](const V& in) {
          return resample_bw("avg_pool3d_backward", in[0],
                             {of::DimVector{3, 2, 3}, of::DimVector{2, 1, 2}, of::DimVector{1, 1, 1},
                              true, false, int64_t(0)},
                             {1, 2, 5, 6, 5});
        },
        [](const R& in) {
          return apply_adjoint(lin_avg_pool({1, 2, 5, 6, 5}, {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, true, false, {}),
                               in[0]);
        }),
    row("adaptive_avg_pool1d/uneven", {"adaptive_avg_pool2d"}, {{2, 3, 7}},
        [](const V& in) { return of::adaptive_avg_pool1d(in[0], 3); },
        [](const R& in) { return ref_adaptive(in[0], {3}, false).first; }),
    row("adaptive_avg_pool3d/uneven", {"adaptive_avg_pool3d"}, {{2, 2, 5, 4, 7}},
        [](const V& in) { return of::adaptive_avg_pool3d(in[0], {2, 3, 3}); },
        [](const R& in) { return ref_adaptive(in[0], {2, 3, 3}, false).first; }),
    row("adaptive_avg_pool3d/upsample_unbatched", {"adaptive_avg_pool3d"}, {{2, 2, 3, 2}},
        [](const V& in) { return of::adaptive_avg_pool3d(in[0], 4); },
        [](const R& in) { return drop_batch(ref_adaptive(add_batch(in[0]), {4, 4, 4}, false).first); }),
    row("adaptive_avg_pool3d_backward/uneven", {"adaptive_avg_pool3d_backward"}, {{1, 2, 2, 3, 2}},
        [](const V& in) {
          return resample_bw("adaptive_avg_pool3d_backward", in[0], {of::DimVector{2, 3, 2}},
                             {1, 2, 5, 4, 3});
        },
        [](const R& in) { return apply_adjoint(lin_adaptive({1, 2, 5, 4, 3}, {2, 3, 2}), in[0]); }),
    row("adaptive_max_pool1d/uneven_unbatched", {"adaptive_max_pool2d"}, {{3, 7}},
        [](const V& in) { return std::get<0>(of::adaptive_max_pool1d(in[0], 3)); },
        [](const R& in) { return drop_batch(ref_adaptive(add_batch(in[0]), {3}, true).first); }),
    row("adaptive_max_pool2d/uneven", {"adaptive_max_pool2d"}, {{2, 3, 5, 7}},
        [](const V& in) { return std::get<0>(of::adaptive_max_pool2d(in[0], {3, 4})); },
        [](const R& in) { return ref_adaptive(in[0], {3, 4}, true).first; }),
    row("adaptive_max_pool3d/uneven", {"adaptive_max_pool3d"}, {{2, 2, 5, 4, 6}},
        [](const V& in) { return std::get<0>(of::adaptive_max_pool3d(in[0], {2, 3, 4})); },
        [](const R& in) { return ref_adaptive(in[0], {2, 3, 4}, true).first; }),
});
// clang-format on

T uniform(Shape s, uint64_t seed) {
  of::manual_seed(seed);
  return of::rand(s, of::kFloat64) * 4 - 2;
}

}  // namespace

TEST_CASE("conv3d: pooling indices are flat over the spatial dims, as libtorch's") {
  T x = uniform({2, 3, 5, 6, 4}, 3);
  auto [y, idx] = of::max_pool3d_with_indices(x, 3, 2, 1, 1, true);
  auto [ry, ridx] = ref_max_pool(th::to_ref(x), {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, true);
  CHECK(idx.dtype() == of::kInt64);
  CHECK(th::compare(y, ry, 0, 0) == "");
  CHECK(th::compare(idx.to(of::kFloat64), ridx, 0, 0) == "");
  CHECK(of::equal(x.flatten(2).gather(2, idx.flatten(2)).view(y.sizes()), y));
  CHECK(of::equal(of::max_pool3d(x, 3, 2, 1, 1, true), y));

  T x1 = uniform({2, 3, 11}, 4);
  auto [y1, i1] = of::max_pool1d_with_indices(x1, 3, 2, 1);
  auto [ry1, ri1] = ref_max_pool(th::to_ref(x1), {3}, {2}, {1}, {1}, false);
  CHECK(th::compare(y1, ry1, 0, 0) == "");
  CHECK(th::compare(i1.to(of::kFloat64), ri1, 0, 0) == "");
  CHECK(y1.sizes() == of::IntArrayRef({2, 3, 6}));

  for (int sp = 1; sp <= 3; ++sp) {
    Shape s = {2, 3}, os;
    for (int i = 0; i < sp; ++i) s.push_back(5 + i), os.push_back(2 + i);
    T xa = uniform(s, 10 + uint64_t(sp));
    auto [ya, ia] = sp == 1   ? of::adaptive_max_pool1d(xa, os)
                    : sp == 2 ? of::adaptive_max_pool2d(xa, os)
                              : of::adaptive_max_pool3d(xa, os);
    auto [rya, ria] = ref_adaptive(th::to_ref(xa), os, true);
    CHECK(th::compare(ya, rya, 0, 0) == "");
    CHECK(th::compare(ia.to(of::kFloat64), ria, 0, 0) == "");
    // unbatched input: the same values without the batch dim
    auto [yu, iu] = sp == 1   ? of::adaptive_max_pool1d(xa[0], os)
                    : sp == 2 ? of::adaptive_max_pool2d(xa[0], os)
                              : of::adaptive_max_pool3d(xa[0], os);
    CHECK(of::equal(yu, ya[0]));
    CHECK(of::equal(iu, ia[0]));
  }
  // NaN propagates and is reported at its own position
  T z = of::zeros({1, 1, 2, 2, 2}, of::kFloat64);
  z.view({8})[5].fill_(std::nan(""));
  auto [zy, zi] = of::max_pool3d_with_indices(z, 2);
  CHECK(std::isnan(zy.item<double>()));
  CHECK(zi.item<int64_t>() == 5);
  auto [ay, ai] = of::adaptive_max_pool3d(z, 1);
  CHECK(std::isnan(ay.item<double>()));
  CHECK(ai.item<int64_t>() == 5);
}

TEST_CASE("conv3d: second-order gradients of conv3d and conv_transpose3d") {
  T x = uniform({2, 2, 3, 4, 3}, 21), w = uniform({3, 2, 2, 3, 2}, 22);
  auto fn = [](const std::vector<T>& in) {
    of::EnableGradGuard eg;  // finite differences evaluate fn under no_grad
    T xx = in[0].detach().clone().requires_grad_();
    T y = of::conv3d(xx, in[1], {}, {2, 1, 1}, 1);
    return of::autograd::grad({(y * y).sum()}, {xx}, {}, std::nullopt, true)[0];
  };
  CHECK(th::gradcheck(fn, {x, w}, {0}) == "");
  T xt = uniform({1, 3, 2, 3, 2}, 23);
  auto fnt = [](const std::vector<T>& in) {
    of::EnableGradGuard eg;
    T ww = in[1].detach().clone().requires_grad_();
    T y = of::conv_transpose3d(in[0], ww, {}, 2, 0, 1);
    return of::autograd::grad({(y * y).sum()}, {ww}, {}, std::nullopt, true)[0];
  };
  CHECK(th::gradcheck(fnt, {xt, w}, {1}) == "");
}

TEST_CASE("conv3d: float16 and bfloat16 compute in float32; threads do not change results") {
  T x = uniform({2, 3, 4, 4, 4}, 5).to(of::kFloat32),
    w = uniform({4, 3, 2, 2, 2}, 6).to(of::kFloat32);
  for (of::ScalarType dt : {of::kFloat16, of::kBFloat16}) {
    T y = of::conv3d(x.to(dt), w.to(dt), {}, 1, 1);
    CHECK(y.dtype() == dt);
    CHECK(of::max_pool3d(x.to(dt), 2).dtype() == dt);
    CHECK(of::avg_pool3d(x.to(dt), 2).dtype() == dt);
    CHECK(std::get<0>(of::adaptive_max_pool3d(x.to(dt), 2)).dtype() == dt);
    CHECK(
        of::conv_transpose1d(x.flatten(2).to(dt), w.flatten(2).transpose(0, 1).contiguous().to(dt))
            .dtype() == dt);
  }
  const int prev = of::get_num_threads();
  T xb = uniform({5, 4, 5, 4, 5}, 7).to(of::kFloat32),
    wb = uniform({6, 2, 3, 2, 3}, 8).to(of::kFloat32);
  auto run = [&] {
    T xx = xb.detach().clone().requires_grad_(), ww = wb.detach().clone().requires_grad_();
    T y = of::conv3d(xx, ww, {}, 1, 1, 1, 2);
    (y * y).sum().backward();
    return std::tuple<T, T, T>{y.detach(), xx.grad(), ww.grad()};
  };
  of::set_num_threads(1);
  auto [y1, gx1, gw1] = run();
  of::set_num_threads(2);
  auto [y2, gx2, gw2] = run();
  auto [y3, gx3, gw3] = run();
  of::set_num_threads(prev);
  CHECK(of::allclose(y1, y2, 1e-5, 1e-5));
  CHECK(of::allclose(gx1, gx2, 1e-5, 1e-5));
  CHECK(of::allclose(gw1, gw2, 1e-4, 1e-4));
  CHECK(of::equal(y2, y3));
  CHECK(of::equal(gx2, gx3));
  CHECK(of::equal(gw2, gw3));
}

TEST_CASE("conv3d: error messages name the op and the offending values") {
  T x = of::zeros({2, 3, 4, 5, 5}), w = of::zeros({4, 3, 2, 3, 3});
  CHECK(th::throws_with(
      [&] {
        of::conv3d(x, of::zeros({4, 2, 2, 3, 3}));
      },
      {"[conv3d]", "(2, 3, 4, 5, 5)", "(4, 2, 2, 3, 3)", "groups=1"}));
  CHECK(th::throws_with(
      [&] {
        of::conv3d(x, of::zeros({4, 1, 2, 3, 3}), {}, 1, 0, 1, 2);
      },
      {"[conv3d]", "groups=2"}));
  CHECK(th::throws_with(
      [&] {
        of::conv3d(x, of::zeros({3, 1, 2, 3, 3}), {}, 1, 0, 1, 0);
      },
      {"[conv3d]", "groups", "0"}));
  CHECK(th::throws_with(
      [&] {
        of::conv3d(of::zeros({2, 3, 5, 5}).unsqueeze(0).unsqueeze(0), w);
      },
      {"[conv3d]", "(1, 1, 2, 3, 5, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv3d(x, of::zeros({4, 3, 3, 3}));
      },
      {"[conv3d]", "5-D weight", "(4, 3, 3, 3)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv3d(x, of::zeros({4, 3, 5, 3, 3}));
      },
      {"[conv3d]", "(5, 3, 3)", "(4, 5, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv3d(x, w, {}, {1, 0, 1});
      },
      {"[conv3d]", "stride", "(1, 0, 1)"}));
  CHECK(th::throws_with([&] { of::conv3d(x, w, {}, {1, 2}); }, {"[conv3d]", "stride", "3"}));
  CHECK(th::throws_with([&] { of::conv3d(x, w, {}, 1, -1); },
                        {"[conv3d]", "padding", "(-1, -1, -1)"}));
  CHECK(th::throws_with([&] { of::conv3d(x, w, {}, 1, 0, 0); }, {"[conv3d]", "dilation"}));
  CHECK(th::throws_with([&] { of::conv3d(x, w, of::zeros({5})); }, {"[conv3d]", "bias", "(5,)"}));
  CHECK(th::throws_with([&] { of::conv3d(x, w, {}, 2, "same"); }, {"[conv3d]", "same", "stride"}));
  CHECK(th::throws_with([&] { of::conv3d(x.to(of::kInt64), w); }, {"[conv3d]", "int64"}));
  CHECK(th::throws_with([&] { of::conv_transpose3d(x, w); },
                        {"[conv_transpose3d]", "(4, 3, 2, 3, 3)", "(2, 3, 4, 5, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv_transpose3d(x, of::zeros({3, 2, 2, 2, 2}), {}, 1, 0, 1);
      },
      {"[conv_transpose3d]", "output_padding"}));
  CHECK(th::throws_with(
      [&] {
        of::conv_transpose3d(x, of::zeros({3, 2, 2, 2, 2}), {}, 1, 0, 0, 2);
      },
      {"[conv_transpose3d]", "groups=2"}));
  CHECK(th::throws_with(
      [&] {
        of::conv_transpose1d(of::zeros({2, 3, 4}), of::zeros({2, 3, 2}));
      },
      {"[conv_transpose1d]", "(2, 3, 2)", "(2, 3, 4)"}));
  CHECK(th::throws_with(
      [&] {
        of::conv_transpose1d(of::zeros({2, 3, 4}), of::zeros({3, 2, 2}), {}, 1, 0, 2);
      },
      {"[conv_transpose1d]", "output_padding", "2"}));
  CHECK(th::throws_with(
      [&] {
        of::conv_transpose1d(of::zeros({2, 3, 4, 4}), of::zeros({3, 2, 2}));
      },
      {"[conv_transpose1d]", "(2, 3, 4, 4)"}));
  CHECK(th::throws_with([&] { of::max_pool3d(x, 0); }, {"[max_pool3d]", "kernel_size"}));
  CHECK(th::throws_with([&] { of::max_pool3d(x, 2, 1, 2); },
                        {"[max_pool3d]", "padding", "(2, 2, 2)", "half"}));
  CHECK(th::throws_with([&] { of::max_pool3d(x, 5); },
                        {"[max_pool3d]", "(2, 3, 4, 5, 5)", "too small"}));
  CHECK(th::throws_with(
      [&] {
        of::max_pool3d(of::zeros({3, 4, 4}), 2);
      },
      {"[max_pool3d]", "(3, 4, 4)"}));
  CHECK(th::throws_with(
      [&] {
        of::max_pool3d_with_indices(x, 2, {1, 1});
      },
      {"[max_pool3d_with_indices]", "stride", "3"}));
  CHECK(th::throws_with(
      [&] {
        of::max_pool1d(of::zeros({2, 3, 4}), 2, 0);
      },
      {"[max_pool1d]", "stride", "0"}));
  CHECK(th::throws_with(
      [&] {
        of::max_pool1d(of::zeros({2, 3, 4}), 4, 1, 3);
      },
      {"[max_pool1d]", "padding", "3", "half"}));
  CHECK(th::throws_with(
      [&] {
        of::max_pool1d(of::zeros({2, 3, 4, 4}), 2);
      },
      {"[max_pool1d]", "(2, 3, 4, 4)"}));
  CHECK(th::throws_with(
      [&] {
        of::max_pool1d_with_indices(of::zeros({2, 3, 2}), 3);
      },
      {"[max_pool1d_with_indices]", "(2, 3, 2)", "too small"}));
  CHECK(th::throws_with(
      [&] {
        of::avg_pool1d(of::zeros({2, 3, 4}), 2, -1);
      },
      {"[avg_pool1d]", "stride", "-1"}));
  CHECK(th::throws_with([&] { of::avg_pool1d(of::zeros({3}), 1); }, {"[avg_pool1d]", "(3,)"}));
  CHECK(th::throws_with([&] { of::avg_pool3d(x, 2, {}, 0, false, true, 0); },
                        {"[avg_pool3d]", "divisor_override", "0"}));
  CHECK(th::throws_with([&] { of::avg_pool3d(x, 5); },
                        {"[avg_pool3d]", "(2, 3, 4, 5, 5)", "too small"}));
  CHECK(th::throws_with([&] { of::avg_pool3d(x, 2, 1, 2); },
                        {"[avg_pool3d]", "padding", "(2, 2, 2)"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_avg_pool3d(x, {2, 0, 2});
      },
      {"[adaptive_avg_pool3d]", "output_size", "(2, 0, 2)"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_avg_pool3d(of::zeros({4, 5}), 2);
      },
      {"[adaptive_avg_pool3d]", "(4, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_avg_pool1d(of::zeros({2, 3, 4}), 0);
      },
      {"[adaptive_avg_pool1d]", "output_size", "0"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_avg_pool1d(of::zeros({2, 3, 4}), {2, 2});
      },
      {"[adaptive_avg_pool1d]", "output_size", "2"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_max_pool1d(of::zeros({2, 3, 0}), 2);
      },
      {"[adaptive_max_pool1d]", "(2, 3, 0)"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_max_pool2d(of::zeros({2, 3, 4, 4}), {2, -1});
      },
      {"[adaptive_max_pool2d]", "(2, -1)"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_max_pool2d(of::zeros({2, 3, 4, 4}).to(of::kInt64), 2);
      },
      {"[adaptive_max_pool2d]", "int64"}));
  CHECK(th::throws_with(
      [&] {
        of::adaptive_max_pool3d(of::zeros({2, 3, 4, 4}), {2, 2, 2, 2});
      },
      {"[adaptive_max_pool3d]", "output_size", "4"}));
  // no state change on failure
  T xl = of::zeros({2, 3, 4, 5, 5}).requires_grad_();
  CHECK(th::throws_with([&] { of::conv3d(xl, of::zeros({4, 2, 2, 3, 3})); }, {"[conv3d]"}));
  CHECK(!xl.grad().defined());
}

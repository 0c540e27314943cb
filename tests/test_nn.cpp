// test_nn.cpp: linear, normalization, dropout and losses: table rows (values vs float64 loops,
// VJPs vs finite differences) plus running stats, dropout statistics and error paths.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "dispatch.h"
#include "generator.h"
#include "harness.h"

namespace {

using th::Ref;
using th::Shape;
using V = std::vector<of::Tensor>;
using R = std::vector<Ref>;
using Vec = std::vector<double>;
namespace Red = of::Reduction;

// ---------------------------------------------------------------- float64 references

Ref reduce_ref(const Ref& l, int64_t red) {
  if (red == Red::None) return l;
  double s = 0;
  for (double v : l.v) s += v;
  if (red == Red::Mean) s /= double(l.numel());
  return Ref(Shape{}, {s});
}

// out[r, o] = sum_i x[r, i] w[o, i] + b[o], over the rows of x's leading dims.
Ref linear_ref(const Ref& x, const Ref& w, const Ref* b) {
  const int64_t in = w.shape[1], out = w.shape[0], rows = x.numel() / in;
  Shape s = x.shape;
  s.back() = out;
  Ref r(s);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? b->v[size_t(o)] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x.v[size_t(row * in + i)] * w.v[size_t(o * in + i)];
      r.v[size_t(row * out + o)] = acc;
    }
  return r;
}

// Normalizes groups of elements: group_of(i) gives the group of flat element i, chan_of(i) its
// affine index. rms: no mean subtraction. mean/var given per group (nullptr: batch stats).
Ref norm_ref(const Ref& x, int64_t ngroups, const std::function<int64_t(int64_t)>& group_of,
             const std::function<int64_t(int64_t)>& chan_of, const Ref* w, const Ref* b, double eps,
             bool rms, const Vec* mean = nullptr, const Vec* var = nullptr) {
  Vec mu(size_t(ngroups), 0.0), sq(size_t(ngroups), 0.0), cnt(size_t(ngroups), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    mu[size_t(group_of(i))] += x.v[size_t(i)];
    cnt[size_t(group_of(i))] += 1;
  }
  for (int64_t g = 0; g < ngroups; ++g) mu[size_t(g)] = rms ? 0.0 : mu[size_t(g)] / cnt[size_t(g)];
  for (int64_t i = 0; i < x.numel(); ++i) {
    double d = x.v[size_t(i)] - mu[size_t(group_of(i))];
    sq[size_t(group_of(i))] += d * d;
  }
  Ref r(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t g = group_of(i), c = chan_of(i);
    const double m = mean ? (*mean)[size_t(g)] : mu[size_t(g)];
    const double v = var ? (*var)[size_t(g)] : sq[size_t(g)] / cnt[size_t(g)];
    double y = (x.v[size_t(i)] - m) / std::sqrt(v + eps);
    if (w) y *= w->v[size_t(c)];
    if (b) y += b->v[size_t(c)];
    r.v[size_t(i)] = y;
  }
  return r;
}

// batch norm: groups = channels of x [N, C, *]
Ref bn_ref(const Ref& x, const Ref* w, const Ref* b, double eps, const Ref* rm = nullptr,
           const Ref* rv = nullptr) {
  const int64_t C = x.shape[1];
  int64_t hw = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) hw *= x.shape[d];
  auto ch = [=](int64_t i) { return (i / hw) % C; };
  if (rm) return norm_ref(x, C, ch, ch, w, b, eps, false, &rm->v, &rv->v);
  return norm_ref(x, C, ch, ch, w, b, eps, false);
}
// layer/rms norm over the last nd dims
Ref ln_ref(const Ref& x, int64_t nd, const Ref* w, const Ref* b, double eps, bool rms) {
  int64_t n = 1;
  for (int64_t d = 0; d < nd; ++d) n *= x.shape[x.shape.size() - 1 - size_t(d)];
  return norm_ref(
      x, x.numel() / n, [=](int64_t i) { return i / n; }, [=](int64_t i) { return i % n; }, w, b,
      eps, rms);
}
// group norm of x [N, C, *] in G groups
Ref gn_ref(const Ref& x, int64_t G, const Ref* w, const Ref* b, double eps) {
  const int64_t N = x.shape[0], C = x.shape[1];
  const int64_t hw = x.numel() / (N * C);
  return norm_ref(
      x, N * G, [=](int64_t i) { return (i / (hw * C)) * G + ((i / hw) % C) / (C / G); },
      [=](int64_t i) { return (i / hw) % C; }, w, b, eps, false);
}

// Cross entropy with class-index targets, PyTorch's formula (x [N, C, *] or [C]).
Ref ce_ref(const Ref& x, const Ref& t, const Ref* w, int64_t red, int64_t ignore, double ls,
           bool log_probs_input = false) {
  const bool unbatched = x.dim() == 1;
  const int64_t N = unbatched ? 1 : x.shape[0], C = unbatched ? x.shape[0] : x.shape[1];
  const int64_t inner = x.numel() / (N * C);
  Ref l(t.shape);
  double wsum = 0, ssum = 0, nsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < inner; ++d) {
      auto at = [&](int64_t c) { return x.v[size_t((n * C + c) * inner + d)]; };
      double lse = 0;
      if (!log_probs_input) {
        double m = -INFINITY;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, at(c));
        double s = 0;
        for (int64_t c = 0; c < C; ++c) s += std::exp(at(c) - m);
        lse = m + std::log(s);
      }
      const int64_t r = n * inner + d;
      const int64_t tc = int64_t(t.v[size_t(r)]);
      if (tc == ignore) {
        l.v[size_t(r)] = 0;
        continue;
      }
      const double wt = w ? w->v[size_t(tc)] : 1.0;
      const double nll = -wt * (at(tc) - lse);
      double smooth = 0;
      for (int64_t c = 0; c < C; ++c) smooth -= (w ? w->v[size_t(c)] : 1.0) * (at(c) - lse);
      wsum += wt;
      nsum += nll;
      ssum += smooth;
      l.v[size_t(r)] = (1 - ls) * nll + ls / double(C) * smooth;
    }
  if (red == Red::None) return l;
  if (red == Red::Sum) return Ref(Shape{}, {(1 - ls) * nsum + ls / double(C) * ssum});
  const double sm = w ? ssum / wsum : ssum / double(N * inner);
  return Ref(Shape{}, {(1 - ls) * nsum / wsum + ls / double(C) * sm});
}
// Cross entropy with class-probability targets (same shape as x [N, C, *]).
Ref ce_probs_ref(const Ref& x, const Ref& t, const Ref* w, int64_t red, double ls) {
  const int64_t N = x.shape[0], C = x.shape[1], inner = x.numel() / (N * C);
  Shape s = x.shape;
  s.erase(s.begin() + 1);
  Ref l(s);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < inner; ++d) {
      auto idx = [&](int64_t c) { return size_t((n * C + c) * inner + d); };
      double m = -INFINITY;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, x.v[idx(c)]);
      double se = 0;
      for (int64_t c = 0; c < C; ++c) se += std::exp(x.v[idx(c)] - m);
      const double lse = m + std::log(se);
      double acc = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double tc = t.v[idx(c)] * (1 - ls) + ls / double(C);
        acc -= (w ? w->v[size_t(c)] : 1.0) * tc * (x.v[idx(c)] - lse);
      }
      l.v[size_t(n * inner + d)] = acc;
    }
  return reduce_ref(l, red);
}

Ref map1(const R& r, const std::function<double(double, double)>& f) {
  Ref o(r[0].shape);
  for (int64_t i = 0; i < o.numel(); ++i) o.v[size_t(i)] = f(r[0].v[size_t(i)], r[1].v[size_t(i)]);
  return o;
}

// ---------------------------------------------------------------- input generators

// Uniform floats for `shapes`, then int64 class targets of `tshape` in [0, C) with the listed
// positions set to `ignore`; optional positive weight [C] (float64, cast in the row's fn).
std::function<V(uint64_t)> ce_inputs(Shape xs, Shape ts, int64_t C, std::vector<int64_t> ignored,
                                     int64_t ignore, bool weight) {
  return [=](uint64_t seed) {
    of::manual_seed(seed);
    V r;
    r.push_back(of::rand(xs, of::kFloat64) * 4.0 - 2.0);
    of::Tensor t = of::randint(0, C, ts, of::kInt64);
    if (!ignored.empty()) {
      std::vector<int64_t> tv = t.to_vector<int64_t>();
      for (int64_t i : ignored) tv[size_t(i)] = ignore;
      t = of::tensor(tv, of::IntArrayRef(ts), of::kInt64);
    }
    r.push_back(t);
    if (weight) r.push_back(of::rand({C}, of::kFloat64) + 0.5);
    return r;
  };
}

// Floats per shape, each uniform in its own [lo, hi].
std::function<V(uint64_t)> ranged(std::vector<Shape> shapes,
                                  std::vector<std::pair<double, double>> rg) {
  return [=](uint64_t seed) {
    of::manual_seed(seed);
    V r;
    for (size_t i = 0; i < shapes.size(); ++i)
      r.push_back(of::rand(shapes[i], of::kFloat64) * (rg[i].second - rg[i].first) + rg[i].first);
    return r;
  };
}

constexpr auto row = th::make_row;
th::OpRow with_make(th::OpRow r, std::function<V(uint64_t)> m, std::vector<int> nondiff = {}) {
  r.make = std::move(m);
  r.nondiff = std::move(nondiff);
  return r;
}

of::Tensor as(const of::Tensor& t, const of::Tensor& like) { return t.to(like.dtype()); }
// A row of an op without a VJP (the trace's rewrite ops): no finite-difference check.
th::OpRow no_grad(th::OpRow r) {
  r.grad = false;
  return r;
}

// ---------------------------------------------------------------- linear
// clang-format off
TH_ROWS({
    row(
        "linear/2d_bias", {"linear"}, {{4, 5}, {3, 5}, {3}},
        [](const V& in) { return of::linear(in[0], in[1], in[2]); },
        [](const R& r) { return linear_ref(r[0], r[1], &r[2]); }),
    row(
        "linear/3d_no_bias", {"linear"}, {{2, 3, 5}, {4, 5}},
        [](const V& in) { return of::linear(in[0], in[1]); },
        [](const R& r) { return linear_ref(r[0], r[1], nullptr); }),
    row(
        "linear/4d_bias", {"linear"}, {{2, 2, 3, 5}, {4, 5}, {4}},
        [](const V& in) { return of::linear(in[0], in[1], in[2]); },
        [](const R& r) { return linear_ref(r[0], r[1], &r[2]); }),
    row(
        "linear/1d_input", {"linear"}, {{5}, {4, 5}, {4}},
        [](const V& in) { return of::linear(in[0], in[1], in[2]); },
        [](const R& r) { return linear_ref(r[0], r[1], &r[2]); }),
});
// clang-format on

// linear_dynamic_int8 (the trace's quantize rewrite makes it, NOTE [Dynamic int8 linear]):
// float32 only, so the row casts; its result is linear's within the quantization error
// (per-channel int8 weights, per-row uint8 activations: about 1% of the output's scale).
th::OpRow int8_row(std::string name, std::vector<th::Shape> shapes, bool bias) {
  th::OpRow r = th::make_row(
      std::move(name), {"linear_dynamic_int8"}, std::move(shapes),
      [bias](const V& in) {
        return of::dispatch(of::find_op("linear_dynamic_int8"),
                            {in[0].to(of::kFloat32), in[1].to(of::kFloat32),
                             bias ? in[2].to(of::kFloat32) : of::Tensor()})[0]
            .to(in[0].dtype());
      },
      [bias](const R& r) { return linear_ref(r[0], r[1], bias ? &r[2] : nullptr); });
  r.grad = false;
  r.rtol = r.rtol64 = 0.03;
  r.atol = r.atol64 = 0.08;
  return r;
}
TH_ROWS({
    int8_row("linear_dynamic_int8/bias", {{13, 9}, {33, 9}, {33}}, true),
    int8_row("linear_dynamic_int8/no_bias", {{4, 5}, {3, 5}}, false),
});

// linear_act (the trace's epilogue rewrite makes it, NOTE [GEMM epilogues]): linear, then the
// activation its attribute names; no VJP (inference graphs). Shapes cross the float32 kernel's
// tile (12 rows) and strip (32 columns) edges.
of::Tensor linear_act(const V& in, const char* act) {
  return of::dispatch(of::find_op("linear_act"),
                      {in[0], in[1], in.size() > 2 ? in[2] : of::Tensor()},
                      of::Attrs{std::string(act)})[0];
}
// with a scale and a residual (the last input; `bias`: whether in[2] is the bias)
of::Tensor linear_act_sr(const V& in, const char* act, double scale, bool bias) {
  return of::dispatch(of::find_op("linear_act"),
                      {in[0], in[1], bias ? in[2] : of::Tensor(), in.back()},
                      of::Attrs{std::string(act), scale})[0];
}
Ref act_ref(const Ref& y, double (*f)(double)) {
  return th::map_ref({y}, [f](const auto& v) { return f(v[0]); });
}
double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
TH_ROWS({
    no_grad(row(
        "linear_act/gelu", {"linear_act"}, {{13, 7}, {33, 7}, {33}},
        [](const V& in) { return linear_act(in, "gelu"); },
        [](const R& r) { return act_ref(linear_ref(r[0], r[1], &r[2]), gelu_erf); })),
    no_grad(row(
        "linear_act/gelu_tanh_no_bias", {"linear_act"}, {{5, 9}, {6, 9}},
        [](const V& in) { return linear_act(in, "gelu_tanh"); },
        [](const R& r) { return act_ref(linear_ref(r[0], r[1], nullptr), gelu_tanh); })),
    no_grad(row(
        "linear_act/relu", {"linear_act"}, {{4, 5}, {3, 5}, {3}},
        [](const V& in) { return linear_act(in, "relu"); },
        [](const R& r) {
          return act_ref(linear_ref(r[0], r[1], &r[2]), [](double x) { return x > 0 ? x : 0.0; });
        })),
    no_grad(row(
        "linear_act/silu", {"linear_act"}, {{12, 4}, {40, 4}, {40}},
        [](const V& in) { return linear_act(in, "silu"); },
        [](const R& r) {
          return act_ref(linear_ref(r[0], r[1], &r[2]),
                         [](double x) { return x / (1 + std::exp(-x)); });
        })),
    no_grad(row(
        "linear_act/tanh", {"linear_act"}, {{3, 6}, {2, 6}, {2}},
        [](const V& in) { return linear_act(in, "tanh"); },
        [](const R& r) {
          return act_ref(linear_ref(r[0], r[1], &r[2]), [](double x) { return std::tanh(x); });
        })),
    // act(x wᵀ + b) * scale + residual
    no_grad(row(
        "linear_act/gelu_scale_residual", {"linear_act"}, {{13, 7}, {33, 7}, {33}, {13, 33}},
        [](const V& in) { return linear_act_sr(in, "gelu", 0.75, true); },
        [](const R& r) {
          return th::map_ref({act_ref(linear_ref(r[0], r[1], &r[2]), gelu_erf), r[3]},
                             [](const auto& v) { return v[0] * 0.75 + v[1]; });
        })),
    no_grad(row(
        "linear_act/residual_no_bias", {"linear_act"}, {{5, 9}, {6, 9}, {5, 6}},
        [](const V& in) { return linear_act_sr(in, "none", 1.0, false); },
        [](const R& r) {
          return th::map_ref({linear_ref(r[0], r[1], nullptr), r[2]},
                             [](const auto& v) { return v[0] + v[1]; });
        })),
});

// ---------------------------------------------------------------- batch norm
const std::vector<std::string> kBn = {"batch_norm", "batch_norm_backward"};
// clang-format off
TH_ROWS({
    row(
        "batch_norm/train_4d_affine", kBn, {{3, 4, 2, 3}, {4}, {4}},
        [](const V& in) {
          of::Tensor rm = th::like(of::zeros({4}, in[0].dtype()), in[0]),
                     rv = th::like(of::ones({4}, in[0].dtype()), in[0]);
          return of::batch_norm(in[0], in[1], in[2], rm, rv, true, 0.1, 1e-5);
        },
        [](const R& r) { return bn_ref(r[0], &r[1], &r[2], 1e-5); }),
    row(
        "batch_norm/train_2d_no_affine_no_stats", kBn, {{6, 3}},
        [](const V& in) { return of::batch_norm(in[0], {}, {}, {}, {}, true, 0.1, 1e-3); },
        [](const R& r) { return bn_ref(r[0], nullptr, nullptr, 1e-3); }),
    row(
        "batch_norm/train_3d_weight_only", kBn, {{4, 3, 5}, {3}},
        [](const V& in) {
          of::Tensor rm = th::like(of::zeros({3}, in[0].dtype()), in[0]),
                     rv = th::like(of::ones({3}, in[0].dtype()), in[0]);
          return of::batch_norm(in[0], in[1], {}, rm, rv, true, 0.3, 1e-5);
        },
        [](const R& r) { return bn_ref(r[0], &r[1], nullptr, 1e-5); }),
    with_make(row(
                  "batch_norm/eval", kBn, {},
                  [](const V& in) {
                    return of::batch_norm(in[0], in[1], in[2], as(in[3], in[0]), as(in[4], in[0]),
                                          false, 0.1, 1e-5);
                  },
                  [](const R& r) { return bn_ref(r[0], &r[1], &r[2], 1e-5, &r[3], &r[4]); }),
              ranged({{3, 4, 5}, {4}, {4}, {4}, {4}},
                     {{-2, 2}, {-2, 2}, {-2, 2}, {-1, 1}, {0.5, 1.5}}),
              {3, 4}),
});
// clang-format on

// ---------------------------------------------------------------- layer / group / rms norm
const std::vector<std::string> kLn = {"layer_norm", "layer_norm_backward"};
const std::vector<std::string> kGn = {"group_norm", "group_norm_backward"};
const std::vector<std::string> kRms = {"rms_norm", "rms_norm_backward"};
// clang-format off
TH_ROWS({
    row(
        "layer_norm/3d_two_dims_affine", kLn, {{3, 4, 5}, {4, 5}, {4, 5}},
        [](const V& in) {
          return of::layer_norm(in[0], {4, 5}, in[1], in[2]);
        },
        [](const R& r) { return ln_ref(r[0], 2, &r[1], &r[2], 1e-5, false); }),
    row(
        "layer_norm/2d_no_affine", kLn, {{6, 7}},
        [](const V& in) { return of::layer_norm(in[0], {7}, {}, {}, 1e-3); },
        [](const R& r) { return ln_ref(r[0], 1, nullptr, nullptr, 1e-3, false); }),
    row(
        "layer_norm/weight_only", kLn, {{2, 3, 9}, {9}},
        [](const V& in) { return of::layer_norm(in[0], {9}, in[1]); },
        [](const R& r) { return ln_ref(r[0], 1, &r[1], nullptr, 1e-5, false); }),
    row(
        "layer_norm/1d_bias_only", kLn, {{8}, {8}},
        [](const V& in) { return of::layer_norm(in[0], {8}, {}, in[1]); },
        [](const R& r) { return ln_ref(r[0], 1, nullptr, &r[1], 1e-5, false); }),
    row(
        "group_norm/3d_affine", kGn, {{2, 6, 3}, {6}, {6}},
        [](const V& in) { return of::group_norm(in[0], 3, in[1], in[2]); },
        [](const R& r) { return gn_ref(r[0], 3, &r[1], &r[2], 1e-5); }),
    row(
        "group_norm/4d_no_affine", kGn, {{2, 4, 2, 3}},
        [](const V& in) { return of::group_norm(in[0], 2, {}, {}, 1e-3); },
        [](const R& r) { return gn_ref(r[0], 2, nullptr, nullptr, 1e-3); }),
    row(
        "group_norm/2d_weight_only", kGn, {{3, 4}, {4}},
        [](const V& in) { return of::group_norm(in[0], 2, in[1]); },
        [](const R& r) { return gn_ref(r[0], 2, &r[1], nullptr, 1e-5); }),
    row(
        "group_norm/one_group_bias_only", kGn, {{2, 3, 4}, {3}},
        [](const V& in) { return of::group_norm(in[0], 1, {}, in[1]); },
        [](const R& r) { return gn_ref(r[0], 1, nullptr, &r[1], 1e-5); }),
    row(
        "rms_norm/3d_weight_default_eps", kRms, {{3, 4, 5}, {5}},
        [](const V& in) { return of::rms_norm(in[0], {5}, in[1]); },
        [](const R& r) {
          // the default eps is the machine epsilon of the dtype the op ran in
          return ln_ref(r[0], 1, &r[1], nullptr, std::numeric_limits<double>::epsilon(), true);
        }),
    row(
        "rms_norm/two_dims_no_weight", kRms, {{2, 3, 4}},
        [](const V& in) {
          return of::rms_norm(in[0], {3, 4}, {}, 1e-6);
        },
        [](const R& r) { return ln_ref(r[0], 2, nullptr, nullptr, 1e-6, true); }),
});
// clang-format on

// add_layer_norm / add_rms_norm (the trace's add_norm rewrite makes them, NOTE [Add and norm]):
// the norm of x + residual, and the sum itself when write_sum; no VJP (made in traced graphs
// after autograd recorded its own nodes).
of::TensorList add_norm(const char* op, const V& in, int64_t axis, double eps, bool write_sum) {
  const bool rms = std::string(op) == "add_rms_norm";
  of::TensorList args{in[0], in[1], in.size() > 2 ? in[2] : of::Tensor()};
  if (!rms) args.push_back(in.size() > 3 ? in[3] : of::Tensor());
  return of::dispatch(of::find_op(op), args,
                      of::Attrs{axis, eps, in.size() > 2, !rms && in.size() > 3, write_sum});
}
Ref sum_ref(const R& r) {
  return th::map_ref({r[0], r[1]}, [](const auto& v) { return v[0] + v[1]; });
}
TH_ROWS({
    no_grad(row(
        "add_layer_norm/affine", {"add_layer_norm"}, {{3, 4, 5}, {3, 4, 5}, {5}, {5}},
        [](const V& in) { return add_norm("add_layer_norm", in, 2, 1e-5, false)[0]; },
        [](const R& r) { return ln_ref(sum_ref(r), 1, &r[2], &r[3], 1e-5, false); })),
    no_grad(row(
        "add_layer_norm/sum_written", {"add_layer_norm"}, {{2, 6, 4}, {2, 6, 4}, {6, 4}, {6, 4}},
        [](const V& in) {
          const of::TensorList o = add_norm("add_layer_norm", in, 1, 1e-3, true);
          return o[0] + o[1] * 0.5;
        },
        [](const R& r) {
          const Ref s = sum_ref(r), y = ln_ref(s, 2, &r[2], &r[3], 1e-3, false);
          return th::map_ref({y, s}, [](const auto& v) { return v[0] + 0.5 * v[1]; });
        })),
    no_grad(row(
        "add_rms_norm/weight", {"add_rms_norm"}, {{2, 3, 4}, {2, 3, 4}, {4}},
        [](const V& in) { return add_norm("add_rms_norm", in, 2, 1e-6, false)[0]; },
        [](const R& r) { return ln_ref(sum_ref(r), 1, &r[2], nullptr, 1e-6, true); })),
});

// embedding_layer_norm (the add_norm rewrite makes it, NOTE [Embeddings and norm]): three tables,
// the second's ids broadcast over the rows (a position embedding), layer-normalized; no VJP.
V emb_norm_inputs(uint64_t seed) {
  of::manual_seed(seed);
  auto table = [](int64_t n) { return of::rand({n, 4}, of::kFloat64) * 2.0 - 1.0; };
  auto ids = [](std::vector<int64_t> v, of::IntArrayRef shape) { return of::tensor(v, shape); };
  return {table(5),
          ids({4, 0, 4, 2, 1, 3}, {2, 3}),
          table(6),
          ids({5, 0, 2}, {3}),
          table(2),
          ids({0, 1, 1, 0, 0, 1}, {2, 3}),
          of::rand({4}, of::kFloat64) + 0.5,
          of::rand({4}, of::kFloat64) - 0.5};
}
Ref emb_sum_ref(const R& r) {
  const int64_t H = r[0].shape[1], M = r[1].numel(), S1 = r[3].numel();
  Shape os = r[1].shape;
  os.push_back(H);
  Ref o(os);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < H; ++h)
      o.v[size_t(m * H + h)] = r[0].v[size_t(int64_t(r[1].v[size_t(m)]) * H + h)] +
                               r[2].v[size_t(int64_t(r[3].v[size_t(m % S1)]) * H + h)] +
                               r[4].v[size_t(int64_t(r[5].v[size_t(m)]) * H + h)];
  return o;
}
// clang-format off
TH_ROWS({
    no_grad(with_make(row(
        "embedding_layer_norm/three_tables", {"embedding_layer_norm"}, {},
        [](const V& in) {
          return of::dispatch(of::find_op("embedding_layer_norm"),
                              of::TensorList(in.begin(), in.end()),
                              of::Attrs{int64_t(2), 1e-5, true, true})[0];
        },
        [](const R& r) { return ln_ref(emb_sum_ref(r), 1, &r[6], &r[7], 1e-5, false); }),
        emb_norm_inputs, {1, 3, 5})),
});
// clang-format on

// ---------------------------------------------------------------- dropout
// Seeded inside fn (so gradcheck sees one mask): kept elements are x / (1 - p), dropped ones
// are replaced by x, so the result equals x exactly when the scaling is right.
// clang-format off
TH_ROWS({
    row(
        "dropout/train_scaling", {"dropout"}, {{6, 7}},
        [](const V& in) {
          of::manual_seed(99);
          of::Tensor y = of::dropout(in[0], 0.3, true);
          return of::where(y == 0, in[0], y * 0.7);
        },
        [](const R& r) { return r[0]; }),
    row(
        "dropout/eval_identity", {"dropout"}, {{4, 5}},
        [](const V& in) { return of::dropout(in[0], 0.5, false); },
        [](const R& r) { return r[0]; }),
});
// clang-format on

// ---------------------------------------------------------------- cross entropy / nll
const std::vector<std::string> kCe = {"cross_entropy", "cross_entropy_backward"};
// clang-format off
TH_ROWS({
    with_make(row(
                  "cross_entropy/mean", kCe, {},
                  [](const V& in) { return of::cross_entropy(in[0], in[1]); },
                  [](const R& r) { return ce_ref(r[0], r[1], nullptr, Red::Mean, -100, 0.0); }),
              ce_inputs({5, 4}, {5}, 4, {}, -100, false), {1}),
    with_make(row(
                  "cross_entropy/weight_ignore_mean", kCe, {},
                  [](const V& in) {
                    return of::cross_entropy(in[0], in[1], as(in[2], in[0]), Red::Mean, -100);
                  },
                  [](const R& r) { return ce_ref(r[0], r[1], &r[2], Red::Mean, -100, 0.0); }),
              ce_inputs({6, 5}, {6}, 5, {1, 4}, -100, true), {1, 2}),
    with_make(row(
                  "cross_entropy/ignore_class_index_sum", kCe, {},
                  [](const V& in) { return of::cross_entropy(in[0], in[1], {}, Red::Sum, 2); },
                  [](const R& r) { return ce_ref(r[0], r[1], nullptr, Red::Sum, 2, 0.0); }),
              ce_inputs({7, 3}, {7}, 3, {0}, 2, false), {1}),
    with_make(row(
                  "cross_entropy/smoothing_weight_sum", kCe, {},
                  [](const V& in) {
                    return of::cross_entropy(in[0], in[1], as(in[2], in[0]), Red::Sum, -100, 0.2);
                  },
                  [](const R& r) { return ce_ref(r[0], r[1], &r[2], Red::Sum, -100, 0.2); }),
              ce_inputs({5, 4}, {5}, 4, {3}, -100, true), {1, 2}),
    with_make(row(
                  "cross_entropy/smoothing_mean_ignore", kCe, {},
                  [](const V& in) {
                    return of::cross_entropy(in[0], in[1], {}, Red::Mean, -100, 0.3);
                  },
                  [](const R& r) { return ce_ref(r[0], r[1], nullptr, Red::Mean, -100, 0.3); }),
              ce_inputs({6, 4}, {6}, 4, {2}, -100, false), {1}),
    with_make(row(
                  "cross_entropy/smoothing_weight_mean_ignore", kCe, {},
                  [](const V& in) {
                    return of::cross_entropy(in[0], in[1], as(in[2], in[0]), Red::Mean, -100, 0.1);
                  },
                  [](const R& r) { return ce_ref(r[0], r[1], &r[2], Red::Mean, -100, 0.1); }),
              ce_inputs({6, 4}, {6}, 4, {0, 5}, -100, true), {1, 2}),
    with_make(row(
                  "cross_entropy/3d_none_smoothing", kCe, {},
                  [](const V& in) {
                    return of::cross_entropy(in[0], in[1], as(in[2], in[0]), Red::None, -100, 0.1);
                  },
                  [](const R& r) { return ce_ref(r[0], r[1], &r[2], Red::None, -100, 0.1); }),
              ce_inputs({3, 4, 5}, {3, 5}, 4, {2, 7}, -100, true), {1, 2}),
    with_make(row(
                  "cross_entropy/4d_mean", kCe, {},
                  [](const V& in) { return of::cross_entropy(in[0], in[1]); },
                  [](const R& r) { return ce_ref(r[0], r[1], nullptr, Red::Mean, -100, 0.0); }),
              ce_inputs({2, 3, 2, 2}, {2, 2, 2}, 3, {}, -100, false), {1}),
    with_make(row(
                  "cross_entropy/unbatched", kCe, {},
                  [](const V& in) { return of::cross_entropy(in[0], in[1]); },
                  [](const R& r) { return ce_ref(r[0], r[1], nullptr, Red::Mean, -100, 0.0); }),
              ce_inputs({5}, {}, 5, {}, -100, false), {1}),
    with_make(row(
                  "cross_entropy/probs_weight_smoothing_mean", {"log_softmax"}, {},
                  [](const V& in) {
                    return of::cross_entropy(in[0], in[1], as(in[2], in[0]), Red::Mean, -100, 0.2);
                  },
                  [](const R& r) { return ce_probs_ref(r[0], r[1], &r[2], Red::Mean, 0.2); }),
              ranged({{4, 3}, {4, 3}, {3}}, {{-2, 2}, {0, 1}, {0.5, 1.5}}), {2}),
    with_make(row(
                  "cross_entropy/probs_3d_none", {"log_softmax"}, {},
                  [](const V& in) { return of::cross_entropy(in[0], in[1], {}, Red::None); },
                  [](const R& r) { return ce_probs_ref(r[0], r[1], nullptr, Red::None, 0.0); }),
              ranged({{2, 3, 4}, {2, 3, 4}}, {{-2, 2}, {0, 1}})),
    with_make(
        row(
            "nll_loss/mean", {"gather"}, {}, [](const V& in) { return of::nll_loss(in[0], in[1]); },
            [](const R& r) { return ce_ref(r[0], r[1], nullptr, Red::Mean, -100, 0.0, true); }),
        ce_inputs({5, 4}, {5}, 4, {}, -100, false), {1}),
    with_make(row(
                  "nll_loss/weight_ignore_mean", {"gather"}, {},
                  [](const V& in) { return of::nll_loss(in[0], in[1], as(in[2], in[0])); },
                  [](const R& r) { return ce_ref(r[0], r[1], &r[2], Red::Mean, -100, 0.0, true); }),
              ce_inputs({6, 5}, {6}, 5, {0, 3}, -100, true), {1, 2}),
    with_make(row(
                  "nll_loss/3d_none_ignore", {"gather"}, {},
                  [](const V& in) {
                    return of::nll_loss(in[0], in[1], as(in[2], in[0]), Red::None, 1);
                  },
                  [](const R& r) { return ce_ref(r[0], r[1], &r[2], Red::None, 1, 0.0, true); }),
              ce_inputs({3, 4, 2}, {3, 2}, 4, {1}, 1, true), {1, 2}),
    with_make(row(
                  "nll_loss/sum_unbatched", {"gather"}, {},
                  [](const V& in) { return of::nll_loss(in[0], in[1], {}, Red::Sum); },
                  [](const R& r) {
                    return ce_ref(r[0], r[1], nullptr, Red::Sum, -100, 0.0, true);
                  }),
              ce_inputs({6}, {}, 6, {}, -100, false), {1}),
});
// clang-format on

// ---------------------------------------------------------------- elementwise losses
double smooth_l1(double d, double beta) {
  const double a = std::fabs(d);
  return a < beta ? 0.5 * a * a / beta : a - 0.5 * beta;
}
double bce(double x, double t) {
  return -(t * std::max(std::log(x), -100.0) + (1 - t) * std::max(std::log(1 - x), -100.0));
}
double bce_logits(double x, double t, double pw) {
  // -(pw * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))
  const double s = 1.0 / (1.0 + std::exp(-x));
  return -(pw * t * std::log(s) + (1 - t) * std::log(1 - s));
}
// clang-format off
TH_ROWS({
    row(
        "mse_loss/mean", {}, {{3, 4}, {3, 4}},
        [](const V& in) { return of::mse_loss(in[0], in[1]); },
        [](const R& r) {
          return reduce_ref(map1(r, [](double a, double b) { return (a - b) * (a - b); }),
                            Red::Mean);
        }),
    row(
        "mse_loss/none_3d", {}, {{2, 3, 4}, {2, 3, 4}},
        [](const V& in) { return of::mse_loss(in[0], in[1], Red::None); },
        [](const R& r) { return map1(r, [](double a, double b) { return (a - b) * (a - b); }); }),
    row(
        "l1_loss/sum", {}, {{5, 3}, {5, 3}},
        [](const V& in) { return of::l1_loss(in[0], in[1], Red::Sum); },
        [](const R& r) {
          return reduce_ref(map1(r, [](double a, double b) { return std::fabs(a - b); }), Red::Sum);
        }),
    row(
        "l1_loss/mean_1d", {}, {{7}, {7}}, [](const V& in) { return of::l1_loss(in[0], in[1]); },
        [](const R& r) {
          return reduce_ref(map1(r, [](double a, double b) { return std::fabs(a - b); }),
                            Red::Mean);
        }),
    row(
        "smooth_l1_loss/mean_beta1", {}, {{4, 5}, {4, 5}},
        [](const V& in) { return of::smooth_l1_loss(in[0], in[1]); },
        [](const R& r) {
          return reduce_ref(map1(r, [](double a, double b) { return smooth_l1(a - b, 1.0); }),
                            Red::Mean);
        }),
    row(
        "smooth_l1_loss/none_beta0.5", {}, {{3, 4}, {3, 4}},
        [](const V& in) { return of::smooth_l1_loss(in[0], in[1], Red::None, 0.5); },
        [](const R& r) {
          return map1(r, [](double a, double b) { return smooth_l1(a - b, 0.5); });
        }),
    row(
        "smooth_l1_loss/sum_beta0", {}, {{3, 4}, {3, 4}},
        [](const V& in) { return of::smooth_l1_loss(in[0], in[1], Red::Sum, 0.0); },
        [](const R& r) {
          return reduce_ref(map1(r, [](double a, double b) { return std::fabs(a - b); }), Red::Sum);
        }),
    with_make(row(
                  "binary_cross_entropy/mean", {"binary_cross_entropy"}, {},
                  [](const V& in) { return of::binary_cross_entropy(in[0], in[1]); },
                  [](const R& r) { return reduce_ref(map1(r, bce), Red::Mean); }),
              ranged({{3, 4}, {3, 4}}, {{0.05, 0.95}, {0, 1}})),
    with_make(row(
                  "binary_cross_entropy/weight_none", {"binary_cross_entropy"}, {},
                  [](const V& in) {
                    // (the weight stays float64 in the table's float32 runs, being nondiff)
                    return of::binary_cross_entropy(in[0], in[1], in[2].to(in[0].dtype()),
                                                    Red::None);
                  },
                  [](const R& r) {
                    Ref l = map1(r, bce);
                    for (int64_t i = 0; i < l.numel(); ++i) l.v[size_t(i)] *= r[2].v[size_t(i % 4)];
                    return l;
                  }),
              ranged({{3, 4}, {3, 4}, {4}}, {{0.05, 0.95}, {0, 1}, {0.5, 1.5}}),
              {2}),  // (the weight takes no gradient, as in libtorch)
    with_make(row(
                  "bce_with_logits/mean", {}, {},
                  [](const V& in) { return of::binary_cross_entropy_with_logits(in[0], in[1]); },
                  [](const R& r) {
                    return reduce_ref(
                        map1(r, [](double x, double t) { return bce_logits(x, t, 1); }), Red::Mean);
                  }),
              ranged({{3, 4}, {3, 4}}, {{-3, 3}, {0, 1}})),
    with_make(row(
                  "bce_with_logits/weight_pos_weight_sum", {}, {},
                  [](const V& in) {
                    return of::binary_cross_entropy_with_logits(in[0], in[1], in[2], in[3],
                                                                Red::Sum);
                  },
                  [](const R& r) {
                    double s = 0;
                    for (int64_t i = 0; i < r[0].numel(); ++i)
                      s += r[2].v[size_t(i)] *
                           bce_logits(r[0].v[size_t(i)], r[1].v[size_t(i)], r[3].v[size_t(i % 4)]);
                    return Ref(Shape{}, {s});
                  }),
              ranged({{3, 4}, {3, 4}, {3, 4}, {4}}, {{-3, 3}, {0, 1}, {0.5, 1.5}, {0.5, 3}})),
    with_make(row(
                  "kl_div/mean", {}, {}, [](const V& in) { return of::kl_div(in[0], in[1]); },
                  [](const R& r) {
                    return reduce_ref(
                        map1(r, [](double x, double t) { return t * (std::log(t) - x); }),
                        Red::Mean);
                  }),
              ranged({{3, 4}, {3, 4}}, {{-3, 0}, {0.05, 1}})),
    with_make(row(
                  "kl_div/log_target_sum", {}, {},
                  [](const V& in) { return of::kl_div(in[0], in[1], Red::Sum, true); },
                  [](const R& r) {
                    return reduce_ref(
                        map1(r, [](double x, double t) { return std::exp(t) * (t - x); }),
                        Red::Sum);
                  }),
              ranged({{2, 5}, {2, 5}}, {{-3, 0}, {-3, 0}})),
});
// clang-format on

// ---------------------------------------------------------------- attention
// softmax(scale q k^T + mask) v per batch; k/v/mask batches repeat when smaller (broadcast).
// mask_kind: 0 none, 1 bool (nonzero = attend), 2 additive.
Ref attn_ref(const Ref& q, const Ref& k, const Ref& v, const Ref* mask, int mask_kind, bool causal,
             double scale) {
  const int64_t L = q.shape[q.shape.size() - 2], E = q.shape.back();
  const int64_t S = k.shape[k.shape.size() - 2], Ev = v.shape.back();
  const int64_t B = q.numel() / (L * E), Bk = k.numel() / (S * E), Bv = v.numel() / (S * Ev);
  const int64_t Bm = mask ? mask->numel() / (L * S) : 1;
  Shape os = q.shape;
  os.back() = Ev;
  Ref o(os);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> sc(size_t(S), -INFINITY);
      double m = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        if (causal && j > i) continue;
        const double mv = mask ? mask->v[size_t(((b % Bm) * L + i) * S + j)] : 0.0;
        if (mask_kind == 1 && mv == 0) continue;
        double d = 0;
        for (int64_t e = 0; e < E; ++e)
          d += q.v[size_t((b * L + i) * E + e)] * k.v[size_t(((b % Bk) * S + j) * E + e)];
        sc[size_t(j)] = scale * d + (mask_kind == 2 ? mv : 0.0);
        m = std::max(m, sc[size_t(j)]);
      }
      double tot = 0;
      for (int64_t j = 0; j < S; ++j) tot += std::exp(sc[size_t(j)] - m);
      for (int64_t c = 0; c < Ev; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j)
          acc += std::exp(sc[size_t(j)] - m) / tot * v.v[size_t(((b % Bv) * S + j) * Ev + c)];
        o.v[size_t((b * L + i) * Ev + c)] = acc;
      }
    }
  return o;
}

// q, k, v uniform in [-2, 2]; then a bool mask (attend with prob. 0.6, the first key always)
// or an additive mask in [-2, 0].
std::function<V(uint64_t)> attn_inputs(Shape qs, Shape ks, Shape vs, Shape ms, int kind) {
  return [=](uint64_t seed) {
    of::manual_seed(seed);
    V r;
    for (const Shape& s : {qs, ks, vs}) r.push_back(of::rand(s, of::kFloat64) * 4.0 - 2.0);
    if (kind == 1) {
      std::vector<double> u = of::rand(ms, of::kFloat64).to_vector<double>();
      std::vector<uint8_t> keep(u.size());
      const int64_t S = ms.back();
      for (size_t i = 0; i < u.size(); ++i) keep[i] = u[i] < 0.6 || int64_t(i) % S == 0;
      of::Tensor mt = of::tensor(keep, of::IntArrayRef(ms), of::kUInt8).to(of::kBool);
      r.push_back(mt);
    } else if (kind == 2) {
      r.push_back(of::rand(ms, of::kFloat64) * -2.0);
    }
    return r;
  };
}

const std::vector<std::string> kAttn = {"scaled_dot_product_attention",
                                        "scaled_dot_product_attention_backward"};
// clang-format off
TH_ROWS({
    row(
        "sdpa/basic", kAttn, {{2, 3, 4}, {2, 5, 4}, {2, 5, 3}},
        [](const V& in) { return of::scaled_dot_product_attention(in[0], in[1], in[2]); },
        [](const R& r) { return attn_ref(r[0], r[1], r[2], nullptr, 0, false, 0.5); }),
    row(
        "sdpa/causal_4d", kAttn, {{2, 2, 4, 3}, {2, 2, 4, 3}, {2, 2, 4, 3}},
        [](const V& in) {
          return of::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true);
        },
        [](const R& r) {
          return attn_ref(r[0], r[1], r[2], nullptr, 0, true, 1 / std::sqrt(3.0));
        }),
    row(
        "sdpa/broadcast_kv_scale", kAttn, {{2, 3, 4}, {5, 4}, {5, 2}},
        [](const V& in) {
          return of::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, false, 0.3);
        },
        [](const R& r) { return attn_ref(r[0], r[1], r[2], nullptr, 0, false, 0.3); }),
    with_make(row(
                  "sdpa/bool_mask_broadcast", kAttn, {},
                  [](const V& in) {
                    return of::scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
                  },
                  [](const R& r) { return attn_ref(r[0], r[1], r[2], &r[3], 1, false, 0.5); }),
              attn_inputs({2, 3, 4}, {2, 5, 4}, {2, 5, 2}, {3, 5}, 1), {3}),
    with_make(row(
                  "sdpa/additive_mask", kAttn, {},
                  [](const V& in) {
                    return of::scaled_dot_product_attention(in[0], in[1], in[2], as(in[3], in[0]));
                  },
                  [](const R& r) { return attn_ref(r[0], r[1], r[2], &r[3], 2, false, 0.5); }),
              attn_inputs({2, 3, 4}, {2, 6, 4}, {2, 6, 3}, {2, 3, 6}, 2), {3}),
});
// fused_attention (the trace's attention pass makes it, NOTE [Fused attention]): q, k^T and v
// as strided views (the harness also runs them non-contiguous: the kernel's copy path), two
// batch dims, an additive mask; no VJP (inference graphs only).
of::Tensor fused_attn(const V& in, double scale) {
  const bool masked = in.size() > 3;
  const of::Tensor o =
      of::dispatch(of::find_op("fused_attention"),
                   {in[0], in[1].transpose(-1, -2), in[2], masked ? as(in[3], in[0]) : of::Tensor()},
                   of::Attrs{scale, int64_t(masked ? 2 : 0)})[0];  // [B, L, Ev]
  of::DimVector shape(in[0].sizes().begin(), in[0].sizes().end());
  shape.back() = in[2].size(-1);
  return o.view(shape);
}
// with the heads merged in the output (NOTE [Merged heads]): [b, L, h, Ev], back to [b, h, L, Ev]
of::Tensor fused_attn_merged(const V& in, double scale) {
  const int64_t h = in[0].size(1);
  const of::Tensor o = of::dispatch(of::find_op("fused_attention"),
                                    {in[0], in[1].transpose(-1, -2), in[2], of::Tensor()},
                                    of::Attrs{scale, int64_t(0), h})[0];  // [b, L, h, Ev]
  return o.transpose(1, 2);
}
TH_ROWS({
    no_grad(row(
        "fused_attention/4d", {"fused_attention"}, {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}},
        [](const V& in) { return fused_attn(in, 0.3); },
        [](const R& r) { return attn_ref(r[0], r[1], r[2], nullptr, 0, false, 0.3); })),
    no_grad(row(
        "fused_attention/heads_merged", {"fused_attention"},
        {{2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 6, 2}},
        [](const V& in) { return fused_attn_merged(in, 0.7); },
        [](const R& r) { return attn_ref(r[0], r[1], r[2], nullptr, 0, false, 0.7); })),
    no_grad(with_make(row(
                  "fused_attention/additive_mask", {"fused_attention"}, {},
                  [](const V& in) { return fused_attn(in, 0.5); },
                  [](const R& r) { return attn_ref(r[0], r[1], r[2], &r[3], 2, false, 0.5); }),
              attn_inputs({2, 2, 3, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}, {2, 2, 3, 6}, 2), {3})),
    // float32 on AVX-512 (NOTE [Attention softmax, float32]): 37 keys (two 16-lane steps and a
    // tail) with a mask; 300 keys, more than the GEMM's k block (the scores copied for P V)
    no_grad(with_make(row(
                  "fused_attention/37_keys_masked", {"fused_attention"}, {},
                  [](const V& in) { return fused_attn(in, 0.4); },
                  [](const R& r) { return attn_ref(r[0], r[1], r[2], &r[3], 2, false, 0.4); }),
              attn_inputs({1, 2, 5, 8}, {1, 2, 37, 8}, {1, 2, 37, 17}, {1, 2, 5, 37}, 2), {3})),
    no_grad(row(
        "fused_attention/300_keys", {"fused_attention"}, {{1, 2, 13, 8}, {1, 2, 300, 8}, {1, 2, 300, 5}},
        [](const V& in) { return fused_attn(in, 0.25); },
        [](const R& r) { return attn_ref(r[0], r[1], r[2], nullptr, 0, false, 0.25); })),
});
// fused_attention_forward / _backward (the attention pass's training form, NOTE [Fused
// attention, training]): scaled_dot_product_attention's semantics over q, k^T and v as strided
// views; the harness checks the backward op against finite differences through the forward's
// VJP, on contiguous and non-contiguous operands.
of::Tensor fused_train(const V& in, double scale, int64_t kind, bool causal) {
  const of::Tensor mask = kind == 0 ? of::Tensor() : kind == 2 ? as(in[3], in[0]) : in[3];
  const of::TensorList o =
      of::dispatch(of::find_op("fused_attention_forward"),
                   {in[0], in[1].transpose(-1, -2), in[2], mask},
                   of::Attrs{scale, causal, 0.0, int64_t(0), int64_t(0), kind});  // [B, L, Ev]
  of::DimVector shape(in[0].sizes().begin(), in[0].sizes().end());
  shape.back() = in[2].size(-1);
  return o[0].view(shape);
}
const std::vector<std::string> kFusedTrain = {"fused_attention_forward",
                                              "fused_attention_backward"};
TH_ROWS({
    row(
        "fused_attention_forward/4d", kFusedTrain, {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}},
        [](const V& in) { return fused_train(in, 0.3, 0, false); },
        [](const R& r) { return attn_ref(r[0], r[1], r[2], nullptr, 0, false, 0.3); }),
    row(
        "fused_attention_forward/causal", kFusedTrain, {{1, 2, 4, 3}, {1, 2, 4, 3}, {1, 2, 4, 2}},
        [](const V& in) { return fused_train(in, 0.6, 0, true); },
        [](const R& r) { return attn_ref(r[0], r[1], r[2], nullptr, 0, true, 0.6); }),
    with_make(row(
                  "fused_attention_forward/additive_mask", kFusedTrain, {},
                  [](const V& in) { return fused_train(in, 0.5, 2, false); },
                  [](const R& r) { return attn_ref(r[0], r[1], r[2], &r[3], 2, false, 0.5); }),
              attn_inputs({2, 2, 3, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}, {2, 2, 3, 6}, 2), {3}),
    with_make(row(
                  "fused_attention_forward/bool_mask_broadcast", kFusedTrain, {},
                  [](const V& in) { return fused_train(in, 0.5, 1, false); },
                  [](const R& r) { return attn_ref(r[0], r[1], r[2], &r[3], 1, false, 0.5); }),
              attn_inputs({2, 3, 4}, {2, 5, 4}, {2, 5, 2}, {3, 5}, 1), {3}),
});
// clang-format on

// A row whose keys are all masked out (-inf) gives NaN outputs, as the softmax does; a row with
// some keys masked attends to the rest; a NaN score makes its row NaN. float32 and float64.
TEST_CASE("nn: fused_attention rows with every key masked are NaN, partly masked rows exact") {
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    CAPTURE(of::dtype_name(dt));
    of::manual_seed(11);
    const int64_t L = 4, S = 40, E = 8, Ev = 6;
    const of::Tensor q = of::rand({1, L, E}, of::kFloat64) - 0.5;
    const of::Tensor k = of::rand({1, S, E}, of::kFloat64) - 0.5;
    const of::Tensor v = of::rand({1, S, Ev}, of::kFloat64) - 0.5;
    std::vector<double> mv(size_t(L * S), 0.0);
    for (int64_t j = 0; j < S; ++j) mv[size_t(1 * S + j)] = -INFINITY;     // row 1: all
    for (int64_t j = 0; j < S; j += 3) mv[size_t(2 * S + j)] = -INFINITY;  // row 2: some
    const of::Tensor mask = of::tensor(mv, of::IntArrayRef({1, L, S}), of::kFloat64);
    of::Tensor qn = q.clone();
    qn.index_put_({0, 3, 2}, of::scalar_tensor(NAN, of::kFloat64));  // row 3: NaN
    const of::Tensor o =
        of::dispatch(of::find_op("fused_attention"),
                     {qn.to(dt), k.to(dt).transpose(-1, -2), v.to(dt), mask.to(dt)},
                     of::Attrs{0.5, int64_t(2)})[0]
            .to(of::kFloat64);
    const std::vector<double> got = o.contiguous().to_vector<double>();
    const Ref ref = attn_ref(th::to_ref(q), th::to_ref(k), th::to_ref(v), nullptr, 0, false, 0.5);
    // the reference of the masked rows: row 0 unmasked, row 2 without every third key
    const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(),
                              vv = v.to_vector<double>();
    for (int64_t i : {0, 2}) {
      std::vector<double> sc;
      std::vector<int64_t> keys;
      for (int64_t j = 0; j < S; ++j) {
        if (i == 2 && j % 3 == 0) continue;
        double d = 0;
        for (int64_t e = 0; e < E; ++e) d += qv[size_t(i * E + e)] * kv[size_t(j * E + e)];
        sc.push_back(0.5 * d);
        keys.push_back(j);
      }
      const double m = *std::max_element(sc.begin(), sc.end());
      double tot = 0;
      for (double x : sc) tot += std::exp(x - m);
      for (int64_t c = 0; c < Ev; ++c) {
        double acc = 0;
        for (size_t n = 0; n < keys.size(); ++n)
          acc += std::exp(sc[n] - m) / tot * vv[size_t(keys[n] * Ev + c)];
        CHECK(got[size_t(i * Ev + c)] == doctest::Approx(acc).epsilon(1e-5));
        if (i == 0) CHECK(acc == doctest::Approx(ref.v[size_t(c)]).epsilon(1e-12));
      }
    }
    for (int64_t c = 0; c < Ev; ++c) {
      CHECK(std::isnan(got[size_t(1 * Ev + c)]));
      CHECK(std::isnan(got[size_t(3 * Ev + c)]));
    }
  }
}

of::Tensor T64(std::vector<double> v, std::vector<int64_t> shape) {
  return of::tensor(v, of::IntArrayRef(shape), of::kFloat64);
}

}  // namespace

// ---------------------------------------------------------------- batch norm running stats

TEST_CASE("nn: batch_norm updates running stats (unbiased var, momentum) without autograd") {
  for (of::ScalarType dt : {of::kFloat64, of::kFloat32}) {
    of::Tensor x = T64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13}, {3, 2, 2}).to(dt);
    // channel 0: 1,2,5,6,9,10 ; channel 1: 3,4,7,8,11,13
    of::Tensor rm = of::full({2}, 0.5, dt), rv = of::full({2}, 2.0, dt);
    of::Tensor w = of::ones({2}, dt).set_requires_grad(true);
    of::Tensor y = of::batch_norm(x, w, {}, rm, rv, true, 0.25, 1e-5);
    CHECK(!rm.requires_grad());
    CHECK(y.requires_grad());
    for (int c = 0; c < 2; ++c) {
      std::vector<double> v =
          c == 0 ? std::vector<double>{1, 2, 5, 6, 9, 10} : std::vector<double>{3, 4, 7, 8, 11, 13};
      double m = 0, ss = 0;
      for (double a : v) m += a;
      m /= 6;
      for (double a : v) ss += (a - m) * (a - m);
      const double em = 0.75 * 0.5 + 0.25 * m, ev = 0.75 * 2.0 + 0.25 * ss / 5;
      CHECK(rm.to_vector<double>()[size_t(c)] == doctest::Approx(em).epsilon(1e-6));
      CHECK(rv.to_vector<double>()[size_t(c)] == doctest::Approx(ev).epsilon(1e-6));
    }
    // eval uses the running stats and leaves them alone
    std::vector<double> before = rm.to_vector<double>();
    of::Tensor ye = of::batch_norm(x, {}, {}, rm, rv, false, 0.25, 1e-5);
    CHECK(rm.to_vector<double>() == before);
    std::vector<double> xv = x.to_vector<double>(), yv = ye.to_vector<double>();
    std::vector<double> rmv = rm.to_vector<double>(), rvv = rv.to_vector<double>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const size_t c = (i / 2) % 2;
      CHECK(yv[i] == doctest::Approx((xv[i] - rmv[c]) / std::sqrt(rvv[c] + 1e-5)).epsilon(1e-5));
    }
  }
}

TEST_CASE("nn: fused kernels do not depend on the thread count") {
  const int saved = of::get_num_threads();
  of::manual_seed(3);
  of::Tensor x = of::randn({64, 48, 40});
  of::Tensor t = of::randint(0, 48, {64, 40}, of::kInt64);
  of::Tensor w = of::rand({48}) + 0.5;
  auto run = [&] {
    of::Tensor xl = x.detach().clone().set_requires_grad(true);
    of::Tensor a = of::batch_norm(xl, w, w, {}, {}, true, 0.1, 1e-5);
    of::Tensor b = of::layer_norm(xl, {40}, {}, {});
    of::Tensor c = of::group_norm(xl, 8, w, {});
    of::Tensor d = of::cross_entropy(xl, t, w, Red::Mean, -100, 0.1);
    of::manual_seed(5);
    of::Tensor e = of::dropout(xl, 0.4, true);
    of::Tensor f = of::scaled_dot_product_attention(xl, xl, xl, {}, 0.2, false);
    ((a * b).sum() + c.sum() + d + e.sum() + f.sum()).backward();
    return std::vector<std::vector<double>>{a.to_vector<double>(),        b.to_vector<double>(),
                                            c.to_vector<double>(),        d.to_vector<double>(),
                                            e.to_vector<double>(),        f.to_vector<double>(),
                                            xl.grad().to_vector<double>()};
  };
  of::set_num_threads(1);
  auto one = run();
  of::set_num_threads(std::max(2, saved));
  auto many = run();
  of::set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) CHECK(one[i] == many[i]);
}

// ---------------------------------------------------------------- dropout

TEST_CASE("random: batched Philox words equal Philox::generate at any offset, start and length") {
  // NOTE [Batched Philox]: the vector path, its tails and a counter whose low word carries
  int mismatches = 0;
  for (uint64_t off : {0ull, 5ull, 0xFFFFFFF0ull, 0x1FFFFFFC5ull})
    for (uint64_t first : {0ull, 1ull, 3ull, 250ull})
      for (int64_t n : {0, 1, 5, 63, 64, 65, 256, 257, 1000}) {
        std::vector<uint32_t> got(size_t(n) + 1, 0xdeadbeefu), want(size_t(n) + 1, 0xdeadbeefu);
        of::philox_words(0x123456789abcull, off, first, n, got.data());
        for (int64_t i = 0; i < n; ++i) {
          uint32_t w[4];
          const uint64_t e = first + uint64_t(i);
          of::Philox::generate(0x123456789abcull, off + e / 4, w);
          want[size_t(i)] = w[e % 4];
        }
        mismatches += got != want;
      }
  CHECK(mismatches == 0);
}

TEST_CASE("nn: dropout statistics, seeding, eval identity and mask reuse in backward") {
  of::Tensor x = of::ones({200, 500}, of::kFloat64);
  for (double p : {0.1, 0.5, 0.8}) {
    of::manual_seed(11);
    of::Tensor y = of::dropout(x, p, true);
    std::vector<double> v = y.to_vector<double>();
    double kept = 0;
    for (double a : v) {
      CHECK((a == 0 || std::fabs(a - 1 / (1 - p)) < 1e-12));
      kept += a != 0;
    }
    const double frac = kept / double(v.size());
    const double sd = std::sqrt(p * (1 - p) / double(v.size()));
    CHECK(std::fabs(frac - (1 - p)) < 5 * sd);
    // expectation is preserved
    CHECK(y.mean().item<double>() == doctest::Approx(1.0).epsilon(10 * sd / (1 - p)));
    of::manual_seed(11);
    CHECK(of::equal(of::dropout(x, p, true), y));
    CHECK(!of::equal(of::dropout(x, p, true), y));  // the generator advanced
  }
  // float32 and float64 draw the same mask for the same seed
  of::manual_seed(4);
  of::Tensor m64 = of::dropout(x, 0.5, true) != 0;
  of::manual_seed(4);
  of::Tensor m32 = of::dropout(x.to(of::kFloat32), 0.5, true) != 0;
  CHECK(of::equal(m64, m32));
  // eval / p = 0: identity (the same tensor); p = 1: all zeros
  CHECK(of::dropout(x, 0.5, false).is_same(x));
  CHECK(of::dropout(x, 0.0, true).is_same(x));
  CHECK(of::dropout(x, 1.0, true).abs().sum().item<double>() == 0.0);
  // backward multiplies by the same mask and scale
  of::Tensor xl = of::rand({30, 40}, of::kFloat64).set_requires_grad(true);
  of::manual_seed(21);
  of::Tensor y = of::dropout(xl, 0.25, true);
  (y * 3.0).sum().backward();
  std::vector<double> yv = y.to_vector<double>(), gv = xl.grad().to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) CHECK(gv[i] == (yv[i] != 0 ? 3.0 / 0.75 : 0.0));
  // in-place form
  of::Tensor z = of::ones({10, 10}, of::kFloat64);
  of::manual_seed(8);
  of::dropout_(z, 0.5, true);
  of::manual_seed(8);
  CHECK(of::equal(z, of::dropout(of::ones({10, 10}, of::kFloat64), 0.5, true)));
}

// ---------------------------------------------------------------- cross entropy extras

TEST_CASE("nn: cross_entropy gradient is softmax minus one-hot; matches log_softmax + nll") {
  of::manual_seed(2);
  of::Tensor x = of::randn({8, 6}, of::kFloat64).set_requires_grad(true);
  of::Tensor t = of::randint(0, 6, {8}, of::kInt64);
  of::Tensor l = of::cross_entropy(x, t, {}, Red::Sum);
  l.backward();
  of::Tensor expect = of::softmax(x.detach(), 1) - of::one_hot(t, 6).to(of::kFloat64);
  CHECK(of::allclose(x.grad(), expect, 1e-10, 1e-12));
  of::Tensor l2 = of::nll_loss(of::log_softmax(x.detach(), 1), t, {}, Red::Sum);
  CHECK(l.item<double>() == doctest::Approx(l2.item<double>()).epsilon(1e-12));
  // large logits stay finite
  of::Tensor big = T64({1000, 0, -1000, 500}, {2, 2});
  of::Tensor lb = of::cross_entropy(big, of::tensor(std::vector<int64_t>{1, 0}, {2}, of::kInt64),
                                    {}, Red::None);
  std::vector<double> v = lb.to_vector<double>();
  CHECK(v[0] == doctest::Approx(1000.0));
  CHECK(v[1] == doctest::Approx(1500.0));
  // all targets ignored with mean reduction: 0 / 0 = NaN, as PyTorch
  of::Tensor ti = of::full({3}, int64_t(-100), of::kInt64);
  CHECK(std::isnan(of::cross_entropy(of::zeros({3, 4}, of::kFloat64), ti).item<double>()));
}

// ---------------------------------------------------------------- error paths

TEST_CASE("nn: errors name the op and the offending shapes, values and dtypes") {
  std::string msg;
  auto check = [&](const std::function<void()>& fn, const std::vector<std::string>& needles) {
    bool ok = th::throws_with(fn, needles, &msg);
    CHECK_MESSAGE(ok, msg);
  };
  const of::Tensor x = of::randn({4, 5}, of::kFloat64);
  const of::Tensor t = of::tensor(std::vector<int64_t>{0, 1, 7, 2}, {4}, of::kInt64);
  check([&] { of::cross_entropy(x, t); }, {"[cross_entropy]", "target index 7", "5 classes"});
  check(
      [&] {
        of::nll_loss(x, of::tensor(std::vector<int64_t>{0, -3, 1, 2}, {4}, of::kInt64));
      },
      {"[nll_loss]", "target index -3"});
  check([&] { of::cross_entropy(x, of::zeros({3}, of::kInt64)); },
        {"[cross_entropy]", "target shape (3,)", "(4, 5)"});
  check([&] { of::cross_entropy(x, of::zeros({4}, of::kInt32)); },
        {"[cross_entropy]", "int64", "int32"});
  check(
      [&] {
        of::cross_entropy(x, of::zeros({4, 4}, of::kFloat64));
      },
      {"[cross_entropy]", "target shape (4, 4)", "(4, 5)"});
  check([&] { of::cross_entropy(x, of::zeros({4}, of::kInt64), of::ones({4}, of::kFloat64)); },
        {"[cross_entropy]", "weight", "(5,)", "(4,)"});
  check([&] { of::cross_entropy(x, of::zeros({4}, of::kInt64), {}, 7); },
        {"[cross_entropy]", "invalid reduction 7"});
  check([&] { of::cross_entropy(x, of::zeros({4}, of::kInt64), {}, Red::Mean, -100, 1.5); },
        {"[cross_entropy]", "label_smoothing", "1.5"});
  check(
      [&] {
        of::cross_entropy(of::zeros({4, 5}, of::kInt64), of::zeros({4}, of::kInt64));
      },
      {"[cross_entropy]", "floating-point", "int64"});
  check([&] { of::layer_norm(x, {4}); }, {"[layer_norm]", "normalized_shape (4,)", "(4, 5)"});
  check([&] { of::layer_norm(x, {5}, of::ones({4}, of::kFloat64)); },
        {"[layer_norm]", "weight", "(5,)", "(4,)"});
  check([&] { of::rms_norm(x, {3, 5}); }, {"[rms_norm]", "normalized_shape (3, 5)"});
  check(
      [&] {
        of::group_norm(of::randn({2, 6, 3}), 4);
      },
      {"[group_norm]", "num_groups 4", "channels 6"});
  check(
      [&] {
        of::group_norm(of::randn({2, 6}), 3, of::ones({3}));
      },
      {"[group_norm]", "weight", "(6,)", "(3,)"});
  check(
      [&] {
        of::layer_norm(of::ones({2, 3}, of::kInt64), {3});
      },
      {"[layer_norm]", "floating-point", "int64"});
  of::Tensor rm = of::zeros({3}, of::kFloat64), rv = of::ones({3}, of::kFloat64);
  check([&] { of::batch_norm(x, {}, {}, rm, rv, true, 0.1, 1e-5); },
        {"[batch_norm]", "running_mean", "(5,)", "(3,)"});
  CHECK(rm.to_vector<double>() == std::vector<double>{0, 0, 0});  // untouched
  check([&] { of::batch_norm(x, {}, {}, {}, {}, false, 0.1, 1e-5); },
        {"[batch_norm]", "evaluation mode"});
  check(
      [&] {
        of::batch_norm(of::randn({1, 3}), {}, {}, {}, {}, true, 0.1, 1e-5);
      },
      {"[batch_norm]", "more than 1 value per channel", "(1, 3)"});
  check([&] { of::batch_norm(of::randn({4}), {}, {}, {}, {}, true, 0.1, 1e-5); },
        {"[batch_norm]", "at least 2 dims", "(4,)"});
  check([&] { of::dropout(x, 1.5, true); }, {"[dropout]", "between 0 and 1", "1.5"});
  check([&] { of::dropout(x, -0.1, false); }, {"[dropout]", "-0.1"});
  check([&] { of::dropout(of::ones({3}, of::kInt64), 0.5, true); }, {"[dropout]", "int64"});
  check(
      [&] {
        of::linear(x, of::randn({3, 4}, of::kFloat64));
      },
      {"[linear]", "(4, 5)", "(3, 4)", "5 != 4"});
  check(
      [&] {
        of::linear(x, of::randn({3, 5}, of::kFloat64), of::randn({4}, of::kFloat64));
      },
      {"[linear]", "bias", "(3,)", "(4,)"});
  check(
      [&] {
        of::mse_loss(x, of::randn({4, 4}, of::kFloat64));
      },
      {"[mse_loss]", "target shape (4, 4)", "(4, 5)"});
  check([&] { of::l1_loss(x, x, 3); }, {"[l1_loss]", "invalid reduction 3"});
  check([&] { of::smooth_l1_loss(x, x, Red::Mean, -1.0); }, {"[smooth_l1_loss]", "beta", "-1"});
  check([&] { of::binary_cross_entropy(x.abs() + 1.0, x.abs().clamp(0.0, 1.0)); },
        {"[binary_cross_entropy]", "between 0 and 1"});
  check([&] { of::binary_cross_entropy_with_logits(x, x, of::ones({3}, of::kFloat64)); },
        {"[binary_cross_entropy_with_logits]", "weight", "(3,)", "(4, 5)"});
  check([&] { of::kl_div(x, of::ones({5}, of::kFloat64)); },
        {"[kl_div]", "target shape (5,)", "(4, 5)"});
  check([&] { of::cross_entropy(x, x.softmax(1), {}, Red::Mean, 2); },
        {"[cross_entropy]", "ignore_index (2)", "probability"});
}

TEST_CASE("nn: attention's draw map makes a piece of the batch draw as its place in the whole") {
  // NOTE [Attention draw map]: batches of logical dims (2, 3); the piece (0:2, 1:3) is batches
  // 1, 2, 4, 5 of the whole, and keeps exactly the whole's dropout elements there, forward and
  // backward
  of::manual_seed(2);
  const of::Tensor q = of::randn({6, 4, 3}, of::kFloat64), k = of::randn({6, 5, 3}, of::kFloat64);
  const of::Tensor v = of::randn({6, 5, 2}, of::kFloat64),
                   dout = of::randn({6, 4, 2}, of::kFloat64);
  auto piece = [](const of::Tensor& t) {
    return t.view({2, 3, t.size(1), t.size(2)}).narrow(1, 1, 2).reshape({4, t.size(1), t.size(2)});
  };
  const of::OpDef& fwd = of::find_op("scaled_dot_product_attention");
  const of::OpDef& bwd = of::find_op("scaled_dot_product_attention_backward");
  const of::Attrs whole{0.7, false, 0.5, int64_t(123), int64_t(7), int64_t(0)};
  of::Attrs part = whole;
  part.values.push_back(of::DimVector{2, 0, 2, 3, 1, 2});
  const of::TensorList f = of::dispatch(fwd, {q, k, v, {}}, whole);
  const of::TensorList fp = of::dispatch(fwd, {piece(q), piece(k), piece(v), {}}, part);
  CHECK(of::equal(fp[0], piece(f[0])));
  CHECK(of::equal(fp[1], piece(f[1].unsqueeze(2)).squeeze(2)));  // lse [B, L]
  // without the map the piece draws as batches 0..3: different elements are dropped
  CHECK(!of::equal(of::dispatch(fwd, {piece(q), piece(k), piece(v), {}}, whole)[0], piece(f[0])));
  const of::TensorList b = of::dispatch(bwd, {dout, q, k, v, {}, f[0], f[1]}, whole);
  const of::TensorList bp =
      of::dispatch(bwd, {piece(dout), piece(q), piece(k), piece(v), {}, fp[0], fp[1]}, part);
  for (size_t i = 0; i < 3; ++i) CHECK(of::equal(bp[i], piece(b[i])));
  // a map that does not describe the batches is an error
  for (const of::DimVector& bad : {of::DimVector{2, 1, 2, 3, 1, 2}, of::DimVector{2, 0, 2, 3},
                                   of::DimVector{2, 0, 2, 3, 0, 3}}) {
    of::Attrs a = whole;
    a.values.push_back(bad);
    CHECK(th::throws_with(
        [&] {
          (void)of::dispatch(fwd, {piece(q), piece(k), piece(v), {}}, a);
        },
        {"[scaled_dot_product_attention]", "draw_map", "4 batches"}));
  }
}

TEST_CASE("nn: attention dropout is seeded and its backward reuses the mask") {
  of::manual_seed(1);
  of::Tensor q = of::randn({2, 4, 3}, of::kFloat64), k = of::randn({2, 6, 3}, of::kFloat64);
  of::Tensor v = of::randn({2, 6, 5}, of::kFloat64);
  auto f = [](const std::vector<of::Tensor>& in) {
    of::manual_seed(77);
    return of::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.4);
  };
  of::Tensor a = f({q, k, v}), b = f({q, k, v});
  CHECK(of::equal(a, b));
  CHECK(!of::allclose(a, of::scaled_dot_product_attention(q, k, v)));
  // gradients vs finite differences with the mask held fixed by the seed
  std::string err = th::gradcheck(f, {q, k, v});
  CHECK_MESSAGE(err.empty(), err);
  // values stay finite and bounded by max|v| / (1 - p) for a large p
  of::manual_seed(3);
  of::Tensor big = of::scaled_dot_product_attention(q, k, v, {}, 0.9);
  CHECK(big.abs().max().item<double>() <= v.abs().max().item<double>() / 0.1 + 1e-9);
  std::string msg;
  CHECK_MESSAGE(th::throws_with([&] { of::scaled_dot_product_attention(q, k, v, {}, 1.0); },
                                {"[scaled_dot_product_attention]", "dropout_p", "1"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      of::scaled_dot_product_attention(q, of::randn({2, 6, 4}, of::kFloat64), v);
                    },
                    {"[scaled_dot_product_attention]", "(2, 4, 3)", "(2, 6, 4)"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      of::scaled_dot_product_attention(q, k, v, of::ones({4, 5}, of::kBool));
                    },
                    {"[scaled_dot_product_attention]", "attn_mask", "(4, 5)", "(2, 4, 6)"}, &msg),
                msg);
  CHECK_MESSAGE(
      th::throws_with(
          [&] {
            of::scaled_dot_product_attention(q, k, v, of::ones({4, 6}, of::kBool), 0.0, true);
          },
          {"[scaled_dot_product_attention]", "is_causal"}, &msg),
      msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      of::scaled_dot_product_attention(q, of::randn({3, 6, 3}, of::kFloat64), v);
                    },
                    {"[scaled_dot_product_attention]", "batch dims", "(3, 6, 3)"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with([&] { of::scaled_dot_product_attention(q.to(of::kFloat32), k, v); },
                                {"[scaled_dot_product_attention]", "float32", "float64"}, &msg),
                msg);
}

TEST_CASE("nn: double backward through a fused op is an error, not a missing term") {
  // A gradient penalty (WGAN-GP style): d/dx of a network output, taken with create_graph,
  // then differentiated again. Composite paths (linear, tanh) are twice differentiable; the
  // fused normalization / loss / attention backward ops are not, and say so when reached.
  of::manual_seed(3);
  const of::Tensor w = of::randn({4, 6}, of::kFloat64);
  auto penalty = [&](const std::function<of::Tensor(const of::Tensor&)>& f) {
    of::Tensor x = of::randn({3, 6}, of::kFloat64).set_requires_grad(true);
    of::Tensor y = f(of::linear(x, w).tanh());
    of::Tensor g = of::autograd::grad({y.sum()}, {x}, {}, std::nullopt, true)[0];
    CHECK(g.requires_grad());
    return (g * g).sum();
  };
  // composite: the second backward runs and matches finite differences
  const of::Tensor x0 = of::randn({3, 6}, of::kFloat64);
  const std::string err = th::gradcheck(
      [&](const std::vector<of::Tensor>& v) {
        of::EnableGradGuard eg;
        of::Tensor x = v[0];  // finite differences call this under no_grad with a plain tensor
        if (!x.requires_grad()) x = x.detach().set_requires_grad(true);
        of::Tensor y = of::linear(x, w).tanh().pow(2);
        return of::autograd::grad({y.sum()}, {x}, {}, std::nullopt, true)[0];
      },
      {x0});
  CHECK_MESSAGE(err.empty(), err);
  penalty([](const of::Tensor& h) { return h.pow(2); }).backward();
  // fused ops: a clear error naming the op when the second backward reaches it
  const std::vector<std::pair<std::string, std::function<of::Tensor(const of::Tensor&)>>> fused = {
      {"layer_norm_backward", [](const of::Tensor& h) { return of::layer_norm(h, {4}); }},
      {"group_norm_backward", [](const of::Tensor& h) { return of::group_norm(h, 2); }},
      {"rms_norm_backward", [](const of::Tensor& h) { return of::rms_norm(h, {4}); }},
      {"batch_norm_backward",
       [](const of::Tensor& h) { return of::batch_norm(h, {}, {}, {}, {}, true, 0.1, 1e-5); }},
      {"cross_entropy_backward",
       [](const of::Tensor& h) {
         return of::cross_entropy(h, of::tensor({0, 3, 1}, of::kInt64));
       }},
      {"scaled_dot_product_attention_backward",
       [](const of::Tensor& h) { return of::scaled_dot_product_attention(h, h, h); }},
  };
  for (const auto& entry : fused) {
    // named references, not a structured binding: clang 14 cannot capture bindings in lambdas
    const auto& name = std::get<0>(entry);
    const auto& f = std::get<1>(entry);
    CAPTURE(name);
    of::Tensor p = penalty(f);
    CHECK(th::throws_with([&] { p.backward(); }, {"[" + name + "]", "double backward"}));
  }
}

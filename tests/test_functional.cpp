// test_functional.cpp: of::nn::functional (libtorch's option-taking forms) and the layers built
// on it: the composite activations and losses as table rows (float64 references, finite
// differences), the forwarding forms against the root ops, interpolate's scale_factor, option
// tags (of::kMean, of::kSame, ...), loss/activation/Upsample modules, conv padding modes, and
// the error paths.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness.h"

namespace {

using th::Ref;
using th::Shape;
using T = of::Tensor;
using V = std::vector<T>;
using R = std::vector<Ref>;
namespace F = of::nn::functional;
namespace nn = of::nn;

th::OpRow row(std::string name, std::vector<Shape> shapes, std::function<T(const V&)> fn,
              std::function<Ref(const R&)> ref, double lo = -2, double hi = 2) {
  th::OpRow r;
  r.name = "functional/" + std::move(name);
  r.shapes = std::move(shapes);
  r.fn = std::move(fn);
  r.ref = std::move(ref);
  r.lo = lo;
  r.hi = hi;
  r.rtol = 1e-4;
  r.atol = 1e-5;
  return r;
}

// Elementwise reference of one input.
std::function<Ref(const R&)> unary(std::function<double(double)> f) {
  return [f](const R& in) {
    return th::map_ref({in[0]}, [f](const std::vector<double>& v) { return f(v[0]); });
  };
}

double softplus_ref(double x, double beta, double threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}

double sum_of(const Ref& r) {
  double s = 0;
  for (double v : r.v) s += v;
  return s;
}

// The slice of x along dim [start, start + len).
Ref narrow_ref(const Ref& x, int64_t dim, int64_t start, int64_t len) {
  Shape s = x.shape;
  s[size_t(dim)] = len;
  Ref r(s);
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape idx = r.index(i);
    idx[size_t(dim)] += start;
    r.v[size_t(i)] = x.at(idx);
  }
  return r;
}

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

// clang-format off
TH_ROWS({
    row("leaky_relu", {{3, 5}},
        [](const V& in) { return F::leaky_relu(in[0], F::LeakyReLUFuncOptions().negative_slope(0.2)); },
        unary([](double x) { return x > 0 ? x : 0.2 * x; })),
    row("elu", {{4, 3}},
        [](const V& in) { return F::elu(in[0], F::ELUFuncOptions().alpha(1.5)); },
        unary([](double x) { return x > 0 ? x : 1.5 * std::expm1(x); })),
    row("selu", {{4, 3}}, [](const V& in) { return F::selu(in[0]); },
        unary([](double x) { return kSeluScale * (x > 0 ? x : kSeluAlpha * std::expm1(x)); })),
    row("hardtanh", {{5, 4}},
        [](const V& in) { return F::hardtanh(in[0], F::HardtanhFuncOptions().min_val(-0.5).max_val(1)); },
        unary([](double x) { return std::clamp(x, -0.5, 1.0); })),
    row("relu6", {{5, 4}}, [](const V& in) { return F::relu6(in[0]); },
        unary([](double x) { return std::clamp(x, 0.0, 6.0); }), -3, 9),
    row("softplus/both_branches", {{4, 5}},
        [](const V& in) { return F::softplus(in[0], F::SoftplusFuncOptions().beta(2).threshold(3)); },
        unary([](double x) { return softplus_ref(x, 2, 3); })),
    row("logsigmoid", {{4, 5}}, [](const V& in) { return F::logsigmoid(in[0]); },
        unary([](double x) { return -std::log1p(std::exp(-x)); }), -6, 6),
    row("mish", {{4, 5}}, [](const V& in) { return F::mish(in[0]); },
        unary([](double x) { return x * std::tanh(std::log1p(std::exp(x))); })),
    row("softsign", {{4, 5}}, [](const V& in) { return F::softsign(in[0]); },
        unary([](double x) { return x / (1 + std::abs(x)); })),
    row("tanhshrink", {{4, 5}}, [](const V& in) { return F::tanhshrink(in[0]); },
        unary([](double x) { return x - std::tanh(x); })),
    row("silu_and_gelu_tanh", {{3, 4}},
        [](const V& in) {
          return F::silu(in[0]) + F::gelu(in[0], F::GELUFuncOptions().approximate("tanh"));
        },
        unary([](double x) {
          const double k = std::sqrt(2.0 / M_PI);
          return x / (1 + std::exp(-x)) + 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
        })),
    row("glu/dim1", {{3, 6, 2}}, [](const V& in) { return F::glu(in[0], 1); },
        [](const R& in) {
          const Ref a = narrow_ref(in[0], 1, 0, 3), b = narrow_ref(in[0], 1, 3, 3);
          return th::map_ref({a, b}, [](const std::vector<double>& v) {
            return v[0] / (1 + std::exp(-v[1]));
          });
        }),
    row("softmin/dim0", {{4, 3}}, [](const V& in) { return F::softmin(in[0], 0); },
        [](const R& in) {
          Ref r(in[0].shape);
          for (int64_t j = 0; j < 3; ++j) {
            double s = 0;
            for (int64_t i = 0; i < 4; ++i) s += std::exp(-in[0].at({i, j}));
            for (int64_t i = 0; i < 4; ++i) r.v[size_t(i * 3 + j)] = std::exp(-in[0].at({i, j})) / s;
          }
          return r;
        }),
    row("normalize/p2_dim1", {{3, 4, 2}}, [](const V& in) { return F::normalize(in[0]); },
        [](const R& in) {
          Ref r(in[0].shape);
          for (int64_t i = 0; i < r.numel(); ++i) {
            Shape idx = r.index(i);
            double n = 0;
            for (int64_t k = 0; k < 4; ++k) {
              Shape j = idx;
              j[1] = k;
              n += in[0].at(j) * in[0].at(j);
            }
            r.v[size_t(i)] = in[0].v[size_t(i)] / std::max(std::sqrt(n), 1e-12);
          }
          return r;
        }),
    row("normalize/p1_dim_last", {{3, 5}},
        [](const V& in) { return F::normalize(in[0], F::NormalizeFuncOptions().p(1).dim(-1)); },
        [](const R& in) {
          Ref r(in[0].shape);
          for (int64_t i = 0; i < 3; ++i) {
            double n = 0;
            for (int64_t k = 0; k < 5; ++k) n += std::abs(in[0].at({i, k}));
            for (int64_t k = 0; k < 5; ++k) r.v[size_t(i * 5 + k)] = in[0].at({i, k}) / n;
          }
          return r;
        }),
    row("huber_loss/none", {{4, 3}, {4, 3}},
        [](const V& in) {
          return F::huber_loss(in[0], in[1], F::HuberLossFuncOptions(of::kNone).delta(0.7));
        },
        [](const R& in) {
          return th::map_ref({in[0], in[1]}, [](const std::vector<double>& v) {
            const double d = std::abs(v[0] - v[1]);
            return d < 0.7 ? 0.5 * d * d : 0.7 * (d - 0.35);
          });
        }),
    row("huber_loss/mean", {{5, 2}, {5, 2}},
        [](const V& in) { return F::huber_loss(in[0], in[1], F::HuberLossFuncOptions().delta(1.3)); },
        [](const R& in) {
          const Ref l = th::map_ref({in[0], in[1]}, [](const std::vector<double>& v) {
            const double d = std::abs(v[0] - v[1]);
            return d < 1.3 ? 0.5 * d * d : 1.3 * (d - 0.65);
          });
          return Ref(Shape{}, {sum_of(l) / double(l.numel())});
        }),
    row("kl_div/batchmean", {{4, 3}, {4, 3}},
        [](const V& in) {
          return F::kl_div(in[0], in[1], F::KLDivFuncOptions(of::kBatchMean).log_target(true));
        },
        [](const R& in) {
          const Ref l = th::map_ref({in[0], in[1]}, [](const std::vector<double>& v) {
            return std::exp(v[1]) * (v[1] - v[0]);
          });
          return Ref(Shape{}, {sum_of(l) / 4.0});
        }),
});
// clang-format on

T uniform(Shape s, uint64_t seed, double lo = -2, double hi = 2) {
  of::manual_seed(seed);
  return of::rand(s, of::kFloat64) * (hi - lo) + lo;
}

bool same(const T& a, const T& b, double tol = 0) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && of::allclose(a, b, tol, tol);
}

}  // namespace

TEST_CASE("functional: option tags are typed and named as libtorch's") {
  CHECK(of::enumtype::get_enum_name(F::InterpolateFuncOptions().mode()) == "kNearest");
  CHECK(of::enumtype::get_enum_name(F::PadFuncOptions({1}).mode(of::kReflect).mode()) ==
        "kReflect");
  CHECK(of::enumtype::get_enum_name(nn::CrossEntropyLossOptions().reduction()) == "kMean");
  CHECK(of::enumtype::get_enum_name(nn::MSELossOptions(of::kSum).reduction()) == "kSum");
  CHECK(F::reduction_enum(of::kNone) == of::Reduction::None);
  CHECK(F::reduction_enum(of::kSum) == of::Reduction::Sum);
  CHECK(F::reduction_enum(nn::L1LossOptions().reduction()) == of::Reduction::Mean);
  // padding: one value, a braced list, or a tag
  CHECK(std::get<of::ExpandingArray<2>>(nn::Conv2dOptions(1, 1, 3).padding()) ==
        of::ExpandingArray<2>(0));
  CHECK(std::get<of::ExpandingArray<2>>(nn::Conv2dOptions(1, 1, 3).padding({1, 2}).padding()) ==
        of::ExpandingArray<2>({1, 2}));
  CHECK(std::holds_alternative<of::enumtype::kSame>(
      nn::Conv2dOptions(1, 1, 3).padding(of::kSame).padding()));
  // init takes the tags
  CHECK(nn::init::calculate_gain(of::kReLU) == doctest::Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain(of::kTanh) == doctest::Approx(5.0 / 3.0));
  CHECK(nn::init::calculate_gain(of::kLeakyReLU, 0.2) == doctest::Approx(std::sqrt(2.0 / 1.04)));
  CHECK(nn::init::calculate_gain(of::kConv2D) == 1.0);
  of::manual_seed(3);
  T w = of::empty({400, 300}, of::kFloat64);
  nn::init::kaiming_normal_(w, 0, of::kFanOut, of::kReLU);
  CHECK(w.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 400)).epsilon(0.02));
  nn::init::kaiming_uniform_(w, 0, of::kFanIn, of::kLinear);
  CHECK(w.abs().max().item<double>() <= std::sqrt(3.0 / 300) + 1e-12);
  CHECK(w.abs().max().item<double>() > 0.99 * std::sqrt(3.0 / 300));
}

TEST_CASE("functional: forwarding forms equal the root ops") {
  const T x = uniform({2, 3, 7, 6}, 1), w = uniform({4, 3, 3, 3}, 2), b = uniform({4}, 3);
  CHECK(same(F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).stride(2).padding({1, 0})),
             of::conv2d(x, w, b, 2, {1, 0})));
  CHECK(same(F::conv2d(x, w, F::Conv2dFuncOptions().padding(of::kSame).dilation(2)),
             of::conv2d(x, w, {}, 1, "same", 2)));
  CHECK(same(F::conv2d(x, w, F::Conv2dFuncOptions().padding(of::kValid)), of::conv2d(x, w)));
  const T x1 = uniform({2, 3, 9}, 4), w1 = uniform({5, 3, 4}, 5);
  CHECK(same(F::conv1d(x1, w1, F::Conv1dFuncOptions().padding(of::kSame)),
             of::conv1d(x1, w1, {}, 1, "same")));
  const T wt = uniform({3, 2, 3, 3}, 6);
  CHECK(
      same(F::conv_transpose2d(x, wt, F::ConvTranspose2dFuncOptions().stride(2).output_padding(1)),
           of::conv_transpose2d(x, wt, {}, 2, 0, 1)));
  CHECK(same(F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(2).padding(1).ceil_mode(true)),
             of::max_pool2d(x, 3, 2, 1, 1, true)));
  auto [mv, mi] = F::max_pool2d_with_indices(x, F::MaxPool2dFuncOptions({2, 3}));
  auto [rv, ri] = of::max_pool2d_with_indices(x, {2, 3});
  CHECK(same(mv, rv));
  CHECK(of::equal(mi, ri));
  CHECK(same(
      F::avg_pool2d(x, F::AvgPool2dFuncOptions(3).stride(2).padding(1).count_include_pad(false)),
      of::avg_pool2d(x, 3, 2, 1, false, false)));
  CHECK(same(F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({3, 2})),
             of::adaptive_avg_pool2d(x, {3, 2})));

  // batch_norm updates the running stats as the op does
  const T g = uniform({3}, 7), beta = uniform({3}, 8);
  T rm1 = of::zeros({3}, of::kFloat64), rv1 = of::ones({3}, of::kFloat64);
  T rm2 = rm1.clone(), rv2 = rv1.clone();
  CHECK(same(
      F::batch_norm(x, rm1, rv1,
                    F::BatchNormFuncOptions().weight(g).bias(beta).training(true).momentum(0.3)),
      of::batch_norm(x, g, beta, rm2, rv2, true, 0.3, 1e-5)));
  CHECK(same(rm1, rm2));
  CHECK(same(rv1, rv2));
  CHECK(same(F::batch_norm(x, rm1, rv1), of::batch_norm(x, {}, {}, rm1, rv1, false, 0.1, 1e-5)));
  CHECK(same(F::layer_norm(x, F::LayerNormFuncOptions({7, 6}).eps(1e-3)),
             of::layer_norm(x, {7, 6}, {}, {}, 1e-3)));
  CHECK(same(F::group_norm(x, F::GroupNormFuncOptions(3).weight(g).bias(beta)),
             of::group_norm(x, 3, g, beta)));

  // dropout: seeded like the op; identity when not training; inplace writes the input
  of::manual_seed(9);
  const T d1 = F::dropout(x, F::DropoutFuncOptions().p(0.3));
  of::manual_seed(9);
  CHECK(same(d1, of::dropout(x, 0.3, true)));
  CHECK(same(F::dropout(x, F::DropoutFuncOptions().training(false)), x));
  T xi = x.clone();
  of::manual_seed(9);
  F::dropout(xi, F::DropoutFuncOptions().p(0.3).inplace(true));
  CHECK(same(xi, d1));

  // embedding: indices first; a negative padding_idx counts from the end
  const T table = uniform({6, 4}, 10), idx = of::tensor({5, 1, 5, 0}, of::kInt64);
  CHECK(same(F::embedding(idx, table), of::embedding(table, idx)));
  T tw = table.clone().requires_grad_(true);
  F::embedding(idx, tw, F::EmbeddingFuncOptions().padding_idx(-1)).sum().backward();
  CHECK(tw.grad()[5].abs().sum().item<double>() == 0.0);
  CHECK(tw.grad()[1].sum().item<double>() == 4.0);

  // softmax family with a dtype
  const T xf = x.to(of::kFloat32);
  CHECK(same(F::softmax(xf, F::SoftmaxFuncOptions(1).dtype(of::kFloat64)),
             of::softmax(xf, 1, of::kFloat64)));
  CHECK(same(F::log_softmax(x, -1), of::log_softmax(x, -1)));
  CHECK(same(F::relu(x), of::relu(x)));
  CHECK(same(F::gelu(x), of::gelu(x)));

  // losses: options become the ops' positional arguments
  const T logits = uniform({5, 4}, 11), cls = of::tensor({0, 3, 1, 3, 2}, of::kInt64);
  const T cw = uniform({4}, 12, 0.5, 2);
  CHECK(same(F::cross_entropy(
                 logits, cls,
                 F::CrossEntropyFuncOptions().weight(cw).label_smoothing(0.1).ignore_index(3)),
             of::cross_entropy(logits, cls, cw, of::Reduction::Mean, 3, 0.1)));
  CHECK(same(F::cross_entropy(logits, cls, F::CrossEntropyFuncOptions().reduction(of::kNone)),
             of::cross_entropy(logits, cls, {}, of::Reduction::None)));
  const T lp = of::log_softmax(logits, 1);
  CHECK(same(F::nll_loss(lp, cls, F::NLLLossFuncOptions().reduction(of::kSum).ignore_index(0)),
             of::nll_loss(lp, cls, {}, of::Reduction::Sum, 0)));
  const T a = uniform({3, 4}, 13), t = uniform({3, 4}, 14);
  CHECK(same(F::mse_loss(a, t, of::kSum), of::mse_loss(a, t, of::Reduction::Sum)));
  CHECK(same(F::mse_loss(a, t), of::mse_loss(a, t)));
  CHECK(same(F::l1_loss(a, t, F::L1LossFuncOptions(of::kNone)),
             of::l1_loss(a, t, of::Reduction::None)));
  CHECK(same(F::smooth_l1_loss(a, t, F::SmoothL1LossFuncOptions().beta(0.5)),
             of::smooth_l1_loss(a, t, of::Reduction::Mean, 0.5)));
  CHECK(
      same(F::smooth_l1_loss(a, t, {}, 0.25), of::smooth_l1_loss(a, t, of::Reduction::Mean, 0.25)));
  const T p = of::sigmoid(a), q = of::sigmoid(t), bw = uniform({4}, 15, 0.5, 2);
  CHECK(same(F::binary_cross_entropy(p, q, F::BinaryCrossEntropyFuncOptions().weight(bw)),
             of::binary_cross_entropy(p, q, bw)));
  CHECK(same(
      F::binary_cross_entropy_with_logits(
          a, q, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(bw).reduction(of::kSum)),
      of::binary_cross_entropy_with_logits(a, q, {}, bw, of::Reduction::Sum)));
  CHECK(same(F::kl_div(lp, of::softmax(logits.flip({0}), 1), F::KLDivFuncOptions(of::kSum)),
             of::kl_div(lp, of::softmax(logits.flip({0}), 1), of::Reduction::Sum)));
  CHECK(same(F::kl_div(lp, lp.flip({0}), F::KLDivFuncOptions().log_target(true)),
             of::kl_div(lp, lp.flip({0}), of::Reduction::Mean, true)));

  // pad: the tag picks the op's mode
  CHECK(same(F::pad(x, F::PadFuncOptions({1, 2, 2, 1}).mode(of::kReflect)),
             of::pad(x, {1, 2, 2, 1}, "reflect")));
  CHECK(same(F::pad(x, F::PadFuncOptions({1, 0}).value(3.5)), of::pad(x, {1, 0}, "constant", 3.5)));
  CHECK(same(F::pad(x, F::PadFuncOptions({2, 2}).mode(of::kCircular)),
             of::pad(x, {2, 2}, "circular")));
}

TEST_CASE("functional: interpolate by size or scale_factor, libtorch's index formulas") {
  const T x = uniform({2, 3, 5, 4}, 21);
  // size: the plain ops
  CHECK(same(F::interpolate(x, F::InterpolateFuncOptions().size(std::vector<int64_t>{7, 9})),
             of::upsample_nearest2d(x, {7, 9})));
  CHECK(same(F::interpolate(x, F::InterpolateFuncOptions()
                                   .size(std::vector<int64_t>{3, 8})
                                   .mode(of::kBilinear)
                                   .align_corners(true)),
             of::upsample_bilinear2d(x, {3, 8}, true)));
  // scale_factor: output floor(in * s), source step 1/s (not in/out)
  const T n =
      F::interpolate(x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{1.5, 2.7}));
  CHECK(n.sizes() == of::IntArrayRef{2, 3, 7, 10});
  CHECK(same(n, of::upsample_nearest2d(x, {7, 10}, 1.5, 2.7)));
  CHECK(!same(n, of::upsample_nearest2d(x, {7, 10}),
              1e-9));  // column 5: floor(5 / 2.7) = 1, floor(5 * 4 / 10) = 2
  const T bl = F::interpolate(x, F::InterpolateFuncOptions()
                                     .scale_factor(std::vector<double>{1.5, 2.7})
                                     .mode(of::kBilinear)
                                     .align_corners(false));
  CHECK(same(bl, of::upsample_bilinear2d(x, {7, 10}, false, 1.5, 2.7)));
  CHECK(!same(bl, of::upsample_bilinear2d(x, {7, 10}, false), 1e-9));
  // recompute_scale_factor: the sizes decide the step
  CHECK(same(F::interpolate(x, F::InterpolateFuncOptions()
                                   .scale_factor(std::vector<double>{1.5, 2.7})
                                   .mode(of::kBilinear)
                                   .align_corners(false)
                                   .recompute_scale_factor(true)),
             of::upsample_bilinear2d(x, {7, 10}, false)));
  // integer scales: identical either way
  CHECK(same(F::interpolate(x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2})),
             of::upsample_nearest2d(x, {10, 8})));
  // area = adaptive average pooling
  CHECK(same(F::interpolate(
                 x, F::InterpolateFuncOptions().size(std::vector<int64_t>{2, 3}).mode(of::kArea)),
             of::adaptive_avg_pool2d(x, {2, 3})));
  // gradients through the scaled form
  const T xs = uniform({1, 2, 3, 4}, 22);
  CHECK(th::gradcheck(
            [](const V& in) {
              return F::interpolate(in[0], F::InterpolateFuncOptions()
                                               .scale_factor(std::vector<double>{1.7, 1.3})
                                               .mode(of::kBilinear)
                                               .align_corners(false));
            },
            {xs}) == "");
  // Upsample module
  nn::Upsample up(nn::UpsampleOptions()
                      .scale_factor(std::vector<double>{2, 3})
                      .mode(of::kBilinear)
                      .align_corners(true));
  CHECK(same(up(x), of::upsample_bilinear2d(x, {10, 12}, true, 2.0, 3.0)));
  std::ostringstream os;
  os << *up;
  CHECK(os.str() == "Upsample(scale_factor=[2, 3], mode=kBilinear)");
}

TEST_CASE("functional: activation modules, loss modules and inplace forms") {
  const T x = uniform({4, 6}, 31);
  CHECK(same(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.1))(x),
             F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.1))));
  CHECK(same(nn::ELU()(x), F::elu(x)));
  CHECK(same(nn::SELU()(x), F::selu(x)));
  CHECK(same(nn::Hardtanh()(x), x.clamp(-1, 1)));
  CHECK(same(nn::ReLU6()(x * 4), (x * 4).clamp(0, 6)));
  CHECK(same(nn::Softplus()(x), F::softplus(x)));
  CHECK(same(nn::Mish()(x), F::mish(x)));
  CHECK(same(nn::LogSigmoid()(x), F::logsigmoid(x)));
  CHECK(same(nn::GLU()(x), F::glu(x, -1)));
  CHECK(same(nn::Softmin(1)(x), of::softmax(-x, 1)));
  CHECK(same(nn::GELU(nn::GELUOptions().approximate("tanh"))(x), of::gelu(x, "tanh")));
  std::ostringstream os;
  os << *nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.1)) << " " << *nn::ReLU(true);
  CHECK(os.str() == "LeakyReLU(negative_slope=0.1) ReLU(inplace=true)");

  // inplace: the input itself holds the result
  T a = x.clone();
  nn::ReLU(nn::ReLUOptions(true))(a);
  CHECK(same(a, of::relu(x)));
  T c = x.clone();
  T r = F::leaky_relu(c, F::LeakyReLUFuncOptions().inplace(true));
  CHECK(same(c, F::leaky_relu(x)));
  CHECK(r.data_ptr() == c.data_ptr());
  T h = x.clone();
  F::hardtanh(h, F::HardtanhFuncOptions().min_val(0).max_val(0.5).inplace(true));
  CHECK(same(h, x.clamp(0, 0.5)));

  // loss modules = their functional forms; a class weight is a buffer moved by to(dtype)
  const T logits = uniform({5, 3}, 32).to(of::kFloat32),
          y = of::tensor({2, 0, 1, 1, 0}, of::kInt64);
  const T cw = of::tensor({0.5, 2.0, 1.0}, of::kFloat32);
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(cw).label_smoothing(0.05));
  CHECK(same(
      ce(logits, y),
      F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().weight(cw).label_smoothing(0.05))));
  CHECK(ce->named_buffers().size() == 1);
  ce->to(of::kFloat64);
  CHECK(ce->options.weight().dtype() == of::kFloat64);
  CHECK(ce(logits.to(of::kFloat64), y).dtype() == of::kFloat64);
  const T t = uniform({5, 3}, 33).to(of::kFloat32);
  CHECK(same(nn::MSELoss(of::kSum)(logits, t), of::mse_loss(logits, t, of::Reduction::Sum)));
  CHECK(same(nn::L1Loss()(logits, t), of::l1_loss(logits, t)));
  CHECK(same(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0.3))(logits, t),
             of::smooth_l1_loss(logits, t, of::Reduction::Mean, 0.3)));
  CHECK(same(nn::HuberLoss(nn::HuberLossOptions().delta(0.3))(logits, t),
             of::smooth_l1_loss(logits, t, of::Reduction::Mean, 0.3) * 0.3));
  CHECK(same(nn::NLLLoss()(of::log_softmax(logits, 1), y),
             of::nll_loss(of::log_softmax(logits, 1), y)));
  CHECK(same(nn::BCELoss()(of::sigmoid(logits), of::sigmoid(t)),
             of::binary_cross_entropy(of::sigmoid(logits), of::sigmoid(t))));
  const T pw = of::tensor({1.0, 3.0, 0.5}, of::kFloat32);
  nn::BCEWithLogitsLoss bl(nn::BCEWithLogitsLossOptions().pos_weight(pw));
  CHECK(bl->named_buffers().contains("pos_weight"));
  CHECK(same(bl(logits, of::sigmoid(t)),
             of::binary_cross_entropy_with_logits(logits, of::sigmoid(t), {}, pw)));
  CHECK(same(nn::KLDivLoss(of::kBatchMean)(of::log_softmax(logits, 1), of::softmax(t, 1)),
             of::kl_div(of::log_softmax(logits, 1), of::softmax(t, 1), of::Reduction::Sum) / 5.0));
}

TEST_CASE("functional: Conv padding tags and padding modes") {
  of::manual_seed(41);
  const T x = uniform({2, 3, 6, 5}, 42).to(of::kFloat32);
  nn::Conv2d same_conv(nn::Conv2dOptions(3, 4, {3, 2}).padding(of::kSame));
  CHECK(same_conv(x).sizes() == of::IntArrayRef{2, 4, 6, 5});
  CHECK(same(same_conv(x), of::conv2d(x, same_conv->weight, same_conv->bias, 1, "same")));
  nn::Conv1d valid(nn::Conv1dOptions(3, 2, 3).padding(of::kValid));
  const T x1 = uniform({2, 3, 8}, 43).to(of::kFloat32);
  CHECK(same(valid(x1), of::conv1d(x1, valid->weight, valid->bias)));
  // reflect / replicate / circular pad the input first, then convolve unpadded
  const std::vector<std::pair<nn::Conv2dOptions::padding_mode_t, const char*>> modes = {
      {of::kReflect, "reflect"}, {of::kReplicate, "replicate"}, {of::kCircular, "circular"}};
  for (const auto& entry : modes) {
    // named references, not a structured binding: clang 14 cannot capture bindings in lambdas
    const auto& mode = entry.first;
    const auto& name = entry.second;
    CAPTURE(name);
    nn::Conv2d c(nn::Conv2dOptions(3, 4, 3).padding({1, 2}).padding_mode(mode));
    CHECK(same(c(x), of::conv2d(of::pad(x, {2, 2, 1, 1}, name), c->weight, c->bias)));
    nn::Conv2d cs(
        nn::Conv2dOptions(3, 4, {3, 4}).padding(of::kSame).padding_mode(mode).dilation(2));
    // "same" with dilation 2: total pads 4 (rows) and 6 (columns), split evenly
    CHECK(same(cs(x), of::conv2d(of::pad(x, {3, 3, 2, 2}, name), cs->weight, cs->bias, 1, 0, 2)));
    CHECK(cs(x).sizes() == of::IntArrayRef{2, 4, 6, 5});
  }
  std::ostringstream os;
  os << *nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(of::kSame).padding_mode(of::kCircular));
  CHECK(os.str() ==
        "Conv2d(3, 4, kernel_size=[3, 3], stride=[1, 1], padding=same, padding_mode=kCircular)");
  CHECK(th::throws_with([] { nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(of::kSame).stride(2)); },
                        {"[Conv2d]", "same", "strided"}));
}

TEST_CASE("functional: errors name the function and the offending values") {
  const T x = uniform({1, 2, 4, 4}, 51);
  using IO = F::InterpolateFuncOptions;
  CHECK(th::throws_with([&] { F::interpolate(x, IO()); },
                        {"[interpolate]", "either size or scale_factor"}));
  CHECK(th::throws_with(
      [&] {
        F::interpolate(
            x, IO().size(std::vector<int64_t>{2, 2}).scale_factor(std::vector<double>{2, 2}));
      },
      {"[interpolate]", "only one"}));
  CHECK(th::throws_with([&] { F::interpolate(x, IO().scale_factor(std::vector<double>{2})); },
                        {"[interpolate]", "scale_factor", "1 entries"}));
  CHECK(th::throws_with(
      [&] {
        F::interpolate(x, IO().size(std::vector<int64_t>{2, 2, 2}));
      },
      {"[interpolate]", "size", "3"}));
  CHECK(th::throws_with(
      [&] {
        F::interpolate(x, IO().size(std::vector<int64_t>{2, 2}).align_corners(true));
      },
      {"[interpolate]", "align_corners", "kNearest"}));
  CHECK(th::throws_with(
      [&] {
        F::interpolate(x, IO().size(std::vector<int64_t>{2, 2}).mode(of::kBicubic));
      },
      {"[interpolate]", "kBicubic", "not implemented"}));
  CHECK(th::throws_with(
      [&] {
        F::interpolate(x[0], IO().size(std::vector<int64_t>{2, 2}));
      },
      {"[interpolate]", "4-D", "(2, 4, 4)"}));
  CHECK(th::throws_with(
      [&] {
        F::interpolate(x, IO().scale_factor(std::vector<double>{2, -1}));
      },
      {"[interpolate]", "positive", "-1"}));
  CHECK(th::throws_with(
      [&] {
        F::interpolate(x, IO().scale_factor(std::vector<double>{0.1, 1}));
      },
      {"[upsample_nearest2d]", "output_size", "positive"}));
  CHECK(th::throws_with(
      [&] {
        of::upsample_bilinear2d(x, {3, 3}, false, 0.0);
      },
      {"[upsample_bilinear2d]", "scales_h", "positive"}));
  CHECK(th::throws_with([&] { F::glu(uniform({3, 5}, 52)); }, {"[glu]", "even", "5"}));
  CHECK(th::throws_with([&] { F::glu(x, 7); }, {"[glu]", "dim 7"}));
  CHECK(th::throws_with(
      [&] {
        F::batch_norm(x, of::zeros({2}, of::kFloat64), of::ones({2}, of::kFloat64),
                      F::BatchNormFuncOptions().training(true).momentum(std::nullopt));
      },
      {"[batch_norm]", "momentum"}));
  CHECK(th::throws_with([&] { F::dropout(x, F::DropoutFuncOptions().p(1.5)); },
                        {"[dropout]", "1.5"}));
  CHECK(th::throws_with([&] { F::dropout2d(uniform({3, 4}, 53)); }, {"[dropout2d]", "(3, 4)"}));
  CHECK(th::throws_with([&] { F::hardtanh(x, F::HardtanhFuncOptions().min_val(1).max_val(0)); },
                        {"[hardtanh]", "max_val 0", "min_val 1"}));
  CHECK(th::throws_with([&] { F::softplus(x, F::SoftplusFuncOptions().beta(0)); },
                        {"[softplus]", "beta"}));
  CHECK(th::throws_with([&] { F::huber_loss(x, x, F::HuberLossFuncOptions().delta(0)); },
                        {"[huber_loss]", "delta"}));
  CHECK(th::throws_with(
      [&] {
        F::embedding(of::tensor({0}, of::kInt64), uniform({4, 2}, 54),
                     F::EmbeddingFuncOptions().padding_idx(4));
      },
      {"[embedding]", "padding_idx 4", "4"}));
  CHECK(th::throws_with([&] { F::normalize(of::scalar_tensor(1.0)); }, {"[normalize]", "0-D"}));
  CHECK(th::throws_with(
      [&] { F::cross_entropy(x, of::tensor({0}, of::kInt64), F::CrossEntropyFuncOptions()); },
      {"[cross_entropy]"}));
}

TEST_CASE("functional: 1-D and 3-D conv and pool forms forward to the root ops") {
  const T x = uniform({2, 3, 5, 6, 4}, 31), w = uniform({4, 3, 2, 3, 2}, 32), b = uniform({4}, 33);
  CHECK(same(F::conv3d(x, w, F::Conv3dFuncOptions().bias(b).stride({1, 2, 1}).padding(1)),
             of::conv3d(x, w, b, {1, 2, 1}, 1)));
  CHECK(same(F::conv3d(x, w, F::Conv3dFuncOptions().padding(of::kSame)),
             of::conv3d(x, w, {}, 1, "same")));
  const T wt = uniform({3, 2, 2, 2, 3}, 34);
  CHECK(
      same(F::conv_transpose3d(x, wt, F::ConvTranspose3dFuncOptions().stride(2).output_padding(1)),
           of::conv_transpose3d(x, wt, {}, 2, 0, 1)));
  const T x1 = uniform({2, 3, 9}, 35), wt1 = uniform({3, 4, 3}, 36);
  CHECK(same(F::conv_transpose1d(x1, wt1, F::ConvTranspose1dFuncOptions().stride(2).dilation(2)),
             of::conv_transpose1d(x1, wt1, {}, 2, 0, 0, 1, 2)));
  CHECK(same(F::max_pool1d(x1, F::MaxPool1dFuncOptions(3).stride(2).padding(1).ceil_mode(true)),
             of::max_pool1d(x1, 3, 2, 1, 1, true)));
  CHECK(same(std::get<0>(F::max_pool1d_with_indices(x1, F::MaxPool1dFuncOptions(2))),
             of::max_pool1d(x1, 2)));
  CHECK(same(F::max_pool3d(x, F::MaxPool3dFuncOptions({2, 3, 2}).dilation({1, 1, 2})),
             of::max_pool3d(x, {2, 3, 2}, {}, 0, {1, 1, 2})));
  auto [mv, mi] = F::max_pool3d_with_indices(x, F::MaxPool3dFuncOptions(2));
  auto [rv, ri] = of::max_pool3d_with_indices(x, 2);
  CHECK(same(mv, rv));
  CHECK(of::equal(mi, ri));
  CHECK(same(F::avg_pool1d(x1, F::AvgPool1dFuncOptions(3).padding(1).count_include_pad(false)),
             of::avg_pool1d(x1, 3, {}, 1, false, false)));
  CHECK(same(F::avg_pool3d(x, F::AvgPool3dFuncOptions(2).stride(1).divisor_override(3)),
             of::avg_pool3d(x, 2, 1, 0, false, true, 3)));
  CHECK(same(F::adaptive_avg_pool1d(x1, F::AdaptiveAvgPool1dFuncOptions(4)),
             of::adaptive_avg_pool1d(x1, 4)));
  // an absent output size keeps the input's
  CHECK(same(F::adaptive_avg_pool3d(x, F::AdaptiveAvgPool3dFuncOptions({2, std::nullopt, 3})),
             of::adaptive_avg_pool3d(x, {2, 6, 3})));
  CHECK(same(F::adaptive_avg_pool2d(x[0], F::AdaptiveAvgPool2dFuncOptions({std::nullopt, 2})),
             of::adaptive_avg_pool2d(x[0], {6, 2})));
  CHECK(same(F::adaptive_max_pool1d(x1, F::AdaptiveMaxPool1dFuncOptions(4)),
             std::get<0>(of::adaptive_max_pool1d(x1, 4))));
  auto [av, ai] = F::adaptive_max_pool2d_with_indices(x[0], F::AdaptiveMaxPool2dFuncOptions(3));
  auto [bv, bi] = of::adaptive_max_pool2d(x[0], 3);
  CHECK(same(av, bv));
  CHECK(of::equal(ai, bi));
  CHECK(same(F::adaptive_max_pool3d(x, F::AdaptiveMaxPool3dFuncOptions({1, std::nullopt, 2})),
             std::get<0>(of::adaptive_max_pool3d(x, {1, 6, 2}))));
  CHECK(th::throws_with(
      [&] {
        F::adaptive_max_pool3d(of::zeros({4, 4}), F::AdaptiveMaxPool3dFuncOptions(2));
      },
      {"[adaptive_max_pool3d]", "(4, 4)"}));
}

TEST_CASE("functional: 1-D and 3-D conv and pool modules: parameters, init, forward_with_indices") {
  of::manual_seed(0);
  nn::Conv3d c3(nn::Conv3dOptions(4, 6, {3, 2, 1}).groups(2).bias(true));
  CHECK(c3->weight.sizes().vec() == std::vector<int64_t>{6, 2, 3, 2, 1});
  CHECK(c3->bias.sizes().vec() == std::vector<int64_t>{6});
  CHECK(c3->named_parameters().size() == 2);
  CHECK(c3->named_parameters().contains("weight"));
  // kaiming_uniform(a = sqrt(5)) on fan_in = 2 * 3 * 2 * 1: bound 1 / sqrt(fan_in)
  const double bound = 1.0 / std::sqrt(12.0);
  CHECK(c3->weight.abs().max().item<float>() <= bound + 1e-6);
  CHECK(c3->bias.abs().max().item<float>() <= bound + 1e-6);
  const T x = uniform({2, 4, 5, 4, 3}, 40).to(of::kFloat32);
  CHECK(same(c3(x), of::conv3d(x, c3->weight, c3->bias, 1, 0, 1, 2)));
  nn::Conv3d c3r(nn::Conv3dOptions(4, 2, 3).padding(1).padding_mode(of::kReflect).bias(false));
  CHECK(c3r(x).sizes().vec() == std::vector<int64_t>{2, 2, 5, 4, 3});
  CHECK(!c3r->bias.defined());

  nn::ConvTranspose3d t3(nn::ConvTranspose3dOptions(4, 6, 2).stride(2).groups(2));
  CHECK(t3->weight.sizes().vec() == std::vector<int64_t>{4, 3, 2, 2, 2});
  CHECK(same(t3(x), of::conv_transpose3d(x, t3->weight, t3->bias, 2, 0, 0, 2)));
  nn::ConvTranspose1d t1(4, 3, 3);
  CHECK(t1->weight.sizes().vec() == std::vector<int64_t>{4, 3, 3});
  const T x1 = uniform({2, 4, 7}, 41).to(of::kFloat32);
  CHECK(same(t1(x1), of::conv_transpose1d(x1, t1->weight, t1->bias)));
  CHECK(t1(x1).sizes().vec() == std::vector<int64_t>{2, 3, 9});
  // output_size picks the output_padding (libtorch's ConvTranspose forward(input, output_size))
  CHECK(same(t3->forward(x, of::IntArrayRef({11, 9, 7})),
             of::conv_transpose3d(x, t3->weight, t3->bias, 2, 0, {1, 1, 1}, 2)));
  CHECK(t3->forward(x, of::IntArrayRef({2, 6, 10, 9, 6})).sizes().vec() ==
        std::vector<int64_t>{2, 6, 10, 9, 6});
  CHECK(th::throws_with(
      [&] {
        t3->forward(x, of::IntArrayRef({12, 8, 6}));
      },
      {"[ConvTranspose3d]", "(12, 8, 6)", "[10, 11]"}));

  nn::MaxPool3d mp3(nn::MaxPool3dOptions(2).stride(1));
  auto [v, i] = mp3->forward_with_indices(x);
  CHECK(same(v, mp3(x)));
  CHECK(of::equal(i, std::get<1>(of::max_pool3d_with_indices(x, 2, 1))));
  nn::MaxPool1d mp1(3);
  CHECK(same(mp1(x1), of::max_pool1d(x1, 3)));
  CHECK(std::get<1>(mp1->forward_with_indices(x1)).scalar_type() == of::kInt64);
  CHECK(same(nn::AvgPool1d(nn::AvgPool1dOptions(2).ceil_mode(true))(x1),
             of::avg_pool1d(x1, 2, {}, 0, true)));
  CHECK(same(nn::AvgPool3d(nn::AvgPool3dOptions(2).padding(1).count_include_pad(false))(x),
             of::avg_pool3d(x, 2, {}, 1, false, false)));
  CHECK(same(nn::AdaptiveAvgPool1d(3)(x1), of::adaptive_avg_pool1d(x1, 3)));
  CHECK(same(nn::AdaptiveAvgPool3d(nn::AdaptiveAvgPool3dOptions({2, std::nullopt, 1}))(x),
             of::adaptive_avg_pool3d(x, {2, 4, 1})));
  nn::AdaptiveMaxPool2d am2(nn::AdaptiveMaxPool2dOptions({2, std::nullopt}));
  auto [av, ai] = am2->forward_with_indices(x[0]);
  auto [bv, bi] = of::adaptive_max_pool2d(x[0], {2, 3});
  CHECK(same(av, bv));
  CHECK(of::equal(ai, bi));
  CHECK(same(nn::AdaptiveMaxPool1d(2)(x1), std::get<0>(of::adaptive_max_pool1d(x1, 2))));
  CHECK(same(nn::AdaptiveMaxPool3d(1)(x), std::get<0>(of::adaptive_max_pool3d(x, 1))));

  std::ostringstream os;
  os << *nn::MaxPool3d(2) << " "
     << *nn::AdaptiveMaxPool2d(nn::AdaptiveMaxPool2dOptions({2, std::nullopt})) << " "
     << *nn::ConvTranspose1d(2, 3, 4) << " " << *nn::AvgPool1d(3);
  CHECK(os.str() ==
        "MaxPool3d(kernel_size=[2, 2, 2], stride=[2, 2, 2], padding=[0, 0, 0], "
        "dilation=[1, 1, 1], ceil_mode=false) AdaptiveMaxPool2d(output_size=[2, None]) "
        "ConvTranspose1d(2, 3, kernel_size=[4], stride=[1], padding=[0]) "
        "AvgPool1d(kernel_size=[3], stride=[3], padding=[0])");
  CHECK(th::throws_with([&] { nn::Conv3d(nn::Conv3dOptions(3, 4, 3).groups(2)); },
                        {"[Conv3d]", "groups"}));
  CHECK(th::throws_with([&] { nn::ConvTranspose3d(nn::ConvTranspose3dOptions(3, 4, 3).groups(2)); },
                        {"[ConvTranspose3d]", "groups"}));
}

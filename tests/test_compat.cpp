// The libtorch names ported programs write (compat.h and friends): checks that throw of::Error,
// str, optional, the c10:: and at:: aliases, Scalar's to* accessors, IntArrayRef printing and
// slicing, new_* factories, tensor(scalar), constant_pad_nd.
#include <doctest/doctest.h>

#include <sstream>

#include "harness.h"

TEST_CASE("compat: TORCH_CHECK / AT_ASSERT / TORCH_INTERNAL_ASSERT throw of::Error") {
  auto positive = [](int64_t x) {
    TORCH_CHECK(x > 0, "x must be positive, got ", x);
    return x;
  };
  CHECK(positive(3) == 3);
  std::string msg;
  CHECK(th::throws_with([&] { positive(-2); }, {"[TORCH_CHECK]", "x must be positive, got -2", "x > 0"},
                        &msg));
  CHECK(th::throws_with([] { AT_ASSERT(1 + 1 == 3); }, {"[AT_ASSERT]", "1 + 1 == 3"}));
  CHECK(th::throws_with([] { TORCH_INTERNAL_ASSERT(false, "broken ", 42); },
                        {"[TORCH_INTERNAL_ASSERT]", "broken 42"}));
  CHECK_NOTHROW(AT_ASSERT(true));
  TORCH_WARN("a warning goes to stderr ", 1);  // must compile and return
}

TEST_CASE("compat: of::str, optional, c10:: and at:: names") {
  CHECK(of::str("sample-", 3, ".pt") == "sample-3.pt");
  c10::optional<int64_t> none = c10::nullopt;
  CHECK_FALSE(none.has_value());
  at::Tensor t = at::zeros({2, 3}, at::kFloat);
  c10::IntArrayRef sizes = t.sizes();
  CHECK(sizes.size() == 2);
  c10::Scalar s = 2.5;
  CHECK(s.toDouble() == 2.5);
  CHECK(s.toFloat() == 2.5f);
  CHECK(s.toLong() == 2);
  CHECK(s.toInt() == 2);
  CHECK(c10::Scalar(0).toBool() == false);
  CHECK(c10::Scalar(true).isBoolean());
  CHECK(c10::Scalar(7).isIntegral(false));
  CHECK(c10::Scalar(7.0).isFloatingPoint());
}

TEST_CASE("compat: IntArrayRef prints and slices as libtorch's") {
  of::Tensor t = of::zeros({2, 3, 4});
  std::ostringstream os;
  os << t.sizes();
  CHECK(os.str() == "[2, 3, 4]");
  CHECK(t.sizes().slice(1) == of::IntArrayRef({3, 4}));
  CHECK(t.sizes().slice(0, 2) == of::IntArrayRef({2, 3}));
  CHECK(t.sizes().slice(3).empty());
  CHECK_THROWS_AS(t.sizes().slice(2, 5), std::out_of_range);
}

TEST_CASE("compat: new_empty/new_zeros/new_ones/new_full, tensor(scalar), constant_pad_nd") {
  of::Tensor d = of::ones({2}, of::kFloat64);
  of::Tensor z = d.new_zeros({3, 2});
  CHECK(z.dtype() == of::kFloat64);
  CHECK(z.sizes() == of::IntArrayRef({3, 2}));
  CHECK(z.sum().item<double>() == 0);
  CHECK(d.new_ones({4}).sum().item<double>() == 4);
  of::Tensor f = d.new_full({2, 2}, 1.5, of::kInt32);  // options override the dtype
  CHECK(f.dtype() == of::kInt32);
  CHECK(f.sum().item<int64_t>() == 4);  // 1.5 truncates to 1 in int32
  CHECK(d.new_empty({5}).numel() == 5);
  of::Tensor a = of::tensor(3.5);
  CHECK(a.dim() == 0);
  CHECK(a.dtype() == of::kFloat32);
  CHECK(a.item<float>() == 3.5f);
  CHECK(of::tensor(7).dtype() == of::kInt64);
  CHECK(of::tensor(true).dtype() == of::kBool);
  CHECK(of::tensor(2, of::kFloat64).dtype() == of::kFloat64);
  of::Tensor x = of::arange(6, of::kFloat32).reshape({2, 3});
  of::Tensor p = of::constant_pad_nd(x, {1, 2}, -1.0);
  CHECK(p.sizes() == of::IntArrayRef({2, 6}));
  std::vector<float> row0 = p[0].to_vector<float>();
  CHECK(row0 == std::vector<float>{-1, 0, 1, 2, -1, -1});
  CHECK(th::throws_with([&] { of::constant_pad_nd(x, {1}); }, {"pad"}));
}

namespace {
// Elementwise check against a float64 formula, a finite-difference gradient check, and the
// in-place form equal to the out-of-place one (also under autograd).
void check_activation(const char* name, const std::function<of::Tensor(const of::Tensor&)>& f,
                      const std::function<of::Tensor&(of::Tensor&)>& f_,
                      const std::function<double(double)>& ref) {
  INFO(name);
  of::manual_seed(3);
  of::Tensor x64 = of::rand({4, 5}, of::kFloat64) * 8 - 4;
  std::vector<double> xs = x64.to_vector<double>();
  for (of::Tensor x : {x64, x64.to(of::kFloat32), x64.t().contiguous().t()}) {
    std::vector<double> got = f(x).to(of::kFloat64).contiguous().to_vector<double>();
    std::vector<double> xv = x.to(of::kFloat64).contiguous().to_vector<double>();
    const double tol = x.dtype() == of::kFloat64 ? 1e-12 : 1e-5;
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == doctest::Approx(ref(xv[i])).epsilon(tol).scale(1.0));
  }
  CHECK(th::gradcheck([&](const std::vector<of::Tensor>& in) { return f(in[0]); },
                      {x64 + 0.013}).empty());  // off the kinks
  if (!f_) return;
  of::Tensor y = x64.clone();
  f_(y);
  CHECK((y - f(x64)).abs().max().item<double>() == 0.0);
  // under autograd: the in-place form's gradient equals the out-of-place one's
  of::Tensor a = (x64 + 0.013).requires_grad_(true), b = (x64 + 0.013).requires_grad_(true);
  of::Tensor ya = a * 1.0;
  f_(ya);
  ya.sum().backward();
  f(b).sum().backward();
  CHECK((a.grad() - b.grad()).abs().max().item<double>() < 1e-12);
}
}  // namespace

TEST_CASE("compat: root-namespace activations as libtorch's (values, gradients, in-place)") {
  check_activation("leaky_relu", [](const of::Tensor& x) { return of::leaky_relu(x, 0.2); },
                   [](of::Tensor& x) -> of::Tensor& { return of::leaky_relu_(x, 0.2); },
                   [](double v) { return v > 0 ? v : 0.2 * v; });
  check_activation("elu", [](const of::Tensor& x) { return of::elu(x, 1.5, 2.0, 0.5); },
                   [](of::Tensor& x) -> of::Tensor& { return of::elu_(x, 1.5, 2.0, 0.5); },
                   [](double v) { return 2.0 * (v > 0 ? v : 1.5 * (std::exp(0.5 * v) - 1)); });
  const double sa = 1.6732632423543772848170429916717, ss = 1.0507009873554804934193349852946;
  check_activation("selu", [](const of::Tensor& x) { return of::selu(x); },
                   [](of::Tensor& x) -> of::Tensor& { return of::selu_(x); },
                   [&](double v) { return ss * (v > 0 ? v : sa * (std::exp(v) - 1)); });
  check_activation("celu", [](const of::Tensor& x) { return of::celu(x, 0.7); },
                   [](of::Tensor& x) -> of::Tensor& { return of::celu_(x, 0.7); },
                   [](double v) { return std::max(0.0, v) + std::min(0.0, 0.7 * (std::exp(v / 0.7) - 1)); });
  check_activation("softplus", [](const of::Tensor& x) { return of::softplus(x, 2.0, 5.0); }, {},
                   [](double v) { return 2.0 * v > 5.0 ? v : std::log1p(std::exp(2.0 * v)) / 2.0; });
  check_activation("hardtanh", [](const of::Tensor& x) { return of::hardtanh(x, -2.0, 1.5); },
                   [](of::Tensor& x) -> of::Tensor& { return of::hardtanh_(x, -2.0, 1.5); },
                   [](double v) { return std::min(1.5, std::max(-2.0, v)); });
  check_activation("hardsigmoid", [](const of::Tensor& x) { return of::hardsigmoid(x); },
                   [](of::Tensor& x) -> of::Tensor& { return of::hardsigmoid_(x); },
                   [](double v) { return std::min(6.0, std::max(0.0, v + 3)) / 6; });
  check_activation("hardswish", [](const of::Tensor& x) { return of::hardswish(x); },
                   [](of::Tensor& x) -> of::Tensor& { return of::hardswish_(x); },
                   [](double v) { return v * std::min(6.0, std::max(0.0, v + 3)) / 6; });
  check_activation("mish", [](const of::Tensor& x) { return of::mish(x); },
                   [](of::Tensor& x) -> of::Tensor& { return of::mish_(x); },
                   [](double v) { return v * std::tanh(std::log1p(std::exp(v))); });
  check_activation("log_sigmoid", [](const of::Tensor& x) { return of::log_sigmoid(x); }, {},
                   [](double v) { return -std::log1p(std::exp(-v)); });
  check_activation("threshold", [](const of::Tensor& x) { return of::threshold(x, 0.5, -1.0); },
                   [](of::Tensor& x) -> of::Tensor& { return of::threshold_(x, 0.5, -1.0); },
                   [](double v) { return v > 0.5 ? v : -1.0; });
}

TEST_CASE("compat: prelu and glu; bad input") {
  of::manual_seed(4);
  of::Tensor x = of::randn({2, 3, 4}, of::kFloat64);
  of::Tensor w = of::tensor(std::vector<double>{0.1, 0.2, 0.3}, {3}, of::kFloat64);
  of::Tensor y = of::prelu(x, w);
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    const double slope = 0.1 * double((i / 4) % 3 + 1);
    CHECK(yv[i] == doctest::Approx(xv[i] > 0 ? xv[i] : slope * xv[i]));
  }
  CHECK(th::gradcheck([](const std::vector<of::Tensor>& in) { return of::prelu(in[0], in[1]); },
                      {x + 0.01, w}).empty());
  CHECK(of::prelu(x, of::tensor(0.25, of::kFloat64)).sizes() == x.sizes());
  CHECK(th::throws_with([&] { of::prelu(x, of::ones({4}, of::kFloat64)); }, {"[prelu]", "(4,)", "(2, 3, 4)"}));
  of::Tensor g = of::glu(x, 2);
  CHECK(g.sizes() == of::IntArrayRef({2, 3, 2}));
  of::Tensor ref = x.narrow(2, 0, 2) * x.narrow(2, 2, 2).sigmoid();
  CHECK((g - ref).abs().max().item<double>() < 1e-15);
  CHECK(th::throws_with([] { of::hardswish(of::ones({2}, of::kInt64)); }, {"[hardswish]", "int64"}));
  of::Tensor leaf = of::ones({2}).requires_grad_(true);
  CHECK(th::throws_with([&] { of::hardswish_(leaf); }, {"[hardswish_]", "leaf"}));
  CHECK(th::throws_with([] { of::celu(of::ones({2}), 0.0); }, {"[celu]", "alpha"}));
}

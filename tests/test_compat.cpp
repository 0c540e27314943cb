// The libtorch names ported programs write (compat.h and friends): checks that throw of::Error,
// str, optional, the c10:: and at:: aliases, Scalar's to* accessors, IntArrayRef printing and
// slicing, new_* factories, tensor(scalar), constant_pad_nd.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness.h"

TEST_CASE("compat: TORCH_CHECK / AT_ASSERT / TORCH_INTERNAL_ASSERT throw of::Error") {
  auto positive = [](int64_t x) {
    TORCH_CHECK(x > 0, "x must be positive, got ", x);
    return x;
  };
  CHECK(positive(3) == 3);
  std::string msg;
  CHECK(th::throws_with([&] { positive(-2); },
                        {"[TORCH_CHECK]", "x must be positive, got -2", "x > 0"}, &msg));
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
  CHECK(th::gradcheck([&](const std::vector<of::Tensor>& in) { return f(in[0]); }, {x64 + 0.013})
            .empty());  // off the kinks
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
  check_activation(
      "leaky_relu", [](const of::Tensor& x) { return of::leaky_relu(x, 0.2); },
      [](of::Tensor& x) -> of::Tensor& { return of::leaky_relu_(x, 0.2); },
      [](double v) { return v > 0 ? v : 0.2 * v; });
  check_activation(
      "elu", [](const of::Tensor& x) { return of::elu(x, 1.5, 2.0, 0.5); },
      [](of::Tensor& x) -> of::Tensor& { return of::elu_(x, 1.5, 2.0, 0.5); },
      [](double v) { return 2.0 * (v > 0 ? v : 1.5 * (std::exp(0.5 * v) - 1)); });
  const double sa = 1.6732632423543772848170429916717, ss = 1.0507009873554804934193349852946;
  check_activation(
      "selu", [](const of::Tensor& x) { return of::selu(x); },
      [](of::Tensor& x) -> of::Tensor& { return of::selu_(x); },
      [&](double v) { return ss * (v > 0 ? v : sa * (std::exp(v) - 1)); });
  check_activation(
      "celu", [](const of::Tensor& x) { return of::celu(x, 0.7); },
      [](of::Tensor& x) -> of::Tensor& { return of::celu_(x, 0.7); },
      [](double v) { return std::max(0.0, v) + std::min(0.0, 0.7 * (std::exp(v / 0.7) - 1)); });
  check_activation(
      "softplus", [](const of::Tensor& x) { return of::softplus(x, 2.0, 5.0); }, {},
      [](double v) { return 2.0 * v > 5.0 ? v : std::log1p(std::exp(2.0 * v)) / 2.0; });
  check_activation(
      "hardtanh", [](const of::Tensor& x) { return of::hardtanh(x, -2.0, 1.5); },
      [](of::Tensor& x) -> of::Tensor& { return of::hardtanh_(x, -2.0, 1.5); },
      [](double v) { return std::min(1.5, std::max(-2.0, v)); });
  check_activation(
      "hardsigmoid", [](const of::Tensor& x) { return of::hardsigmoid(x); },
      [](of::Tensor& x) -> of::Tensor& { return of::hardsigmoid_(x); },
      [](double v) { return std::min(6.0, std::max(0.0, v + 3)) / 6; });
  check_activation(
      "hardswish", [](const of::Tensor& x) { return of::hardswish(x); },
      [](of::Tensor& x) -> of::Tensor& { return of::hardswish_(x); },
      [](double v) { return v * std::min(6.0, std::max(0.0, v + 3)) / 6; });
  check_activation(
      "mish", [](const of::Tensor& x) { return of::mish(x); },
      [](of::Tensor& x) -> of::Tensor& { return of::mish_(x); },
      [](double v) { return v * std::tanh(std::log1p(std::exp(v))); });
  check_activation(
      "log_sigmoid", [](const of::Tensor& x) { return of::log_sigmoid(x); }, {},
      [](double v) { return -std::log1p(std::exp(-v)); });
  check_activation(
      "threshold", [](const of::Tensor& x) { return of::threshold(x, 0.5, -1.0); },
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
                      {x + 0.01, w})
            .empty());
  CHECK(of::prelu(x, of::tensor(0.25, of::kFloat64)).sizes() == x.sizes());
  CHECK(th::throws_with([&] { of::prelu(x, of::ones({4}, of::kFloat64)); },
                        {"[prelu]", "(4,)", "(2, 3, 4)"}));
  of::Tensor g = of::glu(x, 2);
  CHECK(g.sizes() == of::IntArrayRef({2, 3, 2}));
  of::Tensor ref = x.narrow(2, 0, 2) * x.narrow(2, 2, 2).sigmoid();
  CHECK((g - ref).abs().max().item<double>() < 1e-15);
  CHECK(
      th::throws_with([] { of::hardswish(of::ones({2}, of::kInt64)); }, {"[hardswish]", "int64"}));
  of::Tensor leaf = of::ones({2}).requires_grad_(true);
  CHECK(th::throws_with([&] { of::hardswish_(leaf); }, {"[hardswish_]", "leaf"}));
  CHECK(th::throws_with([] { of::celu(of::ones({2}), 0.0); }, {"[celu]", "alpha"}));
}

// ---------------------------------------------------------------- indexing

namespace {
using of::indexing::Ellipsis;
using of::indexing::None;
using of::indexing::Slice;
std::vector<double> vals(const of::Tensor& t) {
  return t.to(of::kFloat64).contiguous().to_vector<double>();
}
}  // namespace

TEST_CASE("compat: index with integers, slices, None and ellipsis (views)") {
  of::Tensor x = of::arange(24, of::kFloat64).reshape({2, 3, 4});  // x[i, j, k] = 12i + 4j + k
  of::Tensor a = x.index({Slice(), 1});
  CHECK(a.sizes() == of::IntArrayRef({2, 4}));
  CHECK(vals(a) == std::vector<double>{4, 5, 6, 7, 16, 17, 18, 19});
  CHECK(a.impl()->storage == x.impl()->storage);  // a view
  CHECK(vals(x.index({1, Slice(None, 2), Slice(1, None, 2)})) ==
        std::vector<double>{13, 15, 17, 19});
  CHECK(x.index({Ellipsis, -1}).sizes() == of::IntArrayRef({2, 3}));
  CHECK(vals(x.index({Ellipsis, -1})) == std::vector<double>{3, 7, 11, 15, 19, 23});
  CHECK(x.index({None, 0, "..."}).sizes() == of::IntArrayRef({1, 3, 4}));
  CHECK(x.index({Slice(-1, None)}).sizes() == of::IntArrayRef({1, 3, 4}));
  CHECK(x.index({true}).sizes() == of::IntArrayRef({1, 2, 3, 4}));
  CHECK(x.index({false}).size(0) == 0);
  CHECK(th::throws_with([&] { x.index({0, 0, 0, 0}); }, {"[index]", "too many indices"}));
  CHECK(th::throws_with([&] { x.index({5}); }, {"[index]", "index 5 is out of bounds", "size 2"}));
  CHECK(th::throws_with([&] { x.index({Ellipsis, Ellipsis}); }, {"single ellipsis"}));
  CHECK(th::throws_with([&] { x.index({Slice(0, 2, 0)}); }, {"step must be positive"}));
}

TEST_CASE("compat: index with bool and integer tensors (PyTorch's placement), with gradients") {
  of::Tensor x = of::arange(24, of::kFloat64).reshape({2, 3, 4});
  of::Tensor idx = of::tensor(std::vector<int64_t>{2, 0}, {2}, of::kInt64);
  // one tensor index in the middle: the result dim stays there
  of::Tensor a = x.index({Slice(), idx});
  CHECK(a.sizes() == of::IntArrayRef({2, 2, 4}));
  CHECK(vals(a.index({0, 0})) == std::vector<double>{8, 9, 10, 11});
  CHECK(vals(a.index({1, 1})) == std::vector<double>{12, 13, 14, 15});
  // two adjacent tensor indices broadcast together
  of::Tensor j = of::tensor(std::vector<int64_t>{1, -1}, {2}, of::kInt64);
  CHECK(vals(x.index({Slice(), idx, j})) == std::vector<double>{9, 3, 21, 15});
  // separated by a slice: the broadcast dims go first
  of::Tensor b = x.index({idx.narrow(0, 1, 1), Slice(), j});
  CHECK(b.sizes() == of::IntArrayRef({2, 3}));  // x[[0], :, [1, -1]] -> (2, 3)
  CHECK(vals(b) == std::vector<double>{1, 5, 9, 3, 7, 11});
  // a bool mask
  of::Tensor m = x.index({0}) > 6.5;
  CHECK(vals(x.index({0}).index({m})) == std::vector<double>{7, 8, 9, 10, 11});
  CHECK(x.index({Slice(), m}).sizes() == of::IntArrayRef({2, 5}));
  CHECK(th::throws_with([&] { x.index({of::ones({4}, of::kBool)}); }, {"[index]", "mask", "(4,)"}));
  CHECK(th::throws_with([&] { x.index({of::tensor(std::vector<int64_t>{2}, {1}, of::kInt64)}); },
                        {"[index]", "out of bounds"}));
  CHECK(th::throws_with([&] { x.index({of::ones({1})}); }, {"[index]", "long, int, byte or bool"}));
  // gradients flow through tensor indices (repeated indices accumulate)
  of::Tensor rep = of::tensor(std::vector<int64_t>{1, 1, 0}, {3}, of::kInt64);
  CHECK(th::gradcheck(
            [&](const std::vector<of::Tensor>& in) {
              return in[0].index({Slice(), rep});
            },
            {of::randn({2, 3, 4}, of::kFloat64)})
            .empty());
  CHECK(th::gradcheck([&](const std::vector<of::Tensor>& in) { return in[0].index({m}); },
                      {of::randn({3, 4}, of::kFloat64)})
            .empty());
}

TEST_CASE("compat: index_put_ and assignment to temporaries (t[i] = v)") {
  of::Tensor x = of::zeros({3, 4}, of::kFloat64);
  x.index_put_({Slice(), 1}, 5.0);
  CHECK(vals(x.index({Slice(), 1})) == std::vector<double>{5, 5, 5});
  x[0] = of::arange(4, of::kFloat64);
  CHECK(vals(x[0]) == std::vector<double>{0, 1, 2, 3});
  x.index({2, Slice(2, None)}) = -1;
  CHECK(vals(x[2]) == std::vector<double>{0, 5, -1, -1});
  of::Tensor idx = of::tensor(std::vector<int64_t>{2, 0}, {2}, of::kInt64);
  x.index_put_({idx},
               of::tensor(std::vector<double>{7, 8, 9, 10}, {4}, of::kFloat64));  // broadcast rows
  CHECK(vals(x[0]) == std::vector<double>{7, 8, 9, 10});
  CHECK(vals(x[2]) == std::vector<double>{7, 8, 9, 10});
  CHECK(vals(x[1]) == std::vector<double>{0, 5, 0, 0});
  of::Tensor y = of::zeros({2, 3}, of::kFloat64);
  CHECK(th::throws_with([&] { y.index_put_({y.index({0}) >= 0}, 0.0); },
                        {"[index_put_]", "mask (3,)"}));
  y.index_put_({Slice(), of::tensor(std::vector<int64_t>{0, 2}, {2}, of::kInt64)},
               of::tensor(std::vector<double>{1, 2}, {2}, of::kFloat64));
  CHECK(vals(y) == std::vector<double>{1, 0, 2, 1, 0, 2});
  of::Tensor m = y > 1.5;
  y.index_put_({m}, -3.0);
  CHECK(vals(y) == std::vector<double>{1, 0, -3, 1, 0, -3});
  // a handle assigned to another tensor is rebound, not written
  of::Tensor h = y;
  h = of::ones({1});
  CHECK(y.numel() == 6);
  CHECK(th::throws_with(
      [&] {
        of::Tensor u;
        std::move(u) = of::ones({1});
      },
      {"undefined"}));
}

TEST_CASE("compat: MemoryFormat in contiguous(), to(), clone() and empty()") {
  of::manual_seed(3);
  const of::Tensor x = of::randn({2, 3, 4, 5}, of::kFloat64);
  const of::Tensor cl = x.contiguous(of::MemoryFormat::ChannelsLast);
  CHECK(cl.sizes() == x.sizes());
  CHECK(cl.strides() == std::vector<int64_t>{60, 1, 15, 3});
  CHECK(cl.is_contiguous(of::MemoryFormat::ChannelsLast));
  CHECK_FALSE(cl.is_contiguous());
  CHECK(cl.suggest_memory_format() == of::MemoryFormat::ChannelsLast);
  CHECK(x.suggest_memory_format() == of::MemoryFormat::Contiguous);
  CHECK(of::equal(cl, x));
  CHECK(cl.contiguous(of::MemoryFormat::ChannelsLast).is_same(cl));  // already so: no copy
  // Preserve (the default) keeps channels-last through dtype changes and clone().
  const of::Tensor f = cl.to(of::kFloat32);
  CHECK(f.strides() == cl.strides());
  CHECK(of::equal(f, x.to(of::kFloat32)));
  CHECK(cl.clone(of::MemoryFormat::Preserve).strides() == cl.strides());
  CHECK(cl.clone(of::MemoryFormat::Contiguous).is_contiguous());
  // The five-argument to(): device, dtype, non_blocking, copy, memory_format.
  const of::Tensor c = cl.to(of::kCPU, of::kFloat64, false, false, of::MemoryFormat::Contiguous);
  CHECK(c.is_contiguous());
  CHECK(of::equal(c, x));
  const of::Tensor c2 = x.to(of::kCPU, of::kFloat32, false, true, at::MemoryFormat::ChannelsLast);
  CHECK(c2.is_contiguous(c10::MemoryFormat::ChannelsLast));
  CHECK(of::allclose(c2.to(of::kFloat64), x, 1e-6, 1e-6));
  const of::Tensor same = x.to(x.options(), false, false, of::MemoryFormat::Contiguous);
  CHECK(same.is_same(x));  // nothing to do: libtorch returns self
  // 5-D: ChannelsLast3d.
  const of::Tensor v = of::randn({2, 3, 2, 4, 5});
  const of::Tensor v3 = v.contiguous(of::MemoryFormat::ChannelsLast3d);
  CHECK(v3.strides() == std::vector<int64_t>{120, 1, 60, 15, 3});
  CHECK(of::equal(v3, v));
  // empty(size, options, memory_format) and ops on channels-last inputs.
  const of::Tensor e =
      of::empty({2, 3, 4, 5}, of::TensorOptions(of::kFloat64), of::MemoryFormat::ChannelsLast);
  CHECK(e.is_contiguous(of::MemoryFormat::ChannelsLast));
  const of::Tensor w = of::randn({4, 3, 3, 3}, of::kFloat64);
  CHECK(of::allclose(of::conv2d(cl, w, {}, 1, 1), of::conv2d(x, w, {}, 1, 1), 1e-12, 1e-12));
  // Gradients flow through the layout change.
  of::Tensor xg = x.clone().set_requires_grad(true);
  (xg.contiguous(of::MemoryFormat::ChannelsLast) * 3).sum().backward();
  CHECK(of::allclose(xg.grad(), of::full({2, 3, 4, 5}, 3.0, of::kFloat64), 0, 0));
  // Size-1 dims may have any stride.
  CHECK(of::randn({1, 3, 1, 1}).is_contiguous(of::MemoryFormat::ChannelsLast));
  std::ostringstream os;
  os << of::MemoryFormat::ChannelsLast;
  CHECK(os.str() == "ChannelsLast");
  // Bad requests: clear errors.
  CHECK(th::throws_with([&] { x.contiguous(of::MemoryFormat::Preserve); },
                        {"[contiguous]", "Preserve"}));
  CHECK(th::throws_with(
      [] {
        of::randn({3, 4, 5}).contiguous(of::MemoryFormat::ChannelsLast);
      },
      {"[contiguous]", "ChannelsLast", "4-D", "(3, 4, 5)"}));
  CHECK(th::throws_with([&] { x.to(of::kFloat32, false, false, of::MemoryFormat::ChannelsLast3d); },
                        {"[to]", "ChannelsLast3d", "5-D"}));
  CHECK(th::throws_with(
      [] {
        of::empty({2, 3}, {}, of::MemoryFormat::ChannelsLast);
      },
      {"[empty]", "ChannelsLast", "4 sizes"}));
}

TEST_CASE("compat: multinomial draws from the rows' distributions") {
  of::manual_seed(11);
  // With replacement: frequencies close to the normalized weights (not normalized on input).
  const of::Tensor w = of::tensor(std::vector<double>{1, 0, 3, 6}, {}, of::kFloat64);
  const int64_t n = 40000;
  const of::Tensor s = of::multinomial(w, n, true);
  CHECK(s.dtype() == of::kInt64);
  CHECK(s.sizes() == std::vector<int64_t>{n});
  std::vector<double> count(4, 0);
  for (int64_t v : s.to_vector<int64_t>()) count[size_t(v)] += 1;
  CHECK(count[1] == 0);  // a zero-weight category is never drawn
  for (int j : {0, 2, 3}) {
    const double p = w.to_vector<double>()[size_t(j)] / 10.0;
    const double sd = std::sqrt(p * (1 - p) / double(n));
    CHECK(std::abs(count[size_t(j)] / double(n) - p) < 5 * sd);
  }
  // Without replacement: distinct indices, never a zero weight, first draw ~ the weights.
  const of::Tensor rows =
      of::tensor(std::vector<double>{0.1, 0.2, 0.3, 0.4, 0, 5, 1, 1, 1, 0}, {2, 5}, of::kFloat32);
  std::vector<double> first(5, 0);
  const int trials = 4000;
  for (int t = 0; t < trials; ++t) {
    const std::vector<int64_t> d = rows.multinomial(3).to_vector<int64_t>();
    REQUIRE(d.size() == 6);
    CHECK((d[0] != d[1] && d[1] != d[2] && d[0] != d[2]));
    CHECK((d[3] != 4 && d[4] != 4 && d[5] != 4 && d[3] != d[4] && d[4] != d[5] && d[3] != d[5]));
    for (int k = 0; k < 3; ++k) CHECK(d[size_t(k)] != 4);
    first[size_t(d[0])] += 1;
  }
  for (int j = 0; j < 4; ++j) {
    const double p = 0.1 * (j + 1);
    CHECK(std::abs(first[size_t(j)] / trials - p) < 5 * std::sqrt(p * (1 - p) / trials));
  }
  // Every category once when all are asked for.
  std::vector<int64_t> all = of::multinomial(rows.select(0, 1), 4).to_vector<int64_t>();
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<int64_t>{0, 1, 2, 3});
  // Deterministic under manual_seed, and a traced call redraws as eager does.
  of::manual_seed(5);
  const of::Tensor a = of::multinomial(w, 16, true);
  of::manual_seed(5);
  CHECK(of::equal(of::multinomial(w, 16, true), a));
  auto f = of::jit::trace([](const of::Tensor& p) { return of::multinomial(p, 8, true) + 0; });
  of::manual_seed(9);
  std::vector<of::Tensor> eager;
  for (int i = 0; i < 3; ++i) eager.push_back(of::multinomial(w, 8, true) + 0);
  of::manual_seed(9);
  for (int i = 0; i < 3; ++i) CHECK(of::equal(f(w), eager[size_t(i)]));
  // Bad arguments: clear errors before the generator moves.
  of::manual_seed(21);
  CHECK(th::throws_with([&] { of::multinomial(w, 5); }, {"[multinomial]", "without replacement"}));
  CHECK(th::throws_with([&] { of::multinomial(w, 0, true); }, {"[multinomial]", "n_sample <= 0"}));
  CHECK(th::throws_with(
      [] {
        of::multinomial(of::ones({2, 2, 2}), 1);
      },
      {"[multinomial]", "1 or 2 dim"}));
  CHECK(th::throws_with([] { of::multinomial(of::ones({3}, of::kInt64), 1); },
                        {"[multinomial]", "floating point"}));
  const of::Tensor after_errors = of::multinomial(w, 4, true);
  of::manual_seed(21);
  CHECK(of::equal(of::multinomial(w, 4, true), after_errors));
  // Bad weights (read by the kernel, as in libtorch): clear errors.
  CHECK(th::throws_with(
      [] {
        of::multinomial(of::tensor(std::vector<double>{1, -1}), 1);
      },
      {"[multinomial]", "element < 0"}));
  CHECK(th::throws_with(
      [] {
        of::multinomial(of::tensor(std::vector<double>{1, NAN}), 1);
      },
      {"[multinomial]", "nan"}));
  CHECK(th::throws_with([] { of::multinomial(of::zeros({3}), 1, true); },
                        {"[multinomial]", "sum of probabilities"}));
  CHECK(th::throws_with(
      [] {
        of::multinomial(of::tensor(std::vector<double>{1, 0, 0}), 2);
      },
      {"[multinomial]", "not enough non-negative category"}));
}

namespace {

// multinomial's table row: the frequencies of 20000 draws with replacement per row against the
// normalized weights (~6 standard errors), on contiguous and non-contiguous weights.
// clang-format off
TH_ROWS({[] {
  th::OpRow r;
  r.name = "multinomial/frequencies";
  r.ops = {"multinomial"};
  r.shapes = {{3, 4}};
  r.lo = 0.5;
  r.hi = 2.0;
  r.fn = [](const std::vector<of::Tensor>& in) {
    of::manual_seed(17);
    const of::Tensor s = of::multinomial(in[0], 20000, true);
    return (s.unsqueeze(-1) == th::like(of::arange(in[0].size(1)), in[0])).to(in[0].dtype()).mean(1);
  };
  r.ref = [](const std::vector<th::Ref>& in) {
    th::Ref o = in[0];
    for (int64_t i = 0; i < 3; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < 4; ++j) sum += o.v[size_t(i * 4 + j)];
      for (int64_t j = 0; j < 4; ++j) o.v[size_t(i * 4 + j)] /= sum;
    }
    return o;
  };
  r.rtol = r.rtol64 = 0;
  r.atol = r.atol64 = 0.02;
  r.grad = false;
  return r;
}()});
// clang-format on

}  // namespace

// Core behaviour: dtypes and promotion, views, autograd rules, errors, factories, printing.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include <oneflow/fmt.h>  // fmt::format("{}", tensor)

#include "harness.h"

using th::throws_with;

TEST_CASE("smoke: add, backward") {
  auto a = of::ones({2, 3}, of::requires_grad(true));
  auto b = of::full({3}, 2.0);
  auto y = (a * b + 1).sum();
  CHECK(y.item<float>() == doctest::Approx(18));
  y.backward();
  for (float v : a.grad().to_vector<float>()) CHECK(v == doctest::Approx(2));
}

TEST_CASE("type promotion follows PyTorch") {
  auto f32 = of::ones({2}), f64 = of::ones({2}, of::kFloat64), i32 = of::ones({2}, of::kInt32);
  auto i64 = of::ones({2}, of::kInt64), u8 = of::ones({2}, of::kUInt8),
       b = of::ones({2}, of::kBool);
  auto f16 = of::ones({2}, of::kFloat16), bf = of::ones({2}, of::kBFloat16);
  CHECK((f32 + f64).scalar_type() == of::kFloat64);
  CHECK((i32 + i64).scalar_type() == of::kInt64);
  CHECK((u8 + b).scalar_type() == of::kUInt8);
  CHECK((i32 + f16).scalar_type() == of::kFloat16);
  CHECK((f16 + bf).scalar_type() == of::kFloat32);
  CHECK((b + b).scalar_type() == of::kBool);
  // scalars and 0-d tensors rank lower than dimensioned tensors of the same category
  CHECK((i32 + 5).scalar_type() == of::kInt32);
  CHECK((i32 + 2.5).scalar_type() == of::kFloat32);
  CHECK((f16 * 2.5).scalar_type() == of::kFloat16);
  CHECK((f32 + of::ones({}, of::kFloat64)).scalar_type() == of::kFloat32);
  CHECK((i32 + of::ones({}, of::kFloat64)).scalar_type() == of::kFloat64);
  CHECK((u8 + of::ones({}, of::kInt64)).scalar_type() == of::kUInt8);
  CHECK((i32 / i32).scalar_type() == of::kFloat32);
  CHECK(of::div(i64 * 7, i64 * 2, "floor").scalar_type() == of::kInt64);
  CHECK((f32 < 1).scalar_type() == of::kBool);
  CHECK(of::exp(i64).scalar_type() == of::kFloat32);
}

TEST_CASE("integer and half arithmetic") {
  auto a = of::tensor(std::vector<int64_t>{-7, 7, -8, 9});
  auto b = of::tensor(std::vector<int64_t>{2, -2, 3, 3});
  CHECK(of::div(a, b, "floor").to_vector<int64_t>() == std::vector<int64_t>{-4, -4, -3, 3});
  CHECK(of::div(a, b, "trunc").to_vector<int64_t>() == std::vector<int64_t>{-3, -3, -2, 3});
  CHECK(of::remainder(a, b).to_vector<int64_t>() == std::vector<int64_t>{1, -1, 1, 0});
  CHECK(of::fmod(a, b).to_vector<int64_t>() == std::vector<int64_t>{-1, 1, -2, 0});
  CHECK(of::pow(b, 3).to_vector<int64_t>() == std::vector<int64_t>{8, -8, 27, 27});
  CHECK(throws_with([&] { of::div(a, b * 0, "floor"); }, {"[div]", "division", "zero"}));
  auto h = of::tensor(std::vector<float>{1.5f, -2.25f, 65504.f}).to(of::kFloat16);
  CHECK((h * 2).to_vector<float>() == std::vector<float>{3.f, -4.5f, INFINITY});
  auto bf = of::tensor(std::vector<float>{1.0f, 3.0f}).to(of::kBFloat16);
  CHECK((bf + bf).to_vector<float>() == std::vector<float>{2.f, 6.f});
}

TEST_CASE("views share storage and carry strides") {
  auto x = of::arange(12, of::kFloat32).reshape({3, 4});
  auto t = x.t();
  CHECK(!t.is_contiguous());
  CHECK(t.stride(0) == 1);
  CHECK(t.data_ptr() == x.data_ptr());
  auto s = x.slice(1, 1, 4, 2);  // columns 1, 3
  CHECK(s.sizes().vec() == std::vector<int64_t>{3, 2});
  s.fill_(-1);
  CHECK(x[0].to_vector<float>() == std::vector<float>{0, -1, 2, -1});
  auto e = of::ones({3, 1}).expand({3, 5});
  CHECK(e.stride(1) == 0);
  CHECK(x.view({-1}).size(0) == 12);
  CHECK(throws_with([&] { t.view({12}); }, {"[view]", "reshape"}));
  auto r = t.reshape({12});  // copies
  CHECK(r.is_contiguous());
  CHECK(x.narrow(0, 1, 2).unsqueeze(0).squeeze().sizes().vec() == std::vector<int64_t>{2, 4});
  CHECK(of::zeros({2, 0, 3}).flatten().numel() == 0);
  auto z = of::zeros({});
  CHECK(z.dim() == 0);
  CHECK(z.numel() == 1);
  CHECK((z + 1).item<float>() == 1.0f);
}

TEST_CASE("autograd: accumulation, retain_graph, grad(), higher order") {
  auto x = of::tensor(std::vector<double>{1.0, 2.0, 3.0}).requires_grad_();
  auto y = (x * x * x).sum();
  y.backward({}, true);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 12, 27});
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 24, 54});
  CHECK(throws_with([&] { y.backward(); }, {"second time", "retain_graph"}));

  auto x2 = of::tensor(std::vector<double>{0.5, -1.5}).requires_grad_();
  auto f = (x2 * x2 * x2).sum();
  auto g = of::autograd::grad({f}, {x2}, {}, std::nullopt, true)[0];  // 3x^2
  auto gg = of::autograd::grad({g.sum()}, {x2})[0];                   // 6x
  CHECK(g.to_vector<double>() == std::vector<double>{0.75, 6.75});
  CHECK(gg.to_vector<double>() == std::vector<double>{3.0, -9.0});
  CHECK(!x2.grad().defined());  // grad() does not accumulate into .grad

  auto a = of::ones({2}, of::requires_grad(true));
  auto h = a * 2;
  h.retain_grad();
  (h * 3).sum().backward();
  CHECK(h.grad().to_vector<float>() == std::vector<float>{3, 3});
  CHECK(!h.is_leaf());
  CHECK(a.is_leaf());
}

TEST_CASE("autograd: no_grad, detach, non-scalar backward") {
  auto x = of::ones({2, 2}, of::requires_grad(true));
  {
    of::NoGradGuard ng;
    auto y = x * 2;
    CHECK(!y.requires_grad());
    {
      of::EnableGradGuard eg;
      CHECK((x * 2).requires_grad());
    }
  }
  CHECK(!x.detach().requires_grad());
  auto y = x * 3;
  CHECK(throws_with([&] { y.backward(); }, {"[backward]", "scalar", "(2, 2)"}));
  y.backward(of::ones({2, 2}));
  CHECK(x.grad().sum().item<float>() == 12.0f);
  CHECK(throws_with([&] { of::ones({2}).sum().backward(); },
                    {"[backward]", "does not require grad"}));
  CHECK(throws_with([&] { of::ones({2}, of::kInt64).requires_grad_(); },
                    {"[requires_grad_]", "int64"}));
}

TEST_CASE("autograd: in-place writes to saved tensors are errors, not wrong gradients") {
  auto x = of::ones({3}, of::requires_grad(true));
  auto y = x.exp();  // saves its output
  auto z = y.sum();
  y.add_(1);
  CHECK(throws_with([&] { z.backward(); },
                    {"[autograd]", "modified by an inplace operation", "version"}));

  auto w = of::ones({3}, of::requires_grad(true));
  CHECK(throws_with([&] { w.add_(1); }, {"[add]", "leaf", "in-place"}));
  auto v = w * 2;
  v.mul_(3);  // fine: mul_ on a non-leaf records a node
  v.sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{6, 6, 6});
  CHECK(v._version() > 0);
}

TEST_CASE("errors name the op and the offending shapes/dtypes/dims") {
  auto a = of::ones({2, 3}), b = of::ones({4});
  CHECK(throws_with([&] { a + b; }, {"[broadcast]", "(2, 3)", "(4,)"}));
  CHECK(throws_with([&] { a.sum(2); }, {"[sum]", "out of range", "2"}));
  CHECK(throws_with([&] { a.item<float>(); }, {"[item]", "6 elements"}));
  CHECK(throws_with([&] { of::zeros({-1, 2}); }, {"negative dimension", "-1"}));
  CHECK(throws_with([&] { of::zeros({int64_t(1) << 40, int64_t(1) << 40}); }, {"overflow"}));
  CHECK(throws_with([&] { a.permute({0, 0}); }, {"[permute]", "repeated"}));
  CHECK(throws_with([&] { a.expand({3, 3}); }, {"[expand]", "3"}));
  CHECK(throws_with([&] { a.select(0, 5); }, {"[select]", "5", "out of range"}));
  CHECK(throws_with([&] { a.narrow(1, 2, 5); }, {"[narrow]"}));
  CHECK(throws_with(
      [&] {
        of::Tensor u;
        u.sizes();
      },
      {"undefined"}));
  CHECK(
      throws_with([&] { of::ones({2}, of::kBool) - of::ones({2}, of::kBool); }, {"[sub]", "bool"}));
  CHECK(throws_with([&] { of::Device("gpu:0"); }, {"[device]", "gpu:0"}));
  CHECK(throws_with([&] { of::arange(0, 10, of::Scalar(0)); }, {"[arange]", "step"}));
  CHECK(throws_with([&] { of::ones({2}).reshape({3}); }, {"[reshape]", "(3,)", "2"}));
  CHECK(throws_with([&] { of::where(of::ones({2}), of::ones({2}), of::ones({2})); },
                    {"[where]", "bool"}));
  CHECK(throws_with([&] { of::gelu(of::ones({2}), "fast"); }, {"[gelu]", "fast"}));
  auto i = of::ones({2}, of::kInt64);
  CHECK(throws_with([&] { i.exp_(); }, {"[exp_]", "float32", "int64"}));
  CHECK(throws_with([&] { i.add_(of::ones({2})); }, {"[add_]", "float32", "int64"}));
  // nothing was written by the failed in-place op
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(throws_with(
      [&] {
        auto o = of::empty({3});
        of::add_out(o, of::ones({2}), of::ones({2}));
      },
      {"[add]", "(3,)", "(2,)"}));
}

TEST_CASE("factories, conversion and data access") {
  CHECK(of::arange(5).scalar_type() == of::kInt64);
  CHECK(of::arange(0.0, 1.0, 0.25).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  CHECK(of::linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1});
  CHECK(of::eye(2).to_vector<float>() == std::vector<float>{1, 0, 0, 1});
  CHECK(of::full({2}, 7).scalar_type() == of::kInt64);
  CHECK(of::ones({2}, of::kBool).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(of::zeros_like(of::ones({2, 3}, of::kFloat64)).scalar_type() == of::kFloat64);
  auto t = of::tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.sizes().vec() == std::vector<int64_t>{2, 3});
  CHECK(t.to(of::kInt32).to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  CHECK(t.data_ptr<float>()[4] == 5.0f);
  CHECK(throws_with([&] { t.data_ptr<double>(); }, {"[data_ptr]", "float32", "float64"}));
  CHECK(throws_with(
      [&] {
        of::tensor(std::vector<float>{1, 2, 3}, {2, 2});
      },
      {"[tensor]", "(2, 2)"}));
  float buf[4] = {1, 2, 3, 4};
  bool freed = false;
  {
    auto fb = of::from_blob(buf, {2, 2}, [&](void*) { freed = true; });
    fb.mul_(2);
    CHECK(buf[3] == 8.0f);
  }
  CHECK(freed);
  auto copy = t.clone();
  CHECK(copy.data_ptr() != t.data_ptr());
  auto dst = of::zeros({2, 3}, of::kFloat64);
  dst.copy_(of::ones({3}));
  CHECK(dst.sum().item<double>() == 6.0);
  CHECK(t.to(of::Device("cpu")).is_same(t));
}

TEST_CASE("random numbers: seeded and independent of the thread count") {
  of::manual_seed(123);
  auto a = of::randn({100000});
  of::set_num_threads(1);
  of::manual_seed(123);
  auto b = of::randn({100000});
  of::set_num_threads(2);
  CHECK(of::equal(a, b));
  auto c = of::randn({100000});
  CHECK(!of::equal(a, c));
  auto r = of::randint(0, 10, {1000}, of::kInt64);
  CHECK(r.amin().item<int64_t>() >= 0);
  CHECK(r.amax().item<int64_t>() <= 9);
  auto p = of::randperm(50);
  CHECK(std::get<0>(p.sort(0)).to_vector<int64_t>() == of::arange(50).to_vector<int64_t>());
}

TEST_CASE("float exp: ~1 ulp over the normal range, 0 where exp leaves it, never subnormal") {
  // NOTE [Fast float math], NOTE [exp underflow]
  std::vector<float> xs;
  for (int i = 0; i <= 200000; ++i)
    xs.push_back(-87.33f + float(i) * (88.37f + 87.33f) / 200000.0f);
  for (float x : {-87.34f, -87.5f, -90.0f, -103.5f, -200.0f, -INFINITY, 88.5f, INFINITY, NAN})
    xs.push_back(x);
  const std::vector<float> ys = of::exp(of::tensor(xs)).to_vector<float>();
  double worst = 0;
  int subnormal = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    subnormal += std::fpclassify(ys[i]) == FP_SUBNORMAL;
    if (xs[i] >= -87.33f && xs[i] <= 88.37f) {
      const double want = std::exp(double(xs[i]));
      worst = std::max(worst, std::fabs(double(ys[i]) - want) / want);
    }
  }
  CHECK(worst < 3e-7);  // 2.5 ulp
  CHECK(subnormal == 0);
  const size_t n = ys.size();
  for (size_t i = n - 9; i < n - 3; ++i) CHECK(ys[i] == 0.0f);  // below -87.33
  CHECK(std::isinf(ys[n - 3]));
  CHECK(std::isinf(ys[n - 2]));
  CHECK(std::isnan(ys[n - 1]));
  CHECK(std::fpclassify(ys[0]) == FP_NORMAL);
}

TEST_CASE("caching allocator statistics") {
  of::memory::reset_peak_stats();
  auto before = of::memory::stats();
  {
    auto big = of::empty({1 << 20});
    auto s = of::memory::stats();
    CHECK(s.allocated >= before.allocated + (4u << 20));
    CHECK(s.peak_allocated >= s.allocated);
  }
  auto after_free = of::memory::stats();
  CHECK(after_free.allocated == before.allocated);
  CHECK(after_free.reserved >= after_free.allocated + (4u << 20));  // cached
  auto hits = after_free.num_cache_hits;
  auto again = of::empty({1 << 20});
  CHECK(of::memory::stats().num_cache_hits == hits + 1);
}

TEST_CASE("printing") {
  auto t = of::tensor(std::vector<float>{1.5f, -2.f, 3.25f, 0.f}, {2, 2});
  std::string s = fmt::format("{}", t);
  CHECK(s.find("tensor([[") == 0);
  CHECK(s.find("1.5000") != std::string::npos);
  std::ostringstream os;
  os << of::ones({3}, of::kInt64);
  CHECK(os.str() == "tensor([1, 1, 1], dtype=int64)");
  auto big = of::arange(2000, of::kFloat32);
  std::string b = big.toString();
  CHECK(b.find("...") != std::string::npos);
  CHECK(b.find("size=(2000,)") != std::string::npos);
  auto g = of::ones({2}, of::requires_grad(true)) * 2;
  CHECK(g.toString().find("grad_fn=<MulBackward0>") != std::string::npos);
}

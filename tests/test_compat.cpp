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

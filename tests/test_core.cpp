#include <doctest/doctest.h>

#include <oneflow/oneflow.h>

TEST_CASE("smoke: add, backward") {
  auto a = of::ones({2, 3}, of::requires_grad());
  auto b = of::full({3}, 2.0);
  auto y = (a * b + 1).sum();
  CHECK(y.item<float>() == doctest::Approx(18));
  y.backward();
  auto g = a.grad().to_vector<float>();
  for (float v : g) CHECK(v == doctest::Approx(2));
}

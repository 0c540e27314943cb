// The models of the GPU benchmarks (bench/gpu_models.h: ResNet-50's bottleneck network, the
// BERT-base-shaped encoder), small, on the CPU: mixed-precision training steps (bfloat16
// autocast + GradScaler) traced and replayed equal the eager steps bitwise, losses and weights.
#include <doctest/doctest.h>

#include "../bench/gpu_models.h"
#include "harness.h"

namespace {

namespace ob = oneflow::bench;

template <class MakeModel, class MakeOpt>
std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>> train(MakeModel make_model,
                                                                  MakeOpt make_opt, bool traced,
                                                                  const of::Tensor& x,
                                                                  const of::Tensor& y) {
  of::manual_seed(11);
  auto model = make_model();
  auto opt = make_opt(model->parameters());
  of::amp::GradScaler scaler;
  auto body = [&](const of::Tensor& xx, const of::Tensor& yy) {
    return ob::train_step(model, *opt, scaler, of::kCPU, of::kBFloat16, xx, yy);
  };
  auto step = of::jit::trace(body);
  of::manual_seed(12);
  std::vector<of::Tensor> losses;
  for (int s = 0; s < 4; ++s) losses.push_back(traced ? step(x, y) : body(x, y).detach());
  if (traced) CHECK(step.stats().replays >= 1);
  std::vector<of::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p.detach().clone());
  return {losses, params};
}

void check_same(const std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>>& a,
                const std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>>& b) {
  REQUIRE(a.first.size() == b.first.size());
  for (size_t i = 0; i < a.first.size(); ++i) CHECK(th::same_bits(a.first[i], b.first[i]));
  REQUIRE(a.second.size() == b.second.size());
  for (size_t i = 0; i < a.second.size(); ++i) CHECK(th::same_bits(a.second[i], b.second[i]));
}

}  // namespace

TEST_CASE("gpu models (small, CPU): ResNet bottleneck network AMP steps traced equal eager") {
  of::manual_seed(3);
  const of::Tensor x = of::randn({2, 3, 16, 16});
  const of::Tensor y = of::randint(0, 10, {2}, of::kInt64);
  auto make = [] { return ob::ResNet(std::vector<int64_t>{1, 1, 1, 1}, 10, 8); };
  auto opt = [](std::vector<of::Tensor> p) {
    return std::make_unique<of::optim::SGD>(
        p, of::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  };
  const auto eager = train(make, opt, false, x, y);
  const auto traced = train(make, opt, true, x, y);
  check_same(eager, traced);
  CHECK(eager.first.back().item<double>() < eager.first.front().item<double>());  // it learns
}

TEST_CASE("gpu models (small, CPU): BERT encoder AMP steps (dropout) traced equal eager") {
  const ob::BertShape s{50, 16, 32, 4, 64, 2, 0.1};
  of::manual_seed(4);
  const of::Tensor ids = of::randint(0, s.vocab, {8, 3}, of::kInt64);
  const of::Tensor labels = of::randint(0, s.vocab, {8, 3}, of::kInt64);
  auto make = [&] { return ob::Bert(s); };
  auto opt = [](std::vector<of::Tensor> p) {
    return std::make_unique<of::optim::AdamW>(p, of::optim::AdamWOptions(1e-3).weight_decay(0.01));
  };
  const auto eager = train(make, opt, false, ids, labels);
  const auto traced = train(make, opt, true, ids, labels);
  check_same(eager, traced);
}

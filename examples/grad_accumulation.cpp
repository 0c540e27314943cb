// grad_accumulation: training with a large effective batch from small micro-batches.
// Gradients add up in .grad across backward() calls until zero_grad(); scaling each
// micro-batch loss by 1/k makes k micro-batches give the gradient of one batch k times larger.
// The program checks that equality, then trains with accumulation.
#include <oneflow/oneflow.h>

#include <cmath>
#include <cstdio>

namespace nn = of::nn;

int main() {
  of::manual_seed(0);
  const int64_t batch = 128, micro = 32, k = batch / micro;
  // a synthetic 4-class problem: the class is the quadrant of the first two features
  of::Tensor x = of::randn({2048, 16});
  of::Tensor y = (x.select(1, 0) > 0).to(of::kInt64) * 2 + (x.select(1, 1) > 0).to(of::kInt64);

  nn::Sequential net(nn::Linear(16, 64), nn::ReLU(), nn::Linear(64, 4));
  of::optim::SGD opt(net->parameters(), of::optim::SGDOptions(0.1).momentum(0.9));

  // 1. one batch of 128 vs four micro-batches of 32 with loss / 4: the same gradient
  of::Tensor xb = x.narrow(0, 0, batch), yb = y.narrow(0, 0, batch);
  opt.zero_grad();
  of::cross_entropy(net(xb), yb).backward();
  std::vector<of::Tensor> full;
  for (auto& p : net->parameters()) full.push_back(p.grad().clone());
  opt.zero_grad();
  for (int64_t m = 0; m < k; ++m)
    (of::cross_entropy(net(xb.narrow(0, m * micro, micro)), yb.narrow(0, m * micro, micro)) /
     double(k))
        .backward();
  double worst = 0;
  auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    worst = std::max(worst, (params[i].grad() - full[i]).abs().amax().item<float>() * 1.0);
  std::printf("max |grad(batch 128) - sum of 4 micro-batch grads / 4| = %.2e\n", worst);
  if (worst > 1e-5) {
    std::printf("gradient accumulation mismatch\n");
    return 1;
  }

  // 2. training: one optimizer step per k micro-batches
  for (int epoch = 1; epoch <= 5; ++epoch) {
    double loss_sum = 0;
    int64_t steps = 0;
    for (int64_t start = 0; start + batch <= x.size(0); start += batch) {
      opt.zero_grad();
      for (int64_t m = 0; m < k; ++m) {
        of::Tensor loss = of::cross_entropy(net(x.narrow(0, start + m * micro, micro)),
                                            y.narrow(0, start + m * micro, micro)) /
                          double(k);
        loss.backward();
        loss_sum += loss.item<float>();
      }
      opt.step();
      ++steps;
    }
    of::NoGradGuard no_grad;
    const double acc = net(x).argmax(1).eq(y).to(of::kFloat32).mean().item<float>();
    std::printf("epoch %d: loss %.4f, accuracy %.4f\n", epoch, loss_sum / double(steps), acc);
  }
  return 0;
}

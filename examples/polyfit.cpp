// polyfit: fit y = sin(x) on [-pi, pi] with a cubic polynomial by gradient descent, then train a
// logistic-regression classifier on two Gaussian blobs -- eager autograd and hand-written SGD.
#include <chrono>
#include <cmath>
#include <cstdio>

#include <oneflow/oneflow.h>

int main() {
  of::manual_seed(0);
  using clock = std::chrono::steady_clock;

  // --- 1. polynomial regression
  std::printf("== polynomial fit: y = sin(x) ~ a + b x + c x^2 + d x^3 (2000 points)\n");
  of::Tensor x = of::linspace(-M_PI, M_PI, 2000);
  of::Tensor y = x.sin();
  of::Tensor coef = of::randn({4}, of::requires_grad(true));
  of::Tensor vel = of::zeros({4});
  const double lr = 1e-3, momentum = 0.9;
  of::Tensor powers = of::stack({of::ones_like(x), x, x * x, x * x * x}, 1);  // [2000, 4]
  auto t0 = clock::now();
  const int steps = 2000;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    of::Tensor pred = of::matmul(powers, coef);
    of::Tensor loss = (pred - y).square().mean();
    loss.backward();
    {
      of::NoGradGuard no_grad;
      vel.mul_(momentum).add_(coef.grad());
      coef.sub_(vel, lr);
      coef.mutable_grad().zero_();
    }
    double l = loss.item<double>();
    if (step == 0) first = l;
    last = l;
    if (step % 400 == 0 || step == steps - 1) std::printf("  step %4d  loss %.6f\n", step, l);
  }
  double secs = std::chrono::duration<double>(clock::now() - t0).count();
  auto c = coef.to_vector<float>();
  std::printf(
      "  fitted: %.4f + %.4f x + %.4f x^2 + %.4f x^3   (Taylor: 0 + 1 x + 0 x^2 - 0.1667 x^3)\n",
      c[0], c[1], c[2], c[3]);
  std::printf("  loss %.4f -> %.6f in %d steps, %.1f us/step\n", first, last, steps,
              secs / steps * 1e6);

  // --- 2. logistic regression
  std::printf("== logistic regression: two Gaussian blobs in 2-D (1000 points)\n");
  const int64_t n = 1000;
  of::Tensor labels = (of::rand({n}) > 0.5).to(of::kFloat32);
  of::Tensor centers = of::stack({labels * 2 - 1, -(labels * 2 - 1)}, 1) * 1.5;
  of::Tensor feats = centers + of::randn({n, 2});
  of::Tensor w = of::zeros({2}, of::requires_grad(true));
  of::Tensor b = of::zeros({}, of::requires_grad(true));
  t0 = clock::now();
  for (int step = 0; step <= 300; ++step) {
    of::Tensor logits = of::matmul(feats, w) + b;
    // binary cross-entropy with logits, written out: softplus(z) - y z
    of::Tensor loss =
        (of::log1p((-logits.abs()).exp()) + logits.clamp_min(0) - labels * logits).mean();
    loss.backward();
    {
      of::NoGradGuard no_grad;
      w.sub_(w.grad(), 0.5);
      b.sub_(b.grad(), 0.5);
      w.mutable_grad().zero_();
      b.mutable_grad().zero_();
    }
    if (step % 60 == 0) {
      of::NoGradGuard no_grad;
      double acc = ((logits > 0).to(of::kFloat32) == labels).to(of::kFloat32).mean().item<double>();
      std::printf("  step %3d  loss %.4f  accuracy %.3f\n", step, loss.item<double>(), acc);
    }
  }
  secs = std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("  %.1f us/step; weights %s\n", secs / 301 * 1e6, of::str(w.detach()).c_str());
  return last < first ? 0 : 1;
}

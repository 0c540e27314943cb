// test_optim.cpp: optimizer trajectories against float64 reference loops written from the
// update rules (libtorch 1.13), parameter groups, state dicts, schedulers, gradient clipping.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "harness.h"

namespace of = oneflow;
namespace optim = oneflow::optim;
using V = std::vector<double>;

namespace {

// Loss sum(w * (p - t)^2): gradient 2 w (p - t), known exactly for the reference.
const V kStart = {0.5, -1.25, 2.0, 0.75, -0.3, 1.1};
const V kTarget = {1.0, 0.5, -1.0, 0.25, 0.2, -0.7};
const V kWeight = {1.0, 2.0, 0.5, 3.0, 1.5, 0.25};

V ref_grad(const V& p) {
  V g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = 2 * kWeight[i] * (p[i] - kTarget[i]);
  return g;
}

of::Tensor make_param() { return of::tensor(kStart, {6}, of::kFloat64).requires_grad_(true); }

void backward_on(const of::Tensor& p) {
  of::Tensor t = of::tensor(kTarget, {6}, of::kFloat64), w = of::tensor(kWeight, {6}, of::kFloat64);
  ((p - t).square() * w).sum().backward();
}

// Runs `steps` steps of `opt` on the quadratic and returns the final parameter values.
V run(optim::Optimizer& opt, of::Tensor& p, int steps) {
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    backward_on(p);
    opt.step();
  }
  return p.to_vector<double>();
}

bool close(const V& a, const V& b, double tol = 1e-12) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > tol * (1 + std::abs(b[i]))) return false;
  return true;
}

}  // namespace

TEST_CASE(
    "optim: SGD (plain, momentum + dampening, nesterov, weight decay) matches the reference") {
  struct Cfg {
    double lr, mom, damp, wd;
    bool nesterov;
  };
  for (Cfg c : {Cfg{0.1, 0, 0, 0, false}, Cfg{0.05, 0.9, 0.1, 0, false},
                Cfg{0.05, 0.9, 0, 0.01, true}, Cfg{0.02, 0.5, 0, 0.1, false}}) {
    of::Tensor p = make_param();
    optim::SGD opt(
        {p}, optim::SGDOptions(c.lr).momentum(c.mom).dampening(c.damp).weight_decay(c.wd).nesterov(
                 c.nesterov));
    V got = run(opt, p, 6);
    V x = kStart, buf(6, 0);
    for (int s = 0; s < 6; ++s) {
      V g = ref_grad(x);
      for (size_t i = 0; i < 6; ++i) {
        double d = g[i] + c.wd * x[i];
        if (c.mom != 0) {
          buf[i] = s == 0 ? d : buf[i] * c.mom + (1 - c.damp) * d;
          d = c.nesterov ? d + c.mom * buf[i] : buf[i];
        }
        x[i] -= c.lr * d;
      }
    }
    CHECK(close(got, x));
  }
}

TEST_CASE("optim: Adam and AdamW (with amsgrad and weight decay) match the reference") {
  for (bool decoupled : {false, true})
    for (bool ams : {false, true}) {
      const double lr = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
      of::Tensor p = make_param();
      std::unique_ptr<optim::Optimizer> opt;
      if (decoupled)
        opt = std::make_unique<optim::AdamW>(
            std::vector<of::Tensor>{p},
            optim::AdamWOptions(lr).betas({b1, b2}).eps(eps).weight_decay(wd).amsgrad(ams));
      else
        opt = std::make_unique<optim::Adam>(
            std::vector<of::Tensor>{p},
            optim::AdamOptions(lr).betas({b1, b2}).eps(eps).weight_decay(wd).amsgrad(ams));
      V got = run(*opt, p, 7);
      V x = kStart, m(6, 0), v(6, 0), vmax(6, 0);
      for (int s = 1; s <= 7; ++s) {
        V g = ref_grad(x);
        for (size_t i = 0; i < 6; ++i) {
          if (decoupled) x[i] *= 1 - lr * wd;
          else g[i] += wd * x[i];
          m[i] = b1 * m[i] + (1 - b1) * g[i];
          v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
          vmax[i] = std::max(vmax[i], v[i]);
          const double bc1 = 1 - std::pow(b1, s), bc2 = 1 - std::pow(b2, s);
          const double denom = std::sqrt(ams ? vmax[i] : v[i]) / std::sqrt(bc2) + eps;
          x[i] -= lr / bc1 * m[i] / denom;
        }
      }
      INFO("decoupled ", decoupled, " amsgrad ", ams);
      CHECK(close(got, x));
    }
}

TEST_CASE("optim: RMSprop (centered, momentum) and Adagrad (lr decay) match the reference") {
  for (bool centered : {false, true})
    for (double mom : {0.0, 0.7}) {
      const double lr = 0.01, alpha = 0.9, eps = 1e-8, wd = 0.05;
      of::Tensor p = make_param();
      optim::RMSprop opt(
          {p},
          optim::RMSpropOptions(lr).alpha(alpha).eps(eps).weight_decay(wd).momentum(mom).centered(
              centered));
      V got = run(opt, p, 5);
      V x = kStart, sq(6, 0), ga(6, 0), buf(6, 0);
      for (int s = 0; s < 5; ++s) {
        V g = ref_grad(x);
        for (size_t i = 0; i < 6; ++i) {
          const double gi = g[i] + wd * x[i];
          sq[i] = alpha * sq[i] + (1 - alpha) * gi * gi;
          double avg;
          if (centered) {
            ga[i] = alpha * ga[i] + (1 - alpha) * gi;
            avg = std::sqrt(sq[i] - ga[i] * ga[i]) + eps;
          } else {
            avg = std::sqrt(sq[i]) + eps;
          }
          if (mom > 0) {
            buf[i] = mom * buf[i] + gi / avg;
            x[i] -= lr * buf[i];
          } else {
            x[i] -= lr * gi / avg;
          }
        }
      }
      CHECK(close(got, x));
    }
  of::Tensor p = make_param();
  const double lr = 0.1, decay = 0.05, init = 0.1, eps = 1e-10;
  optim::Adagrad opt({p},
                     optim::AdagradOptions(lr).lr_decay(decay).initial_accumulator_value(init));
  V got = run(opt, p, 5);
  V x = kStart, sum(6, init);
  for (int s = 1; s <= 5; ++s) {
    V g = ref_grad(x);
    const double clr = lr / (1 + (s - 1) * decay);
    for (size_t i = 0; i < 6; ++i) {
      sum[i] += g[i] * g[i];
      x[i] -= clr * g[i] / (std::sqrt(sum[i]) + eps);
    }
  }
  CHECK(close(got, x));
}

TEST_CASE("optim: float32 trajectories stay within float32 rounding of the float64 ones") {
  of::Tensor p64 = make_param();
  of::Tensor p32 = of::tensor(kStart, {6}, of::kFloat32).requires_grad_(true);
  optim::Adam a64({p64}, optim::AdamOptions(0.05));
  optim::Adam a32({p32}, optim::AdamOptions(0.05));
  for (int s = 0; s < 20; ++s) {
    a64.zero_grad();
    a32.zero_grad();
    backward_on(p64);
    of::Tensor t = of::tensor(kTarget, {6}, of::kFloat32),
               w = of::tensor(kWeight, {6}, of::kFloat32);
    ((p32 - t).square() * w).sum().backward();
    a64.step();
    a32.step();
  }
  CHECK(close(p32.to_vector<double>(), p64.to_vector<double>(), 2e-6));
}

TEST_CASE("optim: parameter groups, zero_grad, and parameters without gradients") {
  of::Tensor a = make_param(), b = make_param(), c = make_param();
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<of::Tensor>{a});
  groups.emplace_back(std::vector<of::Tensor>{b}, std::make_unique<optim::SGDOptions>(0.5));
  optim::SGD opt(groups, optim::SGDOptions(0.1));
  opt.add_param_group(optim::OptimizerParamGroup({c}));
  CHECK(opt.param_groups().size() == 3);
  CHECK(opt.param_groups()[1].options().get_lr() == 0.5);
  CHECK(opt.param_groups()[2].options().get_lr() == 0.1);
  backward_on(a);
  backward_on(b);  // c gets no gradient: it must not move
  opt.step();
  V g = ref_grad(kStart);
  V ea = kStart, eb = kStart;
  for (size_t i = 0; i < 6; ++i) {
    ea[i] -= 0.1 * g[i];
    eb[i] -= 0.5 * g[i];
  }
  CHECK(close(a.to_vector<double>(), ea));
  CHECK(close(b.to_vector<double>(), eb));
  CHECK(c.to_vector<double>() == kStart);
  opt.zero_grad(false);
  CHECK(a.grad().defined());
  CHECK(a.grad().abs().sum().item<double>() == 0);
  opt.zero_grad();
  CHECK(!a.grad().defined());
  // errors
  CHECK(th::throws_with([&] { optim::SGD bad({a}, optim::SGDOptions(-1)); }, {"[optim]", "-1"}));
  CHECK(th::throws_with(
      [&] {
        optim::SGD bad({a, a}, optim::SGDOptions(0.1));
      },
      {"[optim]", "more than one"}));
  CHECK(th::throws_with([&] { optim::SGD bad({a * 2}, optim::SGDOptions(0.1)); },
                        {"[optim]", "non-leaf"}));
  CHECK(th::throws_with(
      [&] {
        optim::Adam bad({a}, optim::AdamOptions(0.1).betas({1.5, 0.9}));
      },
      {"[Adam]", "beta", "1.5"}));
  CHECK(th::throws_with([&] { optim::SGD bad({a}, optim::SGDOptions(0.1).nesterov(true)); },
                        {"[SGD]", "nesterov"}));
}

TEST_CASE("optim: state_dict round trip continues the same trajectory; bad state is rejected") {
  of::Tensor p = make_param();
  optim::Adam opt({p}, optim::AdamOptions(0.05).amsgrad(true));
  run(opt, p, 3);
  auto sd = opt.state_dict();
  CHECK(sd.contains("state.0.exp_avg"));
  CHECK(sd.contains("state.0.max_exp_avg_sq"));
  CHECK(sd["state.0.step"].item<int64_t>() == 3);
  CHECK(sd["param_groups.0.lr"].item<double>() == 0.05);
  // a copy of the parameter and a fresh optimizer loaded from the state dict
  of::Tensor q = p.detach().clone().requires_grad_(true);
  optim::Adam opt2({q}, optim::AdamOptions(0.5));
  of::OrderedDict<std::string, of::Tensor> snapshot;
  for (auto& kv : sd) snapshot.insert(kv.key(), kv.value().clone());
  opt2.load_state_dict(snapshot);
  CHECK(opt2.param_groups()[0].options().get_lr() == 0.05);
  CHECK(close(run(opt2, q, 4), run(opt, p, 4)));
  // a shape mismatch or an unknown key changes nothing
  of::OrderedDict<std::string, of::Tensor> bad;
  bad.insert("param_groups.0.lr", of::full({}, 9.0, of::kFloat64));
  bad.insert("state.0.exp_avg", of::zeros({3}, of::kFloat64));
  CHECK(th::throws_with([&] { opt2.load_state_dict(bad); }, {"[load_state_dict]", "(3,)", "(6,)"}));
  CHECK(opt2.param_groups()[0].options().get_lr() == 0.05);
  of::OrderedDict<std::string, of::Tensor> unknown;
  unknown.insert("param_groups.0.momentumm", of::full({}, 1.0, of::kFloat64));
  CHECK(th::throws_with([&] { opt2.load_state_dict(unknown); }, {"[Adam]", "momentumm"}));
}

TEST_CASE("optim: learning-rate schedulers follow their formulas") {
  auto lrs = [](auto make, int n) {
    of::Tensor p = make_param();
    optim::SGD opt({p}, optim::SGDOptions(1.0));
    auto sched = make(opt);
    std::vector<double> out{opt.param_groups()[0].options().get_lr()};
    for (int i = 0; i < n; ++i) {
      sched->step();
      out.push_back(sched->get_last_lr()[0]);
    }
    return out;
  };
  auto near = [](const std::vector<double>& a, const std::vector<double>& b) {
    return close(a, b, 1e-12);
  };
  CHECK(near(lrs([](auto& o) { return std::make_unique<optim::StepLR>(o, 2, 0.5); }, 5),
             {1, 1, 0.5, 0.5, 0.25, 0.25}));
  CHECK(near(lrs(
                 [](auto& o) {
                   return std::make_unique<optim::MultiStepLR>(o, std::vector<int64_t>{1, 3}, 0.1);
                 },
                 4),
             {1, 0.1, 0.1, 0.01, 0.01}));
  CHECK(near(lrs([](auto& o) { return std::make_unique<optim::ExponentialLR>(o, 0.5); }, 3),
             {1, 0.5, 0.25, 0.125}));
  CHECK(near(lrs([](auto& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 4, 0.0); }, 4),
             {1, (1 + std::cos(M_PI / 4)) / 2, 0.5, (1 + std::cos(3 * M_PI / 4)) / 2, 0}));
  CHECK(near(lrs([](auto& o) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 3); }, 4),
             {0.25, 0.5, 0.75, 1.0, 1.0}));
  CHECK(near(lrs(
                 [](auto& o) {
                   return std::make_unique<optim::LambdaLR>(
                       o, [](int64_t e) { return 1.0 / (e + 1); });
                 },
                 2),
             {1, 0.5, 1.0 / 3}));
  // OneCycle: starts at max/div, peaks at max after pct*total - 1 steps, ends at max/(div*final)
  std::vector<double> oc =
      lrs([](auto& o) { return std::make_unique<optim::OneCycleLR>(o, 1.0, 10, 0.3, 25, 1e4); }, 9);
  CHECK(oc.front() == doctest::Approx(0.04));
  CHECK(oc[2] == doctest::Approx(1.0));
  CHECK(oc.back() == doctest::Approx(0.04 / 1e4));
  // Sequential: linear warm-up for 2 epochs, then exponential decay
  of::Tensor p = make_param();
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  auto warm = std::make_shared<optim::LinearLR>(opt, 0.5, 1.0, 2);
  auto decay = std::make_shared<optim::ExponentialLR>(opt, 0.5);
  optim::SequentialLR seq(opt, {warm, decay}, {2});
  std::vector<double> got{opt.param_groups()[0].options().get_lr()};
  for (int i = 0; i < 4; ++i) {
    seq.step();
    got.push_back(seq.get_last_lr()[0]);
  }
  CHECK(near(got, {0.5, 0.75, 1.0, 0.5, 0.25}));
  CHECK(th::throws_with([&] { optim::StepLR bad(opt, 0); }, {"[StepLR]", "step_size"}));
}

TEST_CASE("optim: clip_grad_norm_ and clip_grad_value_") {
  of::Tensor a = of::tensor(std::vector<double>{3, 4}, {2}, of::kFloat64).requires_grad_(true);
  of::Tensor b = of::tensor(std::vector<double>{12}, {1}, of::kFloat64).requires_grad_(true);
  ((a * a).sum() / 2 + (b * b).sum() / 2).backward();  // grads = values: norm 13
  const double n = of::nn::utils::clip_grad_norm_({a, b}, 6.5);
  CHECK(n == doctest::Approx(13));
  const double f = 6.5 / (13 + 1e-6);
  CHECK(close(a.grad().to_vector<double>(), {3 * f, 4 * f}));
  CHECK(close(b.grad().to_vector<double>(), {12 * f}));
  CHECK(of::nn::utils::clip_grad_norm_({a, b}, 100) == doctest::Approx(6.5).epsilon(1e-6));
  const double inf = of::nn::utils::clip_grad_norm_({a, b}, 1.0, INFINITY);
  CHECK(inf == doctest::Approx(12 * f));
  of::nn::utils::clip_grad_value_({a, b}, 0.1);
  for (double g : a.grad().to_vector<double>()) CHECK(std::abs(g) <= 0.1);
}

TEST_CASE("optim: step(closure) evaluates the loss with gradients enabled, then updates") {
  of::Tensor p = make_param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  of::NoGradGuard no_grad;  // the closure still records: step() enables gradients for it
  of::Tensor loss = opt.step([&] {
    opt.zero_grad();
    of::Tensor t = of::tensor(kTarget, {6}, of::kFloat64),
               w = of::tensor(kWeight, {6}, of::kFloat64);
    of::Tensor l = ((p - t).square() * w).sum();
    l.backward();
    return l;
  });
  double expect = 0;
  for (size_t i = 0; i < 6; ++i)
    expect += kWeight[i] * (kStart[i] - kTarget[i]) * (kStart[i] - kTarget[i]);
  CHECK(loss.item<double>() == doctest::Approx(expect));
  V x = kStart, g = ref_grad(kStart);
  for (size_t i = 0; i < 6; ++i) x[i] -= 0.1 * g[i];
  CHECK(close(p.to_vector<double>(), x));
}

// test_amp.cpp: mixed precision on the CPU. Autocast's op lists (which ops run in bfloat16,
// which in float32, which promote), that its casts are ordinary differentiable ops (bitwise the
// same as writing the casts by hand), the trace cache key, and GradScaler: exact skips of the
// overflowing steps eagerly and in a traced step, the scale schedule, errors, state dicts; and
// the Fashion-MNIST CNN trained in bfloat16 autocast against float32.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "harness.h"

namespace of = oneflow;
namespace F = oneflow::nn::functional;

namespace {

using th::same_bits;

double max_abs_diff(const of::Tensor& a, const of::Tensor& b) {
  return (a.to(of::kFloat64) - b.to(of::kFloat64)).abs().max().item<double>();
}

}  // namespace

TEST_CASE("autocast: the op lists (bfloat16, float32, promote, untouched) on the CPU") {
  of::manual_seed(1);
  of::Tensor a = of::randn({6, 5}), b = of::randn({5, 4});
  of::Tensor img = of::randn({2, 3, 8, 8}), w = of::randn({4, 3, 3, 3});
  CHECK_FALSE(of::autocast::is_cpu_enabled());
  const of::Tensor mm32 = of::mm(a, b);
  CHECK(mm32.dtype() == of::kFloat32);
  {
    of::autocast::Guard amp(of::kCPU);
    CHECK(of::autocast::is_cpu_enabled());
    CHECK(of::autocast::get_autocast_cpu_dtype() == of::kBFloat16);
    CHECK_FALSE(of::autocast::is_enabled());  // CUDA's flag is separate
    // lower precision: the result is exactly the op on inputs cast by hand
    of::Tensor c = of::mm(a, b);
    CHECK(c.dtype() == of::kBFloat16);
    CHECK(same_bits(c, of::mm(a.to(of::kBFloat16), b.to(of::kBFloat16))));
    CHECK(max_abs_diff(c, of::mm(a.to(of::kFloat64), b.to(of::kFloat64))) < 0.1);
    CHECK(of::matmul(a, b).dtype() == of::kBFloat16);
    CHECK(F::linear(a, b.t(), of::randn({4})).dtype() == of::kBFloat16);
    CHECK(of::conv2d(img, w).dtype() == of::kBFloat16);
    CHECK(of::bmm(a.unsqueeze(0), b.unsqueeze(0)).dtype() == of::kBFloat16);
    CHECK(of::addmm(of::randn({6, 4}), a, b).dtype() == of::kBFloat16);
    // float64 is never cast
    CHECK(of::mm(a.to(of::kFloat64), b.to(of::kFloat64)).dtype() == of::kFloat64);
    // float32 list: bfloat16 inputs go up, float32 stays
    of::Tensor h = c;  // bfloat16
    CHECK(of::softmax(h, 1).dtype() == of::kFloat32);
    CHECK(same_bits(of::softmax(h, 1), of::softmax(h.to(of::kFloat32), 1)));
    CHECK(of::log_softmax(h, 1).dtype() == of::kFloat32);
    CHECK(h.sum().dtype() == of::kFloat32);  // the dtype attr goes up too
    CHECK(same_bits(h.sum(), h.to(of::kFloat32).sum()));
    CHECK(h.exp().dtype() == of::kFloat32);
    CHECK(F::layer_norm(h, F::LayerNormFuncOptions({4})).dtype() == of::kFloat32);
    CHECK(of::softmax(a, 1).dtype() == of::kFloat32);
    // composite losses run in float32
    of::Tensor t = of::randn({6, 4}).to(of::kBFloat16);
    of::Tensor mse = F::mse_loss(h, t);
    CHECK(mse.dtype() == of::kFloat32);
    CHECK(same_bits(mse, F::mse_loss(h.to(of::kFloat32), t.to(of::kFloat32))));
    CHECK(F::cross_entropy(h, of::tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1})).dtype() ==
          of::kFloat32);
    // promote: the widest floating dtype
    CHECK(of::cat({h, a.narrow(1, 0, 4)}, 0).dtype() == of::kFloat32);
    // untouched: elementwise ops keep their dtypes (binary ops promote as always); views stay
    CHECK(h.relu().dtype() == of::kBFloat16);
    CHECK((h + a.narrow(1, 0, 4)).dtype() == of::kFloat32);
    CHECK(h.view({24}).dtype() == of::kBFloat16);
    CHECK(a.relu().dtype() == of::kFloat32);
    {
      of::autocast::Guard off(of::kCPU, std::nullopt, false);  // a float32 island
      CHECK_FALSE(of::autocast::is_cpu_enabled());
      CHECK(of::mm(a, b).dtype() == of::kFloat32);
    }
    CHECK(of::autocast::is_cpu_enabled());
    // an LSTM: projections in bfloat16, the recurrence in float32 (promote), float32 out
    of::nn::LSTM lstm(of::nn::LSTMOptions(5, 3));
    of::Tensor seq = of::randn({4, 2, 5});
    auto [lo, state] = lstm->forward(seq);
    CHECK(lo.dtype() == of::kFloat32);
    CHECK(std::get<1>(state).dtype() == of::kFloat32);
    // out= / in-place calls are never cast
    of::Tensor o = of::empty({6, 4});
    of::mm_out(o, a, b);
    CHECK(same_bits(o, mm32));
  }
  CHECK_FALSE(of::autocast::is_cpu_enabled());
  CHECK(of::mm(a, b).dtype() == of::kFloat32);
}

TEST_CASE(
    "autocast: its casts are differentiable ops; gradients come back in the parameters' dtype") {
  of::manual_seed(2);
  const of::Tensor x = of::randn({8, 5}), target = of::randn({8, 3});
  of::Tensor w1 = of::randn({5, 6}).requires_grad_(true);
  of::Tensor w2 = of::randn({6, 3}).requires_grad_(true);
  auto grads = [&](int mode) {  // 0: autocast, 1: the same casts by hand, 2: float64
    w1.mutable_grad() = of::Tensor();
    w2.mutable_grad() = of::Tensor();
    of::Tensor loss;
    if (mode == 0) {
      of::autocast::Guard amp(of::kCPU);
      loss = F::mse_loss(of::mm(of::mm(x, w1).tanh(), w2), target);
      CHECK(loss.dtype() == of::kFloat32);
      loss.backward();  // inside the region: backward itself runs with autocast off
    } else if (mode == 1) {
      const auto bf = of::kBFloat16;
      of::Tensor h = of::mm(x.to(bf), w1.to(bf)).tanh();
      loss = F::mse_loss(of::mm(h, w2.to(bf)).to(of::kFloat32), target);
      loss.backward();
    } else {
      const auto d = of::kFloat64;
      loss = F::mse_loss(of::mm(of::mm(x.to(d), w1.to(d)).tanh(), w2.to(d)), target.to(d));
      loss.backward();
    }
    return std::make_pair(w1.grad().clone(), w2.grad().clone());
  };
  auto [a1, a2] = grads(0);
  auto [m1, m2] = grads(1);
  auto [d1, d2] = grads(2);
  CHECK(a1.dtype() == of::kFloat32);
  CHECK(a2.dtype() == of::kFloat32);
  CHECK(same_bits(a1, m1));
  CHECK(same_bits(a2, m2));
  // bfloat16 has 8 significant bits: within a few percent of the float64 gradient
  const double s1 = d1.abs().max().item<double>(), s2 = d2.abs().max().item<double>();
  CHECK(max_abs_diff(a1, d1) < 0.05 * s1);
  CHECK(max_abs_diff(a2, d2) < 0.05 * s2);
  CHECK(max_abs_diff(a1, d1) > 0);  // it did run in bfloat16
}

namespace {
bool g_autocast_seen_in_backward = true;
struct AutocastProbe : of::autograd::Function<AutocastProbe> {
  static of::Tensor forward(of::autograd::AutogradContext*, of::Tensor x) { return x * 2; }
  static of::autograd::variable_list backward(of::autograd::AutogradContext*,
                                              of::autograd::variable_list g) {
    g_autocast_seen_in_backward = of::autocast::is_cpu_enabled();
    return {g[0] * 2};
  }
};
}  // namespace

TEST_CASE("autocast: backward runs with autocast off and restores it; bad dtypes are refused") {
  of::Tensor x = of::randn({3}).requires_grad_(true);
  {
    of::autocast::Guard amp(of::kCPU);
    AutocastProbe::apply(x).sum().backward();
    CHECK_FALSE(g_autocast_seen_in_backward);
    CHECK(of::autocast::is_cpu_enabled());
  }
  CHECK_THROWS_WITH_AS(of::autocast::set_autocast_cpu_dtype(of::kFloat16),
                       doctest::Contains("must be bfloat16, got float16"), of::Error);
  CHECK_THROWS_WITH_AS(of::autocast::set_autocast_gpu_dtype(of::kFloat32),
                       doctest::Contains("float16 or bfloat16, got float32"), of::Error);
  CHECK_THROWS_AS(of::autocast::Guard(of::kCPU, of::kFloat32), of::Error);
  CHECK_FALSE(of::autocast::is_cpu_enabled());  // the refused guard changed nothing
  CHECK(of::autocast::get_autocast_cpu_dtype() == of::kBFloat16);
  {
    of::autocast::Guard amp(of::kCUDA, of::kBFloat16);  // state only: no CUDA tensor here
    CHECK(of::autocast::is_enabled());
    CHECK(of::autocast::get_autocast_gpu_dtype() == of::kBFloat16);
    CHECK(of::mm(of::randn({2, 2}), of::randn({2, 2})).dtype() == of::kFloat32);  // CPU tensors
  }
  CHECK_FALSE(of::autocast::is_enabled());
  CHECK(of::autocast::get_autocast_gpu_dtype() == of::kFloat16);
}

TEST_CASE("autocast: a traced function keys on the autocast state and replays its casts bitwise") {
  of::manual_seed(3);
  of::Tensor w = of::randn({5, 4}).requires_grad_(true);
  const of::Tensor x = of::randn({6, 5});
  auto fn = [&](const of::Tensor& in) {
    of::Tensor loss = F::log_softmax(of::mm(in, w).relu(), 1).sum();
    loss.backward();
    return loss;
  };
  auto eager = [&](bool amp) {
    w.mutable_grad() = of::Tensor();
    std::optional<of::autocast::Guard> g;
    if (amp) g.emplace(of::kCPU);
    of::Tensor l = fn(x).detach();
    return std::make_pair(l, w.grad().clone());
  };
  const auto plain = eager(false), mixed = eager(true);
  CHECK_FALSE(same_bits(plain.first, mixed.first));
  auto traced = of::jit::trace(fn);
  for (int i = 0; i < 3; ++i) {
    for (bool amp : {false, true}) {
      INFO("call ", i, " autocast ", amp);
      w.mutable_grad() = of::Tensor();
      std::optional<of::autocast::Guard> g;
      if (amp) g.emplace(of::kCPU);
      of::Tensor l = traced(x);
      const auto& want = amp ? mixed : plain;
      CHECK(same_bits(l, want.first));
      CHECK(same_bits(w.grad(), want.second));
    }
  }
  CHECK(traced.stats().recordings == 2);
  CHECK(traced.stats().replays == 4);
  auto strict = of::jit::trace(fn, of::jit::TraceOptions().strict(true));
  strict(x);
  of::autocast::Guard amp(of::kCPU);
  CHECK_THROWS_WITH_AS(strict(x), doctest::Contains("autocast changed (cpu off bfloat16 -> on"),
                       of::Error);
}

namespace {

struct ScaledRun {
  std::vector<of::Tensor> params;   // after the last step
  std::vector<double> scales;       // after each step
  std::vector<int64_t> adam_steps;  // the first parameter's step count after the last step
};

// A small MLP trained with a loss scaler; the inputs of the steps in `overflow` hold an inf, so
// their gradients are inf/NaN. scaler: false trains without one and skips those steps by hand.
ScaledRun train_scaled(bool scaler_on, bool traced, const std::vector<int>& overflow, bool adam,
                       int steps = 10) {
  of::manual_seed(7);
  of::nn::Sequential net(of::nn::Linear(4, 8), of::nn::Tanh(), of::nn::Linear(8, 1));
  std::unique_ptr<of::optim::Optimizer> opt;
  if (adam)
    opt = std::make_unique<of::optim::Adam>(net->parameters(), of::optim::AdamOptions(1e-2));
  else
    opt = std::make_unique<of::optim::SGD>(
        net->parameters(), of::optim::SGDOptions(0.05).momentum(0.9).dampening(0.1));
  of::amp::GradScaler scaler(of::amp::GradScalerOptions().init_scale(1024).growth_interval(3));
  const of::Tensor x = of::randn({16, 4}), y = of::randn({16, 1});
  of::Tensor bad = x.clone();
  bad.select(0, 3).select(0, 1).fill_(std::numeric_limits<float>::infinity());
  auto step = [&](const of::Tensor& in, const of::Tensor& tgt) {
    opt->zero_grad();
    of::Tensor loss = F::mse_loss(net->forward(in), tgt);
    if (scaler_on) {
      scaler.scale(loss).backward();
      scaler.step(*opt);
      scaler.update();
    } else {
      loss.backward();
    }
    return loss;
  };
  auto tstep = of::jit::trace(step);
  ScaledRun r;
  for (int s = 0; s < steps; ++s) {
    const bool ovf = std::find(overflow.begin(), overflow.end(), s) != overflow.end();
    const of::Tensor& in = ovf ? bad : x;
    if (traced) tstep(in, y);
    else step(in, y);
    if (!scaler_on && !ovf) opt->step();
    r.scales.push_back(scaler.get_scale());
  }
  if (traced) CHECK(tstep.stats().replays >= size_t(steps - 4));
  for (const auto& p : net->parameters()) r.params.push_back(p.detach().clone());
  auto sd = opt->state_dict();
  if (const of::Tensor* st = sd.find("state.0.step")) r.adam_steps.push_back(st->item<int64_t>());
  return r;
}

}  // namespace

TEST_CASE(
    "GradScaler: skips exactly the overflowing steps, eagerly and traced; the scale schedule") {
  for (bool adam : {true, false}) {
    for (const std::vector<int>& overflow : {std::vector<int>{1, 5, 6}, std::vector<int>{0, 3}}) {
      INFO((adam ? "Adam" : "SGD with momentum"), ", overflow at ", overflow[0], ",", overflow[1]);
      const ScaledRun ref = train_scaled(false, false, overflow, adam);
      const ScaledRun eager = train_scaled(true, false, overflow, adam);
      const ScaledRun traced = train_scaled(true, true, overflow, adam);
      REQUIRE(ref.params.size() == eager.params.size());
      for (size_t i = 0; i < ref.params.size(); ++i) {
        INFO("parameter ", i);
        // a power-of-two scale divides out exactly: the same bits as never scaling
        CHECK(same_bits(eager.params[i], ref.params[i]));
        CHECK(same_bits(traced.params[i], ref.params[i]));
      }
      CHECK(eager.adam_steps == ref.adam_steps);
      CHECK(traced.adam_steps == ref.adam_steps);
      if (adam) CHECK(ref.adam_steps == std::vector<int64_t>{int64_t(10 - overflow.size())});
      CHECK(traced.scales == eager.scales);
      if (overflow.size() == 3) {
        // growth every 3 clean steps (x2), backoff on overflow (x0.5)
        CHECK(eager.scales ==
              std::vector<double>{1024, 512, 512, 512, 1024, 512, 256, 256, 256, 512});
      } else {
        CHECK(eager.scales ==
              std::vector<double>{512, 512, 512, 256, 256, 256, 512, 512, 512, 1024});
      }
    }
  }
}

TEST_CASE("GradScaler: unscale_ before clipping, disabled scaler, state dict, bad use") {
  of::manual_seed(8);
  of::Tensor w = of::randn({5}).requires_grad_(true);
  of::optim::SGD opt({w}, of::optim::SGDOptions(0.1));
  of::amp::GradScaler scaler(of::amp::GradScalerOptions().init_scale(256));
  const of::Tensor x = of::randn({5});
  (w * x).sum().backward();
  const of::Tensor plain = w.grad().clone();
  w.mutable_grad() = of::Tensor();
  of::Tensor scaled = scaler.scale((w * x).sum());
  CHECK(scaled.item<float>() == doctest::Approx((w * x).sum().item<float>() * 256));
  scaled.backward();
  scaler.unscale_(opt);
  CHECK(same_bits(w.grad(), plain));
  of::nn::utils::clip_grad_norm_({w}, 0.5);
  CHECK_THROWS_WITH_AS(scaler.unscale_(opt), doctest::Contains("already been called"), of::Error);
  const of::Tensor before = w.detach().clone();
  scaler.step(opt);  // no second unscale
  CHECK(same_bits(w.detach(), before - w.grad() * 0.1f));
  CHECK_THROWS_WITH_AS(scaler.step(opt), doctest::Contains("already been called"), of::Error);
  scaler.update();
  CHECK(scaler.get_scale() == 256);
  CHECK(scaler.get_growth_tracker() == 1);
  CHECK_THROWS_WITH_AS(scaler.update(), doctest::Contains("no inf checks"), of::Error);
  CHECK_THROWS_WITH_AS(scaler.step(opt, [&] { return (w * x).sum(); }),
                       doctest::Contains("closure"), of::Error);
  // state dict round trip
  auto sd = scaler.state_dict();
  of::amp::GradScaler other;
  other.load_state_dict(sd);
  CHECK(other.get_scale() == 256);
  CHECK(other.get_growth_tracker() == 1);
  of::OrderedDict<std::string, of::Tensor> partial;
  partial.insert("scale", of::full({}, 8.0));
  CHECK_THROWS_WITH_AS(other.load_state_dict(partial),
                       doctest::Contains("'growth_factor' is missing"), of::Error);
  CHECK(other.get_scale() == 256);  // unchanged
  sd["growth_factor"] = of::full({}, 0.5, of::kFloat64);
  CHECK_THROWS_WITH_AS(other.load_state_dict(sd),
                       doctest::Contains("growth_factor must be above 1"), of::Error);
  // bad options
  using O = of::amp::GradScalerOptions;
  CHECK_THROWS_AS(of::amp::GradScaler(O().init_scale(0)), of::Error);
  CHECK_THROWS_AS(of::amp::GradScaler(O().growth_factor(1)), of::Error);
  CHECK_THROWS_AS(of::amp::GradScaler(O().backoff_factor(1)), of::Error);
  CHECK_THROWS_AS(of::amp::GradScaler(O().growth_interval(0)), of::Error);
  CHECK_THROWS_WITH_AS(scaler.update(-1.0), doctest::Contains("positive and finite"), of::Error);
  // a host read of the scale inside a traced function is refused, as every host read is
  auto bad = of::jit::trace([&](const of::Tensor& t) { return t * scaler.get_scale(); });
  CHECK_THROWS_WITH_AS(bad(x), doctest::Contains("reads tensor data on the host"), of::Error);
  // disabled: the identity and a plain optimizer step
  of::amp::GradScaler off(O().enabled(false));
  of::Tensor l = (w * x).sum();
  CHECK(off.scale(l).is_same(l));
  CHECK(off.get_scale() == 1.0);
  w.mutable_grad() = of::Tensor();
  l.backward();
  const of::Tensor b2 = w.detach().clone();
  off.step(opt);
  CHECK(same_bits(w.detach(), b2 - w.grad() * 0.1f));
  off.update();
  CHECK(off.state_dict().size() == 0);
}

namespace {

struct CnnImpl : of::nn::Module {
  CnnImpl() {
    namespace nn = of::nn;
    features = register_module("features",
                               nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)),
                                              nn::BatchNorm2d(32), nn::ReLU(), nn::MaxPool2d(2),
                                              nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)),
                                              nn::BatchNorm2d(64), nn::ReLU(), nn::MaxPool2d(2)));
    classifier = register_module(
        "classifier", nn::Sequential(nn::Flatten(), nn::Linear(64 * 7 * 7, 128), nn::ReLU(),
                                     nn::Dropout(0.25), nn::Linear(128, 10)));
  }
  of::Tensor forward(const of::Tensor& x) { return classifier->forward(features->forward(x)); }
  of::nn::Sequential features{nullptr}, classifier{nullptr};
};
OF_MODULE(Cnn);

// The Fashion-MNIST CNN of examples/fashion_mnist (BatchNorm, Dropout, Adam, StepLR) trained
// on the first `n_train` training images for one epoch, then scored on the whole test set.
// amp: autocast in bfloat16 and a GradScaler, the step traced (forward, scaled backward,
// unscale, clipping, the scaler's step and update replayed as one graph).
double cnn_accuracy(bool amp, int64_t n_train) {
  of::manual_seed(0);
  const of::data::FashionMNIST train(of::data::kFashionMnistDir, of::data::MNIST::Mode::kTrain);
  const of::data::FashionMNIST test(of::data::kFashionMnistDir, of::data::MNIST::Mode::kTest);
  const double mean = train.data().mean().item<float>();
  const double stdev = train.data().std().item<float>();
  const of::Tensor xs = (train.data().narrow(0, 0, n_train) - mean) / stdev;
  const of::Tensor ys = train.targets().narrow(0, 0, n_train);
  Cnn net;
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(2e-3));
  of::optim::StepLR sched(opt, 40, 0.5);
  of::amp::GradScaler scaler;
  auto step = [&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    if (!amp) {
      of::Tensor loss = F::cross_entropy(net->forward(x), y);
      loss.backward();
      opt.step();
      return loss;
    }
    of::Tensor loss;
    {
      of::autocast::Guard autocast(of::kCPU);
      loss = F::cross_entropy(net->forward(x), y);
    }
    scaler.scale(loss).backward();
    scaler.unscale_(opt);
    of::nn::utils::clip_grad_norm_(net->parameters(), 10.0);
    scaler.step(opt);
    scaler.update();
    return loss;
  };
  auto traced = of::jit::trace(step);
  const int64_t batch = 100;
  for (int64_t s = 0; s * batch < n_train; ++s) {
    const of::Tensor x = xs.narrow(0, s * batch, batch), y = ys.narrow(0, s * batch, batch);
    if (amp) traced(x, y);
    else step(x, y);
    sched.step();
  }
  if (amp) CHECK(traced.stats().replays >= size_t(n_train / batch - 3));
  of::NoGradGuard no_grad;
  net->eval();
  std::optional<of::autocast::Guard> autocast;
  if (amp) autocast.emplace(of::kCPU);
  int64_t correct = 0;
  const of::Tensor tx = (test.data() - mean) / stdev;
  for (int64_t s = 0; s < tx.size(0); s += 1000) {
    of::Tensor logits = net->forward(tx.narrow(0, s, 1000));
    if (amp) CHECK(logits.dtype() == of::kBFloat16);
    correct += logits.argmax(1).eq(test.targets().narrow(0, s, 1000)).sum().item<int64_t>();
  }
  return double(correct) / double(tx.size(0));
}

}  // namespace

TEST_CASE("autocast: the Fashion-MNIST CNN trained in bfloat16 reaches float32's accuracy") {
  const int64_t n = 12000;
  const double fp32 = cnn_accuracy(false, n), bf16 = cnn_accuracy(true, n);
  MESSAGE("test accuracy after one epoch on ", n, " images: float32 ", fp32, ", bfloat16 autocast ",
          bf16);
  CHECK(fp32 > 0.75);
  // reaches: at most half a point below float32 (above it is fine: bfloat16 rounding shifts a
  // one-epoch run either way; 0.8313 against 0.8263 on one build)
  CHECK(bf16 >= fp32 - 0.005);
  CHECK(bf16 <= fp32 + 0.02);
}

TEST_CASE("reduced-precision fallback: float32-only nn ops on bfloat16 run between two casts") {
  of::manual_seed(4);
  const auto bf = of::kBFloat16;
  using Fn = std::function<of::Tensor(const std::vector<of::Tensor>&)>;
  struct Case {
    const char* name;
    std::vector<std::vector<int64_t>> shapes;
    Fn fn;
  };
  const std::vector<Case> cases = {
      {"linear", {{4, 6}, {3, 6}, {3}}, [](auto& v) { return F::linear(v[0], v[1], v[2]); }},
      {"conv2d",
       {{2, 3, 6, 6}, {4, 3, 3, 3}},
       [](auto& v) { return of::conv2d(v[0], v[1], {}, 1, 1); }},
      {"layer_norm",
       {{4, 6}},
       [](auto& v) { return F::layer_norm(v[0], F::LayerNormFuncOptions({6})); }},
      {"max_pool2d",
       {{2, 3, 6, 6}},
       [](auto& v) { return F::max_pool2d(v[0], F::MaxPool2dFuncOptions(2)); }},
      {"avg_pool2d",
       {{2, 3, 6, 6}},
       [](auto& v) { return F::avg_pool2d(v[0], F::AvgPool2dFuncOptions(2)); }},
      {"cross_entropy",
       {{5, 4}},
       [](auto& v) {
         return F::cross_entropy(v[0], of::tensor(std::vector<int64_t>{0, 3, 1, 2, 1}));
       }},
      {"scaled_dot_product_attention",
       {{2, 5, 8}, {2, 5, 8}, {2, 5, 8}},
       [](auto& v) { return F::scaled_dot_product_attention(v[0], v[1], v[2]); }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    std::vector<of::Tensor> a, b;
    for (auto& s : c.shapes) {
      of::Tensor x = of::randn(s).to(bf);
      a.push_back(x.clone().requires_grad_(true));
      b.push_back(x.clone().requires_grad_(true));
    }
    of::Tensor ya = c.fn(a);
    std::vector<of::Tensor> wide;
    for (auto& t : b) wide.push_back(t.to(of::kFloat32));
    of::Tensor yb = c.fn(wide).to(bf);
    CHECK(ya.dtype() == bf);
    CHECK(same_bits(ya, yb));
    const of::Tensor g = of::randn(ya.sizes()).to(bf);
    (ya.to(of::kFloat32) * g.to(of::kFloat32)).sum().backward();
    (yb.to(of::kFloat32) * g.to(of::kFloat32)).sum().backward();
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("input ", i);
      REQUIRE(a[i].grad().defined());
      CHECK(a[i].grad().dtype() == bf);
      CHECK(same_bits(a[i].grad(), b[i].grad()));
    }
  }
  // batch_norm on a bfloat16 model: its wrapper updates the running statistics in bfloat16
  of::Tensor x = of::randn({4, 3}).to(bf);
  of::Tensor rm = of::zeros({3}, bf), rv = of::ones({3}, bf);
  of::Tensor y = F::batch_norm(x, rm, rv, F::BatchNormFuncOptions().training(true).momentum(0.5));
  CHECK(y.dtype() == bf);
  CHECK(rm.dtype() == bf);
  const of::Tensor want = (x.to(of::kFloat32).mean(0) * 0.5).to(bf);
  CHECK(max_abs_diff(rm, want) < 1e-2);
  CHECK(rm.abs().sum().item<double>() > 0);
}

TEST_CASE("autocast: rms_norm's default eps is that of the dtype the op runs in") {
  // rms_norm runs in float32 under autocast: float32's epsilon, not bfloat16's (2^-7), which
  // would visibly change rows of small variance
  of::manual_seed(12);
  const of::Tensor x = (of::randn({4, 16}) * 0.01).to(of::kBFloat16);
  const of::Tensor w = of::randn({16});
  of::Tensor amp;
  {
    of::autocast::Guard autocast(of::kCPU);
    amp = of::rms_norm(x, {16}, w);
  }
  const of::Tensor ref =
      of::rms_norm(x.to(of::kFloat32), {16}, w, double(std::numeric_limits<float>::epsilon()));
  CHECK(amp.dtype() == of::kFloat32);
  CHECK(same_bits(amp, ref));
  // without autocast a bfloat16 input keeps bfloat16's epsilon
  CHECK(same_bits(of::rms_norm(x, {16}, w.to(of::kBFloat16)),
                  of::rms_norm(x, {16}, w.to(of::kBFloat16), 0.0078125)));
}

TEST_CASE("autocast: linear and conv take a 16-bit activation beside float32 weights, once") {
  // their wrappers no longer check dtypes (their metas do, after autocast's casts); without
  // autocast the same call is refused by the meta, not widened into agreement
  of::manual_seed(13);
  const of::Tensor x = of::randn({2, 3, 6, 6}).to(of::kBFloat16), w = of::randn({4, 3, 3, 3});
  const of::Tensor a = of::randn({5, 8}).to(of::kBFloat16), lw = of::randn({3, 8});
  {
    of::autocast::Guard autocast(of::kCPU, of::kBFloat16);
    const of::Tensor y = of::conv2d(x, w);
    CHECK(y.dtype() == of::kBFloat16);
    CHECK(same_bits(y, of::conv2d(x, w.to(of::kBFloat16))));
    const of::Tensor z = of::linear(a, lw);
    CHECK(z.dtype() == of::kBFloat16);
    CHECK(same_bits(z, of::linear(a, lw.to(of::kBFloat16))));
  }
  CHECK(th::throws_with([&] { of::conv2d(x, w); }, {"[conv2d]", "must have the same dtype"}));
  CHECK(th::throws_with([&] { of::linear(a, lw); }, {"[linear]", "dtype"}));
}

TEST_CASE("autocast: batch_norm runs once in float32 and updates float32 running statistics") {
  of::manual_seed(14);
  const of::Tensor x = of::randn({4, 3, 5}).to(of::kBFloat16);
  const of::Tensor w = of::randn({3}), b = of::randn({3});
  of::Tensor rm = of::zeros({3}), rv = of::ones({3});
  of::Tensor rm2 = of::zeros({3}), rv2 = of::ones({3});
  of::Tensor y;
  {
    of::autocast::Guard autocast(of::kCPU, of::kBFloat16);
    y = of::batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  }
  const of::Tensor ref = of::batch_norm(x.to(of::kFloat32), w, b, rm2, rv2, true, 0.1, 1e-5);
  CHECK(y.dtype() == of::kFloat32);
  CHECK(same_bits(y, ref));
  CHECK(same_bits(rm, rm2));
  CHECK(same_bits(rv, rv2));
}

TEST_CASE("autocast: attention takes bfloat16 q/k/v beside a float32 additive mask, once") {
  of::manual_seed(15);
  const of::Tensor q = of::randn({2, 4, 8}).to(of::kBFloat16),
                   k = of::randn({2, 5, 8}).to(of::kBFloat16),
                   v = of::randn({2, 5, 8}).to(of::kBFloat16), m = of::randn({2, 4, 5});
  {
    of::autocast::Guard autocast(of::kCPU, of::kBFloat16);
    const of::Tensor y = of::scaled_dot_product_attention(q, k, v, m);
    CHECK(y.dtype() == of::kBFloat16);
    CHECK(same_bits(y, of::scaled_dot_product_attention(q, k, v, m.to(of::kBFloat16))));
  }
  CHECK(th::throws_with(
      [&] { of::scaled_dot_product_attention(q, k, v, m); },
      {"[scaled_dot_product_attention]", "additive attn_mask", "bfloat16", "float32"}));
  CHECK(th::throws_with([&] { of::scaled_dot_product_attention(q, k.to(of::kFloat32), v); },
                        {"[scaled_dot_product_attention]", "key", "float32"}));
}

// gpu_mlp: an MLP (LayerNorm, GELU, dropout, AdamW) trained on Fashion-MNIST on the GPU, one
// epoch eagerly and one epoch traced (of::jit::trace: the step replays as one CUDA Graph),
// printing the step times (the traced epoch's after its first three calls, which record, compile
// and capture, timed apart) and the test accuracy. Without a CUDA device it says why and exits.
// Usage: gpu_mlp [batch] [data_dir]
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace nn = of::nn;

struct MlpImpl : nn::Module {
  MlpImpl() {
    net = register_module("net", nn::Sequential(nn::Flatten(), nn::Linear(784, 512),
                                                nn::LayerNorm(nn::LayerNormOptions({512})),
                                                nn::GELU(), nn::Dropout(0.1), nn::Linear(512, 256),
                                                nn::GELU(), nn::Linear(256, 10)));
  }
  of::Tensor forward(const of::Tensor& x) { return net(x); }
  nn::Sequential net{nullptr};
};
OF_MODULE(Mlp);

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::stoll(argv[1]) : 256;
  const std::string dir = argc > 2 ? argv[2] : of::data::kFashionMnistDir;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!of::cuda::is_available()) {
    std::printf(
        "gpu_mlp: no CUDA device here (or oneflow was built without CUDA); nothing to run\n");
    return 0;
  }
  const of::Device gpu("cuda:0");
  of::manual_seed(0);
  // the whole dataset on the device, normalized once (a synthetic stand-in when Debian's
  // dataset-fashion-mnist is not installed: labels of a random linear teacher)
  of::Tensor xtr, ytr, xte, yte;
  try {
    of::data::FashionMNIST train(dir, of::data::MNIST::Mode::kTrain);
    of::data::FashionMNIST test(dir, of::data::MNIST::Mode::kTest);
    const of::Tensor mean = train.data().mean(), stdev = train.data().std();
    xtr = ((train.data() - mean) / stdev).to(gpu), ytr = train.targets().to(gpu);
    xte = ((test.data() - mean) / stdev).to(gpu), yte = test.targets().to(gpu);
    std::printf("Fashion-MNIST from %s\n", dir.c_str());
  } catch (const of::Error& e) {
    std::printf("no Fashion-MNIST (%s): synthetic 28x28 images instead\n", e.what());
    const of::Tensor teacher = of::randn({784, 10});
    xtr = of::randn({60000, 1, 28, 28}), xte = of::randn({10000, 1, 28, 28});
    ytr = xtr.flatten(1).matmul(teacher).argmax(1).to(gpu);
    yte = xte.flatten(1).matmul(teacher).argmax(1).to(gpu);
    xtr = xtr.to(gpu), xte = xte.to(gpu);
  }

  Mlp model;
  model->to(gpu);
  of::optim::AdamW opt(model->parameters(), of::optim::AdamWOptions(1e-3));
  auto body = [&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    of::Tensor loss = of::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  auto traced = of::jit::trace(body);
  // the traced step's first three calls record it, compile it (NVRTC builds the fused
  // kernels) and capture the CUDA Graph: timed apart, so the epoch's figure is the replay's
  auto first_calls = [&] {
    of::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < 3; ++i)
      traced(xtr.narrow(0, i * batch, batch), ytr.narrow(0, i * batch, batch));
    of::cuda::synchronize();
    std::printf(
        "traced: first 3 calls (record, compile, capture) %.1f ms\n",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  };
  auto epoch = [&](bool use_trace) {
    const int64_t n = xtr.size(0) / batch;  // whole batches: one signature
    of::Tensor loss;
    if (use_trace) first_calls();
    of::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) {
      const of::Tensor x = xtr.narrow(0, i * batch, batch), y = ytr.narrow(0, i * batch, batch);
      loss = use_trace ? traced(x, y) : body(x, y);
    }
    of::cuda::synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    of::NoGradGuard ng;
    model->eval();
    const double acc = model(xte).argmax(1).eq(yte).to(of::kFloat64).mean().item<double>();
    model->train();
    std::printf("%-8s epoch: %.3f ms/step, last loss %.4f, test accuracy %.4f\n",
                use_trace ? "traced" : "eager", ms / double(n), loss.item<float>(), acc);
    return ms / double(n);
  };
  const double eager_ms = epoch(false);
  const double traced_ms = epoch(true);
  std::printf("replay: %s; %.2fx the eager step's speed\n", traced.stats().replay_mode.c_str(),
              eager_ms / traced_ms);
  return 0;
}

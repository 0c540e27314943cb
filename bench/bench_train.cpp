// Training-step workloads of issue 3 beside libtorch 1.13: an MLP (784-1024-1024-10, ReLU,
// batch 128, cross-entropy, SGD with momentum) and a small CNN (conv3x3 3->32 + BN + ReLU,
// conv3x3 32->64 stride 2 + BN + ReLU, global average pool, linear 64->10, batch 32x3x32x32).
// Each (workload, library) runs as its own program (NOTE [Bench side process] in bench_util.h):
// oneflow's side is bench_train_ours (this file built without libtorch, so its process maps no
// libtorch library), libtorch's side is this binary re-run with --child; each reports its own
// peak resident memory (VmHWM). The step time is the median of timed steps.
#include <oneflow/oneflow.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <thread>

#include "bench_util.h"

#ifdef OF_BENCH_WITH_LIBTORCH
#include <torch/torch.h>
#endif

namespace ob = oneflow::bench;
namespace nn = of::nn;

namespace {

constexpr int kWarmup = 3, kSteps = 15;

// ---------------------------------------------------------------- oneflow models

struct MlpImpl : nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", nn::Linear(784, 1024));
    fc2 = register_module("fc2", nn::Linear(1024, 1024));
    fc3 = register_module("fc3", nn::Linear(1024, 10));
  }
  of::Tensor forward(const of::Tensor& x) { return fc3(fc2(fc1(x).relu()).relu()); }
  nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
OF_MODULE(Mlp);

struct CnnImpl : nn::Module {
  CnnImpl() {
    c1 = register_module("c1", nn::Conv2d(nn::Conv2dOptions(3, 32, 3).padding(1)));
    b1 = register_module("b1", nn::BatchNorm2d(32));
    c2 = register_module("c2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3).stride(2).padding(1)));
    b2 = register_module("b2", nn::BatchNorm2d(64));
    fc = register_module("fc", nn::Linear(64, 10));
  }
  of::Tensor forward(const of::Tensor& x) {
    of::Tensor h = b2(c2(b1(c1(x)).relu())).relu();
    return fc(of::adaptive_avg_pool2d(h, {1, 1}).flatten(1));
  }
  nn::Conv2d c1{nullptr}, c2{nullptr};
  nn::BatchNorm2d b1{nullptr}, b2{nullptr};
  nn::Linear fc{nullptr};
};
OF_MODULE(Cnn);

template <class Net> double ours_step_time(const std::vector<int64_t>& in_shape) {
  of::manual_seed(0);
  Net net;
  of::optim::SGD opt(net->parameters(), of::optim::SGDOptions(0.01).momentum(0.9));
  of::Tensor x = of::randn(in_shape);
  of::Tensor y = of::randint(0, 10, {in_shape[0]}, of::kInt64);
  auto step = [&] {
    opt.zero_grad();
    of::Tensor loss = of::cross_entropy(net(x), y);
    loss.backward();
    opt.step();
    ob::keep(loss.item<float>());
  };
  return ob::median_time(step, kWarmup, kSteps, 1.0, kSteps);
}

// GPT block stack: 2 causal TransformerEncoderLayers (d_model 256, 4 heads, ff 1024, no
// dropout) on [seq 128, batch 8, 256]; forward + backward of mean(y^2).
constexpr int64_t kSeq = 128, kBatch = 8, kModel = 256;

double ours_gpt_time() {
  of::manual_seed(0);
  std::vector<nn::TransformerEncoderLayer> layers;
  for (int i = 0; i < 2; ++i)
    layers.emplace_back(
        nn::TransformerEncoderLayerOptions(kModel, 4).dim_feedforward(1024).dropout(0.0));
  of::Tensor x = of::randn({kSeq, kBatch, kModel}).requires_grad_(true);
  of::Tensor mask =
      of::zeros({kSeq, kSeq}).masked_fill(of::ones({kSeq, kSeq}, of::kBool).triu(1), -INFINITY);
  auto step = [&] {
    of::Tensor h = x;
    for (auto& l : layers) h = l(h, mask);
    of::Tensor loss = h.square().mean();
    loss.backward();
    ob::keep(loss.item<float>());
    for (auto& l : layers) l->zero_grad();
    x.mutable_grad() = of::Tensor();
  };
  return ob::median_time(step, kWarmup, kSteps, 1.0, kSteps);
}

#ifdef OF_BENCH_WITH_LIBTORCH
// ---------------------------------------------------------------- libtorch models (same shapes)

double torch_gpt_time(int threads) {
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  std::vector<torch::nn::TransformerEncoderLayer> layers;
  for (int i = 0; i < 2; ++i)
    layers.emplace_back(
        torch::nn::TransformerEncoderLayerOptions(kModel, 4).dim_feedforward(1024).dropout(0.0));
  torch::Tensor x = torch::randn({kSeq, kBatch, kModel}).requires_grad_(true);
  torch::Tensor mask = torch::zeros({kSeq, kSeq})
                           .masked_fill(torch::ones({kSeq, kSeq}, torch::kBool).triu(1), -INFINITY);
  auto step = [&] {
    torch::Tensor h = x;
    for (auto& l : layers) h = l(h, mask);
    torch::Tensor loss = h.square().mean();
    loss.backward();
    ob::keep(loss.item<float>());
    for (auto& l : layers) l->zero_grad();
    x.mutable_grad() = torch::Tensor();
  };
  return ob::median_time(step, kWarmup, kSteps, 1.0, kSteps);
}

struct TMlpImpl : torch::nn::Module {
  TMlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 1024));
    fc2 = register_module("fc2", torch::nn::Linear(1024, 1024));
    fc3 = register_module("fc3", torch::nn::Linear(1024, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc3(fc2(fc1(x).relu()).relu()); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(TMlp);

struct TCnnImpl : torch::nn::Module {
  TCnnImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 32, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(32));
    c2 = register_module(
        "c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).stride(2).padding(1)));
    b2 = register_module("b2", torch::nn::BatchNorm2d(64));
    fc = register_module("fc", torch::nn::Linear(64, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = b2(c2(b1(c1(x)).relu())).relu();
    return fc(torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1));
  }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::BatchNorm2d b1{nullptr}, b2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(TCnn);

template <class Net> double torch_step_time(const std::vector<int64_t>& in_shape, int threads) {
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  Net net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::Tensor x = torch::randn(in_shape);
  torch::Tensor y = torch::randint(0, 10, {in_shape[0]}, torch::kLong);
  auto step = [&] {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net(x), y);
    loss.backward();
    opt.step();
    ob::keep(loss.item<float>());
  };
  return ob::median_time(step, kWarmup, kSteps, 1.0, kSteps);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  struct Workload {
    std::string name;
    std::vector<int64_t> shape;
    double target;
    std::function<double()> ours, torch;
  };
  std::vector<Workload> ws = {
      {"MLP 784-1024-1024-10, batch 128, SGD momentum",
       {128, 784},
       1.0,
       [] {
         return ours_step_time<Mlp>({128, 784});
       },
       {}},
      {"CNN conv-BN-ReLU x2 + GAP + linear, batch 32x3x32x32",
       {32, 3, 32, 32},
       1.2,
       [] {
         return ours_step_time<Cnn>({32, 3, 32, 32});
       },
       {}},
      {"GPT 2 causal blocks d256 h4 ff1024, seq 128 x batch 8 (fwd+bwd)",
       {},
       1.0,
       [] { return ours_gpt_time(); },
       {}},
  };
#ifdef OF_BENCH_WITH_LIBTORCH
  ws[0].torch = [threads] { return torch_step_time<TMlp>({128, 784}, threads); };
  ws[1].torch = [threads] { return torch_step_time<TCnn>({32, 3, 32, 32}, threads); };
  ws[2].torch = [threads] { return torch_gpt_time(threads); };
#endif
  // A side, run as its own program: bench_train[_ours] --child ours|torch <workload>.
  if (argc == 4 && std::string(argv[1]) == "--child") {
    const size_t k = size_t(std::atoi(argv[3]));
    if (k >= ws.size()) return 2;
    const auto& f = std::string(argv[2]) == "torch" ? ws[k].torch : ws[k].ours;
    if (!f) return 2;
    return ob::report_side(f);
  }
  // The parent starts neither library's threads; it only launches the sides.
  ob::print_machine("bench_train", threads);
  fmt::print(
      "median of {} training steps after {} warm-up steps; each side its own program "
      "(ours: bench_train_ours, linking no libtorch; peak RSS = that process's VmHWM)\n",
      kSteps, kWarmup);
  const std::string self = ob::exe_dir() + "/bench_train";
  std::string ours_exe = ob::exe_dir() + "/bench_train_ours";
  if (access(ours_exe.c_str(), X_OK) != 0) ours_exe = self;
  ob::Table time_table(
      "training step time (forward + backward + optimizer), ms; peer = libtorch "
      "1.13 same model, same thread count; ratio = ours / libtorch");
  ob::Table mem_table(
      "peak resident memory of the process running the workload, MB; peer = "
      "libtorch; ratio = ours / libtorch");
  for (size_t k = 0; k < ws.size(); ++k) {
    const Workload& w = ws[k];
    ob::Result ours = ob::in_program({ours_exe, "--child", "ours", std::to_string(k)});
    std::string peer = ob::kNoTorch, ratio = "-", verdict = "n/a (no peer)";
    std::string mpeer = ob::kNoTorch, mratio = "-", mverdict = "n/a (no peer)";
    if (ours.seconds < 0) {
      time_table.row({w.name, "failed", "-", "-", "-", "NOT met"});
      continue;
    }
    if (w.torch) {
      ob::Result t = ob::in_program({self, "--child", "torch", std::to_string(k)});
      if (t.seconds < 0) t.seconds = NAN;
      peer = fmt::format("{:.2f} ms", t.seconds * 1e3);
      ratio = ob::ratio_str(ours.seconds / t.seconds);
      verdict = ob::verdict(ours.seconds / t.seconds <= w.target);
      mpeer = fmt::format("{:.0f} MB", t.peak_mb);
      mratio = ob::ratio_str(ours.peak_mb / t.peak_mb);
      mverdict = ob::verdict(ours.peak_mb <= 0.5 * t.peak_mb);
    }
    time_table.row({w.name, fmt::format("{:.2f} ms", ours.seconds * 1e3), peer, ratio,
                    fmt::format("<= {:.1f}x", w.target), verdict});
    mem_table.row(
        {w.name, fmt::format("{:.0f} MB", ours.peak_mb), mpeer, mratio, "<= 0.5x", mverdict});
  }
  time_table.print();
  mem_table.print();
  return 0;
}

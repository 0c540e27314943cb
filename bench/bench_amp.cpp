// Mixed precision on the CPU (issue 10): one training step of the Fashion-MNIST CNN of
// examples/fashion_mnist (conv-BN-ReLU-pool x2, linear 3136-128, dropout, linear 128-10; batch
// 128 x 1 x 28 x 28; Adam) in float32 and under bfloat16 autocast, eager and traced, beside
// libtorch 1.13 doing the same (at::autocast::set_cpu_enabled). Each (case, library) runs as its
// own program (NOTE [Bench side process] in bench_util.h); the step time is the median of
// timed steps. Our bfloat16 GEMMs run on AMX-BF16 / AVX512-BF16 where the CPU has them (NOTE
// [bfloat16 GEMM]); the convolutions widen to float32 (kWidens16Bit), so the CNN's bfloat16
// step costs the casts on top of the float32 work, while a transformer's (the second model,
// ours only) is GEMM-bound; libtorch's oneDNN uses the CPU's bfloat16 instructions for both.
#include <oneflow/oneflow.h>

#include <cstdio>
#include <functional>
#include <thread>
#include <type_traits>

#include "bench_util.h"

#ifdef OF_BENCH_WITH_LIBTORCH
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#endif

namespace ob = oneflow::bench;
namespace nn = of::nn;

namespace {

constexpr int kWarmup = 3, kSteps = 15, kBatch = 128;

struct NetImpl : nn::Module {
  NetImpl() {
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
  nn::Sequential features{nullptr}, classifier{nullptr};
};
OF_MODULE(Net);

// A transformer encoder (2 layers, d_model 256, 4 heads, FFN 1024) over batch 8 x 128 tokens
// with a linear head, classifying each sequence by its mean: linear-heavy, where bfloat16
// autocast reaches the GEMMs (AMX-BF16 / AVX512-BF16 where the CPU has them), unlike the CNN's
// convolutions, which widen to float32.
constexpr int64_t kTBatch = 8, kTSeq = 128, kTModel = 256;
struct EncImpl : nn::Module {
  EncImpl() {
    for (int l = 0; l < 2; ++l)
      layers.push_back(register_module(
          "layer" + std::to_string(l),
          nn::TransformerEncoderLayer(
              nn::TransformerEncoderLayerOptions(kTModel, 4).dim_feedforward(1024).dropout(0.0))));
    head = register_module("head", nn::Linear(kTModel, 10));
  }
  of::Tensor forward(const of::Tensor& x) {
    of::Tensor h = x;
    for (auto& l : layers) h = l->forward(h);
    return head->forward(h.mean({0}));  // (sequence-first, as libtorch 1.13's layer)
  }
  std::vector<nn::TransformerEncoderLayer> layers;
  nn::Linear head{nullptr};
};
OF_MODULE(Enc);

template <class M> double ours_step_time(bool amp, bool traced) {
  of::manual_seed(0);
  M net;
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-3));
  constexpr bool cnn = std::is_same_v<M, Net>;
  const of::Tensor x = cnn ? of::randn({kBatch, 1, 28, 28}) : of::randn({kTSeq, kTBatch, kTModel});
  const of::Tensor y = of::randint(0, 10, {cnn ? int64_t(kBatch) : kTBatch}, of::kInt64);
  auto step = [&](const of::Tensor& in, const of::Tensor& tgt) {
    opt.zero_grad();
    of::Tensor loss;
    {
      of::autocast::Guard autocast(of::kCPU, std::nullopt, amp);
      loss = of::nn::functional::cross_entropy(net->forward(in), tgt);
    }
    loss.backward();
    opt.step();
    return loss;
  };
  auto tstep = of::jit::trace(step);
  return ob::median_time(
      [&] { ob::keep((traced ? tstep(x, y) : step(x, y)).template item<float>()); }, kWarmup,
      kSteps, 1.0, kSteps);
}

#ifdef OF_BENCH_WITH_LIBTORCH
struct TNetImpl : torch::nn::Module {
  TNetImpl() {
    namespace tn = torch::nn;
    features = register_module("features",
                               tn::Sequential(tn::Conv2d(tn::Conv2dOptions(1, 32, 3).padding(1)),
                                              tn::BatchNorm2d(32), tn::ReLU(), tn::MaxPool2d(2),
                                              tn::Conv2d(tn::Conv2dOptions(32, 64, 3).padding(1)),
                                              tn::BatchNorm2d(64), tn::ReLU(), tn::MaxPool2d(2)));
    classifier = register_module(
        "classifier", tn::Sequential(tn::Flatten(), tn::Linear(64 * 7 * 7, 128), tn::ReLU(),
                                     tn::Dropout(0.25), tn::Linear(128, 10)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return classifier->forward(features->forward(x));
  }
  torch::nn::Sequential features{nullptr}, classifier{nullptr};
};
TORCH_MODULE(TNet);

double torch_step_time(bool amp, int threads) {
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  TNet net;
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
  const torch::Tensor x = torch::randn({kBatch, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, 10, {kBatch}, torch::kLong);
  auto step = [&] {
    opt.zero_grad();
    torch::Tensor loss;
    {
      at::autocast::set_cpu_enabled(amp);
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      at::autocast::set_cpu_enabled(false);
      at::autocast::clear_cache();
    }
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
  struct Case {
    std::string name;
    std::function<double()> ours, torch;
  };
  std::vector<Case> cs = {
      {"float32, eager", [] { return ours_step_time<Net>(false, false); }, {}},
      {"bfloat16 autocast, eager", [] { return ours_step_time<Net>(true, false); }, {}},
      {"float32, traced (peer: libtorch eager)",
       [] { return ours_step_time<Net>(false, true); },
       {}},
      {"bfloat16 autocast, traced (peer: libtorch eager)",
       [] { return ours_step_time<Net>(true, true); },
       {}},
      // the transformer: ours only (bfloat16 against our float32)
      {"transformer float32, eager", [] { return ours_step_time<Enc>(false, false); }, {}},
      {"transformer bfloat16 autocast, eager", [] { return ours_step_time<Enc>(true, false); }, {}},
      {"transformer float32, traced", [] { return ours_step_time<Enc>(false, true); }, {}},
      {"transformer bfloat16 autocast, traced", [] { return ours_step_time<Enc>(true, true); }, {}},
  };
#ifdef OF_BENCH_WITH_LIBTORCH
  for (size_t k = 0; k < 4; ++k) {
    const bool amp = k % 2 == 1;
    cs[k].torch = [amp, threads] { return torch_step_time(amp, threads); };
  }
#endif
  if (argc == 4 && std::string(argv[1]) == "--child") {
    const size_t k = size_t(std::atoi(argv[3]));
    if (k >= cs.size()) return 2;
    const auto& f = std::string(argv[2]) == "torch" ? cs[k].torch : cs[k].ours;
    if (!f) return 2;
    return ob::report_side(f);
  }
  ob::print_machine("bench_amp", threads);
  fmt::print(
      "Fashion-MNIST CNN training step (forward + backward + Adam), batch {}; median of {} "
      "steps after {} warm-up steps; each side its own program\n",
      kBatch, kSteps, kWarmup);
  const std::string self = ob::exe_dir() + "/bench_amp";
  ob::Table table(
      "training step time, ms; peer = libtorch 1.13, same model, same thread count, "
      "same precision; ratio = ours / libtorch (the issue sets no CPU speed target "
      "for AMP; its target is accuracy, tests/test_amp.cpp)");
  std::vector<double> ours_s(cs.size(), NAN);
  for (size_t k = 0; k < cs.size(); ++k) {
    ob::Result ours = ob::in_program({self, "--child", "ours", std::to_string(k)});
    ours_s[k] = ours.seconds;
    std::string peer = ob::kNoTorch, ratio = "-";
    if (cs[k].torch) {
      ob::Result t = ob::in_program({self, "--child", "torch", std::to_string(k)});
      peer = t.seconds < 0 ? "failed" : fmt::format("{:.2f} ms", t.seconds * 1e3);
      if (t.seconds > 0 && ours.seconds > 0) ratio = ob::ratio_str(ours.seconds / t.seconds);
    }
    table.row({cs[k].name,
               ours.seconds < 0 ? "failed" : fmt::format("{:.2f} ms", ours.seconds * 1e3), peer,
               ratio, "-", "n/a"});
  }
  table.print();
  fmt::print("\nours, bfloat16 / float32 step time: eager {:.2f}x, traced {:.2f}x\n",
             ours_s[1] / ours_s[0], ours_s[3] / ours_s[2]);
  fmt::print(
      "transformer (2 encoder layers, d_model {}, batch {} x {} tokens), bfloat16 / float32 step "
      "time: eager {:.2f}x, traced {:.2f}x\n",
      kTModel, kTBatch, kTSeq, ours_s[5] / ours_s[4], ours_s[7] / ours_s[6]);
  return 0;
}

// Issue 10's model benchmarks: training throughput of ResNet-50 (DLPerf's shape: batch 128,
// 224 x 224, AMP float16, SGD momentum) and BERT-base (seq 128, batch 64, AMP float16, AdamW)
// on the GPU, eager and traced (of::jit::trace: the step replays as one CUDA Graph), beside
// PyTorch's eager steps of the same models on the same machine in the same gpu_check run
// (bench/gpu_models.py writes them to a JSON file that --torch names). Targets: ResNet-50 and
// BERT >= 1.0x PyTorch eager. Models: bench/gpu_models.h.
// Usage: bench_gpu_models [--torch FILE] [--cpu-smoke] [resnet] [bert]
//   --cpu-smoke: tiny versions on the CPU (bfloat16 autocast), one eager and two traced steps
//   each: the models and steps run where no GPU is (they are also a test:
//   tests/test_gpu_models.cpp).
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "bench_util.h"
#include "gpu_models.h"

namespace ob = oneflow::bench;

namespace {

void sync(const of::Device& d) {
  if (d.is_cuda()) of::cuda::synchronize();
}

// Seconds per step: `warm` steps, then `n` timed with the device synchronized around them.
template <class F> double seconds_per_step(const of::Device& d, int warm, int n, F&& f) {
  for (int i = 0; i < warm; ++i) f();
  sync(d);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  sync(d);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
}

// {"resnet50_images_per_s": 1234.5, ...} as gpu_models.py writes it (flat, numbers only).
std::map<std::string, double> read_torch(const std::string& path) {
  std::map<std::string, double> r;
  std::ifstream in(path);
  if (!in) return r;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  size_t pos = 0;
  while ((pos = s.find('"', pos)) != std::string::npos) {
    const size_t end = s.find('"', pos + 1);
    if (end == std::string::npos) break;
    const std::string key = s.substr(pos + 1, end - pos - 1);
    const size_t colon = s.find(':', end);
    if (colon == std::string::npos) break;
    r[key] = std::strtod(s.c_str() + colon + 1, nullptr);
    pos = s.find_first_of(",}", colon);
    if (pos == std::string::npos) break;
  }
  return r;
}

struct Result {
  double eager = 0, replay = 0;  // seconds per step
  std::string mode;
};

template <class Model, class Opt>
Result run(Model& model, Opt& opt, const of::Device& dev, of::ScalarType amp, const of::Tensor& x,
           const of::Tensor& y, int warm, int n) {
  of::amp::GradScaler scaler;
  auto body = [&](const of::Tensor& xx, const of::Tensor& yy) {
    return ob::train_step(model, opt, scaler, dev.type(), amp, xx, yy);
  };
  Result r;
  r.eager = seconds_per_step(dev, warm, n, [&] { body(x, y); });
  std::printf("  eager: %.2f ms per step\n", 1e3 * r.eager);  // as measured: a timeout keeps it
  if (std::getenv("OF_CUDA_PROFILE_OPS")) return r;           // a profile of the eager steps only
  auto step = of::jit::trace(body);
  r.replay = seconds_per_step(dev, warm, n, [&] { step(x, y); });
  std::printf("  replay: %.2f ms per step\n", 1e3 * r.replay);
  r.mode = step.stats().replay_mode;
  const of::Tensor le = body(x, y), lt = step(x, y);
  std::printf("  losses: eager %.4f, traced %.4f; replay: %s, %zu fused groups\n",
              le.template item<double>(), lt.template item<double>(), r.mode.c_str(),
              size_t(step.stats().fused_groups));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  std::string torch_file;
  bool want_resnet = false, want_bert = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cpu-smoke")) smoke = true;
    else if (!std::strcmp(argv[i], "--torch") && i + 1 < argc) torch_file = argv[++i];
    else if (!std::strcmp(argv[i], "resnet")) want_resnet = true;
    else if (!std::strcmp(argv[i], "bert")) want_bert = true;
  }
  if (!want_resnet && !want_bert) want_resnet = want_bert = true;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach the log even if a deadline kills it
  if (!smoke && !of::cuda::is_available()) {
    std::printf(
        "bench_gpu_models: no CUDA device: skipped (--cpu-smoke runs tiny models on the "
        "CPU)\n");
    return 0;
  }
  const of::Device dev = smoke ? of::Device("cpu") : of::Device("cuda:0");
  const of::ScalarType amp = smoke ? of::kBFloat16 : of::kFloat16;
  const bool profiling = std::getenv("OF_CUDA_PROFILE_OPS") != nullptr;
  const int warm = smoke || profiling ? 1 : 3, n = smoke ? 1 : profiling ? 2 : 5;
  const std::map<std::string, double> torch = read_torch(torch_file);
  auto peer = [&](const char* key) -> std::string {
    auto it = torch.find(key);
    return it == torch.end() ? std::string("pytorch: not measured")
                             : fmt::format("{:.1f}", it->second);
  };
  auto ratio = [&](const char* key, double ours) -> std::string {
    auto it = torch.find(key);
    return it == torch.end() || it->second <= 0 ? "-" : fmt::format("{:.2f}x", ours / it->second);
  };
  auto verdict = [&](const char* key, double ours) -> std::string {
    auto it = torch.find(key);
    return it == torch.end() ? "-" : ob::verdict(ours >= it->second);
  };
  ob::print_machine("bench_gpu_models", of::get_num_threads());
  ob::Table t(smoke ? "CPU smoke run of the GPU model benchmarks (tiny shapes; not figures)"
                    : "training throughput on the GPU, AMP float16; peer = PyTorch eager "
                      "(bench/gpu_models.py) in the same gpu_check run");
  // eager against PyTorch's eager (the target), the CUDA-Graph replay beside it
  auto rows = [&](const std::string& what, const char* key, int64_t batch, const Result& r) {
    const double eager = double(batch) / r.eager, replay = double(batch) / r.replay;
    t.row({what + ", eager", fmt::format("{:.1f}", eager), peer(key), ratio(key, eager), ">= 1.0x",
           verdict(key, eager)});
    t.row({what + ", replay (" + r.mode + ")", fmt::format("{:.1f}", replay), peer(key),
           ratio(key, replay), "(beside)", "-"});
  };
  of::manual_seed(0);
  if (want_resnet) {
    const int64_t batch = smoke ? 2 : 128, side = smoke ? 32 : 224;
    ob::ResNet model = smoke ? ob::ResNet(std::vector<int64_t>{1, 1, 1, 1}, 10, 8) : ob::ResNet();
    model->to(dev);
    of::optim::SGD opt(model->parameters(),
                       of::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
    const of::Tensor x = of::randn({batch, 3, side, side}).to(dev);
    const of::Tensor y = of::randint(0, smoke ? 10 : 1000, {batch}, of::kInt64).to(dev);
    std::printf("ResNet-50%s, batch %lld, %lldx%lld\n", smoke ? " (tiny)" : "", (long long)batch,
                (long long)side, (long long)side);
    rows("ResNet-50 images/s", "resnet50_images_per_s", batch,
         run(model, opt, dev, amp, x, y, warm, n));
  }
  if (want_bert) {
    ob::BertShape s;
    if (smoke) s = {100, 16, 32, 4, 64, 2, 0.1};
    const int64_t batch = smoke ? 2 : 64, seq = smoke ? 8 : 128;
    ob::Bert model(s);
    model->to(dev);
    of::optim::AdamW opt(model->parameters(), of::optim::AdamWOptions(1e-4).weight_decay(0.01));
    const of::Tensor ids = of::randint(0, s.vocab, {seq, batch}, of::kInt64).to(dev);
    const of::Tensor labels = of::randint(0, s.vocab, {seq, batch}, of::kInt64).to(dev);
    std::printf("BERT-base%s, seq %lld, batch %lld\n", smoke ? " (tiny)" : "", (long long)seq,
                (long long)batch);
    rows("BERT-base sequences/s", "bert_sequences_per_s", batch,
         run(model, opt, dev, amp, ids, labels, warm, n));
  }
  if (!profiling) t.print();
  return 0;
}

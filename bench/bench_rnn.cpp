// An LSTM language-model training step beside libtorch 1.13: embedding (64 tokens -> 64) ->
// 2-layer LSTM (hidden 256) -> linear over the 64-token vocabulary, seq 32 x batch 32,
// cross entropy over every position, Adam. libtorch runs at 1 and 2 threads and at our thread
// count; the ratio is against its best. Each (library, threads) runs in its own fork()ed child,
// so neither side's thread pool or allocator state leaks into the other's figure.
#include <oneflow/oneflow.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>

#include "bench_util.h"

#ifdef OF_BENCH_WITH_LIBTORCH
#include <torch/torch.h>
#endif

namespace ob = oneflow::bench;

namespace {

constexpr int kWarmup = 3, kSteps = 10, kRounds = 2;
constexpr int64_t kVocab = 64, kEmbed = 64, kHidden = 256, kLayers = 2, kSeq = 32, kBatch = 32;

// The model and step, written once for both libraries (NS: of or torch).
#define OF_BENCH_LM(NS, Name)                                                              \
  struct Name##Impl : NS::nn::Module {                                                     \
    Name##Impl() {                                                                         \
      emb = register_module("emb", NS::nn::Embedding(kVocab, kEmbed));                     \
      lstm = register_module(                                                              \
          "lstm", NS::nn::LSTM(NS::nn::LSTMOptions(kEmbed, kHidden).num_layers(kLayers))); \
      head = register_module("head", NS::nn::Linear(kHidden, kVocab));                     \
    }                                                                                      \
    NS::Tensor forward(const NS::Tensor& tokens) {                                         \
      NS::Tensor h = std::get<0>(lstm->forward(emb->forward(tokens)));                     \
      return head->forward(h.reshape({kSeq * kBatch, kHidden}));                           \
    }                                                                                      \
    NS::nn::Embedding emb{nullptr};                                                        \
    NS::nn::LSTM lstm{nullptr};                                                            \
    NS::nn::Linear head{nullptr};                                                          \
  };                                                                                       \
  TORCH_MODULE(Name);                                                                      \
  double Name##_step_time() {                                                              \
    NS::manual_seed(0);                                                                    \
    Name net;                                                                              \
    NS::optim::Adam opt(net->parameters(), NS::optim::AdamOptions(1e-3));                  \
    NS::Tensor x = NS::randint(0, kVocab, {kSeq, kBatch}, NS::kInt64);                     \
    NS::Tensor y = NS::randint(0, kVocab, {kSeq * kBatch}, NS::kInt64);                    \
    auto step = [&] {                                                                      \
      opt.zero_grad();                                                                     \
      NS::Tensor loss = NS::nn::functional::cross_entropy(net->forward(x), y);             \
      loss.backward();                                                                     \
      opt.step();                                                                          \
      ob::keep(loss.item<float>());                                                        \
    };                                                                                     \
    return ob::median_time(step, kWarmup, kSteps, 1.0, kSteps);                            \
  }

OF_BENCH_LM(of, OfLm)

// The same step under of::jit::trace: the first calls record, the timed ones replay.
double OfLm_traced_step_time() {
  of::manual_seed(0);
  OfLm net;
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-3));
  of::Tensor x = of::randint(0, kVocab, {kSeq, kBatch}, of::kInt64);
  of::Tensor y = of::randint(0, kVocab, {kSeq * kBatch}, of::kInt64);
  auto step = of::jit::trace([&](const of::Tensor& in, const of::Tensor& tgt) {
    opt.zero_grad();
    of::Tensor loss = of::nn::functional::cross_entropy(net->forward(in), tgt);
    loss.backward();
    opt.step();
    return loss;
  });
  for (int i = 0; i < 2; ++i) step(x, y);  // the first call makes Adam's state, the second records
  return ob::median_time([&] { ob::keep(step(x, y).item<float>()); }, kWarmup, kSteps, 1.0, kSteps);
}
#ifdef OF_BENCH_WITH_LIBTORCH
OF_BENCH_LM(torch, TorchLm)
#endif

}  // namespace

int main() {
  // The parent starts no thread pool: fork()ed children would inherit one without its threads.
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  ob::print_machine("bench_rnn", threads);
  fmt::print(
      "LSTM LM: embedding {}x{} -> LSTM {} layers hidden {} -> linear {}, seq {} x batch {}, "
      "Adam; median of {} steps after {} warm-up steps, each side in its own process, best of {} "
      "alternating rounds\n",
      kVocab, kEmbed, kLayers, kHidden, kVocab, kSeq, kBatch, kSteps, kWarmup, kRounds);
  // kRounds alternating rounds, the best median of each side: a shared host's busy phases then
  // hit both sides instead of whichever happened to run during them.
  auto best_of = [](double a, double b) { return a > 0 && (b <= 0 || a < b) ? a : b; };
  double ours = -1, traced = -1, ours1 = -1;
  std::string peer = ob::kNoTorch, ratio = "-", verdict = "n/a (no peer)", detail = "-";
#ifdef OF_BENCH_WITH_LIBTORCH
  std::vector<int> counts{1, 2};
  if (std::find(counts.begin(), counts.end(), threads) == counts.end()) counts.push_back(threads);
  std::vector<double> torch_t(counts.size(), -1);
#endif
  for (int round = 0; round < kRounds; ++round) {
    ours = best_of(ob::in_child([threads] {
                     of::set_num_threads(threads);
                     return OfLm_step_time();
                   }).seconds,
                   ours);
    if (threads != 1)
      ours1 = best_of(ob::in_child([] {
                        of::set_num_threads(1);
                        return OfLm_step_time();
                      }).seconds,
                      ours1);
    traced = best_of(ob::in_child([threads] {
                       of::set_num_threads(threads);
                       return OfLm_traced_step_time();
                     }).seconds,
                     traced);
#ifdef OF_BENCH_WITH_LIBTORCH
    for (size_t i = 0; i < counts.size(); ++i)
      torch_t[i] = best_of(ob::in_child([n = counts[i]] {
                             torch::set_num_threads(n);
                             return TorchLm_step_time();
                           }).seconds,
                           torch_t[i]);
#endif
  }
#ifdef OF_BENCH_WITH_LIBTORCH
  double best = INFINITY;
  int best_threads = 0;
  detail.clear();
  for (size_t i = 0; i < counts.size(); ++i) {
    const double t = torch_t[i];
    detail += fmt::format("{}{} thr: {:.1f} ms", detail.empty() ? "" : ", ", counts[i], t * 1e3);
    if (t > 0 && t < best) best = t, best_threads = counts[i];
  }
  peer = fmt::format("{:.2f} ms ({} thr)", best * 1e3, best_threads);
  ratio = ob::ratio_str(ours / best);
  verdict = ob::verdict(ours > 0 && ours / best <= 1.0);
#endif
  ob::Table table(
      "training step time (forward + backward + Adam), ms; peer = libtorch 1.13 "
      "same model at its best thread count; ratio = ours / libtorch",
      {"libtorch by threads"});
  table.row({fmt::format("LSTM LM seq {} x batch {}, hidden {} x {} layers ({} thr)", kSeq, kBatch,
                         kHidden, kLayers, threads),
             ours > 0 ? fmt::format("{:.2f} ms", ours * 1e3) : "failed", peer, ratio, "<= 1.0x",
             verdict, detail});
  table.row({fmt::format("  the same step traced (of::jit::trace replay, {} thr)", threads),
             traced > 0 ? fmt::format("{:.2f} ms", traced * 1e3) : "failed", peer,
#ifdef OF_BENCH_WITH_LIBTORCH
             ob::ratio_str(traced / best), "(beside)",
             fmt::format("{:.2f}x faster than our eager", ours / traced),
#else
             "-", "(beside)", fmt::format("{:.2f}x faster than our eager", ours / traced),
#endif
             detail});
  if (ours1 > 0) {
#ifdef OF_BENCH_WITH_LIBTORCH
    const double torch1 = torch_t[0];  // counts[0] == 1
    const std::string r1 = ob::ratio_str(ours1 / torch1),
                      p1 = fmt::format("{:.2f} ms (1 thr)", torch1 * 1e3);
#else
    const std::string r1 = "-", p1 = ob::kNoTorch;
#endif
    table.row({"  ours at 1 thread (equal threads with libtorch's 1)",
               fmt::format("{:.2f} ms", ours1 * 1e3), p1, r1, "(beside)",
               fmt::format("{:.2f}x our {}-thread time", ours1 / ours, threads), detail});
  }
  table.print();
  return 0;
}

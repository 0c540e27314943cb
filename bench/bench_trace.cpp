// Trace -> replay against eager (issue 7's speed rows), each ratio timed in one run with the
// two sides interleaved round by round:
//  1. overhead-bound training step: MLP 784-64-10, batch 16, SGD momentum (libtorch eager on the
//     same step beside it, at its best thread count and at ours);
//  2. an 8-op elementwise chain on 16M float32 against the memory-bandwidth floor (one read of
//     each input and one write of the output at the STREAM-triad rate measured here);
//  3. per-node cost of a 1,000-op chain of tiny ops, replay vs eager dispatch;
//  4. the Fashion-MNIST CNN training step (batch 64) and 5. a GPT 2-block training step, with
//     the planned arena against the eager peak of live intermediates and the record+compile time;
//  6. a BERT encoder's training step with its attention written out (examples/bert.h): the
//     replay with the attention rewrite (NOTE [Fused attention, training]) against the replay
//     of the same step without it, and eager.
#include <oneflow/oneflow.h>

#include <cmath>
#include <cstring>

#include "../examples/bert.h"
#include "bench_util.h"

#ifdef OF_BENCH_WITH_LIBTORCH
#include <torch/torch.h>
#endif

namespace ob = oneflow::bench;
namespace nn = of::nn;
namespace F = of::nn::functional;

namespace {

std::string ms(double s) { return fmt::format("{:.3f} ms", s * 1e3); }
std::string us(double s) { return fmt::format("{:.1f} us", s * 1e6); }
std::string ns(double s) { return fmt::format("{:.0f} ns", s * 1e9); }
std::string x_of(double r) { return fmt::format("{:.2f}x", r); }

// ---------------------------------------------------------------- 1. MLP step

struct MlpImpl : nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", nn::Linear(784, 64));
    fc2 = register_module("fc2", nn::Linear(64, 10));
  }
  of::Tensor forward(const of::Tensor& x) { return fc2(fc1(x).relu()); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
OF_MODULE(Mlp);

#ifdef OF_BENCH_WITH_LIBTORCH
struct TMlpImpl : torch::nn::Module {
  TMlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 64));
    fc2 = register_module("fc2", torch::nn::Linear(64, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(fc1(x).relu()); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TMlp);

double torch_mlp_step(int threads) {
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  TMlp net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::Tensor x = torch::randn({16, 784});
  torch::Tensor y = torch::randint(0, 10, {16}, torch::kLong);
  return ob::median_time(
      [&] {
        opt.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(net(x), y);
        loss.backward();
        opt.step();
      },
      20, 200, 1.0, 5000);
}
#endif

void bench_mlp(ob::Table& t, int threads) {
  of::manual_seed(0);
  Mlp net;
  of::optim::SGD opt(net->parameters(), of::optim::SGDOptions(0.01).momentum(0.9));
  of::Tensor x = of::randn({16, 784});
  of::Tensor y = of::randint(0, 10, {16}, of::kInt64);
  auto step = [&](const of::Tensor& in, const of::Tensor& tgt) {
    opt.zero_grad();
    of::Tensor loss = F::cross_entropy(net->forward(in), tgt);
    loss.backward();
    opt.step();
    return loss;
  };
  auto traced = of::jit::trace(step);
  auto times = ob::interleaved_median_times(
      {[&] { ob::keep(step(x, y)); }, [&] { ob::keep(traced(x, y)); }}, 20, 200, 1.5, 5000);
  const double eager = times[0], replay = times[1];
  t.row({"MLP 784-64-10 b16 SGD step: replay vs our eager", ms(replay), ms(eager) + " (eager)",
         x_of(eager / replay) + " faster", ">= 3x", ob::verdict(eager / replay >= 3)});
#ifdef OF_BENCH_WITH_LIBTORCH
  double best = 1e9;
  int best_threads = 1;
  for (int n = 1; n <= threads; ++n) {
    const double s = torch_mlp_step(n);
    if (s < best) {
      best = s;
      best_threads = n;
    }
  }
  const double same = torch_mlp_step(threads);
  t.row({"  beside libtorch eager, its best (" + std::to_string(best_threads) + " threads)",
         ms(replay), ms(best), x_of(best / replay) + " faster", "(printed beside)", "-"});
  t.row({"  beside libtorch eager, " + std::to_string(threads) + " threads (ours)", ms(replay),
         ms(same), x_of(same / replay) + " faster", "(printed beside)", "-"});
#else
  t.row({"  beside libtorch eager", ms(replay), ob::kNoTorch, "-", "(printed beside)", "-"});
#endif
}

// ---------------------------------------------------------------- 2. elementwise chain

void bench_chain(ob::Table& t) {
  const int64_t n = 16 << 20;
  of::manual_seed(1);
  of::Tensor x = of::randn({n}), a = of::rand({n}), b = of::randn({n}), c = of::rand({n}),
             d = of::randn({n});
  auto chain = [&](const of::Tensor& xx) {
    return ((of::gelu(xx * a + b).tanh() * c).sigmoid() * 2.0) - d;  // 8 elementwise ops
  };
  auto traced = of::jit::trace(chain);
  traced(x);
  // the triad and both sides, interleaved: a noisy host slows each alike
  of::Tensor A = of::zeros({n}), B = of::ones({n}), C = of::full({n}, 2.0);
  auto times =
      ob::interleaved_median_times({[&] { ob::keep(chain(x)); }, [&] { ob::keep(traced(x)); },
                                    [&] { of::add_out(A, B, C, 3.0f); }},
                                   1, 7, 2.0, 40);
  const double eager = times[0], replay = times[1], triad = times[2];
  const double triad_bw = 3.0 * 4.0 * double(n) / triad;  // bytes/s
  const double floor = 6.0 * 4.0 * double(n) / triad_bw;  // 5 inputs read + 1 output written
  t.row({"8-op chain gelu/tanh/sigmoid, 16M f32: replay vs eager", ms(replay),
         ms(eager) + " (eager)", x_of(eager / replay) + " faster", ">= 3x",
         ob::verdict(eager / replay >= 3)});
  t.row(
      {"  replay vs the bandwidth floor (triad " + fmt::format("{:.1f} GB/s", triad_bw / 1e9) + ")",
       ms(replay), ms(floor) + " (floor)", x_of(floor / replay) + " of floor", ">= 0.7x",
       ob::verdict(floor / replay >= 0.7)});
}

// ---------------------------------------------------------------- 3. per-node cost

void bench_nodes(ob::Table& t) {
  of::Tensor x = of::rand({8}) + 1, y = of::rand({8}) + 1;
  auto chain = [&](const of::Tensor& in) {
    of::Tensor h = in;
    for (int i = 0; i < 500; ++i) h = (h * y) / y;  // 1,000 tiny ops nothing folds away
    return h;
  };
  auto traced = of::jit::trace(chain, of::jit::TraceOptions().cse(false));
  traced(x);
  auto times = ob::interleaved_median_times(
      {[&] { ob::keep(chain(x)); }, [&] { ob::keep(traced(x)); }}, 3, 15, 1.0, 2000);
  const double eager = times[0] / 1000, replay = times[1] / 1000;
  t.row({"1,000-op chain of [8] ops: per-node cost", ns(replay) + "/node",
         ns(eager) + "/op (eager dispatch)", x_of(replay / eager), "<= 0.25x",
         ob::verdict(replay / eager <= 0.25)});
}

// ---------------------------------------------------------------- 4. CNN, 5. GPT

struct CnnImpl : nn::Module {
  CnnImpl() {
    features = register_module("features",
                               nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)),
                                              nn::BatchNorm2d(32), nn::ReLU(), nn::MaxPool2d(2),
                                              nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)),
                                              nn::BatchNorm2d(64), nn::ReLU(), nn::MaxPool2d(2)));
    classifier = register_module(
        "classifier", nn::Sequential(nn::Flatten(), nn::Linear(64 * 7 * 7, 128), nn::ReLU(),
                                     nn::Dropout(0.25), nn::Linear(128, 10)));
  }
  of::Tensor forward(const of::Tensor& x) { return classifier(features(x)); }
  nn::Sequential features{nullptr}, classifier{nullptr};
};
OF_MODULE(Cnn);

struct GptImpl : nn::Module {
  GptImpl(int64_t vocab, int64_t block, int64_t d, int64_t layers) {
    tok = register_module("tok", nn::Embedding(vocab, d));
    pos = register_module("pos", nn::Embedding(block, d));
    blocks = register_module("blocks", nn::ModuleList());
    for (int64_t i = 0; i < layers; ++i)
      blocks->push_back(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(d, 4)
                                                        .dim_feedforward(4 * d)
                                                        .dropout(0.1)
                                                        .activation(of::kGELU)
                                                        .norm_first(true)));
    head = register_module("head", nn::Linear(d, vocab));
    mask = register_buffer(
        "mask", of::zeros({block, block})
                    .masked_fill(of::ones({block, block}, of::kBool).triu(1), -INFINITY));
  }
  of::Tensor forward(const of::Tensor& ids) {
    of::Tensor h = tok(ids) + pos(of::arange(ids.size(0), of::kInt64)).unsqueeze(1);
    for (size_t i = 0; i < blocks->size(); ++i)
      h = blocks->ptr<nn::TransformerEncoderLayerImpl>(i)->forward(h, mask);
    return head(h);
  }
  nn::Embedding tok{nullptr}, pos{nullptr};
  nn::ModuleList blocks{nullptr};
  nn::Linear head{nullptr};
  of::Tensor mask;
};
OF_MODULE(Gpt);

template <class Step, class... Args>
void bench_training(ob::Table& t, const std::string& name, Step step, bool memory_row,
                    const Args&... args) {
  auto traced = of::jit::trace(
      step, of::jit::TraceOptions().verbose(std::getenv("OF_TRACE_VERBOSE") != nullptr));
  auto call = [&](auto& f) { return f(args...); };
  call(traced);  // records (optimizer state is created: not a graph yet)
  call(traced);  // records the graph
  const of::jit::TraceStats st = traced.stats();
  auto times = ob::interleaved_median_times(
      {[&] { ob::keep(call(step)); }, [&] { ob::keep(call(traced)); }}, 2, 9, 2.0, 200);
  const double eager = times[0], replay = times[1];
  t.row({name + ": replay vs eager", ms(replay), ms(eager) + " (eager)",
         x_of(eager / replay) + " faster", ">= 1.2x", ob::verdict(eager / replay >= 1.2)});
  if (memory_row) {
    const double ratio = double(st.arena_bytes) / double(st.eager_peak_bytes);
    t.row({"  planned arena vs eager peak of live intermediates",
           fmt::format("{:.1f} MiB", double(st.arena_bytes) / 1048576.0),
           fmt::format("{:.1f} MiB (peak)", double(st.eager_peak_bytes) / 1048576.0), x_of(ratio),
           "<= 0.6x", ob::verdict(ratio <= 0.6)});
    t.row({"  recording + compiling the step", ms((st.trace_ms + st.compile_ms) / 1e3),
           fmt::format("record {:.0f} + compile {:.0f} ms", st.trace_ms, st.compile_ms), "-",
           "< 1 s", ob::verdict(st.trace_ms + st.compile_ms < 1000)});
  }
  fmt::print("{}: {}", name, st.str());
}

void bench_cnn(ob::Table& t) {
  of::manual_seed(0);
  Cnn net;
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-3));
  of::Tensor x = of::randn({64, 1, 28, 28});
  of::Tensor y = of::randint(0, 10, {64}, of::kInt64);
  auto step = [&](const of::Tensor& in, const of::Tensor& tgt) {
    opt.zero_grad();
    of::Tensor loss = F::cross_entropy(net->forward(in), tgt);
    loss.backward();
    opt.step();
    return loss;
  };
  bench_training(t, "Fashion-MNIST CNN b64 Adam step", step, false, x, y);
}

void bench_gpt(ob::Table& t) {
  of::manual_seed(0);
  const int64_t vocab = 96, block = 64, d = 128;
  Gpt gpt(vocab, block, d, 2);
  of::optim::AdamW opt(gpt->parameters(), of::optim::AdamWOptions(3e-3).weight_decay(0.01));
  of::Tensor ids = of::randint(0, vocab, {block + 1, 16}, of::kInt64);
  auto step = [&](const of::Tensor& seq) {
    opt.zero_grad();
    of::Tensor logits = gpt->forward(seq.narrow(0, 0, block));
    of::Tensor loss =
        F::cross_entropy(logits.reshape({-1, vocab}), seq.narrow(0, 1, block).reshape({-1}));
    loss.backward();
    of::nn::utils::clip_grad_norm_(gpt->parameters(), 1.0);
    opt.step();
    return loss;
  };
  bench_training(t, "GPT 2 blocks d128 seq64 b16 AdamW step", step, true, ids);
}

// 4 layers, hidden 256, 4 heads, FFN 1024; batch 8 x 128 tokens, half the sequences padded
// from token 96; loss: the mean square of the last hidden states; Adam.
void bench_bert_train(ob::Table& t) {
  of::manual_seed(0);
  bert::Config c;
  c.hidden_size = 256;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.intermediate_size = 1024;
  bert::Encoder enc(c);
  of::optim::Adam opt(enc->parameters(), of::optim::AdamOptions(1e-4));
  const of::Tensor x = of::randn({8, 128, 256});
  of::Tensor keep = of::ones({8, 128});
  keep.narrow(0, 0, 4).narrow(1, 96, 32).fill_(0.0);
  const of::Tensor mask_add = ((1.0 - keep) * -10000.0).unsqueeze(1).unsqueeze(2);
  auto step = [&](const of::Tensor& in, const of::Tensor& m) {
    opt.zero_grad();
    of::Tensor h = in;
    for (size_t i = 0; i < enc->layer->size(); ++i)
      h = enc->layer->ptr<bert::LayerImpl>(i)->forward(h, m);
    of::Tensor loss = h.square().mean();
    loss.backward();
    opt.step();
    return loss;
  };
  auto fused = of::jit::trace(step);
  auto plain = of::jit::trace(step, of::jit::TraceOptions().attention(false));
  for (int i = 0; i < 2; ++i) {
    fused(x, mask_add);
    plain(x, mask_add);
  }
  auto times = ob::interleaved_median_times(
      {[&] { ob::keep(step(x, mask_add)); }, [&] { ob::keep(plain(x, mask_add)); },
       [&] { ob::keep(fused(x, mask_add)); }},
      2, 15, 8.0, 200);
  const std::string name = "BERT 4x256 h4 b8x128 Adam step";
  t.row({name + ": replay, attention fused vs not", ms(times[2]), ms(times[1]) + " (not fused)",
         x_of(times[1] / times[2]) + " faster", "> 1x", ob::verdict(times[1] > times[2])});
  t.row({"  the fused replay vs eager", ms(times[2]), ms(times[0]) + " (eager)",
         x_of(times[0] / times[2]) + " faster", ">= 1.2x",
         ob::verdict(times[0] / times[2] >= 1.2)});
  const of::jit::TraceStats sf = fused.stats(), sp = plain.stats();
  t.row({"  planned arena, fused vs not",
         fmt::format("{:.1f} MiB", double(sf.arena_bytes) / 1048576.0),
         fmt::format("{:.1f} MiB (not fused)", double(sp.arena_bytes) / 1048576.0),
         x_of(double(sf.arena_bytes) / double(sp.arena_bytes)), "-", "-"});
  fmt::print("{} (fused): {}", name, sf.str());
}

}  // namespace

int main(int argc, char** argv) {
  // optional arguments pick cases: mlp chain nodes cnn gpt bert (default: all)
  auto want = [&](const char* name) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], name) == 0) return true;
    return false;
  };
  const int threads = of::get_num_threads();
  ob::print_machine("bench_trace", threads);
  ob::Table t("of::jit::trace replay; ratios from interleaved rounds in this run");
  if (want("mlp")) bench_mlp(t, threads);
  if (want("chain")) bench_chain(t);
  if (want("nodes")) bench_nodes(t);
  if (want("cnn")) bench_cnn(t);
  if (want("gpt")) bench_gpt(t);
  if (want("bert")) bench_bert_train(t);
  t.print();
  return 0;
}

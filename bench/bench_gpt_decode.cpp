// bench_gpt_decode: our side of bench/gpt_decode.sh (issue 26 section 4): decode tokens/s of a
// GPT-2-small-shaped decoder (12 pre-norm layers, hidden 768, 12 heads, FFN 3072, vocabulary
// 50257, head tied to the token embedding; seeded random weights) at batch 1 through the traced
// KV-cache decode step (NOTE [Traced decoding]): a 128-token prompt fed through the step, then
// greedy tokens, the median ms per token over rounds. Beside it the bound: the bytes each token
// must read (every weight matrix, the tied head, the LayerNorms, and the KV cache up to the
// position) at the STREAM-triad rate measured in the same run, at the same thread count.
// Prints machine-readable lines:
//   result impl=ours_traced|ours_eager|ours_traced_bf16|ours_traced_int8 threads=T prompt=P
//   tokens=N ms_per_token=<median>
//          tokens_per_s=<1000 / ms>
//   limit threads=T triad_gbs=<GB/s> bytes_per_token=<MB> bound_tokens_per_s=<...>
//
//   build/bench/bench_gpt_decode [--threads 1,2] [--prompt 128] [--tokens 64] [--rounds 3]
//                                [--layers 12] [--bf16] [--int8] [--no-eager]
// --int8 traces the float32 model with TraceOptions::quantize_int8 (the linears' weights int8,
// NOTE [Dynamic int8 linear]; the tied head too: it is a linear of the embedding's weight).
#include <oneflow/oneflow.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace nn = of::nn;
namespace gen = of::generation;
namespace bench = of::bench;

namespace {

struct Gpt {
  int64_t vocab = 50257, d = 768, heads = 12, layers = 12, max_len = 1024;
  nn::Embedding tok{nullptr}, pos{nullptr};
  std::vector<nn::TransformerEncoderLayer> blocks;
  nn::LayerNorm norm{nullptr};
  explicit Gpt(int64_t n_layers) : layers(n_layers) {
    of::manual_seed(0);
    tok = nn::Embedding(vocab, d);
    pos = nn::Embedding(max_len, d);
    for (int64_t i = 0; i < layers; ++i) {
      blocks.emplace_back(nn::TransformerEncoderLayerOptions(d, heads)
                              .dim_feedforward(4 * d)
                              .activation(of::kGELU)
                              .norm_first(true));
      blocks.back()->eval();
    }
    norm = nn::LayerNorm(std::vector<int64_t>{d});
  }
  void to(of::ScalarType dt) {
    tok->to(dt);
    pos->to(dt);
    for (auto& b : blocks) b->to(dt);
    norm->to(dt);
  }
  // token [1], pos 0-d -> logits [vocab] (the head is the token embedding, tied)
  of::Tensor step(const of::Tensor& token, const of::Tensor& p, gen::KVCache& cache) {
    of::Tensor h = tok(token.view({1, 1})) + pos(p.view({1})).unsqueeze(1);
    for (size_t l = 0; l < blocks.size(); ++l)
      h = gen::cached_encoder_layer(*blocks[l], h, cache, int64_t(l), p);
    return of::linear(norm(h).view({1, d}), tok->weight).view({-1}).to(of::kFloat32);
  }
  // bytes a token reads at position p: every parameter but the embeddings' unused rows, and the
  // cache's keys and values up to p (the step reads all max_len slots; the bound counts what a
  // decoder must read)
  double bytes_per_token(int64_t p, size_t elem) const {
    const double per_layer = 4.0 * d * d + 2.0 * d * 4 * d + 4 * d + 4 * d + d + 6.0 * d;
    return elem * (layers * per_layer + double(vocab) * d + 2.0 * d + 2.0 * layers * (p + 1) * d);
  }
};

// GB/s of a STREAM triad a[i] = b[i] + s * c[i] over arrays far larger than the caches, at
// `threads` threads (each its own contiguous part): 3 arrays * 8 bytes per element.
double triad_gbs(int threads) {
  const size_t n = size_t(1) << 25;  // 32M doubles per array: 256 MiB
  std::vector<double> a(n, 1.0), b(n, 2.0), c(n, 3.0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = bench::now_s();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        const size_t lo = n * size_t(t) / size_t(threads), hi = n * size_t(t + 1) / size_t(threads);
        for (size_t i = lo; i < hi; ++i) a[i] = b[i] + 0.5 * c[i];
      });
    for (auto& t : ts) t.join();
    const double s = bench::now_s() - t0;
    best = std::max(best, 3.0 * 8.0 * double(n) / s / 1e9);
  }
  bench::keep(a[n / 2]);
  return best;
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> r;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t e = s.find(',', at);
    r.push_back(std::stoi(s.substr(at, e == std::string::npos ? std::string::npos : e - at)));
    if (e == std::string::npos) break;
    at = e + 1;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  int64_t prompt_len = 128, tokens = 64, layers = 12;
  int rounds = 3;
  bool bf16 = false, int8 = false, eager = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--threads") threads = parse_ints(next());
    else if (a == "--prompt") prompt_len = std::stoll(next());
    else if (a == "--tokens") tokens = std::stoll(next());
    else if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--layers") layers = std::stoll(next());
    else if (a == "--bf16") bf16 = true;
    else if (a == "--int8") int8 = true;
    else if (a == "--no-eager") eager = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  Gpt m(layers);
  of::NoGradGuard ng;
  std::vector<int64_t> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) prompt[size_t(i)] = (i * 7919) % m.vocab;
  const int64_t max_len = prompt_len + tokens;
  struct Impl {
    std::string name;
    of::ScalarType dt;
    bool traced;
    bool int8 = false;  // TraceOptions::quantize_int8: the linears' weights int8
  };
  std::vector<Impl> impls = {{"ours_traced", of::kFloat32, true}};
  if (eager) impls.push_back({"ours_eager", of::kFloat32, false});
  if (bf16) impls.push_back({"ours_traced_bf16", of::kBFloat16, true});
  if (int8) impls.push_back({"ours_traced_int8", of::kFloat32, true, true});
  for (int t : threads) {
    of::set_num_threads(t);
    const double gbs = triad_gbs(t);
    const double bytes = m.bytes_per_token(prompt_len + tokens / 2, 4);
    std::printf("limit threads=%d triad_gbs=%.2f bytes_per_token_mb=%.1f bound_tokens_per_s=%.2f\n",
                t, gbs, bytes / 1e6, gbs * 1e9 / bytes);
    for (const Impl& im : impls) {
      if (im.dt != of::kFloat32) m.to(im.dt);
      gen::KVCache cache(layers, 1, m.heads, max_len, m.d / m.heads, of::TensorOptions(im.dt));
      auto fn = [&](const of::Tensor& token, const of::Tensor& p) {
        return m.step(token, p, cache);
      };
      auto traced =
          of::jit::trace(fn, of::jit::TraceOptions().arena_outputs(true).quantize_int8(im.int8));
      std::vector<double> per_token;
      for (int r = 0; r < rounds; ++r) {
        cache.k.zero_();
        cache.v.zero_();
        gen::GenerateOptions o;
        o.max_new_tokens = tokens;
        o.temperature = 0;
        int64_t seen = 0;
        double t_first = 0;
        auto on_token = [&](int64_t) {
          if (seen++ == 0) t_first = bench::now_s();  // the prompt is done: time the decode
          return true;
        };
        const std::vector<int64_t> out = im.traced ? gen::generate(traced, prompt, o, on_token)
                                                   : gen::generate(fn, prompt, o, on_token);
        const double t_end = bench::now_s();
        per_token.push_back((t_end - t_first) * 1e3 / double(out.size() - 1));
      }
      const double ms = bench::median(per_token);
      std::printf(
          "result impl=%s threads=%d prompt=%lld tokens=%lld ms_per_token=%.3f "
          "tokens_per_s=%.2f\n",
          im.name.c_str(), t, (long long)prompt_len, (long long)tokens, ms, 1e3 / ms);
      std::fflush(stdout);
      if (im.dt != of::kFloat32) m.to(of::kFloat32);
    }
  }
  return 0;
}

// Text generation with a KV cache (include/oneflow/generate.h, NOTE [Traced decoding]): the
// cached decode step against the full causal forward, traced decoding against eager decoding
// (the same tokens), no retrace and no allocation per token, the sampler's rules, and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "harness.h"

namespace nn = of::nn;
namespace gen = of::generation;

namespace {

// A small GPT (sequence first): token and position embeddings, causal encoder layers, a
// final LayerNorm and a head, as examples/char_gpt.cpp builds it.
struct TinyGpt {
  nn::Embedding tok{nullptr}, pos{nullptr};
  std::vector<nn::TransformerEncoderLayer> blocks;
  nn::LayerNorm norm{nullptr};
  nn::Linear head{nullptr};
  int64_t d, heads, block;
  TinyGpt(int64_t vocab, int64_t d_, int64_t heads_, int64_t layers, int64_t block_,
          bool norm_first)
      : d(d_), heads(heads_), block(block_) {
    of::manual_seed(21);
    tok = nn::Embedding(vocab, d);
    pos = nn::Embedding(block, d);
    for (int64_t i = 0; i < layers; ++i) {
      blocks.emplace_back(nn::TransformerEncoderLayerOptions(d, heads)
                              .dim_feedforward(4 * d)
                              .dropout(0.1)
                              .activation(of::kGELU)
                              .norm_first(norm_first));
      blocks.back()->eval();
    }
    norm = nn::LayerNorm(std::vector<int64_t>{d});
    head = nn::Linear(d, vocab);
  }
  // ids [L] -> logits [L, vocab] under the causal mask
  of::Tensor forward(const of::Tensor& ids) {
    const int64_t L = ids.size(0);
    of::Tensor h = tok(ids.view({L, 1})) + pos(of::arange(L, of::kInt64)).unsqueeze(1);
    const of::Tensor mask =
        of::zeros({L, L}).masked_fill(of::ones({L, L}, of::kBool).triu(1), -INFINITY);
    for (auto& b : blocks) h = b(h, mask);
    return head(norm(h)).view({L, -1});
  }
  // the prompt ids [L] at positions 0..L-1 -> the logits after its last token, through `cache`
  of::Tensor prefill(const of::Tensor& ids, gen::KVCache& cache) {
    const int64_t L = ids.size(0);
    const of::Tensor p0 = of::zeros({}, of::TensorOptions(of::kInt64));
    of::Tensor h = tok(ids.view({L, 1})) + pos(of::arange(L, of::kInt64)).unsqueeze(1);
    for (size_t l = 0; l < blocks.size(); ++l)
      h = gen::cached_encoder_layer(*blocks[l], h, cache, int64_t(l), p0);
    return head(norm(h.select(0, L - 1))).view({-1});
  }
  // one token [1] at pos (0-d) -> logits [vocab], through `cache`
  of::Tensor step(const of::Tensor& token, const of::Tensor& p, gen::KVCache& cache) {
    of::Tensor h = tok(token.view({1, 1})) + pos(p.view({1})).unsqueeze(1);
    for (size_t l = 0; l < blocks.size(); ++l)
      h = gen::cached_encoder_layer(*blocks[l], h, cache, int64_t(l), p);
    return head(norm(h)).view({-1});
  }
};

of::Tensor pos_tensor(int64_t p) { return of::full({}, p, of::TensorOptions(of::kInt64)); }

}  // namespace

TEST_CASE("generate: the cached decode step gives the full causal forward's logits") {
  for (bool norm_first : {true, false}) {
    CAPTURE(norm_first);
    TinyGpt m(11, 16, 4, 2, 12, norm_first);
    of::NoGradGuard ng;
    const of::Tensor ids =
        of::tensor(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6}, {8}, of::kInt64);
    const of::Tensor full = m.forward(ids);
    gen::KVCache cache(2, 1, 4, 12, 4);
    for (int64_t i = 0; i < 8; ++i) {
      CAPTURE(i);
      const of::Tensor lg = m.step(ids.narrow(0, i, 1), pos_tensor(i), cache);
      CHECK(of::allclose(lg, full.select(0, i), 1e-4, 1e-5));
    }
    // the cache holds each position's key where the step wrote it
    CHECK(cache.k.narrow(3, 8, 4).abs().sum().item<double>() == 0.0);
    CHECK(cache.k.narrow(3, 0, 8).abs().sum().item<double>() > 0.0);
  }
}

TEST_CASE(
    "generate: traced decoding gives exactly eager decoding's tokens, one recording, no "
    "allocation") {
  TinyGpt m(13, 32, 4, 2, 48, true);
  gen::KVCache eager_cache(2, 1, 4, 48, 8), traced_cache(2, 1, 4, 48, 8);
  auto eager = [&](const of::Tensor& t, const of::Tensor& p) { return m.step(t, p, eager_cache); };
  auto traced = of::jit::trace(
      [&](const of::Tensor& t, const of::Tensor& p) { return m.step(t, p, traced_cache); },
      of::jit::TraceOptions().arena_outputs(true));
  of::NoGradGuard ng;
  const std::vector<int64_t> prompt = {1, 2, 3, 4, 5};
  for (const auto& opt :
       {gen::GenerateOptions{.max_new_tokens = 20, .temperature = 0},
        gen::GenerateOptions{
            .max_new_tokens = 20, .temperature = 0.9, .top_k = 6, .top_p = 0.9, .seed = 5}}) {
    eager_cache.k.zero_();
    eager_cache.v.zero_();
    traced_cache.k.zero_();
    traced_cache.v.zero_();
    const std::vector<int64_t> a = gen::generate(eager, prompt, opt);
    const std::vector<int64_t> b = gen::generate(traced, prompt, opt);
    CHECK(a.size() == 20);
    CHECK(a == b);
  }
  const of::jit::TraceStats st = traced.stats();
  CHECK(st.recordings == 1);  // the position advanced 48 times: never recorded again
  CHECK(st.replays == 2 * (5 + 19) - 1);
  CHECK(traced.graph().find("fused_attention") != std::string::npos);  // the cache read in place
  // a steady state: no tensor allocation per token
  traced_cache.k.zero_();
  traced_cache.v.zero_();
  of::Tensor token = of::tensor(std::vector<int64_t>{1}, {1}, of::kInt64), p = pos_tensor(0);
  (void)traced(token, p);
  const uint64_t before = of::memory::stats().num_allocs;
  for (int64_t i = 1; i < 10; ++i) {
    *static_cast<int64_t*>(p.data_ptr()) = i;
    (void)traced(token, p);
  }
  CHECK(of::memory::stats().num_allocs == before);
}

TEST_CASE(
    "generate: a prefill writes the cache the decode steps would; traced with a symbolic length") {
  TinyGpt m(17, 16, 4, 2, 40, true);
  of::NoGradGuard ng;
  const of::Tensor ids =
      of::tensor(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {10}, of::kInt64);
  gen::KVCache a(2, 1, 4, 40, 4), b(2, 1, 4, 40, 4);
  const of::Tensor last = m.prefill(ids, a);
  of::Tensor lg;
  for (int64_t i = 0; i < 10; ++i) lg = m.step(ids.narrow(0, i, 1), pos_tensor(i), b);
  CHECK(of::allclose(last, lg, 1e-4, 1e-5));
  CHECK(of::allclose(a.k, b.k, 1e-5, 1e-6));
  CHECK(of::allclose(a.v, b.v, 1e-5, 1e-6));
  CHECK(of::allclose(last, m.forward(ids).select(0, 9), 1e-4, 1e-5));
  // traced: one symbolic recording serves every prompt length; generation through it gives the
  // tokens the token-by-token prompt gives
  gen::KVCache c(2, 1, 4, 40, 4), d(2, 1, 4, 40, 4);
  auto pre = of::jit::trace(
      [&](const of::Tensor& x) { return m.prefill(x, c); },
      of::jit::TraceOptions().dynamic(0, {{0, of::jit::Dim("L", 2, 24)}}).arena_outputs(true));
  auto step_c =
      of::jit::trace([&](const of::Tensor& t, const of::Tensor& p) { return m.step(t, p, c); },
                     of::jit::TraceOptions().arena_outputs(true));
  auto step_d = [&](const of::Tensor& t, const of::Tensor& p) { return m.step(t, p, d); };
  const gen::GenerateOptions o{.max_new_tokens = 12, .temperature = 0};
  size_t recordings = 0;
  for (int64_t len : {5, 9, 17, 3}) {
    CAPTURE(len);
    std::vector<int64_t> prompt;
    for (int64_t i = 0; i < len; ++i) prompt.push_back((i * 5 + 2) % 17);
    for (gen::KVCache* k : {&c, &d}) {
      k->k.zero_();
      k->v.zero_();
    }
    const auto with = gen::generate(step_c, prompt, o, {},
                                    [&](const of::Tensor& x) -> of::Tensor { return pre(x); });
    const auto without = gen::generate(step_d, prompt, o);
    CHECK(with == without);
    if (len == 5) recordings = pre.stats().recordings;
  }
  CHECK(pre.stats().recordings == recordings);  // lengths 9, 17 and 3 recorded nothing
  CHECK(pre.stats().instantiations >= 3);
  CHECK(th::throws_with([&] { (void)pre(of::zeros({30}, of::TensorOptions(of::kInt64))); },
                        {"L", "30"}));
}

TEST_CASE("generate: sampling is seeded, greedy takes the first largest, top-k/top-p restrict") {
  const of::Tensor logits = of::tensor(std::vector<float>{1.0f, 3.0f, 3.0f, 0.5f, 2.0f}, {5});
  uint64_t s = 0;
  CHECK(gen::sample(logits, {.temperature = 0}, s) == 1);
  // top_k 1 is greedy whatever the draw
  for (uint64_t seed = 0; seed < 20; ++seed) {
    s = seed;
    CHECK(gen::sample(logits, {.temperature = 1.0, .top_k = 1}, s) == 1);
  }
  // top_k 3: only tokens 1, 2 and 4; frequencies follow softmax over them
  std::map<int64_t, int> seen;
  s = 42;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++seen[gen::sample(logits, {.temperature = 1.0, .top_k = 3}, s)];
  CHECK(seen.count(0) == 0);
  CHECK(seen.count(3) == 0);
  const double z = 2 * std::exp(3.0) + std::exp(2.0);
  CHECK(double(seen[4]) / draws == doctest::Approx(std::exp(2.0) / z).epsilon(0.05));
  // top_p: the smallest set reaching p (tokens 1 and 2 hold 0.42 each of the full softmax)
  seen.clear();
  s = 7;
  for (int i = 0; i < 2000; ++i) ++seen[gen::sample(logits, {.temperature = 1.0, .top_p = 0.6}, s)];
  CHECK(seen.size() == 2);
  CHECK(seen.count(1) == 1);
  CHECK(seen.count(2) == 1);
  // a seed repeats its draws
  uint64_t a = 9, b = 9;
  for (int i = 0; i < 50; ++i)
    CHECK(gen::sample(logits, {.temperature = 2.0}, a) ==
          gen::sample(logits, {.temperature = 2.0}, b));
}

TEST_CASE("generate: stop tokens, the streaming callback and bad input") {
  // a step whose logits favour token (pos + 1) % 4: greedy decoding counts up
  const of::Tensor table =
      of::one_hot(
          of::tensor(std::vector<int64_t>{1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0}, {12}, of::kInt64), 4)
          .to(of::kFloat32);
  auto step = [&](const of::Tensor& t, const of::Tensor& p) {
    (void)t;
    return table.index_select(0, p.view({1})).view({4});
  };
  std::vector<int64_t> streamed;
  const auto out = gen::generate(
      step, {0}, {.max_new_tokens = 10, .temperature = 0, .stop_tokens = {3}}, [&](int64_t t) {
        streamed.push_back(t);
        return true;
      });
  CHECK(out == std::vector<int64_t>{1, 2, 3});
  CHECK(streamed == out);
  const auto two = gen::generate(step, {0}, {.max_new_tokens = 10, .temperature = 0},
                                 [](int64_t t) { return t != 2; });
  CHECK(two == std::vector<int64_t>{1, 2});
  CHECK(th::throws_with([&] { gen::generate(step, {}, {}); }, {"[generate]", "prompt is empty"}));
  uint64_t s = 0;
  CHECK(th::throws_with([&] { gen::sample(of::zeros({2, 3}), {}, s); }, {"[generate]", "(2, 3)"}));
  CHECK(th::throws_with([&] { gen::sample(of::zeros({3}), {.top_p = 0}, s); },
                        {"[generate]", "top_p"}));
  // the cache: a position past its end, a mismatched layer
  TinyGpt m(7, 8, 2, 1, 8, true);  // positions up to 8, a cache of 4
  gen::KVCache cache(1, 1, 2, 4, 4);
  of::NoGradGuard ng;
  const of::Tensor token = of::tensor(std::vector<int64_t>{1}, {1}, of::kInt64);
  CHECK(th::throws_with([&] { m.step(token, pos_tensor(4), cache); }, {"scatter"}));
  CHECK(th::throws_with(
      [&] {
        gen::cached_self_attention(*m.blocks[0]->self_attn, of::zeros({1, 1, 8}), cache, 1,
                                   pos_tensor(0));
      },
      {"[cached_self_attention]", "layer 1"}));
  CHECK(th::throws_with([&] { gen::KVCache(1, 1, 0, 4, 4); }, {"[KVCache]"}));
}

// generate.h: text generation with a key/value cache. `#include <oneflow/generate.h>`.
//
//   of::generation::KVCache cache(layers, 1, heads, max_len, head_dim);
//   auto step = [&](const of::Tensor& token, const of::Tensor& pos) {   // [1] int64, 0-d int64
//     of::Tensor h = tok(token.view({1, 1})) + pos_emb(pos.view({1})).unsqueeze(1);
//     for (int64_t l = 0; l < layers; ++l)
//       h = of::generation::cached_encoder_layer(*blocks[l], h, cache, l, pos);
//     return head(norm(h)).view({-1});                                   // logits [vocab]
//   };
//   auto traced = of::jit::trace(step, of::jit::TraceOptions().arena_outputs(true));
//   std::vector<int64_t> out = of::generation::generate(traced, prompt, options, on_token);
//
// NOTE [Traced decoding]: a decode step reads its position from a 0-d int64 tensor and writes
// the token's key and value into the preallocated cache at that position (Tensor::scatter_ with
// the position as the index), then attends over all max_len positions with the ones after the
// position masked out: every token runs the same ops on the same shapes, so the step traces
// once and replays for every token (no retrace as the position advances; with arena_outputs,
// no allocation per token). Its attention (matmul, scale, mask, softmax, matmul over the
// cache) is what the trace's attention rewrite fuses (NOTE [Fused attention]): the cache is
// read in place. The prompt goes through the same step a token at a time, or through a prefill
// step: the same layers over the whole prompt at once (pos 0, L tokens), traced with a
// symbolic L so that one recording serves every prompt length.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "oneflow/nn.h"
#include "oneflow/tensor.h"

namespace oneflow::generation {

// Keys and values of every layer: k and v [layers, batch, heads, max_len, head_dim], zeros.
struct KVCache {
  KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t head_dim,
          TensorOptions options = {});
  Tensor k, v;
  int64_t max_len() const { return k.size(3); }
};

// L tokens of `mha`'s self-attention (its in_proj and out_proj; no dropout): x [L, N, E] at
// positions pos, pos + 1, ... (pos a 0-d int64 tensor; the last position below max_len).
// Writes the tokens' keys and values into layer `layer` of `cache` at their positions; token i
// attends to positions 0..pos+i. Returns [L, N, E]. L = 1: one decode step; pos = 0 and the
// whole prompt: the prefill.
Tensor cached_self_attention(nn::MultiheadAttentionImpl& mha, const Tensor& x, KVCache& cache,
                             int64_t layer, const Tensor& pos);
// A TransformerEncoderLayer (pre- or post-norm, its activation; no dropout) for L tokens at
// pos, with its attention through the cache: x [L, N, E] -> [L, N, E]. Over a sequence (at
// once or a token at a time) it gives what forward() gives it under a causal mask.
Tensor cached_encoder_layer(nn::TransformerEncoderLayerImpl& layer, const Tensor& x, KVCache& cache,
                            int64_t index, const Tensor& pos);

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  double temperature = 1.0;  // 0: greedy (the first largest logit)
  int64_t top_k = 0;         // keep the k most likely tokens (0: all)
  double top_p = 1.0;        // keep the smallest set whose probability reaches top_p
  uint64_t seed = 0;         // sampling draws from this seed alone: a run repeats exactly
  std::vector<int64_t> stop_tokens;
};

// The next token from logits [vocab] (float32 or float64, on the CPU) as `options` say;
// `state` is the sampler's random state (generate() starts it from options.seed).
int64_t sample(const Tensor& logits, const GenerateOptions& options, uint64_t& state);

using DecodeStep = std::function<Tensor(const Tensor& token, const Tensor& pos)>;
// ids [L] int64 (the prompt, written into the cache at positions 0..L-1) -> the logits [vocab]
// after its last token: a traced one with a symbolic L serves every prompt length
// (TraceOptions::dynamic; NOTE [Traced decoding]).
using PrefillStep = std::function<Tensor(const Tensor& ids)>;
// Feeds `prompt` through `step` (token [1] int64, pos 0-d int64 -> logits [vocab]; it keeps
// its own cache), then samples up to max_new_tokens tokens, each fed back at the next
// position. Returns the new tokens (the last one a stop token when one was drawn). `on_token`
// sees each new token as it is drawn (streaming); returning false stops. The token and
// position tensors are made once and rewritten in place for every call. With `prefill`, the
// prompt goes through it in one call instead of through `step` a token at a time.
std::vector<int64_t> generate(const DecodeStep& step, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options = {},
                              const std::function<bool(int64_t)>& on_token = {},
                              const PrefillStep& prefill = {});
// The same with a traced step (of::jit::trace of a DecodeStep-shaped function).
template <class Traced>
requires requires(Traced& t, const Tensor& a) { t(a, a); }
std::vector<int64_t> generate(Traced& traced, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options = {},
                              const std::function<bool(int64_t)>& on_token = {},
                              const PrefillStep& prefill = {}) {
  return generate(
      DecodeStep([&](const Tensor& t, const Tensor& p) -> Tensor { return traced(t, p); }), prompt,
      options, on_token, prefill);
}

}  // namespace oneflow::generation

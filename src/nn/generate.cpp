// Text generation with a key/value cache (include/oneflow/generate.h; NOTE [Traced decoding]).
#include "oneflow/generate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <variant>

#include "oneflow/error.h"
#include "oneflow/ops.h"

namespace oneflow::generation {

KVCache::KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t head_dim,
                 TensorOptions options) {
  OF_CHECK(layers > 0 && batch > 0 && heads > 0 && max_len > 0 && head_dim > 0,
           "[KVCache] layers {}, batch {}, heads {}, max_len {} and head_dim {} must be positive",
           layers, batch, heads, max_len, head_dim);
  k = zeros({layers, batch, heads, max_len, head_dim}, options);
  v = zeros({layers, batch, heads, max_len, head_dim}, options);
}

Tensor cached_self_attention(nn::MultiheadAttentionImpl& mha, const Tensor& x, KVCache& cache,
                             int64_t layer, const Tensor& pos) {
  const int64_t E = mha.options.embed_dim(), H = mha.options.num_heads(), D = E / H;
  const int64_t Ly = cache.k.size(0), N = cache.k.size(1), T = cache.max_len();
  OF_CHECK(x.dim() == 3 && x.size(0) >= 1 && x.size(1) == N && x.size(2) == E,
           "[cached_self_attention] expected x [L, {}, {}] (tokens of the cache's batch), got {}",
           N, E, shape_str(x.sizes()));
  const int64_t L = x.size(0);
  OF_CHECK(L <= T, "[cached_self_attention] {} tokens do not fit a cache of {} positions", L, T);
  OF_CHECK(cache.k.size(2) == H && cache.k.size(4) == D,
           "[cached_self_attention] the cache holds {} heads of {}, the attention has {} of {}",
           cache.k.size(2), cache.k.size(4), H, D);
  OF_CHECK(layer >= 0 && layer < Ly, "[cached_self_attention] layer {} is outside the cache's {}",
           layer, Ly);
  OF_CHECK(pos.dim() == 0 && pos.dtype() == kInt64,
           "[cached_self_attention] the position must be a 0-d int64 tensor, got {} {}",
           dtype_name(pos.dtype()), shape_str(pos.sizes()));
  const Tensor qkv = linear(x, mha.in_proj_weight, mha.in_proj_bias);  // [L, N, 3E]
  auto heads = [&](int64_t part) {                                     // [N, H, L, D]
    return qkv.narrow(2, part * E, E).reshape({L, N, H, D}).permute({1, 2, 0, 3});
  };
  Tensor kc = cache.k.select(0, layer), vc = cache.v.select(0, layer);  // [N, H, T, D]
  // the tokens' positions: the slots scatter_ writes (an index read at each call)
  const Tensor at = pos + arange(L, TensorOptions(kInt64));  // [L]
  const Tensor slots = at.view({1, 1, L, 1}).expand({N, H, L, D});
  kc.scatter_(2, slots, heads(1));
  vc.scatter_(2, slots, heads(2));
  // token i attends to the positions up to its own (later slots hold other tokens' or zero
  // keys): an additive mask [L, T]
  const Tensor future =
      zeros({L, T}, x.options())
          .masked_fill(arange(T, TensorOptions(kInt64)).view({1, T}) > at.view({L, 1}), -INFINITY);
  const Tensor scores =
      matmul(heads(0), kc.transpose(2, 3)) * (1.0 / std::sqrt(double(D))) + future;
  const Tensor o = matmul(scores.softmax(-1), vc);  // [N, H, L, D]
  return mha.out_proj(o.permute({2, 0, 1, 3}).reshape({L, N, E}));
}

Tensor cached_encoder_layer(nn::TransformerEncoderLayerImpl& layer, const Tensor& x, KVCache& cache,
                            int64_t index, const Tensor& pos) {
  auto sa = [&](const Tensor& h) {
    return cached_self_attention(*layer.self_attn, h, cache, index, pos);
  };
  auto ff = [&](const Tensor& h) {
    Tensor a = layer.linear1(h);
    const auto& act = layer.options.activation();
    if (std::holds_alternative<enumtype::kGELU>(act)) a = a.gelu();
    else if (std::holds_alternative<enumtype::kReLU>(act)) a = a.relu();
    else a = std::get<std::function<Tensor(const Tensor&)>>(act)(a);
    return layer.linear2(a);
  };
  if (layer.options.norm_first()) {
    const Tensor h = x + sa(layer.norm1(x));
    return h + ff(layer.norm2(h));
  }
  const Tensor h = layer.norm1(x + sa(x));
  return layer.norm2(h + ff(h));
}

namespace {
// splitmix64: the sampler's generator (the same draws on every platform)
uint64_t next(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

int64_t sample(const Tensor& logits, const GenerateOptions& o, uint64_t& state) {
  OF_CHECK(logits.dim() == 1 && logits.numel() > 0 && logits.device().is_cpu() &&
               (logits.dtype() == kFloat32 || logits.dtype() == kFloat64),
           "[generate] expected logits [vocab] of float32/float64 on the CPU, got {} {} on {}",
           dtype_name(logits.dtype()), shape_str(logits.sizes()), logits.device().str());
  OF_CHECK(o.temperature >= 0 && o.top_k >= 0 && o.top_p > 0 && o.top_p <= 1,
           "[generate] temperature {} must be >= 0, top_k {} >= 0 and top_p {} in (0, 1]",
           o.temperature, o.top_k, o.top_p);
  // read in place (no tensor is made per token: a traced decode loop allocates nothing)
  const int64_t V = logits.numel(), st = logits.stride(0);
  std::vector<double> l(static_cast<size_t>(V));
  if (logits.dtype() == kFloat32) {
    const float* q = static_cast<const float*>(logits.data_ptr());
    for (int64_t i = 0; i < V; ++i) l[size_t(i)] = double(q[i * st]);
  } else {
    const double* q = static_cast<const double*>(logits.data_ptr());
    for (int64_t i = 0; i < V; ++i) l[size_t(i)] = q[i * st];
  }
  if (o.temperature == 0)  // greedy: the first largest logit
    return int64_t(std::max_element(l.begin(), l.end()) - l.begin());
  // candidates by logit, largest first (ties: the smaller token)
  std::vector<int64_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::vector<double> p(static_cast<size_t>(keep));
  const double top = l[size_t(idx[0])];
  double total = 0;
  for (int64_t i = 0; i < keep; ++i)
    total += p[size_t(i)] = std::exp((l[size_t(idx[size_t(i)])] - top) / o.temperature);
  if (o.top_p < 1) {  // the smallest prefix whose probability reaches top_p
    double acc = 0;
    int64_t n = 0;
    while (n < keep && acc < o.top_p * total) acc += p[size_t(n++)];
    keep = std::max<int64_t>(n, 1);
    total = 0;
    for (int64_t i = 0; i < keep; ++i) total += p[size_t(i)];
  }
  const double u = double(next(state) >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += p[size_t(i)];
    if (u < acc) return idx[size_t(i)];
  }
  return idx[size_t(keep - 1)];
}

std::vector<int64_t> generate(const DecodeStep& step, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options,
                              const std::function<bool(int64_t)>& on_token,
                              const PrefillStep& prefill) {
  OF_CHECK(!prompt.empty(), "[generate] the prompt is empty (it needs at least one token)");
  OF_CHECK(options.max_new_tokens >= 0, "[generate] max_new_tokens {} is negative",
           options.max_new_tokens);
  Tensor token = zeros({1}, TensorOptions(kInt64)), pos = zeros({}, TensorOptions(kInt64));
  auto* tp = static_cast<int64_t*>(token.data_ptr());
  auto* pp = static_cast<int64_t*>(pos.data_ptr());
  uint64_t state = options.seed;
  int64_t at = 0;
  Tensor logits;
  if (prefill) {  // the whole prompt in one call
    logits = prefill(tensor(prompt, {int64_t(prompt.size())}, kInt64));
    at = int64_t(prompt.size());
  } else {
    for (int64_t t : prompt) {
      *tp = t;
      *pp = at++;
      logits = step(token, pos);
    }
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t t = sample(logits, options, state);
    out.push_back(t);
    if (on_token && !on_token(t)) break;
    if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), t) !=
        options.stop_tokens.end())
      break;
    if (i + 1 == options.max_new_tokens) break;
    *tp = t;
    *pp = at++;
    logits = step(token, pos);
  }
  return out;
}

}  // namespace oneflow::generation

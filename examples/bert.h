// bert.h: a BERT encoder written with of::nn whose parameter names are those of Hugging Face's
// BertModel (embeddings.word_embeddings.weight, encoder.layer.0.attention.self.query.weight,
// ...), readers for its config.json and its model.safetensors, and mean pooling. Used by
// examples/bert_embed.cpp and its test (tests/test_serving.cpp), and bench/bench_bert.cpp.
#pragma once
#include <oneflow/oneflow.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace bert {

namespace nn = of::nn;

struct Config {
  int64_t vocab_size = 30522, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12,
          intermediate_size = 3072, max_position_embeddings = 512, type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
};

// The numeric fields of a Hugging Face config.json (other fields are ignored).
inline Config read_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw of::Error("[bert] cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  Config c;
  auto field = [&](const char* name, auto& out) {
    const std::regex re(std::string("\"") + name + "\"\\s*:\\s*([-+0-9.eE]+)");
    std::smatch m;
    if (std::regex_search(text, m, re))
      out = static_cast<std::decay_t<decltype(out)>>(std::stod(m[1]));
  };
  field("vocab_size", c.vocab_size);
  field("hidden_size", c.hidden_size);
  field("num_hidden_layers", c.num_hidden_layers);
  field("num_attention_heads", c.num_attention_heads);
  field("intermediate_size", c.intermediate_size);
  field("max_position_embeddings", c.max_position_embeddings);
  field("type_vocab_size", c.type_vocab_size);
  field("layer_norm_eps", c.layer_norm_eps);
  if (c.hidden_size % c.num_attention_heads != 0)
    throw of::Error("[bert] hidden_size must be a multiple of num_attention_heads");
  return c;
}

struct DenseNormImpl : nn::Module {  // attention.output / output: dense, dropout, LayerNorm
  DenseNormImpl(int64_t in, int64_t out, double eps) {
    dense = register_module("dense", nn::Linear(in, out));
    LayerNorm = register_module("LayerNorm", nn::LayerNorm(nn::LayerNormOptions({out}).eps(eps)));
  }
  of::Tensor forward(const of::Tensor& x, const of::Tensor& residual) {
    return LayerNorm(dense(x) + residual);
  }
  nn::Linear dense{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
};
OF_MODULE(DenseNorm);

struct SelfAttentionImpl : nn::Module {
  explicit SelfAttentionImpl(const Config& c) : heads(c.num_attention_heads) {
    query = register_module("query", nn::Linear(c.hidden_size, c.hidden_size));
    key = register_module("key", nn::Linear(c.hidden_size, c.hidden_size));
    value = register_module("value", nn::Linear(c.hidden_size, c.hidden_size));
  }
  // x [B, S, H], additive mask [B, 1, 1, S] -> context [B, S, H]
  of::Tensor forward(const of::Tensor& x, const of::Tensor& mask_add) {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), d = h / heads;
    auto split = [&](const of::Tensor& t) { return t.view({b, s, heads, d}).transpose(1, 2); };
    of::Tensor q = split(query(x)), k = split(key(x)), v = split(value(x));
    of::Tensor scores = of::matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(d))) + mask_add;
    return of::matmul(scores.softmax(-1), v).transpose(1, 2).reshape({b, s, h});
  }
  int64_t heads;
  nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
};
OF_MODULE(SelfAttention);

struct AttentionImpl : nn::Module {
  explicit AttentionImpl(const Config& c) {
    self = register_module("self", SelfAttention(c));
    output = register_module("output", DenseNorm(c.hidden_size, c.hidden_size, c.layer_norm_eps));
  }
  SelfAttention self{nullptr};
  DenseNorm output{nullptr};
};
OF_MODULE(Attention);

struct IntermediateImpl : nn::Module {
  explicit IntermediateImpl(const Config& c) {
    dense = register_module("dense", nn::Linear(c.hidden_size, c.intermediate_size));
  }
  nn::Linear dense{nullptr};
};
OF_MODULE(Intermediate);

struct LayerImpl : nn::Module {
  explicit LayerImpl(const Config& c) {
    attention = register_module("attention", Attention(c));
    intermediate = register_module("intermediate", Intermediate(c));
    output =
        register_module("output", DenseNorm(c.intermediate_size, c.hidden_size, c.layer_norm_eps));
  }
  of::Tensor forward(const of::Tensor& x, const of::Tensor& mask_add) {
    of::Tensor a = attention->output(attention->self(x, mask_add), x);
    return output(of::gelu(intermediate->dense(a)), a);
  }
  Attention attention{nullptr};
  Intermediate intermediate{nullptr};
  DenseNorm output{nullptr};
};
OF_MODULE(Layer);

struct EmbeddingsImpl : nn::Module {
  explicit EmbeddingsImpl(const Config& c) {
    word_embeddings =
        register_module("word_embeddings", nn::Embedding(c.vocab_size, c.hidden_size));
    position_embeddings = register_module("position_embeddings",
                                          nn::Embedding(c.max_position_embeddings, c.hidden_size));
    token_type_embeddings =
        register_module("token_type_embeddings", nn::Embedding(c.type_vocab_size, c.hidden_size));
    LayerNorm = register_module(
        "LayerNorm", nn::LayerNorm(nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
  }
  nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr},
      token_type_embeddings{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
};
OF_MODULE(Embeddings);

struct EncoderImpl : nn::Module {
  explicit EncoderImpl(const Config& c) {
    layer = register_module("layer", nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(Layer(c));
  }
  nn::ModuleList layer{nullptr};
};
OF_MODULE(Encoder);

// BertModel without the pooler: ids [B, S] (int64), mask [B, S] (1 = token, 0 = padding) ->
// hidden states [B, S, H].
struct BertImpl : nn::Module {
  explicit BertImpl(const Config& c) {
    embeddings = register_module("embeddings", Embeddings(c));
    encoder = register_module("encoder", Encoder(c));
  }
  of::Tensor forward(const of::Tensor& ids, const of::Tensor& mask) {
    const int64_t s = ids.size(1);
    const of::Tensor pos = of::arange(s, of::TensorOptions(of::kInt64));
    const of::Tensor types = of::zeros_like(ids);
    of::Tensor h = embeddings->word_embeddings(ids) + embeddings->position_embeddings(pos) +
                   embeddings->token_type_embeddings(types);
    h = embeddings->LayerNorm(h);
    const of::Tensor mask_add = ((1.0 - mask) * -10000.0).unsqueeze(1).unsqueeze(2);
    for (size_t i = 0; i < encoder->layer->size(); ++i)
      h = encoder->layer->ptr<LayerImpl>(i)->forward(h, mask_add);
    return h;
  }
  Embeddings embeddings{nullptr};
  Encoder encoder{nullptr};
};
OF_MODULE(Bert);

// Mean of the hidden states over the tokens the mask keeps: [B, H].
inline of::Tensor mean_pool(const of::Tensor& hidden, const of::Tensor& mask) {
  const of::Tensor m = mask.unsqueeze(2);
  return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0);
}

// Copies a Hugging Face checkpoint's tensors (model.safetensors; "bert." prefixes dropped, dtypes
// converted) into the model's parameters by name; every parameter must be found (the pooler,
// task heads and position_ids buffers are skipped).
inline void load_weights(Bert& model, const std::string& path) {
  auto params = model->named_parameters();
  std::set<std::string> missing;
  for (const auto& item : params) missing.insert(item.key());
  of::NoGradGuard ng;
  for (auto& [raw, t] : of::load_tensors(path)) {
    const std::string name = raw.rfind("bert.", 0) == 0 ? raw.substr(5) : raw;
    const of::Tensor* p = params.find(name);
    if (!p) continue;
    if (!(p->sizes() == t.sizes()))
      throw of::Error("[bert] " + name + " has shape " + of::shape_str(t.sizes()) +
                      " in the checkpoint, " + of::shape_str(p->sizes()) + " in the model");
    of::Tensor(*p).copy_(t.to(p->dtype()));
    missing.erase(name);
  }
  if (!missing.empty())
    throw of::Error("[bert] the checkpoint lacks " + *missing.begin() + " (and " +
                    std::to_string(missing.size() - 1) + " more)");
}

}  // namespace bert

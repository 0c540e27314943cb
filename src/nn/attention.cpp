// MultiheadAttention and TransformerEncoderLayer (libtorch 1.13 semantics, sequence-first).
#include <cmath>
#include <limits>
#include <ostream>

#include "oneflow/nn.h"

namespace oneflow::nn {

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& o)
    : Module("MultiheadAttention"), options(o) {
  OF_CHECK(o.embed_dim() > 0 && o.num_heads() > 0 && o.embed_dim() % o.num_heads() == 0,
           "[MultiheadAttention] embed_dim {} must be a positive multiple of num_heads {}",
           o.embed_dim(), o.num_heads());
  OF_CHECK(o.dropout() >= 0 && o.dropout() < 1,
           "[MultiheadAttention] dropout must be in [0, 1), got {}", o.dropout());
  const int64_t e = o.embed_dim();
  in_proj_weight = register_parameter("in_proj_weight", oneflow::empty({3 * e, e}));
  if (o.bias()) in_proj_bias = register_parameter("in_proj_bias", oneflow::empty({3 * e}));
  out_proj = register_module("out_proj", Linear(LinearOptions(e, e).bias(o.bias())));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key,
                                                           const Tensor& value,
                                                           const Tensor& key_padding_mask,
                                                           bool need_weights,
                                                           const Tensor& attn_mask) {
  const int64_t E = options.embed_dim(), H = options.num_heads(), D = E / H;
  OF_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3,
           "[MultiheadAttention] expected [L, N, E] query and [S, N, E] key/value, got {}, {}, {}",
           shape_str(query.sizes()), shape_str(key.sizes()), shape_str(value.sizes()));
  const int64_t L = query.size(0), N = query.size(1), S = key.size(0);
  OF_CHECK(query.size(2) == E && key.size(2) == E && value.size(2) == E && key.size(1) == N &&
               value.size(1) == N && value.size(0) == S,
           "[MultiheadAttention] shapes {}, {}, {} do not match embed_dim {} (query [L, N, E], "
           "key and value [S, N, E])",
           shape_str(query.sizes()), shape_str(key.sizes()), shape_str(value.sizes()), E);
  // projections: one GEMM for self-attention, three otherwise
  Tensor q, k, v;
  auto w = [&](int64_t i) { return in_proj_weight.narrow(0, i * E, E); };
  auto b = [&](int64_t i) {
    return in_proj_bias.defined() ? in_proj_bias.narrow(0, i * E, E) : Tensor();
  };
  if (query.is_same(key) && key.is_same(value)) {
    std::vector<Tensor> qkv = linear(query, in_proj_weight, in_proj_bias).chunk(3, -1);
    q = qkv[0];
    k = qkv[1];
    v = qkv[2];
  } else {
    q = linear(query, w(0), b(0));
    k = linear(key, w(1), b(1));
    v = linear(value, w(2), b(2));
  }
  // [len, N, E] -> [N, H, len, D]
  auto heads = [&](const Tensor& t, int64_t len) {
    return t.reshape({len, N, H, D}).permute({1, 2, 0, 3});
  };
  q = heads(q, L);
  k = heads(k, S);
  v = heads(v, S);
  // one additive float mask [N or 1, 1, L or 1, S]: -inf where attention is not allowed
  Tensor mask;
  const ScalarType ft = q.dtype();
  if (attn_mask.defined()) {
    OF_CHECK(attn_mask.dim() == 2 && attn_mask.size(0) == L && attn_mask.size(1) == S,
             "[MultiheadAttention] attn_mask must be [L, S] = ({}, {}), got {}", L, S,
             shape_str(attn_mask.sizes()));
    mask = attn_mask.dtype() == kBool
               ? zeros({L, S}, ft).masked_fill(attn_mask, -std::numeric_limits<double>::infinity())
               : attn_mask.to(ft);
    mask = mask.view({1, 1, L, S});
  }
  if (key_padding_mask.defined()) {
    OF_CHECK(key_padding_mask.dim() == 2 && key_padding_mask.size(0) == N &&
                 key_padding_mask.size(1) == S,
             "[MultiheadAttention] key_padding_mask must be [N, S] = ({}, {}), got {}", N, S,
             shape_str(key_padding_mask.sizes()));
    Tensor kp = key_padding_mask.dtype() == kBool
                    ? zeros({N, S}, ft)
                          .masked_fill(key_padding_mask, -std::numeric_limits<double>::infinity())
                    : key_padding_mask.to(ft);
    kp = kp.view({N, 1, 1, S});
    mask = mask.defined() ? mask + kp : kp;
  }
  const double p = is_training() ? options.dropout() : 0.0;
  Tensor out, weights;
  if (need_weights) {
    Tensor scores = matmul(q * (1.0 / std::sqrt(double(D))), k.transpose(-2, -1));
    if (mask.defined()) scores = scores + mask;
    Tensor attn = softmax(scores, -1);
    weights = attn.mean({1});  // averaged over heads: [N, L, S]
    if (p > 0) attn = dropout(attn, p, true);
    out = matmul(attn, v);
  } else {
    out = scaled_dot_product_attention(q, k, v, mask, p);
  }
  // [N, H, L, D] -> [L, N, E]
  out = out.permute({2, 0, 1, 3}).reshape({L, N, E});
  return {out_proj(out), weights};
}

void MultiheadAttentionImpl::pretty_print(std::ostream& s) const {
  s << "MultiheadAttention(embed_dim=" << options.embed_dim()
    << ", num_heads=" << options.num_heads() << ", dropout=" << options.dropout() << ")";
}

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& o)
    : Module("TransformerEncoderLayer"), options(o) {
  if (const auto* f = std::get_if<std::function<Tensor(const Tensor&)>>(&o.activation()))
    OF_CHECK(bool(*f), "[TransformerEncoderLayer] the activation function is empty");
  self_attn = register_module(
      "self_attn",
      MultiheadAttention(MultiheadAttentionOptions(o.d_model(), o.nhead()).dropout(o.dropout())));
  linear1 = register_module("linear1", Linear(o.d_model(), o.dim_feedforward()));
  dropout = register_module("dropout", Dropout(o.dropout()));
  linear2 = register_module("linear2", Linear(o.dim_feedforward(), o.d_model()));
  norm1 =
      register_module("norm1", LayerNorm(LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps())));
  norm2 =
      register_module("norm2", LayerNorm(LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps())));
  dropout1 = register_module("dropout1", Dropout(o.dropout()));
  dropout2 = register_module("dropout2", Dropout(o.dropout()));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask) {
  auto sa = [&](const Tensor& x) {
    return dropout1(std::get<0>(self_attn(x, x, x, src_key_padding_mask, false, src_mask)));
  };
  auto ff = [&](const Tensor& x) {
    Tensor h = linear1(x);
    const auto& act = options.activation();
    if (std::holds_alternative<enumtype::kGELU>(act)) h = h.gelu();
    else if (std::holds_alternative<enumtype::kReLU>(act)) h = h.relu();
    else h = std::get<std::function<Tensor(const Tensor&)>>(act)(h);
    return dropout2(linear2(dropout(h)));
  };
  if (options.norm_first()) {
    Tensor x = src + sa(norm1(src));
    return x + ff(norm2(x));
  }
  Tensor x = norm1(src + sa(src));
  return norm2(x + ff(x));
}

void TransformerEncoderLayerImpl::pretty_print(std::ostream& s) const {
  s << "TransformerEncoderLayer(d_model=" << options.d_model() << ", nhead=" << options.nhead()
    << ", dim_feedforward=" << options.dim_feedforward() << ", dropout=" << options.dropout()
    << ", activation=" << enumtype::get_enum_name(options.activation()) << ")";
}

}  // namespace oneflow::nn

// The layers of nn/extra.h: the Transformer family, Bilinear, Fold/Unfold, PixelShuffle,
// InstanceNorm, CosineSimilarity, PairwiseDistance (composites of public ops; fold/unfold are
// the im2col/col2im ops of src/ops/nn_extra.cpp).
#include "oneflow/nn/extra.h"

#include <cmath>
#include <limits>
#include <ostream>

namespace oneflow {

namespace {

void need(const char* op, const Tensor& t, const char* what) {
  if (!t.defined()) fail("[{}] {} is undefined", op, what);
}

void check_broadcast(const char* op, const Tensor& a, const Tensor& b) {
  const int64_t n = std::max(a.dim(), b.dim());
  for (int64_t i = 1; i <= n; ++i) {
    const int64_t x = i <= a.dim() ? a.size(-i) : 1, y = i <= b.dim() ? b.size(-i) : 1;
    if (x != y && x != 1 && y != 1)
      fail("[{}] the shapes of x1 {} and x2 {} do not broadcast", op, shape_str(a.sizes()),
           shape_str(b.sizes()));
  }
}

}  // namespace

// ---------------------------------------------------------------- root functions

Tensor pixel_shuffle(const Tensor& input, int64_t r) {
  const char* op = "pixel_shuffle";
  need(op, input, "input");
  if (input.dim() < 3)
    fail("[{}] expected an input of at least 3 dims [*, C, H, W], got {}", op,
         shape_str(input.sizes()));
  if (r <= 0) fail("[{}] upscale_factor must be positive, got {}", op, r);
  const int64_t c = input.size(-3), h = input.size(-2), w = input.size(-1);
  if (c % (r * r) != 0)
    fail(
        "[{}] expects its input's channel dimension to be divisible by the square of "
        "upscale_factor, but input.size(-3)={} is not divisible by {} (input {})",
        op, c, r * r, shape_str(input.sizes()));
  std::vector<int64_t> batch(input.sizes().begin(), input.sizes().end() - 3);
  const int64_t b = int64_t(batch.size());
  std::vector<int64_t> s = batch;
  for (int64_t v : {c / (r * r), r, r, h, w}) s.push_back(v);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  for (int64_t v : {0, 3, 1, 4, 2}) perm.push_back(b + v);
  std::vector<int64_t> o = batch;
  for (int64_t v : {c / (r * r), h * r, w * r}) o.push_back(v);
  return input.reshape(s).permute(perm).reshape(o);
}

Tensor pixel_unshuffle(const Tensor& input, int64_t r) {
  const char* op = "pixel_unshuffle";
  need(op, input, "input");
  if (input.dim() < 3)
    fail("[{}] expected an input of at least 3 dims [*, C, H, W], got {}", op,
         shape_str(input.sizes()));
  if (r <= 0) fail("[{}] downscale_factor must be positive, got {}", op, r);
  const int64_t c = input.size(-3), h = input.size(-2), w = input.size(-1);
  if (h % r != 0 || w % r != 0)
    fail(
        "[{}] expects height and width of its input to be divisible by downscale_factor {}, "
        "got {}",
        op, r, shape_str(input.sizes()));
  std::vector<int64_t> batch(input.sizes().begin(), input.sizes().end() - 3);
  const int64_t b = int64_t(batch.size());
  std::vector<int64_t> s = batch;
  for (int64_t v : {c, h / r, r, w / r, r}) s.push_back(v);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  for (int64_t v : {0, 2, 4, 1, 3}) perm.push_back(b + v);
  std::vector<int64_t> o = batch;
  for (int64_t v : {c * r * r, h / r, w / r}) o.push_back(v);
  return input.reshape(s).permute(perm).reshape(o);
}

Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight,
                const Tensor& bias) {
  const char* op = "bilinear";
  need(op, input1, "input1");
  need(op, input2, "input2");
  need(op, weight, "weight");
  if (weight.dim() != 3)
    fail("[{}] expected a 3-D weight [out, in1, in2], got {}", op, shape_str(weight.sizes()));
  const int64_t O = weight.size(0), I = weight.size(1), J = weight.size(2);
  if (input1.dim() < 1 || input1.dim() != input2.dim() || input1.size(-1) != I ||
      input2.size(-1) != J ||
      !(input1.sizes().slice(0, input1.dim() - 1) == input2.sizes().slice(0, input2.dim() - 1)))
    fail(
        "[{}] input1 {} and input2 {} must share their leading dims and end in in1 = {} and "
        "in2 = {} (weight {})",
        op, shape_str(input1.sizes()), shape_str(input2.sizes()), I, J, shape_str(weight.sizes()));
  if (bias.defined() && !(bias.dim() == 1 && bias.size(0) == O))
    fail("[{}] expected bias of shape ({}), got {}", op, O, shape_str(bias.sizes()));
  Tensor t = matmul(input1, weight.permute({1, 0, 2}).reshape({I, O * J})).unflatten(-1, {O, J});
  Tensor y = (t * input2.unsqueeze(-2)).sum({-1});
  return bias.defined() ? y + bias : y;
}

Tensor instance_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const Tensor& running_mean, const Tensor& running_var, bool use_input_stats,
                     double momentum, double eps, bool) {
  const char* op = "instance_norm";
  need(op, input, "input");
  if (input.dim() < 3)
    fail("[{}] expected an input [N, C, *] with at least one spatial dim, got {}", op,
         shape_str(input.sizes()));
  const int64_t C = input.size(1);
  for (auto [t, what] : {std::pair{&weight, "weight"},
                         {&bias, "bias"},
                         {&running_mean, "running_mean"},
                         {&running_var, "running_var"}})
    if (t->defined() && !(t->dim() == 1 && t->size(0) == C))
      fail("[{}] expected {} of shape ({}) for input {}, got {}", op, what, C,
           shape_str(input.sizes()), shape_str(t->sizes()));
  std::vector<int64_t> dims, bshape(size_t(input.dim()), 1);
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  bshape[1] = C;
  auto bc = [&](const Tensor& t) { return t.view(bshape); };
  Tensor y;
  if (use_input_stats) {
    const Tensor mean = input.mean(dims, true);
    const Tensor var = input.var(dims, false, true);
    y = (input - mean) / (var + eps).sqrt();
    if (running_mean.defined() || running_var.defined()) {
      NoGradGuard g;
      const int64_t n = input.numel() / std::max<int64_t>(1, input.size(0) * C);
      Tensor rm = running_mean, rv = running_var;
      if (rm.defined())
        rm.copy_(running_mean * (1 - momentum) +
                 mean.mean({0}).reshape({C}).to(running_mean.dtype()) * momentum);
      if (rv.defined())
        rv.copy_(running_var * (1 - momentum) +
                 (var * (double(n) / double(std::max<int64_t>(1, n - 1))))
                         .mean({0})
                         .reshape({C})
                         .to(running_var.dtype()) *
                     momentum);
    }
  } else {
    if (!running_mean.defined() || !running_var.defined())
      fail("[{}] running_mean and running_var must be defined when use_input_stats is false", op);
    y = (input - bc(running_mean)) / (bc(running_var) + eps).sqrt();
  }
  if (weight.defined()) y = y * bc(weight);
  if (bias.defined()) y = y + bc(bias);
  return y;
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  const char* op = "cosine_similarity";
  need(op, x1, "x1");
  need(op, x2, "x2");
  check_broadcast(op, x1, x2);
  const int64_t nd = std::max(x1.dim(), x2.dim());
  if (dim < -nd || dim >= std::max<int64_t>(nd, 1))
    fail("[{}] dim {} is out of range for inputs {} and {}", op, dim, shape_str(x1.sizes()),
         shape_str(x2.sizes()));
  // max(||x||, eps) as sqrt(max(||x||^2, eps^2)): the same value, a finite gradient at zero
  const Tensor n1 = (x1 * x1).sum({dim}, true).clamp_min(eps * eps).sqrt();
  const Tensor n2 = (x2 * x2).sum({dim}, true).clamp_min(eps * eps).sqrt();
  return ((x1 / n1) * (x2 / n2)).sum({dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const char* op = "pairwise_distance";
  need(op, x1, "x1");
  need(op, x2, "x2");
  check_broadcast(op, x1, x2);
  const int64_t d = std::max<int64_t>(std::max(x1.dim(), x2.dim()) - 1, 0);
  return norm(x1 - x2 + eps, p, {d}, keepdim);
}

namespace nn {

// ---------------------------------------------------------------- functional

namespace functional {
Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight,
                const Tensor& bias) {
  return oneflow::bilinear(input1, input2, weight, bias);
}
Tensor fold(const Tensor& input, const FoldFuncOptions& o) {
  if (input.defined() && input.dim() != 2 && input.dim() != 3)
    fail(
        "[fold] Input Error: only unbatched (2D) or batched (3D) input tensors are supported "
        "(got {}D, shape {})",
        input.dim(), shape_str(input.sizes()));
  return col2im(input, o.output_size(), o.kernel_size(), o.dilation(), o.padding(), o.stride());
}
Tensor unfold(const Tensor& input, const UnfoldFuncOptions& o) {
  if (input.defined() && input.dim() != 4)
    fail("[unfold] Input Error: only 4D input tensors are supported (got {}D, shape {})",
         input.dim(), shape_str(input.sizes()));
  return im2col(input, o.kernel_size(), o.dilation(), o.padding(), o.stride());
}
Tensor pixel_shuffle(const Tensor& input, const PixelShuffleFuncOptions& o) {
  return oneflow::pixel_shuffle(input, o.upscale_factor());
}
Tensor pixel_unshuffle(const Tensor& input, const PixelUnshuffleFuncOptions& o) {
  return oneflow::pixel_unshuffle(input, o.downscale_factor());
}
Tensor instance_norm(const Tensor& input, const InstanceNormFuncOptions& o) {
  return oneflow::instance_norm(input, o.weight(), o.bias(), o.running_mean(), o.running_var(),
                                o.use_input_stats(), o.momentum(), o.eps());
}
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, const CosineSimilarityFuncOptions& o) {
  return oneflow::cosine_similarity(x1, x2, o.dim(), o.eps());
}
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, const PairwiseDistanceFuncOptions& o) {
  return oneflow::pairwise_distance(x1, x2, o.p(), o.eps(), o.keepdim());
}
}  // namespace functional

namespace {

Tensor activate(const activation_t& act, const Tensor& h) {
  if (std::holds_alternative<enumtype::kGELU>(act)) return h.gelu();
  if (std::holds_alternative<enumtype::kReLU>(act)) return h.relu();
  return std::get<std::function<Tensor(const Tensor&)>>(act)(h);
}

// A copy of a layer with the same weights (libtorch clones the prototype layer).
template <class Holder> Holder copy_layer(const Holder& proto) {
  Holder fresh(proto->options);
  fresh->load_state_dict(proto->state_dict());
  fresh->train(proto->is_training());
  return fresh;
}

}  // namespace

// ---------------------------------------------------------------- TransformerDecoderLayer

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& o)
    : Module("TransformerDecoderLayer"), options(o) {
  if (const auto* f = std::get_if<std::function<Tensor(const Tensor&)>>(&o.activation()))
    OF_CHECK(bool(*f), "[TransformerDecoderLayer] the activation function is empty");
  const auto mha = MultiheadAttentionOptions(o.d_model(), o.nhead()).dropout(o.dropout());
  self_attn = register_module("self_attn", MultiheadAttention(mha));
  multihead_attn = register_module("multihead_attn", MultiheadAttention(mha));
  linear1 = register_module("linear1", Linear(o.d_model(), o.dim_feedforward()));
  dropout = register_module("dropout", Dropout(o.dropout()));
  linear2 = register_module("linear2", Linear(o.dim_feedforward(), o.d_model()));
  const auto ln = LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps());
  norm1 = register_module("norm1", LayerNorm(ln));
  norm2 = register_module("norm2", LayerNorm(ln));
  norm3 = register_module("norm3", LayerNorm(ln));
  dropout1 = register_module("dropout1", Dropout(o.dropout()));
  dropout2 = register_module("dropout2", Dropout(o.dropout()));
  dropout3 = register_module("dropout3", Dropout(o.dropout()));
}

void TransformerDecoderLayerImpl::reset_parameters() {
  self_attn->reset_parameters();
  multihead_attn->reset_parameters();
  linear1->reset_parameters();
  linear2->reset_parameters();
  norm1->reset_parameters();
  norm2->reset_parameters();
  norm3->reset_parameters();
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory,
                                            const Tensor& tgt_mask, const Tensor& memory_mask,
                                            const Tensor& tgt_key_padding_mask,
                                            const Tensor& memory_key_padding_mask) {
  OF_CHECK(tgt.defined() && memory.defined() && tgt.dim() == 3 && memory.dim() == 3 &&
               tgt.size(1) == memory.size(1) && tgt.size(2) == options.d_model() &&
               memory.size(2) == options.d_model(),
           "[TransformerDecoderLayer] expected tgt [T, N, {}] and memory [S, N, {}], got {} and {}",
           options.d_model(), options.d_model(),
           tgt.defined() ? shape_str(tgt.sizes()) : "undefined",
           memory.defined() ? shape_str(memory.sizes()) : "undefined");
  auto sa = [&](const Tensor& x) {
    return dropout1(std::get<0>(self_attn(x, x, x, tgt_key_padding_mask, false, tgt_mask)));
  };
  auto ca = [&](const Tensor& x) {
    return dropout2(std::get<0>(
        multihead_attn(x, memory, memory, memory_key_padding_mask, false, memory_mask)));
  };
  auto ff = [&](const Tensor& x) {
    return dropout3(linear2(dropout(activate(options.activation(), linear1(x)))));
  };
  if (options.norm_first()) {
    Tensor x = tgt + sa(norm1(tgt));
    x = x + ca(norm2(x));
    return x + ff(norm3(x));
  }
  Tensor x = norm1(tgt + sa(tgt));
  x = norm2(x + ca(x));
  return norm3(x + ff(x));
}

void TransformerDecoderLayerImpl::pretty_print(std::ostream& s) const {
  s << "TransformerDecoderLayer(d_model=" << options.d_model() << ", nhead=" << options.nhead()
    << ", dim_feedforward=" << options.dim_feedforward() << ", dropout=" << options.dropout()
    << ", activation=" << enumtype::get_enum_name(options.activation()) << ")";
}

// ---------------------------------------------------------------- TransformerEncoder/Decoder

TransformerEncoderImpl::TransformerEncoderImpl(TransformerEncoderOptions o)
    : Module("TransformerEncoder"), options(std::move(o)) {
  OF_CHECK(!options.encoder_layer().is_empty(), "[TransformerEncoder] encoder_layer is empty");
  OF_CHECK(options.num_layers() > 0, "[TransformerEncoder] num_layers must be positive, got {}",
           options.num_layers());
  layers = register_module("layers", ModuleList());
  for (int64_t i = 0; i < options.num_layers(); ++i)
    layers->push_back(copy_layer(options.encoder_layer()));
  if (!options.norm().is_empty()) {
    norm = options.norm();
    register_module("norm", norm.ptr());
  }
}

void TransformerEncoderImpl::reset_parameters() {
  for (size_t i = 0; i < layers->size(); ++i) {
    auto l = layers->ptr<TransformerEncoderLayerImpl>(i);
    l->self_attn->reset_parameters();
    l->linear1->reset_parameters();
    l->linear2->reset_parameters();
    l->norm1->reset_parameters();
    l->norm2->reset_parameters();
  }
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const Tensor& src_mask,
                                       const Tensor& src_key_padding_mask) {
  Tensor out = src;
  for (size_t i = 0; i < layers->size(); ++i)
    out = layers->ptr<TransformerEncoderLayerImpl>(i)->forward(out, src_mask, src_key_padding_mask);
  if (!norm.is_empty()) out = norm.forward(out);
  return out;
}

TransformerDecoderImpl::TransformerDecoderImpl(TransformerDecoderOptions o)
    : Module("TransformerDecoder"), options(std::move(o)) {
  OF_CHECK(!options.decoder_layer().is_empty(), "[TransformerDecoder] decoder_layer is empty");
  OF_CHECK(options.num_layers() > 0, "[TransformerDecoder] num_layers must be positive, got {}",
           options.num_layers());
  layers = register_module("layers", ModuleList());
  for (int64_t i = 0; i < options.num_layers(); ++i)
    layers->push_back(copy_layer(options.decoder_layer()));
  if (!options.norm().is_empty()) {
    norm = options.norm();
    register_module("norm", norm.ptr());
  }
}

void TransformerDecoderImpl::reset_parameters() {
  for (size_t i = 0; i < layers->size(); ++i)
    layers->ptr<TransformerDecoderLayerImpl>(i)->reset_parameters();
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt, const Tensor& memory,
                                       const Tensor& tgt_mask, const Tensor& memory_mask,
                                       const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask) {
  Tensor out = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    out = layers->ptr<TransformerDecoderLayerImpl>(i)->forward(
        out, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask);
  if (!norm.is_empty()) out = norm.forward(out);
  return out;
}

// ---------------------------------------------------------------- Transformer

TransformerImpl::TransformerImpl(TransformerOptions o)
    : Module("Transformer"), options(std::move(o)) {
  if (!options.custom_encoder().is_empty()) {
    encoder = options.custom_encoder();
  } else {
    encoder = AnyModule(TransformerEncoder(
        TransformerEncoderOptions(TransformerEncoderLayerOptions(options.d_model(), options.nhead())
                                      .dim_feedforward(options.dim_feedforward())
                                      .dropout(options.dropout())
                                      .activation(options.activation()),
                                  options.num_encoder_layers())
            .norm(AnyModule(LayerNorm(LayerNormOptions({options.d_model()}))))));
  }
  if (!options.custom_decoder().is_empty()) {
    decoder = options.custom_decoder();
  } else {
    decoder = AnyModule(TransformerDecoder(
        TransformerDecoderOptions(TransformerDecoderLayerOptions(options.d_model(), options.nhead())
                                      .dim_feedforward(options.dim_feedforward())
                                      .dropout(options.dropout())
                                      .activation(options.activation()),
                                  options.num_decoder_layers())
            .norm(AnyModule(LayerNorm(LayerNormOptions({options.d_model()}))))));
  }
  register_module("encoder", encoder.ptr());
  register_module("decoder", decoder.ptr());
  reset_parameters();
}

void TransformerImpl::reset_parameters() {
  for (Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask,
                                const Tensor& tgt_mask, const Tensor& memory_mask,
                                const Tensor& src_key_padding_mask,
                                const Tensor& tgt_key_padding_mask,
                                const Tensor& memory_key_padding_mask) {
  OF_CHECK(src.defined() && tgt.defined() && src.dim() == 3 && tgt.dim() == 3,
           "[Transformer] expected 3-D src [S, N, E] and tgt [T, N, E], got {} and {}",
           src.defined() ? shape_str(src.sizes()) : "undefined",
           tgt.defined() ? shape_str(tgt.sizes()) : "undefined");
  OF_CHECK(src.size(1) == tgt.size(1),
           "[Transformer] the batch number of src {} and tgt {} must be equal",
           shape_str(src.sizes()), shape_str(tgt.sizes()));
  OF_CHECK(src.size(2) == options.d_model() && tgt.size(2) == options.d_model(),
           "[Transformer] the feature number of src {} and tgt {} must be equal to d_model {}",
           shape_str(src.sizes()), shape_str(tgt.sizes()), options.d_model());
  Tensor memory = encoder.forward(src, src_mask, src_key_padding_mask);
  return decoder.forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                         memory_key_padding_mask);
}

Tensor TransformerImpl::generate_square_subsequent_mask(int64_t sz) {
  OF_CHECK(sz >= 0,
           "[Transformer] input size must be non-negative to generate a valid square "
           "subsequent mask, but got {}",
           sz);
  return triu(full({sz, sz}, -std::numeric_limits<double>::infinity()), 1);
}

// ---------------------------------------------------------------- Bilinear

BilinearImpl::BilinearImpl(const BilinearOptions& o) : Module("Bilinear"), options(o) {
  OF_CHECK(
      o.in1_features() > 0 && o.in2_features() > 0 && o.out_features() > 0,
      "[Bilinear] in1_features, in2_features and out_features must be positive, got {}, {}, {}",
      o.in1_features(), o.in2_features(), o.out_features());
  weight = register_parameter(
      "weight", oneflow::empty({o.out_features(), o.in1_features(), o.in2_features()}));
  if (o.bias()) bias = register_parameter("bias", oneflow::empty({o.out_features()}));
  reset_parameters();
}

void BilinearImpl::reset_parameters() {
  const double bound = 1.0 / std::sqrt(double(weight.size(1)));
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor BilinearImpl::forward(const Tensor& input1, const Tensor& input2) {
  return oneflow::bilinear(input1, input2, weight, bias);
}

void BilinearImpl::pretty_print(std::ostream& s) const {
  s << "Bilinear(in1_features=" << options.in1_features()
    << ", in2_features=" << options.in2_features() << ", out_features=" << options.out_features()
    << ", bias=" << (options.bias() ? "true" : "false") << ")";
}

// ---------------------------------------------------------------- small modules

namespace {
std::string arr(const ExpandingArray<2>& a) {
  return "[" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + "]";
}
}  // namespace

void FoldImpl::pretty_print(std::ostream& s) const {
  s << "Fold(output_size=" << arr(options.output_size())
    << ", kernel_size=" << arr(options.kernel_size()) << ", dilation=" << arr(options.dilation())
    << ", padding=" << arr(options.padding()) << ", stride=" << arr(options.stride()) << ")";
}
void UnfoldImpl::pretty_print(std::ostream& s) const {
  s << "Unfold(kernel_size=" << arr(options.kernel_size())
    << ", dilation=" << arr(options.dilation()) << ", padding=" << arr(options.padding())
    << ", stride=" << arr(options.stride()) << ")";
}
void PixelShuffleImpl::pretty_print(std::ostream& s) const {
  s << "PixelShuffle(upscale_factor=" << options.upscale_factor() << ")";
}
void PixelUnshuffleImpl::pretty_print(std::ostream& s) const {
  s << "PixelUnshuffle(downscale_factor=" << options.downscale_factor() << ")";
}
void CosineSimilarityImpl::pretty_print(std::ostream& s) const {
  s << "CosineSimilarity(dim=" << options.dim() << ", eps=" << options.eps() << ")";
}
void PairwiseDistanceImpl::pretty_print(std::ostream& s) const {
  s << "PairwiseDistance(p=" << options.p() << ", eps=" << options.eps()
    << ", keepdim=" << (options.keepdim() ? "true" : "false") << ")";
}

// ---------------------------------------------------------------- InstanceNorm

InstanceNormImplBase::InstanceNormImplBase(const InstanceNormOptions& o, const char* name,
                                           int64_t dim)
    : NormImplBase(name, o.num_features(), o.affine(), o.track_running_stats()),
      options(o),
      dim_(dim) {}

Tensor InstanceNormImplBase::forward(const Tensor& input) {
  OF_CHECK(input.defined() && (input.dim() == dim_ || input.dim() == dim_ - 1),
           "[{}] expected {}D (unbatched) or {}D (batched) input, got {}", name(), dim_ - 1, dim_,
           input.defined() ? shape_str(input.sizes()) : "an undefined tensor");
  const bool unbatched = input.dim() == dim_ - 1;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  OF_CHECK(x.size(1) == options.num_features(),
           "[{}] expected input with {} channels (num_features), got shape {}", name(),
           options.num_features(), shape_str(input.sizes()));
  Tensor y = oneflow::instance_norm(x, weight, bias, running_mean, running_var,
                                    is_training() || !options.track_running_stats(),
                                    options.momentum(), options.eps());
  return unbatched ? y.squeeze(0) : y;
}

void InstanceNormImplBase::pretty_print(std::ostream& s) const {
  s << name() << "(" << options.num_features() << ", eps=" << options.eps()
    << ", momentum=" << options.momentum() << ", affine=" << (options.affine() ? "true" : "false")
    << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false") << ")";
}

}  // namespace nn
}  // namespace oneflow

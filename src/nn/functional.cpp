// of::nn::functional: libtorch's option-taking forms, forwarding to the of:: ops or composing
// them (the composites get their gradients from the ops they use).
#include <cmath>

#include "nn/functional_detail.h"
#include "oneflow/nn/functional.h"

namespace oneflow::nn::functional {

namespace {

template <class... Ts, class V> bool holds(const V& v) {
  return (std::holds_alternative<Ts>(v) || ...);
}

// In-place forms of the composite activations write the result back into input.
Tensor write_back(Tensor& input, const Tensor& result, bool inplace) {
  if (!inplace) return result;
  input.copy_(result);
  return input;
}

template <size_t D>
Tensor conv_nd(const Tensor& input, const Tensor& weight, const ConvFuncOptions<D>& o) {
  if (const auto* p = std::get_if<ExpandingArray<D>>(&o.padding())) {
    if constexpr (D == 1)
      return oneflow::conv1d(input, weight, o.bias(), o.stride(), *p, o.dilation(), o.groups());
    else if constexpr (D == 2)
      return oneflow::conv2d(input, weight, o.bias(), o.stride(), *p, o.dilation(), o.groups());
    else return oneflow::conv3d(input, weight, o.bias(), o.stride(), *p, o.dilation(), o.groups());
  }
  const std::string_view mode = holds<enumtype::kSame>(o.padding()) ? "same" : "valid";
  if constexpr (D == 1)
    return oneflow::conv1d_padding(input, weight, o.bias(), o.stride(), mode, o.dilation(),
                                   o.groups());
  else if constexpr (D == 2)
    return oneflow::conv2d_padding(input, weight, o.bias(), o.stride(), mode, o.dilation(),
                                   o.groups());
  else
    return oneflow::conv3d_padding(input, weight, o.bias(), o.stride(), mode, o.dilation(),
                                   o.groups());
}

// An adaptive pool's output size with absent entries replaced by the input's trailing sizes
// (libtorch's _list_with_default).
template <size_t D>
DimVector adaptive_size(const char* op, const Tensor& input, const ExpandingArray<D>& s) {
  (void)op, (void)input;
  return s.ref().dims();
}
template <size_t D>
DimVector adaptive_size(const char* op, const Tensor& input,
                        const ExpandingArrayWithOptionalElem<D>& s) {
  OF_CHECK(input.defined(), "[{}] input is undefined", op);
  OF_CHECK(input.dim() >= int64_t(D), "[{}] expected an input with at least {} dims, got shape {}",
           op, D, shape_str(input.sizes()));
  DimVector r;
  for (size_t i = 0; i < D; ++i)
    r.push_back(s[i] ? *s[i] : input.size(input.dim() - int64_t(D) + int64_t(i)));
  return r;
}

}  // namespace

int64_t reduction_enum(const ReductionType& r) {
  if (holds<enumtype::kNone>(r)) return Reduction::None;
  if (holds<enumtype::kSum>(r)) return Reduction::Sum;
  return Reduction::Mean;
}

// ---------------------------------------------------------------- linear, embedding

Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& o) {
  int64_t padding_idx = -1;
  if (o.padding_idx()) {
    OF_CHECK(weight.defined() && weight.dim() == 2,
             "[embedding] expected a 2-D weight [num_embeddings, dim], got {}",
             weight.defined() ? shape_str(weight.sizes()) : std::string("an undefined tensor"));
    const int64_t n = weight.size(0), p = *o.padding_idx();
    OF_CHECK(p >= -n && p < n, "[embedding] padding_idx {} must be within num_embeddings {}", p, n);
    padding_idx = p < 0 ? p + n : p;
  }
  return oneflow::embedding(weight, input, padding_idx, o.scale_grad_by_freq());
}

// ---------------------------------------------------------------- convolution and pooling

Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& o) {
  return conv_nd<1>(input, weight, o);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& o) {
  return conv_nd<2>(input, weight, o);
}

Tensor conv3d(const Tensor& input, const Tensor& weight, const Conv3dFuncOptions& o) {
  return conv_nd<3>(input, weight, o);
}

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose1dFuncOptions& o) {
  return oneflow::conv_transpose1d(input, weight, o.bias(), o.stride(), o.padding(),
                                   o.output_padding(), o.groups(), o.dilation());
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose2dFuncOptions& o) {
  return oneflow::conv_transpose2d(input, weight, o.bias(), o.stride(), o.padding(),
                                   o.output_padding(), o.groups(), o.dilation());
}

Tensor conv_transpose3d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose3dFuncOptions& o) {
  return oneflow::conv_transpose3d(input, weight, o.bias(), o.stride(), o.padding(),
                                   o.output_padding(), o.groups(), o.dilation());
}

Tensor max_pool1d(const Tensor& input, const MaxPool1dFuncOptions& o) {
  return oneflow::max_pool1d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                             o.ceil_mode());
}

Tensor max_pool3d(const Tensor& input, const MaxPool3dFuncOptions& o) {
  return oneflow::max_pool3d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                             o.ceil_mode());
}

std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input,
                                                   const MaxPool1dFuncOptions& o) {
  return oneflow::max_pool1d_with_indices(input, o.kernel_size(), o.stride(), o.padding(),
                                          o.dilation(), o.ceil_mode());
}

std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input,
                                                   const MaxPool3dFuncOptions& o) {
  return oneflow::max_pool3d_with_indices(input, o.kernel_size(), o.stride(), o.padding(),
                                          o.dilation(), o.ceil_mode());
}

Tensor avg_pool1d(const Tensor& input, const AvgPool1dFuncOptions& o) {
  return oneflow::avg_pool1d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                             o.count_include_pad());
}

Tensor avg_pool3d(const Tensor& input, const AvgPool3dFuncOptions& o) {
  return oneflow::avg_pool3d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                             o.count_include_pad(), o.divisor_override());
}

Tensor adaptive_avg_pool1d(const Tensor& input, const AdaptiveAvgPool1dFuncOptions& o) {
  return oneflow::adaptive_avg_pool1d(input, o.output_size());
}

Tensor adaptive_avg_pool3d(const Tensor& input, const AdaptiveAvgPool3dFuncOptions& o) {
  return oneflow::adaptive_avg_pool3d(input,
                                      adaptive_size("adaptive_avg_pool3d", input, o.output_size()));
}

std::tuple<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& input,
                                                            const AdaptiveMaxPool1dFuncOptions& o) {
  return oneflow::adaptive_max_pool1d(input, o.output_size());
}
std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& input,
                                                            const AdaptiveMaxPool2dFuncOptions& o) {
  return oneflow::adaptive_max_pool2d(input,
                                      adaptive_size("adaptive_max_pool2d", input, o.output_size()));
}
std::tuple<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& input,
                                                            const AdaptiveMaxPool3dFuncOptions& o) {
  return oneflow::adaptive_max_pool3d(input,
                                      adaptive_size("adaptive_max_pool3d", input, o.output_size()));
}
Tensor adaptive_max_pool1d(const Tensor& input, const AdaptiveMaxPool1dFuncOptions& o) {
  return std::get<0>(adaptive_max_pool1d_with_indices(input, o));
}
Tensor adaptive_max_pool2d(const Tensor& input, const AdaptiveMaxPool2dFuncOptions& o) {
  return std::get<0>(adaptive_max_pool2d_with_indices(input, o));
}
Tensor adaptive_max_pool3d(const Tensor& input, const AdaptiveMaxPool3dFuncOptions& o) {
  return std::get<0>(adaptive_max_pool3d_with_indices(input, o));
}

Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& o) {
  return oneflow::max_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                             o.ceil_mode());
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input,
                                                   const MaxPool2dFuncOptions& o) {
  return oneflow::max_pool2d_with_indices(input, o.kernel_size(), o.stride(), o.padding(),
                                          o.dilation(), o.ceil_mode());
}

Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& o) {
  return oneflow::avg_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                             o.count_include_pad(), o.divisor_override());
}

Tensor adaptive_avg_pool2d(const Tensor& input, const AdaptiveAvgPool2dFuncOptions& o) {
  return oneflow::adaptive_avg_pool2d(input,
                                      adaptive_size("adaptive_avg_pool2d", input, o.output_size()));
}

// ---------------------------------------------------------------- normalization

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& o) {
  OF_CHECK(o.momentum().has_value(),
           "[batch_norm] momentum must be a number here (None, the cumulative average, is the "
           "BatchNorm module's)");
  return oneflow::batch_norm(input, o.weight(), o.bias(), running_mean, running_var, o.training(),
                             *o.momentum(), o.eps());
}

Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& o) {
  return oneflow::layer_norm(input, o.normalized_shape(), o.weight(), o.bias(), o.eps());
}

Tensor group_norm(const Tensor& input, const GroupNormFuncOptions& o) {
  return oneflow::group_norm(input, o.num_groups(), o.weight(), o.bias(), o.eps());
}

Tensor normalize(const Tensor& input, NormalizeFuncOptions o) {
  OF_CHECK(input.defined(), "[normalize] input is undefined");
  OF_CHECK(input.dim() > 0, "[normalize] expected at least a 1-D input, got a 0-D tensor");
  OF_CHECK(o.eps() >= 0, "[normalize] eps must be non-negative, got {}", o.eps());
  const Tensor denom = oneflow::norm(input, o.p(), {o.dim()}, true).clamp_min(o.eps());
  return input / denom;
}

// ---------------------------------------------------------------- dropout

Tensor dropout(Tensor input, const DropoutFuncOptions& o) {
  // of::dropout checks p (in eval mode too)
  if (o.inplace()) return oneflow::dropout_(input, o.p(), o.training());
  return oneflow::dropout(input, o.p(), o.training());
}

Tensor dropout2d(Tensor input, const Dropout2dFuncOptions& o) {
  OF_CHECK(o.p() >= 0 && o.p() <= 1,
           "[dropout2d] probability has to be between 0 and 1, but got {}", o.p());
  OF_CHECK(input.dim() == 3 || input.dim() == 4,
           "[dropout2d] expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape {}",
           shape_str(input.sizes()));
  if (!o.training() || o.p() == 0) return input;
  // one keep/scale factor per (sample, channel), broadcast over the spatial dims
  DimVector mshape(input.sizes().begin(), input.sizes().end());
  for (size_t d = mshape.size() - 2; d < mshape.size(); ++d) mshape[d] = 1;
  const Tensor mask = oneflow::dropout(ones(mshape, input.dtype()), o.p(), true);
  if (o.inplace()) return input.mul_(mask);
  return input * mask;
}

// ---------------------------------------------------------------- activations

Tensor relu(Tensor input, const ReLUFuncOptions& o) {
  return o.inplace() ? input.relu_() : oneflow::relu(input);
}

Tensor relu6(Tensor input, const ReLU6FuncOptions& o) {
  return o.inplace() ? input.clamp_(0, 6) : detail_hardtanh(input, 0, 6);
}

Tensor leaky_relu(Tensor input, const LeakyReLUFuncOptions& o) {
  return write_back(input, oneflow::where(input > 0, input, input * o.negative_slope()),
                    o.inplace());
}

namespace {
// alpha * (exp(x) - 1) for x <= 0 (the exp is taken of min(x, 0), so its gradient stays finite
// where the branch is not selected).
Tensor elu_impl(const Tensor& x, double alpha, double scale) {
  const Tensor neg = oneflow::expm1(x.clamp_max(0)) * (alpha * scale);
  return oneflow::where(x > 0, scale == 1.0 ? x : x * scale, neg);
}
}  // namespace

Tensor elu(Tensor input, const ELUFuncOptions& o) {
  return write_back(input, elu_impl(input, o.alpha(), 1.0), o.inplace());
}

Tensor selu(Tensor input, const SELUFuncOptions& o) {
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return write_back(input, elu_impl(input, kAlpha, kScale), o.inplace());
}

Tensor detail_hardtanh(const Tensor& x, double lo, double hi) {
  const Tensor c = oneflow::clamp(x, Scalar(lo), Scalar(hi));
  if (!x.requires_grad() || !is_grad_enabled()) return c;
  return oneflow::where((x > lo) & (x < hi), x, c.detach());
}

Tensor hardtanh(Tensor input, const HardtanhFuncOptions& o) {
  OF_CHECK(o.max_val() >= o.min_val(), "[hardtanh] max_val {} must be at least min_val {}",
           o.max_val(), o.min_val());
  if (o.inplace()) return input.clamp_(o.min_val(), o.max_val());
  return detail_hardtanh(input, o.min_val(), o.max_val());
}

Tensor softplus(const Tensor& input, const SoftplusFuncOptions& o) {
  OF_CHECK(o.beta() != 0, "[softplus] beta must be non-zero");
  const Tensor bx = input * o.beta();
  // log1p(exp(.)) of the clamped value: finite in both branches of the where.
  const Tensor soft = oneflow::log1p(oneflow::exp(bx.clamp_max(o.threshold()))) / o.beta();
  return oneflow::where(bx > o.threshold(), input, soft);
}

Tensor logsigmoid(const Tensor& input) {
  // min(x, 0) - log1p(exp(-|x|)); minimum's tie at x = 0 gives libtorch's slope 1/2 there (NOTE
  // [Edge gradients], tests/test_edge_grads.cpp), where clamp_max's gave 1
  return oneflow::minimum(input, Scalar(0)) - oneflow::log1p(oneflow::exp(-oneflow::abs(input)));
}

Tensor mish(const Tensor& input) { return input * oneflow::tanh(softplus(input)); }

Tensor softsign(const Tensor& input) { return input / (oneflow::abs(input) + 1); }

Tensor tanhshrink(const Tensor& input) { return input - oneflow::tanh(input); }

Tensor glu(const Tensor& input, const GLUFuncOptions& o) {
  OF_CHECK(input.defined() && input.dim() > 0,
           "[glu] does not support scalars because halving size must be even");
  const int64_t d = o.dim() < 0 ? o.dim() + input.dim() : o.dim();
  OF_CHECK(d >= 0 && d < input.dim(), "[glu] dim {} is out of range for shape {}", o.dim(),
           shape_str(input.sizes()));
  OF_CHECK(input.size(d) % 2 == 0,
           "[glu] halving dimension must be even, but dimension {} of shape {} is size {}", d,
           shape_str(input.sizes()), input.size(d));
  const int64_t h = input.size(d) / 2;
  return input.narrow(d, 0, h) * oneflow::sigmoid(input.narrow(d, h, h));
}

Tensor gelu(const Tensor& input, const GELUFuncOptions& o) {
  return oneflow::gelu(input, o.approximate());
}

Tensor silu(const Tensor& input) { return oneflow::silu(input); }

Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& o) {
  return oneflow::softmax(input, o.dim(), o.dtype());
}

Tensor softmin(const Tensor& input, const SoftminFuncOptions& o) {
  return oneflow::softmax(-input, o.dim(), o.dtype());
}

Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& o) {
  return oneflow::log_softmax(input, o.dim(), o.dtype());
}

// ---------------------------------------------------------------- losses

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& o) {
  return oneflow::l1_loss(input, target, reduction_enum(o.reduction()));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o) {
  return oneflow::mse_loss(input, target, reduction_enum(o.reduction()));
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& o,
                      double beta) {
  return oneflow::smooth_l1_loss(input, target, reduction_enum(o.reduction()),
                                 beta != 1.0 ? beta : o.beta());
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossFuncOptions& o) {
  OF_CHECK(o.delta() > 0, "[huber_loss] delta must be positive, got {}", o.delta());
  return oneflow::smooth_l1_loss(input, target, reduction_enum(o.reduction()), o.delta()) *
         o.delta();
}

Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivFuncOptions& o) {
  const auto& r = o.reduction();
  if (holds<enumtype::kBatchMean>(r)) {
    Tensor sum = oneflow::kl_div(input, target, Reduction::Sum, o.log_target());
    return input.dim() == 0 ? sum : sum / double(input.size(0));
  }
  const int64_t red = holds<enumtype::kNone>(r)  ? Reduction::None
                      : holds<enumtype::kSum>(r) ? Reduction::Sum
                                                 : Reduction::Mean;
  return oneflow::kl_div(input, target, red, o.log_target());
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& o) {
  return oneflow::binary_cross_entropy(input, target, o.weight(), reduction_enum(o.reduction()));
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& o) {
  return oneflow::binary_cross_entropy_with_logits(input, target, o.weight(), o.pos_weight(),
                                                   reduction_enum(o.reduction()));
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o) {
  return oneflow::nll_loss(input, target, o.weight(), reduction_enum(o.reduction()),
                           o.ignore_index());
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o) {
  return oneflow::cross_entropy(input, target, o.weight(), reduction_enum(o.reduction()),
                                o.ignore_index(), o.label_smoothing());
}

// ---------------------------------------------------------------- padding and resampling

Tensor pad(const Tensor& input, const PadFuncOptions& o) {
  const auto& m = o.mode();
  const char* mode = holds<enumtype::kReflect>(m)     ? "reflect"
                     : holds<enumtype::kReplicate>(m) ? "replicate"
                     : holds<enumtype::kCircular>(m)  ? "circular"
                                                      : "constant";
  return oneflow::pad(input, o.pad(), mode, o.value());
}

Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& o) {
  const auto& m = o.mode();
  const std::string mode = enumtype::get_enum_name(m);
  const bool nearest = holds<enumtype::kNearest>(m), bilinear = holds<enumtype::kBilinear>(m),
             area = holds<enumtype::kArea>(m);
  OF_CHECK(nearest || bilinear || area,
           "[interpolate] mode {} is not implemented (kNearest, kBilinear and kArea are)", mode);
  OF_CHECK(bilinear || !o.align_corners(),
           "[interpolate] align_corners option can only be set with the interpolating modes: "
           "linear | bilinear | bicubic | trilinear (mode is {})",
           mode);
  OF_CHECK(!o.antialias(), "[interpolate] antialias is not implemented");
  OF_CHECK(input.defined(), "[interpolate] input is undefined");
  OF_CHECK(input.dim() == 4, "[interpolate] mode {} expects a 4-D [N, C, H, W] input, got shape {}",
           mode, shape_str(input.sizes()));
  OF_CHECK(o.size() || o.scale_factor(),
           "[interpolate] either size or scale_factor should be defined");
  OF_CHECK(!(o.size() && o.scale_factor()),
           "[interpolate] only one of size or scale_factor should be defined");
  std::vector<int64_t> out(2);
  std::optional<double> sh, sw;
  if (o.size()) {
    OF_CHECK(o.size()->size() == 2,
             "[interpolate] size must have 2 entries for a 4-D input, got {}", o.size()->size());
    out = *o.size();
  } else {
    const std::vector<double>& s = *o.scale_factor();
    OF_CHECK(s.size() == 2,
             "[interpolate] scale_factor shape must match input shape: input is 2-D spatial, "
             "scale_factor has {} entries",
             s.size());
    for (size_t i = 0; i < 2; ++i) {
      OF_CHECK(s[i] > 0 && std::isfinite(s[i]),
               "[interpolate] scale_factor must be positive and finite, got {}", s[i]);
      out[i] = int64_t(std::floor(double(input.size(int64_t(i) + 2)) * s[i]));
    }
    if (!o.recompute_scale_factor().value_or(false)) {
      sh = s[0];
      sw = s[1];
    }
  }
  if (nearest) return upsample_nearest2d(input, out, sh, sw);
  if (bilinear) return upsample_bilinear2d(input, out, o.align_corners().value_or(false), sh, sw);
  return oneflow::adaptive_avg_pool2d(input, out);
}

}  // namespace oneflow::nn::functional

// nn/functional.h: of::nn::functional, libtorch 1.13's torch::nn::functional: the stateless
// forms of the layers, taking an XxxFuncOptions object (nn/options.h) after the tensors:
//   namespace F = of::nn::functional;
//   F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().label_smoothing(0.1));
//   F::interpolate(x, F::InterpolateFuncOptions().scale_factor({2, 2}).mode(of::kBilinear)
//                         .align_corners(false));
// Each forwards to the of:: op of the same name (ops_nn.h, ops_conv.h) or composes them, so
// autograd, dtypes and error messages are the ops'.
#pragma once
#include <tuple>

#include "oneflow/nn/options.h"
#include "oneflow/ops.h"
#include "oneflow/ops_conv.h"
#include "oneflow/ops_nn.h"

namespace oneflow::nn::functional {

// ---------------------------------------------------------------- linear, embedding
using oneflow::linear;
using oneflow::one_hot;
// Rows of weight at input's indices (note the order: indices first, unlike of::embedding).
Tensor embedding(const Tensor& input, const Tensor& weight,
                 const EmbeddingFuncOptions& options = {});

// ---------------------------------------------------------------- convolution and pooling
Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& options = {});
Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options = {});
Tensor conv3d(const Tensor& input, const Tensor& weight, const Conv3dFuncOptions& options = {});
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose1dFuncOptions& options = {});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose2dFuncOptions& options = {});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose3dFuncOptions& options = {});
Tensor max_pool1d(const Tensor& input, const MaxPool1dFuncOptions& options);
Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options);
Tensor max_pool3d(const Tensor& input, const MaxPool3dFuncOptions& options);
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input,
                                                   const MaxPool1dFuncOptions& options);
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input,
                                                   const MaxPool2dFuncOptions& options);
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input,
                                                   const MaxPool3dFuncOptions& options);
Tensor avg_pool1d(const Tensor& input, const AvgPool1dFuncOptions& options);
Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options);
Tensor avg_pool3d(const Tensor& input, const AvgPool3dFuncOptions& options);
Tensor adaptive_avg_pool1d(const Tensor& input, const AdaptiveAvgPool1dFuncOptions& options);
Tensor adaptive_avg_pool2d(const Tensor& input, const AdaptiveAvgPool2dFuncOptions& options);
Tensor adaptive_avg_pool3d(const Tensor& input, const AdaptiveAvgPool3dFuncOptions& options);
// The adaptive max pools return the maxima; the _with_indices forms add their indices.
Tensor adaptive_max_pool1d(const Tensor& input, const AdaptiveMaxPool1dFuncOptions& options);
Tensor adaptive_max_pool2d(const Tensor& input, const AdaptiveMaxPool2dFuncOptions& options);
Tensor adaptive_max_pool3d(const Tensor& input, const AdaptiveMaxPool3dFuncOptions& options);
std::tuple<Tensor, Tensor> adaptive_max_pool1d_with_indices(
    const Tensor& input, const AdaptiveMaxPool1dFuncOptions& options);
std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(
    const Tensor& input, const AdaptiveMaxPool2dFuncOptions& options);
std::tuple<Tensor, Tensor> adaptive_max_pool3d_with_indices(
    const Tensor& input, const AdaptiveMaxPool3dFuncOptions& options);

// ---------------------------------------------------------------- normalization
// Updates running_mean/var in place when options.training() (as at::batch_norm).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options = {});
Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& options);
Tensor group_norm(const Tensor& input, const GroupNormFuncOptions& options);
// x / max(||x||_p over options.dim(), eps).
Tensor normalize(const Tensor& input, NormalizeFuncOptions options = {});

// ---------------------------------------------------------------- dropout
Tensor dropout(Tensor input, const DropoutFuncOptions& options = {});
// Zeroes whole channels of [N, C, H, W] (or [C, H, W]) with probability p.
Tensor dropout2d(Tensor input, const Dropout2dFuncOptions& options = {});

// ---------------------------------------------------------------- activations
Tensor relu(Tensor input, const ReLUFuncOptions& options = {});
// min(max(x, 0), 6)
Tensor relu6(Tensor input, const ReLU6FuncOptions& options = {});
// x for x > 0, negative_slope * x otherwise.
Tensor leaky_relu(Tensor input, const LeakyReLUFuncOptions& options = {});
// x for x > 0, alpha * (exp(x) - 1) otherwise.
Tensor elu(Tensor input, const ELUFuncOptions& options = {});
// scale * elu(x, alpha) with PyTorch's SELU constants.
Tensor selu(Tensor input, const SELUFuncOptions& options = {});
// clamp(x, min_val, max_val)
Tensor hardtanh(Tensor input, const HardtanhFuncOptions& options = {});
// log(1 + exp(beta x)) / beta, and x where beta x > threshold.
Tensor softplus(const Tensor& input, const SoftplusFuncOptions& options = {});
// log(sigmoid(x)), computed stably.
Tensor logsigmoid(const Tensor& input);
// x * tanh(softplus(x))
Tensor mish(const Tensor& input);
// x / (1 + |x|)
Tensor softsign(const Tensor& input);
// x - tanh(x)
Tensor tanhshrink(const Tensor& input);
// a * sigmoid(b) for the two halves a, b of input along dim.
Tensor glu(const Tensor& input, const GLUFuncOptions& options = {});
Tensor gelu(const Tensor& input, const GELUFuncOptions& options = {});
Tensor silu(const Tensor& input);
Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& options);
// softmax(-x)
Tensor softmin(const Tensor& input, const SoftminFuncOptions& options);
Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& options);

// ---------------------------------------------------------------- losses
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options = {});
// libtorch 1.13 takes beta as a separate argument; a beta other than 1 here wins over
// options.beta().
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const SmoothL1LossFuncOptions& options = {}, double beta = 1.0);
// delta * smooth_l1_loss with beta = delta.
Tensor huber_loss(const Tensor& input, const Tensor& target,
                  const HuberLossFuncOptions& options = {});
// kBatchMean divides the summed loss by input.size(0).
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivFuncOptions& options = {});
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options = {});
Tensor binary_cross_entropy_with_logits(
    const Tensor& input, const Tensor& target,
    const BinaryCrossEntropyWithLogitsFuncOptions& options = {});
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options = {});
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyFuncOptions& options = {});

// ---------------------------------------------------------------- padding and resampling
Tensor pad(const Tensor& input, const PadFuncOptions& options);
// Resizes [N, C, H, W] to options.size() or by options.scale_factor() (output floor(in * s),
// sampled with step 1/s unless recompute_scale_factor).
Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& options = {});

// ---------------------------------------------------------------- attention
using oneflow::rms_norm;
using oneflow::scaled_dot_product_attention;

// The at::Reduction value (Reduction::Mean, ...) of a reduction tag.
int64_t reduction_enum(const ReductionType& reduction);

}  // namespace oneflow::nn::functional

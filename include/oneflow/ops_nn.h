// ops_nn.h: normalization, dropout, linear, losses and attention ops (libtorch's names and
// argument orders).
#pragma once
#include <optional>

#include "oneflow/ops.h"

namespace oneflow {

// How a loss reduces its per-element values (at::Reduction).
namespace Reduction {
enum Reduction { None, Mean, Sum };
}  // namespace Reduction

// ---------------------------------------------------------------- linear
// y = input @ weight^T + bias; input [..., in], weight [out, in], bias [out] (optional).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});

// ---------------------------------------------------------------- normalization
// Batch norm over N, C[, *] (at::batch_norm's order); training updates running stats in place.
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps, bool cudnn_enabled = false);
// Layer norm over the trailing dims `normalized_shape`; weight/bias have that shape.
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// Group norm of N, C[, *] in num_groups groups of channels; weight/bias are [C].
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// RMS norm over the trailing dims; eps defaults to the dtype's machine epsilon.
Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

// ---------------------------------------------------------------- dropout
// Zeroes elements with probability p (seeded generator) and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& input, double p, bool train);
// In-place dropout: writes the result into input.
Tensor& dropout_(Tensor& input, double p, bool train);

// ---------------------------------------------------------------- attention
// softmax(q k^T * scale + mask) v over [..., L, E] x [..., S, E] x [..., S, Ev]; a bool mask
// marks the keys to attend (true), a float mask is added; scale defaults to 1/sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

// ---------------------------------------------------------------- losses
// Cross entropy from logits [N, C, d...] ([C] unbatched) with class indices or probabilities.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     int64_t reduction = Reduction::Mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
// Negative log likelihood of log-probabilities [N, C, d...] at int64 class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                int64_t reduction = Reduction::Mean, int64_t ignore_index = -100);
// Squared error (input - target)^2.
Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction = Reduction::Mean);
// Absolute error |input - target|.
Tensor l1_loss(const Tensor& input, const Tensor& target, int64_t reduction = Reduction::Mean);
// Quadratic below beta, linear above (beta = 0: l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      int64_t reduction = Reduction::Mean, double beta = 1.0);
// Binary cross entropy of probabilities in [0, 1] (logs clamped at -100 as PyTorch).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            int64_t reduction = Reduction::Mean);
// Binary cross entropy of logits (numerically stable), with optional pos_weight per class.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {},
                                        int64_t reduction = Reduction::Mean);
// Kullback-Leibler divergence of log-probabilities input from target (log-space if log_target).
Tensor kl_div(const Tensor& input, const Tensor& target, int64_t reduction = Reduction::Mean,
              bool log_target = false);

}  // namespace oneflow

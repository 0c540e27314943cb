// activations.h: libtorch's root-namespace activation functions (torch::leaky_relu(x, 0.2),
// torch::hardswish_(x), ...) beside of::nn::functional's option-taking forms. The in-place `_`
// forms write the result into their argument; under autograd they stay differentiable (the
// value is computed from a copy of the input, which is what backward reads).
#pragma once
#include "oneflow/tensor.h"

namespace oneflow {

// x for x > 0, negative_slope * x otherwise.
Tensor leaky_relu(const Tensor& x, const Scalar& negative_slope = 0.01);
Tensor& leaky_relu_(Tensor& x, const Scalar& negative_slope = 0.01);
// scale * (x for x > 0, alpha * (exp(input_scale * x) - 1) otherwise).
Tensor elu(const Tensor& x, const Scalar& alpha = 1, const Scalar& scale = 1,
           const Scalar& input_scale = 1);
Tensor& elu_(Tensor& x, const Scalar& alpha = 1, const Scalar& scale = 1,
             const Scalar& input_scale = 1);
// elu with PyTorch's SELU constants.
Tensor selu(const Tensor& x);
Tensor& selu_(Tensor& x);
// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Tensor celu(const Tensor& x, const Scalar& alpha = 1.0);
Tensor& celu_(Tensor& x, const Scalar& alpha = 1.0);
// log(1 + exp(beta * x)) / beta, linear above threshold.
Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
// x clamped to [min_val, max_val].
Tensor hardtanh(const Tensor& x, const Scalar& min_val = -1, const Scalar& max_val = 1);
Tensor& hardtanh_(Tensor& x, const Scalar& min_val = -1, const Scalar& max_val = 1);
// relu6(x + 3) / 6.
Tensor hardsigmoid(const Tensor& x);
Tensor& hardsigmoid_(Tensor& x);
// x * relu6(x + 3) / 6.
Tensor hardswish(const Tensor& x);
Tensor& hardswish_(Tensor& x);
// x * tanh(softplus(x)).
Tensor mish(const Tensor& x);
Tensor& mish_(Tensor& x);
// log(sigmoid(x)), computed stably.
Tensor log_sigmoid(const Tensor& x);
// x for x > 0, weight * x otherwise; weight has 1 element or one per channel (dim 1).
Tensor prelu(const Tensor& x, const Tensor& weight);
// x where x > threshold, else value.
Tensor threshold(const Tensor& x, const Scalar& threshold, const Scalar& value);
Tensor& threshold_(Tensor& x, const Scalar& threshold, const Scalar& value);
// a * sigmoid(b) for the two halves a, b of x along dim.
Tensor glu(const Tensor& x, int64_t dim = -1);

}  // namespace oneflow

// libtorch's root-namespace activations (include/oneflow/activations.h), as composites of
// public ops (differentiable through them) or forwards to of::nn::functional.
#include "nn/functional_detail.h"
#include "oneflow/activations.h"

#include "oneflow/nn/functional.h"
#include "oneflow/ops.h"
#include "ops/checks.h"

namespace oneflow {

namespace F = nn::functional;

namespace {
// An in-place form: the result of f written into x. Under autograd f reads a copy of x, so the
// backward of f still sees the input it was given after x is overwritten.
template <class Fn> Tensor& in_place(Tensor& x, const char* op, Fn f) {
  if (!x.defined()) fail("[{}] input is undefined", op);
  const bool tracked = is_grad_enabled() && x.requires_grad();
  if (tracked && x.is_leaf())
    fail("[{}] a leaf tensor that requires grad is being used in an in-place operation", op);
  Tensor y = f(tracked ? x.clone() : x);
  x.copy_(y);
  return x;
}
}  // namespace

Tensor leaky_relu(const Tensor& x, const Scalar& s) {
  return F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(s.to_double()));
}
Tensor& leaky_relu_(Tensor& x, const Scalar& s) {
  return in_place(x, "leaky_relu_", [&](const Tensor& t) { return leaky_relu(t, s); });
}

Tensor elu(const Tensor& x, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
  check_float("elu", x);
  const double a = alpha.to_double(), sc = scale.to_double(), is = input_scale.to_double();
  Tensor neg = ((x * is).exp() - 1) * a;
  return where(x > 0, x, neg) * sc;
}
Tensor& elu_(Tensor& x, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
  return in_place(x, "elu_", [&](const Tensor& t) { return elu(t, alpha, scale, input_scale); });
}

Tensor selu(const Tensor& x) { return F::selu(x); }
Tensor& selu_(Tensor& x) {
  return in_place(x, "selu_", [](const Tensor& t) { return selu(t); });
}

Tensor celu(const Tensor& x, const Scalar& alpha) {
  check_float("celu", x);
  const double a = alpha.to_double();
  if (a == 0) fail("[celu] alpha must be nonzero (0 divides x), got 0");
  return x.relu() + minimum(zeros_like(x), ((x / a).exp() - 1) * a);
}
Tensor& celu_(Tensor& x, const Scalar& alpha) {
  return in_place(x, "celu_", [&](const Tensor& t) { return celu(t, alpha); });
}

Tensor softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  return F::softplus(
      x, F::SoftplusFuncOptions().beta(beta.to_double()).threshold(threshold.to_double()));
}

Tensor hardtanh(const Tensor& x, const Scalar& lo, const Scalar& hi) {
  return F::hardtanh(x, F::HardtanhFuncOptions().min_val(lo.to_double()).max_val(hi.to_double()));
}
Tensor& hardtanh_(Tensor& x, const Scalar& lo, const Scalar& hi) {
  return in_place(x, "hardtanh_", [&](const Tensor& t) { return hardtanh(t, lo, hi); });
}

Tensor hardsigmoid(const Tensor& x) {
  check_float("hardsigmoid", x);
  // (libtorch's slope: 1/6 strictly inside (-3, 3), 0 at the ends; NOTE [Edge gradients])
  return F::detail_hardtanh(x + 3, 0, 6) / 6;
}
Tensor& hardsigmoid_(Tensor& x) {
  return in_place(x, "hardsigmoid_", [](const Tensor& t) { return hardsigmoid(t); });
}

Tensor hardswish(const Tensor& x) {
  check_float("hardswish", x);
  return x * (x + 3).clamp(Scalar(0), Scalar(6)) / 6;
}
Tensor& hardswish_(Tensor& x) {
  return in_place(x, "hardswish_", [](const Tensor& t) { return hardswish(t); });
}

Tensor mish(const Tensor& x) { return F::mish(x); }
Tensor& mish_(Tensor& x) {
  return in_place(x, "mish_", [](const Tensor& t) { return mish(t); });
}

Tensor log_sigmoid(const Tensor& x) { return F::logsigmoid(x); }

Tensor prelu(const Tensor& x, const Tensor& weight) {
  check_float("prelu", x);
  if (!weight.defined()) fail("[prelu] weight is undefined");
  const int64_t n = weight.numel();
  Tensor w = weight;
  if (n != 1) {
    if (x.dim() < 2 || x.size(1) != n || weight.dim() != 1)
      fail(
          "[prelu] weight of shape {} needs 1 element or one per channel (dim 1) of the input "
          "of shape {}",
          shape_str(weight.sizes()), shape_str(x.sizes()));
    DimVector shape(size_t(x.dim()), 1);
    shape[1] = n;
    w = weight.reshape(shape);
  } else {
    w = weight.reshape({});
  }
  return where(x > 0, x, x * w);
}

Tensor threshold(const Tensor& x, const Scalar& th, const Scalar& value) {
  if (!x.defined()) fail("[threshold] input is undefined");
  return where(x > th, x, full_like(x, value));
}
Tensor& threshold_(Tensor& x, const Scalar& th, const Scalar& value) {
  return in_place(x, "threshold_", [&](const Tensor& t) { return threshold(t, th, value); });
}

Tensor glu(const Tensor& x, int64_t dim) { return F::glu(x, F::GLUFuncOptions(dim)); }

}  // namespace oneflow

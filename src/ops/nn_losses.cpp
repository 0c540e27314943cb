// Losses: cross_entropy (class indices; a fused op with its backward: meta, VJP, registration,
// kernels in src/cpu/losses.cpp, NOTE [nn kernels] in cpu/nn.cpp) and the losses written with
// public ops (nll, mse, l1, smooth l1, binary cross entropy with and without logits, kl_div).
#include <algorithm>

#include "autocast.h"
#include "cpu/losses.h"
#include "global/rules.h"
#include "oneflow/ops_nn.h"
#include "ops/nn_common.h"
#include "ops/nn_op_helpers.h"

namespace oneflow {
using namespace nn_detail;
namespace {

// ================================================================ cross entropy (class indices)
// inputs: x [N, C, inner] (any rank >= 2; class dim 1), target int64 [N, inner...], weight [C]
// (optional); attrs: reduction, ignore_index, label_smoothing;
// outputs: loss, per-row logsumexp [rows], total weight [] (sum of weights of kept targets).

// (CeGeom, ce_geom: ops/nn_common.h)

// The checks of cross_entropy() for a direct dispatch (the op takes x of at least 2 dims);
// the class indices' values are checked by the kernels, before they write.
CeGeom ce_check(const Tensor& x, const Tensor& t, const Tensor& w, const Attrs& a, const char* op) {
  check_float(op, x, "input");
  if (x.dim() < 2)
    fail("[{}] expected an input of shape (N, C, d1, ...), got {}", op, shape_str(x.sizes()));
  using A = CrossEntropyAttrs;
  check_reduction(A::get<"reduction">(a), op);
  const double smoothing = A::get<"label_smoothing">(a);
  if (!(smoothing >= 0.0 && smoothing <= 1.0))
    fail("[{}] label_smoothing must be between 0.0 and 1.0, got {}", op, smoothing);
  check_class_targets(x, t, w, A::get<"ignore_index">(a), op, false);
  if (w.defined()) check_param(w, x, DimVector{x.size(1)}, op, "weight");
  return ce_geom(x.sizes());
}

void ce_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const Tensor& t = in[1];
  const CeGeom g = ce_check(x, t, in[2], a, "cross_entropy");
  const int64_t reduction = CrossEntropyAttrs::get<"reduction">(a);
  if (reduction == Reduction::None) out.push_back({t.sizes().dims(), {}, 0, x.dtype(), x.device()});
  else out.push_back({{}, {}, 0, x.dtype(), x.device()});
  out.push_back({{g.rows}, {}, 0, x.dtype(), x.device()});
  out.push_back({{}, {}, 0, x.dtype(), x.device()});
}

// Backward inputs: g, x, target, weight, lse, total_weight; output: gx.
void ce_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "cross_entropy_backward";
  const Tensor& x = in[1];
  const CeGeom g = ce_check(x, in[2], in[3], a, op);
  const bool none = CrossEntropyAttrs::get<"reduction">(a) == Reduction::None;
  check_saved(in[0], x, none ? in[2].sizes() : IntArrayRef(), op, "grad_output");
  check_saved(in[4], x, DimVector{g.rows}, op, "logsumexp");
  check_saved(in[5], x, IntArrayRef(), op, "total_weight");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}

TensorList ce_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor w = CrossEntropyAttrs::get<"has_weight">(c.attrs()) ? c.input(2) : Tensor();
  Tensor gx = dispatch1(OF_OP("cross_entropy_backward"),
                        {g[0], c.input(0), c.input(1), w, c.output(1), c.output(2)}, c.attrs());
  return {gx, Tensor(), Tensor()};
}

// ================================================================ binary cross entropy
// inputs: x (probabilities), target (x's shape)[, weight (broadcast to x)]; no attrs;
// output: the per-element loss -w (t log x + (1 - t) log(1 - x)), each log clamped at -100.
// NOTE [BCE gradient]: the op decomposes into those public ops (every device), and autograd
// records it with libtorch's gradient instead of the composite's: where x is exactly 0 or 1
// (sigmoid saturates in float32) the composite's backward multiplies log's infinite slope by
// the clamp's zero mask, a NaN that a GAN's discriminator reaches within a few hundred steps;
// libtorch divides by max(x (1 - x), 1e-12) and stays finite. The target's gradient is
// libtorch's -logit(x) (infinite at x = 0 or 1, as there); the weight takes none (as
// in libtorch).

void bce_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const char* op = "binary_cross_entropy";
  if (in.size() < 2 || in.size() > 3) fail("[{}] takes 2 or 3 inputs, got {}", op, in.size());
  const Tensor& x = in[0];
  check_float(op, x, "input");
  check_same_shape(x, in[1], op);
  check_float(op, in[1], "target");
  if (in[1].dtype() != x.dtype())
    fail("[{}] target is {}, the input {}", op, dtype_name(in[1].dtype()), dtype_name(x.dtype()));
  if (in.size() == 3) {
    check_float(op, in[2], "weight");
    if (in[2].dtype() != x.dtype())
      fail("[{}] weight is {}, the input {}", op, dtype_name(in[2].dtype()), dtype_name(x.dtype()));
    if (!broadcasts_to(in[2].sizes(), x.sizes()))
      fail("[{}] weight of shape {} does not broadcast to the input shape {}", op,
           shape_str(in[2].sizes()), shape_str(x.sizes()));
  }
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}

Tensor bce_unweighted(const Tensor& x, const Tensor& t) {
  return -(t * x.log().clamp_min(-100.0) + (1.0 - t) * (1.0 - x).log().clamp_min(-100.0));
}

TensorList bce_decompose(const TensorList& in, const Attrs&) {
  Tensor l = bce_unweighted(in[0], in[1]);
  if (in.size() == 3) l = l * in[2];
  return {l};
}

TensorList bce_vjp(const VjpCtx& c, const TensorList& g) {
  const Tensor& x = c.input(0);
  const Tensor& t = c.input(1);
  const Tensor gw_ = c.num_inputs() == 3 ? g[0] * c.input(2) : g[0];
  Tensor gx, gt;
  if (c.needs_input_grad(0)) gx = gw_ * (x - t) / (x * (1.0 - x)).clamp_min(double(1e-12f));
  if (c.needs_input_grad(1)) gt = -gw_ * (x / (1.0 - x)).log();
  if (c.num_inputs() == 3) return {gx, gt, Tensor()};
  return {gx, gt};
}

}  // namespace

void register_loss_ops() {
  register_op({.name = "binary_cross_entropy",
               .traits = 0,
               .infer_meta = bce_meta,
               .decompose = bce_decompose,
               .vjp = bce_vjp,
               .save_inputs = in(0) | in(1) | in(2),
               .nondiff_inputs = in(2),
               .sbp_rule = &sbp_rules::kWholeValues,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cross_entropy",
               .traits = kWidens16Bit | kChecksIndices,
               .attr_names = CrossEntropyAttrs::names(),
               .attr_types = CrossEntropyAttrs::types(),
               .infer_meta = ce_meta,
               .cpu = cpu::cross_entropy,
               .vjp = ce_vjp,
               .save_inputs = in(0) | in(1) | in(2),
               .save_outputs = out(1) | out(2),
               .nondiff_inputs = in(1) | in(2),
               .sbp_rule = &sbp_rules::kRowLosses,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cross_entropy_backward",
               .traits = kWidens16Bit | kChecksIndices,
               .attr_names = CrossEntropyAttrs::names(),
               .attr_types = CrossEntropyAttrs::types(),
               .infer_meta = ce_bwd_meta,
               .cpu = cpu::cross_entropy_backward,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kRowLossesBackward});
}

// ================================================================ public functions

Tensor cross_entropy(const Tensor& input_arg, const Tensor& target, const Tensor& weight_arg,
                     int64_t reduction, int64_t ignore_index, double label_smoothing) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  // The probability-target form below is a composite of public ops that compares dtypes: the
  // arguments are cast once, as dispatch casts the op's (no second pass over the function).
  Tensor input = input_arg, weight = weight_arg;
  autocast_detail::autocast_args(OF_OP("cross_entropy"), {&input, &weight});
  const char* op = "cross_entropy";
  check_float(op, input, "input");
  check_reduction(reduction, op);
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    fail("[cross_entropy] label_smoothing must be between 0.0 and 1.0, got {}", label_smoothing);
  if (!target.defined()) fail("[cross_entropy] target is undefined");
  if (target.is_floating_point()) {
    // class probabilities: same shape as input
    check_same_shape(input, target, op,
                     " (floating-point targets are class probabilities of the input's shape; "
                     "class indices must be int64)");
    if (target.dtype() != input.dtype())
      fail("[cross_entropy] expected probability targets of the input's dtype {}, got {}",
           dtype_name(input.dtype()), dtype_name(target.dtype()));
    if (ignore_index >= 0)
      fail("[cross_entropy] ignore_index ({}) is not supported for probability targets",
           ignore_index);
    const int64_t cdim = input.dim() >= 2 ? 1 : 0;
    const int64_t C = input.size(cdim);
    if (weight.defined()) check_param(weight, input, DimVector{C}, op, "weight");
    Tensor t = target;
    if (label_smoothing > 0) t = t * (1.0 - label_smoothing) + label_smoothing / double(C);
    Tensor lp = log_softmax(input, cdim);
    Tensor prod = lp * t;
    if (weight.defined()) {
      DimVector ws(size_t(input.dim()), 1);
      ws[size_t(cdim)] = C;
      prod = prod * weight.reshape(ws);
    }
    Tensor l = -sum(prod, {cdim});
    if (reduction == Reduction::Mean) {
      const int64_t rows = input.numel() / std::max<int64_t>(C, 1);
      return l.sum() / double(rows);
    }
    return reduce_loss(l, reduction);
  }
  check_class_targets(input, target, weight, ignore_index, op);
  if (input.dim() == 1) {
    // unbatched: [C] with a 0-d target
    Tensor r = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight, reduction,
                             ignore_index, label_smoothing);
    return reduction == Reduction::None ? r.squeeze(0) : r;
  }
  // A global mean is the global sum over the global total weight: a mean of split rows would
  // average the pieces' means (the op's SBP rule splits rows for None and Sum only). Unweighted
  // label smoothing divides its term by the row count instead: that case runs on whole values.
  if (input.is_global() && reduction == Reduction::Mean && input.dim() == 2 &&
      (label_smoothing == 0.0 || weight.defined())) {
    TensorList r = dispatch(OF_OP("cross_entropy"), {input, target, weight},
                            CrossEntropyAttrs::make(int64_t(Reduction::Sum), ignore_index,
                                                    label_smoothing, weight.defined()));
    return r[0] / r[2].detach();
  }
  TensorList r =
      dispatch(OF_OP("cross_entropy"), {input, target, weight},
               CrossEntropyAttrs::make(reduction, ignore_index, label_smoothing, weight.defined()));
  return r[0];
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                int64_t ignore_index) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "nll_loss";
  check_float(op, input, "input");
  check_reduction(reduction, op);
  check_class_targets(input, target, weight, ignore_index, op);
  if (input.dim() == 1) {
    Tensor r = nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, reduction, ignore_index);
    return reduction == Reduction::None ? r.squeeze(0) : r;
  }
  const Tensor valid = target != ignore_index;
  const Tensor t0 = where(valid, target, Scalar(int64_t(0)));
  const Tensor picked = gather(input, 1, t0.unsqueeze(1)).squeeze(1);
  Tensor w = valid.to(input.dtype());
  if (weight.defined()) w = w * index_select(weight, 0, t0.flatten()).reshape(target.sizes());
  const Tensor l = -picked * w;
  if (reduction == Reduction::Mean) return l.sum() / w.sum();
  return reduce_loss(l, reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("mse_loss", input, "input");
  check_same_shape(input, target, "mse_loss");
  check_float("mse_loss", target, "target");
  check_reduction(reduction, "mse_loss");
  return reduce_loss((input - target).square(), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("l1_loss", input, "input");
  check_same_shape(input, target, "l1_loss");
  check_float("l1_loss", target, "target");
  check_reduction(reduction, "l1_loss");
  return reduce_loss((input - target).abs(), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, int64_t reduction, double beta) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("smooth_l1_loss", input, "input");
  check_same_shape(input, target, "smooth_l1_loss");
  check_float("smooth_l1_loss", target, "target");
  check_reduction(reduction, "smooth_l1_loss");
  if (!(beta >= 0)) fail("[smooth_l1_loss] beta must be non-negative, got {}", beta);
  const Tensor ad = (input - target).abs();
  if (beta == 0) return reduce_loss(ad, reduction);
  const Tensor l = where(ad < beta, ad.square() * (0.5 / beta), ad - 0.5 * beta);
  return reduce_loss(l, reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "binary_cross_entropy";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  if (weight.defined()) {
    check_float(op, weight, "weight");
    if (!broadcasts_to(weight.sizes(), input.sizes()))
      fail("[{}] weight of shape {} does not broadcast to the input shape {}", op,
           shape_str(weight.sizes()), shape_str(input.sizes()));
  }
  if (input.is_cpu() && input.numel() > 0) {
    const Tensor bad = (input < 0) | (input > 1);
    if (bad.any().item<bool>()) fail("[{}] all elements of input should be between 0 and 1", op);
  }
  // NOTE [BCE gradient]
  TensorList ins{input, target};
  if (weight.defined()) ins.push_back(weight);
  return reduce_loss(dispatch1(OF_OP("binary_cross_entropy"), std::move(ins)), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "binary_cross_entropy_with_logits";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  for (const Tensor* t : {&weight, &pos_weight}) {
    if (!t->defined()) continue;
    const char* what = t == &weight ? "weight" : "pos_weight";
    check_float(op, *t, what);
    if (!broadcasts_to(t->sizes(), input.sizes()))
      fail("[{}] {} of shape {} does not broadcast to the input shape {}", op, what,
           shape_str(t->sizes()), shape_str(input.sizes()));
  }
  // (1 - t) x + lw * (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t
  // (maximum's tie at x = 0 gives the slope -1/2 there, as libtorch's (sigmoid(x) - 1); relu's
  // 0 made the gradient at a logit of exactly 0 wrong: NOTE [Edge gradients])
  const Tensor sp = (-input.abs()).exp().log1p() + maximum(-input, Scalar(0));
  Tensor l;
  if (pos_weight.defined()) l = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * sp;
  else l = (1.0 - target) * input + sp;
  if (weight.defined()) l = l * weight;
  return reduce_loss(l, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, int64_t reduction, bool log_target) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "kl_div";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  Tensor l;
  if (log_target) {
    l = target.exp() * (target - input);
  } else {
    // xlogy(t, t) - t * input, with 0 * log(0) = 0
    const Tensor safe = where(target > 0, target, Scalar(1.0));
    l = target * safe.log() - target * input;
  }
  return reduce_loss(l, reduction);
}

}  // namespace oneflow

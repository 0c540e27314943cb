// The losses of nn/losses.h as compositions of public ops (ctc_loss is an op:
// src/ops/nn_extra.cpp), following ATen 1.13's formulas so values, gradients and reductions match
// libtorch.
#include "oneflow/nn/losses.h"

#include <cmath>
#include <numbers>

#include "oneflow/nn/extra.h"
#include "autocast.h"
#include "ops/checks.h"

namespace oneflow {

namespace {

Tensor reduce(const Tensor& loss, int64_t reduction, const char* op) {
  if (reduction == Reduction::Mean) return loss.mean();
  if (reduction == Reduction::Sum) return loss.sum();
  if (reduction == Reduction::None) return loss;
  fail("[{}] unknown reduction {}", op, reduction);
}

// Raises unless a and b broadcast together.
void check_broadcast(const char* op, const Tensor& a, const char* an, const Tensor& b,
                     const char* bn) {
  const int64_t n = std::max(a.dim(), b.dim());
  for (int64_t i = 1; i <= n; ++i) {
    const int64_t x = i <= a.dim() ? a.size(-i) : 1, y = i <= b.dim() ? b.size(-i) : 1;
    if (x != y && x != 1 && y != 1)
      fail("[{}] the shapes of {} {} and {} {} do not broadcast", op, an, shape_str(a.sizes()), bn,
           shape_str(b.sizes()));
  }
}

void check_same(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  if (!(a.sizes() == b.sizes()))
    fail("[{}] {} {} and {} {} must have the same shape", op, an, shape_str(a.sizes()), bn,
         shape_str(b.sizes()));
}

}  // namespace

Tensor hinge_embedding_loss(const Tensor& self, const Tensor& target, double margin,
                            int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "hinge_embedding_loss";
  check_defined(op, {{&self, "input"}, {&target, "target"}});
  check_broadcast(op, self, "input", target, "target");
  Tensor zeros = zeros_like(self);
  Tensor margin_clamp = (margin - self).clamp_min(0);
  Tensor out = where(target != 1, margin_clamp, zeros) + where(target != -1, self, zeros);
  return reduce(out, reduction, op);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "soft_margin_loss";
  check_defined(op, {{&input, "input"}, {&target, "target"}});
  check_same(op, input, "input", target, "target");
  return reduce(log1p(exp(-input * target)), reduction, op);
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "multilabel_margin_loss";
  check_defined(op, {{&input, "input"}, {&target, "target"}});
  if (!(input.dim() == 1 || input.dim() == 2) || !(input.sizes() == target.sizes()))
    fail("[{}] expected input [C] or [N, C] and a target of the same shape, got {} and {}", op,
         shape_str(input.sizes()), shape_str(target.sizes()));
  if (target.dtype() != kInt64)
    fail("[{}] expected an int64 target, got {}", op, dtype_name(target.dtype()));
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;
  const Tensor y = input.dim() == 1 ? target.unsqueeze(0) : target;
  const int64_t C = x.size(1);
  const ScalarType ft = x.dtype();
  // labels count up to the first negative entry
  const Tensor valid = ((y < 0).to(ft).cumsum(1) == 0).to(ft);  // [N, C]
  const Tensor yc = y.clamp_min(0);
  const Tensor is_target = (one_hot(yc, C).to(ft) * valid.unsqueeze(-1)).sum({1}).clamp_max(1);
  const Tensor xy = x.gather(1, yc);                                       // [N, C]
  const Tensor m = (1 - (xy.unsqueeze(2) - x.unsqueeze(1))).clamp_min(0);  // [N, K, C]
  const Tensor mask = valid.unsqueeze(2) * (1 - is_target).unsqueeze(1);
  Tensor loss = (m * mask).sum({1, 2}) / double(C);
  if (input.dim() == 1) loss = loss.squeeze(0);
  return reduce(loss, reduction, op);
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const Scalar& p,
                         const Scalar& margin, const Tensor& weight, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "multi_margin_loss";
  check_defined(op, {{&input, "input"}, {&target, "target"}});
  const int64_t pv = p.to_long();
  if ((pv != 1 && pv != 2) || p.to_double() != double(pv))
    fail("[{}] only p == 1 and p == 2 are supported, got {}", op, p.to_double());
  if (!(input.dim() == 1 || input.dim() == 2))
    fail("[{}] expected input [C] or [N, C], got {}", op, shape_str(input.sizes()));
  const int64_t N = input.dim() == 2 ? input.size(0) : 1;
  if (target.numel() != N || target.dim() > 1 || target.dtype() != kInt64)
    fail("[{}] expected an int64 target of {} element(s) for input {}, got {} ({})", op, N,
         shape_str(input.sizes()), shape_str(target.sizes()), dtype_name(target.dtype()));
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;
  const int64_t C = x.size(1);
  if (weight.defined() && !(weight.dim() == 1 && weight.size(0) == C))
    fail("[{}] expected weight of shape ({}), got {}", op, C, shape_str(weight.sizes()));
  const Tensor y = target.reshape({N});
  Tensor z = (margin.to_double() - x.gather(1, y.unsqueeze(1)) + x).clamp_min(0);
  if (pv == 2) z = z * z;
  if (weight.defined()) z = z * weight.index_select(0, y).unsqueeze(1);
  Tensor loss = (z * (1 - one_hot(y, C).to(x.dtype()))).sum({1}) / double(C);
  if (input.dim() == 1) loss = loss.squeeze(0);
  return reduce(loss, reduction, op);
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "cosine_embedding_loss";
  check_defined(op, {{&input1, "input1"}, {&input2, "input2"}, {&target, "target"}});
  const int64_t td = target.dim();
  if (td > 1)
    fail("[{}] 0D or 1D target tensor expected, multi-target not supported (got {})", op,
         shape_str(target.sizes()));
  if (input1.dim() != td + 1 || !(input1.sizes() == input2.sizes()) ||
      (td == 1 && input1.size(0) != target.size(0)))
    fail(
        "[{}] a {}D target expects two {}D inputs of the same shape with {} rows, got {} and {} "
        "(target {})",
        op, td, td + 1, td == 1 ? target.size(0) : 1, shape_str(input1.sizes()),
        shape_str(input2.sizes()), shape_str(target.sizes()));
  constexpr double kEps = 1e-12;
  const Tensor prod = (input1 * input2).sum({td});
  const Tensor m1 = (input1 * input1).sum({td}) + kEps, m2 = (input2 * input2).sum({td}) + kEps;
  const Tensor cos = prod / (m1 * m2).sqrt();
  const Tensor zeros = zeros_like(cos);
  const Tensor out =
      where(target == 1, 1 - cos, zeros) + where(target == -1, (cos - margin).clamp_min(0), zeros);
  return reduce(out, reduction, op);
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "margin_ranking_loss";
  check_defined(op, {{&input1, "input1"}, {&input2, "input2"}, {&target, "target"}});
  if (input1.dim() != input2.dim() || input1.dim() != target.dim())
    fail(
        "[{}] all input tensors should have the same dimension but got sizes input1: {}, "
        "input2: {}, target: {}",
        op, shape_str(input1.sizes()), shape_str(input2.sizes()), shape_str(target.sizes()));
  check_broadcast(op, input1, "input1", input2, "input2");
  check_broadcast(op, input1, "input1", target, "target");
  return reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction, op);
}

namespace {
Tensor triplet_core(const char* op, const Tensor& a, const Tensor& p, const Tensor& n,
                    const std::function<Tensor(const Tensor&, const Tensor&)>& dist, double margin,
                    bool swap, int64_t reduction) {
  check_defined(op, {{&a, "anchor"}, {&p, "positive"}, {&n, "negative"}});
  if (a.dim() != p.dim() || p.dim() != n.dim())
    fail(
        "[{}] all inputs should have the same dimension but got {}D, {}D and {}D inputs "
        "(anchor {}, positive {}, negative {})",
        op, a.dim(), p.dim(), n.dim(), shape_str(a.sizes()), shape_str(p.sizes()),
        shape_str(n.sizes()));
  check_broadcast(op, a, "anchor", p, "positive");
  check_broadcast(op, a, "anchor", n, "negative");
  const Tensor dpos = dist(a, p);
  Tensor dneg = dist(a, n);
  if (swap) dneg = minimum(dneg, dist(p, n));
  return reduce((margin + dpos - dneg).clamp_min(0), reduction, op);
}
}  // namespace

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return triplet_core(
      "triplet_margin_loss", anchor, positive, negative,
      [&](const Tensor& x, const Tensor& y) { return pairwise_distance(x, y, p, eps); }, margin,
      swap, reduction);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "poisson_nll_loss";
  check_defined(op, {{&input, "input"}, {&target, "target"}});
  check_broadcast(op, input, "input", target, "target");
  Tensor loss = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {
    const Tensor st = target * log(target) - target + 0.5 * log(2 * std::numbers::pi * target);
    loss = loss + st.masked_fill(target <= 1, 0);
  }
  return reduce(loss, reduction, op);
}

namespace nn::functional {

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target,
                            const HingeEmbeddingLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::hinge_embedding_loss(input, target, o.margin(), reduction_enum(o.reduction()));
}
Tensor multi_margin_loss(const Tensor& input, const Tensor& target,
                         const MultiMarginLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::multi_margin_loss(input, target, o.p(), o.margin(), o.weight(),
                                    reduction_enum(o.reduction()));
}
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             const CosineEmbeddingLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::cosine_embedding_loss(input1, input2, target, o.margin(),
                                        reduction_enum(o.reduction()));
}
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              const MultilabelMarginLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::multilabel_margin_loss(input, target, reduction_enum(o.reduction()));
}
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        const SoftMarginLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::soft_margin_loss(input, target, reduction_enum(o.reduction()));
}
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const MultilabelSoftMarginLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "multilabel_soft_margin_loss";
  check_defined(op, {{&input, "input"}, {&target, "target"}});
  if (input.dim() < 1) fail("[{}] expected an input with a class dim, got a 0-d tensor", op);
  check_same(op, input, "input", target, "target");
  Tensor loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input));
  if (o.weight().defined()) {
    check_broadcast(op, loss, "input", o.weight(), "weight");
    loss = loss * o.weight();
  }
  const int64_t cd = input.dim() - 1;
  loss = loss.sum({cd}) / double(input.size(cd));
  return reduce(loss, reduction_enum(o.reduction()), op);
}
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::triplet_margin_loss(anchor, positive, negative, o.margin(), o.p(), o.eps(),
                                      o.swap(), reduction_enum(o.reduction()));
}
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive,
                                         const Tensor& negative,
                                         const TripletMarginWithDistanceLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  std::function<Tensor(const Tensor&, const Tensor&)> dist;
  if (o.distance_function()) dist = *o.distance_function();
  else dist = [](const Tensor& x, const Tensor& y) { return oneflow::pairwise_distance(x, y); };
  return triplet_core("triplet_margin_with_distance_loss", anchor, positive, negative, dist,
                      o.margin(), o.swap(), reduction_enum(o.reduction()));
}
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::ctc_loss(log_probs, targets, input_lengths, target_lengths, o.blank(),
                           reduction_enum(o.reduction()), o.zero_infinity());
}
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target,
                        const PoissonNLLLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::poisson_nll_loss(input, target, o.log_input(), o.full(), o.eps(),
                                   reduction_enum(o.reduction()));
}
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           const MarginRankingLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  return oneflow::margin_ranking_loss(input1, input2, target, o.margin(),
                                      reduction_enum(o.reduction()));
}
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossFuncOptions& o) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "gaussian_nll_loss";
  check_defined(op, {{&input, "input"}, {&target, "target"}, {&var, "var"}});
  check_broadcast(op, input, "input", target, "target");
  Tensor v = var;
  if (!(var.sizes() == input.sizes())) {
    const IntArrayRef is = input.sizes(), vs = var.sizes();
    const bool drop_last = input.dim() >= 1 && vs == is.slice(0, is.size() - 1);
    const bool last_one = input.dim() >= 1 && var.dim() == input.dim() && vs.back() == 1 &&
                          vs.slice(0, vs.size() - 1) == is.slice(0, is.size() - 1);
    if (drop_last) v = var.unsqueeze(-1);
    else if (!last_one)
      fail(
          "[{}] var {} is of incorrect size for input {} (expected the input's shape, or it "
          "without or with 1 in the last dim)",
          op, shape_str(vs), shape_str(is));
  }
  if (o.eps() < 0) fail("[{}] eps must be non-negative, got {}", op, o.eps());
  if ((v < 0).any().item<bool>()) fail("[{}] var has negative entries", op);
  // clamped as PyTorch's in-place clamp under no_grad: the gradient passes through unchanged
  v = v + (v.clamp_min(o.eps()) - v).detach();
  Tensor loss = 0.5 * (log(v) + (input - target).square() / v);
  if (o.full()) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return reduce(loss, reduction_enum(o.reduction()), op);
}

}  // namespace nn::functional

namespace nn {
namespace F = functional;
Tensor HingeEmbeddingLossImpl::forward(const Tensor& input, const Tensor& target) {
  return F::hinge_embedding_loss(input, target, options);
}
Tensor MultiMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return F::multi_margin_loss(input, target, options);
}
Tensor CosineEmbeddingLossImpl::forward(const Tensor& input1, const Tensor& input2,
                                        const Tensor& target) {
  return F::cosine_embedding_loss(input1, input2, target, options);
}
Tensor MultiLabelMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return F::multilabel_margin_loss(input, target, options);
}
Tensor SoftMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return F::soft_margin_loss(input, target, options);
}
Tensor MultiLabelSoftMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return F::multilabel_soft_margin_loss(input, target, options);
}
Tensor TripletMarginLossImpl::forward(const Tensor& anchor, const Tensor& positive,
                                      const Tensor& negative) {
  return F::triplet_margin_loss(anchor, positive, negative, options);
}
Tensor TripletMarginWithDistanceLossImpl::forward(const Tensor& anchor, const Tensor& positive,
                                                  const Tensor& negative) {
  return F::triplet_margin_with_distance_loss(anchor, positive, negative, options);
}
Tensor CTCLossImpl::forward(const Tensor& log_probs, const Tensor& targets,
                            const Tensor& input_lengths, const Tensor& target_lengths) {
  return F::ctc_loss(log_probs, targets, input_lengths, target_lengths, options);
}
Tensor PoissonNLLLossImpl::forward(const Tensor& log_input, const Tensor& target) {
  return F::poisson_nll_loss(log_input, target, options);
}
Tensor MarginRankingLossImpl::forward(const Tensor& input1, const Tensor& input2,
                                      const Tensor& targets) {
  return F::margin_ranking_loss(input1, input2, targets, options);
}
Tensor GaussianNLLLossImpl::forward(const Tensor& input, const Tensor& target, const Tensor& var) {
  return F::gaussian_nll_loss(input, target, var, options);
}
}  // namespace nn

}  // namespace oneflow

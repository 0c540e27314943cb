// nn/losses.h: the rest of libtorch 1.13's losses (margin, embedding, triplet, CTC, Poisson and
// Gaussian NLL): root-namespace functions with an at::Reduction int, options with libtorch's
// names and defaults, nn::functional forms taking them, and XxxLoss modules.
#pragma once
#include <functional>
#include <optional>

#include "oneflow/nn.h"

namespace oneflow {

// CTC negative log likelihood of log_probs [T, N, C] for targets [N, S] (padded) or 1-D
// concatenated, with per-sample lengths; kMean divides each loss by its target length first.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths,
                IntArrayRef target_lengths, int64_t blank = 0, int64_t reduction = Reduction::Mean,
                bool zero_infinity = false);
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0,
                int64_t reduction = Reduction::Mean, bool zero_infinity = false);
// x where y == 1, max(0, margin - x) where y == -1.
Tensor hinge_embedding_loss(const Tensor& self, const Tensor& target, double margin = 1.0,
                            int64_t reduction = Reduction::Mean);
// log(1 + exp(-y x)).
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        int64_t reduction = Reduction::Mean);
// sum over target classes j (up to the first -1) and other classes i of max(0, 1 - (x_j - x_i)) /
// C.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              int64_t reduction = Reduction::Mean);
// sum over i != y of max(0, margin - x_y + x_i)^p (* weight[y]) / C.
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const Scalar& p = 1,
                         const Scalar& margin = 1, const Tensor& weight = {},
                         int64_t reduction = Reduction::Mean);
// 1 - cos(x1, x2) where y == 1, max(0, cos - margin) where y == -1.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin = 0.0, int64_t reduction = Reduction::Mean);
// max(0, -y (x1 - x2) + margin).
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin = 0.0, int64_t reduction = Reduction::Mean);
// max(0, d(a, p) - d(a, n) + margin) with the p-norm pairwise distance.
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2, double eps = 1e-6, bool swap = false,
                           int64_t reduction = Reduction::Mean);
// exp(x) - y x (log_input) or x - y log(x + eps), plus Stirling's term when full.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, int64_t reduction);

namespace nn {

#define OF_LOSS_REDUCTION_CTORS(Name)        \
  Name() {}                                  \
  Name(enumtype::kNone r) : reduction_(r) {} \
  Name(enumtype::kMean r) : reduction_(r) {} \
  Name(enumtype::kSum r) : reduction_(r) {}

struct HingeEmbeddingLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(double, margin) = 1.0;
  OF_ARG(reduction_t, reduction) = kMean;
};

struct MultiMarginLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(int64_t, p) = 1;
  OF_ARG(double, margin) = 1.0;
  OF_ARG(Tensor, weight) = Tensor();
  OF_ARG(reduction_t, reduction) = kMean;
};

struct CosineEmbeddingLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(double, margin) = 0.0;
  OF_ARG(reduction_t, reduction) = kMean;
};

struct MultiLabelMarginLossOptions {
  using reduction_t = ReductionType;
  OF_LOSS_REDUCTION_CTORS(MultiLabelMarginLossOptions)
  OF_ARG(reduction_t, reduction) = kMean;
};

struct SoftMarginLossOptions {
  using reduction_t = ReductionType;
  OF_LOSS_REDUCTION_CTORS(SoftMarginLossOptions)
  OF_ARG(reduction_t, reduction) = kMean;
};

struct MultiLabelSoftMarginLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(Tensor, weight) = Tensor();
  OF_ARG(reduction_t, reduction) = kMean;
};

struct TripletMarginLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(double, margin) = 1.0;
  OF_ARG(double, p) = 2.0;
  OF_ARG(double, eps) = 1e-6;
  OF_ARG(bool, swap) = false;
  OF_ARG(reduction_t, reduction) = kMean;
};

struct TripletMarginWithDistanceLossOptions {
  using reduction_t = ReductionType;
  using distance_function_t = std::function<Tensor(const Tensor&, const Tensor&)>;
  OF_ARG(std::optional<distance_function_t>, distance_function) = std::nullopt;
  OF_ARG(double, margin) = 1.0;
  OF_ARG(bool, swap) = false;
  OF_ARG(reduction_t, reduction) = kMean;
};

struct CTCLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(int64_t, blank) = 0;
  OF_ARG(reduction_t, reduction) = kMean;
  OF_ARG(bool, zero_infinity) = false;
};

struct PoissonNLLLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(bool, log_input) = true;
  OF_ARG(bool, full) = false;
  OF_ARG(double, eps) = 1e-8;
  OF_ARG(reduction_t, reduction) = kMean;
};

struct MarginRankingLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(double, margin) = 0;
  OF_ARG(reduction_t, reduction) = kMean;
};

// Not in libtorch 1.13 (PyTorch's nn.GaussianNLLLoss): full, eps and reduction as PyTorch.
struct GaussianNLLLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(bool, full) = false;
  OF_ARG(double, eps) = 1e-6;
  OF_ARG(reduction_t, reduction) = kMean;
};
#undef OF_LOSS_REDUCTION_CTORS

namespace functional {
using HingeEmbeddingLossFuncOptions = HingeEmbeddingLossOptions;
using MultiMarginLossFuncOptions = MultiMarginLossOptions;
using CosineEmbeddingLossFuncOptions = CosineEmbeddingLossOptions;
using MultilabelMarginLossFuncOptions = MultiLabelMarginLossOptions;
using SoftMarginLossFuncOptions = SoftMarginLossOptions;
using MultilabelSoftMarginLossFuncOptions = MultiLabelSoftMarginLossOptions;
using TripletMarginLossFuncOptions = TripletMarginLossOptions;
using TripletMarginWithDistanceLossFuncOptions = TripletMarginWithDistanceLossOptions;
using CTCLossFuncOptions = CTCLossOptions;
using PoissonNLLLossFuncOptions = PoissonNLLLossOptions;
using MarginRankingLossFuncOptions = MarginRankingLossOptions;
using GaussianNLLLossFuncOptions = GaussianNLLLossOptions;

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target,
                            const HingeEmbeddingLossFuncOptions& options = {});
Tensor multi_margin_loss(const Tensor& input, const Tensor& target,
                         const MultiMarginLossFuncOptions& options = {});
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             const CosineEmbeddingLossFuncOptions& options = {});
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              const MultilabelMarginLossFuncOptions& options = {});
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        const SoftMarginLossFuncOptions& options = {});
// -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) (* weight), averaged over classes.
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const MultilabelSoftMarginLossFuncOptions& options = {});
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossFuncOptions& options = {});
// As triplet_margin_loss with distance_function (pairwise_distance when unset).
Tensor triplet_margin_with_distance_loss(
    const Tensor& anchor, const Tensor& positive, const Tensor& negative,
    const TripletMarginWithDistanceLossFuncOptions& options = {});
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossFuncOptions& options = {});
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target,
                        const PoissonNLLLossFuncOptions& options = {});
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           const MarginRankingLossFuncOptions& options = {});
// 0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) [+ 0.5 log(2 pi) when full];
// var has input's shape, or lacks (or has 1 in) the last dim.
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossFuncOptions& options = {});
}  // namespace functional

// A loss module calling functional::fn with its options; a class weight is a buffer.
#define OF_EXTRA_LOSS_MODULE(Name, OptionsT, fn, ...)                                     \
  class Name##Impl : public Module {                                                      \
   public:                                                                                \
    explicit Name##Impl(const OptionsT& options = {}) : Module(#Name), options(options) { \
      register_weight(this->options);                                                     \
    }                                                                                     \
    Tensor forward(__VA_ARGS__);                                                          \
    OptionsT options;                                                                     \
                                                                                          \
   private:                                                                               \
    template <class O> void register_weight(O& o) {                                       \
      if constexpr (requires { o.weight(); }) {                                           \
        if (o.weight().defined()) o.weight(register_buffer("weight", o.weight()));        \
      }                                                                                   \
    }                                                                                     \
  };                                                                                      \
  OF_MODULE(Name)

#define OF_T const Tensor&
OF_EXTRA_LOSS_MODULE(HingeEmbeddingLoss, HingeEmbeddingLossOptions, hinge_embedding_loss,
                     OF_T input, OF_T target);
OF_EXTRA_LOSS_MODULE(MultiMarginLoss, MultiMarginLossOptions, multi_margin_loss, OF_T input,
                     OF_T target);
OF_EXTRA_LOSS_MODULE(CosineEmbeddingLoss, CosineEmbeddingLossOptions, cosine_embedding_loss,
                     OF_T input1, OF_T input2, OF_T target);
OF_EXTRA_LOSS_MODULE(MultiLabelMarginLoss, MultiLabelMarginLossOptions, multilabel_margin_loss,
                     OF_T input, OF_T target);
OF_EXTRA_LOSS_MODULE(SoftMarginLoss, SoftMarginLossOptions, soft_margin_loss, OF_T input,
                     OF_T target);
OF_EXTRA_LOSS_MODULE(MultiLabelSoftMarginLoss, MultiLabelSoftMarginLossOptions,
                     multilabel_soft_margin_loss, OF_T input, OF_T target);
OF_EXTRA_LOSS_MODULE(TripletMarginLoss, TripletMarginLossOptions, triplet_margin_loss, OF_T anchor,
                     OF_T positive, OF_T negative);
OF_EXTRA_LOSS_MODULE(TripletMarginWithDistanceLoss, TripletMarginWithDistanceLossOptions,
                     triplet_margin_with_distance_loss, OF_T anchor, OF_T positive, OF_T negative);
OF_EXTRA_LOSS_MODULE(CTCLoss, CTCLossOptions, ctc_loss, OF_T log_probs, OF_T targets,
                     OF_T input_lengths, OF_T target_lengths);
OF_EXTRA_LOSS_MODULE(PoissonNLLLoss, PoissonNLLLossOptions, poisson_nll_loss, OF_T log_input,
                     OF_T target);
OF_EXTRA_LOSS_MODULE(MarginRankingLoss, MarginRankingLossOptions, margin_ranking_loss, OF_T input1,
                     OF_T input2, OF_T targets);
OF_EXTRA_LOSS_MODULE(GaussianNLLLoss, GaussianNLLLossOptions, gaussian_nll_loss, OF_T input,
                     OF_T target, OF_T var);
#undef OF_T
#undef OF_EXTRA_LOSS_MODULE

}  // namespace nn
}  // namespace oneflow

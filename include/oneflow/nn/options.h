// nn/options.h: the options of of::nn's layers (XxxOptions) and of of::nn::functional
// (XxxFuncOptions), with libtorch 1.13's names, fields and defaults. Setters chain:
// Conv2dOptions(3, 16, 3).stride(2).padding(of::kSame); where libtorch shares one struct between
// a layer and its functional form, so do we (MaxPool2dFuncOptions = MaxPool2dOptions).
#pragma once
#include <algorithm>
#include <array>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "oneflow/enum.h"
#include "oneflow/nn/module.h"

namespace oneflow {

// D sizes given as one value for all (3) or one per dim ({3, 1}), as torch::ExpandingArray.
template <size_t D> class ExpandingArray {
 public:
  ExpandingArray(int64_t v) { values_.fill(v); }
  ExpandingArray(std::initializer_list<int64_t> list) {
    OF_HEADER_CHECK(list.size() == D, "[nn] expected {} values, got {}", D, list.size());
    std::copy(list.begin(), list.end(), values_.begin());
  }
  ExpandingArray(const std::vector<int64_t>& list) {
    OF_HEADER_CHECK(list.size() == D, "[nn] expected {} values, got {}", D, list.size());
    std::copy(list.begin(), list.end(), values_.begin());
  }
  int64_t operator[](size_t i) const { return values_[i]; }
  operator IntArrayRef() const { return IntArrayRef(values_.data(), D); }
  IntArrayRef ref() const { return IntArrayRef(values_.data(), D); }
  size_t size() const { return D; }
  bool operator==(const ExpandingArray&) const = default;

 private:
  std::array<int64_t, D> values_{};
};

// D sizes of which any may be absent (std::nullopt: "keep the input's size"), as
// torch::ExpandingArrayWithOptionalElem: AdaptiveAvgPool2dOptions({3, std::nullopt}).
template <size_t D> class ExpandingArrayWithOptionalElem {
 public:
  ExpandingArrayWithOptionalElem(int64_t v) { values_.fill(v); }
  ExpandingArrayWithOptionalElem(std::initializer_list<std::optional<int64_t>> list) {
    OF_HEADER_CHECK(list.size() == D, "[nn] expected {} values, got {}", D, list.size());
    std::copy(list.begin(), list.end(), values_.begin());
  }
  ExpandingArrayWithOptionalElem(const std::vector<std::optional<int64_t>>& list) {
    OF_HEADER_CHECK(list.size() == D, "[nn] expected {} values, got {}", D, list.size());
    std::copy(list.begin(), list.end(), values_.begin());
  }
  ExpandingArrayWithOptionalElem(const ExpandingArray<D>& a) {
    for (size_t i = 0; i < D; ++i) values_[i] = a[i];
  }
  const std::optional<int64_t>& operator[](size_t i) const { return values_[i]; }
  size_t size() const { return D; }
  bool operator==(const ExpandingArrayWithOptionalElem&) const = default;

 private:
  std::array<std::optional<int64_t>, D> values_{};
};

namespace nn {

// OF_ARG plus a braced-list setter for a variant option whose first alternative is an
// ExpandingArray: Conv2dOptions(...).padding({1, 2}) as well as .padding(1) or .padding(of::kSame).
#define OF_ARG_EXPANDING_VARIANT(T, D, name)                               \
 public:                                                                   \
  inline auto name(std::initializer_list<int64_t> list)->decltype(*this) { \
    this->name##_ = ExpandingArray<D>(list);                               \
    return *this;                                                          \
  }                                                                        \
  OF_ARG(T, name)

// The reduction a loss applies to its per-element values.
using ReductionType = std::variant<enumtype::kNone, enumtype::kMean, enumtype::kSum>;

// ---------------------------------------------------------------- linear and embedding

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  OF_ARG(int64_t, in_features);
  OF_ARG(int64_t, out_features);
  OF_ARG(bool, bias) = true;
};

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  OF_ARG(int64_t, num_embeddings);
  OF_ARG(int64_t, embedding_dim);
  OF_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  // Scales each row's gradient by 1 / (its count in the batch).
  OF_ARG(bool, scale_grad_by_freq) = false;
};

namespace functional {
struct EmbeddingFuncOptions {
  OF_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  OF_ARG(bool, scale_grad_by_freq) = false;
};
}  // namespace functional

// ---------------------------------------------------------------- convolution

namespace detail {
template <size_t D>
using conv_padding_t = std::variant<ExpandingArray<D>, enumtype::kValid, enumtype::kSame>;
using conv_padding_mode_t =
    std::variant<enumtype::kZeros, enumtype::kReflect, enumtype::kReplicate, enumtype::kCircular>;
}  // namespace detail

template <size_t D> struct ConvOptions {
  using padding_t = detail::conv_padding_t<D>;
  using padding_mode_t = detail::conv_padding_mode_t;
  ConvOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  OF_ARG(int64_t, in_channels);
  OF_ARG(int64_t, out_channels);
  OF_ARG(ExpandingArray<D>, kernel_size);
  OF_ARG(ExpandingArray<D>, stride) = 1;
  OF_ARG_EXPANDING_VARIANT(padding_t, D, padding) = ExpandingArray<D>(0);
  OF_ARG(ExpandingArray<D>, dilation) = 1;
  OF_ARG(int64_t, groups) = 1;
  OF_ARG(bool, bias) = true;
  // Non-zero modes pad the input with F::pad first, as libtorch.
  OF_ARG(padding_mode_t, padding_mode) = kZeros;
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;
using Conv3dOptions = ConvOptions<3>;

template <size_t D> struct ConvTransposeOptions {
  ConvTransposeOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  OF_ARG(int64_t, in_channels);
  OF_ARG(int64_t, out_channels);
  OF_ARG(ExpandingArray<D>, kernel_size);
  OF_ARG(ExpandingArray<D>, stride) = 1;
  OF_ARG(ExpandingArray<D>, padding) = 0;
  OF_ARG(ExpandingArray<D>, output_padding) = 0;
  OF_ARG(int64_t, groups) = 1;
  OF_ARG(bool, bias) = true;
  OF_ARG(ExpandingArray<D>, dilation) = 1;
};
using ConvTranspose1dOptions = ConvTransposeOptions<1>;
using ConvTranspose2dOptions = ConvTransposeOptions<2>;
using ConvTranspose3dOptions = ConvTransposeOptions<3>;

namespace functional {
template <size_t D> struct ConvFuncOptions {
  using padding_t = detail::conv_padding_t<D>;
  OF_ARG(Tensor, bias) = Tensor();
  OF_ARG(ExpandingArray<D>, stride) = 1;
  OF_ARG_EXPANDING_VARIANT(padding_t, D, padding) = ExpandingArray<D>(0);
  OF_ARG(ExpandingArray<D>, dilation) = 1;
  OF_ARG(int64_t, groups) = 1;
};
using Conv1dFuncOptions = ConvFuncOptions<1>;
using Conv2dFuncOptions = ConvFuncOptions<2>;
using Conv3dFuncOptions = ConvFuncOptions<3>;

template <size_t D> struct ConvTransposeFuncOptions {
  OF_ARG(Tensor, bias) = Tensor();
  OF_ARG(ExpandingArray<D>, stride) = 1;
  OF_ARG(ExpandingArray<D>, padding) = 0;
  OF_ARG(ExpandingArray<D>, output_padding) = 0;
  OF_ARG(int64_t, groups) = 1;
  OF_ARG(ExpandingArray<D>, dilation) = 1;
};
using ConvTranspose1dFuncOptions = ConvTransposeFuncOptions<1>;
using ConvTranspose2dFuncOptions = ConvTransposeFuncOptions<2>;
using ConvTranspose3dFuncOptions = ConvTransposeFuncOptions<3>;
}  // namespace functional

// ---------------------------------------------------------------- pooling

template <size_t D> struct MaxPoolOptions {
  MaxPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}
  OF_ARG(ExpandingArray<D>, kernel_size);
  OF_ARG(ExpandingArray<D>, stride);
  OF_ARG(ExpandingArray<D>, padding) = 0;
  OF_ARG(ExpandingArray<D>, dilation) = 1;
  OF_ARG(bool, ceil_mode) = false;
};
using MaxPool1dOptions = MaxPoolOptions<1>;
using MaxPool2dOptions = MaxPoolOptions<2>;
using MaxPool3dOptions = MaxPoolOptions<3>;

template <size_t D> struct AvgPoolOptions {
  AvgPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}
  OF_ARG(ExpandingArray<D>, kernel_size);
  OF_ARG(ExpandingArray<D>, stride);
  OF_ARG(ExpandingArray<D>, padding) = 0;
  OF_ARG(bool, ceil_mode) = false;
  OF_ARG(bool, count_include_pad) = true;
  OF_ARG(std::optional<int64_t>, divisor_override) = std::nullopt;
};
// libtorch's avg_pool1d has no divisor_override: AvgPool1d ignores it (as libtorch does).
using AvgPool1dOptions = AvgPoolOptions<1>;
using AvgPool2dOptions = AvgPoolOptions<2>;
using AvgPool3dOptions = AvgPoolOptions<3>;

// output_size_t: ExpandingArray<1> for 1-D, ExpandingArrayWithOptionalElem<D> for 2-D / 3-D
// (an absent size keeps the input's).
template <typename output_size_t> struct AdaptiveMaxPoolOptions {
  AdaptiveMaxPoolOptions(output_size_t output_size) : output_size_(output_size) {}
  OF_ARG(output_size_t, output_size);
};
using AdaptiveMaxPool1dOptions = AdaptiveMaxPoolOptions<ExpandingArray<1>>;
using AdaptiveMaxPool2dOptions = AdaptiveMaxPoolOptions<ExpandingArrayWithOptionalElem<2>>;
using AdaptiveMaxPool3dOptions = AdaptiveMaxPoolOptions<ExpandingArrayWithOptionalElem<3>>;

template <typename output_size_t> struct AdaptiveAvgPoolOptions {
  AdaptiveAvgPoolOptions(output_size_t output_size) : output_size_(output_size) {}
  OF_ARG(output_size_t, output_size);
};
using AdaptiveAvgPool1dOptions = AdaptiveAvgPoolOptions<ExpandingArray<1>>;
using AdaptiveAvgPool2dOptions = AdaptiveAvgPoolOptions<ExpandingArrayWithOptionalElem<2>>;
using AdaptiveAvgPool3dOptions = AdaptiveAvgPoolOptions<ExpandingArrayWithOptionalElem<3>>;

namespace functional {
using MaxPool1dFuncOptions = MaxPool1dOptions;
using MaxPool2dFuncOptions = MaxPool2dOptions;
using MaxPool3dFuncOptions = MaxPool3dOptions;
using AvgPool1dFuncOptions = AvgPool1dOptions;
using AvgPool2dFuncOptions = AvgPool2dOptions;
using AvgPool3dFuncOptions = AvgPool3dOptions;
using AdaptiveMaxPool1dFuncOptions = AdaptiveMaxPool1dOptions;
using AdaptiveMaxPool2dFuncOptions = AdaptiveMaxPool2dOptions;
using AdaptiveMaxPool3dFuncOptions = AdaptiveMaxPool3dOptions;
using AdaptiveAvgPool1dFuncOptions = AdaptiveAvgPool1dOptions;
using AdaptiveAvgPool2dFuncOptions = AdaptiveAvgPool2dOptions;
using AdaptiveAvgPool3dFuncOptions = AdaptiveAvgPool3dOptions;
}  // namespace functional

// ---------------------------------------------------------------- normalization

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}
  OF_ARG(int64_t, num_features);
  OF_ARG(double, eps) = 1e-5;
  OF_ARG(std::optional<double>, momentum) = 0.1;  // nullopt: cumulative average
  OF_ARG(bool, affine) = true;
  OF_ARG(bool, track_running_stats) = true;
};
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;

struct LayerNormOptions {
  LayerNormOptions(std::vector<int64_t> normalized_shape)
      : normalized_shape_(std::move(normalized_shape)) {}
  OF_ARG(std::vector<int64_t>, normalized_shape);
  OF_ARG(double, eps) = 1e-5;
  OF_ARG(bool, elementwise_affine) = true;
};

struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  OF_ARG(int64_t, num_groups);
  OF_ARG(int64_t, num_channels);
  OF_ARG(double, eps) = 1e-5;
  OF_ARG(bool, affine) = true;
};

// Not in libtorch 1.13 (PyTorch 2.4's nn.RMSNorm): eps defaults to the dtype's epsilon.
struct RMSNormOptions {
  RMSNormOptions(std::vector<int64_t> normalized_shape)
      : normalized_shape_(std::move(normalized_shape)) {}
  OF_ARG(std::vector<int64_t>, normalized_shape);
  OF_ARG(std::optional<double>, eps) = std::nullopt;
  OF_ARG(bool, elementwise_affine) = true;
};

namespace functional {
struct BatchNormFuncOptions {
  OF_ARG(Tensor, weight) = Tensor();
  OF_ARG(Tensor, bias) = Tensor();
  OF_ARG(bool, training) = false;
  OF_ARG(std::optional<double>, momentum) = 0.1;
  OF_ARG(double, eps) = 1e-5;
};

struct LayerNormFuncOptions {
  LayerNormFuncOptions(std::vector<int64_t> normalized_shape)
      : normalized_shape_(std::move(normalized_shape)) {}
  OF_ARG(std::vector<int64_t>, normalized_shape);
  OF_ARG(Tensor, weight) = {};
  OF_ARG(Tensor, bias) = {};
  OF_ARG(double, eps) = 1e-5;
};

struct GroupNormFuncOptions {
  GroupNormFuncOptions(int64_t num_groups) : num_groups_(num_groups) {}
  OF_ARG(int64_t, num_groups);
  OF_ARG(Tensor, weight) = {};
  OF_ARG(Tensor, bias) = {};
  OF_ARG(double, eps) = 1e-5;
};

// x / max(||x||_p over dim, eps).
struct NormalizeFuncOptions {
  OF_ARG(double, p) = 2.0;
  OF_ARG(int64_t, dim) = 1;
  OF_ARG(double, eps) = 1e-12;
};
}  // namespace functional

// ---------------------------------------------------------------- dropout

struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}
  OF_ARG(double, p);
  OF_ARG(bool, inplace) = false;
};
using Dropout2dOptions = DropoutOptions;

namespace functional {
struct DropoutFuncOptions {
  OF_ARG(double, p) = 0.5;
  OF_ARG(bool, training) = true;
  OF_ARG(bool, inplace) = false;
};
using Dropout2dFuncOptions = DropoutFuncOptions;
}  // namespace functional

// ---------------------------------------------------------------- activations

struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}
  OF_ARG(bool, inplace);
};
using ReLU6Options = ReLUOptions;

struct SELUOptions {
  SELUOptions(bool inplace = false) : inplace_(inplace) {}
  OF_ARG(bool, inplace);
};

struct LeakyReLUOptions {
  OF_ARG(double, negative_slope) = 1e-2;
  OF_ARG(bool, inplace) = false;
};

struct ELUOptions {
  OF_ARG(double, alpha) = 1.0;
  OF_ARG(bool, inplace) = false;
};

struct HardtanhOptions {
  OF_ARG(double, min_val) = -1.0;
  OF_ARG(double, max_val) = 1.0;
  OF_ARG(bool, inplace) = false;
};

struct SoftplusOptions {
  OF_ARG(double, beta) = 1.0;
  OF_ARG(double, threshold) = 20.0;
};

struct GLUOptions {
  GLUOptions(int64_t dim = -1) : dim_(dim) {}
  OF_ARG(int64_t, dim);
};

struct GELUOptions {
  OF_ARG(std::string, approximate) = "none";  // "none" | "tanh"
};

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}
  OF_ARG(int64_t, dim);
};
using SoftminOptions = SoftmaxOptions;
using LogSoftmaxOptions = SoftmaxOptions;

struct FlattenOptions {
  OF_ARG(int64_t, start_dim) = 1;
  OF_ARG(int64_t, end_dim) = -1;
};

namespace functional {
using ReLUFuncOptions = ReLUOptions;
using ReLU6FuncOptions = ReLU6Options;
using SELUFuncOptions = SELUOptions;
using LeakyReLUFuncOptions = LeakyReLUOptions;
using ELUFuncOptions = ELUOptions;
using HardtanhFuncOptions = HardtanhOptions;
using SoftplusFuncOptions = SoftplusOptions;
using GLUFuncOptions = GLUOptions;
using GELUFuncOptions = GELUOptions;

// softmax / softmin / log_softmax over dim, computed in dtype when given.
struct SoftmaxFuncOptions {
  SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}
  OF_ARG(int64_t, dim);
  OF_ARG(std::optional<ScalarType>, dtype) = std::nullopt;
};
using SoftminFuncOptions = SoftmaxFuncOptions;
using LogSoftmaxFuncOptions = SoftmaxFuncOptions;
}  // namespace functional

// ---------------------------------------------------------------- attention

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  OF_ARG(int64_t, embed_dim);
  OF_ARG(int64_t, num_heads);
  OF_ARG(double, dropout) = 0.0;
  OF_ARG(bool, bias) = true;
};

struct TransformerEncoderLayerOptions {
  using activation_t =
      std::variant<enumtype::kReLU, enumtype::kGELU, std::function<Tensor(const Tensor&)>>;
  TransformerEncoderLayerOptions(int64_t d_model, int64_t nhead)
      : d_model_(d_model), nhead_(nhead) {}
  OF_ARG(int64_t, d_model);
  OF_ARG(int64_t, nhead);
  OF_ARG(int64_t, dim_feedforward) = 2048;
  OF_ARG(double, dropout) = 0.1;
  OF_ARG(activation_t, activation) = kReLU;
  OF_ARG(bool, norm_first) = false;
  OF_ARG(double, layer_norm_eps) = 1e-5;
};

// ---------------------------------------------------------------- losses

// Constructible from a bare reduction, as libtorch: MSELossOptions(of::kSum).
#define OF_REDUCTION_CTORS(Name)             \
  Name() {}                                  \
  Name(enumtype::kNone r) : reduction_(r) {} \
  Name(enumtype::kMean r) : reduction_(r) {} \
  Name(enumtype::kSum r) : reduction_(r) {}

struct L1LossOptions {
  using reduction_t = ReductionType;
  OF_REDUCTION_CTORS(L1LossOptions)
  OF_ARG(reduction_t, reduction) = kMean;
};

struct MSELossOptions {
  using reduction_t = ReductionType;
  OF_REDUCTION_CTORS(MSELossOptions)
  OF_ARG(reduction_t, reduction) = kMean;
};

struct SmoothL1LossOptions {
  using reduction_t = ReductionType;
  OF_REDUCTION_CTORS(SmoothL1LossOptions)
  OF_ARG(reduction_t, reduction) = kMean;
  OF_ARG(double, beta) = 1.0;
};

struct HuberLossOptions {
  using reduction_t = ReductionType;
  OF_REDUCTION_CTORS(HuberLossOptions)
  OF_ARG(reduction_t, reduction) = kMean;
  OF_ARG(double, delta) = 1.0;
};

struct KLDivLossOptions {
  using reduction_t =
      std::variant<enumtype::kNone, enumtype::kBatchMean, enumtype::kSum, enumtype::kMean>;
  OF_REDUCTION_CTORS(KLDivLossOptions)
  KLDivLossOptions(enumtype::kBatchMean r) : reduction_(r) {}
  OF_ARG(reduction_t, reduction) = kMean;
  OF_ARG(bool, log_target) = false;
};
#undef OF_REDUCTION_CTORS

struct BCELossOptions {
  using reduction_t = ReductionType;
  OF_ARG(Tensor, weight) = {};
  OF_ARG(reduction_t, reduction) = kMean;
};

struct BCEWithLogitsLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(Tensor, weight) = {};
  OF_ARG(reduction_t, reduction) = kMean;
  OF_ARG(Tensor, pos_weight) = {};
};

struct NLLLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(Tensor, weight) = {};
  OF_ARG(int64_t, ignore_index) = -100;
  OF_ARG(reduction_t, reduction) = kMean;
};

struct CrossEntropyLossOptions {
  using reduction_t = ReductionType;
  OF_ARG(Tensor, weight) = {};
  OF_ARG(int64_t, ignore_index) = -100;
  OF_ARG(reduction_t, reduction) = kMean;
  OF_ARG(double, label_smoothing) = 0.0;
};

namespace functional {
using L1LossFuncOptions = L1LossOptions;
using MSELossFuncOptions = MSELossOptions;
using SmoothL1LossFuncOptions = SmoothL1LossOptions;
using HuberLossFuncOptions = HuberLossOptions;
using KLDivFuncOptions = KLDivLossOptions;
using BinaryCrossEntropyFuncOptions = BCELossOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
using NLLLossFuncOptions = NLLLossOptions;
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
}  // namespace functional

// ---------------------------------------------------------------- padding and resampling

struct UpsampleOptions {
  using mode_t = std::variant<enumtype::kNearest, enumtype::kLinear, enumtype::kBilinear,
                              enumtype::kBicubic, enumtype::kTrilinear>;
  OF_ARG(std::optional<std::vector<int64_t>>, size) = std::nullopt;
  OF_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  OF_ARG(mode_t, mode) = kNearest;
  OF_ARG(std::optional<bool>, align_corners) = std::nullopt;
};

namespace functional {
struct PadFuncOptions {
  using mode_t = std::variant<enumtype::kConstant, enumtype::kReflect, enumtype::kReplicate,
                              enumtype::kCircular>;
  PadFuncOptions(std::vector<int64_t> pad) : pad_(std::move(pad)) {}
  OF_ARG(std::vector<int64_t>, pad);
  OF_ARG(mode_t, mode) = kConstant;
  OF_ARG(double, value) = 0;
};

// Exactly one of size and scale_factor (one entry per spatial dim). Modes kNearest, kBilinear
// and kArea are implemented (4-D input); the other tags are accepted by the type, as libtorch's,
// and rejected with an error naming the mode.
struct InterpolateFuncOptions {
  using mode_t =
      std::variant<enumtype::kNearest, enumtype::kLinear, enumtype::kBilinear, enumtype::kBicubic,
                   enumtype::kTrilinear, enumtype::kArea, enumtype::kNearestExact>;
  OF_ARG(std::optional<std::vector<int64_t>>, size) = std::nullopt;
  OF_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  OF_ARG(mode_t, mode) = kNearest;
  OF_ARG(std::optional<bool>, align_corners) = std::nullopt;
  OF_ARG(std::optional<bool>, recompute_scale_factor) = std::nullopt;
  OF_ARG(bool, antialias) = false;
};
}  // namespace functional

}  // namespace nn
}  // namespace oneflow

// nn.h: layers (of::nn; the recurrent ones in nn/rnn.h), their options (libtorch's names and
// defaults), of::nn::functional and of::nn::init. Layers are XxxImpl modules wrapped by
// OF_MODULE holders: of::nn::Linear fc(3, 4).
#pragma once
#include <any>
#include <array>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "oneflow/nn/functional.h"
#include "oneflow/nn/module.h"
#include "oneflow/nn/options.h"
#include "oneflow/nn/rnn.h"
#include "oneflow/ops.h"
#include "oneflow/ops_conv.h"
#include "oneflow/ops_nn.h"

namespace oneflow {

namespace nn {

// ---------------------------------------------------------------- linear and embedding

// y = x W^T + b; W [out, in] and b initialized uniform(+-1/sqrt(in)) as libtorch.
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features)
      : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  LinearOptions options;
  Tensor weight, bias;
};
OF_MODULE(Linear);

// Row lookup in a [num_embeddings, dim] table initialized N(0, 1) (padding row zeroed).
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& indices);
  void pretty_print(std::ostream& stream) const override;
  EmbeddingOptions options;
  Tensor weight;
};
OF_MODULE(Embedding);

// ---------------------------------------------------------------- convolution

// Shared by Conv1d, Conv2d and Conv3d: weight [out, in/groups, k...], kaiming-uniform init as
// libtorch.
template <size_t D> class ConvNdImpl : public Module {
 public:
  explicit ConvNdImpl(const ConvOptions<D>& options);
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  ConvOptions<D> options;
  Tensor weight, bias;

 protected:
  // The convolution with the options' padding and padding_mode.
  Tensor conv_forward(const Tensor& input);
};

class Conv1dImpl : public ConvNdImpl<1> {
 public:
  Conv1dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size)
      : Conv1dImpl(Conv1dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv1dImpl(const Conv1dOptions& options) : ConvNdImpl<1>(options) {}
  Tensor forward(const Tensor& input);
};
OF_MODULE(Conv1d);

class Conv2dImpl : public ConvNdImpl<2> {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv2dImpl(const Conv2dOptions& options) : ConvNdImpl<2>(options) {}
  Tensor forward(const Tensor& input);
};
OF_MODULE(Conv2d);

class Conv3dImpl : public ConvNdImpl<3> {
 public:
  Conv3dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<3> kernel_size)
      : Conv3dImpl(Conv3dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv3dImpl(const Conv3dOptions& options) : ConvNdImpl<3>(options) {}
  Tensor forward(const Tensor& input);
};
OF_MODULE(Conv3d);

// Transposed convolution, shared by ConvTranspose1d/2d/3d: weight [in, out/groups, k...]
// (libtorch's layout and init).
template <size_t D> class ConvTransposeNdImpl : public Module {
 public:
  explicit ConvTransposeNdImpl(const ConvTransposeOptions<D>& options);
  void reset_parameters();
  // output_size (spatial sizes, or with the batch and channel dims) picks the output_padding
  // that reaches it, as libtorch's; it must lie within [min, min + stride - 1] per dim.
  Tensor forward(const Tensor& input, const std::optional<IntArrayRef>& output_size = std::nullopt);
  void pretty_print(std::ostream& stream) const override;
  ConvTransposeOptions<D> options;
  Tensor weight, bias;
};

class ConvTranspose1dImpl : public ConvTransposeNdImpl<1> {
 public:
  ConvTranspose1dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size)
      : ConvTranspose1dImpl(ConvTranspose1dOptions(in_channels, out_channels, kernel_size)) {}
  explicit ConvTranspose1dImpl(const ConvTranspose1dOptions& options)
      : ConvTransposeNdImpl<1>(options) {}
};
OF_MODULE(ConvTranspose1d);

class ConvTranspose2dImpl : public ConvTransposeNdImpl<2> {
 public:
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options)
      : ConvTransposeNdImpl<2>(options) {}
};
OF_MODULE(ConvTranspose2d);

class ConvTranspose3dImpl : public ConvTransposeNdImpl<3> {
 public:
  ConvTranspose3dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<3> kernel_size)
      : ConvTranspose3dImpl(ConvTranspose3dOptions(in_channels, out_channels, kernel_size)) {}
  explicit ConvTranspose3dImpl(const ConvTranspose3dOptions& options)
      : ConvTransposeNdImpl<3>(options) {}
};
OF_MODULE(ConvTranspose3d);

// ---------------------------------------------------------------- normalization

// What batch and instance norm share (libtorch's NormImplBase): a weight and a bias of
// num_features values when affine (ones and zeros), running statistics when tracked (zeros,
// ones and a count).
class NormImplBase : public Module {
 public:
  void reset_running_stats();
  void reset_parameters();
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  NormImplBase(const char* name, int64_t num_features, bool affine, bool track_running_stats);

 private:
  bool affine_, track_running_stats_;
};

// Batch norm over [N, C, *]; expected_dim: 2 or 3 (1d) / 4 (2d), checked in forward.
class BatchNormImplBase : public NormImplBase {
 public:
  BatchNormImplBase(const BatchNormOptions& options, const char* name, std::vector<int64_t> dims);
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  BatchNormOptions options;

 private:
  std::vector<int64_t> dims_;
};

class BatchNorm1dImpl : public BatchNormImplBase {
 public:
  BatchNorm1dImpl(int64_t num_features) : BatchNorm1dImpl(BatchNormOptions(num_features)) {}
  explicit BatchNorm1dImpl(const BatchNormOptions& o)
      : BatchNormImplBase(o, "BatchNorm1d", {2, 3}) {}
};
OF_MODULE(BatchNorm1d);

class BatchNorm2dImpl : public BatchNormImplBase {
 public:
  BatchNorm2dImpl(int64_t num_features) : BatchNorm2dImpl(BatchNormOptions(num_features)) {}
  explicit BatchNorm2dImpl(const BatchNormOptions& o) : BatchNormImplBase(o, "BatchNorm2d", {4}) {}
};
OF_MODULE(BatchNorm2d);

class LayerNormImpl : public Module {
 public:
  LayerNormImpl(std::vector<int64_t> normalized_shape)
      : LayerNormImpl(LayerNormOptions(std::move(normalized_shape))) {}
  explicit LayerNormImpl(const LayerNormOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  LayerNormOptions options;
  Tensor weight, bias;
};
OF_MODULE(LayerNorm);

class GroupNormImpl : public Module {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels)
      : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}
  explicit GroupNormImpl(const GroupNormOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  GroupNormOptions options;
  Tensor weight, bias;
};
OF_MODULE(GroupNorm);

class RMSNormImpl : public Module {
 public:
  RMSNormImpl(std::vector<int64_t> normalized_shape)
      : RMSNormImpl(RMSNormOptions(std::move(normalized_shape))) {}
  explicit RMSNormImpl(const RMSNormOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  RMSNormOptions options;
  Tensor weight;
};
OF_MODULE(RMSNorm);

// ---------------------------------------------------------------- dropout and activations

// Zeroes elements with probability p while training (seeded by of::manual_seed).
class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(const DropoutOptions& options = {});
  DropoutImpl(double p) : DropoutImpl(DropoutOptions(p)) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  DropoutOptions options;
};
OF_MODULE(Dropout);

// Zeroes whole channels of [N, C, H, W] (or [C, H, W]) with probability p while training.
class Dropout2dImpl : public Module {
 public:
  explicit Dropout2dImpl(const DropoutOptions& options = {});
  Dropout2dImpl(double p) : Dropout2dImpl(DropoutOptions(p)) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  DropoutOptions options;
};
OF_MODULE(Dropout2d);

// A parameter-free module applying `expr` to x.
#define OF_ACTIVATION_MODULE(Name, expr)             \
  class Name##Impl : public Module {                 \
   public:                                           \
    Name##Impl() : Module(#Name) {}                  \
    Tensor forward(const Tensor& x) { return expr; } \
  };                                                 \
  OF_MODULE(Name)

OF_ACTIVATION_MODULE(SiLU, x.silu());
OF_ACTIVATION_MODULE(Tanh, x.tanh());
OF_ACTIVATION_MODULE(Sigmoid, x.sigmoid());
OF_ACTIVATION_MODULE(Identity, x);
OF_ACTIVATION_MODULE(Mish, functional::mish(x));
OF_ACTIVATION_MODULE(LogSigmoid, functional::logsigmoid(x));
OF_ACTIVATION_MODULE(Softsign, functional::softsign(x));
OF_ACTIVATION_MODULE(Tanhshrink, functional::tanhshrink(x));
#undef OF_ACTIVATION_MODULE

// A module applying functional::fn(x, options) (prints as Name(field=value, ...)).
#define OF_OPTIONS_MODULE(Name, OptionsT, fn)                                              \
  class Name##Impl : public Module {                                                       \
   public:                                                                                 \
    explicit Name##Impl(const OptionsT& options = {}) : Module(#Name), options(options) {} \
    Tensor forward(Tensor x) { return functional::fn(std::move(x), options); }             \
    void pretty_print(std::ostream& stream) const override;                                \
    OptionsT options;                                                                      \
  };                                                                                       \
  OF_MODULE(Name)

OF_OPTIONS_MODULE(ReLU, ReLUOptions, relu);
OF_OPTIONS_MODULE(ReLU6, ReLU6Options, relu6);
OF_OPTIONS_MODULE(LeakyReLU, LeakyReLUOptions, leaky_relu);
OF_OPTIONS_MODULE(ELU, ELUOptions, elu);
OF_OPTIONS_MODULE(SELU, SELUOptions, selu);
OF_OPTIONS_MODULE(Hardtanh, HardtanhOptions, hardtanh);
OF_OPTIONS_MODULE(Softplus, SoftplusOptions, softplus);
OF_OPTIONS_MODULE(GLU, GLUOptions, glu);
OF_OPTIONS_MODULE(GELU, GELUOptions, gelu);
#undef OF_OPTIONS_MODULE

// Softmax / Softmin / LogSoftmax over options.dim().
#define OF_SOFTMAX_MODULE(Name, fn)                                                         \
  class Name##Impl : public Module {                                                        \
   public:                                                                                  \
    Name##Impl(int64_t dim) : Name##Impl(SoftmaxOptions(dim)) {}                            \
    explicit Name##Impl(const SoftmaxOptions& options) : Module(#Name), options(options) {} \
    Tensor forward(const Tensor& x) { return functional::fn(x, options.dim()); }            \
    void pretty_print(std::ostream& stream) const override;                                 \
    SoftmaxOptions options;                                                                 \
  };                                                                                        \
  OF_MODULE(Name)

OF_SOFTMAX_MODULE(Softmax, softmax);
OF_SOFTMAX_MODULE(Softmin, softmin);
OF_SOFTMAX_MODULE(LogSoftmax, log_softmax);
#undef OF_SOFTMAX_MODULE

class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(const FlattenOptions& options = {}) : Module("Flatten"), options(options) {}
  Tensor forward(const Tensor& x) { return x.flatten(options.start_dim(), options.end_dim()); }
  void pretty_print(std::ostream& stream) const override;
  FlattenOptions options;
};
OF_MODULE(Flatten);

// ---------------------------------------------------------------- pooling

// Shared by MaxPool1d/2d/3d.
template <size_t D> class MaxPoolNdImpl : public Module {
 public:
  explicit MaxPoolNdImpl(const MaxPoolOptions<D>& options);
  Tensor forward(const Tensor& input);
  // The maxima and their indices, flat over the spatial dims (as max_poolNd_with_indices).
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  MaxPoolOptions<D> options;
};

// A pooling module over its shared base (the variadic tail): libtorch's two constructors.
#define OF_POOL_MODULE(Name, Arg, ...)                                          \
  class Name##Impl : public __VA_ARGS__ {                                       \
   public:                                                                      \
    Name##Impl(Arg a) : Name##Impl(Name##Options(a)) {}                         \
    explicit Name##Impl(const Name##Options& options) : __VA_ARGS__(options) {} \
  };                                                                            \
  OF_MODULE(Name)

OF_POOL_MODULE(MaxPool1d, ExpandingArray<1>, MaxPoolNdImpl<1>);
OF_POOL_MODULE(MaxPool2d, ExpandingArray<2>, MaxPoolNdImpl<2>);
OF_POOL_MODULE(MaxPool3d, ExpandingArray<3>, MaxPoolNdImpl<3>);

// Shared by AvgPool1d/2d/3d.
template <size_t D> class AvgPoolNdImpl : public Module {
 public:
  explicit AvgPoolNdImpl(const AvgPoolOptions<D>& options);
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  AvgPoolOptions<D> options;
};

OF_POOL_MODULE(AvgPool1d, ExpandingArray<1>, AvgPoolNdImpl<1>);
OF_POOL_MODULE(AvgPool2d, ExpandingArray<2>, AvgPoolNdImpl<2>);
OF_POOL_MODULE(AvgPool3d, ExpandingArray<3>, AvgPoolNdImpl<3>);

// Shared by AdaptiveAvgPool1d/2d/3d.
template <size_t D, typename output_size_t> class AdaptiveAvgPoolNdImpl : public Module {
 public:
  explicit AdaptiveAvgPoolNdImpl(const AdaptiveAvgPoolOptions<output_size_t>& options);
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  AdaptiveAvgPoolOptions<output_size_t> options;
};

OF_POOL_MODULE(AdaptiveAvgPool1d, ExpandingArray<1>, AdaptiveAvgPoolNdImpl<1, ExpandingArray<1>>);
OF_POOL_MODULE(AdaptiveAvgPool2d, ExpandingArrayWithOptionalElem<2>,
               AdaptiveAvgPoolNdImpl<2, ExpandingArrayWithOptionalElem<2>>);
OF_POOL_MODULE(AdaptiveAvgPool3d, ExpandingArrayWithOptionalElem<3>,
               AdaptiveAvgPoolNdImpl<3, ExpandingArrayWithOptionalElem<3>>);

// Shared by AdaptiveMaxPool1d/2d/3d.
template <size_t D, typename output_size_t> class AdaptiveMaxPoolNdImpl : public Module {
 public:
  explicit AdaptiveMaxPoolNdImpl(const AdaptiveMaxPoolOptions<output_size_t>& options);
  Tensor forward(const Tensor& input);
  // The maxima and their indices, flat over the spatial dims.
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  AdaptiveMaxPoolOptions<output_size_t> options;
};

OF_POOL_MODULE(AdaptiveMaxPool1d, ExpandingArray<1>, AdaptiveMaxPoolNdImpl<1, ExpandingArray<1>>);
OF_POOL_MODULE(AdaptiveMaxPool2d, ExpandingArrayWithOptionalElem<2>,
               AdaptiveMaxPoolNdImpl<2, ExpandingArrayWithOptionalElem<2>>);
OF_POOL_MODULE(AdaptiveMaxPool3d, ExpandingArrayWithOptionalElem<3>,
               AdaptiveMaxPoolNdImpl<3, ExpandingArrayWithOptionalElem<3>>);
#undef OF_POOL_MODULE

// ---------------------------------------------------------------- attention

// libtorch's MultiheadAttention, sequence-first: query [L, N, E], key/value [S, N, E].
// Returns (output [L, N, E], attention weights averaged over heads [N, L, S] or undefined
// when need_weights is false). attn_mask [L, S]: bool (true = masked out, as PyTorch) or
// additive float; key_padding_mask [N, S] bool (true = ignore). Without weights the heads run
// through scaled_dot_product_attention (memory O(L * E) per head).
class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);
  void reset_parameters();
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {});
  void pretty_print(std::ostream& stream) const override;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;
  Linear out_proj{nullptr};
};
OF_MODULE(MultiheadAttention);

// Self-attention + feed-forward block with residuals and LayerNorm (post-norm by default, as
// libtorch 1.13; norm_first for pre-norm). src [S, N, E]; src_mask [S, S] as attn_mask.
class TransformerEncoderLayerImpl : public Module {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options);
  Tensor forward(const Tensor& src, const Tensor& src_mask = {},
                 const Tensor& src_key_padding_mask = {});
  void pretty_print(std::ostream& stream) const override;
  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  Linear linear1{nullptr}, linear2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr};
  Dropout dropout{nullptr}, dropout1{nullptr}, dropout2{nullptr};
};
OF_MODULE(TransformerEncoderLayer);

// ---------------------------------------------------------------- losses

// A loss module: forward(input, target) = functional::fn(input, target, options). A class
// weight (and BCEWithLogitsLoss's pos_weight) given in the options is registered as a buffer,
// so to(device/dtype) moves it with the module.
#define OF_LOSS_MODULE(Name, OptionsT, fn)                                                         \
  class Name##Impl : public Module {                                                               \
   public:                                                                                         \
    explicit Name##Impl(const OptionsT& options = {}) : Module(#Name), options(options) {          \
      register_weights(this->options);                                                             \
    }                                                                                              \
    Tensor forward(const Tensor& input, const Tensor& target) {                                    \
      return functional::fn(input, target, options);                                               \
    }                                                                                              \
    OptionsT options;                                                                              \
                                                                                                   \
   private:                                                                                        \
    template <class O> void register_weights(O& o) {                                               \
      if constexpr (requires { o.weight(); }) {                                                    \
        if (o.weight().defined()) o.weight(register_buffer("weight", o.weight()));                 \
      }                                                                                            \
      if constexpr (requires { o.pos_weight(); }) {                                                \
        if (o.pos_weight().defined()) o.pos_weight(register_buffer("pos_weight", o.pos_weight())); \
      }                                                                                            \
    }                                                                                              \
  };                                                                                               \
  OF_MODULE(Name)

OF_LOSS_MODULE(L1Loss, L1LossOptions, l1_loss);
OF_LOSS_MODULE(MSELoss, MSELossOptions, mse_loss);
OF_LOSS_MODULE(SmoothL1Loss, SmoothL1LossOptions, smooth_l1_loss);
OF_LOSS_MODULE(HuberLoss, HuberLossOptions, huber_loss);
OF_LOSS_MODULE(KLDivLoss, KLDivLossOptions, kl_div);
OF_LOSS_MODULE(BCELoss, BCELossOptions, binary_cross_entropy);
OF_LOSS_MODULE(BCEWithLogitsLoss, BCEWithLogitsLossOptions, binary_cross_entropy_with_logits);
OF_LOSS_MODULE(NLLLoss, NLLLossOptions, nll_loss);
OF_LOSS_MODULE(CrossEntropyLoss, CrossEntropyLossOptions, cross_entropy);
#undef OF_LOSS_MODULE

// ---------------------------------------------------------------- resampling

// Resizes [N, C, H, W] by functional::interpolate (modes kNearest and kBilinear).
class UpsampleImpl : public Module {
 public:
  explicit UpsampleImpl(const UpsampleOptions& options = {})
      : Module("Upsample"), options(options) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  UpsampleOptions options;
};
OF_MODULE(Upsample);

// ---------------------------------------------------------------- containers

// Wraps a function Tensor -> Tensor as a module (for Sequential).
class FunctionalImpl : public Module {
 public:
  explicit FunctionalImpl(std::function<Tensor(Tensor)> f)
      : Module("Functional"), f_(std::move(f)) {}
  Tensor forward(const Tensor& x) { return f_(x); }

 private:
  std::function<Tensor(Tensor)> f_;
};
OF_MODULE(Functional);

// Runs its modules in order; each must have forward(const Tensor&) -> Tensor.
class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <class... Ms> explicit SequentialImpl(Ms&&... modules) : Module("Sequential") {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  template <class Holder, class = typename std::decay_t<Holder>::ContainedType>
  void push_back(Holder&& holder) {
    push_back(std::to_string(forwards_.size()), holder.ptr());
  }
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M>>>
  void push_back(std::shared_ptr<M> module) {
    push_back(std::to_string(forwards_.size()), std::move(module));
  }
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M>>>
  void push_back(std::string name, std::shared_ptr<M> module) {
    M* raw = module.get();
    register_module(std::move(name), module);
    forwards_.push_back([raw](const Tensor& x) { return Tensor(raw->forward(x)); });
  }
  template <class Holder, class = typename std::decay_t<Holder>::ContainedType>
  void push_back(std::string name, Holder&& holder) {
    push_back(std::move(name), holder.ptr());
  }
  Tensor forward(const Tensor& input);
  size_t size() const { return forwards_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return children_[i].value(); }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> forwards_;
};
OF_MODULE(Sequential);

// A list of submodules registered as "0", "1", ... (no forward of its own).
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <class... Ms> explicit ModuleListImpl(Ms&&... modules) : Module("ModuleList") {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  template <class Holder, class = typename std::decay_t<Holder>::ContainedType>
  void push_back(Holder&& holder) {
    push_back(std::shared_ptr<Module>(holder.ptr()));
  }
  void push_back(std::shared_ptr<Module> module) {
    register_module(std::to_string(children_.size()), std::move(module));
  }
  size_t size() const { return children_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return children_[i].value(); }
  // The i-th module as its concrete type (error when it is another type).
  template <class M> std::shared_ptr<M> ptr(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>(children_[i].value());
    if (!p) throw_error("[ModuleList] module {} is not of the requested type", i);
    return p;
  }
  auto begin() const { return children_.begin(); }
  auto end() const { return children_.end(); }
};
OF_MODULE(ModuleList);

// Submodules by name, in insertion order (no forward of its own).
class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() : Module("ModuleDict") {}
  explicit ModuleDictImpl(
      const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules)
      : Module("ModuleDict") {
    for (const auto& [k, m] : modules) insert(k, m);
  }
  // Adds a module under `key` (an existing key is an error).
  void insert(const std::string& key, std::shared_ptr<Module> module) {
    register_module(key, std::move(module));
  }
  template <class Holder, class = typename std::decay_t<Holder>::ContainedType>
  void insert(const std::string& key, Holder&& holder) {
    insert(key, std::shared_ptr<Module>(holder.ptr()));
  }
  bool contains(const std::string& key) const { return children_.contains(key); }
  std::shared_ptr<Module> operator[](const std::string& key) const { return children_[key]; }
  // The module under key as its concrete type (error when it is another type).
  template <class M> std::shared_ptr<M> at(const std::string& key) const {
    auto p = std::dynamic_pointer_cast<M>(children_[key]);
    if (!p) throw_error("[ModuleDict] module '{}' is not of the requested type", key);
    return p;
  }
  size_t size() const { return children_.size(); }
  std::vector<std::string> keys() const { return children_.keys(); }
  auto begin() const { return children_.begin(); }
  auto end() const { return children_.end(); }
};
OF_MODULE(ModuleDict);

// ---------------------------------------------------------------- init

namespace init {
using NonlinearityType =
    std::variant<enumtype::kLinear, enumtype::kConv1D, enumtype::kConv2D, enumtype::kConv3D,
                 enumtype::kConvTranspose1D, enumtype::kConvTranspose2D, enumtype::kConvTranspose3D,
                 enumtype::kSigmoid, enumtype::kTanh, enumtype::kReLU, enumtype::kLeakyReLU>;
using FanModeType = std::variant<enumtype::kFanIn, enumtype::kFanOut>;
// PyTorch's recommended gain for a nonlinearity (param: LeakyReLU's negative slope).
double calculate_gain(NonlinearityType nonlinearity, double param = 0.01);
// (fan_in, fan_out) of a weight with at least 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);
Tensor uniform_(Tensor tensor, double low = 0, double high = 1);
Tensor normal_(Tensor tensor, double mean = 0, double std = 1);
Tensor constant_(Tensor tensor, double value);
Tensor ones_(Tensor tensor);
Tensor zeros_(Tensor tensor);
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);
Tensor xavier_normal_(Tensor tensor, double gain = 1.0);
Tensor kaiming_uniform_(Tensor tensor, double a = 0, FanModeType mode = kFanIn,
                        NonlinearityType nonlinearity = kLeakyReLU);
Tensor kaiming_normal_(Tensor tensor, double a = 0, FanModeType mode = kFanIn,
                       NonlinearityType nonlinearity = kLeakyReLU);
}  // namespace init

}  // namespace nn

}  // namespace oneflow

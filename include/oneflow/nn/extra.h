// nn/extra.h: more of libtorch 1.13's nn surface: the Transformer family (TransformerDecoderLayer,
// TransformerEncoder/Decoder, Transformer, AnyModule), Bilinear, Fold/Unfold (im2col/col2im),
// PixelShuffle/PixelUnshuffle, InstanceNorm1d/2d/3d, CosineSimilarity and PairwiseDistance, with
// their options, functional forms and root-namespace functions.
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "oneflow/nn.h"

namespace oneflow {

// ---------------------------------------------------------------- root functions

// Sliding kernel windows of [N, C, H, W] ([C, H, W]) as columns: [N, C*kh*kw, L].
Tensor im2col(const Tensor& input, IntArrayRef kernel_size, IntArrayRef dilation,
              IntArrayRef padding, IntArrayRef stride);
// The adjoint of im2col: sums columns [N, C*kh*kw, L] back into [N, C, output_size].
Tensor col2im(const Tensor& input, IntArrayRef output_size, IntArrayRef kernel_size,
              IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride);
// [*, C*r*r, H, W] -> [*, C, H*r, W*r].
Tensor pixel_shuffle(const Tensor& input, int64_t upscale_factor);
// [*, C, H*r, W*r] -> [*, C*r*r, H, W].
Tensor pixel_unshuffle(const Tensor& input, int64_t downscale_factor);
// y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o].
Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight,
                const Tensor& bias = {});
// Normalizes each (sample, channel) of [N, C, *] over *; with use_input_stats the running stats
// (when defined) are updated in place, else they normalize.
Tensor instance_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const Tensor& running_mean, const Tensor& running_var, bool use_input_stats,
                     double momentum, double eps, bool cudnn_enabled = false);
// sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) over dim (inputs broadcast).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// ||x1 - x2 + eps||_p over the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6,
                         bool keepdim = false);

namespace nn {

// ---------------------------------------------------------------- AnyModule

// A type-erased module (libtorch's AnyModule): holds any module whose forward takes up to 8
// tensors and returns a Tensor; forward(args...) calls it. Empty when default-constructed.
class AnyModule {
 public:
  AnyModule() = default;
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M>>>
  explicit AnyModule(std::shared_ptr<M> module) : module_(module) {
    M* raw = module.get();
    call_ = [raw](const std::vector<Tensor>& a) -> Tensor {
      switch (a.size()) {
        case 1:
          return call_n(raw, a, std::make_index_sequence<1>{});
        case 2:
          return call_n(raw, a, std::make_index_sequence<2>{});
        case 3:
          return call_n(raw, a, std::make_index_sequence<3>{});
        case 4:
          return call_n(raw, a, std::make_index_sequence<4>{});
        case 5:
          return call_n(raw, a, std::make_index_sequence<5>{});
        case 6:
          return call_n(raw, a, std::make_index_sequence<6>{});
        case 7:
          return call_n(raw, a, std::make_index_sequence<7>{});
        case 8:
          return call_n(raw, a, std::make_index_sequence<8>{});
        default:
          throw_error("[AnyModule] forward takes 1 to 8 tensors, got {}", a.size());
      }
    };
  }
  template <class Holder, class = typename std::decay_t<Holder>::ContainedType>
  explicit AnyModule(const Holder& holder) : AnyModule(holder.ptr()) {}

  // Calls the module's forward with these tensors.
  template <class... Args> Tensor forward(const Args&... args) const {
    if (!call_) throw_error("[AnyModule] forward called on an empty AnyModule");
    return call_(std::vector<Tensor>{Tensor(args)...});
  }
  bool is_empty() const { return module_ == nullptr; }
  const std::shared_ptr<Module>& ptr() const { return module_; }
  // The held module as M (error when it is another type or empty).
  template <class M> M& get() const {
    auto* p = dynamic_cast<M*>(module_.get());
    if (!p) throw_error("[AnyModule] the held module is not of the requested type");
    return *p;
  }

 private:
  template <class M, size_t... I>
  static Tensor call_n(M* m, const std::vector<Tensor>& a, std::index_sequence<I...>) {
    if constexpr (requires {
                    { m->forward(a[I]...) } -> std::convertible_to<Tensor>;
                  })
      return m->forward(a[I]...);
    else throw_error("[AnyModule] {}::forward does not take {} tensors", m->name(), sizeof...(I));
  }
  std::shared_ptr<Module> module_;
  std::function<Tensor(const std::vector<Tensor>&)> call_;
};

// ---------------------------------------------------------------- transformer options

using activation_t = TransformerEncoderLayerOptions::activation_t;

// libtorch 1.13's fields, plus norm_first and layer_norm_eps as TransformerEncoderLayerOptions.
struct TransformerDecoderLayerOptions {
  TransformerDecoderLayerOptions(int64_t d_model, int64_t nhead)
      : d_model_(d_model), nhead_(nhead) {}
  OF_ARG(int64_t, d_model);
  OF_ARG(int64_t, nhead);
  OF_ARG(int64_t, dim_feedforward) = 2048;
  OF_ARG(double, dropout) = 0.1;
  OF_ARG(activation_t, activation) = kReLU;
  OF_ARG(bool, norm_first) = false;
  OF_ARG(double, layer_norm_eps) = 1e-5;
};

// Self-attention, cross-attention over memory, feed-forward; residuals and LayerNorms (post-norm
// as libtorch 1.13; norm_first for pre-norm). tgt [T, N, E], memory [S, N, E].
class TransformerDecoderLayerImpl : public Module {
 public:
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead)) {}
  explicit TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {});
  void pretty_print(std::ostream& stream) const override;
  TransformerDecoderLayerOptions options;
  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  Linear linear1{nullptr}, linear2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  Dropout dropout{nullptr}, dropout1{nullptr}, dropout2{nullptr}, dropout3{nullptr};
};
OF_MODULE(TransformerDecoderLayer);

struct TransformerEncoderOptions {
  TransformerEncoderOptions(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : encoder_layer_(std::move(encoder_layer)), num_layers_(num_layers) {}
  TransformerEncoderOptions(const TransformerEncoderLayerOptions& encoder_layer_options,
                            int64_t num_layers)
      : encoder_layer_(encoder_layer_options), num_layers_(num_layers) {}
  OF_ARG(TransformerEncoderLayer, encoder_layer) = nullptr;
  OF_ARG(int64_t, num_layers);
  OF_ARG(AnyModule, norm);
};

struct TransformerDecoderOptions {
  TransformerDecoderOptions(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : decoder_layer_(std::move(decoder_layer)), num_layers_(num_layers) {}
  TransformerDecoderOptions(const TransformerDecoderLayerOptions& decoder_layer_options,
                            int64_t num_layers)
      : decoder_layer_(decoder_layer_options), num_layers_(num_layers) {}
  OF_ARG(TransformerDecoderLayer, decoder_layer) = nullptr;
  OF_ARG(int64_t, num_layers);
  OF_ARG(AnyModule, norm);
};

struct TransformerOptions {
  TransformerOptions() = default;
  TransformerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  TransformerOptions(int64_t d_model, int64_t nhead, int64_t num_encoder_layers,
                     int64_t num_decoder_layers)
      : d_model_(d_model),
        nhead_(nhead),
        num_encoder_layers_(num_encoder_layers),
        num_decoder_layers_(num_decoder_layers) {}
  OF_ARG(int64_t, d_model) = 512;
  OF_ARG(int64_t, nhead) = 8;
  OF_ARG(int64_t, num_encoder_layers) = 6;
  OF_ARG(int64_t, num_decoder_layers) = 6;
  OF_ARG(int64_t, dim_feedforward) = 2048;
  OF_ARG(double, dropout) = 0.1;
  OF_ARG(activation_t, activation) = kReLU;
  OF_ARG(AnyModule, custom_encoder);
  OF_ARG(AnyModule, custom_decoder);
};

// num_layers copies of encoder_layer (same initial weights, as libtorch's clones) in "layers",
// then the optional norm.
class TransformerEncoderImpl : public Module {
 public:
  TransformerEncoderImpl(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : TransformerEncoderImpl(TransformerEncoderOptions(std::move(encoder_layer), num_layers)) {}
  explicit TransformerEncoderImpl(TransformerEncoderOptions options);
  void reset_parameters();
  Tensor forward(const Tensor& src, const Tensor& src_mask = {},
                 const Tensor& src_key_padding_mask = {});
  TransformerEncoderOptions options;
  ModuleList layers{nullptr};
  AnyModule norm;
};
OF_MODULE(TransformerEncoder);

class TransformerDecoderImpl : public Module {
 public:
  TransformerDecoderImpl(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : TransformerDecoderImpl(TransformerDecoderOptions(std::move(decoder_layer), num_layers)) {}
  explicit TransformerDecoderImpl(TransformerDecoderOptions options);
  void reset_parameters();
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {});
  TransformerDecoderOptions options;
  ModuleList layers{nullptr};
  AnyModule norm;
};
OF_MODULE(TransformerDecoder);

// Encoder-decoder transformer (sequence-first: src [S, N, E], tgt [T, N, E] -> [T, N, E]).
// Parameters with more than one dim are xavier-uniform initialized, as libtorch.
class TransformerImpl : public Module {
 public:
  explicit TransformerImpl(TransformerOptions options = {});
  void reset_parameters();
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = {},
                 const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& src_key_padding_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {});
  // [sz, sz] float mask: 0 on and below the diagonal, -inf above.
  static Tensor generate_square_subsequent_mask(int64_t sz);
  TransformerOptions options;
  AnyModule encoder, decoder;
};
OF_MODULE(Transformer);

// ---------------------------------------------------------------- other options

struct BilinearOptions {
  BilinearOptions(int64_t in1_features, int64_t in2_features, int64_t out_features)
      : in1_features_(in1_features), in2_features_(in2_features), out_features_(out_features) {}
  OF_ARG(int64_t, in1_features);
  OF_ARG(int64_t, in2_features);
  OF_ARG(int64_t, out_features);
  OF_ARG(bool, bias) = true;
};

struct FoldOptions {
  FoldOptions(ExpandingArray<2> output_size, ExpandingArray<2> kernel_size)
      : output_size_(output_size), kernel_size_(kernel_size) {}
  OF_ARG(ExpandingArray<2>, output_size);
  OF_ARG(ExpandingArray<2>, kernel_size);
  OF_ARG(ExpandingArray<2>, dilation) = 1;
  OF_ARG(ExpandingArray<2>, padding) = 0;
  OF_ARG(ExpandingArray<2>, stride) = 1;
};

struct UnfoldOptions {
  UnfoldOptions(ExpandingArray<2> kernel_size) : kernel_size_(kernel_size) {}
  OF_ARG(ExpandingArray<2>, kernel_size);
  OF_ARG(ExpandingArray<2>, dilation) = 1;
  OF_ARG(ExpandingArray<2>, padding) = 0;
  OF_ARG(ExpandingArray<2>, stride) = 1;
};

struct PixelShuffleOptions {
  PixelShuffleOptions(int64_t upscale_factor) : upscale_factor_(upscale_factor) {}
  OF_ARG(int64_t, upscale_factor);
};

struct PixelUnshuffleOptions {
  PixelUnshuffleOptions(int64_t downscale_factor) : downscale_factor_(downscale_factor) {}
  OF_ARG(int64_t, downscale_factor);
};

struct InstanceNormOptions {
  InstanceNormOptions(int64_t num_features) : num_features_(num_features) {}
  OF_ARG(int64_t, num_features);
  OF_ARG(double, eps) = 1e-5;
  OF_ARG(double, momentum) = 0.1;
  OF_ARG(bool, affine) = false;
  OF_ARG(bool, track_running_stats) = false;
};
using InstanceNorm1dOptions = InstanceNormOptions;
using InstanceNorm2dOptions = InstanceNormOptions;
using InstanceNorm3dOptions = InstanceNormOptions;

struct CosineSimilarityOptions {
  OF_ARG(int64_t, dim) = 1;
  OF_ARG(double, eps) = 1e-8;
};

struct PairwiseDistanceOptions {
  OF_ARG(double, p) = 2.0;
  OF_ARG(double, eps) = 1e-6;
  OF_ARG(bool, keepdim) = false;
};

namespace functional {
using FoldFuncOptions = FoldOptions;
using UnfoldFuncOptions = UnfoldOptions;
using PixelShuffleFuncOptions = PixelShuffleOptions;
using PixelUnshuffleFuncOptions = PixelUnshuffleOptions;
using CosineSimilarityFuncOptions = CosineSimilarityOptions;
using PairwiseDistanceFuncOptions = PairwiseDistanceOptions;

struct InstanceNormFuncOptions {
  OF_ARG(Tensor, running_mean) = Tensor();
  OF_ARG(Tensor, running_var) = Tensor();
  OF_ARG(Tensor, weight) = Tensor();
  OF_ARG(Tensor, bias) = Tensor();
  OF_ARG(bool, use_input_stats) = true;
  OF_ARG(double, momentum) = 0.1;
  OF_ARG(double, eps) = 1e-5;
};

Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight,
                const Tensor& bias = {});
// col2im of a [N, C*kh*kw, L] (or unbatched [C*kh*kw, L]) input.
Tensor fold(const Tensor& input, const FoldFuncOptions& options);
// im2col of a 4-D input.
Tensor unfold(const Tensor& input, const UnfoldFuncOptions& options);
Tensor pixel_shuffle(const Tensor& input, const PixelShuffleFuncOptions& options);
Tensor pixel_unshuffle(const Tensor& input, const PixelUnshuffleFuncOptions& options);
Tensor instance_norm(const Tensor& input, const InstanceNormFuncOptions& options = {});
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2,
                         const CosineSimilarityFuncOptions& options = {});
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2,
                         const PairwiseDistanceFuncOptions& options = {});
}  // namespace functional

// ---------------------------------------------------------------- modules

// y = x1 W x2 + b; W [out, in1, in2], b [out], both U(+-1/sqrt(in1)) as libtorch.
class BilinearImpl : public Module {
 public:
  BilinearImpl(int64_t in1_features, int64_t in2_features, int64_t out_features)
      : BilinearImpl(BilinearOptions(in1_features, in2_features, out_features)) {}
  explicit BilinearImpl(const BilinearOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input1, const Tensor& input2);
  void pretty_print(std::ostream& stream) const override;
  BilinearOptions options;
  Tensor weight, bias;
};
OF_MODULE(Bilinear);

class FoldImpl : public Module {
 public:
  FoldImpl(ExpandingArray<2> output_size, ExpandingArray<2> kernel_size)
      : FoldImpl(FoldOptions(output_size, kernel_size)) {}
  explicit FoldImpl(const FoldOptions& options) : Module("Fold"), options(options) {}
  Tensor forward(const Tensor& input) { return functional::fold(input, options); }
  void pretty_print(std::ostream& stream) const override;
  FoldOptions options;
};
OF_MODULE(Fold);

class UnfoldImpl : public Module {
 public:
  UnfoldImpl(ExpandingArray<2> kernel_size) : UnfoldImpl(UnfoldOptions(kernel_size)) {}
  explicit UnfoldImpl(const UnfoldOptions& options) : Module("Unfold"), options(options) {}
  Tensor forward(const Tensor& input) { return functional::unfold(input, options); }
  void pretty_print(std::ostream& stream) const override;
  UnfoldOptions options;
};
OF_MODULE(Unfold);

class PixelShuffleImpl : public Module {
 public:
  explicit PixelShuffleImpl(const PixelShuffleOptions& options)
      : Module("PixelShuffle"), options(options) {}
  Tensor forward(const Tensor& input) { return functional::pixel_shuffle(input, options); }
  void pretty_print(std::ostream& stream) const override;
  PixelShuffleOptions options;
};
OF_MODULE(PixelShuffle);

class PixelUnshuffleImpl : public Module {
 public:
  explicit PixelUnshuffleImpl(const PixelUnshuffleOptions& options)
      : Module("PixelUnshuffle"), options(options) {}
  Tensor forward(const Tensor& input) { return functional::pixel_unshuffle(input, options); }
  void pretty_print(std::ostream& stream) const override;
  PixelUnshuffleOptions options;
};
OF_MODULE(PixelUnshuffle);

// Instance norm over [N, C, *] (or unbatched [C, *]); weight/bias only when affine, running
// stats only when track_running_stats (then used in eval mode).
class InstanceNormImplBase : public NormImplBase {
 public:
  InstanceNormImplBase(const InstanceNormOptions& options, const char* name, int64_t dim);
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  InstanceNormOptions options;

 private:
  int64_t dim_;  // the batched rank (3, 4 or 5)
};

#define OF_INSTANCE_NORM(Name, D)                                                            \
  class Name##Impl : public InstanceNormImplBase {                                           \
   public:                                                                                   \
    Name##Impl(int64_t num_features) : Name##Impl(InstanceNormOptions(num_features)) {}      \
    explicit Name##Impl(const InstanceNormOptions& o) : InstanceNormImplBase(o, #Name, D) {} \
  };                                                                                         \
  OF_MODULE(Name)
OF_INSTANCE_NORM(InstanceNorm1d, 3);
OF_INSTANCE_NORM(InstanceNorm2d, 4);
OF_INSTANCE_NORM(InstanceNorm3d, 5);
#undef OF_INSTANCE_NORM

class CosineSimilarityImpl : public Module {
 public:
  explicit CosineSimilarityImpl(const CosineSimilarityOptions& options = {})
      : Module("CosineSimilarity"), options(options) {}
  Tensor forward(const Tensor& input1, const Tensor& input2) {
    return functional::cosine_similarity(input1, input2, options);
  }
  void pretty_print(std::ostream& stream) const override;
  CosineSimilarityOptions options;
};
OF_MODULE(CosineSimilarity);

class PairwiseDistanceImpl : public Module {
 public:
  explicit PairwiseDistanceImpl(const PairwiseDistanceOptions& options = {})
      : Module("PairwiseDistance"), options(options) {}
  Tensor forward(const Tensor& input1, const Tensor& input2) {
    return functional::pairwise_distance(input1, input2, options);
  }
  void pretty_print(std::ostream& stream) const override;
  PairwiseDistanceOptions options;
};
OF_MODULE(PairwiseDistance);

}  // namespace nn
}  // namespace oneflow

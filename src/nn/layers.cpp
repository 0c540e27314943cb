// The of::nn layers: construction (libtorch's default initialization), forward and printing.
#include <cmath>
#include <ostream>

#include "oneflow/nn.h"

namespace oneflow::nn {

namespace {

const char* bool_str(bool b) { return b ? "true" : "false"; }

template <size_t D> std::string list_str(const ExpandingArray<D>& a) {
  std::string s = "[";
  for (size_t i = 0; i < D; ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s + "]";
}

std::string list_str(const std::vector<int64_t>& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s + "]";
}

// weight ~ kaiming_uniform(a = sqrt(5)) and bias ~ U(+-1/sqrt(fan_in)): libtorch's default for
// Linear and Conv (a bound of 1/sqrt(fan_in) for both).
void reset_linear_like(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

}  // namespace

// ---------------------------------------------------------------- Linear

LinearImpl::LinearImpl(const LinearOptions& o) : Module("Linear"), options(o) {
  OF_CHECK(o.in_features() >= 0 && o.out_features() >= 0,
           "[Linear] in_features and out_features must be non-negative, got {} and {}",
           o.in_features(), o.out_features());
  weight = register_parameter("weight", oneflow::empty({o.out_features(), o.in_features()}));
  if (o.bias()) bias = register_parameter("bias", oneflow::empty({o.out_features()}));
  reset_parameters();
}

void LinearImpl::reset_parameters() { reset_linear_like(weight, bias); }

Tensor LinearImpl::forward(const Tensor& input) { return linear(input, weight, bias); }

void LinearImpl::pretty_print(std::ostream& s) const {
  s << "Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
    << ", bias=" << bool_str(options.bias()) << ")";
}

// ---------------------------------------------------------------- Embedding

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o) : Module("Embedding"), options(o) {
  OF_CHECK(o.num_embeddings() > 0 && o.embedding_dim() > 0,
           "[Embedding] num_embeddings and embedding_dim must be positive, got {} and {}",
           o.num_embeddings(), o.embedding_dim());
  if (o.padding_idx()) {
    int64_t p = *o.padding_idx();
    OF_CHECK(p >= -o.num_embeddings() && p < o.num_embeddings(),
             "[Embedding] padding_idx {} must be within num_embeddings {}", p, o.num_embeddings());
    if (p < 0) options.padding_idx(p + o.num_embeddings());
  }
  weight = register_parameter("weight", oneflow::empty({o.num_embeddings(), o.embedding_dim()}));
  reset_parameters();
}

void EmbeddingImpl::reset_parameters() {
  init::normal_(weight);
  if (options.padding_idx()) {
    NoGradGuard g;
    weight.select(0, *options.padding_idx()).fill_(0);
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  return embedding(weight, indices, options.padding_idx().value_or(-1));
}

void EmbeddingImpl::pretty_print(std::ostream& s) const {
  s << "Embedding(num_embeddings=" << options.num_embeddings()
    << ", embedding_dim=" << options.embedding_dim();
  if (options.padding_idx()) s << ", padding_idx=" << *options.padding_idx();
  s << ")";
}

// ---------------------------------------------------------------- Conv

template <size_t D>
ConvNdImpl<D>::ConvNdImpl(const ConvOptions<D>& o)
    : Module(D == 1   ? "Conv1d"
             : D == 2 ? "Conv2d"
                      : "Conv3d"),
      options(o) {
  OF_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && o.groups() > 0,
           "[{}] in_channels, out_channels and groups must be positive, got {}, {}, {}",
           this->name(), o.in_channels(), o.out_channels(), o.groups());
  OF_CHECK(o.in_channels() % o.groups() == 0 && o.out_channels() % o.groups() == 0,
           "[{}] in_channels {} and out_channels {} must be divisible by groups {}", this->name(),
           o.in_channels(), o.out_channels(), o.groups());
  if (std::holds_alternative<enumtype::kSame>(o.padding())) {
    for (size_t i = 0; i < D; ++i)
      OF_CHECK(o.stride()[i] == 1,
               "[{}] padding='same' is not supported for strided convolutions "
               "(stride {})",
               this->name(), list_str(o.stride()));
  }
  DimVector wshape{o.out_channels(), o.in_channels() / o.groups()};
  for (size_t i = 0; i < D; ++i) wshape.push_back(o.kernel_size()[i]);
  weight = this->register_parameter("weight", oneflow::empty(wshape));
  if (o.bias()) bias = this->register_parameter("bias", oneflow::empty({o.out_channels()}));
  reset_parameters();
}

template <size_t D> void ConvNdImpl<D>::reset_parameters() { reset_linear_like(weight, bias); }

template <size_t D> void ConvNdImpl<D>::pretty_print(std::ostream& s) const {
  s << this->name() << "(" << options.in_channels() << ", " << options.out_channels()
    << ", kernel_size=" << list_str(options.kernel_size())
    << ", stride=" << list_str(options.stride());
  if (const auto* p = std::get_if<ExpandingArray<D>>(&options.padding())) {
    bool any_pad = false;
    for (size_t i = 0; i < D; ++i) any_pad |= (*p)[i] != 0;
    if (any_pad) s << ", padding=" << list_str(*p);
  } else {
    s << ", padding="
      << (std::holds_alternative<enumtype::kSame>(options.padding()) ? "same" : "valid");
  }
  bool any_dil = false;
  for (size_t i = 0; i < D; ++i) any_dil |= options.dilation()[i] != 1;
  if (any_dil) s << ", dilation=" << list_str(options.dilation());
  if (options.groups() != 1) s << ", groups=" << options.groups();
  if (!options.bias()) s << ", bias=false";
  if (!std::holds_alternative<enumtype::kZeros>(options.padding_mode()))
    s << ", padding_mode=" << enumtype::get_enum_name(options.padding_mode());
  s << ")";
}

template <size_t D> Tensor ConvNdImpl<D>::conv_forward(const Tensor& input) {
  namespace F = functional;
  auto conv_nd = [&](const Tensor& x, const F::ConvFuncOptions<D>& o) {
    if constexpr (D == 1) return F::conv1d(x, weight, o);
    else if constexpr (D == 2) return F::conv2d(x, weight, o);
    else return F::conv3d(x, weight, o);
  };
  F::ConvFuncOptions<D> fo;
  fo.bias(bias).stride(options.stride()).dilation(options.dilation()).groups(options.groups());
  const auto& mode = options.padding_mode();
  if (std::holds_alternative<enumtype::kZeros>(mode)) {
    fo.padding(options.padding());
  } else {
    // Pad explicitly with the mode (F::pad lists the last dim first), then convolve unpadded.
    std::vector<int64_t> pads;
    for (size_t i = D; i-- > 0;) {
      int64_t lo = 0, hi = 0;
      if (const auto* p = std::get_if<ExpandingArray<D>>(&options.padding())) {
        lo = hi = (*p)[i];
      } else if (std::holds_alternative<enumtype::kSame>(options.padding())) {
        const int64_t total = options.dilation()[i] * (options.kernel_size()[i] - 1);
        lo = total / 2;
        hi = total - lo;
      }
      pads.push_back(lo);
      pads.push_back(hi);
    }
    F::PadFuncOptions po(pads);
    if (std::holds_alternative<enumtype::kReflect>(mode)) po.mode(kReflect);
    else if (std::holds_alternative<enumtype::kReplicate>(mode)) po.mode(kReplicate);
    else po.mode(kCircular);
    fo.padding(0);
    return conv_nd(F::pad(input, po), fo);
  }
  return conv_nd(input, fo);
}

template class ConvNdImpl<1>;
template class ConvNdImpl<2>;
template class ConvNdImpl<3>;

Tensor Conv1dImpl::forward(const Tensor& input) { return conv_forward(input); }

Tensor Conv2dImpl::forward(const Tensor& input) { return conv_forward(input); }

Tensor Conv3dImpl::forward(const Tensor& input) { return conv_forward(input); }

template <size_t D>
ConvTransposeNdImpl<D>::ConvTransposeNdImpl(const ConvTransposeOptions<D>& o)
    : Module(D == 1   ? "ConvTranspose1d"
             : D == 2 ? "ConvTranspose2d"
                      : "ConvTranspose3d"),
      options(o) {
  OF_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && o.groups() > 0,
           "[{}] in_channels, out_channels and groups must be positive, got {}, {}, {}",
           this->name(), o.in_channels(), o.out_channels(), o.groups());
  OF_CHECK(o.in_channels() % o.groups() == 0 && o.out_channels() % o.groups() == 0,
           "[{}] in_channels {} and out_channels {} must be divisible by groups {}", this->name(),
           o.in_channels(), o.out_channels(), o.groups());
  DimVector wshape{o.in_channels(), o.out_channels() / o.groups()};
  for (size_t i = 0; i < D; ++i) wshape.push_back(o.kernel_size()[i]);
  weight = register_parameter("weight", oneflow::empty(wshape));
  if (o.bias()) bias = register_parameter("bias", oneflow::empty({o.out_channels()}));
  reset_parameters();
}

template <size_t D> void ConvTransposeNdImpl<D>::reset_parameters() {
  reset_linear_like(weight, bias);
}

template <size_t D>
Tensor ConvTransposeNdImpl<D>::forward(const Tensor& input,
                                       const std::optional<IntArrayRef>& output_size) {
  DimVector output_padding = options.output_padding().ref().dims();
  if (output_size) {
    const IntArrayRef req = *output_size;
    DimVector os;
    for (size_t i = req.size() == D + 2 ? 2 : 0; i < req.size(); ++i) os.push_back(req[i]);
    OF_CHECK(os.size() == D, "[{}] output_size must have {} or {} elements, got {}", this->name(),
             D, D + 2, shape_str(*output_size));
    OF_CHECK(input.defined() && input.dim() >= int64_t(D),
             "[{}] expected an input with at least {} dims", this->name(), D);
    for (size_t i = 0; i < D; ++i) {
      const int64_t in = input.size(input.dim() - int64_t(D) + int64_t(i));
      const int64_t s = options.stride()[i];
      const int64_t lo = (in - 1) * s - 2 * options.padding()[i] +
                         options.dilation()[i] * (options.kernel_size()[i] - 1) + 1;
      OF_CHECK(os[i] >= lo && os[i] <= lo + s - 1,
               "[{}] requested output size {} is not in the valid range [{}, {}] for input {}",
               this->name(), shape_str(*output_size), lo, lo + s - 1, shape_str(input.sizes()));
      output_padding[i] = os[i] - lo;
    }
  }
  auto conv_t = [&](auto... a) {
    if constexpr (D == 1) return conv_transpose1d(a...);
    else if constexpr (D == 2) return conv_transpose2d(a...);
    else return conv_transpose3d(a...);
  };
  return conv_t(input, weight, bias, options.stride().ref(), options.padding().ref(),
                IntArrayRef(output_padding), options.groups(), options.dilation().ref());
}

template <size_t D> void ConvTransposeNdImpl<D>::pretty_print(std::ostream& s) const {
  s << this->name() << "(" << options.in_channels() << ", " << options.out_channels()
    << ", kernel_size=" << list_str(options.kernel_size())
    << ", stride=" << list_str(options.stride()) << ", padding=" << list_str(options.padding())
    << ")";
}

template class ConvTransposeNdImpl<1>;
template class ConvTransposeNdImpl<2>;
template class ConvTransposeNdImpl<3>;

// ---------------------------------------------------------------- BatchNorm

NormImplBase::NormImplBase(const char* name, int64_t num_features, bool affine,
                           bool track_running_stats)
    : Module(name), affine_(affine), track_running_stats_(track_running_stats) {
  OF_CHECK(num_features > 0, "[{}] num_features must be positive, got {}", name, num_features);
  if (affine) {
    weight = register_parameter("weight", oneflow::empty({num_features}));
    bias = register_parameter("bias", oneflow::empty({num_features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
  reset_parameters();
}

void NormImplBase::reset_running_stats() {
  if (!track_running_stats_) return;
  NoGradGuard g;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void NormImplBase::reset_parameters() {
  reset_running_stats();
  if (affine_) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

BatchNormImplBase::BatchNormImplBase(const BatchNormOptions& o, const char* name,
                                     std::vector<int64_t> dims)
    : NormImplBase(name, o.num_features(), o.affine(), o.track_running_stats()),
      options(o),
      dims_(std::move(dims)) {}

Tensor BatchNormImplBase::forward(const Tensor& input) {
  bool ok = false;
  for (int64_t d : dims_) ok |= input.dim() == d;
  if (!ok)
    fail("[{}] expected a {}-D input, got shape {}", name(),
         dims_.size() == 1 ? std::to_string(dims_[0]) : "2-D or 3", shape_str(input.sizes()));
  double momentum = options.momentum().value_or(0.0);
  if (is_training() && options.track_running_stats()) {
    NoGradGuard g;
    num_batches_tracked.add_(ones({}, kInt64));
    if (!options.momentum())  // cumulative moving average
      momentum = 1.0 / double(num_batches_tracked.item<int64_t>());
  }
  const bool use_batch_stats = is_training() || !options.track_running_stats();
  return batch_norm(input, weight, bias, running_mean, running_var, use_batch_stats, momentum,
                    options.eps());
}

void BatchNormImplBase::pretty_print(std::ostream& s) const {
  s << name() << "(" << options.num_features() << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum()) s << *options.momentum();
  else s << "None";
  s << ", affine=" << bool_str(options.affine())
    << ", track_running_stats=" << bool_str(options.track_running_stats()) << ")";
}

// ---------------------------------------------------------------- LayerNorm / GroupNorm / RMSNorm

LayerNormImpl::LayerNormImpl(const LayerNormOptions& o) : Module("LayerNorm"), options(o) {
  if (o.elementwise_affine()) {
    weight = register_parameter("weight", oneflow::empty(o.normalized_shape()));
    bias = register_parameter("bias", oneflow::empty(o.normalized_shape()));
  }
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (!options.elementwise_affine()) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  return layer_norm(input, options.normalized_shape(), weight, bias, options.eps());
}

void LayerNormImpl::pretty_print(std::ostream& s) const {
  s << "LayerNorm(" << list_str(options.normalized_shape()) << ", eps=" << options.eps()
    << ", elementwise_affine=" << bool_str(options.elementwise_affine()) << ")";
}

GroupNormImpl::GroupNormImpl(const GroupNormOptions& o) : Module("GroupNorm"), options(o) {
  OF_CHECK(o.num_groups() > 0 && o.num_channels() % o.num_groups() == 0,
           "[GroupNorm] num_channels {} must be divisible by num_groups {}", o.num_channels(),
           o.num_groups());
  if (o.affine()) {
    weight = register_parameter("weight", oneflow::empty({o.num_channels()}));
    bias = register_parameter("bias", oneflow::empty({o.num_channels()}));
  }
  reset_parameters();
}

void GroupNormImpl::reset_parameters() {
  if (!options.affine()) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor GroupNormImpl::forward(const Tensor& input) {
  return group_norm(input, options.num_groups(), weight, bias, options.eps());
}

void GroupNormImpl::pretty_print(std::ostream& s) const {
  s << "GroupNorm(" << options.num_groups() << ", " << options.num_channels()
    << ", eps=" << options.eps() << ", affine=" << bool_str(options.affine()) << ")";
}

RMSNormImpl::RMSNormImpl(const RMSNormOptions& o) : Module("RMSNorm"), options(o) {
  if (o.elementwise_affine())
    weight = register_parameter("weight", oneflow::empty(o.normalized_shape()));
  reset_parameters();
}

void RMSNormImpl::reset_parameters() {
  if (options.elementwise_affine()) init::ones_(weight);
}

Tensor RMSNormImpl::forward(const Tensor& input) {
  return rms_norm(input, options.normalized_shape(), weight, options.eps());
}

void RMSNormImpl::pretty_print(std::ostream& s) const {
  s << "RMSNorm(" << list_str(options.normalized_shape()) << ", eps=";
  if (options.eps()) s << *options.eps();
  else s << "None";
  s << ", elementwise_affine=" << bool_str(options.elementwise_affine()) << ")";
}

// ---------------------------------------------------------------- Dropout and the small ones

DropoutImpl::DropoutImpl(const DropoutOptions& o) : Module("Dropout"), options(o) {
  OF_CHECK(o.p() >= 0 && o.p() <= 1, "[Dropout] probability has to be between 0 and 1, but got {}",
           o.p());
}

Tensor DropoutImpl::forward(const Tensor& input) {
  return functional::dropout(input, functional::DropoutFuncOptions()
                                        .p(options.p())
                                        .training(is_training())
                                        .inplace(options.inplace()));
}

void DropoutImpl::pretty_print(std::ostream& s) const {
  s << "Dropout(p=" << options.p() << ", inplace=" << bool_str(options.inplace()) << ")";
}

Dropout2dImpl::Dropout2dImpl(const DropoutOptions& o) : Module("Dropout2d"), options(o) {
  OF_CHECK(o.p() >= 0 && o.p() <= 1,
           "[Dropout2d] probability has to be between 0 and 1, but got {}", o.p());
}

Tensor Dropout2dImpl::forward(const Tensor& input) {
  return functional::dropout2d(input, functional::Dropout2dFuncOptions()
                                          .p(options.p())
                                          .training(is_training())
                                          .inplace(options.inplace()));
}

void Dropout2dImpl::pretty_print(std::ostream& s) const {
  s << "Dropout2d(p=" << options.p() << ", inplace=" << bool_str(options.inplace()) << ")";
}

void GELUImpl::pretty_print(std::ostream& s) const {
  s << "GELU(approximate=" << options.approximate() << ")";
}
void ReLUImpl::pretty_print(std::ostream& s) const {
  s << "ReLU(" << (options.inplace() ? "inplace=true" : "") << ")";
}
void ReLU6Impl::pretty_print(std::ostream& s) const {
  s << "ReLU6(" << (options.inplace() ? "inplace=true" : "") << ")";
}
void SELUImpl::pretty_print(std::ostream& s) const {
  s << "SELU(" << (options.inplace() ? "inplace=true" : "") << ")";
}
void LeakyReLUImpl::pretty_print(std::ostream& s) const {
  s << "LeakyReLU(negative_slope=" << options.negative_slope()
    << (options.inplace() ? ", inplace=true" : "") << ")";
}
void ELUImpl::pretty_print(std::ostream& s) const {
  s << "ELU(alpha=" << options.alpha() << (options.inplace() ? ", inplace=true" : "") << ")";
}
void HardtanhImpl::pretty_print(std::ostream& s) const {
  s << "Hardtanh(min_val=" << options.min_val() << ", max_val=" << options.max_val()
    << (options.inplace() ? ", inplace=true" : "") << ")";
}
void SoftplusImpl::pretty_print(std::ostream& s) const {
  s << "Softplus(beta=" << options.beta() << ", threshold=" << options.threshold() << ")";
}
void GLUImpl::pretty_print(std::ostream& s) const { s << "GLU(dim=" << options.dim() << ")"; }
void SoftmaxImpl::pretty_print(std::ostream& s) const {
  s << "Softmax(dim=" << options.dim() << ")";
}
void SoftminImpl::pretty_print(std::ostream& s) const {
  s << "Softmin(dim=" << options.dim() << ")";
}
void LogSoftmaxImpl::pretty_print(std::ostream& s) const {
  s << "LogSoftmax(dim=" << options.dim() << ")";
}
void FlattenImpl::pretty_print(std::ostream& s) const {
  s << "Flatten(start_dim=" << options.start_dim() << ", end_dim=" << options.end_dim() << ")";
}

// ---------------------------------------------------------------- pooling

namespace {
template <size_t D> std::string pool_name(const char* base) {
  return std::string(base) + std::to_string(D) + "d";
}
template <size_t D> std::string size_str(const ExpandingArray<D>& a) { return list_str(a); }
template <size_t D> std::string size_str(const ExpandingArrayWithOptionalElem<D>& a) {
  std::string r = "[";
  for (size_t i = 0; i < D; ++i)
    r += (i ? ", " : "") + (a[i] ? std::to_string(*a[i]) : std::string("None"));
  return r + "]";
}
}  // namespace

template <size_t D>
MaxPoolNdImpl<D>::MaxPoolNdImpl(const MaxPoolOptions<D>& o)
    : Module(pool_name<D>("MaxPool")), options(o) {}
template <size_t D> Tensor MaxPoolNdImpl<D>::forward(const Tensor& x) {
  return std::get<0>(forward_with_indices(x));
}
template <size_t D>
std::tuple<Tensor, Tensor> MaxPoolNdImpl<D>::forward_with_indices(const Tensor& x) {
  const auto& o = options;
  if constexpr (D == 1)
    return max_pool1d_with_indices(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                                   o.ceil_mode());
  else if constexpr (D == 2)
    return max_pool2d_with_indices(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                                   o.ceil_mode());
  else
    return max_pool3d_with_indices(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                                   o.ceil_mode());
}
template <size_t D> void MaxPoolNdImpl<D>::pretty_print(std::ostream& s) const {
  s << this->name() << "(kernel_size=" << list_str(options.kernel_size())
    << ", stride=" << list_str(options.stride()) << ", padding=" << list_str(options.padding())
    << ", dilation=" << list_str(options.dilation())
    << ", ceil_mode=" << bool_str(options.ceil_mode()) << ")";
}
template class MaxPoolNdImpl<1>;
template class MaxPoolNdImpl<2>;
template class MaxPoolNdImpl<3>;

template <size_t D>
AvgPoolNdImpl<D>::AvgPoolNdImpl(const AvgPoolOptions<D>& o)
    : Module(pool_name<D>("AvgPool")), options(o) {}
template <size_t D> Tensor AvgPoolNdImpl<D>::forward(const Tensor& x) {
  const auto& o = options;
  if constexpr (D == 1)
    return avg_pool1d(x, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                      o.count_include_pad());
  else if constexpr (D == 2)
    return avg_pool2d(x, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                      o.count_include_pad(), o.divisor_override());
  else
    return avg_pool3d(x, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                      o.count_include_pad(), o.divisor_override());
}
template <size_t D> void AvgPoolNdImpl<D>::pretty_print(std::ostream& s) const {
  s << this->name() << "(kernel_size=" << list_str(options.kernel_size())
    << ", stride=" << list_str(options.stride()) << ", padding=" << list_str(options.padding())
    << ")";
}
template class AvgPoolNdImpl<1>;
template class AvgPoolNdImpl<2>;
template class AvgPoolNdImpl<3>;

template <size_t D, typename S>
AdaptiveAvgPoolNdImpl<D, S>::AdaptiveAvgPoolNdImpl(const AdaptiveAvgPoolOptions<S>& o)
    : Module(pool_name<D>("AdaptiveAvgPool")), options(o) {}
template <size_t D, typename S> Tensor AdaptiveAvgPoolNdImpl<D, S>::forward(const Tensor& x) {
  namespace F = functional;
  if constexpr (D == 1) return F::adaptive_avg_pool1d(x, options);
  else if constexpr (D == 2) return F::adaptive_avg_pool2d(x, options);
  else return F::adaptive_avg_pool3d(x, options);
}
template <size_t D, typename S>
void AdaptiveAvgPoolNdImpl<D, S>::pretty_print(std::ostream& s) const {
  s << this->name() << "(output_size=" << size_str(options.output_size()) << ")";
}
template class AdaptiveAvgPoolNdImpl<1, ExpandingArray<1>>;
template class AdaptiveAvgPoolNdImpl<2, ExpandingArrayWithOptionalElem<2>>;
template class AdaptiveAvgPoolNdImpl<3, ExpandingArrayWithOptionalElem<3>>;

template <size_t D, typename S>
AdaptiveMaxPoolNdImpl<D, S>::AdaptiveMaxPoolNdImpl(const AdaptiveMaxPoolOptions<S>& o)
    : Module(pool_name<D>("AdaptiveMaxPool")), options(o) {}
template <size_t D, typename S> Tensor AdaptiveMaxPoolNdImpl<D, S>::forward(const Tensor& x) {
  return std::get<0>(forward_with_indices(x));
}
template <size_t D, typename S>
std::tuple<Tensor, Tensor> AdaptiveMaxPoolNdImpl<D, S>::forward_with_indices(const Tensor& x) {
  namespace F = functional;
  if constexpr (D == 1) return F::adaptive_max_pool1d_with_indices(x, options);
  else if constexpr (D == 2) return F::adaptive_max_pool2d_with_indices(x, options);
  else return F::adaptive_max_pool3d_with_indices(x, options);
}
template <size_t D, typename S>
void AdaptiveMaxPoolNdImpl<D, S>::pretty_print(std::ostream& s) const {
  s << this->name() << "(output_size=" << size_str(options.output_size()) << ")";
}
template class AdaptiveMaxPoolNdImpl<1, ExpandingArray<1>>;
template class AdaptiveMaxPoolNdImpl<2, ExpandingArrayWithOptionalElem<2>>;
template class AdaptiveMaxPoolNdImpl<3, ExpandingArrayWithOptionalElem<3>>;

// ---------------------------------------------------------------- containers

Tensor SequentialImpl::forward(const Tensor& input) {
  OF_CHECK(!forwards_.empty(), "[Sequential] forward() called on an empty Sequential");
  Tensor x = input;
  for (auto& f : forwards_) x = f(x);
  return x;
}

// ---------------------------------------------------------------- Upsample

Tensor UpsampleImpl::forward(const Tensor& input) {
  functional::InterpolateFuncOptions o;
  o.size(options.size())
      .scale_factor(options.scale_factor())
      .align_corners(options.align_corners());
  std::visit([&](auto m) { o.mode(m); }, options.mode());
  return functional::interpolate(input, o);
}

void UpsampleImpl::pretty_print(std::ostream& s) const {
  s << "Upsample(";
  if (options.size()) s << "size=" << list_str(*options.size());
  if (options.scale_factor()) {
    s << "scale_factor=[";
    for (size_t i = 0; i < options.scale_factor()->size(); ++i)
      s << (i ? ", " : "") << (*options.scale_factor())[i];
    s << "]";
  }
  s << ", mode=" << enumtype::get_enum_name(options.mode()) << ")";
}

}  // namespace oneflow::nn

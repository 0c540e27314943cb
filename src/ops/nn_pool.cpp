// nn_pool.cpp: pooling and resampling ops (max/avg/adaptive pooling in 1-3 D, nearest and
// bilinear upsampling): their metas, VJPs, SBP rules, registrations and public functions.
// Kernels: cpu/pool.cpp (NOTE [Separable resampling], NOTE [Window maxima]); the geometry both
// use: ops/pool_common.h.
#include <cmath>
#include <tuple>

#include "autograd/node.h"
#include "global/rules.h"
#include "cpu/pool.h"
#include "dispatch.h"
#include "oneflow/ops_conv.h"
#include "ops/checks.h"
#include "ops/conv_common.h"
#include "ops/pool_common.h"

namespace oneflow {
using namespace conv_detail;
using namespace pool_detail;
namespace {

// ---------------------------------------------------------------- max_pool2d

void max_pool2d_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const PoolGeom g = max_geom(in[0], a);
  out.push_back({{g.N, g.C, g.OH, g.OW}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{g.N, g.C, g.OH, g.OW}, {}, 0, kInt64, in[0].device()});
}
// The gradient of a max op with indices: each output's gradient lands at its index, within the
// flattened spatial dims of its plane.
TensorList max_indices_vjp(const VjpCtx& c, const TensorList& gr) {
  const IntArrayRef s = c.input_sizes(0);
  const int64_t N = s[0], C = s[1];
  int64_t S = 1;
  for (size_t i = 2; i < s.size(); ++i) S *= s[i];
  Tensor gx = gr[0].new_zeros({N, C, S}).scatter_add(2, c.output(1).reshape({N, C, -1}),
                                                     gr[0].reshape({N, C, -1}));
  return {gx.view(s)};
}

// ---------------------------------------------------------------- max_pool3d

void max_pool3d_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const PoolGeom g = max3_geom(in[0], a);
  out.push_back({{g.N, g.C, g.OD, g.OH, g.OW}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{g.N, g.C, g.OD, g.OH, g.OW}, {}, 0, kInt64, in[0].device()});
}

// ---------------------------------------------------------------- adaptive_max_pool2d / 3d

template <int Sp> void adaptive_max_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const DimVector shape = adaptive_max_check<Sp>(in[0], a);
  out.push_back({shape, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({shape, {}, 0, kInt64, in[0].device()});
}

// ---------------------------------------------------------------- separable resampling

// the input_size a *_backward op's attributes end with (WithInputSize)
DimVector in_size_attr(const Attrs& a) {
  OF_CHECK(a.size() > 0, "[attrs] a resampling backward op was given no attributes");
  return std::get<DimVector>(a.values.back());
}

template <Mode M> void resample_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = mode_name(M, false);
  check_float(op, in[0], "input");
  const Resample r = make_resample(M, in[0].sizes(), a, op, false);
  DimVector shape{in[0].size(0), in[0].size(1), r.h.out, r.w.out};
  if (mode_rank(M) == 3) shape.insert(shape.begin() + 2, r.d.out);
  out.push_back({shape, {}, 0, in[0].dtype(), in[0].device()});
}
template <Mode M> void resample_backward_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = mode_name(M, true);
  check_float(op, in[0], "grad_output");
  const DimVector isz = in_size_attr(a);
  const Resample r = make_resample(M, isz, a, op, false);
  DimVector expect{isz[0], isz[1], r.h.out, r.w.out};
  if (mode_rank(M) == 3) expect.insert(expect.begin() + 2, r.d.out);
  if (!(in[0].sizes() == IntArrayRef(expect)))
    fail("[{}] grad_output {} does not match the output size {}", op, shape_str(in[0].sizes()),
         vals(expect));
  out.push_back({isz, {}, 0, in[0].dtype(), in[0].device()});
}

const OpDef* backward_op(Mode m) {
  switch (m) {
    case Mode::kAvg:
      return &OF_OP("avg_pool2d_backward");
    case Mode::kAdaptive:
      return &OF_OP("adaptive_avg_pool2d_backward");
    case Mode::kNearest:
      return &OF_OP("upsample_nearest2d_backward");
    case Mode::kBilinear:
      return &OF_OP("upsample_bilinear2d_backward");
    case Mode::kAvg3d:
      return &OF_OP("avg_pool3d_backward");
    case Mode::kAdaptive3d:
      return &OF_OP("adaptive_avg_pool3d_backward");
  }
  return nullptr;
}
const OpDef* forward_op(Mode m) {
  switch (m) {
    case Mode::kAvg:
      return &OF_OP("avg_pool2d");
    case Mode::kAdaptive:
      return &OF_OP("adaptive_avg_pool2d");
    case Mode::kNearest:
      return &OF_OP("upsample_nearest2d");
    case Mode::kBilinear:
      return &OF_OP("upsample_bilinear2d");
    case Mode::kAvg3d:
      return &OF_OP("avg_pool3d");
    case Mode::kAdaptive3d:
      return &OF_OP("adaptive_avg_pool3d");
  }
  return nullptr;
}

template <Mode M> TensorList resample_vjp(const VjpCtx& c, const TensorList& g) {
  Attrs a = c.attrs();
  a.values.push_back(c.input_sizes(0).dims());
  return {dispatch1(*backward_op(M), {g[0]}, std::move(a))};
}
template <Mode M> TensorList resample_backward_vjp(const VjpCtx& c, const TensorList& g) {
  Attrs a = c.attrs();
  a.values.pop_back();
  return {dispatch1(*forward_op(M), {g[0]}, std::move(a))};
}

}  // namespace

void register_pool_ops() {
  register_op({.name = "max_pool3d_with_indices",
               .traits = kWidens16Bit,
               .attr_names = MaxPoolAttrs::names(),
               .attr_types = MaxPoolAttrs::types(),
               .infer_meta = max_pool3d_meta,
               .cpu = cpu::max_pool3d_with_indices,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_max_pool2d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = adaptive_max_meta<2>,
               .cpu = cpu::adaptive_max_pool2d,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_max_pool3d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = adaptive_max_meta<3>,
               .cpu = cpu::adaptive_max_pool3d,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "max_pool2d_with_indices",
               .traits = kWidens16Bit,
               .attr_names = MaxPoolAttrs::names(),
               .attr_types = MaxPoolAttrs::types(),
               .infer_meta = max_pool2d_meta,
               .cpu = cpu::max_pool2d_with_indices,
               .vjp = max_indices_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool2d",
               .traits = kWidens16Bit,
               .attr_names = AvgPoolAttrs::names(),
               .attr_types = AvgPoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAvg>,
               .cpu = cpu::avg_pool2d,
               .vjp = resample_vjp<Mode::kAvg>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AvgPoolAttrs>::names(),
               .attr_types = WithInputSize<AvgPoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAvg>,
               .cpu = cpu::avg_pool2d_backward,
               .vjp = resample_backward_vjp<Mode::kAvg>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplitResized,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool2d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAdaptive>,
               .cpu = cpu::adaptive_avg_pool2d,
               .vjp = resample_vjp<Mode::kAdaptive>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AdaptivePoolAttrs>::names(),
               .attr_types = WithInputSize<AdaptivePoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAdaptive>,
               .cpu = cpu::adaptive_avg_pool2d_backward,
               .vjp = resample_backward_vjp<Mode::kAdaptive>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplitResized,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool3d",
               .traits = kWidens16Bit,
               .attr_names = AvgPoolAttrs::names(),
               .attr_types = AvgPoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAvg3d>,
               .cpu = cpu::avg_pool3d,
               .vjp = resample_vjp<Mode::kAvg3d>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "avg_pool3d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AvgPoolAttrs>::names(),
               .attr_types = WithInputSize<AvgPoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAvg3d>,
               .cpu = cpu::avg_pool3d_backward,
               .vjp = resample_backward_vjp<Mode::kAvg3d>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplitResized,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool3d",
               .traits = kWidens16Bit,
               .attr_names = AdaptivePoolAttrs::names(),
               .attr_types = AdaptivePoolAttrs::types(),
               .infer_meta = resample_meta<Mode::kAdaptive3d>,
               .cpu = cpu::adaptive_avg_pool3d,
               .vjp = resample_vjp<Mode::kAdaptive3d>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "adaptive_avg_pool3d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<AdaptivePoolAttrs>::names(),
               .attr_types = WithInputSize<AdaptivePoolAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kAdaptive3d>,
               .cpu = cpu::adaptive_avg_pool3d_backward,
               .vjp = resample_backward_vjp<Mode::kAdaptive3d>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplitResized,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_nearest2d",
               .traits = kWidens16Bit,
               .attr_names = UpsampleNearestAttrs::names(),
               .attr_types = UpsampleNearestAttrs::types(),
               .infer_meta = resample_meta<Mode::kNearest>,
               .cpu = cpu::upsample_nearest2d,
               .vjp = resample_vjp<Mode::kNearest>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_nearest2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<UpsampleNearestAttrs>::names(),
               .attr_types = WithInputSize<UpsampleNearestAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kNearest>,
               .cpu = cpu::upsample_nearest2d_backward,
               .vjp = resample_backward_vjp<Mode::kNearest>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplitResized,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_bilinear2d",
               .traits = kWidens16Bit,
               .attr_names = UpsampleBilinearAttrs::names(),
               .attr_types = UpsampleBilinearAttrs::types(),
               .infer_meta = resample_meta<Mode::kBilinear>,
               .cpu = cpu::upsample_bilinear2d,
               .vjp = resample_vjp<Mode::kBilinear>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplit,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "upsample_bilinear2d_backward",
               .traits = kWidens16Bit,
               .attr_names = WithInputSize<UpsampleBilinearAttrs>::names(),
               .attr_types = WithInputSize<UpsampleBilinearAttrs>::types(),
               .infer_meta = resample_backward_meta<Mode::kBilinear>,
               .cpu = cpu::upsample_bilinear2d_backward,
               .vjp = resample_backward_vjp<Mode::kBilinear>,
               .sbp_rule = &sbp_rules::kSamplesOrChannelsSplitResized,
               .contiguous_inputs = kEveryInput});
}

// ---------------------------------------------------------------- public functions

namespace {
// The 1-D pooling checks in 1-D terms (the ops then run as 2-D over a unit H dim); returns the
// batched [N, C, L] input.
Tensor pool1d_input(const char* op, const Tensor& input, int64_t k, int64_t s, int64_t p, int64_t d,
                    bool ceil_mode) {
  check_float(op, input, "input");
  const Tensor x = batched(op, input, 1);
  if (k <= 0) fail("[{}] kernel_size must be positive, got {}", op, k);
  if (s <= 0) fail("[{}] stride must be positive, got {}", op, s);
  if (d <= 0) fail("[{}] dilation must be positive, got {}", op, d);
  if (p < 0 || p > k / 2)
    fail("[{}] padding {} must be non-negative and at most half of kernel_size {}", op, p, k);
  const int64_t out = pool_out(x.size(2), k, p, s, d, ceil_mode);
  if (out <= 0)
    fail(
        "[{}] input {} with kernel_size {}, stride {}, padding {}, dilation {} gives output size "
        "{}, which is too small",
        op, shape_str(input.sizes()), k, s, p, d, out);
  return x;
}

// Restores the rank of a max pool's (values, indices).
std::tuple<Tensor, Tensor> finish_indices(const Tensor& input, TensorList r, int64_t sp,
                                          bool one_d) {
  Tensor y = r[0];
  Tensor idx = r[1];
  if (one_d) {
    y = y.squeeze(2);
    idx = idx.squeeze(2);
  }
  if (input.dim() == sp + 1) {
    y = y.squeeze(0);
    idx = idx.squeeze(0);
  }
  return {y, idx};
}

// max_poolNd and max_poolNd_with_indices (sp = 1, 2, 3); `op` is the name errors carry.
std::tuple<Tensor, Tensor> max_pool_impl(const char* op, int64_t sp, const Tensor& input,
                                         IntArrayRef kernel_size, IntArrayRef stride,
                                         IntArrayRef padding, IntArrayRef dilation,
                                         bool ceil_mode) {
  DimVector k = expand_param(kernel_size, sp, op, "kernel_size");
  DimVector s = stride.empty() ? k : expand_param(stride, sp, op, "stride");
  DimVector p = expand_param(padding, sp, op, "padding");
  DimVector d = expand_param(dilation, sp, op, "dilation");
  Tensor x;
  if (sp == 1) {
    x = pool1d_input(op, input, k[0], s[0], p[0], d[0], ceil_mode).unsqueeze(2);
    k.insert(k.begin(), 1), s.insert(s.begin(), 1), p.insert(p.begin(), 0), d.insert(d.begin(), 1);
  } else {
    check_float(op, input, "input");
    x = batched(op, input, sp);
  }
  pool_geom(op, x, k, s, p, d, ceil_mode);
  const OpDef& def = sp == 3 ? OF_OP("max_pool3d_with_indices") : OF_OP("max_pool2d_with_indices");
  return finish_indices(input, dispatch(def, {x}, MaxPoolAttrs::make(k, s, p, d, ceil_mode)), sp,
                        sp == 1);
}

// adaptive_max_poolNd (sp = 1, 2, 3).
std::tuple<Tensor, Tensor> adaptive_max_impl(const char* op, int64_t sp, const Tensor& input,
                                             IntArrayRef output_size) {
  DimVector os = expand_param(output_size, sp, op, "output_size");
  check_float(op, input, "input");
  Tensor x = batched(op, input, sp);
  for (int64_t i = 0; i < sp; ++i) {
    if (os[size_t(i)] <= 0)
      fail("[{}] output_size must be positive, got {} for input {}", op, vals(os),
           shape_str(input.sizes()));
    if (x.size(2 + i) <= 0)
      fail("[{}] input {} has an empty spatial dimension", op, shape_str(input.sizes()));
  }
  if (sp == 1) {
    x = x.unsqueeze(2);
    os.insert(os.begin(), 1);
  }
  const OpDef& def = sp == 3 ? OF_OP("adaptive_max_pool3d") : OF_OP("adaptive_max_pool2d");
  return finish_indices(input, dispatch(def, {x}, AdaptivePoolAttrs::make(os)), sp, sp == 1);
}
}  // namespace

std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return max_pool_impl("max_pool1d_with_indices", 1, input, kernel_size, stride, padding, dilation,
                       ceil_mode);
}
Tensor max_pool1d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_impl("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode));
}
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return max_pool_impl("max_pool2d_with_indices", 2, input, kernel_size, stride, padding, dilation,
                       ceil_mode);
}
Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_impl("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode));
}
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return max_pool_impl("max_pool3d_with_indices", 3, input, kernel_size, stride, padding, dilation,
                       ceil_mode);
}
Tensor max_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_impl("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool1d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool1d";
  const DimVector k = expand_param(kernel_size, 1, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 1, op, "stride");
  const DimVector p = expand_param(padding, 1, op, "padding");
  pool1d_input(op, input, k[0], s[0], p[0], 1, ceil_mode);
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        Attrs a =
            AvgPoolAttrs::make({1, k[0]}, {1, s[0]}, {0, p[0]}, ceil_mode, count_include_pad, 0);
        return dispatch1(OF_OP("avg_pool2d"), {x.unsqueeze(2)}, std::move(a)).squeeze(2);
      },
      1);
}

Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  const DimVector k = expand_param(kernel_size, 2, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 2, op, "stride");
  const DimVector p = expand_param(padding, 2, op, "padding");
  if (divisor_override && *divisor_override <= 0)
    fail("[{}] divisor_override must be positive, got {}", op, *divisor_override);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a =
        AvgPoolAttrs::make(k, s, p, ceil_mode, count_include_pad, divisor_override.value_or(0));
    make_resample(Mode::kAvg, x.sizes(), a, op, false);
    return dispatch1(OF_OP("avg_pool2d"), {x}, std::move(a));
  });
}

Tensor avg_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool3d";
  const DimVector k = expand_param(kernel_size, 3, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 3, op, "stride");
  const DimVector p = expand_param(padding, 3, op, "padding");
  if (divisor_override && *divisor_override <= 0)
    fail("[{}] divisor_override must be positive, got {}", op, *divisor_override);
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        Attrs a =
            AvgPoolAttrs::make(k, s, p, ceil_mode, count_include_pad, divisor_override.value_or(0));
        make_resample(Mode::kAvg3d, x.sizes(), a, op, false);
        return dispatch1(OF_OP("avg_pool3d"), {x}, std::move(a));
      },
      3);
}

Tensor adaptive_avg_pool1d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool1d";
  const DimVector os = expand_param(output_size, 1, op, "output_size");
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        if (os[0] <= 0)
          fail("[{}] output_size must be positive, got {} for input {}", op, os[0],
               shape_str(input.sizes()));
        if (x.size(2) <= 0)
          fail("[{}] input {} has an empty spatial dimension", op, shape_str(input.sizes()));
        return dispatch1(OF_OP("adaptive_avg_pool2d"), {x.unsqueeze(2)},
                         AdaptivePoolAttrs::make({1, os[0]}))
            .squeeze(2);
      },
      1);
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a = AdaptivePoolAttrs::make(os);
    make_resample(Mode::kAdaptive, x.sizes(), a, op, false);
    return dispatch1(OF_OP("adaptive_avg_pool2d"), {x}, std::move(a));
  });
}

Tensor adaptive_avg_pool3d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool3d";
  const DimVector os = expand_param(output_size, 3, op, "output_size");
  return on_batched(
      op, input,
      [&](const Tensor& x) {
        Attrs a = AdaptivePoolAttrs::make(os);
        make_resample(Mode::kAdaptive3d, x.sizes(), a, op, false);
        return dispatch1(OF_OP("adaptive_avg_pool3d"), {x}, std::move(a));
      },
      3);
}

std::tuple<Tensor, Tensor> adaptive_max_pool1d(const Tensor& input, IntArrayRef output_size) {
  return adaptive_max_impl("adaptive_max_pool1d", 1, input, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& input, IntArrayRef output_size) {
  return adaptive_max_impl("adaptive_max_pool2d", 2, input, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool3d(const Tensor& input, IntArrayRef output_size) {
  return adaptive_max_impl("adaptive_max_pool3d", 3, input, output_size);
}

namespace {
double scale_value(const char* op, const char* name, std::optional<double> s) {
  if (!s) return 0.0;
  if (!(*s > 0) || !std::isfinite(*s))
    fail("[{}] {} must be positive and finite, got {}", op, name, *s);
  return *s;
}
}  // namespace

Tensor upsample_nearest2d(const Tensor& input, IntArrayRef output_size,
                          std::optional<double> scales_h, std::optional<double> scales_w) {
  const char* op = "upsample_nearest2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  const double sh = scale_value(op, "scales_h", scales_h),
               sw = scale_value(op, "scales_w", scales_w);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a = UpsampleNearestAttrs::make(os, sh, sw);
    make_resample(Mode::kNearest, x.sizes(), a, op, false);
    return dispatch1(OF_OP("upsample_nearest2d"), {x}, std::move(a));
  });
}

Tensor upsample_bilinear2d(const Tensor& input, IntArrayRef output_size, bool align_corners,
                           std::optional<double> scales_h, std::optional<double> scales_w) {
  const char* op = "upsample_bilinear2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  const double sh = scale_value(op, "scales_h", scales_h),
               sw = scale_value(op, "scales_w", scales_w);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a = UpsampleBilinearAttrs::make(os, align_corners, sh, sw);
    make_resample(Mode::kBilinear, x.sizes(), a, op, false);
    return dispatch1(OF_OP("upsample_bilinear2d"), {x}, std::move(a));
  });
}

}  // namespace oneflow

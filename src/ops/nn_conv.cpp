// nn_conv.cpp: convolution ops (conv1d/2d/3d, conv_transpose, the weight gradient): their
// validation (conv_check, the only one: NOTE [Conv geometry] in conv_geom.h), meta, VJPs,
// registration and public functions; the CPU kernels are in cpu/conv.cpp (NOTE [Conv
// lowering]). Pooling and resampling are in nn_pool.cpp (registered from here), what both use
// in conv_common.h. The VJPs are written with the family's three ops (convolution, its input
// adjoint conv_transpose, the weight gradient), so gradients of any order exist; the 1-D forms
// are views over the 2-D ops with a unit H dim.
#include <string>
#include <vector>

#include "autograd/node.h"
#include "cpu/conv.h"
#include "dispatch.h"
#include "global/rules.h"
#include "oneflow/ops_conv.h"
#include "ops/checks.h"
#include "ops/conv_common.h"
#include "ops/conv_geom.h"

namespace oneflow {
void register_pool_ops();
using namespace conv_detail;
namespace {

// ---------------------------------------------------------------- validation

// Validates a (transposed) convolution on 4-D (2-D conv) or 5-D (3-D conv) input/weight and
// returns its geometry (NOTE [Conv geometry]); the spatial rank is the size of p.stride. `one_d`
// prints shapes and parameters as conv1d sees them (the unit H dim dropped).
Geom conv_check(const char* op, const Tensor& x, IntArrayRef wsz, ScalarType wdt, Device wdev,
                const Tensor* bias, const ConvParams& p, bool transposed, bool one_d) {
  const int64_t sp = int64_t(p.stride.size());
  // a direct dispatch may pass lists of any lengths: one value per spatial dim, 1 to 3 dims
  if (sp < 1 || sp > 3 || p.padding.size() != p.stride.size() ||
      p.dilation.size() != p.stride.size() || p.output_padding.size() != p.stride.size())
    fail(
        "[{}] expected stride, padding, dilation (and output_padding) of one value per "
        "spatial dim (1 to 3), got {}, {}, {} and {}",
        op, vals(p.stride), vals(p.padding), vals(p.dilation), vals(p.output_padding));
  auto shp = [&](IntArrayRef s) {
    if (!one_d || s.size() < 3) return shape_str(s);
    DimVector d = s.dims();
    d.erase(d.begin() + 2);
    return shape_str(d);
  };
  auto pv = [&](const DimVector& v) { return one_d ? std::to_string(v.back()) : vals(v); };
  check_float(op, x, "input");
  if (x.dim() != sp + 2)
    fail("[{}] expected a {}-D (batched) input, got shape {}", op, one_d ? 3 : sp + 2,
         shp(x.sizes()));
  if (int64_t(wsz.size()) != sp + 2)
    fail("[{}] expected a {}-D weight, got shape {}", op, one_d ? 3 : sp + 2, shp(wsz));
  if (x.dtype() != wdt)
    fail("[{}] input ({}, shape {}) and weight ({}, shape {}) must have the same dtype", op,
         dtype_name(x.dtype()), shp(x.sizes()), dtype_name(wdt), shp(wsz));
  if (x.device() != wdev)
    fail("[{}] input is on {} but weight is on {}", op, x.device().str(), wdev.str());
  for (size_t i = 0; i < size_t(sp); ++i) {
    if (p.stride[i] <= 0) fail("[{}] stride must be positive, got {}", op, pv(p.stride));
    if (p.dilation[i] <= 0) fail("[{}] dilation must be positive, got {}", op, pv(p.dilation));
    if (p.padding[i] < 0) fail("[{}] padding must be non-negative, got {}", op, pv(p.padding));
  }
  const int64_t G = p.groups;
  if (G <= 0) fail("[{}] groups must be positive, got {}", op, G);
  // Sizes are computed with overflow checks: a weight may have a huge dim and no elements, and
  // the parameters any value (fuzz_ops: dilation * (kernel - 1) overflowed).
  auto overflowed = [&] {
    fail("[{}] input {}, weight {} and these parameters give sizes that overflow", op,
         shp(x.sizes()), shp(wsz));
  };
  for (int64_t i = 0; i < sp; ++i)
    if (wsz[2 + i] <= 0) fail("[{}] weight {} has an empty kernel", op, shp(wsz));
  if (!transposed) {
    const int64_t C = x.size(1);
    int64_t wc = 0;
    if (__builtin_mul_overflow(wsz[1], G, &wc)) overflowed();
    if (wc != C || C == 0)
      fail(
          "[{}] given groups={} and weight of shape {}, expected input {} to have {} channels, "
          "but got {} channels",
          op, G, shp(wsz), shp(x.sizes()), wc, C);
    if (wsz[0] % G != 0)
      fail("[{}] out_channels of weight {} ({}) must be divisible by groups={}", op, shp(wsz),
           wsz[0], G);
  } else {
    // x [N, Cin, ...], w [Cin, Cout/G, k...] -> y [N, Cout, ...]
    const int64_t cin = x.size(1);
    if (wsz[0] != cin || cin == 0)
      fail("[{}] weight {} expects {} input channels, but input {} has {} channels", op, shp(wsz),
           wsz[0], shp(x.sizes()), cin);
    if (cin % G != 0)
      fail("[{}] input channels of input {} ({}) must be divisible by groups={}", op,
           shp(x.sizes()), cin, G);
    for (size_t i = 0; i < size_t(sp); ++i) {
      const int64_t op_ = p.output_padding[i];
      if (op_ < 0 || (op_ >= p.stride[i] && op_ >= p.dilation[i]))
        fail(
            "[{}] output_padding {} must be non-negative and smaller than either stride {} or "
            "dilation {}",
            op, pv(p.output_padding), pv(p.stride), pv(p.dilation));
    }
  }
  const Geom g = conv_geometry(x.sizes(), wsz, p, transposed);
  if (g.overflow) overflowed();
  // per-axis values of the geometry, spatial dims only (a 2-D convolution drops the depth)
  auto spatial = [&](std::initializer_list<int64_t> v) {
    DimVector r(v);
    if (sp == 2) r.erase(r.begin());
    return r;
  };
  const DimVector in = spatial({g.D, g.H, g.W}), out = spatial({g.OD, g.OH, g.OW});
  if (!transposed) {
    const DimVector eff = spatial(
                        {g.dd * (g.kd - 1) + 1, g.dh * (g.kh - 1) + 1, g.dw * (g.kw - 1) + 1}),
                    padded = spatial({g.D + 2 * g.pd, g.H + 2 * g.ph, g.W + 2 * g.pw});
    for (size_t i = 0; i < eff.size(); ++i)
      if (eff[i] > padded[i])
        fail(
            "[{}] kernel size {} (with dilation {}) is larger than the padded input size {} of "
            "input {} with padding {}",
            op, pv(eff), pv(p.dilation), pv(padded), shp(x.sizes()), pv(p.padding));
  } else {
    for (int64_t v : in)
      if (v <= 0)
        fail(
            "[{}] input {} with stride {}, padding {}, dilation {} and kernel {} gives a "
            "non-positive output size {}",
            op, shp(x.sizes()), pv(p.stride), pv(p.padding), pv(p.dilation), shp(wsz), pv(in));
  }
  for (int64_t v : out)
    if (v <= 0) fail("[{}] input {} gives an empty output", op, shp(x.sizes()));
  if (bias && bias->defined()) {
    const int64_t out_ch = transposed ? g.C : g.M;
    if (bias->dtype() != x.dtype())
      fail("[{}] bias ({}) must have the input's dtype ({})", op, dtype_name(bias->dtype()),
           dtype_name(x.dtype()));
    if (bias->dim() != 1 || bias->size(0) != out_ch)
      fail("[{}] expected bias of shape ({},) for {} output channels, got {}", op, out_ch, out_ch,
           shape_str(bias->sizes()));
  }
  return g;
}

Geom conv_check(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias,
                const ConvParams& p, bool transposed) {
  check_float(op, x, "input");
  check_float(op, w, "weight");
  return conv_check(op, x, w.sizes(), w.dtype(), w.device(), bias, p, transposed, false);
}

// ---------------------------------------------------------------- conv2d / conv3d

template <int Sp> const OpDef& conv_bw_op() {
  return Sp == 2 ? OF_OP("conv2d_backward_weight") : OF_OP("conv3d_backward_weight");
}

// The spatial dims of a [N, C, spatial...] tensor, for the bias gradient.
template <int Sp> DimVector spatial_dims() {
  if constexpr (Sp == 2) return {2, 3};
  else return {2, 3, 4};
}

// conv2d / conv3d (x, w, bias?; stride, padding, dilation, groups)
template <int Sp> void conv_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Geom g = conv_check(conv_name<Sp>(), in[0], in[1], &in[2], conv_params(a, false), false);
  out.push_back({conv_shape<Sp>(g.N, g.M, g.OD, g.OH, g.OW), {}, 0, in[0].dtype(), in[0].device()});
}
// The output_padding that makes conv_transpose reproduce the convolution's input size.
DimVector adjoint_output_padding(const Geom& g, size_t sp) {
  DimVector r{g.D - ((g.OD - 1) * g.sd - 2 * g.pd + g.dd * (g.kd - 1) + 1),
              g.H - ((g.OH - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + 1),
              g.W - ((g.OW - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + 1)};
  if (sp == 2) r.erase(r.begin());
  return r;
}
template <int Sp> Tensor conv_public(const Tensor& x, const Tensor& w, const ConvParams& p) {
  if constexpr (Sp == 2) return conv2d(x, w, {}, p.stride, p.padding, p.dilation, p.groups);
  else return conv3d(x, w, {}, p.stride, p.padding, p.dilation, p.groups);
}
template <int Sp>
Tensor conv_t_public(const Tensor& x, const Tensor& w, const ConvParams& p,
                     const DimVector& output_padding) {
  if constexpr (Sp == 2)
    return conv_transpose2d(x, w, {}, p.stride, p.padding, output_padding, p.groups, p.dilation);
  else return conv_transpose3d(x, w, {}, p.stride, p.padding, output_padding, p.groups, p.dilation);
}
template <int Sp> TensorList conv_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), false);
  Tensor gx, gw, gb;
  const Tensor& g = gr[0];
  if (c.needs_input_grad(0)) {
    const Geom geo = conv_geometry(c.input_sizes(0), c.input_sizes(1), p, false);
    gx = conv_t_public<Sp>(g, c.input(1), p, adjoint_output_padding(geo, Sp));
  }
  if (c.needs_input_grad(1))
    gw = dispatch1(conv_bw_op<Sp>(), {g, c.input(0)},
                   ConvWeightGradAttrs::make(p.stride, p.padding, p.dilation, p.groups,
                                             c.input_sizes(1).dims()));
  if (c.needs_input_grad(2)) gb = g.sum(spatial_dims<Sp>()).sum(0);  // faster than one sum
  return {gx, gw, gb};
}

// ---------------------------------------------------------------- conv_transpose2d / 3d

// conv_transpose2d / 3d (x, w, bias?; stride, padding, dilation, groups, output_padding)
template <int Sp> void conv_transpose_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Geom g = conv_check(conv_t_name<Sp>(), in[0], in[1], &in[2], conv_params(a, true), true);
  out.push_back({conv_shape<Sp>(g.N, g.C, g.D, g.H, g.W), {}, 0, in[0].dtype(), in[0].device()});
}
template <int Sp> TensorList conv_transpose_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), true);
  Tensor gx, gw, gb;
  const Tensor& g = gr[0];
  // An output_padding of at least the stride (allowed below the dilation) makes the
  // convolution of the output floor(output_padding / stride) rows longer than the input in
  // that dim: those rows belong to no input element, so the input gradient drops them and the
  // weight gradient pairs them with zero rows of the input.
  DimVector extra;
  bool any_extra = false;
  for (size_t i = 0; i < p.stride.size(); ++i) {
    extra.push_back(p.output_padding[i] / p.stride[i]);
    any_extra = any_extra || extra.back() > 0;
  }
  if (c.needs_input_grad(0)) {
    gx = conv_public<Sp>(g, c.input(1), p);
    if (any_extra)
      for (size_t i = 0; i < extra.size(); ++i)
        gx = gx.narrow(int64_t(i) + 2, 0, gx.size(int64_t(i) + 2) - extra[i]);
  }
  if (c.needs_input_grad(1)) {
    Tensor x = c.input(0);
    if (any_extra) {
      DimVector pads;  // last dim first, zeros after the end
      for (size_t i = extra.size(); i-- > 0;) {
        pads.push_back(0);
        pads.push_back(extra[i]);
      }
      x = pad(x, pads, "constant", 0.0);
    }
    gw = dispatch1(conv_bw_op<Sp>(), {x, g},
                   ConvWeightGradAttrs::make(p.stride, p.padding, p.dilation, p.groups,
                                             c.input_sizes(1).dims()));
  }
  if (c.needs_input_grad(2)) gb = g.sum(spatial_dims<Sp>()).sum(0);  // faster than one sum
  return {gx, gw, gb};
}

// ---------------------------------------------------------------- conv2d/3d_backward_weight

// conv2d_backward_weight(grad_output [N, M, OH, OW], input [N, C, H, W]; stride, padding,
// dilation, groups, weight_size) -> grad_weight [M, C/G, kh, kw]; conv3d_backward_weight
// likewise with a depth dim.
template <int Sp> Geom bw_geom(const Tensor& dy, const Tensor& x, const Attrs& a) {
  const char* op = conv_bw_name<Sp>();
  const DimVector& ws = ConvWeightGradAttrs::get<"weight_size">(a);
  OF_CHECK(ws.size() == Sp + 2, "[{}] weight_size must have {} values, got {}", op, Sp + 2,
           vals(ws));
  const ConvParams p = conv_params(a, false);
  check_float(op, x, "input");
  check_float(op, dy, "grad_output");
  const Geom g = conv_check(op, x, ws, x.dtype(), x.device(), nullptr, p, false, false);
  const DimVector expect = conv_shape<Sp>(g.N, g.M, g.OD, g.OH, g.OW);
  if (!(dy.sizes() == IntArrayRef(expect)) || dy.dtype() != x.dtype())
    fail("[{}] grad_output {} ({}) does not match the convolution output {} ({})", op,
         shape_str(dy.sizes()), dtype_name(dy.dtype()), vals(expect), dtype_name(x.dtype()));
  return g;
}
template <int Sp>
void conv_backward_weight_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  bw_geom<Sp>(in[0], in[1], a);
  out.push_back({ConvWeightGradAttrs::get<"weight_size">(a), {}, 0, in[1].dtype(), in[1].device()});
}
template <int Sp> TensorList conv_backward_weight_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), false);
  const Tensor& gg = gr[0];  // gradient w.r.t. grad_weight
  Tensor gdy, gx;
  if (c.needs_input_grad(0)) gdy = conv_public<Sp>(c.input(1), gg, p);
  if (c.needs_input_grad(1)) {
    const Geom geo = conv_geometry(c.input_sizes(1), gg.sizes(), p, false);
    gx = conv_t_public<Sp>(c.input(0), gg, p, adjoint_output_padding(geo, Sp));
  }
  return {gdy, gx};
}

// conv1d/2d/3d and conv_transpose1d/2d/3d; 1-D runs as 2-D over a unit H dim (`sp` = 1, 2, 3).
Tensor conv_impl(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const ConvParams& p, bool transposed, int64_t sp) {
  const OpDef& def = sp == 3 ? (transposed ? OF_OP("conv_transpose3d") : OF_OP("conv3d"))
                             : (transposed ? OF_OP("conv_transpose2d") : OF_OP("conv2d"));
  check_defined(op, input, "input");
  check_defined(op, weight, "weight");
  const bool one_d = sp == 1;
  const bool unbatched = input.dim() == sp + 1;
  Tensor x = batched(op, input, sp), w = weight;
  if (one_d) {
    x = x.dim() == 3 ? x.unsqueeze(2) : x;
    if (w.dim() == 3) w = w.unsqueeze(2);
    else fail("[{}] expected a 3-D weight, got shape {}", op, shape_str(w.sizes()));
    // conv1d is no op of its own: its shapes and parameters are checked as conv1d sees them
    // (the 2-D op's infer_meta would word them over a unit H dim); the dtypes and the bias are
    // left to that infer_meta (after autocast's casts: dispatch steps 0 and 2)
    check_float(op, w, "weight");
    conv_check(op, x, w.sizes(), x.dtype(), w.device(), nullptr, p, transposed, true);
  }
  Attrs attrs = transposed ? ConvTransposeAttrs::make(p.stride, p.padding, p.dilation, p.groups,
                                                      p.output_padding)
                           : ConvAttrs::make(p.stride, p.padding, p.dilation, p.groups);
  Tensor y = dispatch1(def, {x, w, bias}, std::move(attrs));
  if (one_d) y = y.squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

ConvParams make_params(const char* op, int64_t sp, IntArrayRef stride, IntArrayRef padding,
                       IntArrayRef dilation, int64_t groups, IntArrayRef output_padding = 0) {
  ConvParams p;
  p.stride = expand_param(stride, sp, op, "stride");
  p.padding = expand_param(padding, sp, op, "padding");
  p.dilation = expand_param(dilation, sp, op, "dilation");
  p.output_padding = expand_param(output_padding, sp, op, "output_padding");
  p.groups = groups;
  if (sp == 1) {  // conv1d runs as conv2d over a unit H dim
    p.stride.insert(p.stride.begin(), 1);
    p.padding.insert(p.padding.begin(), 0);
    p.dilation.insert(p.dilation.begin(), 1);
    p.output_padding.insert(p.output_padding.begin(), 0);
  }
  return p;
}

// "valid" / "same" padding: same pads d*(k-1) in total per dim, the odd unit at the end.
Tensor conv_padding_mode(const char* op, int64_t sp, const Tensor& input, const Tensor& weight,
                         const Tensor& bias, IntArrayRef stride, std::string_view padding,
                         IntArrayRef dilation, int64_t groups) {
  check_defined(op, input, "input");
  check_defined(op, weight, "weight");
  ConvParams p = make_params(op, sp, stride, 0, dilation, groups);
  if (padding == "valid") return conv_impl(op, input, weight, bias, p, false, sp);
  if (padding != "same")
    fail("[{}] padding must be 'valid' or 'same' (or integers), got '{}'", op, padding);
  for (int64_t s : p.stride)
    if (s != 1)
      fail("[{}] padding='same' is not supported for strided convolutions (stride {})", op,
           vals(expand_param(stride, sp, op, "stride")));
  if (weight.dim() != sp + 2)
    fail("[{}] expected a {}-D weight, got shape {}", op, sp + 2, shape_str(weight.sizes()));
  const size_t off = p.padding.size() - size_t(sp);  // conv1d's params carry a unit H dim
  DimVector extra;                                   // pad() order: last dim first
  bool asym = false;
  for (int64_t d = sp - 1; d >= 0; --d) {
    const int64_t dil = p.dilation[off + size_t(d)];
    const int64_t total = dil * (weight.size(2 + d) - 1);
    p.padding[off + size_t(d)] = total / 2;
    extra.push_back(0);
    extra.push_back(total % 2);
    asym = asym || total % 2 != 0;
  }
  Tensor x = input;
  if (asym) {
    check_float(op, input, "input");
    x = pad(batched(op, input, sp), extra);
    if (input.dim() == sp + 1) x = x.squeeze(0);
  }
  return conv_impl(op, x, weight, bias, p, false, sp);
}

}  // namespace

void register_conv_ops() {
  // Graph files before format 3 (NOTE [Graph file versions] in trace/graph_reader.cpp) kept
  // conv_transpose2d/3d's attributes as (stride, padding, output_padding, groups, dilation) and
  // conv2d/3d_backward_weight's as (weight_size, stride, padding, dilation, groups): for each
  // position of today's schema, the position it had then.
  const std::vector<int> kTransposeOrderBeforeV3{0, 1, 4, 3, 2},
      kWeightGradOrderBeforeV3{1, 2, 3, 4, 0};
  register_op({.name = "conv2d",
               .traits = kWidens16Bit,
               .attr_names = ConvAttrs::names(),
               .attr_types = ConvAttrs::types(),
               .infer_meta = conv_meta<2>,
               .cpu = cpu::conv2d,
               .vjp = conv_vjp<2>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kSamplesSplit,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  register_op({.name = "conv3d",
               .traits = kWidens16Bit,
               .attr_names = ConvAttrs::names(),
               .attr_types = ConvAttrs::types(),
               .infer_meta = conv_meta<3>,
               .cpu = cpu::conv3d,
               .vjp = conv_vjp<3>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kSamplesSplit,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  register_op({.name = "conv_transpose2d",
               .traits = kWidens16Bit,
               .attr_names = ConvTransposeAttrs::names(),
               .attr_types = ConvTransposeAttrs::types(),
               .infer_meta = conv_transpose_meta<2>,
               .cpu = cpu::conv_transpose2d,
               .vjp = conv_transpose_vjp<2>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kSamplesSplit,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower,
               .attr_order_before_v3 = kTransposeOrderBeforeV3});
  register_op({.name = "conv_transpose3d",
               .traits = kWidens16Bit,
               .attr_names = ConvTransposeAttrs::names(),
               .attr_types = ConvTransposeAttrs::types(),
               .infer_meta = conv_transpose_meta<3>,
               .cpu = cpu::conv_transpose3d,
               .vjp = conv_transpose_vjp<3>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kSamplesSplit,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower,
               .attr_order_before_v3 = kTransposeOrderBeforeV3});
  register_op({.name = "conv2d_backward_weight",
               .traits = kWidens16Bit,
               .attr_names = ConvWeightGradAttrs::names(),
               .attr_types = ConvWeightGradAttrs::types(),
               .infer_meta = conv_backward_weight_meta<2>,
               .cpu = cpu::conv2d_backward_weight,
               .vjp = conv_backward_weight_vjp<2>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kSamplesSplitToPartial,
               .contiguous_inputs = kEveryInput,
               .attr_order_before_v3 = kWeightGradOrderBeforeV3});
  register_op({.name = "conv3d_backward_weight",
               .traits = kWidens16Bit,
               .attr_names = ConvWeightGradAttrs::names(),
               .attr_types = ConvWeightGradAttrs::types(),
               .infer_meta = conv_backward_weight_meta<3>,
               .cpu = cpu::conv3d_backward_weight,
               .vjp = conv_backward_weight_vjp<3>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kSamplesSplitToPartial,
               .contiguous_inputs = kEveryInput,
               .attr_order_before_v3 = kWeightGradOrderBeforeV3});
  register_pool_ops();
}

// ---------------------------------------------------------------- public functions

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_impl("conv2d", input, weight, bias,
                   make_params("conv2d", 2, stride, padding, dilation, groups), false, 2);
}
Tensor conv2d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_impl("conv1d", input, weight, bias,
                   make_params("conv1d", 1, stride, padding, dilation, groups), false, 1);
}
Tensor conv1d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_impl("conv3d", input, weight, bias,
                   make_params("conv3d", 3, stride, padding, dilation, groups), false, 3);
}
Tensor conv3d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv3d", 3, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                        int64_t groups, IntArrayRef dilation) {
  return conv_impl(
      "conv_transpose1d", input, weight, bias,
      make_params("conv_transpose1d", 1, stride, padding, dilation, groups, output_padding), true,
      1);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                        int64_t groups, IntArrayRef dilation) {
  return conv_impl(
      "conv_transpose2d", input, weight, bias,
      make_params("conv_transpose2d", 2, stride, padding, dilation, groups, output_padding), true,
      2);
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                        int64_t groups, IntArrayRef dilation) {
  return conv_impl(
      "conv_transpose3d", input, weight, bias,
      make_params("conv_transpose3d", 3, stride, padding, dilation, groups, output_padding), true,
      3);
}

}  // namespace oneflow

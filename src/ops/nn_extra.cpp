// nn_extra.cpp: im2col / col2im (nn::Unfold / nn::Fold) and the CTC loss: their metas, VJPs, SBP
// rules, registrations and public functions. Kernels: cpu/nn_extra.cpp (NOTE [im2col and
// col2im], NOTE [CTC]); the checks and geometry both use: ops/nn_extra_common.h.
#include <vector>

#include "autograd/node.h"
#include "cpu/nn_extra.h"
#include "dispatch.h"
#include "global/rules.h"
#include "oneflow/nn/extra.h"
#include "oneflow/nn/losses.h"
#include "ops/nn_attrs.h"
#include "ops/checks.h"
#include "ops/nn_extra_common.h"

namespace oneflow {
using namespace nn_extra_detail;
namespace {

DimVector two(IntArrayRef v, const char* op, const char* name) {
  if (v.size() == 2) return v.dims();
  if (v.size() == 1) return DimVector(2, v[0]);
  fail("[{}] {} must have 1 or 2 values, got {}", op, name, shape_str(v));
}

// ---------------------------------------------------------------- im2col / col2im

void im2col_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const ColGeom g = im2col_geom(in[0], a);
  out.push_back({{g.N, g.C * g.kh * g.kw, g.L()}, {}, 0, in[0].dtype(), in[0].device()});
}
TensorList im2col_vjp(const VjpCtx& c, const TensorList& g) {
  const Attrs& a = c.attrs();
  IntArrayRef s = c.input_sizes(0);
  using A = Im2colAttrs;
  return {col2im(g[0], {s[2], s[3]}, A::get<"kernel_size">(a), A::get<"dilation">(a),
                 A::get<"padding">(a), A::get<"stride">(a))};
}

void col2im_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const ColGeom g = col2im_geom(in[0], a);
  out.push_back({{g.N, g.C, g.H, g.W}, {}, 0, in[0].dtype(), in[0].device()});
}
TensorList col2im_vjp(const VjpCtx& c, const TensorList& g) {
  const Attrs& a = c.attrs();
  using A = Col2imAttrs;
  return {im2col(g[0], A::get<"kernel_size">(a), A::get<"dilation">(a), A::get<"padding">(a),
                 A::get<"stride">(a))};
}

// ---------------------------------------------------------------- ctc_loss

void ctc_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const CtcGeom g = ctc_geom("ctc_loss", in, CtcAttrs::get<"blank">(a));
  out.push_back({{g.N}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{g.N, g.T, 2 * g.S + 1}, {}, 0, in[0].dtype(), in[0].device()});
}

TensorList ctc_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor gx =
      dispatch1(OF_OP("ctc_loss_backward"),
                {g[0], c.input(0), c.input(1), c.input(2), c.input(3), c.output(1)}, c.attrs());
  return {gx, Tensor(), Tensor(), Tensor()};
}

// ctc_loss_backward(grad [N], log_probs, targets, input_lengths, target_lengths, log_alpha)
void ctc_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "ctc_loss_backward";
  const CtcGeom g = ctc_geom(op, {in[1], in[2], in[3], in[4]}, CtcAttrs::get<"blank">(a));
  if (in[0].dim() != 1 || in[0].size(0) != g.N || in[0].dtype() != in[1].dtype())
    fail("[{}] expected grad of shape ({}) and dtype {}, got {} ({})", op, g.N,
         dtype_name(in[1].dtype()), shape_str(in[0].sizes()), dtype_name(in[0].dtype()));
  if (!(in[5].sizes() == IntArrayRef(DimVector{g.N, g.T, 2 * g.S + 1})))
    fail("[{}] log_alpha has shape {}, expected ({}, {}, {})", op, shape_str(in[5].sizes()), g.N,
         g.T, 2 * g.S + 1);
  out.push_back({in[1].sizes().dims(), {}, 0, in[1].dtype(), in[1].device()});
}

TensorList ctc_bwd_vjp(const VjpCtx& c, const TensorList&) {
  fail(
      "[{}] double backward through ctc_loss is not implemented (a gradient taken with "
      "create_graph=true was differentiated again)",
      c.op().name);
}

}  // namespace

void register_nn_extra_ops() {
  register_op({.name = "im2col",
               .traits = kWidens16Bit,
               .attr_names = Im2colAttrs::names(),
               .attr_types = Im2colAttrs::types(),
               .infer_meta = im2col_meta,
               .cpu = cpu::im2col,
               .vjp = im2col_vjp,
               .sbp_rule = &sbp_rules::kSamplesSplitRank4,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "col2im",
               .traits = kWidens16Bit,
               .attr_names = Col2imAttrs::names(),
               .attr_types = Col2imAttrs::types(),
               .infer_meta = col2im_meta,
               .cpu = cpu::col2im,
               .vjp = col2im_vjp,
               .sbp_rule = &sbp_rules::kSamplesSplitRank3,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "ctc_loss",
               .traits = kWidens16Bit,
               .attr_names = CtcAttrs::names(),
               .attr_types = CtcAttrs::types(),
               .infer_meta = ctc_meta,
               .cpu = cpu::ctc_loss,
               .vjp = ctc_vjp,
               .save_inputs = in(0) | in(1) | in(2) | in(3),
               .save_outputs = out(1),
               .nondiff_inputs = in(1) | in(2) | in(3),
               .sbp_rule = &sbp_rules::kSequenceBatches,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "ctc_loss_backward",
               .traits = kWidens16Bit,
               .attr_names = CtcAttrs::names(),
               .attr_types = CtcAttrs::types(),
               .infer_meta = ctc_bwd_meta,
               .cpu = cpu::ctc_loss_backward,
               .vjp = ctc_bwd_vjp,
               .sbp_rule = &sbp_rules::kSequenceBatches,
               .contiguous_inputs = kEveryInput});
}

// ---------------------------------------------------------------- public functions

Tensor im2col(const Tensor& input, IntArrayRef kernel_size, IntArrayRef dilation,
              IntArrayRef padding, IntArrayRef stride) {
  const char* op = "im2col";
  check_floating(op, input, "input");
  if (input.dim() != 3 && input.dim() != 4)
    fail("[{}] expected a 3-D (unbatched) or 4-D input, got shape {}", op,
         shape_str(input.sizes()));
  const Tensor x = input.dim() == 3 ? input.unsqueeze(0) : input;
  Tensor y = dispatch1(
      OF_OP("im2col"), {x},
      Im2colAttrs::make(two(kernel_size, op, "kernel_size"), two(dilation, op, "dilation"),
                        two(padding, op, "padding"), two(stride, op, "stride")));
  return input.dim() == 3 ? y.squeeze(0) : y;
}

Tensor col2im(const Tensor& input, IntArrayRef output_size, IntArrayRef kernel_size,
              IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  const char* op = "col2im";
  check_floating(op, input, "input");
  if (input.dim() != 2 && input.dim() != 3)
    fail("[{}] expected a 2-D (unbatched) or 3-D input, got shape {}", op,
         shape_str(input.sizes()));
  const Tensor x = input.dim() == 2 ? input.unsqueeze(0) : input;
  Tensor y = dispatch1(
      OF_OP("col2im"), {x},
      Col2imAttrs::make(two(output_size, op, "output_size"), two(kernel_size, op, "kernel_size"),
                        two(dilation, op, "dilation"), two(padding, op, "padding"),
                        two(stride, op, "stride")));
  return input.dim() == 2 ? y.squeeze(0) : y;
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, int64_t reduction,
                bool zero_infinity) {
  const char* op = "ctc_loss";
  auto as_long = [&](const Tensor& t, const char* what) {
    check_defined(op, t, what);
    if (t.dtype() != kInt64 && t.dtype() != kInt32)
      fail("[{}] expected {} to be an integer (int32 or int64) tensor, got {} (shape {})", op, what,
           dtype_name(t.dtype()), shape_str(t.sizes()));
    return t.to(kInt64);
  };
  if (reduction < Reduction::None || reduction > Reduction::Sum)
    fail("[{}] unknown reduction {}", op, reduction);
  const Tensor tl = as_long(target_lengths, "target_lengths");
  TensorList r = dispatch(
      OF_OP("ctc_loss"),
      {log_probs, as_long(targets, "targets"), as_long(input_lengths, "input_lengths"), tl},
      CtcAttrs::make(blank, zero_infinity));
  const Tensor& nll = r[0];
  if (reduction == Reduction::Sum) return nll.sum();
  if (reduction == Reduction::Mean) return (nll / tl.clamp_min(1).to(nll.dtype())).mean();
  return nll;
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths,
                IntArrayRef target_lengths, int64_t blank, int64_t reduction, bool zero_infinity) {
  return ctc_loss(log_probs, targets,
                  tensor(std::vector<int64_t>(input_lengths.begin(), input_lengths.end())),
                  tensor(std::vector<int64_t>(target_lengths.begin(), target_lengths.end())), blank,
                  reduction, zero_infinity);
}

}  // namespace oneflow

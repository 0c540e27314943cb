// dropout and linear (their metas, VJPs, registrations and public functions; kernels:
// cpu/nn.cpp), and the rooms of the other nn ops (registered from here): ops/nn_norm.cpp,
// ops/nn_losses.cpp, ops/nn_attention.cpp, with what they share in ops/nn_common.h.
// NOTE [nn kernels] (cpu/nn.cpp) says how the fused ops (batch_norm, layer_norm, group_norm,
// rms_norm, dropout, cross_entropy) and their backward ops compute. The backward ops are not
// differentiable themselves: their VJP raises a clear error if a create_graph gradient is
// differentiated again (see fused_backward_vjp), never a silently missing term. The losses other
// than cross_entropy are compositions of public ops.
#include <atomic>
#include <mutex>

#include "cpu/elementwise.h"
#include "cpu/nn.h"
#include "generator.h"
#include "global/rules.h"
#include "oneflow/nn.h"
#include "oneflow/ops_nn.h"
#include "oneflow/quantize.h"
#include "ops/nn_common.h"
#include "ops/nn_op_helpers.h"

namespace oneflow {
void register_norm_ops();
void register_loss_ops();
void register_attention_ops();
using namespace nn_detail;
namespace {

// ================================================================ dropout
// inputs: x; attrs: p, seed, offset; outputs: y, keep mask (bool). Element i (row-major)
// is kept when the top 24 bits of word i % 4 of Philox counter (offset + i / 4) are >= p * 2^24.

void dropout_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  check_float("dropout", x, "input");
  const double p = DropoutAttrs::get<"p">(a);
  if (!(p >= 0.0 && p <= 1.0))
    fail("[dropout] dropout probability has to be between 0 and 1, but got {}", p);
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({x.sizes().dims(), {}, 0, kBool, x.device()});
}

TensorList dropout_vjp(const VjpCtx& c, const TensorList& g) {
  const double p = DropoutAttrs::get<"p">(c.attrs());
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  return {where(c.output(1), g[0] * scale, Scalar(0.0))};
}

// ================================================================ linear
// inputs: x [R, in], weight [out, in], bias [out] (optional); output [R, out]. The VJP computes
// the weight gradient as g^T x, already in weight's [out, in] layout (no transposed copy).

void linear_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& x = in[0];
  check_float("linear", x, "input");
  check_float("linear", in[1], "weight");
  if (x.dim() != 2 || in[1].dim() != 2 || x.size(1) != in[1].size(1))
    fail("[linear] expected input [rows, in] and weight [out, in], got shapes {} and {}",
         shape_str(x.sizes()), shape_str(in[1].sizes()));
  check_param(in[1], x, in[1].sizes(), "linear", "weight");
  check_param(in[2], x, DimVector{in[1].size(0)}, "linear", "bias");
  out.push_back({{x.size(0), in[1].size(0)}, {}, 0, x.dtype(), x.device()});
}

// linear_act: linear's inputs and optionally a residual; y = act(x wᵀ + b) * scale + residual,
// each step rounded as its own op (made by the trace's epilogue rewrite, NOTE [GEMM epilogues]
// in cpu/blas.h; inference graphs: no VJP). act "none": no activation.
void linear_act_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const std::string& act = LinearActAttrs::get<"act">(a);
  if (act != "none" && !find_epilogue_act(act))
    fail("[linear_act] unknown activation '{}' ({}, or none)", act, epilogue_act_names());
  if (LinearActAttrs::has<"scale">(a) && !std::isfinite(LinearActAttrs::get<"scale">(a)))
    fail("[linear_act] the scale must be finite, got {}", LinearActAttrs::get<"scale">(a));
  linear_meta(in, a, out);
  if (in.size() > 3 && in[3].defined()) {
    const Tensor& r = in[3];
    if (!(r.sizes() == IntArrayRef(out[0].sizes)) || r.dtype() != out[0].dtype ||
        r.device() != out[0].device)
      fail("[linear_act] the residual must be {} {} on {} like the output, got {} {} on {}",
           dtype_name(out[0].dtype), shape_str(out[0].sizes), out[0].device.str(),
           dtype_name(r.dtype()), shape_str(r.sizes()), r.device().str());
  }
}

// linear_dynamic_int8 (NOTE [Dynamic int8 linear] in src/cpu/gemm_s8.cpp; made by the trace's
// quantize rewrite): linear's operands, float32 only; inference (no VJP).
void linear_int8_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "linear_dynamic_int8";
  check_defined(op, in[0], "input");
  check_defined(op, in[1], "weight");
  if (in[0].dtype() != kFloat32 || in[1].dtype() != kFloat32 ||
      (in[2].defined() && in[2].dtype() != kFloat32))
    fail("[{}] expects float32 input, weight and bias, got {} and {}", op,
         dtype_name(in[0].dtype()), dtype_name(in[1].dtype()));
  linear_meta(in, a, out);
}

TensorList linear_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor gx, gw, gb;
  if (c.needs_input_grad(0)) gx = g[0].mm(c.input(1));
  if (c.needs_input_grad(1)) gw = g[0].t().mm(c.input(0));
  if (c.needs_input_grad(2)) gb = g[0].sum({0});
  return {gx, gw, gb};
}

}  // namespace

void register_nn_ops() {
  register_op({.name = "dropout",
               .traits = kRandom | kWidens16Bit,
               .attr_names = DropoutAttrs::names(),
               .attr_types = DropoutAttrs::types(),
               .infer_meta = dropout_meta,
               .cpu = cpu::dropout,
               .vjp = dropout_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kWholeValues,
               .rng_seed_attr = int(DropoutAttrs::index<"seed">()),
               .contiguous_inputs = kEveryInput});
  // linear takes float16/bfloat16 operands itself (no kWidens16Bit): cpu::gemm accumulates
  // them in float32 (bfloat16 on the AVX512-BF16 kernel, NOTE [bfloat16 GEMM]), as the CUDA
  // kernel does in cuBLASLt, rounding the output once
  register_op({.name = "linear",
               .traits = 0,
               .attr_names = {},
               .infer_meta = linear_meta,
               .cpu = cpu::linear,
               .vjp = linear_vjp,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kMatmulTransposedWeight,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower,
               .weight_input = 1});
  register_op({.name = "linear_act",
               .attr_names = LinearActAttrs::names(),
               .attr_types = LinearActAttrs::types(),
               .infer_meta = linear_act_meta,
               .cpu = cpu::linear_act,
               .sbp_rule = &sbp_rules::kWholeValues,
               .contiguous_inputs = kEveryInput,
               .weight_input = 1});
  register_op({.name = "linear_dynamic_int8",
               .infer_meta = linear_int8_meta,
               .cpu = cpu::linear_dynamic_int8,
               .sbp_rule = &sbp_rules::kWholeValues,
               .contiguous_inputs = kEveryInput,
               .weight_input = 1});
  register_norm_ops();
  register_loss_ops();
  register_attention_ops();
}

// ================================================================ public functions

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  // Only what the [rows, in] view needs is checked here; dtypes, devices and the bias are
  // linear_meta's, after autocast's casts and before any 16-bit widening (dispatch steps 0, 2).
  check_defined("linear", input, "input");
  check_defined("linear", weight, "weight");
  if (weight.dim() != 2)
    fail("[linear] expected a 2-D weight [out_features, in_features], got shape {}",
         shape_str(weight.sizes()));
  if (input.dim() < 1) fail("[linear] expected an input of at least 1 dim, got a 0-d tensor");
  const int64_t in = weight.size(1), outf = weight.size(0);
  if (input.size(-1) != in)
    fail("[linear] input of shape {} does not match weight of shape {}: in_features {} != {}",
         shape_str(input.sizes()), shape_str(weight.sizes()), input.size(-1), in);
  DimVector out_shape(input.sizes().begin(), input.sizes().end() - 1);
  out_shape.push_back(outf);
  const int64_t rows = prod_range(input.sizes(), 0, size_t(input.dim() - 1));
  const Tensor x2 = input.dim() == 2 ? input : input.reshape({rows, in});
  // one op on every device: the CUDA module's kernel is cuBLASLt with the bias epilogue
  Tensor r;
  if (quantized_weight(weight)) {
    // quantize_dynamic marked this weight (NOTE [Dynamic int8 linear]): inference only, the
    // weight quantized once per version (named to the kernel as a constant operand)
    if (is_grad_enabled() && (input.requires_grad() || weight.requires_grad() ||
                              (bias.defined() && bias.requires_grad())))
      fail(
          "[linear] the weight {} was quantized by quantize_dynamic (int8, inference only): "
          "run it under NoGradGuard, or keep a float copy of the module to train",
          shape_str(weight.sizes()));
    ConstantOperandScope constant(weight.impl()->storage.get());
    r = dispatch1(OF_OP("linear_dynamic_int8"), {x2, weight, bias});
  } else {
    r = dispatch1(OF_OP("linear"), {x2, weight, bias});
  }
  return input.dim() == 2 ? r : r.reshape(out_shape);
}

namespace {
std::mutex g_quantized_mu;
std::vector<std::weak_ptr<StorageImpl>> g_quantized;  // weights quantize_dynamic marked
std::atomic<bool> g_any_quantized{false};             // (every linear call asks)
}  // namespace

bool quantized_weight(const Tensor& w) {
  if (!g_any_quantized.load(std::memory_order_acquire) || !w.defined() || !w.impl()->storage)
    return false;
  std::lock_guard<std::mutex> lock(g_quantized_mu);
  if (g_quantized.empty()) return false;
  for (const auto& s : g_quantized)
    if (s.lock() == w.impl()->storage) return true;
  return false;
}

size_t quantize_dynamic(nn::Module& module) {
  size_t n = 0;
  std::lock_guard<std::mutex> lock(g_quantized_mu);
  std::erase_if(g_quantized, [](const auto& s) { return s.expired(); });
  std::vector<Tensor> weights;
  for (const auto& m : module.modules()) {
    auto* lin = dynamic_cast<nn::LinearImpl*>(m.get());
    if (!lin) continue;
    const Tensor& w = lin->weight;
    if (w.dtype() != kFloat32 || !w.device().is_cpu())
      fail(
          "[quantize_dynamic] Linear weight {} is {} on {}: int8 weights replace float32 ones "
          "on the CPU",
          shape_str(w.sizes()), dtype_name(w.dtype()), w.device().str());
    weights.push_back(w);
  }
  for (const Tensor& w : weights) {
    bool seen = false;
    for (const auto& s : g_quantized) seen = seen || s.lock() == w.impl()->storage;
    if (!seen) g_quantized.push_back(w.impl()->storage);
    ++n;
  }
  if (n > 0) g_any_quantized.store(true, std::memory_order_release);
  return n;
}

Tensor dropout(const Tensor& input, double p, bool train) {
  if (!input.defined()) fail("[dropout] input is undefined");
  if (!(p >= 0.0 && p <= 1.0))
    fail("[dropout] dropout probability has to be between 0 and 1, but got {}", p);
  check_float("dropout", input, "input");
  if (!train || p == 0.0 || input.numel() == 0) return input;
  GeneratorState s = reserve_random(uint64_t((input.numel() + 3) / 4));
  return dispatch1(OF_OP("dropout"), {input},
                   DropoutAttrs::make(p, int64_t(s.seed), int64_t(s.offset)));
}

Tensor& dropout_(Tensor& input, double p, bool train) {
  Tensor y = dropout(input, p, train);
  if (!y.is_same(input)) input.copy_(y);
  return input;
}

}  // namespace oneflow

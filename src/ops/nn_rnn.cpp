// nn_rnn.cpp: the fused LSTM ops: lstm_cell (the gate arithmetic of one time step) and
// lstm_layer (one layer and direction over all steps), with their backward ops: meta, VJPs,
// registration (kernels: src/cpu/rnn.cpp) and the functions nn::LSTM calls (ops/rnn_ops.h).
// NOTE [Fused LSTM cell]: an LSTM step is one addmm (gates = x W_ih^T + b + h W_hh^T, done by
// the caller) and then, per element, four activations and five products:
//   i, f, o = sigmoid(gates[:, 0:H], gates[:, H:2H], gates[:, 3H:4H]), g = tanh(gates[:, 2H:3H])
//   c' = f * c + i * g,  h' = o * tanh(c')
// Written with public ops that is ~10 dispatches, ~10 autograd nodes and ~10 passes over the
// rows per step, and the four chunk views' gradients are four scatters into [b, 4H] zeros.
// lstm_cell does it in one pass and lstm_cell_backward writes [b, 4H] gate gradients in one
// pass. The backward recomputes the activations from the saved pre-activation gates (cheaper
// than keeping a [b, 5H] workspace alive for every step). Under create_graph the VJP is the
// same formula written with public ops, so a second derivative is exact rather than missing.
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "cpu/rnn.h"
#include "dispatch.h"
#include "global/rules.h"
#include "ops/nn_attrs.h"
#include "ops/rnn_common.h"
#include "ops/rnn_ops.h"

namespace oneflow {
using nn_detail::layer_geom;
using nn_detail::LayerGeom;
namespace {

// A 2-D float tensor of `x`'s dtype and device with the given shape.
void check_like(const Tensor& t, const Tensor& ref, int64_t rows, int64_t cols, const char* op,
                const char* what) {
  if (!t.defined()) fail("[{}] {} is undefined", op, what);
  if (t.dtype() != ref.dtype())
    fail("[{}] expected {} of dtype {}, got {}", op, what, dtype_name(ref.dtype()),
         dtype_name(t.dtype()));
  if (t.device() != ref.device())
    fail("[{}] expected {} on {}, got {}", op, what, ref.device().str(), t.device().str());
  if (!(t.sizes() == IntArrayRef(DimVector{rows, cols})))
    fail("[{}] expected {} of shape ({}, {}), got {}", op, what, rows, cols, shape_str(t.sizes()));
}

// gates [b, 4H] and c [b, H]: returns H.
int64_t check_cell(const Tensor& gates, const Tensor& c, const char* op) {
  if (!gates.defined()) fail("[{}] gates are undefined", op);
  if (gates.dtype() != kFloat32 && gates.dtype() != kFloat64)
    fail("[{}] expected float32 or float64 gates, got {} (shape {})", op, dtype_name(gates.dtype()),
         shape_str(gates.sizes()));
  if (gates.dim() != 2 || gates.size(1) % 4 != 0)
    fail("[{}] expected gates of shape (batch, 4 * hidden), got {}", op, shape_str(gates.sizes()));
  const int64_t H = gates.size(1) / 4;
  check_like(c, gates, gates.size(0), H, op, "cell state");
  return H;
}

// inputs: gates [b, 4H], c [b, H]; outputs: h' [b, H], c' [b, H].
void cell_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const int64_t H = check_cell(in[0], in[1], "lstm_cell");
  out.push_back({{in[0].size(0), H}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{in[0].size(0), H}, {}, 0, in[0].dtype(), in[0].device()});
}

// inputs: dh [b, H], dc [b, H], gates [b, 4H], c [b, H] (the state before the step),
// c' [b, H] (after it); outputs: dgates [b, 4H], dc [b, H] (of the state before the step).
void cell_bwd_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const char* op = "lstm_cell_backward";
  const int64_t H = check_cell(in[2], in[3], op);
  const int64_t b = in[2].size(0);
  check_like(in[0], in[2], b, H, op, "grad of h");
  check_like(in[1], in[2], b, H, op, "grad of c");
  check_like(in[4], in[2], b, H, op, "new cell state");
  out.push_back({{b, 4 * H}, {}, 0, in[2].dtype(), in[2].device()});
  out.push_back({{b, H}, {}, 0, in[2].dtype(), in[2].device()});
}

// The same gradients with public ops (differentiable: used under create_graph).
TensorList composite_vjp(const Tensor& dh, const Tensor& dc, const Tensor& gates, const Tensor& c) {
  std::vector<Tensor> g = gates.chunk(4, 1);
  const Tensor i = g[0].sigmoid(), f = g[1].sigmoid(), gg = g[2].tanh(), o = g[3].sigmoid();
  const Tensor cn = f * c + i * gg;
  const Tensor tc = cn.tanh();
  const Tensor dcn = dc + dh * o * (1.0 - tc * tc);
  Tensor dgates = cat({dcn * gg * i * (1.0 - i), dcn * c * f * (1.0 - f), dcn * i * (1.0 - gg * gg),
                       dh * tc * o * (1.0 - o)},
                      1);
  return {dgates, dcn * f};
}

TensorList cell_vjp(const VjpCtx& c, const TensorList& g) {
  const Tensor gates = c.input(0), cprev = c.input(1);
  if (is_grad_enabled()) return composite_vjp(g[0], g[1], gates, cprev);
  TensorList r = dispatch(OF_OP("lstm_cell_backward"), {g[0], g[1], gates, cprev, c.output(1)});
  return {c.needs_input_grad(0) ? r[0] : Tensor(), c.needs_input_grad(1) ? r[1] : Tensor()};
}

TensorList cell_bwd_vjp(const VjpCtx& c, const TensorList&) {
  fail(
      "[lstm_cell_backward] double backward through the fused lstm_cell_backward op is not "
      "implemented (lstm_cell's own VJP differentiates with public ops under create_graph)");
}

// ---------------------------------------------------------------- the whole layer
// NOTE [Fused LSTM layer]: one layer and direction of an LSTM over T steps of B rows each
// (every sequence of the batch as long as the others). The forward runs the time loop inside
// one kernel (per step: one GEMM gates_t += h_{t-1} W_hh^T into the gates buffer, then the
// cell rows); the backward runs it backwards (per step: the cell gradient rows, then one GEMM
// dh_{t-1} = dgates_t W_hh) and forms dW_hh with one GEMM over all steps,
// dgates^T [4H, T*B] @ h_prev [T*B, H], instead of T rank-B updates summed one by one.
// inputs: xp [T*B, 4H] (the input projection with the biases), h0 [B, H], c0 [B, H],
// w_hh [4H, H]; attrs: steps T, reverse (step T-1 first); outputs: out [T*B, H] (h of every
// step, in time order), cs [T*B, H] (c of every step), gates [T*B, 4H] (pre-activation).
// All three outputs are differentiable (gates is saved for the backward; its gradient, zero
// unless a caller uses it, is added to the gate gradients).

// (LayerGeom, layer_geom: ops/rnn_common.h)

LayerGeom check_layer(const TensorList& in, const Attrs& a, const char* op) {
  const Tensor& xp = in[0];
  if (!xp.defined()) fail("[{}] the input projection is undefined", op);
  if (xp.dtype() != kFloat32 && xp.dtype() != kFloat64)
    fail("[{}] expected a float32 or float64 input projection, got {} (shape {})", op,
         dtype_name(xp.dtype()), shape_str(xp.sizes()));
  if (xp.dim() != 2 || xp.size(1) % 4 != 0 || xp.size(1) == 0)
    fail("[{}] expected an input projection of shape (steps * batch, 4 * hidden), got {}", op,
         shape_str(xp.sizes()));
  const int64_t T = nn_detail::LstmLayerAttrs::get<"steps">(a);
  if (T < 1 || xp.size(0) % T != 0)
    fail("[{}] {} steps do not divide the {} rows of the input projection {}", op, T, xp.size(0),
         shape_str(xp.sizes()));
  const LayerGeom g = layer_geom(xp.sizes(), a);
  check_like(in[1], xp, g.B, g.H, op, "h0");
  check_like(in[2], xp, g.B, g.H, op, "c0");
  check_like(in[3], xp, 4 * g.H, g.H, op, "w_hh");
  return g;
}

void layer_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const LayerGeom g = check_layer(in, a, "lstm_layer");
  const Tensor& xp = in[0];
  out.push_back({{g.T * g.B, g.H}, {}, 0, xp.dtype(), xp.device()});
  out.push_back({{g.T * g.B, g.H}, {}, 0, xp.dtype(), xp.device()});
  out.push_back({{g.T * g.B, 4 * g.H}, {}, 0, xp.dtype(), xp.device()});
}

// inputs: d_out [T*B, H], d_cs [T*B, H], d_gates [T*B, 4H] (each may be undefined: zero),
// h0, c0, w_hh, out, cs, gates (as lstm_layer's); outputs: dxp [T*B, 4H], dh0 [B, H],
// dc0 [B, H], dw_hh [4H, H].
void layer_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "lstm_layer_backward";
  const Tensor& gates = in[8];
  const LayerGeom g = check_layer({gates, in[3], in[4], in[5]}, a, op);
  const int64_t N = g.T * g.B;
  if (in[0].defined()) check_like(in[0], gates, N, g.H, op, "grad of the output");
  if (in[1].defined()) check_like(in[1], gates, N, g.H, op, "grad of the cell states");
  if (in[2].defined()) check_like(in[2], gates, N, 4 * g.H, op, "grad of the gates");
  check_like(in[6], gates, N, g.H, op, "output");
  check_like(in[7], gates, N, g.H, op, "cell states");
  out.push_back({{N, 4 * g.H}, {}, 0, gates.dtype(), gates.device()});
  out.push_back({{g.B, g.H}, {}, 0, gates.dtype(), gates.device()});
  out.push_back({{g.B, g.H}, {}, 0, gates.dtype(), gates.device()});
  out.push_back({{4 * g.H, g.H}, {}, 0, gates.dtype(), gates.device()});
}

// The same gradients with public ops (differentiable: used under create_graph).
TensorList composite_layer_vjp(const VjpCtx& c, const TensorList& g, const LayerGeom& geo,
                               bool reverse) {
  const Tensor h0 = c.input(1), c0 = c.input(2), w = c.input(3);
  const Tensor out = c.output(0), cs = c.output(1), gates = c.output(2);
  const int64_t B = geo.B;
  auto rows = [&](const Tensor& x, int64_t t) { return x.narrow(0, t * B, B); };
  std::vector<Tensor> dgs(size_t(geo.T)), hps(size_t(geo.T));
  Tensor dh = zeros_like(h0), dc = zeros_like(c0);
  for (int64_t s = geo.T - 1; s >= 0; --s) {
    const int64_t t = reverse ? geo.T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    hps[size_t(t)] = s == 0 ? h0 : rows(out, tp);
    const Tensor cp = s == 0 ? c0 : rows(cs, tp);
    if (g[0].defined()) dh = dh + rows(g[0], t);
    if (g[1].defined()) dc = dc + rows(g[1], t);
    TensorList r = composite_vjp(dh, dc, rows(gates, t), cp);
    Tensor dgt = g[2].defined() ? r[0] + rows(g[2], t) : r[0];
    dgs[size_t(t)] = dgt;
    dh = mm(dgt, w);
    dc = r[1];
  }
  const Tensor dg = cat(dgs, 0);
  return {dg, dh, dc, mm(dg.t(), cat(hps, 0))};
}

TensorList layer_vjp(const VjpCtx& c, const TensorList& g) {
  const LayerGeom geo = layer_geom(c.input_sizes(0), c.attrs());
  const bool reverse = nn_detail::LstmLayerAttrs::get<"reverse">(c.attrs());
  TensorList r;
  if (is_grad_enabled()) {
    r = composite_layer_vjp(c, g, geo, reverse);
  } else {
    r = dispatch(OF_OP("lstm_layer_backward"),
                 {g[0], g[1], g[2], c.input(1), c.input(2), c.input(3), c.output(0), c.output(1),
                  c.output(2)},
                 c.attrs());
  }
  for (size_t i = 0; i < r.size(); ++i)
    if (!c.needs_input_grad(i)) r[i] = Tensor();
  return r;
}

TensorList layer_bwd_vjp(const VjpCtx&, const TensorList&) {
  fail(
      "[lstm_layer_backward] double backward through the fused lstm_layer_backward op is not "
      "implemented (lstm_layer's own VJP differentiates with public ops under create_graph)");
}

}  // namespace

// (dispatch runs the op's infer_meta, which checks the inputs, before anything else)
std::pair<Tensor, Tensor> lstm_cell_update(const Tensor& gates, const Tensor& c) {
  TensorList r = dispatch(OF_OP("lstm_cell"), {gates, c});
  return {r[0], r[1]};
}

std::tuple<Tensor, Tensor, Tensor> lstm_layer(const Tensor& xp, const Tensor& h0, const Tensor& c0,
                                              const Tensor& w_hh, int64_t steps, bool reverse) {
  TensorList r = dispatch(OF_OP("lstm_layer"), {xp, h0, c0, w_hh},
                          nn_detail::LstmLayerAttrs::make(steps, reverse));
  return {r[0], r[1], r[2]};
}

void register_rnn_ops() {
  register_op({.name = "lstm_cell",
               .traits = kWidens16Bit,
               .infer_meta = cell_meta,
               .cpu = cpu::lstm_cell,
               .vjp = cell_vjp,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kRowwise,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "lstm_cell_backward",
               .traits = kWidens16Bit,
               .infer_meta = cell_bwd_meta,
               .cpu = cpu::lstm_cell_backward,
               .vjp = cell_bwd_vjp,
               .sbp_rule = &sbp_rules::kRowwise,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "lstm_layer",
               .traits = kWidens16Bit,
               .attr_names = nn_detail::LstmLayerAttrs::names(),
               .attr_types = nn_detail::LstmLayerAttrs::types(),
               .infer_meta = layer_meta,
               .cpu = cpu::lstm_layer,
               .vjp = layer_vjp,
               .save_inputs = in(1) | in(2) | in(3),
               .save_outputs = out(0) | out(1) | out(2),
               .sbp_rule = &sbp_rules::kWholeValues,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "lstm_layer_backward",
               .traits = kWidens16Bit,
               .attr_names = nn_detail::LstmLayerAttrs::names(),
               .attr_types = nn_detail::LstmLayerAttrs::types(),
               .infer_meta = layer_bwd_meta,
               .cpu = cpu::lstm_layer_backward,
               .vjp = layer_bwd_vjp,
               .sbp_rule = &sbp_rules::kWholeValues,
               .contiguous_inputs = kEveryInput});
}

}  // namespace oneflow

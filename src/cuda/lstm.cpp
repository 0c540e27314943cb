// lstm.cpp: host side of the fused LSTM ops on CUDA (their kernels are in sort.cu), with the
// CPU kernels' attrs, checks and messages (src/ops/nn_rnn.cpp). Nothing here reads device
// memory back, so every kernel can be captured into a CUDA Graph.
//
// NOTE [CUDA LSTM]: lstm_cell/lstm_cell_backward are one elementwise kernel each (the CPU's
// formulas through ops/functors.h). lstm_layer runs the time loop on the host: per step one
// cuBLAS GEMM (the module's mm kernel, on the current stream) h_{t-1} W_hh^T into a [B, 4H]
// scratch, then one cell kernel that adds the input projection, writes the pre-activation
// gates and h_t, c_t. lstm_layer_backward: per step (backwards) one cell-gradient kernel (it
// adds the outside gradients of h_t, c_t and of the gates) and one GEMM dh_{t-1} = dgates_t
// W_hh; dW_hh is two GEMMs over all steps (the first step's h0, then the others' h_{t-1} rows
// of `out`), as on the CPU. The GEMMs sum in cuBLAS's order: close to the CPU's, not bitwise.
#include "cuda/cuda_check.h"
#include "cuda/dims.h"
#include "cuda/module.h"
#include "cuda/sort.h"
#include "ops/nn_attrs.h"

namespace oneflow::cuda_module {
namespace {

// ---------------------------------------------------------------- LSTM

void check_float(ScalarType t, const char* op) {
  if (t != kFloat32 && t != kFloat64)
    fail("[{}] expected a float32 or float64 tensor, got {}", op, dtype_name(t));
}

// An element pointer `rows` rows of `cols` into a dense 2-D tensor (null when undefined).
const void* rows_at(const Tensor& t, int64_t row, int64_t cols) {
  if (!t.defined()) return nullptr;
  return static_cast<const char*>(t.impl()->raw_data()) + row * cols * int64_t(t.element_size());
}
void* rows_at_mut(const Tensor& t, int64_t row, int64_t cols) {
  return const_cast<void*>(rows_at(t, row, cols));
}

// out = a @ b by the module's cuBLAS GEMM (a kernel dispatches no op: NOTE [No kernel
// dispatches]).
void gemm_into(const Tensor& out, const Tensor& a, const Tensor& b) {
  const Attrs none{};
  const TensorList ins{a, b};
  TensorList outs{out};
  mm_kernel(KernelArgs{ins, none, outs});
}

void check_cuda_inputs(const TensorList& in, const Tensor& ref, const char* op) {
  for (const Tensor& t : in)
    if (t.defined())
      OF_CHECK(t.is_cuda() && t.device() == ref.device() && t.is_contiguous(),
               "[{}] cuda: expected dense inputs on {}, got one on {}", op, ref.device().str(),
               t.device().str());
}

// inputs gates [b, 4H], c [b, H]; outputs h', c'
void lstm_cell_kernel(const KernelArgs& k) {
  const Tensor &gates = k.inputs[0], &c = k.inputs[1];
  const int device = device_of(gates, "lstm_cell");
  DeviceGuard guard(device);
  check_float(gates.dtype(), "lstm_cell");
  check_cuda_inputs(k.inputs, gates, "lstm_cell");
  LstmCellParams p;
  p.rows = gates.size(0);
  p.H = gates.size(1) / 4;
  p.gates = gates.impl()->raw_data();
  p.c = c.impl()->raw_data();
  p.h_out = k.outputs[0].impl()->raw_data();
  p.c_out = k.outputs[1].impl()->raw_data();
  p.dtype = gates.dtype();
  check_launch(launch_lstm_cell(p, current_stream_of(device)), "lstm_cell", p.dtype);
}

// inputs dh, dc, gates, c, c'; outputs dgates [b, 4H], dc_prev [b, H]
void lstm_cell_backward_kernel(const KernelArgs& k) {
  const char* op = "lstm_cell_backward";
  const Tensor& gates = k.inputs[2];
  const int device = device_of(gates, op);
  DeviceGuard guard(device);
  check_float(gates.dtype(), op);
  check_cuda_inputs(k.inputs, gates, op);
  LstmCellBackwardParams p;
  p.rows = gates.size(0);
  p.H = gates.size(1) / 4;
  p.dh = k.inputs[0].impl()->raw_data();
  p.dc = k.inputs[1].impl()->raw_data();
  p.gates = gates.impl()->raw_data();
  p.c = k.inputs[3].impl()->raw_data();
  p.c_new = k.inputs[4].impl()->raw_data();
  p.dgates = k.outputs[0].impl()->raw_data();
  p.dc_prev = k.outputs[1].impl()->raw_data();
  p.dtype = gates.dtype();
  check_launch(launch_lstm_cell_backward(p, current_stream_of(device)), op, p.dtype);
}

// inputs xp [T*B, 4H], h0, c0 [B, H], w_hh [4H, H]; attrs steps, reverse; outputs out, cs
// [T*B, H], gates [T*B, 4H] (NOTE [Fused LSTM layer] in src/ops/nn_rnn.cpp, NOTE [CUDA LSTM])
void lstm_layer_kernel(const KernelArgs& k) {
  const char* op = "lstm_layer";
  const Tensor &xp = k.inputs[0], &h0 = k.inputs[1], &c0 = k.inputs[2], &w = k.inputs[3];
  const int device = device_of(xp, op);
  DeviceGuard guard(device);
  check_float(xp.dtype(), op);
  check_cuda_inputs(k.inputs, xp, op);
  const int64_t T = nn_detail::LstmLayerAttrs::get<"steps">(k.attrs), B = xp.size(0) / T,
                H = xp.size(1) / 4, G = 4 * H;
  const bool reverse = nn_detail::LstmLayerAttrs::get<"reverse">(k.attrs);
  const Tensor &out = k.outputs[0], &cs = k.outputs[1], &gates = k.outputs[2];
  if (B == 0) return;
  const Tensor wt = kernel_transpose(w);
  Tensor hw = make_empty({B, G}, xp.dtype(), xp.device());  // h_{t-1} W_hh^T of one step
  const cudaStream_t stream = current_stream_of(device);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    const Tensor hp = s == 0 ? h0 : kernel_narrow(out, 0, tp * B, B);
    gemm_into(hw, hp, wt);
    LstmCellParams p;
    p.rows = B;
    p.H = H;
    p.gates = rows_at(xp, t * B, G);
    p.add = hw.impl()->raw_data();
    p.gates_out = rows_at_mut(gates, t * B, G);
    p.c = s == 0 ? c0.impl()->raw_data() : rows_at(cs, tp * B, H);
    p.h_out = rows_at_mut(out, t * B, H);
    p.c_out = rows_at_mut(cs, t * B, H);
    p.dtype = xp.dtype();
    check_launch(launch_lstm_cell(p, stream), op, p.dtype);
  }
}

// inputs d_out, d_cs, d_gates (each may be undefined), h0, c0, w_hh, out, cs, gates; attrs
// steps, reverse; outputs dxp [T*B, 4H], dh0, dc0 [B, H], dw_hh [4H, H]
void lstm_layer_backward_kernel(const KernelArgs& k) {
  const char* op = "lstm_layer_backward";
  const Tensor& gates = k.inputs[8];
  const Tensor &d_out = k.inputs[0], &d_cs = k.inputs[1], &d_gates = k.inputs[2];
  const Tensor &h0 = k.inputs[3], &c0 = k.inputs[4], &w = k.inputs[5];
  const Tensor &out = k.inputs[6], &cs = k.inputs[7];
  const int device = device_of(gates, op);
  DeviceGuard guard(device);
  check_float(gates.dtype(), op);
  check_cuda_inputs(k.inputs, gates, op);
  const int64_t T = nn_detail::LstmLayerAttrs::get<"steps">(k.attrs), B = gates.size(0) / T,
                H = gates.size(1) / 4, G = 4 * H;
  const int64_t N = T * B;
  const bool reverse = nn_detail::LstmLayerAttrs::get<"reverse">(k.attrs);
  Tensor dxp = k.outputs[0], dh0 = k.outputs[1], dc0 = k.outputs[2], dw = k.outputs[3];
  if (B == 0) {
    kernel_fill(dw, 0);  // no step: the CPU's GEMMs over zero rows write zeros
    return;
  }
  const cudaStream_t stream = current_stream_of(device);
  // dh: the gradient reaching h_t from the step after it (the GEMM writes it; the last step's
  // straight into dh0); dc, dc_prev alternate (the first step's dc_prev is dc0)
  Tensor dh = T > 1 ? make_empty({B, H}, gates.dtype(), gates.device()) : Tensor();
  Tensor dcb[2];
  if (T > 1) {
    dcb[0] = make_empty({B, H}, gates.dtype(), gates.device());
    dcb[1] = make_empty({B, H}, gates.dtype(), gates.device());
  }
  const void* dc = nullptr;  // null: zero (nothing reaches the last step from after it)
  const void* dhp = nullptr;
  for (int64_t s = T - 1; s >= 0; --s) {
    const int64_t t = reverse ? T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    LstmCellBackwardParams p;
    p.rows = B;
    p.H = H;
    p.dh = dhp;
    p.dh_add = rows_at(d_out, t * B, H);
    p.dc = dc;
    p.dc_add = rows_at(d_cs, t * B, H);
    p.gates = rows_at(gates, t * B, G);
    p.c = s == 0 ? c0.impl()->raw_data() : rows_at(cs, tp * B, H);
    p.c_new = rows_at(cs, t * B, H);
    p.dgates_add = rows_at(d_gates, t * B, G);
    p.dgates = rows_at_mut(dxp, t * B, G);
    p.dc_prev = s == 0 ? dc0.impl()->raw_data() : dcb[s % 2].impl()->raw_data();
    p.dtype = gates.dtype();
    check_launch(launch_lstm_cell_backward(p, stream), op, p.dtype);
    // dh_{t-1} = dgates_t W_hh
    Tensor& dst = s == 0 ? dh0 : dh;
    gemm_into(dst, kernel_narrow(dxp, 0, t * B, B), w);
    dhp = dh.defined() ? dh.impl()->raw_data() : nullptr;
    dc = p.dc_prev;
  }
  // dW_hh = dgates_first^T h0 + (the other steps' dgates)^T (their h_{t-1} rows of out)
  const int64_t first = reverse ? T - 1 : 0;
  gemm_into(dw, kernel_transpose(kernel_narrow(dxp, 0, first * B, B)), h0);
  if (T > 1) {
    const Tensor dg_rest =
        reverse ? kernel_narrow(dxp, 0, 0, N - B) : kernel_narrow(dxp, 0, B, N - B);
    const Tensor h_rest =
        reverse ? kernel_narrow(out, 0, B, N - B) : kernel_narrow(out, 0, 0, N - B);
    const Tensor rest = make_empty(dw.sizes(), dw.dtype(), dw.device());
    gemm_into(rest, kernel_transpose(dg_rest), h_rest);
    add_into(dw, rest);
  }
}

}  // namespace

void register_lstm_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("lstm_cell", lstm_cell_kernel);
  core.set_cuda_kernel("lstm_cell_backward", lstm_cell_backward_kernel);
  core.set_cuda_kernel("lstm_layer", lstm_layer_kernel);
  core.set_cuda_kernel("lstm_layer_backward", lstm_layer_backward_kernel);
}

}  // namespace oneflow::cuda_module

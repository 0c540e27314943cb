// cpu/rnn.cpp: the CPU kernels of the fused LSTM ops (ops/nn_rnn.cpp: inputs, attributes and
// outputs): lstm_cell and its backward (NOTE [Fused LSTM cell]), lstm_layer and its backward,
// the time loop inside one kernel (NOTE [Fused LSTM layer]).
#include "cpu/rnn.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "cpu/blas.h"
#include "ops/functors.h"
#include "ops/nn_common.h"
#include "ops/rnn_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using nn_detail::grain_for;
using nn_detail::layer_geom;
using nn_detail::LayerGeom;
namespace {

// One row of the update (separate functions with restrict pointers: the loops vectorise).
template <class T>
void cell_row(const T* __restrict gi, const T* __restrict cr, T* __restrict hr, T* __restrict cnr,
              int64_t H) {
  const T* __restrict gf = gi + H;
  const T* __restrict gg = gi + 2 * H;
  const T* __restrict go = gi + 3 * H;
  for (int64_t j = 0; j < H; ++j) {
    const T cn = fn::sigmoid_(gf[j]) * cr[j] + fn::sigmoid_(gi[j]) * fn::tanh_(gg[j]);
    cnr[j] = cn;
    hr[j] = fn::sigmoid_(go[j]) * fn::tanh_(cn);
  }
}

template <class T>
void cell_bwd_row(const T* __restrict dh, const T* __restrict dc, const T* __restrict gi,
                  const T* __restrict cr, const T* __restrict cnr, T* __restrict di,
                  T* __restrict dcp, int64_t H) {
  const T* __restrict gf = gi + H;
  const T* __restrict gg = gi + 2 * H;
  const T* __restrict go = gi + 3 * H;
  T* __restrict df = di + H;
  T* __restrict dg = di + 2 * H;
  T* __restrict dout = di + 3 * H;
  for (int64_t j = 0; j < H; ++j) {
    const T i = fn::sigmoid_(gi[j]), f = fn::sigmoid_(gf[j]), g = fn::tanh_(gg[j]),
            o = fn::sigmoid_(go[j]);
    const T tc = fn::tanh_(cnr[j]);
    const T dcn = dc[j] + dh[j] * o * (T(1) - tc * tc);
    di[j] = dcn * g * i * (T(1) - i);
    df[j] = dcn * cr[j] * f * (T(1) - f);
    dg[j] = dcn * i * (T(1) - g * g);
    dout[j] = dh[j] * tc * o * (T(1) - o);
    dcp[j] = dcn * f;
  }
}

}  // namespace

void lstm_cell(const KernelArgs& k) {
  const Tensor& gates = k.inputs[0];
  const Tensor& c = k.inputs[1];
  const int64_t b = gates.size(0), H_ = gates.size(1) / 4;
  dispatch_f(gates.dtype(), "lstm_cell", [&](auto z) {
    using T = decltype(z);
    const T* pg = gates.data_ptr<T>();
    const T* pc = c.data_ptr<T>();
    T* ph = k.outputs[0].data_ptr<T>();
    T* pcn = k.outputs[1].data_ptr<T>();
    parallel_for(0, b, grain_for(40 * H_), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        cell_row(pg + r * 4 * H_, pc + r * H_, ph + r * H_, pcn + r * H_, H_);
    });
  });
}

void lstm_cell_backward(const KernelArgs& k) {
  const Tensor& gates = k.inputs[2];
  const int64_t b = gates.size(0), H_ = gates.size(1) / 4;
  dispatch_f(gates.dtype(), "lstm_cell_backward", [&](auto z) {
    using T = decltype(z);
    const T* pdh = k.inputs[0].data_ptr<T>();
    const T* pdc = k.inputs[1].data_ptr<T>();
    const T* pg = gates.data_ptr<T>();
    const T* pc = k.inputs[3].data_ptr<T>();
    const T* pcn = k.inputs[4].data_ptr<T>();
    T* pdg = k.outputs[0].data_ptr<T>();
    T* pdcp = k.outputs[1].data_ptr<T>();
    parallel_for(0, b, grain_for(50 * H_), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        cell_bwd_row(pdh + r * H_, pdc + r * H_, pg + r * 4 * H_, pc + r * H_, pcn + r * H_,
                     pdg + r * 4 * H_, pdcp + r * H_, H_);
    });
  });
}

void lstm_layer(const KernelArgs& k) {
  const LayerGeom g = layer_geom(k.inputs[0].sizes(), k.attrs);
  const bool reverse = nn_detail::LstmLayerAttrs::get<"reverse">(k.attrs);
  dispatch_f(k.inputs[0].dtype(), "lstm_layer", [&](auto z) {
    using T = decltype(z);
    const int64_t B = g.B, H = g.H, G = 4 * g.H;
    const T* xp = k.inputs[0].data_ptr<T>();
    const T* h0 = k.inputs[1].data_ptr<T>();
    const T* c0 = k.inputs[2].data_ptr<T>();
    const T* w = k.inputs[3].data_ptr<T>();
    T* out = k.outputs[0].data_ptr<T>();
    T* cs = k.outputs[1].data_ptr<T>();
    T* gates = k.outputs[2].data_ptr<T>();
    if (g.T * B * G > 0) std::memcpy(gates, xp, size_t(g.T * B * G) * sizeof(T));
    for (int64_t s = 0; s < g.T; ++s) {
      const int64_t t = reverse ? g.T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
      const T* hp = s == 0 ? h0 : out + tp * B * H;
      const T* cp = s == 0 ? c0 : cs + tp * B * H;
      T* gt = gates + t * B * G;
      cpu::gemm_raw(false, true, B, G, H, T(1), hp, H, w, H, T(1), gt, G);
      T* ht = out + t * B * H;
      T* ct = cs + t * B * H;
      parallel_for(0, B, grain_for(40 * H), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          cell_row(gt + r * G, cp + r * H, ht + r * H, ct + r * H, H);
      });
    }
  });
}

void lstm_layer_backward(const KernelArgs& k) {
  const Tensor& gates_t = k.inputs[8];
  const LayerGeom g = layer_geom(gates_t.sizes(), k.attrs);
  const bool reverse = nn_detail::LstmLayerAttrs::get<"reverse">(k.attrs);
  dispatch_f(gates_t.dtype(), "lstm_layer_backward", [&](auto z) {
    using T = decltype(z);
    const int64_t B = g.B, H = g.H, G = 4 * g.H, N = g.T * g.B;
    auto opt = [](const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; };
    const T* d_out = opt(k.inputs[0]);
    const T* d_cs = opt(k.inputs[1]);
    const T* d_gates = opt(k.inputs[2]);
    const T* h0 = k.inputs[3].data_ptr<T>();
    const T* c0 = k.inputs[4].data_ptr<T>();
    const T* w = k.inputs[5].data_ptr<T>();
    const T* out = k.inputs[6].data_ptr<T>();
    const T* cs = k.inputs[7].data_ptr<T>();
    const T* gates = gates_t.data_ptr<T>();
    T* dxp = k.outputs[0].data_ptr<T>();
    T* dh0 = k.outputs[1].data_ptr<T>();
    T* dc0 = k.outputs[2].data_ptr<T>();
    T* dw = k.outputs[3].data_ptr<T>();
    // dh, dc: the gradient reaching h_t, c_t from later steps plus what arrives from outside
    const size_t BH = static_cast<size_t>(B * H);
    std::vector<T> dh(BH, T(0)), dc(BH, T(0)), dc_prev(BH);
    for (int64_t s = g.T - 1; s >= 0; --s) {
      const int64_t t = reverse ? g.T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
      const T* cp = s == 0 ? c0 : cs + tp * B * H;
      const int64_t o = t * B * H;
      T* dgt = dxp + t * B * G;
      parallel_for(0, B, grain_for(60 * H), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          T* dhr = dh.data() + r * H;
          T* dcr = dc.data() + r * H;
          if (d_out)
            for (int64_t j = 0; j < H; ++j) dhr[j] += d_out[o + r * H + j];
          if (d_cs)
            for (int64_t j = 0; j < H; ++j) dcr[j] += d_cs[o + r * H + j];
          cell_bwd_row(dhr, dcr, gates + t * B * G + r * G, cp + r * H, cs + o + r * H, dgt + r * G,
                       dc_prev.data() + r * H, H);
          if (d_gates) {
            const T* dgr = d_gates + t * B * G + r * G;
            T* dst = dgt + r * G;
            for (int64_t j = 0; j < G; ++j) dst[j] += dgr[j];
          }
        }
      });
      // dh_{t-1} = dgates_t W_hh (written over dh: the next step adds its outside gradient)
      cpu::gemm_raw(false, false, B, H, G, T(1), dgt, G, w, H, T(0), dh.data(), H);
      std::swap(dc, dc_prev);
    }
    std::memcpy(dh0, dh.data(), size_t(B * H) * sizeof(T));
    std::memcpy(dc0, dc.data(), size_t(B * H) * sizeof(T));
    // dW_hh = sum over steps of dgates_t^T h_prev(t): the step that starts reads h0, the
    // others read the rows of `out` one step back (a contiguous block in both directions).
    const int64_t first = reverse ? g.T - 1 : 0;
    cpu::gemm_raw(true, false, G, H, B, T(1), dxp + first * B * G, G, h0, H, T(0), dw, H);
    if (g.T > 1) {
      const T* dg_rest = reverse ? dxp : dxp + B * G;  // steps whose previous h is in `out`
      const T* h_rest = reverse ? out + B * H : out;
      cpu::gemm_raw(true, false, G, H, N - B, T(1), dg_rest, G, h_rest, H, T(1), dw, H);
    }
  });
}

}  // namespace oneflow::cpu

// rnn_common.h (internal): what the fused LSTM layer op (ops/nn_rnn.cpp) and its CPU kernels
// (src/cpu/rnn.cpp) share: the layer's geometry (NOTE [Fused LSTM layer]).
#pragma once
#include "kernel_support.h"
#include "ops/nn_attrs.h"

namespace oneflow::nn_detail {

struct LayerGeom {
  int64_t T, B, H;
};
// The geometry of a validated call: rows x cols of xp (or of the saved gates), attr 0 = steps.
inline LayerGeom layer_geom(IntArrayRef rows_cols, const Attrs& a) {
  const int64_t T = LstmLayerAttrs::get<"steps">(a);
  return {T, rows_cols[0] / T, rows_cols[1] / 4};
}

}  // namespace oneflow::nn_detail

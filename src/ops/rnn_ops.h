// rnn_ops.h (internal): the fused recurrent-cell ops the nn::LSTM layers and cells call.
#pragma once
#include <tuple>
#include <utility>

#include "oneflow/tensor.h"

namespace oneflow {

// One LSTM cell update from the pre-activation gates [b, 4H] (i, f, g, o) and the cell state
// c [b, H]: returns (h', c'), differentiable in both inputs (NOTE [Fused LSTM cell]).
std::pair<Tensor, Tensor> lstm_cell_update(const Tensor& gates, const Tensor& c);

// One LSTM layer and direction over `steps` equal-length steps (NOTE [Fused LSTM layer]):
// xp [steps * B, 4H] is the input projection with both biases, w_hh [4H, H]. Returns
// (out [steps * B, H], cell states [steps * B, H], pre-activation gates [steps * B, 4H]).
std::tuple<Tensor, Tensor, Tensor> lstm_layer(const Tensor& xp, const Tensor& h0, const Tensor& c0,
                                              const Tensor& w_hh, int64_t steps, bool reverse);

}  // namespace oneflow

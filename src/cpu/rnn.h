// cpu/rnn.h (internal): the CPU kernels of the fused LSTM ops registered in ops/nn_rnn.cpp
// (inputs, attributes and outputs as that file describes them).
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void lstm_cell(const KernelArgs& k);
void lstm_cell_backward(const KernelArgs& k);
void lstm_layer(const KernelArgs& k);
void lstm_layer_backward(const KernelArgs& k);

}  // namespace oneflow::cpu

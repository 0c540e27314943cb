// cpu/losses.h (internal): the CPU kernels of cross_entropy and its backward, registered in
// ops/nn_losses.cpp (inputs, attributes and outputs as that file describes them).
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void cross_entropy(const KernelArgs& k);
void cross_entropy_backward(const KernelArgs& k);

}  // namespace oneflow::cpu

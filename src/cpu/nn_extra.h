// nn_extra.h (internal): the CPU kernels of im2col / col2im and the CTC loss
// (ops/nn_extra.cpp). NOTE [im2col and col2im] and NOTE [CTC] in cpu/nn_extra.cpp say how they
// compute.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void im2col(const KernelArgs& k);
void col2im(const KernelArgs& k);
void ctc_loss(const KernelArgs& k);
void ctc_loss_backward(const KernelArgs& k);

}  // namespace oneflow::cpu

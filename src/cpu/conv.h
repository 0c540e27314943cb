// conv.h (internal): the CPU kernels of the convolution family (cpu/conv.cpp); the ops' meta,
// VJPs and registration are in ops/nn_conv.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void conv2d(const KernelArgs& k);
void conv3d(const KernelArgs& k);
void conv_transpose2d(const KernelArgs& k);
void conv_transpose3d(const KernelArgs& k);
void conv2d_backward_weight(const KernelArgs& k);
void conv3d_backward_weight(const KernelArgs& k);

}  // namespace oneflow::cpu

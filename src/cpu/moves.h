// moves.h (internal): the CPU kernels of the shape moves (cpu/moves.cpp); the ops' meta, VJPs
// and registration are in ops/moves.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void cat(const KernelArgs& k);
void pad(const KernelArgs& k);
void pad_backward(const KernelArgs& k);
void tril(const KernelArgs& k);
void triu(const KernelArgs& k);
void flip(const KernelArgs& k);
void roll(const KernelArgs& k);
void repeat(const KernelArgs& k);

}  // namespace oneflow::cpu

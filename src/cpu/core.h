// core.h (internal): the CPU kernels of the core ops (cpu/core.cpp); the ops' meta, VJPs and
// registration are in ops/core_ops.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void copy(const KernelArgs& k);
void copy_(const KernelArgs& k);
void fill_(const KernelArgs& k);
void full(const KernelArgs& k);
void arange(const KernelArgs& k);
void linspace(const KernelArgs& k);
void eye(const KernelArgs& k);

}  // namespace oneflow::cpu

// index.h (internal): the CPU kernels of the indexing ops (cpu/index.cpp); the ops' meta, VJPs
// and registration are in ops/index.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void gather(const KernelArgs& k);
void scatter(const KernelArgs& k);
void scatter_add(const KernelArgs& k);
void index_select(const KernelArgs& k);
void index_add(const KernelArgs& k);
void masked_select(const KernelArgs& k);
void masked_select_backward(const KernelArgs& k);
void nonzero(const KernelArgs& k);
void one_hot(const KernelArgs& k);
void embedding(const KernelArgs& k);

}  // namespace oneflow::cpu

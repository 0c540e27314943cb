// sort.h (internal): the CPU kernels of sort and topk (src/cpu/sort.cpp), registered by
// src/ops/sort.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void sort(const KernelArgs& k);
void topk(const KernelArgs& k);

}  // namespace oneflow::cpu

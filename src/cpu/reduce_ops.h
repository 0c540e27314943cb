// reduce_ops.h (internal): the CPU kernels of sum, mean, all and any (src/cpu/reduce_ops.cpp),
// registered by src/ops/reduce.cpp. They run on the reduction engine, cpu/reduce.h.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void sum(const KernelArgs& k);
void mean(const KernelArgs& k);
void all(const KernelArgs& k);
void any(const KernelArgs& k);

}  // namespace oneflow::cpu

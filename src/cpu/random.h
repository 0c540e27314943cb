// random.h (internal): the CPU kernels of the random ops (cpu/random.cpp); the ops' meta,
// registration and public functions are in ops/random.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void uniform(const KernelArgs& k);
void normal(const KernelArgs& k);
void randint(const KernelArgs& k);
void multinomial(const KernelArgs& k);

}  // namespace oneflow::cpu

// shape.h (internal): the CPU kernel of view_scatter (cpu/shape.cpp); the view ops' meta, VJPs
// and registration are in ops/shape.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void view_scatter(const KernelArgs& k);

}  // namespace oneflow::cpu

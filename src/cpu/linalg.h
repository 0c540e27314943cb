// linalg.h (internal): the CPU kernels of mm, bmm, addmm and baddbmm (cpu/linalg.cpp, on
// cpu::gemm); their meta, VJPs and registration are in ops/linalg.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void mm(const KernelArgs& k);
void bmm(const KernelArgs& k);
void addmm(const KernelArgs& k);    // attrs: AddmmAttrs (beta, alpha)
void baddbmm(const KernelArgs& k);  // attrs: AddmmAttrs

}  // namespace oneflow::cpu

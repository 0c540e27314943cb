// nn.h (internal): the CPU kernels of dropout and linear (ops/nn.cpp). NOTE [nn kernels] in
// cpu/nn.cpp says how the fused nn kernels compute.
#pragma once
#include "dispatch.h"

namespace oneflow::cpu {

void dropout(const KernelArgs& k);
void linear(const KernelArgs& k);
// linear then an activation (the trace's epilogue rewrite, NOTE [GEMM epilogues])
void linear_act(const KernelArgs& k);
// linear with int8 weights and dynamically quantized activations (NOTE [Dynamic int8 linear]);
// set_linear_int8_vnni(false) makes it use its plain loops (tests: the same bits)
void linear_dynamic_int8(const KernelArgs& k);
bool set_linear_int8_vnni(bool on);

}  // namespace oneflow::cpu

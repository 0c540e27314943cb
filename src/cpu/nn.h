// nn.h (internal): the CPU kernels of dropout and linear (ops/nn.cpp). NOTE [nn kernels] in
// cpu/nn.cpp says how the fused nn kernels compute.
#pragma once
#include "cpu/gemm_s8.h"
#include "kernel_support.h"

namespace oneflow::cpu {

void dropout(const KernelArgs& k);
void linear(const KernelArgs& k);
// linear then an activation (the trace's epilogue rewrite, NOTE [GEMM epilogues])
void linear_act(const KernelArgs& k);
// linear with int8 weights and dynamically quantized activations (NOTE [Dynamic int8 linear]);
// set_linear_int8_path picks the kernel its products run on (default: the fastest the CPU has;
// tests: each gives the same bits), returning the previous one
void linear_dynamic_int8(const KernelArgs& k);
S8Path set_linear_int8_path(S8Path p);

}  // namespace oneflow::cpu

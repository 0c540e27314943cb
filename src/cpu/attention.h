// cpu/attention.h (internal): the CPU kernels of scaled_dot_product_attention and its backward,
// registered in ops/nn_attention.cpp (inputs, attributes and outputs as that file describes).
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void scaled_dot_product_attention(const KernelArgs& k);
void scaled_dot_product_attention_backward(const KernelArgs& k);
// fused_attention: made by the trace's attention pass (NOTE [Fused attention]).
void fused_attention(const KernelArgs& k);
// fused_attention_forward / _backward: made by the attention pass for training graphs (NOTE
// [Fused attention, training]); scaled_dot_product_attention's semantics over strided operands.
void fused_attention_forward(const KernelArgs& k);
void fused_attention_backward(const KernelArgs& k);

}  // namespace oneflow::cpu

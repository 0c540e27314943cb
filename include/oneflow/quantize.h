// quantize.h: dynamic int8 quantization of a module's Linear layers (PyTorch's
// torch.ao.quantization.quantize_dynamic for nn.Linear). `#include <oneflow/quantize.h>`.
//
//   of::quantize_dynamic(*model);        // every nn::Linear in the module tree
//   of::NoGradGuard no_grad;
//   of::Tensor logits = model->forward(x);  // int8 weights, activations quantized per row
//
// NOTE [Dynamic int8 linear] (src/cpu/gemm_s8.cpp): each Linear's float32 weight is
// quantized per output channel to int8 once (and again only if it is changed through the
// library: its version), each call's input per row to uint8; products are summed exactly in
// int32 (AVX512-VNNI where the CPU has it) and scaled back to float32. The weights stay float32
// tensors (state dicts, saving, to() are unchanged); the marked layers are inference only (a
// call that needs gradients raises). A traced function records the int8 op for them, and
// TraceOptions::quantize_int8 does the same to a traced graph's linears without touching the
// module.
#pragma once
#include <cstddef>

#include "oneflow/nn/module.h"
#include "oneflow/tensor.h"

namespace oneflow {

// Marks every nn::Linear of `module` (itself included) for int8 inference; returns how many.
// A Linear whose weight is not float32 on the CPU raises, before any is marked.
size_t quantize_dynamic(nn::Module& module);
template <class Impl> size_t quantize_dynamic(nn::ModuleHolder<Impl>& module) {
  return quantize_dynamic(static_cast<nn::Module&>(*module));
}
// Whether quantize_dynamic marked this weight.
bool quantized_weight(const Tensor& weight);

}  // namespace oneflow

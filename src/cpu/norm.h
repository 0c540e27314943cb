// cpu/norm.h (internal): the CPU kernels of the normalization ops registered in
// ops/nn_norm.cpp (inputs, attributes and outputs as that file describes them).
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void layer_norm(const KernelArgs& k);
void layer_norm_backward(const KernelArgs& k);
// the trace's add + norm rewrites (NOTE [Add and norm] in trace/rewrite_add_norm.cpp)
void add_layer_norm(const KernelArgs& k);
void add_rms_norm(const KernelArgs& k);
// embedding_layer_norm (NOTE [Embeddings and norm] in cpu/norm.cpp)
void embedding_layer_norm(const KernelArgs& k);
void group_norm(const KernelArgs& k);
void group_norm_backward(const KernelArgs& k);
void rms_norm(const KernelArgs& k);
void rms_norm_backward(const KernelArgs& k);
void batch_norm(const KernelArgs& k);
void batch_norm_backward(const KernelArgs& k);

}  // namespace oneflow::cpu

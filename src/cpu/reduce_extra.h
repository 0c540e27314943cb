// reduce_extra.h (internal): the CPU kernels of the reductions beyond sum/mean/all/any, of the
// scans and of softmax (src/cpu/reduce_extra.cpp, NOTE [Reduce extra kernels]), registered by
// src/ops/reduce_extra.cpp.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void prod(const KernelArgs& k);
void amax(const KernelArgs& k);
void amin(const KernelArgs& k);
void max_dim(const KernelArgs& k);
void min_dim(const KernelArgs& k);
void argmax(const KernelArgs& k);
void argmin(const KernelArgs& k);
void var(const KernelArgs& k);
void std(const KernelArgs& k);
void logsumexp(const KernelArgs& k);
void norm(const KernelArgs& k);
void cumsum(const KernelArgs& k);
void cumprod(const KernelArgs& k);
void softmax(const KernelArgs& k);
void log_softmax(const KernelArgs& k);

}  // namespace oneflow::cpu

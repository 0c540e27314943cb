// pool.h (internal): the CPU kernels of the pooling and resampling ops (ops/nn_pool.cpp): the
// max pools (window maxima with their indices), and the average pools and upsampling ops
// (separable resampling) with their *_backward ops (its adjoint). NOTE [Separable resampling]
// and NOTE [Window maxima] in cpu/pool.cpp say how they compute.
#pragma once
#include "kernel_support.h"

namespace oneflow::cpu {

void max_pool2d_with_indices(const KernelArgs& k);
void max_pool3d_with_indices(const KernelArgs& k);
void adaptive_max_pool2d(const KernelArgs& k);
void adaptive_max_pool3d(const KernelArgs& k);
void avg_pool2d(const KernelArgs& k);
void avg_pool2d_backward(const KernelArgs& k);
void adaptive_avg_pool2d(const KernelArgs& k);
void adaptive_avg_pool2d_backward(const KernelArgs& k);
void avg_pool3d(const KernelArgs& k);
void avg_pool3d_backward(const KernelArgs& k);
void adaptive_avg_pool3d(const KernelArgs& k);
void adaptive_avg_pool3d_backward(const KernelArgs& k);
void upsample_nearest2d(const KernelArgs& k);
void upsample_nearest2d_backward(const KernelArgs& k);
void upsample_bilinear2d(const KernelArgs& k);
void upsample_bilinear2d_backward(const KernelArgs& k);

}  // namespace oneflow::cpu

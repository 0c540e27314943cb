// cudnn.h (internal): convolution, pooling and batch norm on CUDA. cudnn.cpp is the host side
// (cuDNN for the convolutions and batch norm when the module is built with
// -DONEFLOW_WITH_CUDNN; the pooling kernels of pool.cu always). Plain C++ so that pool.cu
// stays light for nvcc.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h
namespace cuda_backend {
struct CoreV1;  // cuda/module_abi.h
}

namespace cuda_module {

// Put these kernels into the op table's CUDA slots:
//  - pool.cpp, always (pool.cu): max_pool2d_with_indices, max_pool3d_with_indices,
//    adaptive_max_pool2d, adaptive_max_pool3d, avg_pool2d(_backward), avg_pool3d(_backward),
//    adaptive_avg_pool2d(_backward), adaptive_avg_pool3d(_backward);
//  - cudnn.cpp, with cuDNN: conv2d, conv3d, conv_transpose2d, conv_transpose3d,
//    conv2d_backward_weight, conv3d_backward_weight, batch_norm, batch_norm_backward.
void register_pool_kernels(const cuda_backend::CoreV1& core);
void register_cudnn_kernels(const cuda_backend::CoreV1& core);

// NOTE [CUDA pooling]: one window per output element along each of three axes (depth, height,
// width; a 2-D pool's depth axis is the identity: in = out = k = 1), as the CPU kernels of
// src/cpu/pool.cpp define them:
//  - kMax: taps start = o*s - p (moved up by whole dilations while negative) to
//    min(start + (k-1)*d + 1, in), step d; the first maximum wins and every NaN replaces the
//    running maximum (so the last NaN's index is kept); the index is flat in the plane.
//  - kAdaptiveMax / kAdaptiveAvg: taps [floor(o*in/out), ceil((o+1)*in/out)).
//  - kAvg: taps [max(o*s - p, 0), min(o*s - p + k, in)); factor per axis
//    1 / (count_include_pad ? min(o*s - p + k, in + p) - (o*s - p) : taps), or with a divisor
//    1 on every axis but the last (1 / divisor there).
// The max kinds compare only, so values and indices are the CPU's bit for bit. The average
// kinds sum the CPU kernels' terms in the CPU's order; they agree with it to an ulp or so (the
// CPU's own roundings depend on where its compiler fuses multiply-adds, -march=native).
struct PoolAxis {
  int64_t in = 1, out = 1, k = 1, s = 1, p = 0, d = 1;
};
enum class PoolKind : int8_t { kMax, kAdaptiveMax, kAvg, kAdaptiveAvg };
struct PoolParams {
  PoolKind kind = PoolKind::kMax;
  int64_t planes = 0;  // N * C
  PoolAxis ax[3];      // depth, height, width
  bool count_include_pad = true;
  int64_t divisor = 0;  // avg: 0 = none
  ScalarType dtype;
  // forward: x [planes, in...] -> y [planes, out...] (and, for the max kinds, int64 indices)
  const void* x = nullptr;
  void* y = nullptr;
  int64_t* indices = nullptr;
  // backward (the avg kinds): grad_out [planes, out...] -> grad_in [planes, in...]
  const void* grad_out = nullptr;
  void* grad_in = nullptr;
};
// float32 and float64; any other dtype returns cudaErrorInvalidValue.
cudaError_t launch_pool(const PoolParams& p, cudaStream_t stream);
cudaError_t launch_pool_backward(const PoolParams& p, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

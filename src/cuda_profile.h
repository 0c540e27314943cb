// cuda_profile.h (internal): OF_CUDA_PROFILE_OPS=1: each eager CUDA kernel runs between two
// device synchronizations and its wall time is added up by (op, dtype); the table goes to stderr
// at exit. A diagnosis tool (it serializes the GPU with the host): bench/gpu_check.sh profiles
// the model steps with it. Dispatch calls it for the outermost CUDA kernels.
#pragma once
#include <functional>

#include "op_def.h"

namespace oneflow {

bool cuda_op_profile_on();
void profile_cuda_kernel(const OpDef& op, const TensorList& inputs,
                         const std::function<void()>& run);

}  // namespace oneflow

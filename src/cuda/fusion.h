// fusion.h (internal): the CUDA module's side of generated fused kernels (NOTE [Fused CUDA
// kernels] in fusion.cpp): NVRTC compilation of the sources trace/fusion_codegen.cpp writes, an
// in-process cache of the loaded kernels, and their launch on a stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace oneflow::cuda_module {

struct FusedKernel;  // a loaded kernel (cudaLibrary_t + cudaKernel_t); lives until exit

// The kernel `name` of `source`, compiled for SM architecture `sm_arch` (major * 10 + minor, as
// the device reports it) and loaded, from the cache when this source was compiled before.
// Throws of::Error "[jit.fuse] NVRTC failed to compile fused group <name>: <log>" (or why NVRTC
// cannot be used) — the caller then runs the group unfused.
const FusedKernel* compile_fused(const std::string& source, const std::string& name, int sm_arch);

// One launch of kFusedThreads-thread blocks over numel elements on `stream` (never the legacy
// default stream). `params` is the kernel's parameter struct (NOTE [Fused kernel parameters] in
// trace/fusion_codegen.h), param_bytes its size.
void launch_fused(const FusedKernel* kernel, const void* params, size_t param_bytes, int64_t numel,
                  cudaStream_t stream);

// Compiles `source` to PTX for compute_<sm_arch> only: "" when it compiles without a diagnostic,
// else NVRTC's log (or why NVRTC is unusable). Needs no device; tests use it on the CPU.
std::string nvrtc_check(const std::string& source, const std::string& name, int sm_arch);

// The SM architecture (major * 10 + minor) of a device.
int device_arch(int device);

// The ModuleV1 entries (device -1: the current device).
std::string fused_check(const std::string& source, const std::string& name, int sm_arch);
void* fused_compile(const std::string& source, const std::string& name, int device);
void fused_launch(void* kernel, const void* params, size_t param_bytes, int64_t numel, int device);

}  // namespace oneflow::cuda_module

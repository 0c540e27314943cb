// module_abi.h (internal): the contract between the core (liboneflow.so) and the CUDA backend
// module (liboneflow_cuda.so), which the core loads with dlopen the first time a CUDA device is
// asked for (src/cuda_loader.cpp). A CPU-only process never maps the CUDA libraries.
//
// The module is built from the same sources and headers as the core it sits beside; the ABI
// number and the build id below catch a module from another build before anything is called.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernel_support.h"
#include "global/comm.h"
#include "oneflow/runtime.h"

namespace oneflow::cuda_backend {

// Bump whenever module_entries.inc, CoreV1, the kernels' signatures or any type crossing the
// boundary changes.
inline constexpr uint32_t kModuleAbi = 6;

// NOTE [Module entries]: what the core calls through, listed once in cuda/module_entries.inc
// (types, names, what each needs of the module); the table's fields, the module's declarations
// and table, and the core's entry points with their forwarding are all expanded from there.
struct ModuleV1 {
  uint32_t abi = 0;
  const char* build_id = nullptr;  // ONEFLOW_BUILD_ID of the module's build
#define OF_CUDA_ENTRY(ret, name, params, args, guard, what, ex) ret(*name) params = nullptr;
#include "cuda/module_entries.inc"
#undef OF_CUDA_ENTRY
};

// What the core hands the module: how to fill the op table's CUDA kernel slots.
struct CoreV1 {
  uint32_t abi = 0;
  const char* build_id = nullptr;
  // Sets OpDef::cuda of the op named `op`; throws of::Error for an unknown op.
  void (*set_cuda_kernel)(const char* op, KernelFn fn) = nullptr;
  // Marks the op's CUDA kernel as taking float16/bfloat16 operands (OpDef::cuda_16bit).
  void (*set_cuda_16bit)(const char* op) = nullptr;
  // of::globalContext().allowTF32CuBLAS(), read at every float32 GEMM.
  bool (*allow_tf32_cublas)() = nullptr;
};

// The module's one exported symbol. Registers the module's kernels through `core` and returns
// its table, or throws of::Error (a mismatched ABI or build).
using ModuleInitFn = const ModuleV1* (*)(const CoreV1* core);
inline constexpr const char* kModuleInitSymbol = "oneflow_cuda_module_init_v1";

}  // namespace oneflow::cuda_backend

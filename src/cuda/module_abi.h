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

#include "dispatch.h"
#include "global/comm.h"
#include "oneflow/runtime.h"

namespace oneflow::cuda_backend {

// Bump whenever ModuleV1, the kernels' signatures or any type crossing the boundary changes.
inline constexpr uint32_t kModuleAbi = 6;

// What the core calls through; each entry may throw of::Error (never returns an error code).
struct ModuleV1 {
  uint32_t abi = 0;
  const char* build_id = nullptr;  // ONEFLOW_BUILD_ID of the module's build
  // "" when a device is usable, else why not ("no CUDA device (cudaGetDeviceCount ...)").
  std::string (*unavailable_reason)() = nullptr;
  int (*device_count)() = nullptr;
  int (*current_device)() = nullptr;
  void (*synchronize)(int device) = nullptr;
  // Caching allocator: one pool per device.
  Storage (*allocate_storage)(size_t nbytes, int device) = nullptr;
  memory::Stats (*stats)(int device) = nullptr;
  void (*reset_peak_stats)(int device) = nullptr;
  void (*empty_cache)(int device) = nullptr;
  // n bytes, any of host<->device, device<->device; returns after the copy is complete.
  void (*copy_bytes)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) = nullptr;
  // Pinned host memory (NOTE [Pinned host memory]): a page-locked CPU storage from the cached
  // pool; whether p points into one; a copy that is only queued on the current stream when it
  // can be (host side pinned, or both sides on one device), else copy_bytes.
  Storage (*allocate_pinned)(size_t nbytes) = nullptr;
  bool (*is_pinned)(const void* p) = nullptr;
  void (*copy_bytes_async)(void* dst, Device dst_dev, const void* src, Device src_dev,
                           size_t n) = nullptr;
  // Streams (cudaStream_t as void*; device -1: the current device) and events (cudaEvent_t).
  void* (*current_stream)(int device) = nullptr;
  void* (*default_stream)(int device) = nullptr;
  void* (*pool_stream)(int device, bool high_priority) = nullptr;
  void (*set_current_stream)(int device, void* stream) = nullptr;
  bool (*stream_query)(int device, void* stream) = nullptr;
  void (*stream_synchronize)(int device, void* stream) = nullptr;
  void* (*event_create)(int device, bool timing) = nullptr;
  void (*event_destroy)(void* event) = nullptr;  // never throws
  void (*event_record)(void* event, int device, void* stream) = nullptr;
  bool (*event_query)(void* event) = nullptr;
  void (*event_synchronize)(void* event) = nullptr;
  void (*event_block)(void* event, int device, void* stream) = nullptr;  // stream waits
  float (*event_elapsed_ms)(void* start, void* end) = nullptr;
  // The caching allocator: the block at ptr is also used on stream; CUDA Graph private pools.
  void (*record_stream)(void* ptr, int device, void* stream) = nullptr;
  void (*begin_pool)(int device, void* stream, int id) = nullptr;
  void (*end_pool)(int device, void* stream) = nullptr;
  void (*release_pool)(int device, int id) = nullptr;
  // The op whose CUDA kernel dispatch runs next (NOTE [Asynchronous CUDA errors]).
  void (*note_launch)(const char* op) = nullptr;
  // CUDA Graphs (NOTE [CUDA Graph capture] in src/cuda/graph.cpp): capture on the device's
  // current stream with allocations from private pool `pool_id`; end returns the instantiated
  // graph (cudaGraphExec_t); slots: the device (seed, offset) pair the next random kernel
  // reads and the index-check flag, while capturing.
  void (*graph_capture_begin)(int device, int pool_id) = nullptr;
  void* (*graph_capture_end)(int device) = nullptr;
  void (*graph_capture_abort)(int device) = nullptr;  // never throws
  void (*graph_launch)(void* exec, int device) = nullptr;
  void (*graph_destroy)(void* exec) = nullptr;        // never throws
  void (*graph_slots)(const void* rng, void* flag) = nullptr;
  void (*memset_async)(void* ptr, int value, size_t n, int device) = nullptr;
  bool (*capturing)() = nullptr;
  // NCCL (src/cuda/nccl.cpp, NOTE [NCCL communicator]): a communicator over the ranks of the
  // host communicator `host` for tensors on `device` (collective over those ranks); raises when
  // the module was built without NCCL. The version is "" then.
  global::Communicator* (*nccl_comm_create)(const std::shared_ptr<global::Communicator>* host,
                                            int device) = nullptr;
  std::string (*nccl_version)() = nullptr;
  // Generated fused kernels (src/cuda/fusion.cpp, NOTE [Fused CUDA kernels]): check compiles
  // with NVRTC only (no device needed; "" or the log), compile loads the kernel for a device
  // (cached by source), launch runs it on the device's current stream.
  std::string (*fused_check)(const std::string& source, const std::string& name,
                             int sm_arch) = nullptr;
  void* (*fused_compile)(const std::string& source, const std::string& name, int device) = nullptr;
  void (*fused_launch)(void* kernel, const void* params, size_t param_bytes, int64_t numel,
                       int device) = nullptr;
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

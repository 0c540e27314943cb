// cuda_backend.h (internal): what the core asks of the CUDA backend. The backend is a separate
// module, liboneflow_cuda.so (src/cuda/*, built when the toolkit is found), loaded with dlopen
// by src/cuda_loader.cpp the first time one of these is called; a CPU-only process never maps
// the CUDA libraries. Without the module (not built, not found, its libraries or the driver
// missing) the queries report "no CUDA" and every other entry throws
// "[cuda] not available: <why>". The module fills the op table's CUDA kernel slots when loaded.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "dispatch.h"
#include "global/comm.h"
#include "oneflow/runtime.h"

namespace oneflow::cuda_backend {

bool built();  // the module was built beside this core (-Dcuda found the toolkit)
bool is_available();  // the module loads and sees at least one device
int device_count();
// Why CUDA cannot be used ("" when it can): built without it, module or library missing, no
// driver or device. Loads the module on first use.
std::string unavailable_reason();
int current_device();
void synchronize(int device);

Storage allocate_storage(size_t nbytes, int device);
memory::Stats stats(int device);
void reset_peak_stats(int device);
void empty_cache(int device);

// Copies n bytes; any of host<->device, device<->device. Returns after the copy is complete.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);
// Pinned host memory (NOTE [Pinned host memory] in src/cuda/host_pool.h): a page-locked CPU
// storage; and a copy only queued on the current stream when the host side is pinned (or both
// sides are on one device), else as copy_bytes.
Storage allocate_pinned(size_t nbytes);
void copy_bytes_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);

// Streams and events (NOTE [CUDA streams] in src/cuda/stream.cpp): the module's handles.
void* current_stream(int device);
void* default_stream(int device);
void* pool_stream(int device, bool high_priority);
void set_current_stream(int device, void* stream);
bool stream_query(int device, void* stream);
void stream_synchronize(int device, void* stream);
void* event_create(int device, bool timing);
void event_destroy(void* event) noexcept;
void event_record(void* event, int device, void* stream);
bool event_query(void* event);
void event_synchronize(void* event);
void event_block(void* event, int device, void* stream);
float event_elapsed_ms(void* start, void* end);
void record_stream(void* ptr, int device, void* stream);
void begin_pool(int device, void* stream, int id);
void end_pool(int device, void* stream);
void release_pool(int device, int id);
// Before a CUDA kernel of `op` runs (the module names it in asynchronous errors). Only called
// with a CUDA tensor in hand, so the module is loaded.
void note_launch(const char* op);
// CUDA Graphs (NOTE [CUDA Graph capture] in src/cuda/graph.cpp).
void graph_capture_begin(int device, int pool_id);
void* graph_capture_end(int device);
void graph_capture_abort(int device) noexcept;
void graph_launch(void* exec, int device);
void graph_destroy(void* exec) noexcept;
void graph_slots(const void* rng, void* flag);
void memset_async(void* ptr, int value, size_t n, int device);
bool capturing();
// NCCL (NOTE [NCCL communicator] in src/cuda/nccl.cpp): a communicator over the ranks of the
// host communicator `host`, for tensors on cuda:`device`; collective over those ranks.
std::shared_ptr<global::Communicator> nccl_comm(std::shared_ptr<global::Communicator> host,
                                                int device);
std::string nccl_version();  // "" when the module has no NCCL (or is not available)
// Generated fused kernels (NOTE [Fused CUDA kernels] in src/cuda/fusion.cpp): compile-only
// check with NVRTC ("" or the log; needs the module, not a device), a loaded kernel for a
// device, and one launch on the device's current stream.
std::string fused_check(const std::string& source, const std::string& name, int sm_arch);
void* fused_compile(const std::string& source, const std::string& name, int device);
void fused_launch(void* kernel, const void* params, size_t param_bytes, int64_t numel, int device);

}  // namespace oneflow::cuda_backend

// module.h (internal): the CUDA backend module's own functions (src/cuda/*), reached from the
// core only through the table in module_abi.h.
#pragma once
#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>

#include "cuda/module_abi.h"

namespace oneflow::cuda_module {

std::string unavailable_reason();
bool is_available();
int device_count();
int current_device();
void synchronize(int device);

Storage allocate_storage(size_t nbytes, int device);
memory::Stats stats(int device);
void reset_peak_stats(int device);
void empty_cache(int device);

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);
Storage allocate_pinned(size_t nbytes);
bool is_pinned(const void* p);
void copy_bytes_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);

// Streams and events (stream.cpp, NOTE [CUDA streams]); handles are cudaStream_t/cudaEvent_t.
cudaStream_t current_stream_of(int device);
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
// The allocator (allocator.cpp): another stream uses the block at ptr; CUDA Graph pools.
void record_stream(void* ptr, int device, void* stream);
void begin_pool(int device, void* stream, int id);
void end_pool(int device, void* stream);
void release_pool(int device, int id);
// NOTE [Asynchronous CUDA errors]: the op whose kernel runs next; a launch's own status (and,
// with OF_CUDA_LAUNCH_BLOCKING=1, its completion); a synchronization's status, re-raised with
// the ops launched since the last clean one.
void note_launch(const char* op);
void after_launch(const char* op);
// A kernel launcher's status: cudaErrorInvalidValue (a dtype the launcher does not
// instantiate) raises "[op] cuda: unsupported dtype T", any other error the CUDA error; then
// after_launch(op).
void check_launch(cudaError_t err, const char* op, ScalarType dtype);
void check_async(cudaError_t err, const char* where);
// A query's status (cudaStreamQuery, cudaEventQuery): false for "not ready", true when done,
// else check_async's error.
bool completed(cudaError_t err, const char* where);

// CUDA Graphs (graph.cpp, NOTE [CUDA Graph capture]).
bool capturing();                         // a capture is active on this thread's current stream
void refuse_if_capturing(const char* what);  // raises while capturing: `what` syncs the host
const uint64_t* graph_rng();  // random kernels: the (seed, offset) device slot, once; or null
int* graph_flag();            // index checks while capturing: the device error flag, or null
void graph_slots(const void* rng, void* flag);
void graph_capture_begin(int device, int pool_id);
void* graph_capture_end(int device);
void graph_capture_abort(int device) noexcept;
void graph_launch(void* exec, int device);
void graph_destroy(void* exec) noexcept;
void memset_async(void* ptr, int value, size_t n, int device);

// NCCL (nccl.cpp, NOTE [NCCL communicator]).
global::Communicator* nccl_comm_create(const std::shared_ptr<global::Communicator>* host,
                                       int device);
std::string nccl_version();

// What the core handed the module at load (the switches of of::globalContext()).
extern const cuda_backend::CoreV1* g_core;

// Kernels the module puts into OpDef::cuda slots.
void register_elementwise_kernels(const cuda_backend::CoreV1& core);  // elementwise.cpp
void register_reduce_kernels(const cuda_backend::CoreV1& core);       // reduce.cpp
void register_factory_kernels(const cuda_backend::CoreV1& core);      // factory.cpp
void register_nn_kernels(const cuda_backend::CoreV1& core);           // nn.cpp
void register_attention_kernels(const cuda_backend::CoreV1& core);    // attention.cpp
// keep / (1 - p) or 0 per element of `sizes` (row-major), as the dropout op draws them at
// (seed, offset) (or from the CUDA Graph slot while capturing): factory.cpp.
Tensor dropout_multiplier(IntArrayRef sizes, ScalarType dtype, Device device, double p,
                          uint64_t seed, uint64_t offset);
void copy_strided_kernel(const KernelArgs& args);  // "copy" (contiguous / dtype change)
void mm_kernel(const KernelArgs& args);            // cuBLAS GEMM for float32/float64 (2-D)
// out = x @ w^T + bias (bias may be undefined) by one cuBLASLt call with the bias epilogue
// (NOTE [Linear on cuBLASLt]); false when cuBLASLt does not take it (nothing was written).
bool lt_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, int device);
// out += b broadcast (b over out's trailing dims), by the elementwise add kernel.
void add_into(const Tensor& out, const Tensor& b);
void bmm_kernel(const KernelArgs& args);           // cuBLAS strided-batched GEMM

}  // namespace oneflow::cuda_module

// module.h (internal): the CUDA backend module's own functions (src/cuda/*), reached from the
// core only through the table in module_abi.h.
#pragma once
#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>

#include "cuda/module_abi.h"

namespace oneflow::cuda_module {

// The entries of the module's table (NOTE [Module entries]), implemented across src/cuda/.
#define OF_CUDA_ENTRY(ret, name, params, args, guard, what, ex) ret name params ex;
#include "cuda/module_entries.inc"
#undef OF_CUDA_ENTRY

bool is_available();

// Streams (stream.cpp, NOTE [CUDA streams]): the device's current stream as cudaStream_t.
cudaStream_t current_stream_of(int device);
// NOTE [Asynchronous CUDA errors]: a launch's own status (and, with OF_CUDA_LAUNCH_BLOCKING=1,
// its completion); a synchronization's status, re-raised with the ops launched since the last
// clean one (note_launch names the op whose kernel runs next).
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
void refuse_if_capturing(const char* what);  // raises while capturing: `what` syncs the host
const uint64_t* graph_rng();  // random kernels: the (seed, offset) device slot, once; or null
int* graph_flag();            // index checks while capturing: the device error flag, or null

// What the core handed the module at load (the switches of of::globalContext()).
extern const cuda_backend::CoreV1* g_core;

// Kernels the module puts into OpDef::cuda slots.
void register_elementwise_kernels(const cuda_backend::CoreV1& core);  // elementwise.cpp
void register_reduce_kernels(const cuda_backend::CoreV1& core);       // reduce.cpp
void register_factory_kernels(const cuda_backend::CoreV1& core);      // factory.cpp
void register_nn_kernels(const cuda_backend::CoreV1& core);           // nn.cpp
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
// out = op(ins...) (broadcast), computed in `dtype`, scalar: pow_scalar's exponent, by the
// elementwise kernel (elementwise.cpp; the enumerators are in cuda/elementwise.h): the kernels'
// own arithmetic (NOTE [No kernel dispatches]).
enum class ElemOp : int;
void elementwise_into(ElemOp op, const Tensor& out, const TensorList& ins, ScalarType dtype,
                      double scalar = 0);
// out = sum of x over `dims` (sorted), by the reduction kernel (reduce.cpp; a kernel's own
// arithmetic: NOTE [No kernel dispatches]).
void sum_into(const Tensor& out, const Tensor& x, IntArrayRef dims);
void bmm_kernel(const KernelArgs& args);  // cuBLAS strided-batched GEMM

}  // namespace oneflow::cuda_module

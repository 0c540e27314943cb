// cuda_backend.h (internal): what the core asks of the CUDA backend. Implemented by
// src/cuda/*.cu when the toolkit is found, by src/cuda_stub.cpp otherwise (every entry then
// throws a clear of::Error, except the queries, which report "no CUDA").
#pragma once
#include <cstddef>

#include "dispatch.h"
#include "oneflow/runtime.h"

namespace oneflow::cuda_backend {

bool built();  // compiled with CUDA support
bool is_available();
int device_count();
int current_device();
void synchronize(int device);

// Caching allocator: one pool per device, blocks reused per stream (the default stream now).
Storage allocate_storage(size_t nbytes, int device);
memory::Stats stats(int device);
void reset_peak_stats(int device);
void empty_cache(int device);

// Copies n bytes; any of host<->device, device<->device. Returns after the copy is complete.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);

// Kernels that fill OpDef::cuda slots.
void copy_strided_kernel(const KernelArgs& args);  // "contiguous"/"to" with strided input
void mm_kernel(const KernelArgs& args);            // cuBLAS GEMM for float32/float64 (2-D)
void bmm_kernel(const KernelArgs& args);           // cuBLAS strided-batched GEMM

}  // namespace oneflow::cuda_backend

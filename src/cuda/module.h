// module.h (internal): the CUDA backend module's own functions (src/cuda/*), reached from the
// core only through the table in module_abi.h.
#pragma once
#include <cstddef>
#include <string>

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

// Kernels the module puts into OpDef::cuda slots.
void copy_strided_kernel(const KernelArgs& args);  // "copy" (contiguous / dtype change)
void mm_kernel(const KernelArgs& args);            // cuBLAS GEMM for float32/float64 (2-D)
void bmm_kernel(const KernelArgs& args);           // cuBLAS strided-batched GEMM

}  // namespace oneflow::cuda_module

// cuda_backend.h (internal): what the core asks of the CUDA backend. The backend is a separate
// module, liboneflow_cuda.so (src/cuda/*, built when the toolkit is found), loaded with dlopen
// by src/cuda_loader.cpp the first time one of these is called; a CPU-only process never maps
// the CUDA libraries. Without the module (not built, not found, its libraries or the driver
// missing) the queries report "no CUDA" and every other entry throws
// "[cuda] not available: <why>". The module fills the op table's CUDA kernel slots when loaded.
#pragma once
#include <cstddef>
#include <string>

#include "dispatch.h"
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

}  // namespace oneflow::cuda_backend

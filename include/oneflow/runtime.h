// runtime.h: allocator statistics, threads and CUDA availability.
#pragma once
#include <cstddef>
#include <cstdint>

#include "oneflow/device.h"

namespace oneflow {

namespace memory {
struct Stats {
  size_t allocated = 0;         // bytes held by live tensors (rounded to the bucket size)
  size_t reserved = 0;          // allocated + cached free blocks
  size_t peak_allocated = 0;    // high-water mark of `allocated` since the last reset
  uint64_t num_allocs = 0;      // allocation requests
  uint64_t num_cache_hits = 0;  // requests served from the cache
};
// Statistics of the caching allocator of `device`.
Stats stats(Device device = Device(kCPU));
// Restarts the peak_allocated high-water mark at the current allocation.
void reset_peak_stats(Device device = Device(kCPU));
// Returns cached free blocks to the system.
void empty_cache(Device device = Device(kCPU));
// Caps the bytes the CPU allocator takes from the system (`stats().reserved`: live tensors,
// bucket-rounded, plus cached free blocks). A request past it first returns the cached blocks,
// then raises of::Error ("[allocator] out of memory ...") instead of asking the system.
// 0 (the default) means no cap. A server bounding what a loaded graph or a request may take
// sets it; the fuzzers set it below their malloc limit.
void set_cpu_limit(size_t bytes);
size_t cpu_limit();
}  // namespace memory

namespace cuda {
// Whether CUDA support was built and a device is present.
bool is_available();
// Number of visible CUDA devices (0 without CUDA).
int device_count();
// Blocks until all work queued on `device` has finished.
void synchronize(int device = -1);
}  // namespace cuda

}  // namespace oneflow

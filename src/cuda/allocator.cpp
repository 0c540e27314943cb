// allocator.cpp: the caching CUDA allocator, one pool per device.
// NOTE [CUDA caching allocator]: requests are rounded to a bucket size (512 B up to 1 MiB,
// then 2 MiB granules); a freed block goes back to its pool's free list for that exact size and
// is handed out again without cudaMalloc/cudaFree (both synchronize the device). All work runs on
// the default stream, so stream order makes reuse safe without events. Pools and blocks are never
// destroyed at exit: tensors in static storage may outlive any destructor we could run.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/module.h"
#include "cuda/cuda_check.h"

namespace oneflow::cuda_module {
namespace {

constexpr size_t kSmallLimit = size_t(1) << 20;  // requests up to 1 MiB: 512-byte buckets
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t(2) << 20;  // larger: 2 MiB granules

size_t round_size(size_t n) {
  const size_t unit = n <= kSmallLimit ? kSmallRound : kLargeRound;
  return (std::max<size_t>(n, 1) + unit - 1) / unit * unit;
}

class DevicePool {
 public:
  explicit DevicePool(int device) : device_(device) {}

  void* allocate(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    auto it = free_.find(rounded);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_ -= rounded;
      ++stats_.num_cache_hits;
    } else {
      DeviceGuard guard(device_);
      cudaError_t err = cudaMalloc(&p, rounded);
      if (err == cudaErrorMemoryAllocation) {  // give the cached blocks back and retry once
        cudaGetLastError();
        release_cached_locked();
        err = cudaMalloc(&p, rounded);
      }
      if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
        fail("[cuda] out of memory allocating {} bytes on cuda:{} (allocated {}, reserved {}; "
             "the device reports {} of {} bytes free)",
             rounded, device_, stats_.allocated, stats_.reserved, free_b, total_b);
      }
      if (err != cudaSuccess) throw_cuda_error(err, "cudaMalloc", __FILE__, __LINE__);
      stats_.reserved += rounded;
    }
    ++stats_.num_allocs;
    stats_.allocated += rounded;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    return p;
  }

  // Called from StorageImpl's destructor: never throws.
  void release(void* p, size_t rounded) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated -= rounded;
    try {
      free_[rounded].push_back(p);
      cached_ += rounded;
    } catch (...) {  // no host memory to remember the block: hand it back to the driver
      int prev = -1;
      if (cudaGetDevice(&prev) == cudaSuccess && prev != device_) cudaSetDevice(device_);
      if (cudaFree(p) == cudaSuccess) stats_.reserved -= rounded;
      if (prev >= 0 && prev != device_) cudaSetDevice(prev);
      cudaGetLastError();
    }
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }

  memory::Stats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated = stats_.allocated;
  }

 private:
  void release_cached_locked() {
    DeviceGuard guard(device_);
    cudaError_t first_err = cudaSuccess;
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) {
        cudaError_t err = cudaFree(p);
        if (err == cudaSuccess) {
          stats_.reserved -= size;
        } else if (first_err == cudaSuccess) {
          first_err = err;
        }
        cached_ -= size;
      }
    }
    free_.clear();
    if (first_err != cudaSuccess) throw_cuda_error(first_err, "cudaFree", __FILE__, __LINE__);
  }

  int device_;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // cached blocks by rounded size
  size_t cached_ = 0;
  memory::Stats stats_;
};

DevicePool& pool(int device) {  // `device` was validated by resolve_device
  static std::vector<DevicePool*>* pools = [] {
    auto* v = new std::vector<DevicePool*>();
    for (int d = 0; d < device_count(); ++d) v->push_back(new DevicePool(d));
    return v;
  }();
  return *(*pools)[size_t(device)];
}

}  // namespace

Storage allocate_storage(size_t nbytes, int device) {
  const int d = resolve_device(device);
  if (nbytes == 0) {
    pool(d);  // nothing to allocate, but the device was checked
    return std::make_shared<StorageImpl>(nullptr, 0, Device(kCUDA, d), nullptr);
  }
  DevicePool* p = &pool(d);
  const size_t rounded = round_size(nbytes);
  void* data = p->allocate(rounded);
  try {
    return std::make_shared<StorageImpl>(data, nbytes, Device(kCUDA, d),
                                         [p, rounded](void* ptr) { p->release(ptr, rounded); });
  } catch (...) {
    p->release(data, rounded);
    throw;
  }
}

memory::Stats stats(int device) { return pool(resolve_device(device)).stats(); }
void reset_peak_stats(int device) { pool(resolve_device(device)).reset_peak(); }
void empty_cache(int device) { pool(resolve_device(device)).empty_cache(); }

}  // namespace oneflow::cuda_module

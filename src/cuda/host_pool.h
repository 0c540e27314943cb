// host_pool.h (internal): the policy of the pinned (page-locked) host memory allocator, written
// against a small interface so the CPU test suite drives it with a fake (tests/
// test_cuda_pool.cpp) and the CUDA module with cudaHostAlloc and events (src/cuda/allocator.cpp).
//
// NOTE [Pinned host memory]: page-locked host memory is what lets a host-to-device copy run
// asynchronously (`to(device, non_blocking=true)` from a pinned tensor). Getting it from the
// driver is slow (cudaHostAlloc maps and locks pages; it can take milliseconds and serialize
// with other work), so blocks are cached:
//  - sizes round up to a power of two of at least 4 KiB; a free block of exactly that class is
//    reused, else a new one is allocated;
//  - an asynchronous copy that reads or writes a block records an event on its stream
//    (record_use); a freed block returns to the cache but is handed out again only once all of
//    those events completed (the copy may still be reading the memory the tensor had);
//  - out of memory: wait for pending events, give the cached blocks back, retry once, then an
//    of::Error naming the size asked for and what the pool holds;
//  - owns(p): whether p points into a live or cached block of the pool (Tensor::is_pinned);
//  - statistics: allocated and reserved bytes, allocations and cache hits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "oneflow/error.h"

namespace oneflow::cuda_pool {

inline constexpr size_t kHostMinBlock = size_t(4) << 10;

inline size_t host_block_size(size_t n) {
  size_t s = kHostMinBlock;
  while (s < n) s <<= 1;
  return s;
}

struct HostPoolStats {
  size_t allocated = 0, reserved = 0, peak_allocated = 0;
  size_t num_allocs = 0, num_cache_hits = 0, num_blocks = 0;
};

// H: the host side. using Stream = ...; using Event = ...;
//   void* malloc(size_t) (nullptr when out of memory); void free(void*);
//   Event record(Stream); bool done(const Event&); void wait(const Event&);
//   void destroy(const Event&);
template <class H> class HostPool {
 public:
  using Stream = typename H::Stream;
  using Event = typename H::Event;

  explicit HostPool(H& h) : h_(h) {}
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  ~HostPool() = default;  // the module's pool lives as long as the process (blocks stay pinned)

  void* allocate(size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    const size_t size = host_block_size(n);
    ++stats_.num_allocs;
    // a cached block of this class whose copies have all completed
    for (auto& [p, b] : blocks_) {
      if (b.live || b.size != size || !settled(b)) continue;
      b.live = true;
      ++stats_.num_cache_hits;
      note_alloc(size);
      return p;
    }
    void* p = h_.malloc(size);
    if (!p) {
      release_cached(/*wait=*/true);
      p = h_.malloc(size);
    }
    if (!p)
      fail(
          "[cuda] out of pinned host memory: asked for {} bytes (a block of {}); the pinned pool "
          "holds {} bytes in use and {} bytes in all",
          n, size, stats_.allocated, stats_.reserved);
    Block& b = blocks_[p];
    b.size = size;
    b.live = true;
    stats_.reserved += size;
    ++stats_.num_blocks;
    note_alloc(size);
    return p;
  }

  // The block goes back to the cache; copies still using it keep it from reuse until they end.
  void free(void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = blocks_.find(p);
    if (it == blocks_.end() || !it->second.live) return;
    it->second.live = false;
    stats_.allocated -= it->second.size;
  }

  // An asynchronous copy on `stream` reads or writes the block holding p (a pointer into it).
  void record_use(const void* p, Stream stream) {
    std::lock_guard<std::mutex> lk(mu_);
    Block* b = find(p);
    if (b) b->uses.push_back(h_.record(stream));
  }

  bool owns(const void* p) const {
    std::lock_guard<std::mutex> lk(mu_);
    return const_cast<HostPool*>(this)->find(p) != nullptr;
  }

  // Gives the cached (free, settled) blocks back to the driver.
  void empty_cache() {
    std::lock_guard<std::mutex> lk(mu_);
    release_cached(/*wait=*/false);
  }

  HostPoolStats stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
  }

 private:
  struct Block {
    size_t size = 0;
    bool live = false;
    std::vector<Event> uses;  // events of asynchronous copies that touched the block
  };

  // Drops completed events; true when none is pending.
  bool settled(Block& b) {
    size_t k = 0;
    for (size_t i = 0; i < b.uses.size(); ++i) {
      if (h_.done(b.uses[i])) h_.destroy(b.uses[i]);
      else b.uses[k++] = b.uses[i];
    }
    b.uses.resize(k);
    return b.uses.empty();
  }

  Block* find(const void* p) {
    auto it = blocks_.upper_bound(const_cast<void*>(p));
    if (it == blocks_.begin()) return nullptr;
    --it;
    const char* start = static_cast<const char*>(it->first);
    const char* q = static_cast<const char*>(p);
    return q < start + it->second.size ? &it->second : nullptr;
  }

  void release_cached(bool wait) {
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      Block& b = it->second;
      if (b.live) {
        ++it;
        continue;
      }
      if (wait)
        for (const Event& e : b.uses) h_.wait(e);
      if (!settled(b)) {
        ++it;
        continue;
      }
      h_.free(it->first);
      stats_.reserved -= b.size;
      --stats_.num_blocks;
      it = blocks_.erase(it);
    }
  }

  void note_alloc(size_t size) {
    stats_.allocated += size;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  }

  H& h_;
  mutable std::mutex mu_;
  std::map<void*, Block> blocks_;  // by address: owns() and record_use find interior pointers
  HostPoolStats stats_;
};

}  // namespace oneflow::cuda_pool

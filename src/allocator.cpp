// CPU caching allocator. NOTE [CPU allocator]: sizes are rounded up to a bucket (multiples of
// 64 B up to 1 KiB, then four buckets per power of two) and freed blocks are kept in a free
// list per bucket, so a steady training loop stops calling malloc after its first step.
#include "allocator.h"

#include <cstdlib>
#include <cstring>
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cuda_backend.h"
#include "large_pages.h"

// Under AddressSanitizer (./run test --sanitize) the blocks this allocator caches are poisoned
// while they sit in a free list, and the rounding tail of a block past the requested size is
// poisoned while it is in use: a read after free or past the end of a tensor's storage is
// reported even though the block never goes back to malloc. No-ops in other builds.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OF_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define OF_ASAN 1
#endif
#ifdef OF_ASAN
#include <sanitizer/asan_interface.h>
#define OF_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define OF_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define OF_POISON(p, n) ((void)(p), (void)(n))
#define OF_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace oneflow {
namespace {

// A test-and-test-and-set lock: the critical sections are a few loads and stores, so an
// uncontended acquire is one atomic exchange (a std::mutex costs two library calls).
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; flag_.exchange(true, std::memory_order_acquire); ++spins) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();  // a preempted holder: give way
        else __builtin_ia32_pause();
      }
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

size_t bucket_size(size_t n) {
  if (n <= 1024) return n == 0 ? 64 : (n + 63) & ~size_t(63);
  size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));  // largest power of two < n
  size_t step = p / 4;
  return (n + step - 1) / step * step;
}

class CpuAllocator {
 public:
  void* allocate(size_t nbytes, size_t* bucket_out) {
    size_t b = bucket_size(nbytes);
    *bucket_out = b;
    for (bool emptied = false;; emptied = true) {
      {
        std::lock_guard<SpinLock> lk(mu_);
        auto& list = free_list(b);
        if (!list.empty()) {
          void* p = list.back();
          list.pop_back();
          count_alloc(b);
          ++stats_.num_cache_hits;
          OF_UNPOISON(p, nbytes);
          return p;
        }
        // the cap (memory::set_cpu_limit) bounds what is taken from the system: the cached
        // blocks go back first, then the request is refused
        if (limit_ == 0 || (b <= limit_ && stats_.reserved <= limit_ - b)) {
          count_alloc(b);
          stats_.reserved += b;
          break;
        }
        if (emptied)
          fail(
              "[allocator] out of memory allocating {} bytes on cpu: {} bytes are allocated, "
              "and memory::set_cpu_limit caps the allocator at {}",
              nbytes, stats_.allocated, limit_);
      }
      empty_cache();
    }
    void* p = alloc_maybe_large(b);  // NOTE [Large pages]
    if (!p) {
      empty_cache();
      p = alloc_maybe_large(b);
    }
    if (!p) {
      std::lock_guard<SpinLock> lk(mu_);
      stats_.allocated -= b;
      stats_.reserved -= b;
      fail("[allocator] out of memory allocating {} bytes on cpu", nbytes);
    }
    OF_POISON(static_cast<char*>(p) + nbytes, b - nbytes);
    return p;
  }
  void count_alloc(size_t b) {  // with mu_ held
    ++stats_.num_allocs;
    stats_.allocated += b;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  }
  void set_limit(size_t bytes) {
    std::lock_guard<SpinLock> lk(mu_);
    limit_ = bytes;
  }
  size_t limit() {
    std::lock_guard<SpinLock> lk(mu_);
    return limit_;
  }
  void release(void* p, size_t b) {
    OF_POISON(p, b);
    std::lock_guard<SpinLock> lk(mu_);
    stats_.allocated -= b;
    free_list(b).push_back(p);
  }
  void empty_cache() {
    std::lock_guard<SpinLock> lk(mu_);
    auto drain = [&](size_t b, std::vector<void*>& list) {
      for (void* p : list) {
        OF_UNPOISON(p, b);
        std::free(p);
      }
      stats_.reserved -= b * list.size();
      list.clear();
    };
    for (size_t i = 0; i < kSmall; ++i) drain((i + 1) * 64, small_[i]);
    for (auto& [b, list] : large_) drain(b, list);
  }
  memory::Stats stats() {
    std::lock_guard<SpinLock> lk(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<SpinLock> lk(mu_);
    stats_.peak_allocated = stats_.allocated;
  }

 private:
  // Buckets up to 1 KiB live in an array (the hot path of small tensors); larger in a map.
  static constexpr size_t kSmall = 16;
  std::vector<void*>& free_list(size_t b) {
    if (b <= kSmall * 64) return small_[b / 64 - 1];
    return large_[b];
  }
  SpinLock mu_;
  std::vector<void*> small_[kSmall];
  std::unordered_map<size_t, std::vector<void*>> large_;
  memory::Stats stats_;
  size_t limit_ = 0;  // 0: no cap (memory::set_cpu_limit)
};

// NOTE [object pool]: every eager op creates a TensorImpl and a StorageImpl (with their
// shared_ptr control blocks); a per-thread free list of fixed-size blocks makes both a pointer
// pop instead of a malloc/free pair. A block freed on another thread joins that thread's list;
// each list is capped and freed when its thread exits.
template <size_t Size> class BlockPool {
 public:
  static void* get() {
    Local& l = local();
    if (l.head) {
      Node* n = l.head;
      l.head = n->next;
      --l.count;
      return n;
    }
    return ::operator new(Size);
  }
  static void put(void* p) {
    Local& l = local();
    if (l.count >= kCap) return ::operator delete(p);
    Node* n = static_cast<Node*>(p);
    n->next = l.head;
    l.head = n;
    ++l.count;
  }

 private:
  static constexpr size_t kCap = 4096;
  struct Node {
    Node* next;
  };
  struct Local {
    Node* head = nullptr;
    size_t count = 0;
    ~Local() {
      while (head) {
        Node* n = head;
        head = n->next;
        ::operator delete(n);
      }
    }
  };
  static Local& local() {
    static thread_local __attribute__((tls_model("initial-exec"))) Local l;
    return l;
  }
};

template <class T> struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U> PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(BlockPool<(sizeof(T) + 15) / 16 * 16>::get());
  }
  void deallocate(T* p, size_t n) {
    if (n != 1) return ::operator delete(p);
    BlockPool<(sizeof(T) + 15) / 16 * 16>::put(p);
  }
  template <class U> bool operator==(const PoolAllocator<U>&) const { return true; }
};

CpuAllocator& cpu_allocator() {
  static auto* a = new CpuAllocator();  // never destroyed: storages may outlive static teardown
  return *a;
}

}  // namespace

Storage allocate_storage(size_t nbytes, Device device) {
  // Sizes from files (a forged .oftrace buffer, fuzz_jit_load) must not wrap the bucket math.
  if (nbytes > (size_t(1) << 56)) [[unlikely]]
    fail("[allocate] {} bytes on {} is more memory than can be addressed", nbytes, device.str());
  if (device.is_cuda()) return cuda_backend::allocate_storage(nbytes, device.index());
  size_t bucket;
  void* p = cpu_allocator().allocate(nbytes, &bucket);
  return std::allocate_shared<StorageImpl>(
      PoolAllocator<StorageImpl>(), p, nbytes, device,
      +[](void* q, size_t b) { cpu_allocator().release(q, b); }, bucket);
}

std::shared_ptr<TensorImpl> new_tensor_impl() {
  return std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>());
}

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) {
  if (n == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memmove(dst, src, n);  // an out= tensor may be the source itself
    return;
  }
  cuda_backend::copy_bytes(dst, dst_dev, src, src_dev, n);
}

namespace memory {
Stats stats(Device device) {
  if (device.is_cuda()) return cuda_backend::stats(device.index());
  return cpu_allocator().stats();
}
void reset_peak_stats(Device device) {
  if (device.is_cuda()) return cuda_backend::reset_peak_stats(device.index());
  cpu_allocator().reset_peak();
}
void empty_cache(Device device) {
  if (device.is_cuda()) return cuda_backend::empty_cache(device.index());
  cpu_allocator().empty_cache();
}
void set_cpu_limit(size_t bytes) { cpu_allocator().set_limit(bytes); }
size_t cpu_limit() { return cpu_allocator().limit(); }
}  // namespace memory

}  // namespace oneflow

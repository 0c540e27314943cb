// large_pages.h (internal): big CPU buffers on 2 MiB pages where Linux gives them.
//
// NOTE [Large pages]: a replay's GEMMs stream every packed weight from L3 or memory once per
// call; on 4 KiB pages a 384 x 384 float32 weight spans 144 pages, more than the first-level
// TLB holds, and each strip of it walks the page tables again. On 2 MiB pages the same GEMM ran
// 10-20% faster (a throwaway driver over gemm_f32, weights cycled through 40 MB: 128 x 1536 x 384
// at 142 -> 170 GFLOP/s on one core). Linux's transparent huge pages are usually in "madvise"
// mode: a block of at least kLargePage bytes is therefore aligned to 2 MiB and its whole 2 MiB
// pages are advised MADV_HUGEPAGE (the kernel may still decline; the memory is then ordinary);
// its tail stays on small pages, so no huge page holds memory past the block. Smaller blocks
// are 64-byte aligned as before. Either is released with free_maybe_large (std::free).
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace oneflow {

inline constexpr size_t kLargePage = size_t(2) << 20;

// Null when the system has no memory left (0 bytes: a 1-byte block).
void* alloc_maybe_large(size_t bytes);
void free_maybe_large(void* p) noexcept;

// std::vector's allocator for the packed GEMM operands (NOTE [Large pages]).
template <class T> struct LargePageAllocator {
  using value_type = T;
  LargePageAllocator() = default;
  template <class U> LargePageAllocator(const LargePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    void* p = alloc_maybe_large(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { free_maybe_large(p); }
  template <class U> bool operator==(const LargePageAllocator<U>&) const noexcept { return true; }
};

template <class T> using LargePageVector = std::vector<T, LargePageAllocator<T>>;

}  // namespace oneflow

// large_pages.cpp: NOTE [Large pages] in large_pages.h.
#include "large_pages.h"

#include <cstdlib>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace oneflow {

void* alloc_maybe_large(size_t bytes) {
  if (bytes < kLargePage) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  // (aligned_alloc wants a multiple of the alignment)
  const size_t rounded = (bytes + kLargePage - 1) / kLargePage * kLargePage;
  void* p = std::aligned_alloc(kLargePage, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) (void)::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: refused, pages stay small
#endif
  return p;
}

void free_maybe_large(void* p) noexcept { std::free(p); }

}  // namespace oneflow

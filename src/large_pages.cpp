// large_pages.cpp: NOTE [Large pages] in large_pages.h.
#include "large_pages.h"

#include <cstdlib>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace oneflow {

void* alloc_maybe_large(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = nullptr;
  if (bytes < kLargePage) {
    if (posix_memalign(&p, 64, bytes) != 0) return nullptr;
    return p;
  }
  if (posix_memalign(&p, kLargePage, bytes) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // the whole 2 MiB pages of the block only: a huge page over its tail would hold memory past
  // the block (advice: where it is refused, the pages stay small)
  (void)::madvise(p, bytes / kLargePage * kLargePage, MADV_HUGEPAGE);
#endif
  return p;
}

void free_maybe_large(void* p) noexcept { std::free(p); }

}  // namespace oneflow

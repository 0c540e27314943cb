// strided_dims.h (internal, host code): the one dim coalescer of strided iterations. NOTE
// [Merged dims]: the CPU loops (cpu/loops.h) and the CUDA module's elementwise, copy, indexing
// and sort kernels (cuda/dims.h, cuda/elementwise.cpp, cuda/copy.cpp) walk their operands at
// the operands' own strides; before walking they drop size-1 dims and merge a dim into the one
// before it when every operand lays the two out back to back (the outer stride is the inner
// stride times the inner size), so a walk has as few dims as the layouts allow.
#pragma once
#include <cstddef>
#include <cstdint>

#include "oneflow/small_vector.h"

namespace oneflow {

// One dim of a merged iteration: its size (the product of the merged dims' sizes) and the
// innermost source dim it covers, whose strides are the merged dim's strides.
struct MergedDim {
  int64_t size;
  size_t inner;
};
using MergedDims = SmallVector<MergedDim, 6>;

// The merged dims of `nd` dims of sizes size(d) over `nops` operands of strides stride(k, d),
// outermost first (empty when every dim has size 1).
template <class SizeFn, class StrideFn>
MergedDims merge_dims(size_t nd, size_t nops, SizeFn&& size, StrideFn&& stride) {
  MergedDims m;
  for (size_t d = 0; d < nd; ++d) {
    const int64_t n = size(d);
    if (n == 1) continue;
    bool merge = !m.empty();
    for (size_t k = 0; merge && k < nops; ++k)
      merge = stride(k, m.back().inner) == stride(k, d) * n;
    if (merge) {
      m.back().size *= n;
      m.back().inner = d;
    } else {
      m.push_back({n, d});
    }
  }
  return m;
}

}  // namespace oneflow

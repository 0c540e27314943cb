// shapes.h (internal): checked shape arithmetic shared by infer_meta functions, kernels and
// the graph loader: dims, strides, element counts and view extents that raise [op] errors
// instead of overflowing.
#pragma once
#include <cstdint>
#include <string>

#include "oneflow/tensor.h"

namespace oneflow {

// Normalizes a possibly negative dim against `ndim`; [op] error when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
DimVector contiguous_strides(IntArrayRef sizes);
int64_t checked_numel(IntArrayRef sizes, const char* op);  // errors on negative/overflowing sizes
// a * b of sizes taken from attributes or shapes (a direct dispatch or a loaded graph may hold
// any int64): [op] error naming `what` when the product overflows int64.
inline int64_t checked_mul(int64_t a, int64_t b, const char* op, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("[{}] {} overflows int64 ({} * {})", op, what, a, b);
  return r;
}
// The device a (device_type, device_index) attribute pair names; [op] error for another type
// or an index outside -1..127 (attributes of a direct dispatch or a loaded graph are any int).
Device device_from_attrs(int64_t type, int64_t index, const char* op);
// Elements a strided view (non-negative strides, offset >= 0) needs in its storage: 0 when
// it is empty, else its last element + 1; [op] error on bad or overflowing geometry.
int64_t view_extent(IntArrayRef sizes, IntArrayRef strides, int64_t offset, const char* op);
std::string shape_str(IntArrayRef sizes);  // "(2, 3)"
// The shape a and b broadcast to (of::broadcast_shapes, declared here for kernels too);
// [broadcast] error naming both when they do not.
DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b);

// Whether s broadcasts to exactly `target`.
inline bool broadcasts_to(IntArrayRef s, IntArrayRef target) {
  if (s.size() > target.size()) return false;
  const size_t off = target.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != target[off + i]) return false;
  return true;
}

}  // namespace oneflow

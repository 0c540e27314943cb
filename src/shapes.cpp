// shapes.cpp: checked shape arithmetic (shapes.h).
#include "shapes.h"

#include <algorithm>

namespace oneflow {

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // 0-d tensors accept dim 0 and -1
  if (dim < -n || dim >= n)
    fail("[{}] dimension out of range (expected to be in range of [{}, {}], but got {})", op, -n,
         n - 1, dim);
  return dim < 0 ? dim + n : dim;
}

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector st(sizes.size(), 1);
  int64_t acc = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    st[d] = acc;
    // unsigned: the product only overflows when a size is 0 (numel is checked to fit), and
    // an empty tensor's strides are never used to address memory
    acc = int64_t(uint64_t(acc) * uint64_t(std::max<int64_t>(sizes[d], 1)));
  }
  return st;
}

int64_t checked_numel(IntArrayRef sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0) fail("[{}] negative dimension {} in size {}", op, s, shape_str(sizes));
    if (s != 0 && n > (int64_t(1) << 62) / s)
      fail("[{}] size {} overflows the number of elements", op, shape_str(sizes));
    n *= s;
  }
  return n;
}

Device device_from_attrs(int64_t type, int64_t index, const char* op) {
  if (type != int64_t(kCPU) && type != int64_t(kCUDA))
    fail("[{}] unknown device type {} (0 is CPU, 1 CUDA)", op, type);
  if (index < -1 || index > 127) fail("[{}] device index {} is out of range", op, index);
  return Device(DeviceType(type), int(index));
}

int64_t view_extent(IntArrayRef sizes, IntArrayRef strides, int64_t offset, const char* op) {
  if (sizes.size() != strides.size())
    fail("[{}] got {} sizes and {} strides", op, sizes.size(), strides.size());
  for (int64_t st : strides)
    if (st < 0) fail("[{}] negative stride {} is not supported", op, st);
  if (offset < 0) fail("[{}] negative storage offset {}", op, offset);
  if (checked_numel(sizes, op) == 0) return 0;
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
        __builtin_add_overflow(last, reach, &last) || last == INT64_MAX)
      fail("[{}] size {} with stride {} and offset {} overflows the addressable elements", op,
           shape_str(sizes), shape_str(strides), offset);
  }
  if (last == INT64_MAX)  // a 0-d view at the last offset (fuzz_ops)
    fail("[{}] storage offset {} overflows the addressable elements", op, offset);
  return last + 1;
}

std::string shape_str(IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  if (sizes.size() == 1) s += ",";
  return s + ")";
}

DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b) {
  size_t n = std::max(a.size(), b.size());
  DimVector r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      fail("[broadcast] shapes {} and {} are not broadcastable: size {} vs {} at dimension {}",
           shape_str(a), shape_str(b), x, y, i);
    r[i] = x == 1 ? y : x;
  }
  return r;
}

}  // namespace oneflow

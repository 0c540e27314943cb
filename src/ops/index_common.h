// index_common.h: what the indexing, sort and shape-move op files and their CPU kernels share
// (ops/index.cpp, ops/sort.cpp, ops/moves.cpp; cpu/index.cpp, cpu/moves.cpp): strided loops over
// runs, index dtype and bound checks, typed copies and fills, pad's modes and flip's dims; and
// (from ops/index_attrs.h, which the CUDA module's kernels include alone) their ops' attribute
// schemas. The gather/scatter cores are in cpu/index.cpp, the index maps of moves in
// cpu/moves.cpp.
#pragma once
#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include "cpu/loops.h"
#include "kernel_support.h"
#include "ops/checks.h"
#include "ops/index_attrs.h"

namespace oneflow::index_detail {

// ---------------------------------------------------------------- loop helpers

inline int64_t prod_of(IntArrayRef s, size_t b = 0, size_t e = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = b; i < std::min(e, s.size()); ++i) p *= s[i];
  return p;
}

// Calls f(offsets, n, inner_strides) for every run along the last dim of `shape` (row-major),
// with per-operand element offsets computed from `st` (strides in elements, one list per
// operand, each of shape's rank). Runs are split over the thread pool unless grain is INT64_MAX.
template <size_t K, class F>
inline void for_each_run(IntArrayRef shape, const std::array<DimVector, K>& st, int64_t grain,
                         F&& f) {
  const int64_t nd = int64_t(shape.size());
  std::array<int64_t, K> inner{};
  if (nd == 0) {
    std::array<int64_t, K> off{};
    f(off, int64_t(1), inner);
    return;
  }
  const int64_t numel = prod_of(shape);
  if (numel == 0) return;
  const int64_t last = shape[nd - 1];
  const int64_t rows = numel / last;
  for (size_t k = 0; k < K; ++k) inner[k] = st[k][nd - 1];
  auto body = [&](int64_t b, int64_t e) {
    DimVector idx(size_t(nd - 1), 0);
    int64_t r = b;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = r % shape[d];
      r /= shape[d];
    }
    std::array<int64_t, K> off{};
    for (size_t k = 0; k < K; ++k)
      for (int64_t d = 0; d < nd - 1; ++d) off[k] += idx[d] * st[k][d];
    for (int64_t row = b; row < e; ++row) {
      f(off, last, inner);
      for (int64_t d = nd - 2; d >= 0; --d) {
        for (size_t k = 0; k < K; ++k) off[k] += st[k][d];
        if (++idx[d] < shape[d]) break;
        for (size_t k = 0; k < K; ++k) off[k] -= st[k][d] * shape[d];
        idx[d] = 0;
      }
    }
  };
  if (grain == INT64_MAX) {
    body(0, rows);
  } else {
    parallel_for(0, rows, std::max<int64_t>(1, grain / last), body);
  }
}

// Strides of t broadcast to `shape` (0 on leading and broadcast dims), in elements.
inline DimVector bcast_strides(const Tensor& t, IntArrayRef shape) {
  DimVector st(shape.size(), 0);
  const int64_t off = int64_t(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d)
    st[off + d] = (t.sizes()[d] == 1 && shape[off + d] != 1) ? 0 : t.strides()[d];
  return st;
}

template <class F> void dispatch_index(ScalarType t, F&& f) {
  if (t == kInt64) f(int64_t{});
  else if (t == kInt32) f(int32_t{});
  else throw Error("[dispatch] internal error: index dtype must be int32 or int64");
}

// Calls f(value) for every value of an integer tensor (any strides), serially.
template <class F> void for_each_index(const Tensor& idx, F&& f) {
  // a tensor without data is a geometry only (a loaded or symbolic graph's node checked before
  // it runs): its values are checked when the node runs (NOTE [Replayed index checks])
  if (!idx.impl()->storage || !idx.impl()->storage->data) return;
  std::array<DimVector, 1> st{idx.strides().dims()};
  dispatch_index(idx.dtype(), [&](auto z) {
    using I = decltype(z);
    const I* p = static_cast<const I*>(idx.data_ptr());
    for_each_run<1>(idx.sizes(), st, INT64_MAX, [&](const auto& off, int64_t n, const auto& s) {
      for (int64_t j = 0; j < n; ++j) f(int64_t(p[off[0] + j * s[0]]));
    });
  });
}

inline void check_index_dtype(const Tensor& idx, const char* op, bool allow_int32,
                              const char* what = "index") {
  if (idx.dtype() == kInt64 || (allow_int32 && idx.dtype() == kInt32)) return;
  fail("[{}] expected {} to have dtype int64{}, got {}", op, what, allow_int32 ? " or int32" : "",
       dtype_name(idx.dtype()));
}

// Every value of `index` must lie in [0, size) (checked on the host for CPU tensors). A global
// index is checked piece by piece when the op runs on the local pieces (its logical values are
// on no one rank).
inline void check_bounds(const Tensor& index, int64_t size, const char* op, int64_t dim) {
  if (!index.is_cpu() || index.numel() == 0 || index.is_global()) return;
  for_each_index(index, [&](int64_t v) {
    if (v < 0 || v >= size)
      fail("[{}] index {} is out of bounds for dimension {} with size {}", op, v, dim, size);
  });
}

inline int64_t size_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }
inline int64_t stride_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 0 : t.strides()[d]; }

template <class T> void copy_into(const Tensor& dst, const Tensor& src) {
  cpu::cpu_kernel<T, T>(dst, {&src}, [](compute_t<T> v) { return v; });
}
inline void copy_any(const Tensor& dst, const Tensor& src) {
  dispatch_dtype(dst.dtype(), [&](auto z) { copy_into<decltype(z)>(dst, src); });
}
inline void fill_any(const Tensor& dst, double v) {
  dispatch_dtype(dst.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(dst.data_ptr());  // dst is a freshly allocated contiguous output
    // an integer output saturates (a NaN or out-of-range fill value, fuzz_ops)
    const T val = T(saturate_cast<compute_t<T>>(v));
    std::fill(p, p + dst.numel(), val);
  });
}

// ---------------------------------------------------------------- moves

// pad's modes (the "mode" attribute, named)
enum class PadMode { kConstant, kReflect, kReplicate, kCircular };
inline PadMode pad_mode(std::string_view m) {
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "replicate") return PadMode::kReplicate;
  if (m == "circular") return PadMode::kCircular;
  fail("[pad] unknown padding mode '{}'; expected 'constant', 'reflect', 'replicate' or 'circular'",
       m);
}

// flip's dims, wrapped; a dim listed twice is refused.
inline DimVector flip_dims(const Tensor& x, const DimVector& dims) {
  DimVector r;
  std::vector<bool> seen(size_t(std::max<int64_t>(x.dim(), 1)), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), "flip");
    OF_CHECK(!seen[w], "[flip] dim {} appears multiple times in the list of dims {}", w,
             shape_str(dims));
    seen[w] = true;
    r.push_back(w);
  }
  return r;
}

}  // namespace oneflow::index_detail

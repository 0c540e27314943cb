// index_common.h: what the indexing, sort and shape-move op files share (ops/index.cpp,
// ops/sort.cpp, ops/moves.cpp): strided loops over runs, index dtype and bound checks, typed
// copies and fills, the gather/scatter cores and the per-axis index maps of moves; and (from
// ops/index_attrs.h, which the CUDA module's kernels include alone) their ops' attribute schemas.
#pragma once
#include <algorithm>
#include <array>
#include <vector>

#include "cpu/loops.h"
#include "dispatch.h"
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

// `v` with entry d moved to the end (iteration along dim d becomes the innermost run).
inline DimVector move_last(IntArrayRef v, int64_t d) {
  DimVector r;
  for (int64_t i = 0; i < int64_t(v.size()); ++i)
    if (i != d) r.push_back(v[i]);
  r.push_back(v[d]);
  return r;
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

// out[...] = x[... index[...] at dim ...] over index's shape (out has index's shape).
template <class T, class I>
inline void gather_core(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t nd = index.dim();
  DimVector xs = nd == 0 ? DimVector{} : x.strides().dims();
  const int64_t xsd = stride_at(x, dim);
  if (nd > 0) xs[dim] = 0;
  std::array<DimVector, 3> st{out.strides().dims(), index.strides().dims(), xs};
  T* op = static_cast<T*>(out.data_ptr());
  const I* ip = static_cast<const I*>(index.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  for_each_run<3>(index.sizes(), st, kParallelGrain,
                  [&](const auto& off, int64_t n, const auto& s) {
                    T* o = op + off[0];
                    const I* ii = ip + off[1];
                    const T* xx = xp + off[2];
                    for (int64_t j = 0; j < n; ++j)
                      o[j * s[0]] = xx[j * s[2] + int64_t(ii[j * s[1]]) * xsd];
                  });
}

// out[... index[...] at dim ...] (=|+=) alpha * src[...] over index's shape; lines along dim
// stay on one thread (see NOTE [Scatter determinism]).
template <class T, class I, bool Add>
inline void scatter_core(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                         compute_t<T> alpha) {
  const int64_t nd = index.dim();
  const int64_t osd = stride_at(out, dim);
  DimVector shape, is, ss, os;
  if (nd > 0) {
    DimVector o = out.strides().dims();
    o[dim] = 0;
    shape = move_last(index.sizes(), dim);
    is = move_last(index.strides(), dim);
    ss = move_last(src.strides(), dim);
    os = move_last(o, dim);
  }
  std::array<DimVector, 3> st{is, ss, os};
  T* op = static_cast<T*>(out.data_ptr());
  const I* ip = static_cast<const I*>(index.data_ptr());
  const T* sp = static_cast<const T*>(src.data_ptr());
  for_each_run<3>(shape, st, kParallelGrain, [&](const auto& off, int64_t n, const auto& s) {
    const I* ii = ip + off[0];
    const T* ssrc = sp + off[1];
    T* o = op + off[2];
    for (int64_t j = 0; j < n; ++j) {
      T& dst = o[j * s[2] + int64_t(ii[j * s[0]]) * osd];
      if constexpr (Add) {
        dst = T(compute_t<T>(dst) + alpha * compute_t<T>(ssrc[j * s[1]]));
      } else {
        dst = ssrc[j * s[1]];
      }
    }
  });
}

// A view of a 1-D (or 0-d) index as a tensor of `shape` varying only along `dim`.
inline Tensor expand_index(const Tensor& index, IntArrayRef shape, int64_t dim) {
  DimVector st(shape.size(), 0);
  if (!shape.empty()) st[dim] = index.dim() == 1 ? index.strides()[0] : 0;
  return make_view(index, shape, st, index.storage_offset());
}

// Per-dim source-index maps: out index i along dim d reads x index maps[d][i] (empty: identity).
using Maps = std::vector<std::vector<int64_t>>;

// out (contiguous) = x gathered through per-dim maps.
template <class T> void mapped_copy(const Tensor& out, const Tensor& x, const Maps& maps) {
  const int64_t nd = out.dim();
  if (out.numel() == 0) return;
  T* op = static_cast<T*>(out.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  if (nd == 0) {
    *op = *xp;
    return;
  }
  IntArrayRef shape = out.sizes(), xs = x.strides();
  const int64_t last = shape[nd - 1], rows = out.numel() / last, xsl = xs[nd - 1];
  const std::vector<int64_t>& ml = maps[nd - 1];
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / last), [&](int64_t b, int64_t e) {
    DimVector idx(size_t(nd - 1), 0);
    int64_t r = b;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = r % shape[d];
      r /= shape[d];
    }
    for (int64_t row = b; row < e; ++row) {
      int64_t xoff = 0;
      for (int64_t d = 0; d < nd - 1; ++d)
        xoff += (maps[d].empty() ? idx[d] : maps[d][idx[d]]) * xs[d];
      T* o = op + row * last;
      const T* xr = xp + xoff;
      if (!ml.empty()) {
        for (int64_t j = 0; j < last; ++j) o[j] = xr[ml[j] * xsl];
      } else if (xsl == 1) {
        std::copy(xr, xr + last, o);
      } else {
        for (int64_t j = 0; j < last; ++j) o[j] = xr[j * xsl];
      }
      for (int64_t d = nd - 2; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  });
}

// gin (contiguous, zeroed, shape of x) += g scattered back through the maps of mapped_copy.
// Parallel only over the leading identity-mapped dims, so accumulation order is fixed.
template <class T> void mapped_add(const Tensor& gin, const Tensor& g, const Maps& maps) {
  const int64_t nd = g.dim();
  if (g.numel() == 0) return;
  T* ip = static_cast<T*>(gin.data_ptr());
  const T* gp = static_cast<const T*>(g.data_ptr());
  if (nd == 0) {
    *ip = T(compute_t<T>(*ip) + compute_t<T>(*gp));
    return;
  }
  IntArrayRef shape = g.sizes(), gs = g.strides(), is = gin.strides();
  int64_t p = 0;
  while (p < nd - 1 && maps[p].empty()) ++p;
  const int64_t outer = prod_of(shape, 0, size_t(p));
  const int64_t rpo = prod_of(shape, size_t(p), size_t(nd - 1));
  const int64_t last = shape[nd - 1];
  const std::vector<int64_t>& ml = maps[nd - 1];
  parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, rpo * last)),
               [&](int64_t ob, int64_t oe) {
                 const int64_t b = ob * rpo, e = oe * rpo;
                 DimVector idx(size_t(nd - 1), 0);
                 int64_t r = b;
                 for (int64_t d = nd - 2; d >= 0; --d) {
                   idx[d] = r % shape[d];
                   r /= shape[d];
                 }
                 for (int64_t row = b; row < e; ++row) {
                   int64_t ioff = 0, goff = 0;
                   for (int64_t d = 0; d < nd - 1; ++d) {
                     ioff += (maps[d].empty() ? idx[d] : maps[d][idx[d]]) * is[d];
                     goff += idx[d] * gs[d];
                   }
                   T* ir = ip + ioff;
                   const T* gr = gp + goff;
                   for (int64_t j = 0; j < last; ++j) {
                     T& dst = ir[ml.empty() ? j : ml[j]];
                     dst = T(compute_t<T>(dst) + compute_t<T>(gr[j * gs[nd - 1]]));
                   }
                   for (int64_t d = nd - 2; d >= 0; --d) {
                     if (++idx[d] < shape[d]) break;
                     idx[d] = 0;
                   }
                 }
               });
}

// The op behind a handle; builds the op table first when nothing has touched it yet.

}  // namespace oneflow::index_detail

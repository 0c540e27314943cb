// index.cpp: the CPU kernels of the indexing ops (gather, scatter, scatter_add, index_select,
// index_add, masked_select, masked_select_backward, nonzero, one_hot, embedding); their meta,
// VJPs and registration are in ops/index.cpp, the loop helpers they share with it (and with
// cpu/moves.cpp) in ops/index_common.h.
// NOTE [Scatter determinism]: accumulating kernels iterate whole lines along the scattered dim
// on one thread (lines are split across threads), so duplicate indices add in index order and
// results do not depend on the thread count.
#include "cpu/index.h"

#include <algorithm>
#include <array>

#include "kernel_support.h"
#include "ops/index_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace index_detail;
namespace {

// `v` with entry d moved to the end (iteration along dim d becomes the innermost run).
inline DimVector move_last(IntArrayRef v, int64_t d) {
  DimVector r;
  for (int64_t i = 0; i < int64_t(v.size()); ++i)
    if (i != d) r.push_back(v[i]);
  r.push_back(v[d]);
  return r;
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

template <bool Add> void scatter_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const Tensor& self = k.inputs[0];
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(k.attrs), out.dim(), "scatter");
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    // a traced graph may give out the buffer of a dying `self` (kInplaceOk): nothing to copy
    if (out.data_ptr() != self.data_ptr() || !(out.strides() == self.strides()))
      copy_into<T>(out, self);
    scatter_core<T, int64_t, Add>(out, d, k.inputs[1], k.inputs[2], compute_t<T>(1));
  });
}

}  // namespace

// ---------------------------------------------------------------- gather / scatter

void gather(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &index = k.inputs[1];
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(DimAttrs::get<"dim">(k.attrs), x.dim(), "gather");
  if (x.dim() != index.dim()) {
    // 0-d / 1-element mixes: work on 1-element 1-D geometry.
    Tensor xv = make_view(x, {size_at(x, 0)}, {stride_at(x, 0)}, x.storage_offset());
    Tensor iv = make_view(index, {index.numel()}, {stride_at(index, 0)}, index.storage_offset());
    Tensor ov = make_view(k.outputs[0], {index.numel()}, {1}, k.outputs[0].storage_offset());
    dispatch_dtype(x.dtype(), [&](auto z) { gather_core<decltype(z), int64_t>(ov, xv, 0, iv); });
    return;
  }
  dispatch_dtype(x.dtype(),
                 [&](auto z) { gather_core<decltype(z), int64_t>(k.outputs[0], x, d, index); });
}
void scatter(const KernelArgs& k) { scatter_cpu<false>(k); }
void scatter_add(const KernelArgs& k) { scatter_cpu<true>(k); }

// ---------------------------------------------------------------- index_select / index_add

void index_select(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(k.attrs), out.dim(), "index_select");
  Tensor iv = expand_index(k.inputs[1], out.sizes(), d);
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    dispatch_index(iv.dtype(),
                   [&](auto zi) { gather_core<T, decltype(zi)>(out, k.inputs[0], d, iv); });
  });
}
void index_add(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t d = wrap_dim(IndexAddAttrs::get<"dim">(k.attrs), out.dim(), "index_add");
  const Tensor& src = k.inputs[2];
  Tensor iv = expand_index(k.inputs[1], src.sizes(), d);
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    copy_into<T>(out, k.inputs[0]);
    const auto alpha = IndexAddAttrs::get<"alpha">(k.attrs).to<compute_t<T>>();
    dispatch_index(iv.dtype(),
                   [&](auto zi) { scatter_core<T, decltype(zi), true>(out, d, iv, src, alpha); });
  });
}

// ---------------------------------------------------------------- masked_select / nonzero

void masked_select(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &mask = k.inputs[1];
  DimVector b = broadcast_shapes(x.sizes(), mask.sizes());
  std::array<DimVector, 2> st{bcast_strides(x, b), bcast_strides(mask, b)};
  const bool* mp = static_cast<const bool*>(mask.data_ptr());
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* o = static_cast<T*>(k.outputs[0].data_ptr());
    int64_t w = 0;
    for_each_run<2>(b, st, INT64_MAX, [&](const auto& off, int64_t n, const auto& s) {
      for (int64_t j = 0; j < n; ++j)
        if (mp[off[1] + j * s[1]]) o[w++] = xp[off[0] + j * s[0]];
    });
  });
}
void masked_select_backward(const KernelArgs& k) {
  const Tensor &g = k.inputs[0], &mask = k.inputs[1], &out = k.outputs[0];
  std::array<DimVector, 2> st{out.strides().dims(), bcast_strides(mask, out.sizes())};
  const bool* mp = static_cast<const bool*>(mask.data_ptr());
  // count first: a too-short gradient is refused before out (maybe an out= tensor) is written
  int64_t selected = 0;
  for_each_run<2>(out.sizes(), st, INT64_MAX, [&](const auto& off, int64_t n, const auto& s) {
    for (int64_t j = 0; j < n; ++j) selected += mp[off[1] + j * s[1]];
  });
  OF_CHECK(selected <= g.sizes()[0],
           "[masked_select_backward] gradient has {} elements, fewer "
           "than the {} the mask selects",
           g.sizes()[0], selected);
  fill_any(out, 0.0);
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* gp = static_cast<const T*>(g.data_ptr());
    const int64_t gs = g.strides()[0];
    T* o = static_cast<T*>(out.data_ptr());
    int64_t r = 0;
    for_each_run<2>(out.sizes(), st, INT64_MAX, [&](const auto& off, int64_t n, const auto& s) {
      for (int64_t j = 0; j < n; ++j)
        if (mp[off[1] + j * s[1]]) o[off[0] + j * s[0]] = gp[r++ * gs];
    });
  });
}
void nonzero(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const int64_t nd = x.dim();
  int64_t* o = static_cast<int64_t*>(k.outputs[0].data_ptr());
  std::array<DimVector, 1> st{x.strides().dims()};
  DimVector idx(size_t(nd), 0);
  IntArrayRef shape = x.sizes();
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* p = static_cast<const T*>(x.data_ptr());
    for_each_run<1>(shape, st, INT64_MAX, [&](const auto& off, int64_t n, const auto& s) {
      // runs come in row-major order: idx holds the coordinates of the run's first element
      for (int64_t j = 0; j < n; ++j) {
        if (compute_t<T>(p[off[0] + j * s[0]]) != compute_t<T>(0)) {
          for (int64_t d = 0; d < nd - 1; ++d) *o++ = idx[d];
          if (nd > 0) *o++ = j;
        }
      }
      for (int64_t d = nd - 2; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    });
  });
}

// ---------------------------------------------------------------- one_hot / embedding

void one_hot(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  fill_any(out, 0.0);
  const int64_t c = OneHotAttrs::get<"num_classes">(k.attrs);
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  int64_t i = 0;
  for_each_index(k.inputs[0], [&](int64_t v) { o[i++ * c + v] = 1; });
}
void embedding(const KernelArgs& k) {
  const Tensor &w = k.inputs[0], &out = k.outputs[0];
  const Tensor idx = kernel_contiguous(k.inputs[1]);
  const int64_t n = idx.numel(), D = w.sizes()[1];
  if (n == 0 || D == 0) return;
  const int64_t ws0 = w.strides()[0], ws1 = w.strides()[1];
  dispatch_dtype(w.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* wp = static_cast<const T*>(w.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    dispatch_index(idx.dtype(), [&](auto zi) {
      using I = decltype(zi);
      const I* ip = static_cast<const I*>(idx.data_ptr());
      parallel_for(0, n, std::max<int64_t>(1, kParallelGrain / D), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const T* row = wp + int64_t(ip[i]) * ws0;
          T* o = op + i * D;
          if (ws1 == 1) std::copy(row, row + D, o);
          else
            for (int64_t j = 0; j < D; ++j) o[j] = row[j * ws1];
        }
      });
    });
  });
}

}  // namespace oneflow::cpu

// Shape and indexing ops: cat, gather/scatter(_add), index_select/index_add, masked_select,
// nonzero, one_hot, pad, tril/triu, flip, roll, repeat, sort/topk, embedding; plus the
// compositions built from them and from views (stack, split, chunk, unbind, take_along_dim,
// repeat_interleave, argsort).
// NOTE [Index validation]: every index/mask value is checked inside infer_meta (on the host,
// for CPU tensors), so a bad index raises of::Error before any output is allocated or written.
// NOTE [Scatter determinism]: accumulating kernels iterate whole lines along the scattered dim
// on one thread (lines are split across threads), so duplicate indices add in index order and
// results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "autograd/node.h"
#include "global/global.h"
#include "global/rules.h"
#include "cpu/loops.h"
#include "dispatch.h"
#include "ops/checks.h"

namespace oneflow {
namespace {

// ---------------------------------------------------------------- loop helpers

int64_t prod_of(IntArrayRef s, size_t b = 0, size_t e = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = b; i < std::min(e, s.size()); ++i) p *= s[i];
  return p;
}

// Calls f(offsets, n, inner_strides) for every run along the last dim of `shape` (row-major),
// with per-operand element offsets computed from `st` (strides in elements, one list per
// operand, each of shape's rank). Runs are split over the thread pool unless grain is INT64_MAX.
template <size_t K, class F>
void for_each_run(IntArrayRef shape, const std::array<DimVector, K>& st, int64_t grain, F&& f) {
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
DimVector move_last(IntArrayRef v, int64_t d) {
  DimVector r;
  for (int64_t i = 0; i < int64_t(v.size()); ++i)
    if (i != d) r.push_back(v[i]);
  r.push_back(v[d]);
  return r;
}

// Strides of t broadcast to `shape` (0 on leading and broadcast dims), in elements.
DimVector bcast_strides(const Tensor& t, IntArrayRef shape) {
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

void check_index_dtype(const Tensor& idx, const char* op, bool allow_int32,
                       const char* what = "index") {
  if (idx.dtype() == kInt64 || (allow_int32 && idx.dtype() == kInt32)) return;
  fail("[{}] expected {} to have dtype int64{}, got {}", op, what, allow_int32 ? " or int32" : "",
       dtype_name(idx.dtype()));
}

// Every value of `index` must lie in [0, size) (checked on the host for CPU tensors). A global
// index is checked piece by piece when the op runs on the local pieces (its logical values are
// on no one rank).
void check_bounds(const Tensor& index, int64_t size, const char* op, int64_t dim) {
  if (!index.is_cpu() || index.numel() == 0 || index.is_global()) return;
  for_each_index(index, [&](int64_t v) {
    if (v < 0 || v >= size)
      fail("[{}] index {} is out of bounds for dimension {} with size {}", op, v, dim, size);
  });
}

int64_t size_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }
int64_t stride_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 0 : t.strides()[d]; }

template <class T> void copy_into(const Tensor& dst, const Tensor& src) {
  cpu::cpu_kernel<T, T>(dst, {&src}, [](compute_t<T> v) { return v; });
}
void copy_any(const Tensor& dst, const Tensor& src) {
  dispatch_dtype(dst.dtype(), [&](auto z) { copy_into<decltype(z)>(dst, src); });
}
void fill_any(const Tensor& dst, double v) {
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
void gather_core(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
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
void scatter_core(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
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
Tensor expand_index(const Tensor& index, IntArrayRef shape, int64_t dim) {
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

// ---------------------------------------------------------------- cat

// Shapes must agree except along dim; 0-d tensors are rejected.
void check_cat(const TensorList& ts, int64_t d) {
  OF_CHECK(!ts.empty(), "[cat] expected a non-empty list of tensors");
  const Tensor& f = ts[0];
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    OF_CHECK(t.defined(), "[cat] tensor number {} in the list is undefined", i);
    OF_CHECK(t.dim() > 0, "[cat] zero-dimensional tensor (at position {}) cannot be concatenated",
             i);
    OF_CHECK(t.dim() == f.dim(),
             "[cat] tensors must have the same number of dimensions: got {} ({}) and {} ({}) for "
             "tensor number {}",
             f.dim(), shape_str(f.sizes()), t.dim(), shape_str(t.sizes()), i);
    OF_CHECK(t.device() == f.device(),
             "[cat] expected all tensors on the same device, got {} and {}", f.device().str(),
             t.device().str());
    for (int64_t k = 0; k < t.dim(); ++k)
      if (k != d && t.sizes()[k] != f.sizes()[k])
        fail(
            "[cat] sizes of tensors must match except in dimension {}: expected size {} but got "
            "size {} for tensor number {} in the list (shapes {} and {})",
            d, f.sizes()[k], t.sizes()[k], i, shape_str(f.sizes()), shape_str(t.sizes()));
  }
}
void cat_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  OF_CHECK(!in.empty(), "[cat] expected a non-empty list of tensors");
  const int64_t d = wrap_dim(a.i(0), in[0].dim(), "cat");
  check_cat(in, d);
  DimVector sz = in[0].sizes().dims();
  sz[d] = 0;
  for (const Tensor& t : in) {
    OF_CHECK(t.dtype() == in[0].dtype(), "[cat] internal error: inputs must share a dtype");
    sz[d] += t.sizes()[d];
  }
  out.push_back({sz, {}, 0, in[0].dtype(), in[0].device()});
}
void cat_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t d = wrap_dim(k.attrs.i(0), out.dim(), "cat");
  int64_t off = 0;
  for (const Tensor& t : k.inputs) {
    if (t.numel() > 0) {
      Tensor v =
          make_view(out, t.sizes(), out.strides(), out.storage_offset() + off * out.strides()[d]);
      copy_any(v, t);
    }
    off += t.sizes()[d];
  }
}
TensorList cat_vjp(const VjpCtx& c, const TensorList& g) {
  const int64_t d = wrap_dim(c.attrs().i(0), g[0].dim(), "cat");
  TensorList r;
  int64_t off = 0;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const int64_t n = c.input_sizes(i)[d];
    r.push_back(c.needs_input_grad(i) ? g[0].narrow(d, off, n) : Tensor());
    off += n;
  }
  return r;
}

// ---------------------------------------------------------------- gather / scatter

void gather_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor &x = in[0], &index = in[1];
  check_index_dtype(index, "gather", false);
  const int64_t d = wrap_dim(a.i(0), x.dim(), "gather");
  OF_CHECK(index.dim() == x.dim() || (index.dim() <= 1 && x.dim() <= 1),
           "[gather] index tensor must have the same number of dimensions as input tensor: "
           "input {} vs index {}",
           shape_str(x.sizes()), shape_str(index.sizes()));
  for (int64_t k = 0; k < index.dim() && x.dim() > 0; ++k)
    if (k != d && index.sizes()[k] > x.sizes()[k])
      fail(
          "[gather] size of index {} must not exceed the input size {} in dimension {} (only "
          "dimension {} may differ)",
          shape_str(index.sizes()), shape_str(x.sizes()), k, d);
  check_bounds(index, size_at(x, d), "gather", d);
  out.push_back({index.sizes().dims(), {}, 0, x.dtype(), x.device()});
}
void gather_cpu(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &index = k.inputs[1];
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(k.attrs.i(0), x.dim(), "gather");
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

// Zero-pads `t` at the end of every dim up to `sizes` (same rank).
Tensor pad_to(const Tensor& t, IntArrayRef sizes) {
  if (t.sizes() == sizes) return t;
  DimVector pads;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    pads.push_back(0);
    pads.push_back(sizes[d] - t.sizes()[d]);
  }
  return pad(t, pads);
}

TensorList gather_vjp(const VjpCtx& c, const TensorList& g) {
  const int64_t d = c.attrs().i(0);
  Tensor z = global::zeros_shaped_like(c.input_sizes(0), g[0]);
  return {scatter_add(z, d, c.input(1), g[0]), Tensor()};
}

void scatter_meta_common(const TensorList& in, const Attrs& a, MetaList& out, const char* op) {
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  check_index_dtype(index, op, false);
  const int64_t d = wrap_dim(a.i(0), x.dim(), op);
  OF_CHECK(src.dtype() == x.dtype(),
           "[{}] expected self.dtype to be equal to src.dtype: got {} and {}", op,
           dtype_name(x.dtype()), dtype_name(src.dtype()));
  OF_CHECK(index.dim() == x.dim() && src.dim() == x.dim(),
           "[{}] index {} and src {} must have the same number of dimensions as self {}", op,
           shape_str(index.sizes()), shape_str(src.sizes()), shape_str(x.sizes()));
  for (int64_t k = 0; k < index.dim(); ++k) {
    if (index.sizes()[k] > src.sizes()[k])
      fail("[{}] expected index {} to be no larger than src {} in dimension {}", op,
           shape_str(index.sizes()), shape_str(src.sizes()), k);
    if (k != d && index.sizes()[k] > x.sizes()[k])
      fail(
          "[{}] expected index {} to be no larger than self {} apart from dimension {} (dimension "
          "{})",
          op, shape_str(index.sizes()), shape_str(x.sizes()), d, k);
  }
  check_bounds(index, size_at(x, d), op, d);
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}
void scatter_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  scatter_meta_common(in, a, out, "scatter");
}
void scatter_add_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  scatter_meta_common(in, a, out, "scatter_add");
}
template <bool Add> void scatter_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const Tensor& self = k.inputs[0];
  const int64_t d = wrap_dim(k.attrs.i(0), out.dim(), "scatter");
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    // a traced graph may give out the buffer of a dying `self` (kInplaceOk): nothing to copy
    if (out.data_ptr() != self.data_ptr() || !(out.strides() == self.strides()))
      copy_into<T>(out, self);
    scatter_core<T, int64_t, Add>(out, d, k.inputs[1], k.inputs[2], compute_t<T>(1));
  });
}
TensorList scatter_vjp(const VjpCtx& c, const TensorList& g) {
  const int64_t d = c.attrs().i(0);
  Tensor index = c.input(1);
  Tensor gx, gs;
  if (c.needs_input_grad(0)) gx = scatter(g[0], d, index, Scalar(0.0));
  if (c.needs_input_grad(2)) gs = pad_to(g[0].gather(d, index), c.input_sizes(2));
  return {gx, Tensor(), gs};
}
TensorList scatter_add_vjp(const VjpCtx& c, const TensorList& g) {
  const int64_t d = c.attrs().i(0);
  Tensor gs;
  if (c.needs_input_grad(2)) gs = pad_to(g[0].gather(d, c.input(1)), c.input_sizes(2));
  return {g[0], Tensor(), gs};
}

// ---------------------------------------------------------------- index_select / index_add

void check_index_1d(const Tensor& index, const char* op) {
  check_index_dtype(index, op, true);
  OF_CHECK(index.dim() <= 1, "[{}] index must be a 0-d or 1-D tensor, got shape {}", op,
           shape_str(index.sizes()));
}
void index_select_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor &x = in[0], &index = in[1];
  check_index_1d(index, "index_select");
  OF_CHECK(x.dim() > 0, "[index_select] input must have at least one dimension");
  const int64_t d = wrap_dim(a.i(0), x.dim(), "index_select");
  check_bounds(index, x.sizes()[d], "index_select", d);
  DimVector sz = x.sizes().dims();
  sz[d] = index.numel();
  out.push_back({sz, {}, 0, x.dtype(), x.device()});
}
void index_select_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t d = wrap_dim(k.attrs.i(0), out.dim(), "index_select");
  Tensor iv = expand_index(k.inputs[1], out.sizes(), d);
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    dispatch_index(iv.dtype(),
                   [&](auto zi) { gather_core<T, decltype(zi)>(out, k.inputs[0], d, iv); });
  });
}
TensorList index_select_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = global::broadcast_zeros_like(c.input_sizes(0), g[0]);
  return {index_add(z, c.attrs().i(0), c.input(1), g[0]), Tensor()};
}

void index_add_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  check_index_1d(index, "index_add");
  OF_CHECK(x.dim() > 0, "[index_add] input must have at least one dimension");
  const int64_t d = wrap_dim(a.i(0), x.dim(), "index_add");
  OF_CHECK(src.dtype() == x.dtype(),
           "[index_add] self ({}) and source ({}) must have the same dtype", dtype_name(x.dtype()),
           dtype_name(src.dtype()));
  bool ok = src.dim() == x.dim() && src.sizes()[d] == index.numel();
  for (int64_t k = 0; ok && k < x.dim(); ++k)
    if (k != d && src.sizes()[k] != x.sizes()[k]) ok = false;
  OF_CHECK(ok,
           "[index_add] source {} must have the shape of self {} with dimension {} of size {} "
           "(the number of indices)",
           shape_str(src.sizes()), shape_str(x.sizes()), d, index.numel());
  check_bounds(index, x.sizes()[d], "index_add", d);
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}
void index_add_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t d = wrap_dim(k.attrs.i(0), out.dim(), "index_add");
  const Tensor& src = k.inputs[2];
  Tensor iv = expand_index(k.inputs[1], src.sizes(), d);
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    copy_into<T>(out, k.inputs[0]);
    const auto alpha = k.attrs.scalar(1).to<compute_t<T>>();
    dispatch_index(iv.dtype(),
                   [&](auto zi) { scatter_core<T, decltype(zi), true>(out, d, iv, src, alpha); });
  });
}
TensorList index_add_vjp(const VjpCtx& c, const TensorList& g) {
  const Scalar& alpha = c.attrs().scalar(1);
  Tensor gs;
  if (c.needs_input_grad(2)) {
    gs = g[0].index_select(c.attrs().i(0), c.input(1));
    if (alpha.to_double() != 1.0) gs = gs * alpha;
  }
  return {g[0], Tensor(), gs};
}

// ---------------------------------------------------------------- masked_select / nonzero

// The nonzero elements of a device tensor: a reduction and one copy to the host (the ops that
// call it have the kSyncsHost trait).
int64_t device_count_nonzero(const Tensor& t) {
  NoGradGuard no_grad;
  return t.numel() == 0 ? 0 : (t != 0).sum().item<int64_t>();
}

void masked_select_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor &x = in[0], &mask = in[1];
  OF_CHECK(mask.dtype() == kBool, "[masked_select] expected a bool mask, got {}",
           dtype_name(mask.dtype()));
  OF_CHECK(mask.device() == x.device(),
           "[masked_select] expected the mask on the input's device {}, "
           "got {}",
           x.device().str(), mask.device().str());
  DimVector b = broadcast_shapes(x.sizes(), mask.sizes());
  int64_t count = 0;
  if (mask.numel() > 0 && !mask.is_cpu()) {
    count = device_count_nonzero(mask) * (prod_of(b) / mask.numel());
  } else if (mask.numel() > 0) {
    std::array<DimVector, 1> st{mask.strides().dims()};
    const bool* mp = static_cast<const bool*>(mask.data_ptr());
    for_each_run<1>(mask.sizes(), st, INT64_MAX, [&](const auto& off, int64_t n, const auto& s) {
      for (int64_t j = 0; j < n; ++j) count += mp[off[0] + j * s[0]];
    });
    count *= prod_of(b) / mask.numel();
  }
  out.push_back({{count}, {}, 0, x.dtype(), x.device()});
}
void masked_select_cpu(const KernelArgs& k) {
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
TensorList masked_select_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor mask = c.input(1);
  DimVector b = broadcast_shapes(c.input_sizes(0), mask.sizes());
  Tensor full = dispatch1(OF_OP("masked_select_backward"), {g[0], mask}, {b});
  return {sum_to_size(full, c.input_sizes(0)), Tensor()};
}
// masked_select_backward(grad [n], mask; shape): zeros of `shape` with grad at the true places.
// Dispatched directly (or from a loaded graph) it sees any inputs: the mask must broadcast to
// `shape` and the gradient be 1-D, or the kernel's strides would walk outside the mask.
void msb_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor &g = in[0], &mask = in[1];
  const DimVector& size = a.ints(0);
  OF_CHECK(mask.device() == g.device(),
           "[masked_select_backward] expected the mask on the "
           "gradient's device {}, got {}",
           g.device().str(), mask.device().str());
  OF_CHECK(mask.dtype() == kBool, "[masked_select_backward] expected a bool mask, got {}",
           dtype_name(mask.dtype()));
  OF_CHECK(g.dim() == 1, "[masked_select_backward] expected a 1-D gradient, got shape {}",
           shape_str(g.sizes()));
  for (int64_t d : size)
    OF_CHECK(d >= 0, "[masked_select_backward] negative size in shape {}", shape_str(size));
  bool fits = mask.dim() <= int64_t(size.size());
  for (int64_t d = 0; fits && d < mask.dim(); ++d) {
    const int64_t m = mask.sizes()[size_t(d)], t = size[size.size() - size_t(mask.dim() - d)];
    fits = m == 1 || m == t;
  }
  OF_CHECK(fits, "[masked_select_backward] mask of shape {} cannot be broadcast to shape {}",
           shape_str(mask.sizes()), shape_str(size));
  out.push_back({size, {}, 0, g.dtype(), g.device()});
}
void msb_cpu(const KernelArgs& k) {
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
TensorList msb_vjp(const VjpCtx& c, const TensorList& g) {
  return {masked_select(g[0], c.input(1)), Tensor()};
}

void nonzero_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& x = in[0];
  if (!x.is_cpu()) {
    out.push_back({{device_count_nonzero(x), x.dim()}, {}, 0, kInt64, x.device()});
    return;
  }
  int64_t count = 0;
  std::array<DimVector, 1> st{x.strides().dims()};
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* p = static_cast<const T*>(x.data_ptr());
    for_each_run<1>(x.sizes(), st, INT64_MAX, [&](const auto& off, int64_t n, const auto& s) {
      for (int64_t j = 0; j < n; ++j)
        count += compute_t<T>(p[off[0] + j * s[0]]) != compute_t<T>(0);
    });
  });
  out.push_back({{count, x.dim()}, {}, 0, kInt64, x.device()});
}
void nonzero_cpu(const KernelArgs& k) {
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

// ---------------------------------------------------------------- one_hot

void one_hot_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  OF_CHECK(x.dtype() == kInt64,
           "[one_hot] is only applicable to index tensors of dtype int64, got {}",
           dtype_name(x.dtype()));
  const int64_t c = a.i(0);
  OF_CHECK(c >= 0, "[one_hot] num_classes must be positive or -1, got {}", c);
  if (x.is_cpu() && !x.is_global() && x.numel() > 0)  // global: checked on the pieces
    for_each_index(x, [&](int64_t v) {
      if (v < 0) fail("[one_hot] class values must be non-negative, got {}", v);
      if (v >= c) fail("[one_hot] class value {} must be smaller than num_classes {}", v, c);
    });
  DimVector sz = x.sizes().dims();
  sz.push_back(c);
  out.push_back({sz, {}, 0, kInt64, x.device()});
}
void one_hot_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  fill_any(out, 0.0);
  const int64_t c = k.attrs.i(0);
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  int64_t i = 0;
  for_each_index(k.inputs[0], [&](int64_t v) { o[i++ * c + v] = 1; });
}

// ---------------------------------------------------------------- pad

enum class PadMode { kConstant, kReflect, kReplicate, kCircular };
PadMode pad_mode(std::string_view m) {
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "replicate") return PadMode::kReplicate;
  if (m == "circular") return PadMode::kCircular;
  fail("[pad] unknown padding mode '{}'; expected 'constant', 'reflect', 'replicate' or 'circular'",
       m);
}

// Output sizes of pad; validates the pads against the mode.
DimVector pad_sizes(IntArrayRef in, const DimVector& pads, PadMode mode) {
  const int64_t nd = int64_t(in.size());
  OF_CHECK(pads.size() % 2 == 0, "[pad] padding length must be divisible by 2, got {}",
           pads.size());
  const int64_t np = int64_t(pads.size()) / 2;
  OF_CHECK(np <= nd, "[pad] padding length {} is too large for an input with {} dimensions {}",
           pads.size(), nd, shape_str(in));
  DimVector out = in.dims();
  for (int64_t p = 0; p < np; ++p) {
    const int64_t d = nd - 1 - p, l = pads[2 * p], r = pads[2 * p + 1], n = in[d];
    if (mode != PadMode::kConstant) {
      OF_CHECK(l >= 0 && r >= 0,
               "[pad] negative padding ({}, {}) at dimension {} is only supported "
               "in constant mode",
               l, r, d);
      if (mode == PadMode::kReflect)
        OF_CHECK(l < n && r < n,
                 "[pad] reflect padding ({}, {}) at dimension {} must be smaller than "
                 "the dimension's size {} (input {})",
                 l, r, d, n, shape_str(in));
      if (mode == PadMode::kReplicate)
        OF_CHECK(n > 0 || (l == 0 && r == 0),
                 "[pad] replicate padding needs a non-empty dimension {} "
                 "(input {})",
                 d, shape_str(in));
      if (mode == PadMode::kCircular)
        OF_CHECK(l <= n && r <= n,
                 "[pad] circular padding ({}, {}) at dimension {} must not exceed "
                 "the dimension's size {} (input {})",
                 l, r, d, n, shape_str(in));
    }
    OF_CHECK(!__builtin_add_overflow(n, l, &out[d]) && !__builtin_add_overflow(out[d], r, &out[d]),
             "[pad] padding ({}, {}) of dimension {} of input {} overflows its size", l, r, d,
             shape_str(in));
    OF_CHECK(out[d] >= 0, "[pad] padding ({}, {}) makes dimension {} of input {} negative ({})", l,
             r, d, shape_str(in), out[d]);
  }
  return out;
}

Maps pad_maps(IntArrayRef in, const DimVector& pads, PadMode mode) {
  const int64_t nd = int64_t(in.size()), np = int64_t(pads.size()) / 2;
  Maps maps(static_cast<size_t>(nd));
  for (int64_t p = 0; p < np; ++p) {
    const int64_t d = nd - 1 - p, l = pads[2 * p], r = pads[2 * p + 1], n = in[d];
    if (l == 0 && r == 0) continue;
    auto& m = maps[d];
    m.resize(size_t(n + l + r));
    for (int64_t i = 0; i < n + l + r; ++i) {
      int64_t j = i - l;
      switch (mode) {
        case PadMode::kReflect:
          if (j < 0) j = -j;
          if (j >= n) j = 2 * (n - 1) - j;
          break;
        case PadMode::kReplicate:
          j = std::clamp<int64_t>(j, 0, n - 1);
          break;
        case PadMode::kCircular:
          j = ((j % n) + n) % n;
          break;
        case PadMode::kConstant:
          break;
      }
      m[i] = j;
    }
  }
  return maps;
}

void pad_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  DimVector sz = pad_sizes(in[0].sizes(), a.ints(0), pad_mode(a.str(1)));
  out.push_back({sz, {}, 0, in[0].dtype(), in[0].device()});
}
void pad_cpu(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &out = k.outputs[0];
  const DimVector& pads = k.attrs.ints(0);
  const PadMode mode = pad_mode(k.attrs.str(1));
  // an empty output has nothing to map: its other dims may be huge (fuzz_ops: the index maps
  // of a [0, 2^50] output were allocated)
  if (out.numel() == 0) return;
  if (mode != PadMode::kConstant) {
    Maps maps = pad_maps(x.sizes(), pads, mode);
    dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(out, x, maps); });
    return;
  }
  fill_any(out, k.attrs.f(2));
  const int64_t nd = x.dim(), np = int64_t(pads.size()) / 2;
  DimVector len = x.sizes().dims();
  int64_t xoff = x.storage_offset(), ooff = out.storage_offset();
  for (int64_t p = 0; p < np; ++p) {
    const int64_t d = nd - 1 - p, l = pads[2 * p], r = pads[2 * p + 1];
    len[d] = x.sizes()[d] + std::min<int64_t>(l, 0) + std::min<int64_t>(r, 0);
    if (len[d] <= 0) return;
    xoff += std::max<int64_t>(-l, 0) * x.strides()[d];
    ooff += std::max<int64_t>(l, 0) * out.strides()[d];
  }
  if (prod_of(len) == 0) return;
  Tensor src = make_view(x, len, x.strides(), xoff);
  Tensor dst = make_view(out, len, out.strides(), ooff);
  copy_any(dst, src);
}
TensorList pad_vjp(const VjpCtx& c, const TensorList& g) {
  const DimVector& pads = c.attrs().ints(0);
  const std::string& mode = c.attrs().str(1);
  if (pad_mode(mode) == PadMode::kConstant) {
    DimVector neg;
    for (int64_t p : pads) neg.push_back(-p);
    return {pad(g[0], neg, "constant", 0.0)};
  }
  return {dispatch1(OF_OP("pad_backward"), {g[0]}, {c.input_sizes(0).dims(), pads, mode})};
}
// pad_backward(grad; input_size, pads, mode): the adjoint of reflect/replicate/circular pad.
void pad_backward_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const DimVector& isz = a.ints(0);
  DimVector osz = pad_sizes(isz, a.ints(1), pad_mode(a.str(2)));
  OF_CHECK(in[0].sizes() == IntArrayRef(osz),
           "[pad_backward] gradient shape {} does not match the "
           "padded shape {}",
           shape_str(in[0].sizes()), shape_str(osz));
  out.push_back({isz, {}, 0, in[0].dtype(), in[0].device()});
}
void pad_backward_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  fill_any(out, 0.0);
  if (out.numel() == 0 || k.inputs[0].numel() == 0) return;  // nothing to map (see pad_cpu)
  Maps maps = pad_maps(out.sizes(), k.attrs.ints(1), pad_mode(k.attrs.str(2)));
  dispatch_dtype(out.dtype(), [&](auto z) { mapped_add<decltype(z)>(out, k.inputs[0], maps); });
}
TensorList pad_backward_vjp(const VjpCtx& c, const TensorList& g) {
  return {pad(g[0], c.attrs().ints(1), c.attrs().str(2))};
}

// ---------------------------------------------------------------- tril / triu

template <bool Lower> void tri_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& x = in[0];
  OF_CHECK(x.dim() >= 2, "[{}] input tensor must have at least 2 dimensions, got shape {}",
           Lower ? "tril" : "triu", shape_str(x.sizes()));
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}
template <bool Lower> void tri_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t diag = k.attrs.i(0);
  const int64_t nd = out.dim(), R = out.sizes()[nd - 2], C = out.sizes()[nd - 1];
  DimVector shape = out.sizes().dims();
  std::array<DimVector, 2> st{out.strides().dims(), k.inputs[0].strides().dims()};
  // iterate [batch..., R] rows by folding C into the run
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    T* op = static_cast<T*>(out.data_ptr());
    const T* xp = static_cast<const T*>(k.inputs[0].data_ptr());
    const int64_t rows = out.numel() / std::max<int64_t>(C, 1);
    if (out.numel() == 0) return;
    const int64_t xr = st[1][nd - 2], xc = st[1][nd - 1];
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / C), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        // batch offset of x from the row's batch index
        int64_t rem = row / R, xoff = 0;
        for (int64_t d = nd - 3; d >= 0; --d) {
          xoff += (rem % shape[d]) * st[1][d];
          rem /= shape[d];
        }
        const int64_t i = row % R;
        const T* xrow = xp + xoff + i * xr;
        T* o = op + row * C;
        for (int64_t j = 0; j < C; ++j) {
          const bool keep = Lower ? (j - i <= diag) : (j - i >= diag);
          o[j] = keep ? xrow[j * xc] : T(compute_t<T>(0));
        }
      }
    });
  });
}
TensorList tril_vjp(const VjpCtx& c, const TensorList& g) { return {tril(g[0], c.attrs().i(0))}; }
TensorList triu_vjp(const VjpCtx& c, const TensorList& g) { return {triu(g[0], c.attrs().i(0))}; }

// ---------------------------------------------------------------- flip / roll / repeat

DimVector flip_dims(const Tensor& x, const DimVector& dims) {
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
void flip_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  flip_dims(in[0], a.ints(0));
  out.push_back({in[0].sizes().dims(), {}, 0, in[0].dtype(), in[0].device()});
}
void flip_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  Maps maps(size_t(x.dim()));
  if (x.dim() > 0)
    for (int64_t d : flip_dims(x, k.attrs.ints(0))) {
      const int64_t n = x.sizes()[d];
      maps[d].resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) maps[d][i] = n - 1 - i;
    }
  dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(k.outputs[0], x, maps); });
}
TensorList flip_vjp(const VjpCtx& c, const TensorList& g) {
  return {flip(g[0], c.attrs().ints(0))};
}

void roll_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const DimVector &shifts = a.ints(0), &dims = a.ints(1);
  OF_CHECK(shifts.size() == dims.size(),
           "[roll] shifts and dimensions must align: got {} shifts and "
           "{} dims",
           shifts.size(), dims.size());
  for (int64_t d : dims) wrap_dim(d, x.dim(), "roll");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}
void roll_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const DimVector &shifts = k.attrs.ints(0), &dims = k.attrs.ints(1);
  // shifts summed modulo each size: any int64 shifts (a loaded graph's) cannot overflow
  DimVector total(size_t(std::max<int64_t>(x.dim(), 1)), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "roll"), n = x.dim() ? x.sizes()[d] : 1;
    if (n) total[d] = (total[d] + shifts[i] % n) % n;
  }
  Maps maps(size_t(x.dim()));
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t n = x.sizes()[d];
    if (n == 0 || total[d] == 0) continue;
    const int64_t s = (total[d] + n) % n;
    maps[d].resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) maps[d][i] = (i - s + n) % n;
  }
  dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(k.outputs[0], x, maps); });
}
TensorList roll_vjp(const VjpCtx& c, const TensorList& g) {
  const IntArrayRef sz = c.input_sizes(0);
  const DimVector& dims = c.attrs().ints(1);
  DimVector neg;  // -(shift % size): -INT64_MIN would overflow
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = sz.empty() ? 1 : sz[size_t(wrap_dim(dims[i], int64_t(sz.size()), "roll"))];
    neg.push_back(n ? -(c.attrs().ints(0)[i] % n) : 0);
  }
  return {roll(g[0], neg, c.attrs().ints(1))};
}

void repeat_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const DimVector& r = a.ints(0);
  OF_CHECK(int64_t(r.size()) >= x.dim(),
           "[repeat] number of dimensions of repeat dims {} can not be "
           "smaller than number of dimensions of tensor {}",
           shape_str(r), shape_str(x.sizes()));
  DimVector sz(r.size());
  const int64_t lead = int64_t(r.size()) - x.dim();
  for (int64_t d = 0; d < int64_t(r.size()); ++d) {
    OF_CHECK(r[d] >= 0, "[repeat] repeats must be non-negative, got {}", shape_str(r));
    OF_CHECK(!__builtin_mul_overflow(r[d], d < lead ? 1 : x.sizes()[d - lead], &sz[d]),
             "[repeat] repeats {} of a tensor of shape {} overflow the size of a dimension",
             shape_str(r), shape_str(x.sizes()));
  }
  checked_numel(sz, "repeat");
  out.push_back({sz, {}, 0, x.dtype(), x.device()});
}
void repeat_cpu(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &out = k.outputs[0];
  if (out.numel() == 0) return;  // nothing to map (its other dims may be huge: fuzz_ops)
  const int64_t nd = out.dim(), lead = nd - x.dim();
  DimVector xs(size_t(nd), 0), xsz(size_t(nd), 1);
  for (int64_t d = lead; d < nd; ++d) {
    xs[d] = x.strides()[d - lead];
    xsz[d] = x.sizes()[d - lead];
  }
  Tensor xv = make_view(x, xsz, xs, x.storage_offset());
  Maps maps(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) {
    if (out.sizes()[d] == xsz[d]) continue;
    maps[d].resize(size_t(out.sizes()[d]));
    for (int64_t i = 0; i < out.sizes()[d]; ++i) maps[d][i] = i % xsz[d];
  }
  dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(out, xv, maps); });
}
TensorList repeat_vjp(const VjpCtx& c, const TensorList& g) {
  const DimVector& r = c.attrs().ints(0);
  IntArrayRef in = c.input_sizes(0);
  const int64_t nd = int64_t(r.size()), lead = nd - int64_t(in.size());
  DimVector split, sum_dims;
  for (int64_t d = 0; d < nd; ++d) {
    split.push_back(r[d]);
    split.push_back(d < lead ? 1 : in[d - lead]);
    sum_dims.push_back(2 * d);
  }
  return {g[0].reshape(split).sum(sum_dims).reshape(in)};
}

// ---------------------------------------------------------------- sort / topk

template <class C> bool nan_v(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}
// Strict orders with NaN as the largest value (PyTorch's convention).
template <class C> bool less_nan(C a, C b) { return nan_v(b) ? !nan_v(a) : a < b; }

// Calls f(in_offset, out_offset, stride) for every line along dim d of a contiguous tensor of
// `shape` (the output has n_out elements along d); lines are split over threads.
template <class F> void for_each_line(IntArrayRef shape, int64_t d, int64_t n_out, F&& f) {
  const int64_t outer = prod_of(shape, 0, size_t(d)), inner = prod_of(shape, size_t(d + 1));
  const int64_t n = shape[d];
  parallel_for(0, outer * inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n)),
               [&](int64_t b, int64_t e) {
                 for (int64_t l = b; l < e; ++l) {
                   const int64_t o = l / inner, i = l % inner;
                   f(o * n * inner + i, o * n_out * inner + i, inner);
                 }
               });
}

void sort_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  wrap_dim(a.i(0), x.dim(), "sort");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({x.sizes().dims(), {}, 0, kInt64, x.device()});
}
void sort_cpu(const KernelArgs& k) {
  Tensor x = kernel_contiguous(k.inputs[0]);
  const bool desc = k.attrs.b(1);
  if (x.numel() == 0) return;
  if (x.dim() == 0) x = make_view(x, {1}, {1}, x.storage_offset());
  const int64_t d = wrap_dim(k.attrs.i(0), x.dim(), "sort");
  const int64_t n = x.sizes()[d];
  int64_t* ip = static_cast<int64_t*>(k.outputs[1].data_ptr());
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(k.outputs[0].data_ptr());
    for_each_line(x.sizes(), d, n, [&](int64_t xo, int64_t oo, int64_t st) {
      std::vector<std::pair<C, int64_t>> buf(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) buf[j] = {C(xp[xo + j * st]), j};
      if (desc)
        std::stable_sort(buf.begin(), buf.end(),
                         [](const auto& a, const auto& b) { return less_nan(b.first, a.first); });
      else
        std::stable_sort(buf.begin(), buf.end(),
                         [](const auto& a, const auto& b) { return less_nan(a.first, b.first); });
      for (int64_t j = 0; j < n; ++j) {
        vp[oo + j * st] = T(buf[j].first);
        ip[oo + j * st] = buf[j].second;
      }
    });
  });
}
TensorList sort_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = global::zeros_shaped_like(c.input_sizes(0), g[0]);
  return {z.scatter(c.attrs().i(0), c.output(1), g[0])};
}

void topk_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const int64_t d = wrap_dim(a.i(1), x.dim(), "topk");
  const int64_t k = a.i(0), n = size_at(x, d);
  OF_CHECK(k >= 0 && k <= n,
           "[topk] k ({}) is out of range for dimension {} with size {} (input {})", k, d, n,
           shape_str(x.sizes()));
  DimVector sz = x.sizes().dims();
  if (x.dim() > 0) sz[d] = k;
  out.push_back({sz, {}, 0, x.dtype(), x.device()});
  out.push_back({sz, {}, 0, kInt64, x.device()});
}
void topk_cpu(const KernelArgs& k) {
  Tensor x = kernel_contiguous(k.inputs[0]);
  const int64_t kk = k.attrs.i(0);
  const bool largest = k.attrs.b(2);
  if (k.outputs[0].numel() == 0) return;
  if (x.dim() == 0) x = make_view(x, {1}, {1}, x.storage_offset());
  const int64_t d = wrap_dim(k.attrs.i(1), x.dim(), "topk");
  const int64_t n = x.sizes()[d];
  int64_t* ip = static_cast<int64_t*>(k.outputs[1].data_ptr());
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(k.outputs[0].data_ptr());
    for_each_line(x.sizes(), d, kk, [&](int64_t xo, int64_t oo, int64_t st) {
      std::vector<std::pair<C, int64_t>> buf(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) buf[j] = {C(xp[xo + j * st]), j};
      auto cmp = [largest](const auto& a, const auto& b) {
        if (largest ? less_nan(b.first, a.first) : less_nan(a.first, b.first)) return true;
        if (largest ? less_nan(a.first, b.first) : less_nan(b.first, a.first)) return false;
        return a.second < b.second;  // ties: lower index first (deterministic)
      };
      std::partial_sort(buf.begin(), buf.begin() + kk, buf.end(), cmp);
      for (int64_t j = 0; j < kk; ++j) {
        vp[oo + j * st] = T(buf[j].first);
        ip[oo + j * st] = buf[j].second;
      }
    });
  });
}
TensorList topk_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = global::zeros_shaped_like(c.input_sizes(0), g[0]);
  if (z.dim() == 0) return {g[0].numel() ? g[0].reshape({}) : z};
  return {z.scatter(c.attrs().i(1), c.output(1), g[0])};
}

// ---------------------------------------------------------------- embedding

void embedding_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor &w = in[0], &idx = in[1];
  OF_CHECK(w.dim() == 2,
           "[embedding] weight must be 2-D [num_embeddings, embedding_dim], got shape {}",
           shape_str(w.sizes()));
  check_index_dtype(idx, "embedding", true, "indices");
  const int64_t num = w.sizes()[0];
  if (idx.is_cpu() && !idx.is_global() && idx.numel() > 0)  // global: checked on the pieces
    for_each_index(idx, [&](int64_t v) {
      if (v < 0 || v >= num)
        fail("[embedding] index {} is out of range for weight of shape {} ({} rows)", v,
             shape_str(w.sizes()), num);
    });
  DimVector sz = idx.sizes().dims();
  sz.push_back(w.sizes()[1]);
  out.push_back({sz, {}, 0, w.dtype(), w.device()});
}
void embedding_cpu(const KernelArgs& k) {
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
TensorList embedding_vjp(const VjpCtx& c, const TensorList& g) {
  IntArrayRef wsz = c.input_sizes(0);
  const int64_t pad_idx = c.attrs().i(0);
  const bool by_freq = c.attrs().b(1);
  Tensor idx = c.input(1).reshape({-1});
  Tensor gf = g[0].reshape({-1, wsz[1]});
  if (pad_idx >= 0) gf = masked_fill(gf, (idx == pad_idx).unsqueeze(1), 0.0);
  if (by_freq) {
    Tensor counts =
        global::broadcast_zeros_like({wsz[0]}, gf).index_add(0, idx, ones_like(idx, gf.options()));
    gf = gf / counts.index_select(0, idx).unsqueeze(1);
  }
  return {global::broadcast_zeros_like(wsz, g[0]).index_add(0, idx, gf), Tensor()};
}

}  // namespace

void register_index_ops() {
  register_op({.name = "cat",
               .attr_names = {"dim"},
               .infer_meta = cat_meta,
               .cpu = cat_cpu,
               .vjp = cat_vjp,
               .sbp_rule = &sbp_rules::kCat,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "gather",
               .traits = kChecksIndices,
               .attr_names = {"dim"},
               .infer_meta = gather_meta,
               .cpu = gather_cpu,
               .vjp = gather_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kAlongDim});
  register_op({.name = "scatter",
               .traits = kChecksIndices,
               .attr_names = {"dim"},
               .infer_meta = scatter_meta,
               .cpu = scatter_cpu<false>,
               .vjp = scatter_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kAlongDim});
  register_op({.name = "scatter_add",
               .traits = kInplaceOk | kChecksIndices,
               .attr_names = {"dim"},
               .infer_meta = scatter_add_meta,
               .cpu = scatter_cpu<true>,
               .vjp = scatter_add_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kAlongDim,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "index_select",
               .traits = kChecksIndices,
               .attr_names = {"dim"},
               .infer_meta = index_select_meta,
               .cpu = index_select_cpu,
               .vjp = index_select_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kIndexSelect});
  register_op({.name = "index_add",
               .traits = kChecksIndices,
               .attr_names = {"dim", "alpha"},
               .infer_meta = index_add_meta,
               .cpu = index_add_cpu,
               .vjp = index_add_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kIndexAdd,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "masked_select",
               .traits = kSyncsHost,
               .attr_names = {},
               .infer_meta = masked_select_meta,
               .cpu = masked_select_cpu,
               .vjp = masked_select_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1)});
  register_op({.name = "masked_select_backward",
               .attr_names = {"size"},
               .infer_meta = msb_meta,
               .cpu = msb_cpu,
               .vjp = msb_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1)});
  register_op({.name = "nonzero",
               .traits = kSyncsHost | kNonDifferentiable,
               .attr_names = {},
               .infer_meta = nonzero_meta,
               .cpu = nonzero_cpu});
  register_op({.name = "one_hot",
               .traits = kNonDifferentiable | kChecksIndices,
               .attr_names = {"num_classes"},
               .infer_meta = one_hot_meta,
               .cpu = one_hot_cpu,
               .sbp_rule = &sbp_rules::kOneHot});
  register_op({.name = "pad",
               .attr_names = {"pad", "mode", "value"},
               .infer_meta = pad_meta,
               .cpu = pad_cpu,
               .vjp = pad_vjp,
               .sbp_rule = &sbp_rules::kPad});
  register_op({.name = "pad_backward",
               .attr_names = {"input_size", "pad", "mode"},
               .infer_meta = pad_backward_meta,
               .cpu = pad_backward_cpu,
               .vjp = pad_backward_vjp});
  register_op({.name = "tril",
               .attr_names = {"diagonal"},
               .infer_meta = tri_meta<true>,
               .cpu = tri_cpu<true>,
               .vjp = tril_vjp,
               .sbp_rule = &sbp_rules::kTriangle});
  register_op({.name = "triu",
               .attr_names = {"diagonal"},
               .infer_meta = tri_meta<false>,
               .cpu = tri_cpu<false>,
               .vjp = triu_vjp,
               .sbp_rule = &sbp_rules::kTriangle});
  register_op({.name = "flip",
               .attr_names = {"dims"},
               .infer_meta = flip_meta,
               .cpu = flip_cpu,
               .vjp = flip_vjp,
               .sbp_rule = &sbp_rules::kFlip});
  register_op({.name = "roll",
               .attr_names = {"shifts", "dims"},
               .infer_meta = roll_meta,
               .cpu = roll_cpu,
               .vjp = roll_vjp,
               .sbp_rule = &sbp_rules::kRoll});
  register_op({.name = "repeat",
               .attr_names = {"repeats"},
               .infer_meta = repeat_meta,
               .cpu = repeat_cpu,
               .vjp = repeat_vjp,
               .sbp_rule = &sbp_rules::kRepeat});
  register_op({.name = "sort",
               .attr_names = {"dim", "descending"},
               .infer_meta = sort_meta,
               .cpu = sort_cpu,
               .vjp = sort_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kSort,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "topk",
               .attr_names = {"k", "dim", "largest", "sorted"},
               .infer_meta = topk_meta,
               .cpu = topk_cpu,
               .vjp = topk_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kTopk,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "embedding",
               .traits = kChecksIndices,
               .attr_names = {"padding_idx", "scale_grad_by_freq"},
               .infer_meta = embedding_meta,
               .cpu = embedding_cpu,
               .vjp = embedding_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kEmbedding,
               .contiguous_inputs = kEveryInput});
}

// ---------------------------------------------------------------- public functions

namespace {
// PyTorch's legacy rule: 1-D empty tensors of shape (0,) are skipped by cat.
bool legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }
}  // namespace

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  OF_CHECK(!ts.empty(), "[cat] expected a non-empty list of tensors");
  TensorList all;
  for (size_t i = 0; i < ts.size(); ++i) {
    OF_CHECK(ts[i].defined(), "[cat] tensor number {} in the list is undefined", i);
    all.push_back(ts[i]);
  }
  TensorList use;
  for (const Tensor& t : all)
    if (!legacy_empty(t)) use.push_back(t);
  if (use.empty()) use.push_back(all[0]);
  const int64_t d = wrap_dim(dim, use[0].dim(), "cat");
  check_cat(use, d);
  const ScalarType dt = result_type(all);
  for (Tensor& t : use) t = cast_if_needed(t, dt);
  if (use.size() == 1) return dispatch1(OF_OP("cat"), {use[0]}, {d});
  // Autograd masks hold 32 inputs: concatenate longer lists in groups.
  if (use.size() > 32) {
    std::vector<Tensor> parts;
    for (size_t b = 0; b < use.size(); b += 32) {
      std::vector<Tensor> grp(use.begin() + b, use.begin() + std::min(use.size(), b + 32));
      parts.push_back(cat(grp, d));
    }
    return cat(parts, d);
  }
  return dispatch1(OF_OP("cat"), use, {d});
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  OF_CHECK(!ts.empty(), "[stack] expects a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    OF_CHECK(ts[i].defined(), "[stack] tensor number {} in the list is undefined", i);
    if (!(ts[i].sizes() == ts[0].sizes()))
      fail("[stack] expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
           shape_str(ts[0].sizes()), shape_str(ts[i].sizes()), i);
  }
  const int64_t d = wrap_dim(dim, ts[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  u.reserve(ts.size());
  for (const Tensor& t : ts) u.push_back(t.unsqueeze(d));
  return cat(u, d);
}

std::vector<Tensor> split(const Tensor& x, IntArrayRef split_sizes, int64_t dim) {
  check_defined("split", x);
  OF_CHECK(x.dim() > 0, "[split] expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.sizes()[d];
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    OF_CHECK(s >= 0, "[split] split sizes must be non-negative, got {}", shape_str(split_sizes));
    total += s;
  }
  OF_CHECK(total == n, "[split] split sizes {} must sum to the size {} of dimension {} (input {})",
           shape_str(split_sizes), n, d, shape_str(x.sizes()));
  std::vector<Tensor> r;
  int64_t off = 0;
  for (int64_t s : split_sizes) {
    r.push_back(x.narrow(d, off, s));
    off += s;
  }
  return r;
}
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined("split", x);
  OF_CHECK(x.dim() > 0, "[split] expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.sizes()[d];
  OF_CHECK(split_size > 0 || (split_size == 0 && n == 0),
           "[split] split_size must be positive, got {} (dimension {} has size {})", split_size, d,
           n);
  if (n == 0) return {x.narrow(d, 0, 0)};
  std::vector<Tensor> r;
  for (int64_t off = 0; off < n; off += split_size)
    r.push_back(x.narrow(d, off, std::min(split_size, n - off)));
  return r;
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_defined("chunk", x);
  OF_CHECK(chunks > 0, "[chunk] number of chunks must be greater than 0, got {}", chunks);
  OF_CHECK(x.dim() > 0, "[chunk] expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.sizes()[d];
  if (n == 0) return split(x, DimVector(size_t(chunks), 0), d);
  return split(x, (n + chunks - 1) / chunks, d);
}
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  check_defined("unbind", x);
  OF_CHECK(x.dim() > 0, "[unbind] dimension specified as {} but tensor has no dimensions", dim);
  const int64_t d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> r;
  for (int64_t i = 0; i < x.sizes()[d]; ++i) r.push_back(x.select(d, i));
  return r;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("gather", x);
  check_defined("gather", index, "index");
  return dispatch1(OF_OP("gather"), {x, index}, {dim});
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter", x);
  check_defined("scatter", index, "index");
  check_defined("scatter", src, "src");
  return dispatch1(OF_OP("scatter"), {x, index, src}, {dim});
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  check_defined("scatter", x);
  check_defined("scatter", index, "index");
  Tensor v = wrap_scalar(value, x.dtype(), x.device());
  if (x.is_global()) {
    // the value as a broadcast global scalar, expanded to the index's shape
    Tensor src = global::constant_like(v, x).expand(index.sizes());
    return dispatch1(OF_OP("scatter"), {x, index, src}, {dim});
  }
  DimVector st(size_t(index.dim()), 0);
  Tensor src = make_view(v, index.sizes(), st, v.storage_offset());
  return dispatch1(OF_OP("scatter"), {x, index, src}, {dim});
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter_add", x);
  check_defined("scatter_add", index, "index");
  check_defined("scatter_add", src, "src");
  return dispatch1(OF_OP("scatter_add"), {x, index, src}, {dim});
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("index_select", x);
  check_defined("index_select", index, "index");
  if (x.dim() == 0) {
    wrap_dim(dim, 0, "index_select");
    check_index_1d(index, "index_select");
    OF_CHECK(index.numel() == 1,
             "[index_select] index of a 0-d input must have one element, got {}", index.numel());
    return index_select(x.reshape({1}), 0, index).reshape({});
  }
  return dispatch1(OF_OP("index_select"), {x, index}, {dim});
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha) {
  check_defined("index_add", x);
  check_defined("index_add", index, "index");
  check_defined("index_add", source, "source");
  if (x.dim() == 0) {
    wrap_dim(dim, 0, "index_add");
    return index_add(x.reshape({1}), 0, index, source.reshape({-1}), alpha).reshape({});
  }
  return dispatch1(OF_OP("index_add"), {x, index, source}, {dim, alpha});
}
Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_defined("masked_select", x);
  check_defined("masked_select", mask, "mask");
  return dispatch1(OF_OP("masked_select"), {x, mask});
}
Tensor nonzero(const Tensor& x) {
  check_defined("nonzero", x);
  return dispatch1(OF_OP("nonzero"), {x});
}
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  check_defined("take_along_dim", x);
  check_defined("take_along_dim", indices, "indices");
  check_index_dtype(indices, "take_along_dim", false, "indices");
  if (!dim) return gather(x.reshape({-1}), 0, indices.reshape({-1}));
  OF_CHECK(x.dim() == indices.dim(),
           "[take_along_dim] input {} and indices {} should have the same "
           "number of dimensions",
           shape_str(x.sizes()), shape_str(indices.sizes()));
  const int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  if (x.dim() == 0) return gather(x, 0, indices);
  DimVector xs = x.sizes().dims(), is = indices.sizes().dims();
  xs[d] = 1;
  is[d] = 1;
  DimVector b = broadcast_shapes(xs, is);
  DimVector xt = b, it = b;
  xt[d] = x.sizes()[d];
  it[d] = indices.sizes()[d];
  Tensor xe = IntArrayRef(xt) == x.sizes() ? x : x.expand(xt);
  Tensor ie = IntArrayRef(it) == indices.sizes() ? indices : indices.expand(it);
  return gather(xe, d, ie);
}
Tensor one_hot(const Tensor& x, int64_t num_classes) {
  check_defined("one_hot", x);
  OF_CHECK(x.dtype() == kInt64,
           "[one_hot] is only applicable to index tensors of dtype int64, got {}",
           dtype_name(x.dtype()));
  if (num_classes == -1) {
    OF_CHECK(x.numel() > 0,
             "[one_hot] can not infer the total number of classes from an empty tensor");
    int64_t mx = INT64_MIN;
    for (int64_t v : x.to_vector<int64_t>())
      mx = std::max(mx, v);  // host read: the shape depends on data
    OF_CHECK(mx >= 0, "[one_hot] class values must be non-negative, got {}", mx);
    num_classes = mx + 1;
  }
  OF_CHECK(num_classes >= 0, "[one_hot] num_classes must be positive or -1, got {}", num_classes);
  return dispatch1(OF_OP("one_hot"), {x}, {num_classes});
}
Tensor pad(const Tensor& x, IntArrayRef pads, std::string_view mode, double value) {
  check_defined("pad", x);
  PadMode m = pad_mode(mode);
  OF_CHECK(m == PadMode::kConstant || value == 0,
           "[pad] padding mode '{}' doesn't take in value argument (got {})", mode, value);
  pad_sizes(x.sizes(), pads.dims(), m);
  return dispatch1(OF_OP("pad"), {x}, {pads.dims(), std::string(mode), value});
}
Tensor tril(const Tensor& x, int64_t diagonal) {
  check_defined("tril", x);
  return dispatch1(OF_OP("tril"), {x}, {diagonal});
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  check_defined("triu", x);
  return dispatch1(OF_OP("triu"), {x}, {diagonal});
}
Tensor flip(const Tensor& x, IntArrayRef dims) {
  check_defined("flip", x);
  return dispatch1(OF_OP("flip"), {x}, {dims.dims()});
}
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  check_defined("roll", x);
  if (dims.empty()) {
    OF_CHECK(shifts.size() == 1,
             "[roll] without dims, shifts must have exactly one element, got {}",
             shape_str(shifts));
    DimVector shape = x.sizes().dims();
    return dispatch1(OF_OP("roll"), {x.reshape({-1})}, {shifts.dims(), DimVector{0}}).view(shape);
  }
  return dispatch1(OF_OP("roll"), {x}, {shifts.dims(), dims.dims()});
}
Tensor repeat(const Tensor& x, IntArrayRef repeats) {
  check_defined("repeat", x);
  return dispatch1(OF_OP("repeat"), {x}, {repeats.dims()});
}
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  check_defined("repeat_interleave", x);
  OF_CHECK(repeats >= 0, "[repeat_interleave] repeats must be non-negative, got {}", repeats);
  Tensor src = dim ? x : x.reshape({-1});
  if (src.dim() == 0) src = src.reshape({1});
  const int64_t d = dim ? wrap_dim(*dim, src.dim(), "repeat_interleave") : 0;
  const int64_t n = src.sizes()[d];
  std::vector<int64_t> idx;
  idx.reserve(size_t(n * repeats));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < repeats; ++r) idx.push_back(i);
  Tensor it = tensor(idx, {int64_t(idx.size())}, TensorOptions(kInt64).device(x.device()));
  return index_select(src, d, global::constant_like(it, x));
}
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  check_defined("repeat_interleave", x);
  check_defined("repeat_interleave", repeats, "repeats");
  check_index_dtype(repeats, "repeat_interleave", true, "repeats");
  OF_CHECK(repeats.dim() <= 1, "[repeat_interleave] repeats must be 0-d or 1-D, got shape {}",
           shape_str(repeats.sizes()));
  Tensor src = dim ? x : x.reshape({-1});
  if (src.dim() == 0) src = src.reshape({1});
  const int64_t d = dim ? wrap_dim(*dim, src.dim(), "repeat_interleave") : 0;
  const int64_t n = src.sizes()[d];
  std::vector<int64_t> reps = repeats.to_vector<int64_t>();  // host read: the shape depends on data
  if (reps.size() == 1 && n != 1) reps.assign(size_t(n), reps[0]);
  OF_CHECK(int64_t(reps.size()) == n,
           "[repeat_interleave] repeats must have the same size as input "
           "along dim {}: got {} repeats for size {}",
           d, reps.size(), n);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) {
    OF_CHECK(reps[i] >= 0, "[repeat_interleave] repeats can not be negative, got {}", reps[i]);
    for (int64_t r = 0; r < reps[i]; ++r) idx.push_back(i);
  }
  Tensor it = tensor(idx, {int64_t(idx.size())}, TensorOptions(kInt64).device(x.device()));
  return index_select(src, d, global::constant_like(it, x));
}
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  check_defined("sort", x);
  auto r = dispatch(OF_OP("sort"), {x}, {dim, descending});
  return {r[0], r[1]};
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return std::get<1>(sort(x, dim, descending));
}
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  check_defined("topk", x);
  auto r = dispatch(OF_OP("topk"), {x}, {k, dim, largest, sorted});
  return {r[0], r[1]};
}
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                 bool scale_grad_by_freq, bool sparse) {
  (void)sparse;  // gradients are always dense
  check_defined("embedding", weight, "weight");
  check_defined("embedding", indices, "indices");
  return dispatch1(OF_OP("embedding"), {weight, indices}, {padding_idx, scale_grad_by_freq});
}

// ---------------------------------------------------------------- Tensor methods

std::vector<Tensor> Tensor::split(int64_t s, int64_t dim) const {
  return oneflow::split(*this, s, dim);
}
std::vector<Tensor> Tensor::split(IntArrayRef s, int64_t dim) const {
  return oneflow::split(*this, s, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t c, int64_t dim) const {
  return oneflow::chunk(*this, c, dim);
}
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return oneflow::unbind(*this, dim); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return oneflow::gather(*this, dim, index);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return oneflow::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return oneflow::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return oneflow::index_select(*this, dim, index);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source,
                         const Scalar& alpha) const {
  return oneflow::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::masked_select(const Tensor& mask) const {
  return oneflow::masked_select(*this, mask);
}
Tensor Tensor::nonzero() const { return oneflow::nonzero(*this); }
Tensor Tensor::tril(int64_t diagonal) const { return oneflow::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return oneflow::triu(*this, diagonal); }
Tensor Tensor::flip(IntArrayRef dims) const { return oneflow::flip(*this, dims); }
Tensor Tensor::roll(IntArrayRef shifts, IntArrayRef dims) const {
  return oneflow::roll(*this, shifts, dims);
}
Tensor Tensor::repeat(IntArrayRef repeats) const { return oneflow::repeat(*this, repeats); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return oneflow::repeat_interleave(*this, repeats, dim);
}
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return oneflow::sort(*this, dim, descending);
}
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return oneflow::topk(*this, k, dim, largest, sorted);
}

}  // namespace oneflow

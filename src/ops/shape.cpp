// View ops: results share the input's storage (no kernel); their VJPs scatter back through
// view_scatter (its kernel: cpu/shape.cpp).
#include <algorithm>
#include <numeric>

#include "autograd/node.h"
#include "cpu/shape.h"
#include "global/rules.h"
#include "dispatch.h"
#include "ops/shape_attrs.h"

namespace oneflow {
using namespace shape_detail;
namespace {

// Geometry of a view of `t`: sizes, strides and offset in t's storage.
void push_view(MetaList& out, const Tensor& t, DimVector sizes, DimVector strides, int64_t offset) {
  out.push_back({std::move(sizes), std::move(strides), offset, t.dtype(), t.device(), 0});
}

// ---- view_scatter: zeros of `base_sizes` with grad added into the view (sizes, strides,
// offset) of a contiguous layout. The VJP of every view op that selects elements.
// Dispatched directly (or from a loaded graph) the geometry is arbitrary: the view must lie
// inside the base and the gradient have its size, or the kernel would write out of bounds.
void view_scatter_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "view_scatter";
  using A = ViewScatterAttrs;
  const DimVector &base = A::get<"base_size">(a), &sizes = A::get<"size">(a),
                  &strides = A::get<"stride">(a);
  const int64_t avail = checked_numel(base, op);
  const int64_t need = view_extent(sizes, strides, A::get<"offset">(a), op);
  if (need > avail)
    fail(
        "[{}] the view of size {} with stride {} and offset {} needs {} elements, but the base "
        "of size {} holds {}",
        op, shape_str(sizes), shape_str(strides), A::get<"offset">(a), need, shape_str(base),
        avail);
  if (!(in[0].sizes() == IntArrayRef(sizes)))
    fail("[{}] gradient of shape {} does not match the view's size {}", op,
         shape_str(in[0].sizes()), shape_str(sizes));
  out.push_back({base, {}, 0, in[0].dtype(), in[0].device()});
}
// NOTE [Decompositions]: where a device has no view_scatter kernel (CUDA): zeros, then the
// gradient added through the view in place, or, for a view whose elements may overlap, added
// at the storage positions the view reads (index_add; its float sums may come in any order).
TensorList view_scatter_decompose(const TensorList& in, const Attrs& a) {
  using A = ViewScatterAttrs;
  const Tensor& g = in[0];
  Tensor out = zeros(A::get<"base_size">(a), g.options());
  if (!A::get<"may_overlap">(a)) {
    out.as_strided(A::get<"size">(a), A::get<"stride">(a), A::get<"offset">(a)).add_(g);
  } else {
    const Tensor pos = arange(out.numel(), TensorOptions(kInt64).device(g.device()))
                           .as_strided(A::get<"size">(a), A::get<"stride">(a), A::get<"offset">(a))
                           .reshape({-1});
    out = out.view({-1}).index_add(0, pos, g.reshape({-1})).view(A::get<"base_size">(a));
  }
  return {out};
}
TensorList view_scatter_vjp(const VjpCtx& c, const TensorList& g) {
  using A = ViewScatterAttrs;
  const Attrs& a = c.attrs();
  return {
      g[0].contiguous().as_strided(A::get<"size">(a), A::get<"stride">(a), A::get<"offset">(a))};
}

// The VJP helper: scatter `grad` through a view geometry computed on a contiguous input.
Tensor scatter_back(const Tensor& grad, IntArrayRef base_sizes, DimVector sizes, DimVector strides,
                    int64_t offset, bool overlap = false) {
  const OpDef& op = OF_OP("view_scatter");
  return dispatch1(op, {grad},
                   ViewScatterAttrs::make(base_sizes.dims(), std::move(sizes), std::move(strides),
                                          offset, overlap));
}

// ---- as_strided
void as_strided_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  using A = AsStridedAttrs;
  const Tensor& t = in[0];
  const DimVector& sz = A::get<"size">(a);
  const DimVector& st = A::get<"stride">(a);
  // base_offset records the input's storage offset for the VJP (a direct dispatch may give any)
  if (A::get<"base_offset">(a) != t.storage_offset())
    fail("[as_strided] the recorded input offset {} is not the input's storage offset {}",
         A::get<"base_offset">(a), t.storage_offset());
  int64_t off = A::get<"offset">(a) < 0 ? t.storage_offset() : A::get<"offset">(a);
  const int64_t need = view_extent(sz, st, off, "as_strided");
  int64_t avail = int64_t(t.impl()->storage->nbytes / itemsize(t.dtype()));
  if (need > avail)
    fail(
        "[as_strided] size {} with stride {} and offset {} needs {} elements but the storage "
        "holds {}",
        shape_str(sz), shape_str(st), off, need, avail);
  push_view(out, t, sz, st, off);
}
TensorList as_strided_vjp(const VjpCtx& c, const TensorList& g) {
  using A = AsStridedAttrs;
  const Attrs& a = c.attrs();
  // The geometry is relative to the input's storage; the forward required a contiguous,
  // offset-0-relative input when it needed a gradient.
  const int64_t offset = A::get<"offset">(a);
  int64_t off = offset < 0 ? 0 : offset - A::get<"base_offset">(a);
  return {scatter_back(g[0], c.input_sizes(0), A::get<"size">(a), A::get<"stride">(a), off, true)};
}

// ---- view (reshape without copy)
bool compute_view_strides(IntArrayRef old_sizes, IntArrayRef old_strides, IntArrayRef new_sizes,
                          DimVector& new_strides) {
  // PyTorch's computeStride: chunks of old dims that are contiguous among themselves can be
  // re-split into new dims.
  new_strides.assign(new_sizes.size(), 0);
  if (old_sizes.empty()) {
    for (size_t i = 0; i < new_sizes.size(); ++i) new_strides[i] = 1;
    return true;
  }
  int64_t numel = 1;
  for (auto s : old_sizes) numel *= s;
  if (numel == 0) {
    new_strides = contiguous_strides(new_sizes);
    return true;
  }
  int64_t view_d = int64_t(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

DimVector infer_size(IntArrayRef shape, int64_t numel, const char* op) {
  DimVector r = shape.dims();
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i] == -1) {
      OF_CHECK(infer < 0, "[{}] only one dimension can be inferred in shape {}", op,
               shape_str(shape));
      infer = int(i);
    } else {
      OF_CHECK(r[i] >= 0, "[{}] invalid shape dimension {} in {}", op, r[i], shape_str(shape));
      // overflow-checked: a shape attribute can hold any int64 (fuzz_ops: view)
      OF_CHECK(!__builtin_mul_overflow(known, r[i], &known),
               "[{}] shape {} is invalid for input of size {}", op, shape_str(shape), numel);
    }
  }
  if (infer >= 0) {
    OF_CHECK(known != 0 && numel % known == 0, "[{}] shape {} is invalid for input of size {}", op,
             shape_str(shape), numel);
    r[infer] = numel / known;
  } else {
    OF_CHECK(known == numel, "[{}] shape {} is invalid for input of size {}", op, shape_str(shape),
             numel);
  }
  return r;
}

void view_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& t = in[0];
  const DimVector& size = SizeAttrs::get<"size">(a);
  DimVector sz = infer_size(size, t.numel(), "view");
  DimVector st;
  if (!compute_view_strides(t.sizes(), t.strides(), sz, st))
    fail(
        "[view] view size {} is not compatible with input tensor's size {} and stride {} (at "
        "least one dimension spans across two contiguous subspaces); use reshape instead",
        shape_str(size), shape_str(t.sizes()), shape_str(t.strides()));
  push_view(out, t, sz, st, t.storage_offset());
}
TensorList reshape_vjp(const VjpCtx& c, const TensorList& g) {
  return {g[0].reshape(c.input_sizes(0))};
}

// ---- permute / transpose
void permute_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& t = in[0];
  const DimVector& p = DimsAttrs::get<"dims">(a);
  const int64_t nd = t.dim();
  OF_CHECK(int64_t(p.size()) == nd,
           "[permute] number of dims {} doesn't match the tensor's {} dims", p.size(), nd);
  DimVector sz(nd), st(nd);
  std::vector<bool> seen(nd, false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim(p[i], nd, "permute");
    OF_CHECK(!seen[d], "[permute] repeated dim {} in {}", d, shape_str(p));
    seen[d] = true;
    sz[i] = t.sizes()[d];
    st[i] = t.strides()[d];
  }
  push_view(out, t, sz, st, t.storage_offset());
}
TensorList permute_vjp(const VjpCtx& c, const TensorList& g) {
  const DimVector& p = DimsAttrs::get<"dims">(c.attrs());
  int64_t nd = int64_t(p.size());
  DimVector inv(nd);
  for (int64_t i = 0; i < nd; ++i) inv[wrap_dim(p[i], nd, "permute")] = i;
  return {g[0].permute(inv)};
}

// ---- expand
void expand_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& t = in[0];
  const DimVector& target = SizeAttrs::get<"size">(a);
  const int64_t nd = int64_t(target.size()), td = t.dim();
  OF_CHECK(nd >= td,
           "[expand] the number of sizes provided ({}) must be greater or equal to the number of "
           "dimensions in the tensor ({})",
           nd, td);
  DimVector sz(nd), st(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t j = i - (nd - td);
    int64_t want = target[i];
    if (j >= 0) {
      int64_t have = t.sizes()[j];
      if (want == -1) want = have;
      if (have == want) {
        sz[i] = have;
        st[i] = t.strides()[j];
      } else if (have == 1) {
        OF_CHECK(want >= 0, "[expand] invalid size {} in {}", want, shape_str(target));
        sz[i] = want;
        st[i] = 0;
      } else {
        fail(
            "[expand] the expanded size of the tensor ({}) must match the existing size ({}) at "
            "non-singleton dimension {}; target sizes {}, tensor sizes {}",
            want, have, i, shape_str(target), shape_str(t.sizes()));
      }
    } else {
      OF_CHECK(want >= 0,
               "[expand] the expanded size {} is not allowed in a leading, "
               "non-existing dimension {}",
               want, i);
      sz[i] = want;
      st[i] = 0;
    }
  }
  push_view(out, t, sz, st, t.storage_offset());
}
TensorList expand_vjp(const VjpCtx& c, const TensorList& g) {
  return {sum_to_size(g[0], c.input_sizes(0))};
}

// ---- slice (dim, start, end, step) -- narrow and select build on it
void slice_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& t = in[0];
  OF_CHECK(t.dim() > 0, "[slice] cannot slice a 0-d tensor");
  using A = SliceAttrs;
  int64_t d = wrap_dim(A::get<"dim">(a), t.dim(), "slice");
  int64_t start = A::get<"start">(a), end = A::get<"end">(a), step = A::get<"step">(a);
  OF_CHECK(step > 0, "[slice] step must be positive, got {}", step);
  // slice() normalizes start and end; a direct dispatch (or a loaded graph) must match that
  OF_CHECK(start >= 0 && start <= end && end <= t.sizes()[d],
           "[slice] expected 0 <= start <= "
           "end <= {} (dimension {} of shape {}), got start {} and end {}",
           t.sizes()[d], d, shape_str(t.sizes()), start, end);
  DimVector sz = t.sizes().dims(), st = t.strides().dims();
  sz[d] = end > start ? (end - start - 1) / step + 1 : 0;
  if (sz[d] > 1) st[d] *= step;  // then step < size: no overflow
  push_view(out, t, sz, st, t.storage_offset() + (sz[d] > 0 ? start * t.strides()[d] : 0));
}
TensorList slice_vjp(const VjpCtx& c, const TensorList& g) {
  IntArrayRef base = c.input_sizes(0);
  using A = SliceAttrs;
  const Attrs& a = c.attrs();
  int64_t d = wrap_dim(A::get<"dim">(a), int64_t(base.size()), "slice");
  DimVector cst = contiguous_strides(base), sz = base.dims(), st = cst;
  sz[d] = g[0].size(d);
  if (sz[d] > 1) st[d] *= A::get<"step">(a);
  return {scatter_back(g[0], base, sz, st, sz[d] > 0 ? A::get<"start">(a) * cst[d] : 0)};
}

void select_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& t = in[0];
  OF_CHECK(t.dim() > 0, "[select] cannot select on a 0-d tensor");
  int64_t d = wrap_dim(SelectAttrs::get<"dim">(a), t.dim(), "select");
  int64_t n = t.sizes()[d], idx = SelectAttrs::get<"index">(a);
  OF_CHECK(idx >= -n && idx < n,
           "[select] index {} out of range for tensor of size {} at dimension {}", idx,
           shape_str(t.sizes()), d);
  if (idx < 0) idx += n;
  DimVector sz = t.sizes().dims(), st = t.strides().dims();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  push_view(out, t, sz, st, t.storage_offset() + idx * t.strides()[d]);
}
TensorList select_vjp(const VjpCtx& c, const TensorList& g) {
  IntArrayRef base = c.input_sizes(0);
  int64_t d = wrap_dim(SelectAttrs::get<"dim">(c.attrs()), int64_t(base.size()), "select");
  int64_t idx = SelectAttrs::get<"index">(c.attrs());
  if (idx < 0) idx += base[d];
  DimVector cst = contiguous_strides(base), sz = base.dims(), st = cst;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return {scatter_back(g[0], base, sz, st, idx * cst[d])};
}

void diagonal_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& t = in[0];
  OF_CHECK(t.dim() >= 2, "[diagonal] expected a tensor with at least 2 dims, got {}", t.dim());
  using A = DiagonalAttrs;
  int64_t off = A::get<"offset">(a);
  int64_t d1 = wrap_dim(A::get<"dim1">(a), t.dim(), "diagonal"),
          d2 = wrap_dim(A::get<"dim2">(a), t.dim(), "diagonal");
  OF_CHECK(d1 != d2, "[diagonal] dim1 and dim2 cannot be identical ({})", d1);
  int64_t n1 = t.sizes()[d1], n2 = t.sizes()[d2];
  int64_t len = off >= 0 ? std::max<int64_t>(0, std::min(n1, n2 - off))
                         : std::max<int64_t>(0, std::min(n1 + off, n2));
  int64_t start = t.storage_offset();
  if (len > 0) start += off >= 0 ? off * t.strides()[d2] : -off * t.strides()[d1];
  DimVector sz, st;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != d1 && d != d2) {
      sz.push_back(t.sizes()[d]);
      st.push_back(t.strides()[d]);
    }
  sz.push_back(len);
  st.push_back(t.strides()[d1] + t.strides()[d2]);
  push_view(out, t, sz, st, start);
}
TensorList diagonal_vjp(const VjpCtx& c, const TensorList& g) {
  IntArrayRef base = c.input_sizes(0);
  int64_t nd = int64_t(base.size());
  using A = DiagonalAttrs;
  int64_t off = A::get<"offset">(c.attrs());
  int64_t d1 = wrap_dim(A::get<"dim1">(c.attrs()), nd, "diagonal"),
          d2 = wrap_dim(A::get<"dim2">(c.attrs()), nd, "diagonal");
  DimVector cst = contiguous_strides(base), sz, st;
  for (int64_t d = 0; d < nd; ++d)
    if (d != d1 && d != d2) {
      sz.push_back(base[d]);
      st.push_back(cst[d]);
    }
  int64_t len = g[0].size(-1);
  sz.push_back(len);
  st.push_back(cst[d1] + cst[d2]);
  int64_t start = len > 0 ? (off >= 0 ? off * cst[d2] : -off * cst[d1]) : 0;
  return {scatter_back(g[0], base, sz, st, start)};
}

}  // namespace

void register_shape_ops() {
  register_op({.name = "view_scatter",
               .attr_names = ViewScatterAttrs::names(),
               .attr_types = ViewScatterAttrs::types(),
               .infer_meta = view_scatter_meta,
               .cpu = cpu::view_scatter,
               .decompose = view_scatter_decompose,
               .vjp = view_scatter_vjp,
               .sbp_rule = &sbp_rules::kWholeValues});
  register_op({.name = "as_strided",
               .traits = kView,
               .attr_names = AsStridedAttrs::names(),
               .attr_types = AsStridedAttrs::types(),
               .infer_meta = as_strided_meta,
               .vjp = as_strided_vjp,
               .sbp_rule = &sbp_rules::kWholeValues});
  register_op({.name = "view",
               .traits = kView,
               .attr_names = SizeAttrs::names(),
               .attr_types = SizeAttrs::types(),
               .infer_meta = view_meta,
               .vjp = reshape_vjp,
               .sbp_rule = &sbp_rules::kReshape});
  register_op({.name = "permute",
               .traits = kView,
               .attr_names = DimsAttrs::names(),
               .attr_types = DimsAttrs::types(),
               .infer_meta = permute_meta,
               .vjp = permute_vjp,
               .sbp_rule = &sbp_rules::kPermuteDims});
  register_op({.name = "expand",
               .traits = kView,
               .attr_names = SizeAttrs::names(),
               .attr_types = SizeAttrs::types(),
               .infer_meta = expand_meta,
               .vjp = expand_vjp,
               .sbp_rule = &sbp_rules::kBroadcastTo});
  register_op({.name = "slice",
               .traits = kView,
               .attr_names = SliceAttrs::names(),
               .attr_types = SliceAttrs::types(),
               .infer_meta = slice_meta,
               .vjp = slice_vjp,
               .sbp_rule = &sbp_rules::kLinearAlongOneDim});
  register_op({.name = "select",
               .traits = kView,
               .attr_names = SelectAttrs::names(),
               .attr_types = SelectAttrs::types(),
               .infer_meta = select_meta,
               .vjp = select_vjp,
               .sbp_rule = &sbp_rules::kDropOneDim});
  register_op({.name = "diagonal",
               .traits = kView,
               .attr_names = DiagonalAttrs::names(),
               .attr_types = DiagonalAttrs::types(),
               .infer_meta = diagonal_meta,
               .vjp = diagonal_vjp,
               .sbp_rule = &sbp_rules::kDiagonalOfTwoDims});
}

// ---------------------------------------------------------------- public functions

Tensor view(const Tensor& t, IntArrayRef size) {
  const OpDef& o = OF_OP("view");
  return dispatch1(o, {t}, SizeAttrs::make(size.dims()));
}
Tensor Tensor::view(IntArrayRef size) const { return oneflow::view(*this, size); }

Tensor reshape(const Tensor& t, IntArrayRef size) {
  DimVector sz = infer_size(size, t.numel(), "reshape");
  DimVector st;
  if (compute_view_strides(t.sizes(), t.strides(), sz, st)) return view(t, sz);
  return view(t.clone(), sz);
}
Tensor Tensor::reshape(IntArrayRef size) const { return oneflow::reshape(*this, size); }

Tensor permute(const Tensor& t, IntArrayRef dims) {
  const OpDef& o = OF_OP("permute");
  return dispatch1(o, {t}, DimsAttrs::make(dims.dims()));
}
Tensor Tensor::permute(IntArrayRef dims) const { return oneflow::permute(*this, dims); }

Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  int64_t nd = t.dim();
  if (nd == 0) {
    wrap_dim(d0, 0, "transpose");
    wrap_dim(d1, 0, "transpose");
    return view(t, {});
  }
  d0 = wrap_dim(d0, nd, "transpose");
  d1 = wrap_dim(d1, nd, "transpose");
  DimVector p(nd);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[d0], p[d1]);
  return permute(t, p);
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return oneflow::transpose(*this, d0, d1); }

Tensor t(const Tensor& x) {
  OF_CHECK(x.dim() <= 2, "[t] expects a tensor with <= 2 dimensions, but got {}", x.dim());
  return x.dim() < 2 ? view(x, x.sizes()) : transpose(x, 0, 1);
}
Tensor Tensor::t() const { return oneflow::t(*this); }

Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step) {
  const OpDef& o = OF_OP("slice");
  OF_CHECK(t.dim() > 0, "[slice] cannot slice a 0-d tensor");
  int64_t d = wrap_dim(dim, t.dim(), "slice");
  int64_t n = t.sizes()[d];
  int64_t s = start.value_or(0), e = end.value_or(n);
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  e = std::clamp<int64_t>(e, s, n);
  return dispatch1(o, {t}, SliceAttrs::make(d, s, e, step));
}
Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  return oneflow::slice(*this, dim, start, end, step);
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  OF_CHECK(t.dim() > 0, "[narrow] cannot narrow a 0-d tensor");
  int64_t d = wrap_dim(dim, t.dim(), "narrow");
  int64_t n = t.sizes()[d];
  OF_CHECK(start >= -n && start <= n,
           "[narrow] start ({}) out of range for dimension {} of size {}", start, d, n);
  if (start < 0) start += n;
  OF_CHECK(length >= 0 && start + length <= n,
           "[narrow] start ({}) + length ({}) exceeds dimension size ({})", start, length, n);
  const OpDef& o = OF_OP("slice");
  return dispatch1(o, {t}, SliceAttrs::make(d, start, start + length, 1));
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return oneflow::narrow(*this, dim, start, length);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  const OpDef& o = OF_OP("select");
  return dispatch1(o, {t}, SelectAttrs::make(dim, index));
}
Tensor Tensor::select(int64_t dim, int64_t index) const {
  return oneflow::select(*this, dim, index);
}

Tensor expand(const Tensor& t, IntArrayRef size) {
  const OpDef& o = OF_OP("expand");
  return dispatch1(o, {t}, SizeAttrs::make(size.dims()));
}
Tensor Tensor::expand(IntArrayRef size, bool) const { return oneflow::expand(*this, size); }

Tensor squeeze(const Tensor& t) {
  DimVector sz;
  for (int64_t s : t.sizes())
    if (s != 1) sz.push_back(s);
  return view(t, sz);
}
Tensor squeeze(const Tensor& t, int64_t dim) {
  int64_t d = wrap_dim(dim, t.dim(), "squeeze");
  if (t.dim() == 0 || t.sizes()[d] != 1) return view(t, t.sizes());
  DimVector sz = t.sizes().dims();
  sz.erase(sz.begin() + d);
  return view(t, sz);
}
Tensor Tensor::squeeze() const { return oneflow::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return oneflow::squeeze(*this, dim); }

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  int64_t d = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  DimVector sz = t.sizes().dims();
  sz.insert(sz.begin() + d, 1);
  return view(t, sz);
}
Tensor Tensor::unsqueeze(int64_t dim) const { return oneflow::unsqueeze(*this, dim); }

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  int64_t s = wrap_dim(start_dim, t.dim(), "flatten"), e = wrap_dim(end_dim, t.dim(), "flatten");
  OF_CHECK(s <= e, "[flatten] start_dim ({}) cannot come after end_dim ({})", s, e);
  DimVector sz;
  for (int64_t d = 0; d < s; ++d) sz.push_back(t.sizes()[d]);
  int64_t m = 1;
  for (int64_t d = s; d <= e; ++d) m *= t.sizes()[d];
  sz.push_back(m);
  for (int64_t d = e + 1; d < t.dim(); ++d) sz.push_back(t.sizes()[d]);
  return reshape(t, sz);
}
Tensor Tensor::flatten(int64_t s, int64_t e) const { return oneflow::flatten(*this, s, e); }

Tensor Tensor::unflatten(int64_t dim, IntArrayRef sizes) const {
  int64_t d = wrap_dim(dim, this->dim(), "unflatten");
  int64_t prod = 1;
  for (auto s : sizes) prod *= s;
  OF_CHECK(prod == this->sizes()[d] || std::count(sizes.begin(), sizes.end(), -1) == 1,
           "[unflatten] provided sizes {} don't multiply up to the size of dim {} ({})",
           shape_str(sizes), d, this->sizes()[d]);
  DimVector sz;
  for (int64_t k = 0; k < d; ++k) sz.push_back(this->sizes()[k]);
  for (auto s : sizes) sz.push_back(s);
  for (int64_t k = d + 1; k < this->dim(); ++k) sz.push_back(this->sizes()[k]);
  return oneflow::reshape(*this, sz);
}

Tensor as_strided(const Tensor& t, IntArrayRef size, IntArrayRef stride,
                  std::optional<int64_t> storage_offset) {
  const OpDef& o = OF_OP("as_strided");
  if (t.requires_grad() && grad_mode_enabled())
    OF_CHECK(t.is_contiguous(),
             "[as_strided] differentiating through as_strided of a non-contiguous tensor is not "
             "supported; call contiguous() first");
  int64_t off = storage_offset.value_or(-1);
  // a global tensor's storage is its whole logical value, which its broadcast pieces hold
  const Tensor src =
      t.is_global()
          ? t.to_global(t.placement(), NdSbp(size_t(t.placement().ndim()), Sbp::broadcast()))
          : t;
  return dispatch1(o, {src},
                   AsStridedAttrs::make(size.dims(), stride.dims(), off, src.storage_offset()));
}
Tensor Tensor::as_strided(IntArrayRef size, IntArrayRef stride,
                          std::optional<int64_t> storage_offset) const {
  return oneflow::as_strided(*this, size, stride, storage_offset);
}

Tensor diagonal(const Tensor& t, int64_t offset, int64_t dim1, int64_t dim2) {
  const OpDef& o = OF_OP("diagonal");
  return dispatch1(o, {t}, DiagonalAttrs::make(offset, dim1, dim2));
}
Tensor Tensor::diagonal(int64_t offset, int64_t d1, int64_t d2) const {
  return oneflow::diagonal(*this, offset, d1, d2);
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& ts) {
  DimVector shape;
  for (auto& t : ts) shape = broadcast_shapes(shape, t.sizes());
  std::vector<Tensor> r;
  for (auto& t : ts) r.push_back(t.sizes() == IntArrayRef(shape) ? t : t.expand(shape));
  return r;
}

}  // namespace oneflow

// Indexing ops: gather/scatter(_add), index_select/index_add, masked_select, nonzero, one_hot,
// embedding (meta, VJPs, SBP rules, registration, public functions); plus take_along_dim.
// Kernels: cpu/index.cpp (NOTE [Scatter determinism] there). Shape moves (cat, pad, tril/triu,
// flip, roll, repeat and their compositions) are in ops/moves.cpp, sort/topk in ops/sort.cpp
// (registered from here); what they share is in ops/index_common.h.
// NOTE [Index validation]: every index/mask value is checked inside infer_meta (on the host,
// for CPU tensors), so a bad index raises of::Error before any output is allocated or written.
#include <algorithm>
#include <array>

#include "autograd/node.h"
#include "cpu/index.h"
#include "oneflow/global.h"
#include "global/rules.h"
#include "dispatch.h"
#include "ops/checks.h"
#include "ops/index_common.h"

namespace oneflow {
void register_move_ops();
void register_sort_ops();
using namespace index_detail;
namespace {

// ---------------------------------------------------------------- gather / scatter

void gather_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor &x = in[0], &index = in[1];
  check_index_dtype(index, "gather", false);
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(a), x.dim(), "gather");
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
  const int64_t d = DimAttrs::get<"dim">(c.attrs());
  Tensor z = g[0].new_zeros(c.input_sizes(0));
  return {scatter_add(z, d, c.input(1), g[0]), Tensor()};
}

void scatter_meta_common(const TensorList& in, const Attrs& a, MetaList& out, const char* op) {
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  check_index_dtype(index, op, false);
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(a), x.dim(), op);
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
TensorList scatter_vjp(const VjpCtx& c, const TensorList& g) {
  const int64_t d = DimAttrs::get<"dim">(c.attrs());
  Tensor index = c.input(1);
  Tensor gx, gs;
  if (c.needs_input_grad(0)) gx = scatter(g[0], d, index, Scalar(0.0));
  if (c.needs_input_grad(2)) gs = pad_to(g[0].gather(d, index), c.input_sizes(2));
  return {gx, Tensor(), gs};
}
TensorList scatter_add_vjp(const VjpCtx& c, const TensorList& g) {
  const int64_t d = DimAttrs::get<"dim">(c.attrs());
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
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(a), x.dim(), "index_select");
  check_bounds(index, x.sizes()[d], "index_select", d);
  DimVector sz = x.sizes().dims();
  sz[d] = index.numel();
  out.push_back({sz, {}, 0, x.dtype(), x.device()});
}
TensorList index_select_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = broadcast_like(zeros(c.input_sizes(0), g[0].options()), g[0]);
  return {index_add(z, DimAttrs::get<"dim">(c.attrs()), c.input(1), g[0]), Tensor()};
}

void index_add_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  check_index_1d(index, "index_add");
  OF_CHECK(x.dim() > 0, "[index_add] input must have at least one dimension");
  const int64_t d = wrap_dim(IndexAddAttrs::get<"dim">(a), x.dim(), "index_add");
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
TensorList index_add_vjp(const VjpCtx& c, const TensorList& g) {
  const Scalar& alpha = IndexAddAttrs::get<"alpha">(c.attrs());
  Tensor gs;
  if (c.needs_input_grad(2)) {
    gs = g[0].index_select(IndexAddAttrs::get<"dim">(c.attrs()), c.input(1));
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
TensorList masked_select_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor mask = c.input(1);
  DimVector b = broadcast_shapes(c.input_sizes(0), mask.sizes());
  Tensor full = dispatch1(OF_OP("masked_select_backward"), {g[0], mask}, SizeAttrs::make(b));
  return {sum_to_size(full, c.input_sizes(0)), Tensor()};
}
// masked_select_backward(grad [n], mask; shape): zeros of `shape` with grad at the true places.
// Dispatched directly (or from a loaded graph) it sees any inputs: the mask must broadcast to
// `shape` and the gradient be 1-D, or the kernel's strides would walk outside the mask.
void msb_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor &g = in[0], &mask = in[1];
  const DimVector& size = SizeAttrs::get<"size">(a);
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

// ---------------------------------------------------------------- one_hot

void one_hot_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  OF_CHECK(x.dtype() == kInt64,
           "[one_hot] is only applicable to index tensors of dtype int64, got {}",
           dtype_name(x.dtype()));
  const int64_t c = OneHotAttrs::get<"num_classes">(a);
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
TensorList embedding_vjp(const VjpCtx& c, const TensorList& g) {
  IntArrayRef wsz = c.input_sizes(0);
  const int64_t pad_idx = EmbeddingAttrs::get<"padding_idx">(c.attrs());
  const bool by_freq = EmbeddingAttrs::get<"scale_grad_by_freq">(c.attrs());
  Tensor idx = c.input(1).reshape({-1});
  Tensor gf = g[0].reshape({-1, wsz[1]});
  if (pad_idx >= 0) gf = masked_fill(gf, (idx == pad_idx).unsqueeze(1), 0.0);
  if (by_freq) {
    Tensor counts = broadcast_like(zeros({wsz[0]}, gf.options()), gf)
                        .index_add(0, idx, ones_like(idx, gf.options()));
    gf = gf / counts.index_select(0, idx).unsqueeze(1);
  }
  return {broadcast_like(zeros(wsz, g[0].options()), g[0]).index_add(0, idx, gf), Tensor()};
}

}  // namespace

void register_index_ops() {
  register_op({.name = "gather",
               .traits = kChecksIndices,
               .attr_names = DimAttrs::names(),
               .attr_types = DimAttrs::types(),
               .infer_meta = gather_meta,
               .cpu = cpu::gather,
               .vjp = gather_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kLinedUpAlongDim});
  register_op({.name = "scatter",
               .traits = kChecksIndices,
               .attr_names = DimAttrs::names(),
               .attr_types = DimAttrs::types(),
               .infer_meta = scatter_meta,
               .cpu = cpu::scatter,
               .vjp = scatter_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kLinedUpAlongDim});
  register_op({.name = "scatter_add",
               .traits = kInplaceOk | kChecksIndices,
               .attr_names = DimAttrs::names(),
               .attr_types = DimAttrs::types(),
               .infer_meta = scatter_add_meta,
               .cpu = cpu::scatter_add,
               .vjp = scatter_add_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kLinedUpAlongDim,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "index_select",
               .traits = kChecksIndices,
               .attr_names = DimAttrs::names(),
               .attr_types = DimAttrs::types(),
               .infer_meta = index_select_meta,
               .cpu = cpu::index_select,
               .vjp = index_select_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kPickAlongDim});
  register_op({.name = "index_add",
               .traits = kChecksIndices,
               .attr_names = IndexAddAttrs::names(),
               .attr_types = IndexAddAttrs::types(),
               .infer_meta = index_add_meta,
               .cpu = cpu::index_add,
               .vjp = index_add_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kAddAlongDim,
               .autocast = AutocastPolicy::kPromote});
  register_op({.name = "masked_select",
               .traits = kSyncsHost,
               .attr_names = {},
               .infer_meta = masked_select_meta,
               .cpu = cpu::masked_select,
               .vjp = masked_select_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kWholeValues});
  register_op({.name = "masked_select_backward",
               .attr_names = SizeAttrs::names(),
               .attr_types = SizeAttrs::types(),
               .infer_meta = msb_meta,
               .cpu = cpu::masked_select_backward,
               .vjp = msb_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kWholeValues});
  register_op({.name = "nonzero",
               .traits = kSyncsHost,
               .attr_names = {},
               .infer_meta = nonzero_meta,
               .cpu = cpu::nonzero,
               .sbp_rule = &sbp_rules::kWholeValues});
  register_op({.name = "one_hot",
               .traits = kChecksIndices,
               .attr_names = OneHotAttrs::names(),
               .attr_types = OneHotAttrs::types(),
               .infer_meta = one_hot_meta,
               .cpu = cpu::one_hot,
               .sbp_rule = &sbp_rules::kNewLastDim});
  register_op({.name = "embedding",
               .traits = kChecksIndices,
               .attr_names = EmbeddingAttrs::names(),
               .attr_types = EmbeddingAttrs::types(),
               .infer_meta = embedding_meta,
               .cpu = cpu::embedding,
               .vjp = embedding_vjp,
               .save_inputs = in(1),
               .nondiff_inputs = in(1),
               .sbp_rule = &sbp_rules::kLookupRows,
               .contiguous_inputs = kEveryInput});
  register_move_ops();
  register_sort_ops();
}

// ---------------------------------------------------------------- public functions

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("gather", x);
  check_defined("gather", index, "index");
  return dispatch1(OF_OP("gather"), {x, index}, DimAttrs::make(dim));
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter", x);
  check_defined("scatter", index, "index");
  check_defined("scatter", src, "src");
  return dispatch1(OF_OP("scatter"), {x, index, src}, DimAttrs::make(dim));
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  check_defined("scatter", x);
  check_defined("scatter", index, "index");
  Tensor v = wrap_scalar(value, x.dtype(), x.device());
  if (x.is_global()) {
    // the value as a broadcast global scalar, expanded to the index's shape
    Tensor src = broadcast_like(v, x).expand(index.sizes());
    return dispatch1(OF_OP("scatter"), {x, index, src}, DimAttrs::make(dim));
  }
  DimVector st(size_t(index.dim()), 0);
  Tensor src = make_view(v, index.sizes(), st, v.storage_offset());
  return dispatch1(OF_OP("scatter"), {x, index, src}, DimAttrs::make(dim));
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter_add", x);
  check_defined("scatter_add", index, "index");
  check_defined("scatter_add", src, "src");
  return dispatch1(OF_OP("scatter_add"), {x, index, src}, DimAttrs::make(dim));
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
  return dispatch1(OF_OP("index_select"), {x, index}, DimAttrs::make(dim));
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
  return dispatch1(OF_OP("index_add"), {x, index, source}, IndexAddAttrs::make(dim, alpha));
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
  return dispatch1(OF_OP("one_hot"), {x}, OneHotAttrs::make(num_classes));
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                 bool scale_grad_by_freq, bool sparse) {
  (void)sparse;  // gradients are always dense
  check_defined("embedding", weight, "weight");
  check_defined("embedding", indices, "indices");
  return dispatch1(OF_OP("embedding"), {weight, indices},
                   EmbeddingAttrs::make(padding_idx, scale_grad_by_freq));
}

// ---------------------------------------------------------------- Tensor methods

Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return oneflow::gather(*this, dim, index);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return oneflow::scatter(*this, dim, index, src);
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter_", *this);
  check_defined("scatter_", index, "index");
  check_defined("scatter_", src, "src");
  dispatch(OF_OP("scatter"), {*this, index, src}, DimAttrs::make(dim), this);
  return *this;
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

}  // namespace oneflow

// Reductions: sum, mean, all and any here (meta, VJPs, registration, public functions), and the
// reduce-dims shape logic of reduce_common.h; the others follow the same pattern
// (reduce_extra.cpp). Kernels: src/cpu/reduce_ops.cpp.
#include "autograd/node.h"
#include "cpu/reduce_ops.h"
#include "global/rules.h"
#include "ops/reduce_common.h"

namespace oneflow {

using namespace reduce_detail;

DimVector normalize_reduce_dims(const Tensor& x, IntArrayRef dims, const char* op) {
  DimVector r;
  const int64_t nd = x.dim();
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) r.push_back(d);
    return r;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, nd, op);
    if (std::find(r.begin(), r.end(), w) != r.end())
      fail("[{}] dim {} appears multiple times in the list of dims", op, w);
    r.push_back(w);
  }
  std::sort(r.begin(), r.end());
  if (nd == 0) r.clear();
  return r;
}

DimVector reduced_shape(IntArrayRef sizes, const DimVector& dims, bool keepdim) {
  DimVector s;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d) {
    bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!red) s.push_back(sizes[d]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

Tensor expand_reduced_grad(const Tensor& g, IntArrayRef in_sizes, const DimVector& dims,
                           bool keepdim) {
  Tensor r = g;
  if (!keepdim) r = r.reshape(reduced_shape(in_sizes, dims, true));
  return r.expand(in_sizes);
}

// Dims as normalize_reduce_dims leaves them: in range, sorted, unique (the kernels index with
// them; a direct dispatch or a loaded graph passes any).
void check_reduce_dims(const Tensor& x, const DimVector& dims, const char* op) {
  const int64_t nd = x.dim();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= std::max<int64_t>(nd, 1) || (nd == 0 && dims[i] != 0))
      fail("[{}] dimension {} out of range for a tensor of shape {}", op, dims[i],
           shape_str(x.sizes()));
    if (i && dims[i] <= dims[i - 1])
      fail("[{}] reduce dims must be sorted and unique, got dim {} after {}", op, dims[i],
           dims[i - 1]);
  }
}

void reduce_meta(const TensorList& in, const Attrs& a, MetaList& out, const char* op) {
  using A = ReduceAttrs;
  const DimVector& dims = A::get<"dims">(a);
  check_reduce_dims(in[0], dims, op);
  const bool keepdim = A::get<"keepdim">(a);
  const ScalarType dtype = A::get<"dtype">(a);
  out.push_back({reduced_shape(in[0].sizes(), dims, keepdim), {}, 0, dtype, in[0].device()});
}

namespace {

void sum_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  reduce_meta(in, a, out, "sum");
}
void mean_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  reduce_meta(in, a, out, "mean");
}
void all_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  reduce_meta(in, a, out, "all");
}
void any_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  reduce_meta(in, a, out, "any");
}

TensorList sum_vjp(const VjpCtx& c, const TensorList& g) {
  using A = ReduceAttrs;
  return {expand_reduced_grad(g[0], c.input_sizes(0), A::get<"dims">(c.attrs()),
                              A::get<"keepdim">(c.attrs()))};
}
TensorList mean_vjp(const VjpCtx& c, const TensorList& g) {
  using A = ReduceAttrs;
  IntArrayRef in = c.input_sizes(0);
  int64_t n = 1;
  for (int64_t d : A::get<"dims">(c.attrs())) n *= in[d];
  return {expand_reduced_grad(g[0] / double(std::max<int64_t>(n, 1)), in, A::get<"dims">(c.attrs()),
                              A::get<"keepdim">(c.attrs()))};
}

}  // namespace

void register_reduce_ops() {
  register_op({.name = "sum",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = sum_meta,
               .cpu = cpu::sum,
               .vjp = sum_vjp,
               .sbp_rule = &sbp_rules::kSumOverDims,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "mean",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = mean_meta,
               .cpu = cpu::mean,
               .vjp = mean_vjp});
  register_op({.name = "all",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = all_meta,
               .cpu = cpu::all});
  register_op({.name = "any",
               .traits = kReduction,
               .attr_names = ReduceAttrs::names(),
               .attr_types = ReduceAttrs::types(),
               .infer_meta = any_meta,
               .cpu = cpu::any});
  extern void register_reduce_ops_extra();
  register_reduce_ops_extra();
}

// ---------------------------------------------------------------- public functions

Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  OF_CHECK(x.defined(), "[sum] got an undefined tensor");
  DimVector d = normalize_reduce_dims(x, dims, "sum");
  ScalarType out = dtype.value_or(is_floating_point(x.dtype()) ? x.dtype() : kInt64);
  Tensor in = dtype && is_floating_point(*dtype) ? cast_if_needed(x, *dtype) : x;
  return dispatch1(OF_OP("sum"), {in}, ReduceAttrs::make(d, keepdim, out));
}
Tensor sum(const Tensor& x, std::optional<ScalarType> dtype) { return sum(x, {}, false, dtype); }
Tensor Tensor::sum(std::optional<ScalarType> dtype) const { return oneflow::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) const {
  return oneflow::sum(*this, dims, keepdim, dtype);
}

Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  OF_CHECK(x.defined(), "[mean] got an undefined tensor");
  ScalarType out = dtype.value_or(x.dtype());
  if (!is_floating_point(out))
    fail(
        "[mean] could not infer output dtype: input dtype must be floating point, got {}; "
        "pass dtype= or convert the input",
        dtype_name(x.dtype()));
  DimVector d = normalize_reduce_dims(x, dims, "mean");
  return dispatch1(OF_OP("mean"), {cast_if_needed(x, out)}, ReduceAttrs::make(d, keepdim, out));
}
Tensor mean(const Tensor& x, std::optional<ScalarType> dtype) { return mean(x, {}, false, dtype); }
Tensor Tensor::mean(std::optional<ScalarType> dtype) const { return oneflow::mean(*this, dtype); }
Tensor Tensor::mean(IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) const {
  return oneflow::mean(*this, dims, keepdim, dtype);
}

namespace {
Tensor all_any(const OpDef& op, const Tensor& x, IntArrayRef dims, bool keepdim) {
  OF_CHECK(x.defined(), "[{}] got an undefined tensor", op.name);
  DimVector d = normalize_reduce_dims(x, dims, op.name.c_str());
  return dispatch1(op, {x}, ReduceAttrs::make(d, keepdim, kBool));
}
}  // namespace
Tensor all(const Tensor& x) { return all_any(OF_OP("all"), x, {}, false); }
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  return all_any(OF_OP("all"), x, {dim}, keepdim);
}
Tensor any(const Tensor& x) { return all_any(OF_OP("any"), x, {}, false); }
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  return all_any(OF_OP("any"), x, {dim}, keepdim);
}
Tensor Tensor::all() const { return oneflow::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return oneflow::all(*this, dim, keepdim); }
Tensor Tensor::any() const { return oneflow::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return oneflow::any(*this, dim, keepdim); }

Tensor sum_to_size(const Tensor& x, IntArrayRef size) {
  if (x.sizes() == size) return x;
  const int64_t nd = x.dim(), ns = int64_t(size.size());
  OF_CHECK(ns <= nd, "[sum_to_size] size {} is not expandable to the tensor's size {}",
           shape_str(size), shape_str(x.sizes()));
  DimVector dims;
  for (int64_t d = 0; d < nd; ++d) {
    int64_t j = d - (nd - ns);
    if (j < 0) {
      dims.push_back(d);
      continue;
    }
    if (size[j] == 1 && x.sizes()[d] != 1) dims.push_back(d);
    else if (size[j] != x.sizes()[d])
      fail("[sum_to_size] size {} is not expandable to the tensor's size {}", shape_str(size),
           shape_str(x.sizes()));
  }
  Tensor r = dims.empty() ? x : sum(x, dims, true);
  return r.reshape(size);
}
Tensor Tensor::sum_to_size(IntArrayRef size) const { return oneflow::sum_to_size(*this, size); }

}  // namespace oneflow

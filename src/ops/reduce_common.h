// reduce_common.h (internal): shape logic shared by the reduction ops, their attribute schemas
// (which the CUDA module's kernels, src/cuda/reduce.cpp, and the global dispatch read), and the
// [outer, n, inner] view of a kernel's input that the CPU kernels (src/cpu/reduce_ops.cpp,
// src/cpu/reduce_extra.cpp) and the CUDA ones share.
#pragma once
#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "kernel_support.h"
#include "ops/attr_schema.h"

namespace oneflow {

// ---------------------------------------------------------------- attribute schemas
// (NOTE [Attribute schemas])

namespace reduce_detail {

// Reductions over a list of dims (normalized: sorted, unique; empty: every dim), with the output
// dtype: sum, mean, all, any, prod, amax, amin, logsumexp; var/std add the correction, norm its
// order p.
using ReduceDimsAttrs = AttrSchema<Attr<"dims", DimVector>, Attr<"keepdim", bool>>;
using ReduceAttrs = ReduceDimsAttrs::with<Attr<"dtype", ScalarType>>;
using VarAttrs = ReduceAttrs::with<Attr<"correction", int64_t>>;
using NormReduceAttrs = ReduceAttrs::with<Attr<"p", double>>;
// Ops along one dim: softmax, log_softmax; max_dim/min_dim add keepdim, cumsum/cumprod reverse.
using DimAttrs = AttrSchema<Attr<"dim", int64_t>>;
using SoftmaxAttrs = DimAttrs;
using DimReduceAttrs = DimAttrs::with<Attr<"keepdim", bool>>;
using ScanAttrs = DimAttrs::with<Attr<"reverse", bool>>;
// argmax/argmin: one dim, or none for the index into the flattened tensor.
using ArgExtremeAttrs = AttrSchema<Attr<"dim", std::optional<int64_t>>, Attr<"keepdim", bool>>;

// Whether op's attributes begin with schema S's fields: their names and their types.
template <class S> bool attrs_begin_with(const OpDef& op) {
  static const std::vector<std::string> names = S::names();
  static const std::vector<uint8_t> types = S::types();
  if (op.attr_names.size() < names.size() ||
      !std::equal(names.begin(), names.end(), op.attr_names.begin()) ||
      op.attr_types.size() < types.size())
    return false;
  // an optional field of the op's matches the schema's field of its value type (argmax's dim)
  return std::equal(types.begin(), types.end(), op.attr_types.begin(),
                    [](uint8_t s, uint8_t o) { return s == uint8_t(o & ~kOptionalAttr); });
}
// Whether op's attributes lead with the reduced dims (ReduceDimsAttrs) or one dim
// (DimReduceAttrs) and keepdim: what sbp_rules::reduction_signatures reads, the global dispatch's
// rule for a kReduction op that names no SBP rule of its own.
inline bool has_reduction_attrs(const OpDef& op) {
  return attrs_begin_with<ReduceDimsAttrs>(op) || attrs_begin_with<DimReduceAttrs>(op);
}

}  // namespace reduce_detail

// ---------------------------------------------------------------- shapes

// Normalized, sorted, de-duplicated reduce dims; an empty list means every dim.
DimVector normalize_reduce_dims(const Tensor& x, IntArrayRef dims, const char* op);
// The output shape of reducing `sizes` over `dims`.
DimVector reduced_shape(IntArrayRef sizes, const DimVector& dims, bool keepdim);
// The gradient of a reduction output, viewed with the reduced dims kept as size 1 and expanded
// to the input shape.
Tensor expand_reduced_grad(const Tensor& g, IntArrayRef in_sizes, const DimVector& dims,
                           bool keepdim);
// [op] error unless dims are in range for x, sorted and unique.
void check_reduce_dims(const Tensor& x, const DimVector& dims, const char* op);
// Output meta for reductions with attrs ReduceAttrs (or an extension); checks the dims.
void reduce_meta(const TensorList& in, const Attrs& a, MetaList& out, const char* op);

// A reduction's or scan's input as a dense [outer, n, inner] buffer (the reduced or scanned
// dims in the middle). The CPU kernels and the CUDA ones (src/cuda/reduce.cpp) share it.
struct Canon {
  Tensor x;  // contiguous
  int64_t outer = 1, n = 1, inner = 1;
};
// Dim `d` of x in the middle (0-d tensors: n = 1); negative d counts from the end.
// d as the op's attr holds it (negative counts from the end: the op's infer_meta checked the
// range; fuzz_ops: a direct dispatch with dim -1 made the lane geometry write past the output).
inline Canon canon_dim(const Tensor& x, int64_t d) {
  Canon c;
  c.x = kernel_contiguous(x);
  const int64_t nd = x.dim();
  d = wrap_dim(d, nd, "reduction");
  for (int64_t i = 0; i < nd; ++i) {
    if (i < d) c.outer *= x.sizes()[i];
    else if (i == d) c.n = x.sizes()[i];
    else c.inner *= x.sizes()[i];
  }
  return c;
}
// Reduced dims (sorted, unique; empty: every dim) in the middle: in place when they are
// consecutive, else moved last (a copy).
inline Canon canon_reduce(const Tensor& x, const DimVector& dims) {
  Canon c;
  const int64_t nd = x.dim();
  if (dims.empty()) {
    c.x = kernel_contiguous(x);
    c.inner = x.numel();
    return c;
  }
  bool consecutive = true;
  for (size_t i = 1; i < dims.size(); ++i) consecutive &= dims[i] == dims[i - 1] + 1;
  if (consecutive) {
    c.x = kernel_contiguous(x);
    for (int64_t i = 0; i < nd; ++i) {
      if (i < dims.front()) c.outer *= x.sizes()[i];
      else if (i <= dims.back()) c.n *= x.sizes()[i];
      else c.inner *= x.sizes()[i];
    }
    return c;
  }
  DimVector perm;
  for (int64_t i = 0; i < nd; ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) {
      perm.push_back(i);
      c.outer *= x.sizes()[i];
    }
  for (int64_t d : dims) {
    perm.push_back(d);
    c.n *= x.sizes()[d];
  }
  c.x = kernel_contiguous(kernel_permute(x, perm));
  return c;
}

}  // namespace oneflow

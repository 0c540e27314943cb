// reduce_common.h (internal): shape logic shared by the reduction ops.
#pragma once
#include "dispatch.h"

namespace oneflow {

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
// Output meta for reductions with attrs {dims, keepdim, dtype}; checks the dims.
void reduce_meta(const TensorList& in, const Attrs& a, MetaList& out, const char* op);

// A reduction's or scan's input as a dense [outer, n, inner] buffer (the reduced or scanned
// dims in the middle). The CPU kernels and the CUDA ones (src/cuda/reduce.cpp) share it.
struct Canon {
  Tensor x;  // contiguous
  int64_t outer = 1, n = 1, inner = 1;
};
// Dim `d` of x in the middle (0-d tensors: n = 1); negative d counts from the end.
Canon canon_dim(const Tensor& x, int64_t d);
// Reduced dims (sorted, unique; empty: every dim) in the middle: in place when they are
// consecutive, else moved last (a copy).
Canon canon_reduce(const Tensor& x, const DimVector& dims);

}  // namespace oneflow

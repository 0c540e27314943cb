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
Tensor expand_reduced_grad(const Tensor& g, IntArrayRef in_sizes, const DimVector& dims, bool keepdim);
// Output meta for reductions with attrs {dims, keepdim, dtype}.
void reduce_meta(const TensorList& in, const Attrs& a, MetaList& out);

}  // namespace oneflow

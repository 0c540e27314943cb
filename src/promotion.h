// promotion.h (internal): PyTorch's type promotion and the operands of elementwise ops: wrapped
// numbers from Scalars, the result type of a mix of tensors, the casts to it, and the output
// meta of an elementwise op over same-dtype operands. The public elementwise functions promote
// before they dispatch; kernels see one dtype.
#pragma once
#include "op_def.h"

namespace oneflow {

// A 0-d tensor from a Scalar, marked as a wrapped number for promotion.
Tensor wrap_scalar(const Scalar& s, ScalarType dtype, Device device);
// PyTorch's result type over tensors (with wrapped numbers ranked lower).
ScalarType result_type(const TensorList& operands);
// Casts (through the dispatched `to` op, so it is differentiable) when dtypes differ.
Tensor cast_if_needed(const Tensor& t, ScalarType dtype);
// Prepares an operand: casts to `dtype` and moves CPU wrapped numbers to `device`.
Tensor prepare_operand(const Tensor& t, ScalarType dtype, Device device);
// A 0-d wrapped-number tensor for a Scalar operand (float scalars as float64 before promotion).
Tensor scalar_operand(const Scalar& s);
// Output meta of an elementwise op over same-dtype inputs (broadcast shape).
void elementwise_meta(const TensorList& in, const Attrs& a, MetaList& out);
// Same, with a bool output (comparisons, isnan, logical ops).
void elementwise_bool_meta(const TensorList& in, const Attrs& a, MetaList& out);

}  // namespace oneflow

// elementwise.h (internal): shared pieces of the unary/binary op families (their CPU kernels:
// cpu/elementwise.h).
#pragma once
#include <array>
#include "dispatch.h"
#include "ops/functors.h"

namespace oneflow {

// Output meta of an elementwise op over same-dtype inputs (broadcast shape).
void elementwise_meta(const TensorList& in, const Attrs& a, MetaList& out);
// Same, with a bool output (comparisons, isnan, logical ops).
void elementwise_bool_meta(const TensorList& in, const Attrs& a, MetaList& out);

// Row i of a table-driven op family (rows with a `name`), reached by name like every op
// (NOTE [Reaching an op] in dispatch.h) and looked up once per row.
template <auto& Rows> const OpDef& row_op(size_t i) {
  static const auto ops = [] {
    std::array<const OpDef*, std::size(Rows)> a{};
    for (size_t k = 0; k < a.size(); ++k) a[k] = &find_op(Rows[k].name);
    return a;
  }();
  return *ops[i];
}

// Prepares an operand: casts to `dtype` and moves CPU wrapped numbers to `device`.
Tensor prepare_operand(const Tensor& t, ScalarType dtype, Device device);
// A 0-d wrapped-number tensor for a Scalar operand (float scalars as float64 before promotion).
Tensor scalar_operand(const Scalar& s);

}  // namespace oneflow

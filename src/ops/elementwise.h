// elementwise.h (internal): shared pieces of the unary/binary op families.
#pragma once
#include <array>
#include "cpu/loops.h"
#include "dispatch.h"
#include "ops/functors.h"

namespace oneflow {

// Output meta of an elementwise op over same-dtype inputs (broadcast shape).
void elementwise_meta(const TensorList& in, const Attrs& a, MetaList& out);
// Same, with a bool output (comparisons, isnan, logical ops).
void elementwise_bool_meta(const TensorList& in, const Attrs& a, MetaList& out);

template <class F> void unary_kernel_all(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, F{});
  });
}
template <class F> void unary_kernel_float(const KernelArgs& k) {
  dispatch_float(k.inputs[0].dtype(), "unary", [&](auto z) {
    using T = decltype(z);
    cpu::cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, F{});
  });
}
template <class F> void unary_kernel_bool(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::cpu_kernel<bool, T>(k.outputs[0], {&k.inputs[0]}, F{});
  });
}
template <class F> void binary_kernel_all(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::cpu_kernel<T, T, T>(k.outputs[0], {&k.inputs[0], &k.inputs[1]}, F{});
  });
}
template <class F> void binary_kernel_float(const KernelArgs& k) {
  dispatch_float(k.inputs[0].dtype(), "binary", [&](auto z) {
    using T = decltype(z);
    cpu::cpu_kernel<T, T, T>(k.outputs[0], {&k.inputs[0], &k.inputs[1]}, F{});
  });
}
template <class F> void binary_kernel_bool(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::cpu_kernel<bool, T, T>(k.outputs[0], {&k.inputs[0], &k.inputs[1]}, F{});
  });
}

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

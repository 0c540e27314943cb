// elementwise.h (internal): the CPU kernels of the elementwise families (ops/unary.cpp,
// ops/binary.cpp). A table row's kernel is chosen by its functor's kind (NOTE [Elementwise
// kinds]): unary_kernel_of<F>() / binary_kernel_of<F>() instantiate one loop of the engine
// (cpu/loops.h) per functor; the ops with attributes have kernels of their own
// (cpu/elementwise.cpp).
#pragma once
#include <string_view>

#include "cpu/loops.h"
#include "kernel_support.h"
#include "ops/elem_kind.h"
#include "ops/functors.h"

namespace oneflow::cpu {

// The activations a GEMM epilogue applies (NOTE [GEMM epilogues] in cpu/blas.h), by name:
// "relu", "gelu", "gelu_tanh", "silu", "tanh": each as its op's own kernel computes it.
// act_f32: the function over a float32 row segment in place (null: not an activation name);
// apply_act: over a whole tensor of any float dtype, in place (the op's kernel loop).
using ActF32 = void (*)(float* p, int64_t n);
ActF32 act_f32(std::string_view act);
void apply_act(std::string_view act, const Tensor& t);

template <class F> void unary_kernel_all(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, F{});
  });
}
template <class F> void unary_kernel_float(const KernelArgs& k) {
  dispatch_float(k.inputs[0].dtype(), "unary", [&](auto z) {
    using T = decltype(z);
    cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, F{});
  });
}
template <class F> void unary_kernel_bool(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu_kernel<bool, T>(k.outputs[0], {&k.inputs[0]}, F{});
  });
}
template <class F> void binary_kernel_all(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu_kernel<T, T, T>(k.outputs[0], {&k.inputs[0], &k.inputs[1]}, F{});
  });
}
template <class F> void binary_kernel_float(const KernelArgs& k) {
  dispatch_float(k.inputs[0].dtype(), "binary", [&](auto z) {
    using T = decltype(z);
    cpu_kernel<T, T, T>(k.outputs[0], {&k.inputs[0], &k.inputs[1]}, F{});
  });
}
template <class F> void binary_kernel_bool(const KernelArgs& k) {
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu_kernel<bool, T, T>(k.outputs[0], {&k.inputs[0], &k.inputs[1]}, F{});
  });
}

// Integer division, fmod and remainder by zero would trap: check the divisor first.
template <class F> void int_safe_kernel(const KernelArgs& k) {
  const Tensor& b = k.inputs[1];
  if (!is_floating_point(b.dtype())) {
    bool zero = false;
    dispatch_dtype(b.dtype(), [&](auto z) {
      using T = decltype(z);
      const Tensor bc = kernel_contiguous(b);
      const T* p = static_cast<const T*>(bc.data_ptr());
      for (int64_t i = 0; i < bc.numel() && !zero; ++i) zero = p[i] == T(0);
    });
    if (zero) fail("[div] ZeroDivisionError: integer division or modulo by zero");
  }
  binary_kernel_all<F>(k);
}

// The CPU kernel of a table row, from its functor's kind.
template <class F> constexpr KernelFn unary_kernel_of() {
  if constexpr (F::kind == ElemKind::kFloat) return unary_kernel_float<F>;
  else if constexpr (F::kind == ElemKind::kAll) return unary_kernel_all<F>;
  else return unary_kernel_bool<F>;
}
template <class F> constexpr KernelFn binary_kernel_of() {
  if constexpr (F::kind == ElemKind::kFloat) return binary_kernel_float<F>;
  else if constexpr (F::kind == ElemKind::kAll) return binary_kernel_all<F>;
  else if constexpr (F::kind == ElemKind::kIntUnsafe) return int_safe_kernel<F>;
  else return binary_kernel_bool<F>;
}

// The elementwise ops with attributes (cpu/elementwise.cpp).
void gelu(const KernelArgs& k);        // attrs: elem_attrs::GeluAttrs
void pow_scalar(const KernelArgs& k);  // attrs: elem_attrs::PowScalarAttrs
void clamp(const KernelArgs& k);       // attrs: elem_attrs::ClampAttrs
void where(const KernelArgs& k);       // (cond, x, y)

}  // namespace oneflow::cpu

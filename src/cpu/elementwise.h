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

// An activation's epilogue form (NOTE [Epilogue activations] in op_def.h, NOTE [GEMM epilogues]
// in cpu/blas.h): act_rows_of<F>() runs F in place over a float32 row segment, the loop
// cpu_kernel runs over a contiguous float32 tensor; act_tensor_of<F>() over a whole tensor of
// any float dtype, the op's own kernel loop. Built for this CPU's AVX-512 (-march=native), the
// rows run 16 lanes at a time (GCC's default for these cores is 8): the same operations per
// element as the op's own loop, so the same bits; GELU's epilogue cost 1.5 ns a value on 8.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define OF_ACT_ROWS_TARGET __attribute__((target("prefer-vector-width=512")))
#else
#define OF_ACT_ROWS_TARGET
#endif
template <class F> OF_ACT_ROWS_TARGET void act_rows(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = F{}(p[i]);
}
template <class F> void act_tensor(const Tensor& t) {
  dispatch_float(t.dtype(), "activation", [&](auto z) {
    using T = decltype(z);
    cpu_kernel<T, T>(t, {&t}, F{});
  });
}
// The epilogue form of functor F, named `name` (OpDef::epilogue_acts' entries).
template <class F> constexpr EpilogueAct epilogue_act_of(const char* name) {
  return EpilogueAct{name, act_rows<F>, act_tensor<F>};
}

// The elementwise ops with attributes (cpu/elementwise.cpp).
void gelu(const KernelArgs& k);        // attrs: elem_attrs::GeluAttrs
void pow_scalar(const KernelArgs& k);  // attrs: elem_attrs::PowScalarAttrs
void clamp(const KernelArgs& k);       // attrs: elem_attrs::ClampAttrs
void where(const KernelArgs& k);       // (cond, x, y)

}  // namespace oneflow::cpu

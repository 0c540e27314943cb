// checks.h (internal): the argument checks the public wrappers and metas share (one wording
// each), and the kernels' float32/float64 switch.
#pragma once
#include <initializer_list>
#include <utility>

#include "oneflow/error.h"
#include "oneflow/tensor.h"

namespace oneflow {

// "[op] <what> is undefined", what naming the argument as the op's signature does ("input",
// "weight", "index"...).
inline void check_defined(const char* op, const Tensor& t, const char* what = "input") {
  if (!t.defined()) fail("[{}] {} is undefined", op, what);
}
// The named arguments in turn.
inline void check_defined(const char* op,
                          std::initializer_list<std::pair<const Tensor*, const char*>> ts) {
  for (const auto& [t, what] : ts) check_defined(op, *t, what);
}

// check_defined, then "[op] expected a floating-point <what>, got <dtype> (shape <shape>)"
// (float16/bfloat16 count: NOTE [Reduced-precision fallback]).
inline void check_float(const char* op, const Tensor& t, const char* what = "input") {
  check_defined(op, t, what);
  if (!t.is_floating_point())
    fail("[{}] expected a floating-point {}, got {} (shape {})", op, what, dtype_name(t.dtype()),
         shape_str(t.sizes()));
}

// The float switch of kernels that compute in float32 or float64 only: f(float{}) or
// f(double{}) (float16/bfloat16 reach them widened: NOTE [Reduced-precision fallback]), else
// "[op] expected a float32 or float64 tensor, got <dtype>".
template <class F> decltype(auto) dispatch_f(ScalarType t, const char* op, F&& f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    default:
      break;
  }
  fail("[{}] expected a float32 or float64 tensor, got {}", op, dtype_name(t));
}

}  // namespace oneflow

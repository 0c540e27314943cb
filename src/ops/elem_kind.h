// elem_kind.h (internal): NOTE [Elementwise kinds]: which dtypes an elementwise functor takes
// and gives, declared once by the functor itself (ops/functors.h, `static constexpr ElemKind
// kind`) and read from there by the CPU rows (kernel choice, dtype promotion), the CUDA kernels
// (which dtypes are instantiated) and the generated fused kernels (through OpDef::elem_kind,
// which the rows set from the functor).
#pragma once

namespace oneflow {

enum class ElemKind : signed char {
  kNone = -1,  // not a row op
  kAll,        // every dtype, result in the input dtype
  kFloat,      // floating dtypes (the public ops promote integers to float32 first)
  kCompare,    // every dtype, bool result
  kLogical,    // every dtype read as truth values, bool result
  kIntUnsafe,  // every dtype on the CPU, where integer division by zero is checked on the
               // host; floating dtypes only on CUDA (no error path on the device)
};

}  // namespace oneflow

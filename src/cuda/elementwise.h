// elementwise.h (internal): the CUDA elementwise kernels of the op table's unary and binary
// families and `where`, one launch template over the shared functors (ops/functors.h, the ones
// the CPU kernels use). The launcher half is plain C++ so that elementwise.cu stays light for
// nvcc; elementwise.cpp turns a KernelArgs into ElemParams.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h

namespace cuda_module {

inline constexpr int kMaxElemDims = 8;
inline constexpr int kMaxElemInputs = 3;

// out[i] = f(in0[i], ...) over the output's row-major index space; every operand's strides
// are in its own elements (0 along broadcast dims), dims already coalesced.
struct ElemParams {
  int ndim = 0;
  int nin = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxElemDims] = {};
  int64_t strides[kMaxElemInputs + 1][kMaxElemDims] = {};  // [0]: the output
  void* out = nullptr;
  const void* in[kMaxElemInputs] = {};
  bool contiguous = false;  // every operand dense in the output's order (no index math)
  ScalarType dtype;         // the inputs' dtype (for where: of inputs 1 and 2; fill: the output's)
  // The attrs of the ops that take scalars: fill {value}; pow_scalar {exponent};
  // clamp {has_min, min, has_max, max} (flags as 0/1).
  double scalars[4] = {};
  int64_t iscalar = 0;   // fill into integer dtypes: the value as Scalar::to_long() gives it
  bool bscalar = false;  // fill into bool: Scalar::to_bool()
};

// name (the op table's), functor (ops/functors.h), kind:
//   All: every dtype, result in the input dtype; Float: floating dtypes only (the public ops
//   promote integers first); Bool: every dtype, bool result; IntUnsafe: like Float on CUDA
//   (integer division by zero has no error path on the device; integers are refused).
// clang-format off
#define OF_CUDA_UNARY_OPS(X)                                                                  \
  X(neg, Neg, All) X(abs, Abs, All) X(sign, Sign, All) X(exp, Exp, Float) X(exp2, Exp2, Float) \
  X(log, Log, Float) X(log2, Log2, Float) X(log1p, Log1p, Float) X(expm1, Expm1, Float)       \
  X(sqrt, Sqrt, Float) X(rsqrt, Rsqrt, Float) X(reciprocal, Reciprocal, Float)                 \
  X(square, Square, All) X(sin, Sin, Float) X(cos, Cos, Float) X(tan, Tan, Float)             \
  X(tanh, Tanh, Float) X(sigmoid, Sigmoid, Float) X(relu, Relu, All) X(silu, Silu, Float)      \
  X(erf, Erf, Float) X(floor, Floor, All) X(ceil, Ceil, All) X(round, Round, All)              \
  X(trunc, Trunc, All) X(isnan, IsNan, Bool) X(isinf, IsInf, Bool)                             \
  X(logical_not, LogicalNot, Bool)
// clang-format on
// clang-format off
#define OF_CUDA_BINARY_OPS(X)                                                                 \
  X(add, Add, All) X(sub, Sub, All) X(mul, Mul, All) X(div, Div, Float)                        \
  X(div_trunc, DivTrunc, IntUnsafe) X(div_floor, DivFloor, IntUnsafe)                          \
  X(maximum, Maximum, All) X(minimum, Minimum, All) X(fmod, Fmod, IntUnsafe)                   \
  X(remainder, Remainder, IntUnsafe) X(atan2, Atan2, Float) X(pow, Pow, All) X(eq, Eq, Bool)   \
  X(ne, Ne, Bool) X(lt, Lt, Bool) X(le, Le, Bool) X(gt, Gt, Bool) X(ge, Ge, Bool)              \
  X(logical_and, LogicalAnd, Bool) X(logical_or, LogicalOr, Bool) X(logical_xor, LogicalXor, Bool)
// clang-format on

enum class ElemOp : int {
#define OF_ENUM(name, functor, kind) name,
  OF_CUDA_UNARY_OPS(OF_ENUM) OF_CUDA_BINARY_OPS(OF_ENUM)
#undef OF_ENUM
      gelu_erf,
  gelu_tanh,   // the two forms of the op "gelu" (its `approximate` attr)
  where,       // in0: bool condition, in1/in2: the values
  fill,        // no inputs: out = scalars[0] ("fill_", "full")
  identity,    // out = in0, same dtype ("copy_": broadcast into any strides)
  pow_scalar,  // out = in0 ^ scalars[0]
  clamp,       // out = clamp(in0, scalars[1] if scalars[0], scalars[3] if scalars[2])
};

// One launch on `stream`. cudaErrorInvalidValue for a dtype the op does not take (the host
// side checks first and raises a clear error), else the launch status.
cudaError_t launch_elementwise(ElemOp op, const ElemParams& p, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

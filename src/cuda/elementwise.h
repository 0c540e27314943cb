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

// name (the op table's), functor (ops/functors.h); which dtypes each takes is the functor's own
// kind (NOTE [Elementwise kinds]; kIntUnsafe ops take floating dtypes only here: integer
// division by zero has no error path on the device, integers are refused).
// clang-format off
#define OF_CUDA_UNARY_OPS(X)                                                                  \
  X(neg, Neg) X(abs, Abs) X(sign, Sign) X(exp, Exp) X(exp2, Exp2) \
  X(log, Log) X(log2, Log2) X(log1p, Log1p) X(expm1, Expm1)       \
  X(sqrt, Sqrt) X(rsqrt, Rsqrt) X(reciprocal, Reciprocal)                 \
  X(square, Square) X(sin, Sin) X(cos, Cos) X(tan, Tan)             \
  X(tanh, Tanh) X(sigmoid, Sigmoid) X(relu, Relu) X(silu, Silu)      \
  X(erf, Erf) X(floor, Floor) X(ceil, Ceil) X(round, Round)              \
  X(trunc, Trunc) X(isnan, IsNan) X(isinf, IsInf)                             \
  X(logical_not, LogicalNot)
// clang-format on
// clang-format off
#define OF_CUDA_BINARY_OPS(X)                                                                 \
  X(add, Add) X(sub, Sub) X(mul, Mul) X(div, Div)                        \
  X(div_trunc, DivTrunc) X(div_floor, DivFloor)                          \
  X(maximum, Maximum) X(minimum, Minimum) X(fmod, Fmod)                   \
  X(remainder, Remainder) X(atan2, Atan2) X(pow, Pow) X(eq, Eq)   \
  X(ne, Ne) X(lt, Lt) X(le, Le) X(gt, Gt) X(ge, Ge)              \
  X(logical_and, LogicalAnd) X(logical_or, LogicalOr) X(logical_xor, LogicalXor)
// clang-format on

enum class ElemOp : int {
#define OF_ENUM(name, functor) name,
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

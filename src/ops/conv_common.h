// conv_common.h: what the convolution and pooling op files share (ops/nn_conv.cpp,
// ops/nn_pool.cpp): parameter lists expanded per spatial dim, their printing, the batched
// view of an unbatched input, the pooled length of one axis, the float/double kernel switch.
#pragma once
#include <string>

#include "dispatch.h"
#include "ops/checks.h"

namespace oneflow::conv_detail {

// ---------------------------------------------------------------- argument helpers

// One value per spatial dim: a single value is broadcast to all `n` dims.
inline DimVector expand_param(IntArrayRef v, int64_t n, const char* op, const char* name) {
  if (int64_t(v.size()) == n) return v.dims();
  if (v.size() == 1) return DimVector(size_t(n), v[0]);
  fail("[{}] {} must have 1 or {} values, got {} ({})", op, name, n, v.size(), shape_str(v));
}

// "(a, b)" without the trailing comma shape_str puts on one-element lists.
inline std::string vals(const DimVector& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// A [N, C, H, W] view of an unbatched [C, H, W] input (the op wrappers' rank handling).
inline Tensor batched(const char* op, const Tensor& x, int64_t spatial) {
  if (x.dim() == spatial + 2) return x;
  if (x.dim() == spatial + 1) return x.unsqueeze(0);
  fail("[{}] expected a {}-D (unbatched) or {}-D (batched) input, got a {}-D input of shape {}", op,
       spatial + 1, spatial + 2, x.dim(), shape_str(x.sizes()));
}

// PyTorch's pooling_output_shape (floor division, ceil_mode drops a window starting in padding).
// Computed in 128 bits and saturated: the sizes of a direct dispatch (a backward op's input_size
// attribute, fuzz_ops) may be any int64; s > 0 (the callers check it).
inline int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  using W = __int128;
  const W num = W(in) + 2 * W(pad) - W(d) * (W(k) - 1) - 1 + (ceil_mode ? W(s) - 1 : 0);
  W out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= W(in) + pad) --out;
  return out > W(INT64_MAX) ? INT64_MAX : out < W(INT64_MIN) ? INT64_MIN : int64_t(out);
}

// Calls f on the batched input and restores the rank of the result. (float16/bfloat16 inputs
// run in float32 through dispatch: NOTE [Reduced-precision fallback].)
template <class F> Tensor on_batched(const char* op, const Tensor& input, F&& f, int64_t sp = 2) {
  check_float(op, input, "input");
  const Tensor x = batched(op, input, sp);
  Tensor y = f(x);
  return input.dim() == sp + 1 ? y.squeeze(0) : y;
}

template <class F> void float_or_double(ScalarType t, const char* op, F&& f) {
  if (t == kFloat32) return f(float{});
  if (t == kFloat64) return f(double{});
  fail("[{}] internal: unsupported dtype {}", op, dtype_name(t));
}

}  // namespace oneflow::conv_detail

// conv_common.h: what the convolution and pooling op files share (ops/nn_conv.cpp,
// ops/nn_pool.cpp): parameter lists expanded per spatial dim, their printing, the batched
// view of an unbatched input, the pooled length of one axis; and the convolution family's
// attribute schemas, which the CUDA module's kernels read too.
#pragma once
#include <string>

#include "kernel_support.h"
#include "ops/attr_schema.h"
#include "ops/checks.h"

namespace oneflow::conv_detail {

// ---------------------------------------------------------------- the convolution family

// One attribute order for the family (NOTE [Attribute schemas]): conv2d/3d take the four
// shared fields, conv_transpose2d/3d add output_padding, conv2d/3d_backward_weight the weight's
// sizes. (Graph files before format 3 kept conv_transpose's order of its public function,
// stride, padding, output_padding, groups, dilation, and the weight gradient's weight_size
// first: the loader moves them, NOTE [Graph file versions].)
using ConvAttrs = AttrSchema<Attr<"stride", DimVector>, Attr<"padding", DimVector>,
                             Attr<"dilation", DimVector>, Attr<"groups", int64_t>>;
using ConvTransposeAttrs = ConvAttrs::with<Attr<"output_padding", DimVector>>;
using ConvWeightGradAttrs = ConvAttrs::with<Attr<"weight_size", DimVector>>;

// Pooling and resampling (nn_pool.cpp; the CUDA module's pool.cpp). A *_backward op takes its
// forward op's attributes and the input's sizes after them (WithInputSize).
using MaxPoolAttrs =
    AttrSchema<Attr<"kernel_size", DimVector>, Attr<"stride", DimVector>,
               Attr<"padding", DimVector>, Attr<"dilation", DimVector>, Attr<"ceil_mode", bool>>;
using AvgPoolAttrs =
    AttrSchema<Attr<"kernel_size", DimVector>, Attr<"stride", DimVector>,
               Attr<"padding", DimVector>, Attr<"ceil_mode", bool>, Attr<"count_include_pad", bool>,
               Attr<"divisor_override", int64_t>>;  // 0: none
using AdaptivePoolAttrs = AttrSchema<Attr<"output_size", DimVector>>;
// a scale <= 0: none (the step is in/out)
using UpsampleNearestAttrs =
    AttrSchema<Attr<"output_size", DimVector>, Attr<"scales_h", double>, Attr<"scales_w", double>>;
using UpsampleBilinearAttrs =
    AttrSchema<Attr<"output_size", DimVector>, Attr<"align_corners", bool>,
               Attr<"scales_h", double>, Attr<"scales_w", double>>;
template <class S> using WithInputSize = typename S::template with<Attr<"input_size", DimVector>>;

// The family's parameters, spatial dims only (output_padding zeros for a plain convolution).
struct ConvParams {
  DimVector stride, padding, dilation, output_padding;
  int64_t groups = 1;
};
inline ConvParams conv_params(const Attrs& a, bool transposed) {
  ConvParams p;
  p.stride = ConvAttrs::get<"stride">(a);
  p.padding = ConvAttrs::get<"padding">(a);
  p.dilation = ConvAttrs::get<"dilation">(a);
  p.groups = ConvAttrs::get<"groups">(a);
  p.output_padding =
      transposed ? ConvTransposeAttrs::get<"output_padding">(a) : DimVector(p.stride.size(), 0);
  return p;
}

// The ops of a Sp-D convolution family (Sp = 2 or 3).
template <int Sp> const char* conv_name() { return Sp == 2 ? "conv2d" : "conv3d"; }
template <int Sp> const char* conv_t_name() {
  return Sp == 2 ? "conv_transpose2d" : "conv_transpose3d";
}
template <int Sp> const char* conv_bw_name() {
  return Sp == 2 ? "conv2d_backward_weight" : "conv3d_backward_weight";
}

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

}  // namespace oneflow::conv_detail

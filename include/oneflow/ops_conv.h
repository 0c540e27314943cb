// ops_conv.h: convolution, pooling and resampling ops (libtorch's names and argument orders).
// IntArrayRef arguments take one value for every spatial dim (stride = 2) or one per dim
// ({2, 1}). Inputs are NCHW (NCL for 1-D, NCDHW for 3-D) or unbatched CHW (CL, CDHW);
// float32/float64, and
// float16/bfloat16 computed in float32.
#pragma once
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "oneflow/ops.h"

namespace oneflow {

// 2-D convolution: weight [out_ch, in_ch / groups, kh, kw], optional bias [out_ch].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef dilation = 1,
              int64_t groups = 1);
// conv2d with padding "valid" (none) or "same" (stride 1 only; odd totals pad more at the end).
Tensor conv2d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation = 1,
                      int64_t groups = 1);
// conv2d(input, weight, bias, stride, "same" | "valid", dilation, groups), as in libtorch.
template <class S, std::enable_if_t<std::is_convertible_v<const S&, std::string_view>, int> = 0>
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              const S& padding, IntArrayRef dilation = 1, int64_t groups = 1) {
  return conv2d_padding(input, weight, bias, stride, std::string_view(padding), dilation, groups);
}

// 1-D convolution: input [N, C, L] or [C, L], weight [out_ch, in_ch / groups, k].
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef dilation = 1,
              int64_t groups = 1);
// conv1d with padding "valid" or "same" (stride 1 only).
Tensor conv1d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation = 1,
                      int64_t groups = 1);
// conv1d(input, weight, bias, stride, "same" | "valid", dilation, groups), as in libtorch.
template <class S, std::enable_if_t<std::is_convertible_v<const S&, std::string_view>, int> = 0>
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              const S& padding, IntArrayRef dilation = 1, int64_t groups = 1) {
  return conv1d_padding(input, weight, bias, stride, std::string_view(padding), dilation, groups);
}

// 3-D convolution: input [N, C, D, H, W] or [C, D, H, W], weight [out_ch, in_ch / groups, kd, kh,
// kw], optional bias [out_ch] (vol2col + GEMM).
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef dilation = 1,
              int64_t groups = 1);
// conv3d with padding "valid" or "same" (stride 1 only).
Tensor conv3d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation = 1,
                      int64_t groups = 1);
// conv3d(input, weight, bias, stride, "same" | "valid", dilation, groups), as in libtorch.
template <class S, std::enable_if_t<std::is_convertible_v<const S&, std::string_view>, int> = 0>
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              const S& padding, IntArrayRef dilation = 1, int64_t groups = 1) {
  return conv3d_padding(input, weight, bias, stride, std::string_view(padding), dilation, groups);
}

// Transposed 1-D convolution: input [N, C, L] or [C, L], weight [in_ch, out_ch / groups, k].
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        IntArrayRef stride = 1, IntArrayRef padding = 0,
                        IntArrayRef output_padding = 0, int64_t groups = 1,
                        IntArrayRef dilation = 1);
// Transposed 2-D convolution: weight [in_ch, out_ch / groups, kh, kw] (libtorch's order).
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        IntArrayRef stride = 1, IntArrayRef padding = 0,
                        IntArrayRef output_padding = 0, int64_t groups = 1,
                        IntArrayRef dilation = 1);
// Transposed 3-D convolution: weight [in_ch, out_ch / groups, kd, kh, kw].
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        IntArrayRef stride = 1, IntArrayRef padding = 0,
                        IntArrayRef output_padding = 0, int64_t groups = 1,
                        IntArrayRef dilation = 1);

// 1-D max pooling over [N, C, L] or [C, L]; stride defaults (empty) to kernel_size.
Tensor max_pool1d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, IntArrayRef dilation = 1, bool ceil_mode = false);
// max_pool1d plus int64 indices of each maximum along L.
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1,
                                                   bool ceil_mode = false);
// 2-D max pooling; stride defaults (empty) to kernel_size.
Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, IntArrayRef dilation = 1, bool ceil_mode = false);
// max_pool2d plus int64 indices of each maximum in the flattened H*W input plane.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1,
                                                   bool ceil_mode = false);
// 3-D max pooling over [N, C, D, H, W] or [C, D, H, W]; stride defaults (empty) to kernel_size.
Tensor max_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, IntArrayRef dilation = 1, bool ceil_mode = false);
// max_pool3d plus int64 indices of each maximum in the flattened D*H*W input volume.
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1,
                                                   bool ceil_mode = false);
// 1-D average pooling; stride defaults (empty) to kernel_size.
Tensor avg_pool1d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, bool ceil_mode = false, bool count_include_pad = true);
// 2-D average pooling; stride defaults (empty) to kernel_size.
Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// 3-D average pooling; stride defaults (empty) to kernel_size.
Tensor avg_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// Averages over windows [floor(i*in/out), ceil((i+1)*in/out)) to reach output_size.
Tensor adaptive_avg_pool1d(const Tensor& input, IntArrayRef output_size);
Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size);
Tensor adaptive_avg_pool3d(const Tensor& input, IntArrayRef output_size);
// Maxima over the adaptive windows, with int64 indices flat over the input's spatial dims.
std::tuple<Tensor, Tensor> adaptive_max_pool1d(const Tensor& input, IntArrayRef output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& input, IntArrayRef output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool3d(const Tensor& input, IntArrayRef output_size);
// Nearest-neighbour resize to output_size (PyTorch's legacy "nearest": src = floor(dst*in/out),
// or floor(dst/scale) when a scale is given, as interpolate's scale_factor).
Tensor upsample_nearest2d(const Tensor& input, IntArrayRef output_size,
                          std::optional<double> scales_h = std::nullopt,
                          std::optional<double> scales_w = std::nullopt);
// Bilinear resize to output_size (PyTorch's source-index formula for either align_corners; a
// given scale replaces in/out by 1/scale when align_corners is false).
Tensor upsample_bilinear2d(const Tensor& input, IntArrayRef output_size, bool align_corners,
                           std::optional<double> scales_h = std::nullopt,
                           std::optional<double> scales_w = std::nullopt);

}  // namespace oneflow

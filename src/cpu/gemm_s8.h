// gemm_s8.h (internal): linear with int8 weights and dynamically quantized uint8 activations
// (NOTE [Dynamic int8 linear] in cpu/gemm_s8.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace oneflow::cpu {

// Whether the CPU has AVX512-VNNI (the products run there; plain loops otherwise, same bits).
bool gemm_s8_vnni();

// A weight [n, k] quantized per output channel and packed for linear_s8.
struct QuantizedWeight {
  int64_t n = 0, k = 0, kq = 0;  // kq: k rounded up to a multiple of 4
  std::vector<int8_t> packed;    // strips of 32 columns, [kq / 4][32][4]
  std::vector<float> scale;      // per output channel
  std::vector<int32_t> col_sum;  // per output channel: sum of its int8 values
};
QuantizedWeight quantize_weight(const float* w, int64_t n, int64_t k, int64_t ldw);

// y [m, n] (rows ldy apart) = x [m, k] (rows ldx apart) wᵀ + bias (n floats, or null), with x
// quantized per row; use_vnni: the AVX512-VNNI tile (else plain loops; the same bits).
void linear_s8(const float* x, int64_t m, int64_t ldx, const QuantizedWeight& w, const float* bias,
               float* y, int64_t ldy, bool use_vnni);

}  // namespace oneflow::cpu

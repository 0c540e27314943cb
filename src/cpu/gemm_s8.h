// gemm_s8.h (internal): linear with int8 weights and dynamically quantized uint8 activations
// (NOTE [Dynamic int8 linear] in cpu/gemm_s8.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "large_pages.h"

namespace oneflow::cpu {

// The kernels the int8 products can run on; all give the same bits (the sums are exact integers).
enum class S8Path {
  kPlain,  // plain loops
  kVnni,   // AVX512-VNNI vpdpbusd, a 12 x 32 register tile
  kAmx,    // AMX-INT8 tdpbusd, 32 x 32 blocks of four 16 x 16 tiles
};
// Whether the CPU has AVX512-VNNI; whether it has AMX-INT8 and Linux let this process use the
// tile registers (arch_prctl ARCH_REQ_XCOMP_PERM, asked once).
bool gemm_s8_vnni();
bool gemm_s8_amx();
// The fastest path this CPU has.
S8Path gemm_s8_best();
const char* s8_path_name(S8Path p);

// A weight [n, k] quantized per output channel and packed for linear_s8.
struct QuantizedWeight {
  int64_t n = 0, k = 0, kq = 0;    // kq: k rounded up to a multiple of 64 (zeros past k)
  LargePageVector<int8_t> packed;  // strips of 32 columns, [kq / 4][32][4]
  std::vector<float> scale;        // per output channel
  std::vector<int32_t> col_sum;    // per output channel: sum of its int8 values
};
QuantizedWeight quantize_weight(const float* w, int64_t n, int64_t k, int64_t ldw);

// y [m, n] (rows ldy apart) = x [m, k] (rows ldx apart) wᵀ + bias (n floats, or null), with x
// quantized per row, the products on `path` (one the CPU has; the same bits on each).
void linear_s8(const float* x, int64_t m, int64_t ldx, const QuantizedWeight& w, const float* bias,
               float* y, int64_t ldy, S8Path path);

}  // namespace oneflow::cpu

// gemm_f32.h (internal): the float32 GEMM of cpu::gemm on CPUs with AVX-512 (NOTE [float32
// GEMM] in cpu/gemm_f32.cpp) and its epilogue (NOTE [GEMM epilogues] in cpu/blas.h).
#pragma once
#include <cstdint>
#include <vector>

#include "large_pages.h"

namespace oneflow::cpu {

// Whether cpu::gemm runs float32 GEMMs on this kernel here: the CPU has AVX-512F and the kernel
// is enabled (OpenBLAS's sgemm otherwise).
bool gemm_f32_supported();
// Turns the kernel off (tests and benchmarks compare it with sgemm); returns the previous setting.
bool set_gemm_f32_enabled(bool on);

// What runs on each output tile after its sums: `bias` (n floats, or null) is the first k
// block's C input with beta 1 (alpha * AB + bias); `act` (or null) then maps each row segment
// of the tile in place; then each value is multiplied by `scale` (unless 1) and `residual`
// (rows ldr apart, or null) is added: each a rounding of its own, as the unfused ops round.
struct GemmEpilogueF32 {
  const float* bias = nullptr;
  void (*act)(float* p, int64_t n) = nullptr;
  float scale = 1.f;
  const float* residual = nullptr;
  int64_t ldr = 0;
};

// c [m, n] (rows ldc apart) = alpha * a @ b + beta * c (beta = 0: c is not read; a bias in the
// epilogue replaces c's read), a [m, k] and b [k, n] row-major with leading dimension ld (trans:
// the transpose of such a matrix is given, element (i, j) at j * ld + i). m, n, k > 0.
// packed_b: B as pack_b_f32 packed it (b, tb, ldb are then not read), or null.
void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, bool ta, int64_t lda, const float* b,
              bool tb, int64_t ldb, float alpha, float beta, float* c, int64_t ldc,
              const float* packed_b = nullptr, const GemmEpilogueF32& ep = {});

// The leading dimension at which gemm_f32 reads a row-major A of this k without copying it (its
// packed layout: k <= 256, rows 272 floats apart); 0 when every A is copied. A caller that makes
// A (attention's probabilities) can write it so.
int64_t gemm_f32_inplace_lda(int64_t k);

// Whether gemm_f32 runs this shape as dot products against B = Wᵀ in place (few rows, B given
// transposed: NOTE [float32 GEMV]); packing B is then wasted.
bool gemm_f32_gemv(int64_t m, bool ta, bool tb);

// B [k, n] packed once for gemm_f32: a constant operand's (NOTE [Prepacked weights]).
LargePageVector<float> pack_b_f32(int64_t k, int64_t n, const float* b, bool tb, int64_t ldb);

}  // namespace oneflow::cpu

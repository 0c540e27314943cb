// gemm_bf16.h (internal): the bfloat16 GEMM of cpu::gemm on CPUs with AVX512-BF16 (NOTE
// [bfloat16 GEMM] in cpu/gemm_bf16.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "large_pages.h"

namespace oneflow::cpu {

// Whether cpu::gemm runs bfloat16 GEMMs here: the CPU has AVX512-BF16 and the kernel is enabled
// (it widens to sgemm otherwise).
bool gemm_bf16_supported();
// Turns the kernel off (tests and benchmarks compare it with the widened sgemm); returns the
// previous setting.
bool set_gemm_bf16_enabled(bool on);
// Whether it runs GEMMs of 16 rows or more whose k is a multiple of 32 on AMX-BF16 here (the CPU
// has it, Linux lets this process use the tiles, and it is not turned off);
// set_gemm_bf16_amx(false) keeps them on AVX512-BF16 (tests); returns the previous setting.
bool gemm_bf16_amx();
bool set_gemm_bf16_amx(bool on);

// c [m, n] (float32, rows ldc apart) = alpha * a @ b + beta * c (beta = 0: c is not read), a
// [m, k] and b [k, n] bfloat16 bit patterns, each row-major with leading dimension ld (trans:
// the transpose of such a matrix is given, element (i, j) at j * ld + i). m, n, k > 0.
// packed_b: B as pack_b_bf16 packed it (b, tb, ldb are then not read), or null.
void gemm_bf16(int64_t m, int64_t n, int64_t k, const uint16_t* a, bool ta, int64_t lda,
               const uint16_t* b, bool tb, int64_t ldb, float alpha, float beta, float* c,
               int64_t ldc, const uint32_t* packed_b = nullptr);

// Whether gemm_bf16 runs this shape as dot products against B = Wᵀ in place (few rows, B given
// transposed: NOTE [bfloat16 GEMV]); packing B is then wasted.
bool gemm_bf16_gemv(int64_t m, bool ta, bool tb);

// B [k, n] packed once for gemm_bf16 (the strips it packs per call otherwise): a constant
// operand's (NOTE [Prepacked weights]).
LargePageVector<uint32_t> pack_b_bf16(int64_t k, int64_t n, const uint16_t* b, bool tb,
                                      int64_t ldb);

// Constant operands packed so far and held (cpu/blas.cpp's cache; tests).
size_t packed_constant_operands();

}  // namespace oneflow::cpu

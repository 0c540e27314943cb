// simd.h (internal): AVX-512 helpers the GEMM kernels share (cpu/gemm_f32.cpp,
// cpu/gemm_bf16.cpp, cpu/gemm_s8.cpp). Call them from functions compiled for AVX-512 (target
// attributes).
#pragma once
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cmath>

namespace oneflow::cpu {

// The mask of the first min(left, 16) lanes.
inline __mmask16 tail_mask16(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

// The 16 lanes' sum, halves added pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1): a fixed order. (The
// zero-masked extracts: GCC 12 warns on the plain ones' undefined source.)
__attribute__((target("avx512f"))) inline float lane_sum(__m512 v) {
  const __m512d d = _mm512_castps_pd(v);
  const __m256 h =
      _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8(0xff), d, 0)),
                    _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8(0xff), d, 1)));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
  return _mm_cvtss_f32(q);
}

// A GEMV's output (NOTE [float32 GEMV]): alpha times the lanes' sum, then the bias (when given)
// or beta * out (unless beta is 0: out is not read).
__attribute__((target("avx512f"))) inline void gemv_store(float* out, __m512 acc, float alpha,
                                                          float beta, const float* bias) {
  const float v = alpha * lane_sum(acc);
  if (bias) *out = v + *bias;
  else *out = beta != 0.f ? std::fma(beta, *out, v) : v;
}

// c row (the nc <= 32 valid columns) = alpha * (v0, v1) + beta * cin (cin: c itself unless
// given; beta 0: not read), the register tiles' output formula.
__attribute__((target("avx512f"))) inline void store_row32(__m512 v0, __m512 v1, float* c,
                                                           int64_t nc, float alpha, float beta,
                                                           const float* cin = nullptr) {
  const __mmask16 m0 = tail_mask16(nc), m1 = tail_mask16(nc - 16);
  const __m512 va = _mm512_set1_ps(alpha);
  v0 = _mm512_mul_ps(v0, va);
  v1 = _mm512_mul_ps(v1, va);
  if (beta != 0.f) {
    const float* s = cin ? cin : c;
    const __m512 vb = _mm512_set1_ps(beta);
    v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, s), vb, v0);
    v1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, s + 16), vb, v1);
  }
  _mm512_mask_storeu_ps(c, m0, v0);
  _mm512_mask_storeu_ps(c + 16, m1, v1);
}

}  // namespace oneflow::cpu
#endif

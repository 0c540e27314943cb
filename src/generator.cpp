#include "generator.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernel_support.h"  // in_kernel
#include "trace_observer.h"

namespace oneflow {
namespace {
std::mutex g_mu;
GeneratorState g_state{67280421310721ull, 0};
}  // namespace

GeneratorState random_state() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_state;
}

void set_random_state(GeneratorState s) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_state = s;
}

// NOTE [Batched Philox]: the rounds of Philox::generate over sixteen (AVX-512) or eight (AVX2)
// counters at once, one counter per 32-bit lane; the 32x32 -> 64-bit products come from
// vpmuludq on the even and the odd lanes (GCC does not vectorize the scalar form). ~10x the
// scalar rate, so dropout's and attention's dropout elements cost about a memory pass. The
// same arithmetic as Philox::generate, so the same words (tested against it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // GCC 12 flags the intrinsics' own _mm512_undefined_epi32 operands
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
#if defined(__AVX512F__)
constexpr int kPhiloxLanes = 16;
using PhiloxVec = __m512i;
inline PhiloxVec pv_set1(uint32_t x) { return _mm512_set1_epi32(int(x)); }
inline PhiloxVec pv_xor(PhiloxVec a, PhiloxVec b) { return _mm512_xor_si512(a, b); }
// hi and lo words of m * c per lane
inline void pv_mulhilo(PhiloxVec m, PhiloxVec c, PhiloxVec& hi, PhiloxVec& lo) {
  const __m512i even = _mm512_mul_epu32(c, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}
inline void pv_store(uint32_t* p, PhiloxVec v) { _mm512_storeu_si512(p, v); }
inline PhiloxVec pv_load(const uint32_t* p) { return _mm512_load_si512(p); }
inline PhiloxVec pv_iota(uint32_t x) {
  return _mm512_add_epi32(_mm512_set1_epi32(int(x)),
                          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
// Writes lane l of a, b, c, d as words 4l .. 4l + 3 of out (a 4 x 16 transpose).
inline void pv_store_words(uint32_t* out, PhiloxVec a, PhiloxVec b, PhiloxVec c, PhiloxVec d) {
  const __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
  const __m512i t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i x0 = _mm512_shuffle_i32x4(u0, u1, 0x44), x1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i x2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), x3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  pv_store(out, _mm512_shuffle_i32x4(x0, x1, 0x88));
  pv_store(out + 16, _mm512_shuffle_i32x4(x0, x1, 0xDD));
  pv_store(out + 32, _mm512_shuffle_i32x4(x2, x3, 0x88));
  pv_store(out + 48, _mm512_shuffle_i32x4(x2, x3, 0xDD));
}
#elif defined(__AVX2__)
constexpr int kPhiloxLanes = 8;
using PhiloxVec = __m256i;
inline PhiloxVec pv_set1(uint32_t x) { return _mm256_set1_epi32(int(x)); }
inline PhiloxVec pv_xor(PhiloxVec a, PhiloxVec b) { return _mm256_xor_si256(a, b); }
inline void pv_mulhilo(PhiloxVec m, PhiloxVec c, PhiloxVec& hi, PhiloxVec& lo) {
  const __m256i even = _mm256_mul_epu32(c, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}
inline void pv_store(uint32_t* p, PhiloxVec v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}
inline PhiloxVec pv_load(const uint32_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}
inline PhiloxVec pv_iota(uint32_t x) {
  return _mm256_add_epi32(_mm256_set1_epi32(int(x)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline void pv_store_words(uint32_t* out, PhiloxVec a, PhiloxVec b, PhiloxVec c, PhiloxVec d) {
  const __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
  const __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  pv_store(out, _mm256_permute2x128_si256(u0, u1, 0x20));
  pv_store(out + 8, _mm256_permute2x128_si256(u2, u3, 0x20));
  pv_store(out + 16, _mm256_permute2x128_si256(u0, u1, 0x31));
  pv_store(out + 24, _mm256_permute2x128_si256(u2, u3, 0x31));
}
#else
constexpr int kPhiloxLanes = 0;
#endif
}  // namespace

void philox_words(uint64_t seed, uint64_t offset, uint64_t first, int64_t n, uint32_t* out) {
  uint64_t ctr = offset + first / 4;
  int64_t skip = int64_t(first % 4), done = 0;
#if defined(__AVX512F__) || defined(__AVX2__)
  constexpr int kV = kPhiloxLanes;
  alignas(64) uint32_t words[4 * 4 * kV];
  // One pass: G vectors of counters from ctr, interleaved (a round is a chain of dependent
  // multiplies, so one vector alone waits on their latency), written as 4 * G * kV words.
  auto pass = [&](auto G_, uint32_t* o) {
    constexpr int G = decltype(G_)::value;
    const PhiloxVec m0 = pv_set1(0xD2511F53u), m1 = pv_set1(0xCD9E8D57u);
    PhiloxVec v0[G], v1[G], v2[G], v3[G];
    if (uint32_t(ctr) <= 0xFFFFFFFFu - uint32_t(G * kV)) {  // no carry into the high word
      for (int gi = 0; gi < G; ++gi) {
        v0[gi] = pv_iota(uint32_t(ctr) + uint32_t(gi * kV));
        v1[gi] = pv_set1(uint32_t(ctr >> 32));
      }
    } else {
      alignas(64) uint32_t c[2][G * kV];
      for (int l = 0; l < G * kV; ++l) {
        const uint64_t x = ctr + uint64_t(l);
        c[0][l] = uint32_t(x);
        c[1][l] = uint32_t(x >> 32);
      }
      for (int gi = 0; gi < G; ++gi) {
        v0[gi] = pv_load(c[0] + gi * kV);
        v1[gi] = pv_load(c[1] + gi * kV);
      }
    }
    for (int gi = 0; gi < G; ++gi) v2[gi] = v3[gi] = pv_set1(0);
    uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      const PhiloxVec key0 = pv_set1(k0), key1 = pv_set1(k1);
      for (int gi = 0; gi < G; ++gi) {
        PhiloxVec hi0, lo0, hi1, lo1;
        pv_mulhilo(m0, v0[gi], hi0, lo0);
        pv_mulhilo(m1, v2[gi], hi1, lo1);
        v0[gi] = pv_xor(pv_xor(hi1, v1[gi]), key0);
        v2[gi] = pv_xor(pv_xor(hi0, v3[gi]), key1);
        v1[gi] = lo1;
        v3[gi] = lo0;
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int gi = 0; gi < G; ++gi) pv_store_words(o + 4 * gi * kV, v0[gi], v1[gi], v2[gi], v3[gi]);
    ctr += uint64_t(G * kV);
  };
  while (done < n) {
    // four vectors while at least that many words remain, then one at a time
    const bool wide = skip + (n - done) >= 4 * 4 * kV;
    const int64_t words_per_pass = wide ? 4 * 4 * kV : 4 * kV;
    const int64_t take = std::min<int64_t>(words_per_pass - skip, n - done);
    uint32_t* o = skip == 0 && take == words_per_pass ? out + done : words;
    if (wide) pass(std::integral_constant<int, 4>{}, o);
    else pass(std::integral_constant<int, 1>{}, o);
    if (o == words) std::memcpy(out + done, words + skip, size_t(take) * sizeof(uint32_t));
    done += take;
    skip = 0;
  }
#else
  uint32_t w[4];
  while (done < n) {
    Philox::generate(seed, ctr, w);
    const int64_t take = std::min<int64_t>(4 - skip, n - done);
    std::memcpy(out + done, w + skip, size_t(take) * sizeof(uint32_t));
    done += take;
    skip = 0;
    ++ctr;
  }
#endif
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

GeneratorState reserve_random(uint64_t counters) {
  GeneratorState s;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    s = g_state;
    g_state.offset += counters;
  }
  if (g_tracer && !in_kernel()) g_tracer->on_random(s.seed, s.offset, counters);
  return s;
}

}  // namespace oneflow

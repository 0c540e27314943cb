// gemm_s8.cpp: linear with int8 weights and dynamically quantized activations.
// NOTE [Dynamic int8 linear]: y = x wᵀ + b computed as
//   w: per output channel j, symmetric int8: s_j = max|w_j| / 127, q_jk = round(w_jk / s_j)
//      (a zero row: s_j = 1, q = 0); packed once per constant weight (NOTE [Prepacked weights]);
//   x: per row i, asymmetric uint8 over [min(x_i, 0), max(x_i, 0)]: a_i = (hi - lo) / 255 (1 when
//      the row is all zeros), z_i = round(-lo / a_i), u_ik = clamp(round(x_ik / a_i) + z_i, 0,
//      255);
//   acc_ij = sum_k u_ik q_jk in int32 (exact: |acc| < 255 * 127 * k, k < 66000);
//   y_ij = float(acc_ij - z_i * c_j) * (a_i * s_j) + b_j, c_j = sum_k q_jk.
// A weight with an inf or a NaN is an error (it has no int8 form); a row of x with one (or with a
// range wider than float's) is summed in floats against the dequantized weight instead, so the
// inf or NaN reaches y as it would unquantized.
// The products run on AVX512-VNNI (vpdpbusd: four u8 x s8 products into each int32 lane) where
// the CPU has it, as a 12 x 32 register tile over strips of 32 columns packed [k/4][32][4];
// elsewhere the same sums in plain loops. Integer sums are exact, so both give the same bits.
#include "cpu/gemm_s8.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "oneflow/error.h"
#include "thread_pool.h"

namespace oneflow::cpu {

namespace {
constexpr int64_t kNr = 32;  // columns per strip
constexpr int kMr = 12;      // rows per register tile
}  // namespace

bool gemm_s8_vnni() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool cpu = __builtin_cpu_supports("avx512vnni") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512f");
  return cpu;
#else
  return false;
#endif
}

QuantizedWeight quantize_weight(const float* w, int64_t n, int64_t k, int64_t ldw) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p)
      OF_CHECK(std::isfinite(w[j * ldw + p]),
               "[linear_dynamic_int8] weight [{}, {}] has a value that is not finite at [{}, {}] "
               "({}); int8 quantization needs finite weights",
               n, k, j, p, w[j * ldw + p]);
  QuantizedWeight q;
  q.n = n;
  q.k = k;
  q.kq = (k + 3) / 4 * 4;
  const int64_t strips = (n + kNr - 1) / kNr;
  q.packed.assign(size_t(strips * q.kq * kNr), 0);
  q.scale.resize(size_t(n));
  q.col_sum.resize(size_t(n));
  parallel_for(0, n, std::max<int64_t>(1, 8192 / std::max<int64_t>(k, 1)),
               [&](int64_t j0, int64_t j1) {
                 for (int64_t j = j0; j < j1; ++j) {
                   const float* row = w + j * ldw;
                   float m = 0;
                   for (int64_t p = 0; p < k; ++p) m = std::max(m, std::fabs(row[p]));
                   const float s = m > 0 ? m / 127.f : 1.f;
                   q.scale[size_t(j)] = s;
                   int32_t sum = 0;
                   int8_t* strip = q.packed.data() + (j / kNr) * q.kq * kNr;
                   const int64_t jj = j % kNr;
                   for (int64_t p = 0; p < k; ++p) {
                     const int v = int(std::clamp(std::nearbyint(row[p] / s), -127.f, 127.f));
                     sum += v;
                     strip[(p / 4) * kNr * 4 + jj * 4 + p % 4] = int8_t(v);
                   }
                   q.col_sum[size_t(j)] = sum;
                 }
               });
  return q;
}

namespace {

// Row i of x quantized to uint8 (kq bytes, zero past k); returns (a_i, z_i), or a_i = NaN when
// the row has a value that is not finite or a range too wide for a float scale (the row is then
// computed in floats, see linear_s8).
std::pair<float, int32_t> quantize_row(const float* x, int64_t k, int64_t kq, uint8_t* u) {
  float lo = 0, hi = 0;
  bool finite = true;
  for (int64_t p = 0; p < k; ++p) {
    finite = finite && std::isfinite(x[p]);
    lo = std::min(lo, x[p]);
    hi = std::max(hi, x[p]);
  }
  const float a = hi > lo ? (hi - lo) / 255.f : 1.f;
  if (!finite || !std::isfinite(a)) {
    std::fill(u, u + kq, uint8_t(0));
    return {std::numeric_limits<float>::quiet_NaN(), 0};
  }
  const int32_t z = int32_t(std::clamp(std::nearbyint(-lo / a), 0.f, 255.f));
  for (int64_t p = 0; p < k; ++p)
    u[p] = uint8_t(std::clamp(std::nearbyint(x[p] / a) + float(z), 0.f, 255.f));
  std::fill(u + k, u + kq, uint8_t(0));
  return {a, z};
}

#if defined(__x86_64__) && defined(__GNUC__)
#define OF_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
// An R x 32 tile: acc (int32) = u rows (kq bytes, lda apart) times the strip ([kq/4][32][4]).
template <int R>
OF_VNNI_TARGET void tile_vnni(const uint8_t* u, int64_t lda, const int8_t* bs, int64_t kq,
                              int32_t* acc_out) {
  __m512i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t p = 0; p < kq / 4; ++p) {
    const __m512i b0 = _mm512_loadu_si512(bs + p * kNr * 4);
    const __m512i b1 = _mm512_loadu_si512(bs + p * kNr * 4 + 64);
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      __builtin_memcpy(&quad, u + r * lda + p * 4, 4);
      const __m512i av = _mm512_set1_epi32(quad);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_si512(acc_out + r * kNr, acc[r][0]);
    _mm512_storeu_si512(acc_out + r * kNr + 16, acc[r][1]);
  }
}
using TileFn = void (*)(const uint8_t*, int64_t, const int8_t*, int64_t, int32_t*);
template <int... R> constexpr auto make_tiles(std::integer_sequence<int, R...>) {
  return std::array<TileFn, sizeof...(R)>{&tile_vnni<R + 1>...};
}
constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kMr>{});
#endif

// The same sums in plain loops (CPUs without VNNI).
void tile_plain(int R, const uint8_t* u, int64_t lda, const int8_t* bs, int64_t kq,
                int32_t* acc_out) {
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < kNr; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < kq; ++p)
        s += int32_t(u[r * lda + p]) * int32_t(bs[(p / 4) * kNr * 4 + j * 4 + p % 4]);
      acc_out[r * kNr + j] = s;
    }
}

}  // namespace

void linear_s8(const float* x, int64_t m, int64_t ldx, const QuantizedWeight& w, const float* bias,
               float* y, int64_t ldy, bool use_vnni) {
  const int64_t n = w.n, k = w.k, kq = w.kq;
  if (m <= 0 || n <= 0) return;
  OF_CHECK(k < 66000, "[linear_dynamic_int8] k = {} is too large for exact int32 sums", k);
  // the activations, row by row
  thread_local std::vector<uint8_t> ubuf;
  thread_local std::vector<float> abuf;
  thread_local std::vector<int32_t> zbuf;
  if (ubuf.size() < size_t(m * kq)) ubuf.resize(size_t(m * kq));
  if (abuf.size() < size_t(m)) abuf.resize(size_t(m));
  if (zbuf.size() < size_t(m)) zbuf.resize(size_t(m));
  uint8_t* u = ubuf.data();
  float* a = abuf.data();
  int32_t* z = zbuf.data();
  parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
               [&](int64_t i0, int64_t i1) {
                 for (int64_t i = i0; i < i1; ++i) {
                   const auto [ai, zi] = quantize_row(x + i * ldx, k, kq, u + i * kq);
                   a[i] = ai;
                   z[i] = zi;
                 }
               });
  const int64_t strips = (n + kNr - 1) / kNr, mtiles = (m + kMr - 1) / kMr;
  const int64_t tasks = strips * mtiles;
  const double work = double(m) * double(n) * double(k);
  const int64_t grain =
      std::max<int64_t>(1, int64_t(double(tasks) * 524288.0 / std::max(work, 1.0)));
  parallel_for(0, tasks, grain, [&](int64_t t0, int64_t t1) {
    alignas(64) int32_t acc[kMr * kNr];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t / mtiles, i0 = (t % mtiles) * kMr;
      const int R = int(std::min<int64_t>(kMr, m - i0));
      const int8_t* bs = w.packed.data() + s * kq * kNr;
#if defined(__x86_64__) && defined(__GNUC__)
      if (use_vnni) kTiles[size_t(R - 1)](u + i0 * kq, kq, bs, kq, acc);
      else tile_plain(R, u + i0 * kq, kq, bs, kq, acc);
#else
      (void)use_vnni;
      tile_plain(R, u + i0 * kq, kq, bs, kq, acc);
#endif
      const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
      for (int r = 0; r < R; ++r) {
        const int64_t i = i0 + r;
        if (std::isnan(a[i])) continue;  // a float row, below
        float* yr = y + i * ldy + j0;
        for (int64_t j = 0; j < nc; ++j) {
          const int32_t v = acc[r * kNr + j] - z[i] * w.col_sum[size_t(j0 + j)];
          const float o = float(v) * (a[i] * w.scale[size_t(j0 + j)]);
          yr[j] = bias ? o + bias[j0 + j] : o;
        }
      }
    }
  });
  // Rows that could not be quantized (an inf or a NaN in x, or a range past float's): their sums
  // in floats against the dequantized weight, so a non-finite value reaches the output as it
  // would without quantization.
  for (int64_t i = 0; i < m; ++i) {
    if (!std::isnan(a[i])) continue;
    const float* xi = x + i * ldx;
    float* yr = y + i * ldy;
    for (int64_t j = 0; j < n; ++j) {
      const int8_t* strip = w.packed.data() + (j / kNr) * kq * kNr;
      const int64_t jj = j % kNr;
      float acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += xi[p] * (float(strip[(p / 4) * kNr * 4 + jj * 4 + p % 4]) * w.scale[size_t(j)]);
      yr[j] = bias ? acc + bias[j] : acc;
    }
  }
}

}  // namespace oneflow::cpu

// gemm_s8.cpp: linear with int8 weights and dynamically quantized activations.
// NOTE [Dynamic int8 linear]: y = x wᵀ + b computed as
//   w: per output channel j, symmetric int8: s_j = max|w_j| / 127, q_jk = round(w_jk / s_j)
//      (a zero row: s_j = 1, q = 0); packed once per constant weight (NOTE [Prepacked weights]);
//   x: per row i, asymmetric uint8 over [min(x_i, 0), max(x_i, 0)]: a_i = (hi - lo) / 255 (1 when
//      the row is all zeros), z_i = round(-lo / a_i), u_ik = clamp(round(x_ik / a_i) + z_i, 0,
//      255);
//   acc_ij = sum_k u_ik q_jk in int32 (exact: |acc| < 255 * 127 * k, k < 66000);
//   y_ij = float(acc_ij - z_i * c_j) * (a_i * s_j) + b_j, c_j = sum_k q_jk, the last multiply
//          and add one fused multiply-add (one rounding; a plain multiply without a bias).
// A weight with an inf or a NaN is an error (it has no int8 form); a row of x with one (or with a
// range wider than float's) is summed in floats against the dequantized weight instead, so the
// inf or NaN reaches y as it would unquantized.
// The products run on AMX-INT8 where the CPU has it (tdpbusd: a 16 x 16 int32 tile += a 16 x 64
// u8 tile times a 64 x 16 s8 tile, four tiles making a 32 x 32 block of rows times one strip),
// else on AVX512-VNNI (vpdpbusd: four u8 x s8 products into each int32 lane, a 12 x 32 register
// tile), else in plain loops; the weight is packed once for all three, in strips of 32 columns
// [kq/4][32][4] (an AMX B tile is 16 of those columns, 128 bytes a row apart), k padded with
// zeros to a multiple of 64 (one AMX A tile row). Integer sums are exact, so all three give the
// same bits; the output pass (the formula above, 16 columns at a time with AVX-512 where the CPU
// has it, the same float operations in the same order) is shared.
#include "cpu/gemm_s8.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "cpu/amx.h"
#include "cpu/simd.h"
#include "oneflow/error.h"
#include "thread_pool.h"

namespace oneflow::cpu {

namespace {
constexpr int64_t kNr = 32;  // columns per strip
constexpr int kMr = 12;      // rows per register tile
// Where q_jk lives in column jj's strip ([kq/4][32][4]).
inline int64_t packed_at(int64_t p, int64_t jj) { return (p / 4) * kNr * 4 + jj * 4 + p % 4; }
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

bool gemm_s8_amx() {
  // (the output pass and the quantization use AVX-512)
  static const bool ok = gemm_s8_vnni() && amx_usable(AmxUnit::kInt8);
  return ok;
}

S8Path gemm_s8_best() {
  return gemm_s8_amx() ? S8Path::kAmx : gemm_s8_vnni() ? S8Path::kVnni : S8Path::kPlain;
}

const char* s8_path_name(S8Path p) {
  return p == S8Path::kAmx ? "AMX-INT8" : p == S8Path::kVnni ? "AVX512-VNNI" : "plain loops";
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
  q.kq = (k + 63) / 64 * 64;
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
                     strip[packed_at(p, jj)] = int8_t(v);
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
std::pair<float, int32_t> quantize_row_plain(const float* x, int64_t k, int64_t kq, uint8_t* u) {
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
// (GCC 12 takes the _mm512_undefined_ps() inside the reduction intrinsics for uninitialized use)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The same, 16 values at a time (the same operations: a correctly rounded division, rounding to
// nearest even, exact min/max): the same bytes.
__attribute__((target("avx512f,avx512bw"))) std::pair<float, int32_t> quantize_row_avx512(
    const float* x, int64_t k, int64_t kq, uint8_t* u) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  __mmask16 bad = 0;
  int64_t p = 0;
  for (; p < k; p += 16) {
    const __mmask16 mk = tail_mask16(k - p);
    const __m512 v = _mm512_maskz_loadu_ps(mk, x + p);
    // x - x is 0 for a finite x, NaN for an inf or a NaN
    bad |= _mm512_mask_cmp_ps_mask(mk, _mm512_sub_ps(v, v), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    lo = _mm512_min_ps(lo, v);
    hi = _mm512_max_ps(hi, v);
  }
  const float l = _mm512_reduce_min_ps(lo), h = _mm512_reduce_max_ps(hi);
  const float a = h > l ? (h - l) / 255.f : 1.f;
  if (bad || !std::isfinite(a)) {
    std::fill(u, u + kq, uint8_t(0));
    return {std::numeric_limits<float>::quiet_NaN(), 0};
  }
  const int32_t z = int32_t(std::clamp(std::nearbyint(-l / a), 0.f, 255.f));
  const __m512 av = _mm512_set1_ps(a), zv = _mm512_set1_ps(float(z));
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.f);
  for (p = 0; p < k; p += 16) {
    const __mmask16 mk = tail_mask16(k - p);
    const __m512 q = _mm512_roundscale_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(mk, x + p), av),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 c = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(q, zv), zero), top);
    _mm512_mask_cvtepi32_storeu_epi8(u + p, mk, _mm512_cvtps_epi32(c));
  }
  std::fill(u + k, u + kq, uint8_t(0));
  return {a, z};
}
#pragma GCC diagnostic pop
#endif

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

// AMX: the tile configuration (palette 1) of a block of `rows` (16: two row tiles, 32 rows; fewer:
// one row tile of that many rows) times one 32-column strip: C tiles 0-3, A tiles 4-5, B 6-7.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
TileConfig amx_config(int rows) {
  TileConfig c;
  for (int t : {0, 1, 2, 3}) c.colsb[t] = 64, c.rows[t] = uint8_t(rows);  // 16 int32 a row
  for (int t : {4, 5}) c.colsb[t] = 64, c.rows[t] = uint8_t(rows);        // 64 u8 a row
  for (int t : {6, 7}) c.colsb[t] = 64, c.rows[t] = 16;                   // 16 k-quads
  return c;
}
#define OF_AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f")))
OF_AMX_TARGET void amx_load_config(const TileConfig& c) { _tile_loadconfig(&c); }
OF_AMX_TARGET void amx_release() { _tile_release(); }
// acc (32 x 32 int32, or rows x 32 with one row tile) = u rows (lda apart) times the strip.
template <bool kTwo>
OF_AMX_TARGET void block_amx(const uint8_t* u, int64_t lda, const int8_t* bs, int64_t kq,
                             int32_t* acc) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kTwo) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t p = 0; p < kq; p += 64) {
    const int8_t* b = bs + p * kNr;  // k-quad p / 4 of the strip
    _tile_loadd(6, b, kNr * 4);
    _tile_loadd(7, b + 64, kNr * 4);
    _tile_loadd(4, u + p, lda);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    if constexpr (kTwo) {
      _tile_loadd(5, u + 16 * lda + p, lda);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
  }
  _tile_stored(0, acc, kNr * 4);
  _tile_stored(1, acc + 16, kNr * 4);
  if constexpr (kTwo) {
    _tile_stored(2, acc + 16 * kNr, kNr * 4);
    _tile_stored(3, acc + 16 * kNr + 16, kNr * 4);
  }
}

// The output pass of R rows (acc: R x 32, a row kNr apart) into columns j0 .. j0 + nc of y:
// y = float(acc - z_i c_j) * (a_i s_j) + b_j, 16 columns at a time.
OF_VNNI_TARGET void output_avx512(const int32_t* acc, int R, int64_t i0, int64_t j0, int64_t nc,
                                  const float* a, const int32_t* z, const QuantizedWeight& w,
                                  const float* bias, float* y, int64_t ldy) {
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r;
    if (std::isnan(a[i])) continue;  // a float row, below
    const __m512i zi = _mm512_set1_epi32(z[i]);
    const __m512 ai = _mm512_set1_ps(a[i]);
    float* yr = y + i * ldy + j0;
    for (int64_t j = 0; j < nc; j += 16) {
      const __mmask16 mk = tail_mask16(nc - j);
      const __m512i c = _mm512_maskz_loadu_epi32(mk, w.col_sum.data() + j0 + j);
      const __m512 sj = _mm512_maskz_loadu_ps(mk, w.scale.data() + j0 + j);
      const __m512i v =
          _mm512_sub_epi32(_mm512_loadu_si512(acc + r * kNr + j), _mm512_mullo_epi32(zi, c));
      const __m512 f = _mm512_maskz_cvtepi32_ps(mk, v), as = _mm512_mul_ps(ai, sj);
      const __m512 o = bias ? _mm512_fmadd_ps(f, as, _mm512_maskz_loadu_ps(mk, bias + j0 + j))
                            : _mm512_mul_ps(f, as);
      _mm512_mask_storeu_ps(yr + j, mk, o);
    }
  }
}
#endif

// The same output pass one column at a time (CPUs without AVX-512).
void output_plain(const int32_t* acc, int R, int64_t i0, int64_t j0, int64_t nc, const float* a,
                  const int32_t* z, const QuantizedWeight& w, const float* bias, float* y,
                  int64_t ldy) {
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r;
    if (std::isnan(a[i])) continue;  // a float row, below
    float* yr = y + i * ldy + j0;
    for (int64_t j = 0; j < nc; ++j) {
      const int32_t v = acc[r * kNr + j] - z[i] * w.col_sum[size_t(j0 + j)];
      const float as = a[i] * w.scale[size_t(j0 + j)];
      yr[j] = bias ? std::fma(float(v), as, bias[j0 + j]) : float(v) * as;
    }
  }
}

// The same sums in plain loops (CPUs without VNNI).
void tile_plain(int R, const uint8_t* u, int64_t lda, const int8_t* bs, int64_t kq,
                int32_t* acc_out) {
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < kNr; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < kq; ++p) s += int32_t(u[r * lda + p]) * int32_t(bs[packed_at(p, j)]);
      acc_out[r * kNr + j] = s;
    }
}

}  // namespace

void linear_s8(const float* x, int64_t m, int64_t ldx, const QuantizedWeight& w, const float* bias,
               float* y, int64_t ldy, S8Path path) {
  const int64_t n = w.n, k = w.k, kq = w.kq;
  if (m <= 0 || n <= 0) return;
  OF_CHECK(k < 66000, "[linear_dynamic_int8] k = {} is too large for exact int32 sums", k);
  OF_CHECK(path == S8Path::kPlain || (path == S8Path::kVnni && gemm_s8_vnni()) ||
               (path == S8Path::kAmx && gemm_s8_amx()),
           "[linear_dynamic_int8] this CPU has no {} path", s8_path_name(path));
  const bool amx = path == S8Path::kAmx;
  // AMX reads whole row tiles: 32-row blocks (rows past m zero), or one tile of m <= 16 rows
  const int64_t block = amx ? (m <= 16 ? m : 32) : kMr;
  const int64_t mpad = (m + block - 1) / block * block;
  // the activations, row by row
  thread_local std::vector<uint8_t> ubuf;
  thread_local std::vector<float> abuf;
  thread_local std::vector<int32_t> zbuf;
  if (ubuf.size() < size_t(mpad * kq)) ubuf.resize(size_t(mpad * kq));
  if (abuf.size() < size_t(m)) abuf.resize(size_t(m));
  if (zbuf.size() < size_t(m)) zbuf.resize(size_t(m));
  uint8_t* u = ubuf.data();
  float* a = abuf.data();
  int32_t* z = zbuf.data();
  std::fill(u + m * kq, u + mpad * kq, uint8_t(0));
  const bool avx512 = gemm_s8_vnni();  // (AVX512-VNNI implies F and BW)
  parallel_for(
      0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)), [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
#if defined(__x86_64__) && defined(__GNUC__)
          const auto [ai, zi] = avx512 ? quantize_row_avx512(x + i * ldx, k, kq, u + i * kq)
                                       : quantize_row_plain(x + i * ldx, k, kq, u + i * kq);
#else
                   const auto [ai, zi] = quantize_row_plain(x + i * ldx, k, kq, u + i * kq);
#endif
          a[i] = ai;
          z[i] = zi;
        }
      });
  const int64_t strips = (n + kNr - 1) / kNr, mtiles = mpad / block;
  const int64_t tasks = strips * mtiles;
  const double work = double(m) * double(n) * double(k);
  const int64_t grain =
      std::max<int64_t>(1, int64_t(double(tasks) * 524288.0 / std::max(work, 1.0)));
  parallel_for(0, tasks, grain, [&](int64_t t0, int64_t t1) {
    alignas(64) int32_t acc[32 * kNr];
#if defined(__x86_64__) && defined(__GNUC__)
    if (amx) amx_load_config(amx_config(int(std::min<int64_t>(block, 16))));
#endif
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t / mtiles, i0 = (t % mtiles) * block;
      const int R = int(std::min<int64_t>(block, m - i0));
      const int8_t* bs = w.packed.data() + s * kq * kNr;
#if defined(__x86_64__) && defined(__GNUC__)
      if (amx) {
        if (block == 32) block_amx<true>(u + i0 * kq, kq, bs, kq, acc);
        else block_amx<false>(u + i0 * kq, kq, bs, kq, acc);
      } else if (path == S8Path::kVnni) {
        kTiles[size_t(R - 1)](u + i0 * kq, kq, bs, kq, acc);
      } else {
        tile_plain(R, u + i0 * kq, kq, bs, kq, acc);
      }
      const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
      if (avx512) output_avx512(acc, R, i0, j0, nc, a, z, w, bias, y, ldy);
      else output_plain(acc, R, i0, j0, nc, a, z, w, bias, y, ldy);
#else
      tile_plain(R, u + i0 * kq, kq, bs, kq, acc);
      const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
      output_plain(acc, R, i0, j0, nc, a, z, w, bias, y, ldy);
#endif
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (amx) amx_release();
#endif
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
        acc += xi[p] * (float(strip[packed_at(p, jj)]) * w.scale[size_t(j)]);
      yr[j] = bias ? acc + bias[j] : acc;
    }
  }
}

}  // namespace oneflow::cpu

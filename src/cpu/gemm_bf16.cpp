// gemm_bf16.cpp: a bfloat16 GEMM on AVX512-BF16 (vdpbf16ps), float32 accumulation.
// NOTE [bfloat16 GEMM]: Debian's OpenBLAS (0.3.21) is built without sbgemm, so a bfloat16 GEMM
// widened every operand to float32 and ran sgemm: bfloat16 saved memory, never time. On a CPU
// with AVX512-BF16 (Zen 4, Cooper Lake and later) vdpbf16ps multiplies 16 pairs of bfloat16 and
// adds both products to 16 float32 accumulators in one instruction: twice sgemm's multiply-adds
// per instruction. The kernel:
//   - packs B, one strip of kNr = 32 columns at a time, k in pairs: strip[p][j][2] holds
//     B(2p, j), B(2p + 1, j) (zero past n and past k), the layout vdpbf16ps reads; a traced
//     graph's constant weight is packed once (NOTE [Prepacked weights], cpu/blas.cpp's cache);
//   - reads A as rows of k pairs, so a pair is one 32-bit broadcast: a row-major A with an even
//     k in place, any other A packed first;
//   - runs a kMr x 32 register tile (kMr = 12: 24 accumulators) over blocks of kKc pairs, the
//     B strip (kKc * 128 bytes) reused by every row tile while it sits in L1;
//   - splits the strips over the thread pool (each task packs its strips and owns their
//     output columns: no shared writes, and the sums do not depend on the thread count).
// Products of two bfloat16 are exact in float32; each k pair is summed into the accumulator
// with one rounding (the instruction's), k blocks are added into C in order. c = alpha * AB +
// beta * c (beta = 0: c is not read). Results differ from the widened sgemm's in the last bits
// (another summation order), as any two GEMMs do.
// On a CPU with AMX-BF16 (Sapphire Rapids and later) a GEMM of at least 16 rows whose k pairs
// come in whole tiles (k a multiple of 32) runs on the tile unit instead (fewer rows, a decoding
// step's, are bound by reading B, which the register tile does as fast): tdpbf16ps adds a 16 x 32
// bfloat16 A tile times a 32 x 16 B tile into a 16 x 16 float32 tile (512 multiply-adds an
// instruction, 16 times vdpbf16ps's). B's strips are the same packing (a B tile is 16 columns of a
// strip, 128 bytes a pair apart: prepacked weights serve both paths); a block of 32 rows times one
// strip is four C tiles summed over all of k, then c = alpha * acc + beta * c; the last rows of A,
// when fewer than 32, are copied into a zeroed block first. The tile unit sums k pairs in its own
// order (its sums differ from vdpbf16ps's in the last bits); the path is chosen by the shape alone,
// so a product's bits do not depend on packing or on the thread count.
//
// NOTE [bfloat16 GEMV]: at most kGemvRows rows against B = Wᵀ (W row-major [n, k], a linear's
// weight) pack nothing, as NOTE [float32 GEMV]: each output a dot product of an A row and a W
// row, 32 values (16 pairs) a vdpbf16ps, 4 W rows a step, the 16 lanes summed in a fixed order,
// then alpha and beta * c. Packing per call made eager decoding pass over every weight twice.
#include "cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <utility>
#include <vector>

#include "cpu/amx.h"
#include "cpu/simd.h"
#include "oneflow/error.h"
#include "thread_pool.h"

namespace oneflow::cpu {

namespace {
std::atomic<bool> g_enabled{true};
std::atomic<bool> g_amx{true};
}  // namespace

bool gemm_bf16_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool cpu = __builtin_cpu_supports("avx512bf16") &&
                          __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return cpu && g_enabled.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

bool set_gemm_bf16_enabled(bool on) { return g_enabled.exchange(on); }

bool gemm_bf16_amx() {
  static const bool cpu = amx_usable(AmxUnit::kBf16);
  return cpu && g_amx.load(std::memory_order_relaxed) && gemm_bf16_supported();
}

bool set_gemm_bf16_amx(bool on) { return g_amx.exchange(on); }

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

constexpr int64_t kNr = 32;        // columns per strip (two zmm of float32)
constexpr int kMr = 12;            // rows per register tile
constexpr int64_t kKc = 256;       // k pairs per block (a strip block: 32 KiB)
constexpr int64_t kPrefetch = 16;  // k pairs ahead (2 KiB of the strip)
constexpr int64_t kGemvRows = 4;   // at most this many rows: NOTE [bfloat16 GEMV]

#define OF_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// One kMr (or fewer) x 32 tile over `kp` k pairs: acc = A rows (packed pairs, `arow` uint32 per
// pair, rows `lda2` pairs apart) times the strip block (kp x 32 pairs); then
// c = alpha * acc + beta * c for the `nc` valid columns.
template <int R>
OF_BF16_TARGET void tile(const uint32_t* a, int64_t lda2, const uint16_t* bs, int64_t kp, float* c,
                         int64_t ldc, int64_t nc, float alpha, float beta) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    // the strip streams from memory when few rows share it (decoding: one row): ask for it
    // ahead (past the block's end it runs into the next block, read next; a prefetch past the
    // end of the packing is dropped, never faults)
    _mm_prefetch(reinterpret_cast<const char*>(bs + (p + kPrefetch) * 64), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(bs + (p + kPrefetch) * 64 + 32), _MM_HINT_T0);
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bs + p * 64);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bs + p * 64 + 32);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[r * lda2 + p]));
      // the broadcast as the last operand: it folds into the instruction ({1to16}), no
      // separate shuffle (a0*b0 + a1*b1 is symmetric in its operands)
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], b0, av);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], b1, av);
    }
  }
  for (int r = 0; r < R; ++r) store_row32(acc[r][0], acc[r][1], c + r * ldc, nc, alpha, beta);
}

// NOTE [bfloat16 GEMV]: R rows of A (lda apart) against W rows j0 .. j1 (ldw apart, k each).
template <int R>
OF_BF16_TARGET void gemv_rows(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw,
                              int64_t k, int64_t j0, int64_t j1, float* c, int64_t ldc, float alpha,
                              float beta) {
  for (int64_t j = j0; j < j1; j += 4) {
    const int J = int(std::min<int64_t>(4, j1 - j));
    const uint16_t* wr[4];
    for (int q = 0; q < 4; ++q) wr[q] = w + (j + std::min(q, J - 1)) * ldw;  // (tail: repeats)
    __m512 acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < 4; ++q) acc[r][q] = _mm512_setzero_ps();
    for (int64_t p = 0; p < k; p += 32) {
      const __mmask32 mk = k - p >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << (k - p)) - 1);
      __m512bh wv[4];
      for (int q = 0; q < 4; ++q) {
        // (the next group's rows, at this column: a whole group ahead)
        _mm_prefetch(reinterpret_cast<const char*>(wr[q] + 4 * ldw + p), _MM_HINT_T0);
        wv[q] = (__m512bh)_mm512_maskz_loadu_epi16(mk, wr[q] + p);
      }
      for (int r = 0; r < R; ++r) {
        const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(mk, a + r * lda + p);
        for (int q = 0; q < 4; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], av, wv[q]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < J; ++q) gemv_store(c + r * ldc + j + q, acc[r][q], alpha, beta, nullptr);
  }
}

using TileFn = void (*)(const uint32_t*, int64_t, const uint16_t*, int64_t, float*, int64_t,
                        int64_t, float, float);
template <int... R> constexpr auto make_tiles(std::integer_sequence<int, R...>) {
  return std::array<TileFn, sizeof...(R)>{&tile<R + 1>...};
}
constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kMr>{});

// AMX: all eight tiles 16 rows x 64 bytes (C 0-3: 16 float32 a row; A 4-5: 16 k pairs a row;
// B 6-7: 16 columns' pairs a row).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
#define OF_AMX_BF16_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw")))
OF_AMX_BF16_TARGET void amx_begin() {
  static const TileConfig config;
  _tile_loadconfig(&config);
}
OF_AMX_BF16_TARGET void amx_end() { _tile_release(); }

// acc (32 x 32 float32, rows kNr apart) = 32 rows of A (pairs, rows lda2 apart) times the strip
// (kp pairs, a multiple of 16).
OF_AMX_BF16_TARGET void block_amx(const uint32_t* a, int64_t lda2, const uint32_t* strip,
                                  int64_t kp, float* acc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t p = 0; p < kp; p += 16) {
    _tile_loadd(6, strip + p * kNr, kNr * 4);
    _tile_loadd(7, strip + p * kNr + 16, kNr * 4);
    _tile_loadd(4, a + p, lda2 * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a + 16 * lda2 + p, lda2 * 4);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, kNr * 4);
  _tile_stored(1, acc + 16, kNr * 4);
  _tile_stored(2, acc + 16 * kNr, kNr * 4);
  _tile_stored(3, acc + 16 * kNr + 16, kNr * 4);
}

// c = alpha * acc + beta * c for R rows and the nc valid columns (the register tile's formula).
OF_BF16_TARGET void store_block(const float* acc, int R, float* c, int64_t ldc, int64_t nc,
                                float alpha, float beta) {
  for (int r = 0; r < R; ++r)
    store_row32(_mm512_loadu_ps(acc + r * kNr), _mm512_loadu_ps(acc + r * kNr + 16), c + r * ldc,
                nc, alpha, beta);
}

// Element (i, j) of an operand stored row-major (trans = false: at i * ld + j) or as the
// transpose of one (trans = true: at j * ld + i).
inline uint16_t at(const uint16_t* p, bool trans, int64_t ld, int64_t i, int64_t j) {
  return trans ? p[j * ld + i] : p[i * ld + j];
}

// Packs strip s of B (columns s*kNr ...) as [pair][kNr][2] for pairs [0, kp): zero past n and
// past k. linear's B is wᵀ (tb, k contiguous in memory): each pair is one 32-bit word of a
// row of w, so the strip is a transpose of 32-bit words.
void pack_strip(const uint16_t* b, bool tb, int64_t ldb, int64_t k, int64_t n, int64_t s,
                int64_t kp, uint32_t* dst) {
  const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
  if (tb && k % 2 == 0 && ldb % 2 == 0 && reinterpret_cast<uintptr_t>(b) % 4 == 0) {
    for (int64_t jj = 0; jj < nc; ++jj) {
      const uint32_t* row = reinterpret_cast<const uint32_t*>(b + (j0 + jj) * ldb);
      for (int64_t p = 0; p < kp; ++p) dst[p * kNr + jj] = row[p];
    }
  } else {
    for (int64_t p = 0; p < kp; ++p)
      for (int64_t jj = 0; jj < nc; ++jj) {
        const uint32_t lo = at(b, tb, ldb, 2 * p, j0 + jj);
        const uint32_t hi = 2 * p + 1 < k ? at(b, tb, ldb, 2 * p + 1, j0 + jj) : 0;
        dst[p * kNr + jj] = lo | (hi << 16);
      }
  }
  if (nc < kNr)
    for (int64_t p = 0; p < kp; ++p)
      std::fill(dst + p * kNr + nc, dst + (p + 1) * kNr, uint32_t(0));
}

// Per-thread scratch that keeps its memory between calls (no allocation, no page faults in a
// steady state).
uint32_t* scratch(std::vector<uint32_t>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

LargePageVector<uint32_t> pack_b_bf16(int64_t k, int64_t n, const uint16_t* b, bool tb,
                                      int64_t ldb) {
  const int64_t kp = (k + 1) / 2, strips = (n + kNr - 1) / kNr;
  LargePageVector<uint32_t> packed(size_t(strips * kp * kNr));
  parallel_for(0, strips, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      pack_strip(b, tb, ldb, k, n, s, kp, packed.data() + s * kp * kNr);
  });
  return packed;
}

bool gemm_bf16_gemv(int64_t m, bool ta, bool tb) { return m <= kGemvRows && !ta && tb; }

void gemm_bf16(int64_t m, int64_t n, int64_t k, const uint16_t* a, bool ta, int64_t lda,
               const uint16_t* b, bool tb, int64_t ldb, float alpha, float beta, float* c,
               int64_t ldc, const uint32_t* packed_b) {
  if (m <= 0 || n <= 0) return;
  if (gemm_bf16_gemv(m, ta, tb)) {  // NOTE [bfloat16 GEMV]: B = Wᵀ read in place
    using Rows = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, int64_t,
                          int64_t, float*, int64_t, float, float);
    static constexpr Rows kRows[kGemvRows] = {&gemv_rows<1>, &gemv_rows<2>, &gemv_rows<3>,
                                              &gemv_rows<4>};
    const int64_t groups = std::max<int64_t>(4, 262144 / std::max<int64_t>(k * m, 1)) / 4;
    parallel_for(0, (n + 3) / 4, groups, [&](int64_t q0, int64_t q1) {
      kRows[size_t(m - 1)](a, lda, b, ldb, k, q0 * 4, std::min(n, q1 * 4), c, ldc, alpha, beta);
    });
    return;
  }
  const int64_t kp = (k + 1) / 2;  // k pairs (the last one zero-padded when k is odd)
  const int64_t strips = (n + kNr - 1) / kNr;
  // A as rows of k pairs: a row-major A with an even k is that already (read in place)
  const uint32_t* ap = nullptr;
  int64_t lda2 = kp;
  if (!ta && k % 2 == 0 && lda % 2 == 0 && reinterpret_cast<uintptr_t>(a) % 4 == 0) {
    ap = reinterpret_cast<const uint32_t*>(a);
    lda2 = lda / 2;
  } else {
    thread_local std::vector<uint32_t> abuf;
    uint32_t* dst = scratch(abuf, size_t(m * kp));
    parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
                 [&](int64_t i0, int64_t i1) {
                   for (int64_t i = i0; i < i1; ++i)
                     for (int64_t p = 0; p < kp; ++p) {
                       const uint32_t lo = at(a, ta, lda, i, 2 * p);
                       const uint32_t hi = 2 * p + 1 < k ? at(a, ta, lda, i, 2 * p + 1) : 0;
                       dst[i * kp + p] = lo | (hi << 16);
                     }
                 });
    ap = dst;
  }
  if (m >= 16 && kp % 16 == 0 && gemm_bf16_amx()) {
    // AMX: each task packs its strips one at a time and owns their columns of C; 32-row blocks,
    // the last (fewer rows) from a zeroed copy
    const int64_t full = m / 32 * 32, tail = m - full;
    parallel_for(0, strips, 1, [&](int64_t s0, int64_t s1) {
      thread_local std::vector<uint32_t> bbuf, tbuf;
      thread_local std::vector<float> accbuf;
      uint32_t* own = packed_b ? nullptr : scratch(bbuf, size_t(kp * kNr));
      uint32_t* last = tail ? scratch(tbuf, size_t(32 * kp)) : nullptr;
      if (accbuf.size() < size_t(32 * kNr)) accbuf.resize(size_t(32 * kNr));
      float* acc = accbuf.data();
      if (tail) {
        std::fill(last, last + 32 * kp, uint32_t(0));
        for (int64_t r = 0; r < tail; ++r)
          std::copy(ap + (full + r) * lda2, ap + (full + r) * lda2 + kp, last + r * kp);
      }
      amx_begin();
      for (int64_t s = s0; s < s1; ++s) {
        const uint32_t* strip = packed_b ? packed_b + s * kp * kNr : own;
        if (!packed_b) pack_strip(b, tb, ldb, k, n, s, kp, own);
        const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
        for (int64_t i0 = 0; i0 < full; i0 += 32) {
          block_amx(ap + i0 * lda2, lda2, strip, kp, acc);
          store_block(acc, 32, c + i0 * ldc + j0, ldc, nc, alpha, beta);
        }
        if (tail) {
          block_amx(last, kp, strip, kp, acc);
          store_block(acc, int(tail), c + full * ldc + j0, ldc, nc, alpha, beta);
        }
      }
      amx_end();
    });
    return;
  }
  // Each task packs its strips of B one at a time (the strip then stays in cache for every row
  // tile) and owns their columns of C.
  parallel_for(0, strips, 1, [&](int64_t s0, int64_t s1) {
    thread_local std::vector<uint32_t> bbuf;
    uint32_t* own = packed_b ? nullptr : scratch(bbuf, size_t(kp * kNr));
    for (int64_t s = s0; s < s1; ++s) {
      const uint32_t* strip = packed_b ? packed_b + s * kp * kNr : own;
      if (!packed_b) pack_strip(b, tb, ldb, k, n, s, kp, own);
      const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
      for (int64_t p0 = 0; p0 < kp; p0 += kKc) {
        const int64_t pc = std::min(kKc, kp - p0);
        const float bt = p0 == 0 ? beta : 1.f;  // later k blocks add to the first's sums
        for (int64_t i0 = 0; i0 < m; i0 += kMr) {
          const int r = int(std::min<int64_t>(kMr, m - i0));
          kTiles[size_t(r - 1)](ap + i0 * lda2 + p0, lda2,
                                reinterpret_cast<const uint16_t*>(strip + p0 * kNr), pc,
                                c + i0 * ldc + j0, ldc, nc, alpha, bt);
        }
      }
    }
  });
}
#else
bool gemm_bf16_gemv(int64_t, bool, bool) { return false; }
void gemm_bf16(int64_t, int64_t, int64_t, const uint16_t*, bool, int64_t, const uint16_t*, bool,
               int64_t, float, float, float*, int64_t, const uint32_t*) {
  fail("[gemm] internal: the bfloat16 GEMM needs an x86-64 CPU with AVX512-BF16");
}
LargePageVector<uint32_t> pack_b_bf16(int64_t, int64_t, const uint16_t*, bool, int64_t) {
  fail("[gemm] internal: the bfloat16 GEMM needs an x86-64 CPU with AVX512-BF16");
}
#endif

}  // namespace oneflow::cpu

// gemm_f32.cpp: the float32 GEMM of cpu::gemm on CPUs with AVX-512.
// NOTE [float32 GEMM]: OpenBLAS's sgemm packs both operands on every call. For the GEMMs of
// transformer inference (a weight [k, n] of a few MiB against a few hundred activation rows)
// packing the weight is a fifth of the time (perf on BERT at batch 1: sgemm_incopy 17%), and a
// weight only changes when something writes it. This kernel:
//   - packs B in strips of kNr = 32 columns, [k][32] floats per strip (zero past n); a traced
//     graph's constant weight is packed once (NOTE [Prepacked weights], cpu/blas.cpp's cache);
//   - packs A once per row block of kMc rows and thread (rows kLda = kKc + 16 floats apart,
//     each k block's values contiguous: one base pointer and immediate offsets for the 12 row
//     broadcasts; read in place when it already has that layout, gemm_f32_inplace_lda). Read in
//     place with a runtime lda the tile spent its registers on 12 row pointers and ran 5-10%
//     slower (163 -> 172-181 GFLOP/s on 128 x 384 x 384, one core);
//   - runs a kMr x 32 register tile (kMr = 12: 24 zmm accumulators, the A element broadcast
//     from memory) over blocks of kKc rows of k, the k loop unrolled by 4, the strip block
//     (kKc * 128 bytes) reused from L1 by every row tile of the row block (kept in L2);
//   - while a task's tiles run, fetches the next task's strip into L2, shared out over the
//     block's row tiles (a line every few k steps; a burst in one tile filled the line-fill
//     buffers and stalled it): a replay's weights come from L3 or memory, and with this and
//     large pages (NOTE [Large pages]) a cold-weight GEMM runs as fast as a hot one;
//   - splits (row block, strip) tasks over the threads in regions (NOTE [GEMM task regions]):
//     each output element is summed over k by one task in one order, so results do not depend
//     on the thread count, and the packed and the unpacked B give the same bits (an eager call
//     equals its traced replay);
//   - applies the epilogue (NOTE [GEMM epilogues]) to each output tile after its last k block,
//     while the tile is in L1: the bias as the first block's C (what linear's preloaded bias
//     with beta = 1 gives, without the pass that preloads it), then an elementwise function.
// c = alpha * AB + beta * c (beta = 0: c is not read).
// NOTE [float32 GEMV]: a GEMM of at most kGemvRows rows against B = Wᵀ (W row-major [n, k]: a
// linear's weight) packs nothing: each output is a dot product of an A row with a W row, 16
// lanes at a time over all of k (4 W rows per step, every A row against each), the lanes then
// summed in a fixed order (lane_sum), then alpha, the bias or beta * c, the epilogue.
// Packing B per call cost a decoding step (one row) a whole extra pass over every weight: eager
// decoding ran at a quarter of its traced speed. The path depends on the shape alone (packed or
// not, eager or replayed, any thread count: the same bits), and a replay does not pack such a
// weight at all (cpu/blas.cpp).
#include "cpu/gemm_f32.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <utility>
#include <vector>

#include "cpu/simd.h"
#include "oneflow/error.h"
#include "thread_pool.h"

namespace oneflow::cpu {

namespace {
std::atomic<bool> g_enabled{true};
}  // namespace

bool gemm_f32_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu && g_enabled.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

bool set_gemm_f32_enabled(bool on) { return g_enabled.exchange(on); }

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

constexpr int64_t kNr = 32;         // columns per strip (two zmm)
constexpr int kMr = 12;             // rows per register tile
constexpr int64_t kKc = 256;        // k per block (a strip block: 32 KiB)
constexpr int64_t kMc = 144;        // rows per row block (12 tiles; A block 144 KiB, in L2)
constexpr int64_t kLda = kKc + 16;  // packed A: a row block's rows this many floats apart
constexpr int64_t kPrefetch = 16;   // k rows of the strip (2 KiB) ahead
constexpr int64_t kGemvRows = 4;    // at most this many rows: NOTE [float32 GEMV]

#define OF_F32_TARGET __attribute__((target("avx512f")))

// NOTE [float32 GEMV]: R rows of A (lda apart) against W rows j0 .. j1 (ldw apart, k each).
template <int R>
OF_F32_TARGET void gemv_rows(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t k,
                             int64_t j0, int64_t j1, float* c, int64_t ldc, float alpha, float beta,
                             const float* bias) {
  for (int64_t j = j0; j < j1; j += 4) {
    const int J = int(std::min<int64_t>(4, j1 - j));
    const float* wr[4];
    for (int q = 0; q < 4; ++q) wr[q] = w + (j + std::min(q, J - 1)) * ldw;  // (tail: repeats)
    __m512 acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < 4; ++q) acc[r][q] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
      for (int q = 0; q < 4; ++q)
        _mm_prefetch(reinterpret_cast<const char*>(wr[q] + p + 256), _MM_HINT_T0);
      const __m512 w0 = _mm512_loadu_ps(wr[0] + p), w1 = _mm512_loadu_ps(wr[1] + p);
      const __m512 w2 = _mm512_loadu_ps(wr[2] + p), w3 = _mm512_loadu_ps(wr[3] + p);
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_loadu_ps(a + r * lda + p);
        acc[r][0] = _mm512_fmadd_ps(av, w0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(av, w1, acc[r][1]);
        acc[r][2] = _mm512_fmadd_ps(av, w2, acc[r][2]);
        acc[r][3] = _mm512_fmadd_ps(av, w3, acc[r][3]);
      }
    }
    if (p < k) {
      const __mmask16 mk = tail_mask16(k - p);
      __m512 wv[4];
      for (int q = 0; q < 4; ++q) wv[q] = _mm512_maskz_loadu_ps(mk, wr[q] + p);
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_maskz_loadu_ps(mk, a + r * lda + p);
        for (int q = 0; q < 4; ++q) acc[r][q] = _mm512_fmadd_ps(av, wv[q], acc[r][q]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < J; ++q)
        gemv_store(c + r * ldc + j + q, acc[r][q], alpha, beta, bias ? bias + j + q : nullptr);
  }
}

// One R x 32 tile over kc: acc = the packed A rows (kLda apart) times the strip block
// ([kc][32]); then c = alpha * acc + beta * cin, cin the bias row (first block, bias given) or c
// itself. Meanwhile it asks for pf_lines cache lines from pf into L2, one every pf_gap k rows:
// its share of the next task's strip block (the block's row tiles share it out, so the lines
// arrive spread over the whole block's time, not as a burst that fills the line-fill buffers).
// PF (the first row tile of a block): also asks for the block's own strip kPrefetch k rows ahead
// into L1 (the strip comes from L2 or further: decoding's single row streams it); the other row
// tiles find the strip block in L1.
template <int R, bool PF>
OF_F32_TARGET void tile(const float* a, const float* bs, int64_t kc, float* c, int64_t ldc,
                        int64_t nc, float alpha, float beta, const float* bias, const float* pf,
                        int64_t pf_lines, int64_t pf_gap) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  int64_t pf_at = 0;
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    if (p == pf_at && pf_lines > 0) {
      _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
      pf += 16;
      --pf_lines;
      pf_at += pf_gap;
    }
    if constexpr (PF) {
      _mm_prefetch(reinterpret_cast<const char*>(bs + (p + kPrefetch) * kNr), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(bs + (p + kPrefetch) * kNr + 16), _MM_HINT_T0);
    }
    const __m512 b0 = _mm512_loadu_ps(bs + p * kNr);
    const __m512 b1 = _mm512_loadu_ps(bs + p * kNr + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * kLda + p]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) store_row32(acc[r][0], acc[r][1], c + r * ldc, nc, alpha, beta, bias);
}

using TileFn = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, float, float,
                        const float*, const float*, int64_t, int64_t);
template <bool PF, int... R> constexpr auto make_tiles(std::integer_sequence<int, R...>) {
  return std::array<TileFn, sizeof...(R)>{&tile<R + 1, PF>...};
}
constexpr auto kTiles = make_tiles<false>(std::make_integer_sequence<int, kMr>{});
constexpr auto kTilesPf = make_tiles<true>(std::make_integer_sequence<int, kMr>{});

// 16 rows of 16 floats (src, rows lds apart) -> their transpose (dst, rows ldd apart). (GCC 12
// takes the shuffles' _mm512_undefined_ps() sources for uninitialized values.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
OF_F32_TARGET void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 16; i += 2) {  // 2 x 2 blocks of single values
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 4 x 4 blocks
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  // now r[4g + c]'s 128-bit lane l holds column 4l + c of rows 4g .. 4g + 3: output row 4l + c
  // gathers lane l of r[c], r[4 + c], r[8 + c], r[12 + c] (a 4 x 4 transpose of lanes)
  for (int c = 0; c < 4; ++c) {
    const __m512 t0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44);
    const __m512 t1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xee);
    const __m512 t2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
    const __m512 t3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xee);
    t[c] = _mm512_shuffle_f32x4(t0, t2, 0x88);
    t[4 + c] = _mm512_shuffle_f32x4(t0, t2, 0xdd);
    t[8 + c] = _mm512_shuffle_f32x4(t1, t3, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(t1, t3, 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, t[i]);
}
#pragma GCC diagnostic pop

// Packs rows [i0, i1) of A (all of k) for the tiles: k block kb of row i at
// (kb * (i1 - i0) + (i - i0)) * kLda, the block's pc values contiguous. A row-major [m, k] with
// leading dimension lda, or (ta) its transpose given (element (i, p) at p * lda + i).
void pack_a_rows(const float* a, bool ta, int64_t lda, int64_t k, int64_t i0, int64_t i1,
                 float* dst) {
  const int64_t rows = i1 - i0;
  for (int64_t p0 = 0, kb = 0; p0 < k; p0 += kKc, ++kb) {
    const int64_t pc = std::min(kKc, k - p0);
    float* blk = dst + kb * rows * kLda;
    if (!ta) {
      for (int64_t i = i0; i < i1; ++i)
        std::copy(a + i * lda + p0, a + i * lda + p0 + pc, blk + (i - i0) * kLda);
    } else {
      // a transpose: 16 x 16 blocks through registers (a weight gradient's dY^T), then the
      // edges with p outer (each source row's values go to consecutive slots)
      const int64_t ie = i0 + rows / 16 * 16, pe = p0 + pc / 16 * 16;
      for (int64_t p = p0; p < pe; p += 16)
        for (int64_t i = i0; i < ie; i += 16)
          transpose16(a + p * lda + i, lda, blk + (i - i0) * kLda + (p - p0), kLda);
      for (int64_t p = p0; p < p0 + pc; ++p)
        for (int64_t i = p < pe ? ie : i0; i < i1; ++i)
          blk[(i - i0) * kLda + (p - p0)] = a[p * lda + i];
    }
  }
}

// Packs strip s of B (columns s*kNr ...) as [k][kNr], zero past n. B [k, n] row-major with
// leading dimension ldb, or (tb) its transpose given (element (p, j) at j * ldb + p).
void pack_strip(const float* b, bool tb, int64_t ldb, int64_t k, int64_t n, int64_t s, float* dst) {
  const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
  if (tb) {
    // a transpose: 16 x 16 blocks in registers while they are whole (a linear's weight: every
    // eager call packs it), then k outer, so each output row of 32 is written once, in order,
    // while the source rows' current cache lines stay in L1
    const float* col = b + j0 * ldb;
    int64_t p0 = 0;
    if (nc == kNr)
      for (; p0 + 16 <= k; p0 += 16)
        for (int64_t h = 0; h < kNr; h += 16)
          transpose16(col + h * ldb + p0, ldb, dst + p0 * kNr + h, kNr);
    for (int64_t p = p0; p < k; ++p)
      for (int64_t jj = 0; jj < nc; ++jj) dst[p * kNr + jj] = col[jj * ldb + p];
  } else {
    for (int64_t p = 0; p < k; ++p)
      std::copy(b + p * ldb + j0, b + p * ldb + j0 + nc, dst + p * kNr);
  }
  if (nc < kNr)
    for (int64_t p = 0; p < k; ++p) std::fill(dst + p * kNr + nc, dst + (p + 1) * kNr, 0.f);
}

// Per-thread scratch that keeps its memory between calls.
float* scratch(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// p *= scale (unless 1), then p += r (unless null): two passes, so that the multiply and the add
// round separately, as the unfused mul and add ops do (a compiler contracts a multiply feeding an
// add in one expression into a fused multiply-add).
void scale_add_row(float* p, int64_t n, float scale, const float* r) {
  if (scale != 1.f)
    for (int64_t j = 0; j < n; ++j) p[j] *= scale;
  if (r)
    for (int64_t j = 0; j < n; ++j) p[j] += r[j];
}

// The epilogue's elementwise steps (activation, scale, residual) over rows [i0, i1), columns
// [j0, j0 + nc) of c, once their sums are final.
void epilogue_rows(float* c, int64_t ldc, int64_t i0, int64_t i1, int64_t j0, int64_t nc,
                   const GemmEpilogueF32& ep) {
  for (int64_t i = i0; i < i1; ++i) {
    float* row = c + i * ldc + j0;
    if (ep.act) ep.act(row, nc);
    if (ep.scale != 1.f || ep.residual)
      scale_add_row(row, nc, ep.scale, ep.residual ? ep.residual + i * ep.ldr + j0 : nullptr);
  }
}

}  // namespace

LargePageVector<float> pack_b_f32(int64_t k, int64_t n, const float* b, bool tb, int64_t ldb) {
  const int64_t strips = (n + kNr - 1) / kNr;
  LargePageVector<float> packed(size_t(strips * k * kNr));
  parallel_for(0, strips, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) pack_strip(b, tb, ldb, k, n, s, packed.data() + s * k * kNr);
  });
  return packed;
}

bool gemm_f32_gemv(int64_t m, bool ta, bool tb) { return m <= kGemvRows && !ta && tb; }

int64_t gemm_f32_inplace_lda(int64_t k) { return k <= kKc ? kLda : 0; }

void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, bool ta, int64_t lda, const float* b,
              bool tb, int64_t ldb, float alpha, float beta, float* c, int64_t ldc,
              const float* packed_b, const GemmEpilogueF32& ep) {
  if (m <= 0 || n <= 0) return;
  if (gemm_f32_gemv(m, ta, tb)) {  // NOTE [float32 GEMV]: B = Wᵀ read in place
    using Rows = void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t,
                          float*, int64_t, float, float, const float*);
    static constexpr Rows kRows[kGemvRows] = {&gemv_rows<1>, &gemv_rows<2>, &gemv_rows<3>,
                                              &gemv_rows<4>};
    const int64_t grain = std::max<int64_t>(16, 131072 / std::max<int64_t>(k * m, 1)) / 4 * 4;
    parallel_for(0, (n + 3) / 4, std::max<int64_t>(1, grain / 4), [&](int64_t q0, int64_t q1) {
      const int64_t j0 = q0 * 4, j1 = std::min(n, q1 * 4);
      kRows[size_t(m - 1)](a, lda, b, ldb, k, j0, j1, c, ldc, alpha, beta, ep.bias);
      epilogue_rows(c, ldc, 0, m, j0, j1 - j0, ep);
    });
    return;
  }
  const int64_t strips = (n + kNr - 1) / kNr;
  const int64_t mblocks = (m + kMc - 1) / kMc;
  const float* bp = packed_b;
  // B not packed yet. One row block: each strip is used by one task, which packs it itself
  // right before its tiles read it (from L2, its source prefetched by the task before), instead
  // of one pass packing all of B into memory that the tasks then read back (eager linears at
  // batch 1: every call packs its weight). Several: packed for this call up front (the strips
  // in parallel). Either into scratch that stays allocated (a steady-state replay allocates
  // nothing).
  const bool pack_in_task = !bp && mblocks == 1;
  if (!bp && !pack_in_task) {
    thread_local std::vector<float> bbuf;
    float* dst = scratch(bbuf, size_t(strips * k * kNr));
    parallel_for(0, strips, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) pack_strip(b, tb, ldb, k, n, s, dst + s * k * kNr);
    });
    bp = dst;
  }
  const int64_t kblocks = (k + kKc - 1) / kKc;
  const double flops = double(m) * double(n) * double(k);
  const int64_t tasks = mblocks * strips;
  // NOTE [GEMM task regions]: the tasks are cut into one region of consecutive tasks per
  // thread (the strips of a row block in a row: a thread packs each row block's A once and
  // fetches its next task's strip while the current one runs; the pool's small chunks broke that
  // chain every other task). Tasks are claimed one at a time from a region's atomic cursor: a
  // thread done with its own region takes the remaining tasks of the others from their fronts,
  // so a worker the OS deschedules mid-region (NOTE [Thread pool]) delays one task, not its
  // region. Each output element is still summed by one task in one order: the bits do not
  // depend on who ran it.
  constexpr int64_t kMaxRegions = 64;
  const int64_t per_task = int64_t(flops / double(tasks)) + 1;
  const int64_t min_tasks = std::max<int64_t>(1, 262144 / per_task);  // ~256k FMAs a region
  const int64_t regions =
      std::clamp<int64_t>(tasks / min_tasks, 1, std::min<int64_t>(num_threads(), kMaxRegions));
  std::array<std::atomic<int64_t>, kMaxRegions> cursor;
  for (int64_t r = 0; r < regions; ++r) cursor[size_t(r)].store(tasks * r / regions);
  auto region_end = [&](int64_t r) { return tasks * (r + 1) / regions; };
  // A already in the packed layout (one k block, rows kLda apart): read where it is
  const bool a_ready = !ta && k <= kKc && lda == kLda;
  // each call packs A anew: a thread's packed row block is this call's only while `call` matches
  static std::atomic<uint64_t> calls{0};
  const uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
  // task t (row block t / strips, strip t % strips); `after`: the task this thread likely runs
  // next (its strip is prefetched), or -1
  auto run_task = [&](int64_t t, int64_t after) {
    // the row block's A packed once per thread, read by every strip's tiles from L2
    thread_local std::vector<float> abuf;
    thread_local uint64_t a_call = 0;
    thread_local int64_t a_block = -1;
    const int64_t mb = t / strips, s = t % strips;
    const int64_t i_begin = mb * kMc, i_end = std::min(m, i_begin + kMc);
    const int64_t rows = i_end - i_begin;
    const float* apk = a + i_begin * kLda;
    if (!a_ready) {
      float* dst = scratch(abuf, size_t(kblocks * kMc * kLda));
      if (a_call != call || a_block != mb) {
        pack_a_rows(a, ta, lda, k, i_begin, i_end, dst);
        a_call = call;
        a_block = mb;
      }
      apk = dst;
    }
    const int64_t j0 = s * kNr, nc = std::min(kNr, n - j0);
    const float* strip;
    const float* next = nullptr;  // the next task's strip (or its source), fetched into L2 by
                                  // the row tiles of each block, a share each
    if (pack_in_task) {
      thread_local std::vector<float> sbuf;
      float* dst = scratch(sbuf, size_t(k * kNr));
      pack_strip(b, tb, ldb, k, n, s, dst);
      strip = dst;
      // the next strip's source: its kNr rows of a transposed B (a linear's weight) are one
      // run of kNr * k floats when they are contiguous, as many lines as a packed strip
      if (after >= 0 && tb && ldb == k) next = b + (after % strips) * kNr * ldb;
    } else {
      strip = bp + s * k * kNr;
      if (after >= 0) next = bp + (after % strips) * k * kNr;
    }
    const float* bias = ep.bias ? ep.bias + j0 : nullptr;
    const int64_t ntiles = (rows + kMr - 1) / kMr;
    for (int64_t p0 = 0, kb = 0; p0 < k; p0 += kKc, ++kb) {
      const int64_t pc = std::min(kKc, k - p0);
      const bool first = p0 == 0;
      const float bt = first ? (ep.bias ? 1.f : beta) : 1.f;  // later blocks add
      const float* ablk = apk + kb * rows * kLda;
      const int64_t lines = next ? pc * (kNr / 16) : 0;  // the next strip's block
      for (int64_t i0 = i_begin, ti = 0; i0 < i_end; i0 += kMr, ++ti) {
        const int r = int(std::min<int64_t>(kMr, i_end - i0));
        const int64_t l0 = lines * ti / ntiles, l1 = lines * (ti + 1) / ntiles;
        const auto& fns = i0 == i_begin ? kTilesPf : kTiles;
        fns[size_t(r - 1)](ablk + (i0 - i_begin) * kLda, strip + p0 * kNr, pc, c + i0 * ldc + j0,
                           ldc, nc, alpha, bt, first ? bias : nullptr,
                           next ? next + p0 * kNr + l0 * 16 : nullptr, l1 - l0,
                           l1 > l0 ? std::max<int64_t>(1, pc / (l1 - l0)) : pc);
      }
    }
    epilogue_rows(c, ldc, i_begin, i_end, j0, nc, ep);
  };
  parallel_for(0, regions, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t end = region_end(r);
      for (int64_t t; (t = cursor[size_t(r)].fetch_add(1, std::memory_order_relaxed)) < end;)
        run_task(t, t + 1 < end ? t + 1 : -1);
    }
    for (int64_t q = 0; q < regions; ++q) {  // what the others have not taken yet
      if (q >= r0 && q < r1) continue;
      const int64_t end = region_end(q);
      for (int64_t t; (t = cursor[size_t(q)].fetch_add(1, std::memory_order_relaxed)) < end;)
        run_task(t, -1);
    }
  });
}
#else
bool gemm_f32_gemv(int64_t, bool, bool) { return false; }
int64_t gemm_f32_inplace_lda(int64_t) { return 0; }
void gemm_f32(int64_t, int64_t, int64_t, const float*, bool, int64_t, const float*, bool, int64_t,
              float, float, float*, int64_t, const float*, const GemmEpilogueF32&) {
  fail("[gemm] internal: the float32 GEMM kernel needs an x86-64 CPU with AVX-512");
}
LargePageVector<float> pack_b_f32(int64_t, int64_t, const float*, bool, int64_t) {
  fail("[gemm] internal: the float32 GEMM kernel needs an x86-64 CPU with AVX-512");
}
#endif

}  // namespace oneflow::cpu

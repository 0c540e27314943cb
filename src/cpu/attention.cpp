// cpu/attention.cpp: the CPU kernels of scaled_dot_product_attention and its backward, which
// also serve the trace's fused_attention_forward/_backward (NOTE [Attention operands]), and of
// the inference graphs' fused_attention (ops/nn_attention.cpp: inputs, attributes and outputs;
// NOTE [Attention draw map] there).
// NOTE [Attention kernel]: the softmax of each score row is taken over all its keys at once
// (the row max, then exp and sum), in blocks of query rows whose scores stay in cache (NOTE
// [CPU attention blocks]), so no [L, S] matrix of the whole batch is materialized. Backward
// recomputes the probabilities from the saved lse. A row with nothing to attend to gives NaN
// outputs and lse -inf, and no gradient. Dropout keeps element (b, i, j) by Philox word
// ((b * L + i) * S + j) of the op's counters, in both passes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu/blas.h"
#include "cpu/gemm_f32.h"
#include "cpu/simd.h"
#include "generator.h"
#include "ops/functors.h"
#include "ops/nn_common.h"

namespace oneflow::cpu {
using namespace nn_detail;
namespace {

// Per batch, the batch it draws as (NOTE [Attention draw map]); empty: itself.
std::vector<int64_t> draw_batches(const AttnGeom& g, const Attrs& a) {
  std::vector<int64_t> r;
  if (!SdpaDrawAttrs::has<"draw_map">(a) || SdpaDrawAttrs::get<"draw_map">(a).empty() ||
      SdpaAttrs::get<"dropout_p">(a) == 0.0)
    return r;
  const DimVector& m = SdpaDrawAttrs::get<"draw_map">(a);
  r.resize(size_t(g.B));
  for (int64_t b = 0; b < g.B; ++b) {
    int64_t rest = b, global = 0, stride = 1;
    for (size_t d = m.size(); d >= 3; d -= 3) {
      const int64_t local = m[d - 1], start = m[d - 2], logical = m[d - 3];
      global += (start + rest % local) * stride;
      rest /= local;
      stride *= logical;
    }
    r[size_t(b)] = global;
  }
  return r;
}

// sum of a[k * as] * b[k * bs] over k < n, in double (4 partial sums)
template <class T> double dot_d(const T* a, int64_t as, const T* b, int64_t bs, int64_t n) {
  double s[4] = {};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int l = 0; l < 4; ++l) s[l] += double(a[(k + l) * as]) * double(b[(k + l) * bs]);
  for (; k < n; ++k) s[0] += double(a[k * as]) * double(b[k * bs]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// NOTE [CPU attention blocks]: a task is one batch b and a block of R query rows, R fixed by S
// alone (about kScoreBlock scores, so the block stays in L2). Forward: scores = scale * Q K^T
// by one GEMM into the block, the mask, causality, row max, exp and sum in place, the dropout
// elements multiplied in, then O = P V by a second GEMM. Backward (one task per batch, its
// blocks in row order): P again from the block's GEMM and the saved lse, dP = dO V^T by a GEMM,
// dS = P (z dP - D) scale in place, then dV += (P z)^T dO, dQ = dS K and dK += dS^T Q. The
// blocks depend on (L, S) only and a batch's rows are reduced in one thread in row order, so
// results do not depend on the thread count, and a piece of the batch (NOTE [Attention draw
// map]) computes its batches bitwise as the whole does.
constexpr int64_t kScoreBlock = 16384;

struct AttnBlocks {
  int64_t rows, count;  // rows per block, blocks per batch
};
AttnBlocks attn_blocks(const AttnGeom& g) {
  const int64_t r =
      std::clamp<int64_t>(kScoreBlock / std::max<int64_t>(g.S, 1), 1, std::max<int64_t>(g.L, 1));
  return {r, (g.L + r - 1) / r};
}

// Where the batch matrices of an operand lie (NOTE [Attention operands]): per batch an element
// offset into the storage, and the strides of rows and columns (0: broadcast).
template <class T> struct BatchMats {
  const T* base = nullptr;
  std::vector<int64_t> off;
  int64_t rs = 0, cs = 0;
  const T* at(int64_t b) const { return base + off[size_t(b)]; }
};

// What a score row needs besides Q K^T: the mask, causality, the dropout elements.
struct AttnRows {
  const AttnGeom& g;
  double scale, keep_scale;
  bool causal;
  int64_t mask_kind;
  uint32_t thr;
  uint64_t seed, offset;
  bool dropout;
  const int64_t* batch_of;      // NOTE [Attention draw map] (null: b itself)
  const BatchMats<char>& mask;  // [L, S] per batch (bool or T; base null: none)
  std::vector<uint32_t> words;

  AttnRows(const AttnGeom& geom, const Attrs& a, const std::vector<int64_t>& batches,
           const BatchMats<char>& m)
      : g(geom),
        scale(SdpaAttrs::get<"scale">(a)),
        keep_scale(SdpaAttrs::get<"dropout_p">(a) >= 1.0
                       ? 0.0
                       : 1.0 / (1.0 - SdpaAttrs::get<"dropout_p">(a))),
        causal(SdpaAttrs::get<"is_causal">(a)),
        mask_kind(SdpaAttrs::get<"mask_kind">(a)),
        thr(uint32_t(std::ceil(SdpaAttrs::get<"dropout_p">(a) * 16777216.0))),
        seed(uint64_t(SdpaAttrs::get<"seed">(a))),
        offset(uint64_t(SdpaAttrs::get<"offset">(a))),
        dropout(SdpaAttrs::get<"dropout_p">(a) > 0),
        batch_of(batches.empty() ? nullptr : batches.data()),
        mask(m),
        words(size_t(dropout ? g.S : 0)) {}

  // Adds the mask to the scores of row (b, i) and sets what it may not attend to -inf.
  template <class T> void apply_mask(T* s, int64_t b, int64_t i) const {
    if (mask_kind != 0) {
      const int64_t ms = mask.cs;
      if (mask_kind == 1) {
        const bool* m =
            reinterpret_cast<const bool*>(mask.base) + mask.off[size_t(b)] + i * mask.rs;
        for (int64_t j = 0; j < g.S; ++j)
          if (!m[j * ms]) s[j] = T(-INFINITY);
      } else {
        const T* m = reinterpret_cast<const T*>(mask.base) + mask.off[size_t(b)] + i * mask.rs;
        for (int64_t j = 0; j < g.S; ++j) s[j] += m[j * ms];
      }
    }
    if (causal)
      for (int64_t j = i + 1; j < g.S; ++j) s[j] = T(-INFINITY);
  }
  // Fills `words` with the Philox words of row (b, i): element (b, i, j) is kept when its top
  // 24 bits are >= thr (the same elements as dropout's, NOTE [Random numbers]).
  void draw_row(int64_t b, int64_t i) {
    const int64_t gb = batch_of ? batch_of[b] : b;
    philox_words(seed, offset, uint64_t((gb * g.L + i) * g.S), g.S, words.data());
  }
  template <class T> T keep(int64_t j) const {
    return (words[size_t(j)] >> 8) >= thr ? T(keep_scale) : T(0);
  }
};

// The largest of s[0 .. n) that is not NaN (-inf when there is none), in kL lanes.
template <class T> T row_max(const T* s, int64_t n) {
  T m[kL];
  for (int l = 0; l < kL; ++l) m[l] = T(-INFINITY);
  int64_t j = 0;
  for (; j + kL <= n; j += kL)
    for (int l = 0; l < kL; ++l) m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
  for (; j < n; ++j) m[0] = s[j] > m[0] ? s[j] : m[0];
  T r = m[0];
  for (int l = 1; l < kL; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define OF_ATTN_AVX512 1
// GCC 12 warns that the plain AVX-512 intrinsics' _mm512_undefined_* source may be uninitialized
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define OF_ATTN_TARGET __attribute__((target("avx512f")))
// fast_exp (ops/functors.h) on 16 lanes: the same reduction and polynomial; FMAs where the
// scalar form rounds twice, so a value may differ from it in the last bit.
OF_ATTN_TARGET inline __m512 exp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.3762626647949f), lo = _mm512_set1_ps(-87.33f);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);  // (a NaN lane becomes lo)
  const __m512 n = _mm512_roundscale_ps(
      _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 res = _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
  res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), res, _mm512_set1_ps(INFINITY));
  res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), res, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(nan, res, x);
}

// Row r of the output (n values) times inv[r].
OF_ATTN_TARGET void scale_rows_f32(float* o, int64_t rows, int64_t n, int64_t ld,
                                   const float* inv) {
  for (int64_t r = 0; r < rows; ++r) {
    const __m512 f = _mm512_set1_ps(inv[r]);
    float* p = o + r * ld;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 t = tail_mask16(n - j);
      _mm512_mask_storeu_ps(p + j, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, p + j), f));
    }
  }
}
// exp_row on 16 lanes (float32): s = exp(s - max) in place, the max over the values that are
// not NaN, the sum in 16 float lanes (lane_sum's order) into l; returns the max (-inf: the row
// is zeroed, l = 0).
OF_ATTN_TARGET float exp_row_f32(float* s, int64_t n, double& l) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 t = tail_mask16(n - j);
    vmax = _mm512_mask_max_ps(vmax, t, _mm512_maskz_loadu_ps(t, s + j), vmax);
  }
  const float m = _mm512_reduce_max_ps(vmax);
  if (m == -INFINITY) {
    std::fill(s, s + n, 0.f);
    l = 0;
    return m;
  }
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 t = tail_mask16(n - j);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, s + j), vm));
    _mm512_mask_storeu_ps(s + j, t, e);
    sum = _mm512_mask_add_ps(sum, t, sum, e);
  }
  l = double(lane_sum(sum));
  return m;
}

// NOTE [Attention softmax, float32]: one score row of the fused kernel: the mask added (mask
// values mcs apart, or none), then exp_row_f32 (max over the values that are not NaN, exp, sum
// in float lanes); returns 1 / sum, by which the caller scales the row's output (P V, Ev
// values) instead of P (S values). A row with nothing to attend to (max -inf) is zeroed and
// returns NaN: its output row is NaN, as the softmax gives. `lse` (unless null) receives the
// row's log-sum-exp (-inf for such a row), as the training forward saves it.
OF_ATTN_TARGET float softmax_row_f32(float* s, int64_t n, const float* mk, int64_t mcs,
                                     float* lse) {
  if (mk) {
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 t = tail_mask16(n - j);
      __m512 mv;
      if (mcs == 1) {
        mv = _mm512_maskz_loadu_ps(t, mk + j);
      } else {
        alignas(64) float tmp[16] = {};
        for (int64_t q = 0; q < std::min<int64_t>(16, n - j); ++q) tmp[q] = mk[(j + q) * mcs];
        mv = _mm512_load_ps(tmp);
      }
      _mm512_mask_storeu_ps(s + j, t, _mm512_add_ps(_mm512_maskz_loadu_ps(t, s + j), mv));
    }
  }
  double l = 0;
  const float m = exp_row_f32(s, n, l);
  if (lse) *lse = m == -INFINITY ? -INFINITY : float(double(m) + std::log(l));
  return m == -INFINITY ? NAN : float(1.0 / l);
}

// exp_shift on 16 lanes (float32).
OF_ATTN_TARGET void exp_shift_f32(float* p, int64_t n, float shift) {
  const __m512 vs = _mm512_set1_ps(shift);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 t = tail_mask16(n - j);
    _mm512_mask_storeu_ps(p + j, t, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, p + j), vs)));
  }
}
#pragma GCC diagnostic pop
#endif

// One score row's softmax numerators: s[j] = exp(s[j] - m) for the row max m (not NaN), their
// sum in `l`; returns m. A row with nothing to attend to (m = -inf) is zeroed (l = 0).
template <class T> T exp_row(T* s, int64_t n, double& l) {
#ifdef OF_ATTN_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (cpu::gemm_f32_supported()) return exp_row_f32(s, n, l);  // (the sum in float lanes)
#endif
  const T m = row_max(s, n);
  if (m == T(-INFINITY)) {
    std::fill(s, s + n, T(0));
    l = 0;
    return m;
  }
  for (int64_t j = 0; j < n; ++j) s[j] = fn::exp_(T(s[j] - m));
  l = sum_d(s, n);
  return m;
}

// p[j] = exp(p[j] - shift) (the backward's probabilities from the saved lse).
template <class T> void exp_shift(T* p, int64_t n, T shift) {
#ifdef OF_ATTN_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (cpu::gemm_f32_supported()) return exp_shift_f32(p, n, shift);
#endif
  for (int64_t j = 0; j < n; ++j) p[j] = fn::exp_(T(p[j] - shift));
}

// A GEMM operand [rows, cols] at p with strides (rs, cs): as BLAS reads it (NOTE [CPU GEMM
// operands]), else copied into `scratch` (strided in both dims).
template <class T> struct GemmOperand {
  const T* p;
  bool trans;
  int64_t ld;
};
template <class T>
GemmOperand<T> gemm_operand(const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                            std::vector<T>& scratch) {
  GemmOperand<T> o{p, false, 0};
  if (cpu::blas_layout(rows, cols, rs, cs, o.trans, o.ld)) return o;
  scratch.resize(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) scratch[size_t(r * cols + c)] = p[r * rs + c * cs];
  return {scratch.data(), false, std::max<int64_t>(cols, 1)};
}

// Element offsets of each of the B = prod(lead) matrices of `t` (dims right-aligned with
// lead + 2 trailing dims; a missing or size-1 dim of t broadcasts: stride 0; dims of t past
// that rank are size 1 (the op's check) and never indexed).
std::vector<int64_t> lead_offsets(const Tensor& t, IntArrayRef lead) {
  const int64_t nl = int64_t(lead.size()), extra = nl + 2 - t.dim();
  int64_t B = 1;
  for (int64_t s : lead) B *= s;
  std::vector<int64_t> off(size_t(B), t.impl()->offset);
  for (int64_t b = 0; b < B; ++b) {
    int64_t rest = b;
    for (int64_t d = nl - 1; d >= 0; --d) {
      const int64_t idx = rest % lead[size_t(d)];
      rest /= lead[size_t(d)];
      const int64_t td = d - extra;
      if (td >= 0 && t.size(td) != 1) off[size_t(b)] += idx * t.stride(td);
    }
  }
  return off;
}

// The attention kernels' block GEMMs (gemm_raw's arguments): float32 on our AVX-512 kernel where
// the CPU has it (NOTE [float32 GEMM]: no per-call packing of the whole operand by OpenBLAS),
// float64 on BLAS.
template <class T>
void attn_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::gemm_f32_supported()) {
      cpu::gemm_f32(m, n, k, a, ta, lda, b, tb, ldb, alpha, beta, c, ldc);
      return;
    }
  }
  cpu::gemm_raw(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The stride of dim d (from the end, 1 or 2) of t as it broadcasts (0: size 1 or missing).
int64_t bstride(const Tensor& t, int64_t d) {
  return t.dim() < d || t.size(-d) == 1 ? 0 : t.stride(-d);
}

// NOTE [Attention operands]: the attention kernels read each operand as a batch of matrices
// (BatchMats: an offset per batch, row and column strides), so one forward and one backward
// serve scaled_dot_product_attention (contiguous q, k, v of [B, L, E] etc.; its k read as the
// transposed key k^T) and the trace's training rewrite (fused_attention_forward/_backward:
// q, k^T and v as the head split left them, the mask broadcast in place). A block operand
// that BLAS cannot read as it lies is copied per task (gemm_operand).
template <class T> BatchMats<T> batch_mats(const Tensor& t, IntArrayRef lead, bool transposed) {
  BatchMats<T> m{static_cast<const T*>(t.impl()->storage->data), lead_offsets(t, lead),
                 bstride(t, 2), bstride(t, 1)};
  if (transposed) std::swap(m.rs, m.cs);
  return m;
}
// The mask's (bool or of q's dtype, offsets in its elements; base null: no mask).
BatchMats<char> mask_mats(const Tensor& mask, IntArrayRef lead) {
  return mask.defined() ? batch_mats<char>(mask, lead, false) : BatchMats<char>{};
}

#ifdef OF_ATTN_AVX512
// NOTE [Attention softmax, float32]: the forward in float32 on AVX-512, without dropout,
// causality or a boolean mask: per task a block of query rows, the scores' rows as the float32
// GEMM reads its A in place (no copy before P V), the softmax on 16 lanes, 1 / sum applied to
// the output rows. Output batch b's rows go to [b / H, :, b % H, :] of an [B / H, L, H, Ev]
// output (NOTE [Merged heads]; H = 1: [B, L, Ev]); plse (unless null) gets each row's
// log-sum-exp. The mask (base null: none) is additive, of q's dtype.
void fused_forward_f32(const AttnGeom& g, double scale, int64_t H, const BatchMats<float>& q,
                       const BatchMats<float>& kt, const BatchMats<float>& v,
                       const BatchMats<char>& mask, float* po, float* plse) {
  const AttnBlocks blk = attn_blocks(g);
  const int64_t work = blk.rows * g.S * (g.E + g.Ev);
  const int64_t lds = std::max(cpu::gemm_f32_inplace_lda(g.S), g.S);
  const float* pm = reinterpret_cast<const float*>(mask.base);
  cpu::SerialBlas serial;  // the tasks' GEMMs run on the pool's threads
  parallel_for(0, g.B * blk.count, grain_for(work), [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> sc, inv, qs, ks, vs;
    if (sc.size() < size_t(blk.rows * lds)) sc.resize(size_t(blk.rows * lds));
    if (inv.size() < size_t(blk.rows)) inv.resize(size_t(blk.rows));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blk.count, i0 = (t % blk.count) * blk.rows;
      const int64_t R = std::min(blk.rows, g.L - i0);
      const int64_t ldo = H * g.Ev;
      float* o = po + ((b / H) * g.L + i0) * ldo + (b % H) * g.Ev;
      const auto a = gemm_operand(q.at(b) + i0 * q.rs, R, g.E, q.rs, q.cs, qs);
      const auto bt = gemm_operand(kt.at(b), g.E, g.S, kt.rs, kt.cs, ks);
      cpu::gemm_f32(R, g.S, g.E, a.p, a.trans, a.ld, bt.p, bt.trans, bt.ld, float(scale), 0.f,
                    sc.data(), lds);
      for (int64_t r = 0; r < R; ++r)
        inv[size_t(r)] = softmax_row_f32(
            sc.data() + r * lds, g.S, pm ? pm + mask.off[size_t(b)] + (i0 + r) * mask.rs : nullptr,
            mask.cs, plse ? plse + b * g.L + i0 + r : nullptr);
      const auto bv = gemm_operand(v.at(b), g.S, g.Ev, v.rs, v.cs, vs);
      cpu::gemm_f32(R, g.Ev, g.S, sc.data(), false, lds, bv.p, bv.trans, bv.ld, 1.f, 0.f, o, ldo);
      scale_rows_f32(o, R, g.Ev, ldo, inv.data());
    }
  });
}
#endif

}  // namespace

namespace {

// The forward: o (heads H as fused_forward_f32 writes them) and lse [B, L] (plse null: none).
template <class T>
void attn_forward(const AttnGeom& g, const Attrs& attrs, const std::vector<int64_t>& batches,
                  const BatchMats<T>& q, const BatchMats<T>& kt, const BatchMats<T>& v,
                  const BatchMats<char>& mask, int64_t H, T* po, T* plse) {
  const AttnBlocks blk = attn_blocks(g);
  const int64_t work = blk.rows * g.S * (g.E + g.Ev);
  const int64_t ldo = H * g.Ev;
  cpu::SerialBlas serial;  // the tasks' GEMMs run on the pool's threads
  parallel_for(0, g.B * blk.count, grain_for(work), [&](int64_t t0, int64_t t1) {
    AttnRows ar(g, attrs, batches, mask);
    std::vector<T> sc(size_t(blk.rows * g.S)), qs, ks, vs;
    std::vector<char> empty(size_t(blk.rows));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blk.count, i0 = (t % blk.count) * blk.rows;
      const int64_t R = std::min(blk.rows, g.L - i0);
      if (g.S == 0 || g.E == 0) {
        std::fill(sc.begin(), sc.end(), T(0));
      } else {
        const auto a = gemm_operand(q.at(b) + i0 * q.rs, R, g.E, q.rs, q.cs, qs);
        const auto bt = gemm_operand(kt.at(b), g.E, g.S, kt.rs, kt.cs, ks);
        attn_gemm(a.trans, bt.trans, R, g.S, g.E, T(ar.scale), a.p, a.ld, bt.p, bt.ld, T(0),
                  sc.data(), g.S);
      }
      for (int64_t r = 0; r < R; ++r) {
        const int64_t i = i0 + r;
        T* s = sc.data() + r * g.S;
        ar.apply_mask(s, b, i);
        double l = 0;
        const T m = exp_row(s, g.S, l);
        empty[size_t(r)] = m == T(-INFINITY);
        if (plse) plse[b * g.L + i] = empty[size_t(r)] ? T(-INFINITY) : T(double(m) + std::log(l));
        if (empty[size_t(r)]) continue;  // nothing to attend to: a NaN row (below)
        const T inv = T(1.0 / l);
        if (ar.dropout) {
          ar.draw_row(b, i);
          for (int64_t j = 0; j < g.S; ++j) s[j] = s[j] * inv * ar.template keep<T>(j);
        } else {
          for (int64_t j = 0; j < g.S; ++j) s[j] *= inv;
        }
      }
      T* o = po + ((b / H) * g.L + i0) * ldo + (b % H) * g.Ev;
      if (g.S > 0 && g.Ev > 0) {
        const auto bv = gemm_operand(v.at(b), g.S, g.Ev, v.rs, v.cs, vs);
        attn_gemm(false, bv.trans, R, g.Ev, g.S, T(1), sc.data(), g.S, bv.p, bv.ld, T(0), o, ldo);
      }
      for (int64_t r = 0; r < R; ++r)
        if (empty[size_t(r)]) std::fill(o + r * ldo, o + r * ldo + g.Ev, T(NAN));
    }
  });
}

// The backward: dq [B, L, E], dk [B, S, E] (dk_t: dk^T, [B, E, S]) and dv [B, S, Ev],
// contiguous; lse read at lse.at(b)[i * lse.cs].
template <class T>
void attn_backward(const AttnGeom& g, const Attrs& attrs, const std::vector<int64_t>& batches,
                   const BatchMats<T>& dout, const BatchMats<T>& q, const BatchMats<T>& kt,
                   const BatchMats<T>& v, const BatchMats<char>& mask, const BatchMats<T>& out,
                   const BatchMats<T>& lse, T* pdq, T* pdk, bool dk_t, T* pdv) {
  const AttnBlocks blk = attn_blocks(g);
  // one batch per task: dK and dV accumulate over its row blocks in order
  const int64_t work = g.L * g.S * (2 * g.E + 2 * g.Ev);
  cpu::SerialBlas serial;  // the tasks' GEMMs run on the pool's threads
  parallel_for(0, g.B, grain_for(work), [&](int64_t b0, int64_t b1) {
    AttnRows ar(g, attrs, batches, mask);
    // dS's rows as the float32 GEMM reads its A in place (dQ = dS K without a copy)
    int64_t ld = g.S;
#ifdef OF_ATTN_AVX512
    if constexpr (std::is_same_v<T, float>)
      if (cpu::gemm_f32_supported()) ld = std::max(cpu::gemm_f32_inplace_lda(g.S), g.S);
#endif
    std::vector<T> ps(size_t(blk.rows * ld)), ds(size_t(blk.rows * ld)), qs, dos, ks, vs;
    for (int64_t b = b0; b < b1; ++b) {
      T* dk = pdk + b * g.S * g.E;
      T* dv = pdv + b * g.S * g.Ev;
      std::fill(dk, dk + g.S * g.E, T(0));
      std::fill(dv, dv + g.S * g.Ev, T(0));
      if (g.S == 0) {
        std::fill(pdq + b * g.L * g.E, pdq + (b + 1) * g.L * g.E, T(0));
        continue;
      }
      const auto bk = gemm_operand(kt.at(b), g.E, g.S, kt.rs, kt.cs, ks);
      const auto bv = gemm_operand(v.at(b), g.S, g.Ev, v.rs, v.cs, vs);
      for (int64_t i0 = 0; i0 < g.L; i0 += blk.rows) {
        const int64_t R = std::min(blk.rows, g.L - i0);
        const auto aq = gemm_operand(q.at(b) + i0 * q.rs, R, g.E, q.rs, q.cs, qs);
        const T* dorow = dout.at(b) + i0 * dout.rs;
        const auto ado = gemm_operand(dorow, R, g.Ev, dout.rs, dout.cs, dos);
        if (g.E == 0) std::fill(ps.begin(), ps.end(), T(0));
        else
          attn_gemm(aq.trans, bk.trans, R, g.S, g.E, T(ar.scale), aq.p, aq.ld, bk.p, bk.ld, T(0),
                    ps.data(), ld);
        if (g.Ev == 0) std::fill(ds.begin(), ds.end(), T(0));
        else
          attn_gemm(ado.trans, !bv.trans, R, g.S, g.Ev, T(1), ado.p, ado.ld, bv.p, bv.ld, T(0),
                    ds.data(), ld);
        for (int64_t r = 0; r < R; ++r) {
          const int64_t i = i0 + r;
          T* p = ps.data() + r * ld;
          T* d = ds.data() + r * ld;
          const T li = lse.at(b)[i * lse.cs];
          if (!std::isfinite(double(li))) {  // an empty row: no gradient flows through it
            std::fill(p, p + g.S, T(0));
            std::fill(d, d + g.S, T(0));
            continue;
          }
          ar.apply_mask(p, b, i);
          const T D = T(dot_d(dorow + r * dout.rs, dout.cs, out.at(b) + i * out.rs, out.cs, g.Ev));
          const T sc = T(ar.scale);
          exp_shift(p, g.S, li);
          if (ar.dropout) {
            ar.draw_row(b, i);
            for (int64_t j = 0; j < g.S; ++j) {
              const T zf = ar.template keep<T>(j);
              d[j] = p[j] * (zf * d[j] - D) * sc;
              p[j] *= zf;
            }
          } else {
            for (int64_t j = 0; j < g.S; ++j) d[j] = p[j] * (d[j] - D) * sc;
          }
        }
        // dV += (P z)^T dO, dQ = dS K, dK += dS^T Q (dK^T += Q^T dS)
        if (g.Ev > 0)
          attn_gemm(true, ado.trans, g.S, g.Ev, R, T(1), ps.data(), ld, ado.p, ado.ld, T(1), dv,
                    g.Ev);
        if (g.E > 0) {
          attn_gemm(false, !bk.trans, R, g.E, g.S, T(1), ds.data(), ld, bk.p, bk.ld, T(0),
                    pdq + (b * g.L + i0) * g.E, g.E);
          if (dk_t)
            attn_gemm(!aq.trans, false, g.E, g.S, R, T(1), aq.p, aq.ld, ds.data(), ld, T(1), dk,
                      g.S);
          else
            attn_gemm(true, aq.trans, g.S, g.E, R, T(1), ds.data(), ld, aq.p, aq.ld, T(1), dk, g.E);
        }
      }
    }
  });
}

// The batch dims of an attention op's query (scaled_dot_product_attention: [B]).
IntArrayRef query_lead(const Tensor& q) { return q.sizes().slice(0, size_t(q.dim() - 2)); }
// (k_is_kt: the key input is k^T [..., E, S], else k [..., S, E])
AttnGeom attn_geom_of(const Tensor& q, const Tensor& k, bool k_is_kt, const Tensor& v) {
  int64_t B = 1;
  for (int64_t s : query_lead(q)) B *= s;
  return {B, q.size(-2), k_is_kt ? k.size(-1) : k.size(-2), q.size(-1), v.size(-1)};
}
// lse [B, L] as B rows of one [1, L] matrix each
template <class T> BatchMats<T> lse_mats(const Tensor& lse) {
  BatchMats<T> m{static_cast<const T*>(lse.impl()->storage->data),
                 std::vector<int64_t>(size_t(lse.size(0))), 0, bstride(lse, 1)};
  for (int64_t b = 0; b < lse.size(0); ++b)
    m.off[size_t(b)] = lse.impl()->offset + (lse.size(0) == 1 ? 0 : b * lse.stride(0));
  return m;
}

// The forward of every attention op: q [..., L, E], k ([..., S, E], or k^T [..., E, S] when
// k_is_kt), v, mask, SdpaAttrs; o with H heads merged (fused_forward_f32), lse (undefined: none).
// float32 on AVX-512 without dropout, causality or a boolean mask takes fused_forward_f32.
void attention_forward(const Tensor& q, const Tensor& kk, bool k_is_kt, const Tensor& v,
                       const Tensor& mask, const Attrs& attrs, int64_t H, const Tensor& o,
                       const Tensor& lse, const char* op) {
  const IntArrayRef lead = query_lead(q);
  const AttnGeom g = attn_geom_of(q, kk, k_is_kt, v);
  const BatchMats<char> mm = mask_mats(mask, lead);
  dispatch_f(q.dtype(), op, [&](auto z) {
    using T = decltype(z);
    T* plse = lse.defined() ? mptr<T>(lse) : nullptr;
#ifdef OF_ATTN_AVX512
    if constexpr (std::is_same_v<T, float>) {
      if (cpu::gemm_f32_supported() && g.S > 0 && g.E > 0 && g.Ev > 0 &&
          SdpaAttrs::get<"dropout_p">(attrs) == 0.0 && !SdpaAttrs::get<"is_causal">(attrs) &&
          SdpaAttrs::get<"mask_kind">(attrs) != 1) {
        fused_forward_f32(g, SdpaAttrs::get<"scale">(attrs), H, batch_mats<float>(q, lead, false),
                          batch_mats<float>(kk, lead, !k_is_kt), batch_mats<float>(v, lead, false),
                          mm, mptr<float>(o), plse);
        return;
      }
    }
#endif
    attn_forward<T>(g, attrs, draw_batches(g, attrs), batch_mats<T>(q, lead, false),
                    batch_mats<T>(kk, lead, !k_is_kt), batch_mats<T>(v, lead, false), mm, H,
                    mptr<T>(o), plse);
  });
}
// inputs dout, q, k (or k^T), v, mask, out, lse; outputs dq, dk (or dk^T), dv
void attention_backward(const KernelArgs& k, bool k_is_kt, const char* op) {
  const Tensor &dout = k.inputs[0], &q = k.inputs[1], &kk = k.inputs[2], &v = k.inputs[3];
  const Tensor &mask = k.inputs[4], &o = k.inputs[5], &lse = k.inputs[6];
  const IntArrayRef lead = query_lead(q);
  const AttnGeom g = attn_geom_of(q, kk, k_is_kt, v);
  const std::vector<int64_t> batches = draw_batches(g, k.attrs);
  const BatchMats<char> mm = mask_mats(mask, lead);
  const DimVector flat{g.B};  // out [B, L, Ev]; dout too, or with q's batch dims
  const bool dout_flat = dout.dim() == 3;
  dispatch_f(q.dtype(), op, [&](auto z) {
    using T = decltype(z);
    attn_backward<T>(
        g, k.attrs, batches, batch_mats<T>(dout, dout_flat ? IntArrayRef(flat) : lead, false),
        batch_mats<T>(q, lead, false), batch_mats<T>(kk, lead, !k_is_kt),
        batch_mats<T>(v, lead, false), mm, batch_mats<T>(o, flat, false), lse_mats<T>(lse),
        mptr<T>(k.outputs[0]), mptr<T>(k.outputs[1]), k_is_kt, mptr<T>(k.outputs[2]));
  });
}

}  // namespace

// NOTE [Fused attention]: the trace's attention pass (trace/rewrite_attention.cpp) replaces
// matmul(q, kt) * scale + mask -> softmax(-1) -> matmul(., v) of an inference graph by one
// fused_attention node reading q, kt and v where the head split left them (strided views of
// the projections' outputs: no copies) and the additive mask broadcast in place. Per task, a
// batch matrix and a block of query rows (NOTE [CPU attention blocks]): one GEMM for the scores
// (scale as its alpha), the mask, the row softmax as the attention kernel takes it, one GEMM
// into the output rows. The scores never leave the block.
void fused_attention(const KernelArgs& k) {
  const Tensor &q = k.inputs[0], &kt = k.inputs[1], &v = k.inputs[2], &mask = k.inputs[3];
  // NOTE [Merged heads]: batch b's rows go to [b / H, :, b % H, :] of an [B / H, L, H, Ev] output
  // (H = 1: [B, L, Ev]), a row H * Ev apart
  const int64_t H =
      FusedAttnAttrs::has<"heads">(k.attrs) ? FusedAttnAttrs::get<"heads">(k.attrs) : 1;
  const Attrs a = SdpaAttrs::make(FusedAttnAttrs::get<"scale">(k.attrs), false, 0.0, int64_t(0),
                                  int64_t(0), FusedAttnAttrs::get<"mask_kind">(k.attrs));
  attention_forward(q, kt, true, v, mask, a, H, k.outputs[0], Tensor(), "fused_attention");
}

void scaled_dot_product_attention(const KernelArgs& k) {
  attention_forward(k.inputs[0], k.inputs[1], false, k.inputs[2], k.inputs[3], k.attrs, 1,
                    k.outputs[0], k.outputs[1], "scaled_dot_product_attention");
}
void scaled_dot_product_attention_backward(const KernelArgs& k) {
  attention_backward(k, false, "scaled_dot_product_attention_backward");
}
void fused_attention_forward(const KernelArgs& k) {
  attention_forward(k.inputs[0], k.inputs[1], true, k.inputs[2], k.inputs[3], k.attrs, 1,
                    k.outputs[0], k.outputs[1], "fused_attention_forward");
}
void fused_attention_backward(const KernelArgs& k) {
  attention_backward(k, true, "fused_attention_backward");
}

}  // namespace oneflow::cpu

// blas.cpp: CPU GEMM glue on OpenBLAS (see NOTE [CPU GEMM operands] in cpu/blas.h).
#include "cpu/blas.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "cpu/gemm_bf16.h"
#include "cpu/gemm_f32.h"
#include "cpu/loops.h"
#include "thread_pool.h"

namespace oneflow::cpu {
namespace {

// Below this m*n*k OpenBLAS runs a GEMM on one thread (SMP_THRESHOLD_MIN * 4 in 0.3.x), so a
// batch of such GEMMs is better spread over our own pool.
constexpr double kSmallGemm = 262144.0;

// One GEMM operand as BLAS reads it.
struct Operand {
  const char* data = nullptr;
  bool trans = false;
  int64_t ld = 1;
  int64_t bstride = 0;  // elements between consecutive batch matrices (0: broadcast)
  Tensor keep;          // owns a contiguous copy when one was needed
};

bool map_inner(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool& trans, int64_t& ld) {
  const bool row_major = (cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1));
  const bool col_major = (rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1));
  if (row_major) {
    trans = false;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
  } else if (col_major) {
    trans = true;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
  } else {
    return false;
  }
  return ld <= int64_t(std::numeric_limits<blasint>::max());
}

Operand make_operand(const Tensor& t) {
  const int64_t nd = t.dim();
  const bool batched = nd == 3;
  const IntArrayRef s = t.sizes(), st = t.strides();
  const int64_t rows = s[nd - 2], cols = s[nd - 1];
  Operand o;
  if (map_inner(rows, cols, st[nd - 2], st[nd - 1], o.trans, o.ld)) {
    o.data = static_cast<const char*>(t.data_ptr());
    o.bstride = batched && s[0] != 1 ? st[0] : 0;
    return o;
  }
  // Strided in both inner dims: copy. A broadcast batch (stride 0) is copied once.
  const bool bcast = batched && s[0] > 1 && st[0] == 0;
  // (a kernel's scratch: NOTE [No kernel dispatches])
  o.keep = kernel_contiguous(bcast ? make_view(t, s.slice(1), st.slice(1), t.impl()->offset) : t);
  o.data = static_cast<const char*>(o.keep.data_ptr());
  o.trans = false;
  o.ld = std::max<int64_t>(cols, 1);
  o.bstride = batched && s[0] != 1 && !bcast ? rows * cols : 0;
  return o;
}

// OpenBLAS follows of::set_num_threads (checked outside parallel regions only).
std::atomic<int> g_blas_threads{0};  // what OpenBLAS was last set to (0: not yet)
void sync_blas_threads() {
  if (in_parallel_region()) return;
  const int n = num_threads();
  if (g_blas_threads.load(std::memory_order_relaxed) != n) {
    openblas_set_num_threads(n);
    g_blas_threads.store(n, std::memory_order_relaxed);
  }
}

inline void blas_gemm(bool ta, bool tb, blasint m, blasint n, blasint k, float alpha,
                      const float* a, blasint lda, const float* b, blasint ldb, float beta,
                      float* c, blasint ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void blas_gemm(bool ta, bool tb, blasint m, blasint n, blasint k, double alpha,
                      const double* a, blasint lda, const double* b, blasint ldb, double beta,
                      double* c, blasint ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void gemm_raw_t(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  constexpr int64_t kMaxInt = int64_t(std::numeric_limits<blasint>::max());
  OF_CHECK(m <= kMaxInt && n <= kMaxInt && k <= kMaxInt && lda <= kMaxInt && ldb <= kMaxInt &&
               ldc <= kMaxInt,
           "[gemm] dimensions m={}, n={}, k={} are too large for BLAS", m, n, k);
  if (m <= 0 || n <= 0) return;
  sync_blas_threads();
  blas_gemm(ta, tb, blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb),
            beta, c, blasint(ldc));
}

// Calls f(i) for every batch index, spread over the pool when each GEMM is small.
template <class F> void for_batches(int64_t batch, int64_t m, int64_t n, int64_t k, F&& f) {
  const double work = double(m) * double(n) * double(std::max<int64_t>(k, 1));
  if (batch > 1 && work < kSmallGemm && num_threads() > 1 && !in_parallel_region()) {
    const int64_t grain = std::max<int64_t>(1, int64_t(32768.0 / std::max(work, 1.0)));
    parallel_for(0, batch, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(i);
    });
  } else {
    for (int64_t i = 0; i < batch; ++i) f(i);
  }
}

template <class T>
void gemm_float(const Tensor& a, const Tensor& b, const Tensor& c, int64_t batch, int64_t m,
                int64_t n, int64_t k, T alpha, T beta, const char* op) {
  constexpr int64_t kMaxInt = int64_t(std::numeric_limits<blasint>::max());
  OF_CHECK(m <= kMaxInt && n <= kMaxInt && k <= kMaxInt,
           "[{}] dimensions m={}, n={}, k={} are too large for BLAS", op, m, n, k);
  const Operand oa = make_operand(a), ob = make_operand(b);
  T* cp = static_cast<T*>(c.data_ptr());
  const int64_t sc = m * n;
  if (batch == 1 && num_threads() > 1 && !in_parallel_region() && n >= 64 * num_threads() &&
      double(m) * double(n) * double(k) >= 4.0 * kSmallGemm) {
    // NOTE [GEMM threads]: one GEMM's column blocks run on our pool, each a single-threaded
    // OpenBLAS call, instead of OpenBLAS's own threads: a replay then keeps one set of threads
    // busy (OpenBLAS's threads and our pool's took turns sleeping and waking around every GEMM
    // and every small op after it; bench/RESULTS.md, BERT at batch 1 on 2 threads). Each
    // block's elements sum over k as the whole GEMM's would; block edges are multiples of 16.
    const T* ap = reinterpret_cast<const T*>(oa.data);
    const T* bp = reinterpret_cast<const T*>(ob.data);
    const int64_t parts = num_threads();
    SerialBlas serial;
    parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t j0 = (n * p / parts) / 16 * 16;
        const int64_t j1 = p + 1 == parts ? n : (n * (p + 1) / parts) / 16 * 16;
        if (j1 <= j0) continue;
        const T* bj = ob.trans ? bp + j0 * ob.ld : bp + j0;
        blas_gemm(oa.trans, ob.trans, blasint(m), blasint(j1 - j0), blasint(k), alpha, ap,
                  blasint(oa.ld), bj, blasint(ob.ld), beta, cp + j0, blasint(n));
      }
    });
    return;
  }
  sync_blas_threads();
  for_batches(batch, m, n, k, [&](int64_t i) {
    const T* ap = reinterpret_cast<const T*>(oa.data) + i * oa.bstride;
    const T* bp = reinterpret_cast<const T*>(ob.data) + i * ob.bstride;
    blas_gemm(oa.trans, ob.trans, blasint(m), blasint(n), blasint(k), alpha, ap, blasint(oa.ld), bp,
              blasint(ob.ld), beta, cp + i * sc, blasint(std::max<int64_t>(n, 1)));
  });
}

// Integer GEMM: int64 accumulation, reads strided operands directly.
template <class T>
void gemm_int(const Tensor& a, const Tensor& b, const Tensor& c, int64_t batch, int64_t m,
              int64_t n, int64_t k, int64_t alpha, int64_t beta) {
  const bool ba = a.dim() == 3, bb = b.dim() == 3;
  const int64_t sab = ba && a.size(0) != 1 ? a.stride(0) : 0;
  const int64_t sbb = bb && b.size(0) != 1 ? b.stride(0) : 0;
  const int64_t sar = a.stride(-2), sak = a.stride(-1), sbk = b.stride(-2), sbn = b.stride(-1);
  const T* ap = static_cast<const T*>(a.data_ptr());
  const T* bp = static_cast<const T*>(b.data_ptr());
  T* cp = static_cast<T*>(c.data_ptr());
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(n * k, 1));
  parallel_for(0, batch * m, grain, [&](int64_t r0, int64_t r1) {
    // integer products and sums wrap in two's complement, as libtorch's do in practice
    // (NOTE [Integer wrap]): computed in uint64_t, where overflow is defined
    using U = uint64_t;
    std::vector<U> acc(static_cast<size_t>(n), 0);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / m, i = r % m;
      std::fill(acc.begin(), acc.end(), 0);
      const T* arow = ap + bi * sab + i * sar;
      const T* bmat = bp + bi * sbb;
      for (int64_t kk = 0; kk < k; ++kk) {
        const U av = U(int64_t(arow[kk * sak]));
        if (av == 0) continue;
        const T* brow = bmat + kk * sbk;
        for (int64_t j = 0; j < n; ++j) acc[size_t(j)] += av * U(int64_t(brow[j * sbn]));
      }
      T* crow = cp + r * n;
      for (int64_t j = 0; j < n; ++j) {
        const U v = U(alpha) * acc[size_t(j)];
        crow[j] = beta == 0 ? T(int64_t(v)) : T(int64_t(U(beta) * U(int64_t(crow[j])) + v));
      }
    }
  });
}

// NOTE [Prepacked weights] for the bfloat16 kernel: B packed once per constant operand (its
// storage, view and version); a changed version repacks it, a dead storage's entry goes.
// The same cache serves the float32 kernel (NOTE [float32 GEMM]); an entry is one kernel's
// packing of one view (the dtype of the storage tells which).
struct PackedB {
  std::weak_ptr<StorageImpl> storage;
  const StorageImpl* key = nullptr;
  int kind = 0;  // which kernel's form (ConstantForm)
  uint32_t version = 0;
  int64_t offset = 0;
  DimVector sizes, strides;
  std::shared_ptr<const void> packed;
  size_t bytes = 0;
};
std::mutex g_packs_mu;
std::vector<PackedB> g_packs;
constexpr size_t kMaxPackedBytes = size_t(4) << 30;

}  // namespace

std::shared_ptr<const void> cached_form(const Tensor& b, ConstantForm kind,
                                        const std::function<std::shared_ptr<const void>()>& make,
                                        const std::function<size_t(const void*)>& bytes_of) {
  const TensorImpl& t = *b.impl();
  const uint32_t version = t.storage->version.load(std::memory_order_relaxed);
  auto same = [&](const PackedB& e) {
    return e.key == t.storage.get() && e.kind == int(kind) && e.offset == t.offset &&
           IntArrayRef(e.sizes) == IntArrayRef(t.sizes) &&
           IntArrayRef(e.strides) == IntArrayRef(t.strides);
  };
  {
    std::lock_guard<std::mutex> lock(g_packs_mu);
    for (const PackedB& e : g_packs)
      if (same(e) && e.version == version && e.storage.lock() == t.storage) return e.packed;
  }
  std::shared_ptr<const void> packed = make();
  std::lock_guard<std::mutex> lock(g_packs_mu);
  const size_t own = bytes_of(packed.get());
  size_t bytes = own;
  std::erase_if(g_packs, [&](const PackedB& e) { return e.storage.expired() || same(e); });
  for (const PackedB& e : g_packs) bytes += e.bytes;
  if (bytes > kMaxPackedBytes) g_packs.clear();
  g_packs.push_back(
      {t.storage, t.storage.get(), int(kind), version, t.offset, t.sizes, t.strides, packed, own});
  return packed;
}

namespace {

// B's packing for the kernel whose pack_b is `pack` (returning a std::vector<P>).
template <class P, class Pack>
std::shared_ptr<const LargePageVector<P>> packed_constant_b(const Tensor& b, ConstantForm kind,
                                                            Pack&& pack) {
  return std::static_pointer_cast<const LargePageVector<P>>(cached_form(
      b, kind,
      [&] {
        return std::shared_ptr<const void>(std::make_shared<const LargePageVector<P>>(pack()));
      },
      [](const void* p) { return static_cast<const LargePageVector<P>*>(p)->size() * sizeof(P); }));
}

}  // namespace

size_t packed_constant_operands() {
  std::lock_guard<std::mutex> lock(g_packs_mu);
  return g_packs.size();
}

namespace {

bool same_storage(const Tensor& x, const Tensor& y) {
  return x.impl()->storage.get() == y.impl()->storage.get();
}

// One float32 GEMM on the AVX-512 kernel (NOTE [float32 GEMM]): a 2-D c not aliasing a or b,
// k > 0; a replay's constant B packed once (NOTE [Prepacked weights]).
void gemm_f32_call(const Tensor& a, const Tensor& b, const Tensor& c, float alpha, float beta,
                   const GemmEpilogueF32& ep) {
  const int64_t m = c.size(-2), n = c.size(-1), k = a.size(-1);
  const Operand oa = make_operand(a), ob = make_operand(b);
  const auto* ad = reinterpret_cast<const float*>(oa.data);
  const auto* bd = reinterpret_cast<const float*>(ob.data);
  std::shared_ptr<const LargePageVector<float>> packed;
  if (constant_operand_storage() == b.impl()->storage.get() &&
      !gemm_f32_gemv(m, oa.trans, ob.trans))
    packed = packed_constant_b<float>(b, ConstantForm::kF32Strips,
                                      [&] { return pack_b_f32(k, n, bd, ob.trans, ob.ld); });
  gemm_f32(m, n, k, ad, oa.trans, oa.ld, bd, ob.trans, ob.ld, alpha, beta,
           static_cast<float*>(c.data_ptr()), n, packed ? packed->data() : nullptr, ep);
}

}  // namespace

bool blas_compatible(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  bool t;
  int64_t ld;
  return map_inner(rows, cols, rs, cs, t, ld);
}
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool& trans, int64_t& ld) {
  return map_inner(rows, cols, rs, cs, trans, ld);
}

bool gemm_epilogue(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& bias,
                   void (*act)(float*, int64_t), float scale, const Tensor& residual) {
  if (c.dtype() != kFloat32 || a.dtype() != kFloat32 || b.dtype() != kFloat32 || c.dim() != 2 ||
      !c.is_contiguous() || !gemm_f32_supported() || a.size(-1) == 0 || c.numel() == 0 ||
      same_storage(c, a) || same_storage(c, b) || (bias.defined() && same_storage(c, bias)) ||
      (residual.defined() &&
       (residual.dtype() != kFloat32 || !residual.is_contiguous() || same_storage(c, residual))))
    return false;
  const Tensor bc = bias.defined() ? kernel_contiguous(bias) : Tensor();
  GemmEpilogueF32 ep;
  ep.bias = bc.defined() ? static_cast<const float*>(bc.data_ptr()) : nullptr;
  ep.act = act;
  ep.scale = scale;
  if (residual.defined()) {
    ep.residual = static_cast<const float*>(residual.data_ptr());
    ep.ldr = c.size(1);
  }
  gemm_f32_call(a, b, c, 1.f, 0.f, ep);
  return true;
}

void gemm(const Tensor& a, const Tensor& b, const Tensor& c, const Scalar& alpha,
          const Scalar& beta, const char* op) {
  OF_CHECK(c.is_contiguous(), "[{}] internal: the GEMM output must be contiguous", op);
  const ScalarType t = c.dtype();
  OF_CHECK(a.dtype() == t && b.dtype() == t && t != kBool,
           "[{}] internal: GEMM dtypes {}, {} -> {} are not supported", op, dtype_name(a.dtype()),
           dtype_name(b.dtype()), dtype_name(t));
  const int64_t nd = c.dim();
  const int64_t batch = nd == 3 ? c.size(0) : 1;
  const int64_t m = c.size(-2), n = c.size(-1), k = a.size(-1);
  if (batch == 0 || m == 0 || n == 0) return;
  const bool beta_zero = beta.to_double() == 0.0;
  if (same_storage(c, a) || same_storage(c, b)) {
    // The output overlaps an operand (out= aliasing): compute into a temporary.
    Tensor tmp = beta_zero ? make_empty(c.sizes(), t, c.device()) : kernel_cast(c, t);
    gemm(a, b, tmp, alpha, beta, op);
    std::memcpy(c.data_ptr(), tmp.data_ptr(), c.nbytes());
    return;
  }
  if (k == 0) {  // empty sum: c = beta * c
    dispatch_dtype(t, [&](auto z) {
      using T = decltype(z);
      T* p = static_cast<T*>(c.data_ptr());
      const int64_t total = c.numel();
      if (beta_zero) {
        std::fill(p, p + total, T(0));
      } else {
        using C = compute_t<T>;
        const C bv = beta.to<C>();
        for (int64_t i = 0; i < total; ++i) p[i] = T(bv * C(p[i]));
      }
    });
    return;
  }
  switch (t) {
    case kFloat32:
      if (batch == 1 && gemm_f32_supported()) {
        gemm_f32_call(a, b, c, alpha.to<float>(), beta_zero ? 0.f : beta.to<float>(), {});
        return;
      }
      gemm_float<float>(a, b, c, batch, m, n, k, alpha.to<float>(), beta.to<float>(), op);
      return;
    case kFloat64:
      gemm_float<double>(a, b, c, batch, m, n, k, alpha.to<double>(), beta.to<double>(), op);
      return;
    case kFloat16:
    case kBFloat16: {
      // Widen to float32, run sgemm (float accumulation), narrow into c; bfloat16 operands on
      // a CPU with AVX512-BF16 run the bfloat16 kernel into the float32 c instead (NOTE
      // [bfloat16 GEMM]).
      const Tensor cf =
          beta_zero ? make_empty(c.sizes(), kFloat32, c.device()) : kernel_cast(c, kFloat32);
      if (t == kBFloat16 && gemm_bf16_supported()) {
        const Operand oa = make_operand(a), ob = make_operand(b);
        const auto* ad = reinterpret_cast<const uint16_t*>(oa.data);
        const auto* bd = reinterpret_cast<const uint16_t*>(ob.data);
        float* cp = static_cast<float*>(cf.data_ptr());
        // a replay's constant weight: packed once (NOTE [Prepacked weights])
        std::shared_ptr<const LargePageVector<uint32_t>> packed;
        if (batch == 1 && constant_operand_storage() == b.impl()->storage.get() &&
            !gemm_bf16_gemv(m, oa.trans, ob.trans))
          packed = packed_constant_b<uint32_t>(
              b, ConstantForm::kBf16Strips, [&] { return pack_b_bf16(k, n, bd, ob.trans, ob.ld); });
        for (int64_t i = 0; i < batch; ++i)
          gemm_bf16(m, n, k, ad + i * oa.bstride, oa.trans, oa.ld, bd + i * ob.bstride, ob.trans,
                    ob.ld, alpha.to<float>(), beta_zero ? 0.f : beta.to<float>(), cp + i * m * n, n,
                    packed ? packed->data() : nullptr);
      } else {
        const Tensor af = kernel_cast(a, kFloat32), bf = kernel_cast(b, kFloat32);
        gemm(af, bf, cf, alpha, beta, op);
      }
      dispatch_float(t, op, [&](auto z) {
        using T = decltype(z);
        cpu_kernel<T, float>(c, {&cf}, [](float x) { return x; });
      });
      return;
    }
    default:
      dispatch_dtype(t, [&](auto z) {
        using T = decltype(z);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
          gemm_int<T>(a, b, c, batch, m, n, k, alpha.to_long(), beta.to_long());
      });
      return;
  }
}

SerialBlas::SerialBlas() : active_(!in_parallel_region()) {
  if (!active_) return;
  openblas_set_num_threads(1);
  g_blas_threads.store(1, std::memory_order_relaxed);
}
SerialBlas::~SerialBlas() {
  if (active_) sync_blas_threads();
}

void gemm_raw(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_raw_t(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm_raw(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
              int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_raw_t(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace oneflow::cpu

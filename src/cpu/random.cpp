// random.cpp: the CPU kernels of the random ops (uniform, normal, randint, multinomial), from the
// counter-based generator (generator.h); their meta, registration and public functions are in
// ops/random.cpp, what they share with it in ops/random_common.h.
#include "cpu/random.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_support.h"
#include "generator.h"
#include "ops/random_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace random_detail;
namespace {

// Element i takes word (i % 4) of counter (offset + i / 4).
template <class F> void fill_random(const Tensor& t, uint64_t seed, uint64_t offset, F f) {
  const bool contig = t.is_contiguous();
  Tensor dst = contig ? t : make_empty(t.sizes(), t.dtype(), t.device());
  dispatch_dtype(dst.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(dst.data_ptr());
    const int64_t n = dst.numel();
    const int64_t nctr = (n + 3) / 4;
    parallel_for(0, nctr, 4096, [&](int64_t c0, int64_t c1) {
      uint32_t w[4];
      for (int64_t c = c0; c < c1; ++c) {
        Philox::generate(seed, offset + uint64_t(c), w);
        // saturating: uniform(-1e300, 1e300) or randint of 2^40 into an integer dtype
        for (int k = 0; k < 4 && c * 4 + k < n; ++k)
          p[c * 4 + k] = T(saturate_cast<compute_t<T>>(f(w, k)));
      }
    });
  });
  if (!contig) kernel_copy_into(t, dst);
}

}  // namespace

void uniform(const KernelArgs& k) {
  using A = RandomAttrs;
  const Attrs& a = k.attrs;
  const double lo = A::get<"a">(a), hi = A::get<"b">(a);
  const bool dbl = k.outputs[0].dtype() == kFloat64;
  const uint64_t seed = uint64_t(A::get<"seed">(a)), offset = uint64_t(A::get<"offset">(a));
  fill_random(k.outputs[0], seed, offset, [=](const uint32_t* w, int j) {
    double u = dbl ? Philox::u01d(w[j], w[(j + 1) & 3]) : double(Philox::u01f(w[j]));
    return lo + (hi - lo) * u;
  });
}

void normal(const KernelArgs& k) {
  using A = RandomAttrs;
  const Attrs& a = k.attrs;
  const double mean = A::get<"a">(a), stdv = A::get<"b">(a);
  // Box-Muller on word pairs (0,1) and (2,3): both outputs of each pair are used.
  const uint64_t seed = uint64_t(A::get<"seed">(a)), offset = uint64_t(A::get<"offset">(a));
  fill_random(k.outputs[0], seed, offset, [=](const uint32_t* w, int j) {
    int p = j & 2;
    double u1 = (double(w[p]) + 1.0) * (1.0 / 4294967297.0);
    double u2 = double(w[p + 1]) * (1.0 / 4294967296.0);
    double r = std::sqrt(-2.0 * std::log(u1));
    double z = (j & 1) ? r * std::sin(2 * M_PI * u2) : r * std::cos(2 * M_PI * u2);
    return mean + stdv * z;
  });
}

void randint(const KernelArgs& k) {
  using A = RandomAttrs;
  const Attrs& a = k.attrs;
  const double low = A::get<"a">(a), high = A::get<"b">(a);
  // randint() checks these; a direct dispatch (a loaded graph, fuzz_ops) must not reach UB.
  OF_CHECK(std::abs(low) < 0x1p62 && std::abs(high) < 0x1p62 && low < high,
           "[randint] needs finite bounds low < high within +-2^62, got low={} high={}", low, high);
  const int64_t lo = int64_t(low), hi = int64_t(high);
  OF_CHECK(lo < hi, "[randint] low {} and high {} leave no integer to draw", low, high);
  const uint64_t range = uint64_t(hi - lo);
  const uint64_t seed = uint64_t(A::get<"seed">(a)), offset = uint64_t(A::get<"offset">(a));
  fill_random(k.outputs[0], seed, offset, [=](const uint32_t* w, int j) {
    uint64_t v = (uint64_t(w[j]) << 32) | w[(j + 1) & 3];
    return double(lo + int64_t(v % range));
  });
}

void multinomial(const KernelArgs& args) {
  const Tensor& w = args.inputs[0];
  using A = MultinomialAttrs;
  const int64_t k = w.sizes().back(), n = A::get<"num_samples">(args.attrs);
  const bool replacement = A::get<"replacement">(args.attrs);
  const uint64_t seed = uint64_t(A::get<"seed">(args.attrs)),
                 offset = uint64_t(A::get<"offset">(args.attrs));
  const int64_t rows = w.dim() == 1 ? 1 : w.sizes()[0];
  const uint64_t per_row = uint64_t((multinomial_draws(k, n, replacement) + 1) / 2);
  const std::vector<double> wv = kernel_contiguous(w).to_vector<double>();
  // Validate every row before writing anything (libtorch's messages).
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    int64_t positive = 0;
    for (int64_t j = 0; j < k; ++j) {
      const double x = wv[size_t(r * k + j)];
      OF_CHECK(std::isfinite(x) && x >= 0,
               "[multinomial] probability tensor contains either `inf`, `nan` or element < 0 "
               "(row {}, category {}: {})",
               r, j, x);
      sum += x;
      positive += x > 0;
    }
    OF_CHECK(sum > 0,
             "[multinomial] invalid multinomial distribution (sum of probabilities <= 0) "
             "in row {}",
             r);
    OF_CHECK(replacement || positive >= n,
             "[multinomial] invalid multinomial distribution (with replacement=False, not enough "
             "non-negative category to sample): row {} has {} categories of positive weight, {} "
             "samples asked",
             r, positive, n);
  }
  int64_t* out = static_cast<int64_t*>(args.outputs[0].data_ptr());
  parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<double> cdf(static_cast<size_t>(k)), key(static_cast<size_t>(k));
    std::vector<int64_t> idx(static_cast<size_t>(k));
    for (int64_t r = r0; r < r1; ++r) {
      const double* row = wv.data() + r * k;
      uint64_t ctr = offset + uint64_t(r) * per_row;
      uint32_t word[4];
      auto uniform = [&](int64_t i) {  // draw i of this row, in (0, 1]
        if (i % 2 == 0) Philox::generate(seed, ctr + uint64_t(i / 2), word);
        const int p = int(i % 2) * 2;
        return 1.0 - Philox::u01d(word[p], word[p + 1]);
      };
      int64_t* o = out + r * n;
      if (replacement) {
        double acc = 0;
        for (int64_t j = 0; j < k; ++j) cdf[size_t(j)] = acc += row[j];
        for (int64_t i = 0; i < n; ++i) {
          const double u = (1.0 - uniform(i)) * acc;  // [0, total)
          int64_t j = int64_t(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
          while (j < k - 1 && row[j] == 0) ++j;  // never a zero-weight category
          o[i] = std::min(j, k - 1);
        }
      } else {
        // Exponential race: category j finishes at E_j / w_j; the n first finishers, in order,
        // are a sample without replacement (zero weights never finish).
        for (int64_t j = 0; j < k; ++j) {
          const double u = uniform(j);
          key[size_t(j)] = row[j] > 0 ? -std::log(u) / row[j] : INFINITY;
          idx[size_t(j)] = j;
        }
        std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int64_t a, int64_t b) {
          return key[size_t(a)] < key[size_t(b)] || (key[size_t(a)] == key[size_t(b)] && a < b);
        });
        for (int64_t i = 0; i < n; ++i) o[i] = idx[size_t(i)];
      }
    }
  });
}

}  // namespace oneflow::cpu

// Random factories and in-place fills, from the counter-based generator (generator.h).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "dispatch.h"
#include "generator.h"
#include "ops/random_attrs.h"
#include "thread_pool.h"

namespace oneflow {
using namespace random_detail;
namespace {

// attrs for the random ops: RandomAttrs (ops/random_attrs.h)
void random_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  using A = RandomAttrs;
  if (!in.empty()) {  // in-place fills
    out.push_back({in[0].sizes().dims(), {}, 0, in[0].dtype(), in[0].device()});
    return;
  }
  const DimVector& size = A::get<"size">(a);
  checked_numel(size, "random");
  const ScalarType dtype = A::get<"dtype">(a);
  const Device device =
      device_from_attrs(A::get<"device_type">(a), A::get<"device_index">(a), "random");
  out.push_back({size, {}, 0, dtype, device});
}

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
  if (!contig) Tensor(t).copy_(dst);
}

void uniform_kernel(const KernelArgs& k) {
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

void normal_kernel(const KernelArgs& k) {
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

void randint_kernel(const KernelArgs& k) {
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

// multinomial: inputs {weights (k) or (rows, k)}; attrs MultinomialAttrs.
// Row r draws with counters offset + r * per_row, two words per uniform double.
int64_t multinomial_draws(int64_t k, int64_t num_samples, bool replacement) {
  return replacement ? num_samples : k;
}

void multinomial_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& w = in[0];
  OF_CHECK(w.dim() == 1 || w.dim() == 2, "[multinomial] prob_dist must be 1 or 2 dim, got shape {}",
           shape_str(w.sizes()));
  OF_CHECK(is_floating_point(w.dtype()),
           "[multinomial] prob_dist must be a floating point tensor, got {}",
           dtype_name(w.dtype()));
  using A = MultinomialAttrs;
  const int64_t k = w.sizes().back(), n = A::get<"num_samples">(a);
  OF_CHECK(k > 0, "[multinomial] prob_dist has no categories (shape {})", shape_str(w.sizes()));
  OF_CHECK(n > 0, "[multinomial] cannot sample n_sample <= 0 samples (got {})", n);
  OF_CHECK(A::get<"replacement">(a) || n <= k,
           "[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without "
           "replacement (n_sample {}, {} categories)",
           n, k);
  DimVector shape;
  if (w.dim() == 2) shape.push_back(w.sizes()[0]);
  shape.push_back(n);
  out.push_back({shape, {}, 0, kInt64, w.device()});
}

void multinomial_kernel(const KernelArgs& args) {
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

Attrs random_attrs(IntArrayRef size, const TensorOptions& o, int64_t numel, double a, double b) {
  GeneratorState s = reserve_random(uint64_t((numel + 3) / 4));
  Device d = o.device();
  return RandomAttrs::make(size.dims(), o.dtype(), int64_t(kCPU), int64_t(-1), int64_t(s.seed),
                           int64_t(s.offset), a, b);
  (void)d;
}

// The op table is built on first use: look the ops up through it, never through the
// registration-time pointers, so rand() works as a program's very first call.

Tensor random_factory(const OpDef& op, IntArrayRef size, const TensorOptions& o, double a,
                      double b) {
  int64_t n = checked_numel(size, op.name.c_str());
  Tensor t = dispatch1(op, {}, random_attrs(size, o, n, a, b));
  if (o.device().is_cuda()) t = t.to(o.device());  // generated on the host (no CUDA RNG yet)
  if (o.requires_grad()) t.set_requires_grad(true);
  return t;
}

}  // namespace

void register_random_ops() {
  register_op({.name = "uniform",
               .traits = kRandom | kFactory,
               .attr_names = RandomAttrs::names(),
               .attr_types = RandomAttrs::types(),
               .infer_meta = random_meta,
               .cpu = uniform_kernel,
               .rng_seed_attr = int(RandomAttrs::index<"seed">())});
  register_op({.name = "normal",
               .traits = kRandom | kFactory,
               .attr_names = RandomAttrs::names(),
               .attr_types = RandomAttrs::types(),
               .infer_meta = random_meta,
               .cpu = normal_kernel,
               .rng_seed_attr = int(RandomAttrs::index<"seed">())});
  register_op({.name = "randint",
               .traits = kRandom | kFactory,
               .attr_names = RandomAttrs::names(),
               .attr_types = RandomAttrs::types(),
               .infer_meta = random_meta,
               .cpu = randint_kernel,
               .rng_seed_attr = int(RandomAttrs::index<"seed">())});
  register_op({.name = "multinomial",
               .traits = kRandom,
               .attr_names = MultinomialAttrs::names(),
               .attr_types = MultinomialAttrs::types(),
               .infer_meta = multinomial_meta,
               .cpu = multinomial_kernel,
               .nondiff_inputs = in(0),
               .rng_seed_attr = int(MultinomialAttrs::index<"seed">())});
}

Tensor rand(IntArrayRef size, TensorOptions o) {
  OF_CHECK(is_floating_point(o.dtype()), "[rand] expected a floating-point dtype, got {}",
           dtype_name(o.dtype()));
  return random_factory(OF_OP("uniform"), size, o, 0.0, 1.0);
}
Tensor randn(IntArrayRef size, TensorOptions o) {
  OF_CHECK(is_floating_point(o.dtype()), "[randn] expected a floating-point dtype, got {}",
           dtype_name(o.dtype()));
  return random_factory(OF_OP("normal"), size, o, 0.0, 1.0);
}
Tensor randint(int64_t high, IntArrayRef size, TensorOptions o) {
  return randint(0, high, size, o);
}
Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions o) {
  OF_CHECK(low < high,
           "[randint] random_ expects 'from' to be less than 'to', but got from={} >= to={}", low,
           high);
  OF_CHECK(o.dtype() != kBool, "[randint] bool dtype is not supported");
  return random_factory(OF_OP("randint"), size, o, double(low), double(high));
}
Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement) {
  OF_CHECK(self.defined(), "[multinomial] input is undefined");
  OF_CHECK(self.dim() == 1 || self.dim() == 2,
           "[multinomial] prob_dist must be 1 or 2 dim, got shape {}", shape_str(self.sizes()));
  const int64_t k = self.sizes().back();
  const int64_t rows = self.dim() == 1 ? 1 : self.sizes()[0];
  const int64_t per_row =
      (multinomial_draws(k, std::max<int64_t>(num_samples, 0), replacement) + 1) / 2;
  Tensor w = self.is_cuda() ? self.cpu() : self;  // sampled on the host (no CUDA RNG yet)
  // The meta check runs before the generator advances (no state change on bad input).
  MetaList probe;
  multinomial_meta({w}, MultinomialAttrs::make(num_samples, replacement, 0, 0), probe);
  GeneratorState st = reserve_random(uint64_t(rows * per_row));
  Tensor r = dispatch1(
      OF_OP("multinomial"), {w.detach()},
      MultinomialAttrs::make(num_samples, replacement, int64_t(st.seed), int64_t(st.offset)));
  return self.is_cuda() ? r.to(self.device()) : r;
}
Tensor Tensor::multinomial(int64_t num_samples, bool replacement) const {
  return oneflow::multinomial(*this, num_samples, replacement);
}

Tensor randperm(int64_t n, TensorOptions o) {
  OF_CHECK(n >= 0, "[randperm] n must be non-negative, got {}", n);
  // Sort random keys: a deterministic permutation from the generator.
  Tensor keys = random_factory(OF_OP("randint"), {n}, TensorOptions(kInt64), 0.0, 9.0e15);
  std::vector<int64_t> k = keys.to_vector<int64_t>();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return k[a] < k[b]; });
  Tensor r = tensor(idx, {}, TensorOptions(kInt64));
  return r.to(o.has_device() ? o.device() : Device(kCPU)).to(o.dtype());
}

Tensor& Tensor::uniform_(double from, double to) {
  OF_CHECK(oneflow::is_floating_point(dtype()),
           "[uniform_] expected a floating-point tensor, got {}", dtype_name(dtype()));
  OF_CHECK(from <= to, "[uniform_] expects from <= to, got from={} to={}", from, to);
  Tensor r = random_factory(OF_OP("uniform"), sizes(), TensorOptions(dtype()), from, to);
  NoGradGuard ng;
  return copy_(r);
}
Tensor& Tensor::normal_(double mean, double std) {
  OF_CHECK(oneflow::is_floating_point(dtype()),
           "[normal_] expected a floating-point tensor, got {}", dtype_name(dtype()));
  OF_CHECK(std >= 0, "[normal_] expects std >= 0.0, got {}", std);
  Tensor r = random_factory(OF_OP("normal"), sizes(), TensorOptions(dtype()), mean, std);
  NoGradGuard ng;
  return copy_(r);
}

}  // namespace oneflow

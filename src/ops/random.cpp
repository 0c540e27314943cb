// Random factories and in-place fills, from the counter-based generator (generator.h): meta,
// registration and public functions. Kernels: cpu/random.cpp.
#include <algorithm>
#include <numeric>

#include "global/rules.h"
#include "cpu/random.h"
#include "dispatch.h"
#include "generator.h"
#include "ops/random_common.h"

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

Attrs random_attrs(IntArrayRef size, const TensorOptions& o, int64_t numel, double a, double b) {
  GeneratorState s = reserve_random(uint64_t((numel + 3) / 4));
  return RandomAttrs::make(size.dims(), o.dtype(), int64_t(kCPU), int64_t(-1), int64_t(s.seed),
                           int64_t(s.offset), a, b);
}

// The op table is built on first use: look the ops up through it, never through the
// registration-time pointers, so rand() works as a program's very first call.

Tensor random_factory(const OpDef& op, IntArrayRef size, const TensorOptions& o, double a,
                      double b) {
  int64_t n = checked_numel(size, op.name.c_str());
  Tensor t = dispatch1(op, {}, random_attrs(size, o, n, a, b));
  // generated on the host and moved, although the CUDA module has uniform, normal and randint
  // kernels (src/cuda/factory.cpp), which run only for these ops dispatched with a CUDA device
  if (o.device().is_cuda()) t = t.to(o.device());
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
               .cpu = cpu::uniform,
               .rng_seed_attr = int(RandomAttrs::index<"seed">())});
  register_op({.name = "normal",
               .traits = kRandom | kFactory,
               .attr_names = RandomAttrs::names(),
               .attr_types = RandomAttrs::types(),
               .infer_meta = random_meta,
               .cpu = cpu::normal,
               .rng_seed_attr = int(RandomAttrs::index<"seed">())});
  register_op({.name = "randint",
               .traits = kRandom | kFactory,
               .attr_names = RandomAttrs::names(),
               .attr_types = RandomAttrs::types(),
               .infer_meta = random_meta,
               .cpu = cpu::randint,
               .rng_seed_attr = int(RandomAttrs::index<"seed">())});
  register_op({.name = "multinomial",
               .traits = kRandom,
               .attr_names = MultinomialAttrs::names(),
               .attr_types = MultinomialAttrs::types(),
               .infer_meta = multinomial_meta,
               .cpu = cpu::multinomial,
               .nondiff_inputs = in(0),
               .sbp_rule = &sbp_rules::kWholeValues,
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

void manual_seed(uint64_t seed) { set_random_state({seed, 0}); }

}  // namespace oneflow

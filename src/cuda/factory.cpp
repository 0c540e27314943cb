// factory.cpp: host side of the CUDA random fills, dropout and index factories (random.cu,
// NOTE [CUDA random numbers] in random.h), with the CPU kernels' attrs and checks.
#include <cmath>

#include "cuda/cuda_check.h"
#include "cuda/module.h"
#include "cuda/random.h"
#include "ops/core_attrs.h"
#include "ops/nn_attrs.h"
#include "ops/random_attrs.h"

namespace oneflow::cuda_module {
namespace {

// the ops' attribute schemas (ops/random_attrs.h, ops/core_attrs.h)
using core_detail::ArangeAttrs;
using core_detail::EyeAttrs;
using core_detail::LinspaceAttrs;
using random_detail::RandomAttrs;

// Runs fill(dense) into t, through a dense temporary when t is not contiguous.
template <class F> void into_dense(const Tensor& t, const char* op, F&& fill) {
  OF_CHECK(t.is_cuda(), "[{}] cuda: the output is on {}", op, t.device().str());
  if (t.numel() == 0) return;
  const int device = resolve_device(t.device().index());
  DeviceGuard guard(device);
  if (t.is_contiguous()) {
    fill(t.impl()->raw_data(), current_stream_of(device));
    return;
  }
  Tensor tmp = make_empty(t.sizes(), t.dtype(), t.device());
  fill(tmp.impl()->raw_data(), current_stream_of(device));
  kernel_copy_into(t, tmp);
}

// attrs RandomAttrs (ops/random_attrs.h)
void random_fill(const KernelArgs& k, RandKind kind, const char* op) {
  using A = RandomAttrs;
  const Attrs& a = k.attrs;
  const Tensor& t = k.outputs[0];
  RandParams p;
  p.kind = kind;
  p.numel = t.numel();
  p.dtype = t.dtype();
  p.seed = uint64_t(A::get<"seed">(a));
  p.offset = uint64_t(A::get<"offset">(a));
  p.a = A::get<"a">(a);
  p.b = A::get<"b">(a);
  if (kind == RandKind::randint) {
    OF_CHECK(std::abs(p.a) < 0x1p62 && std::abs(p.b) < 0x1p62 && p.a < p.b,
             "[randint] needs finite bounds low < high within +-2^62, got low={} high={}", p.a,
             p.b);
    p.lo = int64_t(p.a);
    const int64_t hi = int64_t(p.b);
    OF_CHECK(p.lo < hi, "[randint] low {} and high {} leave no integer to draw", p.a, p.b);
    p.range = uint64_t(hi - p.lo);
  }
  p.philox = graph_rng();
  into_dense(t, op, [&](void* dst, cudaStream_t s) {
    p.out = dst;
    check_launch(launch_random(p, s), op, p.dtype);
  });
}
void uniform_kernel(const KernelArgs& k) { random_fill(k, RandKind::uniform, "uniform"); }
void normal_kernel(const KernelArgs& k) { random_fill(k, RandKind::normal, "normal"); }
void randint_kernel(const KernelArgs& k) { random_fill(k, RandKind::randint, "randint"); }

// inputs x; attrs {p, seed, offset}; outputs y, keep mask
void dropout_kernel(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  using DA = nn_detail::DropoutAttrs;
  const double prob = DA::get<"p">(k.attrs);
  DropoutParams p;
  p.numel = x.numel();
  p.x = x.impl()->raw_data();
  p.dtype = x.dtype();
  p.seed = uint64_t(DA::get<"seed">(k.attrs));
  p.offset = uint64_t(DA::get<"offset">(k.attrs));
  p.threshold = uint32_t(std::ceil(prob * 16777216.0));
  p.scale = prob >= 1.0 ? 0.0 : 1.0 / (1.0 - prob);
  p.philox = graph_rng();
  OF_CHECK(k.outputs[0].is_contiguous() && k.outputs[1].is_contiguous(),
           "[dropout] cuda: expected dense outputs");
  p.y = k.outputs[0].impl()->raw_data();
  p.mask = static_cast<bool*>(k.outputs[1].impl()->raw_data());
  if (p.numel == 0) return;
  const int device = resolve_device(x.device().index());
  DeviceGuard guard(device);
  check_launch(launch_dropout(p, current_stream_of(device)), "dropout", p.dtype);
}

void factory(const KernelArgs& k, FactoryParams p, const char* op) {
  const Tensor& t = k.outputs[0];
  p.numel = t.numel();
  p.dtype = t.dtype();
  into_dense(t, op, [&](void* dst, cudaStream_t s) {
    p.out = dst;
    check_launch(launch_factory(p, s), op, p.dtype);
  });
}
// arange, linspace, eye: ArangeAttrs, LinspaceAttrs, EyeAttrs (ops/core_attrs.h)
void arange_kernel(const KernelArgs& k) {
  FactoryParams p;
  p.kind = IndexFactory::arange;
  p.a = ArangeAttrs::get<"start">(k.attrs);
  p.step = ArangeAttrs::get<"step">(k.attrs);
  factory(k, p, "arange");
}
void linspace_kernel(const KernelArgs& k) {
  FactoryParams p;
  p.kind = IndexFactory::linspace;
  p.a = LinspaceAttrs::get<"start">(k.attrs);
  p.b = LinspaceAttrs::get<"end">(k.attrs);
  const int64_t n = LinspaceAttrs::get<"steps">(k.attrs);
  p.step = n > 1 ? (p.b - p.a) / double(n - 1) : 0;
  factory(k, p, "linspace");
}
void eye_kernel(const KernelArgs& k) {
  FactoryParams p;
  p.kind = IndexFactory::eye;
  p.cols = EyeAttrs::get<"m">(k.attrs);
  factory(k, p, "eye");
}

}  // namespace

Tensor dropout_multiplier(IntArrayRef sizes, ScalarType dtype, Device device, double p,
                          uint64_t seed, uint64_t offset) {
  const Tensor ones = make_empty(sizes, dtype, device);
  kernel_fill(ones, 1.0);
  TensorList outs{make_empty(sizes, dtype, device), make_empty(sizes, kBool, device)};
  const TensorList ins{ones};
  const Attrs a = nn_detail::DropoutAttrs::make(p, int64_t(seed), int64_t(offset));
  dropout_kernel(KernelArgs{ins, a, outs});
  return outs[0];
}

void register_factory_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("uniform", uniform_kernel);
  core.set_cuda_kernel("normal", normal_kernel);
  core.set_cuda_kernel("randint", randint_kernel);
  core.set_cuda_kernel("dropout", dropout_kernel);
  core.set_cuda_kernel("arange", arange_kernel);
  core.set_cuda_kernel("linspace", linspace_kernel);
  core.set_cuda_kernel("eye", eye_kernel);
}

}  // namespace oneflow::cuda_module

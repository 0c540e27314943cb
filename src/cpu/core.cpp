// core.cpp: the CPU kernels of the core ops (copy, copy_, fill_, full, arange, linspace, eye);
// their meta, VJPs and registration are in ops/core_ops.cpp (to_device's kernel too: it serves
// both devices).
#include "cpu/core.h"

#include <algorithm>
#include <type_traits>

#include "cpu/loops.h"
#include "kernel_support.h"
#include "ops/core_attrs.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace core_detail;
namespace {

void convert_cpu(const Tensor& dst, const Tensor& src) {
  dispatch_dtype(dst.dtype(), [&](auto o) {
    using O = decltype(o);
    dispatch_dtype(src.dtype(), [&](auto i) {
      using I = decltype(i);
      if constexpr (std::is_same_v<O, bool>) {
        cpu::cpu_kernel<O, I>(dst, {&src}, [](compute_t<I> v) { return v != compute_t<I>(0); });
      } else {
        cpu::cpu_kernel<O, I>(dst, {&src},
                              [](compute_t<I> v) { return saturate_cast<compute_t<O>>(v); });
      }
    });
  });
}
void fill_cpu(const Tensor& t, const Scalar& v) {
  dispatch_dtype(t.dtype(), [&](auto z) {
    using T = decltype(z);
    const T val = T(v.to<compute_t<T>>());
    if (t.is_contiguous()) {
      T* p = static_cast<T*>(t.data_ptr());
      parallel_for(0, t.numel(), kParallelGrain,
                   [&](int64_t b, int64_t e) { std::fill(p + b, p + e, val); });
    } else {
      cpu::cpu_kernel<T>(t, {}, [&]() { return compute_t<T>(val); });
    }
  });
}

}  // namespace

// ---- copy (cast / contiguous / clone), copy_ (self <- src)
void copy(const KernelArgs& k) { convert_cpu(k.outputs[0], k.inputs[0]); }
void copy_(const KernelArgs& k) { convert_cpu(k.outputs[0], k.inputs[1]); }

// ---- fill_, full
void fill_(const KernelArgs& k) { fill_cpu(k.outputs[0], FillAttrs::get<"value">(k.attrs)); }
void full(const KernelArgs& k) { fill_cpu(k.outputs[0], FullAttrs::get<"value">(k.attrs)); }

// ---- arange, linspace, eye
void arange(const KernelArgs& k) {
  const Tensor& t = k.outputs[0];
  double start = ArangeAttrs::get<"start">(k.attrs), step = ArangeAttrs::get<"step">(k.attrs);
  dispatch_dtype(t.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = T(saturate_cast<compute_t<T>>(start + double(i) * step));
  });
}
void linspace(const KernelArgs& k) {
  const Tensor& t = k.outputs[0];
  using A = LinspaceAttrs;
  double start = A::get<"start">(k.attrs), end = A::get<"end">(k.attrs);
  int64_t n = A::get<"steps">(k.attrs);
  double step = n > 1 ? (end - start) / double(n - 1) : 0;
  dispatch_dtype(t.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(t.data_ptr());
    // Symmetric evaluation (as PyTorch): the second half counts back from `end`.
    for (int64_t i = 0; i < n; ++i) {
      double v = i < n / 2 ? start + step * double(i) : end - step * double(n - 1 - i);
      p[i] = T(saturate_cast<compute_t<T>>(v));
    }
  });
}
void eye(const KernelArgs& k) {
  const Tensor& t = k.outputs[0];
  fill_cpu(t, 0);
  int64_t n = t.size(0), m = t.size(1);
  dispatch_dtype(t.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = T(compute_t<T>(1));
  });
}

}  // namespace oneflow::cpu

// elementwise.cpp: the CPU kernels of the elementwise ops with attributes (gelu, pow_scalar,
// clamp) and of where; the table rows' kernels are cpu/elementwise.h's templates, the ops
// themselves are in ops/unary.cpp and ops/binary.cpp.
#include "cpu/elementwise.h"

#include <cmath>
#include <type_traits>

#include "ops/elementwise_attrs.h"
#include "thread_pool.h"

namespace oneflow::cpu {

void gelu(const KernelArgs& k) {
  if (elem_attrs::GeluAttrs::get<"approximate">(k.attrs) == "tanh")
    unary_kernel_float<fn::GeluTanh>(k);
  else unary_kernel_float<fn::GeluErf>(k);
}

void pow_scalar(const KernelArgs& k) {
  const double e = elem_attrs::PowScalarAttrs::get<"exponent">(k.attrs);
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>) {
      if (e == 2) {
        cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, [](C x) { return x * x; });
      } else if (e == 0.5) {
        cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, [](C x) { return std::sqrt(x); });
      } else {
        const C ce = C(e);
        cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, [ce](C x) { return std::pow(x, ce); });
      }
    } else {
      const C ce = saturate_cast<C>(e);  // an attribute: any double
      cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, [ce](C x) { return fn::Pow{}(x, ce); });
    }
  });
}
void clamp(const KernelArgs& k) {
  using A = elem_attrs::ClampAttrs;
  const Attrs& a = k.attrs;
  const bool has_lo = A::get<"has_min">(a), has_hi = A::get<"has_max">(a);
  const double lo = A::get<"min">(a), hi = A::get<"max">(a);
  dispatch_dtype(k.inputs[0].dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    // bounds are doubles (a loaded graph's: any value); into an integer type they saturate
    const C l = has_lo ? saturate_cast<C>(lo) : C(0), h = has_hi ? saturate_cast<C>(hi) : C(0);
    cpu_kernel<T, T>(k.outputs[0], {&k.inputs[0]}, [=](C x) {
      if constexpr (std::is_floating_point_v<C>) {
        if (x != x) return x;
      }
      C r = x;
      if (has_lo && r < l) r = l;
      if (has_hi && r > h) r = h;
      return r;
    });
  });
}
void where(const KernelArgs& k) {
  const Tensor &cond = k.inputs[0], &x = k.inputs[1], &y = k.inputs[2], &out = k.outputs[0];
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    // dense condition and operands, one of them possibly a single value (relu's and dropout's
    // gradients: where(mask, g, 0)): plain loops of selects, which vectorize; the general
    // engine walks a broadcast operand element by element
    const int64_t n = out.numel();
    auto dense = [&](const Tensor& t) { return t.is_contiguous() && t.numel() == n; };
    if (out.is_contiguous() && dense(cond) && (dense(x) || x.numel() == 1) &&
        (dense(y) || y.numel() == 1)) {
      auto pick = [](uint8_t c, T u, T v) { return bit_select(c != 0, u, v); };
      const uint8_t* cp = reinterpret_cast<const uint8_t*>(cond.data_ptr<bool>());
      const T* xp = static_cast<const T*>(x.data_ptr());
      const T* yp = static_cast<const T*>(y.data_ptr());
      T* op = static_cast<T*>(out.data_ptr());
      const bool xd = dense(x), yd = dense(y);
      parallel_for(0, n, kParallelGrain, [=](int64_t b, int64_t e) {
        const uint8_t* __restrict c = cp;
        const T* __restrict px = xp;
        const T* __restrict py = yp;
        T* __restrict o = op;
        if (xd && yd) {
          for (int64_t i = b; i < e; ++i) o[i] = pick(c[i], px[i], py[i]);
        } else if (xd) {
          const T v = *py;
          for (int64_t i = b; i < e; ++i) o[i] = pick(c[i], px[i], v);
        } else if (yd) {
          const T u = *px;
          for (int64_t i = b; i < e; ++i) o[i] = pick(c[i], u, py[i]);
        } else {
          const T u = *px, v = *py;
          for (int64_t i = b; i < e; ++i) o[i] = pick(c[i], u, v);
        }
      });
      return;
    }
    cpu_kernel<T, bool, T, T>(out, {&cond, &x, &y},
                              [](bool cc, C xx, C yy) { return cc ? xx : yy; });
  });
}

}  // namespace oneflow::cpu

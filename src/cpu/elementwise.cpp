// elementwise.cpp: the CPU kernels of the elementwise ops with attributes (gelu, pow_scalar,
// clamp) and of where; the table rows' kernels are cpu/elementwise.h's templates, the ops
// themselves are in ops/unary.cpp and ops/binary.cpp.
#include "cpu/elementwise.h"

#include <cmath>
#include <type_traits>

#include "ops/elementwise_attrs.h"
#include "thread_pool.h"

namespace oneflow::cpu {

namespace {
// an activation's epilogue form: the loop cpu_kernel runs over a contiguous float32 tensor.
// Built for this CPU's AVX-512 (-march=native), it runs 16 lanes at a time (GCC's default for
// these cores is 8): the same operations per element as the op's own loop, so the same bits
// (NOTE [GEMM epilogues]); GELU's epilogue cost 1.5 ns a value on 8 lanes.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define OF_ACT_ROWS_TARGET __attribute__((target("prefer-vector-width=512")))
#else
#define OF_ACT_ROWS_TARGET
#endif
template <class F> OF_ACT_ROWS_TARGET void act_rows(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = F{}(p[i]);
}
template <class F> void act_tensor(const Tensor& t) {
  dispatch_float(t.dtype(), "activation", [&](auto z) {
    using T = decltype(z);
    cpu_kernel<T, T>(t, {&t}, F{});
  });
}
struct Act {
  const char* act;
  ActF32 f32;
  void (*tensor)(const Tensor&);
};
constexpr Act kActs[] = {
    {"relu", act_rows<fn::Relu>, act_tensor<fn::Relu>},
    {"gelu", act_rows<fn::GeluErf>, act_tensor<fn::GeluErf>},
    {"gelu_tanh", act_rows<fn::GeluTanh>, act_tensor<fn::GeluTanh>},
    {"silu", act_rows<fn::Silu>, act_tensor<fn::Silu>},
    {"tanh", act_rows<fn::Tanh>, act_tensor<fn::Tanh>},
};
const Act* find_act(std::string_view act) {
  for (const Act& e : kActs)
    if (act == e.act) return &e;
  return nullptr;
}
}  // namespace

ActF32 act_f32(std::string_view act) {
  const Act* e = find_act(act);
  return e ? e->f32 : nullptr;
}
void apply_act(std::string_view act, const Tensor& t) {
  const Act* e = find_act(act);
  OF_CHECK(e != nullptr, "[linear_act] unknown activation '{}'", act);
  e->tensor(t);
}

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

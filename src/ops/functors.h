// functors.h (internal): elementwise math, defined once for CPU loops, CUDA kernels and fusion.
// NOTE [Fast float math]: exp and erf for float use branch-free polynomial versions (Cephes
// style, ~1-2 ulp) so loops vectorize without -ffast-math; double uses <cmath>.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "oneflow/dtype.h"
#include "ops/elem_kind.h"

// Host: always inline, so that loops over these functors vectorize (a call per element
// otherwise; the library is built with -fPIC and GCC's size heuristics keep fast_erf out).
#if defined(__CUDACC__)
#define OF_FI  // device functions of one translation unit inline anyway (__forceinline__ would
               // repeat the `inline` every use writes)
#else
#define OF_FI __attribute__((always_inline))
#endif

namespace oneflow::fn {

OF_HD OF_FI inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// NOTE [exp underflow]: below lo, where exp(x) leaves the normal floats, the result is 0 and
// the lanes compute exp(lo) instead: no lane ever makes a subnormal, whose microcode assist
// costs ~100 cycles per vector instruction on Intel cores (a causal mask's -inf scores did it
// for half of every attention row). Subnormal results are flushed, as with FTZ.
OF_HD OF_FI inline float fast_exp(float x) {
  // exp(x) = 2^n * exp(r), r = x - n ln2 in [-ln2/2, ln2/2]
  const float hi = 88.3762626647949f, lo = -87.33f;  // exp(lo) = 1.18e-38, normal with margin
  float xc = x > hi ? hi : (x < lo ? lo : x);
  xc = x != x ? 0.0f : xc;  // NaN: int32_t(n) below would be undefined (the result is x anyway)
  float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * r * r + r + 1.0f;
  float scale = bits_to_float(uint32_t(int32_t(n) + 127) << 23);
  float res = e * scale;
  res = x > hi ? INFINITY : res;
  res = x < lo ? 0.0f : res;
  return x != x ? x : res;
}

// erf for float: erf(x) = x P(x^2) / Q(x^2) on |x| <= 4 (clamped beyond: |erf| = 1 to float
// precision there), relative error 7.4e-8 before rounding (a weighted least-squares rational
// fit, refit by tools/fit_erf.py). One division and 11 FMAs: vectorizes to a few cycles/element.
OF_HD OF_FI inline float fast_erf(float x) {
  const float xc = x > 4.0f ? 4.0f : (x < -4.0f ? -4.0f : x);  // NaN passes through
  const float t = xc * xc;
  float p = 1.9099351469710604e-8f;
  p = p * t + -1.9219706663931933e-6f;
  p = p * t + 1.4336978827176052e-4f;
  p = p * t + 3.8400063095284575e-3f;
  p = p * t + 5.1057390780325186e-2f;
  p = p * t + 2.0369675063962786e-1f;
  p = p * t + 1.1283791438525781f;
  float q = 9.8361016206786075e-4f;
  q = q * t + 1.4656610589774167e-2f;
  q = q * t + 1.1654084969335883e-1f;
  q = q * t + 5.138535974371896e-1f;
  q = q * t + 1.0f;
  return xc * p / q;
}

template <class T> OF_HD OF_FI inline T exp_(T x) {
  if constexpr (std::is_same_v<T, float>) return fast_exp(x);
  else return std::exp(x);
}
template <class T> OF_HD OF_FI inline T erf_(T x) {
  if constexpr (std::is_same_v<T, float>) return fast_erf(x);
  else return std::erf(x);
}
template <class T> OF_HD OF_FI inline T sigmoid_(T x) { return T(1) / (T(1) + exp_(-x)); }
template <class T> OF_HD OF_FI inline T tanh_(T x) {
  if constexpr (std::is_same_v<T, float>) {
    // tanh = sign * (1 - 2 / (exp(2|x|) + 1)); small |x| uses the odd series (no cancellation)
    float ax = std::fabs(x);
    float e = fast_exp(2.0f * ax);
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0 ? -big : big;
    float x2 = x * x;
    float small =
        x * (1.0f + x2 * (-0.333333333f +
                          x2 * (0.133333333f + x2 * (-0.0539682540f + x2 * 0.0218694885f))));
    float r = ax < 0.25f ? small : big;
    return x != x ? x : r;
  } else {
    return std::tanh(x);
  }
}

// NOTE [Integer wrap]: integer +, -, * (and neg, abs, square, pow, INT_MIN / -1) wrap in
// two's complement, computed in the unsigned type, as libtorch's do in practice and as sums
// do (reduce.cpp): signed overflow is undefined behaviour (fuzz_ops: int64 edge values).
template <class T> inline constexpr bool kWraps = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T> OF_HD OF_FI T wrap_add(T a, T b) {
  if constexpr (kWraps<T>) return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else return a + b;
}
template <class T> OF_HD OF_FI T wrap_sub(T a, T b) {
  if constexpr (kWraps<T>) return T(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b));
  else return a - b;
}
template <class T> OF_HD OF_FI T wrap_mul(T a, T b) {
  if constexpr (kWraps<T>) return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
  else return a * b;
}
template <class T> OF_HD OF_FI T wrap_neg(T x) { return wrap_sub(T(0), x); }
template <class T> OF_HD OF_FI bool is_minus_one(T x) {
  if constexpr (std::is_signed_v<T>) return x == T(-1);
  else return false;
}

// A row functor declares its kind (NOTE [Elementwise kinds] in ops/elem_kind.h).
#define OF_FN1(Name, Kind, expr)                                            \
  struct Name {                                                             \
    static constexpr ElemKind kind = ElemKind::Kind;                        \
    template <class T> OF_HD OF_FI T operator()(T x) const { return expr; } \
  };
#define OF_FN2(Name, Kind, expr)                                                 \
  struct Name {                                                                  \
    static constexpr ElemKind kind = ElemKind::Kind;                             \
    template <class T> OF_HD OF_FI T operator()(T a, T b) const { return expr; } \
  };

// ---- unary
OF_FN1(Neg, kAll, T(wrap_neg(x)))
struct Abs {
  static constexpr ElemKind kind = ElemKind::kAll;
  template <class T> OF_HD OF_FI T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else return x < T(0) ? T(wrap_neg(x)) : x;
  }
};
struct Sign {
  static constexpr ElemKind kind = ElemKind::kAll;
  template <class T> OF_HD OF_FI T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return T(T(0) < x);
    else return T((T(0) < x) - (x < T(0)));
  }
};
OF_FN1(Exp, kFloat, exp_(x))
OF_FN1(Exp2, kFloat, std::exp2(x))
OF_FN1(Log, kFloat, std::log(x))
OF_FN1(Log2, kFloat, std::log2(x))
OF_FN1(Log1p, kFloat, std::log1p(x))
OF_FN1(Expm1, kFloat, std::expm1(x))
OF_FN1(Sqrt, kFloat, std::sqrt(x))
OF_FN1(Rsqrt, kFloat, T(1) / std::sqrt(x))
OF_FN1(Reciprocal, kFloat, T(1) / x)
OF_FN1(Square, kAll, wrap_mul(x, x))
OF_FN1(Sin, kFloat, std::sin(x))
OF_FN1(Cos, kFloat, std::cos(x))
OF_FN1(Tan, kFloat, std::tan(x))
OF_FN1(Tanh, kFloat, tanh_(x))
OF_FN1(Sigmoid, kFloat, sigmoid_(x))
OF_FN1(Relu, kAll, x > T(0) ? x : T(0))
OF_FN1(Silu, kFloat, x* sigmoid_(x))
OF_FN1(Erf, kFloat, erf_(x))
// integers are their own floor/ceil/round/trunc (through double, int64 extremes would not
// convert back: fuzz_ops)
OF_FN1(Floor, kAll, std::is_integral_v<T> ? x : T(std::floor(x)))
OF_FN1(Ceil, kAll, std::is_integral_v<T> ? x : T(std::ceil(x)))
OF_FN1(Round, kAll, std::is_integral_v<T> ? x : T(std::nearbyint(x)))
OF_FN1(Trunc, kAll, std::is_integral_v<T> ? x : T(std::trunc(x)))
OF_FN1(GeluErf, kFloat, T(0.5) * x * (T(1) + erf_(x * T(0.70710678118654752440))))
OF_FN1(GeluTanh, kFloat,
       T(0.5) * x * (T(1) + tanh_(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x))))
struct IsNan {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T x) const { return x != x; }
};
struct IsInf {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::isinf(x);
    else return false;
  }
};
struct LogicalNot {
  static constexpr ElemKind kind = ElemKind::kLogical;
  template <class T> OF_HD bool operator()(T x) const { return !bool(x); }
};

// ---- binary
OF_FN2(Add, kAll, wrap_add(a, b))
OF_FN2(Sub, kAll, wrap_sub(a, b))
OF_FN2(Mul, kAll, wrap_mul(a, b))
OF_FN2(Div, kFloat, a / b)
// Integer division by -1 is negation: INT_MIN / -1 (and INT_MIN % -1) overflow otherwise.
// Division by zero is refused before the kernels (int_safe_kernel).
struct DivTrunc {
  static constexpr ElemKind kind = ElemKind::kIntUnsafe;
  template <class T> OF_HD OF_FI T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return is_minus_one(b) ? wrap_neg(a) : T(a / b);
    else return std::trunc(a / b);
  }
};
struct DivFloor {
  static constexpr ElemKind kind = ElemKind::kIntUnsafe;
  template <class T> OF_HD OF_FI T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (is_minus_one(b)) return wrap_neg(a);
      T q = T(a / b);
      return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
    } else {
      return std::floor(a / b);
    }
  }
};
struct Maximum {
  static constexpr ElemKind kind = ElemKind::kAll;
  template <class T> OF_HD OF_FI T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return a + b;
    }
    return a > b ? a : b;
  }
};
struct Minimum {
  static constexpr ElemKind kind = ElemKind::kAll;
  template <class T> OF_HD OF_FI T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return a + b;
    }
    return a < b ? a : b;
  }
};
struct Fmod {
  static constexpr ElemKind kind = ElemKind::kIntUnsafe;
  template <class T> OF_HD OF_FI T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return is_minus_one(b) ? T(0) : T(a % b);
    else return std::fmod(a, b);
  }
};
struct Remainder {
  static constexpr ElemKind kind = ElemKind::kIntUnsafe;
  template <class T> OF_HD OF_FI T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      T r = is_minus_one(b) ? T(0) : T(a % b);
      return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    } else {
      T r = std::fmod(a, b);
      return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
    }
  }
};
OF_FN2(Atan2, kFloat, std::atan2(a, b))
struct Pow {
  static constexpr ElemKind kind = ElemKind::kAll;
  template <class T> OF_HD OF_FI T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>)
        if (b < 0) return a == 1 ? T(1) : (a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0));
      T r = 1;
      T base = a;
      auto e = b;
      while (e) {
        if (e & 1) r = wrap_mul(r, base);
        base = wrap_mul(base, base);
        e >>= 1;
      }
      return r;
    } else {
      return std::pow(a, b);
    }
  }
};
struct Eq {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T a, T b) const { return a == b; }
};
struct Ne {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T a, T b) const { return a != b; }
};
struct Lt {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T a, T b) const { return a < b; }
};
struct Le {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T a, T b) const { return a <= b; }
};
struct Gt {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T a, T b) const { return a > b; }
};
struct Ge {
  static constexpr ElemKind kind = ElemKind::kCompare;
  template <class T> OF_HD bool operator()(T a, T b) const { return a >= b; }
};
struct LogicalAnd {
  static constexpr ElemKind kind = ElemKind::kLogical;
  template <class T> OF_HD bool operator()(T a, T b) const { return bool(a) && bool(b); }
};
struct LogicalOr {
  static constexpr ElemKind kind = ElemKind::kLogical;
  template <class T> OF_HD bool operator()(T a, T b) const { return bool(a) || bool(b); }
};
struct LogicalXor {
  static constexpr ElemKind kind = ElemKind::kLogical;
  template <class T> OF_HD bool operator()(T a, T b) const { return bool(a) != bool(b); }
};

#undef OF_FN1
#undef OF_FN2

}  // namespace oneflow::fn

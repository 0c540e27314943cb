// fusion_device.h (internal, device code only): the per-element pieces of the CUDA kernels that
// are not functors of ops/functors.h — the dtype conversion of "copy"/"copy_" and the scalar-attr
// ops pow_scalar and clamp — for the generated fused kernels (trace/fusion_codegen.cpp embeds
// this file as text, under the name trace/fusion_device.h the generated source includes; NOTE
// [NVRTC prelude]). The unfused kernels use these very definitions (strided_copy.cu: `convert`;
// elementwise.cu: PowScalarFn, ClampFn), so both compute the same.
// `keep` is NOTE [Fused rounding] (fusion_codegen.cpp).
#pragma once
#include <type_traits>

#include "oneflow/dtype.h"
#include "ops/functors.h"

#if defined(__CUDACC__)
namespace oneflow::fused {

template <class T>
inline constexpr bool is_half_like_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Same rules as the CPU casts: bool is "!= 0"; the 16-bit floats go through float.
template <class To, class From> __device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(v) != compute_t<From>(0);
  } else if constexpr (is_half_like_v<To> || is_half_like_v<From>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

struct PowScalarFn {
  double e;
  template <class C> __device__ C operator()(C x) const {
    if constexpr (is_floating_v<C>) {
      if (e == 2) return x * x;
      if (e == 0.5) return ::sqrt(x);
      return ::pow(x, C(e));
    } else {
      return fn::Pow{}(x, saturate_cast<C>(e));
    }
  }
};

struct ClampFn {
  bool has_lo, has_hi;
  double lo, hi;
  template <class C> __device__ C operator()(C x) const {
    if constexpr (is_floating_v<C>) {
      if (x != x) return x;
    }
    const C l = has_lo ? saturate_cast<C>(lo) : C(0), h = has_hi ? saturate_cast<C>(hi) : C(0);
    C r = x;
    if (has_lo && r < l) r = l;
    if (has_hi && r > h) r = h;
    return r;
  }
};

// A double attr from its bits (exact for every value, NaN payloads included).
__device__ __forceinline__ double f64(long long bits) { return __longlong_as_double(bits); }

// NOTE [Fused rounding]: a float or double that one member hands to the next goes through an
// integer op with `zero` (a kernel parameter the launcher sets to 0). Neither NVVM nor ptxas can
// see through it, so no multiply of one member is contracted into an add of the next (an FMA
// would round once where the unfused kernels round twice, at the store and the load between
// them). The functor bodies themselves are contracted as nvcc contracts them: same code, same
// flags.
__device__ __forceinline__ float keep(float x, long zero) {
  return __int_as_float(__float_as_int(x) ^ int(zero));
}
__device__ __forceinline__ double keep(double x, long zero) {
  return __longlong_as_double(__double_as_longlong(x) ^ zero);
}
template <class T> __device__ __forceinline__ T keep(T x, long) { return x; }

}  // namespace oneflow::fused
#endif  // __CUDACC__

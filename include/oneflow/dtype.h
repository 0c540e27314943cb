// dtype.h: scalar types, half-precision storage types and type promotion.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include "oneflow/error.h"

#if defined(__CUDACC__)
#define OF_HD __host__ __device__
#else
#define OF_HD
#endif

namespace oneflow {

enum class ScalarType : int8_t { Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8, Bool };
inline constexpr int kNumScalarTypes = 8;

inline constexpr ScalarType kFloat32 = ScalarType::Float32, kFloat = ScalarType::Float32;
inline constexpr ScalarType kFloat64 = ScalarType::Float64, kDouble = ScalarType::Float64;
inline constexpr ScalarType kFloat16 = ScalarType::Float16, kHalf = ScalarType::Float16;
inline constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
inline constexpr ScalarType kInt32 = ScalarType::Int32, kInt = ScalarType::Int32;
inline constexpr ScalarType kInt64 = ScalarType::Int64, kLong = ScalarType::Int64;
inline constexpr ScalarType kUInt8 = ScalarType::UInt8, kByte = ScalarType::UInt8;
inline constexpr ScalarType kBool = ScalarType::Bool;
// libtorch's short spellings (torch/types.h), and kBF16 beside them. There is no 8- or 16-bit
// signed integer dtype, so kI8/kChar/kInt8 and kI16/kShort/kInt16 are not defined
// (docs/PORTING.md).
inline constexpr ScalarType kU8 = kUInt8, kI32 = kInt32, kI64 = kInt64;
inline constexpr ScalarType kF16 = kFloat16, kBF16 = kBFloat16, kF32 = kFloat32, kF64 = kFloat64;

// IEEE binary16 stored as bits; arithmetic happens in float.
struct Half {
  uint16_t x = 0;
  Half() = default;
  OF_HD Half(float f) : x(from_float(f)) {}
  OF_HD operator float() const { return to_float(x); }
  OF_HD static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) return uint16_t(sign | (absu > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (absu >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow to inf
    if (absu < 0x38800000u) {                                  // subnormal or zero
      float af;
      std::memcpy(&af, &absu, 4);
      float scaled = af * 16777216.0f;  // 2^24: subnormal units
      uint32_t m = uint32_t(scaled);
      float rem = scaled - float(m);
      if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
      return uint16_t(sign | m);
    }
    uint32_t mant = absu & 0x7fffffu;
    uint32_t exp = (absu >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  OF_HD static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
      float f = float(mant) * 5.9604644775390625e-08f;  // 2^-24
      std::memcpy(&u, &f, 4);
      u |= sign;
    } else if (exp == 31) {
      u = sign | 0x7f800000u | (mant << 13);
    } else {
      u = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// bfloat16: the top 16 bits of a float, rounded to nearest even.
struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  OF_HD BFloat16(float f) : x(from_float(f)) {}
  OF_HD operator float() const { return to_float(x); }
  OF_HD static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
  OF_HD static float to_float(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <class T> struct CppTypeToScalar;
#define OF_MAP_TYPE(T, S) \
  template <> struct CppTypeToScalar<T> { static constexpr ScalarType value = S; };
OF_MAP_TYPE(float, kFloat32)
OF_MAP_TYPE(double, kFloat64)
OF_MAP_TYPE(Half, kFloat16)
OF_MAP_TYPE(BFloat16, kBFloat16)
OF_MAP_TYPE(int32_t, kInt32)
OF_MAP_TYPE(int64_t, kInt64)
OF_MAP_TYPE(uint8_t, kUInt8)
OF_MAP_TYPE(bool, kBool)
#undef OF_MAP_TYPE
template <class T> inline constexpr ScalarType scalar_type_of = CppTypeToScalar<T>::value;

// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
template <class T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <class T> using compute_t = typename ComputeType<T>::type;

template <class T>
inline constexpr bool is_floating_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

constexpr size_t itemsize(ScalarType t) {
  switch (t) {
    case kFloat32:
    case kInt32:
      return 4;
    case kFloat64:
    case kInt64:
      return 8;
    case kFloat16:
    case kBFloat16:
      return 2;
    default:
      return 1;
  }
}
constexpr bool is_floating_point(ScalarType t) {
  return t == kFloat32 || t == kFloat64 || t == kFloat16 || t == kBFloat16;
}
constexpr bool is_integral(ScalarType t, bool include_bool = false) {
  return t == kInt32 || t == kInt64 || t == kUInt8 || (include_bool && t == kBool);
}
std::string_view dtype_name(ScalarType t);  // "float32", "int64", ...

// A conversion defined for every value: floating point to an integer type gives 0 for NaN
// and saturates out of range (a plain cast of those is undefined behaviour); else a cast.
template <class To, class From> OF_HD constexpr To saturate_cast(From v) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> &&
                !std::is_same_v<To, bool>) {
    if (v != v) return To(0);
    // the limits as doubles: exact for int32 and below; int64's max rounds up to 2^63
    if (double(v) <= double(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (double(v) >= double(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
  }
  return To(v);
}

// PyTorch's promotion lattice for two tensor dtypes of the same category.
ScalarType promote_types(ScalarType a, ScalarType b);
// Whether a value of `from` may be written into `to` by an in-place op (no float->int etc).
bool can_cast(ScalarType from, ScalarType to);

// Calls f(T{}) with T the C++ type of `t`. The op name goes into the error for bad types.
template <class F> decltype(auto) dispatch_dtype(ScalarType t, F&& f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    case kFloat16:
      return f(Half{});
    case kBFloat16:
      return f(BFloat16{});
    case kInt32:
      return f(int32_t{});
    case kInt64:
      return f(int64_t{});
    case kUInt8:
      return f(uint8_t{});
    case kBool:
      return f(bool{});
  }
  throw Error("[dispatch] unknown dtype");
}
template <class F> decltype(auto) dispatch_float(ScalarType t, const char* op, F&& f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    case kFloat16:
      return f(Half{});
    case kBFloat16:
      return f(BFloat16{});
    default:
      break;
  }
  throw Error(std::string("[") + op + "] expected a floating-point tensor, got " +
              std::string(dtype_name(t)));
}

}  // namespace oneflow

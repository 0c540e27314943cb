// fusion_rtc_std.h (internal, NVRTC only): the few standard-library names that
// oneflow/dtype.h and ops/functors.h use, for the generated fused kernels (trace/fusion_codegen).
// NOTE [NVRTC prelude]: NVRTC has no standard headers, and an installed build cannot point it at
// the source tree, so the fused-kernel source embeds this file, dtype.h and functors.h as text
// (tools/embed_rtc_headers.py, at build time; their #include lines commented out). Everything
// here is what nvcc resolves the same names to in device code, so a functor compiled by NVRTC
// runs the same instructions as the one in elementwise.cu:
//  - math: `std::floor(float)` and friends are CUDA's own float/double overloads of the global
//    math functions (floorf, exp2f, ... in libdevice), which nvcc's std:: overloads call too;
//  - type traits and numeric_limits: only the parts the two headers use;
//  - std::string, std::string_view, of::Error: declarations for dtype.h's host-only helpers
//    (dtype_name, dispatch_float), which device code never calls.
// A name dtype.h or functors.h starts to use that is missing here fails every NVRTC compile
// with the name in the log (tests/test_cuda_fusion.cpp compiles real groups on the CPU).
#pragma once
#ifdef __CUDACC_RTC__

// ---- <cstdint>, <cstddef> (LP64, as glibc: int64_t is long)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef unsigned long uintptr_t;
typedef unsigned long size_t;

#define INFINITY (__int_as_float(0x7f800000))  // math.h: __builtin_inff(), which NVRTC lacks

namespace std {
using ::int16_t;
using ::int32_t;
using ::int64_t;
using ::int8_t;
using ::size_t;
using ::uint16_t;
using ::uint32_t;
using ::uint64_t;
using ::uint8_t;

// ---- <cstring>
using ::memcpy;

// ---- <cmath>: CUDA's float and double overloads of the global math functions
using ::atan2;
using ::ceil;
using ::cos;
using ::erf;
using ::exp;
using ::exp2;
using ::expm1;
using ::fabs;
using ::floor;
using ::fmod;
using ::isinf;
using ::isnan;
using ::log;
using ::log1p;
using ::log2;
using ::nearbyint;
using ::pow;
using ::sin;
using ::sqrt;
using ::tan;
using ::tanh;
using ::trunc;

// ---- <type_traits>
template <class T, T v> struct integral_constant {
  static constexpr T value = v;
  using value_type = T;
  constexpr operator T() const { return v; }
};
using true_type = integral_constant<bool, true>;
using false_type = integral_constant<bool, false>;

template <class T> struct remove_cv { using type = T; };
template <class T> struct remove_cv<const T> { using type = T; };
template <class T> struct remove_cv<volatile T> { using type = T; };
template <class T> struct remove_cv<const volatile T> { using type = T; };
template <class T> using remove_cv_t = typename remove_cv<T>::type;

template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;

template <bool B, class T, class F> struct conditional { using type = T; };
template <class T, class F> struct conditional<false, T, F> { using type = F; };
template <bool B, class T, class F> using conditional_t = typename conditional<B, T, F>::type;

template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { using type = T; };
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;

namespace rtc_detail {
template <class T> struct integral : false_type {};
template <> struct integral<bool> : true_type {};
template <> struct integral<char> : true_type {};
template <> struct integral<signed char> : true_type {};
template <> struct integral<unsigned char> : true_type {};
template <> struct integral<short> : true_type {};
template <> struct integral<unsigned short> : true_type {};
template <> struct integral<int> : true_type {};
template <> struct integral<unsigned> : true_type {};
template <> struct integral<long> : true_type {};
template <> struct integral<unsigned long> : true_type {};
template <> struct integral<long long> : true_type {};
template <> struct integral<unsigned long long> : true_type {};
template <class T> struct floating : false_type {};
template <> struct floating<float> : true_type {};
template <> struct floating<double> : true_type {};
template <> struct floating<long double> : true_type {};
template <class T> struct unsigned_of { using type = T; };
template <> struct unsigned_of<char> { using type = unsigned char; };
template <> struct unsigned_of<signed char> { using type = unsigned char; };
template <> struct unsigned_of<short> { using type = unsigned short; };
template <> struct unsigned_of<int> { using type = unsigned; };
template <> struct unsigned_of<long> { using type = unsigned long; };
template <> struct unsigned_of<long long> { using type = unsigned long long; };
}  // namespace rtc_detail

template <class T> struct is_integral : rtc_detail::integral<remove_cv_t<T>> {};
template <class T> inline constexpr bool is_integral_v = is_integral<T>::value;
template <class T> struct is_floating_point : rtc_detail::floating<remove_cv_t<T>> {};
template <class T> inline constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T>
struct is_arithmetic : integral_constant<bool, is_integral_v<T> || is_floating_point_v<T>> {};
template <class T> inline constexpr bool is_arithmetic_v = is_arithmetic<T>::value;
template <class T>
struct is_signed : integral_constant<bool, is_arithmetic_v<T> && (T(-1) < T(0))> {};
template <class T> inline constexpr bool is_signed_v = is_signed<T>::value;
template <class T>
struct is_unsigned : integral_constant<bool, is_arithmetic_v<T> && !(T(-1) < T(0))> {};
template <class T> inline constexpr bool is_unsigned_v = is_unsigned<T>::value;
template <class T> struct make_unsigned { using type = typename rtc_detail::unsigned_of<T>::type; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;

// <cmath>'s overloads for integer arguments (computed as double): Floor/Ceil/Round/Trunc name
// std::floor(x) for every T, and select x itself for integers
#define OF_RTC_INTEGRAL_MATH(f)                                                                  \
  template <class T, enable_if_t<is_integral_v<T>, int> = 0> __host__ __device__ double f(T x) { \
    return ::f(double(x));                                                                       \
  }
OF_RTC_INTEGRAL_MATH(floor)
OF_RTC_INTEGRAL_MATH(ceil)
OF_RTC_INTEGRAL_MATH(trunc)
OF_RTC_INTEGRAL_MATH(nearbyint)
OF_RTC_INTEGRAL_MATH(fabs)
OF_RTC_INTEGRAL_MATH(exp)
OF_RTC_INTEGRAL_MATH(exp2)
OF_RTC_INTEGRAL_MATH(expm1)
OF_RTC_INTEGRAL_MATH(log)
OF_RTC_INTEGRAL_MATH(log2)
OF_RTC_INTEGRAL_MATH(log1p)
OF_RTC_INTEGRAL_MATH(sqrt)
OF_RTC_INTEGRAL_MATH(sin)
OF_RTC_INTEGRAL_MATH(cos)
OF_RTC_INTEGRAL_MATH(tan)
OF_RTC_INTEGRAL_MATH(tanh)
OF_RTC_INTEGRAL_MATH(erf)
#undef OF_RTC_INTEGRAL_MATH

// ---- <limits>: min() and max() of the integer types (saturate_cast)
template <class T> struct numeric_limits;
#define OF_RTC_LIMITS(T, lo, hi)                                \
  template <> struct numeric_limits<T> {                        \
    __host__ __device__ static constexpr T min() { return lo; } \
    __host__ __device__ static constexpr T max() { return hi; } \
  };
OF_RTC_LIMITS(bool, false, true)
OF_RTC_LIMITS(signed char, -128, 127)
OF_RTC_LIMITS(unsigned char, 0, 255)
OF_RTC_LIMITS(short, -32768, 32767)
OF_RTC_LIMITS(unsigned short, 0, 65535)
OF_RTC_LIMITS(int, -2147483647 - 1, 2147483647)
OF_RTC_LIMITS(unsigned, 0u, 4294967295u)
OF_RTC_LIMITS(long, -9223372036854775807L - 1, 9223372036854775807L)
OF_RTC_LIMITS(unsigned long, 0ul, 18446744073709551615ul)
OF_RTC_LIMITS(long long, -9223372036854775807LL - 1, 9223372036854775807LL)
OF_RTC_LIMITS(unsigned long long, 0ull, 18446744073709551615ull)
#undef OF_RTC_LIMITS

// ---- <string_view>, <string>: declarations for dtype.h's host-only helpers
struct string_view {
  const char* data_ = nullptr;
  size_t size_ = 0;
};
struct string {
  string(const char*);
  explicit string(string_view);
};
string operator+(const string&, const string&);
string operator+(const string&, const char*);
template <class T> T&& forward(T& t) { return static_cast<T&&>(t); }
}  // namespace std

// ---- oneflow/error.h
namespace oneflow {
class Error {
 public:
  explicit Error(const std::string& msg);
};
}  // namespace oneflow

#endif  // __CUDACC_RTC__

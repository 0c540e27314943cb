// scalar.h: Scalar, a number that mixes with tensors (2 * x, x + 1.5f, masked_fill(m, -INFINITY)).
#pragma once
#include <cstdint>
#include <type_traits>

#include "oneflow/dtype.h"

namespace oneflow {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : kind_(Kind::Int), i_(0) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(int64_t(v)) {}
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(double(v)) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}
  Scalar(Half v) : kind_(Kind::Float), d_(float(v)) {}
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(float(v)) {}

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::Float; }
  bool is_integral(bool include_bool = false) const {
    return kind_ == Kind::Int || (include_bool && kind_ == Kind::Bool);
  }
  bool is_boolean() const { return kind_ == Kind::Bool; }
  double to_double() const { return kind_ == Kind::Float ? d_ : double(i_); }
  int64_t to_long() const { return kind_ == Kind::Float ? saturate_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0 : i_ != 0; }
  template <class T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return T(to_long());
    else return T(to_double());
  }
  // libtorch's spellings (c10::Scalar::toLong, ...).
  int64_t toLong() const { return to_long(); }
  int toInt() const { return int(to_long()); }
  double toDouble() const { return to_double(); }
  float toFloat() const { return float(to_double()); }
  bool toBool() const { return to_bool(); }
  bool isFloatingPoint() const { return is_floating_point(); }
  bool isIntegral(bool include_bool) const { return is_integral(include_bool); }
  bool isBoolean() const { return is_boolean(); }
  // The dtype a bare Scalar gets as a 0-d tensor: int64, float32 (default float) or bool.
  ScalarType default_dtype() const {
    return kind_ == Kind::Float ? kFloat32 : kind_ == Kind::Int ? kInt64 : kBool;
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

}  // namespace oneflow

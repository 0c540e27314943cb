// op_def.cpp: attribute equality and hashing (CSE, trace cache keys) and checked reads.
#include "op_def.h"

#include <cstring>
#include <functional>

namespace oneflow {

void Attrs::missing(size_t k) const {
  fail("[attrs] attribute {} was read but the op was given {}", k, values.size());
}

bool scalar_equal(const Scalar& a, const Scalar& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_floating_point()) {
    const double x = a.to_double(), y = b.to_double();
    return std::memcmp(&x, &y, sizeof x) == 0;  // bitwise: -0.0 != 0.0, NaN == same NaN
  }
  return a.to_long() == b.to_long();
}

namespace {
size_t hash_mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}
size_t hash_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return std::hash<uint64_t>()(u);
}
}  // namespace

size_t hash_scalar(const Scalar& s) {
  size_t h = size_t(s.kind());
  return hash_mix(
      h, s.is_floating_point() ? hash_bits(s.to_double()) : std::hash<int64_t>()(s.to_long()));
}

bool operator==(const Attrs& a, const Attrs& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    const AttrValue &x = a.values[k], &y = b.values[k];
    if (x.index() != y.index()) return false;
    const bool same = std::visit(
        [&](const auto& xv) -> bool {
          using T = std::decay_t<decltype(xv)>;
          const T& yv = std::get<T>(y);
          if constexpr (std::is_same_v<T, std::monostate>) return true;
          else if constexpr (std::is_same_v<T, double>)
            return std::memcmp(&xv, &yv, sizeof xv) == 0;
          else if constexpr (std::is_same_v<T, Scalar>) return scalar_equal(xv, yv);
          else if constexpr (std::is_same_v<T, DimVector>)
            return IntArrayRef(xv) == IntArrayRef(yv);
          else return xv == yv;
        },
        x);
    if (!same) return false;
  }
  return true;
}

size_t hash_attrs(const Attrs& a) {
  size_t h = a.size();
  for (const AttrValue& v : a.values) {
    h = hash_mix(h, v.index());
    std::visit(
        [&](const auto& xv) {
          using T = std::decay_t<decltype(xv)>;
          if constexpr (std::is_same_v<T, std::monostate>) return;
          else if constexpr (std::is_same_v<T, double>) h = hash_mix(h, hash_bits(xv));
          else if constexpr (std::is_same_v<T, Scalar>) h = hash_mix(h, hash_scalar(xv));
          else if constexpr (std::is_same_v<T, DimVector>) {
            for (int64_t d : xv) h = hash_mix(h, std::hash<int64_t>()(d));
          } else if constexpr (std::is_same_v<T, ScalarType>) h = hash_mix(h, size_t(xv));
          else h = hash_mix(h, std::hash<T>()(xv));
        },
        v);
  }
  return h;
}

}  // namespace oneflow

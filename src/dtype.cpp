#include "oneflow/dtype.h"

namespace oneflow {

std::string_view dtype_name(ScalarType t) {
  switch (t) {
    case kFloat32:
      return "float32";
    case kFloat64:
      return "float64";
    case kFloat16:
      return "float16";
    case kBFloat16:
      return "bfloat16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kUInt8:
      return "uint8";
    case kBool:
      return "bool";
  }
  return "unknown";
}

// NOTE [Promotion]: the table is PyTorch's promoteTypes restricted to our eight dtypes.
// Order: f32 f64 f16 bf16 i32 i64 u8 b
ScalarType promote_types(ScalarType a, ScalarType b) {
  constexpr ScalarType f4 = kFloat32, f8 = kFloat64, f2 = kFloat16, bf = kBFloat16, i4 = kInt32,
                       i8 = kInt64, u1 = kUInt8, b1 = kBool;
  static constexpr ScalarType table[8][8] = {
      /* f32 */ {f4, f8, f4, f4, f4, f4, f4, f4},
      /* f64 */ {f8, f8, f8, f8, f8, f8, f8, f8},
      /* f16 */ {f4, f8, f2, f4, f2, f2, f2, f2},
      /* bf16*/ {f4, f8, f4, bf, bf, bf, bf, bf},
      /* i32 */ {f4, f8, f2, bf, i4, i8, i4, i4},
      /* i64 */ {f4, f8, f2, bf, i8, i8, i8, i8},
      /* u8  */ {f4, f8, f2, bf, i4, i8, u1, u1},
      /* b   */ {f4, f8, f2, bf, i4, i8, u1, b1},
  };
  return table[int(a)][int(b)];
}

bool can_cast(ScalarType from, ScalarType to) {
  if (is_floating_point(from) && !is_floating_point(to)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

}  // namespace oneflow

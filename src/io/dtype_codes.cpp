// io/dtype_codes.cpp: the dtype code tables (io/dtype_codes.h).
#include "io/dtype_codes.h"

namespace oneflow::io {

namespace {
struct DtypeCode {
  ScalarType type;
  const char* code;
};
constexpr DtypeCode kSafetensorsCodes[] = {
    {kFloat32, "F32"}, {kFloat64, "F64"}, {kFloat16, "F16"}, {kBFloat16, "BF16"},
    {kInt32, "I32"},   {kInt64, "I64"},   {kUInt8, "U8"},    {kBool, "BOOL"},
};
}  // namespace

const char* safetensors_code(ScalarType t) {
  for (const auto& d : kSafetensorsCodes)
    if (d.type == t) return d.code;
  return nullptr;
}

bool dtype_from_code(std::string_view code, ScalarType* out) {
  for (const auto& d : kSafetensorsCodes)
    if (code == d.code) {
      *out = d.type;
      return true;
    }
  return false;
}

}  // namespace oneflow::io

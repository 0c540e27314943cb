// io/dtype_codes.h (internal): the dtype codes files name tensors' element types with — the
// safetensors codes ("F32", "BF16", ...) of checkpoints and sharded checkpoints — one table.
#pragma once
#include <string_view>

#include "oneflow/dtype.h"

namespace oneflow::io {

// The safetensors code of t, or nullptr when safetensors has none for it.
const char* safetensors_code(ScalarType t);
// The dtype a safetensors code names; false (out untouched) for a code this library does not
// read.
bool dtype_from_code(std::string_view code, ScalarType* out);

}  // namespace oneflow::io

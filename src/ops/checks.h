// checks.h (internal): the argument checks the public wrappers share (one wording each).
#pragma once
#include <initializer_list>
#include <utility>

#include "oneflow/error.h"
#include "oneflow/tensor.h"

namespace oneflow {

// "[op] <what> is undefined", what naming the argument as the op's signature does ("input",
// "weight", "index"...).
inline void check_defined(const char* op, const Tensor& t, const char* what = "input") {
  if (!t.defined()) fail("[{}] {} is undefined", op, what);
}
// The named arguments in turn.
inline void check_defined(const char* op,
                          std::initializer_list<std::pair<const Tensor*, const char*>> ts) {
  for (const auto& [t, what] : ts) check_defined(op, *t, what);
}

}  // namespace oneflow

// elementwise.h (internal): shared pieces of the unary/binary op families (their CPU kernels:
// cpu/elementwise.h).
#pragma once
#include <array>
#include <string_view>
#include "dispatch.h"
#include "ops/functors.h"
#include "promotion.h"

namespace oneflow {

// Row i of a table-driven op family (rows with a `name`), reached by name like every op
// (NOTE [Reaching an op] in op_table.h) and looked up once per row.
template <auto& Rows> const OpDef& row_op(size_t i) {
  static const auto ops = [] {
    std::array<const OpDef*, std::size(Rows)> a{};
    for (size_t k = 0; k < a.size(); ++k) a[k] = &find_op(Rows[k].name);
    return a;
  }();
  return *ops[i];
}

// The row of `Rows` named `name`, found at compile time: a name no row has does not compile.
template <auto& Rows> consteval int find_row(std::string_view name) {
  for (size_t i = 0; i < std::size(Rows); ++i)
    if (std::string_view(Rows[i].name) == name) return int(i);
  throw "no row of this name";
}

}  // namespace oneflow

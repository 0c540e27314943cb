// random_common.h: what the random ops (ops/random.cpp) and their CPU kernels (cpu/random.cpp)
// share; and (from ops/random_attrs.h, which the CUDA module's kernels include alone) their
// attribute schemas.
#pragma once
#include <cstdint>

#include "ops/random_attrs.h"

namespace oneflow::random_detail {

// multinomial: inputs {weights (k) or (rows, k)}; attrs MultinomialAttrs.
// Row r draws with counters offset + r * per_row, two words per uniform double: the kernel and
// the public function (which reserves the counters) both take per_row from the draws of a row.
inline int64_t multinomial_draws(int64_t k, int64_t num_samples, bool replacement) {
  return replacement ? num_samples : k;
}

}  // namespace oneflow::random_detail

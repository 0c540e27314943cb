// output_layout.h (internal): the layout dispatch gives an op's freshly allocated outputs, for
// code that derives a recorded graph's geometry again without running it (symbolic shapes,
// trace/symbolic.cpp).
#pragma once
#include "dispatch.h"

namespace oneflow {

// Strides dispatch allocates output `m` of `op` on `inputs` with (not a view, not out=):
// row-major, or the permuted dense layout of an elementwise op's input (NOTE [Output layout]).
DimVector fresh_output_strides(const OpDef& op, const TensorList& inputs, const TensorMeta& m);

}  // namespace oneflow

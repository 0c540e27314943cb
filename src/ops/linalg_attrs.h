// linalg_attrs.h: the attribute schema of addmm and baddbmm (NOTE [Attribute schemas]), read by
// their op file (ops/linalg.cpp) and the CPU kernels (cpu/linalg.cpp).
#pragma once
#include "ops/attr_schema.h"

namespace oneflow {

// out = beta * self + alpha * (product)
using AddmmAttrs = AttrSchema<Attr<"beta", Scalar>, Attr<"alpha", Scalar>>;

}  // namespace oneflow

// elementwise_attrs.h (internal): the attribute schemas of the elementwise ops that take
// attributes (NOTE [Attribute schemas]); their CPU kernels (ops/unary.cpp, ops/binary.cpp), the
// CUDA module's elementwise kernels and the fused-kernel generator read them through these.
#pragma once
#include <string>

#include "ops/attr_schema.h"

namespace oneflow::elem_attrs {

using GeluAttrs = AttrSchema<Attr<"approximate", std::string>>;  // "none" or "tanh"
using PowScalarAttrs = AttrSchema<Attr<"exponent", double>>;
// a bound applies only where its flag is set
using ClampAttrs = AttrSchema<Attr<"has_min", bool>, Attr<"min", double>, Attr<"has_max", bool>,
                              Attr<"max", double>>;

}  // namespace oneflow::elem_attrs

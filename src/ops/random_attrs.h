// random_attrs.h (internal): the attribute schemas of the random ops (ops/random.cpp), which their
// CPU kernels (cpu/random.cpp) and the CUDA module's (src/cuda/factory.cpp) read too (NOTE
// [Attribute schemas]).
#pragma once
#include "ops/attr_schema.h"

namespace oneflow::random_detail {

// uniform, normal, randint: the size, dtype and device of the result, the generator's seed and
// offset (OpDef::rng_seed_attr is seed's position: the tracer re-draws both at every replay), and
// the distribution's parameters a and b: the bounds of uniform and randint, normal's mean and std.
using RandomAttrs =
    AttrSchema<Attr<"size", DimVector>, Attr<"dtype", ScalarType>, Attr<"device_type", int64_t>,
               Attr<"device_index", int64_t>, Attr<"seed", int64_t>, Attr<"offset", int64_t>,
               Attr<"a", double>, Attr<"b", double>>;
// multinomial(weights): samples per row, with or without replacement, and the generator's draw.
using MultinomialAttrs = AttrSchema<Attr<"num_samples", int64_t>, Attr<"replacement", bool>,
                                    Attr<"seed", int64_t>, Attr<"offset", int64_t>>;

// OpDef::rng_seed_attr names seed's position; the tracer finds offset right after it.
static_assert(RandomAttrs::index<"offset">() == RandomAttrs::index<"seed">() + 1);
static_assert(MultinomialAttrs::index<"offset">() == MultinomialAttrs::index<"seed">() + 1);

}  // namespace oneflow::random_detail

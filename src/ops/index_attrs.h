// index_attrs.h (internal): the attribute schemas of the indexing, shape-move and sort ops
// (ops/index.cpp, ops/moves.cpp, ops/sort.cpp; NOTE [Attribute schemas]), which their CPU
// kernels (cpu/index.cpp, cpu/moves.cpp, cpu/sort.cpp) and the CUDA module's (cuda/index.cpp,
// cuda/nn.cpp, cuda/pad.cpp, cuda/sort.cpp) read too. Positions are the graph files' order:
// never reorder a schema, only extend it.
#pragma once
#include <cstdint>
#include <string>

#include "ops/attr_schema.h"
#include "ops/shape_attrs.h"

namespace oneflow::index_detail {

// Shared with the view ops: DimAttrs (cat, gather, scatter, scatter_add, index_select),
// SizeAttrs (masked_select_backward), DimsAttrs (flip).
using shape_detail::DimAttrs;
using shape_detail::DimsAttrs;
using shape_detail::SizeAttrs;

// ---------------------------------------------------------------- indexing
using IndexAddAttrs = DimAttrs::with<Attr<"alpha", Scalar>>;
using OneHotAttrs = AttrSchema<Attr<"num_classes", int64_t>>;    // resolved: >= 0
using EmbeddingAttrs = AttrSchema<Attr<"padding_idx", int64_t>,  // < 0: none
                                  Attr<"scale_grad_by_freq", bool>>;

// ---------------------------------------------------------------- moves
// pad: pairs (left, right) from the last dim backwards; mode constant, reflect, replicate or
// circular; value fills in constant mode
using PadAttrs =
    AttrSchema<Attr<"pad", DimVector>, Attr<"mode", std::string>, Attr<"value", double>>;
using PadBackwardAttrs =
    AttrSchema<Attr<"input_size", DimVector>, Attr<"pad", DimVector>, Attr<"mode", std::string>>;
using TriAttrs = AttrSchema<Attr<"diagonal", int64_t>>;  // tril, triu
using RollAttrs = AttrSchema<Attr<"shifts", DimVector>, Attr<"dims", DimVector>>;
using RepeatAttrs = AttrSchema<Attr<"repeats", DimVector>>;

// ---------------------------------------------------------------- sort
using SortAttrs = DimAttrs::with<Attr<"descending", bool>>;
using TopkAttrs = AttrSchema<Attr<"k", int64_t>, Attr<"dim", int64_t>, Attr<"largest", bool>,
                             Attr<"sorted", bool>>;

}  // namespace oneflow::index_detail

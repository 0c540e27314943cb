// shape_attrs.h (internal): the attribute schemas of the view ops (ops/shape.cpp, and
// view_scatter's kernel in cpu/shape.cpp; NOTE [Attribute schemas]), and the one-field schemas
// other op families share with them (the index, move and sort ops of ops/index_attrs.h).
// Positions are the graph files' order: never reorder a schema, only extend it.
#pragma once
#include <cstdint>

#include "ops/attr_schema.h"

namespace oneflow::shape_detail {

// One dim: cat, gather, scatter, scatter_add, index_select; the head of slice, select, sort and
// index_add (so one reader of "dim" serves them all).
using DimAttrs = AttrSchema<Attr<"dim", int64_t>>;
// A shape: view, expand, masked_select_backward.
using SizeAttrs = AttrSchema<Attr<"size", DimVector>>;
// A list of dims: permute, flip.
using DimsAttrs = AttrSchema<Attr<"dims", DimVector>>;

// slice(dim, start, end, step): start and end normalized (0 <= start <= end <= size)
using SliceAttrs =
    DimAttrs::with<Attr<"start", int64_t>, Attr<"end", int64_t>, Attr<"step", int64_t>>;
using SelectAttrs = DimAttrs::with<Attr<"index", int64_t>>;
using DiagonalAttrs =
    AttrSchema<Attr<"offset", int64_t>, Attr<"dim1", int64_t>, Attr<"dim2", int64_t>>;
// offset < 0: the input's storage offset; base_offset records the input's storage offset (for
// the VJP)
using AsStridedAttrs = AttrSchema<Attr<"size", DimVector>, Attr<"stride", DimVector>,
                                  Attr<"offset", int64_t>, Attr<"base_offset", int64_t>>;
// zeros of base_size with the gradient added through the view (size, stride, offset);
// may_overlap: the view's elements may share storage positions
using ViewScatterAttrs =
    AttrSchema<Attr<"base_size", DimVector>, Attr<"size", DimVector>, Attr<"stride", DimVector>,
               Attr<"offset", int64_t>, Attr<"may_overlap", bool>>;

}  // namespace oneflow::shape_detail

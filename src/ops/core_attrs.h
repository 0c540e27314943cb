// core_attrs.h (internal): the attribute schemas of the core ops (ops/core_ops.cpp: casts,
// copies, device transfer, fills and the deterministic factories), which their CPU kernels
// (cpu/core.cpp) and the CUDA module's (src/cuda/factory.cpp, src/cuda/elementwise.cpp) read too
// (NOTE [Attribute schemas]).
#pragma once
#include "ops/attr_schema.h"

namespace oneflow::core_detail {

// copy: the result's dtype (a cast; clone and contiguous keep the input's).
using CopyAttrs = AttrSchema<Attr<"dtype", ScalarType>>;
// to_device: the destination device; non_blocking is an optional last field (absent: blocking).
using DeviceAttrs = AttrSchema<Attr<"device_type", int64_t>, Attr<"device_index", int64_t>>;
using ToDeviceAttrs = DeviceAttrs::with<Attr<"non_blocking", bool>>;
// fill_: the value.
using FillAttrs = AttrSchema<Attr<"value", Scalar>>;
// The factories: their own fields, then the result's dtype and device (device_type and
// device_index, as DeviceAttrs; the public functions build a CUDA result on the CPU and move it).
using FullAttrs =
    AttrSchema<Attr<"size", DimVector>, Attr<"value", Scalar>, Attr<"dtype", ScalarType>,
               Attr<"device_type", int64_t>, Attr<"device_index", int64_t>>;
using ArangeAttrs = AttrSchema<Attr<"start", double>, Attr<"end", double>, Attr<"step", double>,
                               Attr<"dtype", ScalarType>, Attr<"device_type", int64_t>,
                               Attr<"device_index", int64_t>>;
using LinspaceAttrs = AttrSchema<Attr<"start", double>, Attr<"end", double>, Attr<"steps", int64_t>,
                                 Attr<"dtype", ScalarType>, Attr<"device_type", int64_t>,
                                 Attr<"device_index", int64_t>>;
using EyeAttrs = AttrSchema<Attr<"n", int64_t>, Attr<"m", int64_t>, Attr<"dtype", ScalarType>,
                            Attr<"device_type", int64_t>, Attr<"device_index", int64_t>>;

}  // namespace oneflow::core_detail

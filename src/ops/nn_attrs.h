// nn_attrs.h (internal): the attribute schemas of the nn ops (NOTE [Attribute schemas]):
// normalizations, losses, attention, dropout, the fused LSTM layer, im2col/col2im. The op
// files and the CUDA module's kernels of these ops read their attributes through them.
#pragma once
#include "ops/attr_schema.h"

namespace oneflow::nn_detail {

// layer_norm / rms_norm and their backward ops: the first normalized axis; group_norm's
// schema differs in its first field only, so `eps` and the flags read alike for all three.
using NormAttrs = AttrSchema<Attr<"axis", int64_t>, Attr<"eps", double>, Attr<"has_weight", bool>,
                             Attr<"has_bias", bool>>;
// linear_act (NOTE [GEMM epilogues] in cpu/blas.h): the activation's name ("none" for none), then a
// scale the activated output is multiplied by (left out by graphs saved before it: 1)
using LinearActAttrs = AttrSchema<Attr<"act", std::string>, Attr<"scale", double>>;
// add_layer_norm / add_rms_norm: the norm's attributes, and whether the sum is an output
using AddNormAttrs = NormAttrs::with<Attr<"write_sum", bool>>;
using GroupNormAttrs = AttrSchema<Attr<"num_groups", int64_t>, Attr<"eps", double>,
                                  Attr<"has_weight", bool>, Attr<"has_bias", bool>>;
using BatchNormAttrs =
    AttrSchema<Attr<"training", bool>, Attr<"eps", double>, Attr<"has_weight", bool>>;
// A loss's reduction attribute: of::Reduction's values (ops/nn_op_helpers.h checks them), named
// here for kernels, which see no public op header.
enum LossReduction : int64_t { kReduceNone = 0, kReduceMean = 1, kReduceSum = 2 };

// cross_entropy and its backward: reduction is a Reduction value
using CrossEntropyAttrs = AttrSchema<Attr<"reduction", int64_t>, Attr<"ignore_index", int64_t>,
                                     Attr<"label_smoothing", double>, Attr<"has_weight", bool>>;
// scaled_dot_product_attention and its backward; mask_kind: 0 none, 1 boolean, 2 additive. A
// global call appends draw_map (NOTE [Attention draw map]).
using SdpaAttrs =
    AttrSchema<Attr<"scale", double>, Attr<"is_causal", bool>, Attr<"dropout_p", double>,
               Attr<"seed", int64_t>, Attr<"offset", int64_t>, Attr<"mask_kind", int64_t>>;
using SdpaDrawAttrs = SdpaAttrs::with<Attr<"draw_map", DimVector>>;
// fused_attention (NOTE [Fused attention]): mask_kind 0 (none) or 2 (additive); heads (left
// out: 1): the output written with the heads merged, NOTE [Merged heads]
using FusedAttnAttrs =
    AttrSchema<Attr<"scale", double>, Attr<"mask_kind", int64_t>, Attr<"heads", int64_t>>;
using DropoutAttrs = AttrSchema<Attr<"p", double>, Attr<"seed", int64_t>, Attr<"offset", int64_t>>;
// lstm_layer and its backward: the number of equal-length steps and the direction
using LstmLayerAttrs = AttrSchema<Attr<"steps", int64_t>, Attr<"reverse", bool>>;
// col2im takes the image's size first, then im2col's window
using Im2colAttrs = AttrSchema<Attr<"kernel_size", DimVector>, Attr<"dilation", DimVector>,
                               Attr<"padding", DimVector>, Attr<"stride", DimVector>>;
using Col2imAttrs =
    AttrSchema<Attr<"output_size", DimVector>, Attr<"kernel_size", DimVector>,
               Attr<"dilation", DimVector>, Attr<"padding", DimVector>, Attr<"stride", DimVector>>;
using CtcAttrs = AttrSchema<Attr<"blank", int64_t>, Attr<"zero_infinity", bool>>;

}  // namespace oneflow::nn_detail

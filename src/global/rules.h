// rules.h (internal): SBP rules that op definitions point at (NOTE [SBP rules] in op_def.h).
// Each op family's file sets `.sbp_rule` beside its VJP; the rules themselves are written in
// src/global/rules.cpp since several families share them.
#pragma once
#include "dispatch.h"

namespace oneflow::sbp_rules {

extern const SbpRule kLinearAll;  // add, sub, neg, copy: partial sums stay partial
extern const SbpRule kMul;        // mul: either operand P, the other B
extern const SbpRule kDiv;        // div: P / B
extern const SbpRule kMm;         // mm / addmm's product: OneFlow's matmul signatures
extern const SbpRule kBmm;        // bmm: batch splits, then the mm signatures per batch
extern const SbpRule kLinear;     // linear(x, w, b): data, column and row parallel
extern const SbpRule kSum;        // sum: split reduced dims become partial sums
extern const SbpRule kView;       // view/reshape: splits of dims kept whole
extern const SbpRule kPermute;    // permute: splits follow their dim
extern const SbpRule kSlice;      // slice: splits of the other dims stay
extern const SbpRule kSelect;     // select: the same, renumbered past the dropped dim
extern const SbpRule kExpand;     // expand: splits of the dims it keeps stay
extern const SbpRule kSoftmax;    // softmax / log_softmax (attr 0 = dim): split other dims
extern const SbpRule kPerSample;  // conv, pooling: input split on the batch dim, weights broadcast
extern const SbpRule kPerSampleWeightGrad;  // conv*_backward_weight: batch split -> P
extern const SbpRule kPool;                 // pooling, upsampling: batch or channel split
extern const SbpRule kResampleBackward;     // avg/adaptive pool, upsample backward: S(0)/S(1)
extern const SbpRule kIndexSelect;          // index_select: a split index splits the output
extern const SbpRule kIndexAdd;             // index_add: split rows -> P, or a split of another dim
extern const SbpRule kAlongDim;             // gather/scatter/scatter_add: splits of the other dims
extern const SbpRule kEmbedding;     // embedding(weight, indices): split indices, or split columns
extern const SbpRule kNorm;          // layer_norm / rms_norm: rows split on dim 0
extern const SbpRule kNormBackward;  // their backward: parameter gradients partial
extern const SbpRule kGroupNorm;     // group_norm: samples split on dim 0
extern const SbpRule kGroupNormBackward;  // its backward: parameter gradients partial
extern const SbpRule kBatchNorm;          // batch_norm: channels split; per-sample in eval
extern const SbpRule kBatchNormBackward;
extern const SbpRule kCrossEntropy;  // rows split (reduction None / Sum)
extern const SbpRule kCrossEntropyBackward;
extern const SbpRule kAttention;  // scaled_dot_product_attention (+ backward): batch split
extern const SbpRule kCat;        // cat: splits of other dims, partial sums
extern const SbpRule kCumsum;     // cumsum: splits of the other dims, partial sums
extern const SbpRule kCumprod;    // cumprod: splits of the other dims
extern const SbpRule kCtc;        // ctc_loss (+ backward): the batch split (padded targets)
extern const SbpRule kRowwise;    // lstm_cell (+ backward): rows split alike
extern const SbpRule kAddmm;      // addmm: mm's signatures, self alike
extern const SbpRule kBaddbmm;    // baddbmm: bmm's signatures, self alike
extern const SbpRule kDiagonal;   // diagonal: splits of the other dims
extern const SbpRule kSort;       // sort (attr 0 = dim): splits of the other dims
extern const SbpRule kTopk;       // topk (attr 1 = dim): splits of the other dims
extern const SbpRule kFlip;       // flip: splits of the dims it keeps in place
extern const SbpRule kRoll;       // roll: the same; no dims rolls the flattened tensor
extern const SbpRule kTriangle;   // tril / triu: batch-dim splits
extern const SbpRule kPad;        // pad: splits of the unpadded dims
extern const SbpRule kOneHot;     // one_hot: index splits
extern const SbpRule kRepeat;     // repeat: splits of dims repeated once
extern const SbpRule kIm2col;     // im2col ([N, C, H, W]): batch splits
extern const SbpRule kCol2im;     // col2im ([N, C * k, L]): batch splits

// The trait defaults the global layer uses for ops without a rule.
void elementwise_signatures(const SbpRuleCtx& c, std::vector<SbpSig>& out);
void reduction_signatures(const SbpRuleCtx& c, std::vector<SbpSig>& out, bool partial);

}  // namespace oneflow::sbp_rules

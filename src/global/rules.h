// rules.h (internal): SBP rules that op definitions point at (NOTE [SBP rules] in op_def.h).
// Each op family's file sets `.sbp_rule` beside its VJP; the rules themselves are written in
// src/global/rules.cpp since several families share them.
#pragma once
#include <functional>

#include "dispatch.h"

namespace oneflow::sbp_rules {

// Each rule is named by what it does, not by the op that first used it; the ops using each one
// are in parentheses. Rules that read a `dim` or `dims` attribute find it by name in the op's
// schema (tests/test_global_optable.cpp checks every op pointing at one has it).
// Elementwise and linear algebra
extern const SbpRule kLinearElementwise;         // partial sums stay partial (add, sub, copy)
extern const SbpRule kBilinearElementwise;       // either operand P, the other B (mul)
extern const SbpRule kLinearInFirstElementwise;  // P op B (div)
extern const SbpRule kMatmul;                    // OneFlow's matmul signatures (mm)
extern const SbpRule kBatchedMatmul;             // batch splits, then matmul's (bmm)
extern const SbpRule kMatmulPlusSelf;            // matmul's, self alike (addmm)
extern const SbpRule kBatchedMatmulPlusSelf;     // batched matmul's, self alike (baddbmm)
extern const SbpRule kMatmulTransposedWeight;    // x @ w^T + b: data, column, row parallel (linear)
// Reductions, views and dims
extern const SbpRule kSumOverDims;        // split reduced dims become partial sums (sum)
extern const SbpRule kReshape;            // splits of dims kept whole (view, reshape)
extern const SbpRule kPermuteDims;        // splits follow their dim (permute)
extern const SbpRule kBroadcastTo;        // splits of the dims it keeps stay (expand)
extern const SbpRule kDropOneDim;         // splits of the other dims, renumbered (select)
extern const SbpRule kDiagonalOfTwoDims;  // splits of the other dims, renumbered (diagonal)
// along its `dim` attr: splits of the other dims stay (softmax, log_softmax, sort, topk, cumprod)
extern const SbpRule kAlongOneDim;
// the same, and partial sums stay partial (slice, cat, cumsum)
extern const SbpRule kLinearAlongOneDim;
extern const SbpRule kLinearAlongDims;         // along its `dims` attr, linear (flip)
extern const SbpRule kLinearAlongDimsOrFlat;   // the same; no dims: the flattened tensor (roll)
extern const SbpRule kLinearAlongLastTwoDims;  // batch-dim splits, linear (tril, triu)
extern const SbpRule kAlongPaddedDims;         // splits of the unpadded dims (pad)
extern const SbpRule kRepeatedDims;            // splits of dims repeated once (repeat)
extern const SbpRule kNewLastDim;              // index splits; a new last dim whole (one_hot)
// Indexing
extern const SbpRule kPickAlongDim;     // a split index splits the output (index_select)
extern const SbpRule kAddAlongDim;      // split rows -> P, or a split of another dim (index_add)
extern const SbpRule kLinedUpAlongDim;  // splits of the other dims (gather, scatter, scatter_add)
extern const SbpRule kLookupRows;       // split indices, or split columns (embedding)
// Samples, rows and channels
extern const SbpRule kSamplesSplit;            // input S(0), weights B (conv, max pooling)
extern const SbpRule kSamplesSplitToPartial;   // both S(0) -> P (conv*_backward_weight)
extern const SbpRule kSamplesOrChannelsSplit;  // batch or channel split (pooling, upsampling)
// the same, with the input's sizes (the last attr) made the piece's (their backward)
extern const SbpRule kSamplesOrChannelsSplitResized;
extern const SbpRule kSamplesSplitRank4;  // a batched [N, C, H, W] input: batch splits (im2col)
extern const SbpRule kSamplesSplitRank3;  // a batched [N, C * k, L] input: batch splits (col2im)
extern const SbpRule kSamplesSplitWithoutDropout;  // batch splits unless dropout (attention)
extern const SbpRule kRowwise;                     // rows split alike (lstm_cell + backward)
extern const SbpRule kSequenceBatches;  // [T, N, C] and [N, S] split on N (ctc_loss + backward)
extern const SbpRule kRowStatistics;    // rows split on dim 0 (layer_norm, rms_norm)
extern const SbpRule kRowStatisticsBackward;    // their backward: parameter gradients partial
extern const SbpRule kGroupStatistics;          // samples split on dim 0 (group_norm)
extern const SbpRule kGroupStatisticsBackward;  // its backward: parameter gradients partial
extern const SbpRule kChannelStatistics;        // channels split; per-sample in eval (batch_norm)
extern const SbpRule kChannelStatisticsBackward;
extern const SbpRule kRowLosses;  // rows split, reduction None / Sum (cross_entropy)
extern const SbpRule kRowLossesBackward;
// Every rank computes the op on the whole (broadcast) values: right for any op that is a
// function of its inputs' values (random ops too: every rank's generator is in step), but it
// gathers split inputs. An op with neither a rule nor a trait default raises on global inputs
// (NOTE [SBP rules]), so an op runs on broadcast values only where its row says so.
extern const SbpRule kWholeValues;

// NOTE [Attention split by heads] (rules.cpp): attention computed on each rank's pieces when
// global q, k, v split only batch dims alike. `local` is the op's own attention on local
// operands (q, k, v, the mask's piece or none, the draw map of NOTE [Attention draw map]); the
// result is the global output, or an undefined tensor when the operands do not split so (the
// caller then runs attention on the whole values).
using AttentionPieceFn = std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& mask, const DimVector& draw_map)>;
Tensor attention_by_batch_pieces(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const Tensor& attn_mask, double dropout_p,
                                 const AttentionPieceFn& local);

// The trait defaults the global layer uses for ops without a rule.
void elementwise_signatures(const SbpRuleCtx& c, std::vector<SbpSig>& out);
void reduction_signatures(const SbpRuleCtx& c, std::vector<SbpSig>& out, bool partial);

}  // namespace oneflow::sbp_rules

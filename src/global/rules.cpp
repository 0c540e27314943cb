// rules.cpp: the SBP rules of rules.h and the trait defaults (NOTE [SBP rules]).
#include "global/rules.h"

#include "global/global.h"
#include "ops/index_attrs.h"
#include "ops/nn_attrs.h"
#include "ops/reduce_common.h"
#include "ops/shape_attrs.h"

namespace oneflow {
namespace sbp_rules {
namespace {

using Sigs = std::vector<SbpSig>;
const Sbp B = Sbp::broadcast();
const Sbp P = Sbp::partial_sum();
Sbp S(int64_t d) { return Sbp::split(d); }

SbpSig sig(std::initializer_list<Sbp> in, std::initializer_list<Sbp> out) {
  SbpSig s;
  for (Sbp x : in) s.in.push_back(x);
  for (Sbp x : out) s.out.push_back(x);
  return s;
}
// Every input and every output under the same Sbp.
SbpSig uniform(const SbpRuleCtx& c, Sbp x) {
  SbpSig s;
  for (size_t i = 0; i < c.inputs.size(); ++i) s.in.push_back(x);
  for (size_t j = 0; j < c.metas.size(); ++j) s.out.push_back(x);
  return s;
}

// The op's attribute `name` (its schema's position), for rules shared by ops of several schemas.
const AttrValue& named_attr(const SbpRuleCtx& c, std::string_view name) {
  for (size_t k = 0; k < c.op.attr_names.size(); ++k)
    if (c.op.attr_names[k] == name) return c.attrs.at(k);
  fail("[{}] internal error: its SBP rule reads an attribute '{}' it does not have", c.op.name,
       name);
}

}  // namespace

// Elementwise with broadcasting: output dim d may be split when every input either has the
// dim at full size (split too) or broadcasts over it (then broadcast).
void elementwise_signatures(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const auto& osz = c.metas[0].sizes;
  const int64_t n = int64_t(osz.size());
  for (int64_t d = 0; d < n; ++d) {
    SbpSig s;
    bool any_split = false;
    for (const Tensor& t : c.inputs) {
      if (!t.defined()) {
        s.in.push_back(B);
        continue;
      }
      const int64_t k = d - (n - t.dim());
      if (k >= 0 && t.size(k) == osz[size_t(d)]) {
        s.in.push_back(S(k));
        any_split = true;
      } else {
        s.in.push_back(B);
      }
    }
    if (!any_split) continue;
    for (size_t j = 0; j < c.metas.size(); ++j) s.out.push_back(S(d));
    out.push_back(std::move(s));
  }
}

// Reductions over `dims` (a list, empty = every dim: ReduceDimsAttrs) or one `dim` (an int, or
// none: DimReduceAttrs, argmax/argmin) with keepdim, the schemas' second field alike: splits of
// kept dims stay; `partial` adds S(reduced) -> P and P -> P (sums).
void reduction_signatures(const SbpRuleCtx& c, Sigs& out, bool partial) {
  out.push_back(uniform(c, B));
  if (partial) out.push_back(uniform(c, P));
  const Tensor& x = c.inputs[0];
  const int64_t nd = x.dim();
  std::vector<bool> reduced(size_t(nd), false);
  const AttrValue& dv = c.attrs.at(0);  // dims or dim: the two schemas' first field
  if (const auto* dims = std::get_if<DimVector>(&dv)) {
    if (dims->empty()) reduced.assign(size_t(nd), true);
    for (int64_t d : *dims) reduced[size_t(wrap_dim(d, nd, c.op.name.c_str()))] = true;
  } else if (const auto* d = std::get_if<int64_t>(&dv)) {
    if (nd == 0) return;
    reduced[size_t(wrap_dim(*d, nd, c.op.name.c_str()))] = true;
  } else {
    return;
  }
  const bool keepdim = reduce_detail::ReduceDimsAttrs::get<"keepdim">(c.attrs);
  int64_t removed = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[size_t(d)]) {
      ++removed;
      if (partial) {
        SbpSig s = uniform(c, P);
        s.in[0] = S(d);
        out.push_back(std::move(s));
      }
      continue;
    }
    SbpSig s = uniform(c, S(keepdim ? d : d - removed));
    s.in.assign(c.inputs.size(), B);
    s.in[0] = S(d);
    out.push_back(std::move(s));
  }
}

namespace {

void linear_all(const SbpRuleCtx& c, Sigs& out) {
  elementwise_signatures(c, out);
  out.push_back(uniform(c, P));
}
void div(const SbpRuleCtx& c, Sigs& out) {  // P / B
  elementwise_signatures(c, out);
  out.push_back(sig({P, B}, {P}));
}
void mul(const SbpRuleCtx& c, Sigs& out) {  // P * B, B * P
  div(c, out);
  out.push_back(sig({B, P}, {P}));
}
void mm(const SbpRuleCtx&, Sigs& out) {
  out = {sig({B, B}, {B}),       sig({S(0), B}, {S(0)}), sig({B, S(1)}, {S(1)}),
         sig({S(1), S(0)}, {P}), sig({P, B}, {P}),       sig({B, P}, {P})};
}
void bmm(const SbpRuleCtx&, Sigs& out) {
  out = {sig({B, B}, {B}),       sig({S(0), S(0)}, {S(0)}), sig({S(1), B}, {S(1)}),
         sig({B, S(2)}, {S(2)}), sig({S(2), S(1)}, {P}),    sig({P, B}, {P}),
         sig({B, P}, {P})};
}
// addmm / baddbmm (self, a, b -> beta * self + alpha * a @ b): the product's signatures, with
// self (broadcast to the output's shape) split like the output where it has that dim at full
// size, broadcast where it broadcasts over it, and partial where the product is.
template <bool Batched> void addmm(const SbpRuleCtx& c, Sigs& out) {
  Sigs prod;
  if (Batched) bmm(c, prod);
  else mm(c, prod);
  const Tensor& self = c.inputs[0];
  const auto& osz = c.metas[0].sizes;
  const int64_t on = int64_t(osz.size());
  for (const SbpSig& s : prod) {
    const Sbp o = s.out[0];
    Sbp bs = o.is_partial_sum() ? P : B;
    if (o.is_split()) {
      const int64_t k = o.dim() - (on - self.dim());
      if (k >= 0 && self.size(k) == osz[size_t(o.dim())]) bs = S(k);
    }
    SbpSig t;
    t.in = {bs, s.in[0], s.in[1]};
    t.out = {o};
    out.push_back(std::move(t));
  }
}
void linear(const SbpRuleCtx& c, Sigs& out) {
  const int64_t n = c.inputs[0].dim();
  const bool bias = c.inputs.size() > 2 && c.inputs[2].defined();
  auto with_bias = [&](SbpSig s, Sbp b) {
    if (c.inputs.size() > 2) s.in.push_back(bias ? b : B);
    return s;
  };
  out.push_back(with_bias(sig({B, B}, {B}), B));
  for (int64_t d = 0; d + 1 < n; ++d) out.push_back(with_bias(sig({S(d), B}, {S(d)}), B));
  out.push_back(with_bias(sig({B, S(0)}, {S(n - 1)}), S(0)));  // column parallel
  out.push_back(with_bias(sig({S(n - 1), S(1)}, {P}), P));     // row parallel
  out.push_back(with_bias(sig({P, B}, {P}), P));
}
void sum(const SbpRuleCtx& c, Sigs& out) { reduction_signatures(c, out, true); }

int64_t mesh_ranks(const Tensor& x) {
  int64_t ranks = 1;
  for (int64_t h : x.impl()->global->placement.hierarchy()) ranks *= h;
  return ranks;
}

// view/reshape: a split dim d of the input maps to output dim k when both start at the same
// flat position (equal products of the dims before them) and either
//   - dim d survives whole as dim k, or
//   - dim d is split into dims k, k+1, ... (in[d] = o[k] * o[k+1] * ...) with o[k] divisible
//     by the ranks, or
//   - dims d, d+1, ... merge into dim k (o[k] = in[d] * in[d+1] * ...) with in[d] divisible by
//     the ranks:
// then every rank's piece is a whole block of both (the balanced pieces agree). A 2-D mesh is
// checked against all its ranks (nested splits divide further).
void view(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  out.push_back(uniform(c, P));
  IntArrayRef in = c.inputs[0].sizes();
  const auto& o = c.metas[0].sizes;
  const int64_t ranks = mesh_ranks(c.inputs[0]);
  // prefix products: pin[d] = in[0] * ... * in[d-1]
  std::vector<int64_t> pin(in.size() + 1, 1), pout(o.size() + 1, 1);
  for (size_t d = 0; d < in.size(); ++d) pin[d + 1] = pin[d] * in[d];
  for (size_t k = 0; k < o.size(); ++k) pout[k + 1] = pout[k] * o[k];
  auto find_prefix = [](const std::vector<int64_t>& pre, int64_t v, size_t from) -> int64_t {
    for (size_t m = from; m < pre.size(); ++m)
      if (pre[m] == v) return int64_t(m);
    return -1;
  };
  for (size_t d = 0; d < in.size(); ++d) {
    for (size_t k = 0; k < o.size(); ++k) {
      if (pout[k] != pin[d]) continue;
      bool ok = o[k] == in[d];
      if (!ok && in[d] > 0 && o[k] > 0 && in[d] % o[k] == 0 && o[k] % ranks == 0) {
        // dim d ends where some later output dim ends: in[d] = o[k] * ... * o[m - 1]
        ok = find_prefix(pout, pin[d + 1], k + 1) >= 0;
      }
      if (!ok && in[d] > 0 && o[k] > 0 && o[k] % in[d] == 0 && in[d] % ranks == 0) {
        // dim k ends where some later input dim ends: o[k] = in[d] * ... * in[m - 1]
        ok = find_prefix(pin, pout[k + 1], d + 1) >= 0;
      }
      if (ok) {
        out.push_back(sig({S(int64_t(d))}, {S(int64_t(k))}));
        break;
      }
    }
  }
}
// view / expand (size): the local piece's size
void view_localize(const SbpRuleCtx&, const std::vector<DimVector>& local, Attrs& a) {
  a = shape_detail::SizeAttrs::make(local[0]);
}
// select (dim, index) of a dim the split does not cut: the split stays, renumbered past the
// selected dim; linear, so partial sums stay partial.
void drop_one_dim(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  out.push_back(uniform(c, P));
  const int64_t nd = c.inputs[0].dim();
  if (nd == 0) return;
  const int64_t dim = wrap_dim(shape_detail::DimAttrs::get<"dim">(c.attrs), nd, c.op.name.c_str());
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim) out.push_back(sig({S(d)}, {S(d > dim ? d - 1 : d)}));
}
// expand(size): a split of a dim the expansion keeps (the input's size is the output's) stays,
// numbered as the output's dim; partial sums stay partial (each addend expands alike).
void expand(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  out.push_back(uniform(c, P));
  const int64_t ni = c.inputs[0].dim(), no = int64_t(c.metas[0].sizes.size());
  for (int64_t d = 0; d < ni; ++d) {
    const int64_t k = d + (no - ni);
    if (c.inputs[0].size(d) == c.metas[0].sizes[size_t(k)]) out.push_back(sig({S(d)}, {S(k)}));
  }
}
void permute(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  out.push_back(uniform(c, P));
  const DimVector& dims = shape_detail::DimsAttrs::get<"dims">(c.attrs);
  const int64_t nd = c.inputs[0].dim();
  for (size_t k = 0; k < dims.size(); ++k)
    out.push_back(sig({S(wrap_dim(dims[k], nd, "permute"))}, {S(int64_t(k))}));
}
void per_sample(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  if (c.inputs[0].dim() == 0) return;
  SbpSig s = uniform(c, S(0));
  for (size_t i = 1; i < s.in.size(); ++i) s.in[i] = B;
  out.push_back(std::move(s));
}
// conv2d/3d_backward_weight (g, x) or (x, g): both split on the batch -> the weight's
// gradient is a partial sum (data parallel).
void per_sample_weight_grad(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  if (c.inputs[0].dim() == 0 || c.inputs[1].dim() == 0) return;
  out.push_back(sig({S(0), S(0)}, {P}));
}
// Resampling backward ops (avg/adaptive pooling, upsampling: grad_output -> grad_input, the
// input's sizes the last attr, conv_detail::WithInputSize): batch or channel split, the sizes
// rewritten for the pieces.
void per_sample_channel(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  if (c.inputs[0].dim() < 2) return;
  out.push_back(uniform(c, S(0)));
  out.push_back(uniform(c, S(1)));
}
void last_attr_localize(const SbpRuleCtx&, const std::vector<DimVector>& local, Attrs& a) {
  a.values.back() = local[0];
}
// gather / scatter / scatter_add (attr 0 = dim): a split of another dim that every input has
// at the output's size (the pieces then line up element for element).
void along_dim(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t nd = int64_t(c.metas[0].sizes.size());
  if (nd == 0) return;
  const int64_t dim = wrap_dim(index_detail::DimAttrs::get<"dim">(c.attrs), nd, c.op.name.c_str());
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim) continue;
    bool lined_up = true;
    for (const Tensor& t : c.inputs)
      lined_up &= t.defined() && t.dim() == nd && t.size(d) == c.metas[0].sizes[size_t(d)];
    if (lined_up) out.push_back(uniform(c, S(d)));
  }
}
// index_add(self, index, src; dim): the rows of a split src (and index) add into their own
// copy of self -> a partial sum (an embedding's or index_select's gradient on a split batch);
// self and src split alike on another dim, with the whole index, stay split.
void index_add(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t nd = c.inputs[0].dim();
  if (nd == 0) return;
  const int64_t dim = wrap_dim(index_detail::IndexAddAttrs::get<"dim">(c.attrs), nd, "index_add");
  out.push_back(sig({P, S(0), S(dim)}, {P}));
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim && c.inputs[2].dim() == nd && c.inputs[2].size(d) == c.inputs[0].size(d))
      out.push_back(sig({S(d), B, S(d)}, {S(d)}));
}
// index_select(x, index; dim): a split index picks a split of the output along dim (x whole);
// x split on another dim, with the whole index, stays split.
void index_select(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t nd = c.inputs[0].dim();
  if (nd == 0) return;
  const int64_t dim = wrap_dim(index_detail::DimAttrs::get<"dim">(c.attrs), nd, "index_select");
  out.push_back(sig({B, S(0)}, {S(dim)}));
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim) out.push_back(sig({S(d), B}, {S(d)}));
}
void embedding(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t nd = c.inputs[1].dim();
  for (int64_t d = 0; d < nd; ++d) out.push_back(sig({B, S(d)}, {S(d)}));
  out.push_back(sig({S(1), B}, {S(nd)}));  // each rank holds some embedding columns
}

// The M rows of layer_norm / rms_norm statistics are x's leading `axis` dims flattened: a
// split of dim 0 splits them into the same balanced pieces when axis is 1, or when dim 0
// divides evenly over every rank of the mesh (then each piece's rows are a whole block).
bool rows_follow_dim0(const Tensor& x, int64_t axis) {
  if (axis < 1 || x.dim() < 1) return false;
  if (axis == 1) return true;
  return x.size(0) % mesh_ranks(x) == 0;
}
// The normalizations' signatures: all B, and when the statistics' rows split like the samples,
// x S(0) with the parameters B -> every output S(0) (data parallel) ...
void samples_split(const SbpRuleCtx& c, Sigs& out, bool rows_follow) {
  out.push_back(uniform(c, B));
  if (!rows_follow) return;
  SbpSig s = uniform(c, S(0));
  for (size_t i = 1; i < s.in.size(); ++i) s.in[i] = B;
  out.push_back(std::move(s));
}
// ... and for their backward (dy, x, weight, mean, rstd -> gx, gweight, gbias) the parameter
// gradients of each piece's rows as partial sums.
void samples_split_backward(const SbpRuleCtx& c, Sigs& out, bool rows_follow) {
  out.push_back(uniform(c, B));
  if (rows_follow) out.push_back(sig({S(0), S(0), B, S(0), S(0)}, {S(0), P, P}));
}
// layer_norm / rms_norm (x, weight[, bias] -> y, [mean,] rstd) and their backward.
void norm(const SbpRuleCtx& c, Sigs& out) {
  samples_split(c, out, rows_follow_dim0(c.inputs[0], nn_detail::NormAttrs::get<"axis">(c.attrs)));
}
void norm_backward(const SbpRuleCtx& c, Sigs& out) {
  samples_split_backward(c, out,
                         rows_follow_dim0(c.inputs[1], nn_detail::NormAttrs::get<"axis">(c.attrs)));
}

// group_norm (x [N, C, *], weight, bias [C] -> y, mean, rstd [N * G]; attr 0 = G): data
// parallel over dim 0 when the (sample, group) rows split into the same balanced pieces as the
// samples (one group, or N divisible by every rank of the mesh).
bool group_rows_follow_dim0(const Tensor& x, int64_t groups) {
  return x.dim() >= 2 && (groups == 1 || x.size(0) % mesh_ranks(x) == 0);
}
void group_norm(const SbpRuleCtx& c, Sigs& out) {
  samples_split(
      c, out,
      group_rows_follow_dim0(c.inputs[0], nn_detail::GroupNormAttrs::get<"num_groups">(c.attrs)));
}
void group_norm_backward(const SbpRuleCtx& c, Sigs& out) {
  samples_split_backward(
      c, out,
      group_rows_follow_dim0(c.inputs[1], nn_detail::GroupNormAttrs::get<"num_groups">(c.attrs)));
}

// batch_norm (x [N, C, *], weight, bias, running_mean, running_var [C] -> y, save_mean,
// save_invstd, batch var [C]; attr 0 = training): channels split (x S(1), every [C] tensor
// S(0)) in both modes, each rank normalizing its own channels; in evaluation mode the running
// statistics make it per-sample, so x split on any dim but the channels with the [C] tensors
// whole. (Training on a split batch needs the statistics of the whole batch, a synchronized
// batch norm: it runs on broadcast values.)
void batch_norm(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t nd = c.inputs[0].dim();
  if (nd < 2) return;
  out.push_back(sig({S(1), S(0), S(0), S(0), S(0)}, {S(1), S(0), S(0), S(0)}));
  if (nn_detail::BatchNormAttrs::get<"training">(c.attrs)) return;
  for (int64_t d = 0; d < nd; ++d)
    if (d != 1) out.push_back(sig({S(d), B, B, B, B}, {S(d), B, B, B}));
}
// its backward (dy, x, weight, save_mean, save_invstd -> gx, gweight, gbias): channels split;
// in evaluation mode per-sample, the parameter gradients partial sums.
void batch_norm_backward(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t nd = c.inputs[1].dim();
  if (nd < 2) return;
  out.push_back(sig({S(1), S(1), S(0), S(0), S(0)}, {S(1), S(0), S(0)}));
  if (nn_detail::BatchNormAttrs::get<"training">(c.attrs)) return;
  for (int64_t d = 0; d < nd; ++d)
    if (d != 1) out.push_back(sig({S(d), S(d), B, B, B}, {S(d), P, P}));
}

// cross_entropy with class indices (x [N, C], target [N], weight [C] -> loss, logsumexp [N],
// total target weight []): rows split for reduction None (loss S(0)) and Sum (loss P); the
// total weight is a sum (P). Mean is Sum / total weight, which cross_entropy() computes that
// way for global inputs (the mean of pieces is not a piece of the mean).
constexpr int64_t kNone = 0, kMean = 1;  // of::Reduction
void cross_entropy(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t red = nn_detail::CrossEntropyAttrs::get<"reduction">(c.attrs);
  if (c.inputs[0].dim() != 2 || red == kMean) return;
  out.push_back(sig({S(0), S(0), B}, {red == kNone ? S(0) : P, S(0), P}));
}
// its backward (g, x, target, weight, logsumexp, total weight -> gx); None and Sum do not
// read the total weight, so either of its SBPs is taken as it is.
void cross_entropy_backward(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t red = nn_detail::CrossEntropyAttrs::get<"reduction">(c.attrs);
  if (c.inputs[1].dim() != 2 || red == kMean) return;
  const Sbp g = red == kNone ? S(0) : B;
  out.push_back(sig({g, S(0), S(0), B, S(0), P}, {S(0)}));
  out.push_back(sig({g, S(0), S(0), B, S(0), B}, {S(0)}));
}

// Ops of one input that work along some of its dims (`along`): a split of any other dim stays
// split (as output dim d + shift, for ops that add leading dims); `partial`: linear ops keep
// partial sums. Every output (sort's and topk's indices too) takes the same SBP.
void split_others(const SbpRuleCtx& c, Sigs& out, const std::vector<bool>& along, bool partial,
                  int64_t shift = 0) {
  out.push_back(uniform(c, B));
  if (partial) out.push_back(uniform(c, P));
  for (int64_t d = 0; d < int64_t(along.size()); ++d) {
    if (along[size_t(d)]) continue;
    SbpSig s = uniform(c, S(d + shift));
    s.in[0] = S(d);
    out.push_back(std::move(s));
  }
}
std::vector<bool> dims_marked(int64_t nd, std::initializer_list<int64_t> dims) {
  std::vector<bool> m(size_t(nd), false);
  for (int64_t d : dims) m[size_t(wrap_dim(d, nd, "sbp"))] = true;
  return m;
}
// Ops along their `dim` attr (softmax and its backward, sort, topk, scans, slice, cat): a split
// of any other dim stays; `Linear` ones keep partial sums.
template <bool Linear> void along_one_dim(const SbpRuleCtx& c, Sigs& out) {
  const int64_t nd = c.inputs[0].dim();
  const int64_t dim = std::get<int64_t>(named_attr(c, "dim"));
  if (nd == 0) {
    out.push_back(uniform(c, B));
    if (Linear) out.push_back(uniform(c, P));
    return;
  }
  split_others(c, out, dims_marked(nd, {dim}), Linear);
}
// flip (attr 0 = dims) and roll (attrs shifts, dims; no dims: the flattened tensor): linear,
// along their dims.
template <bool Roll> void flip_roll(const SbpRuleCtx& c, Sigs& out) {
  const int64_t nd = c.inputs[0].dim();
  const DimVector& dims = std::get<DimVector>(named_attr(c, "dims"));
  std::vector<bool> along(size_t(nd), dims.empty() && Roll);
  for (int64_t d : dims) along[size_t(wrap_dim(d, nd, c.op.name.c_str()))] = true;
  split_others(c, out, along, true);
}
// tril / triu: along the last two dims (batch dims split); linear.
void triangle(const SbpRuleCtx& c, Sigs& out) {
  const int64_t nd = c.inputs[0].dim();
  std::vector<bool> along(size_t(nd), false);
  for (int64_t d = std::max<int64_t>(nd - 2, 0); d < nd; ++d) along[size_t(d)] = true;
  split_others(c, out, along, true);
}
// pad (attrs pad = [left, right] pairs from the last dim, mode, value): along the padded dims;
// constant zero padding is linear.
void pad(const SbpRuleCtx& c, Sigs& out) {
  const int64_t nd = c.inputs[0].dim();
  using A = index_detail::PadAttrs;
  const DimVector& pads = A::get<"pad">(c.attrs);
  std::vector<bool> along(size_t(nd), false);
  for (size_t q = 0; 2 * q < pads.size() && int64_t(q) < nd; ++q)
    if (pads[2 * q] != 0 || (2 * q + 1 < pads.size() && pads[2 * q + 1] != 0))
      along[size_t(nd - 1) - q] = true;
  split_others(c, out, along,
               A::get<"mode">(c.attrs) == "constant" && A::get<"value">(c.attrs) == 0.0);
}
// one_hot: each index's row of classes (a new last dim); the index dims split.
void one_hot(const SbpRuleCtx& c, Sigs& out) {
  split_others(c, out, std::vector<bool>(size_t(c.inputs[0].dim()), false), false);
}
// repeat (attr 0 = repeats, one per output dim; the input's dims are the last ones): a dim
// repeated once stays split; linear.
void repeat(const SbpRuleCtx& c, Sigs& out) {
  const int64_t nd = c.inputs[0].dim();
  const DimVector& reps = index_detail::RepeatAttrs::get<"repeats">(c.attrs);
  const int64_t shift = int64_t(reps.size()) - nd;
  std::vector<bool> along(size_t(nd), true);
  for (int64_t d = 0; d < nd && shift >= 0; ++d) along[size_t(d)] = reps[size_t(d + shift)] != 1;
  split_others(c, out, along, true, std::max<int64_t>(shift, 0));
}
// im2col (a batched [N, C, H, W] input) and col2im (a batched [N, C * k, L] input): per sample.
template <int BatchedDims> void per_image(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  if (c.inputs[0].dim() == BatchedDims) out.push_back(uniform(c, S(0)));
}

// diagonal (attrs offset, dim1, dim2; a view): the other dims keep their order and the
// diagonal becomes the last dim, so a split of another dim stays (renumbered).
void diagonal(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const int64_t nd = c.inputs[0].dim();
  if (nd < 2) return;
  using A = shape_detail::DiagonalAttrs;
  const int64_t d1 = wrap_dim(A::get<"dim1">(c.attrs), nd, "diagonal"),
                d2 = wrap_dim(A::get<"dim2">(c.attrs), nd, "diagonal");
  int64_t k = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (d == d1 || d == d2) continue;
    out.push_back(sig({S(d)}, {S(k++)}));
  }
  out.push_back(uniform(c, P));
}

// Row-wise ops (lstm_cell and its backward: every input and output [b, *], row r of each
// output from row r of the inputs): rows split alike.
void rowwise(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  for (const Tensor& t : c.inputs)
    if (t.defined() && (t.dim() == 0 || t.size(0) != c.metas[0].sizes[0])) return;
  out.push_back(uniform(c, S(0)));
}

// ctc_loss (log_probs [T, N, C], padded targets [N, S], input_lengths [N], target_lengths [N]
// -> nll [N], log_alpha [N, T, 2S + 1]) and its backward (grad [N], those inputs, log_alpha ->
// grad log_probs): per sample, so the batch splits (log_probs on dim 1). Concatenated 1-D
// targets run on broadcast values (a sample's targets start where the earlier ones end).
void ctc(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  const bool bwd = c.inputs.size() == 6;
  const Tensor& lp = c.inputs[bwd ? 1 : 0];
  const Tensor& tg = c.inputs[bwd ? 2 : 1];
  if (lp.dim() != 3 || tg.dim() != 2) return;
  if (bwd) out.push_back(sig({S(0), S(1), S(0), S(0), S(0), S(0)}, {S(1)}));
  else out.push_back(sig({S(1), S(0), S(0), S(0)}, {S(0), S(0)}));
}

// scaled_dot_product_attention and its backward (q, k, v, mask -> out, lse; g, q, k, v, mask,
// out, lse -> dq, dk, dv over the flattened batch dim 0): per-sample, so batch splits stay,
// except with dropout (its draws are numbered by the global batch index).
void attention(const SbpRuleCtx& c, Sigs& out) {
  out.push_back(uniform(c, B));
  if (nn_detail::SdpaAttrs::get<"dropout_p">(c.attrs) != 0.0) return;
  out.push_back(uniform(c, S(0)));
}

}  // namespace

// NOTE [Attention split by heads]: global q, k, v of the same batch dims under one SBP that
// splits only batch dims (the heads of [B, H, L, E], Megatron's tensor parallel attention,
// or the batch) are attended piece by piece: every rank runs attention on its heads, with no
// communication, and the result has the same SBP. A mask goes with them: split where it has
// the split dim at full size, broadcast where it broadcasts over it (a global mask is boxed
// so; a local one must broadcast over every split dim). With dropout each piece draws as
// the batches it holds would in one process (NOTE [Attention draw map]): the generator
// reserves the logical count on every rank, and each rank keeps its elements of that draw.
Tensor attention_by_batch_pieces(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const Tensor& attn_mask, double dropout_p,
                                 const AttentionPieceFn& local) {
  const char* op = "scaled_dot_product_attention";
  if (query.is_global() && key.is_global() && value.is_global() && query.dim() == key.dim() &&
      query.dim() == value.dim()) {
    const int64_t L = query.size(-2), S = key.size(-2), Ev = value.size(-1);
    const NdSbp sbp = query.sbp();
    // (a rank outside the placement takes the op below, which gives it handles)
    bool pieces = key.sbp() == sbp && value.sbp() == sbp && key.placement() == query.placement() &&
                  value.placement() == query.placement() &&
                  global::holds_piece(query.placement(), op);
    bool any_split = false;
    for (const Sbp& s : sbp) {
      if (s.is_partial_sum() || (s.is_split() && s.dim() >= query.dim() - 2)) pieces = false;
      any_split |= s.is_split();
    }
    for (int64_t d = 0; pieces && d < query.dim() - 2; ++d)
      pieces = query.size(d) == key.size(d) && query.size(d) == value.size(d);
    // with dropout the draws are numbered over q's batch dims: a mask must not widen them
    DimVector qshape(query.sizes().begin(), query.sizes().end() - 2);
    qshape.push_back(L);
    qshape.push_back(S);
    if (dropout_p > 0 && attn_mask.defined() && !broadcasts_to(attn_mask.sizes(), qshape))
      pieces = false;
    // the mask's SBP that lines its pieces up with the operands' (or none: not piece by piece)
    Tensor mask_piece;
    if (pieces && any_split && attn_mask.defined()) {
      NdSbp msbp(sbp.size(), Sbp::broadcast());
      const int64_t shift = query.dim() - attn_mask.dim();
      for (size_t a = 0; a < sbp.size() && pieces; ++a) {
        if (!sbp[a].is_split()) continue;
        const int64_t k = sbp[a].dim() - shift;
        if (k >= 0 && attn_mask.size(k) == query.size(sbp[a].dim())) {
          if (!attn_mask.is_global()) pieces = false;  // a local mask with the split dim
          else msbp[a] = Sbp::split(k);
        } else if (k >= 0 && attn_mask.size(k) != 1) {
          pieces = false;  // does not broadcast: the op's checks raise below
        }
      }
      if (pieces && attn_mask.is_global()) {
        if (attn_mask.placement() != query.placement()) pieces = false;
        else mask_piece = global::piece_of(attn_mask.to_global(attn_mask.placement(), msbp));
      } else if (pieces) {
        mask_piece = attn_mask;
      }
    }
    if (pieces && any_split) {
      DimVector draw_map;
      if (dropout_p > 0) {
        const global::Box box = global::piece_box(query.sizes(), sbp, query.placement(),
                                                  global::my_coord(query.placement(), op));
        for (int64_t d = 0; d < query.dim() - 2; ++d)
          for (int64_t x : {query.size(d), box.start[size_t(d)], box.size[size_t(d)]})
            draw_map.push_back(x);
      }
      Tensor o = local(global::piece_of(query), global::piece_of(key), global::piece_of(value),
                       mask_piece, draw_map);
      DimVector oshape(query.sizes().begin(), query.sizes().end() - 2);
      oshape.push_back(L);
      oshape.push_back(Ev);
      return global::piece_to_global(o, query.placement(), sbp, oshape);
    }
  }
  return Tensor();
}

const SbpRule kWholeValues{[](const SbpRuleCtx& c, Sigs& out) { out.push_back(uniform(c, B)); }};
const SbpRule kLinearElementwise{linear_all};
const SbpRule kBilinearElementwise{mul};
const SbpRule kLinearInFirstElementwise{div};
const SbpRule kMatmul{mm};
const SbpRule kBatchedMatmul{bmm};
const SbpRule kMatmulPlusSelf{addmm<false>};
const SbpRule kBatchedMatmulPlusSelf{addmm<true>};
const SbpRule kMatmulTransposedWeight{linear};
const SbpRule kSumOverDims{sum};
const SbpRule kReshape{view, view_localize};
const SbpRule kPermuteDims{permute};
const SbpRule kBroadcastTo{expand, view_localize};
const SbpRule kDropOneDim{drop_one_dim};
const SbpRule kDiagonalOfTwoDims{diagonal};
const SbpRule kAlongOneDim{along_one_dim<false>};
const SbpRule kLinearAlongOneDim{along_one_dim<true>};
const SbpRule kLinearAlongDims{flip_roll<false>};
const SbpRule kLinearAlongDimsOrFlat{flip_roll<true>};
const SbpRule kLinearAlongLastTwoDims{triangle};
const SbpRule kAlongPaddedDims{pad};
const SbpRule kRepeatedDims{repeat};
const SbpRule kNewLastDim{one_hot};
const SbpRule kPickAlongDim{index_select};
const SbpRule kAddAlongDim{index_add};
const SbpRule kLinedUpAlongDim{along_dim};
const SbpRule kLookupRows{embedding};
const SbpRule kSamplesSplit{per_sample};
const SbpRule kSamplesSplitToPartial{per_sample_weight_grad};
const SbpRule kSamplesOrChannelsSplit{per_sample_channel};
const SbpRule kSamplesOrChannelsSplitResized{per_sample_channel, last_attr_localize};
const SbpRule kSamplesSplitRank4{per_image<4>};
const SbpRule kSamplesSplitRank3{per_image<3>};
const SbpRule kSamplesSplitWithoutDropout{attention};
const SbpRule kRowwise{rowwise};
const SbpRule kSequenceBatches{ctc};
const SbpRule kRowStatistics{norm};
const SbpRule kRowStatisticsBackward{norm_backward};
const SbpRule kGroupStatistics{group_norm};
const SbpRule kGroupStatisticsBackward{group_norm_backward};
const SbpRule kChannelStatistics{batch_norm};
const SbpRule kChannelStatisticsBackward{batch_norm_backward};
const SbpRule kRowLosses{cross_entropy};
const SbpRule kRowLossesBackward{cross_entropy_backward};

}  // namespace sbp_rules
}  // namespace oneflow

// sort and topk (NaN as the largest value, PyTorch's convention), and argsort: their meta, VJPs,
// registration and public functions. Kernels: src/cpu/sort.cpp.
#include "autograd/node.h"
#include "cpu/sort.h"
#include "dispatch.h"
#include "global/rules.h"
#include "ops/checks.h"
#include "ops/index_common.h"

namespace oneflow {
using namespace index_detail;
namespace {

// ---------------------------------------------------------------- sort / topk

void sort_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  wrap_dim(SortAttrs::get<"dim">(a), x.dim(), "sort");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({x.sizes().dims(), {}, 0, kInt64, x.device()});
}
TensorList sort_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = g[0].new_zeros(c.input_sizes(0));
  return {z.scatter(SortAttrs::get<"dim">(c.attrs()), c.output(1), g[0])};
}

void topk_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const int64_t d = wrap_dim(TopkAttrs::get<"dim">(a), x.dim(), "topk");
  const int64_t k = TopkAttrs::get<"k">(a), n = size_at(x, d);
  OF_CHECK(k >= 0 && k <= n,
           "[topk] k ({}) is out of range for dimension {} with size {} (input {})", k, d, n,
           shape_str(x.sizes()));
  DimVector sz = x.sizes().dims();
  if (x.dim() > 0) sz[d] = k;
  out.push_back({sz, {}, 0, x.dtype(), x.device()});
  out.push_back({sz, {}, 0, kInt64, x.device()});
}
TensorList topk_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = g[0].new_zeros(c.input_sizes(0));
  if (z.dim() == 0) return {g[0].numel() ? g[0].reshape({}) : z};
  return {z.scatter(TopkAttrs::get<"dim">(c.attrs()), c.output(1), g[0])};
}

}  // namespace

void register_sort_ops() {
  register_op({.name = "sort",
               .attr_names = SortAttrs::names(),
               .attr_types = SortAttrs::types(),
               .infer_meta = sort_meta,
               .cpu = cpu::sort,
               .vjp = sort_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kAlongOneDim,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "topk",
               .attr_names = TopkAttrs::names(),
               .attr_types = TopkAttrs::types(),
               .infer_meta = topk_meta,
               .cpu = cpu::topk,
               .vjp = topk_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kAlongOneDim,
               .contiguous_inputs = kEveryInput});
}

// ---------------------------------------------------------------- public functions

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  check_defined("sort", x);
  auto r = dispatch(OF_OP("sort"), {x}, SortAttrs::make(dim, descending));
  return {r[0], r[1]};
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return std::get<1>(sort(x, dim, descending));
}
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  check_defined("topk", x);
  auto r = dispatch(OF_OP("topk"), {x}, TopkAttrs::make(k, dim, largest, sorted));
  return {r[0], r[1]};
}

// ---------------------------------------------------------------- Tensor methods

std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return oneflow::sort(*this, dim, descending);
}
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return oneflow::topk(*this, k, dim, largest, sorted);
}

}  // namespace oneflow

// sort and topk (NaN as the largest value, PyTorch's convention), and argsort.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "autograd/node.h"
#include "global/global.h"
#include "global/rules.h"
#include "cpu/loops.h"
#include "dispatch.h"
#include "ops/checks.h"
#include "ops/index_common.h"

namespace oneflow {
using namespace index_detail;
namespace {

// ---------------------------------------------------------------- sort / topk

template <class C> bool nan_v(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}
// Strict orders with NaN as the largest value (PyTorch's convention).
template <class C> bool less_nan(C a, C b) { return nan_v(b) ? !nan_v(a) : a < b; }

// Calls f(in_offset, out_offset, stride) for every line along dim d of a contiguous tensor of
// `shape` (the output has n_out elements along d); lines are split over threads.
template <class F> void for_each_line(IntArrayRef shape, int64_t d, int64_t n_out, F&& f) {
  const int64_t outer = prod_of(shape, 0, size_t(d)), inner = prod_of(shape, size_t(d + 1));
  const int64_t n = shape[d];
  parallel_for(0, outer * inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n)),
               [&](int64_t b, int64_t e) {
                 for (int64_t l = b; l < e; ++l) {
                   const int64_t o = l / inner, i = l % inner;
                   f(o * n * inner + i, o * n_out * inner + i, inner);
                 }
               });
}

void sort_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  wrap_dim(SortAttrs::get<"dim">(a), x.dim(), "sort");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({x.sizes().dims(), {}, 0, kInt64, x.device()});
}
void sort_cpu(const KernelArgs& k) {
  Tensor x = kernel_contiguous(k.inputs[0]);
  const bool desc = SortAttrs::get<"descending">(k.attrs);
  if (x.numel() == 0) return;
  if (x.dim() == 0) x = make_view(x, {1}, {1}, x.storage_offset());
  const int64_t d = wrap_dim(SortAttrs::get<"dim">(k.attrs), x.dim(), "sort");
  const int64_t n = x.sizes()[d];
  int64_t* ip = static_cast<int64_t*>(k.outputs[1].data_ptr());
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(k.outputs[0].data_ptr());
    for_each_line(x.sizes(), d, n, [&](int64_t xo, int64_t oo, int64_t st) {
      std::vector<std::pair<C, int64_t>> buf(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) buf[j] = {C(xp[xo + j * st]), j};
      if (desc)
        std::stable_sort(buf.begin(), buf.end(),
                         [](const auto& a, const auto& b) { return less_nan(b.first, a.first); });
      else
        std::stable_sort(buf.begin(), buf.end(),
                         [](const auto& a, const auto& b) { return less_nan(a.first, b.first); });
      for (int64_t j = 0; j < n; ++j) {
        vp[oo + j * st] = T(buf[j].first);
        ip[oo + j * st] = buf[j].second;
      }
    });
  });
}
TensorList sort_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = global::zeros_shaped_like(c.input_sizes(0), g[0]);
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
void topk_cpu(const KernelArgs& k) {
  Tensor x = kernel_contiguous(k.inputs[0]);
  const int64_t kk = TopkAttrs::get<"k">(k.attrs);
  const bool largest = TopkAttrs::get<"largest">(k.attrs);
  if (k.outputs[0].numel() == 0) return;
  if (x.dim() == 0) x = make_view(x, {1}, {1}, x.storage_offset());
  const int64_t d = wrap_dim(TopkAttrs::get<"dim">(k.attrs), x.dim(), "topk");
  const int64_t n = x.sizes()[d];
  int64_t* ip = static_cast<int64_t*>(k.outputs[1].data_ptr());
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(k.outputs[0].data_ptr());
    for_each_line(x.sizes(), d, kk, [&](int64_t xo, int64_t oo, int64_t st) {
      std::vector<std::pair<C, int64_t>> buf(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) buf[j] = {C(xp[xo + j * st]), j};
      auto cmp = [largest](const auto& a, const auto& b) {
        if (largest ? less_nan(b.first, a.first) : less_nan(a.first, b.first)) return true;
        if (largest ? less_nan(a.first, b.first) : less_nan(b.first, a.first)) return false;
        return a.second < b.second;  // ties: lower index first (deterministic)
      };
      std::partial_sort(buf.begin(), buf.begin() + kk, buf.end(), cmp);
      for (int64_t j = 0; j < kk; ++j) {
        vp[oo + j * st] = T(buf[j].first);
        ip[oo + j * st] = buf[j].second;
      }
    });
  });
}
TensorList topk_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor z = global::zeros_shaped_like(c.input_sizes(0), g[0]);
  if (z.dim() == 0) return {g[0].numel() ? g[0].reshape({}) : z};
  return {z.scatter(TopkAttrs::get<"dim">(c.attrs()), c.output(1), g[0])};
}

}  // namespace

void register_sort_ops() {
  register_op({.name = "sort",
               .attr_names = SortAttrs::names(),
               .attr_types = SortAttrs::types(),
               .infer_meta = sort_meta,
               .cpu = sort_cpu,
               .vjp = sort_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kSort,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "topk",
               .attr_names = TopkAttrs::names(),
               .attr_types = TopkAttrs::types(),
               .infer_meta = topk_meta,
               .cpu = topk_cpu,
               .vjp = topk_vjp,
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kTopk,
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

// sort.cpp: the CPU kernels of sort and topk (ops/sort.cpp registers them). Each line along the
// dim is copied into a buffer of (value, index) pairs and ordered there, NaN as the largest value
// (PyTorch's convention): sort stable, topk by partial_sort with ties broken by the lower index.
// Lines are split over threads.
#include <algorithm>
#include <utility>
#include <vector>

#include "cpu/sort.h"
#include "ops/index_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {

using namespace index_detail;

namespace {

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

// The first n_out entries of every line along dim d of x in order (descending: largest first;
// NaN counts as the largest; ties: the lower index first, so the order is total and a full sort
// equals a stable one), with their indices; sort takes whole lines, topk the first k.
void sorted_lines(const Tensor& x, int64_t d, int64_t n_out, bool descending, const Tensor& values,
                  const Tensor& indices) {
  const int64_t n = x.sizes()[d];
  int64_t* ip = static_cast<int64_t*>(indices.data_ptr());
  dispatch_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(values.data_ptr());
    for_each_line(x.sizes(), d, n_out, [&](int64_t xo, int64_t oo, int64_t st) {
      std::vector<std::pair<C, int64_t>> buf(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) buf[j] = {C(xp[xo + j * st]), j};
      auto cmp = [descending](const auto& a, const auto& b) {
        if (descending ? less_nan(b.first, a.first) : less_nan(a.first, b.first)) return true;
        if (descending ? less_nan(a.first, b.first) : less_nan(b.first, a.first)) return false;
        return a.second < b.second;
      };
      if (n_out == n) std::sort(buf.begin(), buf.end(), cmp);
      else std::partial_sort(buf.begin(), buf.begin() + n_out, buf.end(), cmp);
      for (int64_t j = 0; j < n_out; ++j) {
        vp[oo + j * st] = T(buf[j].first);
        ip[oo + j * st] = buf[j].second;
      }
    });
  });
}

}  // namespace

void sort(const KernelArgs& k) {
  Tensor x = kernel_contiguous(k.inputs[0]);
  if (x.numel() == 0) return;
  if (x.dim() == 0) x = make_view(x, {1}, {1}, x.storage_offset());
  const int64_t d = wrap_dim(SortAttrs::get<"dim">(k.attrs), x.dim(), "sort");
  sorted_lines(x, d, x.sizes()[d], SortAttrs::get<"descending">(k.attrs), k.outputs[0],
               k.outputs[1]);
}
void topk(const KernelArgs& k) {
  Tensor x = kernel_contiguous(k.inputs[0]);
  // The "sorted" attribute is not read: the k results always come sorted, which also
  // satisfies sorted=false (PyTorch leaves that order unspecified).
  if (k.outputs[0].numel() == 0) return;
  if (x.dim() == 0) x = make_view(x, {1}, {1}, x.storage_offset());
  const int64_t d = wrap_dim(TopkAttrs::get<"dim">(k.attrs), x.dim(), "topk");
  sorted_lines(x, d, TopkAttrs::get<"k">(k.attrs), TopkAttrs::get<"largest">(k.attrs), k.outputs[0],
               k.outputs[1]);
}

}  // namespace oneflow::cpu

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

}  // namespace

void sort(const KernelArgs& k) {
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
void topk(const KernelArgs& k) {
  Tensor x = kernel_contiguous(k.inputs[0]);
  const int64_t kk = TopkAttrs::get<"k">(k.attrs);
  const bool largest = TopkAttrs::get<"largest">(k.attrs);
  // The "sorted" attribute is not read: the k results always come sorted (partial_sort), which
  // also satisfies sorted=false (PyTorch leaves that order unspecified).
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

}  // namespace oneflow::cpu

// sort.cpp: host side of sort/topk on CUDA (sort.cu), with the CPU kernels' attrs, checks and
// messages (src/ops/sort.cpp). Nothing here reads device memory back, so every kernel can be
// captured into a CUDA Graph. (pad_backward is pad.cpp, the LSTM ops lstm.cpp; their device
// code shares sort.cu.)
#include <array>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/dims.h"
#include "cuda/module.h"
#include "cuda/sort.h"
#include "ops/index_attrs.h"

namespace oneflow::cuda_module {
namespace {

// ---------------------------------------------------------------- sort / topk

// sort: attrs dim, descending; topk: attrs k, dim, largest, sorted (always sorted, as on the
// CPU). Outputs values (x's dtype) and int64 indices. NOTE [CUDA sort] in sort.h.
template <bool TopK> void sort_kernel(const KernelArgs& k) {
  const char* op = TopK ? "topk" : "sort";
  const Tensor& x = k.inputs[0];
  const Tensor &values = k.outputs[0], &indices = k.outputs[1];
  const int device = device_of(x, op);
  DeviceGuard guard(device);
  using index_detail::SortAttrs, index_detail::TopkAttrs;
  const int64_t d =
      wrap_dim(TopK ? TopkAttrs::get<"dim">(k.attrs) : SortAttrs::get<"dim">(k.attrs), x.dim(), op);
  const int64_t n = size_at(x, d);
  const int64_t kk = TopK ? TopkAttrs::get<"k">(k.attrs) : n;
  if constexpr (TopK)
    OF_CHECK(kk >= 0 && kk <= n,
             "[topk] k ({}) is out of range for dimension {} with size {} "
             "(input {})",
             kk, d, n, shape_str(x.sizes()));
  if (values.numel() == 0 || x.numel() == 0) return;
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> st;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i == d) continue;
    sizes.push_back(x.sizes()[i]);
    st.push_back({x.strides()[i], values.strides()[i], indices.strides()[i]});
  }
  const Geometry<3> g = coalesce<3>(sizes, st, op, kMaxSortDims);
  SortParams p;
  p.ndim = int(g.sizes.size());
  p.lines = g.numel;
  p.n = n;
  p.k = kk;
  for (int i = 0; i < p.ndim; ++i) {
    p.sizes[i] = g.sizes[size_t(i)];
    for (size_t o = 0; o < 3; ++o) p.strides[o][i] = g.strides[size_t(i)][o];
  }
  p.x_step = stride_at(x, d);
  p.v_step = stride_at(values, d);
  p.i_step = stride_at(indices, d);
  p.descending = TopK ? TopkAttrs::get<"largest">(k.attrs) : SortAttrs::get<"descending">(k.attrs);
  p.x = x.impl()->raw_data();
  p.values = values.impl()->raw_data();
  p.indices = static_cast<int64_t*>(indices.impl()->raw_data());
  p.dtype = x.dtype();
  Tensor work_keys, work_idx;  // alive until the kernels are queued (stream-ordered frees)
  if (n > kSortTile) {
    const int ks = sort_key_size(x.dtype());
    OF_CHECK(ks > 0, "[{}] cuda: unsupported dtype {}", op, dtype_name(x.dtype()));
    const int64_t len = p.lines * n;
    work_keys = make_empty({2 * len * ks}, kUInt8, x.device());
    work_idx = make_empty({2 * len}, kInt64, x.device());
    char* kb = static_cast<char*>(work_keys.impl()->raw_data());
    int64_t* ib = static_cast<int64_t*>(work_idx.impl()->raw_data());
    p.work_keys[0] = kb;
    p.work_keys[1] = kb + len * ks;
    p.work_idx[0] = ib;
    p.work_idx[1] = ib + len;
  }
  check_launch(launch_sort(p, current_stream_of(device)), op, p.dtype);
}

}  // namespace

void register_sort_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("sort", sort_kernel<false>);
  core.set_cuda_kernel("topk", sort_kernel<true>);
}

}  // namespace oneflow::cuda_module

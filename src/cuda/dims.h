// dims.h (internal, host code): the strided iteration the CUDA shape, indexing and sort kernels
// share. Their kernels read every operand at its own strides; the host first merges dims (NOTE
// [Merged dims] in strided_dims.h), so that a kernel walks as few dims as the layouts allow.
#pragma once
#include <array>
#include <vector>

#include "cuda/module.h"
#include "strided_dims.h"

namespace oneflow::cuda_module {

// The device index of an op's CUDA operand ([op] error when it is not on CUDA).
inline int device_of(const Tensor& t, const char* op) {
  OF_CHECK(t.is_cuda(), "[{}] cuda: the input is on {}", op, t.device().str());
  return resolve_device(t.device().index());
}

// Sizes of a 0-d tensor read as one element.
inline int64_t size_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }
inline int64_t stride_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 0 : t.strides()[d]; }

// An iteration over `sizes` with K operands' strides (in elements).
template <size_t K> struct Geometry {
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, K>> strides;
  int64_t numel = 1;
};

// `sizes` with strides `st` (one array per dim) coalesced; more than `max_dims` dims left is an
// [op] error (the kernels' parameter structs hold that many).
template <size_t K>
Geometry<K> coalesce(const std::vector<int64_t>& sizes,
                     const std::vector<std::array<int64_t, K>>& st, const char* op, int max_dims) {
  Geometry<K> g;
  for (int64_t n : sizes) g.numel *= n;
  for (const MergedDim& m : merge_dims(  // NOTE [Merged dims]
           sizes.size(), K, [&](size_t d) { return sizes[d]; },
           [&](size_t k, size_t d) { return st[d][k]; })) {
    g.sizes.push_back(m.size);
    g.strides.push_back(st[m.inner]);
  }
  OF_CHECK(g.numel == 0 || g.sizes.size() <= size_t(max_dims),
           "[{}] cuda: at most {} non-mergeable dims, got shape {}", op, max_dims,
           shape_str(sizes));
  return g;
}

}  // namespace oneflow::cuda_module

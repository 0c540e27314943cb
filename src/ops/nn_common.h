// nn_common.h: what the nn op files (ops/nn.cpp: dropout and linear; nn_norm.cpp;
// nn_attention.cpp; nn_losses.cpp) and their CPU kernels (src/cpu/nn.cpp, norm.cpp, attention.cpp,
// losses.cpp) share: argument checks, the geometries both an op's infer_meta and its kernel
// compute (row norms, attention, cross entropy), raw data pointers and row statistics in double
// (the op files' own helpers, written with public ops: ops/nn_op_helpers.h). NOTE [nn kernels]
// in cpu/nn.cpp says how those kernels compute.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>

#include "kernel_support.h"
#include "ops/nn_attrs.h"
#include "ops/checks.h"
#include "thread_pool.h"

namespace oneflow::nn_detail {

// The op table is built lazily: build it before dereferencing a registration-time pointer.

inline constexpr int kL = 8;  // lane accumulators

inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_item));
}

// ---------------------------------------------------------------- validation

// An optional parameter: undefined, or of x's dtype and exactly `shape`.
inline void check_param(const Tensor& p, const Tensor& x, IntArrayRef shape, const char* op,
                        const char* what) {
  if (!p.defined()) return;
  if (p.dtype() != x.dtype())
    fail("[{}] expected {} to have the input's dtype {}, got {}", op, what, dtype_name(x.dtype()),
         dtype_name(p.dtype()));
  if (!(p.sizes() == shape))
    fail("[{}] expected {} of shape {}, got {} (input shape {})", op, what, shape_str(shape),
         shape_str(p.sizes()), shape_str(x.sizes()));
  if (p.device() != x.device())
    fail("[{}] expected {} on {}, got {}", op, what, x.device().str(), p.device().str());
}
inline void check_reduction(int64_t r, const char* op) {
  if (r < kReduceNone || r > kReduceSum)
    fail("[{}] invalid reduction {} (expected Reduction::None (0), Mean (1) or Sum (2))", op, r);
}
inline void check_same_shape(const Tensor& input, const Tensor& target, const char* op,
                             const char* note = "") {
  if (!target.defined()) fail("[{}] target is undefined", op);
  if (!(input.sizes() == target.sizes()))
    fail("[{}] target shape {} does not match input shape {}{}", op, shape_str(target.sizes()),
         shape_str(input.sizes()), note);
}

// Every class index of a contiguous int64 target is ignore_index or in [0, C).
inline void check_target_range(const Tensor& target, int64_t C, int64_t ignore_index,
                               const char* op, const Tensor& input) {
  const int64_t* p = target.data_ptr<int64_t>();
  for (int64_t i = 0; i < target.numel(); ++i)
    if (p[i] != ignore_index && (p[i] < 0 || p[i] >= C))
      fail("[{}] target index {} is out of range for {} classes (input shape {})", op, p[i], C,
           shape_str(input.sizes()));
}
// Validates class-index targets against input [N, C, d...] (or [C] with a 0-d target): the
// shapes and dtypes only when `values` is false (an op's infer_meta; its kernel checks them).
inline void check_class_targets(const Tensor& input, const Tensor& target, const Tensor& weight,
                                int64_t ignore_index, const char* op, bool values = true) {
  if (!target.defined()) fail("[{}] target is undefined", op);
  if (target.dtype() != kInt64)
    fail("[{}] expected class-index targets of dtype int64, got {} (shape {})", op,
         dtype_name(target.dtype()), shape_str(target.sizes()));
  if (input.dim() < 1)
    fail("[{}] expected an input of shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor", op);
  DimVector expect;
  if (input.dim() >= 2) {
    expect.push_back(input.size(0));
    for (int64_t d = 2; d < input.dim(); ++d) expect.push_back(input.size(d));
  }
  if (!(target.sizes() == IntArrayRef(expect)))
    fail("[{}] target shape {} does not match input shape {}: expected target shape {}", op,
         shape_str(target.sizes()), shape_str(input.sizes()), shape_str(expect));
  const int64_t C = input.dim() >= 2 ? input.size(1) : input.size(0);
  if (weight.defined()) {
    if (weight.dtype() != input.dtype())
      fail("[{}] expected weight to have the input's dtype {}, got {}", op,
           dtype_name(input.dtype()), dtype_name(weight.dtype()));
    if (!(weight.sizes() == IntArrayRef(DimVector{C})))
      fail("[{}] expected weight of shape ({},) (one per class), got {}", op, C,
           shape_str(weight.sizes()));
  }
  // (a global target is checked piece by piece when the op runs on the local pieces)
  if (values && target.is_cpu() && !target.is_global())
    check_target_range(target.contiguous(), C, ignore_index, op, input);
}

// A required input the kernel reads with x's geometry: defined, x's dtype and device, `shape`.
inline void check_saved(const Tensor& t, const Tensor& x, IntArrayRef shape, const char* op,
                        const char* what) {
  check_defined(op, t, what);
  check_param(t, x, shape, op, what);
}
// Overflow-checked: an empty tensor may have huge other dims whose partial products overflow
// (fuzz_ops: layer_norm's row count 4 * INT64_MAX).
inline int64_t prod_range(IntArrayRef s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i)
    if (__builtin_mul_overflow(p, s[i], &p))
      fail("[nn] the sizes {} give a product of dims {}..{} that overflows", shape_str(s), b,
           e - 1);
  return p;
}
template <class T> const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <class T> T* mptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// ---------------------------------------------------------------- row statistics

template <class T> double sum_d(const T* p, int64_t n) {
  double s[kL] = {};
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) s[l] += double(p[k + l]);
  for (; k < n; ++k) s[0] += double(p[k]);
  double r = 0;
  for (int l = 0; l < kL; ++l) r += s[l];
  return r;
}
template <class T> double sqdev_d(const T* p, int64_t n, double mean) {
  double s[kL] = {};
  int64_t k = 0;
  for (; k + kL <= n; k += kL)
    for (int l = 0; l < kL; ++l) {
      double d = double(p[k + l]) - mean;
      s[l] += d * d;
    }
  for (; k < n; ++k) {
    double d = double(p[k]) - mean;
    s[0] += d * d;
  }
  double r = 0;
  for (int l = 0; l < kL; ++l) r += s[l];
  return r;
}

// ---------------------------------------------------------------- row norms: geometry
// NOTE [Row norm geometry]: the input is M rows of N = cg * hw elements; row r is normalized
// with its own mean/rstd, and element (j, i) of row r (j < cg channels, i < hw) uses affine
// channel (r % G) * cg + j. layer_norm/rms_norm: G = 1, cg = N, hw = 1; group_norm: rows are
// (sample, group), cg = C / G channels of hw elements each.

enum NormMode { kLayer = 0, kGroup = 1, kRms = 2 };
inline const char* norm_name(int mode) {
  return mode == kLayer ? "layer_norm" : mode == kGroup ? "group_norm" : "rms_norm";
}

struct NormGeom {
  int64_t M = 0, N = 1, G = 1, cg = 1, hw = 1;
  DimVector param_shape;  // shape of weight/bias
};
// attrs: (axis or groups, eps)
inline NormGeom norm_geom(int mode, IntArrayRef s, const Attrs& a) {
  NormGeom g;
  if (mode == kGroup) {
    g.G = GroupNormAttrs::get<"num_groups">(a);
    if (s.size() < 2)
      fail("[group_norm] expected an input with at least 2 dims (N, C, ...), got {}", shape_str(s));
    const int64_t C = s[1];
    if (g.G <= 0 || C % g.G != 0)
      fail("[group_norm] num_groups {} must be positive and divide the {} channels", g.G, C);
    g.cg = C / g.G;
    g.hw = prod_range(s, 2, s.size());
    if (__builtin_mul_overflow(s[0], g.G, &g.M) || __builtin_mul_overflow(g.cg, g.hw, &g.N))
      fail("[group_norm] input {} with {} groups gives row counts that overflow", shape_str(s),
           g.G);
    g.param_shape = {C};
  } else {
    const int64_t ax = NormAttrs::get<"axis">(a);
    if (ax < 0 || size_t(ax) > s.size())
      fail("[{}] normalized axis {} is outside the input's {} dims", norm_name(mode), ax, s.size());
    const size_t axis = size_t(ax);
    g.M = prod_range(s, 0, axis);
    g.N = prod_range(s, axis, s.size());
    g.cg = g.N;
    g.param_shape = DimVector(s.begin() + int64_t(axis), s.end());
  }
  return g;
}

// ---------------------------------------------------------------- attention: geometry
// scaled_dot_product_attention's operands q [B, L, E], k [B, S, E], v [B, S, Ev].
struct AttnGeom {
  int64_t B, L, S, E, Ev;
};
inline AttnGeom attn_geom(const TensorList& in) {
  return {in[0].size(0), in[0].size(1), in[1].size(1), in[0].size(2), in[2].size(2)};
}

// ---------------------------------------------------------------- cross entropy: geometry
// x [N, C, inner...]: rows = N * inner class-score rows of C classes, strided by inner.
struct CeGeom {
  int64_t N, C, inner, rows;
};
inline CeGeom ce_geom(IntArrayRef s) {
  CeGeom g{s[0], s[1], prod_range(s, 2, s.size()), 0};
  g.rows = g.N * g.inner;
  return g;
}

}  // namespace oneflow::nn_detail

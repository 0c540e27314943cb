// nn_common.h: what the nn op files share (ops/nn.cpp: dropout and linear; nn_norm.cpp;
// nn_attention.cpp; nn_losses.cpp): argument checks, raw data pointers, row statistics in
// double, the losses' reduction and the fused backward ops' VJP. NOTE [nn kernels] in
// ops/nn.cpp says how those kernels compute.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/node.h"
#include "dispatch.h"
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

template <class F> decltype(auto) dispatch_f(ScalarType t, const char* op, F&& f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    default:
      break;
  }
  fail("[{}] expected a float32 or float64 tensor, got {}", op, dtype_name(t));
}

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
  if (r < Reduction::None || r > Reduction::Sum)
    fail("[{}] invalid reduction {} (expected Reduction::None (0), Mean (1) or Sum (2))", op, r);
}
inline void check_same_shape(const Tensor& input, const Tensor& target, const char* op,
                             const char* note = "") {
  if (!target.defined()) fail("[{}] target is undefined", op);
  if (!(input.sizes() == target.sizes()))
    fail("[{}] target shape {} does not match input shape {}{}", op, shape_str(target.sizes()),
         shape_str(input.sizes()), note);
}
// Whether s broadcasts to exactly `target`.
inline bool broadcasts_to(IntArrayRef s, IntArrayRef target) {
  if (s.size() > target.size()) return false;
  const size_t off = target.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != target[off + i]) return false;
  return true;
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

// ---------------------------------------------------------------- losses: helpers

inline Tensor reduce_loss(const Tensor& l, int64_t reduction) {
  if (reduction == Reduction::Mean) return l.mean();
  if (reduction == Reduction::Sum) return l.sum();
  return l;
}

// The fused backward ops are recorded under create_graph like any op, but their own VJP is
// not implemented: differentiating through one again is an error when that backward runs
// (as PyTorch's "derivative ... is not implemented"), never a silently missing term.
inline TensorList fused_backward_vjp(const VjpCtx& c, const TensorList&) {
  std::string fwd = c.op().name;
  fwd.resize(fwd.size() - std::string("_backward").size());
  fail(
      "[{}] double backward through the fused {} op is not implemented (a gradient taken "
      "with create_graph=true was differentiated again)",
      c.op().name, fwd);
}

}  // namespace oneflow::nn_detail

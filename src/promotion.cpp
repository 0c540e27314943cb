// promotion.cpp: PyTorch's type promotion and elementwise operands (promotion.h).
#include "promotion.h"

#include <optional>

#include "shapes.h"

#include "kernel_support.h"
#include "oneflow/ops.h"  // Tensor::to, for the differentiable cast

namespace oneflow {

Tensor wrap_scalar(const Scalar& s, ScalarType dtype, Device device) {
  Tensor t = make_empty({}, dtype, Device(kCPU));
  dispatch_dtype(dtype, [&](auto v) {
    using T = decltype(v);
    *static_cast<T*>(t.data_ptr()) = s.to<compute_t<T>>();
  });
  if (device.is_cuda()) t = t.to(device);
  t.impl()->is_wrapped_number = true;
  return t;
}

namespace {
// PyTorch's combine_categories: the higher-priority result wins unless it is a lower category.
std::optional<ScalarType> combine(std::optional<ScalarType> higher,
                                  std::optional<ScalarType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating_point(*higher)) return higher;
  if (*higher == kBool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}
void update(std::optional<ScalarType>& r, ScalarType t) { r = r ? promote_types(*r, t) : t; }
}  // namespace

ScalarType result_type(const TensorList& operands) {
  std::optional<ScalarType> dim_r, zero_r, wrapped_r;
  for (const Tensor& t : operands) {
    if (!t.defined()) continue;
    const TensorImpl* i = t.impl();
    if (i->is_wrapped_number) {
      update(wrapped_r, is_floating_point(i->dtype) ? kFloat32 : i->dtype);
    } else if (i->sizes.empty()) {
      update(zero_r, i->dtype);
    } else {
      update(dim_r, i->dtype);
    }
  }
  auto r = combine(dim_r, combine(zero_r, wrapped_r));
  return r.value_or(kFloat32);
}

ScalarType result_type(const Tensor& a, const Tensor& b) { return result_type(TensorList{a, b}); }
ScalarType result_type(const Tensor& a, const Scalar& b) {
  return result_type(TensorList{
      a,
      wrap_scalar(b, b.default_dtype() == kFloat32 ? kFloat64 : b.default_dtype(), Device(kCPU))});
}

Tensor cast_if_needed(const Tensor& t, ScalarType dtype) {
  if (!t.defined() || t.dtype() == dtype) return t;
  if (t.impl()->is_wrapped_number && t.is_cpu()) {
    // Re-wrap instead of dispatching a cast: keeps scalars cheap and out of the autograd graph.
    Scalar s = t.item();
    return wrap_scalar(s, dtype, t.device());
  }
  return t.to(dtype);
}

Tensor prepare_operand(const Tensor& t, ScalarType dtype, Device device) {
  Tensor r = cast_if_needed(t, dtype);
  if (r.device() != device && r.impl()->is_wrapped_number) r = wrap_scalar(r.item(), dtype, device);
  return r;
}

Tensor scalar_operand(const Scalar& s) {
  return wrap_scalar(s, s.is_floating_point() ? kFloat64 : s.default_dtype(), Device(kCPU));
}

void elementwise_meta(const TensorList& in, const Attrs&, MetaList& out) {
  DimVector shape = in[0].sizes().dims();
  for (size_t i = 1; i < in.size(); ++i) {
    // Kernels read every operand as the first one's type: the public functions promote to a
    // common dtype before dispatch, so a mix here is a caller's error (found by fuzz_ops).
    OF_CHECK(in[i].dtype() == in[0].dtype(),
             "[elementwise] operand {} is {} but operand 0 is {} (promote to one dtype first)", i,
             dtype_name(in[i].dtype()), dtype_name(in[0].dtype()));
    OF_CHECK(in[i].device() == in[0].device(),
             "[elementwise] operand {} is on {} but operand 0 is on {}", i, in[i].device().str(),
             in[0].device().str());
    if (!(in[i].sizes() == IntArrayRef(shape))) shape = broadcast_shapes(shape, in[i].sizes());
  }
  out.push_back({std::move(shape), {}, 0, in.back().dtype(), in[0].device()});
}
void elementwise_bool_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  elementwise_meta(in, a, out);
  out[0].dtype = kBool;
}

}  // namespace oneflow

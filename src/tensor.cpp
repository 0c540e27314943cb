// Tensor handle methods that are not ops: metadata, data access, autograd accessors.
#include <cstring>

#include "allocator.h"
#include "autograd/node.h"
#include "dispatch.h"
#include "shapes.h"
#include "global/global.h"

namespace oneflow {

int64_t Tensor::size(int64_t dim) const {
  auto* i = check_impl();
  dim = wrap_dim(dim, int64_t(i->sizes.size()), "size");
  OF_CHECK(!i->sizes.empty(), "[size] a 0-d tensor has no dimension {}", dim);
  return i->sizes[dim];
}

int64_t Tensor::stride(int64_t dim) const {
  auto* i = check_impl();
  dim = wrap_dim(dim, int64_t(i->sizes.size()), "stride");
  OF_CHECK(!i->strides.empty(), "[stride] a 0-d tensor has no dimension {}", dim);
  return i->strides[dim];
}

template <class T>
requires is_item_type<T> T Tensor::item()
const {
  auto* i = check_impl();
  note_host_read(*this, "item()");
  OF_CHECK(i->numel == 1,
           "[item] a Tensor with {} elements cannot be converted to a Scalar (shape {})", i->numel,
           shape_str(i->sizes));
  Tensor c = is_global() ? global::logical_value(*this) : *this;
  if (!c.is_cpu()) c = c.to(Device(kCPU));
  T v{};
  dispatch_dtype(c.dtype(), [&](auto z) {
    using S = decltype(z);
    v = saturate_cast<T>(compute_t<S>(*static_cast<const S*>(c.data_ptr())));
  });
  return v;
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;
template uint8_t Tensor::item<uint8_t>() const;
template bool Tensor::item<bool>() const;
template Half Tensor::item<Half>() const;
template BFloat16 Tensor::item<BFloat16>() const;
template int8_t Tensor::item<int8_t>() const;
template int16_t Tensor::item<int16_t>() const;
template uint16_t Tensor::item<uint16_t>() const;
template uint32_t Tensor::item<uint32_t>() const;
template uint64_t Tensor::item<uint64_t>() const;

Scalar Tensor::item() const {
  ScalarType t = dtype();
  if (oneflow::is_floating_point(t)) return Scalar(item<double>());
  if (t == kBool) return Scalar(item<bool>());
  return Scalar(item<int64_t>());
}

template <class T> std::vector<T> Tensor::to_vector() const {
  check_impl();
  note_host_read(*this, "to_vector()");
  Tensor c = is_global() ? global::logical_value(*this).contiguous() : contiguous();
  if (!c.is_cpu()) c = c.to(Device(kCPU));
  std::vector<T> out(size_t(c.numel()));
  dispatch_dtype(c.dtype(), [&](auto z) {
    using S = decltype(z);
    const S* p = static_cast<const S*>(c.data_ptr());
    for (size_t k = 0; k < out.size(); ++k) out[k] = T(compute_t<S>(p[k]));
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;

Tensor& Tensor::set_requires_grad(bool r) {
  auto* i = check_impl();
  if (r) {
    OF_CHECK(oneflow::is_floating_point(i->dtype),
             "[requires_grad_] only tensors of floating point dtype can require gradients, got {}",
             dtype_name(i->dtype));
  }
  if (!r && i->grad_fn)
    fail(
        "[requires_grad_] you can only change requires_grad flags of leaf variables; use "
        "detach() to get a tensor that does not require grad");
  i->requires_grad = r;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  auto* i = check_impl();
  if (g_tracer && !in_kernel()) g_tracer->on_grad_access(impl_);
  return i->grad_holder ? i->grad_holder->grad : undefined;
}

Tensor& Tensor::mutable_grad() {
  auto* i = check_impl();
  if (g_tracer && !in_kernel()) g_tracer->on_grad_access(impl_);
  return grad_slot(i);
}

void Tensor::retain_grad() {
  auto* i = check_impl();
  OF_CHECK(i->requires_grad,
           "[retain_grad] can't retain_grad on a tensor that doesn't require grad");
  if (!i->grad_fn || i->retains_grad) return;
  i->retains_grad = true;
  i->grad_fn->retained.push_back({i->output_nr, impl_});
}

Tensor Tensor::detach() const {
  auto* i = check_impl();
  auto a = new_tensor_impl();
  a->share_data_from(*i);
  a->view_base = i->view_base;
  a->global = i->global;
  return Tensor(std::move(a));
}

void Tensor::set_data(const Tensor& new_data) const {
  auto* i = check_impl();
  OF_CHECK(new_data.defined(), "[set_data] new_data is undefined");
  i->share_data_from(*new_data.impl());
}

Tensor& Tensor::detach_() {
  auto* i = check_impl();
  i->grad_fn.reset();
  i->requires_grad = false;
  return *this;
}

std::string Tensor::toString() const { return fmt::format("{}", *this); }

void TensorImpl::refresh_contiguous() {
  numel = 1;
  for (int64_t s : sizes)
    if (__builtin_mul_overflow(numel, s, &numel))
      fail("[tensor] sizes {} have more elements than can be addressed", shape_str(sizes));
  is_contiguous = true;
  if (numel <= 1) return;
  int64_t expected = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) {
      is_contiguous = false;
      return;
    }
    expected *= sizes[d];
  }
}

}  // namespace oneflow

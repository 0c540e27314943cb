// kernel_support.cpp: tensors, views, copies and fills for kernels, made without dispatching
// (kernel_support.h), and the scopes kernels run in.
#include "kernel_support.h"

#include <utility>

#include "allocator.h"
#include "op_table.h"
#include "ops/core_attrs.h"

namespace oneflow {

OF_TLS int kernel_detail::t_kernel_depth = 0;  // ops dispatched while > 0 are not traced

namespace {
thread_local const StorageImpl* t_constant_operand = nullptr;
}  // namespace

const StorageImpl* constant_operand_storage() { return t_constant_operand; }
ConstantOperandScope::ConstantOperandScope(const StorageImpl* s) : prev_(t_constant_operand) {
  t_constant_operand = s;
}
ConstantOperandScope::~ConstantOperandScope() { t_constant_operand = prev_; }

Tensor make_empty(IntArrayRef sizes, ScalarType dtype, Device device) {
  int64_t n = checked_numel(sizes, "empty");
  // checked_numel allows 2^62 elements; their bytes must not wrap around either
  if (size_t(n) > SIZE_MAX / 16)
    fail("[empty] size {} of {} needs more bytes than memory can address", shape_str(sizes),
         dtype_name(dtype));
  auto impl = new_tensor_impl();
  impl->storage = allocate_storage(size_t(n) * itemsize(dtype), device);
  impl->sizes = sizes.dims();
  impl->strides = contiguous_strides(sizes);
  impl->numel = n;
  impl->dtype = dtype;
  impl->device = device;
  impl->is_contiguous = true;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  auto impl = new_tensor_impl();
  const TensorImpl* b = base.impl();
  impl->storage = b->storage;
  impl->sizes = sizes.dims();
  impl->strides = strides.dims();
  impl->offset = offset;
  impl->dtype = b->dtype;
  impl->device = b->device;
  impl->view_base = b->view_base ? b->view_base : base.impl_ptr();
  impl->refresh_contiguous();
  return Tensor(std::move(impl));
}

namespace {
// `copy` backs contiguous(), clone() and to(dtype): its result is always row-major.
const OpDef* row_major_copy() { return &OF_OP("copy"); }

void run_kernel_of(const OpDef& op, const Device& dev, TensorList ins, const Attrs& attrs,
                   TensorList outs) {
  const KernelFn k = dev.is_cuda() ? op.cuda : op.cpu;
  if (!k) fail("[{}] has no {} implementation", op.name, dev.is_cuda() ? "CUDA" : "CPU");
  KernelScope scope;
  k(KernelArgs{ins, attrs, outs});
}
}  // namespace

Tensor kernel_contiguous(const Tensor& t) {
  if (!t.defined() || t.is_contiguous()) return t;
  return kernel_cast(t, t.dtype());
}

Tensor kernel_cast(const Tensor& t, ScalarType dtype) {
  Tensor dst = make_empty(t.sizes(), dtype, t.device());
  run_kernel_of(*row_major_copy(), t.device(), {t}, {dtype}, {dst});
  return dst;
}

void kernel_copy_into(const Tensor& dst, const Tensor& src) {
  run_kernel_of(OF_OP("copy_"), dst.device(), {dst, src}, {}, {dst});
}

void kernel_fill(const Tensor& t, const Scalar& v) {
  run_kernel_of(OF_OP("fill_"), t.device(), {t}, core_detail::FillAttrs::make(v), {t});
}

Tensor kernel_permute(const Tensor& t, IntArrayRef perm) {
  const TensorImpl* i = t.impl();
  DimVector sizes(perm.size(), 0), strides(perm.size(), 0);
  for (size_t d = 0; d < perm.size(); ++d) {
    sizes[d] = i->sizes[perm[d]];
    strides[d] = i->strides[perm[d]];
  }
  return make_view(t, sizes, strides, i->offset);
}

Tensor kernel_view(const Tensor& t, IntArrayRef sizes) {
  OF_CHECK(t.is_contiguous() && checked_numel(sizes, "view") == t.numel(),
           "[view] internal: a kernel's view {} of a {} tensor of shape {}", shape_str(sizes),
           t.is_contiguous() ? "dense" : "strided", shape_str(t.sizes()));
  return make_view(t, sizes, contiguous_strides(sizes), t.impl()->offset);
}

Tensor kernel_narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  const TensorImpl* i = t.impl();
  OF_CHECK(dim >= 0 && dim < t.dim() && start >= 0 && length >= 0 &&
               start + length <= i->sizes[size_t(dim)],
           "[narrow] internal: a kernel's narrow({}, {}, {}) of shape {}", dim, start, length,
           shape_str(t.sizes()));
  DimVector sizes = i->sizes;
  sizes[size_t(dim)] = length;
  return make_view(t, sizes, i->strides, i->offset + start * i->strides[size_t(dim)]);
}

Tensor kernel_transpose(const Tensor& t) {
  DimVector perm(t.dim(), 0);
  for (int64_t d = 0; d < t.dim(); ++d) perm[d] = d;
  if (t.dim() >= 2) std::swap(perm[t.dim() - 1], perm[t.dim() - 2]);
  return kernel_permute(t, perm);
}

namespace {
const std::vector<const EpilogueAct*>& epilogue_forms() {
  static const std::vector<const EpilogueAct*> v = [] {
    std::vector<const EpilogueAct*> r;
    for (const OpDef* op : all_ops())
      for (const EpilogueAct& e : op->epilogue_acts) r.push_back(&e);
    return r;
  }();
  return v;
}
}  // namespace

const EpilogueAct* find_epilogue_act(std::string_view name) {
  for (const EpilogueAct* e : epilogue_forms())
    if (name == e->name) return e;
  return nullptr;
}
std::string epilogue_act_names() {
  std::string s;
  for (const EpilogueAct* e : epilogue_forms()) s += std::string(s.empty() ? "" : ", ") + e->name;
  return s;
}

}  // namespace oneflow

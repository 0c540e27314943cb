// Core ops: dtype casts and copies, device transfer, fills and the deterministic factories
// (meta, VJPs, registration, public functions; to_device's kernel, which serves both devices).
// CPU kernels: cpu/core.cpp.
#include <cmath>
#include <cstring>

#include "allocator.h"
#include "autograd/node.h"
#include "cpu/core.h"
#include "cuda_backend.h"
#include "dispatch.h"
#include "ops/core_attrs.h"

namespace oneflow {
using namespace core_detail;
namespace {

// ---- copy (cast / contiguous / clone)
void copy_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  out.push_back({in[0].sizes().dims(), {}, 0, CopyAttrs::get<"dtype">(a), in[0].device()});
}
TensorList copy_vjp(const VjpCtx& c, const TensorList& g) {
  return {cast_if_needed(g[0], c.input_dtype(0))};
}

// ---- to_device
void to_device_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Device d = device_from_attrs(ToDeviceAttrs::get<"device_type">(a),
                                     ToDeviceAttrs::get<"device_index">(a), "to_device");
  out.push_back({in[0].sizes().dims(), {}, 0, in[0].dtype(), d});
}
void to_device_kernel(const KernelArgs& k) {
  // dense (contiguous_inputs), except when it is also the out= tensor (dispatch leaves that
  // one as it is; its output is then staged, so dst is dense)
  const Tensor src = kernel_contiguous(k.inputs[0]);
  const Tensor& dst = k.outputs[0];
  // non_blocking, when present (NOTE [Asynchronous copies] in src/cuda/allocator.cpp)
  using A = ToDeviceAttrs;
  if (A::has<"non_blocking">(k.attrs) && A::get<"non_blocking">(k.attrs) &&
      (src.is_cuda() || dst.is_cuda())) {
    cuda_backend::copy_bytes_async(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(),
                                   src.nbytes());
    return;
  }
  copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), src.nbytes());
}
TensorList to_device_vjp(const VjpCtx& c, const TensorList& g) {
  return {g[0].to(c.input_device(0))};
}

// ---- copy_ (self <- src)
void copy__meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& self = in[0];
  const Tensor& src = in[1];
  DimVector b = broadcast_shapes(self.sizes(), src.sizes());
  if (!(IntArrayRef(b) == self.sizes()))
    fail("[copy_] source of shape {} cannot be broadcast to the destination shape {}",
         shape_str(src.sizes()), shape_str(self.sizes()));
  out.push_back({self.sizes().dims(), {}, 0, self.dtype(), self.device()});
}
TensorList copy__vjp(const VjpCtx& c, const TensorList& g) {
  Tensor gs = c.needs_input_grad(1) ? sum_to_size(g[0], c.input_sizes(1)) : Tensor();
  return {Tensor(), gs};
}

// ---- fill_
void fill__meta(const TensorList& in, const Attrs&, MetaList& out) {
  out.push_back({in[0].sizes().dims(), {}, 0, in[0].dtype(), in[0].device()});
}
TensorList fill__vjp(const VjpCtx&, const TensorList&) { return {Tensor()}; }

// ---- factories
// The device a factory's attributes (schema S: FullAttrs, ArangeAttrs, ...) name.
template <class S> Device factory_device(const Attrs& a, const char* op) {
  return device_from_attrs(S::template get<"device_type">(a), S::template get<"device_index">(a),
                           op);
}
void full_meta(const TensorList&, const Attrs& a, MetaList& out) {
  using A = FullAttrs;
  checked_numel(A::get<"size">(a), "full");
  out.push_back({A::get<"size">(a), {}, 0, A::get<"dtype">(a), factory_device<A>(a, "full")});
}

int64_t arange_count(double start, double end, double step) {
  OF_CHECK(step != 0, "[arange] step must be nonzero");
  OF_CHECK(std::isfinite(start) && std::isfinite(end), "[arange] unsupported range: {} -> {}",
           start, end);
  OF_CHECK((step > 0 && end >= start) || (step < 0 && end <= start),
           "[arange] upper bound and larger bound inconsistent with step sign (start {}, end {}, "
           "step {})",
           start, end, step);
  const double n = std::ceil((end - start) / step);  // may be inf: 1e300 - -1e300
  OF_CHECK(n <= double(int64_t(1) << 62),
           "[arange] the range {} -> {} by step {} has too many "
           "elements",
           start, end, step);
  return int64_t(n);
}
void arange_meta(const TensorList&, const Attrs& a, MetaList& out) {
  using A = ArangeAttrs;
  int64_t n = arange_count(A::get<"start">(a), A::get<"end">(a), A::get<"step">(a));
  out.push_back({{n}, {}, 0, A::get<"dtype">(a), factory_device<A>(a, "arange")});
}
void linspace_meta(const TensorList&, const Attrs& a, MetaList& out) {
  using A = LinspaceAttrs;
  const int64_t steps = A::get<"steps">(a);
  OF_CHECK(steps >= 0, "[linspace] number of steps must be non-negative, got {}", steps);
  out.push_back({{steps}, {}, 0, A::get<"dtype">(a), factory_device<A>(a, "linspace")});
}
void eye_meta(const TensorList&, const Attrs& a, MetaList& out) {
  using A = EyeAttrs;
  const int64_t n = A::get<"n">(a), m = A::get<"m">(a);
  OF_CHECK(n >= 0 && m >= 0, "[eye] n and m must be non-negative, got {} and {}", n, m);
  out.push_back({{n, m}, {}, 0, A::get<"dtype">(a), factory_device<A>(a, "eye")});
}

int64_t dev_type(Device d) { return int64_t(d.type()); }
int64_t dev_index(Device d) { return int64_t(d.is_cuda() ? std::max(d.index(), 0) : -1); }

Tensor finish_factory(Tensor t, const TensorOptions& o) {
  if (o.requires_grad()) t.set_requires_grad(true);
  return t;
}

}  // namespace

void register_core_ops() {
  register_op({.name = "copy",
               .traits = kElementwise,
               .attr_names = CopyAttrs::names(),
               .attr_types = CopyAttrs::types(),
               .infer_meta = copy_meta,
               .cpu = cpu::copy,
               .vjp = copy_vjp,
               .fold_identities = {{FoldIdentity::kSameLayout, 0}},
               .fused_form = FusedForm::kCast});
  register_op({.name = "to_device",
               .attr_names = ToDeviceAttrs::names(),
               .attr_types = ToDeviceAttrs::types(),
               .infer_meta = to_device_meta,
               .cpu = to_device_kernel,
               .cuda = to_device_kernel,
               .vjp = to_device_vjp,
               .contiguous_inputs = in(0)});  // the kernel copies bytes
  register_op({.name = "copy_",
               .traits = kElementwise | kInplaceOk,
               .infer_meta = copy__meta,
               .cpu = cpu::copy_,
               .vjp = copy__vjp,
               .fused_form = FusedForm::kCopyInto});
  register_op({.name = "fill_",
               .traits = kElementwise | kInplaceOk,
               .attr_names = FillAttrs::names(),
               .attr_types = FillAttrs::types(),
               .infer_meta = fill__meta,
               .cpu = cpu::fill_,
               .vjp = fill__vjp,
               .fused_form = FusedForm::kFill});
  register_op({.name = "full",
               .traits = kFactory,
               .attr_names = FullAttrs::names(),
               .attr_types = FullAttrs::types(),
               .infer_meta = full_meta,
               .cpu = cpu::full});
  register_op({.name = "arange",
               .traits = kFactory,
               .attr_names = ArangeAttrs::names(),
               .attr_types = ArangeAttrs::types(),
               .infer_meta = arange_meta,
               .cpu = cpu::arange});
  register_op({.name = "linspace",
               .traits = kFactory,
               .attr_names = LinspaceAttrs::names(),
               .attr_types = LinspaceAttrs::types(),
               .infer_meta = linspace_meta,
               .cpu = cpu::linspace});
  register_op({.name = "eye",
               .traits = kFactory,
               .attr_names = EyeAttrs::names(),
               .attr_types = EyeAttrs::types(),
               .infer_meta = eye_meta,
               .cpu = cpu::eye});
}

// ---------------------------------------------------------------- public functions

namespace {

// Factories for a CUDA device are built on the CPU and moved. The CUDA module has kernels for
// them (full: src/cuda/elementwise.cpp; arange, linspace, eye: src/cuda/factory.cpp), which run
// only when one of these ops is dispatched with a CUDA device in its attributes. S: the
// factory's schema (FullAttrs, ArangeAttrs, ...).
template <class S> Tensor on_device(const OpDef& op, Attrs attrs, Device dev) {
  if (dev.is_cpu()) return dispatch1(op, {}, std::move(attrs));
  attrs.values[S::template index<"device_type">()] = int64_t(kCPU);
  attrs.values[S::template index<"device_index">()] = int64_t(-1);
  return dispatch1(op, {}, std::move(attrs)).to(dev);
}
}  // namespace

namespace {

Tensor to_dtype(const Tensor& x, ScalarType t, bool copy) {
  if (t == x.dtype() && !copy) return x;
  return dispatch1(OF_OP("copy"), {x}, CopyAttrs::make(t));
}

Tensor to_device(const Tensor& x, Device d, bool copy, bool non_blocking) {
  if (d == x.device() && !copy) return x;
  if (d == x.device()) return x.clone();
  if (d.is_cuda())
    if (std::string why = cuda_backend::unavailable_reason(); !why.empty())
      fail("[to] cannot move a tensor to {}: [cuda] not available: {}", d.str(), why);
  Tensor src = x.contiguous();
  // non_blocking is an optional last attr: absent means blocking
  Attrs a = non_blocking ? ToDeviceAttrs::make(dev_type(d), dev_index(d), true)
                         : DeviceAttrs::make(dev_type(d), dev_index(d));
  return dispatch1(OF_OP("to_device"), {src}, std::move(a));
}

// Permutation taking (N, C, spatial...) to channels-last order, and back.
std::vector<int64_t> to_channels_last(int64_t dim) {
  std::vector<int64_t> p{0};
  for (int64_t d = 2; d < dim; ++d) p.push_back(d);
  p.push_back(1);
  return p;
}
std::vector<int64_t> from_channels_last(int64_t dim) {
  std::vector<int64_t> p{0, dim - 1};
  for (int64_t d = 1; d < dim - 1; ++d) p.push_back(d);
  return p;
}

int64_t format_dim(MemoryFormat mf) { return mf == MemoryFormat::ChannelsLast ? 4 : 5; }

const char* format_name(MemoryFormat mf) {
  switch (mf) {
    case MemoryFormat::Contiguous:
      return "Contiguous";
    case MemoryFormat::Preserve:
      return "Preserve";
    case MemoryFormat::ChannelsLast:
      return "ChannelsLast";
    case MemoryFormat::ChannelsLast3d:
      return "ChannelsLast3d";
  }
  return "?";
}

void check_format_rank(const Tensor& x, MemoryFormat mf, const char* op) {
  if (mf == MemoryFormat::ChannelsLast || mf == MemoryFormat::ChannelsLast3d)
    OF_CHECK(x.dim() == format_dim(mf), "[{}] memory format {} needs a {}-D tensor, got shape {}",
             op, format_name(mf), format_dim(mf), shape_str(x.sizes()));
}

// `convert(y)` applied in the layout `mf` asks for (Preserve resolved against x's layout).
template <class F>
Tensor convert_in_format(const Tensor& x, std::optional<MemoryFormat> mf, const char* op,
                         F&& convert) {
  MemoryFormat want = mf.value_or(MemoryFormat::Preserve);
  if (want == MemoryFormat::Preserve) {
    if (x.is_contiguous() || (x.dim() != 4 && x.dim() != 5)) return convert(x);
    want = x.suggest_memory_format();
  }
  check_format_rank(x, want, op);
  if (want == MemoryFormat::Contiguous) {
    Tensor r = convert(x);
    return r.is_contiguous() ? r : r.contiguous();
  }
  // Channels-last: convert the channels-last-ordered view, made dense, and view it back.
  Tensor r = convert(x.permute(to_channels_last(x.dim())));
  if (!r.is_contiguous()) r = r.contiguous();
  return r.permute(from_channels_last(x.dim()));
}

}  // namespace

std::ostream& operator<<(std::ostream& os, MemoryFormat mf) { return os << format_name(mf); }

Tensor Tensor::to(ScalarType t, bool non_blocking, bool copy,
                  std::optional<MemoryFormat> mf) const {
  (void)non_blocking;
  check_impl();
  if (!mf && t == dtype() && !copy) return *this;
  return convert_in_format(*this, mf, "to", [&](const Tensor& y) { return to_dtype(y, t, copy); });
}

Tensor Tensor::to(Device d, bool non_blocking, bool copy, std::optional<MemoryFormat> mf) const {
  check_impl();
  if (!mf && d == device() && !copy) return *this;
  return convert_in_format(*this, mf, "to",
                           [&](const Tensor& y) { return to_device(y, d, copy, non_blocking); });
}

Tensor Tensor::pin_memory() const {
  check_impl();
  if (is_pinned()) return *this;
  OF_CHECK(device().is_cpu(), "[pin_memory] expected a CPU tensor, got one on {}", device().str());
  OF_CHECK(!impl()->global, "[pin_memory] expected a local tensor, got a global one");
  const Tensor src = contiguous();
  Storage st = cuda_backend::allocate_pinned(src.nbytes());
  if (src.nbytes()) std::memcpy(st->data, src.data_ptr(), src.nbytes());
  auto impl = new_tensor_impl();
  impl->storage = std::move(st);
  impl->sizes = src.sizes().dims();
  impl->strides = contiguous_strides(src.sizes());
  impl->dtype = src.dtype();
  impl->device = Device(kCPU);
  impl->refresh_contiguous();
  return Tensor(std::move(impl));
}

bool Tensor::is_pinned() const {
  const TensorImpl* t = check_impl();
  return t->storage && t->storage->pinned;
}

Tensor Tensor::to(Device d, ScalarType t, bool non_blocking, bool copy,
                  std::optional<MemoryFormat> mf) const {
  check_impl();
  if (!mf && d == device() && t == dtype() && !copy) return *this;
  return convert_in_format(*this, mf, "to", [&](const Tensor& y) {
    Tensor r = to_device(y, d, copy, non_blocking);
    return to_dtype(r, t, false);
  });
}

Tensor Tensor::to(const TensorOptions& o, bool non_blocking, bool copy,
                  std::optional<MemoryFormat> mf) const {
  return to(o.has_device() ? o.device() : device(), o.has_dtype() ? o.dtype() : dtype(),
            non_blocking, copy, mf);
}

Tensor Tensor::clone(std::optional<MemoryFormat> mf) const {
  check_impl();
  return convert_in_format(*this, mf, "clone", [](const Tensor& y) { return y.clone(); });
}

bool Tensor::is_contiguous(MemoryFormat mf) const {
  check_impl();
  switch (mf) {
    case MemoryFormat::Contiguous:
      return is_contiguous();
    case MemoryFormat::Preserve:
      fail(
          "[is_contiguous] memory format Preserve is not a layout (ask Contiguous or "
          "ChannelsLast)");
    case MemoryFormat::ChannelsLast:
    case MemoryFormat::ChannelsLast3d: {
      if (dim() != format_dim(mf)) return false;
      // Walk the dims from innermost (C, then W, H[, D], then N) checking dense strides.
      const std::vector<int64_t> order = to_channels_last(dim());
      int64_t expected = 1;
      for (int64_t i = dim() - 1; i >= 0; --i) {
        const int64_t d = order[size_t(i)];
        const int64_t sz = sizes()[size_t(d)];
        if (sz != 1 && strides()[size_t(d)] != expected) return false;
        expected *= sz;
      }
      return true;
    }
  }
  return false;
}

MemoryFormat Tensor::suggest_memory_format(bool exact_match) const {
  check_impl();
  (void)exact_match;  // channels-last strides are checked exactly either way
  if (dim() == 4 && !is_contiguous() && is_contiguous(MemoryFormat::ChannelsLast))
    return MemoryFormat::ChannelsLast;
  if (dim() == 5 && !is_contiguous() && is_contiguous(MemoryFormat::ChannelsLast3d))
    return MemoryFormat::ChannelsLast3d;
  return MemoryFormat::Contiguous;
}

Tensor Tensor::contiguous(MemoryFormat mf) const {
  check_impl();
  OF_CHECK(mf != MemoryFormat::Preserve,
           "[contiguous] memory format Preserve is not supported by contiguous() (as in "
           "libtorch): ask Contiguous, ChannelsLast or ChannelsLast3d");
  if (mf == MemoryFormat::Contiguous) return contiguous();
  check_format_rank(*this, mf, "contiguous");
  if (is_contiguous(mf)) return *this;
  return convert_in_format(*this, mf, "contiguous", [](const Tensor& y) { return y; });
}

Tensor Tensor::clone() const { return dispatch1(OF_OP("copy"), {*this}, CopyAttrs::make(dtype())); }
Tensor clone(const Tensor& t) { return t.clone(); }

Tensor Tensor::contiguous() const {
  if (check_impl()->is_contiguous) return *this;
  return clone();
}
Tensor contiguous(const Tensor& t) { return t.contiguous(); }
Tensor detach(const Tensor& t) { return t.detach(); }

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  (void)non_blocking;
  check_impl();
  OF_CHECK(src.defined(), "[copy_] source tensor is undefined");
  Tensor s = src;
  if (s.device() != device()) s = s.to(device());
  dispatch(OF_OP("copy_"), {*this, s}, {}, this);
  return *this;
}

Tensor& Tensor::fill_(const Scalar& v) {
  check_impl();
  if (is_cuda()) {
    // Filled on the host and copied (correct, not fast), although the CUDA module has a fill_
    // kernel (src/cuda/elementwise.cpp).
    Tensor h = full(sizes(), v, TensorOptions().dtype(dtype()));
    return copy_(h);
  }
  if (!oneflow::is_floating_point(dtype()) && v.is_floating_point() && dtype() != kBool) {
    double d = v.to_double();
    OF_CHECK(std::isfinite(d), "[fill_] value {} cannot be converted to {} without overflow", d,
             dtype_name(dtype()));
  }
  dispatch(OF_OP("fill_"), {*this}, FillAttrs::make(v), this);
  return *this;
}
Tensor& Tensor::zero_() { return fill_(0); }

Tensor empty(IntArrayRef size, TensorOptions o) {
  checked_numel(size, "empty");
  if (o.device().is_cuda())
    if (std::string why = cuda_backend::unavailable_reason(); !why.empty())
      fail("[empty] cannot allocate on {}: [cuda] not available: {}", o.device().str(), why);
  return finish_factory(make_empty(size, o.dtype(), o.device()), o);
}
Tensor empty(IntArrayRef size, TensorOptions o, std::optional<MemoryFormat> mf) {
  const MemoryFormat f = mf.value_or(MemoryFormat::Contiguous);
  OF_CHECK(f != MemoryFormat::Preserve,
           "[empty] memory format Preserve is not supported by empty(): ask Contiguous, "
           "ChannelsLast or ChannelsLast3d");
  if (f == MemoryFormat::Contiguous) return empty(size, o);
  OF_CHECK(int64_t(size.size()) == format_dim(f), "[empty] memory format {} needs {} sizes, got {}",
           format_name(f), format_dim(f), shape_str(size));
  std::vector<int64_t> cl;
  for (int64_t d : to_channels_last(int64_t(size.size()))) cl.push_back(size[size_t(d)]);
  const bool grad = o.requires_grad();
  Tensor t = empty(cl, o.requires_grad(false)).permute(from_channels_last(int64_t(size.size())));
  if (grad) t.set_requires_grad(true);
  return t;
}
Tensor empty_strided(IntArrayRef size, IntArrayRef stride, TensorOptions o) {
  const int64_t extent = view_extent(size, stride, 0, "empty_strided");
  Tensor base = make_empty({extent}, o.dtype(), o.device());
  return finish_factory(make_view(base, size, stride, 0).detach(), o);
}

Tensor full(IntArrayRef size, const Scalar& v, TensorOptions o) {
  ScalarType dt = o.has_dtype() ? o.dtype()
                                : (v.is_boolean()    ? kBool
                                   : v.is_integral() ? kInt64
                                                     : kFloat32);
  Attrs a = FullAttrs::make(size.dims(), v, dt, dev_type(o.device()), dev_index(o.device()));
  return finish_factory(on_device<FullAttrs>(OF_OP("full"), std::move(a), o.device()), o);
}
Tensor zeros(IntArrayRef size, TensorOptions o) { return full(size, 0, o.dtype(o.dtype())); }
Tensor ones(IntArrayRef size, TensorOptions o) { return full(size, 1, o.dtype(o.dtype())); }
Tensor scalar_tensor(const Scalar& s, TensorOptions o) {
  return full({}, s, o.has_dtype() ? o : o.dtype(kFloat32));
}

namespace {
ScalarType range_dtype(const TensorOptions& o, std::initializer_list<Scalar> vals) {
  if (o.has_dtype()) return o.dtype();
  for (auto& v : vals)
    if (v.is_floating_point()) return kFloat32;
  return kInt64;
}
}  // namespace

Tensor arange(const Scalar& end, TensorOptions o) { return arange(0, end, 1, o); }
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions o) {
  return arange(start, end, 1, o);
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o) {
  ScalarType dt = range_dtype(o, {start, end, step});
  Attrs a = ArangeAttrs::make(start.to_double(), end.to_double(), step.to_double(), dt,
                              dev_type(o.device()), dev_index(o.device()));
  return finish_factory(on_device<ArangeAttrs>(OF_OP("arange"), std::move(a), o.device()), o);
}
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions o) {
  Attrs a = LinspaceAttrs::make(start.to_double(), end.to_double(), steps, o.dtype(),
                                dev_type(o.device()), dev_index(o.device()));
  return finish_factory(on_device<LinspaceAttrs>(OF_OP("linspace"), std::move(a), o.device()), o);
}
Tensor eye(int64_t n, TensorOptions o) { return eye(n, n, o); }
Tensor eye(int64_t n, int64_t m, TensorOptions o) {
  Attrs a = EyeAttrs::make(n, m, o.dtype(), dev_type(o.device()), dev_index(o.device()));
  return finish_factory(on_device<EyeAttrs>(OF_OP("eye"), std::move(a), o.device()), o);
}

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions o) {
  OF_CHECK(data != nullptr || checked_numel(sizes, "from_blob") == 0,
           "[from_blob] data pointer is null");
  OF_CHECK(sizes.size() == strides.size(), "[from_blob] got {} sizes and {} strides", sizes.size(),
           strides.size());
  int64_t extent = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) {
      extent = 0;
      break;
    }
    extent += (sizes[d] - 1) * strides[d];
  }
  checked_numel(sizes, "from_blob");
  auto impl = new_tensor_impl();
  impl->storage = std::make_shared<StorageImpl>(data, size_t(extent) * itemsize(o.dtype()),
                                                o.device(), nullptr);
  impl->sizes = sizes.dims();
  impl->strides = strides.dims();
  impl->dtype = o.dtype();
  impl->device = o.device();
  impl->refresh_contiguous();
  return finish_factory(Tensor(std::move(impl)), o);
}
Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions o) {
  return from_blob(data, sizes, contiguous_strides(sizes), o);
}
Tensor from_blob(void* data, IntArrayRef sizes, std::function<void(void*)> deleter,
                 TensorOptions o) {
  Tensor t = from_blob(data, sizes, o);
  t.impl()->storage->release = std::move(deleter);
  return t;
}

template <class T> Tensor tensor(const std::vector<T>& values, IntArrayRef shape, TensorOptions o) {
  DimVector sizes = shape.empty() ? DimVector{int64_t(values.size())} : shape.dims();
  int64_t n = checked_numel(sizes, "tensor");
  OF_CHECK(n == int64_t(values.size()), "[tensor] {} values cannot fill shape {}", values.size(),
           shape_str(sizes));
  ScalarType src = scalar_type_of<T>;
  Tensor t = make_empty(sizes, src, Device(kCPU));
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < values.size(); ++i) static_cast<bool*>(t.data_ptr())[i] = values[i];
  } else if (!values.empty()) {  // (an empty vector's data() may be null: no memcpy of it)
    std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  }
  if (o.has_dtype() && o.dtype() != src) t = t.to(o.dtype());
  if (o.has_device()) t = t.to(o.device());
  return finish_factory(t, o);
}
template Tensor tensor<float>(const std::vector<float>&, IntArrayRef, TensorOptions);
template Tensor tensor<double>(const std::vector<double>&, IntArrayRef, TensorOptions);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, IntArrayRef, TensorOptions);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, IntArrayRef, TensorOptions);
template Tensor tensor<uint8_t>(const std::vector<uint8_t>&, IntArrayRef, TensorOptions);
template Tensor tensor<bool>(const std::vector<bool>&, IntArrayRef, TensorOptions);
template Tensor tensor<Half>(const std::vector<Half>&, IntArrayRef, TensorOptions);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, IntArrayRef, TensorOptions);

}  // namespace oneflow

namespace oneflow {

Tensor tensor(const Scalar& value, TensorOptions o) {
  if (!o.has_dtype()) o = o.dtype(value.default_dtype());
  return full({}, value, o);
}

Tensor constant_pad_nd(const Tensor& x, IntArrayRef pad, const Scalar& value) {
  return oneflow::pad(x, pad, "constant", value.to_double());
}

}  // namespace oneflow

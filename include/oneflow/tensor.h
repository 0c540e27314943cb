// tensor.h: Storage, TensorImpl, TensorOptions and the Tensor handle.
// NOTE [Tensor layout]: Tensor is a cheap handle (one shared_ptr) to a TensorImpl, which holds
// sizes/strides/offset into a shared, refcounted StorageImpl. Views share the storage; every
// in-place write bumps the storage's version counter so autograd can detect stale saves.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "oneflow/device.h"
#include "oneflow/dtype.h"
#include "oneflow/error.h"
#include "oneflow/placement.h"
#include "oneflow/scalar.h"
#include "oneflow/small_vector.h"

namespace oneflow {

namespace autograd {
struct Node;
}

// A refcounted buffer on one device. `release` returns the memory to its owner (allocator,
// user deleter for from_blob).
struct StorageImpl {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  std::atomic<uint32_t> version{0};
  bool pinned = false;                 // page-locked host memory (Tensor::pin_memory)
  std::function<void(void*)> release;  // user deleters (from_blob) and device allocators
  // Allocator fast path: release_fn(data, release_arg), no std::function call.
  void (*release_fn)(void* data, size_t arg) = nullptr;
  size_t release_arg = 0;
  StorageImpl(void* d, size_t n, Device dev, std::function<void(void*)> rel)
      : data(d), nbytes(n), device(dev), release(std::move(rel)) {}
  StorageImpl(void* d, size_t n, Device dev, void (*fn)(void*, size_t), size_t arg)
      : data(d), nbytes(n), device(dev), release_fn(fn), release_arg(arg) {}
  StorageImpl(const StorageImpl&) = delete;
  ~StorageImpl() {
    if (release_fn) release_fn(data, release_arg);
    else if (release) release(data);
  }
};
using Storage = std::shared_ptr<StorageImpl>;

// Slot for the global-tensor layer (placement + SBP); null for local tensors.
struct GlobalMeta;

struct TensorImpl {
  Storage storage;
  int64_t offset = 0;  // in elements
  DimVector sizes, strides;
  int64_t numel = 1;
  ScalarType dtype = kFloat32;
  Device device;
  bool is_contiguous = true;
  bool is_wrapped_number = false;  // a 0-d tensor made from a bare Scalar (lower promotion rank)
  // autograd
  bool requires_grad = false;  // set on leaves by the user, on outputs by dispatch
  bool retains_grad = false;
  uint32_t output_nr = 0;
  std::shared_ptr<autograd::Node> grad_fn;           // null for leaves
  std::shared_ptr<autograd::Node> grad_accumulator;  // leaves that require grad
  std::shared_ptr<struct GradHolder> grad_holder;    // .grad lives here (see GradHolder)
  std::shared_ptr<TensorImpl> view_base;  // set on views of tensors (for in-place checks)
  std::shared_ptr<GlobalMeta> global;     // global tensors only

  void* raw_data() const {
    return static_cast<char*>(storage->data) + offset * int64_t(itemsize(dtype));
  }
  void refresh_contiguous();  // recompute numel and is_contiguous from sizes/strides
  // Takes o's data and layout (storage, offset, sizes, strides, dtype, device, and the global
  // placement/SBP with the local piece); autograd fields and the view base stay.
  void share_data_from(const TensorImpl& o) {
    storage = o.storage;
    offset = o.offset;
    sizes = o.sizes;
    strides = o.strides;
    numel = o.numel;
    dtype = o.dtype;
    device = o.device;
    is_contiguous = o.is_contiguous;
    global = o.global;
  }
};

class Tensor;

// The types Tensor::item<T>() reads a value as.
template <class T>
inline constexpr bool is_item_type =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
    std::is_same_v<T, BFloat16> || std::is_same_v<T, bool> || std::is_same_v<T, int8_t> ||
    std::is_same_v<T, int16_t> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
    std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> ||
    std::is_same_v<T, uint64_t>;

// libtorch's memory formats: how a 4-D (N, C, H, W) or 5-D (N, C, D, H, W) tensor is laid out.
// ChannelsLast keeps C innermost (strides (HWC, 1, WC, C)); Preserve (only for conversions)
// keeps the input's format when it has one, else gives a contiguous result.
enum class MemoryFormat : int8_t { Contiguous, Preserve, ChannelsLast, ChannelsLast3d };
std::ostream& operator<<(std::ostream& os, MemoryFormat mf);

// dtype, device, requires_grad. Implicit from a dtype or a device: of::ones({2}, of::kBool).
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType t) : dtype_(t) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions(DeviceType d) : device_(Device(d)) {}
  TensorOptions(const char* d) : device_(Device(d)) {}
  TensorOptions dtype(ScalarType t) const {
    auto o = *this;
    o.dtype_ = t;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
  ScalarType dtype() const { return dtype_.value_or(kFloat32); }
  std::optional<ScalarType> dtype_opt() const { return dtype_; }
  bool has_dtype() const { return dtype_.has_value(); }
  Device device() const { return device_.value_or(Device(kCPU)); }
  bool has_device() const { return device_.has_value(); }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<ScalarType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;
};
inline TensorOptions dtype(ScalarType t) { return TensorOptions().dtype(t); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

namespace indexing {
class TensorIndex;
}

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(const Tensor&) & = default;  // rebinds the handle
  Tensor& operator=(Tensor&&) & noexcept = default;
  // Assigning to a temporary writes into its memory, as libtorch's `t[0] = v` or
  // `t.index({Slice(), 1}) = 0` do (the value broadcasts to this tensor's shape).
  Tensor& operator=(const Tensor& value) &&;
  Tensor& operator=(const Scalar& value) &&;

  // --- metadata ---
  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  IntArrayRef sizes() const { return check_impl()->sizes; }
  IntArrayRef strides() const { return check_impl()->strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return int64_t(check_impl()->sizes.size()); }
  int64_t ndimension() const { return dim(); }
  int64_t numel() const { return check_impl()->numel; }
  ScalarType scalar_type() const { return check_impl()->dtype; }
  ScalarType dtype() const { return check_impl()->dtype; }
  Device device() const { return check_impl()->device; }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_floating_point() const { return oneflow::is_floating_point(dtype()); }
  TensorOptions options() const { return TensorOptions().dtype(dtype()).device(device()); }
  // New tensors with this one's dtype and device unless `options` say otherwise (libtorch's).
  Tensor new_empty(IntArrayRef size, TensorOptions options = {}) const;
  Tensor new_zeros(IntArrayRef size, TensorOptions options = {}) const;
  Tensor new_ones(IntArrayRef size, TensorOptions options = {}) const;
  Tensor new_full(IntArrayRef size, const Scalar& fill_value, TensorOptions options = {}) const;
  bool is_contiguous() const { return check_impl()->is_contiguous; }
  int64_t storage_offset() const { return check_impl()->offset; }
  size_t element_size() const { return itemsize(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  long use_count() const { return impl_.use_count(); }
  // Version counter of the underlying storage (bumped by every in-place write).
  uint32_t _version() const { return check_impl()->storage->version.load(); }
  bool is_global() const { return impl_ && impl_->global != nullptr; }
  [[noreturn]] static void global_data_ptr_error();
  // --- global tensors (NOTE [Global tensors], include/oneflow/global.h) ---
  // A local tensor becomes this rank's piece of a global tensor (split), the whole value
  // (broadcast) or this rank's addend (partial_sum); a global tensor is converted (boxing).
  Tensor to_global(const Placement& placement, const NdSbp& sbp) const;
  Tensor to_global(const Placement& placement, Sbp sbp) const {
    return to_global(placement, NdSbp{sbp});
  }
  // This rank's piece of a global tensor (a view sharing its memory; differentiable).
  Tensor to_local() const;
  Placement placement() const;  // [placement] error for a local tensor
  NdSbp sbp() const;

  // --- data access (CPU tensors) ---
  // A global tensor's data is its pieces': data_ptr() raises (use to_local()).
  void* data_ptr() const {
    auto* i = check_impl();
    if (i->global) global_data_ptr_error();
    return i->raw_data();
  }
  template <class T> T* data_ptr() const;
  template <class T> T* mutable_data_ptr() const { return data_ptr<T>(); }
  // Value of a one-element tensor (any device); [item] error for more elements. T: a dtype's C++
  // type, or int8_t, int16_t, uint16_t, uint32_t, uint64_t (libtorch's set); floating-point
  // values converted to an integer type saturate (NaN gives 0). In a template where the tensor's
  // type depends on a template parameter, C++ wants `t.template item<double>()` (as with
  // libtorch), or write t.item().toDouble().
  template <class T>
  requires is_item_type<T> T item()
  const;
  Scalar item() const;
  // Copy of the elements in row-major order, converted to T.
  template <class T> std::vector<T> to_vector() const;

  // --- autograd ---
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  Tensor& set_requires_grad(bool r);
  Tensor& requires_grad_(bool r = true) { return set_requires_grad(r); }
  bool is_leaf() const { return !impl_ || impl_->grad_fn == nullptr; }
  const Tensor& grad() const;  // undefined until a gradient arrives
  Tensor& mutable_grad();      // assignable
  std::shared_ptr<autograd::Node> grad_fn() const { return impl_ ? impl_->grad_fn : nullptr; }
  void retain_grad();
  bool retains_grad() const { return impl_ && impl_->retains_grad; }
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  Tensor detach() const;
  Tensor& detach_();
  // libtorch's set_data: this tensor takes new_data's data, shape, dtype and device in place,
  // keeping its identity and autograd settings (every handle to it sees the change).
  void set_data(const Tensor& new_data) const;
  Tensor data() const { return detach(); }

  // --- conversion and copies ---
  // memory_format: unset or Preserve keeps a channels-last input channels-last (libtorch's
  // default); Contiguous / ChannelsLast / ChannelsLast3d give that layout.
  // non_blocking = true: a host-to-device copy from pinned memory (pin_memory()) is only queued
  // on the current CUDA stream and the call returns at once; kernels queued after it on that
  // stream see the data. Other copies (pageable memory, device-to-host) return when complete.
  Tensor to(ScalarType t, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> memory_format = std::nullopt) const;
  Tensor to(Device d, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> memory_format = std::nullopt) const;
  Tensor to(Device d, ScalarType t, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> memory_format = std::nullopt) const;
  Tensor to(const TensorOptions& o, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> memory_format = std::nullopt) const;
  Tensor to(const Tensor& other) const { return to(other.device(), other.dtype()); }
  // t.to(of::kCPU), t.to("cuda:1"): a device given by its type or its name (both also convert
  // to TensorOptions, so without these overloads the call is ambiguous).
  Tensor to(DeviceType d, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> memory_format = std::nullopt) const {
    return to(Device(d), non_blocking, copy, memory_format);
  }
  Tensor to(const char* d, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> memory_format = std::nullopt) const {
    return to(Device(d), non_blocking, copy, memory_format);
  }
  // A copy in page-locked host memory (needs a CUDA device; not recorded by autograd, as a
  // DataLoader's pinned batch): what makes to(cuda, non_blocking=true) asynchronous.
  Tensor pin_memory() const;
  bool is_pinned() const;  // its storage is page-locked host memory from pin_memory()
  Tensor cpu() const { return to(Device(kCPU)); }
  Tensor cuda() const { return to(Device(kCUDA, 0)); }
  Tensor type_as(const Tensor& o) const { return to(o.dtype()); }
  Tensor toType(ScalarType t) const { return to(t); }
  Tensor float_() const { return to(kFloat32); }
  Tensor clone() const;
  Tensor clone(std::optional<MemoryFormat> memory_format) const;  // Preserve when unset
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor contiguous() const;
  // This tensor when already laid out so, else a copy in that layout (Preserve is an error, as
  // in libtorch; ChannelsLast needs 4 dims, ChannelsLast3d 5).
  Tensor contiguous(MemoryFormat memory_format) const;
  // Whether the strides are those of the format (size-1 dims may have any stride).
  bool is_contiguous(MemoryFormat memory_format) const;
  // ChannelsLast(3d) for a 4-D (5-D) tensor whose strides are channels-last and not plain
  // contiguous, else Contiguous.
  MemoryFormat suggest_memory_format(bool channels_last_strides_exact_match = false) const;

  // --- views ---
  Tensor view(IntArrayRef size) const;
  Tensor view_as(const Tensor& o) const { return view(o.sizes()); }
  Tensor reshape(IntArrayRef size) const;
  Tensor reshape_as(const Tensor& o) const { return reshape(o.sizes()); }
  Tensor permute(IntArrayRef dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor mT() const { return transpose(-2, -1); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  // libtorch's indexing (of::indexing::{Slice, None, Ellipsis}, integers, bools and bool or
  // integer tensors): basic indices give a view; tensor indices gather (differentiably).
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  // Writes `value` (broadcast) where index(indices) reads.
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Scalar& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value);
  Tensor expand(IntArrayRef size, bool implicit = false) const;
  Tensor expand_as(const Tensor& o) const { return expand(o.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes) const;
  Tensor as_strided(IntArrayRef size, IntArrayRef stride,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;

  // --- elementwise (methods mirror the free functions in ops.h) ---
#define OF_UNARY_METHOD(name) \
  Tensor name() const;        \
  Tensor& name##_();
  // clang-format off
  OF_UNARY_METHOD(neg)
  OF_UNARY_METHOD(abs)
  OF_UNARY_METHOD(sign)
  OF_UNARY_METHOD(exp)
  OF_UNARY_METHOD(exp2)
  OF_UNARY_METHOD(log)
  OF_UNARY_METHOD(log2)
  OF_UNARY_METHOD(log1p)
  OF_UNARY_METHOD(expm1)
  OF_UNARY_METHOD(sqrt)
  OF_UNARY_METHOD(rsqrt)
  OF_UNARY_METHOD(reciprocal)
  OF_UNARY_METHOD(square)
  OF_UNARY_METHOD(sin)
  OF_UNARY_METHOD(cos)
  OF_UNARY_METHOD(tan)
  OF_UNARY_METHOD(tanh)
  OF_UNARY_METHOD(sigmoid)
  OF_UNARY_METHOD(relu)
  OF_UNARY_METHOD(silu)
  OF_UNARY_METHOD(erf)
  OF_UNARY_METHOD(floor)
  OF_UNARY_METHOD(ceil)
  OF_UNARY_METHOD(round)
  OF_UNARY_METHOD(trunc)
#undef OF_UNARY_METHOD
  // clang-format on
  Tensor logical_not() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor gelu(std::string_view approximate = "none") const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp(const std::optional<Tensor>& min, const std::optional<Tensor>& max = {}) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor clamp_min(const Scalar& min) const { return clamp(min, std::nullopt); }
  Tensor clamp_max(const Scalar& max) const { return clamp(std::nullopt, max); }
  Tensor pow(const Tensor& e) const;
  Tensor pow(const Scalar& e) const;
  Tensor& pow_(const Scalar& e);
  Tensor masked_fill(const Tensor& mask, const Scalar& v) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& v);
  Tensor lerp(const Tensor& end, const Scalar& weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor where(const Tensor& condition, const Tensor& other) const;

#define OF_BINARY_METHOD(name)        \
  Tensor name(const Tensor& o) const; \
  Tensor name(const Scalar& o) const; \
  Tensor& name##_(const Tensor& o);   \
  Tensor& name##_(const Scalar& o);
  // clang-format off
  OF_BINARY_METHOD(mul)
  OF_BINARY_METHOD(maximum)
  OF_BINARY_METHOD(minimum)
  OF_BINARY_METHOD(fmod)
  OF_BINARY_METHOD(remainder)
  OF_BINARY_METHOD(atan2)
  OF_BINARY_METHOD(eq)
  OF_BINARY_METHOD(ne)
  OF_BINARY_METHOD(lt)
  OF_BINARY_METHOD(le)
  OF_BINARY_METHOD(gt)
  OF_BINARY_METHOD(ge)
  OF_BINARY_METHOD(logical_and)
  OF_BINARY_METHOD(logical_or)
  OF_BINARY_METHOD(logical_xor)
#undef OF_BINARY_METHOD
  // clang-format on
  Tensor add(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& o, const Scalar& alpha = 1) const;
  Tensor& add_(const Tensor& o, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& o, const Scalar& alpha = 1);
  Tensor sub(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& o, const Scalar& alpha = 1) const;
  Tensor& sub_(const Tensor& o, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& o, const Scalar& alpha = 1);
  Tensor div(const Tensor& o, std::optional<std::string_view> rounding_mode = std::nullopt) const;
  Tensor div(const Scalar& o, std::optional<std::string_view> rounding_mode = std::nullopt) const;
  Tensor& div_(const Tensor& o, std::optional<std::string_view> rounding_mode = std::nullopt);
  Tensor& div_(const Scalar& o, std::optional<std::string_view> rounding_mode = std::nullopt);
  Tensor& zero_();
  Tensor& fill_(const Scalar& v);
  Tensor& uniform_(double from = 0, double to = 1);
  Tensor& normal_(double mean = 0, double std = 1);
  Tensor multinomial(int64_t num_samples, bool replacement = false) const;

  // --- reductions ---
  Tensor sum(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false,
             std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dims, bool keepdim = false,
              std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor prod(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor prod(int64_t dim, bool keepdim = false,
              std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(bool unbiased = true) const;
  Tensor var(IntArrayRef dims, bool unbiased = true, bool keepdim = false) const;
  Tensor std(bool unbiased = true) const;
  Tensor std(IntArrayRef dims, bool unbiased = true, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dims, bool keepdim = false) const;
  Tensor norm(const Scalar& p = 2) const;
  Tensor norm(const Scalar& p, IntArrayRef dims, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor cumprod(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor sum_to_size(IntArrayRef size) const;

  // --- linear algebra ---
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;
  Tensor bmm(const Tensor& o) const;
  Tensor dot(const Tensor& o) const;
  Tensor outer(const Tensor& o) const;
  Tensor addmm(const Tensor& m1, const Tensor& m2, const Scalar& beta = 1,
               const Scalar& alpha = 1) const;

  // --- shape and indexing ---
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(IntArrayRef split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  // In place: writes src's elements into this tensor at the index positions along dim (a
  // traced graph reads the index at each replay: a KV cache written at a position tensor).
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source,
                   const Scalar& alpha = 1) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor flip(IntArrayRef dims) const;
  Tensor roll(IntArrayRef shifts, IntArrayRef dims = {}) const;
  Tensor repeat(IntArrayRef repeats) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true) const;

  // --- operators ---
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator+=(const Scalar& o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator-=(const Scalar& o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator*=(const Scalar& o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator/=(const Scalar& o) { return div_(o); }

  std::string toString() const;

 private:
  TensorImpl* check_impl() const {
    if (!impl_) throw Error("[tensor] this tensor is undefined (default-constructed)");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Holds a tensor's .grad so that grad() / mutable_grad() can hand out real references.
struct GradHolder {
  Tensor grad;
};
// The .grad slot of a tensor impl (created on first use).
inline Tensor& grad_slot(TensorImpl* i) {
  if (!i->grad_holder) i->grad_holder = std::make_shared<GradHolder>();
  return i->grad_holder->grad;
}

template <class T> T* Tensor::data_ptr() const {
  auto* i = check_impl();
  OF_HEADER_CHECK(i->dtype == scalar_type_of<T>, "[data_ptr] tensor has dtype {}, asked for {}",
                  dtype_name(i->dtype), dtype_name(scalar_type_of<T>));
  if (i->global) global_data_ptr_error();
  return static_cast<T*>(i->raw_data());
}

// "(2, 3)": how errors and printing show shapes.
std::string shape_str(IntArrayRef sizes);

// The printed form of a tensor (what operator<< produces, and fmt::format("{}", t) with
// <oneflow/fmt.h>).
std::string format_tensor(const Tensor& t);

}  // namespace oneflow

#ifdef ONEFLOW_BUILDING
#include "oneflow/fmt.h"  // the library formats tensors with fmt (NOTE [No fmt in public headers])
#endif

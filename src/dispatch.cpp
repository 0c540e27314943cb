#include "dispatch.h"
#include "output_layout.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "allocator.h"
#include "autocast.h"
#include "cuda_backend.h"
#include "oneflow/runtime.h"
#include "autograd/node.h"
#include "ops/attr_schema.h"
#include "ops/core_attrs.h"

namespace oneflow {

OF_TLS TraceObserver* g_tracer = nullptr;

// Registered here rather than declared in dispatch.h: the nn op families are newer.
void register_conv_ops();
void register_nn_ops();
void register_nn_extra_ops();
void register_rnn_ops();

GlobalDispatchHook g_global_dispatch_hook = nullptr;

namespace {

OF_TLS bool t_grad_enabled = true;
OF_TLS int t_kernel_depth = 0;  // >0 while a kernel runs: nested ops are not traced
OF_TLS const OpDef* t_running_kernel = nullptr;  // the op whose kernel dispatch is running
OF_TLS bool t_prefer_decompositions = false;

// NOTE [No kernel dispatches]: a kernel computes; it never dispatches an op of the table (the
// tracer would not see that work, the planner could not place its buffers). An op made of other
// ops says so with OpDef::decompose. Any nested dispatch is recorded here, and the suite fails
// on one (tests/main.cpp, tests/global_worker.cpp).
std::mutex g_nested_mu;
std::set<std::pair<std::string, std::string>>& nested_set() {
  static auto* s = new std::set<std::pair<std::string, std::string>>();
  return *s;
}
void note_nested(const OpDef& inner) {
  std::lock_guard<std::mutex> lk(g_nested_mu);
  nested_set().emplace(t_running_kernel ? t_running_kernel->name : std::string("(executor)"),
                       inner.name);
}

struct OpTable {
  std::deque<OpDef> ops;
  std::unordered_map<std::string, const OpDef*> by_name;
  OpTable() {
    struct Scope {
      OpTable* t;
      Scope(OpTable* tt) : t(tt) { current() = t; }
      ~Scope() { current() = nullptr; }
    } scope(this);
    register_core_ops();
    register_unary_ops();
    register_binary_ops();
    register_reduce_ops();
    register_linalg_ops();
    register_shape_ops();
    register_index_ops();
    register_random_ops();
    register_conv_ops();
    register_nn_ops();
    register_nn_extra_ops();
    register_rnn_ops();
    register_global_ops();
  }
  static OpTable*& current() {
    static OpTable* c = nullptr;
    return c;
  }
};

OpTable& table() {
  static OpTable* t = new OpTable();
  return *t;
}

}  // namespace

namespace {
thread_local const StorageImpl* t_constant_operand = nullptr;
}  // namespace
const StorageImpl* constant_operand_storage() { return t_constant_operand; }
ConstantOperandScope::ConstantOperandScope(const StorageImpl* s) : prev_(t_constant_operand) {
  t_constant_operand = s;
}
ConstantOperandScope::~ConstantOperandScope() { t_constant_operand = prev_; }

const OpDef* register_op(OpDef def) {
  OpTable* t = OpTable::current();
  if (!t) throw Error("[register_op] ops are registered only while the op table is built");
  OF_CHECK(!t->by_name.count(def.name), "[register_op] op '{}' registered twice", def.name);
  OF_CHECK(def.infer_meta != nullptr, "[register_op] op '{}' has no infer_meta", def.name);
  OF_CHECK(def.attr_types.empty() || def.attr_types.size() == def.attr_names.size(),
           "[register_op] op '{}' names {} attributes but its schema types {}", def.name,
           def.attr_names.size(), def.attr_types.size());
  for (size_t k = 0; k < def.attr_names.size(); ++k)
    for (size_t j = 0; j < k; ++j)
      OF_CHECK(def.attr_names[j] != def.attr_names[k],
               "[register_op] op '{}' names two attributes '{}'", def.name, def.attr_names[k]);
  for (uint8_t t : def.attr_types) {
    const uint8_t base = t & uint8_t(~kOptionalAttr);  // an optional field: its value's
    OF_CHECK(base > 0 && base < std::variant_size_v<AttrValue>,
             "[register_op] op '{}' has an attribute of no type", def.name);
  }
  t->ops.push_back(std::move(def));
  const OpDef* p = &t->ops.back();
  t->by_name.emplace(p->name, p);
  return p;
}

const OpDef& find_op(std::string_view name) {
  auto& t = table();
  auto it = t.by_name.find(std::string(name));
  if (it == t.by_name.end()) fail("[find_op] no op named '{}'", name);
  return *it->second;
}

void set_op_cuda_kernel(std::string_view name, KernelFn fn) {
  const_cast<OpDef&>(find_op(name)).cuda = fn;  // the table owns its ops; only this slot changes
}
void set_op_cuda_16bit(std::string_view name) {
  const_cast<OpDef&>(find_op(name)).cuda_16bit = true;
}

void ensure_op_table() { table(); }

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> v;
  for (auto& op : table().ops) v.push_back(&op);
  return v;
}

bool in_kernel() { return t_kernel_depth > 0; }
PreferDecompositions::PreferDecompositions() : prev_(t_prefer_decompositions) {
  t_prefer_decompositions = true;
}
PreferDecompositions::~PreferDecompositions() { t_prefer_decompositions = prev_; }
std::vector<std::pair<std::string, std::string>> nested_dispatches() {
  std::lock_guard<std::mutex> lk(g_nested_mu);
  return {nested_set().begin(), nested_set().end()};
}
KernelScope::KernelScope() { ++t_kernel_depth; }
KernelScope::~KernelScope() { --t_kernel_depth; }
void note_host_read(const Tensor& t, const char* what) {
  // Wrapped numbers are constants made from host scalars: reading them back is no data read.
  if (g_tracer && t_kernel_depth == 0 && !(t.defined() && t.impl()->is_wrapped_number))
    g_tracer->on_host_read(what);
}

bool grad_mode_enabled() { return t_grad_enabled; }
bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool e) { t_grad_enabled = e; }
NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { t_grad_enabled = prev_; }

// ---------------------------------------------------------------- attrs equality

bool scalar_equal(const Scalar& a, const Scalar& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_floating_point()) {
    const double x = a.to_double(), y = b.to_double();
    return std::memcmp(&x, &y, sizeof x) == 0;  // bitwise: -0.0 != 0.0, NaN == same NaN
  }
  return a.to_long() == b.to_long();
}

namespace {
size_t hash_mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}
size_t hash_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return std::hash<uint64_t>()(u);
}
}  // namespace

size_t hash_scalar(const Scalar& s) {
  size_t h = size_t(s.kind());
  return hash_mix(
      h, s.is_floating_point() ? hash_bits(s.to_double()) : std::hash<int64_t>()(s.to_long()));
}

bool operator==(const Attrs& a, const Attrs& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    const AttrValue &x = a.values[k], &y = b.values[k];
    if (x.index() != y.index()) return false;
    const bool same = std::visit(
        [&](const auto& xv) -> bool {
          using T = std::decay_t<decltype(xv)>;
          const T& yv = std::get<T>(y);
          if constexpr (std::is_same_v<T, std::monostate>) return true;
          else if constexpr (std::is_same_v<T, double>)
            return std::memcmp(&xv, &yv, sizeof xv) == 0;
          else if constexpr (std::is_same_v<T, Scalar>) return scalar_equal(xv, yv);
          else if constexpr (std::is_same_v<T, DimVector>)
            return IntArrayRef(xv) == IntArrayRef(yv);
          else return xv == yv;
        },
        x);
    if (!same) return false;
  }
  return true;
}

size_t hash_attrs(const Attrs& a) {
  size_t h = a.size();
  for (const AttrValue& v : a.values) {
    h = hash_mix(h, v.index());
    std::visit(
        [&](const auto& xv) {
          using T = std::decay_t<decltype(xv)>;
          if constexpr (std::is_same_v<T, std::monostate>) return;
          else if constexpr (std::is_same_v<T, double>) h = hash_mix(h, hash_bits(xv));
          else if constexpr (std::is_same_v<T, Scalar>) h = hash_mix(h, hash_scalar(xv));
          else if constexpr (std::is_same_v<T, DimVector>) {
            for (int64_t d : xv) h = hash_mix(h, std::hash<int64_t>()(d));
          } else if constexpr (std::is_same_v<T, ScalarType>) h = hash_mix(h, size_t(xv));
          else h = hash_mix(h, std::hash<T>()(xv));
        },
        v);
  }
  return h;
}

// ---------------------------------------------------------------- helpers

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // 0-d tensors accept dim 0 and -1
  if (dim < -n || dim >= n)
    fail("[{}] dimension out of range (expected to be in range of [{}, {}], but got {})", op, -n,
         n - 1, dim);
  return dim < 0 ? dim + n : dim;
}

void Attrs::missing(size_t k) const {
  fail("[attrs] attribute {} was read but the op was given {}", k, values.size());
}

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector st(sizes.size(), 1);
  int64_t acc = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    st[d] = acc;
    // unsigned: the product only overflows when a size is 0 (numel is checked to fit), and
    // an empty tensor's strides are never used to address memory
    acc = int64_t(uint64_t(acc) * uint64_t(std::max<int64_t>(sizes[d], 1)));
  }
  return st;
}

int64_t checked_numel(IntArrayRef sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0) fail("[{}] negative dimension {} in size {}", op, s, shape_str(sizes));
    if (s != 0 && n > (int64_t(1) << 62) / s)
      fail("[{}] size {} overflows the number of elements", op, shape_str(sizes));
    n *= s;
  }
  return n;
}

Device device_from_attrs(int64_t type, int64_t index, const char* op) {
  if (type != int64_t(kCPU) && type != int64_t(kCUDA))
    fail("[{}] unknown device type {} (0 is CPU, 1 CUDA)", op, type);
  if (index < -1 || index > 127) fail("[{}] device index {} is out of range", op, index);
  return Device(DeviceType(type), int(index));
}

int64_t view_extent(IntArrayRef sizes, IntArrayRef strides, int64_t offset, const char* op) {
  if (sizes.size() != strides.size())
    fail("[{}] got {} sizes and {} strides", op, sizes.size(), strides.size());
  for (int64_t st : strides)
    if (st < 0) fail("[{}] negative stride {} is not supported", op, st);
  if (offset < 0) fail("[{}] negative storage offset {}", op, offset);
  if (checked_numel(sizes, op) == 0) return 0;
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
        __builtin_add_overflow(last, reach, &last) || last == INT64_MAX)
      fail("[{}] size {} with stride {} and offset {} overflows the addressable elements", op,
           shape_str(sizes), shape_str(strides), offset);
  }
  if (last == INT64_MAX)  // a 0-d view at the last offset (fuzz_ops)
    fail("[{}] storage offset {} overflows the addressable elements", op, offset);
  return last + 1;
}

std::string shape_str(IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  if (sizes.size() == 1) s += ",";
  return s + ")";
}

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

// ---------------------------------------------------------------- dispatch

namespace {

[[noreturn]] void device_mismatch(const OpDef& op, const TensorList& inputs) {
  std::string devs;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (!devs.empty()) devs += ", ";
    devs += t.device().str();
  }
  fail("[{}] expected all tensors to be on the same device, but found tensors on {}", op.name,
       devs);
}

// OF_CUDA_PROFILE_OPS=1: each eager CUDA kernel runs between two device synchronizations and
// its wall time is added up by (op, dtype); the table goes to stderr at exit. A diagnosis tool
// (it serializes the GPU with the host): bench/gpu_check.sh profiles the model steps with it.
struct OpProfile {
  std::mutex mu;
  std::map<std::string, std::pair<size_t, double>> by_op;  // calls, seconds
  ~OpProfile() {
    if (by_op.empty()) return;
    std::vector<std::pair<std::string, std::pair<size_t, double>>> rows(by_op.begin(), by_op.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    double total = 0;
    for (const auto& r : rows) total += r.second.second;
    std::fprintf(stderr, "[cuda profile] %zu (op, dtype) pairs, %.1f ms in all (synchronized)\n",
                 rows.size(), 1e3 * total);
    for (size_t i = 0; i < rows.size() && i < 40; ++i)
      std::fprintf(stderr, "[cuda profile] %-34s %7zu calls %9.2f ms %8.1f us/call %5.1f%%\n",
                   rows[i].first.c_str(), rows[i].second.first, 1e3 * rows[i].second.second,
                   1e6 * rows[i].second.second / double(rows[i].second.first),
                   100.0 * rows[i].second.second / total);
  }
};
OpProfile& op_profile() {
  static OpProfile p;
  return p;
}
bool op_profile_on() {
  static const bool on = std::getenv("OF_CUDA_PROFILE_OPS") != nullptr;
  return on;
}
template <class F> void profile_cuda_kernel(const OpDef& op, const TensorList& inputs, F&& run) {
  std::string key = op.name;
  for (const Tensor& t : inputs)
    if (t.defined()) {
      key += " " + std::string(dtype_name(t.dtype()));
      break;
    }
  OpProfile& p = op_profile();
  cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  run();
  cuda::synchronize();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(p.mu);
  auto& e = p.by_op[key];
  ++e.first;
  e.second += sec;
}

// NOTE [CPU scalars beside device tensors]: as in PyTorch, a CPU 0-d tensor may be an operand
// of an elementwise op on CUDA tensors (a learning rate, a step count, num_batches_tracked's
// increment): it is copied to their device first (a differentiable `to`, so a gradient reaches
// it; traced, the copy is a host-side step before the CUDA Graph). Any other mix of devices, a
// CPU 0-d tensor an op writes, or one inside a kernel, is an error naming the devices. (Wrapped
// numbers, from Scalars, are made on the device by the op wrappers.)
void move_cpu_scalars(const OpDef& op, TensorList& inputs, const Tensor* out) {
  auto cpu_scalar = [](const Tensor& t) { return t.is_cpu() && t.dim() == 0; };
  const Tensor* dev = nullptr;
  for (const Tensor& t : inputs) {
    if (!t.defined() || cpu_scalar(t)) continue;
    if (!dev) dev = &t;
    else if (t.device() != dev->device()) device_mismatch(op, inputs);
  }
  if (!dev || !op.has(kElementwise) || t_kernel_depth > 0) device_mismatch(op, inputs);
  if (out && out->defined() && out->device() != dev->device()) device_mismatch(op, inputs);
  const Device d = dev->device();
  for (Tensor& t : inputs)
    if (t.defined() && t.device() != d) t = t.to(d);
}

// NOTE [Output layout]: an elementwise op whose first full-shape input is dense but permuted
// (a transpose of a contiguous tensor) writes its result in that same layout, as libtorch does,
// so that x.t() + y.t() or gelu(x.t()) stream through memory instead of transposing.
// Returns the strides to allocate with, or empty for row-major.
DimVector elementwise_layout(const TensorList& inputs, const TensorMeta& m) {
  const size_t nd = m.sizes.size();
  if (nd < 2) return {};
  for (const Tensor& t : inputs) {
    if (!t.defined() || !(t.sizes() == IntArrayRef(m.sizes))) continue;
    const TensorImpl* i = t.impl();
    if (i->is_contiguous) return {};
    // dims by decreasing stride (stable); dense means the strides are the row-major strides
    // of the sizes taken in that order
    DimVector perm(nd, 0);
    for (size_t d = 0; d < nd; ++d) perm[d] = int64_t(d);
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t a, int64_t b) { return i->strides[a] > i->strides[b]; });
    DimVector st(nd, 0);
    int64_t expect = 1;
    for (size_t k = nd; k-- > 0;) {
      const int64_t d = perm[k];
      if (i->sizes[d] != 1 && i->strides[d] != expect) return {};
      st[d] = expect;
      expect *= std::max<int64_t>(i->sizes[d], 1);
    }
    return st;
  }
  return {};
}

// `copy` backs contiguous(), clone() and to(dtype): its result is always row-major.
const OpDef* row_major_copy() { return &OF_OP("copy"); }

}  // namespace

DimVector fresh_output_strides(const OpDef& op, const TensorList& inputs, const TensorMeta& m) {
  if (op.has(kElementwise) && m.device.is_cpu() && !m.sizes.empty() && &op != row_major_copy()) {
    DimVector st = elementwise_layout(inputs, m);
    if (!st.empty()) return st;
  }
  return contiguous_strides(m.sizes);
}

namespace {

void check_out(const OpDef& op, const Tensor& out, const TensorMeta& m) {
  if (!(out.sizes() == IntArrayRef(m.sizes)))
    fail("[{}] output with shape {} doesn't match the result shape {}", op.name,
         shape_str(out.sizes()), shape_str(m.sizes));
  if (!can_cast(m.dtype, out.dtype()))
    fail("[{}] result type {} can't be cast to the desired output type {}", op.name,
         dtype_name(m.dtype), dtype_name(out.dtype()));
  if (out.device() != m.device)
    fail("[{}] output is on {}, but the result is on {}", op.name, out.device().str(),
         m.device.str());
}

}  // namespace

namespace {
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

GradPlan plan_autograd(const OpDef& op, const TensorList& inputs, const Tensor* out) {
  GradPlan gp;
  const bool grad_on = t_grad_enabled && op.vjp;
  bool& needs_grad = gp.needs_grad;
  if (grad_on) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!((op.nondiff_inputs >> i) & 1u) && inputs[i].defined() && inputs[i].requires_grad())
        needs_grad = true;
  }
  int out_alias = -1;
  TensorList& snapshot = gp.snapshot;
  if (out) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].is_same(*out)) out_alias = int(i);
    if (needs_grad || (out->requires_grad() && t_grad_enabled)) {
      if (out_alias < 0)
        fail(
            "[{}] out= arguments don't support automatic differentiation, but one of the "
            "arguments requires grad",
            op.name);
      if (out->is_leaf() && out->requires_grad())
        fail("[{}] a leaf tensor that requires grad is being used in an in-place operation",
             op.name);
      if (out->impl()->view_base && out->impl()->view_base->requires_grad)
        fail(
            "[{}] in-place operation on a view of a tensor that requires grad is not "
            "supported; use the out-of-place form",
            op.name);
      needs_grad = grad_on;
      if (needs_grad && ((op.save_inputs >> out_alias) & 1u)) {
        snapshot = inputs;  // the VJP must see the value before it is overwritten
        NoGradGuard ng;
        snapshot[out_alias] = inputs[out_alias].clone();
      }
    }
  }
  return gp;
}

namespace {

// Step 4 for an op that decomposes (NOTE [Decompositions]).
TensorList run_decomposition(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                             Tensor* out, const MetaList& metas, const GradPlan& gp) {
  TensorList outputs;
  {
    NoGradGuard ng;
    outputs = op.decompose(inputs, attrs);
  }
  if (outputs.size() != metas.size())
    fail("[{}] internal: its decomposition returned {} outputs, infer_meta says {}", op.name,
         outputs.size(), metas.size());
  for (size_t i = 0; i < metas.size(); ++i)
    if (!(outputs[i].sizes() == IntArrayRef(metas[i].sizes)) ||
        outputs[i].dtype() != metas[i].dtype)
      fail("[{}] internal: its decomposition's output {} is {} {}, infer_meta says {} {}", op.name,
           i, dtype_name(outputs[i].dtype()), shape_str(outputs[i].sizes()),
           dtype_name(metas[i].dtype), shape_str(metas[i].sizes));
  if (out) {
    NoGradGuard ng;
    out->copy_(outputs[0]);
    outputs[0] = *out;
  }
  if (gp.needs_grad)
    autograd::record(op, inputs, attrs, outputs, gp.snapshot.empty() ? nullptr : &gp.snapshot);
  return outputs;
}

}  // namespace

TensorList dispatch(const OpDef& op, TensorList inputs, Attrs attrs, Tensor* out) {
  // 0. autocast's casts (dispatched ops of their own, recorded before this one); the 16-bit
  // widening is step 2b
  if (!out && t_kernel_depth == 0 && autocast_detail::active())
    autocast_detail::cast_inputs(op, inputs, attrs);
  if (t_kernel_depth > 0) note_nested(op);
  TraceObserver* const tracer = t_kernel_depth == 0 ? g_tracer : nullptr;
  if (tracer) tracer->before_op(op);
  // 1. validate devices; global tensors go to the global layer
  const Tensor* first = nullptr;
  bool mixed = false;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (t.impl()->global) {
      if (!g_global_dispatch_hook)
        fail("[{}] global tensors need the global layer, which is not initialized", op.name);
      return g_global_dispatch_hook(op, std::move(inputs), std::move(attrs), out);
    }
    if (!first) first = &t;
    else mixed = mixed || t.device() != first->device();
  }
  if (mixed) move_cpu_scalars(op, inputs, out);
  // 1b. inputs the kernel needs dense (never the tensor an in-place op writes)
  if (op.contiguous_inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!((op.contiguous_inputs >> i) & 1u)) continue;
      Tensor& t = inputs[i];
      if (!t.defined() || t.is_contiguous() || (out && t.is_same(*out))) continue;
      t = t.contiguous();
    }
  }
  // 2. infer output metadata (throws before any state changes)
  MetaList metas;
  op.infer_meta(inputs, attrs, metas);
  if (out) check_out(op, *out, metas[0]);
  // 2b. float16/bfloat16 given to float32 kernels: the op runs widened (NOTE [Reduced-precision
  // fallback]), after infer_meta validated the call as the caller made it
  if (!out && t_kernel_depth == 0 && autocast_detail::needs_widening(op, inputs))
    return autocast_detail::widened_dispatch(op, std::move(inputs), std::move(attrs));
  // 3. in-place/out= autograd rules, checked before anything is written
  GradPlan gp = plan_autograd(op, inputs, out);
  // 3b. no kernel for the device: the op's decomposition (NOTE [Decompositions])
  if (op.decompose && !op.has(kView)) {
    const Device dev = first ? first->device() : metas[0].device;
    if (t_prefer_decompositions || !(dev.is_cuda() ? op.cuda : op.cpu))
      return run_decomposition(op, inputs, attrs, out, metas, gp);
  }
  const bool needs_grad = gp.needs_grad;
  TensorList& snapshot = gp.snapshot;
  // 4. allocate outputs
  TensorList outputs;
  Tensor staged;  // when out's dtype/layout needs a copy after the kernel
  for (size_t i = 0; i < metas.size(); ++i) {
    const TensorMeta& m = metas[i];
    if (m.view_of >= 0) {
      const Tensor& b = inputs[m.view_of];
      outputs.push_back(make_view(
          b, m.sizes, m.strides.empty() ? contiguous_strides(m.sizes) : m.strides, m.offset));
    } else if (i == 0 && out) {
      if (out->dtype() == m.dtype && (out->is_contiguous() || op.has(kElementwise))) {
        outputs.push_back(*out);
      } else {
        staged = make_empty(m.sizes, m.dtype, m.device);
        outputs.push_back(staged);
      }
    } else {
      DimVector st = fresh_output_strides(op, inputs, m);
      Tensor o = make_empty(m.sizes, m.dtype, m.device);
      if (!(IntArrayRef(st) == IntArrayRef(o.impl()->strides))) {
        o.impl()->strides = std::move(st);
        o.impl()->refresh_contiguous();
      }
      outputs.push_back(std::move(o));
    }
  }
  // 5. kernel
  if (!op.has(kView)) {
    const Device dev = first ? first->device() : metas[0].device;
    KernelFn k = dev.is_cuda() ? op.cuda : op.cpu;
    if (!k) fail("[{}] has no {} implementation", op.name, dev.is_cuda() ? "CUDA" : "CPU");
    if (dev.is_cuda()) cuda_backend::note_launch(op.name.c_str());
    KernelScope scope;
    const OpDef* const outer = t_running_kernel;
    t_running_kernel = &op;
    struct Restore {
      const OpDef* o;
      ~Restore() { t_running_kernel = o; }
    } restore{outer};
    if (dev.is_cuda() && !outer && op_profile_on()) {
      profile_cuda_kernel(op, inputs, [&] { k(KernelArgs{inputs, attrs, outputs}); });
    } else {
      k(KernelArgs{inputs, attrs, outputs});
    }
  }
  if (out) {
    if (staged.defined()) {
      // The op is recorded before the copy into `out` that follows it (the order things ran).
      if (tracer) tracer->on_op(op, inputs, attrs, outputs, nullptr);
      NoGradGuard ng;
      out->copy_(staged);
      outputs[0] = *out;
    } else {
      out->impl()->storage->version.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // 6. autograd
  if (needs_grad)
    autograd::record(op, inputs, attrs, outputs, snapshot.empty() ? nullptr : &snapshot);
  // 7. tracer
  if (tracer && !staged.defined()) tracer->on_op(op, inputs, attrs, outputs, out);
  return outputs;
}

}  // namespace oneflow

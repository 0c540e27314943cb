// dispatch.cpp: the dispatcher (NOTE [Dispatch path] in dispatch.h) and its steps: device
// checks and CPU scalars, dense inputs, meta inference, output allocation and layout, the
// kernel call, and the autograd and tracer hooks.
#include "dispatch.h"
#include "output_layout.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "autocast.h"
#include "autograd/node.h"
#include "cuda_backend.h"
#include "cuda_profile.h"
#include "decompose.h"

namespace oneflow {

OF_TLS TraceObserver* g_tracer = nullptr;
GlobalDispatchHook g_global_dispatch_hook = nullptr;

namespace {

OF_TLS const OpDef* t_running_kernel = nullptr;  // the op whose kernel dispatch is running

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

}  // namespace

std::vector<std::pair<std::string, std::string>> nested_dispatches() {
  std::lock_guard<std::mutex> lk(g_nested_mu);
  return {nested_set().begin(), nested_set().end()};
}
void note_host_read(const Tensor& t, const char* what) {
  // Wrapped numbers are constants made from host scalars: reading them back is no data read.
  if (g_tracer && !in_kernel() && !(t.defined() && t.impl()->is_wrapped_number))
    g_tracer->on_host_read(what);
}

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
  if (!dev || !op.has(kElementwise) || in_kernel()) device_mismatch(op, inputs);
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

TensorList dispatch(const OpDef& op, TensorList inputs, Attrs attrs, Tensor* out) {
  // 0. autocast's casts (dispatched ops of their own, recorded before this one); the 16-bit
  // widening is step 2b
  const bool nested = in_kernel();
  if (!out && !nested && autocast_detail::active()) autocast_detail::cast_inputs(op, inputs, attrs);
  if (nested) note_nested(op);
  TraceObserver* const tracer = nested ? nullptr : g_tracer;
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
  if (!out && !nested && autocast_detail::needs_widening(op, inputs))
    return autocast_detail::widened_dispatch(op, std::move(inputs), std::move(attrs));
  // 3. in-place/out= autograd rules, checked before anything is written
  GradPlan gp = plan_autograd(op, inputs, out);
  // 3b. no kernel for the device: the op's decomposition (NOTE [Decompositions])
  if (op.decompose && !op.has(kView)) {
    const Device dev = first ? first->device() : metas[0].device;
    if (prefer_decompositions() || !(dev.is_cuda() ? op.cuda : op.cpu))
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
    if (dev.is_cuda() && !outer && cuda_op_profile_on()) {
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
// The autograd tape and engine: recording nodes at dispatch time, and running VJPs backward.
#include <algorithm>
#include <cctype>
#include "allocator.h"
#include "owners.h"
#include <atomic>
#include <chrono>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autocast.h"
#include "autograd/accumulate.h"
#include "autograd/node.h"
#include "global/global.h"
#include "oneflow/autograd.h"

#include <cxxabi.h>

namespace oneflow {

Tensor VjpCtx::input(size_t i) const { return node_.unpack(node_.saved_inputs[i], false, i); }
Tensor VjpCtx::output(size_t i) const { return node_.unpack(node_.saved_outputs[i], true, i); }

namespace autograd {
namespace {
std::atomic<uint64_t> g_sequence{0};

std::shared_ptr<TensorImpl> alias_impl(const TensorImpl& src) {
  auto a = new_tensor_impl();
  a->storage = src.storage;
  a->offset = src.offset;
  a->sizes = src.sizes;
  a->strides = src.strides;
  a->numel = src.numel;
  a->dtype = src.dtype;
  a->device = src.device;
  a->is_contiguous = src.is_contiguous;
  a->global = src.global;
  return a;
}
}  // namespace

Edge gradient_edge(const Tensor& t) {
  TensorImpl* i = t.impl();
  if (i->grad_fn) return {i->grad_fn, i->output_nr};
  if (!i->requires_grad) return {};
  if (!i->grad_accumulator) i->grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return {i->grad_accumulator, 0};
}

void record(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList& outputs,
            const TensorList* saved_override) {
  auto node = std::make_shared<OpNode>();
  node->op = &op;
  node->attrs = attrs;
  node->sequence_nr = g_sequence.fetch_add(1, std::memory_order_relaxed);
  const size_t n_in = inputs.size();
  node->next_edges.resize(n_in);
  node->saved_inputs.resize(n_in);
  node->input_metas.reserve(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) {
      node->input_metas.push_back({{}, kFloat32, Device(kCPU)});
      continue;
    }
    node->input_metas.push_back({t.impl()->sizes, t.dtype(), t.device(), t.impl()->global});
    if (!((op.nondiff_inputs >> i) & 1u) && t.requires_grad()) {
      node->next_edges[i] = gradient_edge(t);
      node->needs_grad_mask |= 1u << i;
    }
    if ((op.save_inputs >> i) & 1u) {
      const Tensor& s = saved_override ? (*saved_override)[i] : t;
      node->saved_inputs[i] = {s.impl_ptr(), s._version(), false, true};
    }
  }
  node->saved_outputs.resize(outputs.size());
  for (size_t j = 0; j < outputs.size(); ++j) {
    TensorImpl* o = outputs[j].impl();
    node->output_metas.push_back({o->sizes, o->dtype, o->device, o->global});
    if ((op.save_outputs >> j) & 1u) {
      // Saved outputs hold a detached alias: holding the output itself would form a cycle.
      node->saved_outputs[j] = {alias_impl(*o), o->storage->version.load(), true, true};
    }
    if (is_floating_point(o->dtype)) {
      o->grad_fn = node;
      o->output_nr = uint32_t(j);
      o->requires_grad = true;
    }
  }
}

Tensor OpNode::unpack(const SavedTensor& s, bool output, size_t index) const {
  if (released)
    fail(
        "[autograd] Trying to backward through the graph a second time (or directly access "
        "saved tensors after they have already been freed). Saved intermediate values of the "
        "graph are freed when you call backward(); specify retain_graph=true if you need to "
        "backward through the graph a second time");
  if (!s.defined)
    fail("[autograd] internal error: {} reads {} {} which the op did not save", name(),
         output ? "output" : "input", index);
  uint32_t now = s.impl->storage->version.load();
  if (now != s.version)
    fail(
        "[autograd] one of the variables needed for gradient computation has been modified by "
        "an inplace operation: {} {} of {} with shape {} is at version {}; expected version {}",
        output ? "output" : "input", index, name(), shape_str(s.impl->sizes), now, s.version);
  if (!output) return Tensor(s.impl);
  auto a = alias_impl(*s.impl);
  if (is_floating_point(a->dtype)) {
    a->grad_fn = std::const_pointer_cast<Node>(shared_from_this());
    a->output_nr = uint32_t(index);
    a->requires_grad = true;
  }
  return Tensor(a);
}

std::string OpNode::name() const {
  std::string n;
  bool up = true;
  for (char c : op->name) {
    if (c == '_') {
      up = true;
      continue;
    }
    n += up ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return n + "Backward0";
}

void OpNode::release_variables() {
  released = true;
  for (auto& s : saved_inputs) s.impl.reset();
  for (auto& s : saved_outputs) s.impl.reset();
}

Tensor OpNode::zeros_for_output(size_t i) const {
  const auto& m = output_metas[i];
  if (m.global) return global::zeros_for(m.sizes, m.dtype, *m.global);
  return zeros(m.sizes, TensorOptions().dtype(m.dtype).device(m.device));
}

TensorList OpNode::apply(TensorList&& grads) {
  if (released) unpack(SavedTensor{}, false, 0);  // raises the "second time" error
  VjpCtx ctx(*this);
  TensorList r = op->vjp(ctx, grads);
  if (r.size() != input_metas.size())
    fail("[autograd] internal error: VJP of {} returned {} gradients for {} inputs", op->name,
         r.size(), input_metas.size());
  for (size_t i = 0; i < r.size(); ++i) {
    if (!((needs_grad_mask >> i) & 1u)) {
      r[i] = Tensor();
      continue;
    }
    if (!r[i].defined()) continue;
    const auto& m = input_metas[i];
    if (!(r[i].sizes() == IntArrayRef(m.sizes)))
      fail(
          "[autograd] internal error: VJP of {} produced a gradient of shape {} for input {} of "
          "shape {}",
          op->name, shape_str(r[i].sizes()), i, shape_str(m.sizes));
    if (r[i].dtype() != m.dtype) r[i] = r[i].to(m.dtype);
  }
  return r;
}

namespace {
thread_local bool t_accumulating = false;
// The tracer's notice of a .grad the engine is about to read or rebind.
void notify_accumulation(const std::shared_ptr<TensorImpl>& leaf) {
  if (!g_tracer) return;
  t_accumulating = true;
  g_tracer->on_grad_access(leaf);
  t_accumulating = false;
}
}  // namespace

bool accumulating_grad() { return t_accumulating; }

namespace {
// Accumulates a leaf's gradient (already in the leaf's SBP) into its .grad.
void accumulate_into_grad(const std::shared_ptr<TensorImpl>& var, Tensor g) {
  const bool create = grad_mode_enabled();
  notify_accumulation(var);  // .grad is read or rebound below
  Tensor& slot = grad_slot(var.get());
  if (!slot.defined()) {
    if (create) {
      slot = g;
    } else if (g.is_contiguous() && g.use_count() == 1 && !g.impl()->view_base &&
               g.impl()->grad_fn == nullptr) {
      slot = g;
    } else {
      slot = g.detach().clone();
    }
  } else if (create || slot.requires_grad()) {
    slot = slot + g;
  } else {
    slot.add_(g.detach());
  }
}

// NOTE [ZeRO]: whether `sbp` is a partial sum the leaf keeps as its gradient (its optimizer
// reduces it): the leaf's SBP but for P on axes where the leaf is broadcast.
bool keeps_partial(const GlobalMeta& leaf, const NdSbp& sbp) {
  if (!leaf.partial_grad || sbp.size() != leaf.sbp.size()) return false;
  for (size_t a = 0; a < sbp.size(); ++a)
    if (!(sbp[a] == leaf.sbp[a]) && !(sbp[a].is_partial_sum() && leaf.sbp[a].is_broadcast()))
      return false;
  return true;
}
}  // namespace

TensorList AccumulateGrad::apply(TensorList&& grads) {
  auto var = variable.lock();
  if (!var || !grads[0].defined()) return {};
  Tensor g = std::move(grads[0]);
  // A global leaf's gradient takes the leaf's SBP (data parallel: partial sums are reduced, in
  // a bucket that overlaps the rest of backward when one is open: NOTE [Bucketed gradient
  // all-reduce]).
  if (var->global && g.is_global() && !(g.impl()->global->sbp == var->global->sbp) &&
      !keeps_partial(*var->global, g.impl()->global->sbp)) {
    if (auto* r = global::GradReducer::current(); r && !grad_mode_enabled() && !g_tracer) {
      if (r->offer(var, g)) return {};
    }
    const auto t0 = std::chrono::steady_clock::now();
    g = global::boxing(g, var->global->sbp);
    global::note_unbucketed_reduction(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  accumulate_into_grad(var, std::move(g));
  return {};
}

namespace {

struct NodeHash {
  size_t operator()(const Node* n) const { return std::hash<const void*>()(n); }
};

// NOTE [In-place gradient accumulation]: a gradient buffer that several edges feed (a weight
// shared by every time step of an RNN, a residual branch) sums what arrives. When the buffer
// holds the only reference to a dense tensor of its own (no other tensor, view or saved
// variable shares the storage) and no graph is being built, the sum is written into it rather
// than into a new tensor: an RNN's W_hh gradient is then one buffer, not one per step.
// While tracing, the out-of-place add is recorded (the trace's memory planner places it).
void add_grad(Tensor& slot, Tensor g) {
  if (!g.defined()) return;
  if (!slot.defined()) {
    slot = std::move(g);
    return;
  }
  TensorImpl* s = slot.impl();
  if (!grad_mode_enabled() && !g_tracer && owners_synchronized(slot.impl_ptr()) == 1 &&
      owners_synchronized(s->storage) == 1 && !s->global && !g.impl()->global && s->is_contiguous &&
      s->view_base == nullptr && g.sizes() == slot.sizes() && g.dtype() == slot.dtype() &&
      g.device() == slot.device()) {
    slot.add_(g);
    return;
  }
  slot = slot + g;
}

}  // namespace

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                                 bool keep_graph, bool create_graph,
                                 const std::vector<Tensor>& capture, bool allow_unused) {
  autocast_detail::Suspend no_autocast;  // NOTE [Autocast]: backward runs in the forward's dtypes
  OF_CHECK(grads.empty() || grads.size() == roots.size(),
           "[backward] got {} tensors and {} gradients", roots.size(), grads.size());
  // Root edges and their initial gradients.
  std::vector<Edge> root_edges;
  TensorList root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    OF_CHECK(r.defined(), "[backward] tensor {} is undefined", i);
    if (!r.requires_grad())
      fail("[backward] element {} of tensors does not require grad and does not have a grad_fn", i);
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      if (r.numel() != 1)
        fail(
            "[backward] grad can be implicitly created only for scalar outputs; got a tensor "
            "of shape {}",
            shape_str(r.sizes()));
      g = ones_like(r);
    } else if (!(g.sizes() == r.sizes())) {
      fail("[backward] gradient of shape {} does not match the output shape {}",
           shape_str(g.sizes()), shape_str(r.sizes()));
    }
    root_edges.push_back(gradient_edge(r));
    root_grads.push_back(g);
  }
  // Captured edges (autograd::grad): the gradient arriving at (node, slot).
  std::vector<Edge> cap_edges;
  for (size_t i = 0; i < capture.size(); ++i) {
    const Tensor& t = capture[i];
    OF_CHECK(t.defined() && t.requires_grad(), "[autograd::grad] input {} does not require grad",
             i);
    cap_edges.push_back(gradient_edge(t));
  }
  std::vector<Tensor> captured(capture.size());
  const bool capturing = !capture.empty();

  // Dependencies: how many edges from reachable nodes point at each node.
  std::unordered_map<Node*, int, NodeHash> deps;
  {
    std::vector<Node*> stack;
    std::unordered_set<Node*, NodeHash> seen;
    for (auto& e : root_edges)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (auto& e : n->next_edges) {
        if (!e.fn) continue;
        ++deps[e.fn.get()];
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      }
    }
  }
  std::unordered_map<Node*, TensorList, NodeHash> buffers;
  auto buffer_of = [&](Node* n) -> TensorList& {
    auto& b = buffers[n];
    if (b.size() < n->num_outputs()) b.resize(n->num_outputs());
    return b;
  };
  auto cmp = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence_nr < b->sequence_nr;  // latest node first
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(cmp)>
      ready(cmp);
  for (size_t i = 0; i < root_edges.size(); ++i) {
    auto& e = root_edges[i];
    add_grad(buffer_of(e.fn.get())[e.input_nr], root_grads[i]);
  }
  {
    std::unordered_set<Node*, NodeHash> queued;
    for (auto& e : root_edges)
      if (deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn);
  }

  // Data-parallel gradients are reduced in buckets that overlap the rest of this pass.
  std::optional<global::GradReducer> reducer;
  if (!create_graph && !capturing && !g_tracer && global::world_initialized() &&
      global::world().size() > 1 && distributed::grad_bucket_bytes() > 0)
    reducer.emplace();
  bool prev = grad_mode_enabled();
  set_grad_enabled(create_graph);
  try {
    while (!ready.empty()) {
      std::shared_ptr<Node> node = ready.top();
      ready.pop();
      TensorList in = std::move(buffer_of(node.get()));
      buffers.erase(node.get());
      for (size_t c = 0; c < cap_edges.size(); ++c)
        if (cap_edges[c].fn.get() == node.get() && cap_edges[c].input_nr < in.size())
          captured[c] = in[cap_edges[c].input_nr];
      for (auto& [slot, weak] : node->retained) {
        if (auto impl = weak.lock(); impl && slot < in.size() && in[slot].defined()) {
          Tensor g = create_graph ? in[slot] : in[slot].detach();
          notify_accumulation(impl);
          Tensor& slot = grad_slot(impl.get());
          slot = slot.defined() ? slot + g : g.clone();
        }
      }
      TensorList out;
      if (dynamic_cast<AccumulateGrad*>(node.get())) {
        if (!capturing) node->apply(std::move(in));
      } else {
        bool any = false;
        for (auto& g : in) any |= g.defined();
        if (any) {
          for (size_t k = 0; k < in.size(); ++k)
            if (!in[k].defined()) in[k] = node->zeros_for_output(k);
          out = node->apply(std::move(in));
        }
        if (!keep_graph) node->release_variables();
      }
      for (size_t k = 0; k < node->next_edges.size(); ++k) {
        auto& e = node->next_edges[k];
        if (!e.fn) continue;
        if (k < out.size()) add_grad(buffer_of(e.fn.get())[e.input_nr], out[k]);
        if (--deps[e.fn.get()] == 0) ready.push(e.fn);
      }
      if (reducer) reducer->poll();
    }
    if (reducer)
      for (auto& [var, g] : reducer->finish()) accumulate_into_grad(var, std::move(g));
  } catch (...) {
    set_grad_enabled(prev);
    throw;
  }
  set_grad_enabled(prev);
  if (capturing) {
    for (size_t c = 0; c < captured.size(); ++c) {
      if (!captured[c].defined() && !allow_unused)
        fail(
            "[autograd::grad] one of the differentiated tensors (input {}) appears to not have "
            "been used in the graph; set allow_unused=true if this is the desired behavior",
            c);
      if (captured[c].defined() && !create_graph) captured[c] = captured[c].detach();
    }
  }
  return captured;
}

}  // namespace autograd

// ---------------------------------------------------------------- public entry points

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::run_backward({*this}, {gradient}, retain_graph.value_or(create_graph), create_graph, {},
                         false);
}

namespace autograd {
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  OF_CHECK(!inputs.empty(), "[autograd::grad] expected at least one input");
  return run_backward(outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph,
                      inputs, allow_unused);
}
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph) {
  run_backward(tensors, grad_tensors, retain_graph.value_or(create_graph), create_graph, {}, false);
}
}  // namespace autograd

}  // namespace oneflow

// ---------------------------------------------------------------- custom functions
// of::autograd::Function (include/oneflow/autograd.h): a node that calls the user's backward.

namespace oneflow::autograd {

double IValue::toDouble() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<int64_t>(&v_)) return double(*i);
  fail("[IValue] toDouble() on a value that is not a number");
}
int64_t IValue::toInt() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  fail("[IValue] toInt() on a value that is not an integer");
}
bool IValue::toBool() const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  fail("[IValue] toBool() on a value that is not a bool");
}
Tensor IValue::toTensor() const {
  if (auto* t = std::get_if<Tensor>(&v_)) return *t;
  fail("[IValue] toTensor() on a value that is not a tensor");
}
const std::string& IValue::toStringRef() const {
  if (auto* s = std::get_if<std::string>(&v_)) return *s;
  fail("[IValue] toStringRef() on a value that is not a string");
}
std::vector<int64_t> IValue::toIntVector() const {
  if (auto* v = std::get_if<std::vector<int64_t>>(&v_)) return *v;
  fail("[IValue] toIntVector() on a value that is not a list of integers");
}
std::vector<double> IValue::toDoubleVector() const {
  if (auto* v = std::get_if<std::vector<double>>(&v_)) return *v;
  fail("[IValue] toDoubleVector() on a value that is not a list of floats");
}
std::vector<Tensor> IValue::toTensorVector() const {
  if (auto* v = std::get_if<std::vector<Tensor>>(&v_)) return *v;
  fail("[IValue] toTensorVector() on a value that is not a list of tensors");
}
ScalarType IValue::toScalarType() const {
  const int64_t* i = std::get_if<int64_t>(&v_);
  if (!i) fail("[IValue] toScalarType() on a value that is not a dtype");
  if (*i < 0 || *i >= kNumScalarTypes)
    fail("[IValue] toScalarType(): {} is not a dtype (0 .. {})", *i, kNumScalarTypes - 1);
  return ScalarType(*i);
}

void AutogradContext::save_for_backward(variable_list to_save) {
  saved_.clear();
  for (Tensor& t : to_save) {
    Saved s;
    s.version = t.defined() ? t._version() : 0;
    s.tensor = std::move(t);
    saved_.push_back(std::move(s));
  }
}

variable_list AutogradContext::get_saved_variables() const {
  if (released_)
    fail(
        "[{}] Trying to backward through the graph a second time (or directly access saved "
        "tensors after they have already been freed); specify retain_graph=true",
        name_);
  variable_list out;
  for (const Saved& s : saved_) {
    if (!s.tensor.defined()) {
      out.push_back(Tensor());
      continue;
    }
    if (s.tensor._version() != s.version)
      fail(
          "[{}] one of the variables needed for gradient computation has been modified by an "
          "inplace operation: saved tensor of shape {} is at version {}; expected version {}",
          name_, shape_str(s.tensor.sizes()), s.tensor._version(), s.version);
    if (s.output < 0) {
      out.push_back(s.tensor);
      continue;
    }
    auto a = alias_impl(*s.tensor.impl());
    if (auto node = node_.lock()) {
      a->grad_fn = node;
      a->output_nr = uint32_t(s.output);
      a->requires_grad = true;
    }
    out.push_back(Tensor(a));
  }
  return out;
}

void AutogradContext::mark_dirty(const variable_list& inputs) {
  dirty_.insert(dirty_.end(), inputs.begin(), inputs.end());
}
void AutogradContext::mark_non_differentiable(const variable_list& outputs) {
  non_differentiable_.insert(non_differentiable_.end(), outputs.begin(), outputs.end());
}

namespace {

struct FunctionNode final : Node {
  std::shared_ptr<AutogradContext> ctx;
  std::function<variable_list(AutogradContext*, variable_list)> backward;
  std::vector<size_t> arg_index;  // forward argument of each tensor input
  size_t num_args = 0;
  SmallVector<TensorMetaLite, 2> input_metas;
  SmallVector<TensorMetaLite, 1> output_metas;

  std::string name() const override { return ctx->name_; }
  size_t num_outputs() const override { return output_metas.size(); }
  Tensor zeros_for_output(size_t i) const override {
    if (!ctx->materialize_grads_) return {};
    const auto& m = output_metas[i];
    return zeros(m.sizes, TensorOptions().dtype(m.dtype).device(m.device));
  }
  void release_variables() override {
    ctx->saved_.clear();
    ctx->released_ = true;
  }
  TensorList apply(TensorList&& grads) override {
    if (ctx->released_) ctx->get_saved_variables();  // raises the "second time" error
    variable_list g(grads.begin(), grads.end());
    g.resize(output_metas.size());
    if (ctx->materialize_grads_)
      for (size_t i = 0; i < g.size(); ++i)
        if (!g[i].defined()) g[i] = zeros_for_output(i);
    variable_list r = backward(ctx.get(), std::move(g));
    // as libtorch: extra gradients are dropped when all of them are undefined (a backward
    // written for forward's defaulted arguments that apply was not given)
    while (r.size() > num_args && !r.back().defined()) r.pop_back();
    if (r.size() != num_args)
      fail(
          "[{}] backward returned {} gradients, expected {} (one per argument of forward, a "
          "tensor list's tensors one by one, undefined for arguments that are not tensors)",
          name(), r.size(), num_args);
    TensorList out;
    for (size_t k = 0; k < arg_index.size(); ++k) {
      Tensor gk = r[arg_index[k]];
      if (gk.defined() && next_edges[k].fn) {
        const auto& m = input_metas[k];
        if (!(gk.sizes() == IntArrayRef(m.sizes)))
          fail("[{}] backward returned a gradient of shape {} for argument {} of shape {}", name(),
               shape_str(gk.sizes()), arg_index[k], shape_str(m.sizes));
        if (gk.dtype() != m.dtype) gk = gk.to(m.dtype);
      } else {
        gk = Tensor();
      }
      out.push_back(gk);
    }
    return out;
  }
};

bool contains(const variable_list& v, const Tensor& t) {
  for (const Tensor& x : v)
    if (x.defined() && t.defined() && x.impl() == t.impl()) return true;
  return false;
}

}  // namespace

namespace detail {

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  const size_t colon = s.rfind("::");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

void attach_function(const std::shared_ptr<AutogradContext>& ctx, const variable_list& inputs,
                     const std::vector<size_t>& arg_index, size_t num_args, variable_list& outputs,
                     std::function<variable_list(AutogradContext*, variable_list)> backward) {
  ctx->needs_.assign(num_args, false);
  bool any = false;
  if (grad_mode_enabled())
    for (size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k].defined() && inputs[k].requires_grad()) {
        ctx->needs_[arg_index[k]] = true;
        any = true;
      }
  for (const Tensor& d : ctx->dirty_) {
    if (!contains(inputs, d))
      fail("[{}] mark_dirty was given a tensor that is not an input", ctx->name_);
    if (any && d.is_leaf() && d.requires_grad())
      fail("[{}] a leaf Variable that requires grad has been used in an in-place operation",
           ctx->name_);
    d.impl()->storage->version.fetch_add(1, std::memory_order_relaxed);
  }
  // saved outputs become aliases (holding the output itself would form a cycle)
  for (auto& s : ctx->saved_)
    for (size_t j = 0; j < outputs.size(); ++j)
      if (s.tensor.defined() && outputs[j].defined() && s.tensor.impl() == outputs[j].impl()) {
        s.tensor = Tensor(alias_impl(*outputs[j].impl()));
        s.output = int(j);
      }
  if (!any) return;
  auto node = std::make_shared<FunctionNode>();
  node->ctx = ctx;
  node->backward = std::move(backward);
  node->arg_index = arg_index;
  node->num_args = num_args;
  node->sequence_nr = g_sequence.fetch_add(1, std::memory_order_relaxed);
  node->next_edges.resize(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    node->input_metas.push_back(t.defined() ? TensorMetaLite{t.impl()->sizes, t.dtype(), t.device()}
                                            : TensorMetaLite{{}, kFloat32, Device(kCPU)});
    if (t.defined() && t.requires_grad()) node->next_edges[k] = gradient_edge(t);
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    Tensor& o = outputs[j];
    if (!o.defined()) {
      node->output_metas.push_back({{}, kFloat32, Device(kCPU)});
      continue;
    }
    // an input returned unchanged is returned as a new handle on the same data
    if (contains(inputs, o) && !contains(ctx->dirty_, o)) o = Tensor(alias_impl(*o.impl()));
    node->output_metas.push_back({o.impl()->sizes, o.dtype(), o.device()});
    if (contains(ctx->non_differentiable_, o) || !o.is_floating_point()) continue;
    o.impl()->grad_fn = node;
    o.impl()->output_nr = uint32_t(j);
    o.impl()->requires_grad = true;
  }
  ctx->node_ = node;
}

}  // namespace detail
}  // namespace oneflow::autograd

// The recorder: an observer of dispatch that turns one eager call into a Graph.
// NOTE [Values by storage]: a tensor handle says nothing about identity here (autograd
// re-wraps saved outputs, AccumulateGrad rebinds .grad, detach() makes new handles), so a
// tensor is looked up by (storage, offset, sizes, strides, dtype). An unknown storage is a root:
// an input (registered before the call), a leaf's .grad (seen through on_grad_access), a
// constant (a wrapped number), a host scalar (host_scalar), or else an external tensor bound by
// identity (parameters, buffers, optimizer state, tensors made from host data).
#include <chrono>
#include <map>
#include <unordered_map>

#include "allocator.h"
#include "autograd/accumulate.h"
#include "generator.h"
#include "oneflow/runtime.h"
#include "global/global.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/recording.h"

namespace oneflow::trace {

const char* buf_kind_name(BufKind k) {
  switch (k) {
    case BufKind::Intermediate:
      return "intermediate";
    case BufKind::Input:
      return "input";
    case BufKind::External:
      return "external";
    case BufKind::GradOf:
      return "grad";
    case BufKind::HostScalar:
      return "host_scalar";
    case BufKind::Constant:
      return "constant";
  }
  return "?";
}

bool Value::contiguous() const {
  int64_t expected = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

namespace {

struct ValueKey {
  const StorageImpl* storage;
  int64_t offset;
  DimVector sizes, strides;
  ScalarType dtype;
  bool operator==(const ValueKey& o) const {
    return storage == o.storage && offset == o.offset && dtype == o.dtype &&
           IntArrayRef(sizes) == IntArrayRef(o.sizes) &&
           IntArrayRef(strides) == IntArrayRef(o.strides);
  }
};
struct ValueKeyHash {
  size_t operator()(const ValueKey& k) const {
    size_t h = std::hash<const void*>()(k.storage) ^ (size_t(k.offset) * 0x9e3779b97f4a7c15ull);
    for (int64_t s : k.sizes) h = h * 31 + size_t(s);
    for (int64_t s : k.strides) h = h * 17 + size_t(s);
    return h ^ size_t(k.dtype);
  }
};

ValueKey key_of(const Tensor& t) {
  const TensorImpl* i = t.impl();
  return {i->storage.get(), i->offset, i->sizes, i->strides, i->dtype};
}

class Recorder;
OF_TLS Recorder* t_recorder = nullptr;

class Recorder final : public TraceObserver {
 public:
  Graph g;

  // ---- values
  // A global tensor's local piece (what the recorded ops read and write), else t itself.
  static const Tensor& local_of(const Tensor& t) {
    return t.is_global() ? global::meta(t).local : t;
  }
  static GlobalWrap wrap_of(const Tensor& t) {
    if (!t.is_global()) return {};
    const GlobalMeta& m = global::meta(t);
    return {std::make_shared<GlobalMeta>(GlobalMeta{m.placement, m.sbp, Tensor()}),
            t.sizes().dims()};
  }

  int find_buffer(const Tensor& t) {
    auto it = buffer_of_.find(t.impl()->storage.get());
    if (it == buffer_of_.end()) return -1;
    // An expired entry is an old storage whose address came back: not this one.
    if (storages_[it->second].expired()) return -1;
    return it->second;
  }

  int new_buffer(const Tensor& t, BufKind kind) {
    Buffer b;
    b.kind = kind;
    b.nbytes = t.impl()->storage->nbytes;
    b.device = t.device();
    g.buffers.push_back(std::move(b));
    const int id = int(g.buffers.size()) - 1;
    buffer_of_[t.impl()->storage.get()] = id;
    storages_.push_back(t.impl()->storage);
    return id;
  }

  int add_value(const Tensor& t, int buffer, int producer, bool is_view) {
    Value v;
    v.buffer = buffer;
    v.sizes = t.sizes().dims();
    v.strides = t.impl()->strides;
    v.offset = t.impl()->offset;
    v.dtype = t.dtype();
    v.device = t.device();
    v.producer = producer;
    v.is_view = is_view;
    const int id = g.add_value(std::move(v));
    value_of_[key_of(t)] = id;
    return id;
  }

  // The value of a tensor an op reads (creating a root for an unknown storage).
  int value_for(const Tensor& t) {
    auto it = value_of_.find(key_of(t));
    int b = find_buffer(t);
    if (it != value_of_.end() && b >= 0 && g.values[it->second].buffer == b) {
      note_external_impl(b, t);
      return it->second;
    }
    if (b < 0) {
      const TensorImpl* i = t.impl();
      auto gs = grad_storage_.find(i->storage.get());
      // (the .grad seen earlier must still be this storage, not a dead one whose address came back)
      if (gs != grad_storage_.end() && gs->second.first.lock() == i->storage) {
        b = new_buffer(t, BufKind::GradOf);
        g.buffers[b].impls = {gs->second.second};
        g.buffers[b].base_offset = i->offset;
      } else if (i->is_wrapped_number) {
        b = new_buffer(t, BufKind::Constant);
        g.buffers[b].impls = {t.impl_ptr()};
      } else {
        b = new_buffer(t, BufKind::External);
        g.buffers[b].recorded_storage = i->storage.get();
      }
      roots_.push_back(t.impl()->storage);  // roots stay alive while recording
    }
    note_external_impl(b, t);
    const int v = add_value(t, b, -1, false);
    if (g.buffers[b].root_value < 0) g.buffers[b].root_value = v;
    return v;
  }

  void note_external_impl(int b, const Tensor& t) {
    Buffer& buf = g.buffers[b];
    if (buf.kind != BufKind::External) return;
    for (auto& p : buf.impls)
      if (p.get() == t.impl()) return;
    buf.impls.push_back(t.impl_ptr());
  }

  void add_input(const Tensor& input, int index) {
    if (!input.defined()) fail("[jit.trace] input {} is undefined", index);
    const Tensor& t = local_of(input);  // a global input: the graph reads its piece
    int b = find_buffer(t);
    if (b < 0) {
      b = new_buffer(t, BufKind::Input);
      g.buffers[b].input = index;
      g.buffers[b].base_offset = t.impl()->offset;
      roots_.push_back(t.impl()->storage);
    }
    // duplicated or aliased inputs share the first one's buffer (the alias pattern is part of
    // the cache key, so a replay sees the same sharing)
    auto it = value_of_.find(key_of(t));
    const int v = it != value_of_.end() ? it->second : add_value(t, b, -1, false);
    if (g.buffers[b].root_value < 0) g.buffers[b].root_value = v;
    g.inputs.push_back(v);
  }

  int register_host_scalar(const Tensor& t, std::function<double()> getter,
                           std::weak_ptr<void> owner) {
    int b = new_buffer(t, BufKind::HostScalar);
    g.buffers[b].impls = {t.impl_ptr()};
    g.buffers[b].getter = std::move(getter);
    g.buffers[b].owner = std::move(owner);
    roots_.push_back(t.impl()->storage);
    return add_value(t, b, -1, false);
  }

  // ---- TraceObserver
  void before_op(const OpDef& op) override {
    if (op.has(kSyncsHost))
      fail(
          "[jit.trace] {} reads tensor data on the host to know the shape of its result, which "
          "a recorded graph cannot replay; call it outside the traced function",
          op.name);
  }

  void on_op(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
             const TensorList& outputs, const Tensor* out) override {
    Node n;
    n.op = &op;
    n.attrs = attrs;
    for (const Tensor& t : inputs) n.inputs.push_back(t.defined() ? value_for(t) : -1);
    if (op.rng_seed_attr >= 0 && size_t(op.rng_seed_attr) + 1 < attrs.size()) {
      const auto& sv = attrs.values[size_t(op.rng_seed_attr)];
      const auto& ov = attrs.values[size_t(op.rng_seed_attr) + 1];
      if (std::holds_alternative<int64_t>(sv) && std::holds_alternative<int64_t>(ov)) {
        auto it = rng_of_.find({uint64_t(std::get<int64_t>(sv)), uint64_t(std::get<int64_t>(ov))});
        if (it != rng_of_.end()) n.rng = it->second;
      }
    }
    const int node_id = int(g.nodes.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      const Tensor& t = outputs[k];
      if (k == 0 && out) {
        n.outputs.push_back(value_for(t));
        n.writes_existing = true;
        continue;
      }
      const int b = find_buffer(t);
      if (b >= 0) {
        n.outputs.push_back(add_value(t, b, node_id, true));
      } else {
        const int nb = new_buffer(t, BufKind::Intermediate);
        n.outputs.push_back(add_value(t, nb, node_id, false));
      }
    }
    g.nodes.push_back(std::move(n));
  }

  void on_grad_access(const std::shared_ptr<TensorImpl>& leaf) override {
    if (!leaf) return;
    if (!grad_leaves_.count(leaf.get())) {
      grad_leaves_[leaf.get()] = leaf;
      grad_order_.push_back(leaf);
      // NOTE [Traced fresh .grad]: backward is the first to touch an undefined .grad (nothing
      // in the call read or cleared it before): the recorded call sets it, where a call that
      // starts with a .grad adds to it. The graph remembers the leaf; a replay that finds its
      // .grad defined records again (check_externals), so that accumulating loops without a
      // zero_grad inside the step stay exact.
      if (!grad_slot(leaf.get()).defined() && autograd::accumulating_grad()) fresh_.push_back(leaf);
    }
    const Tensor& gr = grad_slot(leaf.get());
    if (gr.defined() && find_buffer(gr) < 0)
      grad_storage_[gr.impl()->storage.get()] = {gr.impl()->storage, leaf};
  }

  void on_host_read(const char* what) override {
    if (!given_up_.empty()) return;  // this call runs eagerly only: reading is fine
    fail(
        "[jit.trace] {} reads tensor data on the host while the function is being recorded; a "
        "replay would not run it again. Move it out of the traced function (return the tensor "
        "and read it after the call)",
        what);
  }

  void on_random(uint64_t seed, uint64_t offset, uint64_t counters) override {
    rng_of_[{seed, offset}] = int(g.rng_counters.size());
    g.rng_reset.push_back(reset_since(seed, offset));
    g.rng_counters.push_back(counters);
    expected_ = {seed, offset + counters};
  }

  // A draw that does not continue where the generator was, from offset 0, means manual_seed
  // ran in between (another thread drawing meanwhile only moves the offset on).
  Graph::RngReset reset_since(uint64_t seed, uint64_t offset) const {
    if ((seed == expected_.seed && offset == expected_.offset) || offset != 0) return {};
    return {seed, offset, true};
  }
  void start_random(GeneratorState s) { expected_ = s; }
  void finish_random() {
    const GeneratorState now = random_state();
    g.rng_reset.push_back(reset_since(now.seed, now.offset));
  }

  // The call will not become a graph (see give_up_recording): the rest of it may read.
  void give_up(std::string why) {
    if (given_up_.empty()) given_up_ = std::move(why);
  }

  // ---- after the call
  void finish(std::vector<Tensor>& outs, Recording& r) {
    if (!given_up_.empty()) r.not_committable = given_up_;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!outs[k].defined()) fail("[jit.trace] output {} of the traced function is undefined", k);
      const int v = value_for(local_of(outs[k]));
      g.outputs.push_back(v);
      g.output_wraps.push_back(wrap_of(outs[k]));
      g.buffers[g.values[v].buffer].escapes =
          g.buffers[g.values[v].buffer].kind == BufKind::Intermediate;
      r.outputs.push_back(outs[k].detach());
    }
    outs.clear();  // drops the autograd graph hanging off the eager outputs
    for (auto& leaf : fresh_)
      if (grad_slot(leaf.get()).defined()) g.fresh_grads.push_back(leaf);
    for (auto& leaf : grad_order_) {
      const Tensor& gr = grad_slot(leaf.get());
      if (!gr.defined()) {
        g.grad_effects.push_back({leaf, -1});
        continue;
      }
      const int b = find_buffer(gr);
      if (b < 0) continue;  // untouched since before the call
      const Buffer& buf = g.buffers[b];
      // still the .grad it had when the call started (written in place at most)
      if (buf.kind == BufKind::GradOf && buf.impls[0] == leaf) continue;
      const int v = value_for(local_of(gr));
      g.grad_effects.push_back({leaf, v, wrap_of(gr)});
      if (g.buffers[b].kind == BufKind::Intermediate) g.buffers[b].escapes = true;
    }
    // Anything else the call created that is still alive is held outside the graph's reach.
    for (size_t b = 0; b < g.buffers.size() && r.not_committable.empty(); ++b) {
      const Buffer& buf = g.buffers[b];
      if (buf.kind != BufKind::Intermediate || buf.escapes) continue;
      if (!storages_[b].expired()) {
        r.not_committable = fmt::format(
            "a tensor the call created ({} bytes) outlives it outside its outputs and .grad "
            "(optimizer state made on a first step, a tensor kept in a container): this call "
            "ran eagerly and the next one records again",
            buf.nbytes);
        break;
      }
    }
  }

 private:
  std::unordered_map<const StorageImpl*, int> buffer_of_;
  std::vector<std::weak_ptr<StorageImpl>> storages_;  // per buffer
  std::vector<Storage> roots_;
  std::unordered_map<ValueKey, int, ValueKeyHash> value_of_;
  std::unordered_map<const TensorImpl*, std::shared_ptr<TensorImpl>> grad_leaves_;
  std::vector<std::shared_ptr<TensorImpl>> grad_order_;
  std::vector<std::shared_ptr<TensorImpl>> fresh_;  // NOTE [Traced fresh .grad]
  std::unordered_map<const StorageImpl*,
                     std::pair<std::weak_ptr<StorageImpl>, std::shared_ptr<TensorImpl>>>
      grad_storage_;
  std::map<std::pair<uint64_t, uint64_t>, int> rng_of_;
  GeneratorState expected_{0, 0};
  std::string given_up_;
};

}  // namespace

bool recording() { return t_recorder != nullptr; }

void give_up_recording(std::string why) {
  if (t_recorder) t_recorder->give_up(std::move(why));
}

Tensor host_scalar(double value, std::function<double()> getter, std::weak_ptr<void> owner) {
  Tensor t = make_empty({}, kFloat64, Device(kCPU));
  *static_cast<double*>(t.data_ptr()) = value;
  if (t_recorder && !in_kernel())
    t_recorder->register_host_scalar(t, std::move(getter), std::move(owner));
  return t;
}

Recording record(const EagerFn& fn, const std::vector<Tensor>& inputs) {
  if (g_tracer)
    fail(
        "[jit.trace] a traced function was called while another one is being recorded on this "
        "thread (a trace inside a trace); call the inner function's code directly");
  Recording r;
  auto t0 = std::chrono::steady_clock::now();
  Recorder rec;
  for (size_t i = 0; i < inputs.size(); ++i) rec.add_input(inputs[i], int(i));
  const size_t base = memory::stats().allocated;
  memory::reset_peak_stats();
  rec.start_random(random_state());
  std::vector<Tensor> outs;
  {
    struct Active {
      Recorder* rec;
      explicit Active(Recorder* r) : rec(r) {
        g_tracer = r;
        t_recorder = r;
      }
      ~Active() {
        g_tracer = nullptr;
        t_recorder = nullptr;
      }
    } active(&rec);
    outs = fn(inputs);
  }
  rec.finish_random();
  const size_t peak = memory::stats().peak_allocated;
  r.eager_peak_bytes = peak > base ? peak - base : 0;
  rec.finish(outs, r);
  r.graph = std::move(rec.g);
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace oneflow::trace

namespace oneflow::jit {
bool is_recording() { return trace::recording(); }
}  // namespace oneflow::jit

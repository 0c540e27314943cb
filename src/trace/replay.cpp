// replay.cpp: running a lowered plan (NOTE [Replay], executor.cpp): its steps, the inputs bound
// and the outputs handed out, and OF_TRACE_PROFILE.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include "oneflow/runtime.h"
#include <thread>

#include "allocator.h"
#include "owners.h"
#include "cuda_backend.h"
#include "generator.h"
#include "thread_pool.h"
#include "global/global.h"
#include "trace/fusion_codegen.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/passes.h"
#include "trace/plan.h"

namespace oneflow::trace {

// OF_TRACE_PROFILE=1: time per op over all replays, printed when the process exits.
struct Profiler {
  std::mutex mu;
  std::map<std::string, std::pair<double, uint64_t>> per_op;
  static Profiler& get() {
    static Profiler* p = [] {
      auto* q = new Profiler();
      std::atexit([] { get().print(); });
      return q;
    }();
    return *p;
  }
  void print() {
    std::vector<std::pair<double, std::string>> v;
    double total = 0;
    for (auto& [k, x] : per_op) {
      v.push_back({x.first, k});
      total += x.first;
    }
    std::sort(v.rbegin(), v.rend());
    std::fprintf(stderr, "[jit.replay] profile: %.3f ms in kernels over all replays\n",
                 total * 1e3);
    for (auto& [t, k] : v)
      std::fprintf(stderr, "  %-44s %10.3f ms %6.1f%%  %llu calls\n", k.c_str(), t * 1e3,
                   100 * t / total, (unsigned long long)per_op[k].second);
  }
  struct Scope {
    bool on;
    const char* name;
    std::chrono::steady_clock::time_point t0;
    Scope(bool o, const char* n) : on(o), name(n) {
      if (on) t0 = std::chrono::steady_clock::now();
    }
    ~Scope() {
      if (!on) return;
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      Profiler& p = get();
      std::lock_guard<std::mutex> lk(p.mu);
      auto& x = p.per_op[name];
      x.first += dt;
      ++x.second;
    }
  };
};

namespace {
// A replayed local piece as the global tensor the eager call had (NOTE [Traced boxing]).
Tensor wrapped(Tensor local, const GlobalWrap& w) {
  if (!w.meta) return local;
  return global::make_global(local, w.logical, w.meta->placement, w.meta->sbp);
}
}  // namespace

void run_step(Plan& p, Step& s, bool debug_allocs, bool profile) {
  Profiler::Scope ps(profile,
                     s.group >= 0 ? p.groups[size_t(s.group)].label.c_str() : s.op->name.c_str());
  if (s.group >= 0) {
    run_group(p, p.groups[size_t(s.group)]);
    for (StorageImpl* b : s.bumps) b->version.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (s.rng >= 0) {
    const GeneratorState& st = p.draws[size_t(s.rng)];
    s.attrs.values[size_t(s.seed_attr)] = int64_t(st.seed);
    s.attrs.values[size_t(s.seed_attr) + 1] = int64_t(st.offset);
  }
  if (s.on_cuda) {
    cuda_backend::note_launch(s.op->name.c_str());
  } else if (s.op->has(kChecksIndices)) {
    // NOTE [Replayed index checks]: these ops check their index values in infer_meta (the CPU
    // kernels trust them); a replay runs it again so that a call with an out-of-range index
    // raises as eager does instead of reading out of bounds
    MetaList metas;
    s.op->infer_meta(s.ins, s.attrs, metas);
  }
  const uint64_t a0 = debug_allocs ? memory::stats().num_allocs : 0;
  {
    ConstantOperandScope constant(s.constant_operand);  // NOTE [Prepacked weights]
    s.kernel(KernelArgs{s.ins, s.attrs, s.outs});
  }
  if (debug_allocs && memory::stats().num_allocs != a0)
    std::fprintf(stderr, "[jit.replay] step %zu (%s) allocated %llu times\n",
                 size_t(&s - p.steps.data()), s.op->name.c_str(),
                 (unsigned long long)(memory::stats().num_allocs - a0));
  for (StorageImpl* b : s.bumps) b->version.fetch_add(1, std::memory_order_relaxed);
}

std::vector<Tensor> replay(Plan& p, const std::vector<Tensor>& inputs) {
  const auto t_in = std::chrono::steady_clock::now();  // OF_CUDA_GRAPH_DEBUG's phases
  const Graph& g = p.g;
  const bool graph = graph_mode(p);
  // a CUDA graph reads copies of its inputs in buffers of its own (a CPU plan only under
  // set_static_inputs_for_testing); NOTE [CUDA Graph replay] in graph_replay.cpp
  const bool statics = graph || (p.cuda_device < 0 && static_inputs_for_testing());
  make_replay_buffers(p, graph, statics);
  // 1. inputs and .grad roots: re-point their values at this call's storages (a CUDA graph:
  //    copy the inputs into the plan's own buffers)
  for (size_t k = 0; k < p.input_buffers.size(); ++k) {
    const int b = p.input_buffers[k];
    const Buffer& buf = g.buffers[size_t(b)];
    if (statics && p.static_inputs[k]) {
      copy_static_input(p, k, inputs);
      continue;
    }
    const TensorImpl* arg = inputs[size_t(buf.input)].impl();
    const int64_t delta = arg->offset - buf.base_offset;
    for (int v : p.values_of_buffer[size_t(b)]) {
      TensorImpl* t = p.vt[size_t(v)].impl();
      if (!t) continue;
      if (t->storage != arg->storage) t->storage = arg->storage;
      t->offset = g.values[size_t(v)].offset + delta;
    }
  }
  for (size_t k = 0; k < p.grad_buffers.size(); ++k) {
    const int b = p.grad_buffers[k];
    const Buffer& buf = g.buffers[size_t(b)];
    const Tensor& gr = grad_slot(buf.impls[0].get());
    drop_graph_if_grad_moved(p, k, gr);
    const int64_t delta = gr.impl()->offset - buf.base_offset;
    for (int v : p.values_of_buffer[size_t(b)]) {
      TensorImpl* t = p.vt[size_t(v)].impl();
      if (!t) continue;
      if (t->storage != gr.impl()->storage) t->storage = gr.impl()->storage;
      t->offset = g.values[size_t(v)].offset + delta;
    }
  }
  // 2. host scalars (learning rates) and generator draws
  for (int b : p.host_buffers) {
    const Buffer& buf = g.buffers[size_t(b)];
    *static_cast<double*>(buf.impls[0]->storage->data) = buf.getter();
  }
  p.draws.resize(g.rng_counters.size());
  if (g.rng_state) {  // a loaded training step's own generator (NOTE [Saved training steps])
    uint64_t* st = static_cast<uint64_t*>(g.rng_state->data);
    for (size_t d = 0; d < g.rng_counters.size(); ++d) {
      if (d < g.rng_reset.size() && g.rng_reset[d].set) {
        st[0] = g.rng_reset[d].seed;
        st[1] = g.rng_reset[d].offset;
      }
      p.draws[d] = {st[0], st[1]};
      st[1] += g.rng_counters[d];
    }
    if (g.rng_reset.size() > g.rng_counters.size() && g.rng_reset.back().set) {
      st[0] = g.rng_reset.back().seed;
      st[1] = g.rng_reset.back().offset;
    }
  } else {
    for (size_t d = 0; d < g.rng_counters.size(); ++d) {
      if (d < g.rng_reset.size() && g.rng_reset[d].set)
        set_random_state({g.rng_reset[d].seed, g.rng_reset[d].offset});
      p.draws[d] = reserve_random(g.rng_counters[d]);
    }
    if (g.rng_reset.size() > g.rng_counters.size() && g.rng_reset.back().set)
      set_random_state({g.rng_reset.back().seed, g.rng_reset.back().offset});
  }
  if (graph) write_graph_draws(p);
  // 3. escaping buffers the caller still holds get fresh memory (never overwrite a result)
  if (!p.arena_outputs) {
    for (EscapeSlot& e : p.escapes) {
      Storage& s = p.buf_storage[size_t(e.buffer)];
      long expected = e.internal_refs;
      if (e.grad_handout && e.grad_handout.use_count() == 2) ++expected;  // bound as .grad only
      if (owners_synchronized(s) <= expected) continue;  // NOTE [Counting owners before a write]
      // a CUDA graph writes fixed addresses: the holder's object takes a copy instead
      s = graph && s->device.is_cuda()
              ? swap_out(s)
              : allocate_storage(g.buffers[size_t(e.buffer)].nbytes, s->device);
      e.grad_handout.reset();
      for (int v : e.values)
        if (p.vt[size_t(v)].defined()) p.vt[size_t(v)].impl()->storage = s;
    }
  }
  // 4. the steps
  static const bool debug_allocs = std::getenv("OF_TRACE_DEBUG_ALLOCS") != nullptr;
  static const bool profile = std::getenv("OF_TRACE_PROFILE") != nullptr;
  if (graph) {
    run_graph(p, t_in, debug_allocs, profile);
  } else {
    KernelScope scope;
    for (Step& s : p.steps) run_step(p, s, debug_allocs, profile);
    ++p.plain_replays;
  }
  // 5. .grad effects and outputs
  for (size_t k = 0; k < g.grad_effects.size(); ++k) {
    const GradEffect& e = g.grad_effects[k];
    Tensor& slot = grad_slot(e.leaf.get());
    if (e.value < 0) {
      slot = Tensor();
      continue;
    }
    const Tensor& src = p.vt[size_t(e.value)];
    EscapeSlot* es = p.effect_escape[k] >= 0 ? &p.escapes[size_t(p.effect_escape[k])] : nullptr;
    const TensorImpl* bound =
        slot.defined() && slot.is_global() ? global::meta(slot).local.impl() : slot.impl();
    if (es && es->grad_handout && bound == es->grad_handout.get() &&
        es->grad_handout->storage == src.impl()->storage)
      continue;  // still bound to the same memory, rewritten in place
    auto h = new_tensor_impl();
    h->share_data_from(*src.impl());
    if (es) es->grad_handout = h;
    slot = wrapped(Tensor(h), e.wrap);
  }
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const int v = g.outputs[k];
    const Buffer& b = g.buffers[size_t(g.values[size_t(v)].buffer)];
    if (b.kind == BufKind::Input || b.kind == BufKind::External || b.kind == BufKind::GradOf ||
        b.kind == BufKind::Constant || b.kind == BufKind::HostScalar || b.escapes) {
      auto h = new_tensor_impl();
      h->share_data_from(*p.vt[size_t(v)].impl());
      out.push_back(k < g.output_wraps.size() ? wrapped(Tensor(h), g.output_wraps[k]) : Tensor(h));
    } else {
      fail("[jit.replay] internal error: output %{} is not pinned", v);
    }
  }
  return out;
}

}  // namespace oneflow::trace

// graph_replay.cpp: a CUDA plan replayed as one CUDA Graph (NOTE [CUDA Graph replay] below;
// the capture itself is src/cuda/graph.cpp's, NOTE [CUDA Graph capture]).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "allocator.h"
#include "global/global.h"
#include "trace/plan.h"

namespace oneflow::trace {

// NOTE [CUDA Graph replay]: a plan of CUDA tensors replays its first call step by step (the
// warm-up: lazily created library handles and workspaces exist afterwards) and captures its CUDA
// steps into one CUDA Graph at the second (src/cuda/graph.cpp); from then on a replay is:
//  - copy each CUDA input into the plan's own input buffer (the graph's addresses are fixed;
//    the copy is queued on the stream before the launch);
//  - run the host-side steps (CPU kernels: learning rates and other host scalars, and their
//    copies to the device, into memory of their own, never the arena);
//  - write this replay's generator draws ({seed, offset} per random op) to device memory: the
//    captured random kernels read them there, so each replay draws what eager would;
//  - launch the graph; when it checks indices (embedding, cross entropy, index ops), read the
//    flag those checks set and raise the eager error if an index was out of range;
//  - results the caller still holds from an earlier replay keep their tensors: their storage
//    objects are given a copy in fresh memory, and the graph keeps writing its own.
// A .grad root re-bound to new memory, or a failed capture, sends the plan back to stepping
// (the failure is kept in graph_refused; a refused plan never tries again). Plans that read a
// CUDA tensor on the host, or ops that size outputs from data, replay without a graph.

bool graph_mode(const Plan& p) {
  return p.cuda_device >= 0 && p.graph_refused.empty() && (p.graph_exec || p.plain_replays >= 1);
}

Storage swap_out(const Storage& s) {
  Storage fresh = allocate_storage(s->nbytes, s->device);
  copy_bytes(fresh->data, s->device, s->data, s->device, s->nbytes);
  std::swap(s->data, fresh->data);
  std::swap(s->release, fresh->release);
  std::swap(s->release_fn, fresh->release_fn);
  std::swap(s->release_arg, fresh->release_arg);
  return fresh;
}

namespace {

// Captures the CUDA steps; false (with graph_refused set) when the capture failed.
bool capture(Plan& p) {
  static std::atomic<int> next_pool{1};
  const int dev = p.cuda_device;
  if (!p.pool_id) p.pool_id = next_pool.fetch_add(1);
  cuda_backend::graph_capture_begin(dev, p.pool_id);
  try {
    KernelScope scope;
    void* flag = p.flag_dev->data;
    cuda_backend::memset_async(flag, 0, sizeof(int), dev);
    for (int i : p.graph_steps) {
      Step& s = p.steps[size_t(i)];
      if (s.group >= 0) {  // a generated kernel: no generator draw, no index check
        run_group(p, p.groups[size_t(s.group)]);
        continue;
      }
      const void* rng =
          s.rng >= 0 ? static_cast<const char*>(p.rng_dev->data) + 16 * size_t(s.rng) : nullptr;
      cuda_backend::graph_slots(rng, flag);
      p.index_checks = p.index_checks || s.op->has(kChecksIndices);
      cuda_backend::note_launch(s.op->name.c_str());
      s.kernel(KernelArgs{s.ins, s.attrs, s.outs});
    }
    p.graph_exec = cuda_backend::graph_capture_end(dev);
  } catch (const Error& e) {
    cuda_backend::graph_capture_abort(dev);
    p.graph_refused = std::string("the capture failed: ") + e.what();
    return false;
  }
  p.captured_grads.clear();
  for (int b : p.grad_buffers)
    p.captured_grads.push_back(
        grad_slot(p.g.buffers[size_t(b)].impls[0].get()).impl()->storage.get());
  return true;
}

std::atomic<bool> g_static_inputs_for_testing{false};

}  // namespace

std::string plan_graph_state(const Plan& p) {
  if (p.cuda_device < 0) return "cpu";
  if (p.graph_exec) return "cuda graph";
  if (!p.graph_refused.empty()) return "cuda steps: " + p.graph_refused;
  return "cuda steps: the second replay captures a CUDA Graph";
}

void set_static_inputs_for_testing(bool on) { g_static_inputs_for_testing = on; }
bool static_inputs_for_testing() { return g_static_inputs_for_testing.load(); }

void make_replay_buffers(Plan& p, bool graph, bool statics) {
  const Graph& g = p.g;
  if (statics && p.static_inputs.size() != p.input_buffers.size()) {
    p.static_inputs.resize(p.input_buffers.size());
    for (size_t k = 0; k < p.input_buffers.size(); ++k) {
      const Buffer& buf = g.buffers[size_t(p.input_buffers[k])];
      if (!graph || buf.device.is_cuda())
        p.static_inputs[k] = allocate_storage(buf.nbytes, buf.device);
    }
  }
  if (graph && !p.rng_dev) {  // the rng slots and the index-check flag the graph reads, made once
    const Device dev(kCUDA, p.cuda_device);
    p.rng_dev = allocate_storage(16 * std::max<size_t>(1, g.rng_counters.size()), dev);
    p.flag_dev = allocate_storage(sizeof(int), dev);
  }
}

void copy_static_input(Plan& p, size_t k, const std::vector<Tensor>& inputs) {
  const Graph& g = p.g;
  const int b = p.input_buffers[k];
  const Storage& st = p.static_inputs[k];
  for (int v : p.values_of_buffer[size_t(b)]) {
    TensorImpl* t = p.vt[size_t(v)].impl();
    if (!t) continue;
    t->storage = st;
    t->offset = g.values[size_t(v)].offset;
  }
  // each input on this buffer (aliased inputs share one) is copied into its recorded
  // geometry there; the buffer's other bytes are never read
  NoGradGuard ng;
  for (size_t j = 0; j < g.inputs.size(); ++j) {
    const Value& iv = g.values[size_t(g.inputs[j])];
    if (iv.buffer != b) continue;
    const Tensor& in = inputs[j];  // a global input: its local piece
    Tensor(value_impl(st, iv)).copy_(in.is_global() ? global::meta(in).local : in);
  }
}

void drop_graph_if_grad_moved(Plan& p, size_t k, const Tensor& gr) {
  if (p.graph_exec &&
      (k >= p.captured_grads.size() || p.captured_grads[k] != gr.impl()->storage.get())) {
    cuda_backend::graph_destroy(p.graph_exec);  // a .grad re-bound to new memory: capture again
    p.graph_exec = nullptr;
  }
}

void write_graph_draws(Plan& p) {
  if (p.draws.empty()) return;
  std::vector<uint64_t> slots;
  for (const GeneratorState& st : p.draws) {
    slots.push_back(st.seed);
    slots.push_back(st.offset);
  }
  copy_bytes(p.rng_dev->data, p.rng_dev->device, slots.data(), Device(kCPU),
             slots.size() * sizeof(uint64_t));
}

void run_graph(Plan& p, std::chrono::steady_clock::time_point t_in, bool debug_allocs,
               bool profile) {
  // OF_CUDA_GRAPH_DEBUG=1: each graph replay's host time by phase on stderr
  static const bool debug_graph = std::getenv("OF_CUDA_GRAPH_DEBUG") != nullptr;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  {
    KernelScope scope;
    for (int i : p.pre_steps) run_step(p, p.steps[size_t(i)], debug_allocs, profile);
  }
  const auto t1 = clock::now();
  const bool captures = !p.graph_exec;
  if (p.graph_exec || capture(p)) {
    const auto t2 = clock::now();
    cuda_backend::graph_launch(p.graph_exec, p.cuda_device);
    const auto t3 = clock::now();
    int flag = 0;
    if (p.index_checks)  // waits for the graph
      copy_bytes(&flag, Device(kCPU), p.flag_dev->data, p.flag_dev->device, sizeof(int));
    if (debug_graph) {
      auto us = [](auto a, auto b) {
        return std::chrono::duration<double, std::micro>(b - a).count();
      };
      std::fprintf(stderr,
                   "[jit.replay] graph: inputs/escapes %.0f us, %zu pre-steps %.0f us, %s "
                   "%.0f us, launch %.0f us, %s %.0f us (%zu captured steps)\n",
                   us(t_in, t0), p.pre_steps.size(), us(t0, t1),
                   captures ? "capture" : "no capture", us(t1, t2), us(t2, t3),
                   p.index_checks ? "flag read (the graph's run)" : "no flag", us(t3, clock::now()),
                   p.graph_steps.size());
    }
    if (p.index_checks) {
      if (flag)
        fail(
            "[jit.replay] an index or class target was out of range in this replay of the "
            "traced step's CUDA Graph (embedding, cross_entropy, index_select or index_add: "
            "indices must lie in [0, size)); its results are invalid");
    }
  } else {
    KernelScope scope;
    for (int i : p.graph_steps) run_step(p, p.steps[size_t(i)], debug_allocs, profile);
  }
}

}  // namespace oneflow::trace

// The CPU executor: lowers a Graph to a flat plan of kernel calls over tensors prebuilt on
// one arena, and replays it.
// NOTE [Replay]: every value gets one TensorImpl at lowering time (arena values point into
// the arena, roots at the caller's or the external tensor's storage), and every step holds
// the TensorLists its kernel takes, so a replay is: re-point the input (and .grad) values at
// this call's storages, refresh host scalars, re-draw the generator, call the kernels, bind
// the .grad effects and hand out the outputs. No dispatch, no autograd, no allocation in the
// steady state (an output the caller still holds gets a fresh buffer instead of being
// overwritten).
// NOTE [Fused groups]: a group is run block by block (kBlock elements of the flattened output
// shape) on the thread pool; each member's own CPU kernel runs on 1-D block views, so fused
// results are bitwise those of the unfused kernels. Group values that nothing outside reads
// live in per-thread scratch blocks (cache-resident); inputs broadcast into the group shape
// are gathered per block. A group of a CUDA plan is one generated kernel instead (NOTE [Generated
// fused kernels] in fusion_codegen.cpp), compiled when the plan is lowered and launched (or
// captured) as a step; its scratch values live in registers.
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

std::shared_ptr<TensorImpl> value_impl(const Storage& s, const Value& v) {
  auto impl = new_tensor_impl();
  impl->storage = s;
  impl->offset = v.offset;
  impl->sizes = v.sizes;
  impl->strides = v.strides;
  impl->dtype = v.dtype;
  impl->device = v.device;
  impl->refresh_contiguous();
  return impl;
}

size_t plan_steps(const Plan& p) { return p.steps.size(); }
size_t plan_arena_bytes(const Plan& p) { return p.arena ? p.arena->nbytes : 0; }
size_t plan_fused_kernels(const Plan& p) {
  size_t n = 0;
  for (const GroupPlan& gp : p.groups) n += gp.cuda_kernel != nullptr;
  return n;
}

std::shared_ptr<Plan> lower(const Graph& graph, bool arena_outputs) {
  auto pp = std::make_shared<Plan>();
  Plan& p = *pp;
  p.g = graph;
  p.arena_outputs = arena_outputs;
  Graph& g = p.g;
  for (const Value& v : g.values) {
    if (!v.device.is_cuda()) continue;
    const int d = std::max(v.device.index(), 0);
    if (p.cuda_device >= 0 && p.cuda_device != d)
      fail(
          "[jit.trace] the recorded graph has tensors on cuda:{} and cuda:{}; a traced step runs "
          "on one device (the call runs eagerly)",
          p.cuda_device, d);
    p.cuda_device = d;
  }
  const bool cuda = p.cuda_device >= 0;
  const Device arena_dev = cuda ? Device(kCUDA, p.cuda_device) : Device(kCPU);
  auto on_arena_dev = [&](const Device& d) { return cuda ? d.is_cuda() : d.is_cpu(); };
  // NOTE [CUDA Graph replay]: which steps run on the host before the launch (CPU kernels:
  // host scalars, their copies to the device) and which are captured. A pre-step's CUDA output
  // gets its own memory (it is written before the graph runs, so no arena sharing).
  std::vector<bool> pre_node(g.nodes.size(), false), own_buffer(g.buffers.size(), false);
  const char* graphs_env = std::getenv("OF_CUDA_GRAPHS");
  if (cuda && graphs_env && std::string_view(graphs_env) == "0")
    p.graph_refused = "OF_CUDA_GRAPHS=0";
  for (size_t i = 0; cuda && i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op->has(kView)) continue;
    bool dev_cuda = false, reads_cuda = false;
    bool first = true;
    for (int v : n.inputs) {
      if (v < 0) continue;
      const bool c = g.values[size_t(v)].device.is_cuda();
      if (first) dev_cuda = c;
      first = false;
      reads_cuda = reads_cuda || c;
    }
    if (first && !n.outputs.empty()) dev_cuda = g.values[size_t(n.outputs[0])].device.is_cuda();
    if (dev_cuda) {
      if (n.op->has(kSyncsHost) && p.graph_refused.empty())
        p.graph_refused = n.op->name + " reads tensor data on the host";
      for (int v : n.outputs)  // a copy to the host (GradScaler's found_inf read by step())
        if (p.graph_refused.empty() && g.values[size_t(v)].device.is_cpu())
          p.graph_refused = n.op->name + " copies a CUDA tensor to the host";
      continue;
    }
    if (reads_cuda && p.graph_refused.empty())
      p.graph_refused = n.op->name + " copies a CUDA tensor to the host";
    pre_node[i] = true;
    for (int v : n.outputs) own_buffer[size_t(g.values[size_t(v)].buffer)] = true;
  }
  // a graph reads copies of its inputs (NOTE [CUDA Graph replay]): a step that writes an input
  // in place, or returns (a view of) one, must see the caller's tensor, so it runs step by step
  if (cuda && p.graph_refused.empty()) {
    auto on_input = [&](int v) {
      return v >= 0 && g.buffers[size_t(g.values[size_t(v)].buffer)].kind == BufKind::Input &&
             g.values[size_t(v)].device.is_cuda();
    };
    for (const Node& n : g.nodes)
      if (p.graph_refused.empty() && n.writes_existing && !n.outputs.empty() &&
          on_input(n.outputs[0]))
        p.graph_refused = n.op->name + " writes an input in place";
    for (int v : g.outputs)
      if (p.graph_refused.empty() && on_input(v))
        p.graph_refused = "an output is (a view of) an input";
  }
  const std::vector<bool> used = values_used(g);
  const std::vector<Interval> iv = buffer_intervals(g);
  // arena: planned offsets, or one region per buffer when memplan is off
  size_t end = arena_bytes(g);
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    Buffer& buf = g.buffers[b];
    if (buf.kind == BufKind::Intermediate && (!on_arena_dev(buf.device) || own_buffer[b])) {
      buf.arena_offset = -1;  // its own memory (below)
      continue;
    }
    if (buf.kind == BufKind::Intermediate && !buf.escapes && buf.arena_offset < 0 &&
        iv[b].first >= 0 && buf.nbytes > 0) {
      buf.arena_offset = int64_t(end);
      end += (buf.nbytes + 63) / 64 * 64;
    }
  }
  if (end > 0) p.arena = allocate_storage(end, arena_dev);
  p.buf_storage.resize(g.buffers.size());
  p.values_of_buffer.resize(g.buffers.size());
  for (size_t v = 0; v < g.values.size(); ++v)
    if (used[v]) p.values_of_buffer[size_t(g.values[v].buffer)].push_back(int(v));
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    Buffer& buf = g.buffers[b];
    switch (buf.kind) {
      case BufKind::Intermediate:
        if (buf.escapes) {
          p.buf_storage[b] = allocate_storage(buf.nbytes, buf.device);
          p.escapes.push_back(EscapeSlot{int(b), p.values_of_buffer[b], 0, nullptr});
        } else if (buf.arena_offset >= 0) {
          Storage arena = p.arena;
          p.buf_storage[b] =
              std::make_shared<StorageImpl>(static_cast<char*>(arena->data) + buf.arena_offset,
                                            buf.nbytes, arena_dev, [arena](void*) {});
        } else if (buf.nbytes == 0) {  // an empty tensor (a rank's empty piece): no bytes
          p.buf_storage[b] = allocate_storage(0, buf.device);
        } else if (iv[b].first >= 0) {  // off the arena's device, or a pre-step's output
          p.buf_storage[b] = allocate_storage(buf.nbytes, buf.device);
        }
        break;
      case BufKind::External:
        p.buf_storage[b] = buf.impls[0]->storage;
        break;
      case BufKind::Constant:
      case BufKind::HostScalar:
        p.buf_storage[b] = buf.impls[0]->storage;
        if (buf.kind == BufKind::HostScalar) p.host_buffers.push_back(int(b));
        break;
      case BufKind::Input:
        p.input_buffers.push_back(int(b));
        break;
      case BufKind::GradOf:
        p.grad_buffers.push_back(int(b));
        break;
    }
  }
  p.vt.resize(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!used[v] || in_group_scratch(g, int(v))) continue;
    const Value& val = g.values[v];
    const Storage& s = p.buf_storage[size_t(val.buffer)];
    // inputs and .grad roots get their storage at every call
    p.vt[v] = Tensor(value_impl(s ? s : p.arena, val));
    if (!s && g.buffers[size_t(val.buffer)].kind == BufKind::Intermediate)
      fail("[jit.trace] internal error: value %{} has no memory", v);
  }
  std::vector<int> last_of_group(g.groups.size(), -1);
  for (size_t k = 0; k < g.groups.size(); ++k) last_of_group[k] = g.groups[k].back();
  // buffers some node writes in place (their contents change within a replay)
  std::vector<bool> written(g.buffers.size(), false);
  for (const Node& n : g.nodes)
    if (n.writes_existing)
      for (int v : n.outputs) written[size_t(g.values[size_t(v)].buffer)] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op->has(kView)) continue;
    if (n.group >= 0) {
      if (last_of_group[size_t(n.group)] != int(i)) continue;
      Step s;
      s.group = int(p.groups.size());
      build_group(p, n.group);
      for (int m : g.groups[size_t(n.group)]) {  // members writing a root in place
        const Node& mn = g.nodes[size_t(m)];
        if (!mn.writes_existing) continue;
        const int buf = g.values[size_t(mn.outputs[0])].buffer;
        if (g.buffers[size_t(buf)].kind != BufKind::Intermediate && p.buf_storage[size_t(buf)])
          s.bumps.push_back(p.buf_storage[size_t(buf)].get());
      }
      if (cuda) p.graph_steps.push_back(int(p.steps.size()));  // its members are CUDA nodes
      p.steps.push_back(std::move(s));
      continue;
    }
    Step s;
    s.op = n.op;
    {  // the device dispatch chose: the first defined input's, else the output's
      Device d(kCPU);
      bool found = false;
      for (int v : n.inputs)
        if (v >= 0) {
          d = g.values[size_t(v)].device;
          found = true;
          break;
        }
      if (!found && !n.outputs.empty()) d = g.values[size_t(n.outputs[0])].device;
      s.on_cuda = d.is_cuda();
    }
    s.kernel = s.on_cuda ? n.op->cuda : n.op->cpu;
    if (!s.kernel)
      fail("[jit.trace] {} has no {} implementation", n.op->name, s.on_cuda ? "CUDA" : "CPU");
    if (cuda) (pre_node[i] ? p.pre_steps : p.graph_steps).push_back(int(p.steps.size()));
    s.attrs = n.attrs;
    for (int v : n.inputs) s.ins.push_back(v >= 0 ? p.vt[size_t(v)] : Tensor());
    for (int v : n.outputs) s.outs.push_back(p.vt[size_t(v)]);
    if (n.rng >= 0 && n.op->rng_seed_attr >= 0) {
      s.rng = n.rng;
      s.seed_attr = n.op->rng_seed_attr;
    }
    if (const int wi = n.op->weight_input;
        !s.on_cuda && wi >= 0 && wi < int(n.inputs.size()) && n.inputs[size_t(wi)] >= 0) {
      const int buf = g.values[size_t(n.inputs[size_t(wi)])].buffer;
      const BufKind kind = g.buffers[size_t(buf)].kind;
      if ((kind == BufKind::External || kind == BufKind::Constant) && !written[size_t(buf)] &&
          p.buf_storage[size_t(buf)])
        s.constant_operand = p.buf_storage[size_t(buf)].get();
    }
    if (n.writes_existing) {
      const Buffer& b = g.buffers[size_t(g.values[size_t(n.outputs[0])].buffer)];
      if (b.kind != BufKind::Intermediate &&
          p.buf_storage[size_t(g.values[size_t(n.outputs[0])].buffer)])
        s.bumps.push_back(p.buf_storage[size_t(g.values[size_t(n.outputs[0])].buffer)].get());
    }
    p.steps.push_back(std::move(s));
  }
  for (EscapeSlot& e : p.escapes) e.internal_refs = p.buf_storage[size_t(e.buffer)].use_count();
  for (const GradEffect& e : g.grad_effects) {
    int slot = -1;
    for (size_t x = 0; e.value >= 0 && x < p.escapes.size(); ++x)
      if (p.escapes[x].buffer == g.values[size_t(e.value)].buffer) slot = int(x);
    p.effect_escape.push_back(slot);
  }
  return pp;
}

std::string check_externals(const Plan& p) {
  const Graph& g = p.g;
  for (const auto& leaf : g.fresh_grads)
    if (grad_slot(leaf.get()).defined())
      return fmt::format(
          "the .grad of a tensor of shape {} was undefined when the call was recorded (its "
          "backward set it) and is defined now (backward adds to it)",
          shape_str(leaf->sizes));
  for (const Buffer& b : g.buffers) {
    if (b.kind == BufKind::External) {
      for (const auto& impl : b.impls)
        if (impl->storage.get() != b.recorded_storage)
          return fmt::format(
              "an external tensor of shape {} ({}) was re-bound to new memory "
              "since it was recorded (set_data, load_state_dict, to())",
              shape_str(impl->sizes), dtype_name(impl->dtype));
    } else if (b.kind == BufKind::GradOf) {
      const Tensor& gr = grad_slot(b.impls[0].get());
      if (!gr.defined())
        return fmt::format(
            "the .grad of a tensor of shape {} was read by the recorded call but "
            "is undefined now",
            shape_str(b.impls[0]->sizes));
    } else if (b.kind == BufKind::HostScalar) {
      if (b.owner.expired())
        return "an optimizer whose learning rate the recorded graph reads was destroyed";
    }
  }
  for (const Buffer& b : g.buffers) {
    if (b.kind != BufKind::GradOf || b.root_value < 0) continue;
    const Tensor& gr = grad_slot(b.impls[0].get());
    const Value& v = g.values[size_t(b.root_value)];
    if (gr.dtype() != v.dtype || !(gr.sizes() == IntArrayRef(v.sizes)) ||
        !(gr.strides() == IntArrayRef(v.strides)))
      return fmt::format(
          "the .grad of a tensor of shape {} changed dtype, shape or layout since "
          "it was recorded",
          shape_str(b.impls[0]->sizes));
  }
  return {};
}

}  // namespace oneflow::trace

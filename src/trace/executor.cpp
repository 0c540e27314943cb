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

namespace {
constexpr int64_t kBlock = 4096;

// A 1-D contiguous block tensor (sizes/offset rewritten per block).
std::shared_ptr<TensorImpl> make_block(const Storage& s, ScalarType dtype, Device dev) {
  auto impl = new_tensor_impl();
  impl->storage = s;
  impl->sizes = {kBlock};
  impl->strides = {1};
  impl->numel = kBlock;
  impl->dtype = dtype;
  impl->device = dev;
  impl->is_contiguous = true;
  return impl;
}

}  // namespace

size_t plan_steps(const Plan& p) { return p.steps.size(); }
size_t plan_arena_bytes(const Plan& p) { return p.arena ? p.arena->nbytes : 0; }
size_t plan_fused_kernels(const Plan& p) {
  size_t n = 0;
  for (const GroupPlan& gp : p.groups) n += gp.cuda_kernel != nullptr;
  return n;
}

namespace {

// Which values some step touches (so they need a prebuilt tensor).
std::vector<bool> values_used(const Graph& g) {
  std::vector<bool> used(g.values.size(), false);
  for (const Node& n : g.nodes) {
    if (n.op->has(kView)) continue;
    for (int v : n.inputs)
      if (v >= 0) used[size_t(v)] = true;
    for (int v : n.outputs) used[size_t(v)] = true;
  }
  for (int v : g.outputs) used[size_t(v)] = true;
  for (const GradEffect& e : g.grad_effects)
    if (e.value >= 0) used[size_t(e.value)] = true;
  return used;
}

bool in_group_scratch(const Graph& g, int v) {
  const Value& val = g.values[size_t(v)];
  return val.producer >= 0 && g.nodes[size_t(val.producer)].group >= 0 && !g.materialized.empty() &&
         !g.materialized[size_t(v)];
}

// A CUDA plan's group: generated and compiled now (an of::Error names the member without a
// generated form, or NVRTC's log; jit.cpp then compiles the graph again without fusion).
void build_cuda_group(Plan& p, int gid) {
  GroupPlan gp;
  gp.cuda_source = generate_fused_kernel(p.g, gid);
  if (!gp.cuda_source.ok)
    fail("[jit.fuse] group {} cannot be generated: {}", gid, gp.cuda_source.why_not);
  gp.numel = gp.cuda_source.numel;
  gp.cuda_kernel =
      cuda_backend::fused_compile(gp.cuda_source.source, gp.cuda_source.name, p.cuda_device);
  gp.label = fmt::format("(fused kernel {} x{})", gp.cuda_source.name, gp.numel);
  p.groups.push_back(std::move(gp));
}

void build_group(Plan& p, int gid) {
  if (p.cuda_device >= 0) return build_cuda_group(p, gid);
  const Graph& g = p.g;
  GroupPlan gp;
  const std::vector<int>& members = g.groups[size_t(gid)];
  const Value& first_out = g.values[size_t(g.nodes[size_t(members[0])].outputs[0])];
  gp.shape = first_out.sizes;
  gp.numel = first_out.numel();
  std::unordered_map<int, int> slot_of;  // value -> slot
  std::unordered_map<int, bool> produced;
  auto slot_for_input = [&](int v) {
    auto it = slot_of.find(v);
    if (it != slot_of.end()) return it->second;
    const Value& val = g.values[size_t(v)];
    GroupSlot s;
    s.value = v;
    s.dtype = val.dtype;
    if (val.numel() == 1) {
      s.kind = GroupSlot::kScalar;
    } else if (val.numel() == gp.numel && val.contiguous()) {
      s.kind = GroupSlot::kDirect;
    } else {
      s.kind = GroupSlot::kGather;
      const int64_t nd = int64_t(gp.shape.size()), off = nd - int64_t(val.sizes.size());
      s.bstrides.assign(size_t(nd), 0);
      for (int64_t d = 0; d < int64_t(val.sizes.size()); ++d)
        s.bstrides[size_t(off + d)] = val.sizes[size_t(d)] == 1 ? 0 : val.strides[size_t(d)];
    }
    gp.slots.push_back(std::move(s));
    slot_of[v] = int(gp.slots.size()) - 1;
    return int(gp.slots.size()) - 1;
  };
  for (int ni : members) {
    const Node& n = g.nodes[size_t(ni)];
    GroupMember m;
    m.kernel = n.op->cpu;
    m.attrs = &n.attrs;  // p.g is not modified after lowering
    for (int v : n.inputs) m.in_slots.push_back(slot_for_input(v));
    const int o = n.outputs[0];
    auto it = slot_of.find(o);
    if (it != slot_of.end() && gp.slots[size_t(it->second)].kind == GroupSlot::kDirect) {
      // an in-place member writing a value read directly before: the same block view
      gp.slots[size_t(it->second)].kind = GroupSlot::kMaterialized;
      m.out_slot = it->second;
    } else if (it != slot_of.end()) {
      m.out_slot = it->second;
    } else {
      GroupSlot s;
      s.kind = in_group_scratch(g, o) ? GroupSlot::kScratch : GroupSlot::kMaterialized;
      s.value = o;
      s.dtype = g.values[size_t(o)].dtype;
      gp.slots.push_back(std::move(s));
      m.out_slot = int(gp.slots.size()) - 1;
      slot_of[o] = m.out_slot;
    }
    gp.members.push_back(std::move(m));
  }
  gp.label = "(fused:";
  for (int ni : members) gp.label += " " + g.nodes[size_t(ni)].op->name;
  gp.label += fmt::format(" x{})", gp.numel);
  const int nworkers =
      2 * std::max<int>(pool_threads(), int(std::thread::hardware_concurrency())) + 2;
  for (int w = 0; w < nworkers; ++w) {
    auto wk = std::make_unique<GroupPlan::Worker>();
    for (const GroupSlot& s : gp.slots) {
      const Value& val = g.values[size_t(s.value)];
      if (s.kind == GroupSlot::kScalar) {
        const Tensor& src = p.vt[size_t(s.value)];
        auto impl = value_impl(src.impl()->storage, val);
        impl->sizes.clear();
        impl->strides.clear();
        impl->refresh_contiguous();
        wk->slot_tensors.push_back(Tensor(impl));
      } else if (s.kind == GroupSlot::kScratch || s.kind == GroupSlot::kGather) {
        Storage st = allocate_storage(size_t(kBlock) * itemsize(s.dtype), Device(kCPU));
        wk->slot_tensors.push_back(Tensor(make_block(st, s.dtype, Device(kCPU))));
      } else {
        wk->slot_tensors.push_back(
            Tensor(make_block(p.vt[size_t(s.value)].impl()->storage, s.dtype, Device(kCPU))));
      }
    }
    for (const GroupMember& m : gp.members) {
      TensorList ins, outs;
      for (int s : m.in_slots) ins.push_back(wk->slot_tensors[size_t(s)]);
      outs.push_back(wk->slot_tensors[size_t(m.out_slot)]);
      wk->ins.push_back(std::move(ins));
      wk->outs.push_back(std::move(outs));
    }
    gp.workers.push_back(std::move(wk));
  }
  p.groups.push_back(std::move(gp));
}

// Copies elements [begin, begin + n) of `src` broadcast over `shape` into dst (row-major).
// Runs along the innermost dim are copied with typed loops (a memcpy call per 32-element run of
// a head-split transpose cost more than the data), and the source offset moves incrementally.
template <class E>
void gather_runs(const char* base, const DimVector& shape, const DimVector& bst, int64_t begin,
                 int64_t n, E* dst) {
  const int64_t nd = int64_t(shape.size());
  DimVector idx(size_t(nd), 0);
  int64_t rem = begin, off = 0;
  for (int64_t d = nd - 1; d >= 0; --d) {
    idx[size_t(d)] = rem % shape[size_t(d)];
    rem /= shape[size_t(d)];
    off += idx[size_t(d)] * bst[size_t(d)];
  }
  const E* src = reinterpret_cast<const E*>(base);
  const int64_t inner = shape[size_t(nd - 1)], st = bst[size_t(nd - 1)];
  int64_t pos = 0;
  while (pos < n) {
    const int64_t run = std::min(inner - idx[size_t(nd - 1)], n - pos);
    const E* s = src + off;
    E* d = dst + pos;
    if (st == 1) {
      for (int64_t k = 0; k < run; ++k) d[k] = s[k];
    } else if (st == 0) {
      const E v = *s;
      for (int64_t k = 0; k < run; ++k) d[k] = v;
    } else {
      for (int64_t k = 0; k < run; ++k) d[k] = s[k * st];
    }
    pos += run;
    off += run * st;
    idx[size_t(nd - 1)] += run;
    for (int64_t dd = nd - 1; dd > 0 && idx[size_t(dd)] >= shape[size_t(dd)]; --dd) {
      off -= idx[size_t(dd)] * bst[size_t(dd)];
      idx[size_t(dd)] = 0;
      ++idx[size_t(dd - 1)];
      off += bst[size_t(dd - 1)];
    }
  }
}

void gather_block(const TensorImpl& src, const DimVector& shape, const DimVector& bst,
                  int64_t begin, int64_t n, char* dst) {
  const size_t es = itemsize(src.dtype);
  const char* base = static_cast<const char*>(src.storage->data) + src.offset * int64_t(es);
  switch (es) {
    case 1:
      return gather_runs(base, shape, bst, begin, n, reinterpret_cast<uint8_t*>(dst));
    case 2:
      return gather_runs(base, shape, bst, begin, n, reinterpret_cast<uint16_t*>(dst));
    case 4:
      return gather_runs(base, shape, bst, begin, n, reinterpret_cast<uint32_t*>(dst));
    case 8:
      return gather_runs(base, shape, bst, begin, n, reinterpret_cast<uint64_t*>(dst));
    default:
      break;
  }
  fail("[jit.replay] internal error: a fused group gathers {}-byte elements", es);
}

// One launch on the device's current stream; the pointers are read at every call (inputs and
// escaping buffers move between calls when the plan replays step by step).
void run_cuda_group(Plan& p, GroupPlan& gp) {
  const FusedKernelSource& k = gp.cuda_source;
  gp.cuda_ins.clear();
  gp.cuda_outs.clear();
  for (int v : k.input_values) gp.cuda_ins.push_back(p.vt[size_t(v)].impl()->raw_data());
  for (int v : k.output_values) gp.cuda_outs.push_back(p.vt[size_t(v)].impl()->raw_data());
  const std::vector<uint64_t> params = fused_kernel_params(k, gp.cuda_ins, gp.cuda_outs);
  cuda_backend::fused_launch(gp.cuda_kernel, params.data(), params.size() * sizeof(uint64_t),
                             k.numel, p.cuda_device);
}

}  // namespace

void run_group(Plan& p, GroupPlan& gp) {
  if (gp.cuda_kernel) return run_cuda_group(p, gp);
  const int64_t nblocks = (gp.numel + kBlock - 1) / kBlock;
  // refresh the storages of direct/materialized slots (inputs and escaping buffers move)
  for (auto& wk : gp.workers)
    for (size_t s = 0; s < gp.slots.size(); ++s) {
      const GroupSlot& sl = gp.slots[s];
      if (sl.kind == GroupSlot::kDirect || sl.kind == GroupSlot::kMaterialized ||
          sl.kind == GroupSlot::kScalar) {
        TensorImpl* dst = wk->slot_tensors[s].impl();
        const TensorImpl* src = p.vt[size_t(sl.value)].impl();
        if (dst->storage != src->storage) dst->storage = src->storage;
        if (sl.kind == GroupSlot::kScalar) dst->offset = src->offset;
      }
    }
  auto body = [&](int64_t b0, int64_t b1) {
    GroupPlan::Worker* wk = nullptr;
    for (auto& w : gp.workers) {
      bool expect = false;
      if (w->busy.compare_exchange_strong(expect, true, std::memory_order_acquire)) {
        wk = w.get();
        break;
      }
    }
    if (!wk) fail("[jit.replay] internal error: no free block workspace");
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t beg = blk * kBlock, n = std::min(kBlock, gp.numel - beg);
      for (size_t s = 0; s < gp.slots.size(); ++s) {
        const GroupSlot& sl = gp.slots[s];
        if (sl.kind == GroupSlot::kScalar) continue;
        TensorImpl* t = wk->slot_tensors[s].impl();
        t->sizes[0] = n;
        t->numel = n;
        if (sl.kind == GroupSlot::kDirect || sl.kind == GroupSlot::kMaterialized) {
          t->offset = p.vt[size_t(sl.value)].impl()->offset + beg;
        } else if (sl.kind == GroupSlot::kGather) {
          gather_block(*p.vt[size_t(sl.value)].impl(), gp.shape, sl.bstrides, beg, n,
                       static_cast<char*>(t->storage->data));
        }
      }
      for (size_t m = 0; m < gp.members.size(); ++m)
        gp.members[m].kernel(KernelArgs{wk->ins[m], *gp.members[m].attrs, wk->outs[m]});
    }
    wk->busy.store(false, std::memory_order_release);
  };
  // as eager kernels: below kParallelGrain elements of work the group stays on this thread
  parallel_for(0, nblocks, std::max<int64_t>(1, kParallelGrain / kBlock), body);
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

std::string serial_reason(const Graph& g, bool arena_outputs) {
  if (arena_outputs) return "its results live in the graph's arena (arena_outputs)";
  if (!g.grad_effects.empty()) return "it sets .grad of tensors";
  if (!g.rng_counters.empty()) return "it draws from the generator";
  for (const Graph::RngReset& r : g.rng_reset)
    if (r.set) return "it seeds the generator";
  for (const Buffer& b : g.buffers) {
    if (b.kind == BufKind::GradOf) return "it reads .grad of tensors";
    if (b.kind == BufKind::HostScalar) return "it reads host scalars (learning rates)";
    if (b.device.is_cuda()) return "it runs on a CUDA device";
  }
  for (const Value& v : g.values)
    if (v.device.is_cuda()) return "it runs on a CUDA device";
  for (const Node& n : g.nodes) {
    if (n.op->has(kCollective) || n.op->has(kEffect)) return n.op->name + " communicates";
    if (n.writes_existing) {
      const Buffer& b = g.buffers[size_t(g.values[size_t(n.outputs[0])].buffer)];
      if (b.kind != BufKind::Intermediate)
        return fmt::format("{} writes a tensor from outside ({})", n.op->name,
                           buf_kind_name(b.kind));
    }
  }
  return {};
}

PlanPool::PlanPool(Graph g, bool arena_outputs, std::shared_ptr<Plan> first)
    : graph_(std::move(g)),
      arena_outputs_(arena_outputs),
      concurrent_(serial_reason(graph_, arena_outputs).empty()),
      primary_(std::move(first)) {
  idle_.push_back(primary_);
}

size_t PlanPool::plans() const {
  std::lock_guard<std::mutex> lk(mu_);
  return plans_;
}

std::vector<Tensor> PlanPool::replay(const std::vector<Tensor>& inputs) {
  if (!concurrent_) {
    std::lock_guard<std::mutex> lk(serial_mu_);
    return trace::replay(*primary_, inputs);
  }
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!idle_.empty()) {
      plan = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!plan) {  // every plan is busy: this call gets its own (outside the lock: it allocates)
    plan = lower(graph_, arena_outputs_);
    std::lock_guard<std::mutex> lk(mu_);
    ++plans_;
  }
  struct GiveBack {
    PlanPool& pool;
    std::shared_ptr<Plan>& plan;
    ~GiveBack() {
      std::lock_guard<std::mutex> lk(pool.mu_);
      pool.idle_.push_back(std::move(plan));
    }
  } give_back{*this, plan};
  return trace::replay(*plan, inputs);
}

}  // namespace oneflow::trace

// fused_groups.cpp: NOTE [Fused groups] (executor.cpp): a fused group's plan, built when a
// graph is lowered, and its run, block by block on the CPU or as one generated CUDA kernel.
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
namespace {
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

}  // namespace

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

namespace {

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

}  // namespace oneflow::trace

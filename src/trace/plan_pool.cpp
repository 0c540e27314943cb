// plan_pool.cpp: NOTE [Concurrent replay] (trace/executor.h): which graphs may serve concurrent
// calls, and the pool of plans that serves them.
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

// executor.h (internal): lowering a final graph to a plan of kernel calls over one arena, its
// replay, and the pool of plans that serves concurrent calls (executor.cpp).
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "trace/graph.h"

namespace oneflow::trace {

// A tensor with `v`'s geometry over `s` (null data: a geometry only, for infer_meta).
std::shared_ptr<TensorImpl> value_impl(const Storage& s, const Value& v);
class Plan;
std::shared_ptr<Plan> lower(const Graph& g, bool arena_outputs);
// Binds the call's inputs, runs every step, applies the .grad effects; returns the outputs.
std::vector<Tensor> replay(Plan& p, const std::vector<Tensor>& inputs);
// Why a compiled plan cannot run for these externals (empty: it can).
std::string check_externals(const Plan& p);
size_t plan_steps(const Plan& p);

// NOTE [Concurrent replay]: a plan holds per-call state (its tensors are re-pointed at each
// call's inputs, its arena holds the intermediates), so one plan serves one call at a time.
// A PlanPool serves concurrent calls: a graph that writes nothing outside itself (an inference
// graph: no in-place writes to roots, no .grad effects, no host scalars, no generator draws,
// no collectives, CPU tensors, results not handed out from the arena) gets one plan per
// concurrent call — lowered on demand from the same graph, sharing its weights and constants
// (their storages), each with its own arena; idle plans are kept for reuse, so the pool holds
// at most as many plans as calls ever ran at once. Any other graph serializes its calls on one
// plan: a training step's updates never interleave.
class PlanPool {
 public:
  PlanPool(Graph g, bool arena_outputs, std::shared_ptr<Plan> first);
  // Replays on a free plan (lowering a new one when every plan is busy).
  std::vector<Tensor> replay(const std::vector<Tensor>& inputs);
  // The first plan (stats, check_externals).
  const Plan& primary() const { return *primary_; }
  bool concurrent() const { return concurrent_; }
  // Plans lowered so far (1 + the concurrent calls that found every plan busy).
  size_t plans() const;

 private:
  Graph graph_;
  bool arena_outputs_;
  bool concurrent_;
  std::shared_ptr<Plan> primary_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Plan>> idle_;
  size_t plans_ = 1;
  std::mutex serial_mu_;
};
// Why a graph's calls must be serialized ("" when concurrent calls may each get a plan).
std::string serial_reason(const Graph& g, bool arena_outputs);
size_t plan_arena_bytes(const Plan& p);
// Fused groups that run as generated CUDA kernels (TraceStats::fused_kernels).
size_t plan_fused_kernels(const Plan& p);
// How a plan replays: "cpu", "cuda graph", or "cuda steps: <why>" (TraceStats::replay_mode).
std::string plan_graph_state(const Plan& p);
// Tests: while on, CPU plans copy their inputs into buffers of their own at each replay, as a
// CUDA Graph's plan does (NOTE [CUDA Graph replay]), so that path runs without a GPU.
void set_static_inputs_for_testing(bool on);

}  // namespace oneflow::trace

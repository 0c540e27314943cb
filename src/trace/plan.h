// plan.h: a traced graph lowered to steps over prebuilt tensors (trace/executor.cpp lowers
// and replays it; trace/graph_replay.cpp runs a CUDA plan's steps as one CUDA Graph: NOTE
// [CUDA Graph replay]), and the functions the two files share.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "generator.h"
#include "trace/fusion_codegen.h"
#include "trace/graph.h"
#include "trace/executor.h"

namespace oneflow::trace {

struct GroupSlot {
  enum Kind : uint8_t { kDirect, kScalar, kGather, kScratch, kMaterialized } kind;
  int value = -1;
  ScalarType dtype = kFloat32;
  // kGather: the source's strides in elements over the group shape (0 where broadcast)
  DimVector bstrides;
};

struct GroupMember {
  KernelFn kernel;
  const Attrs* attrs;
  SmallVector<int, 4> in_slots;
  int out_slot;
};

struct GroupPlan {
  std::string label;  // OF_TRACE_PROFILE's name: "(fused: op op ... x numel)"
  int64_t numel = 0;
  DimVector shape;
  std::vector<GroupSlot> slots;
  std::vector<GroupMember> members;
  // per worker: one block tensor per slot (+ scratch storages), and a busy flag
  struct Worker {
    std::vector<Tensor> slot_tensors;
    std::vector<TensorList> ins;
    std::vector<TensorList> outs;
    std::atomic<bool> busy{false};
  };
  std::vector<std::unique_ptr<Worker>> workers;
  // a CUDA plan's group: the generated kernel (cuda_backend::fused_compile) and its source's
  // parameter layout; the CPU fields above stay empty
  void* cuda_kernel = nullptr;
  FusedKernelSource cuda_source;
  std::vector<const void*> cuda_ins;
  std::vector<void*> cuda_outs;
};

struct Step {
  const OpDef* op = nullptr;
  KernelFn kernel = nullptr;
  bool on_cuda = false;  // its kernel is the op's CUDA one
  TensorList ins, outs;
  Attrs attrs;
  int rng = -1, seed_attr = -1;
  // in-place writes to roots bump their versions (as eager does; a fused group: each member's)
  SmallVector<StorageImpl*, 1> bumps;
  // its weight input's storage when the graph only reads it (NOTE [Prepacked weights])
  const StorageImpl* constant_operand = nullptr;
  int group = -1;
};

struct EscapeSlot {
  int buffer;
  std::vector<int> values;                   // values on it
  long internal_refs = 0;                    // references the plan itself holds to its storage
  std::shared_ptr<TensorImpl> grad_handout;  // the impl bound as a .grad last call
};

class Plan {
 public:
  Graph g;
  bool arena_outputs = false;
  Storage arena;
  std::vector<Storage> buf_storage;  // per buffer (null: not materialized)
  std::vector<Tensor> vt;            // per value (undefined: not needed at run time)
  std::vector<std::vector<int>> values_of_buffer;
  std::vector<Step> steps;
  std::vector<GroupPlan> groups;
  std::vector<EscapeSlot> escapes;
  std::vector<int> input_buffers, grad_buffers, host_buffers;
  std::vector<int> effect_escape;  // per .grad effect: its escape slot (-1: none)
  std::vector<GeneratorState> draws;
  // NOTE [CUDA Graph replay]
  int cuda_device = -1;       // a plan of CUDA tensors (on this device); -1: a CPU plan
  std::string graph_refused;  // why it replays without a CUDA graph (empty: it captures)
  bool index_checks = false;  // a captured step checks indices (the flag is read after a launch)
  void* graph_exec = nullptr;
  int pool_id = 0;
  size_t plain_replays = 0;
  std::vector<int> pre_steps, graph_steps;  // host-side steps run before the launch; captured
  std::vector<Storage> static_inputs;       // per input buffer: the copy a graph reads
  std::vector<const StorageImpl*> captured_grads;  // per .grad root buffer, at capture
  Storage rng_dev;   // {seed, offset} per generator draw, written before each launch
  Storage flag_dev;  // the index-check flag (an int)
  Plan() = default;
  Plan(const Plan&) = delete;
  ~Plan() {
    if (graph_exec) cuda_backend::graph_destroy(graph_exec);
    if (pool_id) {
      try {
        cuda_backend::release_pool(cuda_device, pool_id);
      } catch (...) {  // the module is gone (process exit): nothing to release
      }
    }
  }
};

// executor.cpp: one step (its kernel, or its fused group) and one fused group
void run_step(Plan& p, Step& s, bool debug_allocs, bool profile);
void run_group(Plan& p, GroupPlan& gp);
// Lowering's pieces for fused groups (fused_groups.cpp): the values some step touches (they get
// a prebuilt tensor), whether a group value lives only in a group's scratch, and group gid's
// plan.
std::vector<bool> values_used(const Graph& g);
bool in_group_scratch(const Graph& g, int v);
void build_group(Plan& p, int gid);

// graph_replay.cpp (NOTE [CUDA Graph replay])
// Whether this replay of a CUDA plan launches (or first captures) its graph.
bool graph_mode(const Plan& p);
// set_static_inputs_for_testing's switch.
bool static_inputs_for_testing();
// The plan's own input buffers (when `statics`) and the graph's rng slots and index-check flag
// (when `graph`), made once.
void make_replay_buffers(Plan& p, bool graph, bool statics);
// Input buffer k: its values point into the plan's own buffer and the call's inputs on it are
// copied there.
void copy_static_input(Plan& p, size_t k, const std::vector<Tensor>& inputs);
// .grad root k is bound to other memory than at the capture: the graph is captured again.
void drop_graph_if_grad_moved(Plan& p, size_t k, const Tensor& grad);
// This replay's generator draws, written where the captured random kernels read them.
void write_graph_draws(Plan& p);
// The caller still holds `s`, which the graph writes: its object gets a copy in fresh memory
// and the returned object owns the graph's memory from now on.
Storage swap_out(const Storage& s);
// Step 4 of a graph replay: the host-side steps, then the graph (captured at its first launch),
// then the index-check flag. `t_in`: when the replay began (OF_CUDA_GRAPH_DEBUG's phases).
void run_graph(Plan& p, std::chrono::steady_clock::time_point t_in, bool debug_allocs,
               bool profile);

}  // namespace oneflow::trace

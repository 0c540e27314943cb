// graph.h (internal): the traced-graph IR and its printing. The passes are declared in
// trace/passes.h, the executor in trace/executor.h, the recorder in trace/recording.h and the
// graph files in trace/graph_io.h.
// NOTE [Trace IR]: a Graph is what one recording saw, in execution order. A Buffer is one
// storage (an intermediate allocated by an op, or a root the trace did not create: an input,
// an external tensor bound by identity, a leaf's .grad, a host scalar, a constant). A Value is
// a tensor geometry over a buffer; views and in-place writes share their buffer. A Node is one
// dispatched op with its attrs; `writes_existing` marks in-place/out= nodes that write a value
// that existed before. Passes are pure Graph -> Graph functions; the executor lowers the final
// graph to a flat plan of kernel calls over tensors prebuilt on one arena.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dispatch.h"
#include "oneflow/jit.h"

namespace oneflow::trace {

enum class BufKind : uint8_t { Intermediate, Input, External, GradOf, HostScalar, Constant };
const char* buf_kind_name(BufKind k);

struct Buffer {
  BufKind kind = BufKind::Intermediate;
  size_t nbytes = 0;  // bytes of the storage (intermediates: what the planner places)
  Device device;
  int input = -1;           // Input: the flattened input index
  int64_t base_offset = 0;  // Input: the input tensor's storage offset (elements) when recorded
  // External: every impl seen on this storage (checked each call: a re-bound parameter
  // retraces); GradOf: [the leaf]; Constant/HostScalar: the tensor holding the value.
  std::vector<std::shared_ptr<TensorImpl>> impls;
  const StorageImpl* recorded_storage = nullptr;  // External: the storage they pointed to
  std::function<double()> getter;                 // HostScalar: read at every replay
  std::weak_ptr<void> owner;  // HostScalar: the getter is valid while this lives
  int root_value = -1;        // roots: the value first seen on it (its recorded geometry)
  bool escapes = false;       // returned or bound as a .grad: lives outside the arena
  int64_t arena_offset = -1;  // planned byte offset in the arena (memplan)
};

struct Value {
  int buffer = -1;
  DimVector sizes, strides;
  int64_t offset = 0;  // elements from the start of the buffer's storage
  ScalarType dtype = kFloat32;
  Device device;
  int producer = -1;     // the node whose kernel created it (-1: a root or an alias)
  bool is_view = false;  // output of a view op (no kernel)
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  bool contiguous() const;
};

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  SmallVector<int, 4> inputs;    // value ids (-1: an undefined optional input)
  SmallVector<int, 2> outputs;   // value ids
  bool writes_existing = false;  // outputs[0] is a value that existed before (in-place, out=)
  int rng = -1;                  // index of the generator draw whose (seed, offset) its attrs carry
  int group = -1;                // fused group (fuse pass)
};

// NOTE [Traced boxing]: a traced step of global tensors is a graph of the local pieces (the
// collectives are boxing_axis nodes). An output or a .grad that was a global tensor is wrapped
// as one again on every replay: its placement and SBP (`meta`, whose local piece is unused)
// and its logical sizes. Null meta: a local tensor.
struct GlobalWrap {
  std::shared_ptr<GlobalMeta> meta;
  DimVector logical;
};

// A leaf's .grad after the call: bound to `value`, or dropped (value = -1).
struct GradEffect {
  std::shared_ptr<TensorImpl> leaf;
  int value = -1;
  GlobalWrap wrap;
};

struct Graph {
  std::vector<Buffer> buffers;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;               // per flattened input: its value
  std::vector<int> outputs;              // returned values, in order
  std::vector<GlobalWrap> output_wraps;  // per output (NOTE [Traced boxing])
  std::vector<GradEffect> grad_effects;
  // Leaves whose .grad the recorded call's backward set from nothing (NOTE [Traced fresh .grad]
  // in recorder.cpp): a replay that finds one defined records again.
  std::vector<std::shared_ptr<TensorImpl>> fresh_grads;
  std::vector<uint64_t> rng_counters;  // generator draws in eager order (counters each)
  // rng_reset[d]: the generator state set (manual_seed inside the call) before draw d;
  // rng_reset[draws]: the state set after the last draw. {0, 0, false}: none.
  struct RngReset {
    uint64_t seed = 0, offset = 0;
    bool set = false;
  };
  std::vector<RngReset> rng_reset;
  // A loaded training step's own generator ({seed, offset} as two uint64; NOTE [Saved training
  // steps] in serialize.cpp): its draws advance this state instead of the default generator's.
  Storage rng_state;
  // Fused groups (node ids, in execution order); materialized[v] = a group value written to
  // its buffer because something outside the group reads it.
  std::vector<std::vector<int>> groups;
  std::vector<bool> materialized;
  // What the inference rewrites did and refused (TraceStats::rewrites), in pass order.
  std::vector<std::string> rewrites;

  int add_value(Value v) {
    values.push_back(std::move(v));
    return int(values.size()) - 1;
  }
  size_t live_nodes() const { return nodes.size(); }
};

// ---- printing
std::string to_string(const Graph& g);
std::string to_dot(const Graph& g);

}  // namespace oneflow::trace

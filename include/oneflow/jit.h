// jit.h: of::jit::trace — run a function once eagerly while recording every op it executes
// (forward, backward and optimizer updates alike), optimize that graph, and replay it on later
// calls: no dispatcher, no autograd bookkeeping, no allocation, fused elementwise work, one
// planned arena. docs/TRACING.md has the rules and the footguns.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "oneflow/tensor.h"

namespace oneflow::nn {
class Module;
}
namespace oneflow::optim {
class Optimizer;
}
namespace oneflow::amp {
class GradScaler;
}

namespace oneflow::jit {

// Tensors by name: a training step's state (NOTE [Saved training steps] in trace/serialize.cpp).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A symbolic dimension: a name and an inclusive range of sizes (NOTE [Symbolic shapes]).
struct Dim {
  Dim(std::string name, int64_t min, int64_t max);
  std::string name;
  int64_t min, max;
};

// How a traced function records, optimizes and caches.
struct TraceOptions {
  // Declares dims of input `input` symbolic: {{dim, symbol}, ...}. Dims sharing a symbol must
  // have equal sizes at every call. One recording then serves every shape in the ranges: a
  // new shape is derived from it and compiled, never recorded again; a call outside a range, or
  // whose sizes disagree with a symbol, raises naming the input, dim, symbol and range (under
  // strict(false) set explicitly, it records a graph of its own instead). Inputs with symbolic
  // dims must be contiguous; the function must be inference (no .grad, no random draws).
  TraceOptions& dynamic(int input, std::vector<std::pair<int, Dim>> dims) {
    dynamic_.push_back({input, std::move(dims)});
    return *this;
  }
  // Raise (naming the input that changed and how) instead of retracing on a new signature.
  TraceOptions& strict(bool v) {
    strict_ = v;
    strict_set_ = true;
    return *this;
  }
  // Compiled signatures kept (least recently used dropped first).
  TraceOptions& cache_size(size_t v) {
    cache_size_ = v;
    return *this;
  }
  // Print why a call recorded again (which input changed and how).
  TraceOptions& verbose(bool v) {
    verbose_ = v;
    return *this;
  }
  // Passes, each on by default (OF_TRACE_PASSES=-fuse,-memplan turns them off too); remat
  // recomputes cheap activations before their late reads instead of keeping them in memory.
  TraceOptions& dce(bool v) {
    dce_ = v;
    return *this;
  }
  TraceOptions& cse(bool v) {
    cse_ = v;
    return *this;
  }
  TraceOptions& fold(bool v) {
    fold_ = v;
    return *this;
  }
  TraceOptions& remat(bool v) {
    remat_ = v;
    return *this;
  }
  // schedule: nodes that free memory run before independent nodes that allocate
  TraceOptions& schedule(bool v) {
    schedule_ = v;
    return *this;
  }
  TraceOptions& fuse(bool v) {
    fuse_ = v;
    return *this;
  }
  TraceOptions& inplace(bool v) {
    inplace_ = v;
    return *this;
  }
  TraceOptions& memplan(bool v) {
    memplan_ = v;
    return *this;
  }
  // Inference rewrites past elementwise fusion (docs/TRACING.md; each on by default, each
  // reported in TraceStats::rewrites): `attention` makes matmul -> scale -> mask -> softmax ->
  // matmul one blocked kernel reading the heads in place (NOTE [Fused attention]); `add_norm`
  // makes a residual add and the LayerNorm after it one pass; `epilogue` runs a bias add and
  // an activation after a GEMM in the GEMM's output pass. They sum in another order than the
  // unfused ops (a documented tolerance); turn them off to keep the recorded order exactly.
  TraceOptions& attention(bool v) {
    attention_ = v;
    return *this;
  }
  TraceOptions& add_norm(bool v) {
    add_norm_ = v;
    return *this;
  }
  TraceOptions& epilogue(bool v) {
    epilogue_ = v;
    return *this;
  }
  // exact(): turns off every rewrite that sums floats in another order than the recorded ops
  // (today attention, add_norm and epilogue; any later one marked so in the pass table of
  // src/trace/jit.cpp), so that a replay equals the eager call bitwise on the CPU. quantize_int8
  // stays as set (it changes values by design).
  TraceOptions& exact(bool v = true) {
    exact_ = v;
    return *this;
  }
  // Off by default: `linear` ops whose float32 weight the graph only reads run with int8
  // weights (per output channel, quantized once) and activations quantized per row at each
  // call (NOTE [Dynamic int8 linear]; PyTorch's quantize_dynamic for Linear). Results change
  // by the quantization error (about 1% of a logit's scale); TraceStats::rewrites lists them.
  TraceOptions& quantize_int8(bool v) {
    quantize_int8_ = v;
    return *this;
  }
  // Return outputs backed by the graph's own buffers: no copy and no allocation per call, but
  // the next call overwrites them (for loops that consume each result before the next call).
  TraceOptions& arena_outputs(bool v) {
    arena_outputs_ = v;
    return *this;
  }

  bool strict_ = false;
  bool strict_set_ = false;
  std::vector<std::pair<int, std::vector<std::pair<int, Dim>>>> dynamic_;
  size_t cache_size_ = 8;
  bool verbose_ = false;
  bool dce_ = true, cse_ = true, fold_ = true, remat_ = true, schedule_ = true, fuse_ = true,
       inplace_ = true, memplan_ = true, attention_ = true, add_norm_ = true, epilogue_ = true,
       quantize_int8_ = false;
  bool arena_outputs_ = false;
  bool exact_ = false;
};

struct PassStats {
  std::string name;
  size_t nodes_before = 0, nodes_after = 0;
  double ms = 0;
};

// What the last compiled signature looks like (available right after the recording call,
// before any replay runs).
struct TraceStats {
  std::vector<PassStats> passes;
  // The inference rewrites (attention, add_norm, epilogue): one line per rewrite made, and
  // per candidate refused with why ("attention: refused at node 12: the scores are returned").
  std::vector<std::string> rewrites;
  size_t nodes_recorded = 0;  // ops the recording saw
  size_t nodes_final = 0;     // ops left after the passes
  size_t steps = 0;           // kernel calls per replay (a fused group is one)
  size_t fused_groups = 0, fused_nodes = 0;
  // Fused groups that replay as kernels generated with NVRTC (CUDA plans; NOTE [Generated fused
  // kernels]); why a CUDA plan runs unfused instead ("" when it does not).
  size_t fused_kernels = 0;
  std::string fuse_refused;
  size_t arena_bytes = 0;         // the planned arena holding every intermediate
  size_t intermediate_bytes = 0;  // sum of all intermediate sizes (no reuse)
  size_t eager_peak_bytes = 0;    // peak of live allocations during the eager recording call
  double trace_ms = 0, compile_ms = 0;
  size_t recordings = 0;  // calls that recorded (committed or not)
  // Symbolic shapes: recordings made at probe shapes (not calls), and shapes compiled from the
  // symbolic graph without recording.
  size_t probes = 0, instantiations = 0;
  size_t replays = 0;  // calls that replayed
  size_t cache_entries = 0;
  // How the plan replays: "cpu", "cuda graph" (one CUDA Graph launch per call) or
  // "cuda steps: <why not a graph>" (NOTE [CUDA Graph replay] in src/trace/executor.cpp).
  std::string replay_mode;
  // NOTE [Concurrent replay]: why concurrent calls of this signature take turns ("" when each
  // gets a plan of its own), and how many plans (arenas) concurrent calls have needed so far.
  std::string serialized;
  size_t plans = 0;
  std::string str() const;
};

namespace detail {
struct Engine;
using EagerFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::shared_ptr<Engine> make_engine(const TraceOptions& options);
// One call: replays a compiled signature, or records `fn` (run once, eagerly) and compiles.
// `structure` describes how the flattened inputs group into arguments (part of the key).
std::vector<Tensor> run(Engine& e, const std::vector<Tensor>& inputs,
                        const std::vector<int>& structure, const EagerFn& fn);
std::string graph_text(const Engine& e);
std::string graph_dot(const Engine& e);
TraceStats stats(const Engine& e);
void save(const Engine& e, const std::string& path);
void save(const Engine& e, const std::string& path, const NamedTensors& names);

inline void flatten_arg(const Tensor& t, std::vector<Tensor>& flat, std::vector<int>& st) {
  flat.push_back(t);
  st.push_back(-1);
}
inline void flatten_arg(const std::vector<Tensor>& v, std::vector<Tensor>& flat,
                        std::vector<int>& st) {
  flat.insert(flat.end(), v.begin(), v.end());
  st.push_back(int(v.size()));
}
template <class A> A take_arg(const std::vector<Tensor>& in, size_t pos, int len) {
  if constexpr (std::is_same_v<A, std::vector<Tensor>>) {
    return std::vector<Tensor>(in.begin() + long(pos), in.begin() + long(pos) + len);
  } else {
    return A(in[pos]);
  }
}

template <class R> struct Result;
template <> struct Result<Tensor> {
  static std::vector<Tensor> flatten(Tensor t) { return {std::move(t)}; }
  static Tensor unflatten(std::vector<Tensor>& v) { return std::move(v.at(0)); }
};
template <> struct Result<std::vector<Tensor>> {
  static std::vector<Tensor> flatten(std::vector<Tensor> v) { return v; }
  static std::vector<Tensor> unflatten(std::vector<Tensor>& v) { return std::move(v); }
};
template <class... T> struct Result<std::tuple<T...>> {
  static std::vector<Tensor> flatten(std::tuple<T...> t) {
    return std::apply([](auto&... x) { return std::vector<Tensor>{Tensor(x)...}; }, t);
  }
  static std::tuple<T...> unflatten(std::vector<Tensor>& v) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<T...>{T(v.at(I))...}; }
    (std::index_sequence_for<T...>{});
  }
};
template <class A, class B> struct Result<std::pair<A, B>> {
  static std::vector<Tensor> flatten(std::pair<A, B> p) { return {p.first, p.second}; }
  static std::pair<A, B> unflatten(std::vector<Tensor>& v) { return {v.at(0), v.at(1)}; }
};
}  // namespace detail

// A traced function: call it like the original. The first call with a new signature (input
// shapes, dtypes, devices, requires_grad, grad mode) runs the function eagerly while recording
// it; later calls replay the compiled graph. Returned tensors are detached.
// Calls may come from several threads at once (NOTE [Concurrent replay]): a recording holds
// the others back; replays of a graph that writes no tensor from outside (inference) run at
// once, each on its own arena; a graph that does (a training step) takes them one at a time.
template <class F> class TracedFunction {
 public:
  TracedFunction(F fn, const TraceOptions& options)
      : fn_(std::move(fn)), engine_(detail::make_engine(options)) {}

  template <class... A> auto operator()(A&&... args) {
    using R = std::invoke_result_t<F&, std::decay_t<A>&...>;
    std::vector<Tensor> flat;
    std::vector<int> structure;
    (detail::flatten_arg(args, flat, structure), ...);
    detail::EagerFn eager = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
      return [&]<size_t... I>(std::index_sequence<I...>)->std::vector<Tensor> {
        std::vector<size_t> start(structure.size() + 1, 0);
        for (size_t k = 0; k < structure.size(); ++k)
          start[k + 1] = start[k] + size_t(structure[k] < 0 ? 1 : structure[k]);
        std::tuple<std::decay_t<A>...> a{
            detail::take_arg<std::decay_t<A>>(in, start[I], structure[I])...};
        if constexpr (std::is_void_v<R>) {
          std::apply(fn_, a);
          return {};
        } else {
          return detail::Result<std::decay_t<R>>::flatten(std::apply(fn_, a));
        }
      }
      (std::index_sequence_for<A...>{});
    };
    std::vector<Tensor> out = detail::run(*engine_, flat, structure, eager);
    if constexpr (!std::is_void_v<R>) return detail::Result<std::decay_t<R>>::unflatten(out);
  }

  // The optimized IR of the most recently used signature: value ids, ops, shapes, dtypes,
  // fused groups and arena offsets.
  std::string graph() const { return detail::graph_text(*engine_); }
  // The same graph for Graphviz.
  std::string to_dot() const { return detail::graph_dot(*engine_); }
  TraceStats stats() const { return detail::stats(*engine_); }
  const detail::Engine& engine() const { return *engine_; }

 private:
  F fn_;
  std::shared_ptr<detail::Engine> engine_;
};

// Wraps `fn` (taking tensors or vectors of tensors; returning a tensor, a tuple/pair/vector of
// tensors, or nothing) for trace-and-replay.
template <class F> TracedFunction<std::decay_t<F>> trace(F&& fn, TraceOptions options = {}) {
  return TracedFunction<std::decay_t<F>>(std::forward<F>(fn), options);
}

// One dimension of a graph input: a fixed size, or a symbol with its inclusive range.
struct DimSpec {
  int64_t size = 0;    // the size (fixed dims; the recorded size of a symbolic one)
  std::string symbol;  // empty: fixed
  int64_t min = 0, max = 0;
};
// What a graph input must be: a server can validate requests with it before running.
struct InputSpec {
  ScalarType dtype = kFloat32;
  std::vector<DimSpec> dims;
  DimVector strides;        // the layout it was saved for (row-major unless the recording differed)
  std::string str() const;  // e.g. "float32 (2, 17)", "int64 (batch in [1, 64], seq in [1, 512])"
};

// A graph loaded from a file written by save(): runs without the model's code.
// NOTE [Concurrent replay]: run() may be called from any number of threads at once. An inference
// graph gives each concurrent call a plan of its own (its own arena; the weights are shared,
// never copied); a graph that writes tensors from outside takes the calls one at a time.
class LoadedGraph {
 public:
  LoadedGraph();
  ~LoadedGraph();
  LoadedGraph(LoadedGraph&&) noexcept;
  LoadedGraph& operator=(LoadedGraph&&) noexcept;
  // Runs the graph on `inputs` (their shapes and dtypes must equal the saved ones).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  template <class... T> Tensor operator()(const T&... inputs) const {
    return run(std::vector<Tensor>{Tensor(inputs)...}).at(0);
  }
  size_t num_inputs() const;
  // Each input's dtype and sizes.
  std::vector<InputSpec> input_specs() const;
  // Whether concurrent run() calls execute at once ("" ) or take turns (why).
  std::string serialized() const;
  std::string graph() const;
  // A saved training step (docs/TRACING.md, "Saved training steps"): each run() trains one step
  // on its inputs and updates the state the graph holds in place. state() lists the named
  // state tensors (parameters by module name, "optimizer.*", "lr", "generator", ...): they
  // share memory with the graph, so writing one (state("lr").fill_(1e-4)) changes what the
  // next call reads, and reading them between calls gives a checkpoint. Empty for inference.
  bool trains() const;
  // The most memory one call allocates (bytes: the planned arena of intermediates and the
  // results it hands out), or for a graph with symbolic dims the most over the corners of its
  // declared ranges (a shape inside them that needs more than LoadOptions::max_arena_bytes is
  // refused when called).
  size_t max_arena_bytes() const;
  NamedTensors state() const;
  Tensor state(const std::string& name) const;  // raises naming a missing name

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes the optimized graph of `fn`'s most recently used signature plus the tensors it
// captured (weights, buffers, constants) in the format of docs/TRACING.md.
// A training step (one that reads or sets the .grad of tensors) is saved with its state: the
// parameters, buffers, optimizer state, gradient scaler state, the learning rates it reads
// (as writable state, not constants) and the generator state its random draws continue from.
// `names` names that state (state_names below); tensors it does not name get generic names.
template <class F> void save(const TracedFunction<F>& fn, const std::string& path) {
  detail::save(fn.engine(), path);
}
template <class F>
void save(const TracedFunction<F>& fn, const std::string& path, const NamedTensors& names) {
  detail::save(fn.engine(), path, names);
}
// Saves a loaded graph again (a training step with its state as it is now).
void save(const LoadedGraph& graph, const std::string& path);
// The names a training step's state is saved under: the module's parameters and buffers by
// their dotted names, and the optimizer's state as "optimizer.<parameter name>.<key>" (key:
// "step", "exp_avg", "exp_avg_sq", "momentum_buffer", ...).
NamedTensors state_names(const nn::Module& module, const optim::Optimizer& optimizer);
// The same plus a GradScaler's state: "scaler.scale" (0-d float32) and "scaler.growth_tracker"
// (0-d int64, the clean steps since the scale last changed); nothing more when it is disabled.
NamedTensors state_names(const nn::Module& module, const optim::Optimizer& optimizer,
                         const amp::GradScaler& scaler);
// Limits a loaded file must keep (docs/TRACING.md, "Loading files from others").
struct LoadOptions {
  // The most memory one call may allocate (arena and results), in bytes: a graph that needs
  // more (at any corner of its symbolic ranges) is refused at load, and a call whose shape
  // needs more is refused before anything is allocated. 0: the machine's physical memory.
  size_t max_arena_bytes = 0;
  // A graph with symbolic dims is optimized at each new shape: without the rewrites that sum
  // floats in another order (TraceOptions::exact()), so that it equals the eager function
  // bitwise. (A graph of fixed shapes runs as it was saved.)
  bool exact = false;
};
// Reads a saved graph, checking the format version, every size and the checksum first.
LoadedGraph load(const std::string& path);
LoadedGraph load(const std::string& path, const LoadOptions& options);

// Whether this thread is recording a trace right now.
bool is_recording();

}  // namespace oneflow::jit

// of::jit::trace: the cache of compiled signatures, the pass pipeline, stats and printing.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <algorithm>

#include "autocast.h"
#include "oneflow/amp.h"
#include "oneflow/nn/module.h"
#include "oneflow/optim.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/graph_io.h"
#include "trace/passes.h"
#include "trace/recording.h"
#include "trace/pass_table.h"
#include "trace/symbolic.h"

namespace oneflow::trace {

// ---------------------------------------------------------------- printing

namespace {
std::string attr_str(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "none";
        else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>) return fmt::format("{}", x);
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, DimVector>) return shape_str(x);
        else if constexpr (std::is_same_v<T, ScalarType>) return std::string(dtype_name(x));
        else if constexpr (std::is_same_v<T, std::string>) return "\"" + x + "\"";
        else
          return x.is_floating_point() ? fmt::format("{}", x.to_double())
                                       : std::to_string(x.to_long());
      },
      v);
}

std::string value_str(const Graph& g, int v) {
  if (v < 0) return "_";
  return fmt::format("%{}", v);
}

std::string meta_str(const Graph& g, int v) {
  const Value& val = g.values[size_t(v)];
  std::string s = fmt::format("{} {}", shape_str(val.sizes), dtype_name(val.dtype));
  if (!val.contiguous()) s += " strides" + shape_str(val.strides);
  const Buffer& b = g.buffers[size_t(val.buffer)];
  if (b.kind == BufKind::Intermediate) {
    if (b.escapes) s += " [pinned]";
    else if (!g.materialized.empty() && val.producer >= 0 &&
             g.nodes[size_t(val.producer)].group >= 0 && !g.materialized[size_t(v)])
      s += " [fused]";
    else if (b.arena_offset >= 0) s += fmt::format(" @arena+{}", b.arena_offset);
  } else {
    s += fmt::format(" [{}]", buf_kind_name(b.kind));
  }
  return s;
}
}  // namespace

std::string to_string(const Graph& g) {
  std::ostringstream os;
  size_t fused = 0;
  for (auto& gr : g.groups) fused += gr.size();
  os << fmt::format(
      "graph: {} inputs, {} outputs, {} nodes, {} fused groups ({} nodes), arena {} "
      "bytes (intermediates {} bytes)\n",
      g.inputs.size(), g.outputs.size(), g.nodes.size(), g.groups.size(), fused, arena_bytes(g),
      intermediate_bytes(g));
  for (size_t i = 0; i < g.inputs.size(); ++i)
    os << fmt::format("  %{} = input[{}] : {}\n", g.inputs[i], i, meta_str(g, g.inputs[i]));
  int group = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.group != group) {
      if (group >= 0) os << "  }\n";
      group = n.group;
      if (group >= 0)
        os << fmt::format("  fused group {} ({} nodes) {{\n", group,
                          g.groups[size_t(group)].size());
    }
    std::string ins;
    for (int v : n.inputs) {
      if (!ins.empty()) ins += ", ";
      ins += value_str(g, v);
      if (v >= 0) {
        const Buffer& b = g.buffers[size_t(g.values[size_t(v)].buffer)];
        if (b.kind != BufKind::Intermediate && g.values[size_t(v)].producer < 0)
          ins += fmt::format(":{}{}", buf_kind_name(b.kind), shape_str(g.values[size_t(v)].sizes));
      }
    }
    std::string attrs;
    for (size_t k = 0; k < n.attrs.size(); ++k) {
      attrs += k ? ", " : "{";
      if (k < n.op->attr_names.size()) attrs += n.op->attr_names[k] + "=";
      attrs += attr_str(n.attrs.values[k]);
    }
    if (!attrs.empty()) attrs += "}";
    std::string outs;
    for (int v : n.outputs) outs += (outs.empty() ? "" : ", ") + value_str(g, v);
    os << fmt::format("  {}{} = {}{}({}){} : {}\n", group >= 0 ? "  " : "", outs, n.op->name, attrs,
                      ins, n.writes_existing ? " [in-place]" : "",
                      meta_str(g, n.outputs.empty() ? -1 : n.outputs[0]));
  }
  if (group >= 0) os << "  }\n";
  std::string outs;
  for (int v : g.outputs) outs += (outs.empty() ? "" : ", ") + value_str(g, v);
  os << "  return " << outs << "\n";
  for (const GradEffect& e : g.grad_effects)
    os << fmt::format("  .grad of {} <- {}\n", shape_str(e.leaf->sizes),
                      e.value < 0 ? std::string("none") : value_str(g, e.value));
  if (!g.rng_counters.empty())
    os << fmt::format("  generator draws per replay: {}\n", g.rng_counters.size());
  return os.str();
}

std::string to_dot(const Graph& g) {
  std::ostringstream os;
  os << "digraph trace {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  std::vector<bool> shown(g.values.size(), false);
  auto value_node = [&](int v) {
    if (v < 0 || shown[size_t(v)]) return;
    shown[size_t(v)] = true;
    const Value& val = g.values[size_t(v)];
    const Buffer& b = g.buffers[size_t(val.buffer)];
    os << fmt::format("  v{} [shape=ellipse, label=\"%{}\\n{} {}\\n{}\"];\n", v, v,
                      shape_str(val.sizes), dtype_name(val.dtype), buf_kind_name(b.kind));
  };
  for (size_t k = 0; k < g.groups.size(); ++k) {
    os << fmt::format("  subgraph cluster_{} {{ label=\"fused group {}\"; style=dashed;", k, k);
    for (int i : g.groups[k]) os << fmt::format(" n{};", i);
    os << " }\n";
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    os << fmt::format("  n{} [shape=box, label=\"{}\"];\n", i, n.op->name);
    for (int v : n.inputs) {
      if (v < 0) continue;
      value_node(v);
      os << fmt::format("  v{} -> n{};\n", v, i);
    }
    for (int v : n.outputs) {
      value_node(v);
      os << fmt::format("  n{} -> v{};\n", i, v);
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace oneflow::trace

namespace oneflow::jit {

std::string TraceStats::str() const {
  std::string s = fmt::format(
      "trace: {} ops recorded -> {} after passes, {} kernel calls per replay, {} fused groups "
      "({} ops)\n",
      nodes_recorded, nodes_final, steps, fused_groups, fused_nodes);
  for (const PassStats& p : passes)
    s += fmt::format("  pass {:<8} {:>6} -> {:<6} nodes  {:.2f} ms\n", p.name, p.nodes_before,
                     p.nodes_after, p.ms);
  s += fmt::format(
      "memory: arena {:.2f} MiB, intermediates {:.2f} MiB if each had its own buffer, eager peak "
      "{:.2f} MiB\n",
      double(arena_bytes) / 1048576.0, double(intermediate_bytes) / 1048576.0,
      double(eager_peak_bytes) / 1048576.0);
  s += fmt::format("time: record {:.1f} ms, compile {:.1f} ms; {} recordings, {} replays\n",
                   trace_ms, compile_ms, recordings, replays);
  if (!replay_mode.empty() && replay_mode != "cpu") s += "replay: " + replay_mode + "\n";
  if (fused_kernels) s += fmt::format("fused kernels: {} generated with NVRTC\n", fused_kernels);
  if (!fuse_refused.empty()) s += "fusion refused (the graph runs unfused): " + fuse_refused + "\n";
  for (const std::string& r : rewrites) s += "rewrite: " + r + "\n";
  return s;
}

Dim::Dim(std::string n, int64_t lo, int64_t hi) : name(std::move(n)), min(lo), max(hi) {
  if (name.empty()) fail("[jit.Dim] a symbolic dim needs a name");
  if (lo < 1 || hi < lo)
    fail("[jit.Dim] symbol '{}': the range [{}, {}] must satisfy 1 <= min <= max", name, lo, hi);
}

namespace detail {

namespace {

struct InputSig {
  DimVector sizes, strides;
  ScalarType dtype;
  Device device;
  bool requires_grad;
  int alias_of;        // earlier input with the same storage (-1: none)
  int64_t delta;       // offset difference to it
  std::string global;  // a global input's placement and SBP (empty: local)
  bool operator==(const InputSig& o) const {
    return IntArrayRef(sizes) == IntArrayRef(o.sizes) &&
           IntArrayRef(strides) == IntArrayRef(o.strides) && dtype == o.dtype &&
           device == o.device && requires_grad == o.requires_grad && alias_of == o.alias_of &&
           delta == o.delta && global == o.global;
  }
};

struct Signature {
  std::vector<InputSig> inputs;
  std::vector<int> structure;
  bool grad_mode = true;
  autocast_detail::State autocast;  // NOTE [Autocast]: the casts are part of the graph
  bool operator==(const Signature& o) const {
    return inputs == o.inputs && structure == o.structure && grad_mode == o.grad_mode &&
           autocast == o.autocast;
  }
};

Signature signature_of(const std::vector<Tensor>& in, const std::vector<int>& structure) {
  Signature s;
  s.structure = structure;
  s.grad_mode = is_grad_enabled();
  s.autocast = autocast_detail::t_state;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (!t.defined()) fail("[jit.trace] input {} is undefined", i);
    InputSig x{t.sizes().dims(),
               t.impl()->strides,
               t.dtype(),
               t.device(),
               t.requires_grad(),
               -1,
               0,
               t.is_global() ? t.placement().str() + " " + sbp_str(t.sbp()) : std::string()};
    for (size_t j = 0; j < i; ++j)
      if (in[j].impl()->storage == t.impl()->storage) {
        x.alias_of = int(j);
        x.delta = t.impl()->offset - in[j].impl()->offset;
        break;
      }
    s.inputs.push_back(std::move(x));
  }
  return s;
}

// How `now` differs from `before`, in words (for verbose and strict mode).
std::string explain(const Signature& before, const Signature& now) {
  if (before.structure != now.structure || before.inputs.size() != now.inputs.size())
    return fmt::format("the number of inputs changed ({} -> {})", before.inputs.size(),
                       now.inputs.size());
  if (before.grad_mode != now.grad_mode)
    return fmt::format("grad mode changed ({} -> {})", before.grad_mode ? "enabled" : "disabled",
                       now.grad_mode ? "enabled" : "disabled");
  if (!(before.autocast == now.autocast))
    return fmt::format("autocast changed (cpu {} {} -> {} {}, cuda {} {} -> {} {})",
                       before.autocast.cpu ? "on" : "off", dtype_name(before.autocast.cpu_dtype),
                       now.autocast.cpu ? "on" : "off", dtype_name(now.autocast.cpu_dtype),
                       before.autocast.cuda ? "on" : "off", dtype_name(before.autocast.cuda_dtype),
                       now.autocast.cuda ? "on" : "off", dtype_name(now.autocast.cuda_dtype));
  for (size_t i = 0; i < now.inputs.size(); ++i) {
    const InputSig &a = before.inputs[i], &b = now.inputs[i];
    if (!(IntArrayRef(a.sizes) == IntArrayRef(b.sizes)))
      return fmt::format("input {} shape changed {} -> {}", i, shape_str(a.sizes),
                         shape_str(b.sizes));
    if (a.dtype != b.dtype)
      return fmt::format("input {} dtype changed {} -> {}", i, dtype_name(a.dtype),
                         dtype_name(b.dtype));
    if (a.device != b.device)
      return fmt::format("input {} device changed {} -> {}", i, a.device.str(), b.device.str());
    if (a.requires_grad != b.requires_grad)
      return fmt::format("input {} requires_grad changed {} -> {}", i, a.requires_grad,
                         b.requires_grad);
    if (a.global != b.global)
      return fmt::format("input {} placement/SBP changed {} -> {}", i,
                         a.global.empty() ? "local" : a.global,
                         b.global.empty() ? "local" : b.global);
    if (!(IntArrayRef(a.strides) == IntArrayRef(b.strides)))
      return fmt::format("input {} strides changed {} -> {}", i, shape_str(a.strides),
                         shape_str(b.strides));
    if (a.alias_of != b.alias_of || a.delta != b.delta)
      return fmt::format("input {} aliasing changed (shares memory with input {} -> {})", i,
                         a.alias_of, b.alias_of);
  }
  return "nothing visible changed";
}

bool tracing_disabled() {
  const char* env = std::getenv("OF_TRACE");
  return env && std::string(env) == "0";
}

}  // namespace

struct Entry {
  Signature key;
  std::shared_ptr<trace::Plan> plan;
  std::shared_ptr<trace::PlanPool> pool;  // NOTE [Concurrent replay]: serves plan's graph
  trace::Graph graph;                     // the optimized graph (printing, saving)
  TraceStats stats;
  int uncommitted = 0;
  bool eager_only = false;
};

// NOTE [Symbolic shapes]: the structures recorded for one signature with the symbolic sizes
// masked out (one per value-1 pattern of the symbols).
struct DynamicEntry {
  Signature key;
  std::vector<trace::SymbolicGraph> structures;
};

struct Engine {
  // NOTE [Concurrent replay]: held while the cache is looked up and while a call records;
  // a replay runs outside it, on a plan of the entry's pool.
  mutable std::mutex mu;
  TraceOptions options;
  bool disabled = false;  // OF_TRACE=0 when the traced function was made
  std::list<Entry> lru;   // most recently used first
  size_t recordings = 0, replays = 0, probes = 0, instantiations = 0;
  std::vector<trace::SymDim> symbols;  // TraceOptions::dynamic's symbols, by first mention
  std::list<DynamicEntry> dynamic;
};

std::shared_ptr<Engine> make_engine(const TraceOptions& options) {
  auto e = std::make_shared<Engine>();
  e->options = options;
  e->disabled = tracing_disabled();
  if (options.cache_size_ == 0) fail("[jit.trace] cache_size must be at least 1");
  for (const auto& [input, dims] : options.dynamic_) {
    if (input < 0) fail("[jit.trace] dynamic(): input index {} is negative", input);
    for (const auto& dim_sym : dims) {
      const Dim& sym = dim_sym.second;  // (clang captures no structured bindings)
      auto it = std::find_if(e->symbols.begin(), e->symbols.end(),
                             [&](const trace::SymDim& s) { return s.name == sym.name; });
      if (it == e->symbols.end()) {
        e->symbols.push_back({sym.name, sym.min, sym.max});
      } else if (it->min != sym.min || it->max != sym.max) {
        fail("[jit.trace] dynamic(): symbol '{}' is declared with ranges [{}, {}] and [{}, {}]",
             sym.name, it->min, it->max, sym.min, sym.max);
      }
    }
  }
  if (e->symbols.size() > 6) fail("[jit.trace] dynamic(): at most 6 symbols");
  return e;
}

namespace {

// OF_TRACE_DEBUG_MEMPLAN=1: the buffers live at the step where the most bytes are live.
void debug_memplan(const trace::Graph& g) {
  const auto iv = trace::buffer_intervals(g);
  int steps = 0;
  for (auto& x : iv) steps = std::max(steps, x.last + 1);
  std::vector<size_t> live(size_t(steps), 0);
  for (size_t b = 0; b < g.buffers.size(); ++b)
    if (g.buffers[b].arena_offset >= 0)
      for (int s = iv[b].first; s <= iv[b].last; ++s) live[size_t(s)] += g.buffers[b].nbytes;
  const int peak = int(std::max_element(live.begin(), live.end()) - live.begin());
  std::fprintf(stderr, "[jit.trace] memplan: peak %.2f MiB live at step %d of %d\n",
               double(live[size_t(peak)]) / 1048576.0, peak, steps);
  std::vector<std::pair<size_t, std::string>> at;
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    if (g.buffers[b].arena_offset < 0 || iv[b].first > peak || iv[b].last < peak) continue;
    std::string who = "?";
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].buffer == int(b) && g.values[v].producer >= 0) {
        who = g.nodes[size_t(g.values[v].producer)].op->name + " " + shape_str(g.values[v].sizes) +
              fmt::format(" steps {}..{}", iv[b].first, iv[b].last);
        break;
      }
    at.push_back({g.buffers[b].nbytes, who});
  }
  std::sort(at.rbegin(), at.rend());
  for (size_t k = 0; k < at.size() && k < 25; ++k)
    std::fprintf(stderr, "  %8.3f MiB  %s\n", double(at[k].first) / 1048576.0,
                 at[k].second.c_str());
}

void compile(Engine& e, Entry& entry, trace::Recording& r, const trace::PassSwitches& sw) {
  auto t0 = std::chrono::steady_clock::now();
  trace::Graph g = std::move(r.graph);
  TraceStats& st = entry.stats;
  st.nodes_recorded = g.nodes.size();
  bool on_cuda = false;
  for (const trace::Value& v : g.values) on_cuda = on_cuda || v.device.is_cuda();
  // NOTE [The pass recipe] (trace/pass_table.h), timed; split around `fuse` for the CUDA fallback
  const std::vector<const trace::PassRow*> recipe = trace::pass_recipe(sw);
  size_t fuse_at = recipe.size();
  for (size_t k = 0; k < recipe.size(); ++k)
    if (std::string_view(recipe[k]->name) == "fuse") fuse_at = k;
  auto run = [&](size_t from, size_t to) {  // recipe[from, to), timed
    for (size_t k = from; k < to && k < recipe.size(); ++k) {
      const trace::PassRow& p = *recipe[k];
      auto p0 = std::chrono::steady_clock::now();
      const size_t before = g.nodes.size();
      g = (on_cuda ? p.run_cuda : p.run)(g);
      st.passes.push_back(
          {p.name, before, g.nodes.size(),
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0)
               .count()});
    }
  };
  run(0, fuse_at);
  // NOTE [CUDA Graph replay]: a graph of CUDA tensors fuses into generated kernels (NOTE
  // [Generated fused kernels]), compiled with NVRTC when the plan is lowered. When one cannot be
  // (no NVRTC, another toolkit's NVRTC, a compile error) the graph is compiled again without
  // fusion, its elementwise ops separate kernels, and stats().fuse_refused says why.
  const trace::Graph unfused = g;
  const size_t passes_before_fuse = st.passes.size();
  auto finish = [&] {
    run(fuse_at + 1, recipe.size());
    if (std::getenv("OF_TRACE_DEBUG_MEMPLAN")) debug_memplan(g);
    entry.plan = trace::lower(g, e.options.arena_outputs_);
  };
  run(fuse_at, fuse_at + 1);
  try {
    finish();
  } catch (const Error& err) {
    if (!on_cuda || g.groups.empty()) throw;
    st.fuse_refused = err.what();
    g = unfused;
    st.passes.resize(passes_before_fuse);
    finish();
  }
  st.nodes_final = g.nodes.size();
  st.rewrites = g.rewrites;
  st.steps = trace::plan_steps(*entry.plan);
  st.fused_groups = g.groups.size();
  st.fused_kernels = trace::plan_fused_kernels(*entry.plan);
  st.fused_nodes = 0;
  for (auto& gr : g.groups) st.fused_nodes += gr.size();
  st.arena_bytes = trace::plan_arena_bytes(*entry.plan);
  st.intermediate_bytes = trace::intermediate_bytes(g);
  st.eager_peak_bytes = r.eager_peak_bytes;
  st.trace_ms = r.ms;
  entry.pool = std::make_shared<trace::PlanPool>(g, e.options.arena_outputs_, entry.plan);
  entry.graph = std::move(g);
  st.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void say(const Engine& e, const std::string& what) {
  if (e.options.verbose_) std::fprintf(stderr, "[jit.trace] %s\n", what.c_str());
}

// Per input, per dim: the symbol TraceOptions::dynamic gave it (-1: fixed).
std::vector<std::vector<int>> input_dims_of(const Engine& e, const std::vector<Tensor>& inputs) {
  std::vector<std::vector<int>> dims(inputs.size());
  for (const auto& [input, decl] : e.options.dynamic_) {
    if (size_t(input) >= inputs.size())
      fail("[jit.trace] dynamic(): input {} is declared symbolic but the call has {} inputs", input,
           inputs.size());
    const Tensor& t = inputs[size_t(input)];
    if (!t.defined()) fail("[jit.trace] input {} is undefined", input);
    dims[size_t(input)].assign(size_t(t.dim()), -1);
    for (const auto& dim_sym : decl) {
      const int dim = dim_sym.first;
      const Dim& sym = dim_sym.second;
      const int64_t d = dim < 0 ? dim + t.dim() : dim;
      if (d < 0 || d >= t.dim())
        fail("[jit.trace] dynamic(): input {} has {} dims, dim {} cannot be symbolic", input,
             t.dim(), dim);
      const auto it = std::find_if(e.symbols.begin(), e.symbols.end(),
                                   [&](const trace::SymDim& s) { return s.name == sym.name; });
      dims[size_t(input)][size_t(d)] = int(it - e.symbols.begin());
    }
    if (!t.is_contiguous())
      fail("[jit.trace] input {} has symbolic dims and must be contiguous (pass .contiguous())",
           input);
  }
  return dims;
}

// The signature with the symbolic sizes (and the strides they set) left out.
Signature masked(Signature s, const std::vector<std::vector<int>>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].empty()) continue;
    for (size_t d = 0; d < dims[i].size(); ++d)
      if (dims[i][d] >= 0) s.inputs[i].sizes[d] = -1;
    s.inputs[i].strides.clear();
  }
  return s;
}

// Records every structure of a new symbolic signature (NOTE [Symbolic shapes]): the call's own
// recording `first` (at `vals`) and probes. Returns the entry.
DynamicEntry record_dynamic(Engine& e, const Signature& key, const EagerFn& fn,
                            const std::vector<Tensor>& inputs,
                            const std::vector<std::vector<int>>& dims,
                            const std::vector<int64_t>& vals, const trace::Graph& first) {
  DynamicEntry de;
  de.key = key;
  uint32_t optional_ones = 0;
  for (size_t i = 0; i < e.symbols.size(); ++i)
    if (e.symbols[i].min <= 1 && e.symbols[i].max >= 2) optional_ones |= 1u << i;
  const uint32_t own = trace::one_mask_of(e.symbols, vals);
  // every subset of the symbols that may be 1
  for (uint32_t mask = optional_ones;; mask = (mask - 1) & optional_ones) {
    const trace::ProbePlan plan = trace::probe_plan(e.symbols, mask, vals);
    std::vector<trace::Graph> graphs;
    std::vector<std::vector<int64_t>> points = plan.grid;
    points.insert(points.end(), plan.checks.begin(), plan.checks.end());
    for (const std::vector<int64_t>& p : points) {
      if (mask == own && p == vals) {
        graphs.push_back(first);
        continue;
      }
      trace::Recording r = trace::record(fn, trace::probe_inputs(inputs, dims, p));
      ++e.probes;
      if (!r.not_committable.empty())
        fail("[jit.trace] symbolic dims: the recording at a probe shape cannot become a graph: {}",
             r.not_committable);
      graphs.push_back(std::move(r.graph));
    }
    de.structures.push_back(trace::fit_symbolic(e.symbols, dims, mask, plan, std::move(graphs)));
    if (mask == 0) break;
  }
  return de;
}

}  // namespace

std::vector<Tensor> run(Engine& e, const std::vector<Tensor>& inputs,
                        const std::vector<int>& structure, const EagerFn& fn) {
  if (e.disabled) return fn(inputs);
  if (g_tracer)
    fail(
        "[jit.trace] a traced function was called while another one is being recorded on this "
        "thread (a trace inside a trace); call the inner function's code directly");
  Signature sig = signature_of(inputs, structure);
  std::unique_lock<std::mutex> lock(e.mu);
  // NOTE [Symbolic shapes]: the call's symbol values (a call the symbols do not admit raises,
  // or under an explicit strict(false) is traced on its own)
  std::vector<std::vector<int>> dims;
  std::vector<int64_t> vals;
  bool symbolic = !e.symbols.empty();
  if (symbolic) {
    try {
      dims = input_dims_of(e, inputs);
      vals = trace::bind_symbols(e.symbols, dims, inputs, "jit.trace");
    } catch (const Error& err) {
      if (!e.options.strict_set_ || e.options.strict_) throw;
      say(e, std::string("tracing this call on its own: ") + err.what());
      symbolic = false;
    }
  }
  auto it = e.lru.begin();
  for (; it != e.lru.end(); ++it)
    if (it->key == sig) break;
  std::string why;
  if (it != e.lru.end()) {
    e.lru.splice(e.lru.begin(), e.lru, it);
    Entry& entry = e.lru.front();
    if (entry.eager_only) {
      lock.unlock();
      return fn(inputs);
    }
    if (entry.plan) {
      std::string bad = trace::check_externals(*entry.plan);
      if (bad.empty()) {
        ++e.replays;
        ++entry.stats.replays;
        std::shared_ptr<trace::PlanPool> pool = entry.pool;  // lives on if the entry is dropped
        lock.unlock();
        return pool->replay(inputs);
      }
      if (e.options.strict_) fail("[jit.trace] strict mode: cannot replay: {}", bad);
      why = bad;
      entry.plan.reset();
      entry.pool.reset();
    }
  } else if (symbolic) {
    // a new shape of a recorded symbolic signature: derived and compiled, not recorded
    const Signature key = masked(sig, dims);
    const uint32_t mask = trace::one_mask_of(e.symbols, vals);
    for (const DynamicEntry& de : e.dynamic) {
      if (!(de.key == key)) continue;
      for (const trace::SymbolicGraph& sg : de.structures) {
        if (sg.one_mask != mask) continue;
        trace::Recording r;
        r.graph = trace::instantiate(sg, vals);
        e.lru.push_front(Entry{sig, nullptr, nullptr, {}, {}, 0, false});
        while (e.lru.size() > e.options.cache_size_) e.lru.pop_back();
        Entry& entry = e.lru.front();
        compile(e, entry, r, trace::pass_switches(e.options));
        ++e.instantiations;
        ++e.replays;
        ++entry.stats.replays;
        std::shared_ptr<trace::PlanPool> pool = entry.pool;
        lock.unlock();
        return pool->replay(inputs);
      }
    }
  } else if (!e.lru.empty()) {
    why = explain(e.lru.front().key, sig);
    if (e.options.strict_)
      fail("[jit.trace] strict mode: the call does not match the recorded signature: {}", why);
  }
  if (!why.empty()) say(e, "recording again: " + why);
  // a bad OF_TRACE_PASSES raises before recording
  const trace::PassSwitches sw = trace::pass_switches(e.options);
  trace::Recording r = trace::record(fn, inputs);  // throws: nothing is cached
  ++e.recordings;
  if (it == e.lru.end()) {
    e.lru.push_front(Entry{sig, nullptr, nullptr, {}, {}, 0, false});
    while (e.lru.size() > e.options.cache_size_) e.lru.pop_back();
  }
  Entry& entry = e.lru.front();
  ++entry.stats.recordings;
  if (!r.not_committable.empty()) {
    say(e, r.not_committable);
    if (++entry.uncommitted >= 3) {
      if (e.options.strict_) fail("[jit.trace] strict mode: {}", r.not_committable);
      entry.eager_only = true;
      say(e, "three recordings in a row could not become a graph: this signature runs eagerly");
    }
    return std::move(r.outputs);
  }
  if (symbolic) {
    // the first call of a symbolic signature: the structures are recorded now (probes), and a
    // function that cannot follow the symbols raises (its eager result is not returned)
    trace::Graph first = r.graph;
    try {
      e.dynamic.push_front(record_dynamic(e, masked(sig, dims), fn, inputs, dims, vals, first));
    } catch (const Error& err) {
      e.lru.erase(e.lru.begin());
      if (!e.options.strict_set_ || e.options.strict_) throw;
      say(e, std::string("symbolic dims refused; this shape is traced on its own: ") + err.what());
      symbolic = false;
      e.lru.push_front(Entry{sig, nullptr, nullptr, {}, {}, 0, false});
    }
  }
  Entry& committed = e.lru.front();
  try {
    compile(e, committed, r, sw);
  } catch (const Error& err) {
    if (e.options.strict_) throw;
    committed.eager_only = true;
    say(e, std::string("this signature runs eagerly: ") + err.what());
  }
  return std::move(r.outputs);
}

std::string graph_text(const Engine& e) {
  std::lock_guard<std::mutex> lk(e.mu);
  for (const Entry& x : e.lru)
    if (x.plan) return trace::to_string(x.graph);
  return "graph: nothing recorded yet\n";
}
std::string graph_dot(const Engine& e) {
  std::lock_guard<std::mutex> lk(e.mu);
  for (const Entry& x : e.lru)
    if (x.plan) return trace::to_dot(x.graph);
  return "digraph trace {}\n";
}
TraceStats stats(const Engine& e) {
  std::lock_guard<std::mutex> lk(e.mu);
  TraceStats s;
  for (const Entry& x : e.lru)
    if (x.plan) {
      s = x.stats;
      s.replay_mode = trace::plan_graph_state(*x.plan);
      if (x.pool) {
        s.serialized = trace::serial_reason(x.graph, e.options.arena_outputs_);
        s.plans = x.pool->plans();
      }
      break;
    }
  s.recordings = e.recordings;
  s.replays = e.replays;
  s.probes = e.probes;
  s.instantiations = e.instantiations;
  s.cache_entries = e.lru.size();
  return s;
}
void save(const Engine& e, const std::string& path) {
  std::lock_guard<std::mutex> lk(e.mu);
  if (!e.dynamic.empty()) return trace::save_symbolic(e.dynamic.front().structures, path);
  for (const Entry& x : e.lru)
    if (x.plan)
      return trace::is_training_step(x.graph) ? trace::save_training(x.graph, path, {})
                                              : trace::save_graph(x.graph, path);
  fail("[jit.save] the traced function has not recorded a graph yet (call it once first)");
}

void save(const Engine& e, const std::string& path, const NamedTensors& names) {
  std::lock_guard<std::mutex> lk(e.mu);
  for (const Entry& x : e.lru)
    if (x.plan) {
      if (!trace::is_training_step(x.graph))
        fail(
            "[jit.save] state names are for a training step; this graph reads and sets no .grad "
            "(save it without names)");
      return trace::save_training(x.graph, path, names);
    }
  fail("[jit.save] the traced function has not recorded a training step yet (call it first)");
}

}  // namespace detail

NamedTensors state_names(const nn::Module& module, const optim::Optimizer& optimizer) {
  NamedTensors out;
  std::unordered_map<const TensorImpl*, std::string> param_name;
  for (const auto& kv : module.named_parameters()) {
    out.emplace_back(kv.key(), kv.value());
    param_name.emplace(kv.value().impl(), kv.key());
  }
  for (const auto& kv : module.named_buffers())
    if (kv.value().defined()) out.emplace_back(kv.key(), kv.value());
  const std::vector<Tensor> params = optimizer.parameters();
  auto name_of = [&](size_t i) {
    auto it = param_name.find(params[i].impl());
    return it != param_name.end() ? it->second : fmt::format("param{}", i);
  };
  // "state.<i>.<key>": the buffers themselves; the step count is a copy there, so it is found
  // in update_targets() (each parameter, then its step, then its buffers)
  std::vector<bool> has_step(params.size(), false);
  for (const auto& kv : optimizer.state_dict()) {
    const std::string& key = kv.key();
    if (key.rfind("state.", 0) != 0) continue;
    const size_t dot = key.find('.', 6);
    if (dot == std::string::npos) continue;
    const size_t i = size_t(std::stoull(key.substr(6, dot - 6)));
    const std::string buf = key.substr(dot + 1);
    if (i >= params.size()) continue;
    if (buf == "step") {
      has_step[i] = true;
      continue;
    }
    out.emplace_back(fmt::format("optimizer.{}.{}", name_of(i), buf), kv.value());
  }
  const std::vector<Tensor> targets = optimizer.update_targets();
  for (size_t k = 0; k + 1 < targets.size(); ++k)
    for (size_t i = 0; i < params.size(); ++i)
      if (targets[k].impl() == params[i].impl() && has_step[i]) {
        out.emplace_back(fmt::format("optimizer.{}.step", name_of(i)), targets[k + 1]);
        break;
      }
  return out;
}

NamedTensors state_names(const nn::Module& module, const optim::Optimizer& optimizer,
                         const amp::GradScaler& scaler) {
  NamedTensors out = state_names(module, optimizer);
  if (scaler.is_enabled()) {
    out.emplace_back("scaler.scale", scaler.scale_tensor());
    out.emplace_back("scaler.growth_tracker", scaler.growth_tracker_tensor());
  }
  return out;
}

}  // namespace oneflow::jit

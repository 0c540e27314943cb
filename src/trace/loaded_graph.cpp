// loaded_graph.cpp: of::jit::LoadedGraph, the runtime of a graph file (include/oneflow/jit.h):
// its plan pools — one for a graph of fixed shapes, the last shapes used of a symbolic one —
// and the memory limit of a call (NOTE [Loaded arena limit]). Reading and verifying the file is
// trace/serialize.cpp's (the format); this file only runs what that accepted.
#include <unistd.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <string>
#include <vector>

#include "allocator.h"
#include "trace/executor.h"
#include "trace/file_format.h"
#include "trace/graph_io.h"
#include "trace/pass_table.h"
#include "trace/symbolic.h"

namespace oneflow::jit {

// NOTE [Concurrent replay], NOTE [Symbolic shapes]: a graph of fixed shapes has one pool; a
// symbolic one keeps the pools of the shapes used last (each instantiated, checked as a loaded
// graph is, optimized and lowered on first use).
struct LoadedGraph::Impl {
  std::string path;
  trace::Graph graph;
  std::shared_ptr<trace::PlanPool> pool;
  std::vector<trace::SymbolicGraph> structures;
  std::mutex mu;
  std::list<std::pair<std::vector<int64_t>, std::shared_ptr<trace::PlanPool>>> shapes;
  static constexpr size_t kShapes = 8;
  // a training step (NOTE [Saved training steps]): its state table and named tensors
  bool trains = false;
  std::vector<trace::StateEntry> state_entries;
  NamedTensors state;
  // NOTE [Loaded arena limit]: the memory a call may need (LoadOptions::max_arena_bytes,
  // resolved) and the most any corner of the declared ranges needs
  size_t limit = 0;
  size_t max_need = 0;
  bool exact = false;  // LoadOptions::exact
  std::shared_ptr<trace::PlanPool> pool_for(const std::vector<int64_t>& vals);
};

namespace {

// NOTE [Loaded arena limit]: what one call of a planned graph allocates: its arena (the
// intermediates) and the results it hands out (allocated per call). A graph from a file is
// refused at load when that exceeds the caller's limit (LoadOptions::max_arena_bytes; by
// default the machine's physical memory) — for a graph with symbolic dims at any corner of its
// declared ranges, where the sizes of real models are largest — and a call whose shape needs
// more (a size inside the ranges that a forged expression makes larger) is refused before
// anything is allocated.
size_t call_bytes(const trace::Graph& g) {
  size_t n = trace::arena_bytes(g);
  for (const trace::Buffer& b : g.buffers)
    if (b.kind == trace::BufKind::Intermediate && b.escapes) n += b.nbytes;
  return n;
}

size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : size_t(-1);
}

void check_need(size_t need, size_t limit, const std::string& path, const std::string& where) {
  if (need > limit)
    fail(
        "[jit.load] {}: a call {}needs {} bytes (arena and results), more than the limit of {} "
        "bytes (LoadOptions::max_arena_bytes)",
        path, where, need, limit);
}

// The symbol values at the corners of the ranges `sg` serves (its one_mask symbols at 1).
std::vector<std::vector<int64_t>> corners(const trace::SymbolicGraph& sg) {
  std::vector<std::vector<int64_t>> out{{}};
  for (size_t i = 0; i < sg.symbols.size(); ++i) {
    const trace::SymDim& d = sg.symbols[i];
    std::vector<int64_t> cand;
    if ((sg.one_mask >> i) & 1u) cand = {1};
    else if (d.min == 1 && d.max > 1) cand = {2, d.max};
    else cand = {d.min, d.max};
    if (cand.size() == 2 && cand[0] == cand[1]) cand.pop_back();
    std::vector<std::vector<int64_t>> next;
    for (const auto& c : out)
      for (int64_t x : cand) {
        next.push_back(c);
        next.back().push_back(x);
      }
    out = std::move(next);
  }
  return out;
}

std::string vals_text(const std::vector<trace::SymDim>& syms, const std::vector<int64_t>& vals) {
  std::string s;
  for (size_t i = 0; i < syms.size(); ++i)
    s += fmt::format("{}{} = {}", i ? ", " : "", syms[i].name, vals[i]);
  return s;
}

}  // namespace

std::shared_ptr<trace::PlanPool> LoadedGraph::Impl::pool_for(const std::vector<int64_t>& vals) {
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto it = shapes.begin(); it != shapes.end(); ++it)
      if (it->first == vals) {
        shapes.splice(shapes.begin(), shapes, it);
        return shapes.front().second;
      }
  }
  const uint32_t mask = trace::one_mask_of(structures[0].symbols, vals);
  const trace::SymbolicGraph* sg = nullptr;
  for (const trace::SymbolicGraph& x : structures)
    if (x.one_mask == mask) sg = &x;
  if (!sg) fail("[jit.load] {} has no graph for these sizes (its file lacks that structure)", path);
  trace::Graph g;
  try {
    g = trace::instantiate(*sg, vals);
  } catch (const Error& e) {
    fail("[jit.load] {}: the graph cannot run at these sizes: {}", path, e.what());
  }
  trace::check_loaded_graph(g, path);
  g = trace::optimize(g, exact);
  check_need(call_bytes(g), limit, path, "at " + vals_text(sg->symbols, vals) + " ");
  auto pool = std::make_shared<trace::PlanPool>(g, false, trace::lower(g, false));
  std::lock_guard<std::mutex> lk(mu);
  shapes.emplace_front(vals, pool);
  while (shapes.size() > kShapes) shapes.pop_back();
  return pool;
}

LoadedGraph::LoadedGraph() = default;
LoadedGraph::~LoadedGraph() = default;
LoadedGraph::LoadedGraph(LoadedGraph&&) noexcept = default;
LoadedGraph& LoadedGraph::operator=(LoadedGraph&&) noexcept = default;

std::vector<Tensor> LoadedGraph::run(const std::vector<Tensor>& inputs) const {
  if (!impl_) fail("[jit.load] this LoadedGraph is empty");
  const bool symbolic = !impl_->structures.empty();
  const trace::Graph& g = symbolic ? impl_->structures[0].tmpl : impl_->graph;
  if (inputs.size() != g.inputs.size())
    fail("[jit.load] the graph takes {} inputs, got {}", g.inputs.size(), inputs.size());
  std::vector<int64_t> vals;
  if (symbolic)
    vals = trace::bind_symbols(impl_->structures[0].symbols, impl_->structures[0].input_dims,
                               inputs, "jit.load");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const trace::Value& v = g.values[size_t(g.inputs[i])];
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("[jit.load] input {} is undefined", i);
    const std::vector<int>* dims = symbolic && !impl_->structures[0].input_dims[i].empty()
                                       ? &impl_->structures[0].input_dims[i]
                                       : nullptr;
    bool sizes_ok = t.dim() == int64_t(v.sizes.size());
    for (size_t d = 0; sizes_ok && d < v.sizes.size(); ++d)
      sizes_ok = (dims && (*dims)[d] >= 0) || t.size(int64_t(d)) == v.sizes[d];
    if (!sizes_ok || t.dtype() != v.dtype || !t.is_cpu())
      fail("[jit.load] input {} is {} {} on {}; the graph takes {}", i, shape_str(t.sizes()),
           dtype_name(t.dtype()), t.device().str(), input_specs()[i].str() + " on cpu");
    if (dims) {
      if (!t.is_contiguous())
        fail("[jit.load] input {} has symbolic dims and must be contiguous (pass .contiguous())",
             i);
    } else if (!(t.strides() == IntArrayRef(v.strides))) {
      fail(
          "[jit.load] input {} has strides {}; the graph was saved for strides {} (pass "
          ".contiguous())",
          i, shape_str(t.strides()), shape_str(v.strides));
    }
  }
  NoGradGuard ng;
  if (symbolic) return impl_->pool_for(vals)->replay(inputs);
  return impl_->pool->replay(inputs);
}

size_t LoadedGraph::num_inputs() const {
  if (!impl_) return 0;
  return (impl_->structures.empty() ? impl_->graph : impl_->structures[0].tmpl).inputs.size();
}

std::string InputSpec::str() const {
  std::string s = std::string(dtype_name(dtype)) + " (";
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d) s += ", ";
    s += dims[d].symbol.empty()
             ? std::to_string(dims[d].size)
             : fmt::format("{} in [{}, {}]", dims[d].symbol, dims[d].min, dims[d].max);
  }
  return s + (dims.size() == 1 && dims[0].symbol.empty() ? ",)" : ")");
}

std::vector<InputSpec> LoadedGraph::input_specs() const {
  std::vector<InputSpec> specs;
  if (!impl_) return specs;
  const bool symbolic = !impl_->structures.empty();
  const trace::Graph& g = symbolic ? impl_->structures[0].tmpl : impl_->graph;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const trace::Value& val = g.values[size_t(g.inputs[i])];
    InputSpec s;
    s.dtype = val.dtype;
    for (size_t d = 0; d < val.sizes.size(); ++d) {
      const int sym = symbolic && d < impl_->structures[0].input_dims[i].size()
                          ? impl_->structures[0].input_dims[i][d]
                          : -1;
      if (sym < 0) {
        s.dims.push_back(DimSpec{val.sizes[d], {}, val.sizes[d], val.sizes[d]});
      } else {
        const trace::SymDim& sd = impl_->structures[0].symbols[size_t(sym)];
        s.dims.push_back(DimSpec{val.sizes[d], sd.name, sd.min, sd.max});
      }
    }
    s.strides = symbolic ? DimVector() : val.strides;
    specs.push_back(std::move(s));
  }
  return specs;
}

std::string LoadedGraph::serialized() const {
  if (!impl_) return {};
  return trace::serial_reason(impl_->structures.empty() ? impl_->graph : impl_->structures[0].tmpl,
                              false);
}
std::string LoadedGraph::graph() const { return impl_ ? trace::to_string(impl_->graph) : ""; }

bool LoadedGraph::trains() const { return impl_ && impl_->trains; }

size_t LoadedGraph::max_arena_bytes() const { return impl_ ? impl_->max_need : 0; }

NamedTensors LoadedGraph::state() const { return impl_ ? impl_->state : NamedTensors(); }

Tensor LoadedGraph::state(const std::string& name) const {
  if (impl_)
    for (const auto& [n, t] : impl_->state)
      if (n == name) return t;
  std::string have;
  if (impl_)
    for (const auto& kv : impl_->state) have += (have.empty() ? "" : ", ") + kv.first;
  fail("[jit.load] the graph has no state tensor '{}' ({})", name,
       have.empty() ? "it holds no state: not a saved training step" : "it has " + have);
}

void save(const LoadedGraph& graph, const std::string& path) {
  if (!graph.impl_) fail("[jit.save] this LoadedGraph is empty");
  const LoadedGraph::Impl& im = *graph.impl_;
  if (!im.structures.empty()) return trace::save_symbolic(im.structures, path);
  if (!im.trains) return trace::save_graph(im.graph, path);
  // NOTE [Concurrent replay]: a training step's calls take turns on one plan; saving between
  // calls sees the state one call left
  GeneratorState rng{0, 0};
  if (im.graph.rng_state) {
    rng.seed = static_cast<const uint64_t*>(im.graph.rng_state->data)[0];
    rng.offset = static_cast<const uint64_t*>(im.graph.rng_state->data)[1];
  }
  trace::write_training_file(path, im.graph, im.state_entries, bool(im.graph.rng_state), rng);
}

LoadedGraph load(const std::string& path) { return load(path, LoadOptions{}); }

LoadedGraph load(const std::string& path, const LoadOptions& options) {
  ensure_op_table();
  LoadedGraph lg;
  lg.impl_ = std::make_unique<LoadedGraph::Impl>();
  lg.impl_->path = path;
  lg.impl_->limit = options.max_arena_bytes ? options.max_arena_bytes : physical_memory();
  lg.impl_->exact = options.exact;
  trace::GraphFile file = trace::read_file(path);
  if (file.kind == 1) {
    lg.impl_->structures = std::move(file.structures);
    // each structure is checked as a loaded graph at its recorded sizes now (and every
    // instantiation again before it runs), and planned at the corners of its ranges (NOTE
    // [Loaded arena limit]); a corner where the graph cannot run is refused when called
    for (const trace::SymbolicGraph& sg : lg.impl_->structures) {
      trace::check_loaded_graph(trace::instantiate(sg, sg.recorded), path);
      for (const std::vector<int64_t>& at : corners(sg)) {
        trace::Graph g;
        try {
          g = trace::instantiate(sg, at);
          trace::check_loaded_graph(g, path);
        } catch (const Error&) { continue; }
        const size_t need = call_bytes(trace::optimize(g, lg.impl_->exact));
        check_need(need, lg.impl_->limit, path, "at " + vals_text(sg.symbols, at) + " ");
        lg.impl_->max_need = std::max(lg.impl_->max_need, need);
      }
    }
    return lg;
  }
  if (file.kind == 2) {
    // NOTE [Saved training steps]: the state lives in memory of its own (the step writes it
    // at every call; the file's pages stay clean), shared with the tensors state() hands out
    LoadedGraph::Impl& im = *lg.impl_;
    im.trains = true;
    for (trace::Buffer& b : file.graph.buffers) {
      if (b.kind != trace::BufKind::External) continue;
      Storage st = allocate_storage(b.nbytes, Device(kCPU));
      if (b.nbytes) std::memcpy(st->data, b.impls[0]->storage->data, b.nbytes);
      auto impl = new_tensor_impl();
      impl->share_data_from(*b.impls[0]);
      impl->storage = st;
      b.impls = {impl};
      b.recorded_storage = st.get();
    }
    auto tensor_over = [](const Storage& st, ScalarType dtype, const DimVector& sizes,
                          const DimVector& strides, int64_t offset) {
      auto impl = new_tensor_impl();
      impl->storage = st;
      impl->sizes = sizes;
      impl->strides = strides;
      impl->offset = offset;
      impl->dtype = dtype;
      impl->device = Device(kCPU);
      impl->refresh_contiguous();
      return Tensor(impl);
    };
    for (const trace::StateEntry& e : file.state)
      im.state.emplace_back(
          e.name, tensor_over(file.graph.buffers[size_t(e.buffer)].impls[0]->storage, e.dtype,
                              e.sizes, e.strides, e.offset));
    if (file.has_rng) {
      Storage st = allocate_storage(16, Device(kCPU));
      static_cast<uint64_t*>(st->data)[0] = file.rng.seed;
      static_cast<uint64_t*>(st->data)[1] = file.rng.offset;
      file.graph.rng_state = st;
      im.state.emplace_back("generator", tensor_over(st, kInt64, {2}, {1}, 0));
    }
    im.state_entries = std::move(file.state);
  }
  // the arena is planned again (NOTE [Loaded buffer sizes])
  lg.impl_->graph = trace::memplan(std::move(file.graph));
  lg.impl_->max_need = call_bytes(lg.impl_->graph);
  check_need(lg.impl_->max_need, lg.impl_->limit, path, "");
  lg.impl_->pool = std::make_shared<trace::PlanPool>(lg.impl_->graph, false,
                                                     trace::lower(lg.impl_->graph, false));
  return lg;
}

}  // namespace oneflow::jit

// serialize.cpp: writing graph files — an inference graph, a symbolic graph's structures, a
// training step with its state (docs/TRACING.md, "File format"; reading and checking them:
// trace/graph_reader.cpp).
#include <unistd.h>
#include <zlib.h>

#include <algorithm>

#include <cstring>

#include <fstream>
#include <list>
#include <string_view>

#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "allocator.h"
#include "generator.h"
#include "io/atomic_file.h"
#include "io/mapped_file.h"
#include "op_signatures.h"
#include "trace/file_format.h"
#include "trace/graph_checks.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/graph_io.h"
#include "trace/passes.h"
#include "trace/pass_table.h"
#include "trace/symbolic.h"
#include "trace/graph_file_codec.h"

namespace oneflow::trace {
using namespace codec;

namespace {

void write_attr(Writer& w, const AttrValue& v) {
  w.pod(uint8_t(v.index()));
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return;
        else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) w.pod(x);
        else if constexpr (std::is_same_v<T, bool>) w.pod(uint8_t(x));
        else if constexpr (std::is_same_v<T, DimVector>) w.dims(x);
        else if constexpr (std::is_same_v<T, ScalarType>) w.pod(uint8_t(x));
        else if constexpr (std::is_same_v<T, std::string>) w.str(x);
        else {
          w.pod(uint8_t(x.kind()));
          if (x.is_floating_point()) w.pod(x.to_double());
          else w.pod(x.to_long());
        }
      },
      v);
}

}  // namespace

namespace {

// Refuses graphs a file cannot hold (`training`: a training step's .grad reads and writes
// become state, NOTE [Saved training steps]).
void check_savable(const Graph& g, bool training = false) {
  for (const Node& n : g.nodes)
    if (n.op->has(kCollective))
      fail(
          "[jit.save] the graph communicates ({}: a traced step of global tensors); a saved "
          "graph runs in one process: save a function of local tensors",
          n.op->name);
  for (const GlobalWrap& w : g.output_wraps)
    if (w.meta)
      fail(
          "[jit.save] the graph returns a global tensor; a saved graph runs in one process: "
          "save a function of local tensors");
  if (training) return;
  for (const Buffer& b : g.buffers)
    if (b.kind == BufKind::GradOf)
      fail(
          "[jit.save] the graph reads the .grad of parameters (a training step); save a "
          "function that runs inference");
  if (!g.grad_effects.empty())
    fail(
        "[jit.save] the graph sets the .grad of {} parameters (a training step); save a "
        "function that runs inference",
        g.grad_effects.size());
}

// NOTE [Graph file blobs]: since format version 2 the bytes of captured tensors (weights,
// constants) are stored once in a table ahead of the graphs, each starting at a multiple of 64
// bytes of the file, and buffers name their blob: the structures of a symbolic graph share
// their weights, and the bytes could be mapped in place.
struct BlobTable {
  std::vector<const StorageImpl*> order;
  std::unordered_map<const StorageImpl*, int> ids;
  int id(const StorageImpl& s) {
    auto [it, fresh] = ids.try_emplace(&s, int(order.size()));
    if (fresh) order.push_back(&s);
    return it->second;
  }
};

void write_graph(Writer& w, const Graph& g, BlobTable& blobs) {
  w.pod(uint32_t(g.buffers.size()));
  for (const Buffer& b : g.buffers) {
    // host scalars are saved with their current value, as constants
    const BufKind kind = b.kind == BufKind::HostScalar ? BufKind::Constant : b.kind;
    w.pod(uint8_t(kind));
    w.pod(uint64_t(b.nbytes));
    w.pod(int32_t(b.input));
    w.pod(int64_t(b.base_offset));
    w.pod(int32_t(b.root_value));
    w.pod(uint8_t(b.escapes));
    w.pod(int64_t(b.arena_offset));
    if (kind == BufKind::External || kind == BufKind::Constant) {
      const StorageImpl& s = *b.impls[0]->storage;
      if (!s.device.is_cpu()) fail("[jit.save] only CPU graphs can be saved");
      w.pod(int32_t(blobs.id(s)));
    }
  }
  w.pod(uint32_t(g.values.size()));
  for (const Value& v : g.values) {
    w.pod(int32_t(v.buffer));
    w.dims(v.sizes);
    w.dims(v.strides);
    w.pod(int64_t(v.offset));
    w.pod(uint8_t(v.dtype));
    w.pod(int32_t(v.producer));
    w.pod(uint8_t(v.is_view));
  }
  w.pod(uint32_t(g.nodes.size()));
  for (const Node& n : g.nodes) {
    w.str(n.op->name);
    w.pod(uint32_t(n.attrs.size()));
    for (const AttrValue& a : n.attrs.values) write_attr(w, a);
    w.pod(uint32_t(n.inputs.size()));
    for (int v : n.inputs) w.pod(int32_t(v));
    w.pod(uint32_t(n.outputs.size()));
    for (int v : n.outputs) w.pod(int32_t(v));
    w.pod(uint8_t(n.writes_existing));
    w.pod(int32_t(n.rng));
    w.pod(int32_t(n.group));
  }
  auto ints = [&](const std::vector<int>& v) {
    w.pod(uint32_t(v.size()));
    for (int x : v) w.pod(int32_t(x));
  };
  ints(g.inputs);
  ints(g.outputs);
  w.pod(uint32_t(g.groups.size()));
  for (const auto& gr : g.groups) ints(gr);
  w.pod(uint32_t(g.materialized.size()));
  for (bool m : g.materialized) w.pod(uint8_t(m));
  w.pod(uint32_t(g.rng_counters.size()));
  for (uint64_t c : g.rng_counters) w.pod(c);
  w.pod(uint32_t(g.rng_reset.size()));
  for (const auto& x : g.rng_reset) {
    w.pod(x.seed);
    w.pod(x.offset);
    w.pod(uint8_t(x.set));
  }
}

// The container: header, then blobs, then `body` (written into `rest`).
void write_file(const std::string& path, uint8_t kind, const BlobTable& blobs,
                const std::string& rest) {
  Writer w;
  w.pod(kind);
  w.pod(uint32_t(blobs.order.size()));
  for (const StorageImpl* st : blobs.order) {
    w.pod(uint64_t(st->nbytes));
    while ((kHeaderBytes + w.buf.size()) % 64 != 0) w.pod(uint8_t(0));
    w.buf.append(static_cast<const char*>(st->data), st->nbytes);
  }
  w.buf += rest;
  const uint32_t crc =
      uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(w.buf.data()), uInt(w.buf.size())));
  // NOTE [Atomic file replacement]: a save killed mid-write leaves no temporary behind
  write_file_atomically(
      path,
      [&](int fd) {
        const uint64_t n = w.buf.size();
        write_fully(fd, kMagic, sizeof kMagic, path, "jit.save");
        write_fully(fd, &kVersion, sizeof kVersion, path, "jit.save");
        write_fully(fd, &n, sizeof n, path, "jit.save");
        write_fully(fd, &crc, sizeof crc, path, "jit.save");
        write_fully(fd, w.buf.data(), w.buf.size(), path, "jit.save");
      },
      "jit.save");
}

void write_symbolic_parts(Writer& w, const std::vector<SymbolicGraph>& structures,
                          BlobTable& blobs) {
  const SymbolicGraph& s0 = structures.at(0);
  w.pod(uint32_t(s0.symbols.size()));
  for (const SymDim& d : s0.symbols) {
    w.str(d.name);
    w.pod(int64_t(d.min));
    w.pod(int64_t(d.max));
  }
  w.pod(uint32_t(s0.input_dims.size()));
  for (const auto& dims : s0.input_dims) {
    w.pod(uint32_t(dims.size()));
    for (int d : dims) w.pod(int32_t(d));
  }
  w.pod(uint32_t(structures.size()));
  for (const SymbolicGraph& sg : structures) {
    w.pod(uint32_t(sg.one_mask));
    w.pod(uint32_t(sg.recorded.size()));
    for (int64_t v : sg.recorded) w.pod(v);
    w.pod(uint32_t(sg.exprs.size()));
    for (const AttrExpr& e : sg.exprs) {
      w.pod(int32_t(e.node));
      w.pod(int32_t(e.attr));
      w.pod(int32_t(e.elem));
      w.pod(uint32_t(e.num.size()));
      for (int64_t x : e.num) w.pod(x);
      w.pod(int64_t(e.den));
    }
    write_graph(w, sg.tmpl, blobs);
  }
}

}  // namespace

void save_graph(const Graph& g, const std::string& path) {
  check_savable(g);
  BlobTable blobs;
  Writer w;
  write_graph(w, g, blobs);
  write_file(path, 0, blobs, w.buf);
}

void save_symbolic(const std::vector<SymbolicGraph>& structures, const std::string& path) {
  for (const SymbolicGraph& sg : structures) check_savable(sg.tmpl);
  BlobTable blobs;
  Writer w;
  write_symbolic_parts(w, structures, blobs);
  write_file(path, 1, blobs, w.buf);
}

// NOTE [Saved training steps]: a traced training step (forward, backward and the optimizer's
// update: a graph that reads or sets the .grad of tensors) is saved as a file of kind 2: the
// graph as kind 0 holds it, then its state table, then the generator state its draws start
// from. Everything the step reads or updates from one call to the next becomes a captured
// (External) tensor of the file: parameters, buffers (BatchNorm's running statistics),
// optimizer state (Adam's moments and its step counts, 0-d float64 tensors the graph
// increments; bias corrections are computed from them inside the graph), GradScaler state,
// the .grad a step reads (gradients zeroed in place rather than set to None), and the host
// scalars it reads (the learning rate of each parameter group), each saved with its current
// value as a writable 0-d float64 tensor instead of a constant. The state table names them:
// by the names the caller gives (jit::state_names: module names, "optimizer.<param>.<key>",
// "scaler.scale", "scaler.growth_tracker"),
// else "param.<k>" (a tensor whose .grad the step uses), "state.<k>" (written by the step),
// "const.<k>" (read only), "grad.<param>", and "lr" ("lr.<k>" for several parameter groups).
// The .grad effects themselves are dropped: a loaded step has no leaves to bind them to, and
// the update inside the graph reads the gradients it computed. A step that reads on one call a
// .grad it set on the previous one (accumulation across calls) is refused. A loaded step owns
// its generator ("generator": {seed, offset}) and advances it as the default generator would
// have advanced, so that its dropout masks continue the saved run's.
bool is_training_step(const Graph& g) {
  if (!g.grad_effects.empty()) return true;
  for (const Buffer& b : g.buffers)
    if (b.kind == BufKind::GradOf) return true;
  return false;
}

void write_training_file(const std::string& path, const Graph& g,
                         const std::vector<StateEntry>& state, bool has_rng, GeneratorState rng) {
  BlobTable blobs;
  Writer w;
  write_graph(w, g, blobs);
  w.pod(uint32_t(state.size()));
  for (const StateEntry& e : state) {
    w.str(e.name);
    w.pod(int32_t(e.buffer));
    w.pod(uint8_t(e.dtype));
    w.dims(e.sizes);
    w.dims(e.strides);
    w.pod(int64_t(e.offset));
  }
  w.pod(uint8_t(has_rng));
  if (has_rng) {
    w.pod(rng.seed);
    w.pod(rng.offset);
  }
  write_file(path, 2, blobs, w.buf);
}

namespace {

StateEntry entry_of(std::string name, int buffer, const TensorImpl& t) {
  return {std::move(name), buffer, t.dtype, t.sizes, t.strides, t.offset};
}

}  // namespace

void save_training(const Graph& g0, const std::string& path,
                   const std::vector<std::pair<std::string, Tensor>>& names) {
  check_savable(g0, true);
  Graph g = g0;
  std::unordered_map<const StorageImpl*, std::pair<std::string, Tensor>> named;
  for (const auto& [name, t] : names) {
    if (name.empty()) fail("[jit.save] a state name is empty");
    if (name == "generator")
      fail("[jit.save] the state name 'generator' is the saved step's generator's");
    if (!t.defined()) fail("[jit.save] state tensor '{}' is undefined", name);
    if (t.is_global()) fail("[jit.save] state tensor '{}' is a global tensor", name);
    named.try_emplace(t.impl()->storage.get(), name, t);  // tied tensors: the first name
  }
  std::unordered_map<const StorageImpl*, int> leaf_index;  // parameters: storage -> k
  auto note_leaf = [&](const TensorImpl& leaf) {
    leaf_index.try_emplace(leaf.storage.get(), int(leaf_index.size()));
  };
  for (const GradEffect& e : g.grad_effects) note_leaf(*e.leaf);
  for (const Buffer& b : g.buffers)
    if (b.kind == BufKind::GradOf) note_leaf(*b.impls[0]);
  for (const GradEffect& e : g.grad_effects) {
    if (e.value < 0) continue;
    for (const Buffer& b : g.buffers)
      if (b.kind == BufKind::GradOf && b.impls[0] == e.leaf)
        fail(
            "[jit.save] the step reads the .grad of a tensor of shape {} that it set on the "
            "previous call (gradients accumulated across calls); zero the gradients in place "
            "(zero_grad(false)) or set them to None inside the step to save it",
            shape_str(e.leaf->sizes));
  }
  std::vector<bool> written(g.buffers.size(), false);
  for (const Node& n : g.nodes)
    if (n.writes_existing)
      for (int v : n.outputs) written[size_t(g.values[size_t(v)].buffer)] = true;
  auto param_name = [&](const StorageImpl* s) {
    auto it = named.find(s);
    if (it != named.end()) return it->second.first;
    auto li = leaf_index.find(s);
    return li != leaf_index.end() ? fmt::format("param.{}", li->second) : std::string("?");
  };
  size_t host_scalars = 0;
  for (const Buffer& b : g.buffers) host_scalars += b.kind == BufKind::HostScalar;
  std::vector<StateEntry> state;
  int lr_k = 0, state_k = 0, const_k = 0;
  for (size_t bi = 0; bi < g.buffers.size(); ++bi) {
    Buffer& b = g.buffers[bi];
    const int id = int(bi);
    if (b.kind == BufKind::HostScalar) {
      // the value the next call would read (a schedule may have changed it since the last)
      double v = *static_cast<const double*>(b.impls[0]->storage->data);
      if (b.getter && !b.owner.expired()) v = b.getter();
      Tensor t = make_empty({}, kFloat64, Device(kCPU));
      *static_cast<double*>(t.data_ptr()) = v;
      b.kind = BufKind::External;
      b.impls = {t.impl_ptr()};
      b.recorded_storage = t.impl()->storage.get();
      b.getter = nullptr;
      b.owner.reset();
      state.push_back(
          entry_of(host_scalars == 1 ? "lr" : fmt::format("lr.{}", lr_k++), id, *t.impl()));
    } else if (b.kind == BufKind::GradOf) {
      const std::shared_ptr<TensorImpl> leaf = b.impls[0];
      const Tensor& gr = grad_slot(leaf.get());
      if (!gr.defined() || gr.is_global() || gr.impl()->storage->nbytes != b.nbytes)
        fail(
            "[jit.save] the .grad of a tensor of shape {} that the step reads changed since "
            "the last call (call the step once more, then save)",
            shape_str(leaf->sizes));
      b.kind = BufKind::External;
      b.impls = {gr.impl_ptr()};
      b.recorded_storage = gr.impl()->storage.get();
      state.push_back(entry_of("grad." + param_name(leaf->storage.get()), id, *gr.impl()));
    } else if (b.kind == BufKind::External) {
      const StorageImpl* s = b.impls[0]->storage.get();
      auto it = named.find(s);
      if (it != named.end()) {
        state.push_back(entry_of(it->second.first, id, *it->second.second.impl()));
        continue;
      }
      const TensorImpl* geom = b.impls[0].get();  // the whole storage where a tensor has it
      for (const auto& impl : b.impls) {
        int64_t n = 1;
        for (int64_t x : impl->sizes) n *= x;
        if (impl->is_contiguous && impl->offset == 0 &&
            size_t(n) * itemsize(impl->dtype) == b.nbytes) {
          geom = impl.get();
          break;
        }
      }
      std::string name = leaf_index.count(s) ? param_name(s)
                         : written[bi]       ? fmt::format("state.{}", state_k++)
                                             : fmt::format("const.{}", const_k++);
      state.push_back(entry_of(std::move(name), id, *geom));
    }
  }
  // (a host scalar's buffer names no root value: the first value on it)
  for (size_t v = 0; v < g.values.size(); ++v) {
    Buffer& b = g.buffers[size_t(g.values[v].buffer)];
    if (b.kind == BufKind::External && b.root_value < 0) b.root_value = int(v);
  }
  std::set<std::string> seen;
  for (const StateEntry& e : state)
    if (!seen.insert(e.name).second) fail("[jit.save] two state tensors are named '{}'", e.name);
  g.grad_effects.clear();
  write_training_file(path, g, state, !g.rng_counters.empty(), random_state());
}

void write_file_for_testing(const GraphFile& file, const std::string& path) {
  BlobTable blobs;
  Writer w;
  if (file.kind == 1) {
    write_symbolic_parts(w, file.structures, blobs);
    write_file(path, 1, blobs, w.buf);
  } else if (file.kind == 2) {
    write_training_file(path, file.graph, file.state, file.has_rng, file.rng);
  } else {
    write_graph(w, file.graph, blobs);
    write_file(path, 0, blobs, w.buf);
  }
}

}  // namespace oneflow::trace

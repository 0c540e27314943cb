// Saving and loading optimized graphs with their captured tensors (docs/TRACING.md, "File
// format"). A file is checked completely (magic, version, sizes, checksum, every index) before
// a graph is built from it.
#include <algorithm>
#include <zlib.h>

#include <cstring>
#include <fstream>

#include "allocator.h"
#include "trace/graph.h"

namespace oneflow::trace {

namespace {

constexpr char kMagic[8] = {'O', 'F', 'T', 'R', 'A', 'C', 'E', '\0'};
constexpr uint32_t kVersion = 1;

class Writer {
 public:
  std::string buf;
  template <class T> void pod(const T& v) {
    buf.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    pod(uint64_t(s.size()));
    buf += s;
  }
  void dims(const DimVector& d) {
    pod(uint32_t(d.size()));
    for (int64_t x : d) pod(x);
  }
  void bytes(const void* p, size_t n) {
    pod(uint64_t(n));
    buf.append(static_cast<const char*>(p), n);
  }
};

class Reader {
 public:
  Reader(const char* p, size_t n, std::string path) : p_(p), n_(n), path_(std::move(path)) {}
  template <class T> T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = pod<uint64_t>();
    need(n);
    std::string s(p_ + pos_, size_t(n));
    pos_ += size_t(n);
    return s;
  }
  DimVector dims() {
    const uint32_t n = pod<uint32_t>();
    if (n > 64) bad("a tensor with more than 64 dimensions");
    DimVector d;
    for (uint32_t i = 0; i < n; ++i) d.push_back(pod<int64_t>());
    return d;
  }
  const char* bytes(uint64_t& n) {
    n = pod<uint64_t>();
    need(n);
    const char* r = p_ + pos_;
    pos_ += size_t(n);
    return r;
  }
  bool done() const { return pos_ == n_; }
  [[noreturn]] void bad(const std::string& what) const {
    fail("[jit.load] {} is not a valid traced graph: {}", path_, what);
  }
  void need(uint64_t k) const {
    if (k > n_ - pos_) bad("it ends early (truncated)");
  }

 private:
  const char* p_;
  size_t n_, pos_ = 0;
  std::string path_;
};

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

AttrValue read_attr(Reader& r) {
  const uint8_t tag = r.pod<uint8_t>();
  switch (tag) {
    case 0: return std::monostate{};
    case 1: return r.pod<int64_t>();
    case 2: return r.pod<double>();
    case 3: return bool(r.pod<uint8_t>());
    case 4: return r.dims();
    case 5: {
      const uint8_t d = r.pod<uint8_t>();
      if (d > uint8_t(kBool)) r.bad("an unknown dtype");
      return ScalarType(d);
    }
    case 6: return r.str();
    case 7: {
      const uint8_t k = r.pod<uint8_t>();
      if (k == uint8_t(Scalar::Kind::Float)) return Scalar(r.pod<double>());
      const int64_t v = r.pod<int64_t>();
      if (k == uint8_t(Scalar::Kind::Bool)) return Scalar(v != 0);
      if (k == uint8_t(Scalar::Kind::Int)) return Scalar(v);
      r.bad("an unknown scalar kind");
    }
    default: r.bad("an unknown attribute type");
  }
}

}  // namespace

void save_graph(const Graph& g, const std::string& path) {
  for (const Node& n : g.nodes)
    if (n.op->has(kCollective))
      fail("[jit.save] the graph communicates ({}: a traced step of global tensors); a saved "
           "graph runs in one process: save a function of local tensors", n.op->name);
  for (const GlobalWrap& w : g.output_wraps)
    if (w.meta)
      fail("[jit.save] the graph returns a global tensor; a saved graph runs in one process: "
           "save a function of local tensors");
  for (const Buffer& b : g.buffers)
    if (b.kind == BufKind::GradOf)
      fail("[jit.save] the graph reads the .grad of parameters (a training step); save a "
           "function that runs inference");
  if (!g.grad_effects.empty())
    fail("[jit.save] the graph sets the .grad of {} parameters (a training step); save a "
         "function that runs inference", g.grad_effects.size());
  Writer w;
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
      w.bytes(s.data, s.nbytes);
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

  const uint32_t crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(w.buf.data()),
                                      uInt(w.buf.size())));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("[jit.save] cannot open {} for writing", tmp);
    f.write(kMagic, sizeof kMagic);
    f.write(reinterpret_cast<const char*>(&kVersion), sizeof kVersion);
    const uint64_t n = w.buf.size();
    f.write(reinterpret_cast<const char*>(&n), sizeof n);
    f.write(reinterpret_cast<const char*>(&crc), sizeof crc);
    f.write(w.buf.data(), std::streamsize(w.buf.size()));
    if (!f) fail("[jit.save] writing {} failed", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    fail("[jit.save] cannot move {} to {}", tmp, path);
}

Graph load_graph(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("[jit.load] cannot open {}", path);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Reader hdr(data.data(), data.size(), path);
  char magic[8];
  for (char& c : magic) c = hdr.pod<char>();
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) hdr.bad("wrong magic bytes");
  const uint32_t version = hdr.pod<uint32_t>();
  if (version != kVersion)
    fail("[jit.load] {} has format version {}; this library reads version {}", path, version,
         kVersion);
  const uint64_t n = hdr.pod<uint64_t>();
  const uint32_t crc = hdr.pod<uint32_t>();
  const size_t head = sizeof kMagic + sizeof version + sizeof n + sizeof crc;
  if (data.size() - head != n)
    fail("[jit.load] {} is not a valid traced graph: the payload is {} bytes, the header says {} "
         "(truncated or padded)", path, data.size() - head, n);
  const char* payload = data.data() + head;
  if (uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(payload), uInt(n))) != crc)
    hdr.bad("the checksum does not match (the file is corrupted)");
  Reader r(payload, size_t(n), path);
  Graph g;
  const uint32_t nb = r.pod<uint32_t>();
  // each buffer takes at least 34 bytes: a count beyond that is a corrupt file, not a request
  // for a table of 2^32 entries
  if (nb > n / 34) r.bad("more buffers than the file has bytes for");
  std::vector<std::pair<const char*, uint64_t>> blobs(nb, {nullptr, 0});
  for (uint32_t i = 0; i < nb; ++i) {
    Buffer b;
    const uint8_t kind = r.pod<uint8_t>();
    if (kind > uint8_t(BufKind::Constant) || kind == uint8_t(BufKind::GradOf) ||
        kind == uint8_t(BufKind::HostScalar))
      r.bad("an unknown buffer kind");
    b.kind = BufKind(kind);
    b.nbytes = size_t(r.pod<uint64_t>());
    b.input = r.pod<int32_t>();
    b.base_offset = r.pod<int64_t>();
    b.root_value = r.pod<int32_t>();
    b.escapes = r.pod<uint8_t>() != 0;
    b.arena_offset = r.pod<int64_t>();
    b.device = Device(kCPU);
    if (b.kind == BufKind::External || b.kind == BufKind::Constant) {
      uint64_t len;
      const char* p = r.bytes(len);
      blobs[i] = {p, len};
    }
    g.buffers.push_back(std::move(b));
  }
  const uint32_t nv = r.pod<uint32_t>();
  std::vector<size_t> reach(nb, 0);  // per buffer: the bytes its tensors reach
  for (uint32_t i = 0; i < nv; ++i) {
    Value v;
    v.buffer = r.pod<int32_t>();
    if (v.buffer < 0 || uint32_t(v.buffer) >= nb) r.bad("a value names a missing buffer");
    v.sizes = r.dims();
    v.strides = r.dims();
    if (v.sizes.size() != v.strides.size()) r.bad("sizes and strides of different lengths");
    v.offset = r.pod<int64_t>();
    const uint8_t dt = r.pod<uint8_t>();
    if (dt > uint8_t(kBool)) r.bad("an unknown dtype");
    v.dtype = ScalarType(dt);
    v.device = Device(kCPU);
    v.producer = r.pod<int32_t>();
    v.is_view = r.pod<uint8_t>() != 0;
    // the element count must be representable (kernels and the executor multiply sizes)
    int64_t count = 1;
    for (int64_t sz : v.sizes)
      if (sz < 0 || __builtin_mul_overflow(count, sz, &count) || count > (int64_t(1) << 56))
        r.bad("a tensor with too many elements");
    // every element of the value must lie inside its buffer
    int64_t hi = v.offset, lo = v.offset;
    bool empty = false;
    for (size_t d = 0; d < v.sizes.size(); ++d) {
      if (v.sizes[d] < 0) r.bad("a negative size");
      if (v.sizes[d] == 0) {
        empty = true;
        continue;
      }
      // Overflow-checked: a crafted file may hold any sizes and strides.
      int64_t reach = 0;
      if (__builtin_mul_overflow(v.sizes[d] - 1, v.strides[d], &reach) ||
          __builtin_add_overflow(reach >= 0 ? hi : lo, reach, reach >= 0 ? &hi : &lo))
        r.bad("a tensor's extent overflows");
    }
    if (v.offset < 0) r.bad("a negative offset");
    const Buffer& b = g.buffers[size_t(v.buffer)];
    if (!empty && b.kind != BufKind::Input &&
        (lo < 0 || hi >= int64_t(b.nbytes / itemsize(v.dtype))))
      r.bad("a tensor reaches outside its buffer");
    if (!empty && b.kind != BufKind::Input)
      reach[size_t(v.buffer)] = std::max(reach[size_t(v.buffer)], size_t(hi + 1) * itemsize(v.dtype));
    g.values.push_back(std::move(v));
  }
  // NOTE [Loaded buffer sizes]: the plan allocates what the buffers say, so a forged size must
  // not exceed what the graph needs (fuzz_jit_load: a 4 GiB buffer behind a few floats). An
  // intermediate buffer is cut to the bytes its tensors reach (all of them still fit; a
  // recorded one holds exactly that), and jit::load plans the arena again from these sizes
  // (memplan) instead of trusting the file's offsets: the arena then never exceeds the sum of
  // the buffers the graph uses.
  for (uint32_t i = 0; i < nb; ++i) {
    Buffer& b = g.buffers[i];
    if (b.kind == BufKind::Intermediate) b.nbytes = std::min(b.nbytes, reach[i]);
  }
  auto check_value = [&](int v, bool allow_none) {
    if ((v < 0 && !(allow_none && v == -1)) || (v >= 0 && uint32_t(v) >= nv))
      r.bad("a node names a missing value");
  };
  const uint32_t nn = r.pod<uint32_t>();
  for (uint32_t i = 0; i < nn; ++i) {
    Node n;
    const std::string name = r.str();
    try {
      n.op = &find_op(name);
    } catch (const Error&) {
      r.bad("an op this library does not have: " + name);
    }
    const uint32_t na = r.pod<uint32_t>();
    if (na > 64) r.bad("too many attributes");
    for (uint32_t k = 0; k < na; ++k) n.attrs.values.push_back(read_attr(r));
    const uint32_t ni = r.pod<uint32_t>();
    if (ni > 64) r.bad("too many inputs");
    for (uint32_t k = 0; k < ni; ++k) {
      n.inputs.push_back(r.pod<int32_t>());
      check_value(n.inputs.back(), true);
    }
    const uint32_t no = r.pod<uint32_t>();
    if (no > 64 || no == 0) r.bad("a node with a bad number of outputs");
    for (uint32_t k = 0; k < no; ++k) {
      n.outputs.push_back(r.pod<int32_t>());
      check_value(n.outputs.back(), false);
    }
    n.writes_existing = r.pod<uint8_t>() != 0;
    n.rng = r.pod<int32_t>();
    n.group = r.pod<int32_t>();
    g.nodes.push_back(std::move(n));
  }
  auto ints = [&](std::vector<int>& v, uint32_t bound) {
    const uint32_t k = r.pod<uint32_t>();
    if (k > (1u << 24)) r.bad("a list is too long");
    for (uint32_t i = 0; i < k; ++i) {
      const int x = r.pod<int32_t>();
      if (x < 0 || uint32_t(x) >= bound) r.bad("an index out of range");
      v.push_back(x);
    }
  };
  ints(g.inputs, nv);
  ints(g.outputs, nv);
  const uint32_t ng = r.pod<uint32_t>();
  for (uint32_t i = 0; i < ng; ++i) {
    std::vector<int> gr;
    ints(gr, nn);
    g.groups.push_back(std::move(gr));
  }
  // Cross-references the passes and the executor follow without checking (fuzz_jit_load).
  for (size_t vi = 0; vi < g.values.size(); ++vi) {
    const int p = g.values[vi].producer;
    if (p < -1 || (p >= 0 && size_t(p) >= g.nodes.size())) r.bad("a value names a missing producer");
    if (p >= 0) {
      const auto& outs = g.nodes[size_t(p)].outputs;
      if (std::find(outs.begin(), outs.end(), int(vi)) == outs.end())
        r.bad("a value's producer does not output it");
    }
  }
  for (const Node& n : g.nodes) {
    if (n.group < -1 || (n.group >= 0 && size_t(n.group) >= g.groups.size()))
      r.bad("a node names a missing fused group");
    if (n.rng < -1) r.bad("a node names a bad random draw");
  }
  const uint32_t nm = r.pod<uint32_t>();
  if (nm != 0 && nm != nv) r.bad("the fused-value table has the wrong length");
  for (uint32_t i = 0; i < nm; ++i) g.materialized.push_back(r.pod<uint8_t>() != 0);
  const uint32_t nr = r.pod<uint32_t>();
  for (uint32_t i = 0; i < nr; ++i) g.rng_counters.push_back(r.pod<uint64_t>());
  for (const Node& n : g.nodes)
    if (n.rng >= 0 && uint32_t(n.rng) >= nr) r.bad("a node names a missing random draw");
  const uint32_t nrr = r.pod<uint32_t>();
  if (nrr > nr + 1) r.bad("too many generator resets");
  for (uint32_t i = 0; i < nrr; ++i) {
    Graph::RngReset x;
    x.seed = r.pod<uint64_t>();
    x.offset = r.pod<uint64_t>();
    x.set = r.pod<uint8_t>() != 0;
    g.rng_reset.push_back(x);
  }
  if (!r.done()) r.bad("bytes after the end of the graph");
  for (const Node& n : g.nodes) {
    if (n.group >= int(ng) || n.group < -1) r.bad("a node names a missing group");
    if (n.rng >= int(nr) || n.rng < -1) r.bad("a node names a missing generator draw");
  }
  for (const Buffer& b : g.buffers)
    if (b.kind == BufKind::Input && (b.input < 0 || size_t(b.input) >= g.inputs.size()))
      r.bad("an input buffer names a missing input");
  // captured tensors: each buffer's bytes become a storage of their own
  for (uint32_t i = 0; i < nb; ++i) {
    Buffer& b = g.buffers[i];
    if (!blobs[i].first) continue;
    if (blobs[i].second != b.nbytes) r.bad("a captured tensor has the wrong size");
    if (b.root_value < 0 || uint32_t(b.root_value) >= nv) r.bad("a captured tensor has no value");
    const Value& rv = g.values[size_t(b.root_value)];
    auto impl = new_tensor_impl();
    impl->storage = allocate_storage(b.nbytes, Device(kCPU));
    std::memcpy(impl->storage->data, blobs[i].first, b.nbytes);
    impl->sizes = rv.sizes;
    impl->strides = rv.strides;
    impl->offset = rv.offset;
    impl->dtype = rv.dtype;
    impl->device = Device(kCPU);
    impl->refresh_contiguous();
    b.recorded_storage = impl->storage.get();
    b.impls = {impl};
  }
  return g;
}

}  // namespace oneflow::trace

namespace oneflow::jit {

struct LoadedGraph::Impl {
  trace::Graph graph;
  std::shared_ptr<trace::Plan> plan;
};

LoadedGraph::LoadedGraph() = default;
LoadedGraph::~LoadedGraph() = default;
LoadedGraph::LoadedGraph(LoadedGraph&&) noexcept = default;
LoadedGraph& LoadedGraph::operator=(LoadedGraph&&) noexcept = default;

std::vector<Tensor> LoadedGraph::run(const std::vector<Tensor>& inputs) {
  if (!impl_) fail("[jit.load] this LoadedGraph is empty");
  const trace::Graph& g = impl_->graph;
  if (inputs.size() != g.inputs.size())
    fail("[jit.load] the graph takes {} inputs, got {}", g.inputs.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const trace::Value& v = g.values[size_t(g.inputs[i])];
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("[jit.load] input {} is undefined", i);
    if (!(t.sizes() == IntArrayRef(v.sizes)) || t.dtype() != v.dtype || !t.is_cpu())
      fail("[jit.load] input {} is {} {} on {}; the graph was saved for {} {} on cpu", i,
           shape_str(t.sizes()), dtype_name(t.dtype()), t.device().str(), shape_str(v.sizes),
           dtype_name(v.dtype));
    if (!(t.strides() == IntArrayRef(v.strides)))
      fail("[jit.load] input {} has strides {}; the graph was saved for strides {} (pass "
           ".contiguous())", i, shape_str(t.strides()), shape_str(v.strides));
  }
  NoGradGuard ng;
  return trace::replay(*impl_->plan, inputs);
}

size_t LoadedGraph::num_inputs() const { return impl_ ? impl_->graph.inputs.size() : 0; }
std::string LoadedGraph::graph() const { return impl_ ? trace::to_string(impl_->graph) : ""; }

LoadedGraph load(const std::string& path) {
  ensure_op_table();
  LoadedGraph lg;
  lg.impl_ = std::make_unique<LoadedGraph::Impl>();
  // the arena is planned again (NOTE [Loaded buffer sizes])
  lg.impl_->graph = trace::memplan(trace::load_graph(path));
  lg.impl_->plan = trace::lower(lg.impl_->graph, false);
  return lg;
}

}  // namespace oneflow::jit

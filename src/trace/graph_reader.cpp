// graph_reader.cpp: reading graph files (docs/TRACING.md, "File format"). A file is checked
// completely (magic, version, sizes, checksum, every index) before a graph is built from it, and
// each graph read is verified (trace/graph_checks.cpp) before it runs.
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

// NOTE [Graph file versions] (also NOTE [Attribute order of old graph files], op_def.h's
// OpDef::attr_order_before_v3): a node's attributes are stored in its op's attribute order, so
// a change of an op's order bumps the format version, and the loader moves an older file's
// attributes into the current order before anything reads them (the node's checks, the
// symbolic expressions that name an attribute by position). Format 3 gave the convolution
// family one order (NOTE [Attribute schemas], conv_detail::ConvAttrs): conv_transpose2d/3d
// were (stride, padding, output_padding, groups, dilation) and conv2d/3d_backward_weight
// (weight_size, stride, padding, dilation, groups); those ops' rows say so in
// attr_order_before_v3. old_attr_order gives, for each current position, the position the
// attribute had in an older file (null: unchanged); a node with another count of attributes is
// left as it is for the checks to refuse.
const std::vector<int>* old_attr_order(const OpDef& op, uint32_t version, size_t n) {
  if (version >= 3 || op.attr_order_before_v3.empty() || n != op.attr_order_before_v3.size())
    return nullptr;
  return &op.attr_order_before_v3;
}

AttrValue read_attr(Reader& r) {
  const uint8_t tag = r.pod<uint8_t>();
  switch (tag) {
    case 0:
      return std::monostate{};
    case 1:
      return r.pod<int64_t>();
    case 2:
      return r.pod<double>();
    case 3:
      return bool(r.pod<uint8_t>());
    case 4:
      return r.dims();
    case 5: {
      const uint8_t d = r.pod<uint8_t>();
      if (d > uint8_t(kBool)) r.bad("an unknown dtype");
      return ScalarType(d);
    }
    case 6:
      return r.str();
    case 7: {
      const uint8_t k = r.pod<uint8_t>();
      if (k == uint8_t(Scalar::Kind::Float)) return Scalar(r.pod<double>());
      const int64_t v = r.pod<int64_t>();
      if (k == uint8_t(Scalar::Kind::Bool)) return Scalar(v != 0);
      if (k == uint8_t(Scalar::Kind::Int)) return Scalar(v);
      r.bad("an unknown scalar kind");
    }
    default:
      r.bad("an unknown attribute type");
  }
}

}  // namespace

namespace {

// One graph at r's position: captured bytes inline (format 1) or named in `table` (2, 3).
Graph read_graph(Reader& r, const std::vector<Storage>* table, uint32_t version) {
  Graph g;
  const uint32_t nb = r.pod<uint32_t>();
  // each buffer takes at least 34 bytes: a count beyond that is a corrupt file, not a request
  // for a table of 2^32 entries
  if (nb > r.remaining() / 34) r.bad("more buffers than the file has bytes for");
  std::vector<std::pair<const char*, uint64_t>> blobs(nb, {nullptr, 0});
  std::vector<int> blob_ids(nb, -1);
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
      if (table) {
        const int32_t id = r.pod<int32_t>();
        if (id < 0 || size_t(id) >= table->size()) r.bad("a captured tensor names a missing blob");
        blob_ids[i] = id;
      } else {
        uint64_t len;
        const char* p = r.bytes(len);
        blobs[i] = {p, len};
      }
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
    if (too_many_elements(v.sizes)) r.bad("a tensor with too many elements");
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
    for (int64_t st : v.strides)  // (eager views refuse them too)
      if (st < 0)
        r.bad(fmt::format("value {} has a negative stride ({})", i, shape_str(v.strides)));
    const Buffer& b = g.buffers[size_t(v.buffer)];
    if (!empty && b.kind != BufKind::Input &&
        (lo < 0 || hi >= int64_t(b.nbytes / itemsize(v.dtype))))
      r.bad("a tensor reaches outside its buffer");
    if (!empty && b.kind != BufKind::Input)
      reach[size_t(v.buffer)] =
          std::max(reach[size_t(v.buffer)], size_t(hi + 1) * itemsize(v.dtype));
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
    } catch (const Error&) { r.bad("an op this library does not have: " + name); }
    const uint32_t na = r.pod<uint32_t>();
    if (na > 64) r.bad("too many attributes");
    for (uint32_t k = 0; k < na; ++k) n.attrs.values.push_back(read_attr(r));
    if (const std::vector<int>* order = old_attr_order(*n.op, version, na)) {
      Attrs moved;
      for (int k : *order) moved.values.push_back(n.attrs.values[size_t(k)]);
      n.attrs = std::move(moved);
    }
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
    if (p < -1 || (p >= 0 && size_t(p) >= g.nodes.size()))
      r.bad("a value names a missing producer");
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
    if (!blobs[i].first && blob_ids[i] < 0) continue;
    const size_t have = table ? (*table)[size_t(blob_ids[i])]->nbytes : blobs[i].second;
    if (have != b.nbytes) r.bad("a captured tensor has the wrong size");
    if (b.root_value < 0 || uint32_t(b.root_value) >= nv) r.bad("a captured tensor has no value");
    const Value& rv = g.values[size_t(b.root_value)];
    auto impl = new_tensor_impl();
    if (table) {
      impl->storage = (*table)[size_t(blob_ids[i])];
    } else {
      impl->storage = allocate_storage(b.nbytes, Device(kCPU));
      std::memcpy(impl->storage->data, blobs[i].first, b.nbytes);
    }
    impl->sizes = rv.sizes;
    impl->strides = rv.strides;
    impl->offset = rv.offset;
    impl->dtype = rv.dtype;
    impl->device = Device(kCPU);
    impl->refresh_contiguous();
    b.recorded_storage = impl->storage.get();
    b.impls = {impl};
  }
  check_semantics(g, r.errors());
  return g;
}

// A training step's state table, checked against its graph (NOTE [Saved training steps]):
// every captured tensor of the graph is named exactly once, each entry with exactly the geometry
// the graph records for the tensor on its buffer (its root value: dtype, sizes, strides,
// offset), so that state() hands out the tensors the step reads and writes and nothing else;
// the generator state is there exactly when the graph draws.
void read_state(Reader& r, GraphFile& file) {
  const Graph& g = file.graph;
  const uint32_t ns = r.pod<uint32_t>();
  if (ns > g.buffers.size()) r.bad("more state tensors than buffers");
  std::set<std::string> names;
  std::vector<int> named(g.buffers.size(), -1);  // per buffer: the entry naming it
  auto geometry = [](ScalarType dt, const DimVector& sizes, const DimVector& strides,
                     int64_t offset) {
    return fmt::format("{} {} strides {} offset {}", dtype_name(dt), shape_str(sizes),
                       shape_str(strides), offset);
  };
  for (uint32_t i = 0; i < ns; ++i) {
    StateEntry e;
    e.name = r.str();
    if (e.name.empty() || e.name.size() > 4096) r.bad("a state tensor with a bad name");
    if (e.name == "generator")
      r.bad("a state tensor is named 'generator', the name of the step's generator state");
    if (!names.insert(e.name).second)
      r.bad(fmt::format("two state tensors are named '{}'", e.name));
    e.buffer = r.pod<int32_t>();
    if (e.buffer < 0 || size_t(e.buffer) >= g.buffers.size() ||
        g.buffers[size_t(e.buffer)].kind != BufKind::External)
      r.bad(fmt::format("state tensor '{}' names a buffer that holds no captured tensor", e.name));
    if (named[size_t(e.buffer)] >= 0)
      r.bad(fmt::format("state tensors '{}' and '{}' name one buffer ({})",
                        file.state[size_t(named[size_t(e.buffer)])].name, e.name, e.buffer));
    named[size_t(e.buffer)] = int(i);
    const uint8_t dt = r.pod<uint8_t>();
    if (dt > uint8_t(kBool)) r.bad(fmt::format("state tensor '{}' has an unknown dtype", e.name));
    e.dtype = ScalarType(dt);
    e.sizes = r.dims();
    e.strides = r.dims();
    e.offset = r.pod<int64_t>();
    const Buffer& b = g.buffers[size_t(e.buffer)];
    const Value& root = g.values[size_t(b.root_value)];  // (checked by read_graph)
    if (root.dtype != e.dtype || !same_dims(root.sizes, e.sizes) ||
        !same_dims(root.strides, e.strides) || root.offset != e.offset)
      r.bad(fmt::format("state tensor '{}' is {}; the graph's tensor on its buffer ({}) is {}",
                        e.name, geometry(e.dtype, e.sizes, e.strides, e.offset), e.buffer,
                        geometry(root.dtype, root.sizes, root.strides, root.offset)));
    file.state.push_back(std::move(e));
  }
  for (size_t bi = 0; bi < g.buffers.size(); ++bi)
    if (g.buffers[bi].kind == BufKind::External && named[bi] < 0) {
      const Value& root = g.values[size_t(g.buffers[bi].root_value)];
      r.bad(fmt::format(
          "the state table names no tensor for buffer {} (the step's {}): every tensor the step "
          "reads or updates between calls must be in it",
          bi, geometry(root.dtype, root.sizes, root.strides, root.offset)));
    }
  const uint8_t has = r.pod<uint8_t>();
  if (has > 1 || bool(has) != !g.rng_counters.empty())
    r.bad(has ? "a generator state for a graph that draws nothing"
              : "the graph draws from a generator whose state the file lacks");
  file.has_rng = has != 0;
  if (file.has_rng) {
    file.rng.seed = r.pod<uint64_t>();
    file.rng.offset = r.pod<uint64_t>();
  }
}

SymbolicGraph read_structure(Reader& r, const std::vector<SymDim>& syms,
                             const std::vector<std::vector<int>>& input_dims,
                             const std::vector<Storage>& table, uint32_t version) {
  SymbolicGraph sg;
  sg.symbols = syms;
  sg.input_dims = input_dims;
  sg.one_mask = r.pod<uint32_t>();
  if (sg.one_mask >> syms.size()) r.bad("a structure names a missing symbol");
  const uint32_t nrec = r.pod<uint32_t>();
  if (nrec != syms.size()) r.bad("a structure's recorded sizes do not match its symbols");
  for (uint32_t i = 0; i < nrec; ++i) {
    const int64_t v = r.pod<int64_t>();
    if (v < syms[i].min || v > syms[i].max) r.bad("a structure recorded outside its ranges");
    sg.recorded.push_back(v);
  }
  const uint32_t ne = r.pod<uint32_t>();
  if (ne > r.remaining() / 24) r.bad("more expressions than the file has bytes for");
  for (uint32_t i = 0; i < ne; ++i) {
    AttrExpr e;
    e.node = r.pod<int32_t>();
    e.attr = r.pod<int32_t>();
    e.elem = r.pod<int32_t>();
    const uint32_t nn = r.pod<uint32_t>();
    if (nn != (1u << syms.size())) r.bad("an expression with the wrong number of terms");
    for (uint32_t k = 0; k < nn; ++k) e.num.push_back(r.pod<int64_t>());
    e.den = r.pod<int64_t>();
    if (e.den <= 0) r.bad("an expression with a bad denominator");
    sg.exprs.push_back(std::move(e));
  }
  sg.tmpl = read_graph(r, &table, version);
  for (AttrExpr& e : sg.exprs) {
    if (e.node < 0 || size_t(e.node) >= sg.tmpl.nodes.size())
      r.bad("an expression names a missing node");
    const Node& node = sg.tmpl.nodes[size_t(e.node)];
    const Attrs& a = node.attrs;
    if (const std::vector<int>* order = old_attr_order(*node.op, version, a.size()))
      e.attr = int(std::find(order->begin(), order->end(), e.attr) - order->begin());
    if (e.attr < 0 || size_t(e.attr) >= a.size()) r.bad("an expression names a missing attribute");
    const AttrValue& v = a.values[size_t(e.attr)];
    const bool ok = e.elem < 0
                        ? (std::holds_alternative<int64_t>(v) ||
                           std::holds_alternative<double>(v) || std::holds_alternative<Scalar>(v))
                        : (std::holds_alternative<DimVector>(v) &&
                           size_t(e.elem) < std::get<DimVector>(v).size());
    if (!ok) r.bad("an expression names an attribute that is not an integer");
  }
  if (sg.tmpl.inputs.size() != input_dims.size()) r.bad("symbolic dims for another input count");
  for (size_t i = 0; i < input_dims.size(); ++i) {
    const Value& v = sg.tmpl.values[size_t(sg.tmpl.inputs[i])];
    if (!input_dims[i].empty() && input_dims[i].size() != v.sizes.size())
      r.bad("symbolic dims for an input of another rank");
    for (size_t d = 0; d < input_dims[i].size(); ++d)
      if (input_dims[i][d] >= 0 && v.sizes[d] != sg.recorded[size_t(input_dims[i][d])])
        r.bad("an input's recorded size differs from its symbol's");
  }
  return sg;
}

}  // namespace

// NOTE [Mapped graph files]: a graph file is mapped (read-only pages, private: an in-place
// write to a weight copies its page and never reaches the file) and format 2's blobs, which
// start at multiples of 64 bytes of the file, become the captured tensors' storage without a
// copy; the mapping lives as long as any of them. Saving writes a new file and renames it over
// the old one, so a running process keeps the pages it mapped. The mapping is MappedFile's
// (NOTE [Mapped checkpoints]), which checkpoint loads use too.
GraphFile read_file(const std::string& path) {
  const std::shared_ptr<MappedFile> map = MappedFile::open(path, "jit.load");
  const std::string_view data(map->data() ? map->data() : "", map->size());
  Reader hdr(data.data(), data.size(), path);
  char magic[8];
  for (char& c : magic) c = hdr.pod<char>();
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) hdr.bad("wrong magic bytes");
  const uint32_t version = hdr.pod<uint32_t>();
  if (version < 1 || version > kVersion)
    fail("[jit.load] {} has format version {}; this library reads versions 1 to {}", path, version,
         kVersion);
  const uint64_t n = hdr.pod<uint64_t>();
  const uint32_t crc = hdr.pod<uint32_t>();
  const size_t head = sizeof kMagic + sizeof version + sizeof n + sizeof crc;
  if (data.size() - head != n)
    fail(
        "[jit.load] {} is not a valid traced graph: the payload is {} bytes, the header says {} "
        "(truncated or padded)",
        path, data.size() - head, n);
  const char* payload = data.data() + head;
  if (uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(payload), uInt(n))) != crc)
    hdr.bad("the checksum does not match (the file is corrupted)");
  Reader r(payload, size_t(n), path);
  GraphFile file;
  if (version == 1) {
    file.graph = read_graph(r, nullptr, version);
    if (!r.done()) r.bad("bytes after the end of the graph");
    return file;
  }
  file.kind = r.pod<uint8_t>();
  if (file.kind > 2 || (file.kind == 2 && version < 3)) r.bad("an unknown kind of graph file");
  const uint32_t nblobs = r.pod<uint32_t>();
  if (nblobs > r.remaining() / 8) r.bad("more blobs than the file has bytes for");
  std::vector<Storage> table;
  for (uint32_t i = 0; i < nblobs; ++i) {
    const uint64_t len = r.pod<uint64_t>();
    while ((kHeaderBytes + r.position()) % 64 != 0) r.pod<uint8_t>();
    r.need(len);
    // over the mapped bytes (64-byte aligned in the file; pages are page-aligned)
    Storage st = map->storage(size_t(r.here() - map->data()), size_t(len));
    r.skip(len);
    table.push_back(std::move(st));
  }
  if (file.kind == 0) {
    file.graph = read_graph(r, &table, version);
  } else if (file.kind == 2) {
    file.graph = read_graph(r, &table, version);
    read_state(r, file);
  } else {
    const uint32_t ns = r.pod<uint32_t>();
    if (ns == 0 || ns > 6) r.bad("a bad number of symbols");
    std::vector<SymDim> syms;
    for (uint32_t i = 0; i < ns; ++i) {
      SymDim d;
      d.name = r.str();
      d.min = r.pod<int64_t>();
      d.max = r.pod<int64_t>();
      if (d.name.empty() || d.min < 1 || d.max < d.min) r.bad("a symbol with a bad range");
      syms.push_back(std::move(d));
    }
    const uint32_t ni = r.pod<uint32_t>();
    if (ni > 4096) r.bad("too many inputs");
    std::vector<std::vector<int>> input_dims(ni);
    for (auto& dims : input_dims) {
      const uint32_t nd = r.pod<uint32_t>();
      if (nd > 64) r.bad("an input with more than 64 dimensions");
      for (uint32_t d = 0; d < nd; ++d) {
        const int32_t x = r.pod<int32_t>();
        if (x < -1 || x >= int32_t(ns)) r.bad("an input dim names a missing symbol");
        dims.push_back(x);
      }
    }
    const uint32_t nst = r.pod<uint32_t>();
    if (nst == 0 || nst > 64) r.bad("a bad number of structures");
    for (uint32_t i = 0; i < nst; ++i)
      file.structures.push_back(read_structure(r, syms, input_dims, table, version));
  }
  if (!r.done()) r.bad("bytes after the end of the graph");
  return file;
}

Graph load_graph(const std::string& path) {
  GraphFile f = read_file(path);
  if (f.kind == 1)
    fail("[jit.load] {} holds a graph with symbolic dims (load it with of::jit::load)", path);
  if (f.kind == 2)
    fail("[jit.load] {} holds a training step with its state (load it with of::jit::load)", path);
  return std::move(f.graph);
}

}  // namespace oneflow::trace

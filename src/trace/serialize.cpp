// Saving and loading optimized graphs with their captured tensors (docs/TRACING.md, "File
// format"). A file is checked completely (magic, version, sizes, checksum, every index) before
// a graph is built from it.
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
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/graph_io.h"
#include "trace/passes.h"
#include "trace/pass_table.h"
#include "trace/symbolic.h"

namespace oneflow::trace {

namespace {

constexpr char kMagic[8] = {'O', 'F', 'T', 'R', 'A', 'C', 'E', '\0'};
// 1: one graph, captured bytes inline; 2: a kind byte, a blob table, then one graph or the
// structures of a symbolic graph (NOTE [Graph file blobs]); 3: as 2, with the convolution
// family's one attribute order. All three are read (NOTE [Graph file versions]).
constexpr uint32_t kVersion = 3;

// NOTE [Graph file versions]: a node's attributes are stored in its op's attribute order, so
// a change of an op's order bumps the format version, and the loader moves an older file's
// attributes into the current order before anything reads them (the node's checks, the
// symbolic expressions that name an attribute by position). Format 3 gave the convolution
// family one order (NOTE [Attribute schemas], conv_detail::ConvAttrs): conv_transpose2d/3d
// were (stride, padding, output_padding, groups, dilation) and conv2d/3d_backward_weight
// (weight_size, stride, padding, dilation, groups). old_attr_order gives, for each current
// position, the position the attribute had in an older file (null: unchanged); a node with
// another count of attributes is left as it is for the checks to refuse.
const std::vector<int>* old_attr_order(const std::string& op, uint32_t version, size_t n) {
  static const std::vector<int> conv_t{0, 1, 4, 3, 2}, conv_bw{1, 2, 3, 4, 0};
  if (version >= 3 || n != 5) return nullptr;
  if (op == "conv_transpose2d" || op == "conv_transpose3d") return &conv_t;
  if (op == "conv2d_backward_weight" || op == "conv3d_backward_weight") return &conv_bw;
  return nullptr;
}

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
  size_t remaining() const { return n_ - pos_; }
  size_t position() const { return pos_; }
  const char* here() const { return p_ + pos_; }
  void skip(uint64_t k) {
    need(k);
    pos_ += size_t(k);
  }
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

// NOTE [Loaded op signatures]: a graph file names ops and gives their inputs and attrs; the
// loader accepts a node only where an eager call could have made it. The arities, the inputs
// that may be undefined and the attribute types of each op come from the table the op-table
// fuzzer uses (tests/fuzz/op_signatures.txt, recorded from every call the suite makes and
// checked current by tests/test_fuzz_support.cpp), embedded at build time. An op seen with one
// arity takes exactly that many inputs; one seen with several takes at least the fewest
// (variadic cat/stack, optional trailing inputs). infer_meta then validates the node as
// dispatch does, and its kernel runs only on tensors whose geometry infer_meta derived: the
// guarantees fuzz_ops checks for eager calls with any shapes and attributes.
struct LoadSig {
  std::vector<int> arities;
  uint64_t undefined_ok = 0;
  std::vector<std::vector<int>> attr_tags;
};

const std::unordered_map<std::string, LoadSig>& load_signatures() {
  static const std::unordered_map<std::string, LoadSig> table = [] {
    std::unordered_map<std::string, LoadSig> t;
    std::stringstream lines{std::string(kOpSignatures)};
    std::string line;
    auto ints = [](const std::string& s, char sep) {
      std::vector<int> v;
      std::stringstream ss(s);
      std::string x;
      while (std::getline(ss, x, sep))
        if (!x.empty()) v.push_back(std::stoi(x));
      return v;
    };
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> f;
      std::stringstream ls(line);
      std::string field;
      while (std::getline(ls, field, '\t')) f.push_back(field);
      while (f.size() < 4) f.emplace_back();
      LoadSig s;
      s.arities = ints(f[1], ',');
      s.undefined_ok = std::stoull(f[2].empty() ? "0" : f[2]);
      std::stringstream as(f[3]);
      std::string spec;
      while (as >> spec) s.attr_tags.push_back(ints(spec.substr(0, spec.find(':')), '/'));
      t[f[0]] = std::move(s);
    }
    return t;
  }();
  return table;
}

// [lo, hi] element range of a value's elements (relative to its storage); false when empty.
// Overflow-checked (an instantiated symbolic graph's sizes come from its file's expressions):
// `what` names the tensor in the error, which r raises naming the file.
bool value_extent(const Value& v, int64_t& lo, int64_t& hi, const Reader& r,
                  const std::string& what) {
  lo = hi = v.offset;
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] == 0) return false;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(v.sizes[d] - 1, v.strides[d], &reach) ||
        __builtin_add_overflow(reach >= 0 ? hi : lo, reach, reach >= 0 ? &hi : &lo))
      r.bad(fmt::format("{}: its extent overflows (sizes {}, strides {}, offset {})", what,
                        shape_str(v.sizes), shape_str(v.strides), v.offset));
  }
  return true;
}

// The largest element count a loaded tensor may have (kernels and the executor multiply sizes).
constexpr int64_t kMaxLoadedElements = int64_t(1) << 56;

bool too_many_elements(const DimVector& sizes) {
  int64_t count = 1;
  for (int64_t sz : sizes)
    if (sz < 0 || __builtin_mul_overflow(count, sz, &count) || count > kMaxLoadedElements)
      return true;
  return false;
}

// Whether v's elements are exactly the bytes [0, nbytes) of its buffer, each once (a dense
// tensor in some order of its dims: what a kernel writing a fresh output fills).
bool covers_buffer(const Value& v, size_t nbytes) {
  if (v.offset != 0) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims of size > 1
  int64_t n = 1;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    n *= v.sizes[d];
    if (v.sizes[d] > 1) dims.emplace_back(v.strides[d], v.sizes[d]);
  }
  if (n == 0) return nbytes == 0;
  if (size_t(n) * itemsize(v.dtype) != nbytes) return false;
  std::sort(dims.begin(), dims.end());
  int64_t expect = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expect) return false;
    expect *= size;
  }
  return true;
}

// NOTE [Loaded node order]: a node runs on what is there when it runs. Every value it reads is
// a root's (an input, a captured tensor, a constant) or lies on a buffer that an earlier node
// wrote; a value made by a node is read after it, and a node reads its own output only as the
// in-place op it is (outputs[0] of a writes_existing node). The first write of an intermediate
// buffer covers it whole (a fresh dense output of the buffer's bytes), so nothing a graph reads
// can be bytes that an earlier call left in the arena: one request's data never reaches another
// request's answer. Values a fused group keeps in scratch are read only inside the group (the
// group checks of check_semantics), and writing them writes no buffer.
void check_order(const Graph& g, const Reader& r) {
  std::vector<char> written(g.buffers.size(), 0);
  for (size_t b = 0; b < g.buffers.size(); ++b)
    written[b] = g.buffers[b].kind != BufKind::Intermediate;
  auto scratch = [&](int v) {
    const int p = g.values[size_t(v)].producer;
    return !g.groups.empty() && p >= 0 && g.nodes[size_t(p)].group >= 0 &&
           !g.materialized[size_t(v)];
  };
  auto geom = [&](int v) {
    const Value& x = g.values[size_t(v)];
    return fmt::format("{} {}", dtype_name(x.dtype), shape_str(x.sizes));
  };
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    auto node_bad = [&](const std::string& what) {
      r.bad(fmt::format("node {} ({}): {}", ni, n.op->name, what));
    };
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      if (v < 0) continue;
      const Value& val = g.values[size_t(v)];
      const bool own = std::find(n.outputs.begin(), n.outputs.end(), v) != n.outputs.end();
      if (own && !(n.writes_existing && v == n.outputs[0]))
        node_bad(
            fmt::format("input {} is its own output (value {}), and the op does not write in "
                        "place",
                        k, v));
      if (val.producer > int(ni))
        node_bad(fmt::format("input {} is value {} ({}), which node {} ({}) makes after it", k, v,
                             geom(v), val.producer, g.nodes[size_t(val.producer)].op->name));
      const bool in_group = scratch(v) && n.group >= 0 &&
                            g.nodes[size_t(val.producer)].group == n.group &&
                            val.producer < int(ni);
      if (!written[size_t(val.buffer)] && !in_group)
        node_bad(fmt::format("input {} is value {} ({}) on buffer {}, which no earlier node writes",
                             k, v, geom(v), val.buffer));
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int o = n.outputs[k];
      const Value& val = g.values[size_t(o)];
      if (k == 0 && n.writes_existing) {
        if (!written[size_t(val.buffer)])
          node_bad(
              fmt::format("it writes in place into value {} ({}) on buffer {}, which no "
                          "earlier node writes",
                          o, geom(o), val.buffer));
        continue;
      }
      if (val.is_view || n.op->has(kView) || scratch(o) || written[size_t(val.buffer)]) continue;
      if (!covers_buffer(val, g.buffers[size_t(val.buffer)].nbytes))
        node_bad(
            fmt::format("output {} (value {}, {}) is the first write of buffer {} ({} bytes) "
                        "and does not fill it",
                        k, o, geom(o), val.buffer, g.buffers[size_t(val.buffer)].nbytes));
      written[size_t(val.buffer)] = 1;
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (!written[size_t(g.values[size_t(g.outputs[i])].buffer)])
      r.bad(fmt::format("output {} is value {}, which no node writes", i, g.outputs[i]));
}

bool same_dims(const DimVector& a, const DimVector& b) { return IntArrayRef(a) == IntArrayRef(b); }

// Everything the passes, the executor and the kernels rely on, derived again from the inputs
// and attrs (NOTE [Loaded op signatures]); a file that says otherwise is refused.
void check_semantics(const Graph& g, const Reader& r) {
  const size_t nv = g.values.size();
  // inputs: each input's value is the root of an Input buffer of that input, and every value
  // on an input's buffer lies inside the input's own extent (the caller's tensor has exactly the
  // saved sizes and strides; replay moves the values by its offset)
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& v = g.values[size_t(g.inputs[i])];
    const Buffer& b = g.buffers[size_t(v.buffer)];
    if (b.kind != BufKind::Input || v.producer != -1 || v.is_view)
      r.bad(fmt::format("input {} is not an input buffer's tensor", i));
    if (b.input == int(i) && v.offset != b.base_offset)
      r.bad(fmt::format("input {}'s buffer describes another tensor", i));
  }
  std::vector<int64_t> in_lo(g.buffers.size(), 0), in_hi(g.buffers.size(), -1);
  for (size_t bi = 0; bi < g.buffers.size(); ++bi) {
    const Buffer& b = g.buffers[bi];
    if (b.kind != BufKind::Input) continue;
    const Value& root = g.values[size_t(g.inputs[size_t(b.input)])];
    if (root.buffer != int(bi)) r.bad("an input buffer whose input lives elsewhere");
    if (!value_extent(root, in_lo[bi], in_hi[bi], r, fmt::format("input {}", b.input)))
      in_hi[bi] = in_lo[bi] - 1;  // empty input
  }
  for (size_t vi = 0; vi < nv; ++vi) {
    const Value& v = g.values[vi];
    const Buffer& b = g.buffers[size_t(v.buffer)];
    if (v.device != Device(kCPU)) r.bad("a tensor off the CPU");
    // (every size again: an instantiated symbolic graph's come from its file's expressions)
    if (too_many_elements(v.sizes))
      r.bad(fmt::format("value {} has sizes {}: more than 2^56 elements", vi, shape_str(v.sizes)));
    int64_t lo, hi;
    if (b.kind == BufKind::Input && value_extent(v, lo, hi, r, fmt::format("value {}", vi)) &&
        (lo < in_lo[size_t(v.buffer)] || hi > in_hi[size_t(v.buffer)]))
      r.bad("a view reaches outside the input it views");
  }
  // nodes: each validated as dispatch validates the eager call that recorded it
  const auto& sigs = load_signatures();
  std::vector<Tensor> meta(nv);  // per value: a tensor with its geometry and no data
  std::vector<Storage> fake(g.buffers.size());
  auto meta_of = [&](int v) -> const Tensor& {
    Tensor& t = meta[size_t(v)];
    if (t.defined()) return t;
    const Value& val = g.values[size_t(v)];
    Storage& st = fake[size_t(val.buffer)];
    if (!st)
      st = std::make_shared<StorageImpl>(nullptr, g.buffers[size_t(val.buffer)].nbytes,
                                         Device(kCPU), std::function<void(void*)>());
    t = Tensor(value_impl(st, val));
    return t;
  };
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const OpDef& op = *n.op;
    auto node_bad = [&](const std::string& what) {
      r.bad(fmt::format("node {} ({}): {}", ni, op.name, what));
    };
    if (op.has(kCollective) || op.has(kEffect) || op.has(kSyncsHost))
      node_bad("an op a saved graph cannot hold (it communicates or reads data on the host)");
    auto sit = sigs.find(op.name);
    if (sit == sigs.end() || sit->second.arities.empty())
      node_bad("an op without a known call signature");
    const LoadSig& sig = sit->second;
    const int arity = int(n.inputs.size());
    const bool arity_ok =
        sig.arities.size() == 1 ? arity == sig.arities[0] : arity >= sig.arities.front();
    if (!arity_ok) node_bad(fmt::format("{} inputs", arity));
    for (int k = 0; k < arity; ++k)
      if (n.inputs[size_t(k)] < 0 && (k >= 64 || !((sig.undefined_ok >> k) & 1)))
        node_bad(fmt::format("input {} is missing", k));
    // (calls of some ops pass fewer attributes; reading a missing one raises, Attrs::at)
    if (n.attrs.size() > sig.attr_tags.size())
      node_bad(fmt::format("{} attributes, the op takes at most {}", n.attrs.size(),
                           sig.attr_tags.size()));
    for (size_t a = 0; a < n.attrs.size(); ++a) {
      const auto& tags = sig.attr_tags[a];
      if (std::find(tags.begin(), tags.end(), int(n.attrs.values[a].index())) == tags.end())
        node_bad(fmt::format("attribute {} has the wrong type", a));
    }
    if (!op.has(kView) && !op.cpu) node_bad("no CPU kernel");
    if (n.rng >= 0) {
      const int s = op.rng_seed_attr;
      if (s < 0 || size_t(s) + 1 >= n.attrs.size() ||
          !std::holds_alternative<int64_t>(n.attrs.values[size_t(s)]) ||
          !std::holds_alternative<int64_t>(n.attrs.values[size_t(s) + 1]))
        node_bad("a generator draw on an op without seed attributes");
    }
    TensorList ins;
    for (int v : n.inputs) ins.push_back(v >= 0 ? meta_of(v) : Tensor());
    for (size_t k = 0; k < ins.size() && k < 32; ++k)
      if (((op.contiguous_inputs >> k) & 1u) && ins[k].defined() && !ins[k].is_contiguous() &&
          !(n.writes_existing && n.inputs[k] == n.outputs[0]))
        node_bad(fmt::format("input {} must be contiguous", k));
    MetaList metas;
    try {
      op.infer_meta(ins, n.attrs, metas);
    } catch (const Error& e) { node_bad(e.what()); } catch (const std::exception& e) {
      node_bad(std::string("its inputs or attributes are invalid: ") + e.what());
    }
    if (metas.size() != n.outputs.size())
      node_bad(fmt::format("{} outputs, the op makes {}", n.outputs.size(), metas.size()));
    for (size_t k = 0; k < metas.size(); ++k) {
      const TensorMeta& m = metas[k];
      const Value& o = g.values[size_t(n.outputs[k])];
      const Buffer& ob = g.buffers[size_t(o.buffer)];
      if (!m.device.is_cpu()) node_bad("an output off the CPU");
      if (!same_dims(o.sizes, m.sizes) || o.dtype != m.dtype)
        node_bad(fmt::format("output {} is {} {}; its inputs and attributes make {} {}", k,
                             shape_str(o.sizes), dtype_name(o.dtype), shape_str(m.sizes),
                             dtype_name(m.dtype)));
      if (m.view_of >= 0) {
        const Value& base = g.values[size_t(n.inputs[size_t(m.view_of)])];
        const DimVector st = m.strides.empty() ? contiguous_strides(m.sizes) : m.strides;
        if (o.buffer != base.buffer || !same_dims(o.strides, st) || o.offset != m.offset)
          node_bad(fmt::format("output {} is not the view its inputs and attributes make", k));
        continue;
      }
      if (op.has(kView)) node_bad("a view op whose output is not a view");
      if (k == 0 && n.writes_existing) {
        if (!o.contiguous() && !op.has(kElementwise))
          node_bad("an in-place output the kernel cannot write strided");
        continue;
      }
      if (ob.kind != BufKind::Intermediate) node_bad(fmt::format("output {} overwrites a root", k));
      if (!o.contiguous() && !op.has(kElementwise))
        node_bad(fmt::format("output {} is strided, the kernel writes it dense", k));
    }
  }
  // outputs are handed out from buffers that outlive the call
  for (int v : g.outputs) {
    const Buffer& b = g.buffers[size_t(g.values[size_t(v)].buffer)];
    if (b.kind == BufKind::Intermediate && !b.escapes) r.bad("a result kept in the arena");
  }
  // fused groups (NOTE [Fused groups] in executor.cpp): members are fusible elementwise nodes
  // of one output shape, in order, reading values broadcastable to it; values the group keeps
  // in scratch blocks are read by nobody outside it
  std::vector<size_t> listed(g.groups.size(), 0);
  for (const Node& n : g.nodes)
    if (n.group >= 0) ++listed[size_t(n.group)];
  if (!g.groups.empty() && g.materialized.size() != nv) r.bad("the fused-value table is missing");
  for (size_t k = 0; k < g.groups.size(); ++k) {
    const std::vector<int>& members = g.groups[k];
    if (members.empty() || listed[k] != members.size()) r.bad("a fused group lists other nodes");
    const Value& first = g.values[size_t(g.nodes[size_t(members[0])].outputs[0])];
    const DimVector& shape = first.sizes;
    std::vector<int> made;
    for (size_t m = 0; m < members.size(); ++m) {
      const Node& n = g.nodes[size_t(members[m])];
      if (n.group != int(k) || (m > 0 && members[m] <= members[m - 1]))
        r.bad("a fused group lists other nodes");
      if (!n.op->has(kElementwise) || n.op->has(kRandom) || n.op->has(kView) || n.rng >= 0 ||
          n.outputs.size() != 1)
        r.bad(fmt::format("a fused group holds {}, which does not fuse", n.op->name));
      const Value& o = g.values[size_t(n.outputs[0])];
      if (!same_dims(o.sizes, shape) || !o.contiguous())
        r.bad("a fused group member's result differs from the group's shape");
      for (int v : n.inputs) {
        if (v < 0) r.bad("a fused group member without an input");
        const Value& in = g.values[size_t(v)];
        const int p = in.producer;
        if (p >= 0 && g.nodes[size_t(p)].group == int(k) &&
            std::find(made.begin(), made.end(), v) == made.end())
          r.bad("a fused group member reads a value before the group makes it");
        if (in.numel() == 1 || (in.numel() == first.numel() && in.contiguous())) continue;
        const size_t off = shape.size() >= in.sizes.size() ? shape.size() - in.sizes.size() : 0;
        bool bcast = in.sizes.size() <= shape.size();
        for (size_t d = 0; bcast && d < in.sizes.size(); ++d)
          bcast = in.sizes[d] == 1 || in.sizes[d] == shape[off + d];
        if (!bcast) r.bad("a fused group member reads a value that does not broadcast");
      }
      made.push_back(n.outputs[0]);
    }
  }
  if (!g.groups.empty()) {
    auto scratch = [&](int v) {
      const int p = g.values[size_t(v)].producer;
      return p >= 0 && g.nodes[size_t(p)].group >= 0 && !g.materialized[size_t(v)];
    };
    for (const Node& n : g.nodes)
      for (int v : n.inputs)
        if (v >= 0 && scratch(v) && g.nodes[size_t(g.values[size_t(v)].producer)].group != n.group)
          r.bad("a value kept in a fused group's scratch is read outside it");
    for (int v : g.outputs)
      if (scratch(v)) r.bad("a result kept in a fused group's scratch");
  }
  check_order(g, r);
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

constexpr size_t kHeaderBytes =
    sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t) + sizeof(uint32_t);

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

namespace {

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
    if (const std::vector<int>* order = old_attr_order(name, version, na)) {
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
  check_semantics(g, r);
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
    if (const std::vector<int>* order = old_attr_order(node.op->name, version, a.size()))
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

Graph load_graph(const std::string& path) {
  GraphFile f = read_file(path);
  if (f.kind == 1)
    fail("[jit.load] {} holds a graph with symbolic dims (load it with of::jit::load)", path);
  if (f.kind == 2)
    fail("[jit.load] {} holds a training step with its state (load it with of::jit::load)", path);
  return std::move(f.graph);
}

}  // namespace oneflow::trace

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
  trace::Reader r(nullptr, 0, path);
  trace::check_semantics(g, r);
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
      trace::Reader r(nullptr, 0, path);
      trace::check_semantics(trace::instantiate(sg, sg.recorded), r);
      for (const std::vector<int64_t>& at : corners(sg)) {
        trace::Graph g;
        try {
          g = trace::instantiate(sg, at);
          trace::check_semantics(g, r);
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

// graph_checks.cpp: what a graph read from a file must satisfy before it runs (NOTE [Loaded op
// signatures], NOTE [Loaded node order]): the format's verification, which trace/serialize.cpp
// runs on every graph it reads and the runtime (loaded_graph.cpp) on every graph it derives.
#include "trace/executor.h"
#include "trace/graph_checks.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "op_signatures.h"
#include "trace/file_format.h"

#include <sstream>

namespace oneflow::trace {

void FileErrors::bad(const std::string& what) const {
  fail("[jit.load] {} is not a valid traced graph: {}", path, what);
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

static const std::unordered_map<std::string, LoadSig>& load_signatures() {
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
static bool value_extent(const Value& v, int64_t& lo, int64_t& hi, const FileErrors& r,
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
static bool covers_buffer(const Value& v, size_t nbytes) {
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
static void check_order(const Graph& g, const FileErrors& r) {
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

// Everything the passes, the executor and the kernels rely on, derived again from the inputs
// and attrs (NOTE [Loaded op signatures]); a file that says otherwise is refused.
void check_semantics(const Graph& g, const FileErrors& r) {
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

void check_loaded_graph(const Graph& g, const std::string& path) {
  check_semantics(g, FileErrors{path});
}

}  // namespace oneflow::trace

// Graph passes: each a pure function Graph -> Graph with its own switch (TraceOptions,
// OF_TRACE_PASSES) and its own test (tests/test_trace.cpp).
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ops/shape_attrs.h"
#include "trace/fusion_codegen.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/passes.h"

namespace oneflow::trace {

namespace {

constexpr int64_t kMinFuseNumel = 1024;  // below this a group costs more than it saves
constexpr size_t kMaxGroupNodes = 48;
constexpr size_t kArenaAlign = 64;

bool is_view_node(const Node& n) { return n.op->has(kView); }

}  // namespace

// Removes dead nodes; values they produced keep their ids (nothing reads them any more).
Graph compact(Graph g, const std::vector<bool>& dead) {
  std::vector<int> new_id(g.nodes.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dead[i]) continue;
    new_id[i] = int(kept.size());
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (Value& v : g.values)
    if (v.producer >= 0) v.producer = new_id[size_t(v.producer)];
  return g;
}

namespace {

void apply_remap(Graph& g, const std::vector<int>& remap) {
  auto r = [&](int& v) {
    while (v >= 0 && remap[size_t(v)] >= 0 && remap[size_t(v)] != v) v = remap[size_t(v)];
  };
  for (Node& n : g.nodes)
    for (int& v : n.inputs) r(v);
  for (int& v : g.outputs) r(v);
  for (GradEffect& e : g.grad_effects) r(e.value);
}

// Per buffer: the distinct values anything references (node inputs/outputs, outputs, effects).
std::vector<int> referenced_values_per_buffer(const Graph& g) {
  std::vector<char> seen(g.values.size(), 0);
  std::vector<int> count(g.buffers.size(), 0);
  auto see = [&](int v) {
    if (v < 0 || seen[size_t(v)]) return;
    seen[size_t(v)] = 1;
    ++count[size_t(g.values[size_t(v)].buffer)];
  };
  for (const Node& n : g.nodes) {
    for (int v : n.inputs) see(v);
    for (int v : n.outputs) see(v);
  }
  for (int v : g.outputs) see(v);
  for (const GradEffect& e : g.grad_effects) see(e.value);
  return count;
}

// Per buffer: the last node index that writes it (-1: none).
std::vector<int> last_writer(const Graph& g) {
  std::vector<int> w(g.buffers.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (is_view_node(g.nodes[i])) continue;
    for (int v : g.nodes[i].outputs) w[size_t(g.values[size_t(v)].buffer)] = int(i);
  }
  return w;
}

// Whether node i's outputs can be replaced by other values (CSE, folding): fresh intermediates
// that nothing else aliases, writes, returns or binds.
bool replaceable_outputs(const Graph& g, size_t i, const std::vector<int>& refs,
                         const std::vector<int>& writer) {
  const Node& n = g.nodes[i];
  if (n.writes_existing || is_view_node(n) || n.op->has(kRandom) || n.op->has(kEffect) ||
      n.rng >= 0)
    return false;
  for (int v : n.outputs) {
    const Value& val = g.values[size_t(v)];
    const Buffer& b = g.buffers[size_t(val.buffer)];
    if (b.kind != BufKind::Intermediate || b.escapes) return false;
    if (refs[size_t(val.buffer)] != 1 || writer[size_t(val.buffer)] != int(i)) return false;
  }
  return true;
}

}  // namespace

bool is_graph_output(const Graph& g, int v) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return true;
  for (const GradEffect& e : g.grad_effects)
    if (e.value == v) return true;
  return false;
}

// The value of a constant buffer as a double, if it is one element (for x*1, x+0 rules).
bool constant_scalar(const Graph& g, int v, double& out) {
  if (v < 0) return false;
  const Value& val = g.values[size_t(v)];
  const Buffer& b = g.buffers[size_t(val.buffer)];
  if (b.kind != BufKind::Constant || val.numel() != 1 || b.impls.empty()) return false;
  Tensor t(b.impls[0]);
  dispatch_dtype(val.dtype, [&](auto z) {
    using T = decltype(z);
    const char* base = static_cast<const char*>(t.impl()->storage->data);
    T x;
    std::memcpy(&x, base + val.offset * int64_t(sizeof(T)), sizeof(T));
    out = double(compute_t<T>(x));
  });
  return true;
}

// ---------------------------------------------------------------- dead code

Graph dce(const Graph& g) {
  std::vector<bool> need_buf(g.buffers.size(), false), need_val(g.values.size(), false);
  for (int v : g.outputs) {
    need_val[size_t(v)] = true;
    need_buf[size_t(g.values[size_t(v)].buffer)] = true;
  }
  for (const GradEffect& e : g.grad_effects)
    if (e.value >= 0) {
      need_val[size_t(e.value)] = true;
      need_buf[size_t(g.values[size_t(e.value)].buffer)] = true;
    }
  std::vector<bool> dead(g.nodes.size(), true);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    bool live = n.op->has(kEffect);  // a send another rank waits for, with no use here
    if (is_view_node(n)) {
      for (int v : n.outputs) live = live || need_val[size_t(v)];
    } else if (!live) {
      for (int v : n.outputs) {
        const int b = g.values[size_t(v)].buffer;
        const Buffer& buf = g.buffers[size_t(b)];
        // writes to anything the trace did not create are effects the caller sees
        if (buf.kind != BufKind::Intermediate || buf.escapes || need_buf[size_t(b)]) live = true;
      }
    }
    if (!live) continue;
    dead[k] = false;
    for (int v : n.inputs) {
      if (v < 0) continue;
      need_val[size_t(v)] = true;
      need_buf[size_t(g.values[size_t(v)].buffer)] = true;
    }
  }
  return compact(g, dead);
}

// ---------------------------------------------------------------- common subexpressions

namespace {
struct CseKey {
  const OpDef* op;
  const Attrs* attrs;
  std::vector<int64_t> ins;  // (value, buffer version) pairs
  bool operator==(const CseKey& o) const {
    return op == o.op && ins == o.ins && *attrs == *o.attrs;
  }
};
struct CseHash {
  size_t operator()(const CseKey& k) const {
    size_t h = std::hash<const void*>()(k.op) ^ hash_attrs(*k.attrs);
    for (int64_t v : k.ins) h = h * 1000003u + size_t(v);
    return h;
  }
};
}  // namespace

Graph cse(const Graph& g0) {
  Graph g = g0;
  const std::vector<int> refs = referenced_values_per_buffer(g);
  const std::vector<int> writer = last_writer(g);
  std::vector<int> remap(g.values.size(), -1);
  std::vector<int64_t> version(g.buffers.size(), 0);
  std::unordered_map<CseKey, size_t, CseHash> seen;
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (int& v : n.inputs)
      while (v >= 0 && remap[size_t(v)] >= 0) v = remap[size_t(v)];
    if (replaceable_outputs(g, i, refs, writer) && !n.op->has(kFactory)) {
      CseKey key{n.op, &n.attrs, {}};
      for (int v : n.inputs) {
        key.ins.push_back(v);
        key.ins.push_back(v < 0 ? 0 : version[size_t(g.values[size_t(v)].buffer)]);
      }
      auto it = seen.find(key);
      if (it != seen.end() && g.nodes[it->second].outputs.size() == n.outputs.size()) {
        const Node& prev = g.nodes[it->second];
        bool same_meta = true;
        for (size_t k = 0; k < n.outputs.size(); ++k) {
          const Value &a = g.values[size_t(n.outputs[k])], &b = g.values[size_t(prev.outputs[k])];
          same_meta = same_meta && a.dtype == b.dtype &&
                      IntArrayRef(a.sizes) == IntArrayRef(b.sizes) &&
                      IntArrayRef(a.strides) == IntArrayRef(b.strides);
        }
        if (same_meta) {
          for (size_t k = 0; k < n.outputs.size(); ++k)
            remap[size_t(n.outputs[k])] = prev.outputs[k];
          dead[i] = true;
          continue;
        }
      }
      seen.emplace(std::move(key), i);
    }
    if (!is_view_node(n))
      for (int v : n.outputs) ++version[size_t(g.values[size_t(v)].buffer)];
  }
  apply_remap(g, remap);
  return compact(std::move(g), dead);
}

// ---------------------------------------------------------------- folding and simplification

Graph fold(const Graph& g0) {
  Graph g = g0;
  const std::vector<int> refs = referenced_values_per_buffer(g);
  const std::vector<int> writer = last_writer(g);
  std::vector<int> remap(g.values.size(), -1);
  std::vector<bool> dead(g.nodes.size(), false);
  auto later_writes = [&](int v, size_t i) {
    const size_t b = size_t(g.values[size_t(v)].buffer);
    return b < writer.size() && writer[b] > int(i);  // (a constant folded here has no writer)
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (int& v : n.inputs)
      while (v >= 0 && remap[size_t(v)] >= 0) v = remap[size_t(v)];
    // view chains (transpose of a transpose, reshape of a reshape): one as_strided of the base
    if (is_view_node(n) && n.inputs.size() == 1 && n.inputs[0] >= 0 && n.outputs.size() == 1) {
      const Value& in = g.values[size_t(n.inputs[0])];
      if (in.is_view && in.producer >= 0 && size_t(in.producer) < i &&
          is_view_node(g.nodes[size_t(in.producer)]) &&
          g.nodes[size_t(in.producer)].inputs.size() == 1) {
        const Value& out = g.values[size_t(n.outputs[0])];
        const OpDef* as_strided = &OF_OP("as_strided");
        n.inputs[0] = g.nodes[size_t(in.producer)].inputs[0];
        n.op = as_strided;
        // size, stride, offset, and the base's storage offset (as the public as_strided gives)
        n.attrs = shape_detail::AsStridedAttrs::make(out.sizes, out.strides, out.offset,
                                                     g.values[size_t(n.inputs[0])].offset);
      }
      continue;
    }
    if (!replaceable_outputs(g, i, refs, writer) || n.outputs.size() != 1) continue;
    const Value& out = g.values[size_t(n.outputs[0])];
    // constant folding: every input a constant, nothing random, a small result
    bool all_const = !n.op->has(kFactory) || n.inputs.empty();
    for (int v : n.inputs)
      if (v >= 0 && g.buffers[size_t(g.values[size_t(v)].buffer)].kind != BufKind::Constant)
        all_const = false;
    if (all_const && !n.op->has(kRandom) && out.numel() <= 4096 && n.op->cpu &&
        out.device.is_cpu() && !is_graph_output(g, n.outputs[0])) {
      TensorList ins;
      for (int v : n.inputs) {
        if (v < 0) {
          ins.push_back(Tensor());
          continue;
        }
        const Value& iv = g.values[size_t(v)];
        Tensor base(g.buffers[size_t(iv.buffer)].impls[0]);
        ins.push_back(make_view(base, iv.sizes, iv.strides, iv.offset));
      }
      Tensor res = make_empty(out.sizes, out.dtype, out.device);
      if (!out.strides.empty()) {
        res.impl()->strides = out.strides;
        res.impl()->refresh_contiguous();
      }
      TensorList outs{res};
      {
        KernelScope scope;
        n.op->cpu(KernelArgs{ins, n.attrs, outs});
      }
      res.impl()->is_wrapped_number = false;
      Buffer b;
      b.kind = BufKind::Constant;
      b.nbytes = res.impl()->storage->nbytes;
      b.device = out.device;
      b.impls = {res.impl_ptr()};
      g.buffers.push_back(std::move(b));
      Value cv = out;
      cv.buffer = int(g.buffers.size()) - 1;
      cv.offset = 0;
      cv.producer = -1;
      remap[size_t(n.outputs[0])] = g.add_value(std::move(cv));
      g.buffers.back().root_value = remap[size_t(n.outputs[0])];  // its geometry (saved graphs)
      remap.push_back(-1);
      dead[i] = true;
      continue;
    }
    // algebraic identities (OpDef::fold_identities): x*1, 1*x, x/1, x+0, 0+x, x-0, x**1, and
    // copies/casts that change nothing
    int keep = -1;
    auto same_as_out = [&](int v) {
      if (v < 0) return false;
      const Value& x = g.values[size_t(v)];
      return x.dtype == out.dtype && IntArrayRef(x.sizes) == IntArrayRef(out.sizes) &&
             IntArrayRef(x.strides) == IntArrayRef(out.strides) && !later_writes(v, i);
    };
    for (const FoldIdentity& id : n.op->fold_identities) {
      const size_t k = size_t(id.keep);
      if (k >= n.inputs.size()) continue;
      double c = 0;
      bool holds = false;
      switch (id.kind) {
        case FoldIdentity::kOtherInputIs:
          holds = n.inputs.size() == 2 && constant_scalar(g, n.inputs[1 - k], c) && c == id.value;
          break;
        case FoldIdentity::kScalarAttrIs:
          // the one attribute, a Scalar or a double (pow_scalar's exponent: a test of Scalar
          // alone never held, so x ** 1 was not folded)
          if (n.attrs.size() == 1) {
            const AttrValue& v = n.attrs.values[0];
            if (const Scalar* s = std::get_if<Scalar>(&v)) holds = s->to_double() == id.value;
            else if (const double* d = std::get_if<double>(&v)) holds = *d == id.value;
          }
          break;
        case FoldIdentity::kSameLayout:
          holds = n.inputs.size() == 1 && g.values[size_t(n.inputs[k])].contiguous();
          break;
      }
      if (holds && same_as_out(n.inputs[k])) {
        keep = n.inputs[k];
        break;
      }
    }
    if (keep >= 0 && !is_graph_output(g, n.outputs[0])) {
      remap[size_t(n.outputs[0])] = keep;
      dead[i] = true;
    }
  }
  apply_remap(g, remap);
  return compact(std::move(g), dead);
}

// ---------------------------------------------------------------- elementwise fusion

namespace {
// CPU groups run each member's CPU kernel; CUDA groups become one generated kernel (every
// member on the output's device and with a generated form).
bool fusible(const Graph& g, const Node& n, bool cuda) {
  if (!n.op->has(kElementwise) || n.op->has(kRandom) || n.rng >= 0) return false;
  if (!(cuda ? n.op->cuda : n.op->cpu)) return false;
  if (n.outputs.size() != 1) return false;
  const Value& o = g.values[size_t(n.outputs[0])];
  if ((cuda ? !o.device.is_cuda() : !o.device.is_cpu()) || !o.contiguous() ||
      o.numel() < kMinFuseNumel)
    return false;
  for (int v : n.inputs)
    if (v < 0 || g.values[size_t(v)].device != o.device) return false;
  return !cuda || fused_unsupported(g, n).empty();
}

Graph fuse_groups(const Graph& g0, bool cuda);
}  // namespace

Graph fuse(const Graph& g0) { return fuse_groups(g0, false); }
Graph fuse_cuda(const Graph& g0) { return fuse_groups(g0, true); }

namespace {
Graph fuse_groups(const Graph& g0, bool cuda) {
  Graph g = g0;
  g.groups.clear();
  for (Node& n : g.nodes) n.group = -1;
  std::vector<int> cur;
  DimVector shape;
  std::unordered_map<int, int> written;             // buffer -> the value written in `cur`
  std::unordered_map<int, std::vector<int>> reads;  // buffer -> values read in `cur`
  // A group saves memory passes when a member reads another's result or members share an
  // input; side-by-side members with neither (the head split's three transposing copies) only
  // add a gather per block.
  auto pays = [&] {
    std::unordered_set<int> made, read;
    for (int i : cur) made.insert(g.nodes[size_t(i)].outputs[0]);
    for (int i : cur)
      for (int v : g.nodes[size_t(i)].inputs) {
        if (v < 0) continue;
        if (made.count(v) || !read.insert(v).second) return true;
      }
    return false;
  };
  auto close = [&] {
    if (cur.size() >= 2 && pays()) {
      const int id = int(g.groups.size());
      for (int i : cur) g.nodes[size_t(i)].group = id;
      g.groups.push_back(cur);
    }
    cur.clear();
    written.clear();
    reads.clear();
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (is_view_node(n)) continue;  // views run nothing; a view of a group value materializes it
    if (!fusible(g, n, cuda)) {
      close();
      continue;
    }
    const Value& o = g.values[size_t(n.outputs[0])];
    bool join =
        !cur.empty() && IntArrayRef(o.sizes) == IntArrayRef(shape) && cur.size() < kMaxGroupNodes;
    // Consecutive same-shape nodes share one pass over memory, connected or side by side
    // (Adam's moment updates read the gradient next to each other).
    if (join) {
      bool conflict = false;
      // reading memory the group writes through another geometry breaks block locality
      for (int v : n.inputs) {
        auto w = written.find(g.values[size_t(v)].buffer);
        if (w != written.end() && w->second != v) conflict = true;
      }
      const int ob = o.buffer;
      auto w = written.find(ob);
      if (w != written.end() && w->second != n.outputs[0]) conflict = true;
      auto r = reads.find(ob);
      if (r != reads.end())
        for (int v : r->second)
          if (v != n.outputs[0]) conflict = true;
      join = !conflict;
    }
    if (!join) {
      close();
      shape = o.sizes;
    }
    cur.push_back(int(i));
    for (int v : n.inputs) reads[g.values[size_t(v)].buffer].push_back(v);
    written[o.buffer] = n.outputs[0];
  }
  close();
  // Group values that something outside the group reads (or that outlive the call) are
  // written to their buffers; the rest live only in per-thread block scratch.
  g.materialized.assign(g.values.size(), false);
  const std::vector<int> refs = referenced_values_per_buffer(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (int v : n.inputs) {
      if (v < 0) continue;
      const Value& val = g.values[size_t(v)];
      if (val.producer >= 0 && g.nodes[size_t(val.producer)].group >= 0 &&
          g.nodes[size_t(val.producer)].group != n.group)
        g.materialized[size_t(v)] = true;
    }
  }
  for (int v : g.outputs) g.materialized[size_t(v)] = true;
  for (const GradEffect& e : g.grad_effects)
    if (e.value >= 0) g.materialized[size_t(e.value)] = true;
  for (const Node& n : g.nodes) {
    if (n.group < 0) continue;
    const int v = n.outputs[0];
    const Value& val = g.values[size_t(v)];
    const Buffer& b = g.buffers[size_t(val.buffer)];
    if (n.writes_existing || b.kind != BufKind::Intermediate || b.escapes ||
        refs[size_t(val.buffer)] > 1)
      g.materialized[size_t(v)] = true;
  }
  return g;
}
}  // namespace

// ---------------------------------------------------------------- steps and lifetimes

std::vector<int> step_of_nodes(const Graph& g) {
  std::vector<int> last_of_group(g.groups.size(), -1);
  for (size_t k = 0; k < g.groups.size(); ++k) last_of_group[k] = g.groups[k].back();
  std::vector<int> step(g.nodes.size(), -1);
  int s = 0;
  // a group runs where its last node was; its other nodes take that step too
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (is_view_node(n)) continue;
    if (n.group >= 0 && last_of_group[size_t(n.group)] != int(i)) continue;
    step[i] = s++;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].group >= 0) step[i] = step[size_t(last_of_group[size_t(g.nodes[i].group)])];
  return step;
}

namespace {
// Whether value v needs its buffer at run time (fused-away group values do not).
bool needs_memory(const Graph& g, int v) {
  const Value& val = g.values[size_t(v)];
  if (val.producer >= 0 && g.nodes[size_t(val.producer)].group >= 0 && !g.materialized.empty())
    return g.materialized[size_t(v)];
  return true;
}

}  // namespace

// First and last step at which each buffer is used (-1, -1: never).
std::vector<Interval> buffer_intervals(const Graph& g) {
  const std::vector<int> step = step_of_nodes(g);
  std::vector<Interval> iv(g.buffers.size());
  auto use = [&](int v, int s) {
    if (v < 0 || s < 0 || !needs_memory(g, v)) return;
    Interval& x = iv[size_t(g.values[size_t(v)].buffer)];
    if (x.first < 0 || s < x.first) x.first = s;
    x.last = std::max(x.last, s);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (is_view_node(g.nodes[i])) continue;
    for (int v : g.nodes[i].inputs) use(v, step[i]);
    for (int v : g.nodes[i].outputs) use(v, step[i]);
  }
  return iv;
}

// ---------------------------------------------------------------- rematerialization

namespace {

// Ops cheap enough to run twice: elementwise ones, one-pass ones (kCheapRecompute: layer
// norm, softmax), and random per-element ops (dropout) whose replay draws are fixed per call
// (a second run of the node gives the same bits).
bool cheap_to_recompute(const Graph& g, const Node& n) {
  if (n.writes_existing) return false;
  if (n.op->has(kView)) return n.inputs.size() == 1 && n.outputs.size() == 1;
  if (!n.op->cpu) return false;
  if ((n.op->has(kElementwise) || n.op->has(kCheapRecompute)) && !n.op->has(kRandom)) return true;
  if (n.op->has(kRandom) && n.rng >= 0 && n.inputs.size() == 1 && n.inputs[0] >= 0) {
    const int64_t in = g.values[size_t(n.inputs[0])].numel();
    for (int v : n.outputs)
      if (g.values[size_t(v)].numel() != in) return false;
    return true;
  }
  return false;
}

}  // namespace

Uses uses_of(const Graph& g) {
  Uses u;
  u.of_value.assign(g.values.size(), {});
  u.last_of_buffer.assign(g.buffers.size(), -1);
  u.writers.assign(g.buffers.size(), {});
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (int v : n.inputs) {
      if (v < 0) continue;
      u.of_value[size_t(v)].push_back(int(i));
      u.last_of_buffer[size_t(g.values[size_t(v)].buffer)] = int(i);
    }
    for (int v : n.outputs) {
      u.last_of_buffer[size_t(g.values[size_t(v)].buffer)] = int(i);
      if (!n.op->has(kView)) u.writers[size_t(g.values[size_t(v)].buffer)].push_back(int(i));
    }
  }
  return u;
}

namespace {

// Whether value v (read at node `at`) holds the same data at `at` as when it was made, and is
// still alive there without help: a root, or an intermediate someone reads at or after `at`.
bool available_at(const Graph& g, const Uses& u, int v, int at, int freeing) {
  const Value& val = g.values[size_t(v)];
  if (val.buffer == freeing) return false;  // the buffer being freed is what we recompute
  const Buffer& b = g.buffers[size_t(val.buffer)];
  const int made = val.producer;
  for (int w : u.writers[size_t(val.buffer)])
    if (w > made && w < at) return false;  // rewritten in between
  if (b.kind != BufKind::Intermediate)
    return b.kind == BufKind::Constant || b.kind == BufKind::External || b.kind == BufKind::Input ||
           b.kind == BufKind::HostScalar;
  return u.last_of_buffer[size_t(val.buffer)] >= at;
}

// The nodes (in order) that recompute v from values available at `at`; false if none do.
bool chain_for(const Graph& g, const Uses& u, int v, int at, int freeing, int depth,
               std::vector<int>& chain) {
  const Value& val = g.values[size_t(v)];
  if (val.producer < 0 || depth > 3) return false;
  const Node& n = g.nodes[size_t(val.producer)];
  if (!cheap_to_recompute(g, n)) return false;
  for (int in : n.inputs) {
    if (in < 0 || available_at(g, u, in, at, freeing)) continue;
    if (!chain_for(g, u, in, at, freeing, depth + 1, chain)) return false;
  }
  if (std::find(chain.begin(), chain.end(), val.producer) == chain.end())
    chain.push_back(val.producer);
  return true;
}

}  // namespace

// NOTE [Rematerialization]: a large intermediate made by a cheap op and read again only much
// later (an activation saved for backward) need not stay in memory in between: its late reads
// get a copy of its producing ops, run just before them from inputs that are alive there
// anyway. Recomputed values are bitwise the originals (same kernels, same inputs, the same
// generator draw for dropout).
Graph remat(const Graph& g0) {
  Graph g = g0;
  constexpr int kGap = 24;                  // nodes between two reads before it pays
  constexpr size_t kMinBytes = 256 * 1024;  // small tensors are not worth an extra pass
  static const bool debug = std::getenv("OF_TRACE_DEBUG_REMAT") != nullptr;
  for (int round = 0; round < 64; ++round) {
    const Uses u = uses_of(g);
    // the largest candidate first: a buffer written once by a cheap op, read through its value
    // and views of it, with a long gap between two reads
    std::vector<std::vector<int>> on_buffer(g.buffers.size());
    for (size_t v = 0; v < g.values.size(); ++v)
      on_buffer[size_t(g.values[v].buffer)].push_back(int(v));
    int best = -1, at = -1;
    size_t best_bytes = 0;
    std::vector<int> late;
    for (size_t b = 0; b < g.buffers.size(); ++b) {
      const Buffer& buf = g.buffers[b];
      if (buf.kind != BufKind::Intermediate || buf.escapes || buf.nbytes < kMinBytes ||
          buf.nbytes <= best_bytes || u.writers[b].size() != 1)
        continue;
      bool ok = true;
      std::vector<std::pair<int, int>> reads;  // (node, value)
      for (int v : on_buffer[b]) {
        const Value& val = g.values[size_t(v)];
        if (is_graph_output(g, v) || (val.producer < 0 && !u.of_value[size_t(v)].empty()))
          ok = false;
        for (int r : u.of_value[size_t(v)])
          if (!g.nodes[size_t(r)].op->has(kView)) reads.push_back({r, v});
      }
      if (!ok || reads.size() < 2) continue;
      std::sort(reads.begin(), reads.end());
      for (size_t k = 1; k < reads.size(); ++k) {
        if (reads[k].first - reads[k - 1].first <= kGap) continue;
        bool buildable = true;
        for (size_t j = k; j < reads.size() && buildable; ++j) {
          std::vector<int> chain;
          buildable = chain_for(g, u, reads[j].second, reads[k].first, int(b), 0, chain);
        }
        if (!buildable && debug)
          std::fprintf(stderr,
                       "[jit.trace] remat: buffer %zu (%zu bytes, made by %s) cannot be rebuilt at "
                       "node %d\n",
                       b, buf.nbytes, g.nodes[size_t(u.writers[b][0])].op->name.c_str(),
                       reads[k].first);
        if (buildable) {
          best = int(b);
          best_bytes = buf.nbytes;
          at = reads[k].first;
          late.clear();
          for (size_t j = k; j < reads.size(); ++j) late.push_back(reads[j].first);
        }
        break;
      }
    }
    if (best < 0) break;
    std::sort(late.begin(), late.end());
    late.erase(std::unique(late.begin(), late.end()), late.end());
    std::vector<int> chain;
    for (int r : late)
      for (int in : g.nodes[size_t(r)].inputs)
        if (in >= 0 && g.values[size_t(in)].buffer == best) chain_for(g, u, in, at, best, 0, chain);
    std::sort(chain.begin(), chain.end());  // node order is a valid order for the clones
    if (debug) {
      std::string ops;
      for (int c : chain) ops += g.nodes[size_t(c)].op->name + " ";
      std::fprintf(stderr,
                   "[jit.trace] remat: buffer %d (%zu bytes) before node %d (%zu late reads): %s\n",
                   best, best_bytes, at, late.size(), ops.c_str());
    }
    // clone the chain right before `at`; late readers read the clones
    std::vector<int> remap(g.values.size(), -1);
    std::vector<Node> clones;
    for (int ni : chain) {
      Node c = g.nodes[size_t(ni)];
      for (int& in : c.inputs)
        if (in >= 0 && remap[size_t(in)] >= 0) in = remap[size_t(in)];
      for (int& out : c.outputs) {
        Value nv = g.values[size_t(out)];
        if (c.op->has(kView)) {
          nv.buffer = g.values[size_t(c.inputs[0])].buffer;  // a view of the recomputed value
        } else {
          Buffer nb = g.buffers[size_t(nv.buffer)];
          nb.arena_offset = -1;
          g.buffers.push_back(nb);
          nv.buffer = int(g.buffers.size()) - 1;
        }
        nv.producer = -1;  // set below, once the node's index is known
        const int id = g.add_value(std::move(nv));
        remap.push_back(-1);
        remap[size_t(out)] = id;
        out = id;
      }
      clones.push_back(std::move(c));
    }
    for (int r : late) {
      Node& n = g.nodes[size_t(r)];
      for (int& in : n.inputs)
        if (in >= 0 && remap[size_t(in)] >= 0) in = remap[size_t(in)];
    }
    std::vector<Node> nodes;
    nodes.reserve(g.nodes.size() + clones.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (int(i) == at)
        for (Node& c : clones) nodes.push_back(std::move(c));
      nodes.push_back(std::move(g.nodes[i]));
    }
    g.nodes = std::move(nodes);
    for (Value& v : g.values) v.producer = -1;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (size_t k = 0; k < g.nodes[i].outputs.size(); ++k) {
        Value& v = g.values[size_t(g.nodes[i].outputs[k])];
        if (g.nodes[i].writes_existing && k == 0) continue;
        if (v.producer < 0) v.producer = int(i);
      }
  }
  return g;
}

// ---------------------------------------------------------------- memory-aware scheduling

// NOTE [Memory-aware scheduling]: recorded order is eager order, and eager order is not always
// kind to memory: backward computes a linear layer's input gradient (a new large buffer) before
// its weight gradient, the last reader of the layer's input activation, so both are alive
// together. The pass first moves every view node up to just after the node that made its
// input (a view runs nothing and reads no data where it stands), then moves each node that
// frees memory (the last reader of arena buffers worth more than the ones it makes) above the
// independent nodes before it that make an arena buffer, as far as each such step holds:
// between the two, the freed buffers and the new one no longer coexist. Independent means: no
// value of one is an input of the other, neither writes a buffer the other reads or writes,
// and neither is a collective, has effects or reads data on the host (every rank keeps one
// order of collectives). An elementwise node feeding an elementwise reader of its shape is not
// moved (that would split a fused group). Both orders run the same kernels on the same data,
// so results are bitwise the same.
namespace {
Graph reordered(Graph g, const std::vector<int>& order) {
  std::vector<int> new_id(g.nodes.size(), -1);
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t k = 0; k < order.size(); ++k) {
    new_id[size_t(order[k])] = int(k);
    nodes.push_back(std::move(g.nodes[size_t(order[k])]));
  }
  g.nodes = std::move(nodes);
  for (Value& v : g.values)
    if (v.producer >= 0) v.producer = new_id[size_t(v.producer)];
  for (std::vector<int>& grp : g.groups)
    for (int& i : grp) i = new_id[size_t(i)];
  return g;
}

Graph hoist_views(const Graph& g) {
  const size_t n = g.nodes.size();
  // a view goes right after the latest node before it that wrote one of its inputs (an
  // in-place write lists the value it writes as its output; ties keep recorded order)
  std::vector<int> writer(g.values.size(), -1);
  std::vector<std::pair<double, int>> key(n);
  for (size_t i = 0; i < n; ++i) {
    double k = double(i);
    if (is_view_node(g.nodes[i])) {
      int after = -1;
      for (int v : g.nodes[i].inputs)
        if (v >= 0) after = std::max(after, writer[size_t(v)]);
      k = double(after) + 0.5 + double(i) / double(4 * n + 4);  // between `after` and the next
    }
    key[i] = {k, int(i)};
    for (int v : g.nodes[i].outputs) writer[size_t(v)] = int(i);
  }
  std::stable_sort(key.begin(), key.end());
  std::vector<int> order(n);
  bool moved = false;
  for (size_t k = 0; k < n; ++k) {
    order[k] = key[k].second;
    moved = moved || order[k] != int(k);
  }
  return moved ? reordered(g, order) : g;
}
}  // namespace

Graph schedule(const Graph& g0) {
  Graph g = hoist_views(g0);
  const size_t n = g.nodes.size();
  if (n < 2) return g;
  auto placed = [&](int b) {  // an arena buffer: intermediate, not outliving the call
    const Buffer& B = g.buffers[size_t(b)];
    return B.kind == BufKind::Intermediate && !B.escapes;
  };
  std::vector<int> first(g.buffers.size(), -1), last(g.buffers.size(), -1);
  std::vector<std::vector<int>> reads(n), writes(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& nd = g.nodes[i];
    for (int v : nd.inputs)
      if (v >= 0) reads[i].push_back(g.values[size_t(v)].buffer);
    if (!is_view_node(nd))
      for (int v : nd.outputs) writes[i].push_back(g.values[size_t(v)].buffer);
    for (const std::vector<int>* l : {&reads[i], &writes[i]})
      for (int b : *l) {
        if (first[size_t(b)] < 0) first[size_t(b)] = int(i);
        last[size_t(b)] = int(i);
      }
  }
  for (int v : g.outputs) last[size_t(g.values[size_t(v)].buffer)] = int(n);  // never freed
  auto uses = [&](int i, int b) {
    const std::vector<int>& r = reads[size_t(i)];
    const std::vector<int>& w = writes[size_t(i)];
    return std::find(r.begin(), r.end(), b) != r.end() ||
           std::find(w.begin(), w.end(), b) != w.end();
  };
  auto barrier = [&](int i) {
    const OpDef* op = g.nodes[size_t(i)].op;
    return op->has(kCollective) || op->has(kEffect) || op->has(kSyncsHost);
  };
  auto independent = [&](int a, int b) {            // a runs before b today
    const auto& made = g.nodes[size_t(a)].outputs;  // in place or not, b may read what a makes
    for (int v : g.nodes[size_t(b)].inputs)
      if (v >= 0 && std::find(made.begin(), made.end(), v) != made.end()) return false;
    for (int w : writes[size_t(a)])
      if (uses(b, w)) return false;
    for (int w : writes[size_t(b)])
      if (uses(a, w)) return false;
    return true;
  };
  auto made = [&](int i) {  // bytes of arena buffers node i is the first to use
    size_t m = 0;
    for (int b : writes[size_t(i)])
      if (placed(b) && first[size_t(b)] == i) m += g.buffers[size_t(b)].nbytes;
    return m;
  };
  auto freed = [&](int i, int other) {  // ... the last to use, untouched by `other`
    size_t f = 0;
    std::vector<int> seen;
    for (const std::vector<int>* l : {&reads[size_t(i)], &writes[size_t(i)]})
      for (int b : *l)
        if (placed(b) && last[size_t(b)] == i && !uses(other, b) &&
            std::find(seen.begin(), seen.end(), b) == seen.end()) {
          seen.push_back(b);
          f += g.buffers[size_t(b)].nbytes;
        }
    return f;
  };
  // an elementwise node whose result an elementwise node of its shape reads stays put: moving
  // it away from that reader would split a fused group (relu's backward: gt, then where)
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t i = 0; i < n; ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0) readers[size_t(v)].push_back(int(i));
  auto feeds_fusion = [&](int i) {
    const Node& nd = g.nodes[size_t(i)];
    if (!nd.op->has(kElementwise) || nd.outputs.size() != 1) return false;
    const Value& o = g.values[size_t(nd.outputs[0])];
    for (int r : readers[size_t(nd.outputs[0])]) {
      const Node& rn = g.nodes[size_t(r)];
      if (rn.op->has(kElementwise) && rn.outputs.size() == 1 &&
          IntArrayRef(g.values[size_t(rn.outputs[0])].sizes) == IntArrayRef(o.sizes))
        return true;
    }
    return false;
  };
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = int(i);
  bool moved = false;
  for (size_t i = 1; i < n; ++i) {
    const int b = order[i];
    if (barrier(b) || is_view_node(g.nodes[size_t(b)]) || feeds_fusion(b)) continue;
    const size_t own = made(b);
    size_t target = i;
    for (size_t j = i; j > 0; --j) {
      const int a = order[j - 1];
      if (barrier(a) || !independent(a, b)) break;
      if (is_view_node(g.nodes[size_t(a)])) continue;  // passed only on the way to a gain
      if (made(a) == 0 || freed(b, a) <= own) break;
      target = j - 1;
    }
    if (target == i) continue;
    std::rotate(order.begin() + std::ptrdiff_t(target), order.begin() + std::ptrdiff_t(i),
                order.begin() + std::ptrdiff_t(i) + 1);
    moved = true;
  }
  return moved ? reordered(g, order) : g;
}

// ---------------------------------------------------------------- in-place reuse

namespace {
// Whether result oo may be written over input xo, which dies at step `at`: two arena buffers
// (intermediate, not outliving the call), x's at least as large, one dtype, shape and dense
// layout from the buffers' start. (Callers check that x's buffer is read under no other
// geometry there.)
bool can_take(const Graph& g, const std::vector<Interval>& iv, int xo, int oo, int at) {
  const Value &x = g.values[size_t(xo)], &o = g.values[size_t(oo)];
  const int bx = x.buffer, bo = o.buffer;
  if (bx == bo) return false;
  const Buffer &X = g.buffers[size_t(bx)], &O = g.buffers[size_t(bo)];
  if (X.kind != BufKind::Intermediate || O.kind != BufKind::Intermediate || X.escapes ||
      O.escapes || X.nbytes < O.nbytes)
    return false;
  if (x.dtype != o.dtype || !(IntArrayRef(x.sizes) == IntArrayRef(o.sizes)) || !x.contiguous() ||
      !o.contiguous() || x.offset != 0 || o.offset != 0)
    return false;
  return iv[size_t(bx)].last == at;  // x is read no later
}

// The result's buffer `from` is given up: it and every value on it (views too) move to `to`.
void move_buffer(Graph& g, std::vector<Interval>& iv, int from, int to) {
  for (Value& v : g.values)
    if (v.buffer == from) v.buffer = to;
  iv[size_t(to)].last = std::max(iv[size_t(to)].last, iv[size_t(from)].last);
  iv[size_t(from)] = Interval{};
  g.buffers[size_t(from)].nbytes = 0;
}
}  // namespace

Graph inplace(const Graph& g0) {
  Graph g = g0;
  const std::vector<int> refs = referenced_values_per_buffer(g);
  const std::vector<int> step = step_of_nodes(g);
  std::vector<Interval> iv = buffer_intervals(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.group >= 0 || n.writes_existing || !n.op->has(kInplaceOk) || n.inputs.empty() ||
        n.inputs[0] < 0 || n.outputs.size() != 1)
      continue;
    const int xo = n.inputs[0], oo = n.outputs[0];
    const int bx = g.values[size_t(xo)].buffer;
    // other inputs must not be x's memory under another geometry: refs == 1 ensures it
    if (refs[size_t(bx)] == 1 && can_take(g, iv, xo, oo, step[i]))
      move_buffer(g, iv, g.values[size_t(oo)].buffer, bx);
  }
  // NOTE [In-place fused groups]: a group's result written by its last member may take the
  // buffer of an input that dies at the group (the GELU backward writing over the incoming
  // gradient): the group runs block by block and every member reads a block of its inputs
  // before the last member writes that block of the result, and blocks are disjoint.
  for (const std::vector<int>& grp : g.groups) {
    const Node& last = g.nodes[size_t(grp.back())];
    if (last.writes_existing || last.outputs.size() != 1) continue;
    const int oo = last.outputs[0];
    if (g.materialized.empty() || !g.materialized[size_t(oo)]) continue;
    // per buffer: the distinct values the group's members read on it
    std::unordered_map<int, std::vector<int>> read_on;
    for (int ni : grp)
      for (int v : g.nodes[size_t(ni)].inputs) {
        if (v < 0) continue;
        std::vector<int>& l = read_on[g.values[size_t(v)].buffer];
        if (std::find(l.begin(), l.end(), v) == l.end()) l.push_back(v);
      }
    auto take_one = [&] {  // the first input, in member order, whose buffer the result can take
      for (int ni : grp)
        for (int xo : g.nodes[size_t(ni)].inputs) {
          if (xo < 0) continue;
          const Value& x = g.values[size_t(xo)];
          if (x.producer >= 0 && g.nodes[size_t(x.producer)].group == last.group) continue;
          if (read_on[x.buffer].size() == 1 && can_take(g, iv, xo, oo, step[size_t(grp.back())])) {
            move_buffer(g, iv, g.values[size_t(oo)].buffer, x.buffer);
            return;
          }
        }
    };
    take_one();
  }
  return g;
}

// ---------------------------------------------------------------- memory planning

size_t intermediate_bytes(const Graph& g) {
  size_t total = 0;
  for (const Buffer& b : g.buffers)
    if (b.kind == BufKind::Intermediate && !b.escapes) total += b.nbytes;
  return total;
}

size_t arena_bytes(const Graph& g) {
  size_t end = 0;
  for (const Buffer& b : g.buffers)
    if (b.arena_offset >= 0) end = std::max(end, size_t(b.arena_offset) + b.nbytes);
  return (end + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

// NOTE [Memory plan]: two placements of the arena buffers (intermediates that do not outlive
// the call), the smaller arena kept:
// - a sweep over the steps: at step s the buffers first used at s are placed in the
//   best-fitting free block (the smallest that holds them; else the end of the arena grows),
//   then the buffers last used at s are freed and merged with free neighbours;
// - greedy by size: largest buffers first, each at the lowest offset where it overlaps no
//   placed buffer whose lifetime overlaps its own (the sweep cannot see that a large buffer
//   born later wants the room a small one takes now; this order can).
// Both keep buffers of overlapping lifetimes apart. Inputs, outputs, externals and
// .grad-bound buffers are never placed here.
namespace {
size_t arena_round(size_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

// candidates: the buffers to place; returns each one's offset (by buffer id) and the arena end
std::pair<std::vector<int64_t>, size_t> plan_sweep(const Graph& g, const std::vector<Interval>& iv,
                                                   const std::vector<int>& candidates) {
  std::vector<int64_t> at(g.buffers.size(), -1);
  int nsteps = 0;
  for (int b : candidates) nsteps = std::max(nsteps, iv[size_t(b)].last + 1);
  std::vector<std::vector<int>> starts(static_cast<size_t>(nsteps)),
      ends(static_cast<size_t>(nsteps));
  for (int b : candidates) {
    starts[size_t(iv[size_t(b)].first)].push_back(b);
    ends[size_t(iv[size_t(b)].last)].push_back(b);
  }
  std::map<size_t, size_t> free_blocks;  // offset -> size
  size_t end = 0;
  for (int s = 0; s < nsteps; ++s) {
    // larger buffers first: they are the hardest to fit
    std::vector<int>& st = starts[size_t(s)];
    std::sort(st.begin(), st.end(), [&](int a, int b) {
      return g.buffers[size_t(a)].nbytes > g.buffers[size_t(b)].nbytes;
    });
    for (int b : st) {
      const size_t need = arena_round(g.buffers[size_t(b)].nbytes);
      auto best = free_blocks.end();
      for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it)
        if (it->second >= need && (best == free_blocks.end() || it->second < best->second))
          best = it;
      size_t off;
      if (best != free_blocks.end()) {
        off = best->first;
        const size_t rest = best->second - need;
        free_blocks.erase(best);
        if (rest) free_blocks[off + need] = rest;
      } else if (!free_blocks.empty() &&
                 std::prev(free_blocks.end())->first + std::prev(free_blocks.end())->second ==
                     end) {
        // the last free block touches the end: grow it
        auto last = std::prev(free_blocks.end());
        off = last->first;
        free_blocks.erase(last);
        end = off + need;
      } else {
        off = end;
        end += need;
      }
      at[size_t(b)] = int64_t(off);
    }
    for (int b : ends[size_t(s)]) {
      size_t off = size_t(at[size_t(b)]);
      size_t size = arena_round(g.buffers[size_t(b)].nbytes);
      auto next = free_blocks.lower_bound(off);
      if (next != free_blocks.end() && off + size == next->first) {
        size += next->second;
        next = free_blocks.erase(next);
      }
      if (next != free_blocks.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
          off = prev->first;
          size += prev->second;
          free_blocks.erase(prev);
        }
      }
      free_blocks[off] = size;
    }
  }
  return {std::move(at), end};
}

std::pair<std::vector<int64_t>, size_t> plan_by_size(const Graph& g,
                                                     const std::vector<Interval>& iv,
                                                     std::vector<int> order) {
  std::vector<int64_t> at(g.buffers.size(), -1);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const size_t sa = arena_round(g.buffers[size_t(a)].nbytes);
    const size_t sb = arena_round(g.buffers[size_t(b)].nbytes);
    if (sa != sb) return sa > sb;
    return iv[size_t(a)].first < iv[size_t(b)].first;
  });
  std::vector<int> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed, time-overlapping
  size_t end = 0;
  for (int b : order) {
    const size_t need = arena_round(g.buffers[size_t(b)].nbytes);
    const Interval& t = iv[size_t(b)];
    busy.clear();
    for (int p : placed) {
      const Interval& u = iv[size_t(p)];
      if (u.first <= t.last && t.first <= u.last)
        busy.push_back({size_t(at[size_t(p)]),
                        size_t(at[size_t(p)]) + arena_round(g.buffers[size_t(p)].nbytes)});
    }
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo >= off + need) break;  // the gap before this one holds it
      off = std::max(off, hi);
    }
    at[size_t(b)] = int64_t(off);
    end = std::max(end, off + need);
    placed.push_back(b);
  }
  return {std::move(at), end};
}
}  // namespace

Graph memplan(const Graph& g0) {
  Graph g = g0;
  const std::vector<Interval> iv = buffer_intervals(g);
  std::vector<int> candidates;
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    Buffer& buf = g.buffers[b];
    buf.arena_offset = -1;
    if (buf.kind != BufKind::Intermediate || buf.escapes || buf.nbytes == 0 || iv[b].first < 0)
      continue;
    candidates.push_back(int(b));
  }
  auto sweep = plan_sweep(g, iv, candidates);
  auto by_size = plan_by_size(g, iv, candidates);
  const std::vector<int64_t>& at = by_size.second < sweep.second ? by_size.first : sweep.first;
  for (int b : candidates) g.buffers[size_t(b)].arena_offset = at[size_t(b)];
  return g;
}

}  // namespace oneflow::trace

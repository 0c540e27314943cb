// pass_simplify.cpp: the passes that simplify a recorded graph: dead code (dce), common
// subexpressions (cse), folding of identities and constants (fold). Each is a pure Graph -> Graph
// function with its own switch and test (NOTE [Pass table]).
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

#include "trace/pass_util.h"

namespace oneflow::trace {
using namespace pass_util;

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

}  // namespace oneflow::trace

// rewrite_epilogue.cpp: the GEMM epilogue rewrite (TraceOptions::epilogue).
#include <algorithm>
#include <cmath>

#include "trace/executor.h"
#include "trace/rewrite_match.h"

namespace oneflow::trace {
using namespace rewrite;

namespace {

// ---------------------------------------------------------------- GEMM epilogues
// NOTE [GEMM epilogue rewrite] (the kernel side: NOTE [GEMM epilogues] in cpu/blas.h): a
// linear whose output only a chain of elementwise steps reads, directly or through a reshape of
// the contiguous output (how linear folds a batch of rows),
//   y = linear(x, w, b); [y' = view(y)]; [z = act(y')]; [z = mul(z, c)]; [z = add(z, r)]
// (act: relu, gelu in both forms, silu, tanh; c a constant scalar of the output's dtype; r a
// tensor of the output's shape, computed before the linear and not written up to the add),
// becomes linear_act(x, w, b[, r]) {act, scale c} writing the final z into y; the readers of z
// read y' instead. The steps run on each output tile right after the GEMM's sums (float32 on
// AVX-512; else after the GEMM), the activation with the op's own function, the multiply and
// the add as separate roundings: bitwise the unfused replay. Conditions: y (and y') and each
// step's output read only by the next step, none returned but the last's readers, the CPU, a
// float dtype; at least one step. The values that lived in the last step's output buffer (views
// of it) move to the linear's buffer.

// Whether a graph output lives in buffer b (a view of a value there is returned), or b is not an
// arena intermediate.
bool buffer_returned(const Graph& g, int b) {
  for (int v : g.outputs)
    if (g.values[size_t(v)].buffer == b) return true;
  return g.buffers[size_t(b)].kind != BufKind::Intermediate || g.buffers[size_t(b)].escapes;
}

}  // namespace

Graph fuse_epilogue(const Graph& g0) {
  Graph g = g0;
  const Uses u = uses_of(g);
  std::vector<bool> dead(g.nodes.size(), false);
  std::vector<int> remap(g.values.size(), -1), moved_buffer(g.buffers.size(), -1);
  const OpDef* linear = &OF_OP("linear");
  const OpDef* mul = &OF_OP("mul");
  const OpDef* add = &OF_OP("add");
  for (size_t li = 0; li < g.nodes.size(); ++li) {
    const Node& l = g.nodes[li];
    if (l.op != linear || l.writes_existing) continue;
    const int y = l.outputs[0];
    int x = y, c = single_use(g, u, y);
    if (c >= 0 && is_view(g.nodes[size_t(c)])) {
      const Node& v = g.nodes[size_t(c)];
      const Value& in = g.values[size_t(y)];
      const Value& o = g.values[size_t(v.outputs[0])];
      if (v.inputs.size() != 1 || !in.contiguous() || !o.contiguous() || in.numel() != o.numel() ||
          in.offset != o.offset)
        continue;
      x = v.outputs[0];
      c = single_use(g, u, x);
    }
    if (c < 0) continue;
    const Value& yv = g.values[size_t(y)];
    const Value& xv = g.values[size_t(x)];
    // the chain: each step's node, its output; t the value the next step must read
    std::vector<int> steps;
    std::string act, why;
    double scale = 1.0;
    int residual = -1, t = x;
    auto step_ok = [&](const Node& n) {  // an elementwise step over t keeping its geometry
      const Value& o = g.values[size_t(n.outputs[0])];
      if (n.writes_existing) why = fmt::format("the {} writes in place", n.op->name);
      else if (o.sizes != xv.sizes || o.dtype != yv.dtype || !o.contiguous())
        why = fmt::format("the {} changes the geometry or the dtype", n.op->name);
      else if (u.writers[size_t(o.buffer)].size() != 1)
        why = fmt::format("the {}'s output buffer is written by other nodes", n.op->name);
      else if (o.offset != xv.offset)
        why = fmt::format("the {}'s output starts elsewhere in its buffer", n.op->name);
      return why.empty();
    };
    // [act]
    if (c >= 0) {
      const Node& a = g.nodes[size_t(c)];
      // an epilogue activation (NOTE [Epilogue activations]): the form of this node
      if (!a.op->epilogue_acts.empty() && a.inputs[0] == t)
        act = a.op->epilogue_acts[a.op->epilogue_form ? a.op->epilogue_form(a.attrs) : 0].name;
      if (!act.empty()) {
        if (!step_ok(a)) act.clear();
        else {
          steps.push_back(c);
          t = a.outputs[0];
          c = single_use(g, u, t);
        }
      }
    }
    // [mul by a constant scalar of the output's dtype]
    if (why.empty() && c >= 0 && g.nodes[size_t(c)].op == mul) {
      const Node& m = g.nodes[size_t(c)];
      const int other = m.inputs[0] == t ? m.inputs[1] : m.inputs[1] == t ? m.inputs[0] : -1;
      double cval = 0;
      if (other >= 0 && other != t && constant_scalar(g, other, cval) &&
          g.values[size_t(other)].dtype == yv.dtype && std::isfinite(cval) && step_ok(m)) {
        scale = cval;
        steps.push_back(c);
        t = m.outputs[0];
        c = single_use(g, u, t);
      }
    }
    // [add a residual]
    if (why.empty() && c >= 0 && g.nodes[size_t(c)].op == add) {
      const Node& a = g.nodes[size_t(c)];
      const int r = a.inputs[0] == t ? a.inputs[1] : a.inputs[1] == t ? a.inputs[0] : -1;
      if (r >= 0 && r != t) {
        const Value& rv = g.values[size_t(r)];
        if (rv.sizes != xv.sizes || rv.dtype != yv.dtype || rv.device != yv.device)
          why = "the add's other operand is not a residual of the output's shape and dtype";
        else if (rv.producer >= int(li)) why = "the residual is computed after the linear";
        else if (written_between(u, rv.buffer, int(li) - 1, c + 1) || rv.buffer == yv.buffer)
          why = "the residual's buffer is written between the linear and the add";
        else if (step_ok(a)) {
          residual = r;
          steps.push_back(c);
          t = a.outputs[0];
        }
      }
    }
    if (steps.empty() && why.empty()) continue;
    if (why.empty()) {
      if (!yv.device.is_cpu() || !is_floating_point(yv.dtype))
        why = fmt::format("{} on {}", dtype_name(yv.dtype), yv.device.str());
      else if (is_graph_output(g, t) || buffer_returned(g, g.values[size_t(t)].buffer))
        why = "the last step's output is returned";
      else if (u.writers[size_t(yv.buffer)].size() != 1)
        why = "the linear's output buffer is written by other nodes";
    }
    if (!why.empty()) {
      g.rewrites.push_back(fmt::format("epilogue: linear at node {} refused: {}", li, why));
      continue;
    }
    std::string what;
    for (int sidx : steps)
      what += fmt::format("{}{} at node {}", what.empty() ? "" : " + ",
                          g.nodes[size_t(sidx)].op->name, sidx);
    g.rewrites.push_back(
        fmt::format("epilogue: linear at node {} + {} -> linear_act ({}{}{}, output {})", li, what,
                    act.empty() ? "no activation" : act,
                    scale != 1.0 ? fmt::format(", scale {:.6g}", scale) : std::string(),
                    residual >= 0 ? ", residual" : "", shape_str(yv.sizes)));
    Node f = l;
    f.op = &OF_OP("linear_act");
    f.attrs = LinearActAttrs::make(act.empty() ? "none" : act, scale);
    if (residual >= 0) {
      // linear's input list is (x, w, b): b may be absent (-1), the residual goes fourth
      while (f.inputs.size() < 3) f.inputs.push_back(-1);
      f.inputs.push_back(residual);
    }
    g.nodes[li] = std::move(f);
    for (int sidx : steps) dead[size_t(sidx)] = true;
    remap[size_t(t)] = x;
    moved_buffer[size_t(g.values[size_t(t)].buffer)] = yv.buffer;
  }
  for (Node& n : g.nodes)
    for (int& v : n.inputs)
      if (v >= 0 && remap[size_t(v)] >= 0) v = remap[size_t(v)];
  // The values that lived in a dropped step's output buffer (views of its output that later
  // nodes read) now live in the linear's, at the same offsets (both contiguous from the same
  // offset): the memory plan must see those reads as reads of the linear's buffer.
  for (Value& v : g.values)
    if (moved_buffer[size_t(v.buffer)] >= 0) v.buffer = moved_buffer[size_t(v.buffer)];
  return compact(std::move(g), dead);
}

}  // namespace oneflow::trace

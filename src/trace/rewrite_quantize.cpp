// rewrite_quantize.cpp: the int8-weight rewrite (TraceOptions::quantize_int8).
#include <algorithm>
#include <cmath>

#include "trace/executor.h"
#include "trace/rewrite_match.h"

namespace oneflow::trace {
using namespace rewrite;

// ---------------------------------------------------------------- int8 weights
// TraceOptions::quantize_int8: a float32 `linear` on the CPU whose weight is a tensor the graph
// only reads (a parameter or a constant) becomes linear_dynamic_int8 (NOTE [Dynamic int8
// linear]): its replay quantizes the weight once (NOTE [Prepacked weights]) and each call's
// activations per row. A weight the graph computes or writes is refused (it is not constant).
Graph quantize_int8(const Graph& g0) {
  Graph g = g0;
  const Uses u = uses_of(g);
  const OpDef* linear = &OF_OP("linear");
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.op != linear || n.writes_existing) continue;
    const Value& w = g.values[size_t(n.inputs[1])];
    const Buffer& b = g.buffers[size_t(w.buffer)];
    std::string why;
    if (!w.device.is_cpu() || w.dtype != kFloat32 ||
        g.values[size_t(n.inputs[0])].dtype != kFloat32)
      why = fmt::format("{} on {} (int8 weights replace float32 ones on the CPU)",
                        dtype_name(w.dtype), w.device.str());
    else if (b.kind != BufKind::External && b.kind != BufKind::Constant)
      why = "the weight is computed in the graph, not a parameter or a constant";
    else if (!u.writers[size_t(w.buffer)].empty()) why = "the graph writes the weight";
    if (!why.empty()) {
      g.rewrites.push_back(fmt::format("quantize: linear at node {} refused: {}", i, why));
      continue;
    }
    n.op = &OF_OP("linear_dynamic_int8");
    g.rewrites.push_back(fmt::format(
        "quantize: linear at node {} -> linear_dynamic_int8 (weight {})", i, shape_str(w.sizes)));
  }
  return g;
}

}  // namespace oneflow::trace

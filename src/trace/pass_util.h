// pass_util.h (internal): what the pass files (trace/pass_*.cpp) share beyond trace/passes.h:
// view nodes, value remapping, the readers and writers of buffers.
#pragma once
#include <cstddef>
#include <vector>

#include "trace/graph.h"
#include "trace/passes.h"

namespace oneflow::trace::pass_util {

inline bool is_view_node(const Node& n) { return n.op->has(kView); }
// Replaces every use of value v by remap[v] (followed to its end; -1 or v itself: kept).
void apply_remap(Graph& g, const std::vector<int>& remap);
// Per buffer: the distinct values anything references (node inputs/outputs, outputs, effects).
std::vector<int> referenced_values_per_buffer(const Graph& g);
// Per buffer: the last node index that writes it (-1: none).
std::vector<int> last_writer(const Graph& g);
// Whether node i's outputs can be replaced by other values (CSE, folding): fresh intermediates
// that nothing else aliases, writes, returns or binds.
bool replaceable_outputs(const Graph& g, size_t i, const std::vector<int>& refs,
                         const std::vector<int>& writer);

}  // namespace oneflow::trace::pass_util

// graph_checks.h (internal): the verification of a graph read from a file (graph_checks.cpp).
#pragma once
#include <string>
#include <vector>

#include "trace/graph.h"

namespace oneflow::trace {

// Errors about a graph file: "[jit.load] <path> is not a valid traced graph: <what>".
struct FileErrors {
  std::string path;
  [[noreturn]] void bad(const std::string& what) const;
};

inline bool same_dims(const DimVector& a, const DimVector& b) {
  return IntArrayRef(a) == IntArrayRef(b);
}

// More elements than any tensor of a file may have (2^56; NOTE [Loaded arena limit]).
bool too_many_elements(const DimVector& sizes);
// Everything the passes, the executor and the kernels rely on, derived again from the inputs
// and attrs, and the node order (NOTE [Loaded op signatures], NOTE [Loaded node order]); a
// graph that says otherwise is refused through `errors`.
void check_semantics(const Graph& g, const FileErrors& errors);

}  // namespace oneflow::trace

// pass_table.h (internal): NOTE [Pass table]: the trace passes, one row each, in the order the
// recipe runs them. Everything about a pass that is not its code derives from its row: its name
// (OF_TRACE_PASSES and the error listing the names), its TraceOptions switch, whether
// TraceOptions::exact() turns it off, and where dead-code elimination runs again. Adding a pass
// is its row (pass_table.cpp), its file (declared in trace/passes.h, listed in src/meson.build)
// and its test; a TraceOptions setter only where programs should switch it (OF_TRACE_PASSES
// switches every row).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "oneflow/jit.h"
#include "trace/graph.h"
#include "trace/passes.h"

namespace oneflow::trace {

struct PassRow {
  const char* name;
  Graph (*run)(const Graph&);
  Graph (*run_cuda)(const Graph&);  // for a graph of CUDA tensors
  // its switch in TraceOptions (nullptr: switched only by OF_TRACE_PASSES)
  bool jit::TraceOptions::*option;
  // it sums floats in another order than the recorded ops: TraceOptions::exact() turns it off
  // (a replay then equals the eager call bitwise on the CPU)
  bool reorders_float;
  // it can leave nodes nobody reads (a merged, folded or rewritten node's old producers): `dce`
  // runs again before the next pass of another family
  bool leaves_dead_nodes;
  // passes of one family run back to back, without a `dce` between them (0: no family)
  uint8_t family;
};

// The rows, in recipe order (pass_table.cpp).
std::span<const PassRow> pass_rows();
inline constexpr size_t kMaxPasses = 32;

// Whether each row of kPasses runs: the options' switches, then OF_TRACE_PASSES ("-fuse,+cse":
// an unknown name raises, listing the names), then exact() (the program's promise of exact
// replays wins over the environment).
using PassSwitches = std::array<bool, kMaxPasses>;  // by row; rows past the table: unused
PassSwitches pass_switches(const jit::TraceOptions& options);

// The passes to run, in order, for `s`: the rows that are on, with `dce` (when on) again after
// a run of passes that leave dead nodes, before the next pass of another family and at the end.
std::vector<const PassRow*> pass_recipe(const PassSwitches& s);

// NOTE [The pass recipe]: the recipe run plainly on the CPU, for `exact` (a loaded symbolic graph
// instantiated at a new shape); jit's compile() runs the same recipe timed, with the CUDA
// fallback around `fuse`.
Graph optimize(const Graph& g, bool exact = false);

}  // namespace oneflow::trace

// symbolic.h (internal): one recording that serves a range of input shapes.
// NOTE [Symbolic shapes]: a traced function whose inputs have dims declared symbolic
// (TraceOptions::dynamic) is recorded at a few shapes of the declared ranges (the call's own
// and probes made from its inputs by repeating rows along the symbolic dims). The recordings
// must have one structure: the same ops, inputs, buffers and non-integer attributes. The
// integers in attributes that differ (reshape targets, narrow lengths, arange ends) are fitted
// as expressions of the symbols: floor(sum of c_m * monomial_m / den) over the products of the
// symbols (sums, products, floor division by constants), checked at one more shape. Sizes,
// strides and offsets of every tensor are not fitted: they are derived again at each new shape
// by running each node's infer_meta on its inputs (the layout dispatch would give a fresh
// output; views as infer_meta places them), and that derivation is checked to give the
// recording back at the recorded shape. A size-1 value of a symbol changes what dispatch
// records (a [1, n] transpose is contiguous, so no copy is made), so a symbol whose range holds
// 1 and more gets two structures: one recorded at 1 and one over the rest (`one_mask`).
// A new shape is then instantiated (attributes evaluated, geometry derived), optimized by the
// usual passes and lowered: it replays like any recorded signature, without running the
// function again.
#pragma once
#include <string>
#include <vector>

#include "trace/graph.h"
#include "trace/recording.h"

namespace oneflow::trace {

struct SymDim {
  std::string name;
  int64_t min = 1, max = 1;
};

// An integer of a recorded attribute as a function of the symbols.
struct AttrExpr {
  int node = -1, attr = -1;
  int elem = -1;             // -1: an int64 (or integer Scalar) attr; else an element of its dims
  std::vector<int64_t> num;  // per monomial m (bit i: symbol i is a factor), scaled by den
  int64_t den = 1;
  int64_t eval(const std::vector<int64_t>& vals) const;
};

struct SymbolicGraph {
  std::vector<SymDim> symbols;
  std::vector<std::vector<int>> input_dims;  // per input, per dim: its symbol (-1: fixed)
  uint32_t one_mask = 0;                     // symbols this structure serves at value 1 only
  Graph tmpl;                                // the recording at `recorded`
  std::vector<int64_t> recorded;
  std::vector<AttrExpr> exprs;
};

// The symbol values of a call; an of::Error names the input, the dim, the symbol and its range
// when a size leaves the range or disagrees with another use of the symbol. `who` starts it.
std::vector<int64_t> bind_symbols(const std::vector<SymDim>& symbols,
                                  const std::vector<std::vector<int>>& input_dims,
                                  const std::vector<Tensor>& inputs, const char* who);
// Which structure serves these values (bit i: symbol i is 1 and its range holds more).
uint32_t one_mask_of(const std::vector<SymDim>& symbols, const std::vector<int64_t>& vals);
// The concrete graph at `vals` (attributes evaluated, every geometry derived by infer_meta).
Graph instantiate(const SymbolicGraph& s, const std::vector<int64_t>& vals);

// The shapes to record one structure at: the grid of two values per free symbol (the first
// is `actual` where it belongs to the structure), then check points: a third value of each
// symbol, every symbol at its low end, and each at its high end alone (a size the function
// branches on shows as another graph or an attribute off its expression there; a branch that
// changes the graph only strictly between the probed sizes is not seen).
struct ProbePlan {
  std::vector<std::vector<int64_t>> grid;
  std::vector<std::vector<int64_t>> checks;
  uint32_t free = 0;  // symbols that vary within the structure
};
ProbePlan probe_plan(const std::vector<SymDim>& symbols, uint32_t one_mask,
                     const std::vector<int64_t>& actual);
// `inputs` resized to the symbol values `vals` by repeating (or dropping) rows along each
// symbolic dim: valid data (token ids stay ids) of the probe's shape.
std::vector<Tensor> probe_inputs(const std::vector<Tensor>& inputs,
                                 const std::vector<std::vector<int>>& input_dims,
                                 const std::vector<int64_t>& vals);
// Fits the attribute expressions of one structure from its recordings (the grid of
// probe_plan, then its check points) and checks the result; an of::Error says which op or
// tensor cannot follow the symbols.
SymbolicGraph fit_symbolic(const std::vector<SymDim>& symbols,
                           const std::vector<std::vector<int>>& input_dims, uint32_t one_mask,
                           const ProbePlan& plan, std::vector<Graph> graphs);

// Writes the structures of one symbolic signature (format version 2, NOTE [Graph file blobs]).
void save_symbolic(const std::vector<SymbolicGraph>& structures, const std::string& path);

}  // namespace oneflow::trace

// rewrite_match.h (internal): what the inference rewrites (trace/rewrite_*.cpp) share to match
// chains of recorded ops: views that regroup lead dims, operand chains through copies, single
// readers, writes between two nodes, transposed operands.
#pragma once
#include <vector>

#include "ops/core_attrs.h"
#include "ops/elementwise_attrs.h"
#include "ops/nn_attrs.h"
#include "ops/reduce_common.h"
#include "trace/graph.h"
#include "trace/passes.h"

namespace oneflow::trace::rewrite {

// The attribute schemas the rewrites read and write.
using core_detail::CopyAttrs;
using nn_detail::AddNormAttrs;
using nn_detail::FusedAttnAttrs;
using nn_detail::LinearActAttrs;
using nn_detail::NormAttrs;
using reduce_detail::SoftmaxAttrs;

inline bool is_view(const Node& n) { return n.op->has(kView); }

// A view node that only regroups the leading dims of a contiguous tensor (the last two dims,
// the offset and the element order unchanged): how matmul folds batch dims for bmm.
bool is_lead_reshape(const Graph& g, const Node& n);

// What a bmm operand holds, back through lead reshapes and same-dtype copies (a copy's input
// may have any strides): vals[0] is the operand, vals[i + 1] the value nodes[i] made vals[i]
// from. The fused node reads one of them in place of the copies.
struct OperandChain {
  std::vector<int> vals, nodes;
};
OperandChain operand_chain(const Graph& g, int v);

inline DimVector lead_of(const Value& v) { return DimVector(v.sizes.begin(), v.sizes.end() - 2); }
int64_t prod_of(const DimVector& d);

// The single node reading v (-1: none, several, or v is returned).
int single_use(const Graph& g, const Uses& u, int v);

// Whether any node in (from, to) writes buffer b.
bool written_between(const Uses& u, int b, int from, int to);

// Whether `val` is x with its last two dims swapped: a view of x's storage with that geometry,
// or a same-dtype copy of one.
bool is_transposed_of(const Graph& g, int val, int x);
// The nodes that made a transposed operand (is_transposed_of): its copy and its view.
void transposed_nodes(const Graph& g, int val, std::vector<int>& nodes);

}  // namespace oneflow::trace::rewrite

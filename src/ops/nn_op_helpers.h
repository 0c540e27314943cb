// nn_op_helpers.h (internal): what the nn op definitions (not their kernels) share, written with
// public ops and autograd: a loss's reduction and the fused backward ops' VJP.
#pragma once
#include <string>

#include "autograd/node.h"
#include "oneflow/ops_nn.h"
#include "ops/nn_common.h"

namespace oneflow::nn_detail {

static_assert(int(kReduceNone) == int(Reduction::None) &&
              int(kReduceMean) == int(Reduction::Mean) && int(kReduceSum) == int(Reduction::Sum));

// ---------------------------------------------------------------- losses: helpers

inline Tensor reduce_loss(const Tensor& l, int64_t reduction) {
  if (reduction == Reduction::Mean) return l.mean();
  if (reduction == Reduction::Sum) return l.sum();
  return l;
}

// The fused backward ops are recorded under create_graph like any op, but their own VJP is
// not implemented: differentiating through one again is an error when that backward runs
// (as PyTorch's "derivative ... is not implemented"), never a silently missing term.
inline TensorList fused_backward_vjp(const VjpCtx& c, const TensorList&) {
  std::string fwd = c.op().name;
  fwd.resize(fwd.size() - std::string("_backward").size());
  fail(
      "[{}] double backward through the fused {} op is not implemented (a gradient taken "
      "with create_graph=true was differentiated again)",
      c.op().name, fwd);
}

}  // namespace oneflow::nn_detail

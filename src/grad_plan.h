// grad_plan.h (internal): what dispatch decides about autograd before anything runs (the global
// layer shares it): whether the result records a node, the in-place and out= rules, and the
// pre-write copy of an in-place op's input its VJP reads.
#pragma once
#include "op_def.h"

namespace oneflow {

struct GradPlan {
  bool needs_grad = false;
  TensorList snapshot;
};
GradPlan plan_autograd(const OpDef& op, const TensorList& inputs, const Tensor* out);

}  // namespace oneflow

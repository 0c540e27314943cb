// decompose.cpp: ops run by their decomposition (decompose.h).
#include "decompose.h"

#include "autograd/node.h"
#include "oneflow/ops.h"
#include "shapes.h"

namespace oneflow {

namespace {
OF_TLS bool t_prefer_decompositions = false;
}  // namespace

PreferDecompositions::PreferDecompositions() : prev_(t_prefer_decompositions) {
  t_prefer_decompositions = true;
}
PreferDecompositions::~PreferDecompositions() { t_prefer_decompositions = prev_; }
bool prefer_decompositions() { return t_prefer_decompositions; }

// Step 4 for an op that decomposes (NOTE [Decompositions]).
TensorList run_decomposition(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                             Tensor* out, const MetaList& metas, const GradPlan& gp) {
  TensorList outputs;
  {
    NoGradGuard ng;
    outputs = op.decompose(inputs, attrs);
  }
  if (outputs.size() != metas.size())
    fail("[{}] internal: its decomposition returned {} outputs, infer_meta says {}", op.name,
         outputs.size(), metas.size());
  for (size_t i = 0; i < metas.size(); ++i)
    if (!(outputs[i].sizes() == IntArrayRef(metas[i].sizes)) ||
        outputs[i].dtype() != metas[i].dtype)
      fail("[{}] internal: its decomposition's output {} is {} {}, infer_meta says {} {}", op.name,
           i, dtype_name(outputs[i].dtype()), shape_str(outputs[i].sizes()),
           dtype_name(metas[i].dtype), shape_str(metas[i].sizes));
  if (out) {
    NoGradGuard ng;
    out->copy_(outputs[0]);
    outputs[0] = *out;
  }
  if (gp.needs_grad)
    autograd::record(op, inputs, attrs, outputs, gp.snapshot.empty() ? nullptr : &gp.snapshot);
  return outputs;
}

}  // namespace oneflow

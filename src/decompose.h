// decompose.h (internal): running an op by its decomposition (NOTE [Decompositions] in
// op_def.h), the dispatcher's step for a device where the op has no kernel.
#pragma once
#include "grad_plan.h"
#include "op_def.h"

namespace oneflow {

// While one lives on a thread, ops with a decomposition run it even where they have a kernel
// (tests check decompositions on the CPU against the kernels; NOTE [Decompositions]).
struct PreferDecompositions {
  PreferDecompositions();
  ~PreferDecompositions();
  PreferDecompositions(const PreferDecompositions&) = delete;

 private:
  bool prev_;
};
bool prefer_decompositions();

// Runs `op`'s decomposition on `inputs` (validated by infer_meta into `metas`), checks what it
// returns against `metas`, writes `out` when given and records the op (not its inner ops) for
// autograd as `gp` says.
TensorList run_decomposition(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                             Tensor* out, const MetaList& metas, const GradPlan& gp);

}  // namespace oneflow

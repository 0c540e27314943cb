// node.h (internal): autograd graph nodes, saved tensors and the VJP context.
#pragma once
#include <memory>
#include <string>

#include "dispatch.h"
#include "oneflow/autograd.h"

namespace oneflow::autograd {

// Edge and Node are public (include/oneflow/autograd.h): t.grad_fn()->name() is libtorch's.

// Accumulates into a leaf's .grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& v) : variable(v) {}
  TensorList apply(TensorList&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::weak_ptr<TensorImpl> variable;
};

// A tensor saved for backward with the storage version it had, so in-place writes are caught.
struct SavedTensor {
  std::shared_ptr<TensorImpl> impl;  // inputs: the tensor itself; outputs: a detached alias
  uint32_t version = 0;
  bool is_output = false;
  bool defined = false;
};

struct TensorMetaLite {
  DimVector sizes;
  ScalarType dtype;
  Device device;
  std::shared_ptr<GlobalMeta> global;  // placement and SBP of a global tensor
};

// The node every dispatched differentiable op records.
struct OpNode final : Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  SmallVector<SavedTensor, 2> saved_inputs;   // one per input (undefined where not saved)
  SmallVector<SavedTensor, 1> saved_outputs;  // one per output
  SmallVector<TensorMetaLite, 2> input_metas;
  SmallVector<TensorMetaLite, 1> output_metas;
  uint32_t needs_grad_mask = 0;
  bool released = false;

  TensorList apply(TensorList&& grads) override;
  std::string name() const override;  // libtorch's: "MulBackward0" for mul
  void release_variables() override;
  size_t num_outputs() const override { return output_metas.size(); }
  Tensor zeros_for_output(size_t i) const override;
  Tensor unpack(const SavedTensor& s, bool output, size_t index) const;
};

}  // namespace oneflow::autograd

namespace oneflow {

// What a VJP sees: the saved inputs/outputs, attrs and input metadata.
class VjpCtx {
 public:
  explicit VjpCtx(const autograd::OpNode& n) : node_(n) {}
  Tensor input(size_t i) const;
  Tensor output(size_t i) const;
  const Attrs& attrs() const { return node_.attrs; }
  IntArrayRef input_sizes(size_t i) const { return node_.input_metas[i].sizes; }
  ScalarType input_dtype(size_t i) const { return node_.input_metas[i].dtype; }
  Device input_device(size_t i) const { return node_.input_metas[i].device; }
  size_t num_inputs() const { return node_.input_metas.size(); }
  bool needs_input_grad(size_t i) const { return (node_.needs_grad_mask >> i) & 1u; }
  const OpDef& op() const { return *node_.op; }

 private:
  const autograd::OpNode& node_;
};

namespace autograd {
// Records `op` applied to `inputs` producing `outputs` (called by dispatch).
void record(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList& outputs,
            const TensorList* saved_input_override = nullptr);
// The gradient edge of a tensor (its grad_fn, or its leaf accumulator).
Edge gradient_edge(const Tensor& t);
// Runs backward from `roots`; when `capture` is non-empty returns the gradients arriving at
// those edges instead of accumulating into leaves.
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                                 bool keep_graph, bool create_graph,
                                 const std::vector<Tensor>& capture, bool allow_unused);
}  // namespace autograd

}  // namespace oneflow

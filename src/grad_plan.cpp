// grad_plan.cpp: autograd's rules for a dispatched op, decided before it runs (grad_plan.h), and
// the grad mode they read (oneflow/guards.h).
#include "grad_plan.h"

#include "oneflow/guards.h"
#include "oneflow/ops.h"  // Tensor::clone for the pre-write snapshot

namespace oneflow {

namespace {
OF_TLS bool t_grad_enabled = true;
}  // namespace

bool grad_mode_enabled() { return t_grad_enabled; }
bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool e) { t_grad_enabled = e; }
NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { t_grad_enabled = prev_; }

GradPlan plan_autograd(const OpDef& op, const TensorList& inputs, const Tensor* out) {
  GradPlan gp;
  const bool grad_on = t_grad_enabled && op.vjp;
  bool& needs_grad = gp.needs_grad;
  if (grad_on) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!((op.nondiff_inputs >> i) & 1u) && inputs[i].defined() && inputs[i].requires_grad())
        needs_grad = true;
  }
  int out_alias = -1;
  TensorList& snapshot = gp.snapshot;
  if (out) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].is_same(*out)) out_alias = int(i);
    if (needs_grad || (out->requires_grad() && t_grad_enabled)) {
      if (out_alias < 0)
        fail(
            "[{}] out= arguments don't support automatic differentiation, but one of the "
            "arguments requires grad",
            op.name);
      if (out->is_leaf() && out->requires_grad())
        fail("[{}] a leaf tensor that requires grad is being used in an in-place operation",
             op.name);
      if (out->impl()->view_base && out->impl()->view_base->requires_grad)
        fail(
            "[{}] in-place operation on a view of a tensor that requires grad is not "
            "supported; use the out-of-place form",
            op.name);
      needs_grad = grad_on;
      if (needs_grad && ((op.save_inputs >> out_alias) & 1u)) {
        snapshot = inputs;  // the VJP must see the value before it is overwritten
        NoGradGuard ng;
        snapshot[out_alias] = inputs[out_alias].clone();
      }
    }
  }
  return gp;
}

}  // namespace oneflow

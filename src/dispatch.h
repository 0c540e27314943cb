// dispatch.h (internal): the one dispatch path every op runs through, and what watches it.
// NOTE [Dispatch path]: validate + infer meta -> [global hook] -> allocate -> kernel ->
// [autograd: record node] -> [tracer hook]. Ops never allocate or record on their own.
// Op definitions include this header; kernels include kernel_support.h instead (they never
// dispatch: NOTE [No kernel dispatches]).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "decompose.h"
#include "grad_plan.h"
#include "kernel_support.h"
#include "op_def.h"
#include "op_table.h"
#include "promotion.h"
#include "shapes.h"
#include "trace_observer.h"
#include "oneflow/ops.h"  // op definitions are written with the public ops

namespace oneflow {

// Runs `op` on `inputs`. `out`, when given, receives the result (out= and in-place forms):
// its shape must equal the inferred one and the result dtype must be castable to its dtype.
TensorList dispatch(const OpDef& op, TensorList inputs, Attrs attrs = {}, Tensor* out = nullptr);
inline Tensor dispatch1(const OpDef& op, TensorList inputs, Attrs attrs = {},
                        Tensor* out = nullptr) {
  TensorList r = dispatch(op, std::move(inputs), std::move(attrs), out);
  return std::move(r[0]);
}

// Every (kernel's op, op it dispatched) pair seen in this process (NOTE [No kernel dispatches]).
std::vector<std::pair<std::string, std::string>> nested_dispatches();
// Tells the recorder, if one is active and no kernel runs, about a host read of `t`'s data.
void note_host_read(const Tensor& t, const char* what);
using GlobalDispatchHook = TensorList (*)(const OpDef& op, TensorList inputs, Attrs attrs,
                                          Tensor* out);
extern GlobalDispatchHook g_global_dispatch_hook;
bool grad_mode_enabled();

}  // namespace oneflow

// trace_observer.h (internal): the hook through which of::jit::trace sees what runs on its
// thread. Dispatch, the autograd engine, host reads and the generator call it; it names ops
// only through OpDef.
#pragma once
#include <cstdint>
#include <memory>

#include "op_def.h"

namespace oneflow {

// NOTE [Trace observer]: while of::jit::trace records on a thread, this observer sees every
// op dispatched there (not the ops kernels run internally), every access to a leaf's .grad,
// every host read and every draw from the generator. Null when nothing records.
struct TraceObserver {
  virtual ~TraceObserver() = default;
  // Before anything runs: refuses ops that read data on the host to know their shapes.
  virtual void before_op(const OpDef& op) = 0;
  // After the kernel: `out` is the caller's out=/in-place tensor (outputs[0] is written into
  // it), null when every output was freshly allocated.
  virtual void on_op(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                     const TensorList& outputs, const Tensor* out) = 0;
  // The .grad of `leaf` is about to be read or rebound.
  virtual void on_grad_access(const std::shared_ptr<TensorImpl>& leaf) = 0;
  // A host read of tensor data (item, to_vector, printing): raises while recording.
  virtual void on_host_read(const char* what) = 0;
  // `counters` Philox counters were reserved at (seed, offset).
  virtual void on_random(uint64_t seed, uint64_t offset, uint64_t counters) = 0;
};
extern OF_TLS TraceObserver* g_tracer;

}  // namespace oneflow

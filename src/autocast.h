// autocast.h (internal): the per-thread autocast state and the cast dispatch applies to an op's
// inputs while it is on (NOTE [Autocast] in amp.cpp).
#pragma once
#include "dispatch.h"

namespace oneflow::autocast_detail {

struct State {
  bool cpu = false;
  bool cuda = false;
  ScalarType cpu_dtype = kBFloat16;
  ScalarType cuda_dtype = kFloat16;
  int fp32_region = 0;  // > 0: inside a composite loss (every op's inputs go to float32)
  bool operator==(const State& o) const {
    return cpu == o.cpu && cuda == o.cuda && cpu_dtype == o.cpu_dtype && cuda_dtype == o.cuda_dtype;
  }
};
extern OF_TLS State t_state;

inline bool active() { return t_state.cpu || t_state.cuda; }
// Called by dispatch before anything else while active() (never for out=/in-place calls or
// ops a kernel dispatches): casts the inputs per the op's list (and a float32-list op's
// reduced-precision dtype attr, libtorch's fp32_set_opt_dtype).
void cast_inputs(const OpDef& op, TensorList& inputs, Attrs& attrs);

// The dtype dispatch's autocast step gives the floating input `t` of `op` (t's own when autocast
// is off, the op keeps it, or t is not floating): for a wrapper whose argument defaults depend
// on the dtype the op runs in (rms_norm's eps), so it needs no second pass over cast arguments.
ScalarType dtype_for(const OpDef& op, const Tensor& t);

// For the public functions that are composites of public ops standing for `op` (cross_entropy's
// probability targets, batch_norm over global samples): casts their arguments once, as
// dispatch's autocast would cast op's inputs. True when any changed. (An op's own dtype checks
// are its infer_meta's, which dispatch runs after the casts: no wrapper runs twice.)
bool autocast_args(const OpDef& op, std::initializer_list<Tensor*> args);

// NOTE [Reduced-precision fallback] (amp.cpp): ops whose CPU kernels compute in float32/float64
// only take float16/bfloat16 inputs by running in float32 between two casts.
bool needs_widening(const OpDef& op, const TensorList& inputs);
TensorList widened_dispatch(const OpDef& op, TensorList inputs, Attrs attrs);

// Autocast off over a scope: the autograd engine's backward pass (the casts recorded in the
// forward already carry the gradients back to each input's dtype).
struct Suspend {
  State saved = t_state;
  Suspend() { t_state.cpu = t_state.cuda = false; }
  ~Suspend() { t_state = saved; }
  Suspend(const Suspend&) = delete;
};

// A composite loss (written with public ops) runs in float32 under autocast, as libtorch's
// float32 list has it: every op inside casts float16/bfloat16 inputs up.
struct Float32Region {
  Float32Region() { ++t_state.fp32_region; }
  ~Float32Region() { --t_state.fp32_region; }
  Float32Region(const Float32Region&) = delete;
};

}  // namespace oneflow::autocast_detail

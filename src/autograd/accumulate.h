// accumulate.h (internal): whether this thread is inside the engine's accumulation of a leaf's
// gradient into its .grad. The tracer asks when a leaf's .grad is first touched in a recorded
// call (NOTE [Traced fresh .grad] in trace/recorder.cpp).
#pragma once

namespace oneflow::autograd {

bool accumulating_grad();

}  // namespace oneflow::autograd

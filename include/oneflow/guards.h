// guards.h: the scopes that change how ops run on this thread — autograd recording
// (NoGradGuard, EnableGradGuard, InferenceMode) and the kernels' thread count (ThreadLimitGuard)
// — and the process-wide thread count. Included by oneflow/ops.h.
#pragma once

namespace oneflow {

// Disables recording of autograd nodes in this scope.
struct NoGradGuard {
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  bool prev_;
};
// Re-enables recording inside a NoGradGuard scope.
struct EnableGradGuard {
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  bool prev_;
};
// libtorch's InferenceMode: here the same as NoGradGuard.
struct InferenceMode : NoGradGuard {
  explicit InferenceMode(bool enabled = true) { (void)enabled; }
};
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Threads used by CPU kernels for large tensors: one process-wide pool of this size. Calls
// made while another thread's kernel uses the pool run their own kernels on their own thread.
void set_num_threads(int n);
// The threads a kernel called from this thread may use (the pool's size, or a
// ThreadLimitGuard's cap).
int get_num_threads();

// Caps the threads kernels called from this thread use (GEMMs included) to `n` while it lives,
// e.g. ThreadLimitGuard guard(1) in a server handler that wants one core per request. Nested
// guards take the smaller cap.
class ThreadLimitGuard {
 public:
  explicit ThreadLimitGuard(int n);
  ~ThreadLimitGuard();
  ThreadLimitGuard(const ThreadLimitGuard&) = delete;
  ThreadLimitGuard& operator=(const ThreadLimitGuard&) = delete;

 private:
  int previous_;
};

}  // namespace oneflow

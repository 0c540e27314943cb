// amp.h: mixed precision. Autocast (libtorch's at::autocast: per-thread, per device type) runs
// the matmul/conv/linear/attention ops in a lower precision and the numerically sensitive ones
// (reductions, softmax, norms, losses) in float32, casting the inputs of each op as it is
// dispatched; of::amp::GradScaler scales the loss so that float16 gradients do not underflow,
// unscales before the update and skips the update on inf/NaN. Both work inside of::jit::trace.
// NOTE [Autocast] in src/amp.cpp lists the ops and the rules.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "oneflow/optim.h"
#include "oneflow/ordered_dict.h"
#include "oneflow/tensor.h"

namespace oneflow {

namespace autocast {
// libtorch's names: set_enabled / is_enabled for CUDA, the cpu_ variants for the CPU.
bool is_enabled();
void set_enabled(bool enabled);
bool is_cpu_enabled();
void set_cpu_enabled(bool enabled);
// The lower precision of each device type: float16 (CUDA default) or bfloat16 (CPU default;
// the CPU accepts only bfloat16, as libtorch's CPU autocast does).
ScalarType get_autocast_gpu_dtype();
void set_autocast_gpu_dtype(ScalarType dtype);
ScalarType get_autocast_cpu_dtype();
void set_autocast_cpu_dtype(ScalarType dtype);

// Autocast for one device type over a scope (Python's torch.autocast(device_type, dtype)):
//   { of::autocast::Guard amp(of::kCPU); loss = F::cross_entropy(model(x), y); }
// restores the previous state (enabled flag and dtype) on exit. `enabled` false turns autocast
// off inside the scope (a float32 island in an autocast region).
class Guard {
 public:
  explicit Guard(DeviceType device, std::optional<ScalarType> dtype = std::nullopt,
                 bool enabled = true);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  ScalarType prev_dtype_;
};
}  // namespace autocast
using AutocastGuard = autocast::Guard;

namespace amp {

struct GradScalerOptions {
  OF_ARG(double, init_scale) = 65536.0;
  OF_ARG(double, growth_factor) = 2.0;
  OF_ARG(double, backoff_factor) = 0.5;
  OF_ARG(int64_t, growth_interval) = 2000;
  OF_ARG(bool, enabled) = true;
};

// Dynamic loss scaling, PyTorch's torch.amp.GradScaler:
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);            // optional: before clipping the true gradients
//   scaler.step(optimizer);                // skipped when a gradient holds inf or NaN
//   scaler.update();                       // backoff after an overflow, growth after
//                                          // growth_interval clean steps
// The scale, the growth tracker and the inf check are 0-d tensors updated in place, so a
// traced training step (of::jit::trace) scales, checks and skips at every replay with no host
// read. Eagerly, step() reads the check on the host and calls the optimizer only when clean;
// while recording it runs the update and then keeps the old values of the parameters and the
// optimizer state where the check fired (the same bits either way). NOTE [GradScaler].
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale (the scale cast to the outputs' dtype); the outputs when disabled.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);
  // Divides the gradients of the optimizer's parameters by the scale in place and records
  // whether any of them is inf/NaN. At most once per optimizer between update()s.
  void unscale_(optim::Optimizer& optimizer);
  // unscale_ (unless done), then optimizer.step() unless a gradient was inf/NaN. Returns the
  // closure's loss (undefined when skipped eagerly or when there is none).
  Tensor step(optim::Optimizer& optimizer, optim::LossClosure closure = nullptr);
  // The scale for the next iteration from this iteration's checks; or set it outright.
  void update();
  void update(double new_scale);

  // Host reads (not inside a traced function): the current scale (1.0 when disabled) and the
  // number of clean steps since it last changed.
  double get_scale() const;
  const Tensor& scale_tensor() const { return scale_; }
  int64_t get_growth_tracker() const;
  const Tensor& growth_tracker_tensor() const { return growth_tracker_; }
  double get_growth_factor() const { return options_.growth_factor(); }
  double get_backoff_factor() const { return options_.backoff_factor(); }
  int64_t get_growth_interval() const { return options_.growth_interval(); }
  bool is_enabled() const { return options_.enabled(); }
  // "scale", "growth_tracker" (0-d tensors) and the options as 0-d float64 tensors.
  OrderedDict<std::string, Tensor> state_dict() const;
  void load_state_dict(const OrderedDict<std::string, Tensor>& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    Tensor found_inf;  // 0-d float32: 1 when a gradient was inf/NaN
  };
  PerOptimizer& per(optim::Optimizer& o);

  GradScalerOptions options_;
  Tensor scale_;           // 0-d float32
  Tensor growth_tracker_;  // 0-d int64: clean steps since the last change of scale
  std::unordered_map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace amp
}  // namespace oneflow

// optim.h: optimizers (of::optim::SGD, Adam, AdamW, RMSprop, Adagrad) with parameter groups,
// learning-rate schedulers, and gradient clipping (of::nn::utils). Update rules follow
// libtorch 1.13 exactly (the order of operations included), so trajectories match to rounding.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "oneflow/nn/module.h"
#include "oneflow/ops.h"
#include "oneflow/ordered_dict.h"

namespace oneflow::optim {

// Per-group hyper-parameters; every optimizer's options derive from this.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // Named numeric fields, for state_dict (bools as 0/1, betas as beta1/beta2).
  virtual std::vector<std::pair<std::string, double>> fields() const = 0;
  virtual void set_field(const std::string& name, double value) = 0;
};

// CRTP helper: clone() and lr accessors for an options struct with an `lr` OF_ARG.
template <class Derived> class OptimizerCloneableOptions : public OptimizerOptions {
 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  double get_lr() const override { return static_cast<const Derived&>(*this).lr(); }
  void set_lr(double lr) override { static_cast<Derived&>(*this).lr(lr); }
};

struct SGDOptions : OptimizerCloneableOptions<SGDOptions> {
  SGDOptions(double lr) : lr_(lr) {}
  OF_ARG(double, lr);
  OF_ARG(double, momentum) = 0;
  OF_ARG(double, dampening) = 0;
  OF_ARG(double, weight_decay) = 0;
  OF_ARG(bool, nesterov) = false;

 public:
  std::vector<std::pair<std::string, double>> fields() const override;
  void set_field(const std::string& name, double value) override;
};

using betas_t = std::tuple<double, double>;

struct AdamOptions : OptimizerCloneableOptions<AdamOptions> {
  AdamOptions(double lr = 1e-3) : lr_(lr) {}
  OF_ARG(double, lr);
  OF_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  OF_ARG(double, eps) = 1e-8;
  OF_ARG(double, weight_decay) = 0;
  OF_ARG(bool, amsgrad) = false;

 public:
  std::vector<std::pair<std::string, double>> fields() const override;
  void set_field(const std::string& name, double value) override;
};

struct AdamWOptions : OptimizerCloneableOptions<AdamWOptions> {
  AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  OF_ARG(double, lr);
  OF_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  OF_ARG(double, eps) = 1e-8;
  OF_ARG(double, weight_decay) = 1e-2;
  OF_ARG(bool, amsgrad) = false;

 public:
  std::vector<std::pair<std::string, double>> fields() const override;
  void set_field(const std::string& name, double value) override;
};

struct RMSpropOptions : OptimizerCloneableOptions<RMSpropOptions> {
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  OF_ARG(double, lr);
  OF_ARG(double, alpha) = 0.99;
  OF_ARG(double, eps) = 1e-8;
  OF_ARG(double, weight_decay) = 0;
  OF_ARG(double, momentum) = 0;
  OF_ARG(bool, centered) = false;

 public:
  std::vector<std::pair<std::string, double>> fields() const override;
  void set_field(const std::string& name, double value) override;
};

struct AdagradOptions : OptimizerCloneableOptions<AdagradOptions> {
  AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  OF_ARG(double, lr);
  OF_ARG(double, lr_decay) = 0;
  OF_ARG(double, weight_decay) = 0;
  OF_ARG(double, initial_accumulator_value) = 0;
  OF_ARG(double, eps) = 1e-10;

 public:
  std::vector<std::pair<std::string, double>> fields() const override;
  void set_field(const std::string& name, double value) override;
};

// Parameters sharing one set of options (the optimizer's defaults when none are given).
class OptimizerParamGroup {
 public:
  OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  OptimizerParamGroup(const OptimizerParamGroup& o)
      : params_(o.params_), options_(o.options_ ? o.options_->clone() : nullptr) {}
  OptimizerParamGroup& operator=(const OptimizerParamGroup& o) {
    params_ = o.params_;
    options_ = o.options_ ? o.options_->clone() : nullptr;
    return *this;
  }
  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

// Optional closure re-evaluating the loss (for optimizers that need it; returns the loss).
using LossClosure = std::function<Tensor()>;

class Optimizer {
 public:
  Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient; returns the closure's loss if given.
  virtual Tensor step(LossClosure closure = nullptr) = 0;
  // Clears gradients (set_to_none: drop them, as libtorch 2.x and PyTorch default; else zero).
  void zero_grad(bool set_to_none = true);
  void add_param_group(const OptimizerParamGroup& group);
  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  OptimizerOptions& defaults() { return *defaults_; }
  // All parameters of all groups, in order.
  std::vector<Tensor> parameters() const;

  // Per-parameter state (buffers and the step count) plus every group's options, as named
  // tensors: "state.<i>.<buffer>" (i counts parameters over groups in order), "state.<i>.step",
  // "param_groups.<g>.<option>" (0-d float64). load_state_dict checks everything first.
  OrderedDict<std::string, Tensor> state_dict() const;
  void load_state_dict(const OrderedDict<std::string, Tensor>& state);

  // For loss scaling (amp::GradScaler): the tensors that an update of the parameters with
  // gradients writes in place (each such parameter, its step count and its buffers, those that
  // exist now), and forgetting a parameter's state (an update that must not have happened).
  virtual std::vector<Tensor> update_targets() const;
  virtual bool has_state(const Tensor& p) const;
  virtual void drop_state(const Tensor& p) { state_.erase(p.impl()); }

 protected:
  // NOTE [Optimizer state as tensors]: the step count is a 0-d float64 tensor and the learning
  // rate reaches the update as a 0-d tensor (lr_tensor), so that a traced training step
  // advances the count and reads the scheduler's current lr at every replay; nothing that
  // changes from step to step is a host number frozen into a recorded graph.
  struct ParamState {
    Tensor step;  // 0-d float64 (undefined before the first update)
    OrderedDict<std::string, Tensor> buffers;
  };
  // The lr of group g as a 0-d float64 tensor (under of::jit::trace, read again at every replay).
  Tensor lr_tensor(size_t g);
  // Adds one to p's step count and returns it.
  Tensor& advance_step(ParamState& st);
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // lets traced graphs see our lifetime
  // The state of parameter p (created empty on first use).
  ParamState& state(const Tensor& p) { return state_[p.impl()]; }
  std::vector<OptimizerParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<OptimizerParamGroup> groups, SGDOptions defaults);
  SGD(std::vector<Tensor> params, SGDOptions defaults)
      : SGD(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults) {}
  Tensor step(LossClosure closure = nullptr) override;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<OptimizerParamGroup> groups, AdamOptions defaults = {});
  Adam(std::vector<Tensor> params, AdamOptions defaults = {})
      : Adam(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults) {}
  Tensor step(LossClosure closure = nullptr) override;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions defaults = {});
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = {})
      : AdamW(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults) {}
  Tensor step(LossClosure closure = nullptr) override;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<OptimizerParamGroup> groups, RMSpropOptions defaults = {});
  RMSprop(std::vector<Tensor> params, RMSpropOptions defaults = {})
      : RMSprop(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))},
                defaults) {}
  Tensor step(LossClosure closure = nullptr) override;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<OptimizerParamGroup> groups, AdagradOptions defaults = {});
  Adagrad(std::vector<Tensor> params, AdagradOptions defaults = {})
      : Adagrad(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))},
                defaults) {}
  Tensor step(LossClosure closure = nullptr) override;
};

// ---------------------------------------------------------------- learning-rate schedulers

// Sets every group's lr from the epoch count; call step() once per epoch (or per iteration
// for per-iteration schedules such as OneCycleLR). The initial lrs are read at construction.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  // Advances one epoch and writes the new lrs into the optimizer.
  void step();
  int64_t last_epoch() const { return epoch_; }
  // The lrs set by the last step (initial lrs before any step).
  std::vector<double> get_last_lr() const;

 protected:
  // lr of group g at epoch `epoch` given its initial lr.
  virtual double lr_at(int64_t epoch, size_t g, double base_lr) const = 0;
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
  friend class SequentialLR;
};

class SequentialLR;

// lr * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  int64_t step_size_;
  double gamma_;
};

// lr * gamma^(number of milestones <= epoch)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  std::vector<int64_t> milestones_;
  double gamma_;
};

// lr * gamma^epoch
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  double gamma_;
};

// eta_min + (lr - eta_min) (1 + cos(pi epoch / T_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up: factor from start_factor to end_factor over total_iters epochs.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  double start_, end_;
  int64_t total_;
};

// lr * lambda(epoch)
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lambda);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  std::function<double(int64_t)> lambda_;
};

// One-cycle policy (cosine annealing, PyTorch's defaults): warm up from max_lr/div_factor to
// max_lr over pct_start of total_steps, then down to max_lr/(div_factor*final_div_factor).
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25, double final_div_factor = 1e4);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  double max_lr_, pct_, div_, final_div_;
  int64_t total_;
};

// Runs `schedulers` one after another, switching at `milestones` (epochs).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);

 protected:
  double lr_at(int64_t epoch, size_t g, double base_lr) const override;
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace oneflow::optim

namespace oneflow::nn::utils {
// Scales all gradients so that their joint p-norm is at most max_norm; returns the norm
// before clipping (inf for norm_type = infinity).
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0);
// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);
}  // namespace oneflow::nn::utils

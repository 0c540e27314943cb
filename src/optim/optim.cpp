// Optimizers, schedulers and gradient clipping. NOTE [Optimizer updates]: each update is
// written with public ops under NoGradGuard, in libtorch 1.13's order of operations, on the
// parameter's own storage (in place), so modules, optimizers and checkpoints all see it.
#include "oneflow/optim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "oneflow/jit.h"
#include "oneflow/zero.h"
#include "global/global.h"
#include "trace/graph.h"
#include "trace/recording.h"

namespace oneflow::optim {

namespace {

constexpr double kPi = 3.14159265358979323846;

Tensor scalar64(double v) { return full({}, v, kFloat64); }

// The closure's loss, computed with gradients enabled (before the update runs without them).
Tensor evaluate(const LossClosure& closure) {
  if (!closure) return {};
  EnableGradGuard enable;
  return closure();
}

double lr_checked(double lr, const char* op) {
  if (!(lr >= 0)) fail("[{}] invalid learning rate: {}", op, lr);
  return lr;
}

}  // namespace

// ---------------------------------------------------------------- options fields

#define OF_FIELD(name) \
  { #name, double(name()) }
#define OF_SET_FIELD(name) \
  if (key == #name) return void(name(decltype(name##_)(v)))

std::vector<std::pair<std::string, double>> SGDOptions::fields() const {
  return {OF_FIELD(lr), OF_FIELD(momentum), OF_FIELD(dampening), OF_FIELD(weight_decay),
          OF_FIELD(nesterov)};
}
void SGDOptions::set_field(const std::string& key, double v) {
  OF_SET_FIELD(lr);
  OF_SET_FIELD(momentum);
  OF_SET_FIELD(dampening);
  OF_SET_FIELD(weight_decay);
  OF_SET_FIELD(nesterov);
  fail("[SGD] unknown option '{}'", key);
}

#define OF_ADAM_FIELDS(Options, Name)                                                        \
  std::vector<std::pair<std::string, double>> Options::fields() const {                      \
    return {OF_FIELD(lr),  {"beta1", std::get<0>(betas())}, {"beta2", std::get<1>(betas())}, \
            OF_FIELD(eps), OF_FIELD(weight_decay),          OF_FIELD(amsgrad)};              \
  }                                                                                          \
  void Options::set_field(const std::string& key, double v) {                                \
    if (key == "beta1") return void(std::get<0>(betas_) = v);                                \
    if (key == "beta2") return void(std::get<1>(betas_) = v);                                \
    OF_SET_FIELD(lr);                                                                        \
    OF_SET_FIELD(eps);                                                                       \
    OF_SET_FIELD(weight_decay);                                                              \
    OF_SET_FIELD(amsgrad);                                                                   \
    fail("[" Name "] unknown option '{}'", key);                                             \
  }
OF_ADAM_FIELDS(AdamOptions, "Adam")
OF_ADAM_FIELDS(AdamWOptions, "AdamW")
#undef OF_ADAM_FIELDS

std::vector<std::pair<std::string, double>> RMSpropOptions::fields() const {
  return {OF_FIELD(lr),           OF_FIELD(alpha),    OF_FIELD(eps),
          OF_FIELD(weight_decay), OF_FIELD(momentum), OF_FIELD(centered)};
}
void RMSpropOptions::set_field(const std::string& key, double v) {
  OF_SET_FIELD(lr);
  OF_SET_FIELD(alpha);
  OF_SET_FIELD(eps);
  OF_SET_FIELD(weight_decay);
  OF_SET_FIELD(momentum);
  OF_SET_FIELD(centered);
  fail("[RMSprop] unknown option '{}'", key);
}

std::vector<std::pair<std::string, double>> AdagradOptions::fields() const {
  return {OF_FIELD(lr), OF_FIELD(lr_decay), OF_FIELD(weight_decay),
          OF_FIELD(initial_accumulator_value), OF_FIELD(eps)};
}
void AdagradOptions::set_field(const std::string& key, double v) {
  OF_SET_FIELD(lr);
  OF_SET_FIELD(lr_decay);
  OF_SET_FIELD(weight_decay);
  OF_SET_FIELD(initial_accumulator_value);
  OF_SET_FIELD(eps);
  fail("[Adagrad] unknown option '{}'", key);
}
#undef OF_FIELD
#undef OF_SET_FIELD

// ---------------------------------------------------------------- Optimizer

OptimizerOptions& OptimizerParamGroup::options() const {
  if (!options_) fail("[optim] this parameter group has no options");
  return *options_;
}

Optimizer::Optimizer(std::vector<OptimizerParamGroup> groups,
                     std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  for (auto& g : groups) add_param_group(g);
}

void Optimizer::add_param_group(const OptimizerParamGroup& group) {
  OptimizerParamGroup g(group.params(),
                        group.has_options() ? group.options().clone() : defaults_->clone());
  std::set<const TensorImpl*> seen;
  for (const auto& existing : groups_)
    for (const Tensor& p : existing.params()) seen.insert(p.impl());
  for (const Tensor& p : g.params()) {
    if (!p.defined()) fail("[optim] a parameter group contains an undefined tensor");
    if (!p.is_leaf())
      fail("[optim] can't optimize a non-leaf tensor (shape {})", shape_str(p.sizes()));
    if (!p.is_floating_point())
      fail("[optim] can only optimize floating-point tensors, got {}", dtype_name(p.dtype()));
    if (!seen.insert(p.impl()).second)
      fail("[optim] some parameters appear in more than one parameter group");
  }
  lr_checked(g.options().get_lr(), "optim");
  groups_.push_back(std::move(g));
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> all;
  for (const auto& g : groups_) all.insert(all.end(), g.params().begin(), g.params().end());
  return all;
}

Tensor Optimizer::lr_tensor(size_t g) {
  return trace::host_scalar(
      groups_[g].options().get_lr(), [this, g] { return groups_[g].options().get_lr(); }, alive_);
}

Tensor& Optimizer::advance_step(ParamState& st) {
  if (!st.step.defined()) st.step = zeros({}, kFloat64);
  st.step.add_(1);
  return st.step;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_) nn::zero_grad_of(g.params(), set_to_none);
}

OrderedDict<std::string, Tensor> Optimizer::state_dict() const {
  OrderedDict<std::string, Tensor> out;
  int64_t i = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [name, value] : groups_[g].options().fields())
      out.insert(fmt::format("param_groups.{}.{}", g, name), scalar64(value));
    for (const Tensor& p : groups_[g].params()) {
      auto it = state_.find(p.impl());
      if (it != state_.end()) {
        if (it->second.step.defined())
          out.insert(fmt::format("state.{}.step", i), it->second.step.to(kInt64));
        for (const auto& b : it->second.buffers)
          out.insert(fmt::format("state.{}.{}", i, b.key()), b.value());
      }
      ++i;
    }
  }
  return out;
}

std::vector<Tensor> Optimizer::update_targets() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_)
    for (const Tensor& p : g.params()) {
      if (!p.grad().defined()) continue;
      out.push_back(p);
      auto it = state_.find(p.impl());
      if (it == state_.end()) continue;
      if (it->second.step.defined()) out.push_back(it->second.step);
      for (const auto& b : it->second.buffers) out.push_back(b.value());
    }
  return out;
}

bool Optimizer::has_state(const Tensor& p) const {
  auto it = state_.find(p.impl());
  return it != state_.end() && (it->second.step.defined() || it->second.buffers.size() != 0);
}

void Optimizer::load_state_dict(const OrderedDict<std::string, Tensor>& sd) {
  // Validate every key first (names, indices, shapes), then apply.
  const std::vector<Tensor> params = parameters();
  struct Pending {
    size_t index;
    std::string buffer;  // empty: step
    Tensor value;
  };
  std::vector<Pending> pending;
  std::vector<std::pair<size_t, std::pair<std::string, double>>> options;
  for (const auto& kv : sd) {
    const std::string& key = kv.key();
    const Tensor& v = kv.value();
    if (!v.defined()) fail("[load_state_dict] optimizer state '{}' is undefined", key);
    auto parse_index = [&](size_t start, size_t& end) -> size_t {
      end = key.find('.', start);
      if (end == std::string::npos) fail("[load_state_dict] malformed optimizer key '{}'", key);
      size_t idx = 0;
      for (size_t k = start; k < end; ++k) {
        if (key[k] < '0' || key[k] > '9')
          fail("[load_state_dict] malformed optimizer key '{}'", key);
        idx = idx * 10 + size_t(key[k] - '0');
      }
      return idx;
    };
    size_t end = 0;
    if (key.rfind("param_groups.", 0) == 0) {
      size_t g = parse_index(13, end);
      if (g >= groups_.size())
        fail("[load_state_dict] '{}' names parameter group {}, the optimizer has {}", key, g,
             groups_.size());
      if (v.numel() != 1) fail("[load_state_dict] option '{}' must be a single number", key);
      options.push_back({g, {key.substr(end + 1), v.to(kFloat64).item<double>()}});
    } else if (key.rfind("state.", 0) == 0) {
      size_t i = parse_index(6, end);
      if (i >= params.size())
        fail("[load_state_dict] '{}' names parameter {}, the optimizer has {}", key, i,
             params.size());
      std::string buffer = key.substr(end + 1);
      if (buffer == "step") {
        pending.push_back({i, "", v});
      } else {
        if (!(v.sizes() == params[i].sizes()))
          fail("[load_state_dict] optimizer state '{}' has shape {}, its parameter has shape {}",
               key, shape_str(v.sizes()), shape_str(params[i].sizes()));
        pending.push_back({i, buffer, v});
      }
    } else {
      fail("[load_state_dict] unexpected optimizer key '{}'", key);
    }
  }
  // option names are checked on a copy before any group changes
  std::vector<std::unique_ptr<OptimizerOptions>> staged;
  for (auto& g : groups_) staged.push_back(g.options().clone());
  for (auto& [g, nv] : options) staged[g]->set_field(nv.first, nv.second);
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].set_options(std::move(staged[g]));
  state_.clear();
  NoGradGuard guard;
  for (auto& p : pending) {
    ParamState& st = state(params[p.index]);
    if (p.buffer.empty()) {
      st.step = p.value.to(kFloat64).reshape({}).clone();
    } else {
      const Tensor& param = params[p.index];
      st.buffers.insert_or_assign(p.buffer, p.value.to(param.device(), param.dtype(), false, true));
    }
  }
}

// ---------------------------------------------------------------- SGD

SGD::SGD(std::vector<OptimizerParamGroup> groups, SGDOptions d)
    : Optimizer(std::move(groups), std::make_unique<SGDOptions>(d)) {
  lr_checked(d.lr(), "SGD");
  OF_CHECK(d.momentum() >= 0, "[SGD] invalid momentum value: {}", d.momentum());
  OF_CHECK(d.weight_decay() >= 0, "[SGD] invalid weight_decay value: {}", d.weight_decay());
  OF_CHECK(!d.nesterov() || (d.momentum() > 0 && d.dampening() == 0),
           "[SGD] nesterov momentum requires a momentum and zero dampening");
}

Tensor SGD::step(LossClosure closure) {
  Tensor loss = evaluate(closure);
  NoGradGuard guard;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    auto& group = groups_[gi];
    auto& o = static_cast<SGDOptions&>(group.options());
    Tensor lr = lr_tensor(gi);
    for (Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const Tensor lr_p = lr.to(p.dtype());
      Tensor d_p = p.grad();
      if (o.weight_decay() != 0) d_p = d_p + p * o.weight_decay();
      if (o.momentum() != 0) {
        ParamState& st = state(p);
        Tensor* buf = st.buffers.find("momentum_buffer");
        if (!buf) {
          buf = &st.buffers.insert("momentum_buffer", d_p.clone());
        } else {
          buf->mul_(o.momentum()).add_(d_p, 1 - o.dampening());
        }
        d_p = o.nesterov() ? d_p + *buf * o.momentum() : *buf;
      }
      p.sub_(d_p * lr_p);
    }
  }
  return loss;
}

// ---------------------------------------------------------------- Adam / AdamW

namespace {

// The shared Adam update (decoupled: AdamW's weight decay applied to p beforehand).
void adam_update(Tensor& p, Tensor grad, Tensor& step, OrderedDict<std::string, Tensor>& bufs,
                 const Tensor& lr, double beta1, double beta2, double eps, double l2,
                 bool amsgrad) {
  if (!bufs.contains("exp_avg")) {
    bufs.insert("exp_avg", zeros_like(p));
    bufs.insert("exp_avg_sq", zeros_like(p));
    if (amsgrad) bufs.insert("max_exp_avg_sq", zeros_like(p));
  }
  // step-dependent numbers first, as 0-d tensors (then the elementwise chain runs unbroken)
  const Tensor bc1 = 1 - pow(beta1, step);
  const Tensor bc2_sqrt = (1 - pow(beta2, step)).sqrt().to(p.dtype());
  const Tensor step_size = (lr / bc1).to(p.dtype());
  if (l2 != 0) grad = grad + p * l2;
  Tensor& m = bufs["exp_avg"];
  Tensor& v = bufs["exp_avg_sq"];
  m.mul_(beta1).add_(grad, 1 - beta1);
  v.mul_(beta2).add_(grad * grad, 1 - beta2);
  Tensor denom;
  if (amsgrad) {
    Tensor& vmax = bufs["max_exp_avg_sq"];
    vmax.copy_(maximum(vmax, v));
    denom = vmax.sqrt() / bc2_sqrt + eps;
  } else {
    denom = v.sqrt() / bc2_sqrt + eps;
  }
  p.sub_(m / denom * step_size);
}

void check_adam(double lr, double b1, double b2, double eps, double wd, const char* op) {
  lr_checked(lr, op);
  OF_CHECK(eps >= 0, "[{}] invalid epsilon value: {}", op, eps);
  OF_CHECK(b1 >= 0 && b1 < 1, "[{}] invalid beta parameter at index 0: {}", op, b1);
  OF_CHECK(b2 >= 0 && b2 < 1, "[{}] invalid beta parameter at index 1: {}", op, b2);
  OF_CHECK(wd >= 0, "[{}] invalid weight_decay value: {}", op, wd);
}

}  // namespace

Adam::Adam(std::vector<OptimizerParamGroup> groups, AdamOptions d)
    : Optimizer(std::move(groups), std::make_unique<AdamOptions>(d)) {
  check_adam(d.lr(), std::get<0>(d.betas()), std::get<1>(d.betas()), d.eps(), d.weight_decay(),
             "Adam");
}

Tensor Adam::step(LossClosure closure) {
  Tensor loss = evaluate(closure);
  NoGradGuard guard;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    auto& group = groups_[gi];
    auto& o = static_cast<AdamOptions&>(group.options());
    Tensor lr = lr_tensor(gi);
    for (Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& st = state(p);
      adam_update(p, p.grad(), advance_step(st), st.buffers, lr, std::get<0>(o.betas()),
                  std::get<1>(o.betas()), o.eps(), o.weight_decay(), o.amsgrad());
    }
  }
  return loss;
}

AdamW::AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions d)
    : Optimizer(std::move(groups), std::make_unique<AdamWOptions>(d)) {
  check_adam(d.lr(), std::get<0>(d.betas()), std::get<1>(d.betas()), d.eps(), d.weight_decay(),
             "AdamW");
}

Tensor AdamW::step(LossClosure closure) {
  Tensor loss = evaluate(closure);
  NoGradGuard guard;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    auto& group = groups_[gi];
    auto& o = static_cast<AdamWOptions&>(group.options());
    Tensor lr = lr_tensor(gi);
    for (Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& st = state(p);
      Tensor& step = advance_step(st);
      if (o.weight_decay() != 0) p.mul_((1 - lr * o.weight_decay()).to(p.dtype()));
      adam_update(p, p.grad(), step, st.buffers, lr, std::get<0>(o.betas()), std::get<1>(o.betas()),
                  o.eps(), 0.0, o.amsgrad());
    }
  }
  return loss;
}

// ---------------------------------------------------------------- RMSprop

RMSprop::RMSprop(std::vector<OptimizerParamGroup> groups, RMSpropOptions d)
    : Optimizer(std::move(groups), std::make_unique<RMSpropOptions>(d)) {
  lr_checked(d.lr(), "RMSprop");
  OF_CHECK(d.eps() >= 0, "[RMSprop] invalid epsilon value: {}", d.eps());
  OF_CHECK(d.momentum() >= 0, "[RMSprop] invalid momentum value: {}", d.momentum());
  OF_CHECK(d.alpha() >= 0, "[RMSprop] invalid alpha value: {}", d.alpha());
  OF_CHECK(d.weight_decay() >= 0, "[RMSprop] invalid weight_decay value: {}", d.weight_decay());
}

Tensor RMSprop::step(LossClosure closure) {
  Tensor loss = evaluate(closure);
  NoGradGuard guard;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    auto& group = groups_[gi];
    auto& o = static_cast<RMSpropOptions&>(group.options());
    Tensor lr = lr_tensor(gi);
    for (Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& st = state(p);
      const Tensor lr_p = lr.to(p.dtype());
      if (!st.buffers.contains("square_avg")) {
        st.buffers.insert("square_avg", zeros_like(p));
        if (o.momentum() > 0) st.buffers.insert("momentum_buffer", zeros_like(p));
        if (o.centered()) st.buffers.insert("grad_avg", zeros_like(p));
      }
      advance_step(st);
      Tensor grad = p.grad();
      if (o.weight_decay() != 0) grad = grad + p * o.weight_decay();
      Tensor& sq = st.buffers["square_avg"];
      sq.mul_(o.alpha()).add_(grad * grad, 1 - o.alpha());
      Tensor avg;
      if (o.centered()) {
        Tensor& ga = st.buffers["grad_avg"];
        ga.mul_(o.alpha()).add_(grad, 1 - o.alpha());
        avg = (sq - ga * ga).sqrt() + o.eps();
      } else {
        avg = sq.sqrt() + o.eps();
      }
      if (o.momentum() > 0) {
        Tensor& buf = st.buffers["momentum_buffer"];
        buf.mul_(o.momentum()).add_(grad / avg);
        p.sub_(buf * lr_p);
      } else {
        p.sub_(grad / avg * lr_p);
      }
    }
  }
  return loss;
}

// ---------------------------------------------------------------- Adagrad

Adagrad::Adagrad(std::vector<OptimizerParamGroup> groups, AdagradOptions d)
    : Optimizer(std::move(groups), std::make_unique<AdagradOptions>(d)) {
  lr_checked(d.lr(), "Adagrad");
  OF_CHECK(d.lr_decay() >= 0, "[Adagrad] invalid lr_decay value: {}", d.lr_decay());
  OF_CHECK(d.weight_decay() >= 0, "[Adagrad] invalid weight_decay value: {}", d.weight_decay());
  OF_CHECK(d.initial_accumulator_value() >= 0,
           "[Adagrad] invalid initial_accumulator_value value: {}", d.initial_accumulator_value());
  OF_CHECK(d.eps() >= 0, "[Adagrad] invalid epsilon value: {}", d.eps());
}

Tensor Adagrad::step(LossClosure closure) {
  Tensor loss = evaluate(closure);
  NoGradGuard guard;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    auto& group = groups_[gi];
    auto& o = static_cast<AdagradOptions&>(group.options());
    Tensor lr = lr_tensor(gi);
    for (Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& st = state(p);
      if (!st.buffers.contains("sum"))
        st.buffers.insert("sum", full_like(p, o.initial_accumulator_value()));
      const Tensor& step = advance_step(st);
      const Tensor clr = (lr / (1 + (step - 1) * o.lr_decay())).to(p.dtype());
      Tensor grad = p.grad();
      if (o.weight_decay() != 0) grad = grad + p * o.weight_decay();
      Tensor& sum = st.buffers["sum"];
      sum.add_(grad * grad);
      p.sub_(grad / (sum.sqrt() + o.eps()) * clr);
    }
  }
  return loss;
}

// ---------------------------------------------------------------- schedulers

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer.param_groups()) base_lrs_.push_back(g.options().get_lr());
}

void LRScheduler::step() {
  ++epoch_;
  auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size() && g < base_lrs_.size(); ++g)
    groups[g].options().set_lr(lr_at(epoch_, g, base_lrs_[g]));
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> r;
  for (const auto& g : optimizer_.param_groups()) r.push_back(g.options().get_lr());
  return r;
}

StepLR::StepLR(Optimizer& o, int64_t step_size, double gamma)
    : LRScheduler(o), step_size_(step_size), gamma_(gamma) {
  OF_CHECK(step_size > 0, "[StepLR] step_size must be positive, got {}", step_size);
}
double StepLR::lr_at(int64_t e, size_t, double base) const {
  return base * std::pow(gamma_, double(e / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& o, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(o), milestones_(std::move(milestones)), gamma_(gamma) {
  OF_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
           "[MultiStepLR] milestones must be increasing");
}
double MultiStepLR::lr_at(int64_t e, size_t, double base) const {
  const auto n = std::upper_bound(milestones_.begin(), milestones_.end(), e) - milestones_.begin();
  return base * std::pow(gamma_, double(n));
}

ExponentialLR::ExponentialLR(Optimizer& o, double gamma) : LRScheduler(o), gamma_(gamma) {}
double ExponentialLR::lr_at(int64_t e, size_t, double base) const {
  return base * std::pow(gamma_, double(e));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& o, int64_t T_max, double eta_min)
    : LRScheduler(o), t_max_(T_max), eta_min_(eta_min) {
  OF_CHECK(T_max > 0, "[CosineAnnealingLR] T_max must be positive, got {}", T_max);
}
double CosineAnnealingLR::lr_at(int64_t e, size_t, double base) const {
  return eta_min_ + (base - eta_min_) * (1 + std::cos(kPi * double(e) / double(t_max_))) / 2;
}

LinearLR::LinearLR(Optimizer& o, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(o), start_(start_factor), end_(end_factor), total_(total_iters) {
  OF_CHECK(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1,
           "[LinearLR] factors must be in (0, 1] (start) and [0, 1] (end), got {} and {}",
           start_factor, end_factor);
  OF_CHECK(total_iters > 0, "[LinearLR] total_iters must be positive, got {}", total_iters);
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    o.param_groups()[g].options().set_lr(base_lrs_[g] * start_);
}
double LinearLR::lr_at(int64_t e, size_t, double base) const {
  const double t = double(std::min(e, total_)) / double(total_);
  return base * (start_ + (end_ - start_) * t);
}

LambdaLR::LambdaLR(Optimizer& o, std::function<double(int64_t)> lambda)
    : LRScheduler(o), lambda_(std::move(lambda)) {
  OF_CHECK(lambda_ != nullptr, "[LambdaLR] lr_lambda is empty");
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    o.param_groups()[g].options().set_lr(base_lrs_[g] * lambda_(0));
}
double LambdaLR::lr_at(int64_t e, size_t, double base) const { return base * lambda_(e); }

OneCycleLR::OneCycleLR(Optimizer& o, double max_lr, int64_t total_steps, double pct_start,
                       double div_factor, double final_div_factor)
    : LRScheduler(o),
      max_lr_(max_lr),
      pct_(pct_start),
      div_(div_factor),
      final_div_(final_div_factor),
      total_(total_steps) {
  OF_CHECK(total_steps > 0, "[OneCycleLR] total_steps must be positive, got {}", total_steps);
  OF_CHECK(pct_start > 0 && pct_start < 1, "[OneCycleLR] pct_start must be in (0, 1), got {}",
           pct_start);
  for (auto& g : o.param_groups()) g.options().set_lr(max_lr_ / div_);
}
double OneCycleLR::lr_at(int64_t e, size_t, double) const {
  OF_CHECK(e < total_, "[OneCycleLR] stepped {} times, but total_steps is {}", e + 1, total_);
  const double initial = max_lr_ / div_, min_lr = initial / final_div_;
  const double up_end = pct_ * double(total_) - 1, down_end = double(total_) - 1;
  auto cos_anneal = [](double start, double end, double pct) {
    return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
  };
  if (double(e) <= up_end) return cos_anneal(initial, max_lr_, double(e) / up_end);
  return cos_anneal(max_lr_, min_lr, (double(e) - up_end) / (down_end - up_end));
}

SequentialLR::SequentialLR(Optimizer& o, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(o), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  OF_CHECK(!schedulers_.empty() && milestones_.size() == schedulers_.size() - 1,
           "[SequentialLR] expected {} milestones for {} schedulers, got {}",
           schedulers_.empty() ? 0 : schedulers_.size() - 1, schedulers_.size(),
           milestones_.size());
  for (auto& s : schedulers_) OF_CHECK(s != nullptr, "[SequentialLR] a scheduler is null");
  // the sub-schedulers' constructors may have changed the lrs: start from the first one's epoch 0
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    base_lrs_[g] = schedulers_[0]->base_lrs_[g];
    o.param_groups()[g].options().set_lr(dynamic_cast<LinearLR*>(schedulers_[0].get()) ||
                                                 dynamic_cast<LambdaLR*>(schedulers_[0].get())
                                             ? schedulers_[0]->lr_at(0, g, base_lrs_[g])
                                             : base_lrs_[g]);
  }
}
double SequentialLR::lr_at(int64_t e, size_t g, double) const {
  size_t k =
      size_t(std::upper_bound(milestones_.begin(), milestones_.end(), e) - milestones_.begin());
  const int64_t start = k == 0 ? 0 : milestones_[k - 1];
  // every sub-scheduler starts from the optimizer's initial lr (PyTorch's group["initial_lr"]),
  // not from whatever the previous scheduler's constructor left in the group
  return schedulers_[k]->lr_at(e - start, g, schedulers_[0]->base_lrs_[g]);
}

}  // namespace oneflow::optim

namespace oneflow::nn::utils {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  NoGradGuard guard;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  // The clip coefficient stays a tensor (no host read): a traced step clips on replay too.
  Tensor total;
  if (std::isinf(norm_type)) {
    for (const Tensor& g : grads) {
      Tensor m = g.abs().amax().to(kFloat64);
      total = total.defined() ? maximum(total, m) : m;
    }
  } else {
    for (const Tensor& g : grads) {
      Tensor n = pow(g.norm(norm_type).to(kFloat64), norm_type);
      total = total.defined() ? total + n : n;
    }
    total = pow(total, 1.0 / norm_type);
  }
  const Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (Tensor& g : grads) g.mul_(coef.to(g.dtype()));
  // Under of::jit::trace the norm is not read back (replays do not run this code anyway).
  if (jit::is_recording()) return std::numeric_limits<double>::quiet_NaN();
  return total.item<double>();
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard guard;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) {
      Tensor g = p.grad();
      g.clamp_(-clip_value, clip_value);
    }
}

}  // namespace oneflow::nn::utils

// ---------------------------------------------------------------- ZeRO (NOTE [ZeRO])

namespace oneflow::distributed {

ZeroRedundancyAdam::ZeroRedundancyAdam(std::vector<optim::OptimizerParamGroup> groups,
                                       optim::AdamOptions d)
    : Optimizer(std::move(groups), std::make_unique<optim::AdamOptions>(d)) {
  optim::check_adam(d.lr(), std::get<0>(d.betas()), std::get<1>(d.betas()), d.eps(),
                    d.weight_decay(), "ZeroRedundancyAdam");
  keep_partial_grads();
}

// NOTE [ZeRO]: the broadcast global parameters keep their gradients as partial sums, which
// step() reduce-scatters per group (parameters made global after the constructor are marked
// at the next step).
void ZeroRedundancyAdam::keep_partial_grads() {
  for (const auto& group : groups_)
    for (const Tensor& p : group.params()) {
      if (!p.defined() || !p.is_global()) continue;
      bool broadcast = true;
      for (const Sbp& s : p.sbp()) broadcast = broadcast && s.is_broadcast();
      if (broadcast) p.impl()->global->partial_grad = true;
    }
}

Tensor ZeroRedundancyAdam::step(optim::LossClosure closure) {
  Tensor loss = optim::evaluate(closure);
  NoGradGuard guard;
  const char* op = "ZeroRedundancyAdam";
  if (zero_.size() < groups_.size()) zero_.resize(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    auto& group = groups_[gi];
    auto& o = static_cast<optim::AdamOptions&>(group.options());
    // the parameters with gradients, all checked before anything is updated
    std::vector<Tensor> ps;
    std::vector<const TensorImpl*> layout;
    for (size_t i = 0; i < group.params().size(); ++i) {
      const Tensor& p = group.params()[i];
      if (!p.grad().defined()) continue;
      if (!p.is_global())
        fail(
            "[{}] parameter {} of group {} is a local tensor: make the model global first "
            "(model->to_global(placement, of::sbp::broadcast()))",
            op, i, gi);
      for (const Sbp& s : p.sbp())
        if (!s.is_broadcast())
          fail(
              "[{}] parameter {} of group {} has SBP {}; ZeRO shards broadcast (data-parallel) "
              "parameters only",
              op, i, gi, sbp_str(p.sbp()));
      if (!ps.empty() && !(p.placement() == ps[0].placement()))
        fail("[{}] parameters of group {} are on different placements: {} and {}", op, gi,
             ps[0].placement().str(), p.placement().str());
      if (!ps.empty() && p.dtype() != ps[0].dtype())
        fail("[{}] parameters of group {} have different dtypes: {} and {}", op, gi,
             dtype_name(ps[0].dtype()), dtype_name(p.dtype()));
      ps.push_back(p);
      layout.push_back(p.impl());
    }
    if (ps.empty()) continue;
    GroupState& z = zero_[gi];
    if (z.layout.empty()) z.layout = layout;
    else if (z.layout != layout)
      fail(
          "[{}] the parameters of group {} that have gradients changed between steps ({} then "
          "{}): the split optimizer state is laid out over the first step's parameters",
          op, gi, z.layout.size(), layout.size());
    const Placement pl = ps[0].placement();
    const NdSbp split(size_t(pl.ndim()), Sbp::split(0));
    const NdSbp whole(size_t(pl.ndim()), Sbp::broadcast());
    std::vector<Tensor> flat_p, flat_g;
    for (const Tensor& p : ps) {
      flat_p.push_back(p.reshape({-1}));
      flat_g.push_back(p.grad().reshape({-1}));  // partial sums (or broadcast)
    }
    // this rank's pieces: a slice of the broadcast parameters (no communication) and one
    // reduce-scatter of the group's partial-sum gradients
    Tensor piece = cat(flat_p, 0).to_global(pl, split);
    const Tensor grad = cat(flat_g, 0).to_global(pl, split);
    optim::adam_update(piece, grad, advance_step(z.state), z.state.buffers, lr_tensor(gi),
                       std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(),
                       o.amsgrad());
    // one all-gather of the new parameters, copied back into each parameter's storage
    const Tensor all = piece.to_global(pl, whole);
    int64_t off = 0;
    for (Tensor& p : ps) {
      p.copy_(all.narrow(0, off, p.numel()).view(p.sizes()));
      off += p.numel();
    }
  }
  keep_partial_grads();
  return loss;
}

std::vector<Tensor> ZeroRedundancyAdam::update_targets() const {
  std::vector<Tensor> out = Optimizer::update_targets();  // the parameters (state lives below)
  for (const GroupState& z : zero_) {
    if (z.state.step.defined()) out.push_back(z.state.step);
    for (const auto& item : z.state.buffers.items()) out.push_back(item.value());
  }
  return out;
}

bool ZeroRedundancyAdam::has_state(const Tensor& p) const {
  for (const GroupState& z : zero_)
    if (std::find(z.layout.begin(), z.layout.end(), p.impl()) != z.layout.end())
      return z.state.step.defined();
  return false;
}

void ZeroRedundancyAdam::drop_state(const Tensor& p) {
  for (GroupState& z : zero_)
    if (std::find(z.layout.begin(), z.layout.end(), p.impl()) != z.layout.end()) z = GroupState{};
}

int64_t ZeroRedundancyAdam::local_state_bytes() const {
  int64_t n = 0;
  for (const GroupState& z : zero_)
    for (const auto& item : z.state.buffers.items()) n += int64_t(item.value().to_local().nbytes());
  return n;
}

}  // namespace oneflow::distributed

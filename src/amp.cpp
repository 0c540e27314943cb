// amp.cpp: autocast (the casts dispatch applies while it is on) and GradScaler.
//
// NOTE [Autocast]: autocast is per thread and per device type, as in libtorch. While it is on
// for the device of an op's inputs, dispatch calls cast_inputs before anything else, and the
// op's policy decides: OpDef::autocast, set where the op is registered (libtorch 2.x's
// autocast_mode.cpp lists, restricted to this op table; tests/test_op_table.cpp holds the list):
//   lower   run in the autocast dtype (bfloat16 on the CPU, float16/bfloat16 on CUDA):
//           mm bmm addmm baddbmm linear conv2d conv3d conv_transpose2d conv_transpose3d
//           scaled_dot_product_attention
//   float32 inputs in float16/bfloat16 go up to float32: exp expm1 log log2 log1p reciprocal
//           rsqrt tan pow pow_scalar sum prod cumsum cumprod logsumexp norm softmax log_softmax
//           layer_norm group_norm rms_norm cross_entropy ctc_loss, and batch_norm (libtorch's
//           CPU kernel takes a bfloat16 input with float32 statistics and computes in float32;
//           this one wants one dtype, so the input goes up, which computes the same)
//   promote the widest floating dtype of the inputs: cat index_add scatter_add, and the LSTM
//           cell update and recurrence (lstm_cell, lstm_layer: the input projection arrives in
//           bfloat16 from a linear, the states stay float32, the cell runs in float32)
// Every other op runs in the dtypes it is given (binary ops promote as usual, so bfloat16 and
// float32 mixed give float32). Only floating inputs that are not float64 are cast, each by a
// dispatched `to` (recorded by the tracer, differentiable: the gradient goes back to the
// input's dtype, so float32 parameters get float32 gradients). The composite losses (mse_loss,
// nll_loss, the losses of nn/losses.h...) run inside a Float32Region: every op in them casts
// float16/bfloat16 inputs up. Not cast: out=/in-place calls, views, ops a kernel dispatches.
// The backward pass runs with autocast off (the engine suspends it). There is no weight-cast cache:
// a weight used twice in one forward is cast twice (a traced step CSEs the second cast away). A
// traced function's cache key holds the autocast state, so turning it on retraces.
#include "oneflow/amp.h"

#include <cmath>
#include <unordered_set>

#include "autocast.h"
#include "oneflow/jit.h"
#include "trace/graph.h"
#include "trace/recording.h"

namespace oneflow {

namespace autocast_detail {

OF_TLS State t_state;

namespace {

using Policy = AutocastPolicy;  // OpDef::autocast, set where each op is registered

bool eligible(const Tensor& t) {
  return t.defined() && t.is_floating_point() && t.dtype() != kFloat64;
}

OF_TLS bool t_casting = false;  // the casts themselves are dispatched: never recurse

// The policy autocast applies to `op` whose first eligible input is on `dev` (kNone when
// autocast is off for that device), and the dtype kLower casts to there.
Policy policy_for(const OpDef& op, DeviceType dev) {
  if (dev == kCPU ? !t_state.cpu : !t_state.cuda) return Policy::kNone;
  return t_state.fp32_region > 0 ? Policy::kFloat32 : op.autocast;
}
ScalarType lower_dtype(DeviceType dev) {
  return dev == kCPU ? t_state.cpu_dtype : t_state.cuda_dtype;
}

}  // namespace

void cast_inputs(const OpDef& op, TensorList& inputs, Attrs& attrs) {
  if (t_casting || op.has(kView)) return;
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs)
    if (eligible(t)) {
      first = &t;
      break;
    }
  if (!first) return;
  const DeviceType dev = first->device().type();
  const Policy policy = policy_for(op, dev);
  if (policy == Policy::kNone) return;
  ScalarType target = kFloat32;
  if (policy == Policy::kLower) {
    target = lower_dtype(dev);
  } else if (policy == Policy::kPromote) {
    target = first->dtype();
    for (const Tensor& t : inputs)
      if (eligible(t)) target = promote_types(target, t.dtype());
  }
  t_casting = true;
  struct Reset {
    ~Reset() { t_casting = false; }
  } reset;
  for (Tensor& t : inputs) {
    if (!eligible(t) || t.dtype() == target) continue;
    if (policy == Policy::kFloat32 && t.dtype() == kFloat32) continue;
    t = t.to(target);
  }
  if (policy == Policy::kFloat32)  // a requested output dtype (sum, softmax...) goes up too
    for (AttrValue& v : attrs.values)
      if (auto* d = std::get_if<ScalarType>(&v); d && (*d == kFloat16 || *d == kBFloat16))
        *d = kFloat32;
}

ScalarType dtype_for(const OpDef& op, const Tensor& t) {
  if (!active() || !eligible(t)) return t.dtype();
  const DeviceType dev = t.device().type();
  switch (policy_for(op, dev)) {
    case Policy::kLower:
      return lower_dtype(dev);
    case Policy::kFloat32:
      return kFloat32;
    default:  // kNone keeps it; kPromote promotes among the inputs (no default depends on it)
      return t.dtype();
  }
}

bool autocast_args(const OpDef& op, std::initializer_list<Tensor*> args) {
  if (!active()) return false;
  TensorList in;
  for (Tensor* t : args) in.push_back(*t);
  Attrs none;
  cast_inputs(op, in, none);
  bool changed = false;
  size_t i = 0;
  for (Tensor* t : args) {
    changed = changed || !in[i].is_same(*t);
    *t = in[i++];
  }
  return changed;
}

// NOTE [Reduced-precision fallback]: the kernels of the ops with the kWidens16Bit trait (the
// nn ops: norms, losses, conv, pooling, resampling, attention, LSTM) compute in float32 or
// float64 only. Given float16/bfloat16 inputs (a model converted with .to(kBFloat16), or the
// activations autocast hands on), dispatch casts those inputs to float32, runs the op, and
// casts its floating outputs back to the first such input's dtype: each a dispatched op (so
// autograd and the tracer see them; the op's VJP runs in float32 between the casts' VJPs).
// That is what a reduced-precision kernel with float32 accumulation computes, rounded once per
// output. (batch_norm's op does not write the running statistics: its wrapper updates them
// from the op's batch statistics, in their own dtype.)
namespace {
bool reduced(const Tensor& t) {
  return t.defined() && (t.dtype() == kFloat16 || t.dtype() == kBFloat16);
}
}  // namespace

bool needs_widening(const OpDef& op, const TensorList& inputs) {
  if (t_casting) return false;
  bool any = false, cuda = false;
  for (const Tensor& t : inputs) {
    any = any || reduced(t);
    cuda = cuda || (t.defined() && t.is_cuda());
  }
  if (cuda && op.cuda_16bit) return false;  // its CUDA kernel takes them (cuDNN, cuBLASLt)
  return any && op.has(kWidens16Bit);
}

TensorList widened_dispatch(const OpDef& op, TensorList inputs, Attrs attrs) {
  ScalarType narrow = kFloat32;
  for (const Tensor& t : inputs)
    if (reduced(t)) {
      narrow = t.dtype();
      break;
    }
  t_casting = true;  // the op itself runs as given: no autocast, no second widening
  struct Reset {
    ~Reset() { t_casting = false; }
  } reset;
  for (Tensor& t : inputs)
    if (reduced(t)) t = t.to(kFloat32);
  TensorList out = dispatch(op, std::move(inputs), std::move(attrs));
  for (Tensor& t : out)
    if (t.defined() && t.dtype() == kFloat32) t = t.to(narrow);
  return out;
}

}  // namespace autocast_detail

namespace autocast {

using autocast_detail::t_state;

bool is_enabled() { return t_state.cuda; }
void set_enabled(bool enabled) { t_state.cuda = enabled; }
bool is_cpu_enabled() { return t_state.cpu; }
void set_cpu_enabled(bool enabled) { t_state.cpu = enabled; }
ScalarType get_autocast_gpu_dtype() { return t_state.cuda_dtype; }
ScalarType get_autocast_cpu_dtype() { return t_state.cpu_dtype; }

void set_autocast_gpu_dtype(ScalarType dtype) {
  if (dtype != kFloat16 && dtype != kBFloat16)
    fail("[autocast] the CUDA autocast dtype must be float16 or bfloat16, got {}",
         dtype_name(dtype));
  t_state.cuda_dtype = dtype;
}

void set_autocast_cpu_dtype(ScalarType dtype) {
  if (dtype != kBFloat16)
    fail("[autocast] the CPU autocast dtype must be bfloat16, got {}", dtype_name(dtype));
  t_state.cpu_dtype = dtype;
}

Guard::Guard(DeviceType device, std::optional<ScalarType> dtype, bool enabled)
    : device_(device),
      prev_enabled_(device == kCPU ? t_state.cpu : t_state.cuda),
      prev_dtype_(device == kCPU ? t_state.cpu_dtype : t_state.cuda_dtype) {
  if (dtype) {  // checked before anything changes
    if (device == kCPU) set_autocast_cpu_dtype(*dtype);
    else set_autocast_gpu_dtype(*dtype);
  }
  (device == kCPU ? t_state.cpu : t_state.cuda) = enabled;
}

Guard::~Guard() {
  if (device_ == kCPU) {
    t_state.cpu = prev_enabled_;
    t_state.cpu_dtype = prev_dtype_;
  } else {
    t_state.cuda = prev_enabled_;
    t_state.cuda_dtype = prev_dtype_;
  }
}

}  // namespace autocast

// NOTE [GradScaler]: PyTorch's algorithm (torch/amp/grad_scaler.py and _amp_update_scale_) with
// the scale and the growth tracker as 0-d tensors updated in place. unscale_ multiplies each
// gradient by 1/scale (computed in float64, rounded to float32, as PyTorch does) and sets
// found_inf to 1 when sum(g * 0) is NaN, which is exactly when g holds an inf or a NaN.
// step(): eagerly, one host read of found_inf decides whether the optimizer runs. While
// of::jit::trace records there is no host read: the parameters and the optimizer state the
// update writes are copied, the update runs, and where(found_inf, copy, new) puts the old bits
// back when the check fired, so replays skip exactly the overflowing steps. A recorded call that
// creates optimizer state (the first step) cannot become a graph anyway; it gives up recording,
// reads found_inf and, on a skip, also forgets the state the update just made.
namespace amp {

GradScaler::GradScaler(GradScalerOptions o) : options_(o) {
  const char* op = "GradScaler";
  if (!(o.init_scale() > 0) || !std::isfinite(o.init_scale()))
    fail("[{}] init_scale must be positive and finite, got {}", op, o.init_scale());
  if (!(o.growth_factor() > 1))
    fail("[{}] growth_factor must be above 1, got {}", op, o.growth_factor());
  if (!(o.backoff_factor() > 0 && o.backoff_factor() < 1))
    fail("[{}] backoff_factor must be in (0, 1), got {}", op, o.backoff_factor());
  if (o.growth_interval() <= 0)
    fail("[{}] growth_interval must be positive, got {}", op, o.growth_interval());
  scale_ = full({}, o.init_scale(), kFloat32);
  growth_tracker_ = zeros({}, kInt64);
}

GradScaler::PerOptimizer& GradScaler::per(optim::Optimizer& o) { return per_optimizer_[&o]; }

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!options_.enabled()) return outputs;
  if (!outputs.defined()) fail("[GradScaler] scale() of an undefined tensor");
  if (!outputs.is_floating_point())
    fail("[GradScaler] scale() wants a floating-point loss, got {}", dtype_name(outputs.dtype()));
  return outputs * scale_.to(outputs.device(), outputs.dtype());
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> r;
  for (const Tensor& t : outputs) r.push_back(scale(t));
  return r;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled()) return;
  PerOptimizer& st = per(optimizer);
  if (st.stage == Stage::kUnscaled)
    fail(
        "[GradScaler] unscale_() has already been called on this optimizer since the last "
        "update()");
  if (st.stage == Stage::kStepped) fail("[GradScaler] unscale_() is being called after step()");
  NoGradGuard no_grad;
  const Tensor inv = (1.0 / scale_.to(kFloat64)).to(kFloat32);
  Tensor found;
  for (const Tensor& p : optimizer.parameters()) {
    Tensor g = p.grad();
    if (!g.defined() || g.numel() == 0) continue;
    const Tensor bad = isnan((g * 0).sum()).to(kFloat32);
    found = found.defined() ? maximum(found, bad) : bad;
    g.mul_(inv.to(g.device(), g.dtype()));
  }
  st.found_inf = found.defined() ? found : zeros({}, kFloat32);
  st.stage = Stage::kUnscaled;
}

Tensor GradScaler::step(optim::Optimizer& optimizer, optim::LossClosure closure) {
  if (!options_.enabled()) return optimizer.step(std::move(closure));
  if (closure) fail("[GradScaler] step() with a closure is not supported while scaling is enabled");
  PerOptimizer& st = per(optimizer);
  if (st.stage == Stage::kStepped)
    fail("[GradScaler] step() has already been called on this optimizer since the last update()");
  if (st.stage == Stage::kReady) unscale_(optimizer);
  st.stage = Stage::kStepped;
  if (!jit::is_recording()) {
    if (st.found_inf.item<float>() == 0) optimizer.step();
    return {};
  }
  NoGradGuard no_grad;
  std::vector<Tensor> with_grad;
  std::vector<bool> had_state;
  for (const Tensor& p : optimizer.parameters())
    if (p.grad().defined()) {
      with_grad.push_back(p);
      had_state.push_back(optimizer.has_state(p));
    }
  const std::vector<Tensor> targets = optimizer.update_targets();
  std::vector<Tensor> saved;
  for (const Tensor& t : targets) saved.push_back(t.clone());
  optimizer.step();
  std::unordered_set<const StorageImpl*> known;
  for (const Tensor& t : targets) known.insert(t.impl()->storage.get());
  bool fresh = false;
  for (const Tensor& t : optimizer.update_targets())
    fresh = fresh || !known.count(t.impl()->storage.get());
  if (fresh) {
    trace::give_up_recording(
        "GradScaler::step made optimizer state (a first update): this call ran eagerly and the "
        "next one records again");
    if (st.found_inf.item<float>() != 0) {
      for (size_t i = 0; i < targets.size(); ++i) {
        Tensor t = targets[i];
        t.copy_(saved[i]);
      }
      for (size_t i = 0; i < with_grad.size(); ++i)
        if (!had_state[i]) optimizer.drop_state(with_grad[i]);
    }
    return {};
  }
  const Tensor skip = st.found_inf > 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    Tensor t = targets[i];
    t.copy_(where(skip.to(t.device()), saved[i], t));
  }
  return {};
}

void GradScaler::update() {
  if (!options_.enabled()) return;
  Tensor found;
  for (auto& [o, st] : per_optimizer_)
    if (st.found_inf.defined())
      found = found.defined() ? maximum(found, st.found_inf) : st.found_inf;
  if (!found.defined())
    fail(
        "[GradScaler] update(): no inf checks were recorded since the last update (call "
        "step() or unscale_() first)");
  NoGradGuard no_grad;
  const Tensor overflow = found > 0;
  const Tensor counted = where(overflow, Scalar(int64_t(0)), growth_tracker_ + 1);
  const Tensor grown = scale_ * options_.growth_factor();
  const Tensor grow = logical_and(counted >= options_.growth_interval(), logical_not(isinf(grown)));
  const Tensor new_scale =
      where(overflow, scale_ * options_.backoff_factor(), where(grow, grown, scale_));
  const Tensor new_tracker =
      where(counted >= options_.growth_interval(), Scalar(int64_t(0)), counted);
  scale_.copy_(new_scale);
  growth_tracker_.copy_(new_tracker);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled()) return;
  if (!(new_scale > 0) || !std::isfinite(new_scale))
    fail("[GradScaler] update(new_scale): the scale must be positive and finite, got {}",
         new_scale);
  NoGradGuard no_grad;
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  return options_.enabled() ? double(scale_.item<float>()) : 1.0;
}

int64_t GradScaler::get_growth_tracker() const {
  return options_.enabled() ? growth_tracker_.item<int64_t>() : 0;
}

OrderedDict<std::string, Tensor> GradScaler::state_dict() const {
  OrderedDict<std::string, Tensor> out;
  if (!options_.enabled()) return out;
  out.insert("scale", scale_.clone());
  out.insert("growth_factor", full({}, options_.growth_factor(), kFloat64));
  out.insert("backoff_factor", full({}, options_.backoff_factor(), kFloat64));
  out.insert("growth_interval", full({}, double(options_.growth_interval()), kFloat64));
  out.insert("_growth_tracker", growth_tracker_.clone());
  return out;
}

void GradScaler::load_state_dict(const OrderedDict<std::string, Tensor>& state) {
  if (!options_.enabled()) fail("[GradScaler] load_state_dict() on a disabled scaler");
  if (state.size() == 0)
    fail("[GradScaler] load_state_dict(): the state is empty (saved from a disabled scaler?)");
  const char* keys[] = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                        "_growth_tracker"};
  for (const char* k : keys) {
    const Tensor* v = state.find(k);
    if (!v) fail("[GradScaler] load_state_dict(): '{}' is missing", k);
    if (v->numel() != 1)
      fail("[GradScaler] load_state_dict(): '{}' must hold one number, got shape {}", k,
           shape_str(v->sizes()));
  }
  GradScalerOptions o = options_;
  o.growth_factor(state.find("growth_factor")->item<double>());
  o.backoff_factor(state.find("backoff_factor")->item<double>());
  o.growth_interval(int64_t(state.find("growth_interval")->item<double>()));
  GradScaler check(o.init_scale(state.find("scale")->item<double>()));  // validates them all
  NoGradGuard no_grad;
  options_ = o;
  scale_.copy_(state.find("scale")->reshape({}).to(kFloat32));
  growth_tracker_.copy_(state.find("_growth_tracker")->reshape({}).to(kInt64));
}

}  // namespace amp
}  // namespace oneflow

// nn/module.h: of::nn::Module (parameters, buffers and submodules by name), ModuleHolder and
// OF_MODULE (libtorch's TORCH_MODULE), and the OF_ARG option setter.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "oneflow/ops.h"
#include "oneflow/ordered_dict.h"

// OF_ARG(T, name): a chainable option, as libtorch's TORCH_ARG: opts.name(v) sets and returns
// *this, opts.name() reads.
#define OF_ARG(T, name)                                           \
 public:                                                          \
  inline auto name(const T& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                                   \
    return *this;                                                 \
  }                                                               \
  inline const T& name() const noexcept { return this->name##_; } \
  inline T& name() noexcept { return this->name##_; }             \
                                                                  \
 private:                                                         \
  T name##_

#ifndef TORCH_ARG
#define TORCH_ARG OF_ARG
#endif

namespace oneflow::nn {

class Module;
// Clears (set_to_none) or zeroes the gradients of params: Module's and Optimizer's zero_grad.
void zero_grad_of(std::vector<Tensor>& params, bool set_to_none);
// Parameters and buffers by dotted name ("layer1.0.weight").
using StateDict = OrderedDict<std::string, Tensor>;
// What a non-strict load left out: the module's keys the state lacked, and the state's keys
// the module does not have (PyTorch's _IncompatibleKeys).
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
  bool empty() const { return missing_keys.empty() && unexpected_keys.empty(); }
};

// A layer or model: owns named parameters, buffers and submodules. Subclass it and register
// members in the constructor, as with torch::nn::Module.
class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Type name shown when printing ("Linear"; a subclass's demangled class name by default).
  const std::string& name() const;

  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const;
  // This module (when include_self) and all descendants, depth first.
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules(const std::string& prefix = "",
                                                                  bool include_self = true);

  // Training mode switches dropout and batch-norm behaviour; applies to all submodules.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves/casts parameters and buffers in place (references held elsewhere see the change).
  void to(Device device, bool non_blocking = false);
  void to(ScalarType dtype, bool non_blocking = false);
  void to(Device device, ScalarType dtype, bool non_blocking = false);
  // Makes every parameter and buffer global in place (data parallel: broadcast); a tensor
  // that is already global is converted. Needs include/oneflow/global.h for Placement/Sbp.
  void to_global(const Placement& placement, const NdSbp& sbp);
  void to_global(const Placement& placement, Sbp sbp) { to_global(placement, NdSbp{sbp}); }

  // Clears the gradients of all parameters (set_to_none: drop them; else zero them).
  void zero_grad(bool set_to_none = true);

  // Parameters then buffers, recursively, by dotted name; the tensors share storage with
  // the module (detach/clone them to keep a snapshot).
  StateDict state_dict() const;
  // Copies values in (converting floating-point dtypes to the parameter's). strict: the key
  // sets must match exactly. Every key, shape and dtype is checked before anything is copied,
  // so a failed load changes nothing. Returns the keys only one side had (PyTorch's
  // load_state_dict result; both empty after a strict load).
  IncompatibleKeys load_state_dict(const StateDict& state, bool strict = true);

  // One-line description of this module ("Linear(in_features=3, out_features=4, bias=true)").
  virtual void pretty_print(std::ostream& stream) const;

  // Registration (the names become state-dict keys). Parameters get requires_grad.
  Tensor& register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  Tensor& register_buffer(std::string name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module needs an nn::Module");
    add_child(std::move(name), module);
    return module;
  }
  template <class Holder, class = typename Holder::ContainedType>
  Holder register_module(std::string name, Holder holder) {
    add_child(std::move(name), holder.ptr());
    return holder;
  }
  // Replaces a registered submodule (same name), returning the new one.
  template <class M>
  std::shared_ptr<M> replace_module(const std::string& name, std::shared_ptr<M> module) {
    children_[name] = module;
    return module;
  }

 protected:
  // The parameter/buffer/submodule maps (for containers and subclasses).
  OrderedDict<std::string, Tensor> parameters_{"parameter"};
  OrderedDict<std::string, Tensor> buffers_{"buffer"};
  OrderedDict<std::string, std::shared_ptr<Module>> children_{"submodule"};

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void apply_to_tensors(const std::function<Tensor(const Tensor&)>& f);
  mutable std::string name_;
  bool training_ = true;
};

// Prints the module tree, one submodule per line, as PyTorch does.
std::ostream& operator<<(std::ostream& stream, const Module& module);

// Shared-pointer wrapper giving value semantics: Linear fc(3, 4); fc->weight; fc(x).
template <class Impl> class ModuleHolder {
 public:
  using ContainedType = Impl;
  // Default-constructs the module when it has a default constructor.
  ModuleHolder() requires std::is_default_constructible_v<Impl> : impl_(std::make_shared<Impl>()) {}
  // An empty holder (assign later, as `Linear fc{nullptr};`).
  ModuleHolder(std::nullptr_t) {}
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  template <class A0, class... Args,
            class = std::enable_if_t<!std::is_same_v<std::decay_t<A0>, ModuleHolder> &&
                                     !std::is_same_v<std::decay_t<A0>, std::nullptr_t> &&
                                     !std::is_same_v<std::decay_t<A0>, std::shared_ptr<Impl>> &&
                                     std::is_constructible_v<Impl, A0&&, Args&&...>>>
  ModuleHolder(A0&& a0, Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<A0>(a0), std::forward<Args>(args)...)) {}

  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  Impl* get() const { return checked(); }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }
  // Calls forward: fc(x).
  template <class... Args> decltype(auto) operator()(Args&&... args) const {
    return checked()->forward(std::forward<Args>(args)...);
  }

 private:
  Impl* checked() const {
    if (!impl_) throw_error("[nn] accessing an empty module holder (constructed with nullptr)");
    return impl_.get();
  }
  std::shared_ptr<Impl> impl_;
};

template <class Impl> std::ostream& operator<<(std::ostream& stream, const ModuleHolder<Impl>& m) {
  return stream << *m;
}

}  // namespace oneflow::nn

// OF_MODULE(Linear): declares `Linear` as the holder of `LinearImpl` (libtorch's TORCH_MODULE).
#define OF_MODULE(Name)                                          \
  class Name : public ::oneflow::nn::ModuleHolder<Name##Impl> {  \
   public:                                                       \
    using ::oneflow::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }

#ifndef TORCH_MODULE
#define TORCH_MODULE OF_MODULE
#endif

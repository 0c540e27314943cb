// of::nn::Module: registration, traversal, train/eval, to(), state dicts and printing.
#include "oneflow/nn/module.h"

#include <cxxabi.h>

#include <functional>
#include <sstream>

namespace oneflow::nn {

namespace {

std::string demangled(const std::type_info& t) {
  int status = 0;
  char* s = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string r = status == 0 && s ? s : t.name();
  std::free(s);
  // "Net" rather than "(anonymous namespace)::Net" or "ns::Net"
  const size_t colon = r.rfind("::");
  if (colon != std::string::npos) r = r.substr(colon + 2);
  return r;
}

void check_name(const std::string& name, const char* what) {
  if (name.empty()) fail("[Module] {} name must not be empty", what);
  if (name.find('.') != std::string::npos)
    fail("[Module] {} name '{}' must not contain a dot", what, name);
}

}  // namespace

const std::string& Module::name() const {
  if (name_.empty()) name_ = demangled(typeid(*this));
  return name_;
}

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  if (tensor.defined()) {
    if (!tensor.is_leaf()) tensor = tensor.detach();
    if (requires_grad) tensor.set_requires_grad(true);
  }
  return parameters_.insert(std::move(name), std::move(tensor));
}

Tensor& Module::register_buffer(std::string name, Tensor tensor) {
  check_name(name, "buffer");
  return buffers_.insert(std::move(name), std::move(tensor));
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_name(name, "submodule");
  if (!module) fail("[Module] submodule '{}' is null", name);
  children_.insert(std::move(name), std::move(module));
}

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<std::string, Tensor> out;
  for (const auto& p : parameters_)
    if (p.value().defined()) out.insert(p.key(), p.value());
  if (recurse)
    for (const auto& c : children_)
      for (const auto& p : c.value()->named_parameters(true))
        out.insert(c.key() + "." + p.key(), p.value());
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return named_parameters(recurse).values();
}

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<std::string, Tensor> out;
  for (const auto& b : buffers_)
    if (b.value().defined()) out.insert(b.key(), b.value());
  if (recurse)
    for (const auto& c : children_)
      for (const auto& b : c.value()->named_buffers(true))
        out.insert(c.key() + "." + b.key(), b.value());
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::shared_ptr<Module>> Module::children() const { return children_.values(); }

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_children() const {
  return children_;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules(const std::string& prefix,
                                                                        bool include_self) {
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  std::function<void(const std::string&, const std::shared_ptr<Module>&)> walk =
      [&](const std::string& name, const std::shared_ptr<Module>& m) {
        out.insert(name, m);
        for (const auto& c : m->children_)
          walk(name.empty() ? c.key() : name + "." + c.key(), c.value());
      };
  std::shared_ptr<Module> self;
  try {
    self = shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    // a module on the stack: walk from its children (it cannot be handed out as a pointer)
    if (include_self)
      fail("[Module] named_modules(include_self) needs a module owned by a shared_ptr");
    for (const auto& c : children_)
      walk(prefix.empty() ? c.key() : prefix + "." + c.key(), c.value());
    return out;
  }
  if (include_self) {
    walk(prefix, self);
  } else {
    for (const auto& c : children_)
      walk(prefix.empty() ? c.key() : prefix + "." + c.key(), c.value());
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  return named_modules("", include_self).values();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.value()->train(on);
}

void Module::apply_to_tensors(const std::function<Tensor(const Tensor&)>& f) {
  NoGradGuard guard;
  for (auto& p : parameters_) {
    Tensor& t = p.value();
    if (!t.defined()) continue;
    Tensor moved = f(t);
    const bool dtype_changes = moved.dtype() != t.dtype();
    Tensor g = t.grad();
    t.set_data(moved);
    if (g.defined()) {
      if (dtype_changes) t.mutable_grad() = Tensor();  // a gradient keeps its parameter's dtype
      else g.set_data(f(g));
    }
  }
  for (auto& b : buffers_)
    if (b.value().defined()) b.value().set_data(f(b.value()));
  for (auto& c : children_) c.value()->apply_to_tensors(f);
}

void Module::to(Device device, bool non_blocking) {
  apply_to_tensors([&](const Tensor& t) { return t.to(device, non_blocking); });
}

void Module::to(ScalarType dtype, bool non_blocking) {
  // only floating-point tensors change dtype (integer buffers such as counters stay)
  apply_to_tensors(
      [&](const Tensor& t) { return t.is_floating_point() ? t.to(dtype, non_blocking) : t; });
}

void Module::to_global(const Placement& placement, const NdSbp& sbp) {
  NoGradGuard ng;
  apply_to_tensors([&](const Tensor& t) { return t.to_global(placement, sbp); });
}

void Module::to(Device device, ScalarType dtype, bool non_blocking) {
  to(device, non_blocking);
  to(dtype, non_blocking);
}

void zero_grad_of(std::vector<Tensor>& params, bool set_to_none) {
  for (Tensor& p : params) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad() = Tensor();
    } else {
      NoGradGuard guard;
      p.mutable_grad().zero_();
    }
  }
}

void Module::zero_grad(bool set_to_none) {
  std::vector<Tensor> params = parameters();
  zero_grad_of(params, set_to_none);
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& p : named_parameters(true)) out.insert(p.key(), p.value());
  for (const auto& b : named_buffers(true)) out.insert(b.key(), b.value());
  return out;
}

IncompatibleKeys Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  IncompatibleKeys keys;
  std::vector<std::string>& missing = keys.missing_keys;
  std::vector<std::string>& unexpected = keys.unexpected_keys;
  for (const auto& kv : own)
    if (!state.contains(kv.key())) missing.push_back(kv.key());
  for (const auto& kv : state)
    if (!own.contains(kv.key())) unexpected.push_back(kv.key());
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string msg = "[load_state_dict] error loading state dict into " + name() + ":";
    if (!missing.empty()) msg += " missing keys: " + join(missing) + ";";
    if (!unexpected.empty()) msg += " unexpected keys: " + join(unexpected) + ";";
    throw Error(msg);
  }
  // Check every shape and dtype before copying anything.
  for (const auto& kv : own) {
    const Tensor* src = state.find(kv.key());
    if (!src) continue;
    if (!src->defined()) fail("[load_state_dict] '{}' is an undefined tensor", kv.key());
    if (!(src->sizes() == kv.value().sizes()))
      fail(
          "[load_state_dict] size mismatch for '{}': copying a tensor of shape {} into a "
          "parameter of shape {}",
          kv.key(), shape_str(src->sizes()), shape_str(kv.value().sizes()));
    if (src->is_floating_point() != kv.value().is_floating_point())
      fail("[load_state_dict] dtype mismatch for '{}': {} cannot be loaded into {}", kv.key(),
           dtype_name(src->dtype()), dtype_name(kv.value().dtype()));
  }
  NoGradGuard guard;
  for (auto& kv : own) {
    const Tensor* src = state.find(kv.key());
    if (src) kv.value().copy_(*src);
  }
  return keys;
}

void Module::pretty_print(std::ostream& stream) const { stream << name(); }

namespace {
void print_tree(std::ostream& os, const Module& m, int indent) {
  m.pretty_print(os);
  const auto children = m.named_children();
  if (children.is_empty()) return;
  os << "(\n";
  for (const auto& c : children) {
    os << std::string(size_t(indent + 2), ' ') << "(" << c.key() << "): ";
    print_tree(os, *c.value(), indent + 2);
    os << "\n";
  }
  os << std::string(size_t(indent), ' ') << ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& stream, const Module& module) {
  print_tree(stream, module, 0);
  return stream;
}

}  // namespace oneflow::nn

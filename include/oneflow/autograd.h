// autograd.h: custom differentiable functions the libtorch way.
//
//   struct MulConstant : of::autograd::Function<MulConstant> {
//     static of::Tensor forward(of::autograd::AutogradContext* ctx, of::Tensor x, double c) {
//       ctx->saved_data["c"] = c;
//       return x * c;
//     }
//     static of::autograd::variable_list backward(of::autograd::AutogradContext* ctx,
//                                                 of::autograd::variable_list g) {
//       return {g[0] * ctx->saved_data["c"].toDouble(), of::Tensor()};
//     }
//   };
//   of::Tensor y = MulConstant::apply(x, 5.5);
//
// forward runs without recording; backward returns one gradient per forward argument
// (undefined for non-tensor arguments or inputs needing none; a tensor list argument counts as
// its tensors; extra undefined gradients at the end are ignored) and may itself use any op, so
// second derivatives flow through it.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <typeinfo>
#include <unordered_map>
#include <variant>
#include <vector>

#include "oneflow/ops.h"
#include "oneflow/tensor.h"

namespace oneflow {
using TensorList = SmallVector<Tensor, 4>;  // as in the op table
}

namespace oneflow::autograd {

// libtorch's names: a Variable is a Tensor; both lists are std::vector<Tensor>.
using Variable = Tensor;
using variable_list = std::vector<Tensor>;
using tensor_list = std::vector<Tensor>;

// The autograd graph: each node computes its inputs' gradients from its outputs' (the
// grad_fn of a tensor; name() as libtorch's: "MulBackward0", "AccumulateGrad", or a custom
// Function's "NameBackward").
struct Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which of fn's gradient slots receives it
};

struct Node : std::enable_shared_from_this<Node> {
  virtual ~Node() = default;
  // Gradients for this node's inputs (aligned with next_edges) from the gradients of its outputs.
  virtual TensorList apply(TensorList&& grad_outputs) = 0;
  virtual std::string name() const = 0;
  virtual void release_variables() {}
  virtual size_t num_outputs() const { return 1; }
  // Undefined output gradients get zeros of this output's shape before apply.
  virtual Tensor zeros_for_output(size_t i) const {
    (void)i;
    return {};
  }
  SmallVector<Edge, 2> next_edges;
  uint64_t sequence_nr = 0;
  // Non-leaf tensors that asked retain_grad(): output slot -> tensor.
  SmallVector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>, 1> retained;
};

// What ctx->saved_data holds (libtorch's IValue, for the types such code stores).
class IValue {
 public:
  IValue() = default;
  IValue(double v) : v_(v) {}
  IValue(float v) : v_(double(v)) {}
  IValue(int64_t v) : v_(v) {}
  IValue(int v) : v_(int64_t(v)) {}
  IValue(bool v) : v_(v) {}
  IValue(Tensor t) : v_(std::move(t)) {}
  IValue(std::string s) : v_(std::move(s)) {}
  IValue(const char* s) : v_(std::string(s)) {}
  IValue(std::vector<int64_t> v) : v_(std::move(v)) {}
  IValue(IntArrayRef v) : v_(v.vec()) {}  // ctx->saved_data["sizes"] = x.sizes()
  IValue(std::vector<double> v) : v_(std::move(v)) {}
  IValue(std::vector<Tensor> v) : v_(std::move(v)) {}
  IValue(ScalarType t) : v_(int64_t(t)) {}  // stored as an integer, as libtorch does
  bool isNone() const { return v_.index() == 0; }
  bool isDouble() const { return std::holds_alternative<double>(v_); }
  bool isInt() const { return std::holds_alternative<int64_t>(v_); }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isTensor() const { return std::holds_alternative<Tensor>(v_); }
  bool isString() const { return std::holds_alternative<std::string>(v_); }
  bool isIntList() const { return std::holds_alternative<std::vector<int64_t>>(v_); }
  bool isDoubleList() const { return std::holds_alternative<std::vector<double>>(v_); }
  bool isTensorList() const { return std::holds_alternative<std::vector<Tensor>>(v_); }
  double toDouble() const;
  int64_t toInt() const;
  bool toBool() const;
  Tensor toTensor() const;
  const std::string& toStringRef() const;
  std::vector<int64_t> toIntVector() const;
  std::vector<int64_t> toIntList() const { return toIntVector(); }  // libtorch: a c10::List
  std::vector<double> toDoubleVector() const;
  std::vector<double> toDoubleList() const { return toDoubleVector(); }
  std::vector<Tensor> toTensorVector() const;
  std::vector<Tensor> toTensorList() const { return toTensorVector(); }
  ScalarType toScalarType() const;

 private:
  std::variant<std::monostate, double, int64_t, bool, Tensor, std::string, std::vector<int64_t>,
               std::vector<double>, std::vector<Tensor>>
      v_;
};

struct AutogradContext {
  // Tensors backward will read (checked against in-place changes when read back).
  void save_for_backward(variable_list to_save);
  variable_list get_saved_variables() const;
  // Inputs that forward modified in place (their version moves; they are returned as outputs).
  void mark_dirty(const variable_list& inputs);
  // Outputs that get no gradient (integer results, indices).
  void mark_non_differentiable(const variable_list& outputs);
  // With false, undefined output gradients reach backward undefined instead of as zeros.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  // Whether the i-th forward argument (counting a tensor list's tensors one by one) needs a
  // gradient.
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }

  std::unordered_map<std::string, IValue> saved_data;

  // ---- used by Function::apply
  struct Saved {
    Tensor tensor;    // inputs as given; outputs as a detached alias (no cycle)
    int output = -1;  // which output, re-attached to the node when read back
    uint32_t version = 0;
  };
  std::vector<Saved> saved_;
  variable_list dirty_, non_differentiable_;
  std::vector<bool> needs_;  // per gradient slot (forward argument, list elements one by one)
  bool materialize_grads_ = true;
  bool released_ = false;
  std::weak_ptr<Node> node_;
  std::string name_;
};

namespace detail {
// Connects `outputs`, made by forward from `inputs` (the tensor arguments; arg_index[k] is
// input k's gradient slot), to a node that runs `backward`, which returns num_args gradients.
void attach_function(const std::shared_ptr<AutogradContext>& ctx, const variable_list& inputs,
                     const std::vector<size_t>& arg_index, size_t num_args, variable_list& outputs,
                     std::function<variable_list(AutogradContext*, variable_list)> backward);
std::string demangle(const char* name);

// The gradient slots of forward's arguments, from `slot` on: one per tensor (an optional one
// too, libtorch's c10::optional<Tensor>), one per tensor of a list, one per other argument.
inline void collect(const Tensor& t, size_t& slot, variable_list& ins, std::vector<size_t>& idx) {
  ins.push_back(t);
  idx.push_back(slot++);
}
inline void collect(const std::optional<Tensor>& t, size_t& slot, variable_list& ins,
                    std::vector<size_t>& idx) {
  collect(t.value_or(Tensor()), slot, ins, idx);
}
template <class List>
requires std::same_as<List, std::vector<Tensor>> || std::same_as<List, TensorList>
void collect(const List& list, size_t& slot, variable_list& ins, std::vector<size_t>& idx) {
  for (const Tensor& t : list) collect(t, slot, ins, idx);
}
template <class A> void collect(const A&, size_t& slot, variable_list&, std::vector<size_t>&) {
  ++slot;
}

template <class R> struct Outputs;
template <> struct Outputs<Tensor> {
  static variable_list flat(Tensor t) { return {std::move(t)}; }
  static Tensor back(variable_list& v) { return v[0]; }
};
template <> struct Outputs<variable_list> {
  static variable_list flat(variable_list v) { return v; }
  static variable_list back(variable_list& v) { return v; }
};
template <class... T> struct Outputs<std::tuple<T...>> {
  static variable_list flat(std::tuple<T...> t) {
    return std::apply([](auto&... x) { return variable_list{Tensor(x)...}; }, t);
  }
  static std::tuple<T...> back(variable_list& v) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<T...>{v[I]...}; }
    (std::index_sequence_for<T...>{});
  }
};
}  // namespace detail

// CRTP base of a custom function: T provides static forward(AutogradContext*, args...) and
// static backward(AutogradContext*, variable_list grad_outputs).
template <class T> struct Function {
  template <class... Args> static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    ctx->name_ = detail::demangle(typeid(T).name()) + "Backward";
    variable_list inputs;
    std::vector<size_t> arg_index;
    size_t slots = 0;
    (detail::collect(args, slots, inputs, arg_index), ...);
    using R = std::decay_t<decltype(T::forward(ctx.get(), std::forward<Args>(args)...))>;
    variable_list outs;
    {
      NoGradGuard no_grad;
      outs = detail::Outputs<R>::flat(T::forward(ctx.get(), std::forward<Args>(args)...));
    }
    detail::attach_function(
        ctx, inputs, arg_index, slots, outs,
        [](AutogradContext* c, variable_list g) { return T::backward(c, std::move(g)); });
    return detail::Outputs<R>::back(outs);
  }
};

}  // namespace oneflow::autograd

// The libtorch spellings a program ported by the namespace swap (torch:: -> of::) trips on,
// compiled the way a program is: tests/meson.build builds this file on its own, with only the
// installed headers' include path, without ONEFLOW_BUILDING and without fmt. The file also
// declares fmt's name for itself (a global function, a struct in its own namespace): NOTE [No
// fmt in public headers] (include/oneflow/error.h) keeps that compiling.
#include <doctest/doctest.h>
#include <oneflow/oneflow.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"

#ifdef FMT_VERSION
#error "<oneflow/oneflow.h> (or harness.h) included fmt into a program's translation unit"
#endif

// A program's own `fmt`s: would be "redeclared as different kind of entity" / ambiguous if the
// headers brought in ::fmt.
int fmt(int x) { return x + 1; }
namespace app {
struct fmt {
  int width = 0;
};
using namespace of;  // as ported programs write `using namespace torch;`
int padded(int w) { return fmt{w}.width + ::fmt(w); }
}  // namespace app

using of::autograd::AutogradContext;
using of::autograd::tensor_list;
using of::autograd::Variable;
using of::autograd::variable_list;
using th::throws_with;

TEST_CASE("libtorch surface: a program's own fmt beside <oneflow/oneflow.h>, and its errors") {
  CHECK(fmt(1) == 2);
  CHECK(app::padded(3) == 7);
  // a program's of::fail / OF_CHECK format "{}" with operator<< (no fmt in the program)
  std::string msg;
  CHECK(throws_with([] { of::fail("[app] {} of '{}' is {}, {}", 3, "x", 1.5, true); },
                    {"[app] 3 of 'x' is 1.5, true"}, &msg));
  CHECK(msg == "[app] 3 of 'x' is 1.5, true");
  CHECK(throws_with([] { OF_CHECK(1 + 1 == 3, "[app] {{literal}} {1} then {0}; {:.3f}", 7, 8); },
                    {"[app] {literal} 8 then 7; 7"}, &msg));
  CHECK(msg == "[app] {literal} 8 then 7; 7");
  CHECK(throws_with(
      [] {
        of::fail("[app] shape {}, {} and {}", of::ones({2, 3}).sizes(), 'c');
      },
      {"[app] shape [2, 3], c and {}"}));
  // an error raised by inline code of the headers, in the program's translation unit
  CHECK(throws_with([] { of::data::samplers::DistributedRandomSampler(10, 2, 5); },
                    {"[DistributedSampler] rank 5 is out of range for 2 replicas"}));
}

TEST_CASE("libtorch surface: t.to(of::kCPU), t.to(\"cpu\") and the device + dtype forms") {
  of::Tensor t = of::arange(6, of::kF32).reshape({2, 3});
  of::Tensor a = t.to(of::kCPU);
  CHECK(a.device() == of::Device(of::kCPU));
  CHECK(a.dtype() == of::kFloat);
  CHECK(of::equal(a, t));
  of::Tensor b = t.to(of::kCPU, of::kF64);
  CHECK(b.dtype() == of::kDouble);
  CHECK(b.sum().item<double>() == 15.0);
  CHECK(t.to("cpu").is_cpu());
  CHECK(t.to(of::kCPU, /*non_blocking=*/false, /*copy=*/true).data_ptr() != t.data_ptr());
  CHECK(throws_with([&] { t.to("tpu"); }, {"[device] invalid device string 'tpu'"}));
}

namespace {
// item<T> where the tensor's type depends on a template parameter: C++ (as with libtorch)
// needs the `template` keyword there, or the Scalar form.
template <class Net> double read_loss(Net& net, const of::Tensor& x) {
  auto loss = net(x);
  return loss.template item<double>() + loss.item().toDouble() + loss.template item<int>();
}
template <class T>
concept ItemReadable = requires(const of::Tensor& t) {
  t.template item<T>();
};
}  // namespace

TEST_CASE("libtorch surface: item<T> in a dependent context, libtorch's item types") {
  auto net = [](const of::Tensor& x) { return (x * x).sum(); };
  CHECK(read_loss(net, of::full({2}, 1.5)) == doctest::Approx(4.5 + 4.5 + 4));
  static_assert(ItemReadable<double> && ItemReadable<int> && ItemReadable<int8_t> &&
                ItemReadable<uint64_t> && ItemReadable<of::Half>);
  static_assert(!ItemReadable<long double> && !ItemReadable<std::string>);
  CHECK(of::tensor(-7.0).item<int8_t>() == -7);
  CHECK(of::tensor(int64_t(40000)).item<int16_t>() == int16_t(40000 - 65536));  // a plain cast
  CHECK(of::tensor(3.0).item<uint64_t>() == 3u);
  // floating point into an integer type saturates; NaN gives 0
  CHECK(of::tensor(300.0).item<int8_t>() == 127);
  CHECK(of::tensor(-1e30).item<int32_t>() == std::numeric_limits<int32_t>::min());
  CHECK(of::tensor(std::nan("")).item<int64_t>() == 0);
  CHECK(throws_with([] { of::ones({2}).item<double>(); }, {"[item]", "2 elements"}));
}

TEST_CASE("libtorch surface: dtype shorthands (kF32 ... kU8) and c10's names") {
  static_assert(of::kF32 == of::kFloat && of::kF64 == of::kDouble && of::kF16 == of::kHalf);
  static_assert(of::kBF16 == of::kBFloat16 && of::kI32 == of::kInt && of::kI64 == of::kLong);
  static_assert(of::kU8 == of::kByte && of::kU8 == of::kUInt8 && of::kBool == of::ScalarType::Bool);
  CHECK(of::ones({2}, of::kF16).dtype() == of::kFloat16);
  CHECK(of::ones({2}, of::kBF16).dtype() == of::kBFloat16);
  CHECK(of::dtype_name(of::zeros({2}, of::kI64).dtype()) == "int64");
  CHECK(of::zeros({2}, at::kLong).dtype() == of::kI64);  // c10::/at:: are aliases of of::
  CHECK(of::zeros({1}, of::kU8).element_size() == 1);
}

namespace {
// libtorch's tutorial function; the tutorial calls it without a bias, so its backward returns a
// third, undefined gradient (dropped, as libtorch does).
struct LinearFunction : of::autograd::Function<LinearFunction> {
  static of::Tensor forward(AutogradContext* ctx, of::Tensor input, of::Tensor weight,
                            of::Tensor bias = of::Tensor()) {
    ctx->save_for_backward({input, weight, bias});
    of::Tensor output = input.mm(weight.t());
    if (bias.defined()) output += bias.unsqueeze(0).expand_as(output);
    return output;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto input = saved[0], weight = saved[1], bias = saved[2];
    auto grad_output = grad_outputs[0];
    auto grad_input = grad_output.mm(weight);
    auto grad_weight = grad_output.t().mm(input);
    auto grad_bias = of::Tensor();
    if (bias.defined()) grad_bias = grad_output.sum(0);
    return {grad_input, grad_weight, grad_bias};
  }
};

// libtorch's CustomFunction test: a non-tensor argument between two tensors
struct MulAdd : of::autograd::Function<MulAdd> {
  static Variable forward(AutogradContext* ctx, Variable var1, int mul, Variable var2) {
    ctx->saved_data["mul"] = mul;
    ctx->save_for_backward({var1, var2});
    return var1 + mul * var2 + var1 * var2;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_output) {
    const int64_t mul = ctx->saved_data["mul"].toInt();
    auto saved = ctx->get_saved_variables();
    return {grad_output[0] + grad_output[0] * saved[1], Variable(),
            grad_output[0] * mul + grad_output[0] * saved[0]};
  }
};

// a tensor list argument: one gradient per tensor of the list
struct PairProduct : of::autograd::Function<PairProduct> {
  static Variable forward(AutogradContext* ctx, variable_list tensors, double scale) {
    ctx->save_for_backward(tensors);
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["sizes"] = tensors[0].sizes();
    ctx->saved_data["needs"] =
        std::vector<int64_t>{ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return (tensors[0] + tensors[1] + tensors[0] * tensors[1]) * scale;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto saved = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    CHECK(ctx->saved_data["sizes"].toIntVector() == std::vector<int64_t>{3});
    return {g[0] * (1 + saved[1]) * scale, g[0] * (1 + saved[0]) * scale, Variable()};
  }
};

// of::TensorList (the op table's list, libtorch's at::TensorList) is a list argument too
struct ListSum : of::autograd::Function<ListSum> {
  static Variable forward(AutogradContext* ctx, const of::TensorList& ts) {
    ctx->saved_data["n"] = int64_t(ts.size());
    of::Tensor sum = ts[0];
    for (size_t i = 1; i < ts.size(); ++i) sum = sum + ts[i] * double(i + 1);
    return sum;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    variable_list out;
    for (int64_t i = 0; i < ctx->saved_data["n"].toInt(); ++i) out.push_back(g[0] * double(i + 1));
    return out;
  }
};

// an optional tensor argument (libtorch's c10::optional<Tensor>) counts as a tensor
struct MaybeShift : of::autograd::Function<MaybeShift> {
  static Variable forward(AutogradContext*, Variable x, std::optional<of::Tensor> shift) {
    return shift ? x * 2 + *shift : x * 2;
  }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0] * 2, g[0]}; }
};

// returns one defined gradient too many
struct TooMany : of::autograd::Function<TooMany> {
  static Variable forward(AutogradContext*, Variable x) { return x * 3; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0] * 3, g[0]}; }
};
}  // namespace

TEST_CASE("libtorch surface: custom autograd functions as libtorch programs write them") {
  of::manual_seed(0);
  of::Tensor x = of::randn({4, 3}, of::requires_grad(true));
  of::Tensor w = of::randn({2, 3}, of::requires_grad(true));
  LinearFunction::apply(x, w).sum().backward();  // bias left to forward's default
  CHECK(of::allclose(x.grad(), of::ones({4, 2}).mm(w.detach())));
  CHECK(of::allclose(w.grad(), of::ones({4, 2}).t().mm(x.detach())));

  of::Tensor a = of::randn({5}, of::requires_grad(true));
  of::Tensor b = of::randn({5}, of::requires_grad(true));
  MulAdd::apply(a, 3, b).sum().backward();
  CHECK(of::allclose(a.grad(), 1 + b.detach()));
  CHECK(of::allclose(b.grad(), 3 + a.detach()));

  of::Tensor p = of::randn({3}, of::requires_grad(true)), q = of::randn({3});
  of::Tensor y = PairProduct::apply(variable_list{p, q}, 2.0);
  CHECK(y.grad_fn()->name() == "PairProductBackward");
  y.sum().backward();
  CHECK(of::allclose(p.grad(), 2 * (1 + q)));
  CHECK_FALSE(q.grad().defined());
  of::Tensor l0 = of::ones({2}, of::requires_grad(true));
  of::Tensor l2 = of::ones({2}, of::requires_grad(true));
  ListSum::apply(of::TensorList{l0, of::ones({2}), l2}).sum().backward();
  CHECK(of::allclose(l0.grad(), of::ones({2})));
  CHECK(of::allclose(l2.grad(), of::full({2}, 3.0)));

  of::Tensor s = of::ones({3}, of::requires_grad(true));
  of::Tensor z = of::zeros({3}, of::requires_grad(true));
  MaybeShift::apply(z, std::optional<of::Tensor>(s)).sum().backward();
  CHECK(of::allclose(s.grad(), of::ones({3})));
  CHECK(of::allclose(z.grad(), of::full({3}, 2.0)));
  of::Tensor z2 = of::zeros({3}, of::requires_grad(true));
  MaybeShift::apply(z2, std::nullopt).sum().backward();
  CHECK(of::allclose(z2.grad(), of::full({3}, 2.0)));

  of::Tensor t = of::ones({2}, of::requires_grad(true));
  CHECK(throws_with([&] { TooMany::apply(t).sum().backward(); },
                    {"[TooManyBackward] backward returned 2 gradients, expected 1"}));
}

TEST_CASE("libtorch surface: ctx->saved_data holds sizes, dtypes and lists") {
  of::autograd::IValue sizes = of::ones({2, 5}).sizes();
  CHECK(sizes.isIntList());
  CHECK(sizes.toIntList() == std::vector<int64_t>{2, 5});
  of::autograd::IValue dt = of::kF64;
  CHECK(dt.toScalarType() == of::kDouble);
  of::autograd::IValue ds = std::vector<double>{0.5, 2};
  CHECK(ds.isDoubleList());
  CHECK(ds.toDoubleVector() == std::vector<double>{0.5, 2});
  of::autograd::IValue ts = std::vector<of::Tensor>{of::ones({1}), of::zeros({2})};
  CHECK(ts.isTensorList());
  CHECK(ts.toTensorList().at(1).numel() == 2);
  CHECK(
      throws_with([&] { ds.toScalarType(); }, {"[IValue] toScalarType() on a value that is not"}));
  CHECK(throws_with([] { of::autograd::IValue(int64_t(42)).toScalarType(); },
                    {"[IValue] toScalarType(): 42 is not a dtype"}));
  CHECK(throws_with([&] { sizes.toTensorVector(); }, {"[IValue] toTensorVector()"}));
}

TEST_CASE("libtorch surface: Placement(\"cpu\", std::vector<int64_t>{...})") {
  const std::vector<int64_t> ranks{0};
  CHECK(of::Placement("cpu", ranks) == of::Placement("cpu", {0}));
  of::Placement mesh("cpu", std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}});
  CHECK(mesh.hierarchy() == std::vector<int64_t>{2, 2});
  CHECK(mesh.ranks() == std::vector<int>{0, 1, 2, 3});
  CHECK(throws_with(
      [] {
        of::Placement("cpu", std::vector<int64_t>{0, int64_t(1) << 40});
      },
      {"[Placement] rank 1099511627776 is out of range"}));
  CHECK(throws_with([] { of::Placement("cpu", std::vector<int64_t>{-1}); },
                    {"[Placement] rank -1 is negative"}));
  CHECK(throws_with(
      [] {
        of::Placement("cpu", std::vector<std::vector<int64_t>>{{0, 1}, {2}});
      },
      {"[Placement] mesh rows must have the same length"}));
}

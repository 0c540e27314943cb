// of::autograd::Function (libtorch's custom autograd functions) and libtorch's node names.
#include <doctest/doctest.h>

#include "harness.h"

namespace {
using of::autograd::AutogradContext;
using of::autograd::variable_list;

// libtorch's tutorial example: a linear function with saved tensors.
struct LinearFunction : of::autograd::Function<LinearFunction> {
  static of::Tensor forward(AutogradContext* ctx, of::Tensor input, of::Tensor weight,
                            of::Tensor bias = of::Tensor()) {
    ctx->save_for_backward({input, weight, bias});
    of::Tensor output = input.mm(weight.t());
    if (bias.defined()) output += bias.unsqueeze(0).expand_as(output);
    return output;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
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

// saved_data with a non-tensor argument
struct MulConstant : of::autograd::Function<MulConstant> {
  static of::Tensor forward(AutogradContext* ctx, of::Tensor x, double c) {
    ctx->saved_data["c"] = c;
    return x * c;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {g[0] * ctx->saved_data["c"].toDouble(), of::Tensor()};
  }
};

// saving an output (exp's gradient is its output), twice differentiable
struct Exp : of::autograd::Function<Exp> {
  static of::Tensor forward(AutogradContext* ctx, of::Tensor x) {
    of::Tensor y = x.exp();
    ctx->save_for_backward({y});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {g[0] * ctx->get_saved_variables()[0]};
  }
};

// two outputs, one not differentiable
struct SortWithIndex : of::autograd::Function<SortWithIndex> {
  static std::tuple<of::Tensor, of::Tensor> forward(AutogradContext* ctx, of::Tensor x) {
    auto [v, i] = of::sort(x, 0);
    ctx->mark_non_differentiable({i});
    ctx->save_for_backward({i});
    ctx->saved_data["n"] = x.size(0);
    return {v, i};
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    of::Tensor i = ctx->get_saved_variables()[0];
    of::Tensor gx = of::zeros({ctx->saved_data["n"].toInt()}, g[0].options());
    return {gx.scatter(0, i, g[0])};
  }
};

struct WrongCount : of::autograd::Function<WrongCount> {
  static of::Tensor forward(AutogradContext*, of::Tensor x, of::Tensor) { return x * 2; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0]}; }
};
}  // namespace

TEST_CASE("autograd::Function: forward/backward with saved tensors match finite differences") {
  of::manual_seed(0);
  of::Tensor x = of::randn({4, 3}, of::kFloat64), w = of::randn({2, 3}, of::kFloat64),
             b = of::randn({2}, of::kFloat64);
  CHECK(th::gradcheck(
            [](const std::vector<of::Tensor>& in) {
              return LinearFunction::apply(in[0], in[1], in[2]);
            },
            {x, w, b})
            .empty());
  of::Tensor xg = x.clone().requires_grad_(true);
  of::Tensor y = LinearFunction::apply(xg, w, b);
  CHECK(y.grad_fn()->name() == "LinearFunctionBackward");
  CHECK(th::gradcheck(
            [](const std::vector<of::Tensor>& in) { return MulConstant::apply(in[0], 5.5); }, {x})
            .empty());
  // backward through the saved output, and a second derivative through backward's own ops
  of::Tensor z = x.clone().requires_grad_(true);
  of::Tensor e = Exp::apply(z);
  of::Tensor g1 = of::autograd::grad({e.sum()}, {z}, {}, true, true)[0];
  CHECK((g1 - z.exp()).abs().max().item<double>() < 1e-12);
  of::Tensor g2 = of::autograd::grad({g1.sum()}, {z})[0];
  CHECK((g2 - z.exp()).abs().max().item<double>() < 1e-12);
}

TEST_CASE("autograd::Function: non-differentiable outputs, errors") {
  of::Tensor x = of::tensor(std::vector<double>{3, 1, 2}, {3}, of::kFloat64).requires_grad_(true);
  auto [v, i] = SortWithIndex::apply(x);
  CHECK(v.requires_grad());
  CHECK_FALSE(i.requires_grad());
  (v * of::tensor(std::vector<double>{1, 10, 100}, {3}, of::kFloat64)).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{100, 1, 10});
  of::Tensor a = of::ones({2}).requires_grad_(true);
  of::Tensor out = WrongCount::apply(a, of::ones({2}));
  CHECK(th::throws_with([&] { out.sum().backward(); },
                        {"[WrongCountBackward]", "returned 1 gradients, expected 2"}));
  // second backward without retain_graph
  of::Tensor s = of::ones({2}).requires_grad_(true);
  of::Tensor l = Exp::apply(s).sum();
  l.backward();
  CHECK(th::throws_with([&] { l.backward(); }, {"second time"}));
  // no input requires grad: a plain result
  CHECK_FALSE(MulConstant::apply(of::ones({2}), 2.0).requires_grad());
  // IValue conversions
  of::autograd::IValue iv = 3;
  CHECK(iv.toInt() == 3);
  CHECK(iv.toDouble() == 3.0);
  CHECK(th::throws_with([&] { iv.toTensor(); }, {"[IValue]", "not a tensor"}));
}

TEST_CASE("autograd: grad_fn names as libtorch's (MulBackward0, ...)") {
  of::Tensor a = of::ones({2}).requires_grad_(true);
  CHECK((a * 2).grad_fn()->name() == "MulBackward0");
  CHECK((a + a).grad_fn()->name() == "AddBackward0");
  CHECK(a.sum().grad_fn()->name() == "SumBackward0");
}

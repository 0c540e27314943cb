// test_rnn_cell.cpp: the fused LSTM cell update (lstm_cell / lstm_cell_backward): table rows
// (values vs a float64 loop, contiguous and non-contiguous inputs, VJP vs finite
// differences), the second derivative under create_graph, and the error paths.
#include <doctest/doctest.h>

#include <cmath>

#include "dispatch.h"
#include "harness.h"

namespace {

using th::Ref;
using th::Shape;
using V = std::vector<of::Tensor>;
using R = std::vector<Ref>;

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// [h' | c'] of one LSTM update, in float64 loops.
Ref cell_ref(const Ref& gates, const Ref& c) {
  const int64_t b = c.shape[0], H = c.shape[1];
  Ref r(Shape{b, 2 * H});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < H; ++j) {
      auto G = [&](int64_t k) { return gates.v[size_t(i * 4 * H + k * H + j)]; };
      const double cn = sig(G(1)) * c.v[size_t(i * H + j)] + sig(G(0)) * std::tanh(G(2));
      r.v[size_t(i * 2 * H + j)] = sig(G(3)) * std::tanh(cn);
      r.v[size_t(i * 2 * H + H + j)] = cn;
    }
  return r;
}

of::Tensor run_cell(const V& in) {
  of::TensorList r = of::dispatch(OF_OP("lstm_cell"), {in[0], in[1]});
  return of::cat({r[0], r[1]}, 1);
}

const std::vector<std::string> kCell = {"lstm_cell", "lstm_cell_backward"};
// clang-format off
TH_ROWS({
    th::make_row("lstm_cell/batch3_hidden2", kCell, {{3, 8}, {3, 2}}, run_cell,
                 [](const R& r) { return cell_ref(r[0], r[1]); }),
    [] {
      auto row = th::make_row("lstm_cell/batch4_hidden5_wide_range", kCell, {{4, 20}, {4, 5}},
                              run_cell, [](const R& r) { return cell_ref(r[0], r[1]); });
      row.lo = -4, row.hi = 4;  // saturating gates and a large cell state
      return row;
    }(),
    th::make_row("lstm_cell/one_row", kCell, {{1, 12}, {1, 3}}, run_cell,
                 [](const R& r) { return cell_ref(r[0], r[1]); }),
});
// clang-format on

// The fused layer: [out | cs | gates] of T steps of B rows from xp [T*B, 4H], h0, c0, w_hh
// [4H, H], in float64 loops (reverse: step T-1 runs first).
Ref layer_ref(const Ref& xp, const Ref& h0, const Ref& c0, const Ref& w, int64_t T, bool reverse) {
  const int64_t B = h0.shape[0], H = h0.shape[1], G = 4 * H;
  Ref r(Shape{T * B, 6 * H});
  std::vector<double> h(h0.v), c(c0.v);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    std::vector<double> hn(static_cast<size_t>(B * H)), cn(static_cast<size_t>(B * H));
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> gate(static_cast<size_t>(G));
      for (int64_t k = 0; k < G; ++k) {
        double acc = xp.v[size_t((t * B + b) * G + k)];
        for (int64_t j = 0; j < H; ++j) acc += h[size_t(b * H + j)] * w.v[size_t(k * H + j)];
        gate[size_t(k)] = acc;
      }
      for (int64_t j = 0; j < H; ++j) {
        auto gt = [&](int64_t q) { return gate[size_t(q * H + j)]; };
        const double cc = sig(gt(1)) * c[size_t(b * H + j)] + sig(gt(0)) * std::tanh(gt(2));
        cn[size_t(b * H + j)] = cc;
        hn[size_t(b * H + j)] = sig(gt(3)) * std::tanh(cc);
      }
      double* row = &r.v[size_t((t * B + b) * 6 * H)];
      for (int64_t j = 0; j < H; ++j)
        row[j] = hn[size_t(b * H + j)], row[H + j] = cn[size_t(b * H + j)];
      for (int64_t k = 0; k < G; ++k) row[2 * H + k] = gate[size_t(k)];
    }
    h = hn, c = cn;
  }
  return r;
}

std::function<of::Tensor(const V&)> run_layer(int64_t T, bool reverse) {
  return [=](const V& in) {
    of::TensorList r =
        of::dispatch(OF_OP("lstm_layer"), {in[0], in[1], in[2], in[3]}, {T, reverse});
    return of::cat({r[0], r[1], r[2]}, 1);
  };
}

const std::vector<std::string> kLayer = {"lstm_layer", "lstm_layer_backward"};
// clang-format off
TH_ROWS({
    th::make_row("lstm_layer/steps3_batch2_hidden2", kLayer, {{6, 8}, {2, 2}, {2, 2}, {8, 2}},
                 run_layer(3, false),
                 [](const R& r) { return layer_ref(r[0], r[1], r[2], r[3], 3, false); }),
    th::make_row("lstm_layer/reverse_steps4_batch1_hidden3", kLayer,
                 {{4, 12}, {1, 3}, {1, 3}, {12, 3}}, run_layer(4, true),
                 [](const R& r) { return layer_ref(r[0], r[1], r[2], r[3], 4, true); }),
    th::make_row("lstm_layer/one_step", kLayer, {{3, 4}, {3, 1}, {3, 1}, {4, 1}},
                 run_layer(1, false),
                 [](const R& r) { return layer_ref(r[0], r[1], r[2], r[3], 1, false); }),
});
// clang-format on

TEST_CASE("lstm_layer: the second derivative (create_graph) matches finite differences") {
  of::manual_seed(11);
  const V x0 = {of::randn({6, 8}, of::kFloat64), of::randn({2, 2}, of::kFloat64),
                of::randn({2, 2}, of::kFloat64), of::randn({8, 2}, of::kFloat64)};
  for (bool reverse : {false, true}) {
    CAPTURE(reverse);
    auto first_grad = [reverse](const V& v) {
      of::EnableGradGuard eg;
      V in;
      for (const auto& t : v)
        in.push_back(t.requires_grad() ? t : t.detach().set_requires_grad(true));
      of::TensorList r =
          of::dispatch(OF_OP("lstm_layer"), {in[0], in[1], in[2], in[3]}, {int64_t(3), reverse});
      // h_n and c_n (a view of the last step) and every output, as the layers use them
      const int64_t last = reverse ? 0 : 4;
      of::Tensor y = (r[0] * r[0]).sum() + r[1].narrow(0, last, 2).sum();
      auto d = of::autograd::grad({y}, in, {}, std::nullopt, true);
      V flat;
      for (const auto& t : d) flat.push_back(t.reshape({-1}));
      return of::cat(flat, 0);
    };
    const std::string err = th::gradcheck(first_grad, x0);
    CHECK_MESSAGE(err.empty(), err);
  }
}

TEST_CASE("lstm_layer: bad input raises a bracketed error naming the shapes") {
  using th::throws_with;
  const of::Tensor xp = of::zeros({6, 8}), h = of::zeros({2, 2}), w = of::zeros({8, 2});
  auto layer = [](V in, int64_t T) {
    return [in, T] { of::dispatch(OF_OP("lstm_layer"), {in[0], in[1], in[2], in[3]}, {T, false}); };
  };
  CHECK(throws_with(layer({xp, h, h, w}, 4), {"[lstm_layer]", "4 steps", "(6, 8)"}));
  CHECK(throws_with(layer({xp, h, h, w}, 0), {"[lstm_layer]", "0 steps"}));
  CHECK(throws_with(layer({of::zeros({6, 7}), h, h, w}, 3), {"[lstm_layer]", "(6, 7)"}));
  CHECK(throws_with(layer({xp, of::zeros({3, 2}), h, w}, 3), {"[lstm_layer]", "h0", "(3, 2)"}));
  CHECK(throws_with(layer({xp, h, of::zeros({2, 3}), w}, 3), {"[lstm_layer]", "c0", "(2, 3)"}));
  CHECK(throws_with(layer({xp, h, h, of::zeros({2, 8})}, 3), {"[lstm_layer]", "w_hh", "(2, 8)"}));
  CHECK(throws_with(layer({xp, h, h, w.to(of::kFloat64)}, 3), {"[lstm_layer]", "w_hh", "float64"}));
  CHECK(throws_with(layer({xp.to(of::kInt64), h, h, w}, 3), {"[lstm_layer]", "int64"}));
  const of::Tensor o = of::zeros({6, 2});
  CHECK(throws_with(
      [&] {
        of::dispatch(OF_OP("lstm_layer_backward"),
                     {o, o, of::zeros({6, 9}), h, h, w, o, o, of::zeros({6, 8})},
                     {int64_t(3), false});
      },
      {"[lstm_layer_backward]", "grad of the gates", "(6, 9)"}));
  CHECK(throws_with(
      [&] {
        of::dispatch(OF_OP("lstm_layer_backward"),
                     {o, o, {}, h, h, w, of::zeros({5, 2}), o, of::zeros({6, 8})},
                     {int64_t(3), false});
      },
      {"[lstm_layer_backward]", "output", "(5, 2)"}));
}

TEST_CASE("lstm_cell: the second derivative (create_graph) matches finite differences") {
  // d/dgates of sum(grad wrt gates of sum(h'^2 + c')) : the VJP under create_graph is built of
  // public ops, so differentiating it again is exact rather than an error.
  of::manual_seed(3);
  const of::Tensor g0 = of::randn({2, 12}, of::kFloat64), c0 = of::randn({2, 3}, of::kFloat64);
  auto first_grad = [](const V& v) {
    of::EnableGradGuard eg;
    of::Tensor g = v[0], c = v[1];
    if (!g.requires_grad()) g = g.detach().set_requires_grad(true);
    if (!c.requires_grad()) c = c.detach().set_requires_grad(true);
    of::TensorList r = of::dispatch(OF_OP("lstm_cell"), {g, c});
    of::Tensor y = (r[0] * r[0]).sum() + r[1].sum();
    auto d = of::autograd::grad({y}, {g, c}, {}, std::nullopt, true);
    return of::cat({d[0].reshape({-1}), d[1].reshape({-1})}, 0);
  };
  const std::string err = th::gradcheck(first_grad, {g0, c0});
  CHECK_MESSAGE(err.empty(), err);
}

TEST_CASE("lstm_cell: the fused backward equals the public-op gradient") {
  of::manual_seed(5);
  const of::Tensor g0 = of::randn({4, 16}, of::kFloat64), c0 = of::randn({4, 4}, of::kFloat64);
  const of::Tensor w = of::randn({4, 8}, of::kFloat64);
  auto grads = [&](bool create_graph) {
    of::Tensor g = g0.detach().set_requires_grad(true), c = c0.detach().set_requires_grad(true);
    of::TensorList r = of::dispatch(OF_OP("lstm_cell"), {g, c});
    of::Tensor y = (of::cat({r[0], r[1]}, 1) * w).sum();
    return of::autograd::grad({y}, {g, c}, {}, std::nullopt, create_graph);
  };
  auto fused = grads(false), composite = grads(true);
  CHECK(of::allclose(fused[0], composite[0], 1e-12, 1e-12));
  CHECK(of::allclose(fused[1], composite[1], 1e-12, 1e-12));
}

TEST_CASE("lstm_cell: bad input raises a bracketed error naming the shapes") {
  using th::throws_with;
  const of::Tensor g = of::zeros({3, 8}), c = of::zeros({3, 2});
  auto cell = [](const of::Tensor& a, const of::Tensor& b) {
    return [a, b] { of::dispatch(OF_OP("lstm_cell"), {a, b}); };
  };
  CHECK(throws_with(cell(of::zeros({3, 7}), c), {"[lstm_cell]", "(batch, 4 * hidden)", "(3, 7)"}));
  CHECK(throws_with(cell(of::zeros({8}), c), {"[lstm_cell]", "(8,)"}));
  CHECK(throws_with(cell(g, of::zeros({3, 3})), {"[lstm_cell]", "(3, 2)", "(3, 3)"}));
  CHECK(throws_with(cell(g, of::zeros({2, 2})), {"[lstm_cell]", "(2, 2)"}));
  CHECK(throws_with(cell(g, of::zeros({3, 2}, of::kFloat64)), {"[lstm_cell]", "float64"}));
  CHECK(throws_with(cell(of::zeros({3, 8}, of::kInt64), c), {"[lstm_cell]", "int64"}));
  CHECK(throws_with(cell(g, of::Tensor()), {"[lstm_cell]", "undefined"}));
  auto bwd = [&](const of::Tensor& dh, const of::Tensor& cn) {
    return [=] { of::dispatch(OF_OP("lstm_cell_backward"), {dh, c, g, c, cn}); };
  };
  CHECK(throws_with(bwd(of::zeros({3, 3}), c), {"[lstm_cell_backward]", "grad of h", "(3, 3)"}));
  CHECK(throws_with(bwd(c, of::zeros({2, 2})), {"[lstm_cell_backward]", "new cell state"}));
  CHECK(throws_with(bwd(c, of::zeros({3, 2}, of::kFloat64)),
                    {"[lstm_cell_backward]", "new cell state", "float64"}));
  // the fused backward itself is not differentiable: a clear error, never a missing term
  of::Tensor dh = of::zeros({3, 2}).set_requires_grad(true);
  of::TensorList r = [&] {
    of::EnableGradGuard eg;
    return of::dispatch(OF_OP("lstm_cell_backward"), {dh, c, g, c, c});
  }();
  REQUIRE(r[0].requires_grad());
  CHECK(throws_with([&] { r[0].sum().backward(); },
                    {"[lstm_cell_backward]", "double backward", "not implemented"}));
}

}  // namespace

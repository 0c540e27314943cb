// int8 weights with dynamically quantized activations (NOTE [Dynamic int8 linear],
// TraceOptions::quantize_int8): the integer sums exact (the VNNI tile and the plain loops give
// the same bits, equal to a direct emulation of the formulas), the error against float32, a
// trained model's predictions, and what the trace rewrite converts and refuses.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/gemm_bf16.h"
#include "cpu/gemm_s8.h"
#include "cpu/nn.h"
#include "harness.h"
#include "oneflow/quantize.h"
#include "trace/graph.h"
#include "trace/passes.h"
#include "trace/recording.h"

namespace {

of::Tensor int8_linear(const of::Tensor& x, const of::Tensor& w, const of::Tensor& b) {
  return of::dispatch(of::find_op("linear_dynamic_int8"), {x, w, b})[0];
}

// The formulas of NOTE [Dynamic int8 linear], written out directly.
std::vector<float> emulate(const std::vector<float>& x, const std::vector<float>& w,
                           const std::vector<float>& b, int64_t m, int64_t n, int64_t k) {
  std::vector<float> s(static_cast<size_t>(n)), y(static_cast<size_t>(m * n));
  std::vector<int32_t> q(static_cast<size_t>(n * k)), c(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    float mx = 0;
    for (int64_t p = 0; p < k; ++p) mx = std::max(mx, std::fabs(w[size_t(j * k + p)]));
    s[size_t(j)] = mx > 0 ? mx / 127.f : 1.f;
    for (int64_t p = 0; p < k; ++p) {
      q[size_t(j * k + p)] =
          int32_t(std::clamp(std::nearbyint(w[size_t(j * k + p)] / s[size_t(j)]), -127.f, 127.f));
      c[size_t(j)] += q[size_t(j * k + p)];
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    float lo = 0, hi = 0;
    for (int64_t p = 0; p < k; ++p) {
      lo = std::min(lo, x[size_t(i * k + p)]);
      hi = std::max(hi, x[size_t(i * k + p)]);
    }
    const float a = hi > lo ? (hi - lo) / 255.f : 1.f;
    const int32_t z = int32_t(std::clamp(std::nearbyint(-lo / a), 0.f, 255.f));
    for (int64_t j = 0; j < n; ++j) {
      int32_t acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const int32_t u =
            int32_t(std::clamp(std::nearbyint(x[size_t(i * k + p)] / a) + float(z), 0.f, 255.f));
        acc += u * q[size_t(j * k + p)];
      }
      y[size_t(i * n + j)] =
          std::fma(float(acc - z * c[size_t(j)]), a * s[size_t(j)], b[size_t(j)]);
    }
  }
  return y;
}

// The int8 kernels this CPU has (plain loops always).
std::vector<of::cpu::S8Path> s8_paths() {
  std::vector<of::cpu::S8Path> out = {of::cpu::S8Path::kPlain};
  if (of::cpu::gemm_s8_vnni()) out.push_back(of::cpu::S8Path::kVnni);
  if (of::cpu::gemm_s8_amx()) out.push_back(of::cpu::S8Path::kAmx);
  return out;
}

}  // namespace

TEST_CASE("quantize: int8 sums are exact (AMX, VNNI and plain loops give the formulas' bits)") {
  const std::string best = of::cpu::s8_path_name(of::cpu::gemm_s8_best());
  MESSAGE("int8 products on this CPU: " << best);
  of::manual_seed(17);
  for (const auto& shape : std::vector<std::array<int64_t, 3>>{{1, 1, 1},
                                                               {5, 7, 3},
                                                               {13, 33, 70},
                                                               {16, 32, 64},
                                                               {17, 31, 65},
                                                               {37, 45, 130},
                                                               {128, 96, 384}}) {
    const int64_t m = shape[0], n = shape[1], k = shape[2];
    INFO("m " << m << " n " << n << " k " << k);
    const of::Tensor x = of::randn({m, k}), w = of::randn({n, k}) * 0.2, b = of::randn({n});
    const of::Tensor vnni = int8_linear(x, w, b);  // (the best path)
    for (const of::cpu::S8Path p : s8_paths()) {
      INFO("path " << of::cpu::s8_path_name(p));
      const of::cpu::S8Path prev = of::cpu::set_linear_int8_path(p);
      const of::Tensor other = int8_linear(x, w, b);
      of::cpu::set_linear_int8_path(prev);
      CHECK(th::same_bits(vnni, other));
    }
    const std::vector<float> want =
        emulate(x.to_vector<float>(), w.to_vector<float>(), b.to_vector<float>(), m, n, k);
    CHECK(vnni.to_vector<float>() == want);
    // close to float32: the quantization error, about 1% of the outputs' scale
    const of::Tensor f = of::linear(x, w, b);
    CHECK((vnni - f).abs().max().item<double>() <= 0.02 * f.abs().max().item<double>() + 1e-6);
  }
  // a zero row and a zero weight row (scales 1), negative-only and positive-only rows
  const of::Tensor x = of::stack({of::zeros({8}), -of::rand({8}), of::rand({8})});
  of::Tensor w = of::randn({3, 8});
  w.select(0, 1).zero_();
  const of::Tensor b = of::zeros({3});
  CHECK(int8_linear(x, w, b).to_vector<float>() ==
        emulate(x.to_vector<float>(), w.to_vector<float>(), b.to_vector<float>(), 3, 3, 8));
  CHECK(th::throws_with([&] { int8_linear(x.to(of::kFloat64), w, b); },
                        {"[linear_dynamic_int8]", "float32"}));
  CHECK(th::throws_with([&] { int8_linear(x, of::randn({3, 5}), b); }, {"(3, 8)", "(3, 5)"}));
}

// fuzz_ops found the NaN row (tests/fuzz/regressions/ops_linear_int8_nan_row.bin): NaN converted
// to uint8, undefined behaviour.
TEST_CASE("quantize: an inf or a NaN in a row of x reaches the output; in the weight, an error") {
  of::manual_seed(23);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t n = 37, k = 19;
  const of::Tensor w = of::randn({n, k}) * 0.1, b = of::randn({n});
  of::Tensor x = of::randn({4, k});
  x.index_put_({1, 3}, inf);
  x.index_put_({2, 0}, nan);
  x.index_put_({3, 5}, 1.8e38f);  // a finite row whose range, 3.6e38, overflows a float
  x.index_put_({3, 6}, -1.8e38f);
  for (const of::cpu::S8Path path : s8_paths()) {
    INFO("path " << of::cpu::s8_path_name(path));
    const of::cpu::S8Path prev = of::cpu::set_linear_int8_path(path);
    const of::Tensor y = int8_linear(x, w, b);
    of::cpu::set_linear_int8_path(prev);
    // row 0 as the formulas give it
    const std::vector<float> want0 = emulate(x.select(0, 0).contiguous().to_vector<float>(),
                                             w.to_vector<float>(), b.to_vector<float>(), 1, n, k);
    CHECK(y.select(0, 0).to_vector<float>() == want0);
    // rows 1-3: the sums against the dequantized weight (float64 here): inf where the column's
    // int8 weight at the inf is not zero, NaN in the NaN row, and the wide row within rounding
    const std::vector<float> wv = w.to_vector<float>(), bv = b.to_vector<float>();
    for (int64_t i = 1; i < 4; ++i) {
      const std::vector<float> xi = x.select(0, i).contiguous().to_vector<float>();
      const std::vector<float> yi = y.select(0, i).to_vector<float>();
      for (int64_t j = 0; j < n; ++j) {
        float mx = 0;
        for (int64_t p = 0; p < k; ++p) mx = std::max(mx, std::fabs(wv[size_t(j * k + p)]));
        const float s = mx / 127.f;
        double want = bv[size_t(j)], mag = std::fabs(want);
        for (int64_t p = 0; p < k; ++p) {
          const double d =
              double(std::clamp(std::nearbyint(wv[size_t(j * k + p)] / s), -127.f, 127.f) * s);
          want += double(xi[size_t(p)]) * d;
          mag += std::fabs(double(xi[size_t(p)]) * d);
        }
        const double got = yi[size_t(j)];
        INFO("row " << i << " col " << j << " want " << want << " got " << got);
        if (std::isnan(want)) CHECK(std::isnan(got));
        else if (std::isinf(want)) CHECK(got == want);
        else CHECK(std::fabs(got - want) <= 1e-6 * mag);
      }
    }
    // the inf row is ±inf wherever the column's weight at [3] is not zero; the NaN row is NaN
    CHECK(std::isinf(y.select(0, 1).abs().max().item<double>()));
    CHECK(std::isnan(y.select(0, 2).sum().item<double>()));
  }
  // a weight that is not finite has no int8 form: a clear error, the output untouched
  for (const float bad : {inf, -inf, nan}) {
    of::Tensor wb = w.clone();
    wb.index_put_({7, 2}, bad);
    CHECK(th::throws_with([&] { int8_linear(x.select(0, 0).unsqueeze(0), wb, b); },
                          {"[linear_dynamic_int8]", "[37, 19]", "[7, 2]", "not finite"}));
  }
}

TEST_CASE("quantize: a trained classifier's predictions survive int8 weights (traced)") {
  // 4 Gaussian classes in 32 dims; an MLP trained in float32, then served traced with and
  // without quantize_int8
  of::manual_seed(23);
  const int64_t d = 32, classes = 4;
  const of::Tensor centers = of::randn({classes, d}) * 0.5;  // overlapping: ~90% separable
  auto draw = [&](int64_t count) {
    const of::Tensor y = of::randint(0, classes, {count}, of::kInt64);
    return std::make_pair(centers.index_select(0, y) + of::randn({count, d}), y);
  };
  const auto [xtrain, ytrain] = draw(4000);
  const auto [xtest, ytest] = draw(2000);
  of::nn::Sequential mlp(of::nn::Linear(d, 64), of::nn::ReLU(), of::nn::Linear(64, 64),
                         of::nn::ReLU(), of::nn::Linear(64, classes));
  of::optim::Adam opt(mlp->parameters(), of::optim::AdamOptions(3e-3));
  for (int step = 0; step < 300; ++step) {
    const of::Tensor idx = of::randint(0, 4000, {128}, of::kInt64);
    opt.zero_grad();
    of::nn::functional::cross_entropy(mlp->forward(xtrain.index_select(0, idx)),
                                      ytrain.index_select(0, idx))
        .backward();
    opt.step();
  }
  mlp->eval();
  of::NoGradGuard ng;
  auto fp = of::jit::trace([&](const of::Tensor& x) { return mlp->forward(x); });
  auto q8 = of::jit::trace([&](const of::Tensor& x) { return mlp->forward(x); },
                           of::jit::TraceOptions().quantize_int8(true));
  (void)fp(xtest);  // the recording calls run eagerly (float32); the replays below are measured
  (void)q8(xtest);
  const of::Tensor a = fp(xtest), b = q8(xtest);
  const double agree = (a.argmax(1) == b.argmax(1)).to(of::kFloat64).mean().item<double>();
  const double acc_f = (a.argmax(1) == ytest).to(of::kFloat64).mean().item<double>();
  const double acc_q = (b.argmax(1) == ytest).to(of::kFloat64).mean().item<double>();
  const double err = (a - b).abs().max().item<double>(), scale = a.abs().max().item<double>();
  MESSAGE("int8 vs float32: argmax agreement " << agree << ", accuracy " << acc_q << " vs " << acc_f
                                               << ", max logit error " << err << " of logits up to "
                                               << scale);
  CHECK(acc_f > 0.8);
  CHECK(agree >= 0.99);
  CHECK(acc_q >= acc_f - 0.01);
  CHECK(err <= 0.05 * scale);
  CHECK(q8.graph().find("linear_dynamic_int8") != std::string::npos);
  CHECK(fp.graph().find("linear_dynamic_int8") == std::string::npos);
  // quantize_dynamic on the module itself: eager calls run the int8 op, equal to the traced
  // rewrite's result bitwise (the same quantization of the same weights)
  const of::Tensor ref = b;
  of::nn::Sequential copy(of::nn::Linear(d, 64), of::nn::ReLU(), of::nn::Linear(64, 64),
                          of::nn::ReLU(), of::nn::Linear(64, classes));
  {
    auto src = mlp->parameters(), dst = copy->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  copy->eval();
  CHECK(of::quantize_dynamic(copy) == 3);
  CHECK(of::quantized_weight(copy->parameters()[0]));
  CHECK(!of::quantized_weight(mlp->parameters()[0]));
  CHECK(th::same_bits(copy->forward(xtest), ref));
  CHECK(th::same_bits(mlp->forward(xtest), a));  // the original stays float32
  {
    of::EnableGradGuard grad;
    const of::Tensor xg = xtest.clone().set_requires_grad(true);
    CHECK(th::throws_with([&] { (void)copy->forward(xg); }, {"[linear]", "quantize_dynamic"}));
  }
  // the weights are quantized once: later replays reuse them
  const size_t held = of::cpu::packed_constant_operands();
  for (int i = 0; i < 3; ++i) (void)q8(xtest);
  CHECK(of::cpu::packed_constant_operands() == held);
  CHECK(th::same_bits(q8(xtest), b));
}

TEST_CASE("quantize: the rewrite converts read-only float32 weights only, saying why not") {
  of::manual_seed(29);
  const of::Tensor w = of::randn({16, 8}), b = of::randn({16});
  auto rec = [](const std::function<std::vector<of::Tensor>(const std::vector<of::Tensor>&)>& fn,
                const std::vector<of::Tensor>& in) {
    of::NoGradGuard ng;
    return of::trace::quantize_int8(of::trace::record(fn, in).graph);
  };
  auto count = [](const of::trace::Graph& g, const std::string& op) {
    size_t c = 0;
    for (const auto& n : g.nodes) c += n.op->name == op;
    return c;
  };
  auto has = [](const of::trace::Graph& g, const std::string& s) {
    for (const auto& l : g.rewrites)
      if (l.find(s) != std::string::npos) return true;
    return false;
  };
  const of::Tensor x = of::randn({4, 8});
  const of::trace::Graph g1 = rec(
      [&](const std::vector<of::Tensor>& in) {
        return std::vector<of::Tensor>{of::linear(in[0], w, b)};
      },
      {x});
  CHECK(count(g1, "linear_dynamic_int8") == 1);
  CHECK(has(g1, "-> linear_dynamic_int8 (weight (16, 8))"));
  // a weight made in the graph, a weight given as an input, float64
  const of::trace::Graph g2 = rec(
      [&](const std::vector<of::Tensor>& in) {
        return std::vector<of::Tensor>{of::linear(in[0], w * 2, b), of::linear(in[0], in[1])};
      },
      {x, of::randn({3, 8})});
  CHECK(count(g2, "linear_dynamic_int8") == 0);
  CHECK(has(g2, "computed in the graph"));
  const of::trace::Graph g3 = rec(
      [&](const std::vector<of::Tensor>& in) {
        return std::vector<of::Tensor>{of::linear(in[0], w.to(of::kFloat64))};
      },
      {x.to(of::kFloat64)});
  CHECK(count(g3, "linear_dynamic_int8") == 0);
  CHECK(has(g3, "float64"));
  // off by default
  auto plain = of::jit::trace([&](const of::Tensor& a) { return of::linear(a, w, b); });
  of::NoGradGuard ng;
  (void)plain(x);
  CHECK(plain.graph().find("linear_dynamic_int8") == std::string::npos);
}

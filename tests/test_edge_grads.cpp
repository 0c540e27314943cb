// NOTE [Edge gradients]: values and gradients of the ops and losses that have a singular,
// clamped or saturated point (log, sqrt, pow, div, atan2, norms, clamps, the piecewise
// activations, prod/cumprod with zeros, binary cross entropy at exactly 0 and 1, ...), at those
// points, against libtorch's: tests/data/edge_grads.tsv, written by tools/make_edge_grads.py
// with PyTorch. Beside the finite-difference checks of the op table (which sample the smooth
// interior), this pins where an infinity, a NaN or a finite one-sided value comes out — a GAN
// ported from libtorch trained into NaN here because BCE's gradient at 0 was NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "harness.h"

namespace F = of::nn::functional;
using V = std::vector<of::Tensor>;

namespace {

// Each case of tools/make_edge_grads.py, written with the library.
const std::map<std::string, std::function<of::Tensor(const V&)>>& cases() {
  static const std::map<std::string, std::function<of::Tensor(const V&)>> m = {
      {"log", [](const V& x) { return of::log(x[0]); }},
      {"log2", [](const V& x) { return of::log2(x[0]); }},
      {"log1p", [](const V& x) { return of::log1p(x[0]); }},
      {"sqrt", [](const V& x) { return of::sqrt(x[0]); }},
      {"rsqrt", [](const V& x) { return of::rsqrt(x[0]); }},
      {"reciprocal", [](const V& x) { return of::reciprocal(x[0]); }},
      {"exp", [](const V& x) { return of::exp(x[0]); }},
      {"pow_2", [](const V& x) { return of::pow(x[0], 2); }},
      {"pow_half", [](const V& x) { return of::pow(x[0], 0.5); }},
      {"pow_0", [](const V& x) { return of::pow(x[0], 0); }},
      {"pow_neg1", [](const V& x) { return of::pow(x[0], -1); }},
      {"pow_tensor", [](const V& x) { return of::pow(x[0], x[1]); }},
      {"pow_scalar_base0", [](const V& x) { return of::pow(of::Scalar(0.0), x[0]); }},
      {"div", [](const V& x) { return x[0] / x[1]; }},
      {"atan2", [](const V& x) { return of::atan2(x[0], x[1]); }},
      {"norm2_zero", [](const V& x) { return of::norm(x[0], 2); }},
      {"norm1_zero", [](const V& x) { return of::norm(x[0], 1); }},
      {"norm2_rows",
       [](const V& x) {
         return of::norm(x[0].reshape({2, 2}), 2, {1});
       }},
      {"normalize_zero",
       [](const V& x) {
         return F::normalize(x[0].reshape({2, 3}), F::NormalizeFuncOptions().dim(1));
       }},
      {"clamp", [](const V& x) { return of::clamp(x[0], of::Scalar(0.0), of::Scalar(1.0)); }},
      {"clamp_min", [](const V& x) { return of::clamp_min(x[0], 0.0); }},
      {"relu", [](const V& x) { return of::relu(x[0]); }},
      {"abs", [](const V& x) { return of::abs(x[0]); }},
      {"sign", [](const V& x) { return of::sign(x[0]); }},
      {"hardtanh", [](const V& x) { return of::hardtanh(x[0]); }},
      {"leaky_relu", [](const V& x) { return of::leaky_relu(x[0], 0.1); }},
      {"elu", [](const V& x) { return of::elu(x[0]); }},
      {"hardswish", [](const V& x) { return of::hardswish(x[0]); }},
      {"hardsigmoid", [](const V& x) { return of::hardsigmoid(x[0]); }},
      {"softplus", [](const V& x) { return of::softplus(x[0]); }},
      {"sigmoid", [](const V& x) { return of::sigmoid(x[0]); }},
      {"sigmoid_f32", [](const V& x) { return of::sigmoid(x[0]); }},
      {"tanh", [](const V& x) { return of::tanh(x[0]); }},
      {"log_sigmoid", [](const V& x) { return of::log_sigmoid(x[0]); }},
      {"silu", [](const V& x) { return of::silu(x[0]); }},
      {"maximum_ties", [](const V& x) { return of::maximum(x[0], x[1]); }},
      {"minimum_ties", [](const V& x) { return of::minimum(x[0], x[1]); }},
      {"prod_one_zero", [](const V& x) { return of::prod(x[0]); }},
      {"prod_two_zeros", [](const V& x) { return of::prod(x[0]); }},
      {"cumprod_zero", [](const V& x) { return of::cumprod(x[0], 0); }},
      {"bce_f32", [](const V& x) { return of::binary_cross_entropy(x[0], x[1]); }},
      {"bce_f64",
       [](const V& x) { return of::binary_cross_entropy(x[0], x[1], {}, of::Reduction::Sum); }},
      {"bce_weight",
       [](const V& x) {
         return of::binary_cross_entropy(x[0], x[1], x[2].detach(), of::Reduction::Sum);
       }},
      {"bce_logits", [](const V& x) { return of::binary_cross_entropy_with_logits(x[0], x[1]); }},
      {"l1_equal", [](const V& x) { return of::l1_loss(x[0], x[1]); }},
      {"smooth_l1_at_beta",
       [](const V& x) { return of::smooth_l1_loss(x[0], x[1], of::Reduction::Sum, 1.0); }},
      {"kl_div_zero_target",
       [](const V& x) { return of::kl_div(x[0], x[1].detach(), of::Reduction::Sum); }},
  };
  return m;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::stringstream ss(s);
  while (std::getline(ss, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

std::vector<double> numbers(const std::string& s) {
  std::vector<double> v;
  for (const std::string& x : split(s, ','))
    if (!x.empty()) v.push_back(std::strtod(x.c_str(), nullptr));  // "inf", "-inf", "nan" too
  return v;
}

// The same number: both NaN, the same infinity, or within rtol of the reference.
bool same_number(double got, double want, double rtol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= rtol * std::max(1.0, std::fabs(want));
}

std::string list(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

}  // namespace

TEST_CASE("edge gradients: values and gradients at the edges of ops' domains equal libtorch's") {
  std::ifstream in(ONEFLOW_SOURCE_ROOT "/tests/data/edge_grads.tsv");
  REQUIRE(in.good());
  std::string line;
  size_t checked = 0;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split(line, '\t');
    REQUIRE(f.size() == 5);
    const std::string& name = f[0];
    INFO("case ", name);
    auto it = cases().find(name);
    REQUIRE_MESSAGE(it != cases().end(), "no twin of case ", name);
    seen.insert(name);
    const of::ScalarType dt = f[1] == "float32" ? of::kFloat32 : of::kFloat64;
    // (libtorch computes a few float64 constants in float32: hardsigmoid's 1/6 is 1/6f)
    const double rtol = dt == of::kFloat32 ? 2e-6 : 1e-7;
    V xs;
    for (const std::string& s : split(f[2], ';')) {
      const std::vector<double> v = numbers(s);
      xs.push_back(of::tensor(v).to(dt).requires_grad_(true));
    }
    of::Tensor y = it->second(xs);
    const std::vector<double> want = numbers(f[3]);
    const std::vector<double> got = y.detach().to(of::kFloat64).reshape({-1}).to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK_MESSAGE(same_number(got[i], want[i], rtol), "result ", i, ": ", list(got),
                    " vs libtorch ", list(want));
    y.sum().backward();
    const std::vector<std::string> grads = split(f[4], ';');
    REQUIRE(grads.size() == xs.size());
    for (size_t k = 0; k < xs.size(); ++k) {
      const std::vector<double> gw = numbers(grads[k]);
      if (gw.empty()) continue;  // libtorch gives this input no gradient
      REQUIRE_MESSAGE(xs[k].grad().defined(), "input ", k, " has no gradient");
      const std::vector<double> gg = xs[k].grad().to(of::kFloat64).to_vector<double>();
      REQUIRE(gg.size() == gw.size());
      for (size_t i = 0; i < gg.size(); ++i)
        CHECK_MESSAGE(same_number(gg[i], gw[i], rtol), "gradient of input ", k, " at ", i, ": ",
                      list(gg), " vs libtorch ", list(gw));
    }
    ++checked;
  }
  CHECK(seen.size() == cases().size());
  MESSAGE("edge gradients: ", checked, " cases against libtorch's values");
}

TEST_CASE("edge gradients: a GAN's discriminator loss stays finite where sigmoid saturates") {
  // pytorch-cpp's GAN tutorial ported: D(G(z)) saturates to exactly 0 or 1 in float32 (sigmoid
  // of +-200); BCE's gradient there is finite, as libtorch's
  of::Tensor logits = of::tensor(std::vector<float>{-200.f, 200.f, 0.f}).requires_grad_(true);
  of::Tensor p = of::sigmoid(logits);
  CHECK(p[0].item<float>() == 0.f);
  CHECK(p[1].item<float>() == 1.f);
  of::Tensor loss = of::binary_cross_entropy(p, of::tensor(std::vector<float>{1.f, 0.f, 1.f}));
  loss.backward();
  CHECK(std::isfinite(loss.item<float>()));
  for (float g : logits.grad().to_vector<float>()) CHECK(std::isfinite(g));
}

namespace {
// BCE written as the composite it was before NOTE [BCE gradient] (for the test below, through
// OF_TEST_COMPOSITE_BCE=1: it trains into NaN where the op's gradient does not).
of::Tensor composite_bce(const of::Tensor& x, const of::Tensor& t) {
  return (-(t * x.log().clamp_min(-100.0) + (1.0 - t) * (1.0 - x).log().clamp_min(-100.0))).mean();
}
}  // namespace

TEST_CASE("edge gradients: the pytorch-cpp GAN tutorial, ported, trains without NaN") {
  // prabhuomkar/pytorch-cpp, tutorials/advanced/generative_adversarial_network: an MLP GAN with
  // a sigmoid discriminator and BCE, Adam(2e-4), batch 100, here on Fashion-MNIST. Ported by the
  // torch:: -> of:: swap it trained into NaN between steps 400 and 600 (the discriminator's
  // sigmoid saturates to exactly 0 or 1 in float32; BCE's backward was NaN there).
  // (single-threaded: the NaN's step depends on the summation order)
  of::ThreadLimitGuard one(1);
  namespace nn = of::nn;
  const std::string root = of::data::kFashionMnistDir;
  if (!std::ifstream(root + "/train-images-idx3-ubyte.gz").good()) {
    MESSAGE("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  const bool composite = std::getenv("OF_TEST_COMPOSITE_BCE") != nullptr;
  auto bce = [&](const of::Tensor& x, const of::Tensor& t) {
    return composite ? composite_bce(x, t) : of::binary_cross_entropy(x, t);
  };
  of::manual_seed(1);
  const int64_t latent = 64, hidden = 256, image = 784, batch = 100;
  nn::Sequential D(
      nn::Linear(image, hidden), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
      nn::Linear(hidden, hidden), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
      nn::Linear(hidden, 1), nn::Sigmoid());
  nn::Sequential G(nn::Linear(latent, hidden), nn::ReLU(), nn::Linear(hidden, hidden), nn::ReLU(),
                   nn::Linear(hidden, image), nn::Tanh());
  of::optim::Adam d_opt(D->parameters(), of::optim::AdamOptions(2e-4));
  of::optim::Adam g_opt(G->parameters(), of::optim::AdamOptions(2e-4));
  of::data::MNIST ds(root);
  const of::Tensor images = (ds.data().reshape({-1, image}) - 0.5) / 0.5;  // Normalize(0.5, 0.5)
  const int64_t n = images.size(0);
  const of::Tensor real = of::ones({batch, 1}), fake_l = of::zeros({batch, 1});
  int steps = 0, first_nan = -1;
  // 1000 steps: with the composite BCE (OF_TEST_COMPOSITE_BCE=1) this run reaches NaN at step
  // 717; with the op's gradient it trains on (3000 steps checked: OF_TEST_GAN_STEPS=3000)
  const char* env_steps = std::getenv("OF_TEST_GAN_STEPS");
  const int max_steps = env_steps ? std::atoi(env_steps) : 1000;
  for (int64_t i = 0; steps < max_steps; i = (i + batch) % (n - batch), ++steps) {
    const of::Tensor x = images.narrow(0, i, batch);
    of::Tensor d_loss = bce(D->forward(x), real) +
                        bce(D->forward(G->forward(of::randn({batch, latent})).detach()), fake_l);
    d_opt.zero_grad();
    d_loss.backward();
    d_opt.step();
    of::Tensor g_loss = bce(D->forward(G->forward(of::randn({batch, latent}))), real);
    g_opt.zero_grad();
    g_loss.backward();
    g_opt.step();
    const double dl = d_loss.item<double>(), gl = g_loss.item<double>();
    if (!std::isfinite(dl) || !std::isfinite(gl)) {
      first_nan = steps;
      break;
    }
  }
  MESSAGE("GAN: ", steps, " steps",
          first_nan >= 0 ? " (NaN at step " + std::to_string(first_nan) + ")" : "");
  CHECK(first_nan < 0);
  for (const of::Tensor& p : D->parameters())
    CHECK(!(of::isnan(p) | of::isinf(p)).any().item<bool>());
}

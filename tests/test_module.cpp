// test_module.cpp: nn::Module registration and traversal, state dicts, to(), printing, the
// layers' forward/initialization against float64 references, containers, init.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unistd.h>

#include "harness.h"

namespace of = oneflow;
namespace nn = oneflow::nn;

namespace {

struct NetImpl : nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", nn::Linear(4, 3));
    bn = register_module("bn", nn::BatchNorm1d(3));
    fc2 = register_module("fc2", nn::Linear(nn::LinearOptions(3, 2).bias(false)));
    scale = register_parameter("scale", of::ones({2}));
  }
  of::Tensor forward(const of::Tensor& x) { return fc2(bn(fc1(x)).relu()) * scale; }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::BatchNorm1d bn{nullptr};
  of::Tensor scale;
};
OF_MODULE(Net);

std::vector<std::string> keys(const of::OrderedDict<std::string, of::Tensor>& d) {
  return d.keys();
}

}  // namespace

TEST_CASE("module: registration order, dotted names, buffers, children, train/eval") {
  Net net;
  CHECK(keys(net->named_parameters()) == std::vector<std::string>{"scale", "fc1.weight", "fc1.bias",
                                                                  "bn.weight", "bn.bias",
                                                                  "fc2.weight"});
  CHECK(keys(net->named_parameters(false)) == std::vector<std::string>{"scale"});
  CHECK(keys(net->named_buffers()) ==
        std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"});
  CHECK(net->children().size() == 3);
  CHECK(net->modules().size() == 4);
  CHECK(keys(net->state_dict()).size() == 9);
  for (auto& p : net->parameters()) CHECK(p.requires_grad());
  CHECK(net->is_training());
  net->eval();
  CHECK(!net->bn->is_training());
  net->train();
  CHECK(net->fc1->is_training());
  CHECK(net->name() == "NetImpl");
  CHECK(
      th::throws_with([&] { net->register_parameter("a.b", of::ones({1})); }, {"[Module]", "a.b"}));
  CHECK(th::throws_with([&] { net->register_parameter("scale", of::ones({1})); },
                        {"[OrderedDict]", "scale"}));
  nn::Linear empty{nullptr};
  CHECK(th::throws_with([&] { (void)empty->weight; }, {"[nn]", "empty"}));
}

TEST_CASE("module: Linear forward, backward and libtorch's default initialization") {
  of::manual_seed(3);
  nn::Linear fc(50, 7);
  const double bound = 1 / std::sqrt(50.0);
  CHECK(fc->weight.sizes().vec() == std::vector<int64_t>{7, 50});
  CHECK(fc->weight.abs().amax().item<float>() <= bound);
  CHECK(fc->bias.abs().amax().item<float>() <= bound);
  // uniform in [-bound, bound]: variance bound^2 / 3
  CHECK(fc->weight.to(of::kFloat64).var().item<double>() ==
        doctest::Approx(bound * bound / 3).epsilon(0.15));
  of::Tensor x = of::randn({4, 50});
  of::Tensor y = fc(x);
  std::vector<double> xv = x.to_vector<double>(), wv = fc->weight.to_vector<double>(),
                      bv = fc->bias.to_vector<double>(), yv = y.to_vector<double>();
  bool ok = true;
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 7; ++o) {
      double s = bv[size_t(o)];
      for (int k = 0; k < 50; ++k) s += xv[size_t(i * 50 + k)] * wv[size_t(o * 50 + k)];
      ok = ok && std::abs(s - yv[size_t(i * 7 + o)]) < 1e-5;
    }
  CHECK(ok);
  y.sum().backward();
  CHECK(fc->weight.grad().sizes().vec() == std::vector<int64_t>{7, 50});
  CHECK(fc->bias.grad().to_vector<float>() == std::vector<float>(7, 4.0f));
  fc->zero_grad();
  CHECK(!fc->weight.grad().defined());
  CHECK(th::throws_with([&] { fc(of::randn({4, 49})); }, {"(4, 49)"}));
}

TEST_CASE("module: state_dict / load_state_dict (strict, non-strict, no partial change)") {
  Net a, b;
  of::manual_seed(11);
  b->fc1->reset_parameters();
  a->load_state_dict(b->state_dict());
  for (auto& kv : a->state_dict())
    CHECK(kv.value().to(of::kFloat64).to_vector<double>() ==
          b->state_dict()[kv.key()].to(of::kFloat64).to_vector<double>());
  // loading copies values: a's parameters keep their own storage
  CHECK(a->fc1->weight.data_ptr() != b->fc1->weight.data_ptr());
  nn::StateDict sd = b->state_dict();
  nn::StateDict missing;
  for (auto& kv : sd)
    if (kv.key() != "fc2.weight") missing.insert(kv.key(), kv.value());
  CHECK(th::throws_with([&] { a->load_state_dict(missing); },
                        {"[load_state_dict]", "missing", "fc2.weight"}));
  a->load_state_dict(missing, /*strict=*/false);
  nn::StateDict extra = b->state_dict();
  extra.insert("fc3.weight", of::ones({1}));
  CHECK(th::throws_with([&] { a->load_state_dict(extra); }, {"unexpected", "fc3.weight"}));
  // a mis-shaped entry: nothing is copied, not even the entries before it
  nn::StateDict bad;
  for (auto& kv : sd)
    bad.insert(kv.key(), kv.key() == "fc2.weight" ? of::ones({3, 2}) : kv.value() + 1);
  const std::vector<float> before = a->fc1->weight.to_vector<float>();
  CHECK(th::throws_with([&] { a->load_state_dict(bad); }, {"fc2.weight", "(3, 2)", "(2, 3)"}));
  CHECK(a->fc1->weight.to_vector<float>() == before);
}

TEST_CASE("module: to(dtype) changes parameters in place; printing the tree") {
  Net net;
  of::Tensor w = net->fc1->weight;  // another handle to the same parameter
  net->to(of::kFloat64);
  CHECK(w.dtype() == of::kFloat64);
  CHECK(net->fc1->weight.dtype() == of::kFloat64);
  CHECK(net->named_parameters()["fc1.weight"].dtype() == of::kFloat64);
  CHECK(net->bn->num_batches_tracked.dtype() == of::kInt64);  // integer buffers keep their dtype
  CHECK(net->forward(of::randn({5, 4}, of::kFloat64)).dtype() == of::kFloat64);
  std::ostringstream os;
  os << *net;
  CHECK(os.str() ==
        "NetImpl(\n"
        "  (fc1): Linear(in_features=4, out_features=3, bias=true)\n"
        "  (bn): BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)\n"
        "  (fc2): Linear(in_features=3, out_features=2, bias=false)\n"
        ")");
}

TEST_CASE("module: BatchNorm2d running statistics, eval mode, momentum") {
  nn::BatchNorm2d bn(nn::BatchNormOptions(2).momentum(0.25));
  of::manual_seed(4);
  of::Tensor x = of::randn({3, 2, 4, 5}, of::kFloat64) * 2 + 1;
  bn->to(of::kFloat64);
  of::Tensor y = bn(x);
  std::vector<double> xv = x.to_vector<double>();
  for (int c = 0; c < 2; ++c) {
    double s = 0, ss = 0;
    const int n = 3 * 4 * 5;
    for (int b = 0; b < 3; ++b)
      for (int i = 0; i < 20; ++i) s += xv[size_t((b * 2 + c) * 20 + i)];
    const double mean = s / n;
    for (int b = 0; b < 3; ++b)
      for (int i = 0; i < 20; ++i) ss += std::pow(xv[size_t((b * 2 + c) * 20 + i)] - mean, 2);
    CHECK(bn->running_mean.to_vector<double>()[size_t(c)] == doctest::Approx(0.25 * mean));
    CHECK(bn->running_var.to_vector<double>()[size_t(c)] ==
          doctest::Approx(0.75 + 0.25 * ss / (n - 1)));
    // training output is normalized with the biased batch variance
    CHECK(y.select(1, c).mean().item<double>() == doctest::Approx(0).epsilon(1e-9));
  }
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);
  bn->eval();
  of::Tensor e = bn(x);
  const double m0 = bn->running_mean.to_vector<double>()[0],
               v0 = bn->running_var.to_vector<double>()[0];
  CHECK(e.select(1, 0).flatten().to_vector<double>()[0] ==
        doctest::Approx((xv[0] - m0) / std::sqrt(v0 + 1e-5)));
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);
  CHECK(th::throws_with([&] { bn(of::randn({3, 2}, of::kFloat64)); }, {"[BatchNorm2d]", "(3, 2)"}));
}

TEST_CASE("module: Sequential, ModuleList, activations, pooling, conv and dropout layers") {
  of::manual_seed(5);
  nn::Sequential seq(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::BatchNorm2d(4),
                     nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(4 * 4 * 4, 3),
                     nn::Dropout(0.5));
  CHECK(seq->size() == 7);
  of::Tensor x = of::rand({2, 1, 8, 8});
  seq->eval();
  of::Tensor y = seq(x);
  CHECK(y.sizes().vec() == std::vector<int64_t>{2, 3});
  // the same computation by hand
  auto conv = std::dynamic_pointer_cast<nn::Conv2dImpl>((*seq)[0]);
  auto fc = std::dynamic_pointer_cast<nn::LinearImpl>((*seq)[5]);
  REQUIRE(conv);
  REQUIRE(fc);
  of::Tensor h = of::conv2d(x, conv->weight, conv->bias, 1, 1) / std::sqrt(1 + 1e-5);
  of::Tensor manual = of::linear(of::max_pool2d(h.relu(), 2).flatten(1), fc->weight, fc->bias);
  CHECK(th::compare(y, th::to_ref(manual), 1e-5, 1e-6).empty());
  seq->train();
  of::Tensor yt = seq(x);  // dropout active: some outputs are zero, the rest scaled
  CHECK(yt.sizes().vec() == std::vector<int64_t>{2, 3});
  nn::ModuleList list(nn::Linear(2, 2), nn::GELU(), nn::Tanh());
  CHECK(list->size() == 3);
  CHECK(list->ptr<nn::LinearImpl>(0)->options.in_features() == 2);
  CHECK(th::throws_with([&] { list->ptr<nn::LinearImpl>(1); }, {"[ModuleList]"}));
  of::Tensor z = of::randn({5});
  CHECK(th::compare(nn::SiLU()(z), th::to_ref(z * z.sigmoid()), 1e-6, 1e-7).empty());
  CHECK(th::compare(nn::Softmax(0)(z), th::to_ref(of::softmax(z, 0)), 0, 0).empty());
  CHECK(nn::AdaptiveAvgPool2d(1)(of::ones({2, 3, 5, 5})).sizes().vec() ==
        std::vector<int64_t>{2, 3, 1, 1});
  CHECK(nn::AvgPool2d(2)(of::ones({1, 1, 4, 4})).sum().item<float>() == 4.0f);
  nn::Embedding emb(nn::EmbeddingOptions(10, 3).padding_idx(0));
  CHECK(emb->weight.select(0, 0).abs().sum().item<float>() == 0.0f);
  CHECK(emb(of::tensor(std::vector<int64_t>{1, 0, 9}, {3})).sizes().vec() ==
        std::vector<int64_t>{3, 3});
  CHECK(th::throws_with([&] { nn::Dropout(1.5); }, {"[Dropout]", "1.5"}));
  CHECK(th::throws_with([&] { nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)); },
                        {"[Conv2d]", "groups"}));
}

TEST_CASE("module: init functions and gains") {
  CHECK(nn::init::calculate_gain(of::kReLU) == doctest::Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain(of::kTanh) == doctest::Approx(5.0 / 3));
  of::Tensor w = of::empty({200, 300});
  CHECK(nn::init::calculate_fan_in_and_fan_out(of::empty({8, 4, 3, 3})) ==
        std::pair<int64_t, int64_t>{36, 72});
  of::manual_seed(8);
  nn::init::kaiming_uniform_(w, 0, of::kFanIn, of::kReLU);
  const double b = std::sqrt(2.0) * std::sqrt(3.0 / 300);
  CHECK(w.abs().amax().item<float>() <= b);
  CHECK(w.to(of::kFloat64).var().item<double>() == doctest::Approx(b * b / 3).epsilon(0.05));
  nn::init::xavier_normal_(w);
  CHECK(w.to(of::kFloat64).std().item<double>() ==
        doctest::Approx(std::sqrt(2.0 / 500)).epsilon(0.05));
  CHECK(nn::init::zeros_(w).abs().sum().item<float>() == 0.0f);
  CHECK(th::throws_with([&] { nn::init::xavier_uniform_(of::empty({3})); }, {"[init]", "(3,)"}));
}

TEST_CASE("module: checkpoints of modules and optimizers; a truncated file changes nothing") {
  const std::string path = "/tmp/oneflow_ckpt_" + std::to_string(::getpid()) + ".safetensors";
  const std::string opath = path + ".optim";
  Net a, b;
  of::manual_seed(21);
  b->fc1->reset_parameters();
  of::optim::Adam opt(a->parameters(), of::optim::AdamOptions(0.01));
  a->forward(of::randn({6, 4})).sum().backward();
  opt.step();
  of::save(a, path);
  of::save(opt, opath);
  of::load(b, path);
  for (auto& kv : a->state_dict())
    CHECK(kv.value().to(of::kFloat64).to_vector<double>() ==
          b->state_dict()[kv.key()].to(of::kFloat64).to_vector<double>());
  of::optim::Adam opt2(b->parameters(), of::optim::AdamOptions(0.5));
  of::load(opt2, opath);
  CHECK(opt2.param_groups()[0].options().get_lr() == 0.01);
  CHECK(opt2.state_dict()["state.1.exp_avg"].to_vector<float>() ==
        opt.state_dict()["state.1.exp_avg"].to_vector<float>());
  // the wrong kind of file, and a truncated one: clear errors, the module keeps its values
  CHECK(th::throws_with([&] { of::load(b, opath); }, {"[load]", "optimizer", "module"}));
  {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 9);
  }
  Net c;
  const std::vector<float> before = c->fc1->weight.to_vector<float>();
  CHECK(th::throws_with([&] { of::load(c, path); }, {"[load]", path, "truncated"}));
  CHECK(c->fc1->weight.to_vector<float>() == before);
  std::remove(path.c_str());
  std::remove(opath.c_str());
}

namespace {
// Multi-head attention by plain loops in float64: x [len, N, E] row-major vectors.
std::vector<double> ref_mha(const std::vector<double>& x, int64_t L, int64_t N, int64_t E,
                            int64_t H, const std::vector<double>& W, const std::vector<double>& B,
                            const std::vector<double>& Wo, const std::vector<double>& Bo,
                            const std::vector<bool>& masked /* [L, L], true = not allowed */) {
  const int64_t D = E / H;
  auto proj = [&](int64_t part, int64_t l, int64_t n, int64_t j) {  // row j of part
    double s = B[size_t(part * E + j)];
    for (int64_t c = 0; c < E; ++c)
      s += W[size_t((part * E + j) * E + c)] * x[size_t((l * N + n) * E + c)];
    return s;
  };
  std::vector<double> heads(size_t(L * N * E), 0.0), out(size_t(L * N * E), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sc(static_cast<size_t>(L), 0.0);
        double mx = -1e300;
        for (int64_t j = 0; j < L; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += proj(0, i, n, h * D + d) * proj(1, j, n, h * D + d);
          sc[size_t(j)] = masked[size_t(i * L + j)] ? -1e300 : s / std::sqrt(double(D));
          mx = std::max(mx, sc[size_t(j)]);
        }
        double z = 0;
        for (auto& s : sc) z += (s = s <= -1e299 ? 0 : std::exp(s - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < L; ++j) acc += sc[size_t(j)] / z * proj(2, j, n, h * D + d);
          heads[size_t((i * N + n) * E + h * D + d)] = acc;
        }
      }
  for (int64_t r = 0; r < L * N; ++r)
    for (int64_t j = 0; j < E; ++j) {
      double s = Bo[size_t(j)];
      for (int64_t c = 0; c < E; ++c) s += Wo[size_t(j * E + c)] * heads[size_t(r * E + c)];
      out[size_t(r * E + j)] = s;
    }
  return out;
}
}  // namespace

TEST_CASE("module: MultiheadAttention vs a float64 loop reference (masks, both code paths, VJP)") {
  of::manual_seed(31);
  const int64_t L = 5, N = 2, E = 8, H = 2;
  nn::MultiheadAttention mha(E, H);
  mha->to(of::kFloat64);
  {
    of::NoGradGuard g;
    mha->in_proj_bias.normal_();
    mha->out_proj->bias.normal_();
  }
  of::Tensor x = of::randn({L, N, E}, of::kFloat64);
  of::Tensor causal = of::ones({L, L}, of::kBool).triu(1);  // true above the diagonal: masked
  std::vector<bool> none(size_t(L * L), false), tri(size_t(L * L), false);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = i + 1; j < L; ++j) tri[size_t(i * L + j)] = true;
  for (bool use_mask : {false, true}) {
    std::vector<double> ref =
        ref_mha(x.to_vector<double>(), L, N, E, H, mha->in_proj_weight.to_vector<double>(),
                mha->in_proj_bias.to_vector<double>(), mha->out_proj->weight.to_vector<double>(),
                mha->out_proj->bias.to_vector<double>(), use_mask ? tri : none);
    of::Tensor m = use_mask ? causal : of::Tensor();
    auto [with_w, weights] = mha(x, x, x, of::Tensor(), true, m);
    auto [no_w, undefined] = mha(x, x, x, of::Tensor(), false, m);
    CHECK(th::compare(with_w, th::Ref({L, N, E}, ref), 1e-10, 1e-10).empty());
    CHECK(th::compare(no_w, th::Ref({L, N, E}, ref), 1e-10, 1e-10).empty());
    CHECK(weights.sizes().vec() == std::vector<int64_t>{N, L, L});
    CHECK(th::compare(weights.sum({2}), th::Ref({N, L}, std::vector<double>(size_t(N * L), 1.0)),
                      1e-12, 1e-12)
              .empty());
    CHECK(!undefined.defined());
    // an additive float mask equal to the bool one gives the same result
    if (use_mask) {
      of::Tensor fm = of::zeros({L, L}, of::kFloat64).masked_fill(causal, -INFINITY);
      CHECK(th::compare(std::get<0>(mha(x, x, x, of::Tensor(), false, fm)), th::Ref({L, N, E}, ref),
                        1e-10, 1e-10)
                .empty());
    }
  }
  // separate key/value (three projections) equals self-attention when they hold the same values
  CHECK(th::compare(std::get<0>(mha(x, x.clone(), x.clone(), of::Tensor(), false)),
                    th::to_ref(std::get<0>(mha(x, x, x, of::Tensor(), false))), 1e-12, 1e-12)
            .empty());
  // key padding: masking the last key of batch 1 equals dropping it from that batch
  of::Tensor kpm = of::zeros({N, L}, of::kBool);
  kpm.select(0, 1).select(0, L - 1).fill_(true);
  of::Tensor padded = std::get<0>(mha(x, x, x, kpm, false));
  of::Tensor xs = x.narrow(1, 1, 1);
  of::Tensor dropped =
      std::get<0>(mha(xs, xs.narrow(0, 0, L - 1), xs.narrow(0, 0, L - 1), of::Tensor(), false));
  CHECK(th::compare(padded.narrow(1, 1, 1), th::to_ref(dropped), 1e-10, 1e-10).empty());
  // gradients through the sdpa path vs finite differences
  std::string err = th::gradcheck(
      [&](const std::vector<of::Tensor>& in) {
        return std::get<0>(
            mha(in[0], in[0], in[0], of::Tensor(), false, causal.narrow(0, 0, 3).narrow(1, 0, 3)));
      },
      {of::randn({3, 1, E}, of::kFloat64)});
  CHECK_MESSAGE(err.empty(), err);
  CHECK(th::throws_with(
      [&] {
        mha(of::randn({L, N, E + 1}, of::kFloat64), x, x);
      },
      {"[MultiheadAttention]", "(5, 2, 9)"}));
  CHECK(
      th::throws_with([&] { nn::MultiheadAttention(10, 3); }, {"[MultiheadAttention]", "10", "3"}));
}

TEST_CASE("module: TransformerEncoderLayer (post- and pre-norm) is causal under a causal mask") {
  of::manual_seed(32);
  for (bool pre : {false, true}) {
    nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(16, 4)
                                          .dim_feedforward(32)
                                          .activation(of::kGELU)
                                          .norm_first(pre));
    layer->eval();  // no dropout
    const int64_t L = 6;
    of::Tensor causal = of::ones({L, L}, of::kBool).triu(1);
    of::Tensor x = of::randn({L, 3, 16});
    of::Tensor y = layer(x, causal);
    CHECK(y.sizes().vec() == std::vector<int64_t>{L, 3, 16});
    // changing the last position changes nothing before it
    of::Tensor x2 = x.clone();
    x2.select(0, L - 1).add_(1.0);
    of::Tensor y2 = layer(x2, causal);
    CHECK(
        th::compare(y2.narrow(0, 0, L - 1), th::to_ref(y.narrow(0, 0, L - 1)), 1e-6, 1e-6).empty());
    CHECK(!th::compare(y2.narrow(0, L - 1, 1), th::to_ref(y.narrow(0, L - 1, 1)), 1e-6, 1e-6)
               .empty());
    y.sum().backward();
    for (auto& p : layer->parameters()) CHECK(p.grad().defined());
  }
  nn::TransformerEncoderLayer l(8, 2);
  CHECK(l->named_parameters().size() == 12);
  // A callable activation replaces the tag: same seed, gelu as a function == of::kGELU !=
  // of::kReLU.
  using Act = std::function<of::Tensor(const of::Tensor&)>;
  auto make = [](nn::TransformerEncoderLayerOptions::activation_t act) {
    of::manual_seed(5);
    return nn::TransformerEncoderLayer(
        nn::TransformerEncoderLayerOptions(8, 2).dropout(0).activation(act));
  };
  of::manual_seed(6);
  const of::Tensor src = of::randn({3, 2, 8});
  const of::Tensor by_fn = make(Act([](const of::Tensor& t) { return t.gelu(); }))(src);
  CHECK(of::allclose(by_fn, make(of::kGELU)(src), 0, 0));
  CHECK(!of::allclose(by_fn, make(of::kReLU)(src), 1e-6, 1e-6));
  CHECK(th::throws_with(
      [&] {
        nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(8, 2).activation(Act()));
      },
      {"[TransformerEncoderLayer]", "empty"}));
}

TEST_CASE("module: Dropout2d zeroes whole channels while training, identity in eval") {
  of::manual_seed(41);
  nn::Dropout2d drop(0.5);
  of::Tensor x = of::ones({8, 16, 3, 3});
  of::Tensor y = drop(x);
  std::vector<float> v = y.to_vector<float>();
  int zeros = 0;
  bool whole = true;
  for (int c = 0; c < 8 * 16; ++c) {
    const float first = v[size_t(c * 9)];
    for (int i = 0; i < 9; ++i) whole = whole && v[size_t(c * 9 + i)] == first;
    CHECK((first == 0.0f || first == 2.0f));
    zeros += first == 0.0f;
  }
  CHECK(whole);
  CHECK(zeros > 30);
  CHECK(zeros < 98);
  drop->eval();
  CHECK(drop(x).is_same(x));
  CHECK(th::throws_with([&] { nn::Dropout2d(0.5)(of::ones({4, 4})); }, {"[dropout2d]", "(4, 4)"}));
}

TEST_CASE("module: ConvTranspose2d and ModuleDict") {
  of::manual_seed(51);
  nn::ConvTranspose2d up(
      nn::ConvTranspose2dOptions(4, 2, 3).stride(2).padding(1).output_padding(1));
  CHECK(up->weight.sizes().vec() == std::vector<int64_t>{4, 2, 3, 3});
  CHECK(up->weight.abs().amax().item<float>() <= 1 / std::sqrt(2.0 * 9));
  of::Tensor x = of::randn({1, 4, 5, 5});
  of::Tensor y = up(x);
  CHECK(y.sizes().vec() == std::vector<int64_t>{1, 2, 10, 10});
  CHECK(th::compare(y, th::to_ref(of::conv_transpose2d(x, up->weight, up->bias, 2, 1, 1)), 0, 0)
            .empty());
  nn::ModuleDict dict;
  dict->insert("enc", nn::Linear(3, 4));
  dict->insert("act", nn::ReLU());
  CHECK(dict->size() == 2);
  CHECK(dict->keys() == std::vector<std::string>{"enc", "act"});
  CHECK(dict->contains("enc"));
  CHECK(dict->at<nn::LinearImpl>("enc")->options.out_features() == 4);
  CHECK(keys(dict->named_parameters()) == std::vector<std::string>{"enc.weight", "enc.bias"});
  CHECK(th::throws_with([&] { dict->at<nn::LinearImpl>("act"); }, {"[ModuleDict]", "act"}));
  CHECK(th::throws_with([&] { dict->insert("enc", nn::ReLU()); }, {"enc"}));
}

TEST_CASE("module: Tensor::set_data swaps the data in place, keeping identity and requires_grad") {
  of::Tensor p = of::zeros({2, 3}).set_requires_grad(true);
  of::Tensor alias = p;  // another handle to the same tensor (as a module member and its dict)
  p.set_data(of::ones({4}, of::kFloat64));
  CHECK(alias.sizes() == of::IntArrayRef{4});
  CHECK(alias.dtype() == of::kFloat64);
  CHECK(alias.sum().item<double>() == 4.0);
  CHECK(alias.requires_grad());
  CHECK(alias.is_leaf());
  CHECK(th::throws_with([&] { p.set_data(of::Tensor()); }, {"[set_data]", "undefined"}));
}

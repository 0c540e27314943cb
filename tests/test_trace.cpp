// of::jit::trace: op-table rows traced vs eager (bitwise), whole training steps traced vs
// eager (bitwise), the footgun list (one named case each), the passes, the memory planner
// property test, and save/load in a fresh process.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "harness.h"
#include "oneflow/runtime.h"
#include "cpu/gemm_bf16.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/graph_io.h"
#include "trace/passes.h"
#include "trace/recording.h"

namespace F = of::nn::functional;

namespace {

using th::same_bits;

std::string describe(const of::Tensor& a, const of::Tensor& b) {
  if (!a.defined() || !b.defined()) return "undefined";
  if (a.dtype() != b.dtype() || !(a.sizes() == b.sizes())) return "meta differs";
  double worst = 0;
  auto x = a.to(of::kFloat64).contiguous().to_vector<double>();
  auto y = b.to(of::kFloat64).contiguous().to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return "max abs diff " + std::to_string(worst);
}

std::vector<of::Tensor> make_row_inputs(const th::OpRow& row, uint64_t seed) {
  std::vector<of::Tensor> in;
  if (row.make) {
    in = row.make(seed);
  } else {
    of::manual_seed(seed);
    for (auto& s : row.shapes) in.push_back(of::rand(s, of::kFloat64) * (row.hi - row.lo) + row.lo);
  }
  for (size_t i = 0; i < in.size(); ++i) {
    bool nd = std::find(row.nondiff.begin(), row.nondiff.end(), int(i)) != row.nondiff.end();
    if (in[i].is_floating_point() && !nd && row.float32) in[i] = in[i].to(of::kFloat32);
  }
  return in;
}

bool refused_while_recording(const std::string& msg) {
  return msg.find("[jit.trace]") != std::string::npos &&
         msg.find("on the host") != std::string::npos;
}

}  // namespace

TEST_CASE("trace: a simple function records once and replays bitwise") {
  of::manual_seed(0);
  of::Tensor w = of::randn({8, 8});
  auto f = of::jit::trace([&](const of::Tensor& x) { return (of::matmul(x, w) * 2 + 1).tanh(); });
  of::Tensor x = of::randn({4, 8});
  of::Tensor eager = (of::matmul(x, w) * 2 + 1).tanh();
  of::Tensor r1 = f(x);
  of::Tensor r2 = f(x);
  CHECK(same_bits(eager, r1));
  CHECK(same_bits(eager, r2));
  CHECK(f.stats().recordings == 1);
  CHECK(f.stats().replays == 1);
  of::Tensor x2 = of::randn({4, 8});
  CHECK(same_bits(f(x2), (of::matmul(x2, w) * 2 + 1).tanh()));
  CHECK(f.stats().replays == 2);
  CHECK(f.graph().find("mm") != std::string::npos);
  CHECK(f.to_dot().find("digraph") != std::string::npos);
}

TEST_CASE("trace: empty intermediates (a rank's empty piece, an empty slice) replay") {
  of::manual_seed(1);
  of::Tensor w = of::randn({3, 0});
  auto fn = [&](const of::Tensor& x) {
    of::Tensor e = of::matmul(x, w) * 2.0;         // [4, 0]: an intermediate of no bytes
    return of::cat({x, e.sum(1, true) + 1.0}, 1);  // [4, 4]
  };
  auto f = of::jit::trace(fn);
  of::Tensor x = of::randn({4, 3});
  CHECK(same_bits(f(x), fn(x)));
  CHECK(same_bits(f(x), fn(x)));
  CHECK(f.stats().replays == 1);
}

TEST_CASE("trace: every op-table row replays bitwise equal to eager, forward and backward") {
  int checked = 0, backward = 0, refused = 0;
  for (const th::OpRow& row : th::rows()) {
    if (row.global_layer) continue;
    for (int nc = 0; nc < 2; ++nc) {
      if (nc && !row.noncontig) continue;
      std::vector<of::Tensor> in = make_row_inputs(row, 11);
      if (nc)
        for (auto& t : in) t = th::noncontig(t);
      INFO("row ", row.name, (nc ? std::string(" (non-contiguous)") : std::string()));
      of::manual_seed(3);
      of::Tensor eager = row.fn(in);
      auto f = of::jit::trace([&](const std::vector<of::Tensor>& x) { return row.fn(x); });
      of::Tensor r1, r2;
      try {
        of::manual_seed(3);
        r1 = f(in);
        of::manual_seed(3);
        r2 = f(in);
      } catch (const of::Error& e) {
        // ops that read data on the host to know a shape are refused while recording
        CHECK_MESSAGE(refused_while_recording(e.what()), e.what());
        ++refused;
        continue;
      }
      CHECK_MESSAGE(same_bits(eager, r1), describe(eager, r1));
      CHECK_MESSAGE(same_bits(eager, r2), describe(eager, r2));
      CHECK(f.stats().replays >= 1);
      ++checked;
      // backward: the gradients of (out * w).sum() with respect to the float inputs
      if (!row.grad || !eager.is_floating_point()) continue;
      std::vector<of::Tensor> leaves;
      std::vector<size_t> diff;
      for (size_t i = 0; i < in.size(); ++i) {
        bool nd = std::find(row.nondiff.begin(), row.nondiff.end(), int(i)) != row.nondiff.end();
        of::Tensor l = in[i].detach();
        if (l.is_floating_point() && !nd) {
          l.requires_grad_(true);
          diff.push_back(i);
        }
        leaves.push_back(l);
      }
      if (diff.empty()) continue;
      of::manual_seed(4);
      of::Tensor wgt = of::rand(eager.sizes().vec(), eager.dtype());
      auto grads_of = [&](const std::vector<of::Tensor>& x) {
        for (size_t i : diff) {
          of::Tensor xi = x[i];
          xi.mutable_grad() = of::Tensor();
        }
        (row.fn(x) * wgt).sum().backward();
        std::vector<of::Tensor> g;
        for (size_t i : diff) g.push_back(x[i].grad());
        return g;
      };
      of::manual_seed(3);
      std::vector<of::Tensor> ge = grads_of(leaves);
      bool all_defined = true;
      for (auto& t : ge) {
        if (t.defined()) t = t.clone();
        else all_defined = false;
      }
      if (!all_defined) continue;  // an input the output does not depend on
      auto fb = of::jit::trace(grads_of);
      std::vector<of::Tensor> g1, g2;
      of::manual_seed(3);
      g1 = fb(leaves);
      of::manual_seed(3);
      g2 = fb(leaves);
      REQUIRE(g2.size() == ge.size());
      for (size_t k = 0; k < ge.size(); ++k) {
        CHECK_MESSAGE(same_bits(ge[k], g1[k]), describe(ge[k], g1[k]));
        CHECK_MESSAGE(same_bits(ge[k], g2[k]), describe(ge[k], g2[k]));
        // .grad itself was bound by the replay, as the eager call binds it
        CHECK(same_bits(ge[k], leaves[diff[k]].grad()));
      }
      ++backward;
    }
  }
  MESSAGE("rows traced: ", checked, " forward, ", backward, " backward, ", refused,
          " refused while recording (host reads)");
  CHECK(checked > 200);
  CHECK(backward > 150);
}

// ---------------------------------------------------------------- training equality

namespace {

struct CnnImpl : of::nn::Module {
  CnnImpl() {
    conv = register_module("conv", of::nn::Conv2d(of::nn::Conv2dOptions(1, 6, 3).padding(1)));
    bn = register_module("bn", of::nn::BatchNorm2d(6));
    drop = register_module("drop", of::nn::Dropout(0.25));
    fc = register_module("fc", of::nn::Linear(6 * 8 * 8, 10));
  }
  of::Tensor forward(const of::Tensor& x) {
    return fc(drop(of::max_pool2d(bn(conv(x)).relu(), 2).flatten(1)));
  }
  of::nn::Conv2d conv{nullptr};
  of::nn::BatchNorm2d bn{nullptr};
  of::nn::Dropout drop{nullptr};
  of::nn::Linear fc{nullptr};
};
OF_MODULE(Cnn);

struct GptImpl : of::nn::Module {
  GptImpl(int64_t vocab, int64_t block, int64_t d) {
    tok = register_module("tok", of::nn::Embedding(vocab, d));
    pos = register_module("pos", of::nn::Embedding(block, d));
    layer = register_module(
        "layer", of::nn::TransformerEncoderLayer(of::nn::TransformerEncoderLayerOptions(d, 2)
                                                     .dim_feedforward(2 * d)
                                                     .dropout(0.1)
                                                     .activation(of::kGELU)
                                                     .norm_first(true)));
    head = register_module("head", of::nn::Linear(d, vocab));
    mask = register_buffer(
        "mask", of::zeros({block, block})
                    .masked_fill(of::ones({block, block}, of::kBool).triu(1), -INFINITY));
  }
  of::Tensor forward(const of::Tensor& ids) {  // [L, N]
    const int64_t L = ids.size(0);
    of::Tensor h = tok(ids) + pos(of::arange(L, of::kInt64)).unsqueeze(1);
    return head(layer->forward(h, mask));
  }
  of::nn::Embedding tok{nullptr}, pos{nullptr};
  of::nn::TransformerEncoderLayer layer{nullptr};
  of::nn::Linear head{nullptr};
  of::Tensor mask;
};
OF_MODULE(Gpt);

// Runs `steps` training steps of the CNN (Adam, StepLR, grad clipping, BatchNorm, Dropout),
// traced or eager; returns the losses and the final parameters.
std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>> train_cnn(bool traced, int steps) {
  of::manual_seed(123);
  Cnn net;
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(2e-3));
  of::optim::StepLR sched(opt, 10, 0.5);
  of::manual_seed(7);
  of::Tensor xs = of::randn({4, 16, 1, 16, 16});
  of::Tensor ys = of::randint(0, 10, {4, 16}, of::kInt64);
  auto step = [&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    of::Tensor loss = F::cross_entropy(net->forward(x), y);
    loss.backward();
    of::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
    opt.step();
    return loss;
  };
  auto tstep = of::jit::trace(step);
  std::vector<of::Tensor> losses;
  of::manual_seed(99);
  for (int s = 0; s < steps; ++s) {
    of::Tensor x = xs[s % 4], y = ys[s % 4];
    losses.push_back(traced ? tstep(x, y) : step(x, y).detach());
    sched.step();
  }
  if (traced) {
    CHECK(tstep.stats().replays >= size_t(steps - 2));
    CHECK(tstep.stats().fused_groups > 0);
  }
  std::vector<of::Tensor> params;
  for (auto& p : net->parameters()) params.push_back(p.detach().clone());
  for (auto& b : net->buffers()) params.push_back(b.detach().clone());
  return {losses, params};
}

std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>> train_gpt(bool traced, int steps) {
  of::manual_seed(321);
  const int64_t vocab = 24, block = 12, d = 32;
  Gpt gpt(vocab, block, d);
  of::optim::AdamW opt(gpt->parameters(), of::optim::AdamWOptions(3e-3).weight_decay(0.01));
  of::optim::CosineAnnealingLR sched(opt, steps, 3e-4);
  of::manual_seed(5);
  of::Tensor data = of::randint(0, vocab, {4, block + 1, 3}, of::kInt64);
  auto step = [&](const of::Tensor& ids) {
    opt.zero_grad();
    of::Tensor inp = ids.narrow(0, 0, block), tgt = ids.narrow(0, 1, block);
    of::Tensor logits = gpt->forward(inp);
    of::Tensor loss = F::cross_entropy(logits.reshape({-1, vocab}), tgt.reshape({-1}));
    loss.backward();
    of::nn::utils::clip_grad_norm_(gpt->parameters(), 1.0);
    opt.step();
    return loss;
  };
  auto tstep = of::jit::trace(step);
  std::vector<of::Tensor> losses;
  of::manual_seed(17);
  for (int s = 0; s < steps; ++s) {
    of::Tensor ids = data[s % 4];
    losses.push_back(traced ? tstep(ids) : step(ids).detach());
    sched.step();
  }
  if (traced) CHECK(tstep.stats().replays >= size_t(steps - 2));
  std::vector<of::Tensor> params;
  for (auto& p : gpt->parameters()) params.push_back(p.detach().clone());
  return {losses, params};
}

void check_same_training(const std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>>& a,
                         const std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>>& b) {
  REQUIRE(a.first.size() == b.first.size());
  for (size_t i = 0; i < a.first.size(); ++i) {
    INFO("step ", i);
    CHECK_MESSAGE(same_bits(a.first[i], b.first[i]), describe(a.first[i], b.first[i]));
  }
  REQUIRE(a.second.size() == b.second.size());
  for (size_t i = 0; i < a.second.size(); ++i) {
    INFO("parameter/buffer ", i);
    CHECK_MESSAGE(same_bits(a.second[i], b.second[i]), describe(a.second[i], b.second[i]));
  }
}

struct Threads {
  int prev;
  explicit Threads(int n) : prev(of::get_num_threads()) { of::set_num_threads(n); }
  ~Threads() { of::set_num_threads(prev); }
};

}  // namespace

TEST_CASE(
    "trace: 50 CNN training steps (BN, dropout, Adam, StepLR, clipping) equal eager bitwise") {
  for (int threads : {1, 2}) {
    Threads t(threads);
    INFO("threads ", threads);
    auto eager = train_cnn(false, 50);
    auto traced = train_cnn(true, 50);
    check_same_training(eager, traced);
  }
}

TEST_CASE("trace: 50 GPT training steps (AdamW, cosine schedule) equal eager bitwise") {
  for (int threads : {1, 2}) {
    Threads t(threads);
    INFO("threads ", threads);
    auto eager = train_gpt(false, 50);
    auto traced = train_gpt(true, 50);
    check_same_training(eager, traced);
  }
}

// ---------------------------------------------------------------- the footgun list

TEST_CASE("trace footgun: stale outputs (a result survives later replays)") {
  auto f = of::jit::trace([](const of::Tensor& x) { return x * 3 + 1; });
  of::Tensor a = of::ones({256});
  of::Tensor r1 = f(a);
  of::Tensor r2 = f(a * 2);  // replay
  of::Tensor r3 = f(a * 5);  // replay again while r2 is held
  CHECK(r1.to_vector<float>()[0] == 4.0f);
  CHECK(r2.to_vector<float>()[0] == 7.0f);
  CHECK(r3.to_vector<float>()[0] == 16.0f);
  // arena-backed outputs are the documented exception: the next call overwrites them
  auto g = of::jit::trace([](const of::Tensor& x) { return x * 3 + 1; },
                          of::jit::TraceOptions().arena_outputs(true));
  g(a);
  of::Tensor s1 = g(a);
  g(a * 2);
  CHECK(s1.to_vector<float>()[0] == 7.0f);
}

TEST_CASE("trace footgun: captured constants are frozen at recording") {
  float host = 1.0f;
  auto f = of::jit::trace([&](const of::Tensor& x) {
    return x + of::tensor({host, host});  // a tensor made from host data: captured
  });
  of::Tensor x = of::zeros({2});
  CHECK(f(x).to_vector<float>()[0] == 1.0f);
  host = 5.0f;
  // documented: the replay adds the captured constant, not the new host value
  CHECK(f(x).to_vector<float>()[0] == 1.0f);
  CHECK(f.graph().find("external") != std::string::npos);
}

TEST_CASE("trace footgun: a weight changed between replays reaches prepacked GEMMs") {
  // NOTE [Prepacked weights]: a bfloat16 linear's weight that the inference graph only reads is
  // packed once and reused while its version stands; writes through the library (an in-place
  // op, copy_, an optimizer step, a traced training step's fused update) must reach the replay.
  of::manual_seed(12);
  of::nn::Linear lin(of::nn::LinearOptions(512, 256));  // large enough to fuse the update
  lin->to(of::kBFloat16);
  const of::Tensor x = of::randn({16, 512}).to(of::kBFloat16);
  auto infer = of::jit::trace([&](const of::Tensor& in) { return lin(in); });
  auto eager = [&] {
    of::NoGradGuard ng;
    return lin(x);
  };
  of::NoGradGuard ng;
  CHECK(of::equal(infer(x), eager()));  // records
  CHECK(of::equal(infer(x), eager()));  // replays (packing the weight once)
  if (of::cpu::gemm_bf16_supported()) CHECK(of::cpu::packed_constant_operands() >= 1);
  lin->weight.add_(0.5);  // eager in-place write: the version moves
  CHECK(of::equal(infer(x), eager()));
  lin->weight.copy_(of::randn({256, 512}).to(of::kBFloat16));
  CHECK(of::equal(infer(x), eager()));
  // a traced Adam step writes the weight in place (in a fused group on the CPU)
  {
    of::EnableGradGuard on;
    of::optim::Adam opt(lin->parameters(), of::optim::AdamOptions(0.05));
    auto step = of::jit::trace([&](const of::Tensor& in) {
      opt.zero_grad();
      of::Tensor loss = lin(in).to(of::kFloat32).pow(2.0).mean();
      loss.backward();
      opt.step();
      return loss;
    });
    for (int i = 0; i < 3; ++i) {
      step(x);
      of::NoGradGuard off;
      CHECK(of::equal(infer(x), eager()));
    }
    // the update ran as a fused group (whose in-place writes bump versions too)
    CHECK(step.graph().find("fused group 0") != std::string::npos);
  }
}

TEST_CASE("trace footgun: lr and step changed after capture reach the replay") {
  of::manual_seed(1);
  of::Tensor w0 = of::randn({3, 4});
  of::Tensor x = of::randn({5, 4});
  auto run = [&](bool traced) {
    of::Tensor w = w0.clone().requires_grad_(true);
    of::optim::Adam opt({w}, of::optim::AdamOptions(0.1));
    auto step = [&](const of::Tensor& in) {
      opt.zero_grad();
      of::Tensor loss = of::matmul(in, w.t()).square().mean();
      loss.backward();
      opt.step();
      return loss;
    };
    auto t = of::jit::trace(step);
    for (int i = 0; i < 6; ++i) {
      if (i == 3) static_cast<of::optim::AdamOptions&>(opt.param_groups()[0].options()).lr(0.01);
      traced ? t(x) : step(x);
    }
    CHECK(opt.state_dict()["state.0.step"].item<int64_t>() == 6);
    return w.detach().clone();
  };
  of::Tensor eager = run(false), traced = run(true);
  CHECK(same_bits(eager, traced));
}

TEST_CASE("trace footgun: host reads during recording raise and leave nothing cached") {
  auto f = of::jit::trace([](const of::Tensor& x) {
    if (x.sum().item<float>() > 0) return x * 2;  // a data-dependent branch
    return x;
  });
  std::string msg;
  CHECK(th::throws_with([&] { f(of::ones({3})); }, {"[jit.trace]", "item()", "host"}, &msg));
  CHECK(f.stats().cache_entries == 0);
  auto g = of::jit::trace([](const of::Tensor& x) { return of::nonzero(x); });
  CHECK(th::throws_with([&] { g(of::ones({3})); }, {"[jit.trace]", "nonzero"}));
  auto p = of::jit::trace([](const of::Tensor& x) {
    std::ostringstream os;
    os << x;
    return x;
  });
  CHECK(th::throws_with([&] { p(of::ones({3})); }, {"[jit.trace]", "printing"}));
  // the library is fully usable afterwards
  of::Tensor y = of::ones({3}) * 2;
  CHECK(y.sum().item<float>() == 6.0f);
  CHECK_FALSE(of::jit::is_recording());
}

TEST_CASE("trace footgun: in-place ops on inputs change the caller's tensors") {
  auto f = of::jit::trace([](const of::Tensor& x) {
    of::Tensor y = x;
    y.add_(1);
    return y * 2;
  });
  of::Tensor x = of::zeros({4});
  of::Tensor r1 = f(x);
  of::Tensor r2 = f(x);
  of::Tensor r3 = f(x);
  CHECK(x.to_vector<float>()[0] == 3.0f);
  CHECK(r1.to_vector<float>()[0] == 2.0f);
  CHECK(r3.to_vector<float>()[0] == 6.0f);
  (void)r2;
}

TEST_CASE("trace footgun: duplicate and aliased inputs give the eager result") {
  auto f = of::jit::trace([](const of::Tensor& a, const of::Tensor& b) {
    of::Tensor t = a;
    t.mul_(2);
    return t + b;  // b sees a's update when they alias
  });
  of::Tensor x = of::ones({4});
  CHECK(f(x, x).to_vector<float>()[0] == 4.0f);  // 2 + 2
  CHECK(f(x, x).to_vector<float>()[0] == 8.0f);  // replay: 4 + 4
  of::Tensor y = of::ones({4});
  of::Tensor z = of::ones({4});
  CHECK(f(y, z).to_vector<float>()[0] == 3.0f);  // different aliasing: a new signature
  CHECK(f.stats().recordings == 2);
  of::Tensor big = of::arange(8, of::kFloat32);
  CHECK(f(big.narrow(0, 0, 4), big.narrow(0, 4, 4)).to_vector<float>()[1] == 7.0f);
}

TEST_CASE("trace footgun: changed shapes and dtypes retrace; strict mode says what changed") {
  auto f = of::jit::trace([](const of::Tensor& x) { return x.exp().sum(0); });
  f(of::ones({2, 3}));
  f(of::ones({2, 3}));
  f(of::ones({4, 3}));
  f(of::ones({2, 3}, of::kFloat64));
  CHECK(f.stats().recordings == 3);
  CHECK(f.stats().replays == 1);
  auto s = of::jit::trace([](const of::Tensor& x) { return x.exp(); },
                          of::jit::TraceOptions().strict(true));
  s(of::ones({2, 3}));
  CHECK(th::throws_with(
      [&] {
        s(of::ones({4, 3}));
      },
      {"strict", "input 0 shape", "(2, 3) -> (4, 3)"}));
  CHECK(th::throws_with([&] { s(of::ones({2, 3}, of::kFloat64)); }, {"input 0 dtype", "float64"}));
  CHECK(s(of::ones({2, 3})).to_vector<float>()[0] == doctest::Approx(std::exp(1.0f)));
}

TEST_CASE("trace footgun: the cache is bounded and least recently used goes first") {
  auto f = of::jit::trace([](const of::Tensor& x) { return x + 1; },
                          of::jit::TraceOptions().cache_size(2));
  f(of::ones({1}));
  f(of::ones({2}));
  f(of::ones({1}));  // replay; {2} is now least recently used
  f(of::ones({3}));  // evicts {2}
  CHECK(f.stats().cache_entries == 2);
  f(of::ones({1}));  // still cached
  CHECK(f.stats().recordings == 3);
  f(of::ones({2}));  // evicted: records again
  CHECK(f.stats().recordings == 4);
}

TEST_CASE("trace footgun: parameters re-bound between calls (set_data, load_state_dict)") {
  of::manual_seed(2);
  of::nn::Linear lin(4, 3);
  auto f = of::jit::trace([&](const of::Tensor& x) { return lin(x); });
  of::Tensor x = of::randn({2, 4});
  f(x);
  f(x);
  of::Tensor w2 = of::randn({3, 4});
  lin->weight.set_data(w2);  // new memory: the graph must not read the old weight
  CHECK(same_bits(f(x), lin(x).detach()));
  of::nn::Linear other(4, 3);
  lin->load_state_dict(other->state_dict());
  CHECK(same_bits(f(x), other(x).detach()));
  of::Tensor r = f(x);
  CHECK(same_bits(r, other(x).detach()));
}

TEST_CASE("trace footgun: no_grad inside the traced function") {
  of::Tensor w = of::ones({3}).requires_grad_(true);
  auto f = of::jit::trace([&](const of::Tensor& x) {
    of::NoGradGuard ng;
    return x * w;
  });
  of::Tensor r = f(of::ones({3}));
  r = f(of::ones({3}) * 2);
  CHECK_FALSE(r.requires_grad());
  CHECK(r.to_vector<float>()[2] == 2.0f);
  // grad mode is part of the signature
  of::NoGradGuard ng;
  f(of::ones({3}));
  CHECK(f.stats().recordings == 2);
}

TEST_CASE("trace footgun: reseeding after capture changes the replay as it changes eager") {
  auto f = of::jit::trace(
      [](const of::Tensor& x) { return of::dropout(x, 0.5, true) + of::rand({64}); });
  of::Tensor x = of::ones({64});
  of::manual_seed(5);
  f(x);
  of::manual_seed(5);
  of::Tensor a = f(x);
  of::manual_seed(5);
  of::Tensor eager = of::dropout(x, 0.5, true) + of::rand({64});
  CHECK(same_bits(a, eager));
  of::Tensor b = f(x);  // the generator moved on: different numbers
  CHECK_FALSE(same_bits(a, b));
  of::manual_seed(6);
  of::Tensor c = f(x);
  of::manual_seed(6);
  CHECK(same_bits(c, of::dropout(x, 0.5, true) + of::rand({64})));
}

TEST_CASE("trace footgun: an exception while recording leaves no entry and nothing broken") {
  int calls = 0;
  auto f = of::jit::trace([&](const of::Tensor& x) {
    if (++calls == 1) of::fail("[test] first call fails");
    return x * 2;
  });
  CHECK(th::throws_with([&] { f(of::ones({2})); }, {"first call fails"}));
  CHECK(f.stats().cache_entries == 0);
  CHECK_FALSE(of::jit::is_recording());
  CHECK(f(of::ones({2})).to_vector<float>()[0] == 2.0f);
  CHECK(f(of::ones({2})).to_vector<float>()[0] == 2.0f);
  CHECK(calls == 2);  // once per new signature, not twice
}

TEST_CASE("trace footgun: a trace inside a trace is refused") {
  auto inner = of::jit::trace([](const of::Tensor& x) { return x + 1; });
  auto outer = of::jit::trace([&](const of::Tensor& x) { return inner(x) * 2; });
  CHECK(th::throws_with([&] { outer(of::ones({2})); }, {"[jit.trace]", "trace inside a trace"}));
  CHECK(inner(of::ones({2})).to_vector<float>()[0] == 2.0f);
}

TEST_CASE("trace: OF_TRACE=0 runs eagerly; OF_TRACE_PASSES turns passes off") {
  setenv("OF_TRACE", "0", 1);
  auto f = of::jit::trace([](const of::Tensor& x) { return x + 1; });
  f(of::ones({2}));
  f(of::ones({2}));
  CHECK(f.stats().recordings == 0);
  unsetenv("OF_TRACE");
  setenv("OF_TRACE_PASSES", "-fuse,-memplan", 1);
  auto g = of::jit::trace([](const of::Tensor& x) { return ((x + 1) * 2).tanh(); });
  g(of::ones({4096}));
  CHECK(g.stats().fused_groups == 0);
  for (auto& p : g.stats().passes) CHECK((p.name != "fuse" && p.name != "memplan"));
  unsetenv("OF_TRACE_PASSES");
  setenv("OF_TRACE_PASSES", "-nonsense", 1);
  auto h = of::jit::trace([](const of::Tensor& x) { return x + 1; });
  CHECK(th::throws_with([&] { h(of::ones({2})); }, {"OF_TRACE_PASSES", "nonsense"}));
  unsetenv("OF_TRACE_PASSES");
}

// ---------------------------------------------------------------- passes

namespace {
of::trace::Graph recorded(
    const std::function<std::vector<of::Tensor>(const std::vector<of::Tensor>&)>& fn,
    const std::vector<of::Tensor>& in) {
  return of::trace::record(fn, in).graph;
}
size_t count_op(const of::trace::Graph& g, const std::string& name) {
  size_t n = 0;
  for (auto& node : g.nodes) n += node.op->name == name;
  return n;
}
}  // namespace

TEST_CASE("trace pass: dce drops work whose result nobody reads") {
  auto g = recorded(
      [](const std::vector<of::Tensor>& x) {
        of::Tensor unused = x[0].exp().sum();
        return std::vector<of::Tensor>{x[0] * 2};
      },
      {of::ones({8})});
  CHECK(count_op(g, "exp") == 1);
  auto d = of::trace::dce(g);
  CHECK(count_op(d, "exp") == 0);
  CHECK(count_op(d, "sum") == 0);
  CHECK(count_op(d, "mul") == 1);
  // writes to tensors the trace did not create are effects and stay
  of::Tensor ext = of::zeros({8});
  auto e = recorded(
      [&](const std::vector<of::Tensor>& x) {
        ext.add_(x[0]);
        return std::vector<of::Tensor>{x[0] + 1};
      },
      {of::ones({8})});
  CHECK(count_op(of::trace::dce(e), "add") == 2);
}

TEST_CASE("trace pass: cse merges equal ops on the same values, not across writes") {
  auto g = recorded(
      [](const std::vector<of::Tensor>& x) {
        return std::vector<of::Tensor>{x[0].exp() + x[0].exp()};
      },
      {of::ones({8})});
  CHECK(count_op(of::trace::dce(of::trace::cse(g)), "exp") == 1);
  auto w = recorded(
      [](const std::vector<of::Tensor>& x) {
        of::Tensor y = x[0].clone();
        of::Tensor a = y.exp();
        y.add_(1);
        of::Tensor b = y.exp();  // reads y after the write: not the same value
        return std::vector<of::Tensor>{a + b};
      },
      {of::ones({8})});
  CHECK(count_op(of::trace::dce(of::trace::cse(w)), "exp") == 2);
}

TEST_CASE("trace pass: fold removes identities, folds constants and collapses view chains") {
  auto g = recorded(
      [](const std::vector<of::Tensor>& x) {
        of::Tensor c = of::full({4}, 2.0) * 3;  // constants only: folded
        return std::vector<of::Tensor>{((x[0] * 1) + 0) * c, x[0].t().t().reshape({-1}) + 1,
                                       x[0].pow(1.0) - x[0].pow(2.0)};
      },
      {of::ones({4, 4})});
  auto f = of::trace::dce(of::trace::fold(g));
  CHECK(count_op(g, "mul") == 3);
  CHECK(count_op(f, "mul") == 1);
  // x ** 1 is x (pow_scalar's identity: its exponent is a double attribute); x ** 2 stays
  CHECK(count_op(g, "pow_scalar") == 2);
  CHECK(count_op(f, "pow_scalar") == 1);
  CHECK(count_op(f, "full") == 0);
  CHECK(count_op(f, "as_strided") >= 1);
  // the simplified graph still computes the same thing
  auto t =
      of::jit::trace([](const of::Tensor& x) { return ((x * 1) + 0) * (of::full({4}, 2.0) * 3); });
  of::Tensor x = of::randn({4, 4});
  t(x);
  CHECK(same_bits(t(x), x * 6));
}

TEST_CASE("trace pass: fuse groups elementwise chains; shared values are materialized") {
  auto g = recorded(
      [](const std::vector<of::Tensor>& x) {
        of::Tensor a = (x[0] * 2 + 1).tanh();
        of::Tensor b = a.sigmoid() * x[1] - 3;
        return std::vector<of::Tensor>{b, a};  // a is returned: written to memory
      },
      {of::randn({64, 64}), of::randn({64})});
  auto f = of::trace::fuse(g);
  REQUIRE(f.groups.size() == 1);
  CHECK(f.groups[0].size() == 6);
  const int a = f.outputs[1];
  CHECK(f.materialized[size_t(a)]);
  // the "*2" result lives only in the group's block scratch
  int scratch = 0;
  for (size_t v = 0; v < f.values.size(); ++v)
    if (f.values[v].producer >= 0 && f.nodes[size_t(f.values[v].producer)].group == 0 &&
        !f.materialized[v])
      ++scratch;
  CHECK(scratch >= 3);
  // a reduction ends a group
  auto r = of::trace::fuse(recorded(
      [](const std::vector<of::Tensor>& x) {
        return std::vector<of::Tensor>{((x[0] + 1).sum(1, true) * x[0]).exp()};
      },
      {of::randn({64, 64})}));
  CHECK(r.groups.size() == 1);
  CHECK(r.groups[0].size() == 2);
}

TEST_CASE("trace pass: inplace reuses a dying input's buffer; memplan packs lifetimes") {
  auto g = recorded(
      [](const std::vector<of::Tensor>& x) {
        return std::vector<of::Tensor>{((x[0] + 1) * 2).exp().sqrt().sum()};
      },
      {of::randn({256, 64})});
  const size_t one = 256 * 64 * 4;
  auto plain = of::trace::memplan(g);
  auto reused = of::trace::memplan(of::trace::inplace(g));
  CHECK(of::trace::intermediate_bytes(g) >= 4 * one);
  CHECK(of::trace::arena_bytes(plain) <= 2 * one + 64);  // two live at a time
  CHECK(of::trace::arena_bytes(reused) <= one + 64);     // each op writes over its input
}

TEST_CASE("trace pass: inplace lets a fused group write its result over a dying input") {
  // NOTE [In-place fused groups]: h dies at the group; its result takes h's buffer
  of::manual_seed(4);
  const of::Tensor w = of::randn({256, 256});
  auto fn = [&](const std::vector<of::Tensor>& x) {
    of::Tensor h = of::matmul(x[0], w).view({128, 4, 256});
    return std::vector<of::Tensor>{((h * 2 + 1).tanh() * 3 - h.sigmoid()).sum(1)};
  };
  std::vector<of::Tensor> in{of::randn({512, 256})};
  const of::trace::Graph f = of::trace::fuse(of::trace::dce(recorded(fn, in)));
  REQUIRE(f.groups.size() == 1);
  const size_t one = 512 * 256 * 4;
  const of::trace::Graph plain = of::trace::memplan(f);
  const of::trace::Graph reused = of::trace::memplan(of::trace::inplace(f));
  CHECK(of::trace::arena_bytes(plain) >= 2 * one);
  CHECK(of::trace::arena_bytes(reused) < 2 * one);
  auto t = of::jit::trace(fn);
  const of::Tensor eager = fn(in)[0].clone();
  t(in);
  CHECK(same_bits(t(in)[0], eager));
  CHECK(t.stats().arena_bytes < 2 * one);
}

TEST_CASE("trace pass: inplace lets scatter_add (kInplaceOk) take its dying input's buffer") {
  // max pooling's gradient: zeros, then scatter_add of the gradient at the argmax indices; the
  // zeros die at the scatter, which then writes over them and skips its copy
  auto fn = [](const std::vector<of::Tensor>& x) {
    of::Tensor in = x[0].detach().requires_grad_(true);
    of::EnableGradGuard eg;
    of::max_pool2d(in, {2, 2}).sum().backward();
    return std::vector<of::Tensor>{in.grad() * 2};
  };
  std::vector<of::Tensor> in{of::randn({8, 4, 16, 16})};
  const of::trace::Graph g = of::trace::inplace(of::trace::dce(recorded(fn, in)));
  int scatters = 0;
  for (const of::trace::Node& n : g.nodes) {
    if (n.op->name != "scatter_add") continue;
    ++scatters;
    CHECK(g.values[size_t(n.outputs[0])].buffer == g.values[size_t(n.inputs[0])].buffer);
  }
  CHECK(scatters == 1);
  auto t = of::jit::trace(fn);
  const of::Tensor eager = fn(in)[0].clone();
  t(in);
  CHECK(same_bits(t(in)[0], eager));
}

TEST_CASE("trace: memory planner property test on random graphs") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 40; ++trial) {
    INFO("trial ", trial);
    const int64_t n = 8 + int64_t(rng() % 40), m = 8 + int64_t(rng() % 40);
    of::manual_seed(uint64_t(trial));
    std::vector<of::Tensor> in{of::randn({n, m}), of::randn({m, m}), of::randn({m})};
    const unsigned prog = rng();
    auto fn = [prog](const std::vector<of::Tensor>& x) {
      std::mt19937 r(prog);
      std::vector<of::Tensor> live{x[0]};
      for (int k = 0; k < 24; ++k) {
        of::Tensor a = live[r() % live.size()];
        of::Tensor y;
        switch (r() % 8) {
          case 0:
            y = a + x[2];
            break;
          case 1:
            y = (a * 0.5).tanh();
            break;
          case 2:
            y = of::matmul(a, x[1]);
            break;
          case 3:
            y = a.sigmoid() * a;
            break;
          case 4:
            y = a - a.mean(1, true);
            break;
          case 5:
            y = a.t().contiguous().t() + 1;
            break;
          case 6:
            y = of::relu(a) + live[r() % live.size()];
            break;
          default:
            y = a.exp().clamp_max(3.0);
            break;
        }
        live.push_back(y);
        if (live.size() > 5) live.erase(live.begin() + long(r() % live.size()));
      }
      return std::vector<of::Tensor>{live.back(), live.front().sum()};
    };
    for (int variant = 0; variant < 3; ++variant) {
      of::trace::Graph g = recorded(fn, in);
      g = of::trace::dce(g);
      if (variant == 2) g = of::trace::schedule(of::trace::remat(g));
      if (variant) g = of::trace::fuse(g);
      g = of::trace::memplan(of::trace::inplace(g));
      auto iv = of::trace::buffer_intervals(g);
      for (size_t a = 0; a < g.buffers.size(); ++a)
        for (size_t b = a + 1; b < g.buffers.size(); ++b) {
          const auto &A = g.buffers[a], &B = g.buffers[b];
          if (A.arena_offset < 0 || B.arena_offset < 0) continue;
          const bool time = iv[a].first <= iv[b].last && iv[b].first <= iv[a].last;
          const bool bytes = A.arena_offset < B.arena_offset + int64_t(B.nbytes) &&
                             B.arena_offset < A.arena_offset + int64_t(A.nbytes);
          CHECK_FALSE((time && bytes));
        }
      // the plan allocates exactly the reported arena, and replays allocate nothing
      auto plan = of::trace::lower(g, false);
      CHECK(of::trace::plan_arena_bytes(*plan) == of::trace::arena_bytes(g));
      std::vector<of::Tensor> eager = fn(in);
      of::trace::replay(*plan, in);
      const uint64_t before = of::memory::stats().num_allocs;
      std::vector<of::Tensor> out = of::trace::replay(*plan, in);
      CHECK(of::memory::stats().num_allocs == before);
      CHECK(same_bits(out[0], eager[0]));
      CHECK(same_bits(out[1], eager[1]));
    }
  }
}

TEST_CASE("trace: a steady-state training step replays with zero heap allocations") {
  of::manual_seed(3);
  of::nn::Sequential mlp(of::nn::Linear(32, 16), of::nn::ReLU(), of::nn::Linear(16, 4));
  of::optim::SGD opt(mlp->parameters(), of::optim::SGDOptions(0.1).momentum(0.9));
  auto step = of::jit::trace([&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    of::Tensor loss = F::cross_entropy(mlp->forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  });
  of::Tensor x = of::randn({8, 32}), y = of::randint(0, 4, {8}, of::kInt64);
  for (int i = 0; i < 3; ++i) step(x, y);
  const uint64_t before = of::memory::stats().num_allocs;
  for (int i = 0; i < 5; ++i) step(x, y);
  CHECK(of::memory::stats().num_allocs == before);
  CHECK(step.stats().replays == 6);
  CHECK(step.stats().arena_bytes > 0);
  CHECK(step.stats().arena_bytes <= step.stats().intermediate_bytes);
}

// ---------------------------------------------------------------- nn::Graph, save and load

namespace {
struct TrainGraph : of::nn::Graph<TrainGraph> {
  TrainGraph(of::nn::Linear l, of::optim::SGD& opt) : lin(std::move(l)) { add_optimizer(opt); }
  of::Tensor build(const of::Tensor& x, const of::Tensor& y) {
    of::Tensor loss = F::mse_loss(lin(x), y);
    loss.backward();
    return loss;
  }
  of::nn::Linear lin;
};

}  // namespace

TEST_CASE("trace: nn::Graph (build + add_optimizer) trains like the eager loop") {
  auto run = [](bool graph) {
    of::manual_seed(8);
    of::nn::Linear lin(4, 2);
    of::optim::SGD opt(lin->parameters(), of::optim::SGDOptions(0.05).momentum(0.5));
    of::optim::StepLR sched(opt, 3, 0.5);
    of::manual_seed(9);
    of::Tensor x = of::randn({8, 4}), y = of::randn({8, 2});
    TrainGraph g(lin, opt);
    g.config.enable_fuse(true);
    std::vector<float> losses;
    for (int i = 0; i < 8; ++i) {
      if (graph) {
        losses.push_back(g(x, y).item<float>());
      } else {
        of::Tensor loss = F::mse_loss(lin(x), y);
        loss.backward();
        opt.step();
        opt.zero_grad();
        sched.step();
        losses.push_back(loss.item<float>());
      }
    }
    if (graph) {
      CHECK(g.stats().replays >= 5);
      CHECK(g.graph().find("linear") != std::string::npos);
    }
    return std::make_pair(losses, lin->weight.detach().clone());
  };
  auto [le, we] = run(false);
  of::manual_seed(0);
  (void)0;
  // the graph needs its scheduler to step after each call, as the eager loop does
  struct SchedGraph : of::nn::Graph<SchedGraph> {
    of::nn::Linear lin{nullptr};
    of::Tensor build(const of::Tensor& x, const of::Tensor& y) {
      of::Tensor loss = F::mse_loss(lin(x), y);
      loss.backward();
      return loss;
    }
  };
  of::manual_seed(8);
  of::nn::Linear lin(4, 2);
  of::optim::SGD opt(lin->parameters(), of::optim::SGDOptions(0.05).momentum(0.5));
  of::optim::StepLR sched(opt, 3, 0.5);
  of::manual_seed(9);
  of::Tensor x = of::randn({8, 4}), y = of::randn({8, 2});
  SchedGraph g;
  g.lin = lin;
  g.add_optimizer(opt, &sched);
  std::vector<float> lg;
  for (int i = 0; i < 8; ++i) lg.push_back(g(x, y).item<float>());
  REQUIRE(lg.size() == le.size());
  for (size_t i = 0; i < lg.size(); ++i) CHECK(lg[i] == le[i]);
  CHECK(same_bits(lin->weight.detach(), we));
  CHECK(g.stats().replays >= 5);
  auto [lgraph, wgraph] = run(true);  // without a scheduler: runs and replays
  CHECK(lgraph.size() == 8);
}

TEST_CASE("trace: (child process) load a saved graph and write its output") {
  // The parent test below runs this binary again with OF_TRACE_CHILD set; alone it does nothing.
  const char* dir = std::getenv("OF_TRACE_CHILD");
  if (!dir) return;
  of::jit::LoadedGraph g = of::jit::load(std::string(dir) + "/cnn.oftrace");
  of::Tensor x;
  of::load(x, std::string(dir) + "/x.safetensors");
  of::save(g(x), std::string(dir) + "/y_child.safetensors");
}

TEST_CASE("trace: save -> load in a fresh process is bitwise equal; bad files fail cleanly") {
  char tmpl[] = "/tmp/oneflow-trace-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  of::manual_seed(4);
  Cnn net;
  net->eval();
  of::NoGradGuard ng;
  auto infer = of::jit::trace([&](const of::Tensor& x) { return net->forward(x).softmax(1); });
  of::Tensor x = of::randn({5, 1, 16, 16});
  of::Tensor y = infer(x);
  of::jit::save(infer, dir + "/cnn.oftrace");
  of::save(x, dir + "/x.safetensors");
  // in this process
  of::jit::LoadedGraph g = of::jit::load(dir + "/cnn.oftrace");
  CHECK(same_bits(g(x), y));
  CHECK(g.graph().find("conv2d") != std::string::npos);
  // in a fresh process
  const std::string cmd = "OF_TRACE_CHILD=" + dir + " " + th::self_exe() +
                          " -tc='trace: (child process)*' > " + dir + "/child.log 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  of::Tensor yc;
  of::load(yc, dir + "/y_child.safetensors");
  CHECK(same_bits(yc, y));
  // wrong inputs are refused before anything runs
  CHECK(th::throws_with(
      [&] {
        g(of::randn({4, 1, 16, 16}));
      },
      {"[jit.load]", "input 0", "(5, 1, 16, 16)"}));
  CHECK(th::throws_with([&] { g.run({}); }, {"[jit.load]", "takes 1 inputs"}));
  // truncated, corrupted, wrong version
  std::ifstream in(dir + "/cnn.oftrace", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& b) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.write(b.data(), std::streamsize(b.size()));
    return dir + "/" + name;
  };
  CHECK(
      th::throws_with([&] { of::jit::load(write("t.oftrace", bytes.substr(0, bytes.size() / 2))); },
                      {"[jit.load]", "truncated"}));
  std::string flipped = bytes;
  flipped[flipped.size() - 100] ^= 0x5a;
  CHECK(th::throws_with([&] { of::jit::load(write("c.oftrace", flipped)); },
                        {"[jit.load]", "checksum"}));
  std::string version = bytes;
  version[8] = 99;
  CHECK(th::throws_with([&] { of::jit::load(write("v.oftrace", version)); },
                        {"[jit.load]", "version 99"}));
  CHECK(th::throws_with([&] { of::jit::load(write("m.oftrace", "not a graph at all")); },
                        {"[jit.load]"}));
  CHECK(th::throws_with([&] { of::jit::load(dir + "/missing.oftrace"); },
                        {"[jit.load]", "cannot open"}));
  // a training step is saved with its state (tests/test_train_graph.cpp)
  of::Tensor w = of::ones({3}).requires_grad_(true);
  auto train = of::jit::trace([&](const of::Tensor& in) {
    w.mutable_grad() = of::Tensor();
    of::EnableGradGuard eg;
    (in * w).sum().backward();
    return in;
  });
  train(of::ones({3}));
  of::jit::save(train, dir + "/train.oftrace");
  CHECK(of::jit::load(dir + "/train.oftrace").trains());
  CHECK(!g.trains());
  CHECK(th::throws_with([&] { of::trace::load_graph(dir + "/train.oftrace"); },
                        {"[jit.load]", "training step"}));
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("trace pass: remat recomputes a cheap activation read late instead of keeping it") {
  of::manual_seed(5);
  of::Tensor w1 = of::randn({256, 256}).requires_grad_(true);
  of::Tensor w2 = of::randn({256, 256}).requires_grad_(true);
  auto fn = [&](const std::vector<of::Tensor>& x) {
    w1.mutable_grad() = of::Tensor();
    w2.mutable_grad() = of::Tensor();
    of::Tensor h = of::matmul(x[0], w1);
    of::Tensor a = of::dropout(of::gelu(h), 0.25, true);  // saved by the next matmul
    of::Tensor y = of::matmul(a, w2);
    for (int i = 0; i < 12; ++i) y = (y * 0.5).tanh() + y;  // a long way to the backward reads
    y.sum().backward();
    return std::vector<of::Tensor>{w1.grad(), w2.grad()};
  };
  std::vector<of::Tensor> in{of::randn({512, 256})};
  of::trace::Graph g = of::trace::dce(recorded(fn, in));
  of::trace::Graph r = of::trace::remat(g);
  CHECK(count_op(r, "dropout") == count_op(g, "dropout") + 1);  // dropout (and gelu) run again
  CHECK(count_op(r, "gelu") == count_op(g, "gelu") + 1);
  CHECK(of::trace::arena_bytes(of::trace::memplan(r)) <
        of::trace::arena_bytes(of::trace::memplan(g)));
  // and the recomputed values are bitwise the eager ones (the same generator draw)
  auto t = of::jit::trace(fn);
  of::manual_seed(1);
  std::vector<of::Tensor> eager = fn(in);
  for (auto& e : eager) e = e.clone();
  of::manual_seed(1);
  t(in);
  of::manual_seed(1);
  std::vector<of::Tensor> replayed = t(in);
  CHECK(t.stats().replays == 1);
  CHECK(same_bits(eager[0], replayed[0]));
  CHECK(same_bits(eager[1], replayed[1]));
}

TEST_CASE("trace pass: remat recomputes a layer norm (kCheapRecompute) read late") {
  of::manual_seed(8);
  of::Tensor w = of::randn({256, 256}).requires_grad_(true);
  auto fn = [&](const std::vector<of::Tensor>& x) {
    w.mutable_grad() = of::Tensor();
    of::Tensor y = of::matmul(of::layer_norm(x[0], {256}), w);  // the norm's output: saved
    for (int i = 0; i < 12; ++i) y = (y * 0.5).tanh() + y;
    y.sum().backward();
    return std::vector<of::Tensor>{w.grad()};
  };
  std::vector<of::Tensor> in{of::randn({512, 256})};
  of::trace::Graph g = of::trace::dce(recorded(fn, in));
  of::trace::Graph r = of::trace::remat(g);
  CHECK(count_op(r, "layer_norm") == count_op(g, "layer_norm") + 1);
  CHECK(of::trace::arena_bytes(of::trace::memplan(r)) <
        of::trace::arena_bytes(of::trace::memplan(g)));
  auto t = of::jit::trace(fn);
  std::vector<of::Tensor> eager = fn(in);
  eager[0] = eager[0].clone();
  t(in);
  CHECK(same_bits(t(in)[0], eager[0]));
  CHECK(t.stats().replays == 1);
}

TEST_CASE(
    "trace pass: schedule runs a weight gradient before the input gradient allocated "
    "while its activation lives") {
  // NOTE [Memory-aware scheduling]: backward of y = h @ w2 makes dh = g @ w2^T (a new
  // [512, 512]) and then reads h for the last time in dw2 = h^T @ g; swapped, h is gone first
  of::manual_seed(6);
  of::Tensor w1 = of::randn({256, 512}).requires_grad_(true);
  of::Tensor w2 = of::randn({512, 256}).requires_grad_(true);
  auto fn = [&](const std::vector<of::Tensor>& x) {
    w1.mutable_grad() = of::Tensor();
    w2.mutable_grad() = of::Tensor();
    of::Tensor h = of::matmul(x[0], w1);
    (of::matmul(h, w2) * x[1]).sum().backward();
    return std::vector<of::Tensor>{w1.grad(), w2.grad()};
  };
  std::vector<of::Tensor> in{of::randn({512, 256}), of::randn({512, 256})};
  of::trace::Graph g = of::trace::dce(recorded(fn, in));
  of::trace::Graph s = of::trace::schedule(g);
  CHECK(s.nodes.size() == g.nodes.size());
  const size_t before = of::trace::arena_bytes(of::trace::memplan(g));
  const size_t after = of::trace::arena_bytes(of::trace::memplan(s));
  CHECK(after + 512 * 512 * 4 <= before + 256);  // one [512, 512] buffer less at the peak
  // the same schedule again changes nothing; results are bitwise those of the recorded order
  CHECK(of::trace::schedule(s).nodes.size() == s.nodes.size());
  auto on = of::jit::trace(fn), off = of::jit::trace(fn, of::jit::TraceOptions().schedule(false));
  std::vector<of::Tensor> eager = fn(in);
  for (auto& e : eager) e = e.clone();
  on(in);
  off(in);
  const std::vector<of::Tensor> a = on(in), b = off(in);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(same_bits(a[i], eager[i]));
    CHECK(same_bits(b[i], eager[i]));
  }
  CHECK(on.stats().arena_bytes < off.stats().arena_bytes);
}

TEST_CASE(
    "trace pass: schedule keeps views and in-place writes in order (every input made first)") {
  // a view read before and after an in-place write of its base: hoisting the view must not take
  // it past the write's readers, and no node may move above what it reads
  auto fn = [](const std::vector<of::Tensor>& x) {
    of::Tensor h = x[0] * 2;
    of::Tensor v = h.view({64, 32});
    of::Tensor a = v.sum(0);
    h.add_(1);  // in place on an intermediate: v sees it
    of::Tensor b = (v * 3).sum(1);
    of::Tensor c = of::matmul(h.view({64, 32}), x[1]);
    of::Tensor w = h.view({32, 64});
    w.mul_(0.5);  // in place on a view: its readers come after both the view and the write
    of::Tensor d = w.sum(1) + of::matmul(w, x[2]).sum(1);
    return std::vector<of::Tensor>{a, b, c, d};
  };
  std::vector<of::Tensor> in{of::randn({2048}), of::randn({32, 8}), of::randn({64, 16})};
  const of::trace::Graph s = of::trace::schedule(of::trace::dce(recorded(fn, in)));
  std::vector<char> made(s.values.size(), 0);
  for (int v : s.inputs) made[size_t(v)] = 1;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    for (int v : s.nodes[i].inputs) {
      if (v < 0) continue;
      const of::trace::Buffer& b = s.buffers[size_t(s.values[size_t(v)].buffer)];
      if (b.kind == of::trace::BufKind::Intermediate) CHECK_MESSAGE(made[size_t(v)], "node " << i);
    }
    for (int v : s.nodes[i].outputs) made[size_t(v)] = 1;
  }
  auto t = of::jit::trace(fn);
  const std::vector<of::Tensor> eager = fn(in);
  t(in);
  const std::vector<of::Tensor> replayed = t(in);
  for (size_t i = 0; i < eager.size(); ++i) CHECK(same_bits(replayed[i], eager[i]));
}

TEST_CASE("trace: a GPT training step's planned arena is at most 0.6x eager's peak (bench_trace)") {
  // issue 7's memory row, on bench_trace's GPT (2 pre-norm blocks, d 128, seq 64, batch 16):
  // remat of the norms, memory-aware scheduling and the by-size placement take it from 0.72x
  namespace nn = of::nn;
  of::manual_seed(0);
  const int64_t vocab = 96, block = 64, d = 128;
  nn::Embedding tok(vocab, d), pos(block, d);
  nn::TransformerEncoderLayer l1(nn::TransformerEncoderLayerOptions(d, 4)
                                     .dim_feedforward(4 * d)
                                     .dropout(0.1)
                                     .activation(of::kGELU)
                                     .norm_first(true));
  nn::TransformerEncoderLayer l2(nn::TransformerEncoderLayerOptions(d, 4)
                                     .dim_feedforward(4 * d)
                                     .dropout(0.1)
                                     .activation(of::kGELU)
                                     .norm_first(true));
  nn::Linear head(d, vocab);
  const of::Tensor mask =
      of::zeros({block, block}).masked_fill(of::ones({block, block}, of::kBool).triu(1), -INFINITY);
  std::vector<of::Tensor> params;
  for (nn::Module* m :
       std::initializer_list<nn::Module*>{tok.get(), pos.get(), l1.get(), l2.get(), head.get()})
    for (auto& p : m->parameters()) params.push_back(p);
  of::optim::AdamW opt(params, of::optim::AdamWOptions(3e-3).weight_decay(0.01));
  auto step = of::jit::trace([&](const of::Tensor& seq) {
    opt.zero_grad();
    const of::Tensor ids = seq.narrow(0, 0, block);
    of::Tensor h = tok(ids) + pos(of::arange(block, of::kInt64)).unsqueeze(1);
    h = l2(l1(h, mask), mask);
    of::Tensor loss =
        F::cross_entropy(head(h).reshape({-1, vocab}), seq.narrow(0, 1, block).reshape({-1}));
    loss.backward();
    of::nn::utils::clip_grad_norm_(params, 1.0);
    opt.step();
    return loss;
  });
  const of::Tensor ids = of::randint(0, vocab, {block + 1, 16}, of::kInt64);
  step(ids);  // creates AdamW's state: runs eagerly
  step(ids);  // records
  const of::jit::TraceStats st = step.stats();
  REQUIRE(st.eager_peak_bytes > 0);
  const double ratio = double(st.arena_bytes) / double(st.eager_peak_bytes);
  CHECK_MESSAGE(ratio <= 0.6, st.str());
}

namespace {
// A small 3-D CNN (conv3d, max_pool3d, conv_transpose3d, avg and adaptive pools) trained with
// SGD momentum; `traced` replays one recorded step.
std::pair<std::vector<of::Tensor>, std::vector<of::Tensor>> train_cnn3d(bool traced, int steps) {
  namespace nn = of::nn;
  of::manual_seed(99);
  nn::Sequential net(nn::Conv3d(nn::Conv3dOptions(2, 4, 3).padding(1)), nn::ReLU(),
                     nn::MaxPool3d(2),
                     nn::ConvTranspose3d(nn::ConvTranspose3dOptions(4, 3, 2).stride(2)),
                     nn::AvgPool3d(nn::AvgPool3dOptions(2).stride(1)),
                     nn::AdaptiveMaxPool3d(nn::AdaptiveMaxPool3dOptions({2, std::nullopt, 1})),
                     nn::Flatten(), nn::Linear(3 * 2 * 5 * 1, 3));
  of::optim::SGD opt(net->parameters(), of::optim::SGDOptions(0.05).momentum(0.9));
  of::manual_seed(7);
  of::Tensor xs = of::randn({4, 3, 2, 6, 6, 4});
  of::Tensor ys = of::randint(0, 3, {4, 3}, of::kInt64);
  auto step = [&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    of::Tensor loss = F::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  auto tstep = of::jit::trace(step);
  std::vector<of::Tensor> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(traced ? tstep(xs[s % 4], ys[s % 4]) : step(xs[s % 4], ys[s % 4]).detach());
  if (traced) CHECK(tstep.stats().replays >= size_t(steps - 2));
  std::vector<of::Tensor> params;
  for (auto& p : net->parameters()) params.push_back(p.detach().clone());
  return {losses, params};
}
}  // namespace

TEST_CASE("trace: conv3d CNN training steps equal eager bitwise") {
  for (int threads : {1, 2}) {
    Threads t(threads);
    INFO("threads ", threads);
    auto eager = train_cnn3d(false, 6);
    auto traced = train_cnn3d(true, 6);
    check_same_training(eager, traced);
    CHECK(eager.first[4].item<float>() < eager.first[0].item<float>());  // same batch, later
  }
}

TEST_CASE(
    "trace: a plan that copies its inputs into buffers of its own (a CUDA Graph's way) "
    "replays views, offsets and aliased inputs bitwise") {
  // NOTE [CUDA Graph replay]: a graph's plan reads copies of its inputs at the recorded
  // geometry; set_static_inputs_for_testing sends CPU plans down the same path (the first GPU
  // run found it reading a root value that inputs never had)
  of::trace::set_static_inputs_for_testing(true);
  struct Off {
    ~Off() { of::trace::set_static_inputs_for_testing(false); }
  } off;
  auto fn = [](const of::Tensor& a, const of::Tensor& b) {
    return (a * b).sum(1) + a.narrow(1, 1, 2).mean(1) * 3;
  };
  auto f = of::jit::trace(fn);
  of::manual_seed(5);
  const of::Tensor big = of::randn({10, 6});
  for (int64_t start : {0, 2, 5, 1, 4}) {  // a narrow: another offset into a storage each call
    INFO("start ", start);
    const of::Tensor a = big.narrow(0, start, 4), b = of::randn({4, 6});
    CHECK(same_bits(f(a, b), fn(a, b)));
  }
  for (int i = 0; i < 3; ++i) {  // one tensor twice: both inputs share one buffer
    const of::Tensor x = of::randn({4, 6});
    CHECK(same_bits(f(x, x), fn(x, x)));
  }
  for (int i = 0; i < 3; ++i) {  // two views of one storage
    const of::Tensor s = of::randn({8, 6});
    const of::Tensor a = s.narrow(0, 0, 4), b = s.narrow(0, 4, 4);
    CHECK(same_bits(f(a, b), fn(a, b)));
  }
}

TEST_CASE("trace footgun: a step without zero_grad accumulates .grad across calls, as eager") {
  // NOTE [Traced fresh .grad]: recorded while .grad is undefined, backward sets it; the next
  // call starts with a .grad, which eager adds to: that call records again (accumulating)
  auto run = [](bool traced) {
    of::manual_seed(4);
    of::Tensor w = of::randn({3, 2}).set_requires_grad(true);
    const of::Tensor x = of::randn({5, 3});
    auto fn = [&](const of::Tensor& a) {
      of::Tensor loss = of::matmul(a, w).square().sum();
      loss.backward();
      return loss.detach();
    };
    auto step = of::jit::trace(fn);
    std::vector<of::Tensor> grads;
    for (int i = 0; i < 4; ++i) {
      (void)(traced ? step(x) : fn(x));
      grads.push_back(w.grad().clone());
    }
    return std::make_pair(grads, step.stats().recordings);
  };
  const auto eager = run(false), traced = run(true);
  for (size_t i = 0; i < eager.first.size(); ++i) {
    CAPTURE(i);
    CHECK(th::same_bits(traced.first[i], eager.first[i]));
  }
  CHECK(of::allclose(eager.first[3], eager.first[0] * 4, 1e-5, 1e-6));  // it does accumulate
  CHECK(traced.second == 2);  // the set-from-nothing recording, then the accumulating one
}

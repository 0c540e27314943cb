// Saved traced training steps (docs/TRACING.md, "Saved training steps"): 50 traced steps in
// this process equal 25 traced steps + of::jit::save + of::jit::load in a fresh process + 25
// loaded steps, bitwise (losses, parameters, BatchNorm statistics, Adam's moments and step
// counts; dropout draws from the saved generator state); the learning rate is state a driver
// sets; wrong inputs and lying files are refused.
#include <doctest/doctest.h>
#include <zlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include "harness.h"
#include "serialize_util.h"

namespace F = of::nn::functional;
namespace nn = of::nn;

namespace {

using th::same_bits;

struct TinyCnnImpl : nn::Module {
  TinyCnnImpl() {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)));
    bn = register_module("bn", nn::BatchNorm2d(4));
    fc1 = register_module("fc1", nn::Linear(4 * 6 * 6, 16));
    fc2 = register_module("fc2", nn::Linear(16, 10));
  }
  of::Tensor forward(const of::Tensor& x) {
    of::Tensor h = F::max_pool2d(bn(conv(x)).relu(), F::MaxPool2dFuncOptions(2)).flatten(1);
    return fc2(of::dropout(fc1(h).relu(), 0.3, is_training()));
  }
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
OF_MODULE(TinyCnn);

constexpr int kSteps = 50, kSaveAt = 25;
constexpr double kLr = 1e-2;

// The batches, made the same way in both processes (before the model: the default generator
// then starts the run from the same state).
std::vector<std::pair<of::Tensor, of::Tensor>> batches() {
  of::manual_seed(123);
  std::vector<std::pair<of::Tensor, of::Tensor>> b;
  for (int i = 0; i < kSteps; ++i)
    b.push_back({of::randn({8, 1, 12, 12}), of::randint(0, 10, {8}, of::kInt64)});
  return b;
}

// What StepLR(step 10, gamma 0.5) gives call i: the schedule a driver runs through "lr".
double lr_at(int i) { return kLr * std::pow(0.5, i / 10); }

// a file written, for of::jit::load's argument
std::string written(const std::string& path, const std::string& bytes) {
  ser::write_bytes(path, bytes);
  return path;
}

// A graph file edited inside its payload, with its checksum made right again: a file that
// lies rather than one that is damaged. Header: magic (8), version (4), size (8), CRC (4).
std::string relabel(std::string bytes) {
  const uint32_t crc = uint32_t(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data() + 24), uInt(bytes.size() - 24)));
  std::memcpy(&bytes[20], &crc, 4);
  return bytes;
}

std::map<std::string, of::Tensor> as_map(const of::jit::NamedTensors& v) {
  std::map<std::string, of::Tensor> m;
  for (const auto& [k, t] : v) m[k] = t;
  return m;
}

}  // namespace

TEST_CASE("train graph: (child process) load a saved training step and train 25 more steps") {
  // The parent test below runs this binary again with OF_TRAIN_GRAPH_CHILD set; alone it does
  // nothing. No model code here: only the file, the batches and the schedule.
  const char* dir = std::getenv("OF_TRAIN_GRAPH_CHILD");
  if (!dir) return;
  const auto data = batches();
  of::jit::LoadedGraph step = of::jit::load(std::string(dir) + "/step.oftrace");
  REQUIRE(step.trains());
  of::Tensor lr = step.state("lr");
  of::jit::NamedTensors out;
  for (int i = kSaveAt; i < kSteps; ++i) {
    lr.fill_(lr_at(i));
    of::Tensor loss = step(data[size_t(i)].first, data[size_t(i)].second);
    out.emplace_back("loss." + std::to_string(i), loss.clone());
    if (i == kSaveAt + 9) of::jit::save(step, std::string(dir) + "/resaved.oftrace");
  }
  for (const auto& [k, t] : step.state()) out.emplace_back(k, t.clone());
  of::save_tensors(out, std::string(dir) + "/child.safetensors");
}

TEST_CASE("train graph: 25 live + save + load in a fresh process + 25 equals 50 live, bitwise") {
  const ser::TmpDir tmp;  // removed at the end, whatever happens
  const std::string& dir = tmp.path;
  const auto data = batches();
  of::manual_seed(7);
  TinyCnn net;
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(kLr));
  of::optim::StepLR sched(opt, 10, 0.5);
  auto step = of::jit::trace([&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    of::Tensor loss = F::cross_entropy(net(x), y);
    loss.backward();
    opt.step();
    return loss;
  });
  std::vector<of::Tensor> losses;
  for (int i = 0; i < kSteps; ++i) {
    if (i == kSaveAt) {
      of::jit::save(step, dir + "/step.oftrace", of::jit::state_names(*net, opt));
      of::jit::save(step, dir + "/unnamed.oftrace");
    }
    CHECK(opt.param_groups()[0].options().get_lr() == lr_at(i));
    losses.push_back(step(data[size_t(i)].first, data[size_t(i)].second).clone());
    sched.step();
  }
  CHECK(step.stats().replays >= size_t(kSteps - 3));
  const auto live = of::jit::state_names(*net, opt);

  // the fresh process
  const std::string cmd = "OF_TRAIN_GRAPH_CHILD=" + dir + " " + th::self_exe() +
                          " -tc='train graph: (child process)*' > " + dir + "/child.log 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) MESSAGE(ser::read_bytes(dir + "/child.log"));
  REQUIRE(rc == 0);
  const auto child = as_map(of::load_tensors(dir + "/child.safetensors"));
  for (int i = kSaveAt; i < kSteps; ++i) {
    INFO("loss of step " << i);
    REQUIRE(child.count("loss." + std::to_string(i)));
    CHECK(same_bits(child.at("loss." + std::to_string(i)), losses[size_t(i)]));
  }
  size_t optimizer_state = 0;
  for (const auto& nt : live) {  // (no structured binding: clang 14's doctest INFO)
    const std::string& name = nt.first;
    const of::Tensor& t = nt.second;
    INFO("state tensor " << name);
    REQUIRE(child.count(name));
    CHECK(same_bits(child.at(name), t.detach()));
    optimizer_state += name.rfind("optimizer.", 0) == 0;
  }
  CHECK(optimizer_state == 3 * net->parameters().size());  // step, exp_avg, exp_avg_sq each
  CHECK(child.count("optimizer.fc2.weight.exp_avg_sq"));
  CHECK(child.count("bn.running_mean"));
  CHECK(child.count("lr"));
  CHECK(child.count("generator"));

  // in this process: the file's state as saved, and saved again after 10 loaded steps
  of::jit::LoadedGraph loaded = of::jit::load(dir + "/step.oftrace");
  CHECK(loaded.trains());
  CHECK(loaded.state("lr").item<double>() == lr_at(kSaveAt));
  CHECK(loaded.state("optimizer.conv.weight.step").item<double>() == double(kSaveAt));
  CHECK(th::throws_with([&] { loaded.state("nope"); }, {"[jit.load]", "'nope'", "lr"}));
  of::jit::LoadedGraph resaved = of::jit::load(dir + "/resaved.oftrace");
  CHECK(resaved.state("optimizer.fc1.bias.step").item<double>() == double(kSaveAt + 10));
  // without names: generic ones, the same tensors
  of::jit::LoadedGraph unnamed = of::jit::load(dir + "/unnamed.oftrace");
  const auto names = as_map(unnamed.state());
  CHECK(names.count("lr"));
  CHECK(names.count("param.0"));
  CHECK(names.count("state.0"));
  CHECK(names.size() == loaded.state().size());

  // inputs of the wrong shape or dtype are refused naming the input
  CHECK(th::throws_with(
      [&] {
        loaded(of::randn({7, 1, 12, 12}), data[0].second);
      },
      {"[jit.load]", "input 0", "(8, 1, 12, 12)"}));
  CHECK(th::throws_with([&] { loaded(data[0].first, data[0].second.to(of::kFloat32)); },
                        {"[jit.load]", "input 1", "int64"}));
  CHECK(loaded.state("optimizer.conv.weight.step").item<double>() == double(kSaveAt));
}

TEST_CASE("train graph: truncated, corrupted and lying training-step files are refused") {
  const ser::TmpDir tmp;  // removed at the end, whatever happens
  const std::string& dir = tmp.path;
  of::manual_seed(3);
  TinyCnn net;
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(kLr));
  auto step = of::jit::trace([&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    of::Tensor loss = F::cross_entropy(net(x), y);
    loss.backward();
    opt.step();
    return loss;
  });
  const auto data = batches();
  for (int i = 0; i < 3; ++i) step(data[size_t(i)].first, data[size_t(i)].second);
  const std::string path = dir + "/step.oftrace";
  of::jit::save(step, path, of::jit::state_names(*net, opt));
  const std::string bytes = ser::read_bytes(path);
  REQUIRE(bytes.size() > 200);
  of::jit::load(written(dir + "/same.oftrace", relabel(bytes)));  // the editor is faithful

  CHECK(th::throws_with([&] { of::jit::load(written(dir + "/t", bytes.substr(0, 300))); },
                        {"[jit.load]", "truncated"}));
  std::string flipped = bytes;
  flipped[flipped.size() - 30] ^= 0x21;  // inside the state table
  CHECK(th::throws_with([&] { of::jit::load(written(dir + "/c", flipped)); },
                        {"[jit.load]", "checksum"}));
  // the generator state said absent for a graph that draws (dropout)
  std::string no_rng = bytes;
  REQUIRE(no_rng[no_rng.size() - 17] == 1);
  no_rng[no_rng.size() - 17] = 0;
  CHECK(th::throws_with([&] { of::jit::load(written(dir + "/r", relabel(no_rng))); },
                        {"[jit.load]", "generator"}));
  // a state entry: u64 name length, the name, i32 buffer, u8 dtype, u32 rank, i64 sizes...
  auto entry = [&](const std::string& name) {
    std::string needle(8, '\0');
    const uint64_t n = name.size();
    std::memcpy(&needle[0], &n, 8);
    needle += name;
    const size_t at = bytes.rfind(needle);
    REQUIRE(at != std::string::npos);
    return at + needle.size();
  };
  // naming a buffer that is not a captured tensor (buffer 0: the first input)
  std::string other = bytes;
  const int32_t zero = 0;
  std::memcpy(&other[entry("fc2.weight")], &zero, 4);
  CHECK(th::throws_with([&] { of::jit::load(written(dir + "/b", relabel(other))); },
                        {"[jit.load]", "'fc2.weight'", "no captured tensor"}));
  // a geometry larger than its buffer
  std::string big = bytes;
  const int64_t rows = 1000;
  std::memcpy(&big[entry("fc2.weight") + 4 + 1 + 4], &rows, 8);
  CHECK(th::throws_with([&] { of::jit::load(written(dir + "/g", relabel(big))); },
                        {"[jit.load]", "'fc2.weight'", "the graph's tensor on its buffer"}));
  // two entries of one name
  std::string twice = bytes;
  const size_t w = entry("fc2.bias");
  twice[w - 6] = '1';  // "fc2.bias" -> "fc1.bias"
  CHECK(th::throws_with([&] { of::jit::load(written(dir + "/d", relabel(twice))); },
                        {"[jit.load]", "'fc1.bias'"}));
  // a saved training step loaded as a plain graph by the internal loader is refused, and the
  // inference-only loader checks run on its graph as on any other (an op table lie)
  std::string op = bytes;
  const size_t at = op.find("cross_entropy");
  if (at != std::string::npos) {
    op[at] = 'X';
    CHECK(th::throws_with([&] { of::jit::load(written(dir + "/o", relabel(op))); },
                          {"[jit.load]", "an op this library does not have"}));
  }
}

TEST_CASE("train graph: gradients accumulated across calls are state; fresh ones are not") {
  const ser::TmpDir tmp;  // removed at the end, whatever happens
  const std::string& dir = tmp.path;
  of::Tensor w = of::ones({3}).requires_grad_(true);
  auto accumulate = [&](const of::Tensor& in) {
    of::EnableGradGuard eg;
    (in * w * w).sum().backward();  // into the .grad the last call left, in place
    return in;
  };
  auto acc = of::jit::trace(accumulate);
  const of::Tensor in = of::arange(3, of::kFloat32) + 0.5;
  accumulate(in);  // the .grad exists before the recording (the step adds to it in place)
  for (int i = 0; i < 3; ++i) acc(in);
  of::jit::save(acc, dir + "/acc.oftrace");
  for (int i = 0; i < 2; ++i) acc(in);
  of::jit::LoadedGraph loaded = of::jit::load(dir + "/acc.oftrace");
  const auto names = as_map(loaded.state());
  REQUIRE(names.count("grad.param.0"));
  for (int i = 0; i < 2; ++i) loaded(in);
  CHECK(same_bits(loaded.state("grad.param.0"), w.grad()));
  // a .grad set to None inside the step is not state
  auto fresh = of::jit::trace([&](const of::Tensor& x) {
    w.mutable_grad() = of::Tensor();
    of::EnableGradGuard eg;
    (x * w).sum().backward();
    return x;
  });
  fresh(in);
  of::jit::save(fresh, dir + "/fresh.oftrace");
  of::jit::LoadedGraph f = of::jit::load(dir + "/fresh.oftrace");
  CHECK(f.trains());
  CHECK(as_map(f.state()).count("param.0"));
  CHECK(!as_map(f.state()).count("grad.param.0"));
}

TEST_CASE("train graph: a GradScaler step saves its scale and growth tracker as state") {
  const ser::TmpDir tmp;  // removed at the end, whatever happens
  const std::string& dir = tmp.path;
  of::manual_seed(7);
  nn::Sequential net(nn::Linear(4, 8), nn::Tanh(), nn::Linear(8, 1));
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-2));
  of::amp::GradScaler scaler(of::amp::GradScalerOptions().init_scale(1024).growth_interval(3));
  const of::Tensor x = of::randn({16, 4}), y = of::randn({16, 1});
  of::Tensor bad = x.clone();
  bad.select(0, 3).select(0, 1).fill_(std::numeric_limits<float>::infinity());
  auto step = of::jit::trace([&](const of::Tensor& in, const of::Tensor& tgt) {
    opt.zero_grad();
    of::Tensor loss = F::mse_loss(net->forward(in), tgt);
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    return loss;
  });
  auto input = [&](int s) { return s == 7 || s == 8 ? bad : x; };  // two overflowing steps
  for (int s = 0; s < 5; ++s) step(input(s), y);
  of::jit::save(step, dir + "/scaled.oftrace", of::jit::state_names(*net, opt, scaler));
  std::vector<of::Tensor> losses;
  for (int s = 5; s < 12; ++s) losses.push_back(step(input(s), y).clone());
  CHECK(scaler.get_scale() != 1024);  // the schedule moved (grew, backed off)
  of::jit::LoadedGraph loaded = of::jit::load(dir + "/scaled.oftrace");
  for (int s = 5; s < 12; ++s) {
    INFO("step " << s);
    CHECK(same_bits(loaded(input(s), y), losses[size_t(s - 5)]));
  }
  const auto state = as_map(loaded.state());
  for (const auto& nt : of::jit::state_names(*net, opt, scaler)) {
    const std::string& name = nt.first;
    const of::Tensor& t = nt.second;
    INFO("state tensor " << name);
    REQUIRE(state.count(name));
    CHECK(same_bits(state.at(name), t.detach()));
  }
  // the scale and the growth tracker, named, hold the scaler's values now, and a driver can set
  // the scale between calls (the next step's loss is scaled by it)
  REQUIRE(state.count("scaler.scale"));
  REQUIRE(state.count("scaler.growth_tracker"));
  CHECK(state.at("scaler.scale").dtype() == of::kFloat32);
  CHECK(state.at("scaler.scale").item<double>() == scaler.get_scale());
  CHECK(state.at("scaler.growth_tracker").dtype() == of::kInt64);
  CHECK(state.at("scaler.growth_tracker").item<int64_t>() == scaler.get_growth_tracker());
  {
    of::NoGradGuard no_grad;
    loaded.state("scaler.scale").fill_(8.0);
    scaler.update(8.0);
  }
  const of::Tensor a = loaded(x, y), b = step(x, y);
  CHECK(same_bits(a, b));
  CHECK(loaded.state("scaler.scale").item<double>() == scaler.get_scale());
  CHECK(loaded.state("scaler.growth_tracker").item<int64_t>() == scaler.get_growth_tracker());
  CHECK(loaded.state("scaler.growth_tracker").item<int64_t>() > 0);
}

TEST_CASE("train graph: an inference graph has no state and saves again as it loaded") {
  const ser::TmpDir tmp;  // removed at the end, whatever happens
  const std::string& dir = tmp.path;
  of::manual_seed(5);
  TinyCnn net;
  net->eval();
  of::NoGradGuard ng;
  auto infer = of::jit::trace([&](const of::Tensor& x) { return net(x).softmax(1); });
  const of::Tensor x = of::randn({2, 1, 12, 12});
  const of::Tensor y = infer(x);
  of::jit::save(infer, dir + "/infer.oftrace");
  of::jit::LoadedGraph g = of::jit::load(dir + "/infer.oftrace");
  CHECK(!g.trains());
  CHECK(g.state().empty());
  CHECK(th::throws_with([&] { g.state("lr"); }, {"[jit.load]", "not a saved training step"}));
  CHECK(th::throws_with(
      [&] {
        of::jit::save(infer, dir + "/x.oftrace", {{"w", x}});
      },
      {"[jit.save]", "training step"}));
  of::jit::save(g, dir + "/again.oftrace");
  CHECK(same_bits(of::jit::load(dir + "/again.oftrace")(x), y));
}

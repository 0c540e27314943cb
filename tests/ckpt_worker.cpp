// ckpt_worker.cpp: the multi-rank sharded-checkpoint tests (dist_checkpoint.h), run by
// test_dist_checkpoint.cpp under `mpirun --oversubscribe -np N`.
//   ckpt_worker                      the in-process cases (doctest), on any number of ranks
//   ckpt_worker save DIR LAYOUT      train 3 steps from seed 1, save to DIR; rank 0 writes the
//                                    gathered logical values to DIR.ref.safetensors
//   ckpt_worker crash DIR LAYOUT     the same, then one more step and a save whose rank 0 is
//                                    killed before it writes the index
//   ckpt_worker load DIR LAYOUT      a model from another seed loads DIR: its gathered values must
//                                    equal DIR.ref.safetensors bitwise; then one step trains
// LAYOUT: dp (every tensor broadcast, Adam), zero (broadcast, ZeroRedundancyAdam), tp (Megatron:
// W1 and b1 S(0), W2 S(1), b2 B; Adam), hybrid (2 x 2 mesh: batch on axis 0, tp on axis 1),
// mixed (W1 a partial sum, b1 S(0), W2 S(1), b2 B: saved and loaded without an optimizer step).
// Every rank runs the same cases in the same order (CHECK, never REQUIRE, so ranks stay in step).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <oneflow/dist_checkpoint.h>
#include <oneflow/oneflow.h>
#include <oneflow/zero.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "global/dist_checkpoint_testing.h"

namespace of = oneflow;
namespace nn = of::nn;
namespace dist = of::distributed;
using of::NdSbp;
using of::Sbp;

namespace {

constexpr int64_t kIn = 12, kHidden = 10, kOut = 6, kBatch = 10;

struct Run {
  nn::Sequential net{nullptr};
  std::unique_ptr<of::optim::Optimizer> opt;
  std::string layout;
  of::Placement pl = of::Placement::all("cpu");
  NdSbp batch_sbp;
};

of::Placement placement_for(const std::string& layout) {
  if (layout == "hybrid") return of::Placement("cpu", {{0, 1}, {2, 3}});
  return of::Placement::all("cpu");
}

// A model of the layout (seed decides its values), its optimizer ("zero" or "adam" by default
// from the layout; "sgd" for the family-mismatch case) and dtype.
Run make_run(const std::string& layout, uint64_t seed, std::string optimizer = "",
             int64_t hidden = kHidden, of::ScalarType dtype = of::kFloat32, bool extra = false) {
  Run r;
  r.layout = layout;
  r.pl = placement_for(layout);
  of::manual_seed(seed);
  r.net = extra ? nn::Sequential(nn::Linear(kIn, hidden), nn::ReLU(), nn::Linear(hidden, kOut),
                                 nn::Linear(kOut, kOut))
                : nn::Sequential(nn::Linear(kIn, hidden), nn::ReLU(), nn::Linear(hidden, kOut));
  if (dtype != of::kFloat32) r.net->to(dtype);
  const Sbp B = of::sbp::broadcast(), S0 = of::sbp::split(0), S1 = of::sbp::split(1),
            P = of::sbp::partial_sum();
  const bool mesh = layout == "hybrid";
  r.net->to_global(r.pl, mesh ? NdSbp{B, B} : NdSbp{B});
  r.batch_sbp = layout == "tp" || layout == "mixed" ? NdSbp{B} : mesh ? NdSbp{S0, B} : NdSbp{S0};
  auto ps = r.net->parameters();
  auto place = [&](size_t i, NdSbp s) { ps[i].set_data(ps[i].to_global(r.pl, s)); };
  if (layout == "tp") {
    place(0, {S0});
    place(1, {S0});
    place(2, {S1});
  } else if (layout == "hybrid") {
    place(0, {B, S0});
    place(1, {B, S0});
    place(2, {B, S1});
  } else if (layout == "mixed") {
    place(0, {P});
    place(1, {S0});
    place(2, {S1});
  }
  if (optimizer.empty()) optimizer = layout == "zero" ? "zero" : "adam";
  if (optimizer == "zero")
    r.opt = std::make_unique<dist::ZeroRedundancyAdam>(ps, of::optim::AdamOptions(1e-2));
  else if (optimizer == "sgd")
    r.opt = std::make_unique<of::optim::SGD>(ps, of::optim::SGDOptions(0.1).momentum(0.9));
  else r.opt = std::make_unique<of::optim::Adam>(ps, of::optim::AdamOptions(1e-2));
  return r;
}

// One training step on a fixed batch (the same logical batch for any layout and world size).
double train_step(Run& r, int step) {
  of::manual_seed(1000 + uint64_t(step));
  const of::ScalarType dt = r.net->parameters()[0].dtype();
  of::Tensor x = of::randn({kBatch, kIn}, of::dtype(dt)),
             y = of::randn({kBatch, kOut}, of::dtype(dt));
  const NdSbp whole(r.batch_sbp.size(), of::sbp::broadcast());
  x = x.to_global(r.pl, whole).to_global(r.pl, r.batch_sbp);
  y = y.to_global(r.pl, whole).to_global(r.pl, r.batch_sbp);
  r.opt->zero_grad();
  of::Tensor loss = of::mse_loss(r.net->forward(x), y);
  loss.backward();
  r.opt->step();
  return loss.item<double>();
}

// The logical value as a tensor of its own (a broadcast tensor's piece is its storage).
of::Tensor gather(const of::Tensor& t) {
  if (!t.is_global()) return t.clone();
  const NdSbp whole(t.sbp().size(), of::sbp::broadcast());
  return t.to_global(t.placement(), whole).to_local().clone();
}

// The logical values of the module and the optimizer state per parameter (ZeRO's flat state
// cut per parameter): the same keys for Adam and ZeRO. Collective.
std::map<std::string, of::Tensor> logical_state(Run& r) {
  std::map<std::string, of::Tensor> out;
  of::NoGradGuard ng;
  for (const auto& kv : r.net->state_dict()) out["param/" + kv.key()] = gather(kv.value());
  for (const auto& kv : r.opt->state_dict()) out["optim/" + kv.key()] = gather(kv.value());
  if (auto* z = dynamic_cast<dist::ZeroRedundancyAdam*>(r.opt.get())) {
    const auto params = r.opt->parameters();
    for (const auto& st : z->split_state()) {
      int64_t off = 0;
      for (const of::Tensor& p : st.params) {
        const int64_t i = std::find_if(params.begin(), params.end(),
                                       [&](const of::Tensor& q) { return q.impl() == p.impl(); }) -
                          params.begin();
        out["optim/state." + std::to_string(i) + ".step"] = st.step.to(of::kInt64);
        for (const auto& [name, buf] : st.buffers)
          out["optim/state." + std::to_string(i) + "." + name] =
              gather(buf).narrow(0, off, p.numel()).view(p.sizes()).contiguous();
        off += p.numel();
      }
    }
  }
  return out;
}

bool bitwise_equal(const of::Tensor& a, const of::Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.sizes() == b.sizes())) return false;
  const of::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// Every key of `want` in `got` with the same dtype, shape and bytes (and no other key).
int compare_states(const std::map<std::string, of::Tensor>& got,
                   const std::map<std::string, of::Tensor>& want) {
  int bad = 0;
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end()) {
      MESSAGE("missing after load: " << k);
      ++bad;
    } else if (!bitwise_equal(it->second, v)) {
      MESSAGE("differs after load: " << k);
      ++bad;
    }
  }
  for (const auto& [k, v] : got)
    if (!want.count(k)) {
      MESSAGE("unexpected after load: " << k);
      ++bad;
    }
  return bad;
}

std::string test_dir(const std::string& name) {
  std::string dir = "/tmp/of_ckpt_test." + name;
  // rank 0 clears it; everyone waits for that
  if (dist::rank() == 0) std::filesystem::remove_all(dir);
  dist::barrier();
  return dir;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const of::Error& e) { return e.what(); }
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("sharded checkpoint: every layout round-trips bitwise and trains on identically") {
  const int world = dist::world_size();
  for (std::string layout : {"dp", "zero", "tp", "hybrid", "mixed"}) {
    if (layout == "hybrid" && world != 4) continue;
    CAPTURE(layout);
    const std::string dir = test_dir("roundtrip_" + layout);
    Run a = make_run(layout, 1);
    const int steps = layout == "mixed" ? 0 : 3;
    for (int s = 0; s < steps; ++s) train_step(a, s);
    dist::save_checkpoint(dir, a.net, *a.opt);
    const auto want = logical_state(a);
    Run b = make_run(layout, 2);
    dist::load_checkpoint(dir, b.net, *b.opt);
    CHECK(compare_states(logical_state(b), want) == 0);
    // the SBPs are the loading model's own
    for (size_t i = 0; i < a.net->parameters().size(); ++i)
      CHECK(a.net->parameters()[i].sbp() == b.net->parameters()[i].sbp());
    if (layout == "mixed") continue;
    // the state is complete: two more steps of each stay bitwise equal
    for (int s = steps; s < steps + 2; ++s) CHECK(train_step(a, s) == train_step(b, s));
    CHECK(compare_states(logical_state(b), logical_state(a)) == 0);
  }
}

TEST_CASE("sharded checkpoint: Adam <-> ZeRO and tensor parallel <-> data parallel reshard") {
  struct Pair {
    const char *from, *to;
  };
  for (Pair pr : {Pair{"dp", "zero"}, Pair{"zero", "dp"}, Pair{"tp", "dp"}, Pair{"dp", "tp"},
                  Pair{"mixed", "dp"}, Pair{"zero", "tp"}}) {
    const std::string what = std::string(pr.from) + " -> " + pr.to;
    CAPTURE(what);
    const std::string dir = test_dir("reshard");
    Run a = make_run(pr.from, 1);
    if (std::string(pr.from) != "mixed")
      for (int s = 0; s < 3; ++s) train_step(a, s);
    dist::save_checkpoint(dir, a.net, *a.opt);
    const auto want = logical_state(a);
    Run b = make_run(pr.to, 2);
    dist::load_checkpoint(dir, b.net, *b.opt);
    CHECK(compare_states(logical_state(b), want) == 0);
    if (std::string(pr.from) == "mixed") continue;
    // and trains on to the same values (ZeRO's and Adam's arithmetic agree to rounding)
    const double la = train_step(a, 3), lb = train_step(b, 3);
    CHECK(std::abs(la - lb) <= 1e-5 * std::abs(la));
    const auto sa = logical_state(a), sb = logical_state(b);
    for (const auto& [k, v] : sa) {
      CAPTURE(k);
      CHECK(of::allclose(sb.at(k).to(of::kFloat64), v.to(of::kFloat64), 1e-5, 1e-6));
    }
  }
}

TEST_CASE("sharded checkpoint: a save whose index write fails leaves the previous one current") {
  const std::string dir = test_dir("atomic");
  Run a = make_run("dp", 1);
  train_step(a, 0);
  auto h1 = dist::save_checkpoint(dir, a.net, *a.opt);
  CHECK(h1.generation() == 1);
  const auto first = logical_state(a);
  train_step(a, 1);
  dist::testing::set_index_fault(dist::testing::IndexFault::kFail);
  const std::string err = error_of([&] { dist::save_checkpoint(dir, a.net, *a.opt); });
  dist::testing::set_index_fault(dist::testing::IndexFault::kNone);
  CHECK(has(err, "writing the index failed"));
  // the rank files of generation 2 are there, the index still names generation 1
  if (dist::rank() == 0) CHECK(std::filesystem::exists(dir + "/rank-0.gen-2.safetensors"));
  Run b = make_run("dp", 2);
  dist::load_checkpoint(dir, b.net, *b.opt);
  CHECK(compare_states(logical_state(b), first) == 0);
  // the next save is generation 3 and removes the other generations' files
  auto h3 = dist::save_checkpoint(dir, a.net, *a.opt);
  CHECK(h3.generation() == 3);
  dist::barrier();
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank-", 0) == 0) {
      ++files;
      CHECK(has(name, ".gen-3."));
    }
  }
  CHECK(files == dist::world_size());
  Run c = make_run("dp", 3);
  dist::load_checkpoint(dir, c.net, *c.opt);
  CHECK(compare_states(logical_state(c), logical_state(a)) == 0);
}

TEST_CASE("sharded checkpoint: an asynchronous save keeps the values of the moment it started") {
  for (std::string layout : {"dp", "zero", "tp"}) {
    CAPTURE(layout);
    const std::string dir = test_dir("async_" + layout);
    Run a = make_run(layout, 1);
    train_step(a, 0);
    const auto at_save = logical_state(a);
    auto h = dist::save_checkpoint(dir, a.net, *a.opt, {.async = true});
    CHECK(!h.done());
    for (int s = 1; s < 4; ++s) train_step(a, s);  // writes the parameters while the files go out
    h.wait();
    CHECK(h.done());
    Run b = make_run(layout, 2);
    dist::load_checkpoint(dir, b.net, *b.opt);
    CHECK(compare_states(logical_state(b), at_save) == 0);
    // a second asynchronous save is published by the next save (or load) if nobody waits
    {
      auto h2 = dist::save_checkpoint(dir, a.net, *a.opt, {.async = true});
      CHECK(h2.generation() == 2);
      auto h3 = dist::save_checkpoint(dir, a.net, *a.opt, {.async = true});
      CHECK(h2.done());
      CHECK(h3.generation() == 3);
    }  // h3's destructor publishes it
    Run c = make_run(layout, 3);
    dist::load_checkpoint(dir, c.net, *c.opt);
    CHECK(compare_states(logical_state(c), logical_state(a)) == 0);
  }
}

TEST_CASE("sharded checkpoint: extra values come back, and the generator state on request") {
  const std::string dir = test_dir("extra");
  Run a = make_run("dp", 1);
  train_step(a, 0);
  of::manual_seed(77);
  (void)of::rand({3});
  const of::Tensor step = of::full({}, 41, of::dtype(of::kInt64)), order = of::randperm(20);
  dist::save_checkpoint(dir, a.net, *a.opt,
                        {.async = true, .extra = {{"step", step}, {"order", order}}});
  const of::Tensor next = of::rand({5});  // what the saved generator draws next
  (void)of::rand({100});
  Run b = make_run("dp", 2);
  auto extra = dist::load_checkpoint(dir, b.net, *b.opt);
  CHECK(extra.size() == 2);
  CHECK(bitwise_equal(extra.at("step"), step));
  CHECK(bitwise_equal(extra.at("order"), order));
  const of::Tensor unrestored = of::rand({5});
  CHECK(!bitwise_equal(unrestored, next));
  dist::load_checkpoint(dir, b.net, *b.opt, {.random_state = true});
  CHECK(bitwise_equal(of::rand({5}), next));
  std::string e = error_of([&] {
    dist::save_checkpoint(dir, a.net, *a.opt, {.extra = {{"bad", of::Tensor()}}});
  });
  CHECK(has(e, "extra value 'bad'"));
}

TEST_CASE("sharded checkpoint: a rank reads only the saved pieces its own pieces overlap") {
  const std::string dir = test_dir("partial_read");
  Run a = make_run("tp", 1);
  train_step(a, 0);
  dist::save_checkpoint(dir, a.net, *a.opt);
  Run b = make_run("tp", 2);
  dist::load_checkpoint(dir, b.net, *b.opt);
  const auto tp = dist::testing::last_load_stats();
  Run c = make_run("dp", 2);
  dist::load_checkpoint(dir, c.net, *c.opt);
  const auto dp = dist::testing::last_load_stats();
  // everything saved: the parameters and Adam's two moments, 4 step counts, 6 options
  int64_t param_bytes = 0;
  for (const auto& p : a.net->parameters()) param_bytes += p.numel() * 4;
  const int64_t total = 3 * param_bytes + 8 * (4 + 6);
  CAPTURE(tp.piece_bytes);
  CHECK(dp.piece_bytes == total);  // data parallel needs every piece
  CHECK(tp.files <= dist::world_size());
  // tensor parallel: its own rows and columns and the broadcast bias, about 1 / ranks
  if (dist::world_size() == 4) CHECK(tp.piece_bytes < total / 2);
  if (dist::world_size() == 1) CHECK(tp.piece_bytes == total);
}

TEST_CASE("sharded checkpoint: bad input raises on every rank before anything changes") {
  const std::string dir = test_dir("errors");
  Run a = make_run("tp", 1);
  for (int s = 0; s < 2; ++s) train_step(a, s);
  dist::save_checkpoint(dir, a.net, *a.opt);
  const auto saved = logical_state(a);
  // a load that fails must leave the target exactly as it was
  auto unchanged = [](Run& r, const std::function<void()>& f) {
    const auto before = logical_state(r);
    const std::string e = error_of(f);
    CHECK(compare_states(logical_state(r), before) == 0);
    return e;
  };
  {
    Run b = make_run("dp", 2);
    std::string e = unchanged(b, [&] { dist::load_checkpoint(dir + ".none", b.net, *b.opt); });
    CHECK(has(e, "no checkpoint here"));
  }
  {
    Run b = make_run("dp", 2, "", kHidden + 2);
    std::string e = unchanged(b, [&] { dist::load_checkpoint(dir, b.net, *b.opt); });
    CHECK(has(e, "shape mismatch"));
    CHECK(has(e, "'param/0.weight'"));
    CHECK(has(e, "(10, 12)"));
    CHECK(has(e, "(12, 12)"));
    CHECK(has(e, "Placement(cpu"));
  }
  {
    Run b = make_run("dp", 2, "", kHidden, of::kFloat64);
    std::string e = unchanged(b, [&] { dist::load_checkpoint(dir, b.net, *b.opt); });
    CHECK(has(e, "dtype mismatch"));
    CHECK(has(e, "float32"));
    CHECK(has(e, "float64"));
  }
  {
    Run b = make_run("dp", 2, "", kHidden, of::kFloat32, true);
    std::string e = unchanged(b, [&] { dist::load_checkpoint(dir, b.net, *b.opt); });
    CHECK(has(e, "the module's keys differ"));
    CHECK(has(e, "3.weight"));
  }
  {
    Run b = make_run("dp", 2, "sgd");
    std::string e = unchanged(b, [&] { dist::load_checkpoint(dir, b.net, *b.opt); });
    CHECK(has(e, "the optimizer's options differ"));
    CHECK(has(e, "momentum"));
  }
  {  // a model without an optimizer loads the module alone
    Run b = make_run("dp", 2);
    dist::load_checkpoint(dir, b.net);
    std::map<std::string, of::Tensor> got, want;
    for (const auto& [k, v] : logical_state(b))
      if (k.rfind("param/", 0) == 0) got[k] = v;
    for (const auto& [k, v] : saved)
      if (k.rfind("param/", 0) == 0) want[k] = v;
    CHECK(compare_states(got, want) == 0);
  }
  // damaged files: one byte flipped, truncated, deleted (rank 0 damages, every rank loads)
  const std::string file = dir + "/rank-0.gen-1.safetensors";
  const std::string keep = dir + ".rank0.copy";
  if (dist::rank() == 0) std::filesystem::copy_file(file, keep);
  for (std::string damage : {"flip", "truncate", "delete"}) {
    CAPTURE(damage);
    if (dist::rank() == 0) {
      std::filesystem::copy_file(keep, file, std::filesystem::copy_options::overwrite_existing);
      if (damage == "flip") {  // a byte in the middle of the data, after the header
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        uint64_t header = 0;
        f.read(reinterpret_cast<char*>(&header), 8);
        const auto size = std::filesystem::file_size(file);
        const auto at = std::streamoff(8 + header + (size - 8 - header) / 2);
        char c = 0;
        f.seekg(at);
        f.get(c);
        f.seekp(at);
        f.put(char(c ^ 0x40));
      } else if (damage == "truncate") {
        std::filesystem::resize_file(file, std::filesystem::file_size(file) - 8);
      } else {
        std::filesystem::remove(file);
      }
    }
    dist::barrier();
    Run b = make_run("dp", 2);
    std::string e = unchanged(b, [&] { dist::load_checkpoint(dir, b.net, *b.opt); });
    CHECK(has(e, "rank-0.gen-1.safetensors"));
    CHECK(has(e, "saved on Placement(cpu"));
    if (damage == "flip") CHECK(has(e, "is corrupt: the piece's CRC-32"));
    if (damage == "truncate") CHECK(has(e, "bytes where the index says"));
    if (damage == "delete") CHECK(has(e, "cannot be read"));
    dist::barrier();
  }
  if (dist::rank() == 0) std::filesystem::rename(keep, file);
  dist::barrier();
  // the corrupt index
  if (dist::rank() == 0) {
    std::ofstream f(dir + "/index.json", std::ios::app);
    f << "garbage";
  }
  dist::barrier();
  Run b = make_run("dp", 2);
  std::string e = unchanged(b, [&] { dist::load_checkpoint(dir, b.net, *b.opt); });
  CHECK(has(e, "index is malformed"));
  // a local module tensor cannot be saved into a sharded checkpoint
  auto local = nn::Linear(3, 2);
  e = error_of([&] { dist::save_checkpoint(dir + ".local", local); });
  CHECK(has(e, "is a local tensor"));
  CHECK(has(e, "'param/weight'"));
}

namespace {

std::string ref_path(const std::string& dir) { return dir + ".ref.safetensors"; }

int run_mode(const std::string& mode, const std::string& dir, const std::string& layout) {
  if (mode == "save" || mode == "crash") {
    Run a = make_run(layout, 1);
    for (int s = 0; s < 3; ++s) train_step(a, s);
    dist::save_checkpoint(dir, a.net, *a.opt);
    const auto state = logical_state(a);
    if (dist::rank() == 0) {
      std::vector<std::pair<std::string, of::Tensor>> named(state.begin(), state.end());
      of::save_tensors(named, ref_path(dir));
    }
    dist::barrier();
    if (mode == "crash") {
      train_step(a, 3);
      dist::testing::set_index_fault(dist::testing::IndexFault::kKill);
      dist::save_checkpoint(dir, a.net, *a.opt);  // rank 0 dies before the index
      std::printf("rank %d: the save that should have crashed returned\n", dist::rank());
      return 5;
    }
    std::printf("rank %d saved %s (%s)\n", dist::rank(), dir.c_str(), layout.c_str());
    return 0;
  }
  if (mode == "load") {
    Run b = make_run(layout, 2);
    dist::load_checkpoint(dir, b.net, *b.opt);
    std::map<std::string, of::Tensor> want;
    for (auto& [k, v] : of::load_tensors(ref_path(dir))) want[k] = v;
    const int bad = compare_states(logical_state(b), want);
    for (const auto& kv : b.net->named_parameters())
      std::printf("rank %d: %s %s\n", dist::rank(), kv.key().c_str(),
                  of::sbp_str(kv.value().sbp()).c_str());
    const double loss = train_step(b, 3);
    std::printf("rank %d loaded %s (%s): %d difference(s), next loss %.6f\n", dist::rank(),
                dir.c_str(), layout.c_str(), bad, loss);
    return bad == 0 && std::isfinite(loss) ? 0 : 1;
  }
  std::fprintf(stderr, "usage: ckpt_worker [save|crash|load DIR LAYOUT]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  dist::init();
  of::set_num_threads(1);
  if (argc == 4) {
    try {
      return run_mode(argv[1], argv[2], argv[3]);
    } catch (const std::exception& e) {
      std::printf("rank %d caught: %s\n", dist::rank(), e.what());
      return 4;
    }
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

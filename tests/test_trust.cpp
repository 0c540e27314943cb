// Files from strangers (issue "Trust"): checksum-valid forged graph files — nodes out of order,
// reads of bytes no node wrote, a node reading its own output, state tables that lie about
// their tensors, symbolic sizes that ask for more memory than the machine has — are refused
// with an of::Error naming what is wrong, before anything runs. Each forgery is made here from
// a real saved file (read, one field changed, written again with a valid checksum:
// trace::write_file_for_testing) and is also kept as a regression input of fuzz_jit_load
// (tests/fuzz/regressions/jit_load_<case>.bin; OF_FUZZ_WRITE=1 rewrites them), which this test
// loads too.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>

#include "forge_util.h"
#include "harness.h"
#include "serialize_util.h"
#include "../examples/bert.h"
#include "trace/file_format.h"

namespace nn = of::nn;
namespace tr = of::trace;

namespace {

// The regression input of a forged file: fuzz_jit_load's 0xFC (version 3) byte, then the
// payload (the file less its 24-byte header).
std::string regression_input(const std::string& file) { return "\xFC" + file.substr(24); }

// A payload wrapped as a version-3 file again (as fuzz_jit_load wraps it).
std::string wrap_v3(const std::string& payload) { return forge::oftrace_file(payload, 3); }

const std::string kRegressions = ONEFLOW_SOURCE_ROOT "/tests/fuzz/regressions/";

// Writes `forged` (a file's parts), checks that loading it raises with `needles`, and checks
// (or, with OF_FUZZ_WRITE=1, writes) the committed regression input of the same forgery.
void expect_refused(const ser::TmpDir& dir, const std::string& name, const tr::GraphFile& forged,
                    const std::vector<std::string>& needles,
                    const of::jit::LoadOptions& opts = {}) {
  INFO("forgery: ", name);
  const std::string path = dir.file(name + ".oftrace");
  tr::write_file_for_testing(forged, path);
  std::string msg;
  CHECK(th::throws_with([&] { (void)of::jit::load(path, opts); }, needles, &msg));
  INFO(msg);
  const std::string reg = kRegressions + "jit_load_" + name + ".bin";
  if (const char* w = std::getenv("OF_FUZZ_WRITE"); w && std::string(w) == "1") {
    ser::write_bytes(reg, regression_input(ser::read_bytes(path)));
    return;
  }
  REQUIRE_MESSAGE(ser::exists(reg), "missing regression input ", reg,
                  " (OF_FUZZ_WRITE=1 writes it)");
  const std::string committed = ser::read_bytes(reg);
  REQUIRE(committed.size() > 1);
  const std::string again = dir.file(name + ".committed.oftrace");
  ser::write_bytes(again, wrap_v3(committed.substr(1)));
  CHECK(th::throws_with([&] { (void)of::jit::load(again, opts); }, needles));
}

// An inference graph: a small MLP (linear, relu, linear, tanh), saved and read back as parts.
tr::GraphFile mlp_file(const ser::TmpDir& dir) {
  of::manual_seed(5);
  nn::Sequential net(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 8), nn::Tanh());
  net->eval();
  auto fn = of::jit::trace([&](const of::Tensor& x) { return net->forward(x) * 2.0 + 1.0; },
                           of::jit::TraceOptions().fuse(false).inplace(false));
  const of::Tensor x = of::randn({4, 6});
  (void)fn(x);
  (void)fn(x);
  const std::string path = dir.file("mlp.oftrace");
  of::jit::save(fn, path);
  return tr::read_file(path);
}

// A training step: Linear -> tanh -> Linear, MSE, Adam (state: weights, moments, steps, lr).
tr::GraphFile train_file(const ser::TmpDir& dir) {
  of::manual_seed(9);
  nn::Sequential net(nn::Linear(4, 6), nn::Tanh(), nn::Linear(6, 3));
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-2));
  auto step = of::jit::trace([&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad(false);
    of::Tensor loss = of::mse_loss(net->forward(x), y);
    loss.backward();
    opt.step();
    return loss.detach();
  });
  const of::Tensor x = of::randn({5, 4}), y = of::randn({5, 3});
  for (int i = 0; i < 3; ++i) (void)step(x, y);
  const std::string path = dir.file("step.oftrace");
  of::jit::save(step, path, of::jit::state_names(*net, opt));
  return tr::read_file(path);
}

bool same_geometry(const tr::Value& a, const tr::Value& b) {
  return a.dtype == b.dtype && of::IntArrayRef(a.sizes) == of::IntArrayRef(b.sizes) &&
         of::IntArrayRef(a.strides) == of::IntArrayRef(b.strides) && a.offset == b.offset;
}

// A node (not a view) and one of its inputs that a value some later node makes could replace
// (same geometry): {node, input, later value}; node -1 when there is none.
std::tuple<int, int, int> later_value(const tr::Graph& g) {
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const tr::Node& n = g.nodes[ni];
    if (n.op->has(of::kView) || n.writes_existing) continue;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k] < 0) continue;
      for (size_t v = 0; v < g.values.size(); ++v)
        if (g.values[v].producer > int(ni) && !g.values[v].is_view &&
            same_geometry(g.values[v], g.values[size_t(n.inputs[k])]))
          return {int(ni), int(k), int(v)};
    }
  }
  return {-1, -1, -1};
}

using forge::find_node;

}  // namespace

TEST_CASE("trust: a node that reads a later node's output, or bytes no node wrote, is refused") {
  const ser::TmpDir dir;
  const tr::GraphFile base = mlp_file(dir);
  {
    // the unforged file loads and runs
    of::jit::LoadedGraph g = of::jit::load(dir.file("mlp.oftrace"));
    CHECK(g.run({of::randn({4, 6})})[0].sizes() == of::IntArrayRef{4, 8});
    CHECK(g.max_arena_bytes() > 0);
  }
  // a node reads the output of a node after it
  {
    tr::GraphFile f = base;
    int ni, k, v;
    std::tie(ni, k, v) = later_value(f.graph);
    REQUIRE(ni >= 0);
    f.graph.nodes[size_t(ni)].inputs[size_t(k)] = v;
    expect_refused(dir, "order_later_output", f,
                   {"[jit.load]", "node " + std::to_string(ni), "makes after it"});
  }
  // a node reads an intermediate that no node writes (it would read what the last request left
  // in the arena)
  {
    tr::GraphFile f = base;
    tr::Graph& g = f.graph;
    const int ni = find_node(g, "tanh");
    REQUIRE(ni >= 0);
    const tr::Value in = g.values[size_t(g.nodes[size_t(ni)].inputs[0])];
    tr::Buffer b;
    b.kind = tr::BufKind::Intermediate;
    b.nbytes = size_t(in.numel()) * 4;
    b.device = of::Device(of::kCPU);
    g.buffers.push_back(b);
    tr::Value nv = in;
    nv.buffer = int(g.buffers.size()) - 1;
    nv.producer = -1;
    nv.is_view = false;
    nv.offset = 0;
    g.nodes[size_t(ni)].inputs[0] = g.add_value(nv);
    expect_refused(dir, "order_unwritten_intermediate", f,
                   {"[jit.load]", "(tanh)", "which no earlier node writes"});
  }
  // a node takes its own output as input (tanh does not write in place)
  {
    tr::GraphFile f = base;
    tr::Node& n = f.graph.nodes[size_t(find_node(f.graph, "tanh"))];
    n.inputs[0] = n.outputs[0];
    expect_refused(dir, "order_own_output", f, {"[jit.load]", "(tanh)", "its own output"});
  }
  // an output that fills half its buffer (stride 2): the other half would be last call's bytes
  {
    tr::GraphFile f = base;
    tr::Graph& g = f.graph;
    const tr::Node& n = g.nodes[size_t(find_node(g, "tanh"))];
    tr::Value& o = g.values[size_t(n.outputs[0])];
    tr::Buffer& b = g.buffers[size_t(o.buffer)];
    REQUIRE(b.kind == tr::BufKind::Intermediate);
    o.strides = {2 * o.sizes[1], 2};
    b.nbytes *= 2;
    expect_refused(dir, "order_partial_first_write", f,
                   {"[jit.load]", "(tanh)", "does not fill it"});
  }
}

TEST_CASE("trust: a training step whose node reads a later node's output is refused") {
  const ser::TmpDir dir;
  tr::GraphFile f = train_file(dir);
  CHECK(of::jit::load(dir.file("step.oftrace")).trains());
  int ni, k, v;
  std::tie(ni, k, v) = later_value(f.graph);
  REQUIRE(ni >= 0);
  f.graph.nodes[size_t(ni)].inputs[size_t(k)] = v;
  expect_refused(dir, "order_train_later_output", f, {"[jit.load]", "makes after it"});
}

TEST_CASE("trust: a state table that lies about its tensors is refused, naming the entry") {
  const ser::TmpDir dir;
  const tr::GraphFile base = train_file(dir);
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < base.state.size(); ++i) at[base.state[i].name] = i;
  REQUIRE(at.count("2.weight"));  // Linear(6, 3): (3, 6)
  REQUIRE(at.count("lr"));
  REQUIRE(at.count("optimizer.2.weight.exp_avg"));
  const size_t w = at["2.weight"];
  auto forged = [&](const std::function<void(std::vector<tr::StateEntry>&)>& edit) {
    tr::GraphFile f = base;
    edit(f.state);
    return f;
  };
  // fewer rows, inside the buffer
  expect_refused(dir, "state_fewer_rows", forged([&](auto& s) {
                   s[w].sizes = {1, 6};
                 }),
                 {"[jit.load]", "state tensor '2.weight' is float32 (1, 6)",
                  "the graph's tensor on its buffer", "float32 (3, 6)"});
  // transposed sizes with row-major strides
  expect_refused(dir, "state_transposed", forged([&](auto& s) {
                   s[w].sizes = {6, 3};
                   s[w].strides = {3, 1};
                 }),
                 {"'2.weight' is float32 (6, 3) strides (3, 1)"});
  // two entries over one buffer
  expect_refused(dir, "state_shared_buffer",
                 forged([&](auto& s) { s[at["optimizer.2.weight.exp_avg"]].buffer = s[w].buffer; }),
                 {"[jit.load]", "name one buffer"});
  // a float32 entry over the float64 learning rate
  expect_refused(dir, "state_lr_dtype", forged([&](auto& s) { s[at["lr"]].dtype = of::kFloat32; }),
                 {"state tensor 'lr' is float32 ()", "float64 ()"});
  // a bool entry over a float weight's bytes
  expect_refused(dir, "state_bool_over_float", forged([&](auto& s) { s[w].dtype = of::kBool; }),
                 {"'2.weight' is bool"});
  // negative strides (eager views refuse them)
  expect_refused(dir, "state_negative_strides", forged([&](auto& s) {
                   s[w].strides = {-6, 1};
                   s[w].offset = 12;
                 }),
                 {"'2.weight' is float32 (3, 6) strides (-6, 1) offset 12"});
  // strides whose extent overflows int64
  expect_refused(dir, "state_stride_overflow", forged([&](auto& s) {
                   s[w].strides = {int64_t(1) << 62, 1};
                 }),
                 {"[jit.load]", "'2.weight'", "strides (4611686018427387904, 1)"});
  // tables without the optimizer state, or without the learning rate
  expect_refused(dir, "state_missing_moment", forged([&](auto& s) {
                   s.erase(s.begin() + long(at["optimizer.2.weight.exp_avg"]));
                 }),
                 {"[jit.load]", "names no tensor for buffer", "float32 (3, 6)"});
  expect_refused(dir, "state_missing_lr",
                 forged([&](auto& s) { s.erase(s.begin() + long(at["lr"])); }),
                 {"names no tensor for buffer", "float64 ()"});
  // an entry named like the generator state
  expect_refused(dir, "state_named_generator", forged([&](auto& s) { s[w].name = "generator"; }),
                 {"[jit.load]", "named 'generator', the name of the step's generator state"});
}

TEST_CASE("trust: a symbolic graph's sizes are bounded by the caller's limit at load and call") {
  const ser::TmpDir dir;
  of::jit::Dim n("n", 1, 64);
  auto fn = of::jit::trace(
      [](const of::Tensor& x) { return x.unsqueeze(1) * of::arange(x.size(0), of::kFloat32); },
      of::jit::TraceOptions().dynamic(0, {{0, n}}));
  for (int64_t s : {3, 5}) (void)fn(of::randn({s}));
  const std::string path = dir.file("sym.oftrace");
  of::jit::save(fn, path);
  {
    of::jit::LoadedGraph g = of::jit::load(path);
    // the largest call: n = 64, a (64, 64) float32 result and the arange's 64 floats
    CHECK(g.max_arena_bytes() >= 64 * 64 * 4);
    CHECK(g.max_arena_bytes() < (size_t(1) << 20));
    CHECK(g.run({of::randn({64})})[0].sizes() == of::IntArrayRef{64, 64});
    // a limit below what n = 64 needs is refused at load, naming the corner
    of::jit::LoadOptions small;
    small.max_arena_bytes = 4096;
    CHECK(th::throws_with([&] { (void)of::jit::load(path, small); },
                          {"[jit.load]", "n = 64", "LoadOptions::max_arena_bytes"}));
  }
  // a forged expression: the arange's end n * 2^34 (64 GiB per unit of n)
  tr::GraphFile f = tr::read_file(path);
  bool forged = false;
  for (tr::SymbolicGraph& sg : f.structures)
    for (tr::AttrExpr& e : sg.exprs)
      if (sg.tmpl.nodes[size_t(e.node)].op->name == "arange") {
        for (int64_t& c : e.num) c *= int64_t(1) << 34;
        forged = true;
      }
  REQUIRE(forged);
  expect_refused(dir, "symbolic_huge_size", f, {"[jit.load]", "needs", "more than the limit"});
}

TEST_CASE("trust: the fuzz corpus of jit.load holds symbolic graphs and training steps") {
  // tests/fuzz/corpus/jit_load/: fuzz_jit_load mutates these (OF_FUZZ_WRITE=1 rewrites them)
  const ser::TmpDir dir;
  const std::string corpus = ONEFLOW_SOURCE_ROOT "/tests/fuzz/corpus/jit_load/";
  tr::GraphFile step = train_file(dir);
  of::jit::Dim n("n", 1, 16);
  auto fn = of::jit::trace([](const of::Tensor& x) { return (x * 2.0).relu().sum(1); },
                           of::jit::TraceOptions().dynamic(0, {{0, n}}));
  for (int64_t s : {2, 3}) (void)fn(of::randn({s, 4}));
  of::jit::save(fn, dir.file("sym.oftrace"));
  const std::map<std::string, std::string> seeds = {
      {"v3_training_step", ser::read_bytes(dir.file("step.oftrace"))},
      {"v3_symbolic", ser::read_bytes(dir.file("sym.oftrace"))}};
  for (const auto& seed_file : seeds) {  // (no structured binding: clang 14's doctest lambdas)
    const std::string& name = seed_file.first;
    const std::string& file = seed_file.second;
    if (const char* w = std::getenv("OF_FUZZ_WRITE"); w && std::string(w) == "1")
      ser::write_bytes(corpus + name, regression_input(file));
    REQUIRE_MESSAGE(ser::exists(corpus + name), "missing seed ", corpus + name);
    // the committed seed loads (it is a valid file of its kind)
    const std::string seed = ser::read_bytes(corpus + name);
    ser::write_bytes(dir.file(name + ".oftrace"), wrap_v3(seed.substr(1)));
    of::jit::LoadedGraph g = of::jit::load(dir.file(name + ".oftrace"));
    CHECK(g.num_inputs() > 0);
    CHECK(g.trains() == (name == "v3_training_step"));
  }
}

// ---------------------------------------------------------------- the README's bitwise claims

namespace {
bert::Config tiny_bert() {
  bert::Config c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = 32;
  return c;
}
of::Tensor keep_mask(int64_t b, int64_t s) {
  of::Tensor m = of::ones({b, s});
  if (b > 1) m.select(0, 1).narrow(0, s - 3, 3).fill_(0);
  return m;
}
double max_abs_diff(const of::Tensor& a, const of::Tensor& b) {
  return (a - b).abs().max().item<double>();
}
}  // namespace

TEST_CASE("README: replays equal eager bitwise with exact(); the default rewrites stay close") {
  // README "Trace, compile, replay" and "Serving": the inference rewrites (attention, add_norm,
  // epilogue) sum in another order than the ops they replace; TraceOptions().exact() turns
  // every such pass off (the pass table's rows that say so), and the replay is the eager call's
  // bits again
  of::manual_seed(3);
  bert::Bert model(tiny_bert());
  model->eval();
  of::NoGradGuard ng;
  const of::Tensor ids = of::randint(0, 64, {2, 9}, of::kInt64), mask = keep_mask(2, 9);
  const of::Tensor eager = model->forward(ids, mask);
  auto fwd = [&](const of::Tensor& i, const of::Tensor& m) { return model->forward(i, m); };
  auto exact = of::jit::trace(fwd, of::jit::TraceOptions().exact());
  auto fast = of::jit::trace(fwd);
  for (int k = 0; k < 2; ++k) {
    CHECK(th::same_bits(exact(ids, mask), eager));
    CHECK(max_abs_diff(fast(ids, mask), eager) < 1e-5);
  }
  CHECK(exact.stats().replays >= 1);
  CHECK(exact.stats().rewrites.empty());
  bool fused = false;
  for (const std::string& r : fast.stats().rewrites)
    fused |= r.find("refused") == std::string::npos;
  CHECK(fused);  // (the default does rewrite this model: exact() is what makes the bits equal)
  // OF_TRACE_PASSES cannot turn a reordering pass back on under exact()
  {
    setenv("OF_TRACE_PASSES", "+attention,+add_norm,+epilogue", 1);
    auto again = of::jit::trace(fwd, of::jit::TraceOptions().exact());
    (void)again(ids, mask);
    const of::Tensor r = again(ids, mask);
    unsetenv("OF_TRACE_PASSES");
    CHECK(th::same_bits(r, eager));
    CHECK(again.stats().rewrites.empty());
  }
  // a saved graph of symbolic shapes, served with LoadOptions::exact, gives at a new shape the
  // eager model's bits at that shape
  const ser::TmpDir dir;
  of::jit::Dim batch("batch", 1, 4), seq("seq", 2, 16);
  // (traced as the README's example is, without exact(): the file holds the recordings, and the
  // loader optimizes each new shape)
  auto encode = of::jit::trace(fwd, of::jit::TraceOptions()
                                        .dynamic(0, {{0, batch}, {1, seq}})
                                        .dynamic(1, {{0, batch}, {1, seq}}));
  (void)encode(ids, mask);
  const std::string path = dir.file("encoder.oftrace");
  of::jit::save(encode, path);
  of::jit::LoadOptions lo;
  lo.exact = true;
  const of::jit::LoadedGraph g = of::jit::load(path, lo);
  const of::Tensor ids2 = of::randint(0, 64, {3, 13}, of::kInt64), mask2 = keep_mask(3, 13);
  CHECK(th::same_bits(g(ids2, mask2), model->forward(ids2, mask2)));
  // and without it, the rewrites' tolerance
  CHECK(max_abs_diff(of::jit::load(path)(ids2, mask2), model->forward(ids2, mask2)) < 1e-5);
}

TEST_CASE("README: a traced training step with attention replays bitwise under exact()") {
  // the training graph's attention rewrite (fused forward and backward) reorders floats too
  auto run = [](bool traced, bool exact_on) {
    of::manual_seed(11);
    bert::Bert model(tiny_bert());
    of::optim::Adam opt(model->parameters(), of::optim::AdamOptions(1e-3));
    const of::Tensor ids = of::randint(0, 64, {2, 9}, of::kInt64), mask = keep_mask(2, 9);
    auto step = [&](const of::Tensor& i, const of::Tensor& m) {
      opt.zero_grad(false);
      of::Tensor loss = model->forward(i, m).square().mean();
      loss.backward();
      opt.step();
      return loss.detach();
    };
    auto t = of::jit::trace(step, of::jit::TraceOptions().exact(exact_on));
    std::vector<of::Tensor> out;
    for (int k = 0; k < 3; ++k) out.push_back(traced ? t(ids, mask) : step(ids, mask));
    for (const of::Tensor& p : model->parameters()) out.push_back(p.detach().clone());
    return out;
  };
  const auto eager = run(false, false), exact = run(true, true), fast = run(true, false);
  REQUIRE(eager.size() == exact.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    CAPTURE(i);
    CHECK(th::same_bits(exact[i], eager[i]));
    CHECK(max_abs_diff(fast[i], eager[i]) < 1e-4);
  }
}

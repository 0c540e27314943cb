// test_global.cpp: global tensors in a world of one process (in this process), and the
// multi-rank suite (global_worker.cpp) under mpirun -np 1/2/4 with a deadline.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <fmt/format.h>
#include <oneflow/oneflow.h>

#include "global/global.h"
#include "global/rules.h"
#include "op_table.h"
#include "harness.h"

namespace of = oneflow;
using of::NdSbp;

TEST_CASE("global: Placement and Sbp") {
  of::Placement a("cpu", {0});
  of::Placement m("cpu", {{0, 1}, {2, 3}});
  CHECK(m.hierarchy() == std::vector<int64_t>{2, 2});
  CHECK(m.coord_of(2) == std::vector<int64_t>{1, 0});
  CHECK(m.coord_of(7).empty());
  CHECK(m.str() == "Placement(cpu, ranks=[[0, 1], [2, 3]])");
  CHECK(a == of::Placement("cpu", {0}));
  CHECK(a != m);
  CHECK(of::sbp::split(1).str() == "S(1)");
  CHECK(of::sbp_str(NdSbp{of::sbp::broadcast(), of::sbp::partial_sum()}) == "(B, P)");
  CHECK_THROWS_WITH_AS(of::Placement("cpu", {0, 0}), doctest::Contains("appears twice"), of::Error);
  CHECK_THROWS_WITH_AS(of::Placement("tpu", {0}), doctest::Contains("device type"), of::Error);
  CHECK_THROWS_WITH_AS(of::Placement("cpu", {{0, 1}, {2}}), doctest::Contains("same length"),
                       of::Error);
  // balanced pieces: the first n % p one larger, empty ones at the end
  using of::global::balanced_piece;
  CHECK(balanced_piece(10, 4, 0).size == 3);
  CHECK(balanced_piece(10, 4, 2).start == 6);
  CHECK(balanced_piece(10, 4, 3).size == 2);
  CHECK(balanced_piece(1, 4, 1).size == 0);
  CHECK(balanced_piece(1, 4, 3).start == 1);
}

TEST_CASE("global: a world of one process (no MPI): conversions, ops, autograd, errors") {
  CHECK(of::distributed::world_size() == 1);
  CHECK(of::distributed::backend() == "self");
  of::Placement pl("cpu", {0});
  of::manual_seed(4);
  of::Tensor x = of::randn({5, 3});
  of::Tensor g = x.to_global(pl, of::sbp::split(0));
  CHECK(g.is_global());
  CHECK(!x.is_global());
  CHECK(g.sbp() == NdSbp{of::sbp::split(0)});
  CHECK(g.placement() == pl);
  CHECK(g.sizes() == x.sizes());
  CHECK(g.to_local().sizes() == x.sizes());
  CHECK(of::allclose(g.to_global(pl, of::sbp::partial_sum()).to_local(), x));
  // ops run on the pieces and give global results
  of::Tensor w = of::randn({4, 3}).to_global(pl, of::sbp::broadcast());
  of::Tensor y = of::relu(of::linear(g, w)) + 1.0;
  CHECK(y.is_global());
  CHECK(y.sbp() == NdSbp{of::sbp::split(0)});
  CHECK(of::allclose(y.to_local(), of::relu(of::linear(x, w.to_local())) + 1.0));
  CHECK(y.sum().item<float>() ==
        doctest::Approx((of::relu(of::linear(x, w.to_local())) + 1.0).sum().item<float>()));
  // printing shows the logical value with placement and SBP
  const std::string s = of::str(g);
  CHECK(s.find("placement=Placement(cpu, ranks=[0])") != std::string::npos);
  CHECK(s.find("sbp=(S(0))") != std::string::npos);
  // autograd through a global step into a local leaf
  of::Tensor leaf = x.clone().requires_grad_();
  of::Tensor z = (leaf.to_global(pl, of::sbp::broadcast()) * 2.0).sum();
  z.backward();
  CHECK(of::allclose(leaf.grad(), of::full({5, 3}, 2.0)));
  // zeros_like / ones_like keep placement and SBP
  of::Tensor o = of::ones_like(g);
  CHECK(o.is_global());
  CHECK(o.sbp() == g.sbp());
  // errors: a split dim out of range, SBPs for the wrong mesh, mixing local and global
  CHECK_THROWS_WITH_AS(x.to_global(pl, of::sbp::split(2)), doctest::Contains("splits dim 2"),
                       of::Error);
  CHECK_THROWS_WITH_AS(x.to_global(of::Placement("cpu", std::vector<std::vector<int>>{{0}}),
                                   NdSbp{of::sbp::broadcast()}),
                       doctest::Contains("mesh axes"), of::Error);
  CHECK_THROWS_WITH_AS(g + x, doctest::Contains("same placement"), of::Error);
  CHECK_THROWS_WITH_AS(of::zeros({2}, of::Placement("cpu", {0, 1}), of::sbp::broadcast()),
                       doctest::Contains("the world has 1"), of::Error);
  CHECK_THROWS_WITH_AS(x.placement(), doctest::Contains("local"), of::Error);
  // a traced function of global tensors replays (NOTE [Traced boxing]); making a local tensor
  // global inside it is refused with a clear error
  auto f = of::jit::trace([](const of::Tensor& t) { return t * 2.0; });
  for (int k = 0; k < 3; ++k) {
    of::Tensor r = f(g);
    CHECK(r.is_global());
    CHECK(r.sbp() == g.sbp());
    CHECK(r.to_vector<float>() == (g * 2.0).to_vector<float>());
  }
  CHECK(f.stats().replays == 2);
  auto h = of::jit::trace([](const of::Tensor& t) {
    return t.to_global(of::Placement("cpu", {0}), NdSbp{of::sbp::broadcast()});
  });
  CHECK_THROWS_WITH_AS(h(x), doctest::Contains("make the inputs global"), of::Error);
}

TEST_CASE(
    "global: the signature cache serves repeated calls and keys on every input's SBP and shape") {
  namespace g = of::global;
  of::Placement pl("cpu", {0});
  const of::Tensor a = of::randn({6, 4}), b = of::randn({6, 4});
  const of::Tensor as0 = a.to_global(pl, of::sbp::split(0)),
                   bs0 = b.to_global(pl, of::sbp::split(0));
  const of::Tensor ab = a.to_global(pl, of::sbp::broadcast()),
                   bb = b.to_global(pl, of::sbp::broadcast());
  (void)(as0 + bs0);  // first call (may be a miss or a hit from an earlier test)
  g::SignatureCacheStats s0 = g::signature_cache_stats();
  of::Tensor r1 = as0 + bs0;
  g::SignatureCacheStats s1 = g::signature_cache_stats();
  CHECK(s1.hits == s0.hits + 1);
  CHECK(s1.misses == s0.misses);
  CHECK(r1.sbp() == NdSbp{of::sbp::split(0)});
  // other SBPs, other shapes, other attrs: new entries, and the results follow the inputs
  of::Tensor r2 = ab + bb;
  CHECK(r2.sbp() == NdSbp{of::sbp::broadcast()});
  of::Tensor r3 = of::randn({3, 4}).to_global(pl, of::sbp::split(0)) +
                  of::randn({3, 4}).to_global(pl, of::sbp::split(0));
  CHECK(r3.sizes() == of::IntArrayRef({3, 4}));
  of::Tensor r4 = ab.sum(0), r5 = ab.sum(1);
  CHECK(r4.sizes() == of::IntArrayRef({4}));
  CHECK(r5.sizes() == of::IntArrayRef({6}));
  CHECK(of::allclose(r5.to_local(), a.sum(1)));
  g::SignatureCacheStats s2 = g::signature_cache_stats();
  CHECK(s2.misses >= s1.misses + 4);
  CHECK(s2.entries >= 4);
  // a call that raises stores nothing and raises again
  const of::Tensor c = of::randn({5, 4}).to_global(pl, of::sbp::broadcast());
  for (int i = 0; i < 2; ++i) CHECK_THROWS_AS(ab + c, of::Error);
}

namespace {

// Runs the worker under mpirun with a deadline; returns the exit status and the output tail.
int run_ranks(int n, std::string* out, const std::string& env = "", int deadline_s = 300) {
  const std::string cmd = fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 {} "
      "timeout -k 5 {} mpirun --oversubscribe -np {} {} 2>&1",
      env, deadline_s, n, ONEFLOW_GLOBAL_WORKER);
  return th::run_capture(cmd, out);
}

}  // namespace

// ---------------------------------------------------------------- NOTE [Boxing ops]: rows

namespace {
using V = std::vector<of::Tensor>;
const of::Placement& one_rank() {
  static const of::Placement p("cpu", {0});
  return p;
}
// Attention on float64 references: q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev].
th::Ref attention_ref(const std::vector<th::Ref>& in) {
  const th::Ref &q = in[0], &k = in[1], &v = in[2];
  const int64_t BH = q.shape[0] * q.shape[1], L = q.shape[2], E = q.shape[3], S = k.shape[2],
                Ev = v.shape[3];
  th::Ref o({q.shape[0], q.shape[1], L, Ev});
  const double sc = 1.0 / std::sqrt(double(E));
  for (int64_t b = 0; b < BH; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> w(static_cast<size_t>(S));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < S; ++j) {
        double d = 0;
        for (int64_t e = 0; e < E; ++e)
          d += q.v[size_t((b * L + i) * E + e)] * k.v[size_t((b * S + j) * E + e)];
        w[size_t(j)] = d * sc;
        mx = std::max(mx, w[size_t(j)]);
      }
      for (double& x : w) sum += (x = std::exp(x - mx));
      for (int64_t e = 0; e < Ev; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += w[size_t(j)] * v.v[size_t((b * S + j) * Ev + e)];
        o.v[size_t((b * L + i) * Ev + e)] = acc / sum;
      }
    }
  return o;
}
th::OpRow global_row(std::string name, std::vector<std::string> ops, std::vector<th::Shape> shapes,
                     std::function<of::Tensor(const V&)> fn,
                     std::function<th::Ref(const std::vector<th::Ref>&)> ref) {
  th::OpRow r = th::make_row(std::move(name), std::move(ops), std::move(shapes), std::move(fn),
                             std::move(ref));
  r.global_layer = true;
  return r;
}
auto identity_ref = [](const std::vector<th::Ref>& in) { return in[0]; };
}  // namespace

// The global layer's ops on a world of one: values and gradients pass through unchanged.
TH_ROWS({
    global_row(
        "global/to_global, to_local", {"to_global", "to_local"}, {{3, 4}},
        [](const V& in) { return in[0].to_global(one_rank(), of::sbp::split(1)).to_local(); },
        identity_ref),
    global_row(
        "global/boxing S(0) -> B -> P", {"boxing"}, {{4, 3}},
        [](const V& in) {
          return in[0]
              .to_global(one_rank(), of::sbp::split(0))
              .to_global(one_rank(), of::sbp::broadcast())
              .to_global(one_rank(), of::sbp::partial_sum())
              .to_local();
        },
        identity_ref),
    // [0] and the 1 x 1 mesh [[0]] are two placements: the value moves between them
    global_row(
        "global/move_placement", {"move_placement"}, {{2, 5}},
        [](const V& in) {
          static const of::Placement mesh("cpu", std::vector<std::vector<int>>{{0}});
          return in[0]
              .to_global(one_rank(), of::sbp::split(0))
              .to_global(mesh, NdSbp{of::sbp::split(1), of::sbp::broadcast()})
              .to_local();
        },
        identity_ref),
    // attention split by heads: each rank's pieces (piece_of), the output wrapped back
    global_row(
        "global/piece_of (attention split by heads)", {"piece_of"},
        {{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}},
        [](const V& in) {
          auto g = [](const of::Tensor& t) { return t.to_global(one_rank(), of::sbp::split(1)); };
          return of::scaled_dot_product_attention(g(in[0]), g(in[1]), g(in[2])).to_local();
        },
        attention_ref),
    // a traced step's boxing is a boxing_axis node, a move between placements a move_pieces node
    [] {
      th::OpRow r = global_row(
          "global/traced boxing_axis and move_pieces", {"boxing_axis", "move_pieces"}, {{4, 6}},
          [](const V& in) {
            static const of::Placement mesh("cpu", std::vector<std::vector<int>>{{0}});
            auto step = of::jit::trace([](const of::Tensor& t) {
              return t.to_global(one_rank(), of::sbp::broadcast())
                  .to_global(mesh, NdSbp{of::sbp::split(0), of::sbp::split(1)});
            });
            const of::Tensor x = in[0].to_global(one_rank(), of::sbp::split(1));
            of::Tensor y = step(x);
            y = step(x);  // the replay
            if (step.stats().replays != 1) throw of::Error("the step did not replay");
            const std::string g = step.graph();
            if (g.find("boxing_axis") == std::string::npos ||
                g.find("move_pieces") == std::string::npos)
              throw of::Error("the traced graph lacks boxing_axis or move_pieces:\n" + g);
            return y.to_local();
          },
          identity_ref);
      r.grad = false;  // the trace is of a step without backward
      return r;
    }(),
});

TEST_CASE("global: the factories that follow a tensor follow its placement and SBP") {
  const of::Placement pl("cpu", {0});
  of::manual_seed(5);
  const of::Tensor x = of::randn({4, 6}, of::kFloat64);
  const of::Tensor s1 = x.to_global(pl, of::sbp::split(1));
  const of::Tensor p = x.to_global(pl, of::sbp::partial_sum());
  // new_zeros / new_full: the tensor's placement and SBP, partial sums as broadcast, splits of
  // dims the new shape lacks as broadcast; dtype and device the tensor's unless given
  const of::Tensor z = s1.new_zeros({3, 5});
  CHECK(z.is_global());
  CHECK(z.placement() == pl);
  CHECK(z.sbp() == NdSbp{of::sbp::split(1)});
  CHECK(z.dtype() == of::kFloat64);
  CHECK(z.to_local().sum().item<double>() == 0.0);
  CHECK(s1.new_zeros({7}).sbp() == NdSbp{of::sbp::broadcast()});
  CHECK(p.new_full({2, 2}, 3.0).sbp() == NdSbp{of::sbp::broadcast()});
  CHECK(p.new_full({2, 2}, 3.0).to_local().sum().item<double>() == 12.0);
  CHECK(s1.new_ones({2}, of::kInt64).dtype() == of::kInt64);
  CHECK(!x.new_zeros({2}).is_global());
  CHECK(of::zeros_like(p).sbp() == NdSbp{of::sbp::broadcast()});
  CHECK(of::randn_like(s1).sbp() == s1.sbp());
  // broadcast_like: a local constant every rank computes alike, as a broadcast global tensor on
  // the other's placement (no communication); itself beside a local tensor
  const of::Tensor idx = of::arange(4, of::kInt64);
  const uint64_t before = of::distributed::collectives_issued();
  const of::Tensor c = of::broadcast_like(idx, s1);
  CHECK(of::distributed::collectives_issued() == before);
  CHECK(c.is_global());
  CHECK(c.sbp() == NdSbp{of::sbp::broadcast()});
  CHECK(c.to_local().to_vector<int64_t>() == idx.to_vector<int64_t>());
  CHECK(of::broadcast_like(idx, x).is_same(idx));
  CHECK(of::broadcast_like(c, s1).is_same(c));
  CHECK(th::throws_with([&] { of::broadcast_like(of::Tensor(), s1); },
                        {"[broadcast_like]", "value is undefined"}));
  // VJPs that scatter into a fresh buffer use them: a split index_select's gradient
  const of::Tensor w = x.clone().requires_grad_();
  of::index_select(w.to_global(pl, of::sbp::split(1)), 0, c.to_global(pl, of::sbp::split(0)))
      .sum()
      .backward();
  CHECK(of::allclose(w.grad(), of::ones({4, 6}, of::kFloat64)));
}

TEST_CASE("global: an op with no SBP rule refuses global inputs; the rest say how they run") {
  const of::Placement pl("cpu", {0});
  const of::Tensor g = of::ones({2, 3}).to_global(pl, of::sbp::split(0));
  // to_device has no rule and no trait default: it names the op and the inputs
  std::string msg;
  CHECK(th::throws_with(
      [&] {
        of::Attrs a;
        a.values = {int64_t(0), int64_t(0), false};  // (device_type, device_index, non_blocking)
        of::dispatch(of::find_op("to_device"), {g}, a);
      },
      {"[to_device] has no SBP rule", "cannot run on global tensors", "input 0 (2, 3) (S(0))",
       "to_local()"},
      &msg));
  // every op with tensor inputs has a rule, a default from its traits (elementwise,
  // reductions), or says so: the ops that refuse are these
  std::vector<std::string> refusing;
  for (const of::OpDef* op : of::all_ops()) {
    if (op->has(of::kFactory) || op->sbp_rule) continue;
    if (op->has(of::kElementwise) && !op->has(of::kRandom)) continue;
    if (op->has(of::kReduction)) continue;
    refusing.push_back(op->name);
  }
  std::sort(refusing.begin(), refusing.end());
  // (to_device, and the global layer's own ops, which take pieces or are recorded, not dispatched
  // on global tensors: NOTE [Boxing ops])
  CHECK(refusing == std::vector<std::string>{"boxing", "boxing_axis", "move_pieces",
                                             "move_placement", "piece_of", "to_device", "to_global",
                                             "to_local"});
  // the rules that read a `dim` or `dims` attribute by name (rules.h): every op using one has it
  auto has_attr = [](const of::OpDef& op, const char* name) {
    return std::find(op.attr_names.begin(), op.attr_names.end(), name) != op.attr_names.end();
  };
  size_t along = 0;
  for (const of::OpDef* op : of::all_ops()) {
    INFO(op->name);
    if (op->sbp_rule == &of::sbp_rules::kAlongOneDim ||
        op->sbp_rule == &of::sbp_rules::kLinearAlongOneDim) {
      CHECK(has_attr(*op, "dim"));
      ++along;
    }
    if (op->sbp_rule == &of::sbp_rules::kLinearAlongDims ||
        op->sbp_rule == &of::sbp_rules::kLinearAlongDimsOrFlat)
      CHECK(has_attr(*op, "dims"));
  }
  CHECK(along >= 8);  // softmax, log_softmax (+ backward), sort, topk, cumsum, cumprod, cat, slice
}

TEST_CASE("global: the multi-rank suite under mpirun -np 1, 2 and 4") {
#if ONEFLOW_HAVE_MPI
  for (int n : {1, 2, 4}) {
    CAPTURE(n);
    std::string out;
    const int rc = run_ranks(n, &out);
    INFO(out);
    CHECK(rc == 0);
  }
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank suite runs in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

TEST_CASE(
    "global: a diverging rank is detected by the opt-in check, naming the op and its number") {
#if ONEFLOW_HAVE_MPI
  for (const char* mode : {"diverge", "diverge_shape"}) {
    CAPTURE(mode);
    std::string out;
    const int rc =
        run_ranks(2, &out, fmt::format("OF_WORKER_FAULT={} OF_GLOBAL_CHECK=1", mode), 90);
    INFO(out);
    CHECK(rc == 3);
    CHECK(out.find("finished the collective") == std::string::npos);
    // both ranks raise, each naming its op, the sequence number and the rank that differs
    CHECK(out.find("rank 0 caught:") != std::string::npos);
    CHECK(out.find("rank 1 caught:") != std::string::npos);
    CHECK(out.find("diverged across the ranks") != std::string::npos);
    CHECK(out.find("(differs from this rank)") != std::string::npos);
    if (std::string(mode) == "diverge") {
      CHECK(out.find("'add'") != std::string::npos);
      CHECK(out.find("'mul'") != std::string::npos);
    } else {
      CHECK(out.find("(5,)") != std::string::npos);
    }
  }
  // without the check the same divergence goes unnoticed (the sums just differ): the check is
  // what catches it
  std::string out;
  CHECK(run_ranks(2, &out, "OF_WORKER_FAULT=diverge", 90) == 0);
  CHECK(out.find("finished the collective") != std::string::npos);
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank suite runs in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

TEST_CASE("global: ranks that ask to_global for different conversions all raise") {
#if ONEFLOW_HAVE_MPI
  // NOTE [Checked global meta]: rank 1 differs in one field; every rank names it
  const std::vector<std::pair<std::string, std::vector<std::string>>> modes = {
      {"meta_sbp", {"SBP: ", "rank 1 (S(1))", "(S(0))"}},
      {"meta_local_shape", {"local shape (split dims as *): ", "(*, 6)", "(*, 8)"}},
      {"meta_dtype", {"dtype: ", "rank 1 float64", "float32"}},
      {"meta_logical_shape", {"logical shape: ", "rank 1 (6, 8)", "(8, 8)"}},
      {"meta_placement", {"placement: ", "SBP: ", "(B, S(0))"}},
  };
  for (int n : {2, 4}) {
    for (const auto& m : modes) {  // (no structured binding: clang 14's doctest lambdas)
      const std::string& mode = m.first;
      const std::vector<std::string>& needles = m.second;
      CAPTURE(n);
      CAPTURE(mode);
      std::string out;
      const int rc = run_ranks(n, &out, "OF_WORKER_FAULT=" + mode, 90);
      INFO(out);
      CHECK(rc == 3);
      CHECK(out.find("finished the collective") == std::string::npos);
      for (int r = 0; r < n; ++r)
        CHECK(out.find(fmt::format("rank {} caught: [to_global] the ranks disagree", r)) !=
              std::string::npos);
      for (const std::string& s : needles) CHECK(out.find(s) != std::string::npos);
      if (n == 4 && mode == "meta_sbp")
        CHECK(out.find("ranks 0, 2, 3 (S(0))") != std::string::npos);
    }
  }
  // ranks that disagree on who takes part cannot compare: the collective watchdog ends the
  // ranks left waiting, in bounded time
  {
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_ranks(2, &out, "OF_WORKER_FAULT=meta_ranks OF_COLLECTIVE_TIMEOUT=3", 90);
    INFO(out);
    CHECK(rc != 0);
    CHECK(rc != 124);  // not the test's own deadline
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
  }
  // switched off, the same disagreement goes through with a wrong tensor and no error
  std::string out;
  CHECK(run_ranks(2, &out, "OF_WORKER_FAULT=meta_off OF_CHECK_GLOBAL_META=0", 90) == 0);
  CHECK(out.find("finished the collective") != std::string::npos);
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank suite runs in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

TEST_CASE("global: a dead rank or a stuck rank ends the job non-zero in bounded time") {
#if ONEFLOW_HAVE_MPI
  for (const char* mode : {"die", "sleep"}) {
    CAPTURE(mode);
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    // the sleeping rank sleeps 120 s; the others' watchdog gives up after 3 s
    const int rc =
        run_ranks(2, &out, fmt::format("OF_WORKER_FAULT={} OF_COLLECTIVE_TIMEOUT=3", mode), 90);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(out);
    CHECK(rc != 0);
    CHECK(rc != 124);  // not the deadline: the job ended itself
    CHECK(secs < 60);
    if (std::string(mode) == "sleep")
      CHECK(out.find("did not complete within 3 s") != std::string::npos);
    CHECK(out.find("finished the collective") == std::string::npos);
  }
#elif ONEFLOW_STATIC_CORE
  MESSAGE(
      "static core (the sanitized build): the MPI module and the multi-rank suite are built "
      "and run by the regular build only");
#else
  FAIL(
      "built without Open MPI's development files (libopenmpi-dev): the multi-rank suite is "
      "not built; ./run installs them");
#endif
}

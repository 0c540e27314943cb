// global_worker.cpp: the multi-rank global-tensor tests. test_global.cpp runs this program
// under `mpirun --oversubscribe -np N` (N = 1, 2, 4) with a deadline; every rank runs the
// same cases in the same order (CHECK, never REQUIRE, so that ranks stay in step) and computes
// the single-process reference itself from the same seed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <oneflow/oneflow.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

namespace of = oneflow;
using of::Sbp;
using of::NdSbp;

namespace {

double max_diff(const of::Tensor& a, const of::Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return 1e300;
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

std::vector<Sbp> sbps_1d(int64_t ndim) {
  std::vector<Sbp> r{of::sbp::broadcast(), of::sbp::partial_sum()};
  for (int64_t d = 0; d < ndim; ++d) r.push_back(of::sbp::split(d));
  return r;
}

uint64_t issued() { return of::distributed::collectives_issued(); }

// The number of collectives a 1-D conversion takes (p > 1).
uint64_t expected_collectives(Sbp from, Sbp to) {
  if (from == to || from.is_broadcast() || to.is_partial_sum()) return 0;
  return 1;
}

}  // namespace

TEST_CASE("boxing: every 1-D pair, even, uneven and empty pieces: values, gradients, counts") {
  const int p = of::distributed::world_size();
  of::Placement pl = of::Placement::all("cpu");
  const std::vector<std::vector<int64_t>> shapes = {{8, 6}, {5, 7}, {1, 3}, {0, 4}};
  for (const auto& shape : shapes) {
    of::manual_seed(11);
    of::Tensor full = of::randn(shape, of::dtype(of::kFloat64));
    of::Tensor w = of::randn(shape, of::dtype(of::kFloat64));
    for (Sbp from : sbps_1d(2)) {
      for (Sbp to : sbps_1d(2)) {
        CAPTURE(of::shape_str(shape));
        CAPTURE(from.str());
        CAPTURE(to.str());
        of::Tensor leaf = full.clone().requires_grad_();
        of::Tensor x = leaf.to_global(pl, of::sbp::broadcast()).to_global(pl, from);
        CHECK(x.sbp() == NdSbp{from});
        const uint64_t before = issued();
        of::Tensor y = x.to_global(pl, to);
        const uint64_t used = issued() - before;
        if (p > 1) CHECK(used == expected_collectives(from, to));
        CHECK(y.sbp() == NdSbp{to});
        CHECK(y.sizes() == of::IntArrayRef(shape));
        CHECK(max_diff(y, full) == 0);
        // gradient: d/dleaf sum(y * w) = w, whatever the SBPs on the way
        of::Tensor wg = w.to_global(pl, of::sbp::broadcast());
        (y * wg).sum().backward();
        REQUIRE(leaf.grad().defined());
        CHECK(max_diff(leaf.grad(), w) < 1e-15);
      }
    }
  }
}

TEST_CASE("boxing: 2-D mesh conversions (4 ranks)") {
  if (of::distributed::world_size() != 4) return;
  of::Placement pl("cpu", {{0, 1}, {2, 3}});
  std::vector<NdSbp> list;
  for (Sbp a : sbps_1d(2))
    for (Sbp b : sbps_1d(2)) list.push_back(NdSbp{a, b});
  for (const auto& shape : std::vector<std::vector<int64_t>>{{4, 6}, {5, 3}}) {
    of::manual_seed(5);
    of::Tensor full = of::randn(shape, of::dtype(of::kFloat64));
    for (const NdSbp& from : list)
      for (const NdSbp& to : list) {
        CAPTURE(of::sbp_str(from));
        CAPTURE(of::sbp_str(to));
        of::Tensor x = full.to_global(pl, NdSbp{of::sbp::broadcast(), of::sbp::broadcast()})
                           .to_global(pl, from);
        of::Tensor y = x.to_global(pl, to);
        CHECK(max_diff(y, full) < 1e-13);
      }
  }
}

TEST_CASE("global factories give one logical tensor for every SBP") {
  of::Placement pl = of::Placement::all("cpu");
  of::manual_seed(3);
  of::Tensor ref = of::randn({7, 5}, of::dtype(of::kFloat64));
  for (Sbp s : sbps_1d(2)) {
    of::manual_seed(3);
    of::Tensor g = of::randn({7, 5}, pl, s, of::dtype(of::kFloat64));
    CHECK(max_diff(g, ref) == 0);
  }
}

TEST_CASE("global ops equal the single process: forward and gradient") {
  of::Placement pl = of::Placement::all("cpu");
  of::manual_seed(21);
  of::Tensor x = of::randn({10, 6}, of::dtype(of::kFloat64));
  of::Tensor w = of::randn({4, 6}, of::dtype(of::kFloat64));
  of::Tensor b = of::randn({4}, of::dtype(of::kFloat64));
  // reference
  of::Tensor xl = x.clone().requires_grad_(), wl = w.clone().requires_grad_(),
             bl = b.clone().requires_grad_();
  of::Tensor yl = of::softmax(of::linear(xl, wl, bl), 1) * 3.0 + of::mm(xl, wl.t()).sum(0);
  (yl * yl).sum().backward();
  for (Sbp xs : {of::sbp::split(0), of::sbp::split(1), of::sbp::broadcast()}) {
    for (Sbp ws : {of::sbp::broadcast(), of::sbp::split(0), of::sbp::split(1)}) {
      CAPTURE(xs.str());
      CAPTURE(ws.str());
      of::Tensor xg0 = x.clone().requires_grad_(), wg0 = w.clone().requires_grad_(),
                 bg0 = b.clone().requires_grad_();
      of::Tensor xg = xg0.to_global(pl, of::sbp::broadcast()).to_global(pl, xs);
      of::Tensor wg = wg0.to_global(pl, of::sbp::broadcast()).to_global(pl, ws);
      of::Tensor bg = bg0.to_global(pl, of::sbp::broadcast());
      of::Tensor y = of::softmax(of::linear(xg, wg, bg), 1) * 3.0 + of::mm(xg, wg.t()).sum(0);
      CHECK(y.is_global());
      CHECK(max_diff(y, yl) < 1e-12);
      (y * y).sum().backward();
      CHECK(max_diff(xg0.grad(), xl.grad()) < 1e-12);
      CHECK(max_diff(wg0.grad(), wl.grad()) < 1e-12);
      CHECK(max_diff(bg0.grad(), bl.grad()) < 1e-12);
    }
  }
}

TEST_CASE("data parallel MLP: K Adam steps equal one process with the same global batch") {
  of::Placement pl = of::Placement::all("cpu");
  auto make = [] {
    of::manual_seed(1);
    auto m = of::nn::Sequential(of::nn::Linear(6, 16), of::nn::ReLU(), of::nn::Linear(16, 3));
    m->to(of::kFloat64);
    return m;
  };
  auto ref = make();
  auto dp = make();
  dp->to_global(pl, of::sbp::broadcast());
  for (const auto& p : dp->parameters()) CHECK(p.is_global());
  of::optim::Adam opt_ref(ref->parameters(), of::optim::AdamOptions(1e-2));
  of::optim::Adam opt_dp(dp->parameters(), of::optim::AdamOptions(1e-2));
  const int64_t batch = 10;  // uneven over 4 ranks: 3, 3, 2, 2
  const int me = of::distributed::rank(), p = of::distributed::world_size();
  for (int step = 0; step < 3; ++step) {
    of::manual_seed(100 + step);
    of::Tensor x = of::randn({batch, 6}, of::dtype(of::kFloat64));
    of::Tensor t = of::randint(0, 3, {batch}, of::dtype(of::kInt64));
    opt_ref.zero_grad();
    of::Tensor loss_ref = of::nn::functional::cross_entropy(ref->forward(x), t);
    loss_ref.backward();
    opt_ref.step();
    // each rank feeds only its piece of the batch
    const int64_t base = batch / p, extra = batch % p;
    const int64_t start = me * base + std::min<int64_t>(me, extra), len = base + (me < extra);
    of::Tensor xg = x.narrow(0, start, len).to_global(pl, of::sbp::split(0));
    of::Tensor tg = t.narrow(0, start, len).to_global(pl, of::sbp::split(0));
    opt_dp.zero_grad();
    of::Tensor logits = dp->forward(xg);
    of::Tensor loss = of::nn::functional::cross_entropy(logits, tg);
    loss.backward();
    opt_dp.step();
    CHECK(std::abs(loss.item<double>() - loss_ref.item<double>()) < 1e-12);
  }
  auto pr = ref->parameters(), pd = dp->parameters();
  for (size_t i = 0; i < pr.size(); ++i) {
    CHECK(pd[i].sbp() == NdSbp{of::sbp::broadcast()});
    CHECK(max_diff(pd[i], pr[i]) < 1e-12);
  }
}

TEST_CASE("tensor parallel (Megatron) MLP: one all-reduce forward, one backward") {
  of::Placement pl = of::Placement::all("cpu");
  of::manual_seed(9);
  of::Tensor x = of::randn({8, 6}, of::dtype(of::kFloat64));
  of::Tensor w1 = of::randn({16, 6}, of::dtype(of::kFloat64)), b1 = of::randn({16}, of::dtype(of::kFloat64));
  of::Tensor w2 = of::randn({6, 16}, of::dtype(of::kFloat64)), b2 = of::randn({6}, of::dtype(of::kFloat64));
  std::vector<of::Tensor> ref{x, w1, b1, w2, b2};
  for (auto& t : ref) t = t.clone().requires_grad_();
  of::Tensor yl = of::linear(of::relu(of::linear(ref[0], ref[1], ref[2])), ref[3], ref[4]);
  (yl * yl).sum().backward();
  // global leaves: x broadcast, W1/b1 column-parallel S(0), W2 row-parallel S(1), b2 broadcast
  std::vector<of::Tensor> g{x.to_global(pl, of::sbp::broadcast()),
                            w1.to_global(pl, of::sbp::broadcast()).to_global(pl, of::sbp::split(0)),
                            b1.to_global(pl, of::sbp::broadcast()).to_global(pl, of::sbp::split(0)),
                            w2.to_global(pl, of::sbp::broadcast()).to_global(pl, of::sbp::split(1)),
                            b2.to_global(pl, of::sbp::broadcast())};
  for (auto& t : g) t = t.detach().requires_grad_();
  const uint64_t c0 = issued();
  of::Tensor y = of::linear(of::relu(of::linear(g[0], g[1], g[2])), g[3], g[4]);
  // (on one rank every conversion is free, so the signatures need not be the parallel ones)
  const bool parallel = of::distributed::world_size() > 1;
  if (parallel) CHECK(y.sbp() == NdSbp{of::sbp::partial_sum()});
  of::Tensor yb = y.to_global(pl, of::sbp::broadcast());
  const uint64_t c1 = issued();
  if (parallel) CHECK(c1 - c0 == 1);
  (yb * yb).sum().backward();
  if (parallel) CHECK(issued() - c1 == 1);  // the gradient of x (P -> B); the weights' arrive in their SBPs
  CHECK(max_diff(yb, yl) < 1e-12);
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    CHECK(g[i].grad().sbp() == g[i].sbp());
    CHECK(max_diff(g[i].grad(), ref[i].grad()) < 1e-12);
  }
}

TEST_CASE("errors come before any collective and are the same on every rank") {
  of::Placement pl = of::Placement::all("cpu");
  of::Tensor a = of::zeros({4, 3}, pl, of::sbp::split(0));
  CHECK_THROWS_WITH_AS(a.to_global(pl, of::sbp::split(2)), doctest::Contains("splits dim 2"), of::Error);
  CHECK_THROWS_WITH_AS(a.to_global(pl, NdSbp{of::sbp::broadcast(), of::sbp::broadcast()}),
                       doctest::Contains("mesh axes"), of::Error);
  of::Tensor b = of::zeros({3, 3}, pl, of::sbp::broadcast());
  CHECK_THROWS_WITH_AS(of::mm(a, of::zeros({5, 2}, pl, of::sbp::broadcast())),
                       doctest::Contains("mm"), of::Error);
  CHECK_THROWS_WITH_AS(a + of::zeros({4, 3}), doctest::Contains("same placement"), of::Error);
  if (of::distributed::world_size() > 1) {
    // pieces of inconsistent shapes: every rank sees every shape and raises the same error
    of::Tensor piece = of::zeros({of::distributed::rank() == 0 ? 3 : 1, 2});
    CHECK_THROWS_WITH_AS(piece.to_global(pl, of::sbp::split(0)),
                         doctest::Contains("inconsistent shapes"), of::Error);
    of::Placement bad("cpu", {0, 1, 2, 3, 4, 5, 6, 7, 8});
    CHECK_THROWS_WITH_AS(of::zeros({2}, bad, of::sbp::broadcast()),
                         doctest::Contains("the world has"), of::Error);
  }
  (void)b;
}

int main(int argc, char** argv) {
  of::distributed::init();
  of::set_num_threads(1);
  // Fault modes (test_global.cpp): rank 1 dies or sleeps while the others enter a collective;
  // the job must end non-zero in bounded time instead of hanging.
  if (const char* mode = std::getenv("OF_WORKER_FAULT")) {
    of::Placement pl = of::Placement::all("cpu");
    if (of::distributed::rank() == 1) {
      if (std::string(mode) == "die") std::raise(SIGKILL);
      if (std::string(mode) == "sleep") std::this_thread::sleep_for(std::chrono::seconds(120));
    }
    of::Tensor s = of::ones({4}, pl, of::sbp::partial_sum()).to_global(pl, of::sbp::broadcast());
    std::printf("rank %d finished the collective: %g\n", of::distributed::rank(), s.sum().item<double>());
    return 0;
  }
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  // every rank reports; a failure anywhere fails the run (mpirun returns non-zero)
  return rc;
}

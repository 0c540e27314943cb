// global_worker.cpp: the multi-rank global-tensor tests. test_global.cpp runs this program
// under `mpirun --oversubscribe -np N` (N = 1, 2, 4) with a deadline; every rank runs the
// same cases in the same order (CHECK, never REQUIRE, so that ranks stay in step) and computes
// the single-process reference itself from the same seed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <oneflow/c10d.h>
#include <oneflow/oneflow.h>
#include <oneflow/pipeline.h>
#include <oneflow/zero.h>

#include <chrono>
#include <functional>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "dispatch.h"
#include "global/global.h"

namespace of = oneflow;
using of::NdSbp;
using of::Sbp;

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

struct FailingBackward : of::autograd::Function<FailingBackward> {
  static of::Tensor forward(of::autograd::AutogradContext*, of::Tensor x) { return x * 2.0; }
  static of::autograd::variable_list backward(of::autograd::AutogradContext*,
                                              of::autograd::variable_list) {
    throw of::Error("backward failed on purpose");
  }
};

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

// f on global leaves (made from the same values with the given SBPs) equals f on local
// leaves: the output, its SBP, and the gradients of sum(out * weight) for every leaf.
void check_against_local(const std::string& what,
                         const std::function<of::Tensor(const std::vector<of::Tensor>&)>& f,
                         const std::vector<of::Tensor>& values, const std::vector<Sbp>& sbps,
                         const Sbp* expect_out = nullptr, double tol = 1e-12) {
  CAPTURE(what);
  of::Placement pl = of::Placement::all("cpu");
  std::vector<of::Tensor> loc, leaves, glob;
  for (const auto& v : values) {
    loc.push_back(v.is_floating_point() ? v.clone().requires_grad_() : v);
    leaves.push_back(v.is_floating_point() ? v.clone().requires_grad_() : v);
  }
  for (size_t i = 0; i < values.size(); ++i)
    glob.push_back(leaves[i].to_global(pl, of::sbp::broadcast()).to_global(pl, sbps[i]));
  of::Tensor yl = f(loc), yg = f(glob);
  CHECK(yg.is_global());
  if (expect_out) CHECK(yg.sbp() == NdSbp{*expect_out});
  CHECK(yg.sizes() == yl.sizes());
  CHECK(max_diff(yg, yl) < tol);
  of::manual_seed(77);
  const of::Tensor w = of::randn(yl.sizes(), of::dtype(yl.dtype()));
  (yl * w).sum().backward();
  (yg * w.to_global(pl, of::sbp::broadcast())).sum().backward();
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].is_floating_point()) continue;
    CAPTURE(i);
    REQUIRE(leaves[i].grad().defined());
    CHECK(max_diff(leaves[i].grad(), loc[i].grad()) < tol);
  }
}

TEST_CASE(
    "global rules: layer/rms norm, cross entropy and cat keep rows split and equal one process") {
  const int p = of::distributed::world_size();
  const Sbp S0 = of::sbp::split(0), Bc = of::sbp::broadcast();
  of::manual_seed(31);
  auto f64 = of::dtype(of::kFloat64);
  // 10 rows: uneven over 4 ranks (3, 3, 2, 2); 4 x 3 rows: dim 0 divides 1, 2 and 4 ranks
  const of::Tensor x2 = of::randn({10, 6}, f64), x3 = of::randn({4, 3, 6}, f64),
                   x3u = of::randn({5, 3, 6}, f64), w = of::randn({6}, f64) + 1.0,
                   b = of::randn({6}, f64);
  check_against_local(
      "layer_norm 2-D", [](const auto& v) { return of::layer_norm(v[0], {6}, v[1], v[2]); },
      {x2, w, b}, {S0, Bc, Bc}, &S0);
  check_against_local(
      "layer_norm 3-D", [](const auto& v) { return of::layer_norm(v[0], {6}, v[1], v[2]); },
      {x3, w, b}, {S0, Bc, Bc}, &S0);
  check_against_local(
      "layer_norm 3-D over two dims",
      [](const auto& v) {
        return of::layer_norm(v[0], {3, 6});
      },
      {x3}, {S0}, &S0);
  // 5 rows over 2 or 4 ranks: the statistics' rows would not be balanced pieces: whole values
  check_against_local(
      "layer_norm 3-D, uneven dim 0",
      [](const auto& v) { return of::layer_norm(v[0], {6}, v[1], v[2]); }, {x3u, w, b},
      {S0, Bc, Bc}, p == 1 ? &S0 : &Bc);
  check_against_local(
      "rms_norm 2-D", [](const auto& v) { return of::rms_norm(v[0], {6}, v[1]); }, {x2, w},
      {S0, Bc}, &S0);
  check_against_local(
      "rms_norm 3-D", [](const auto& v) { return of::rms_norm(v[0], {6}, v[1]); }, {x3, w},
      {S0, Bc}, &S0);
  // cross entropy: ignored targets, weights, smoothing, every reduction
  const of::Tensor logits = of::randn({10, 5}, f64);
  const of::Tensor target = of::tensor({0, 3, 1, -100, 4, 2, 2, -100, 0, 1}, of::kInt64);
  const of::Tensor cw = of::rand({5}, f64) + 0.5;
  namespace F = of::nn::functional;
  using Red = of::nn::CrossEntropyLossOptions::reduction_t;
  for (Red red : {Red(of::kMean), Red(of::kSum), Red(of::kNone)})
    for (bool weighted : {false, true})
      for (double eps : {0.0, 0.1}) {
        CAPTURE(red.index());
        CAPTURE(weighted);
        CAPTURE(eps);
        auto opts =
            F::CrossEntropyFuncOptions().reduction(red).ignore_index(-100).label_smoothing(eps);
        if (weighted) opts = opts.weight(cw);
        check_against_local("cross_entropy",
                            [&](const auto& v) {
                              auto o = opts;
                              if (weighted)
                                o = o.weight(cw.to_global(of::Placement::all("cpu"), Bc));
                              return F::cross_entropy(v[0], v[1], v[0].is_global() ? o : opts);
                            },
                            {logits, target}, {S0, S0});
      }
  // the data-parallel loss: rows stay split; the forward adds one scalar all-reduce
  {
    of::Placement pl = of::Placement::all("cpu");
    of::Tensor lg = logits.to_global(pl, Bc).to_global(pl, S0),
               tg = target.to_global(pl, Bc).to_global(pl, S0);
    const uint64_t before = issued();
    of::Tensor loss = F::cross_entropy(lg, tg, F::CrossEntropyFuncOptions().ignore_index(-100));
    if (p > 1) CHECK(issued() - before == 1);
    CHECK(std::abs(loss.item<double>() -
                   F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().ignore_index(-100))
                       .item<double>()) < 1e-12);
  }
  // attention over a split batch (no dropout): per sample, the split stays
  const of::Tensor q = of::randn({6, 3, 4}, f64), k = of::randn({6, 5, 4}, f64),
                   v = of::randn({6, 5, 2}, f64);
  check_against_local(
      "sdpa", [](const auto& t) { return of::scaled_dot_product_attention(t[0], t[1], t[2]); },
      {q, k, v}, {S0, S0, S0}, &S0);
  check_against_local(
      "sdpa causal",
      [](const auto& t) {
        return of::scaled_dot_product_attention(t[0], t[1], t[1], {}, 0.0, true);
      },
      {q, q}, {S0, S0}, &S0);
  const of::Tensor mask = of::rand({6, 3, 5}, f64) > 0.3;
  check_against_local(
      "sdpa masked",
      [&](const auto& t) {
        of::Tensor m = t[0].is_global() ? mask.to_global(of::Placement::all("cpu"), Bc) : mask;
        return of::scaled_dot_product_attention(t[0], t[1], t[2], m);
      },
      {q, k, v}, {S0, S0, S0}, p > 1 ? &S0 : nullptr);  // 1 rank: all free
  // cat: splits of the other dim stay, no collective; along the split dim: correct values
  const of::Tensor a = of::randn({10, 3}, f64), c = of::randn({10, 2}, f64);
  const Sbp S1 = of::sbp::split(1);
  {
    of::Placement pl = of::Placement::all("cpu");
    of::Tensor ag = a.to_global(pl, Bc).to_global(pl, S0),
               cg = c.to_global(pl, Bc).to_global(pl, S0);
    const uint64_t before = issued();
    of::Tensor r = of::cat({ag, cg}, 1);
    CHECK(issued() == before);
    CHECK(r.sbp() == NdSbp{S0});
  }
  check_against_local(
      "cat dim 1",
      [](const auto& v) {
        return of::cat({v[0], v[1]}, 1);
      },
      {a, c}, {S0, S0}, &S0);
  check_against_local("cat dim 0",
                      [](const auto& v) {
                        return of::cat({v[0], v[1].t()}, 0);
                      },
                      {a, of::randn({3, 4}, f64)}, {S0, S1});
  check_against_local(
      "stack",
      [](const auto& v) {
        return of::stack({v[0], v[1]}, 1);
      },
      {a, of::randn({10, 3}, f64)}, {S0, S0}, &S0);
}

TEST_CASE("global rules: view/reshape of split dims (split into several, merged) keep the split") {
  const int p = of::distributed::world_size();
  const Sbp S0 = of::sbp::split(0), S1 = of::sbp::split(1);
  of::manual_seed(41);
  auto f64 = of::dtype(of::kFloat64);
  const of::Tensor a = of::randn({4, 12}, f64), b = of::randn({4, 4, 3}, f64),
                   c = of::randn({8, 3}, f64);
  // [4, 12] S(1) -> [4, 4, 3]: 12 splits into (4, 3), the split moves to the 4 (divisible by 1/2/4)
  check_against_local(
      "split a dim",
      [](const auto& v) {
        return v[0].view({4, 4, 3});
      },
      {a}, {S1}, &S1);
  // [4, 4, 3] S(1) -> [4, 12]: (4, 3) merge, the split of the leading 4 carries over
  check_against_local(
      "merge dims",
      [](const auto& v) {
        return v[0].reshape({4, 12});
      },
      {b}, {S1}, &S1);
  // [8, 3] S(0) -> [2, 4, 3]: the leading factor 2 divides 1 and 2 ranks, not 4; there the
  // cheapest signature takes the split input as a partial sum (a local conversion) instead
  const Sbp Ps = of::sbp::partial_sum();
  check_against_local(
      "split, leading factor",
      [](const auto& v) {
        return v[0].view({2, 4, 3});
      },
      {c}, {S0}, p == 4 ? &Ps : &S0);
  // [4, 4, 3] S(0) -> [48]: everything merges into one dim
  check_against_local(
      "flatten", [](const auto& v) { return v[0].reshape({-1}); }, {b}, {S0}, &S0);
  // the Megatron head split: [B, L, H * D] S(2) -> [B, L, H, D] S(2) (H = 4 heads)
  const of::Tensor q = of::randn({2, 3, 8}, f64);
  check_against_local(
      "heads",
      [](const auto& v) {
        return v[0].view({2, 3, 4, 2});
      },
      {q}, {of::sbp::split(2)}, nullptr);
  {
    of::Placement pl = of::Placement::all("cpu");
    of::Tensor qg = q.to_global(pl, of::sbp::broadcast()).to_global(pl, of::sbp::split(2));
    const uint64_t before = issued();
    of::Tensor h = qg.view({2, 3, 4, 2});
    CHECK(issued() == before);
    CHECK(h.sbp() == NdSbp{of::sbp::split(2)});
  }
}

TEST_CASE("global rules: select / slice / expand keep the splits of the dims they keep") {
  of::Placement pl = of::Placement::all("cpu");
  auto f64 = of::dtype(of::kFloat64);
  of::manual_seed(37);
  of::Tensor x = of::randn({6, 4}, f64).requires_grad_();
  auto fn = [](const of::Tensor& t) {
    of::Tensor a = t.select(1, 2);                    // [6]
    of::Tensor b = t.narrow(1, 1, 2);                 // [6, 2]
    of::Tensor c = t.unsqueeze(1).expand({6, 3, 4});  // [6, 3, 4]
    return std::vector<of::Tensor>{a, b, c};
  };
  std::vector<of::Tensor> ref = fn(x);
  (ref[0].sum() + (ref[1] * ref[1]).sum() + (ref[2] * ref[2]).sum()).backward();
  of::Tensor xg = x.detach()
                      .to_global(pl, of::sbp::broadcast())
                      .to_global(pl, of::sbp::split(0))
                      .requires_grad_();
  const uint64_t c0 = issued();
  std::vector<of::Tensor> got = fn(xg);
  CHECK(issued() == c0);
  CHECK(got[0].sbp() == NdSbp{of::sbp::split(0)});
  CHECK(got[1].sbp() == NdSbp{of::sbp::split(0)});
  CHECK(got[2].sbp() == NdSbp{of::sbp::split(0)});
  for (size_t i = 0; i < 3; ++i) CHECK(max_diff(got[i], ref[i]) == 0);
  (got[0].sum() + (got[1] * got[1]).sum() + (got[2] * got[2]).sum()).backward();
  CHECK(max_diff(xg.grad(), x.grad()) < 1e-12);
  // a selected dim renumbers the split after it; partial sums stay partial
  of::Tensor z = xg.to_global(pl, of::sbp::split(1)).select(0, 3);
  CHECK(z.sbp() == NdSbp{of::sbp::split(0)});
  CHECK(max_diff(z, x.select(0, 3)) == 0);
  of::Tensor s = of::mm(xg.t(), xg);  // S(1) . S(0) -> P
  CHECK(s.sbp() == NdSbp{of::sbp::partial_sum()});
  const uint64_t c1 = issued();
  of::Tensor sn = s.narrow(0, 1, 2);
  CHECK(issued() == c1);
  CHECK(sn.sbp() == NdSbp{of::sbp::partial_sum()});
  CHECK(max_diff(sn, of::mm(x.t(), x).narrow(0, 1, 2)) < 1e-12);
}

TEST_CASE("data parallel MLP: K Adam steps equal one process with the same global batch") {
  // every gradient reduced when accumulated (bucketing off), in buckets of 64 bytes (several
  // per step) and in the default bucket (one per step): NOTE [Bucketed gradient all-reduce]
  for (int64_t cap : {int64_t(0), int64_t(64), int64_t(1) << 20}) {
    CAPTURE(cap);
    of::distributed::set_grad_bucket_bytes(cap);
    of::distributed::reset_grad_reduction_stats();
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
      CHECK(pd[i].grad().sbp() == NdSbp{of::sbp::broadcast()});
      CHECK(max_diff(pd[i], pr[i]) < 1e-12);
    }
    // 4 parameters x 3 steps; buckets only with several ranks
    const auto st = of::distributed::grad_reduction_stats();
    if (p > 1 && cap > 0) {
      CHECK(st.gradients_bucketed == 12);
      CHECK(st.gradients_unbucketed == 0);
      if (cap == 64) CHECK((st.buckets > 3 && st.buckets < 12));  // 24 + 384 + 128 + 768 bytes
      else CHECK(st.buckets == 3);
    } else {
      CHECK(st.gradients_bucketed == 0);
      CHECK(st.gradients_unbucketed == 12);
      CHECK(st.buckets == 0);
    }
  }
  of::distributed::set_grad_bucket_bytes(int64_t(1) << 20);
}

TEST_CASE(
    "data parallel CNN (conv, max/avg pool, adaptive pool, upsample): Adam steps equal "
    "one process; forward and backward issue no collective but the loss' and the buckets'") {
  of::Placement pl = of::Placement::all("cpu");
  namespace nn = of::nn;
  auto make = [] {
    of::manual_seed(5);
    auto m = nn::Sequential(
        nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
        nn::Upsample(
            nn::UpsampleOptions().scale_factor(std::vector<double>{2, 2}).mode(of::kNearest)),
        nn::Conv2d(nn::Conv2dOptions(4, 6, 3).padding(1)), nn::ReLU(), nn::AvgPool2d(2),
        nn::AdaptiveMaxPool2d(2), nn::Flatten(), nn::Linear(24, 5));
    m->to(of::kFloat64);
    return m;
  };
  auto ref = make();
  auto dp = make();
  dp->to_global(pl, of::sbp::broadcast());
  of::optim::Adam opt_ref(ref->parameters(), of::optim::AdamOptions(1e-2));
  of::optim::Adam opt_dp(dp->parameters(), of::optim::AdamOptions(1e-2));
  const int64_t batch = 10;
  const int me = of::distributed::rank(), p = of::distributed::world_size();
  const int64_t base = batch / p, extra = batch % p;
  const int64_t start = me * base + std::min<int64_t>(me, extra), len = base + (me < extra);
  for (int step = 0; step < 2; ++step) {
    of::manual_seed(200 + step);
    of::Tensor x = of::randn({batch, 1, 8, 8}, of::dtype(of::kFloat64));
    of::Tensor t = of::randint(0, 5, {batch}, of::dtype(of::kInt64));
    opt_ref.zero_grad();
    of::Tensor loss_ref = of::nn::functional::cross_entropy(ref->forward(x), t);
    loss_ref.backward();
    opt_ref.step();
    of::Tensor xg = x.narrow(0, start, len).to_global(pl, of::sbp::split(0));
    of::Tensor tg = t.narrow(0, start, len).to_global(pl, of::sbp::split(0));
    opt_dp.zero_grad();
    const uint64_t c0 = issued();
    of::Tensor logits = dp->forward(xg);
    CHECK(logits.sbp() == NdSbp{of::sbp::split(0)});
    CHECK(issued() == c0);  // every layer ran on the local pieces
    of::Tensor loss = of::nn::functional::cross_entropy(logits, tg);
    const uint64_t c1 = issued();
    loss.backward();
    if (p > 1) CHECK(issued() - c1 == 1);  // one bucket: every gradient in 1 MiB
    opt_dp.step();
    CHECK(std::abs(loss.item<double>() - loss_ref.item<double>()) < 1e-12);
  }
  auto pr = ref->parameters(), pd = dp->parameters();
  for (size_t i = 0; i < pr.size(); ++i) {
    CAPTURE(i);
    CHECK(max_diff(pd[i].grad(), pr[i].grad()) < 1e-12);
    CHECK(max_diff(pd[i], pr[i]) < 1e-12);
  }
}

TEST_CASE("global rules: gather / scatter_add along one dim keep the other dims split") {
  of::Placement pl = of::Placement::all("cpu");
  auto f64 = of::dtype(of::kFloat64);
  of::manual_seed(31);
  of::Tensor x = of::randn({6, 5}, f64).requires_grad_();
  of::Tensor idx = of::randint(0, 5, {6, 3}, of::dtype(of::kInt64));
  of::Tensor y = of::gather(x, 1, idx);
  (y * y).sum().backward();
  for (Sbp s : {of::sbp::split(0), of::sbp::broadcast()}) {
    CAPTURE(of::sbp_str(NdSbp{s}));
    of::Tensor xg =
        x.detach().to_global(pl, of::sbp::broadcast()).to_global(pl, s).requires_grad_();
    of::Tensor ig = idx.to_global(pl, of::sbp::broadcast()).to_global(pl, s);
    const uint64_t c0 = issued();
    of::Tensor yg = of::gather(xg, 1, ig);
    CHECK(issued() == c0);
    CHECK(yg.sbp() == NdSbp{s});
    CHECK(max_diff(yg, y) == 0);
    (yg * yg).sum().backward();
    CHECK(max_diff(xg.grad(), x.grad()) < 1e-12);
  }
}

TEST_CASE("pipeline 1F1B: 2 stages x 4 micro-batches equal gradient accumulation in one process") {
  // 1 rank: one stage; 2 ranks: stages {0}, {1}; 4 ranks: stages {0, 1}, {2, 3} (each data
  // parallel inside); odd worlds skip
  const int me = of::distributed::rank(), world = of::distributed::world_size();
  if (world != 1 && world != 2 && world != 4) return;
  const int S = world == 1 ? 1 : 2, K = world == 1 ? 1 : world / 2;  // stages, ranks per stage
  const int64_t M = 4, mb = 2;  // micro-batches, rows per micro-batch per rank
  namespace nn = of::nn;
  auto f64 = of::dtype(of::kFloat64);
  auto make = [] {
    of::manual_seed(41);
    auto a = nn::Sequential(nn::Linear(6, 16), nn::Tanh());
    auto b = nn::Sequential(nn::Linear(16, 3));
    a->to(of::kFloat64);
    b->to(of::kFloat64);
    return std::make_pair(a, b);
  };
  auto [ra, rb] = make();
  auto pab = make();  // named members: clang 14's lambdas capture no structured bindings
  auto& pa = pab.first;
  auto& pb = pab.second;
  of::manual_seed(42);
  const int64_t rows = K * M * mb;
  of::Tensor x = of::randn({rows, 6}, f64);
  of::Tensor t = of::randint(0, 3, {rows}, of::dtype(of::kInt64));
  // reference: micro-batch m holds chunk m of every rank's rows
  for (int64_t m = 0; m < M; ++m) {
    std::vector<of::Tensor> xm, tm;
    for (int k = 0; k < K; ++k) {
      xm.push_back(x.narrow(0, (k * M + m) * mb, mb));
      tm.push_back(t.narrow(0, (k * M + m) * mb, mb));
    }
    of::Tensor l = of::nn::functional::cross_entropy(rb->forward(ra->forward(of::cat(xm, 0))),
                                                     of::cat(tm, 0)) /
                   double(M);
    l.backward();
  }
  std::vector<of::Placement> pls;
  for (int s = 0; s < S; ++s) {
    std::vector<int> r;
    for (int k = 0; k < K; ++k) r.push_back(s * K + k);
    pls.emplace_back("cpu", r);
  }
  // a rank places only its own stage's parameters
  if (me / K == 0) pa->to_global(pls[0], of::sbp::broadcast());
  if (me / K == S - 1) pb->to_global(pls[size_t(S - 1)], of::sbp::broadcast());
  std::vector<of::distributed::Pipeline::Stage> stages;
  if (S == 1) {
    stages.push_back([&](const of::Tensor& v) { return pb->forward(pa->forward(v)); });
  } else {
    stages.push_back([&](const of::Tensor& v) { return pa->forward(v); });
    stages.push_back([&](const of::Tensor& v) { return pb->forward(v); });
  }
  of::distributed::Pipeline pipe(
      stages, pls,
      [](const of::Tensor& out, const of::Tensor& y) {
        return of::nn::functional::cross_entropy(out, y);
      },
      M);
  const int k = me % K;
  of::Tensor xl = x.narrow(0, k * M * mb, M * mb), tl = t.narrow(0, k * M * mb, M * mb);
  of::Tensor loss = pipe.step(xl, tl);
  const int s = pipe.stage();
  CHECK(s == me / K);
  CHECK(pipe.max_in_flight() == std::min<int64_t>(S - s, M));
  if (S == 2 && s == 0) CHECK(pipe.last_schedule() == "F0 F1 B0 F2 B1 F3 B2 B3");
  if (S == 2 && s == 1) CHECK(pipe.last_schedule() == "F0 B0 F1 B1 F2 B2 F3 B3");
  // each rank checks its own stage's parameters (collective over the stage's ranks)
  auto check_params = [](nn::Sequential& got, nn::Sequential& want) {
    auto g = got->parameters(), w = want->parameters();
    for (size_t i = 0; i < g.size(); ++i) {
      CAPTURE(i);
      REQUIRE(g[i].grad().defined());
      CHECK(max_diff(g[i].grad(), w[i].grad()) < 1e-12);
    }
  };
  if (s == 0) check_params(pa, ra);
  if (s == S - 1) {
    check_params(pb, rb);
    CHECK(loss.defined());
  } else {
    CHECK(!loss.defined());
  }
  // errors before anything is sent
  CHECK_THROWS_WITH(of::distributed::Pipeline(stages, {}, nullptr, M),
                    doctest::Contains("one placement per stage"));
  CHECK_THROWS_WITH(
      of::distributed::Pipeline(
          {stages[0]}, {pls[0]}, [](const of::Tensor& o, const of::Tensor&) { return o; }, 0),
      doctest::Contains("micro_batches must be >= 1"));
  if (world > 1)
    CHECK_THROWS_WITH(
        of::distributed::Pipeline({stages[0], stages[0]},
                                  {of::Placement::all("cpu"), of::Placement::all("cpu")},
                                  [](const of::Tensor& o, const of::Tensor&) { return o; }),
        doctest::Contains("disjoint"));
  of::distributed::Pipeline odd(
      {stages[0]}, {of::Placement::all("cpu")},
      [](const of::Tensor& o, const of::Tensor&) { return o; }, 3);
  CHECK_THROWS_WITH(odd.step(of::randn({4, 6}), of::randn({4})),
                    doctest::Contains("does not cut into 3 micro-batches"));
}

TEST_CASE("traced global training steps replay their collectives and equal eager steps") {
  // NOTE [Traced boxing]: data parallel (S(0) batch, broadcast parameters) and tensor parallel
  // (Megatron MLP) Adam steps, eager and traced from the same start; a traced step reduces each
  // gradient on its own, so the eager side does too (bucketing off) for bitwise equality
  of::Placement pl = of::Placement::all("cpu");
  const int me = of::distributed::rank(), p = of::distributed::world_size();
  const Sbp Bc = of::sbp::broadcast(), S0 = of::sbp::split(0), S1 = of::sbp::split(1);
  of::distributed::set_grad_bucket_bytes(0);
  for (bool tensor_parallel : {false, true}) {
    CAPTURE(tensor_parallel);
    auto make = [&] {
      of::manual_seed(3);
      auto m = of::nn::Sequential(of::nn::Linear(6, 8), of::nn::ReLU(), of::nn::Linear(8, 3));
      m->to(of::kFloat64);
      m->to_global(pl, Bc);
      if (tensor_parallel) {
        of::NoGradGuard ng;
        auto ps = m->parameters();
        ps[0].set_data(ps[0].to_global(pl, S0));  // column parallel
        ps[1].set_data(ps[1].to_global(pl, S0));
        ps[2].set_data(ps[2].to_global(pl, S1));  // row parallel
      }
      return m;
    };
    auto eager = make(), traced = make();
    of::optim::Adam opt_e(eager->parameters(), of::optim::AdamOptions(1e-2));
    of::optim::Adam opt_t(traced->parameters(), of::optim::AdamOptions(1e-2));
    auto run = [](of::nn::Sequential& m, of::optim::Adam& o, const of::Tensor& x,
                  const of::Tensor& y) {
      o.zero_grad();
      of::Tensor loss = of::nn::functional::cross_entropy(m->forward(x), y);
      loss.backward();
      o.step();
      return loss;
    };
    auto step = of::jit::trace(
        [&](const of::Tensor& x, const of::Tensor& y) { return run(traced, opt_t, x, y); },
        of::jit::TraceOptions().verbose(std::getenv("OF_TEST_VERBOSE") != nullptr));
    const int64_t batch = 4 * p;
    for (int k = 0; k < 5; ++k) {
      CAPTURE(k);
      of::manual_seed(300 + k);
      of::Tensor x = of::randn({batch, 6}, of::dtype(of::kFloat64));
      of::Tensor t = of::randint(0, 3, {batch}, of::dtype(of::kInt64));
      // data parallel: each rank's rows; tensor parallel: the whole batch on every rank
      const Sbp xs = tensor_parallel ? Bc : S0;
      of::Tensor xg = (tensor_parallel ? x : x.narrow(0, 4 * me, 4)).to_global(pl, xs);
      of::Tensor tg = (tensor_parallel ? t : t.narrow(0, 4 * me, 4)).to_global(pl, xs);
      const uint64_t c0 = issued();
      of::Tensor le = run(eager, opt_e, xg, tg);
      const uint64_t c1 = issued();
      of::Tensor lt = step(xg, tg);
      const uint64_t c2 = issued();
      CHECK(lt.is_global());
      CHECK(lt.sbp() == le.sbp());
      CHECK(max_diff(lt, le) == 0);
      if (k >= 2) CHECK(c2 - c1 == c1 - c0);  // a replay issues the eager step's collectives
    }
    CHECK(step.stats().replays >= 3);
    auto pe = eager->parameters(), pt = traced->parameters();
    for (size_t i = 0; i < pe.size(); ++i) {
      CAPTURE(i);
      CHECK(pt[i].sbp() == pe[i].sbp());
      CHECK(pt[i].grad().sbp() == pe[i].grad().sbp());
      CHECK(max_diff(pt[i], pe[i]) == 0);
      CHECK(max_diff(pt[i].grad(), pe[i].grad()) == 0);
    }
    // a graph that communicates cannot be saved for one process
    CHECK_THROWS_WITH(of::jit::save(step, "/tmp/oneflow_global_step.oftrace"),
                      doctest::Contains("communicates"));
  }
  of::distributed::set_grad_bucket_bytes(int64_t(1) << 20);
  // a local tensor made global inside the traced function: a clear error, nothing cached
  auto bad = of::jit::trace([&](const of::Tensor& x) { return x.to_global(pl, S0).sum(); });
  CHECK_THROWS_WITH(bad(of::randn({2, 3})), doctest::Contains("make the inputs global"));
}

TEST_CASE("to_global compares the ranks' conversions: once per call, at recording when traced") {
  // NOTE [Checked global meta]
  of::Placement pl = of::Placement::all("cpu");
  const int p = of::distributed::world_size();
  const Sbp B = of::sbp::broadcast(), S0 = of::sbp::split(0);
  const of::Tensor x = of::randn({4, 6}, pl, B);
  uint64_t c0 = of::global::meta_checks();
  const of::Tensor s = x.to_global(pl, S0);
  CHECK(of::global::meta_checks() - c0 == (p > 1 ? 1u : 0u));
  // a conversion to what the tensor is compares nothing (a rank may read its value alone)
  c0 = of::global::meta_checks();
  (void)x.to_global(pl, B);
  CHECK(of::global::meta_checks() == c0);
  // local -> global: one comparison
  c0 = of::global::meta_checks();
  (void)of::ones({2, 3}).to_global(pl, S0);
  CHECK(of::global::meta_checks() - c0 == (p > 1 ? 1u : 0u));
  // a traced function compares while it records; replays run the recorded boxing only
  auto f = of::jit::trace([&](const of::Tensor& t) { return t.to_global(pl, B) * 2.0; });
  c0 = of::global::meta_checks();
  (void)f(s);
  const uint64_t recorded = of::global::meta_checks() - c0;
  CHECK(recorded == (p > 1 ? 1u : 0u));
  for (int i = 0; i < 3; ++i) (void)f(s);
  CHECK(f.stats().replays >= 2);
  CHECK(of::global::meta_checks() - c0 == recorded);
  // switched off: no comparison
  of::distributed::set_check_global_meta(false);
  c0 = of::global::meta_checks();
  (void)x.to_global(pl, S0);
  CHECK(of::global::meta_checks() == c0);
  of::distributed::set_check_global_meta(true);
  CHECK(of::distributed::check_global_meta());
}

TEST_CASE("tensor-parallel attention block: heads split over the ranks, equals one process") {
  // NOTE [Attention split by heads]: q, k, v column parallel (weights S(0)) -> [B, L, H*E] S(2)
  // -> [B, H, L, E] S(1) -> causal attention per rank's heads -> out projection row parallel
  // (weight S(1)) -> P -> + residual
  of::Placement pl = of::Placement::all("cpu");
  const int p = of::distributed::world_size();
  if (4 % p != 0) return;  // 4 heads over the ranks
  const Sbp Bc = of::sbp::broadcast(), S0 = of::sbp::split(0), S1 = of::sbp::split(1);
  auto f64 = of::dtype(of::kFloat64);
  const int64_t Bn = 2, L = 5, H = 4, E = 3, D = H * E;
  of::manual_seed(17);
  of::Tensor x = of::randn({Bn, L, D}, f64);
  std::vector<of::Tensor> w;
  for (int i = 0; i < 4; ++i) w.push_back((of::randn({D, D}, f64) * 0.3).requires_grad_());
  of::Tensor bo = of::randn({D}, f64).requires_grad_();
  auto block = [&](const of::Tensor& xin, const std::vector<of::Tensor>& W, const of::Tensor& b) {
    auto heads = [&](const of::Tensor& t) { return t.view({Bn, L, H, E}).permute({0, 2, 1, 3}); };
    of::Tensor q = heads(of::linear(xin, W[0])), k = heads(of::linear(xin, W[1])),
               v = heads(of::linear(xin, W[2]));
    of::Tensor a = of::nn::functional::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    return xin + of::linear(a.permute({0, 2, 1, 3}).reshape({Bn, L, D}), W[3], b);
  };
  of::Tensor ref = block(x, w, bo);
  (ref * ref).sum().backward();
  auto put = [&](const of::Tensor& t, Sbp s) {
    return t.detach().to_global(pl, Bc).to_global(pl, s).requires_grad_();
  };
  std::vector<of::Tensor> wg{put(w[0], S0), put(w[1], S0), put(w[2], S0), put(w[3], S1)};
  of::Tensor bg = put(bo, Bc), xg = x.to_global(pl, Bc);
  const uint64_t c0 = issued();
  of::Tensor y = block(xg, wg, bg);
  if (p > 1) {
    // no communication at all: the residual joins the row-parallel partial sum (B -> P is
    // local), so the block's output is P and its reduction waits for whoever needs it
    CHECK(issued() - c0 == 0);
    CHECK(y.sbp() == NdSbp{of::sbp::partial_sum()});
  }
  CHECK(max_diff(y, ref) < 1e-12);
  (y * y).sum().backward();
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(wg[i].grad().sbp() == wg[i].sbp());
    CHECK(max_diff(wg[i].grad(), w[i].grad()) < 1e-12);
  }
  CHECK(max_diff(bg.grad(), bo.grad()) < 1e-12);
}

TEST_CASE("attention split by heads with dropout: each piece keeps one process' elements") {
  // NOTE [Attention draw map]: q, k, v [B, H, L, E] split on heads (3 heads: uneven on 2 and 4
  // ranks), on the batch, and on a 2 x 2 mesh on both; the dropout draws of every piece are
  // the single process' draws at its batches, forward and backward, with no communication
  const int p = of::distributed::world_size();
  const Sbp Bc = of::sbp::broadcast(), S0 = of::sbp::split(0), S1 = of::sbp::split(1);
  auto f64 = of::dtype(of::kFloat64);
  of::manual_seed(31);
  std::vector<of::Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(of::randn({2, 3, 4, 5}, f64).requires_grad_());
  const of::Tensor mask = of::rand({4, 4}) > 0.2;  // local, broadcasts over the batch dims
  auto check = [&](const of::Placement& pl, const NdSbp& s, bool with_mask) {
    CAPTURE(pl.str());
    CAPTURE(with_mask);
    for (auto& t : qkv) t.mutable_grad() = of::Tensor();
    const of::Tensor m = with_mask ? mask : of::Tensor();
    of::manual_seed(77);
    const of::Tensor ref =
        of::nn::functional::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], m, 0.4);
    (ref * ref).sum().backward();
    std::vector<of::Tensor> g;
    for (auto& t : qkv)
      g.push_back(t.detach().to_global(pl, NdSbp(s.size(), Bc)).to_global(pl, s).requires_grad_());
    of::manual_seed(77);
    const uint64_t c0 = issued();
    const of::Tensor y = of::nn::functional::scaled_dot_product_attention(g[0], g[1], g[2], m, 0.4);
    CHECK(issued() - c0 == 0);
    CHECK(y.sbp() == s);
    // the generator moved on as in one process
    const double next_here = of::rand({1}).item<double>();
    of::manual_seed(77);
    (void)of::nn::functional::scaled_dot_product_attention(qkv[0].detach(), qkv[1].detach(),
                                                           qkv[2].detach(), m, 0.4);
    CHECK(next_here == of::rand({1}).item<double>());
    CHECK(max_diff(y, ref) < 1e-12);
    (y * y).sum().backward();
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(g[i].grad().sbp() == s);
      CHECK(max_diff(g[i].grad(), qkv[i].grad()) < 1e-12);
    }
  };
  const of::Placement all = of::Placement::all("cpu");
  for (bool with_mask : {false, true}) {
    check(all, {S1}, with_mask);
    check(all, {S0}, with_mask);
  }
  if (p == 4) {
    const of::Placement mesh("cpu", {{0, 1}, {2, 3}});
    check(mesh, {S0, S1}, false);
    check(mesh, {S1, S0}, true);
  }
}

TEST_CASE("data-parallel embedding and index_select: split indices, partial-sum weight gradients") {
  of::Placement pl = of::Placement::all("cpu");
  const int me = of::distributed::rank(), p = of::distributed::world_size();
  auto f64 = of::dtype(of::kFloat64);
  of::manual_seed(23);
  of::Tensor w = of::randn({7, 3}, f64).requires_grad_();
  of::Tensor idx = of::randint(0, 7, {2 * p, 3}, of::dtype(of::kInt64));
  of::Tensor e = of::nn::functional::embedding(idx, w);
  of::Tensor s = w.index_select(0, idx.select(1, 0));
  ((e * e).sum() + (s * s).sum()).backward();
  of::Tensor wg = w.detach().to_global(pl, of::sbp::broadcast()).requires_grad_();
  of::Tensor ig = idx.narrow(0, 2 * me, 2).to_global(pl, of::sbp::split(0));
  of::Tensor eg = of::nn::functional::embedding(ig, wg);
  of::Tensor i1 =
      idx.select(1, 0).narrow(0, 2 * me, 2).contiguous().to_global(pl, of::sbp::split(0));
  of::Tensor sg = wg.index_select(0, i1);
  CHECK(eg.sbp() == NdSbp{of::sbp::split(0)});
  CHECK(sg.sbp() == NdSbp{of::sbp::split(0)});
  of::Tensor loss = (eg * eg).sum() + (sg * sg).sum();
  const uint64_t c0 = issued();
  loss.backward();
  if (p > 1) CHECK(issued() - c0 == 1);  // the partial-sum gradient's bucket, no gather
  CHECK(max_diff(eg, e) == 0);
  CHECK(max_diff(wg.grad(), w.grad()) < 1e-12);
}

TEST_CASE(
    "bucketed gradient reduction: accumulation over two backward passes, create_graph, "
    "a backward that fails") {
  of::Placement pl = of::Placement::all("cpu");
  const int me = of::distributed::rank(), p = of::distributed::world_size();
  auto f64 = of::dtype(of::kFloat64);
  of::manual_seed(21);
  of::Tensor x = of::randn({2 * p, 5}, f64), w = of::randn({5, 3}, f64);
  of::Tensor wr = w.clone().requires_grad_();
  of::Tensor ref_loss = (of::mm(x, wr) * of::mm(x, wr)).sum();
  ref_loss.backward();
  of::Tensor ref = wr.grad().clone();
  of::Tensor wg = w.to_global(pl, of::sbp::broadcast()).detach().requires_grad_();
  of::Tensor xg = x.narrow(0, 2 * me, 2).to_global(pl, of::sbp::split(0));
  auto loss_of = [&] {
    of::Tensor y = of::mm(xg, wg);
    return (y * y).sum();
  };
  const uint64_t c0 = issued();
  loss_of().backward();
  if (p > 1) CHECK(issued() - c0 == 1);  // backward's one collective: the gradient's bucket
  CHECK(wg.grad().sbp() == NdSbp{of::sbp::broadcast()});
  CHECK(max_diff(wg.grad(), ref) < 1e-12);
  loss_of().backward();  // accumulates into the existing .grad
  CHECK(max_diff(wg.grad(), ref * 2) < 1e-12);
  // create_graph: reduced at once (a differentiable boxing), the gradient has a graph
  wg.mutable_grad() = of::Tensor();
  loss_of().backward({}, true, true);
  CHECK(wg.grad().requires_grad());
  CHECK(max_diff(wg.grad(), ref) < 1e-12);
  // an exception in the middle of backward, after a bucket started (buckets of 8 bytes),
  // leaves .grad unset and every rank usable
  wg.mutable_grad() = of::Tensor();
  of::distributed::set_grad_bucket_bytes(8);
  {
    of::Tensor u = of::randn({3}, pl, of::sbp::broadcast(), f64).requires_grad_();
    of::Tensor v = FailingBackward::apply(u);  // earlier: its backward runs after mm's
    of::Tensor y = of::mm(xg, wg);
    of::Tensor z = (y * y).sum() + v.sum();
    CHECK_THROWS_WITH(z.backward(), doctest::Contains("backward failed on purpose"));
  }
  of::distributed::set_grad_bucket_bytes(int64_t(1) << 20);
  CHECK(!wg.grad().defined());
  loss_of().backward();
  CHECK(max_diff(wg.grad(), ref) < 1e-12);
}

TEST_CASE("hybrid 2x2 (data x tensor) Megatron MLP: equals one process, reductions per axis") {
  if (of::distributed::world_size() != 4) return;
  for (int64_t cap : {int64_t(0), int64_t(1) << 20}) {
    CAPTURE(cap);
    of::distributed::set_grad_bucket_bytes(cap);
    // mesh axis 0: data parallel (ranks {0, 2} and {1, 3} hold the same weight pieces);
    // mesh axis 1: tensor parallel (ranks {0, 1} and {2, 3} split the weights)
    of::Placement pl("cpu", {{0, 1}, {2, 3}});
    const Sbp S0 = of::sbp::split(0), S1 = of::sbp::split(1), Bc = of::sbp::broadcast();
    of::manual_seed(13);
    auto f64 = of::dtype(of::kFloat64);
    of::Tensor x = of::randn({8, 6}, f64);
    of::Tensor w1 = of::randn({16, 6}, f64), b1 = of::randn({16}, f64);
    of::Tensor w2 = of::randn({6, 16}, f64), b2 = of::randn({6}, f64);
    std::vector<of::Tensor> ref{w1, b1, w2, b2};
    for (auto& t : ref) t = t.clone().requires_grad_();
    of::Tensor yl = of::linear(of::relu(of::linear(x, ref[0], ref[1])), ref[2], ref[3]);
    (yl * yl).sum().backward();
    const NdSbp whole{Bc, Bc};
    auto put = [&](const of::Tensor& t, NdSbp sbp) {
      return t.to_global(pl, whole).to_global(pl, sbp).detach().requires_grad_();
    };
    of::Tensor xg = x.to_global(pl, whole).to_global(pl, NdSbp{S0, Bc});  // batch over data axis
    std::vector<of::Tensor> g{put(w1, {Bc, S0}), put(b1, {Bc, S0}), put(w2, {Bc, S1}),
                              put(b2, whole)};
    const uint64_t c0 = issued();
    of::Tensor y = of::linear(of::relu(of::linear(xg, g[0], g[1])), g[2], g[3]);
    CHECK(y.sbp() == (NdSbp{S0, of::sbp::partial_sum()}));
    of::Tensor yb = y.to_global(pl, NdSbp{S0, Bc});  // the row-parallel sum: tensor-axis groups
    const uint64_t c1 = issued();
    CHECK(c1 - c0 == 1);
    (yb * yb).sum().backward();
    // one all-reduce per weight over its data-axis group, nothing else; bucketed: the four
    // gradients share that group and go in one bucket
    CHECK(issued() - c1 == (cap == 0 ? 4u : 1u));
    CHECK(max_diff(yb, yl) < 1e-12);
    for (size_t i = 0; i < g.size(); ++i) {
      CAPTURE(i);
      CHECK(g[i].grad().sbp() == g[i].sbp());
      CHECK(max_diff(g[i].grad(), ref[i].grad()) < 1e-12);
    }
  }
  of::distributed::set_grad_bucket_bytes(int64_t(1) << 20);
}

TEST_CASE("ZeRO: split Adam state equals plain data parallel, state bytes <= ceil(total / ranks)") {
  of::Placement pl = of::Placement::all("cpu");
  const int p = of::distributed::world_size();
  auto make = [] {
    of::manual_seed(4);
    auto m = of::nn::Sequential(of::nn::Linear(6, 9), of::nn::Tanh(), of::nn::Linear(9, 3));
    m->to(of::kFloat64);
    return m;
  };
  auto plain = make(), zero = make();
  plain->to_global(pl, of::sbp::broadcast());
  zero->to_global(pl, of::sbp::broadcast());
  of::optim::Adam opt_plain(plain->parameters(), of::optim::AdamOptions(1e-2).weight_decay(0.01));
  of::distributed::ZeroRedundancyAdam opt_zero(zero->parameters(),
                                               of::optim::AdamOptions(1e-2).weight_decay(0.01));
  for (int step = 0; step < 3; ++step) {
    of::manual_seed(200 + step);
    of::Tensor x = of::randn({10, 6}, pl, of::sbp::split(0), of::dtype(of::kFloat64));
    of::Tensor t = of::randint(0, 3, {10}, of::dtype(of::kInt64))
                       .to_global(pl, of::sbp::broadcast())
                       .to_global(pl, of::sbp::split(0));
    opt_plain.zero_grad();
    const uint64_t a0 = issued();
    of::nn::functional::cross_entropy(plain->forward(x), t).backward();
    const uint64_t plain_bwd = issued() - a0;
    opt_plain.step();
    opt_zero.zero_grad();
    const uint64_t b0 = issued();
    of::nn::functional::cross_entropy(zero->forward(x), t).backward();
    const uint64_t zero_bwd = issued() - b0;
    // NOTE [ZeRO]: the gradients stay partial sums (backward reduces none of them: plain data
    // parallel's one bucket all-reduce is not issued), read as the summed gradient; the step
    // reduce-scatters them at once and all-gathers the update
    for (const auto& q : zero->parameters()) CHECK(q.grad().sbp() == NdSbp{of::sbp::partial_sum()});
    if (p > 1) CHECK(zero_bwd + 1 == plain_bwd);
    auto pa = plain->parameters(), pz = zero->parameters();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(max_diff(pz[i].grad(), pa[i].grad()) < 1e-12);
    const uint64_t s0 = issued();
    opt_zero.step();
    if (p > 1) CHECK(issued() - s0 == 2);  // one reduce-scatter, one all-gather
  }
  auto a = plain->parameters(), b = zero->parameters();
  int64_t total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(b[i].sbp() == NdSbp{of::sbp::broadcast()});
    CHECK(max_diff(a[i], b[i]) < 1e-12);
    total += a[i].numel();
  }
  // two moments of ceil(total / p) float64 elements at most
  const int64_t bound = 2 * ((total + p - 1) / p) * 8;
  CHECK(opt_zero.local_state_bytes() <= bound);
  CHECK(opt_zero.local_state_bytes() >= 2 * (total / p) * 8);
  // local or split parameters: a clear error before any update
  auto local = make();
  of::distributed::ZeroRedundancyAdam bad(local->parameters());
  of::nn::functional::mse_loss(local->forward(of::randn({2, 6}, of::dtype(of::kFloat64))),
                               of::zeros({2, 3}, of::dtype(of::kFloat64)))
      .backward();
  CHECK_THROWS_WITH_AS(bad.step(), doctest::Contains("is a local tensor"), of::Error);
}

TEST_CASE("tensor parallel (Megatron) MLP: one all-reduce forward, one backward") {
  of::Placement pl = of::Placement::all("cpu");
  of::manual_seed(9);
  of::Tensor x = of::randn({8, 6}, of::dtype(of::kFloat64));
  of::Tensor w1 = of::randn({16, 6}, of::dtype(of::kFloat64)),
             b1 = of::randn({16}, of::dtype(of::kFloat64));
  of::Tensor w2 = of::randn({6, 16}, of::dtype(of::kFloat64)),
             b2 = of::randn({6}, of::dtype(of::kFloat64));
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
  if (parallel)
    CHECK(issued() - c1 == 1);  // the gradient of x (P -> B); the weights' arrive in their SBPs
  CHECK(max_diff(yb, yl) < 1e-12);
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    CHECK(g[i].grad().sbp() == g[i].sbp());
    CHECK(max_diff(g[i].grad(), ref[i].grad()) < 1e-12);
  }
}

namespace {
NdSbp all_b(const of::Placement& pl) { return NdSbp(size_t(pl.ndim()), of::sbp::broadcast()); }
// The logical value of t on the ranks of its placement (an undefined tensor elsewhere, where t
// is a handle).
of::Tensor value_here(const of::Tensor& t) {
  of::Tensor w = t.to_global(t.placement(), all_b(t.placement())).to_local();
  return t.placement().contains(of::distributed::rank()) ? w : of::Tensor();
}
}  // namespace

TEST_CASE("to_global between placements: values, gradients, handles on the other ranks") {
  const int p = of::distributed::world_size(), me = of::distributed::rank();
  of::manual_seed(3);
  const of::Tensor x = of::randn({5, 6}, of::dtype(of::kFloat64));
  const of::Tensor w = of::arange(30, of::kFloat64).reshape({5, 6});
  if (p == 1) {
    CHECK_THROWS_WITH_AS(x.to_global(of::Placement("cpu", {0}), of::sbp::broadcast())
                             .to_global(of::Placement("cpu", {1}), of::sbp::broadcast()),
                         doctest::Contains("the world has 1"), of::Error);
    return;
  }
  struct Case {
    of::Placement src;
    NdSbp from;
    of::Placement dst;
    NdSbp to;
  };
  const Sbp B = of::sbp::broadcast(), P = of::sbp::partial_sum();
  std::vector<Case> cases = {
      {of::Placement("cpu", {0}), {B}, of::Placement("cpu", {1}), {of::sbp::split(0)}},
      {of::Placement("cpu", {0, 1}), {of::sbp::split(1)}, of::Placement("cpu", {1}), {B}},
      {of::Placement("cpu", {0, 1}), {P}, of::Placement("cpu", {0}), {B}},
      {of::Placement("cpu", {1}), {of::sbp::split(0)}, of::Placement("cpu", {0, 1}), {P}},
  };
  if (p == 4) {
    const of::Placement mesh("cpu", {{0, 1}, {2, 3}});
    cases.push_back({of::Placement("cpu", {0, 1}),
                     {of::sbp::split(0)},
                     of::Placement("cpu", {2, 3}),
                     {of::sbp::split(1)}});
    cases.push_back(
        {mesh, {of::sbp::split(0), of::sbp::split(1)}, of::Placement("cpu", {1, 2}), {P}});
    cases.push_back({of::Placement("cpu", {0, 1, 2}),
                     {of::sbp::split(1)},
                     of::Placement("cpu", {1, 2, 3}),
                     {of::sbp::split(0)}});
    cases.push_back({of::Placement("cpu", {3}), {B}, mesh, {B, of::sbp::split(0)}});
    cases.push_back({of::Placement("cpu", {0, 1, 2, 3}), {P}, of::Placement("cpu", {2}), {B}});
    cases.push_back({of::Placement("cpu", {2, 3}),
                     {of::sbp::split(0)},
                     of::Placement("cpu", {0, 1}),
                     {of::sbp::split(0)}});
  }
  for (const Case& c : cases) {
    CAPTURE(c.src.str());
    CAPTURE(of::sbp_str(c.from));
    CAPTURE(c.dst.str());
    CAPTURE(of::sbp_str(c.to));
    of::Tensor leaf =
        x.to_global(c.src, all_b(c.src)).to_global(c.src, c.from).detach().requires_grad_();
    of::Tensor y = leaf.to_global(c.dst, c.to);
    CHECK(y.placement() == c.dst);
    CHECK(y.sbp() == c.to);
    CHECK(y.sizes() == x.sizes());
    const of::Tensor v = value_here(y);
    if (c.dst.contains(me)) {
      CHECK(max_diff(v, x) < 1e-15);
    } else {
      // a handle: no piece here, and reading its value is a clear error
      CHECK(y.to_local().numel() == 0);
      CHECK_THROWS_WITH_AS(y.sum().item<double>(), doctest::Contains("holds no piece"), of::Error);
    }
    // the gradient moves back: d sum(y * w) / d leaf = w, on the source's ranks
    (y * w.to_global(c.dst, all_b(c.dst))).sum().backward();
    REQUIRE(leaf.grad().defined());
    CHECK(leaf.grad().placement() == c.src);
    const of::Tensor gv = value_here(leaf.grad());
    if (c.src.contains(me)) CHECK(max_diff(gv, w) < 1e-15);
  }
  // a placement naming a rank beyond the world is refused
  CHECK_THROWS_WITH_AS(
      x.to_global(of::Placement("cpu", {0}), B).to_global(of::Placement("cpu", {0, p}), B),
      doctest::Contains("the world has"), of::Error);
}

TEST_CASE(
    "two stages on disjoint placements (activations moved with to_global), Adam, equal one "
    "process") {
  const int p = of::distributed::world_size(), me = of::distributed::rank();
  if (p == 1) return;  // needs two placements
  // stage 0 on the first half of the ranks, stage 1 on the second; data parallel within each
  std::vector<int> r0, r1;
  for (int r = 0; r < p; ++r) (r < p / 2 ? r0 : r1).push_back(r);
  const of::Placement s0("cpu", r0), s1("cpu", r1);
  of::manual_seed(21);
  const of::Tensor x = of::randn({6, 5}, of::dtype(of::kFloat64));
  const of::Tensor w0 = of::randn({7, 5}, of::dtype(of::kFloat64)),
                   w1 = of::randn({3, 7}, of::dtype(of::kFloat64));
  // one process
  of::Tensor lw0 = w0.clone().requires_grad_(), lw1 = w1.clone().requires_grad_();
  of::optim::Adam lopt({lw0, lw1}, of::optim::AdamOptions(0.05));
  std::vector<double> ref_loss;
  for (int step = 0; step < 3; ++step) {
    lopt.zero_grad();
    of::Tensor loss = of::linear(of::tanh(of::linear(x, lw0)), lw1).pow(2).mean();
    ref_loss.push_back(loss.item<double>());
    loss.backward();
    lopt.step();
  }
  // two stages: every rank runs the same program; a rank holds pieces of its stage's tensors
  of::Tensor gw0 = w0.to_global(s0, of::sbp::broadcast()).detach().requires_grad_();
  of::Tensor gw1 = w1.to_global(s1, of::sbp::broadcast()).detach().requires_grad_();
  const of::Tensor gx = x.to_global(s0, of::sbp::broadcast()).to_global(s0, of::sbp::split(0));
  // the same Adam on every rank: a rank updates the stage it holds and steps handles for the
  // other stage (its state is handles too)
  of::optim::Adam gopt({gw0, gw1}, of::optim::AdamOptions(0.05));
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    gopt.zero_grad();
    of::Tensor h = of::tanh(of::linear(gx, gw0)).to_global(s1, of::sbp::split(0));
    of::Tensor loss = of::linear(h, gw1).pow(2).mean();
    CHECK(loss.placement() == s1);
    if (s1.contains(me)) CHECK(std::abs(loss.item<double>() - ref_loss[size_t(step)]) < 1e-12);
    loss.backward();
    gopt.step();
  }
  const of::Tensor v0 = value_here(gw0), v1 = value_here(gw1);
  if (s0.contains(me)) CHECK(max_diff(v0, lw0.detach()) < 1e-12);
  if (s1.contains(me)) CHECK(max_diff(v1, lw1.detach()) < 1e-12);
  CHECK(gw0.placement() == s0);
  CHECK(gw1.placement() == s1);
}

TEST_CASE(
    "a traced two-stage step (moves between placements inside the trace) replays equal to eager") {
  const int p = of::distributed::world_size();
  if (p == 1) return;  // needs two placements
  // NOTE [Moving between placements], traced: each rank of the source or the target records a
  // move_pieces node (a source-only rank's node is kept though nothing reads its output there);
  // a rank in neither records no node for the stages at all
  std::vector<int> half0, half1;
  for (int r = 0; r < p; ++r) (r < p / 2 ? half0 : half1).push_back(r);
  std::vector<std::pair<std::vector<int>, std::vector<int>>> cases{{half0, half1}};
  if (p == 4) cases.push_back({{2}, {0, 1}});  // rank 3 in neither placement
  for (const auto& [r0, r1] : cases) {
    const of::Placement s0("cpu", r0), s1("cpu", r1);
    CAPTURE(s0.str());
    CAPTURE(s1.str());
    const Sbp Bc = of::sbp::broadcast(), S0 = of::sbp::split(0);
    of::distributed::set_grad_bucket_bytes(0);  // the traced step reduces each gradient alone
    of::manual_seed(22);
    const of::Tensor w0 = of::randn({7, 5}, of::dtype(of::kFloat64)),
                     w1 = of::randn({3, 7}, of::dtype(of::kFloat64));
    auto params = [&] {
      // (a broadcast piece shares the local tensor's storage: clone, or both copies are one)
      return std::vector<of::Tensor>{w0.clone().to_global(s0, Bc).detach().requires_grad_(),
                                     w1.clone().to_global(s1, Bc).detach().requires_grad_()};
    };
    std::vector<of::Tensor> pe = params(), pt = params();
    of::optim::Adam opt_e(pe, of::optim::AdamOptions(0.05)),
        opt_t(pt, of::optim::AdamOptions(0.05));
    // the batch split on stage 0, the activations moved to stage 1 split, and back for backward;
    // the loss lives on stage 1 (a handle on stage 0's ranks)
    auto run = [&](std::vector<of::Tensor>& w, of::optim::Adam& o, const of::Tensor& x) {
      o.zero_grad();
      of::Tensor h = of::tanh(of::linear(x, w[0])).to_global(s1, S0);
      of::Tensor loss = of::linear(h, w[1]).pow(2).mean();
      loss.backward();
      o.step();
      return loss;
    };
    auto step =
        of::jit::trace([&](const of::Tensor& x) { return run(pt, opt_t, x); },
                       of::jit::TraceOptions().verbose(std::getenv("OF_TEST_VERBOSE") != nullptr));
    for (int k = 0; k < 5; ++k) {
      CAPTURE(k);
      of::manual_seed(400 + k);
      const of::Tensor x =
          of::randn({6, 5}, of::dtype(of::kFloat64)).to_global(s0, Bc).to_global(s0, S0);
      const uint64_t c0 = issued();
      const of::Tensor le = run(pe, opt_e, x);
      const uint64_t c1 = issued();
      const of::Tensor lt = step(x);
      const uint64_t c2 = issued();
      CHECK(lt.placement() == s1);
      CHECK(lt.sbp() == le.sbp());
      CHECK(max_diff(lt.to_local(), le.to_local()) == 0);
      if (k >= 2) CHECK(c2 - c1 == c1 - c0);
      for (size_t i = 0; i < pe.size(); ++i) {
        CAPTURE(i);
        CHECK(pt[i].placement() == pe[i].placement());
        CHECK(max_diff(pt[i].to_local(), pe[i].to_local()) == 0);
        CHECK(max_diff(pt[i].grad().to_local(), pe[i].grad().to_local()) == 0);
      }
    }
    CHECK(step.stats().replays >= 3);
    // a rank of either stage: the graph shows the moves; it cannot be saved (it communicates)
    const int me = of::distributed::rank();
    if (s0.contains(me) || s1.contains(me)) {
      CHECK(step.graph().find("move_pieces") != std::string::npos);
      CHECK_THROWS_WITH(of::jit::save(step, "/tmp/oneflow_two_stage.oftrace"),
                        doctest::Contains("communicates"));
    }
  }
  of::distributed::set_grad_bucket_bytes(int64_t(1) << 20);
}

TEST_CASE(
    "batch norm on a split batch is synchronized (two small all-reduces), on split channels "
    "local") {
  const of::Placement pl = of::Placement::all("cpu");
  const bool parallel = of::distributed::world_size() > 1;
  of::manual_seed(31);
  const of::Tensor x = of::randn({8, 3, 5}, of::dtype(of::kFloat64));
  const of::Tensor w = of::randn({3}, of::dtype(of::kFloat64)),
                   b = of::randn({3}, of::dtype(of::kFloat64));
  const of::Tensor gout = of::randn({8, 3, 5}, of::dtype(of::kFloat64));
  for (Sbp xs : {of::sbp::split(0), of::sbp::split(2), of::sbp::split(1)}) {
    CAPTURE(xs.str());
    of::Tensor lx = x.clone().requires_grad_(), lw = w.clone().requires_grad_(),
               lb = b.clone().requires_grad_();
    of::Tensor lrm = of::zeros({3}, of::kFloat64), lrv = of::ones({3}, of::kFloat64);
    of::Tensor ly = of::batch_norm(lx, lw, lb, lrm, lrv, true, 0.1, 1e-5);
    ly.backward(gout);
    of::Tensor gx =
        x.to_global(pl, of::sbp::broadcast()).to_global(pl, xs).detach().requires_grad_();
    of::Tensor gw = w.to_global(pl, of::sbp::broadcast()).detach().requires_grad_();
    of::Tensor gb = b.to_global(pl, of::sbp::broadcast()).detach().requires_grad_();
    // the running statistics split like the channels when the channels are split (tensor
    // parallel), else broadcast
    const Sbp ss = xs == of::sbp::split(1) ? of::sbp::split(0) : of::sbp::broadcast();
    of::Tensor grm = of::zeros({3}, pl, ss, of::dtype(of::kFloat64));
    of::Tensor grv = of::ones({3}, pl, ss, of::dtype(of::kFloat64));
    const uint64_t c0 = issued();
    of::Tensor gy = of::batch_norm(gx, gw, gb, grm, grv, true, 0.1, 1e-5);
    const uint64_t forward = issued() - c0;
    if (parallel) CHECK(gy.sbp() == NdSbp{xs});  // the activations stay where they are
    // split samples: the mean's and the variance's all-reduce; split channels: none
    if (parallel) CHECK(forward == (xs == of::sbp::split(1) ? 0u : 2u));
    gy.backward(gout.to_global(pl, of::sbp::broadcast()).to_global(pl, xs));
    CHECK(max_diff(gy, ly) < 1e-12);
    CHECK(max_diff(gx.grad(), lx.grad()) < 1e-12);
    CHECK(max_diff(gw.grad(), lw.grad()) < 1e-12);
    CHECK(max_diff(gb.grad(), lb.grad()) < 1e-12);
    CHECK(max_diff(grm, lrm) < 1e-12);
    CHECK(max_diff(grv, lrv) < 1e-12);
  }
}

TEST_CASE("errors come before any collective and are the same on every rank") {
  of::Placement pl = of::Placement::all("cpu");
  of::Tensor a = of::zeros({4, 3}, pl, of::sbp::split(0));
  CHECK_THROWS_WITH_AS(a.to_global(pl, of::sbp::split(2)), doctest::Contains("splits dim 2"),
                       of::Error);
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

// ---------------------------------------------------------------- c10d process groups

namespace {

std::vector<double> values(const of::Tensor& t) { return t.to_vector<double>(); }
std::vector<double> filled(size_t n, double v) { return std::vector<double>(n, v); }
double factorial(int n) { return n <= 1 ? 1.0 : n * factorial(n - 1); }

}  // namespace

TEST_CASE("c10d: collectives over the world equal the expected values, on float32/float64/int64") {
  auto pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
  const int p = pg->getSize(), me = pg->getRank();
  CHECK(p == of::distributed::world_size());
  CHECK(me == of::distributed::rank());
  const double sum_ranks = p * (p - 1) / 2.0;
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64, of::kInt64}) {
    CAPTURE(of::dtype_name(dt));
    const auto o = of::dtype(dt);
    std::vector<of::Tensor> t{of::full({3, 2}, me + 1, o)};
    c10::intrusive_ptr<c10d::Work> w = pg->allreduce(t);
    CHECK(w->wait());
    CHECK(w->isCompleted());
    CHECK(values(t[0]) == filled(6, sum_ranks + p));
    CHECK(t[0].dtype() == dt);
    for (auto [op, expect] :
         {std::pair{c10d::ReduceOp::MIN, 1.0}, std::pair{c10d::ReduceOp::MAX, double(p)},
          std::pair{c10d::ReduceOp::PRODUCT, factorial(p)}}) {
      t[0].fill_(me + 1);
      c10d::AllreduceOptions opts;
      opts.reduceOp = op;
      pg->allreduce(t, opts)->wait();
      CHECK(values(t[0]) == filled(6, expect));
    }
    // allgather: outputs[0][q] is rank q's input
    std::vector<of::Tensor> in{of::full({2}, 10 * me, o)};
    std::vector<std::vector<of::Tensor>> out(1);
    for (int q = 0; q < p; ++q) out[0].push_back(of::zeros({2}, o));
    pg->allgather(out, in)->wait();
    for (int q = 0; q < p; ++q) CHECK(values(out[0][size_t(q)]) == filled(2, 10.0 * q));
    // broadcast from the last rank
    std::vector<of::Tensor> b{of::full({4}, me, o)};
    c10d::BroadcastOptions bo;
    bo.rootRank = p - 1;
    pg->broadcast(b, bo)->wait();
    CHECK(values(b[0]) == filled(4, p - 1));
    // reduce_scatter: rank r contributes r + q to block q; this rank gets the sum of block me
    std::vector<of::Tensor> mine{of::zeros({2, 2}, o)};
    std::vector<std::vector<of::Tensor>> blocks(1);
    for (int q = 0; q < p; ++q) blocks[0].push_back(of::full({2, 2}, me + q, o));
    pg->reduce_scatter(mine, blocks)->wait();
    CHECK(values(mine[0]) == filled(4, sum_ranks + double(p) * me));
    // reduce to rank 0: the others keep their values
    std::vector<of::Tensor> r{of::full({2}, me + 1, o)};
    pg->reduce(r)->wait();
    CHECK(values(r[0]) == filled(2, me == 0 ? sum_ranks + p : me + 1));
    CHECK(pg->barrier()->wait());
  }
  // float16 sums go through float32 and keep the dtype
  std::vector<of::Tensor> h{of::full({5}, 1.5, of::dtype(of::kFloat16))};
  pg->allreduce(h)->wait();
  CHECK(h[0].dtype() == of::kFloat16);
  CHECK(values(h[0]) == filled(5, 1.5 * p));
  // gather / scatter / alltoall with root 0
  std::vector<of::Tensor> g_in{of::full({3}, double(me))};
  std::vector<std::vector<of::Tensor>> g_out;
  if (me == 0) {
    g_out.emplace_back();
    for (int q = 0; q < p; ++q) g_out[0].push_back(of::zeros({3}));
  }
  pg->gather(g_out, g_in)->wait();
  if (me == 0)
    for (int q = 0; q < p; ++q) CHECK(values(g_out[0][size_t(q)]) == filled(3, q));
  std::vector<of::Tensor> s_out{of::zeros({2})};
  std::vector<std::vector<of::Tensor>> s_in;
  if (me == 0) {
    s_in.emplace_back();
    for (int q = 0; q < p; ++q) s_in[0].push_back(of::full({2}, 100.0 + q));
  }
  pg->scatter(s_out, s_in)->wait();
  CHECK(values(s_out[0]) == filled(2, 100 + me));
  std::vector<of::Tensor> a_in, a_out;
  for (int q = 0; q < p; ++q) {
    a_in.push_back(of::full({q + 1}, 10.0 * me + q));  // q + 1 values to rank q
    a_out.push_back(of::zeros({me + 1}));              // me + 1 values from every rank
  }
  pg->alltoall(a_out, a_in)->wait();
  for (int q = 0; q < p; ++q)
    CHECK(values(a_out[size_t(q)]) == filled(size_t(me + 1), 10 * q + me));
  // a sub-group of ranks 0 and 1: the others get a null group and take no part
  if (p >= 2) {
    auto sub = c10d::ProcessGroupMPI::createProcessGroupMPI({0, 1});
    CHECK((sub != nullptr) == (me < 2));
    if (sub) {
      CHECK(sub->getSize() == 2);
      CHECK(sub->getRank() == me);
      std::vector<of::Tensor> t{of::full({2}, me + 1.0)};
      sub->allreduce(t)->wait();
      CHECK(values(t[0]) == filled(2, 3));
    }
  }
}

TEST_CASE("c10d: DDP by hand (all-reduce the gradients, divide by the world) equals one process") {
  auto pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
  const int p = pg->getSize(), me = pg->getRank();
  auto make = [](uint64_t seed) {
    of::manual_seed(seed);
    auto m = of::nn::Sequential(of::nn::Linear(5, 12), of::nn::Tanh(), of::nn::Linear(12, 3));
    m->to(of::kFloat64);
    return m;
  };
  auto ref = make(3);
  // every rank starts from its own initialization; rank 0's is broadcast, as DDP does
  auto ddp = make(3 + uint64_t(me));
  for (auto& param : ddp->parameters()) {
    std::vector<of::Tensor> v{param};
    pg->broadcast(v)->wait();
  }
  of::optim::SGD opt_ref(ref->parameters(), of::optim::SGDOptions(0.1).momentum(0.9));
  of::optim::SGD opt(ddp->parameters(), of::optim::SGDOptions(0.1).momentum(0.9));
  const int64_t batch = 8, local = batch / p;  // 8 rows split evenly over 1, 2 or 4 ranks
  for (int step = 0; step < 3; ++step) {
    of::manual_seed(50 + step);
    of::Tensor x = of::randn({batch, 5}, of::dtype(of::kFloat64));
    of::Tensor y = of::randint(0, 3, {batch}, of::dtype(of::kInt64));
    opt_ref.zero_grad();
    of::nn::functional::cross_entropy(ref->forward(x), y).backward();
    opt_ref.step();
    opt.zero_grad();
    of::nn::functional::cross_entropy(ddp->forward(x.narrow(0, me * local, local)),
                                      y.narrow(0, me * local, local))
        .backward();
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (auto& param : ddp->parameters()) {
      std::vector<of::Tensor> grads{param.grad()};
      works.push_back(pg->allreduce(grads));
    }
    for (auto& work : works) work->wait();
    for (auto& param : ddp->parameters()) of::Tensor(param.grad()).div_(p);
    opt.step();
  }
  auto pr = ref->parameters(), pd = ddp->parameters();
  for (size_t i = 0; i < pr.size(); ++i) CHECK(max_diff(pd[i], pr[i]) < 1e-12);
}

TEST_CASE("c10d: bad calls raise before communicating, the same error on every rank") {
  auto pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
  const int p = pg->getSize(), me = pg->getRank();
  const uint64_t before = issued();
  // wrong on this rank's own arguments: raised before any collective
  std::vector<of::Tensor> in{of::zeros({2})};
  std::vector<std::vector<of::Tensor>> out{std::vector<of::Tensor>(size_t(p), of::zeros({3}))};
  CHECK_THROWS_WITH_AS(pg->allgather(out, in),
                       doctest::Contains("float32 (3,), but inputTensors[0]"), of::Error);
  std::vector<of::Tensor> strided{of::zeros({3, 4}).t()};
  CHECK_THROWS_WITH_AS(pg->allreduce(strided), doctest::Contains("contiguous"), of::Error);
  std::vector<std::vector<of::Tensor>> few{{of::zeros({2})}};
  if (p > 1)
    CHECK_THROWS_WITH_AS(pg->reduce_scatter(in, few), doctest::Contains("one tensor per rank"),
                         of::Error);
  CHECK(issued() == before);
  if (p > 1) {
    // ranks that disagree (rank 0 passes 3 elements, the others 4; or another op) all raise
    std::vector<of::Tensor> t{of::zeros({me == 0 ? 3 : 4})};
    CHECK_THROWS_WITH_AS(pg->allreduce(t), doctest::Contains("the ranks' calls disagree"),
                         of::Error);
    std::vector<of::Tensor> u{of::zeros({2}, of::dtype(me == p - 1 ? of::kFloat64 : of::kFloat32))};
    CHECK_THROWS_WITH_AS(pg->allreduce(u), doctest::Contains("float64 (2,)"), of::Error);
    std::vector<of::Tensor> w{of::zeros({2})};
    CHECK_THROWS_WITH_AS(me == 0 ? pg->broadcast(w) : pg->allreduce(w),
                         doctest::Contains("rank 0: broadcast float32 (2,) root 0"), of::Error);
  }
  // the ranks are still in step afterwards
  std::vector<of::Tensor> ok{of::ones({2})};
  pg->allreduce(ok)->wait();
  CHECK(values(ok[0]) == filled(2, p));
}

// The fault modes' end: the broadcast sum of what `make` gives, printed, and exit status 0; or
// the of::Error every rank raised, printed, and exit status 3.
int finish_or_report(const std::function<of::Tensor()>& make) {
  try {
    const of::Tensor y = make();
    std::printf("rank %d finished the collective: %g\n", of::distributed::rank(),
                y.to_global(y.placement(), NdSbp(size_t(y.placement().ndim()), Sbp::broadcast()))
                    .sum()
                    .item<double>());
    return 0;
  } catch (const of::Error& e) {
    std::printf("rank %d caught: %s\n", of::distributed::rank(), e.what());
    std::fflush(stdout);
    return 3;
  }
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
    const std::string m(mode);
    if (m == "diverge" || m == "diverge_shape") {
      // rank 1 runs another op (or the same op on another shape): under OF_GLOBAL_CHECK=1 every
      // rank raises an of::Error naming the op and its sequence number before any collective
      const bool odd = of::distributed::rank() == 1;
      return finish_or_report([&] {
        of::Tensor x = of::ones({m == "diverge_shape" && odd ? 5 : 4}, pl, of::sbp::broadcast());
        of::Tensor y = m == "diverge" && odd ? x * 2.0 : x + 2.0;
        return y.to_global(pl, of::sbp::partial_sum());
      });
    }
    if (m.rfind("meta_", 0) == 0) {
      // NOTE [Checked global meta]: rank 1 asks to_global for another conversion than the other
      // ranks; every rank raises naming what differed, before any data moves
      const bool odd = of::distributed::rank() == 1;
      const int n = of::distributed::world_size();
      return finish_or_report([&] {
        of::Tensor y;
        if (m == "meta_sbp" || m == "meta_off") {
          of::Tensor x = of::randn({8, 8}, pl, of::sbp::broadcast());
          y = x.to_global(pl, of::sbp::split(odd ? 1 : 0));
        } else if (m == "meta_local_shape") {
          y = of::ones({4, odd ? 6 : 8}).to_global(pl, of::sbp::split(0));
        } else if (m == "meta_dtype") {
          y = of::ones({4, 8}, odd ? of::kFloat64 : of::kFloat32)
                  .to_global(pl, of::sbp::broadcast());
        } else if (m == "meta_logical_shape") {
          y = of::ones({odd ? 6 : 8, 8}, pl, of::sbp::broadcast()).to_global(pl, of::sbp::split(0));
        } else if (m == "meta_ranks") {
          // rank 1 places the tensor on itself alone: the others wait for it to compare
          y = odd ? of::ones({8, 8}).to_global(of::Placement("cpu", {1}), of::sbp::broadcast())
                  : of::ones({8, 8}).to_global(pl, of::sbp::split(0));
        } else if (m == "meta_placement") {
          // the same ranks as a 1 x n mesh on rank 1
          std::vector<int> all;
          for (int r = 0; r < n; ++r) all.push_back(r);
          const of::Placement mesh("cpu", std::vector<std::vector<int>>{all});
          y = odd ? of::ones({8, 8}).to_global(mesh, NdSbp{of::sbp::broadcast(), of::sbp::split(0)})
                  : of::ones({8, 8}).to_global(pl, of::sbp::split(0));
        }
        return y;
      });
    }
    of::Tensor s = of::ones({4}, pl, of::sbp::partial_sum()).to_global(pl, of::sbp::broadcast());
    std::printf("rank %d finished the collective: %g\n", of::distributed::rank(),
                s.sum().item<double>());
    return 0;
  }
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  // NOTE [No kernel dispatches] over what this rank ran
  const auto nested = oneflow::nested_dispatches();
  for (const auto& n : nested)
    std::fprintf(stderr, "NOTE [No kernel dispatches]: the kernel of %s dispatched the op %s\n",
                 n.first.c_str(), n.second.c_str());
  // every rank reports; a failure anywhere fails the run (mpirun returns non-zero)
  return nested.empty() ? rc : 1;
}

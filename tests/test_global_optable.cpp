// Issue 9: the op table (harness.h) on global tensors. Every row runs on global inputs under a
// set of input SBPs — all broadcast, each input alone in each SBP it can take, every input split
// along the same output dim, every floating input partial — on a 1-D mesh of the world and, on
// 4 ranks, a 2 x 2 mesh (pairs of those SBPs, one per axis). The result and every input's
// gradient, gathered to broadcast, must equal the row run on local tensors in this process
// (float64; partial sums and split reductions add in another order, hence 1e-9). A row whose op
// has no SBP rule (and no default from its traits) must instead raise that op's error under every
// combination (NOTE [SBP rules]).
//
// The case runs in this process (a world of one: the 1-D mesh [1] and the 2-D mesh [1, 1]),
// then runs itself under `mpirun -np 2` and `-np 4` with a deadline (NOTE [Op table on global
// tensors]): under the launcher every rank walks the same rows in the same order.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <fmt/format.h>
#include <oneflow/oneflow.h>

#include "harness.h"
#include "op_table.h"

namespace {

using of::NdSbp;
using of::Sbp;
using Combo = std::vector<NdSbp>;  // one NdSbp per row input

bool under_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

// The 1-D SBP combinations a row runs under (see the file comment).
std::vector<std::vector<Sbp>> combos_1d(const th::OpRow& row, const std::vector<of::Tensor>& in) {
  const Sbp B = Sbp::broadcast();
  std::vector<std::vector<Sbp>> r;
  auto add = [&r](std::vector<Sbp> c) {
    if (std::find(r.begin(), r.end(), c) == r.end()) r.push_back(std::move(c));
  };
  const std::vector<Sbp> all_b(in.size(), B);
  add(all_b);
  int64_t maxdim = 0;
  for (const of::Tensor& t : in) maxdim = std::max(maxdim, t.dim());
  for (size_t i = 0; i < in.size(); ++i) {
    for (int64_t d = 0; d < in[i].dim(); ++d) {
      std::vector<Sbp> c = all_b;
      c[i] = Sbp::split(d);
      add(c);
    }
    if (in[i].is_floating_point() && !th::is_nondiff(row, i)) {
      std::vector<Sbp> c = all_b;
      c[i] = Sbp::partial_sum();
      add(c);
    }
  }
  // every input split along the same dim of a broadcast result (aligned from the right); a
  // size-1 dim broadcasts and stays B
  for (int64_t k = 0; k < maxdim; ++k) {
    std::vector<Sbp> c = all_b;
    bool any = false;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t d = k - (maxdim - in[i].dim());
      if (d < 0 || in[i].size(d) == 1) continue;
      c[i] = Sbp::split(d);
      any = true;
    }
    if (any) add(c);
  }
  std::vector<Sbp> all_p = all_b;
  bool any_p = false;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].is_floating_point() && !th::is_nondiff(row, i)) {
      all_p[i] = Sbp::partial_sum();
      any_p = true;
    }
  if (any_p) add(all_p);
  return r;
}

std::vector<Combo> combos_for(const th::OpRow& row, const std::vector<of::Tensor>& in,
                              int64_t ndim) {
  const std::vector<std::vector<Sbp>> one = combos_1d(row, in);
  std::vector<Combo> r;
  for (size_t k = 0; k < one.size(); ++k) {
    Combo c(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      c[i].push_back(one[k][i]);
      // the 2-D mesh pairs each combination with the next one (so every combination appears
      // on both axes, next to different ones)
      if (ndim == 2) c[i].push_back(one[(k + 1) % one.size()][i]);
    }
    r.push_back(std::move(c));
  }
  return r;
}

std::string combo_str(const Combo& c) {
  std::string s;
  for (const NdSbp& n : c) s += (s.empty() ? "" : ", ") + of::sbp_str(n);
  return "[" + s + "]";
}

of::Tensor gathered(const of::Tensor& t, const of::Placement& pl) {
  if (!t.is_global()) throw of::Error("the result is a local tensor");
  return t.to_global(pl, NdSbp(size_t(pl.ndim()), Sbp::broadcast())).to_local();
}

std::string compare_tensors(const of::Tensor& got, const of::Tensor& want, double rtol,
                            double atol) {
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} vs {}", of::dtype_name(got.dtype()), of::dtype_name(want.dtype()));
  return th::compare(got, th::to_ref(want), rtol, atol);
}

// Whether the row runs an op that refuses global inputs: no SBP rule and no default from its
// traits (NOTE [SBP rules]; test_global.cpp lists them). Such a row must raise that error.
bool refuses_global(const th::OpRow& row) {
  for (const std::string& name : row.ops) {
    const of::OpDef& op = of::find_op(name);
    if (op.sbp_rule || op.has(of::kFactory) || op.has(of::kReduction)) continue;
    if (op.has(of::kElementwise) && !op.has(of::kRandom)) continue;
    return true;
  }
  return false;
}

struct Tally {
  size_t rows = 0, runs = 0, failures = 0, no_inputs = 0, refused = 0, global_layer = 0;
};

// Runs every row under every combination on `pl`; returns what ran. Failures are CHECKed with
// the row, the combination and what differed.
Tally run_table(const of::Placement& pl) {
  Tally tally;
  for (const th::OpRow& row : th::rows()) {
    if (row.global_layer) {  // it makes its own global tensors
      ++tally.global_layer;
      continue;
    }
    const std::vector<of::Tensor> in64 = th::make_inputs(row, 42);
    if (in64.empty()) {  // factories: nothing to place (the global factories have their own tests)
      ++tally.no_inputs;
      continue;
    }
    // the local run: result and gradients
    std::vector<of::Tensor> loc;
    for (size_t i = 0; i < in64.size(); ++i) {
      of::Tensor t = in64[i].clone();
      if (row.grad && t.is_floating_point() && !th::is_nondiff(row, i)) t.requires_grad_(true);
      loc.push_back(t);
    }
    of::Tensor want = row.fn(loc);
    const bool backward = row.grad && want.requires_grad() && want.is_floating_point();
    of::manual_seed(9);
    const of::Tensor gout =
        backward ? of::randn(want.sizes(), of::kFloat64).to(want.dtype()) : of::Tensor();
    if (backward) want.backward(gout);
    ++tally.rows;
    const double rtol = std::max(row.rtol64, 1e-9), atol = std::max(row.atol64, 1e-9);
    const bool refuses = refuses_global(row);
    for (const Combo& c : combos_for(row, in64, pl.ndim())) {
      std::string err;
      if (refuses) {
        // every rank raises the op's clear error, before any collective
        try {
          std::vector<of::Tensor> gin;
          for (size_t i = 0; i < in64.size(); ++i)
            gin.push_back(in64[i]
                              .to_global(pl, NdSbp(size_t(pl.ndim()), Sbp::broadcast()))
                              .to_global(pl, c[i]));
          (void)row.fn(gin);
          err = "ran, but its op has no SBP rule: it should raise";
        } catch (const std::exception& e) {
          if (std::string(e.what()).find("has no SBP rule") == std::string::npos)
            err = std::string("threw another error: ") + e.what();
        }
        ++tally.runs;
        ++tally.refused;
        if (!err.empty()) ++tally.failures;
        INFO(fmt::format("rank {}, {}: row {} with inputs {}", of::distributed::rank(), pl.str(),
                         row.name, combo_str(c)));
        CHECK_MESSAGE(err.empty(), err);
        continue;
      }
      try {
        std::vector<of::Tensor> gin;
        for (size_t i = 0; i < in64.size(); ++i) {
          of::Tensor g = in64[i]
                             .to_global(pl, NdSbp(size_t(pl.ndim()), Sbp::broadcast()))
                             .to_global(pl, c[i])
                             .detach();
          if (loc[i].requires_grad()) g.requires_grad_(true);
          gin.push_back(g);
        }
        of::Tensor got = row.fn(gin);
        err = compare_tensors(gathered(got, pl), want.detach(), rtol, atol);
        if (err.empty() && backward) {
          got.backward(gout.to_global(pl, NdSbp(size_t(pl.ndim()), Sbp::broadcast())));
          for (size_t i = 0; i < gin.size() && err.empty(); ++i) {
            if (!loc[i].requires_grad()) continue;
            const bool lg = loc[i].grad().defined(), gg = gin[i].grad().defined();
            if (lg != gg) {
              err = fmt::format("input {}: the local gradient is {}defined, the global one {}", i,
                                lg ? "" : "un", gg ? "defined" : "undefined");
            } else if (lg) {
              const std::string e =
                  compare_tensors(gathered(gin[i].grad(), pl), loc[i].grad(), 10 * rtol, 10 * atol);
              if (!e.empty()) err = fmt::format("gradient of input {}: {}", i, e);
            }
          }
        }
      } catch (const std::exception& e) { err = std::string("threw: ") + e.what(); }
      ++tally.runs;
      if (!err.empty()) ++tally.failures;
      const std::string where =
          fmt::format("rank {} of {}, {}: row {} with inputs {}", of::distributed::rank(),
                      of::distributed::world_size(), pl.str(), row.name, combo_str(c));
      INFO(where);
      CHECK_MESSAGE(err.empty(), err);
    }
  }
  return tally;
}

void run_meshes(const of::Placement& one_d, const of::Placement& two_d) {
  for (const of::Placement& pl : {one_d, two_d}) {
    const Tally t = run_table(pl);
    if (of::distributed::rank() == 0)
      std::printf(
          "global op table on %s: %zu rows, %zu runs (input SBP combinations), %zu failed "
          "(%zu rows without inputs; %zu runs refused by an op without an SBP rule, as they "
          "should)\n",
          pl.str().c_str(), t.rows, t.runs, t.failures, t.no_inputs, t.refused);
    CHECK(t.rows + t.no_inputs + t.global_layer == th::rows().size());
    CHECK(t.global_layer < 10);
    CHECK(t.no_inputs < 10);
    CHECK(t.runs > 3 * t.rows);
    CHECK(t.refused > 0);  // to_device/cpu: the refusal is checked on every mesh
  }
}

}  // namespace

TEST_CASE(
    "global op table: every row on global inputs equals the local run, forward and gradients") {
  REQUIRE(!th::rows().empty());
  if (under_launcher()) {
    // a rank of the run below: 2 ranks run [2] and [1, 2], 4 ranks [4] and [2, 2]
    const int n = of::distributed::world_size();
    std::vector<int> all(static_cast<size_t>(n), 0);
    for (int r = 0; r < n; ++r) all[size_t(r)] = r;
    of::set_num_threads(1);
    if (n == 4) run_meshes(of::Placement("cpu", all), of::Placement("cpu", {{0, 1}, {2, 3}}));
    else
      run_meshes(of::Placement("cpu", all),
                 of::Placement("cpu", std::vector<std::vector<int>>{all}));
    return;
  }
  // this process: a world of one, on [1] and [1, 1]
  run_meshes(of::Placement("cpu", {0}), of::Placement("cpu", std::vector<std::vector<int>>{{0}}));
#if ONEFLOW_HAVE_MPI
  // NOTE [Op table on global tensors]: the same case under the launcher, 2 and 4 ranks. The
  // program runs itself (this test binary, only this case) under `mpirun -np N` with a deadline
  // and a 120 s collective watchdog, so a rank that diverges fails the case instead of hanging;
  // each rank builds the same inputs from the same seed and checks its own gathered results,
  // and rank 0 prints one summary line per mesh, which this process requires to say 0 failed.
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(len > 0);
  self[len] = 0;
  for (int n : {2, 4}) {
    CAPTURE(n);
    const std::string cmd = fmt::format(
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OF_COLLECTIVE_TIMEOUT=120 "
        "timeout -k 5 600 mpirun --oversubscribe -np {} {} -tc='global op table*' 2>&1",
        n, self);
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    while (size_t k = fread(buf, 1, sizeof buf, p)) out.append(buf, k);
    const int st = pclose(p);
    const int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    // the per-mesh summary lines, then the tail of the output (where failures are)
    std::string summary;
    for (size_t at = out.find("global op table on"); at != std::string::npos;
         at = out.find("global op table on", at + 1))
      summary += out.substr(at, out.find('\n', at) - at) + "\n";
    MESSAGE(summary);
    if (out.size() > 12000) out = out.substr(out.size() - 12000);
    INFO(out);
    CHECK(rc == 0);
    size_t clean = 0;
    for (size_t at = summary.find(" 0 failed"); at != std::string::npos;
         at = summary.find(" 0 failed", at + 1))
      ++clean;
    CHECK(clean == 2);
  }
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank op table runs in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

// bench_dispatch: eager per-op overhead, `a + b` on tiny float32 tensors, with and without
// autograd recording, against libtorch doing the same in the same process.
#include <oneflow/oneflow.h>

#include <functional>
#include <optional>

#include "bench_util.h"

#ifdef OF_BENCH_WITH_LIBTORCH
#include <ATen/ATen.h>
#endif

namespace ob = oneflow::bench;

namespace {

constexpr int kIters = 200000;
constexpr int kReps = 5;

// Nanoseconds per op of each loop (kIters ops): the best of kReps rounds, the loops taking
// turns within a round so that both sides see the same machine noise.
std::vector<double> best_ns_per_op(const std::vector<std::function<void()>>& loops) {
  for (auto& l : loops) l();  // warm-up: caches, allocator free lists, lazily built tables
  std::vector<double> best(loops.size(), 1e30);
  for (int r = 0; r < kReps; ++r) {
    for (size_t k = 0; k < loops.size(); ++k) {
      double t0 = ob::now_s();
      loops[k]();
      best[k] = std::min(best[k], (ob::now_s() - t0) / kIters * 1e9);
    }
  }
  return best;
}

// The loop for one side, under the side's no-grad guard when `no_grad`: each result replaces
// the previous one, so memory stays flat and the last result is observed.
template <class Guard, class T, class Op>
std::function<void()> make_loop(const T& a, const T& b, T& sink, bool no_grad, Op op) {
  return [&a, &b, &sink, no_grad, op] {
    std::optional<Guard> guard;
    if (no_grad) guard.emplace();
    for (int i = 0; i < kIters; ++i) {
      sink = op(a, b);
      ob::keep(sink);
    }
  };
}

}  // namespace

int main() {
  // Builds the op table first: of::rand/randn (and binary ops on from_blob tensors) as the
  // very first op of a process dereference a not-yet-registered OpDef (library bug, reported).
  (void)of::zeros({1});
  // Starts the thread pool and lets its workers reach their wait loop before the first
  // parallel op: a job posted right after the pool starts can be missed by a worker that
  // has not yet read the job counter, and the caller then waits forever (library bug, reported).
  (void)of::get_num_threads();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ob::print_machine("bench_dispatch", of::get_num_threads());
  fmt::print(
      "a + b, best of {} rounds of {} ops (ours and libtorch alternating), results "
      "dropped each iteration\n",
      kReps, kIters);

  ob::Table table(
      "eager dispatch overhead, ns per `a + b` (float32, CPU); peer = libtorch "
      "same op same process; ratio = ours / libtorch",
      {"of allocated bytes after - before"});
  for (bool grad : {false, true}) {
    for (int64_t n : {1, 32}) {
      of::Tensor a = of::rand({n}), b = of::rand({n}), sink;
      if (grad) a.requires_grad_(true);
      const size_t before = of::memory::stats().allocated;
      std::vector<std::function<void()>> loops = {make_loop<of::NoGradGuard>(
          a, b, sink, !grad, [](const of::Tensor& x, const of::Tensor& y) { return x + y; })};
#ifdef OF_BENCH_WITH_LIBTORCH
      at::Tensor ta = at::rand({n}), tb = at::rand({n}), tsink;
      if (grad) ta.requires_grad_(true);
      loops.push_back(make_loop<at::NoGradGuard>(
          ta, tb, tsink, !grad, [](const at::Tensor& x, const at::Tensor& y) { return x + y; }));
#endif
      const std::vector<double> ns = best_ns_per_op(loops);
      const double ns_ours = ns[0];
      sink = of::Tensor();
      const long long leaked = (long long)of::memory::stats().allocated - (long long)before;

      std::string peer = ob::kNoTorch, ratio = "-", verdict = "n/a (no peer)";
      const double target = grad ? 0.5 : 0.3;
      if (ns.size() > 1) {
        peer = fmt::format("{:.0f} ns/op", ns[1]);
        ratio = ob::ratio_str(ns_ours / ns[1]);
        verdict = ob::verdict(ns_ours / ns[1] <= target);
      }
      table.row({fmt::format("{}, {} element{}", grad ? "autograd recording" : "NoGradGuard", n,
                             n == 1 ? "" : "s"),
                 fmt::format("{:.0f} ns/op", ns_ours), peer, ratio,
                 fmt::format("<= {:.1f}x", target), verdict, fmt::format("{}", leaked)});
    }
  }
  table.print();
  return 0;
}

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

// Nanoseconds per call of `body(i)`, the best of kReps loops of kIters calls.
double best_ns_per_op(const std::function<void()>& loop) {
  loop();  // warm-up: caches, allocator free lists, lazily built tables
  double best = 1e30;
  for (int r = 0; r < kReps; ++r) {
    double t0 = ob::now_s();
    loop();
    best = std::min(best, (ob::now_s() - t0) / kIters * 1e9);
  }
  return best;
}

// The loop for one side: each result replaces the previous one, so memory stays flat and the
// last result is observed.
template <class T, class Op>
std::function<void()> make_loop(const T& a, const T& b, T& sink, Op op) {
  return [&a, &b, &sink, op] {
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
  fmt::print("a + b, best of {} loops of {} ops, results dropped each iteration\n", kReps, kIters);

  ob::Table table("eager dispatch overhead, ns per `a + b` (float32, CPU); peer = libtorch "
                  "same op same process; ratio = ours / libtorch",
                  {"of allocated bytes after - before"});
  for (bool grad : {false, true}) {
    for (int64_t n : {1, 32}) {
      of::Tensor a = of::rand({n}), b = of::rand({n}), sink;
      if (grad) a.requires_grad_(true);
      const size_t before = of::memory::stats().allocated;
      double ns_ours;
      {
        std::optional<of::NoGradGuard> guard;
        if (!grad) guard.emplace();
        ns_ours = best_ns_per_op(make_loop(a, b, sink, [](const of::Tensor& x,
                                                          const of::Tensor& y) { return x + y; }));
      }
      sink = of::Tensor();
      const long long leaked = (long long)of::memory::stats().allocated - (long long)before;

      std::string peer = ob::kNoTorch, ratio = "-", verdict = "n/a (no peer)";
      const double target = grad ? 0.5 : 0.3;
#ifdef OF_BENCH_WITH_LIBTORCH
      {
        at::Tensor ta = at::rand({n}), tb = at::rand({n}), tsink;
        if (grad) ta.requires_grad_(true);
        std::optional<at::NoGradGuard> guard;
        if (!grad) guard.emplace();
        double ns_torch = best_ns_per_op(make_loop(
            ta, tb, tsink, [](const at::Tensor& x, const at::Tensor& y) { return x + y; }));
        peer = fmt::format("{:.0f} ns/op", ns_torch);
        ratio = ob::ratio_str(ns_ours / ns_torch);
        verdict = ob::verdict(ns_ours / ns_torch <= target);
      }
#endif
      table.row({fmt::format("{}, {} element{}", grad ? "autograd recording" : "NoGradGuard", n,
                             n == 1 ? "" : "s"),
                 fmt::format("{:.0f} ns/op", ns_ours), peer, ratio,
                 fmt::format("<= {:.1f}x", target), verdict, fmt::format("{}", leaked)});
    }
  }
  table.print();
  return 0;
}

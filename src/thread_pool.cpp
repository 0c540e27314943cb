#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "oneflow/error.h"
#include "oneflow/guards.h"

namespace oneflow {
namespace {

thread_local __attribute__((tls_model("initial-exec"))) bool t_in_parallel = false;
// ThreadLimitGuard's cap for this thread (0: none)
thread_local __attribute__((tls_model("initial-exec"))) int t_thread_limit = 0;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }
  ~ThreadPool() { stop(); }

  int size() const { return nthreads_; }

  void resize(int n) {
    n = std::max(1, n);
    if (n == nthreads_) return;
    stop();
    stopping_ = false;
    nthreads_ = n;
    // Each worker starts from the generation current now, so a job posted before the thread
    // is scheduled is still seen as new (otherwise the caller would wait forever).
    const uint64_t start = generation_.load(std::memory_order_acquire);
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, start] { worker_loop(start); });
  }

  // False (nothing run) when another thread's parallel op holds the pool: NOTE [Concurrent
  // callers].
  bool run(int64_t begin, int64_t end, int64_t chunk,
           const std::function<void(int64_t, int64_t)>& f) {
    std::unique_lock<std::mutex> lk(run_mu_, std::try_to_lock);  // one parallel op at a time
    if (!lk.owns_lock()) return false;
    fn_ = &f;
    begin_ = begin;
    end_ = end;
    chunk_ = chunk;
    next_.store(begin, std::memory_order_relaxed);
    error_ = nullptr;
    active_.store(int(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    work();
    // Wait for the workers to leave this job (spin briefly, then sleep).
    for (int spins = 0; active_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 4000) {
        cpu_relax();
      } else {
        int a = active_.load(std::memory_order_acquire);
        if (a != 0) active_.wait(a, std::memory_order_acquire);
      }
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void work() {
    t_in_parallel = true;
    for (;;) {
      int64_t b = next_.fetch_add(chunk_, std::memory_order_relaxed);
      if (b >= end_) break;
      int64_t e = std::min(end_, b + chunk_);
      try {
        (*fn_)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lk(err_mu_);
        if (!error_) error_ = std::current_exception();
        next_.store(end_, std::memory_order_relaxed);
      }
    }
    t_in_parallel = false;
  }

  void worker_loop(uint64_t seen) {
    for (;;) {
      uint64_t g;
      for (int spins = 0;; ++spins) {
        g = generation_.load(std::memory_order_acquire);
        if (g != seen || stopping_.load(std::memory_order_relaxed)) break;
        // spin, then yield a while before sleeping: a yielding worker still answers the next
        // op at once but lets OpenBLAS's threads (which want the same cores between GEMMs)
        // run; waking one from the futex costs more than small ops take (MLP step: eager
        // 0.11 -> 0.078 ms, replay 0.068 -> 0.050 ms on 2 cores)
        if (spins < 2000) {
          cpu_relax();
        } else if (spins < 4000) {
          std::this_thread::yield();
        } else {
          generation_.wait(g, std::memory_order_acquire);
        }
      }
      if (stopping_.load(std::memory_order_relaxed)) return;
      seen = g;
      work();
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) active_.notify_all();
    }
  }

  void stop() {
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  int nthreads_ = 0;
  std::mutex run_mu_, err_mu_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  std::exception_ptr error_;
};

int default_threads() {
  if (const char* s = std::getenv("ONEFLOW_NUM_THREADS")) {
    int n = std::atoi(s);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  static auto* p = new ThreadPool(default_threads());  // leaked: workers may outlive statics
  return *p;
}

}  // namespace

namespace {
std::atomic<int> g_num_threads{0};  // cached pool size (avoids the pool's static guard)
}
int pool_threads() {
  int n = g_num_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = pool().size();
    g_num_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}
int num_threads() {
  const int n = pool_threads();
  return t_thread_limit > 0 && t_thread_limit < n ? t_thread_limit : n;
}
void set_threads(int n) {
  OF_CHECK(n >= 1, "[set_num_threads] expected a positive thread count, got {}", n);
  pool().resize(n);
  g_num_threads.store(n, std::memory_order_relaxed);
}
bool in_parallel_region() { return t_in_parallel; }

void parallel_for_pool(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int nt = num_threads();
  if (n <= grain || nt == 1 || t_in_parallel) {
    f(begin, end);
    return;
  }
  // About 4 chunks per thread: enough slack to rebalance around a descheduled worker.
  int64_t chunk = std::max(grain, (n + 4 * nt - 1) / (4 * nt));
  // NOTE [Concurrent callers]: the pool runs one parallel op at a time. A thread that finds it
  // taken by another caller's op runs its own op serially instead of queueing behind it: N
  // concurrent callers then use at most the pool's threads plus N - 1 cores, and none waits
  // for another's kernels (a server's requests scale; a lone caller still gets every thread).
  if (!pool().run(begin, end, chunk, f)) f(begin, end);
}

ThreadLimitGuard::ThreadLimitGuard(int n) : previous_(t_thread_limit) {
  OF_CHECK(n >= 1, "[ThreadLimitGuard] expected a positive thread count, got {}", n);
  t_thread_limit = previous_ > 0 ? std::min(previous_, n) : n;
}
ThreadLimitGuard::~ThreadLimitGuard() { t_thread_limit = previous_; }
int thread_limit() { return t_thread_limit; }

void set_num_threads(int n) { set_threads(n); }
int get_num_threads() { return num_threads(); }

}  // namespace oneflow

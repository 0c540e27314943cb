// thread_pool.h (internal): parallel_for over index ranges for CPU kernels.
// NOTE [Thread pool]: workers sleep on a futex (std::atomic::wait) after a short spin and a
// short run of yields, and work is handed out in small chunks from an atomic counter, so a
// worker that the OS deschedules (another process holds its core) delays at most one chunk
// instead of the whole op — OpenMP's static schedule with spin-waiting slows down ~10x in that
// situation.
#pragma once
#include <cstdint>
#include <functional>

namespace oneflow {

// Below this many elements of elementwise work, kernels stay single-threaded.
inline constexpr int64_t kParallelGrain = 32768;

// The threads a kernel called from this thread may use (pool size, capped by ThreadLimitGuard).
int num_threads();
// The pool's size.
int pool_threads();
// This thread's ThreadLimitGuard cap (0: none).
int thread_limit();
void set_threads(int n);
bool in_parallel_region();

// Calls f(begin, end) over disjoint subranges of [begin, end) of at least `grain` elements,
// on up to num_threads() threads (the caller included). Serial when the range is small,
// when called from inside a parallel region, or with one thread.
void parallel_for_pool(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& f);
template <class F> inline void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  // The serial case stays inline: small ops must not pay for a std::function.
  if (end - begin <= grain || in_parallel_region() || num_threads() == 1) {
    if (end > begin) f(begin, end);
    return;
  }
  parallel_for_pool(begin, end, grain, std::function<void(int64_t, int64_t)>(std::ref(f)));
}

}  // namespace oneflow

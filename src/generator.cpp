#include "generator.h"

#include <mutex>

#include "dispatch.h"
#include "oneflow/ops.h"

namespace oneflow {
namespace {
std::mutex g_mu;
GeneratorState g_state{67280421310721ull, 0};
}  // namespace

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_state = {seed, 0};
}

GeneratorState random_state() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_state;
}

void set_random_state(GeneratorState s) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_state = s;
}

GeneratorState reserve_random(uint64_t counters) {
  GeneratorState s;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    s = g_state;
    g_state.offset += counters;
  }
  if (g_tracer && !in_kernel()) g_tracer->on_random(s.seed, s.offset, counters);
  return s;
}

}  // namespace oneflow

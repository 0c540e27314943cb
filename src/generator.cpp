#include "generator.h"

#include <mutex>

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

GeneratorState reserve_random(uint64_t counters) {
  std::lock_guard<std::mutex> lk(g_mu);
  GeneratorState s = g_state;
  g_state.offset += counters;
  return s;
}

}  // namespace oneflow

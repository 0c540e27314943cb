// cuda_profile.cpp: OF_CUDA_PROFILE_OPS (cuda_profile.h).
#include "cuda_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_backend.h"

namespace oneflow {

namespace {

struct OpProfile {
  std::mutex mu;
  std::map<std::string, std::pair<size_t, double>> by_op;  // calls, seconds
  ~OpProfile() {
    if (by_op.empty()) return;
    std::vector<std::pair<std::string, std::pair<size_t, double>>> rows(by_op.begin(), by_op.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    double total = 0;
    for (const auto& r : rows) total += r.second.second;
    std::fprintf(stderr, "[cuda profile] %zu (op, dtype) pairs, %.1f ms in all (synchronized)\n",
                 rows.size(), 1e3 * total);
    for (size_t i = 0; i < rows.size() && i < 40; ++i)
      std::fprintf(stderr, "[cuda profile] %-34s %7zu calls %9.2f ms %8.1f us/call %5.1f%%\n",
                   rows[i].first.c_str(), rows[i].second.first, 1e3 * rows[i].second.second,
                   1e6 * rows[i].second.second / double(rows[i].second.first),
                   100.0 * rows[i].second.second / total);
  }
};
OpProfile& op_profile() {
  static OpProfile p;
  return p;
}
bool op_profile_on() {
  static const bool on = std::getenv("OF_CUDA_PROFILE_OPS") != nullptr;
  return on;
}

}  // namespace

bool cuda_op_profile_on() { return op_profile_on(); }

void profile_cuda_kernel(const OpDef& op, const TensorList& inputs,
                         const std::function<void()>& run) {
  std::string key = op.name;
  for (const Tensor& t : inputs)
    if (t.defined()) {
      key += " " + std::string(dtype_name(t.dtype()));
      break;
    }
  OpProfile& p = op_profile();
  cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  run();
  cuda::synchronize();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(p.mu);
  auto& e = p.by_op[key];
  ++e.first;
  e.second += sec;
}

}  // namespace oneflow

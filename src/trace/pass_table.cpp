// pass_table.cpp: NOTE [Pass table] (pass_table.h).
#include "trace/pass_table.h"

#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>

#include "oneflow/error.h"

namespace oneflow::trace {

namespace {
using TO = jit::TraceOptions;
constexpr uint8_t kSimplify = 1;  // cse, fold: merge and fold nodes
constexpr uint8_t kRewrite = 2;   // the inference rewrites (they match CPU values only)

const PassRow kPasses[] = {
    {"dce", dce, dce, &TO::dce_, false, false, 0},
    {"cse", cse, cse, &TO::cse_, false, true, kSimplify},
    {"fold", fold, fold, &TO::fold_, false, true, kSimplify},
    {"attention", fuse_attention, fuse_attention, &TO::attention_, true, true, kRewrite},
    {"add_norm", fuse_add_norm, fuse_add_norm, &TO::add_norm_, true, true, kRewrite},
    // (changes values by design, not their order: exact() leaves it as set)
    {"quantize", quantize_int8, quantize_int8, &TO::quantize_int8_, false, true, kRewrite},
    {"epilogue", fuse_epilogue, fuse_epilogue, &TO::epilogue_, true, true, kRewrite},
    {"remat", remat, remat, &TO::remat_, false, false, 0},
    {"schedule", schedule, schedule, &TO::schedule_, false, false, 0},
    {"fuse", fuse, fuse_cuda, &TO::fuse_, false, false, 0},
    {"inplace", inplace, inplace, &TO::inplace_, false, false, 0},
    {"memplan", memplan, memplan, &TO::memplan_, false, false, 0},
};
constexpr size_t kNumPasses = std::size(kPasses);
static_assert(kNumPasses <= kMaxPasses);
}  // namespace

std::span<const PassRow> pass_rows() { return kPasses; }

PassSwitches pass_switches(const jit::TraceOptions& o) {
  PassSwitches s{};  // rows past the table stay off
  for (size_t k = 0; k < kNumPasses; ++k) s[k] = kPasses[k].option ? o.*kPasses[k].option : true;
  if (const char* env = std::getenv("OF_TRACE_PASSES")) {
    const std::string all = env;
    size_t pos = 0;
    while (pos <= all.size()) {
      const size_t comma = all.find(',', pos);
      std::string item =
          all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? all.size() + 1 : comma + 1;
      if (item.empty()) continue;
      const bool on = item[0] != '-';
      if (item[0] == '-' || item[0] == '+') item = item.substr(1);
      size_t found = kNumPasses;
      for (size_t k = 0; k < kNumPasses; ++k)
        if (item == kPasses[k].name) found = k;
      if (found == kNumPasses) {
        std::string names;
        for (const PassRow& row : kPasses)
          names += (names.empty() ? "" : ", ") + std::string(row.name);
        fail("[jit.trace] OF_TRACE_PASSES names an unknown pass '{}' ({})", item, names);
      }
      s[found] = on;
    }
  }
  if (o.exact_)
    for (size_t k = 0; k < kNumPasses; ++k)
      if (kPasses[k].reorders_float) s[k] = false;
  return s;
}

std::vector<const PassRow*> pass_recipe(const PassSwitches& s) {
  const PassRow* const dce_row = &kPasses[0];
  std::vector<const PassRow*> r;
  bool dead = false;  // a pass that ran may have left dead nodes
  uint8_t family = 0;
  for (size_t k = 0; k < kNumPasses; ++k) {
    const PassRow& row = kPasses[k];
    if (!s[k]) continue;
    if (dead && s[0] && (row.family == 0 || row.family != family) && &row != dce_row) {
      r.push_back(dce_row);
      dead = false;
    }
    r.push_back(&row);
    if (&row == dce_row) dead = false;
    dead = dead || row.leaves_dead_nodes;
    family = row.family;
  }
  if (dead && s[0]) r.push_back(dce_row);
  return r;
}

Graph optimize(const Graph& g0, bool exact) {
  Graph g = g0;  // a loaded graph runs on the CPU
  for (const PassRow* p : pass_recipe(pass_switches(jit::TraceOptions().exact(exact))))
    g = p->run(g);
  return g;
}

}  // namespace oneflow::trace

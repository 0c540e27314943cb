// meta_check.cpp: NOTE [Checked global meta] (meta_check.h).
#include "global/meta_check.h"

#include <algorithm>
#include <cstring>

#include "global/global.h"
#include "kernel_support.h"
#include "oneflow/global.h"

namespace oneflow::global {

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void check_same_meta(const std::vector<MetaField>& fields, std::vector<int> ranks) {
  if (!distributed::check_global_meta() || in_kernel()) return;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  const int me = this_rank();
  if (ranks.size() < 2 || !std::binary_search(ranks.begin(), ranks.end(), me)) return;
  constexpr size_t kText = 88, kField = 8 + kText;
  const size_t rec = fields.size() * kField;
  std::vector<char> mine(rec, 0), all(rec * ranks.size(), 0);
  for (size_t f = 0; f < fields.size(); ++f) {
    const uint64_t h = fnv1a(fields[f].text);
    std::memcpy(mine.data() + f * kField, &h, 8);
    std::memcpy(mine.data() + f * kField + 8, fields[f].text.data(),
                std::min(fields[f].text.size(), kText - 1));
  }
  Communicator& c = ranks_data_comm(ranks, Device(kCPU));
  c.allgatherv(mine.data(), all.data(), std::vector<int64_t>(ranks.size(), int64_t(rec)));
  note_meta_check();
  std::string diff;
  for (size_t f = 0; f < fields.size(); ++f) {
    auto hash_of = [&](size_t r) {
      uint64_t h;
      std::memcpy(&h, all.data() + r * rec + f * kField, 8);
      return h;
    };
    bool same = true;
    for (size_t r = 1; r < ranks.size(); ++r) same = same && hash_of(r) == hash_of(0);
    if (same) continue;
    // ranks grouped by what they asked for, in rank order
    std::vector<bool> told(ranks.size(), false);
    std::string part;
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (told[r]) continue;
      std::vector<int> who;
      for (size_t q = r; q < ranks.size(); ++q)
        if (!told[q] && hash_of(q) == hash_of(r)) {
          told[q] = true;
          who.push_back(ranks[q]);
        }
      std::string names;
      for (size_t k = 0; k < who.size(); ++k) names += (k ? ", " : "") + std::to_string(who[k]);
      const char* text = all.data() + r * rec + f * kField + 8;
      part += fmt::format("{}{} {} {}", part.empty() ? "" : "; ", who.size() > 1 ? "ranks" : "rank",
                          names, std::string(text, strnlen(text, kText)));
    }
    diff += fmt::format("{}{}: {}", diff.empty() ? "" : "; ", fields[f].what, part);
  }
  if (!diff.empty())
    fail(
        "[to_global] the ranks disagree on the conversion they ask for: {} (every rank taking "
        "part must call to_global with the same placement, SBP, logical shape and dtype)",
        diff);
}

}  // namespace oneflow::global

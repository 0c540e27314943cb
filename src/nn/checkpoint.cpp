// Module and optimizer checkpoints on top of save_tensors / load_tensors.
#include "oneflow/checkpoint.h"

#include <algorithm>

namespace oneflow {

namespace {

std::vector<std::pair<std::string, Tensor>> to_pairs(const OrderedDict<std::string, Tensor>& d) {
  std::vector<std::pair<std::string, Tensor>> v;
  for (const auto& kv : d) v.emplace_back(kv.key(), kv.value());
  return v;
}

OrderedDict<std::string, Tensor> read_dict(const std::string& path, const char* kind,
                                           const LoadOptions& options = LoadOptions()) {
  std::map<std::string, std::string> meta;
  auto pairs = load_tensors(path, options, &meta);
  auto it = meta.find("content");
  if (it != meta.end() && it->second != kind)
    fail("[load] {}: the file holds a {} state, not a {} state", path, it->second, kind);
  OrderedDict<std::string, Tensor> d;
  for (auto& [k, t] : pairs) d.insert(k, t);
  return d;
}

}  // namespace

void save(const nn::Module& module, const std::string& path) {
  // Widest dtypes first, state-dict order within a dtype size (the reference writer also sorts
  // by alignment): with the 8-byte-aligned data section, every tensor then starts at a multiple
  // of its element size, so a mapped load (NOTE [Mapped checkpoints]) copies none of them.
  auto pairs = to_pairs(module.state_dict());
  std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
    return itemsize(a.second.dtype()) > itemsize(b.second.dtype());
  });
  save_tensors(pairs, path, {{"content", "module"}});
}

void load(nn::Module& module, const std::string& path, bool strict) {
  load(module, path, LoadOptions().strict(strict));
}

IncompatibleKeys load(nn::Module& module, const std::string& path, const LoadOptions& options) {
  return module.load_state_dict(read_dict(path, "module", options), options.strict());
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  save_tensors(to_pairs(optimizer.state_dict()), path, {{"content", "optimizer"}});
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  optimizer.load_state_dict(read_dict(path, "optimizer"));
}

}  // namespace oneflow

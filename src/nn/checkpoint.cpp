// Module and optimizer checkpoints on top of save_tensors / load_tensors.
#include "oneflow/checkpoint.h"

namespace oneflow {

namespace {

std::vector<std::pair<std::string, Tensor>> to_pairs(const OrderedDict<std::string, Tensor>& d) {
  std::vector<std::pair<std::string, Tensor>> v;
  for (const auto& kv : d) v.emplace_back(kv.key(), kv.value());
  return v;
}

OrderedDict<std::string, Tensor> read_dict(const std::string& path, const char* kind) {
  std::map<std::string, std::string> meta;
  auto pairs = load_tensors(path, &meta);
  auto it = meta.find("content");
  if (it != meta.end() && it->second != kind)
    fail("[load] {}: the file holds a {} state, not a {} state", path, it->second, kind);
  OrderedDict<std::string, Tensor> d;
  for (auto& [k, t] : pairs) d.insert(k, t);
  return d;
}

}  // namespace

void save(const nn::Module& module, const std::string& path) {
  save_tensors(to_pairs(module.state_dict()), path, {{"content", "module"}});
}

void load(nn::Module& module, const std::string& path, bool strict) {
  module.load_state_dict(read_dict(path, "module"), strict);
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  save_tensors(to_pairs(optimizer.state_dict()), path, {{"content", "optimizer"}});
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  optimizer.load_state_dict(read_dict(path, "optimizer"));
}

}  // namespace oneflow

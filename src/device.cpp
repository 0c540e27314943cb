#include "oneflow/device.h"

#include <charconv>

#include "oneflow/error.h"

namespace oneflow {

Device::Device(std::string_view spec) : type_(kCPU), index_(-1) {
  auto bad = [&] {
    fail("[device] invalid device string '{}': expected 'cpu', 'cuda' or 'cuda:<index>'", spec);
  };
  std::string_view kind = spec, idx;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    kind = spec.substr(0, colon);
    idx = spec.substr(colon + 1);
  }
  if (kind == "cpu") {
    type_ = kCPU;
    if (!idx.empty() && idx != "0") bad();
    return;
  }
  if (kind != "cuda") bad();
  type_ = kCUDA;
  if (spec.find(':') != std::string_view::npos) {
    int v = -1;
    auto [p, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
    if (ec != std::errc() || p != idx.data() + idx.size() || v < 0 || v > 127) bad();
    index_ = int8_t(v);
  }
}

std::string Device::str() const {
  if (type_ == kCPU) return "cpu";
  return index_ < 0 ? "cuda" : fmt::format("cuda:{}", int(index_));
}

}  // namespace oneflow

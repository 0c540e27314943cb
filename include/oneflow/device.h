// device.h: of::Device ("cpu", "cuda:0").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace oneflow {

enum class DeviceType : int8_t { CPU, CUDA };
inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

class Device {
 public:
  Device(DeviceType type = kCPU, int index = -1) : type_(type), index_(int8_t(index)) {}
  Device(std::string_view spec);  // "cpu", "cuda", "cuda:1"; anything else throws of::Error
  Device(const char* spec) : Device(std::string_view(spec)) {}
  Device(const std::string& spec) : Device(std::string_view(spec)) {}
  DeviceType type() const { return type_; }
  // -1 means "the current device" for CUDA; CPU always reports -1.
  int index() const { return index_; }
  bool has_index() const { return index_ >= 0; }
  bool is_cpu() const { return type_ == kCPU; }
  bool is_cuda() const { return type_ == kCUDA; }
  std::string str() const;
  friend bool operator==(Device a, Device b) {
    return a.type_ == b.type_ && (a.type_ == kCPU || a.normalized() == b.normalized());
  }
  friend bool operator!=(Device a, Device b) { return !(a == b); }

 private:
  int normalized() const { return index_ < 0 ? 0 : index_; }
  DeviceType type_;
  int8_t index_;
};

}  // namespace oneflow

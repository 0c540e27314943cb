// fused_kernel_abi.h (internal): what the core's generator of fused CUDA kernels
// (trace/fusion_codegen.cpp) and the CUDA module's launcher (cuda/fusion.cpp) agree on: the
// block size and the hash that keys compiled kernels. Host code only.
#pragma once
#include <cstdint>
#include <string_view>

namespace oneflow::fused_abi {

// The block size the launcher uses and the kernel is bounded for.
inline constexpr int kFusedThreads = 256;

// FNV-1a over the kernel source: the compiled-kernel cache key.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace oneflow::fused_abi

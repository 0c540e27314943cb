// random.h (internal): the CUDA random fills, dropout and the index factories (arange,
// linspace, eye). Plain C++ so that random.cu stays light for nvcc; factory.cpp is the host side.
// NOTE [CUDA random numbers]: element i draws word i % 4 of Philox counter (offset + i / 4)
// under the op's seed (generator.h) with the formulas of the CPU kernels (src/cpu/random.cpp,
// dropout's keep rule in src/ops/nn.cpp): the same seed and offset give the same numbers on
// both devices.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h

namespace cuda_module {

enum class RandKind : int { uniform, normal, randint };

struct RandParams {
  RandKind kind = RandKind::uniform;
  int64_t numel = 0;
  void* out = nullptr;  // dense
  ScalarType dtype;
  uint64_t seed = 0, offset = 0;
  double a = 0, b = 0;  // uniform [a, b); normal mean a, std b
  int64_t lo = 0;       // randint: lo + (64 random bits) % range
  uint64_t range = 1;
  const uint64_t* philox = nullptr;  // set: read {seed, offset} here (CUDA Graph replays)
};
cudaError_t launch_random(const RandParams& p, cudaStream_t stream);

// y = keep ? x * scale : 0 with keep = (word >> 8) >= threshold; x, y, mask dense.
struct DropoutParams {
  int64_t numel = 0;
  const void* x = nullptr;
  void* y = nullptr;
  bool* mask = nullptr;
  ScalarType dtype;
  uint64_t seed = 0, offset = 0;
  uint32_t threshold = 0;
  double scale = 1;
  const uint64_t* philox = nullptr;  // as RandParams::philox
};
cudaError_t launch_dropout(const DropoutParams& p, cudaStream_t stream);

enum class IndexFactory : int { arange, linspace, eye };
// arange: start + i * step; linspace: `a` to `b` in n steps, symmetric as the CPU's; eye: rows
// x cols, ones on the diagonal.
struct FactoryParams {
  IndexFactory kind = IndexFactory::arange;
  int64_t numel = 0;
  void* out = nullptr;
  ScalarType dtype;
  double a = 0, b = 0, step = 0;
  int64_t cols = 0;
};
cudaError_t launch_factory(const FactoryParams& p, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

// cuda_test_util.h: what the CUDA test files share — the skip without a device, the device,
// comparisons of a CUDA result with the CPU's, and the message of a raised of::Error.
#pragma once
#include <doctest/doctest.h>

#include <oneflow/oneflow.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace cuda_test {

namespace of = oneflow;

inline const of::Device kCuda0("cuda:0");

#define SKIP_WITHOUT_CUDA()               \
  do {                                    \
    if (!of::cuda::is_available()) {      \
      MESSAGE("no CUDA device: skipped"); \
      return;                             \
    }                                     \
  } while (0)

// The of::Error message f raises, or "" when it raises none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const of::Error& e) { return e.what(); }
  return "";
}

// Same shape and dtype, values within tol (absolute and relative; NaN equals NaN).
inline void check_close(const of::Tensor& gpu, const of::Tensor& cpu, double tol) {
  REQUIRE(gpu.defined());
  REQUIRE(cpu.defined());
  REQUIRE(gpu.is_cuda());
  REQUIRE(cpu.is_cpu());  // the reference
  const of::Tensor back = gpu.cpu();
  REQUIRE(back.sizes() == cpu.sizes());
  CHECK(back.dtype() == cpu.dtype());
  CHECK(of::allclose(back.to(of::kFloat64), cpu.to(of::kFloat64), tol, tol, /*equal_nan=*/true));
}

// Same shape, dtype and values (as doubles; NaN equals NaN).
inline void check_equal(const of::Tensor& gpu, const of::Tensor& cpu) {
  REQUIRE(gpu.is_cuda());
  REQUIRE(cpu.is_cpu());  // the reference
  const of::Tensor back = gpu.cpu();
  REQUIRE(back.sizes() == cpu.sizes());
  CHECK(back.dtype() == cpu.dtype());
  std::vector<double> a = back.to_vector<double>(), b = cpu.to_vector<double>();
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i)
    differ += !(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])));
  INFO("elements that differ: ", differ, " of ", a.size());
  CHECK(differ == 0);
}

// The same shape, dtype and bytes: data-movement kernels are exact for every dtype.
inline void check_bitwise(const of::Tensor& gpu, const of::Tensor& cpu) {
  REQUIRE(gpu.defined());
  REQUIRE(gpu.is_cuda());
  const of::Tensor a = gpu.cpu().contiguous(), b = cpu.contiguous();
  REQUIRE(a.sizes() == b.sizes());
  REQUIRE(a.dtype() == b.dtype());
  CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.numel()) * a.element_size()) == 0);
}

}  // namespace cuda_test

// GPU benchmarks of issue 10, each beside its limit measured in the same run:
//  - matmul TFLOP/s (float32, float16, bfloat16; square sizes) vs cuBLAS called directly on the
//    same buffers (target >= 0.95x);
//  - elementwise add and relu GB/s vs a device-to-device cudaMemcpyAsync of the same bytes
//    (target >= 0.8x).
// Without a CUDA device it prints why and exits 0 (bench/gpu_check.sh runs it on a lent GPU).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <oneflow/oneflow.h>

#include <cstdio>
#include <functional>

#include "bench_util.h"

namespace ob = oneflow::bench;

namespace {

#define CK(x)                                                                        \
  do {                                                                               \
    auto e_ = (x);                                                                   \
    if (int(e_) != 0) {                                                              \
      std::fprintf(stderr, "%s failed (%d) at %s:%d\n", #x, int(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Seconds per call of f on `stream`, timed with events around `reps` calls after warm-up.
double time_on(cudaStream_t stream, const std::function<void()>& f, int reps = 20) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, stream));
  for (int i = 0; i < reps; ++i) f();
  CK(cudaEventRecord(b, stream));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms * 1e-3 / reps;
}

}  // namespace

int main() {
  if (!of::cuda::is_available()) {
    std::printf("bench_cuda: no CUDA device (%s): skipped\n", "of::cuda::is_available() is false");
    return 0;
  }
  const of::Device dev("cuda:0");
  cudaStream_t stream = of::cuda::getCurrentCUDAStream(0);
  cublasHandle_t h;
  CK(cublasCreate(&h));
  CK(cublasSetStream(h, stream));
  ob::print_machine("bench_cuda", 1);

  ob::Table mm("matmul C = A B, n x n, TFLOP/s; peer = cublasGemmEx on the same buffers "
               "(float32 without TF32, 16-bit with float accumulation)");
  for (auto dt : {of::kFloat32, of::kFloat16, of::kBFloat16}) {
    for (int64_t n : {1024, 4096, 8192}) {
      of::Tensor a = of::randn({n, n}).to(dev, dt), b = of::randn({n, n}).to(dev, dt);
      of::Tensor c = of::empty({n, n}, of::TensorOptions().device(dev).dtype(dt));
      const double ours = time_on(stream, [&] { of::mm_out(c, a, b); });
      const cudaDataType_t t = dt == of::kFloat32 ? CUDA_R_32F : dt == of::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
      const float one = 1, zero = 0;
      const double raw = time_on(stream, [&] {
        // row-major C = A B is column-major C^T = B^T A^T
        CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(n), int(n), &one, b.data_ptr(), t,
                        int(n), a.data_ptr(), t, int(n), &zero, c.data_ptr(), t, int(n),
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      const double flop = 2.0 * double(n) * double(n) * double(n);
      mm.row({fmt::format("{} n={}", of::dtype_name(dt), n), fmt::format("{:.1f}", flop / ours / 1e12),
              fmt::format("{:.1f}", flop / raw / 1e12), ob::ratio_str(raw / ours), ">= 0.95x",
              ob::verdict(raw / ours >= 0.95)});
    }
  }
  mm.print();

  ob::Table ew("elementwise, GB/s (bytes read + written); peer = cudaMemcpyAsync device to device "
               "of the same bytes");
  for (int64_t n : {int64_t(1) << 20, int64_t(1) << 24, int64_t(1) << 26}) {
    of::Tensor x = of::randn({n}).to(dev), y = of::randn({n}).to(dev), z = of::empty_like(x);
    const double bytes3 = 3.0 * double(n) * 4, bytes2 = 2.0 * double(n) * 4;
    void* buf = nullptr;
    CK(cudaMalloc(&buf, size_t(n) * 8));
    const double copy = time_on(stream, [&] {
      CK(cudaMemcpyAsync(buf, x.data_ptr(), size_t(n) * 4, cudaMemcpyDeviceToDevice, stream));
    });
    const double copy_gbs = bytes2 / copy / 1e9;
    const double add = time_on(stream, [&] { of::add_out(z, x, y); });
    const double relu = time_on(stream, [&] { of::relu(x); });
    ew.row({fmt::format("add, {} floats", n), fmt::format("{:.0f}", bytes3 / add / 1e9),
            fmt::format("{:.0f}", copy_gbs), ob::ratio_str(bytes3 / add / 1e9 / copy_gbs),
            ">= 0.8x", ob::verdict(bytes3 / add / 1e9 >= 0.8 * copy_gbs)});
    ew.row({fmt::format("relu (allocating), {} floats", n), fmt::format("{:.0f}", bytes2 / relu / 1e9),
            fmt::format("{:.0f}", copy_gbs), ob::ratio_str(bytes2 / relu / 1e9 / copy_gbs),
            ">= 0.8x", ob::verdict(bytes2 / relu / 1e9 >= 0.8 * copy_gbs)});
    CK(cudaFree(buf));
  }
  ew.print();
  CK(cublasDestroy(h));
  std::printf("\nnot measured yet (not built): reductions, ResNet-50 / BERT-base training (conv, "
              "norms and attention have no CUDA kernels), CUDA-Graph replay of traces\n");
  return 0;
}

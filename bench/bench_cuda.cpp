// GPU benchmarks of issue 10, each beside its limit measured in the same run:
//  - matmul TFLOP/s (float32, float16, bfloat16; square sizes) vs cuBLAS called directly on the
//    same buffers (target >= 0.95x);
//  - elementwise add and relu GB/s vs a device-to-device cudaMemcpyAsync of the same bytes
//    (target >= 0.8x); reductions (sum of everything, over rows, over columns; softmax) GB/s
//    beside the same copy;
//  - an overhead-bound training step (MLP 784-64-10, batch 16, SGD momentum) eager vs its
//    of::jit::trace replay as one CUDA Graph (target >= 2x).
// Without a CUDA device it prints why and exits 0 (bench/gpu_check.sh runs it on a lent GPU).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <oneflow/oneflow.h>

#include <cstdio>
#include <functional>

#include "bench_util.h"

namespace ob = oneflow::bench;

namespace {

#define CK(x)                                                                             \
  do {                                                                                    \
    auto e_ = (x);                                                                        \
    if (int(e_) != 0) {                                                                   \
      std::fprintf(stderr, "%s failed (%d) at %s:%d\n", #x, int(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
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

  ob::Table mm(
      "matmul C = A B, n x n, TFLOP/s; peer = cublasGemmEx on the same buffers "
      "(float32 without TF32, 16-bit with float accumulation)");
  for (auto dt : {of::kFloat32, of::kFloat16, of::kBFloat16}) {
    for (int64_t n : {1024, 4096, 8192}) {
      of::Tensor a = of::randn({n, n}).to(dev, dt), b = of::randn({n, n}).to(dev, dt);
      of::Tensor c = of::empty({n, n}, of::TensorOptions().device(dev).dtype(dt));
      const double ours = time_on(stream, [&] { of::mm_out(c, a, b); });
      const cudaDataType_t t = dt == of::kFloat32   ? CUDA_R_32F
                               : dt == of::kFloat16 ? CUDA_R_16F
                                                    : CUDA_R_16BF;
      const float one = 1, zero = 0;
      const double raw = time_on(stream, [&] {
        // row-major C = A B is column-major C^T = B^T A^T
        CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(n), int(n), &one, b.data_ptr(), t,
                        int(n), a.data_ptr(), t, int(n), &zero, c.data_ptr(), t, int(n),
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      const double flop = 2.0 * double(n) * double(n) * double(n);
      mm.row({fmt::format("{} n={}", of::dtype_name(dt), n),
              fmt::format("{:.1f}", flop / ours / 1e12), fmt::format("{:.1f}", flop / raw / 1e12),
              ob::ratio_str(raw / ours), ">= 0.95x", ob::verdict(raw / ours >= 0.95)});
    }
  }
  mm.print();

  ob::Table ew(
      "elementwise, GB/s (bytes read + written); peer = cudaMemcpyAsync device to device "
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
    ew.row({fmt::format("relu (allocating), {} floats", n),
            fmt::format("{:.0f}", bytes2 / relu / 1e9), fmt::format("{:.0f}", copy_gbs),
            ob::ratio_str(bytes2 / relu / 1e9 / copy_gbs), ">= 0.8x",
            ob::verdict(bytes2 / relu / 1e9 >= 0.8 * copy_gbs)});
    CK(cudaFree(buf));
  }
  ew.print();

  ob::Table red(
      "reductions, GB/s (bytes read + written); peer = the device-to-device copy of "
      "the input's bytes");
  {
    const int64_t n = int64_t(1) << 26;
    of::Tensor x = of::randn({n}).to(dev);
    void* buf = nullptr;
    CK(cudaMalloc(&buf, size_t(n) * 4));
    const double copy = time_on(stream, [&] {
      CK(cudaMemcpyAsync(buf, x.data_ptr(), size_t(n) * 4, cudaMemcpyDeviceToDevice, stream));
    });
    CK(cudaFree(buf));
    const double copy_gbs = 2.0 * double(n) * 4 / copy / 1e9;
    const of::Tensor rows = x.view({8192, 8192});
    struct Case {
      const char* name;
      std::function<void()> f;
      double bytes;
    };
    const std::vector<Case> cases = {
        {"sum of 2^26 floats", [&] { x.sum(); }, double(n) * 4},
        {"sum over rows [8192, 8192] -> [8192]", [&] { rows.sum({1}); }, double(n) * 4},
        {"sum over columns [8192, 8192] -> [8192]", [&] { rows.sum({0}); }, double(n) * 4},
        {"softmax of rows [8192, 8192]", [&] { of::softmax(rows, 1); }, 2.0 * double(n) * 4},
    };
    for (const Case& c : cases) {
      const double t = time_on(stream, c.f);
      red.row({c.name, fmt::format("{:.0f}", c.bytes / t / 1e9), fmt::format("{:.0f}", copy_gbs),
               ob::ratio_str(c.bytes / t / 1e9 / copy_gbs), "(beside)", "-"});
    }
  }
  red.print();

  ob::Table tr(
      "training step MLP 784-64-10, batch 16, SGD momentum: ms per step; peer = the "
      "same step eager");
  {
    of::manual_seed(0);
    std::vector<of::Tensor> p = {(of::randn({64, 784}) * 0.05).to(dev).set_requires_grad(true),
                                 of::zeros({64}).to(dev).set_requires_grad(true),
                                 (of::randn({10, 64}) * 0.1).to(dev).set_requires_grad(true),
                                 of::zeros({10}).to(dev).set_requires_grad(true)};
    of::optim::SGD opt(p, of::optim::SGDOptions(0.01).momentum(0.9));
    const of::Tensor x = of::randn({16, 784}).to(dev);
    const of::Tensor y = of::randint(0, 10, {16}, of::kInt64).to(dev);
    auto body = [&](const of::Tensor& xx, const of::Tensor& yy) {
      opt.zero_grad();
      of::Tensor loss =
          of::cross_entropy(of::linear(of::linear(xx, p[0], p[1]).relu(), p[2], p[3]), yy);
      loss.backward();
      opt.step();
      return loss;
    };
    auto step = of::jit::trace(body);
    const double eager = time_on(
        stream, [&] { body(x, y); }, 200);
    const double replay = time_on(
        stream, [&] { step(x, y); }, 200);
    tr.row({"replay (" + step.stats().replay_mode + ") vs eager",
            fmt::format("{:.3f}", replay * 1e3), fmt::format("{:.3f}", eager * 1e3),
            ob::ratio_str(eager / replay) + " faster", ">= 2x",
            ob::verdict(eager / replay >= 2.0)});
  }
  tr.print();
  CK(cublasDestroy(h));
  std::printf(
      "\nResNet-50 / BERT-base training beside PyTorch: bench_gpu_models (gpu_check.sh runs "
      "bench/gpu_models.py first)\n");
  return 0;
}

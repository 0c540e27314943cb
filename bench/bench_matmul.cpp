// bench_matmul: float32 square GEMM throughput, of::matmul against cblas_sgemm on the same
// buffers (the ceiling: of::matmul lowers to it) and libtorch's matmul when installed.
#include <cblas.h>

#include <oneflow/oneflow.h>

#include <array>
#include <cmath>

#include "bench_util.h"

// The library's switch for its bfloat16 GEMM kernel (src/cpu/gemm_bf16.h, an internal header:
// declared here so that this program keeps to the public include path).
namespace oneflow::cpu {
bool gemm_bf16_supported();
bool set_gemm_bf16_enabled(bool on);
}  // namespace oneflow::cpu

#ifdef OF_BENCH_WITH_LIBTORCH
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#endif

namespace ob = oneflow::bench;

int main() {
  // Builds the op table first: of::rand/randn (and binary ops on from_blob tensors) as the
  // very first op of a process dereference a not-yet-registered OpDef (library bug, reported).
  (void)of::zeros({1});
  // Starts the thread pool and lets its workers reach their wait loop before the first
  // parallel op: a job posted right after the pool starts can be missed by a worker that
  // has not yet read the job counter, and the caller then waits forever (library bug, reported).
  (void)of::get_num_threads();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int threads = of::get_num_threads();
  ob::print_machine("bench_matmul", threads);
  of::manual_seed(0);
#ifdef OF_BENCH_WITH_LIBTORCH
  at::set_num_threads(threads);
  const bool have_torch = true;
#else
  const bool have_torch = false;
#endif

  ob::Table table(
      "float32 square matmul C = A·B, GFLOP/s (2n^3 / median time over interleaved "
      "rounds); peer = cblas_sgemm on the same buffers",
      {"libtorch at::matmul", "ours/libtorch", "check"});
  for (int64_t n : {512, 1024, 2048}) {
    of::Tensor a = of::randn({n, n}), b = of::randn({n, n});
    of::Tensor c_blas = of::empty({n, n});
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* pc = c_blas.data_ptr<float>();
    const double flop = 2.0 * double(n) * double(n) * double(n);
    // Interleaved rounds (ours, cblas, libtorch): the host's noise hits each side alike.
    const double min_time = n >= 2048 ? 3.0 : 1.5;

    of::Tensor c_ours;
    std::vector<std::function<void()>> fs = {
        [&] { c_ours = of::matmul(a, b); },
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, pa,
                      int(n), pb, int(n), 0.0f, pc, int(n));
          ob::keep(pc[0]);
        }};
#ifdef OF_BENCH_WITH_LIBTORCH
    at::Tensor ta = at::from_blob(const_cast<float*>(pa), {n, n}, at::kFloat);
    at::Tensor tb = at::from_blob(const_cast<float*>(pb), {n, n}, at::kFloat);
    at::Tensor tc;
    fs.push_back([&] { tc = at::matmul(ta, tb); });
#endif
    const std::vector<double> t = ob::interleaved_median_times(fs, 2, 7, min_time);
    const double t_ours = t[0], t_blas = t[1];
    // Same inputs, same BLAS answer: a mismatch means of::matmul computed something else.
    const bool same = of::allclose(c_ours, c_blas, 1e-3, 1e-3);

    const double g_ours = flop / t_ours * 1e-9, g_blas = flop / t_blas * 1e-9;
    const double r = g_ours / g_blas;
    std::string torch_cell = ob::kNoTorch, torch_ratio = "-";
#ifdef OF_BENCH_WITH_LIBTORCH
    const double g_torch = flop / t[2] * 1e-9;
    torch_cell = fmt::format("{:.1f} GFLOP/s", g_torch);
    torch_ratio = ob::ratio_str(g_ours / g_torch);
#endif
    (void)have_torch;
    table.row({fmt::format("{0}x{0}x{0}", n), fmt::format("{:.1f} GFLOP/s", g_ours),
               fmt::format("{:.1f} GFLOP/s", g_blas), ob::ratio_str(r), ">= 0.95x cblas",
               ob::verdict(r >= 0.95), torch_cell, torch_ratio, same ? "ok" : "MISMATCH"});
  }
  table.print();

  // bfloat16 GEMMs of a BERT layer's linear shapes (NOTE [bfloat16 GEMM]): the AVX512-BF16
  // kernel beside the widened path it replaces (bfloat16 -> float32 copies, sgemm, rounding)
  // and cblas_sgemm on float32 copies of the same operands (the float32 limit).
  ob::Table bt(
      "bfloat16 linear y = x·wᵀ, GFLOP/s (2mnk / median time over interleaved rounds); peer = "
      "cblas_sgemm on float32 copies",
      {"bf16 widened (before)", "kernel/widened", "check"});
  const bool kernel = of::cpu::gemm_bf16_supported();
  for (const auto& shape : std::vector<std::array<int64_t, 3>>{
           {128, 384, 1536}, {128, 1536, 384}, {4096, 384, 1536}, {1024, 1024, 1024}}) {
    const int64_t m = shape[0], k = shape[1], n = shape[2];  // (lambdas capture them below)
    const of::Tensor x = of::randn({m, k}), w = of::randn({n, k});
    const of::Tensor xb = x.to(of::kBFloat16), wb = w.to(of::kBFloat16);
    const of::Tensor xf = xb.to(of::kFloat32), wf = wb.to(of::kFloat32);
    of::Tensor cf = of::empty({m, n}), y_kernel, y_wide;
    const double flop = 2.0 * double(m) * double(n) * double(k);
    std::vector<std::function<void()>> fs = {
        [&] {
          of::cpu::set_gemm_bf16_enabled(true);
          y_kernel = of::linear(xb, wb);
        },
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f,
                      xf.data_ptr<float>(), int(k), wf.data_ptr<float>(), int(k), 0.0f,
                      cf.data_ptr<float>(), int(n));
          ob::keep(cf.data_ptr<float>()[0]);
        },
        [&] {
          of::cpu::set_gemm_bf16_enabled(false);
          y_wide = of::linear(xb, wb);
          of::cpu::set_gemm_bf16_enabled(true);
        }};
    const std::vector<double> t = ob::interleaved_median_times(fs, 2, 7, 1.0);
    const double g_k = flop / t[0] * 1e-9, g_s = flop / t[1] * 1e-9, g_w = flop / t[2] * 1e-9;
    const bool same =
        of::allclose(y_kernel.to(of::kFloat32), cf, 2e-2, 2e-2 * std::sqrt(double(k)));
    bt.row({fmt::format("{}x{}->{}", m, k, n),
            fmt::format("{:.1f} GFLOP/s{}", g_k, kernel ? "" : " (no AVX512-BF16: widened)"),
            fmt::format("{:.1f} GFLOP/s", g_s), ob::ratio_str(g_k / g_s), ">= 1.3x sgemm",
            ob::verdict(kernel && g_k >= 1.3 * g_s), fmt::format("{:.1f} GFLOP/s", g_w),
            ob::ratio_str(g_k / g_w), same ? "ok" : "MISMATCH"});
  }
  bt.print();
  return 0;
}

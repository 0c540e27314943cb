// test_cuda.cpp: the CUDA backend against the CPU. Cases skip cleanly without a device; the
// first one runs everywhere and checks the error a CUDA request gives when there is none.
#include <doctest/doctest.h>

#include "cuda_test_util.h"

#include <oneflow/oneflow.h>

#include "autocast.h"
#include "dispatch.h"
#include "module_loader.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace of = oneflow;
using namespace cuda_test;

namespace {

void check_same_values(const of::Tensor& got, const of::Tensor& want) {
  REQUIRE(got.sizes() == want.sizes());
  CHECK(got.to_vector<double>() == want.to_vector<double>());
}

void check_close(const of::Tensor& gpu, const of::Tensor& cpu, double rtol, double atol) {
  REQUIRE(gpu.is_cuda());
  const of::Tensor back = gpu.cpu();
  REQUIRE(back.sizes() == cpu.sizes());
  CHECK(back.dtype() == cpu.dtype());
  CHECK(of::allclose(back, cpu, rtol, atol));
}

}  // namespace

TEST_CASE("cuda: a CUDA request without a device is a clear error") {
  if (of::cuda::is_available()) {
    const int n = of::cuda::device_count();
    CHECK(n > 0);
    const std::string msg = error_of([&] { of::zeros({2}).to(of::Device(of::kCUDA, n)); });
    CHECK(msg.find("cuda") != std::string::npos);
    return;
  }
  CHECK(of::cuda::device_count() == 0);
  const std::string msg = error_of([] { of::zeros({2}).to(of::Device("cuda:0")); });
  INFO("error: " << msg);
  CHECK(msg.find("cuda") != std::string::npos);
}

namespace {

// Runs the probe (tests/cpu_only_probe.cpp) in its own process with `env` prepended; returns
// its standard output and error.
std::string run_probe(const std::string& env, const char* mode) {
  const std::string cmd = env + " " + ONEFLOW_CPU_ONLY_PROBE + " " + mode + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), int(buf.size()), p)) out += buf.data();
  const int rc = pclose(p);
  INFO("command: " << cmd << "\noutput:\n" << out);
  CHECK(rc == 0);
  return out;
}

// The value after "key " on its line of the probe's output ("" when absent).
std::string probe_value(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + " ");
  if (at == std::string::npos) return "";
  const size_t end = out.find('\n', at);
  return out.substr(at + key.size() + 1, end - at - key.size() - 1);
}

}  // namespace

TEST_CASE("cuda: a CPU-only program maps no CUDA library and starts small") {
  const std::string out = run_probe("", "cpu");
  INFO("probe output:\n" << out);
  CHECK(probe_value(out, "trained") == "1");
  CHECK(probe_value(out, "cuda_mapped") == "[]");
  const long rss = std::stol(probe_value(out, "start_rss_kib"));
  CHECK(rss > 0);
  // The target: <= 25 MiB at the start of main (sanitizer runtimes add their own).
  if (probe_value(out, "sanitized") == "0") CHECK(rss <= 25 * 1024);
}

TEST_CASE("cuda: the same binary starts with the CUDA libraries hidden, and says why CUDA is off") {
  // Empty files named as the CUDA libraries shadow the real ones (LD_LIBRARY_PATH is searched
  // before the loader's cache), so loading the CUDA module fails as on a machine without them.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("of_hidden_cuda_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const char* lib : {"libcudart.so", "libcublas.so", "libcublasLt.so", "libcuda.so"})
    for (int v = 10; v <= 14; ++v)
      std::ofstream(dir / (std::string(lib) + "." + std::to_string(v)));
  const std::string hide = "LD_LIBRARY_PATH=" + dir.string();
  const std::string cpu = run_probe(hide, "cpu");
  CHECK(probe_value(cpu, "trained") == "1");
  const std::string err = probe_value(run_probe(hide, "ask"), "error");
  INFO("error: " << err);
  CHECK(err.find("[cuda] not available: ") != std::string::npos);
  CHECK(err.find("cuda:0") != std::string::npos);
  std::filesystem::remove_all(dir);
  // A module that is not there: the same clear error, naming what was looked for.
  const std::string missing =
      probe_value(run_probe("OF_CUDA_MODULE=/nonexistent/liboneflow_cuda.so", "ask"), "error");
  INFO("error: " << missing);
  CHECK(missing.find("[cuda] not available: ") != std::string::npos);
  const std::string off = probe_value(run_probe("OF_CUDA_MODULE=none", "ask"), "error");
  CHECK(off.find("[cuda] not available: ") != std::string::npos);
}

TEST_CASE("modules: a program with the core linked in (liboneflow.a) loads none") {
  // the suite links liboneflow.so, except in a static-core build (the sanitized one)
  CHECK(of::core_linked_statically() == bool(ONEFLOW_STATIC_CORE));
  // an environment variable set to "none" disables the module before any file is opened; the
  // static check comes first
  setenv("OF_TEST_MODULE_OFF", "none", 1);
  std::string why;
  CHECK(of::load_core_module("OF_TEST_MODULE_OFF", "liboneflow_cuda.so", &why) == nullptr);
  unsetenv("OF_TEST_MODULE_OFF");
  if (ONEFLOW_STATIC_CORE)
    CHECK(why ==
          "this program links oneflow statically (liboneflow.a), and liboneflow_cuda.so "
          "needs the shared core: link liboneflow.so (pkg-config --libs oneflow) to use it");
  else CHECK(why == "disabled by OF_TEST_MODULE_OFF=none");
}

TEST_CASE("cuda: to() round trips keep values, dtype and shape") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(0);
  const of::Tensor f = of::randn({3, 4});
  const of::Tensor fd = f.to(kCuda0);
  CHECK(fd.is_cuda());
  CHECK(fd.device() == kCuda0);
  CHECK(fd.dtype() == of::kFloat32);
  check_same_values(fd.cpu(), f);

  const of::Tensor h = of::randn({5, 7}).to(of::kHalf);
  const of::Tensor hd = h.to(kCuda0);
  CHECK(hd.dtype() == of::kHalf);
  CHECK(hd.cpu().to_vector<float>() == h.to_vector<float>());

  const of::Tensor i = of::arange(12, of::kInt32).reshape({3, 4});
  check_same_values(i.to(kCuda0).cpu(), i);
  const of::Tensor l = of::arange(10, of::kInt64);
  check_same_values(l.cuda().cpu(), l);

  // Non-contiguous on the host: made contiguous before the copy.
  const of::Tensor x = of::randn({4, 6});
  check_same_values(x.t().to(kCuda0).cpu(), x.t().contiguous());
  // Non-contiguous on the device: the strided copy kernel.
  const of::Tensor xd = x.to(kCuda0);
  check_same_values(xd.t().contiguous().cpu(), x.t().contiguous());
  check_same_values(xd.t().cpu(), x.t().contiguous());
  check_same_values(xd.slice(1, 1, 6, 2).cpu(), x.slice(1, 1, 6, 2).contiguous());
  const of::Tensor x3 = of::randn({2, 3, 4, 5});
  check_same_values(x3.cuda().permute({3, 1, 0, 2}).contiguous().cpu(),
                    x3.permute({3, 1, 0, 2}).contiguous());
  check_same_values(i.to(kCuda0).t().cpu(), i.t().contiguous());
}

TEST_CASE("cuda: dtype conversion on the device matches the CPU") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(1);
  const of::Tensor x = of::randn({6, 5}).mul(100);
  const of::Tensor xd = x.to(kCuda0);
  for (of::ScalarType t :
       {of::kFloat64, of::kHalf, of::kBFloat16, of::kInt32, of::kInt64, of::kBool}) {
    INFO("dtype " << of::dtype_name(t));
    const of::Tensor got = xd.to(t).cpu();
    CHECK(got.dtype() == t);
    CHECK(got.to_vector<double>() == x.to(t).to_vector<double>());
    // Converting a transposed view: strided read + conversion in one kernel.
    CHECK(xd.t().to(t).cpu().to_vector<double>() == x.t().to(t).to_vector<double>());
  }
}

TEST_CASE("cuda: mm and matmul match the CPU (float32, float64, transposed inputs)") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(2);
  const int64_t m = 37, k = 53, n = 29;
  for (of::ScalarType t : {of::kFloat32, of::kFloat64}) {
    INFO("dtype " << of::dtype_name(t));
    const of::Tensor a = of::randn({m, k}, t), b = of::randn({k, n}, t);
    const of::Tensor at = of::randn({k, m}, t).t(), bt = of::randn({n, k}, t).t();
    // Strided in both dims: cuBLAS cannot read it, the kernel copies it first.
    const of::Tensor as = of::randn({2 * m, 2 * k}, t).slice(0, 0, 2 * m, 2).slice(1, 0, 2 * k, 2);
    for (const of::Tensor& lhs : {a, at, as}) {
      for (const of::Tensor& rhs : {b, bt}) {
        const of::Tensor want = of::mm(lhs, rhs);
        // Host-side views are made contiguous by to(); device-side views reach the kernel.
        check_close(of::mm(lhs.cuda(), rhs.cuda()), want, 1e-4, 1e-5);
        check_close(of::matmul(lhs.cuda(), rhs.cuda()), want, 1e-4, 1e-5);
      }
    }
    // Transposed views living on the device reach cuBLAS without a copy (CUBLAS_OP_T).
    const of::Tensor ad = a.cuda(), bd = b.cuda();
    const of::Tensor at_dev = at.t().contiguous().cuda().t();  // == at, strides (1, m)
    const of::Tensor bt_dev = bt.t().contiguous().cuda().t();  // == bt, strides (1, k)
    check_close(of::mm(at_dev, bd), of::mm(at, b), 1e-4, 1e-5);
    check_close(of::mm(ad, bt_dev), of::mm(a, bt), 1e-4, 1e-5);
    check_close(of::mm(at_dev, bt_dev), of::mm(at, bt), 1e-4, 1e-5);
    check_close(of::matmul(at_dev, bt_dev), of::matmul(at, bt), 1e-4, 1e-5);
    // Row stride larger than the row (a row slice with a step) and a both-dims-strided view.
    check_close(of::mm(ad.slice(0, 0, m, 3), bd), of::mm(a.slice(0, 0, m, 3), b), 1e-4, 1e-5);
    const of::Tensor big = of::randn({2 * m, 2 * k}, t), big_d = big.cuda();
    check_close(of::mm(big_d.slice(0, 0, 2 * m, 2).slice(1, 0, 2 * k, 2), bd),
                of::mm(big.slice(0, 0, 2 * m, 2).slice(1, 0, 2 * k, 2), b), 1e-4, 1e-5);
    // Degenerate shapes.
    check_close(of::mm(ad.slice(0, 0, 1), bd), of::mm(a.slice(0, 0, 1), b), 1e-4, 1e-5);
    check_close(of::mm(ad, bd.slice(1, 0, 1)), of::mm(a, b.slice(1, 0, 1)), 1e-4, 1e-5);
    check_close(of::mm(ad.slice(1, 0, 0), bd.slice(0, 0, 0)), of::zeros({m, n}, t), 0, 0);
  }
}

TEST_CASE("cuda: mm rejects an unsupported dtype clearly") {
  SKIP_WITHOUT_CUDA();
  const of::Tensor a = of::arange(6, of::kInt64).reshape({2, 3}).cuda();
  const std::string msg = error_of([&] { of::mm(a, a.t()); });
  INFO("error: " << msg);
  CHECK(msg.find("[mm]") != std::string::npos);
}

TEST_CASE("cuda: bmm and batched matmul match the CPU") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(3);
  const int64_t batch = 4, m = 9, k = 17, n = 11;
  for (of::ScalarType t : {of::kFloat32, of::kFloat64}) {
    INFO("dtype " << of::dtype_name(t));
    const of::Tensor a = of::randn({batch, m, k}, t), b = of::randn({batch, k, n}, t);
    check_close(of::bmm(a.cuda(), b.cuda()), of::bmm(a, b), 1e-4, 1e-5);
    // Transposed inner matrices on the device (no copy) and broadcast operands.
    const of::Tensor at = of::randn({batch, k, m}, t), bt = of::randn({batch, n, k}, t);
    check_close(of::bmm(at.cuda().transpose(1, 2), bt.cuda().transpose(1, 2)),
                of::bmm(at.transpose(1, 2), bt.transpose(1, 2)), 1e-4, 1e-5);
    const of::Tensor w = of::randn({k, n}, t);
    check_close(of::matmul(a.cuda(), w.cuda()), of::matmul(a, w), 1e-4, 1e-5);
    check_close(of::matmul(a.cuda(), w.cuda().expand({batch, k, n})),
                of::matmul(a, w.expand({batch, k, n})), 1e-4, 1e-5);
  }
}

TEST_CASE("cuda: float16 and bfloat16 mm accumulate in float") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(4);
  const of::Tensor a = of::randn({16, 32}), b = of::randn({32, 8});
  for (of::ScalarType t : {of::kHalf, of::kBFloat16}) {
    INFO("dtype " << of::dtype_name(t));
    const of::Tensor want = of::mm(a.to(t).to(of::kFloat32), b.to(t).to(of::kFloat32));
    const of::Tensor got = of::mm(a.to(t).cuda(), b.to(t).cuda());
    CHECK(got.dtype() == t);
    CHECK(of::allclose(got.cpu().to(of::kFloat32), want, 2e-2, 5e-2));
  }
}

TEST_CASE("cuda: caching allocator statistics and block reuse") {
  SKIP_WITHOUT_CUDA();
  of::cuda::synchronize();
  of::memory::empty_cache(kCuda0);
  const of::memory::Stats s0 = of::memory::stats(kCuda0);
  CHECK(s0.reserved >= s0.allocated);    // only segments that hold live blocks stay
  const int64_t rows = 256, cols = 300;  // 307200 bytes: a 512-byte bucket
  const size_t bytes = size_t(rows * cols) * 4;
  of::memory::Stats s1;
  {
    of::Tensor t = of::empty({rows, cols}, kCuda0);
    s1 = of::memory::stats(kCuda0);
    CHECK(s1.allocated >= s0.allocated + bytes);
    CHECK(s1.num_allocs > s0.num_allocs);
    CHECK(s1.peak_allocated >= s1.allocated);
    CHECK(s1.reserved >= s1.allocated);
  }
  const of::memory::Stats s2 = of::memory::stats(kCuda0);
  CHECK(s2.allocated == s0.allocated);  // back in the cache...
  CHECK(s2.reserved == s1.reserved);    // ...not returned to the driver
  {
    of::Tensor t = of::empty({rows, cols}, kCuda0);
    const of::memory::Stats s3 = of::memory::stats(kCuda0);
    CHECK(s3.num_cache_hits > s2.num_cache_hits);  // the cached block was reused
    CHECK(s3.reserved == s2.reserved);
  }
  of::memory::reset_peak_stats(kCuda0);
  CHECK(of::memory::stats(kCuda0).peak_allocated == of::memory::stats(kCuda0).allocated);
  of::memory::empty_cache(kCuda0);
  const of::memory::Stats s4 = of::memory::stats(kCuda0);
  CHECK(s4.reserved <= s2.reserved);
}

TEST_CASE("cuda: streams, events and record_stream without a device are clear errors") {
  if (of::cuda::is_available()) {
    MESSAGE("a CUDA device is present: the error paths are not reachable");
    return;
  }
  for (auto* f : std::initializer_list<void (*)()>{
           [] { of::cuda::getCurrentCUDAStream(); }, [] { of::cuda::getDefaultCUDAStream(0); },
           [] { of::cuda::getStreamFromPool(true); }, [] { of::cuda::CUDAEvent().record(); },
           [] { of::cuda::memory_allocated(); }, [] { of::cuda::current_device(); }}) {
    const std::string msg = error_of(f);
    INFO("error: " << msg);
    CHECK(msg.find("[cuda] not available") != std::string::npos);
  }
  of::cuda::CUDAEvent e(true);  // never recorded: complete, nothing to destroy
  CHECK(e.query());
  CHECK_FALSE(e.isCreated());
  CHECK(error_of([&] { e.elapsed_time(of::cuda::CUDAEvent(true)); }).find("recorded first") !=
        std::string::npos);
  CHECK(error_of([] {
          of::cuda::record_stream(of::zeros({2}), of::cuda::CUDAStream(0, nullptr));
        }).find("[record_stream] expected a CUDA tensor, got cpu") != std::string::npos);
}

TEST_CASE("cuda: the current stream, stream guards, pooled streams and events") {
  SKIP_WITHOUT_CUDA();
  const of::cuda::CUDAStream def = of::cuda::getDefaultCUDAStream(0);
  CHECK(def.handle() != nullptr);  // never the legacy default stream
  CHECK(of::cuda::getCurrentCUDAStream(0) == def);
  const of::cuda::CUDAStream side = of::cuda::getStreamFromPool(false, 0);
  CHECK(side != def);
  {
    of::cuda::CUDAStreamGuard guard(side);
    CHECK(of::cuda::getCurrentCUDAStream(0) == side);
    CHECK(guard.original_stream() == def);
    // work on the side stream: an allocation, a copy, a kernel
    of::Tensor a = of::arange(0, 1 << 20, 1, of::kFloat32).to(kCuda0);
    of::Tensor b = a.to(of::kFloat64);
    of::cuda::CUDAEvent start(true), end(true);
    start.record();
    of::Tensor c = b.to(of::kFloat32);
    end.record();
    end.synchronize();
    CHECK(end.query());
    CHECK(start.elapsed_time(end) >= 0.0f);
    check_same_values(c.cpu(), a.cpu());
    // used on another stream too: its memory waits for that stream before reuse
    of::cuda::record_stream(c, def);
    def.synchronize();
  }
  CHECK(of::cuda::getCurrentCUDAStream(0) == def);
  CHECK(of::cuda::getStreamFromPool(true, 0) != def);
  side.synchronize();
  CHECK(side.query());
  CHECK(of::cuda::memory_reserved(0) >= of::cuda::memory_allocated(0));
  CHECK(of::cuda::max_memory_allocated(0) >= of::cuda::memory_allocated(0));
  CHECK(error_of([] {
          of::cuda::setCurrentCUDAStream(of::cuda::CUDAStream(0, nullptr));
        }).find("legacy default stream") != std::string::npos);
}

TEST_CASE("cuda: elementwise ops match the CPU (dense, strided, broadcast; every dtype family)") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(11);
  using U = std::function<of::Tensor(const of::Tensor&)>;
  using B = std::function<of::Tensor(const of::Tensor&, const of::Tensor&)>;
  const std::vector<std::pair<const char*, U>> unary = {
      {"neg", [](auto& x) { return -x; }},
      {"abs", [](auto& x) { return x.abs(); }},
      {"sign", [](auto& x) { return x.sign(); }},
      {"exp", [](auto& x) { return x.exp(); }},
      {"log", [](auto& x) { return x.abs().log(); }},
      {"sqrt", [](auto& x) { return x.abs().sqrt(); }},
      {"tanh", [](auto& x) { return x.tanh(); }},
      {"sigmoid", [](auto& x) { return x.sigmoid(); }},
      {"relu", [](auto& x) { return x.relu(); }},
      {"silu", [](auto& x) { return of::silu(x); }},
      {"erf", [](auto& x) { return x.erf(); }},
      {"gelu", [](auto& x) { return of::gelu(x); }},
      {"gelu tanh", [](auto& x) { return of::gelu(x, "tanh"); }},
      {"floor", [](auto& x) { return x.floor(); }},
      {"isnan", [](auto& x) { return x.isnan(); }},
      {"sin", [](auto& x) { return x.sin(); }},
      {"reciprocal", [](auto& x) { return x.reciprocal(); }},
  };
  const std::vector<std::pair<const char*, B>> binary = {
      {"add", [](auto& a, auto& b) { return a + b; }},
      {"sub", [](auto& a, auto& b) { return a - b; }},
      {"mul", [](auto& a, auto& b) { return a * b; }},
      {"div", [](auto& a, auto& b) { return a / b; }},
      {"maximum", [](auto& a, auto& b) { return of::maximum(a, b); }},
      {"pow", [](auto& a, auto& b) { return a.abs().pow(b); }},
      {"atan2", [](auto& a, auto& b) { return of::atan2(a, b); }},
      {"lt", [](auto& a, auto& b) { return a < b; }},
      {"eq", [](auto& a, auto& b) { return a == b; }},
      {"where", [](auto& a, auto& b) { return of::where(a > b, a, b); }},
  };
  for (auto dt : {of::kFloat32, of::kFloat64}) {
    const of::Tensor x = of::randn({6, 33}).to(dt);
    const of::Tensor xs = of::randn({33, 6}).to(dt).t();  // strided
    const of::Tensor y = of::randn({33}).to(dt);          // broadcast
    const double tol = dt == of::kFloat32 ? 1e-5 : 1e-12;
    for (const auto& row : unary) {  // (no structured bindings: clang 14 cannot capture them)
      const char* name = row.first;
      const U& f = row.second;
      INFO(name, " ", of::dtype_name(dt));
      for (const of::Tensor& in : {x, xs}) check_close(f(in.to(kCuda0)), f(in), tol, tol);
    }
    for (const auto& row : binary) {
      const char* name = row.first;
      const B& f = row.second;
      INFO(name, " ", of::dtype_name(dt));
      check_close(f(x.to(kCuda0), xs.to(kCuda0)), f(x, xs), tol, tol);
      check_close(f(x.to(kCuda0), y.to(kCuda0)), f(x, y), tol, tol);
    }
  }
  // integers, 16-bit floats (computed in float, as on the CPU), bool outputs
  const of::Tensor i = of::randint(-50, 50, {5, 7}, of::kInt64);
  check_same_values((i * i - i).to(kCuda0).cpu(), (i * i - i));
  check_same_values(((i.to(kCuda0) * i.to(kCuda0)) - i.to(kCuda0)).cpu(), i * i - i);
  const of::Tensor h = of::randn({8, 9}).to(of::kBFloat16);
  check_close((h.to(kCuda0) * h.to(kCuda0)).tanh(), (h * h).tanh(), 1e-2, 1e-2);
  // integer division has no device-side zero check: refused clearly
  const std::string msg = error_of([&] { of::div(i.to(kCuda0), i.to(kCuda0), "floor"); });
  CHECK(msg.find("not supported on CUDA") != std::string::npos);
}

TEST_CASE("cuda: the TF32 switches (off by default; float32 matmul within TF32 rounding when on)") {
  CHECK_FALSE(of::globalContext().allowTF32CuBLAS());
  CHECK_FALSE(of::globalContext().allowTF32CuDNN());
  of::globalContext().setAllowTF32CuDNN(true);
  CHECK(of::globalContext().allowTF32CuDNN());
  of::globalContext().setAllowTF32CuDNN(false);
  if (!of::cuda::is_available()) {
    MESSAGE("no CUDA device: the matmul part skipped");
    return;
  }
  const of::Tensor a = of::randn({256, 256}), b = of::randn({256, 256});
  const of::Tensor exact = of::mm(a, b);
  check_close(of::mm(a.to(kCuda0), b.to(kCuda0)), exact, 1e-4, 1e-4);
  of::globalContext().setAllowTF32CuBLAS(true);
  const of::Tensor tf32 = of::mm(a.to(kCuda0), b.to(kCuda0)).cpu();
  of::globalContext().setAllowTF32CuBLAS(false);
  CHECK(of::allclose(tf32, exact, 1e-2, 1e-1));  // 10-bit mantissas
}

// ---------------------------------------------------------------- pinned memory

TEST_CASE("cuda: pin_memory without a device is a clear error; plain tensors are not pinned") {
  const of::Tensor x = of::arange(6, of::kFloat32).view({2, 3});
  CHECK_FALSE(x.is_pinned());
  // a CPU-to-CPU move with non_blocking is the same tensor
  CHECK(x.to(of::Device(of::kCPU), true).is_same(x));
  if (of::cuda::is_available()) {
    const std::string msg = error_of([] { (void)of::zeros({2}, kCuda0).pin_memory(); });
    CHECK(msg.find("[pin_memory] expected a CPU tensor") != std::string::npos);
    return;
  }
  const std::string msg = error_of([&] { (void)x.pin_memory(); });
  INFO("error: " << msg);
  CHECK(msg.find("[cuda] not available") != std::string::npos);
  CHECK(msg.find("pinned host memory") != std::string::npos);
  const std::string msg2 = error_of([&] { (void)x.to(of::Device("cuda:0"), true); });
  CHECK(msg2.find("cuda") != std::string::npos);
}

TEST_CASE("cuda: pinned host memory and non_blocking host-to-device copies") {
  SKIP_WITHOUT_CUDA();
  const of::Tensor x = of::randn({64, 33}).t();  // not contiguous: pin_memory lays it out
  const of::Tensor p = x.pin_memory();
  CHECK(p.is_pinned());
  CHECK(p.is_contiguous());
  CHECK(p.pin_memory().is_same(p));
  CHECK(of::equal(p, x));
  // queued on the current stream: a kernel queued after it sees the data
  const of::Tensor g = p.to(kCuda0, true);
  const of::Tensor y = (g * 2).cpu();
  CHECK(of::equal(y, x * 2));
  // pageable memory with non_blocking: a blocking copy, the same values
  CHECK(of::equal(x.to(kCuda0, true).cpu(), x));
  // device-to-host with non_blocking returns when complete
  CHECK(of::equal(g.to(of::Device(of::kCPU), true), x));
  // many copies in a row from pinned blocks freed and reused while copies are in flight
  for (int i = 0; i < 20; ++i) {
    const of::Tensor src = of::full({1024}, double(i)).pin_memory();
    const of::Tensor dst = src.to(kCuda0, true);
    CHECK(dst.sum().item<double>() == 1024.0 * i);
  }
}

// ---------------------------------------------------------------- 16-bit kernels

TEST_CASE(
    "cuda: the module marks the kernels that take float16/bfloat16 (no widening on the GPU)") {
  (void)of::cuda::is_available();  // loads the module where it was built
  if (of::find_op("mm").cuda == nullptr) {
    MESSAGE("the CUDA module is not loaded here: skipped");
    return;
  }
  // NOTE [Reduced-precision convolutions], NOTE [Linear on cuBLASLt]
  for (const char* op :
       {"conv2d", "conv3d", "conv_transpose2d", "conv2d_backward_weight", "linear"})
    CHECK_MESSAGE(of::find_op(op).cuda_16bit, op);
  CHECK_FALSE(of::find_op("batch_norm").cuda_16bit);  // still widened by dispatch
  // on the CPU the same ops are widened (their CPU kernels compute in float32/float64)
  const of::TensorList cpu_half{of::ones({1, 1, 3, 3}, of::kFloat16),
                                of::ones({1, 1, 1, 1}, of::kFloat16)};
  CHECK(of::autocast_detail::needs_widening(of::find_op("conv2d"), cpu_half));
}

TEST_CASE("cuda: float16/bfloat16 convolutions and linear run in their dtype and match float32") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(9);
  const of::Tensor x = of::randn({2, 3, 9, 9}), w = of::randn({4, 3, 3, 3}) * 0.2,
                   b = of::randn({4});
  const of::Tensor ref = of::conv2d(x, w, b, {1, 1}, {1, 1}).to(of::kFloat64);
  for (of::ScalarType dt : {of::kFloat16, of::kBFloat16}) {
    INFO("dtype ", of::dtype_name(dt));
    const of::Tensor y =
        of::conv2d(x.to(kCuda0, dt), w.to(kCuda0, dt), b.to(kCuda0, dt), {1, 1}, {1, 1});
    CHECK(y.dtype() == dt);
    check_close(y.to(of::kFloat64), ref, dt == of::kFloat16 ? 2e-2 : 1e-1);
    const of::Tensor a = of::randn({5, 7}), m = of::randn({6, 7}), c = of::randn({6});
    const of::Tensor l = of::linear(a.to(kCuda0, dt), m.to(kCuda0, dt), c.to(kCuda0, dt));
    CHECK(l.dtype() == dt);
    check_close(l.to(of::kFloat64), of::linear(a, m, c).to(of::kFloat64),
                dt == of::kFloat16 ? 2e-2 : 1e-1);
  }
}

TEST_CASE(
    "cuda: CPU 0-d tensors are operands of elementwise ops on CUDA tensors; other mixes are "
    "errors") {
  SKIP_WITHOUT_CUDA();
  // NOTE [CPU scalars beside device tensors] (the first GPU run: AdamW's and BatchNorm's CPU
  // scalars stopped every CUDA training step)
  of::manual_seed(4);
  const of::Tensor x = of::randn({3, 4}), s = of::full({}, 2.5);
  check_close(x.to(kCuda0) * s, x * s, 0);
  check_close(s - x.to(kCuda0), s - x, 0);
  of::Tensor y = x.to(kCuda0);
  y.mul_(s);
  check_close(y, x * s, 0);
  const of::Tensor sg = of::full({}, 1.5).set_requires_grad(true);
  (x.to(kCuda0) * sg).sum().backward();
  REQUIRE(sg.grad().defined());
  CHECK(sg.grad().is_cpu());
  CHECK(sg.grad().item<double>() == doctest::Approx(x.sum().item<double>()).epsilon(1e-5));
  CHECK(error_of([&] { (void)(x.to(kCuda0) + of::ones({1})); }).find("same device") !=
        std::string::npos);
  CHECK(error_of([&] {
          of::Tensor c = of::zeros({});
          c.add_(x.to(kCuda0).sum());
        }).find("same device") != std::string::npos);
  // the modules and optimizers whose steps hold CPU scalars
  of::nn::BatchNorm2d bn(3);
  bn->to(kCuda0);
  (void)bn(of::randn({2, 3, 4, 4}).to(kCuda0));
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);
  of::Tensor pc = of::randn({5}).set_requires_grad(true);
  of::Tensor pg = pc.detach().to(kCuda0).set_requires_grad(true);
  of::optim::AdamW oc({pc}, of::optim::AdamWOptions(1e-2));
  of::optim::AdamW og({pg}, of::optim::AdamWOptions(1e-2));
  for (int i = 0; i < 3; ++i) {
    oc.zero_grad();
    og.zero_grad();
    (pc * pc).sum().backward();
    (pg * pg).sum().backward();
    oc.step();
    og.step();
  }
  check_close(pg.detach(), pc.detach(), 1e-6);
}

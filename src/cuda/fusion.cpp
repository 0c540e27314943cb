// fusion.cpp: NVRTC compilation, caching and launch of the fused elementwise kernels that
// trace/fusion_codegen.cpp generates (they share fused_kernel_abi.h). NOTE [Fused CUDA kernels]:
//  - Bitwise the unfused kernels: the source holds the same functors (NOTE [NVRTC prelude]) and
//    NVRTC is the front end and optimizer of nvcc, so it must be the toolkit the module was built
//    with (major.minor; a different libnvrtc is refused and the groups run unfused), with nvcc's
//    defaults (-fmad=true, IEEE division and square root, no flush to zero) and for the code the
//    module's fatbin would run on the device: sm_80 SASS on 8.x, sm_90 on 9.0, else compute_80
//    PTX that the driver compiles (the gencodes of src/cuda/meson.build).
//  - One cache per process, keyed by the source's FNV-1a hash and the target, holding the source
//    to rule out collisions; entries (and their cudaLibrary_t) live until exit, as the module's
//    own kernels do. Compilation holds the cache's lock: concurrent first uses of one group
//    compile it once.
//  - The kernel is loaded into the device's context when compiled (cudaFuncGetAttributes), so
//    that a CUDA Graph capture never loads code; launches are cudaLaunchKernel on the caller's
//    stream (the plan passes the current stream; never the legacy default stream).
#include "cuda/fusion.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <nvrtc.h>

#include "cuda/cuda_check.h"
#include "cuda/module.h"
#include "fused_kernel_abi.h"

namespace oneflow::cuda_module {

struct FusedKernel {
  std::string source, name;
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
};

namespace {

// The code the module's own kernels run as on a device of `sm_arch`: {arch, sass}.
std::pair<int, bool> target_of(int sm_arch) {
  if (sm_arch / 10 == 8) return {80, true};
  if (sm_arch == 90) return {90, true};
  return {80, false};
}

// "" when the loaded NVRTC is the toolkit this module was built with, else why not.
std::string nvrtc_mismatch() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "nvrtcVersion failed";
  const int built = CUDART_VERSION;  // 1000 * major + 10 * minor
  if (major * 1000 + minor * 10 != built)
    return fmt::format(
        "NVRTC {}.{} is not the toolkit the module was built with ({}.{}): its "
        "kernels could round differently from the unfused ones",
        major, minor, built / 1000, built % 1000 / 10);
  return "";
}

struct Program {
  nvrtcProgram prog = nullptr;
  ~Program() {
    if (prog) nvrtcDestroyProgram(&prog);
  }
};

std::string log_of(nvrtcProgram prog) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1) return "";
  std::string log(n, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Compiles for `arch`, as SASS (sm_) or PTX (compute_). On failure returns false with the log
// (or NVRTC's error) in `log`; on success `log` holds any warnings.
bool compile(const std::string& source, const std::string& name, int arch, bool sass,
             std::vector<char>* code, std::string* log) {
  Program p;
  nvrtcResult r =
      nvrtcCreateProgram(&p.prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    *log = fmt::format("nvrtcCreateProgram: {}", nvrtcGetErrorString(r));
    return false;
  }
  const std::string gpu = fmt::format("--gpu-architecture={}_{}", sass ? "sm" : "compute", arch);
  const char* opts[] = {gpu.c_str(),       "-default-device",  "--std=c++20", "--fmad=true",
                        "--prec-div=true", "--prec-sqrt=true", "--ftz=false"};
  r = nvrtcCompileProgram(p.prog, int(std::size(opts)), opts);
  *log = log_of(p.prog);
  if (r != NVRTC_SUCCESS) {
    if (log->empty()) *log = nvrtcGetErrorString(r);
    return false;
  }
  if (!code) return true;
  size_t n = 0;
  r = sass ? nvrtcGetCUBINSize(p.prog, &n) : nvrtcGetPTXSize(p.prog, &n);
  if (r == NVRTC_SUCCESS) {
    code->resize(n);
    r = sass ? nvrtcGetCUBIN(p.prog, code->data()) : nvrtcGetPTX(p.prog, code->data());
  }
  if (r != NVRTC_SUCCESS) {
    *log = fmt::format("reading the {}: {}", sass ? "CUBIN" : "PTX", nvrtcGetErrorString(r));
    return false;
  }
  return true;
}

struct Cache {
  std::mutex mu;
  std::multimap<std::pair<uint64_t, int>, std::unique_ptr<FusedKernel>> entries;  // (hash, target)
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: kernels may launch during static teardown
  return *c;
}

// Loads the kernel into the current device's context now (never during a capture) and checks
// that it runs blocks of kFusedThreads.
void load_here(const FusedKernel& k) {
  cudaFuncAttributes attrs{};
  OF_CUDA_CHECK(cudaFuncGetAttributes(&attrs, reinterpret_cast<const void*>(k.kernel)));
  OF_CHECK(attrs.maxThreadsPerBlock >= fused_abi::kFusedThreads,
           "[jit.fuse] fused group {} runs at most {} threads per block, the launch needs {}",
           k.name, attrs.maxThreadsPerBlock, fused_abi::kFusedThreads);
}

}  // namespace

const FusedKernel* compile_fused(const std::string& source, const std::string& name, int sm_arch) {
  const auto [arch, sass] = target_of(sm_arch);
  const std::pair<uint64_t, int> key{fused_abi::fnv1a64(source), sass ? arch : -arch};
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto [it, end] = c.entries.equal_range(key); it != end; ++it)
    if (it->second->source == source && it->second->name == name) {
      load_here(*it->second);  // another device's context may not hold it yet
      return it->second.get();
    }
  if (std::string why = nvrtc_mismatch(); !why.empty())
    fail("[jit.fuse] NVRTC cannot compile fused group {}: {}", name, why);
  std::vector<char> code;
  std::string log;
  if (!compile(source, name, arch, sass, &code, &log))
    fail("[jit.fuse] NVRTC failed to compile fused group {}: {}", name, log);
  auto k = std::make_unique<FusedKernel>();
  k->source = source;
  k->name = name;
  OF_CUDA_CHECK(
      cudaLibraryLoadData(&k->library, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  const cudaError_t got = cudaLibraryGetKernel(&k->kernel, k->library, name.c_str());
  if (got != cudaSuccess) {
    cudaLibraryUnload(k->library);
    throw_cuda_error(got, "cudaLibraryGetKernel", __FILE__, __LINE__);
  }
  load_here(*k);
  const FusedKernel* out = k.get();
  c.entries.emplace(key, std::move(k));
  return out;
}

void launch_fused(const FusedKernel* kernel, const void* params, size_t param_bytes, int64_t numel,
                  cudaStream_t stream) {
  OF_CHECK(kernel && params && param_bytes % 8 == 0,
           "[jit.fuse] internal error: a fused launch without a kernel or parameters");
  if (numel <= 0) return;
  const int64_t t = fused_abi::kFusedThreads;
  const unsigned blocks =
      unsigned(std::max<int64_t>(1, std::min<int64_t>((numel + t - 1) / t, 1 << 16)));
  void* args[] = {const_cast<void*>(params)};
  note_launch(kernel->name.c_str());
  const cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(kernel->kernel),
                                           dim3(blocks), dim3(unsigned(t)), args, 0, stream);
  if (err != cudaSuccess) throw_cuda_error(err, kernel->name.c_str(), __FILE__, __LINE__);
  after_launch(kernel->name.c_str());
}

std::string nvrtc_check(const std::string& source, const std::string& name, int sm_arch) {
  std::string log;
  if (!compile(source, name, sm_arch, /*sass=*/false, nullptr, &log) && log.empty())
    log = "NVRTC failed without a log";
  return log;
}

int device_arch(int device) {
  const int d = resolve_device(device);
  int major = 0, minor = 0;
  OF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d));
  OF_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d));
  return major * 10 + minor;
}

std::string fused_check(const std::string& source, const std::string& name, int sm_arch) {
  return nvrtc_check(source, name, sm_arch);
}

void* fused_compile(const std::string& source, const std::string& name, int device) {
  const int d = resolve_device(device);
  DeviceGuard guard(d);
  return const_cast<FusedKernel*>(compile_fused(source, name, device_arch(d)));
}

void fused_launch(void* kernel, const void* params, size_t param_bytes, int64_t numel, int device) {
  const int d = resolve_device(device);
  DeviceGuard guard(d);
  launch_fused(static_cast<const FusedKernel*>(kernel), params, param_bytes, numel,
               current_stream_of(d));
}

}  // namespace oneflow::cuda_module

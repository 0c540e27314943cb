// runtime.cpp: CUDA device queries, synchronization and byte copies; the error helpers behind
// OF_CUDA_CHECK / OF_CUBLAS_CHECK.
#include <cstring>
#include <string>

#include "cuda/module.h"
#include "cuda/cuda_check.h"

namespace oneflow::cuda_module {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear the (non-sticky) error so later checks do not report it again
  fail("[cuda] {} failed: {}: {} ({}:{})", expr, cudaGetErrorName(err), cudaGetErrorString(err),
       file, line);
}

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  fail("[cuda] {} failed: {}: {} ({}:{})", expr, cublasGetStatusName(status),
       cublasGetStatusString(status), file, line);
}

namespace {

// The device count, probed once. No driver or no device is "0 devices", never an error here.
struct Probe {
  int count = 0;
  cudaError_t err = cudaSuccess;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    r.err = cudaGetDeviceCount(&r.count);
    if (r.err != cudaSuccess) {
      cudaGetLastError();
      r.count = 0;
    }
    return r;
  }();
  return p;
}

}  // namespace

int resolve_device(int index) {
  const Probe& p = probe();
  if (p.count == 0) {
    if (p.err != cudaSuccess)
      fail("[cuda] not available: no CUDA device (cudaGetDeviceCount failed: {}: {})",
           cudaGetErrorName(p.err), cudaGetErrorString(p.err));
    fail("[cuda] not available: no CUDA device (cudaGetDeviceCount found 0 devices)");
  }
  if (index < 0) {
    int current = 0;
    OF_CUDA_CHECK(cudaGetDevice(&current));
    return current;
  }
  OF_CHECK(index < p.count, "[cuda] device cuda:{} does not exist ({} CUDA device{} visible)",
           index, p.count, p.count == 1 ? " is" : "s are");
  return index;
}

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  OF_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    OF_CUDA_CHECK(cudaSetDevice(device));
    prev_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) cudaSetDevice(prev_);  // destructors must not throw; the set cannot fail here
}

bool is_available() { return probe().count > 0; }
std::string unavailable_reason() {
  const Probe& p = probe();
  if (p.count > 0) return {};
  if (p.err != cudaSuccess)
    return fmt::format("no CUDA device (cudaGetDeviceCount failed: {}: {})",
                       cudaGetErrorName(p.err), cudaGetErrorString(p.err));
  return "no CUDA device (cudaGetDeviceCount found 0 devices)";
}
int device_count() { return probe().count; }
int current_device() { return resolve_device(-1); }

void synchronize(int device) {
  DeviceGuard guard(resolve_device(device));
  refuse_if_capturing("torch.cuda.synchronize (of::cuda::synchronize)");
  check_async(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

namespace {
// Whether the driver knows p as page-locked host memory (ours or registered by anyone).
bool page_locked(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return true;  // unknown: treat it as DMA-read (the copy waits)
  }
  return a.type == cudaMemoryTypeHost;
}
}  // namespace

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) {
  if (n == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  refuse_if_capturing(dst_dev.is_cpu() ? "a copy to the host (item(), to(kCPU))"
                                       : "a blocking copy to the device");
  // On the current stream of the device involved (NOTE [CUDA streams]), then a sync of that
  // stream: "returns after the copy is complete", and work queued before on the stream (the
  // kernel that wrote src) is ordered before the copy.
  if (src_dev.is_cpu() || dst_dev.is_cpu()) {
    const int d = resolve_device(src_dev.is_cpu() ? dst_dev.index() : src_dev.index());
    DeviceGuard guard(d);
    cudaStream_t s = current_stream_of(d);
    OF_CUDA_CHECK(cudaMemcpyAsync(
        dst, src, n, src_dev.is_cpu() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
    // NOTE [Pageable uploads]: from pageable host memory the driver stages the bytes before
    // cudaMemcpyAsync returns, so the source is free at once and stream order covers the
    // reader: no wait. (Waiting here drained the GPU at every scalar an op moved to the device:
    // the first GPU run's eager steps.) Page-locked sources are read by DMA later: those wait.
    if (src_dev.is_cpu() && !page_locked(src)) return;
    check_async(cudaStreamSynchronize(s), "cudaStreamSynchronize (a copy)");
    return;
  }
  const int s = resolve_device(src_dev.index()), d = resolve_device(dst_dev.index());
  if (s == d) {
    DeviceGuard guard(s);
    cudaStream_t st = current_stream_of(s);
    OF_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, st));
    check_async(cudaStreamSynchronize(st), "cudaStreamSynchronize (a copy)");
    return;
  }
  // between devices: the source's writer must be done first, then the copy on dst's stream
  {
    DeviceGuard guard(s);
    check_async(cudaStreamSynchronize(current_stream_of(s)), "cudaStreamSynchronize (a copy)");
  }
  DeviceGuard guard(d);
  cudaStream_t st = current_stream_of(d);
  OF_CUDA_CHECK(cudaMemcpyPeerAsync(dst, d, src, s, n, st));
  check_async(cudaStreamSynchronize(st), "cudaStreamSynchronize (a copy)");
}

}  // namespace oneflow::cuda_module

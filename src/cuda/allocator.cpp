// allocator.cpp: the caching CUDA allocator, one pool per device: the policy of
// cuda/caching_pool.h (NOTE [CUDA caching allocator]) over cudaMalloc/cudaFree and events. A
// block is allocated on the current stream of its device (NOTE [CUDA streams]). Pools are never
// destroyed: tensors in static storage may outlive any destructor we could run. Also the pinned
// host pool (cuda/host_pool.h, NOTE [Pinned host memory]) over cudaHostAlloc, and the
// asynchronous copies that use it.
#include <memory>
#include <vector>

#include "cuda/caching_pool.h"
#include "cuda/cuda_check.h"
#include "cuda/host_pool.h"
#include "cuda/module.h"

namespace oneflow::cuda_module {
namespace {

// What the device pool and the pinned host pool do alike with the events of their streams.
struct CudaEvents {
  using Event = cudaEvent_t;
  bool done(const Event& e) { return completed(cudaEventQuery(e), "cudaEventQuery"); }
  void wait(const Event& e) { check_async(cudaEventSynchronize(e), "cudaEventSynchronize"); }
  void destroy(const Event& e) {
    if (cudaEventDestroy(e) != cudaSuccess) cudaGetLastError();
  }
};

struct CudaDevice : CudaEvents {
  using Stream = cudaStream_t;
  int device;

  void* malloc(size_t n) {
    DeviceGuard guard(device);
    void* p = nullptr;
    // NOTE [CUDA Graph capture]: a capture in thread-local mode refuses cudaMalloc on its thread
    // (cudaErrorStreamCaptureUnsupported, which also invalidates the capture: seen on the first
    // GPU run), yet the private pool of a capture grows by cudaMalloc. The call itself puts no
    // work in the stream, so it runs in relaxed mode, as PyTorch's allocator does.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    const cudaError_t err = cudaMalloc(&p, n);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaMalloc", __FILE__, __LINE__);
    return p;
  }
  void free(void* p) {  // also from a storage's deleter (through release): never throws
    int prev = -1;
    if (cudaGetDevice(&prev) == cudaSuccess && prev != device) cudaSetDevice(device);
    if (cudaFree(p) != cudaSuccess) cudaGetLastError();
    if (prev >= 0 && prev != device) cudaSetDevice(prev);
  }
  Event record(Stream s) {
    DeviceGuard guard(device);
    cudaEvent_t e = nullptr;
    OF_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    const cudaError_t err = cudaEventRecord(e, s);
    if (err != cudaSuccess) {
      cudaEventDestroy(e);
      throw_cuda_error(err, "cudaEventRecord", __FILE__, __LINE__);
    }
    return e;
  }
  void synchronize() {
    DeviceGuard guard(device);
    check_async(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  size_t free_bytes() {
    DeviceGuard guard(device);
    size_t f = 0, total = 0;
    if (cudaMemGetInfo(&f, &total) != cudaSuccess) cudaGetLastError();
    return f;
  }
};

using Pool = cuda_pool::CachingPool<CudaDevice>;

Pool& pool(int device) {  // `device` was validated by resolve_device
  static std::vector<Pool*>* pools = [] {
    auto* v = new std::vector<Pool*>();
    for (int d = 0; d < device_count(); ++d) v->push_back(new Pool(CudaDevice{{}, d}));
    return v;
  }();
  return *(*pools)[size_t(device)];
}

// Page-locked host blocks; a use is an event on the stream (of its device) of an async copy.
struct CudaHost : CudaEvents {
  struct Stream {
    cudaStream_t stream;
    int device;
  };
  void* malloc(size_t n) {
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, n, cudaHostAllocDefault);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaHostAlloc", __FILE__, __LINE__);
    return p;
  }
  void free(void* p) {
    if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
  }
  Event record(Stream s) { return CudaDevice{{}, s.device}.record(s.stream); }
};

cuda_pool::HostPool<CudaHost>& host_pool() {
  static CudaHost* host = new CudaHost();
  static auto* p = new cuda_pool::HostPool<CudaHost>(*host);  // leaked, as the device pools
  return *p;
}

}  // namespace

Storage allocate_pinned(size_t nbytes) {
  resolve_device(-1);  // a device (and so a context) exists
  void* data = nbytes ? host_pool().allocate(nbytes) : nullptr;
  try {
    auto s = std::make_shared<StorageImpl>(data, nbytes, Device(kCPU), [](void* ptr) {
      if (ptr) host_pool().free(ptr);
    });
    s->pinned = true;
    return s;
  } catch (...) {
    if (data) host_pool().free(data);
    throw;
  }
}

bool is_pinned(const void* p) { return p && host_pool().owns(p); }

// NOTE [Asynchronous copies]: queued on the current stream of the device involved, with no
// host wait, when the host side is pinned (the driver copies page-locked memory by DMA while the
// host goes on; the pool keeps the block from reuse until the copy's event completes) or both
// sides are on one device (stream order is enough). Anything else (pageable host memory, two
// devices, a CUDA Graph capture) takes copy_bytes, which returns after the copy.
void copy_bytes_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) {
  if (n == 0) return;
  const bool h2d = src_dev.is_cpu() && dst_dev.is_cuda();
  const bool d2h = src_dev.is_cuda() && dst_dev.is_cpu();
  const void* host = h2d ? src : d2h ? dst : nullptr;
  const bool one_device = src_dev.is_cuda() && dst_dev.is_cuda() &&
                          resolve_device(src_dev.index()) == resolve_device(dst_dev.index());
  if (capturing() || !((host && is_pinned(host)) || one_device))
    return copy_bytes(dst, dst_dev, src, src_dev, n);
  const int d = resolve_device(h2d ? dst_dev.index() : src_dev.index());
  DeviceGuard guard(d);
  cudaStream_t s = current_stream_of(d);
  OF_CUDA_CHECK(cudaMemcpyAsync(dst, src, n,
                                h2d   ? cudaMemcpyHostToDevice
                                : d2h ? cudaMemcpyDeviceToHost
                                      : cudaMemcpyDeviceToDevice,
                                s));
  if (host) host_pool().record_use(host, CudaHost::Stream{s, d});
}

Storage allocate_storage(size_t nbytes, int device) {
  const int d = resolve_device(device);
  if (nbytes == 0) {
    pool(d);  // nothing to allocate, but the device was checked
    return std::make_shared<StorageImpl>(nullptr, 0, Device(kCUDA, d), nullptr);
  }
  Pool* p = &pool(d);
  void* data = p->allocate(nbytes, current_stream_of(d));
  try {
    return std::make_shared<StorageImpl>(data, nbytes, Device(kCUDA, d),
                                         [p](void* ptr) { p->release(ptr); });
  } catch (...) {
    p->release(data);
    throw;
  }
}

void record_stream(void* ptr, int device, void* stream) {
  if (!ptr) return;  // an empty storage
  pool(resolve_device(device)).record_stream(ptr, static_cast<cudaStream_t>(stream));
}

void begin_pool(int device, void* stream, int id) {
  pool(resolve_device(device)).begin_pool(static_cast<cudaStream_t>(stream), id);
}
void end_pool(int device, void* stream) {
  pool(resolve_device(device)).end_pool(static_cast<cudaStream_t>(stream));
}
void release_pool(int device, int id) { pool(resolve_device(device)).release_pool(id); }

memory::Stats stats(int device) {
  const cuda_pool::PoolStats s = pool(resolve_device(device)).stats();
  memory::Stats r;
  r.allocated = s.allocated;
  r.reserved = s.reserved;
  r.peak_allocated = s.peak_allocated;
  r.num_allocs = s.num_allocs;
  r.num_cache_hits = s.num_cache_hits;
  return r;
}
void reset_peak_stats(int device) { pool(resolve_device(device)).reset_peak(); }
void empty_cache(int device) { pool(resolve_device(device)).empty_cache(); }

}  // namespace oneflow::cuda_module

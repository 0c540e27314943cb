// stream.cpp: streams and events of the CUDA module.
// NOTE [CUDA streams]: every kernel, library call and copy of the module runs on the current
// stream of its device, never on the legacy default stream (work there cannot be captured into
// a CUDA Graph and serializes with every other stream). Per device there is a default stream
// (created non-blocking on first use) and a pool of 8 low- and 8 high-priority streams handed
// out round robin (getStreamFromPool). The current stream is per thread and per device, the
// device's default stream until set (setCurrentCUDAStream, CUDAStreamGuard). Streams are never
// destroyed: kernels queued by static objects may run until the process exits.
#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/module.h"

namespace oneflow::cuda_module {
namespace {

constexpr int kMaxDevices = 64;
constexpr int kPoolSize = 8;

struct DeviceStreams {
  std::once_flag once;
  cudaStream_t default_stream = nullptr;
  std::array<cudaStream_t, kPoolSize> low{}, high{};
  std::atomic<uint32_t> next_low{0}, next_high{0};
};

DeviceStreams& streams_of(int device) {  // `device` was validated by resolve_device
  static auto* all = new std::array<DeviceStreams, kMaxDevices>();
  OF_CHECK(device < kMaxDevices, "[cuda] device cuda:{}: at most {} devices are supported", device,
           kMaxDevices);
  DeviceStreams& s = (*all)[size_t(device)];
  std::call_once(s.once, [&] {
    DeviceGuard guard(device);
    int least = 0, greatest = 0;  // greatest is the highest priority (numerically lowest)
    OF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    OF_CUDA_CHECK(cudaStreamCreateWithFlags(&s.default_stream, cudaStreamNonBlocking));
    for (int i = 0; i < kPoolSize; ++i) {
      OF_CUDA_CHECK(cudaStreamCreateWithPriority(&s.low[size_t(i)], cudaStreamNonBlocking, least));
      OF_CUDA_CHECK(
          cudaStreamCreateWithPriority(&s.high[size_t(i)], cudaStreamNonBlocking, greatest));
    }
  });
  return s;
}

thread_local std::array<cudaStream_t, kMaxDevices> t_current{};  // null: the device's default

}  // namespace

cudaStream_t current_stream_of(int device) {
  const int d = resolve_device(device);
  cudaStream_t s = t_current[size_t(d)];
  return s ? s : streams_of(d).default_stream;
}

void* current_stream(int device) { return current_stream_of(device); }
void* default_stream(int device) { return streams_of(resolve_device(device)).default_stream; }

void* pool_stream(int device, bool high_priority) {
  DeviceStreams& s = streams_of(resolve_device(device));
  auto& next = high_priority ? s.next_high : s.next_low;
  const uint32_t i = next.fetch_add(1) % kPoolSize;
  return high_priority ? s.high[i] : s.low[i];
}

void set_current_stream(int device, void* stream) {
  const int d = resolve_device(device);
  OF_CHECK(stream != nullptr,
           "[cuda] setCurrentCUDAStream: the legacy default stream is not used by oneflow (take "
           "getDefaultCUDAStream() or a stream from getStreamFromPool())");
  t_current[size_t(d)] = static_cast<cudaStream_t>(stream);
}

bool stream_query(int device, void* stream) {
  DeviceGuard guard(resolve_device(device));
  return completed(cudaStreamQuery(static_cast<cudaStream_t>(stream)), "cudaStreamQuery");
}

void stream_synchronize(int device, void* stream) {
  DeviceGuard guard(resolve_device(device));
  refuse_if_capturing("a stream synchronize");
  check_async(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

void* event_create(int device, bool timing) {
  DeviceGuard guard(resolve_device(device));
  cudaEvent_t e = nullptr;
  OF_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

void event_destroy(void* event) noexcept {
  if (event && cudaEventDestroy(static_cast<cudaEvent_t>(event)) != cudaSuccess) cudaGetLastError();
}

void event_record(void* event, int device, void* stream) {
  DeviceGuard guard(resolve_device(device));
  OF_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

bool event_query(void* event) {
  return completed(cudaEventQuery(static_cast<cudaEvent_t>(event)), "cudaEventQuery");
}

void event_synchronize(void* event) {
  refuse_if_capturing("an event synchronize");
  check_async(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}

void event_block(void* event, int device, void* stream) {
  DeviceGuard guard(resolve_device(device));
  OF_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  OF_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

// ---- asynchronous errors
// NOTE [Asynchronous CUDA errors]: a kernel that faults reports it at some later call. The core
// tells the module the name of each op whose CUDA kernel it runs (note_launch); a sticky or
// asynchronous error found at a synchronization is re-raised naming the ops launched on the
// device since the previous successful synchronization (the culprit is among them; with
// OF_CUDA_LAUNCH_BLOCKING=1 every launch synchronizes and the culprit is named alone).
namespace {
struct LaunchLog {
  std::mutex mu;
  std::vector<const char*> ops;  // since the last clean synchronization, the last 16
};
LaunchLog& launch_log() {
  static auto* log = new LaunchLog();
  return *log;
}
bool launch_blocking() {
  static const bool on = [] {
    const char* v = std::getenv("OF_CUDA_LAUNCH_BLOCKING");
    return v && v[0] == '1';
  }();
  return on;
}
}  // namespace

bool completed(cudaError_t err, const char* where) {
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  check_async(err, where);
  return true;
}

void note_launch(const char* op) {
  LaunchLog& l = launch_log();
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.ops.size() == 16) l.ops.erase(l.ops.begin());
  l.ops.push_back(op);
}

void after_launch(const char* op) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess)
    fail("[{}] cuda: the kernel launch failed: {}: {}", op, cudaGetErrorName(launch),
         cudaGetErrorString(launch));
  if (launch_blocking()) {
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
      fail("[{}] cuda: the kernel failed (OF_CUDA_LAUNCH_BLOCKING=1): {}: {}", op,
           cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

void check_launch(cudaError_t err, const char* op, ScalarType dtype) {
  if (err == cudaErrorInvalidValue) fail("[{}] cuda: unsupported dtype {}", op, dtype_name(dtype));
  if (err != cudaSuccess) throw_cuda_error(err, op, __FILE__, __LINE__);
  after_launch(op);
}

void check_async(cudaError_t err, const char* where) {
  LaunchLog& l = launch_log();
  std::lock_guard<std::mutex> lock(l.mu);
  if (err == cudaSuccess) {
    l.ops.clear();
    return;
  }
  cudaGetLastError();
  std::string ops;
  for (const char* o : l.ops) ops += ops.empty() ? o : fmt::format(", {}", o);
  l.ops.clear();
  fail(
      "[cuda] {} reported an error from earlier asynchronous work: {}: {}; the ops launched "
      "since the last synchronization: [{}] (run with OF_CUDA_LAUNCH_BLOCKING=1 to find the "
      "one that failed)",
      where, cudaGetErrorName(err), cudaGetErrorString(err), ops);
}

}  // namespace oneflow::cuda_module

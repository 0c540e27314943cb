// cuda.h: CUDA streams, events and memory (libtorch's c10::cuda / at::cuda names under
// of::cuda). The core links no CUDA library: streams and events are handles into the CUDA
// module (NOTE [CUDA streams] in src/cuda/stream.cpp); without a device every call raises
// "[cuda] not available: <why>". Include <cuda_runtime.h> first to get cudaStream_t
// conversions.
#pragma once
#include <cstddef>

#include "oneflow/runtime.h"
#include "oneflow/tensor.h"

namespace oneflow::cuda {

class CUDAStream {
 public:
  CUDAStream(int device_index, void* handle) : device_(device_index), handle_(handle) {}
  int device_index() const { return device_; }
  Device device() const { return Device(kCUDA, device_); }
  void* handle() const { return handle_; }  // the cudaStream_t
#if defined(CUDART_VERSION)
  cudaStream_t stream() const { return static_cast<cudaStream_t>(handle_); }
  operator cudaStream_t() const { return stream(); }
#endif
  bool query() const;        // true when all work queued on it has completed
  void synchronize() const;  // blocks the host until it has
  bool operator==(const CUDAStream& o) const {
    return device_ == o.device_ && handle_ == o.handle_;
  }
  bool operator!=(const CUDAStream& o) const { return !(*this == o); }

 private:
  int device_;
  void* handle_;
};

// The calling thread's current stream of a device (-1: the current device); its default stream
// until set. Every kernel, library call and copy oneflow issues on that device runs on it.
CUDAStream getCurrentCUDAStream(int device_index = -1);
// The device's own default stream (a non-blocking stream; oneflow never uses the legacy one).
CUDAStream getDefaultCUDAStream(int device_index = -1);
// One of the device's 8 pooled streams (round robin), high or low priority.
CUDAStream getStreamFromPool(bool isHighPriority = false, int device_index = -1);
void setCurrentCUDAStream(const CUDAStream& stream);

// Makes `stream` current on its device for the guard's lifetime.
class CUDAStreamGuard {
 public:
  explicit CUDAStreamGuard(const CUDAStream& stream);
  ~CUDAStreamGuard();
  CUDAStreamGuard(const CUDAStreamGuard&) = delete;
  CUDAStreamGuard& operator=(const CUDAStreamGuard&) = delete;
  CUDAStream original_stream() const { return original_; }
  CUDAStream current_stream() const { return current_; }

 private:
  CUDAStream original_, current_;
};

// An event, created on first record (on the device of the stream it is recorded on).
class CUDAEvent {
 public:
  explicit CUDAEvent(bool enable_timing = false) : timing_(enable_timing) {}
  ~CUDAEvent();
  CUDAEvent(CUDAEvent&& o) noexcept;
  CUDAEvent& operator=(CUDAEvent&& o) noexcept;
  CUDAEvent(const CUDAEvent&) = delete;
  CUDAEvent& operator=(const CUDAEvent&) = delete;
  void record();  // on the current stream of the current device
  void record(const CUDAStream& stream);
  void block(const CUDAStream& stream);            // later work on `stream` waits for this event
  bool query() const;                              // completed (true when never recorded)
  void synchronize() const;                        // blocks the host until it has
  float elapsed_time(const CUDAEvent& end) const;  // ms from this event to `end` (timing on)
  bool isCreated() const { return event_ != nullptr; }

 private:
  bool timing_;
  int device_ = -1;
  void* event_ = nullptr;
};

// The storage of `t` (a CUDA tensor) is also used by work on `stream`: when it is freed, the
// caching allocator waits for what was queued there by then before reusing the memory
// (libtorch's t.record_stream(s)).
void record_stream(const Tensor& t, const CUDAStream& stream);

// The caching allocator of a device (-1: the current one), libtorch's names.
size_t memory_allocated(int device_index = -1);
size_t max_memory_allocated(int device_index = -1);
size_t memory_reserved(int device_index = -1);
void reset_peak_memory_stats(int device_index = -1);
void empty_cache(int device_index = -1);
int current_device();

}  // namespace oneflow::cuda

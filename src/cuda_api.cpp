// cuda_api.cpp: of::cuda's streams, events and memory queries (include/oneflow/cuda.h), over the
// CUDA module's table (cuda_backend.h). Nothing here links CUDA.
#include "oneflow/cuda.h"

#include <atomic>

#include "oneflow/context.h"

#include "cuda_backend.h"

namespace oneflow {
namespace {
std::atomic<bool> g_tf32_cublas{false}, g_tf32_cudnn{false};
}  // namespace
bool Context::allowTF32CuBLAS() const { return g_tf32_cublas.load(std::memory_order_relaxed); }
void Context::setAllowTF32CuBLAS(bool allow) { g_tf32_cublas.store(allow); }
bool Context::allowTF32CuDNN() const { return g_tf32_cudnn.load(std::memory_order_relaxed); }
void Context::setAllowTF32CuDNN(bool allow) { g_tf32_cudnn.store(allow); }
Context& globalContext() {
  static Context c;
  return c;
}
}  // namespace oneflow

namespace oneflow::cuda {
namespace {
int resolve(int device_index) {
  return device_index >= 0 ? device_index : cuda_backend::current_device();
}
}  // namespace

bool CUDAStream::query() const { return cuda_backend::stream_query(device_, handle_); }
void CUDAStream::synchronize() const { cuda_backend::stream_synchronize(device_, handle_); }

CUDAStream getCurrentCUDAStream(int device_index) {
  const int d = resolve(device_index);
  return {d, cuda_backend::current_stream(d)};
}
CUDAStream getDefaultCUDAStream(int device_index) {
  const int d = resolve(device_index);
  return {d, cuda_backend::default_stream(d)};
}
CUDAStream getStreamFromPool(bool isHighPriority, int device_index) {
  const int d = resolve(device_index);
  return {d, cuda_backend::pool_stream(d, isHighPriority)};
}
void setCurrentCUDAStream(const CUDAStream& stream) {
  cuda_backend::set_current_stream(stream.device_index(), stream.handle());
}

CUDAStreamGuard::CUDAStreamGuard(const CUDAStream& stream)
    : original_(getCurrentCUDAStream(stream.device_index())), current_(stream) {
  setCurrentCUDAStream(stream);
}
CUDAStreamGuard::~CUDAStreamGuard() {
  try {
    setCurrentCUDAStream(original_);
  } catch (...) {  // cannot fail for a stream that was current a moment ago
  }
}

CUDAEvent::~CUDAEvent() { cuda_backend::event_destroy(event_); }
CUDAEvent::CUDAEvent(CUDAEvent&& o) noexcept
    : timing_(o.timing_), device_(o.device_), event_(o.event_) {
  o.event_ = nullptr;
}
CUDAEvent& CUDAEvent::operator=(CUDAEvent&& o) noexcept {
  if (this != &o) {
    cuda_backend::event_destroy(event_);
    timing_ = o.timing_;
    device_ = o.device_;
    event_ = o.event_;
    o.event_ = nullptr;
  }
  return *this;
}
void CUDAEvent::record() { record(getCurrentCUDAStream()); }
void CUDAEvent::record(const CUDAStream& stream) {
  if (!event_) {
    event_ = cuda_backend::event_create(stream.device_index(), timing_);
    device_ = stream.device_index();
  }
  OF_CHECK(device_ == stream.device_index(),
           "[CUDAEvent] record: the event was created on cuda:{}, the stream is on cuda:{}",
           device_, stream.device_index());
  cuda_backend::event_record(event_, device_, stream.handle());
}
void CUDAEvent::block(const CUDAStream& stream) {
  if (event_) cuda_backend::event_block(event_, stream.device_index(), stream.handle());
}
bool CUDAEvent::query() const { return !event_ || cuda_backend::event_query(event_); }
void CUDAEvent::synchronize() const {
  if (event_) cuda_backend::event_synchronize(event_);
}
float CUDAEvent::elapsed_time(const CUDAEvent& end) const {
  OF_CHECK(timing_ && end.timing_,
           "[CUDAEvent] elapsed_time: both events must be created with enable_timing=true");
  OF_CHECK(event_ && end.event_, "[CUDAEvent] elapsed_time: both events must be recorded first");
  return cuda_backend::event_elapsed_ms(event_, end.event_);
}

void record_stream(const Tensor& t, const CUDAStream& stream) {
  OF_CHECK(t.defined() && t.is_cuda(), "[record_stream] expected a CUDA tensor, got {}",
           t.defined() ? t.device().str() : std::string("an undefined tensor"));
  OF_CHECK(t.device().index() == stream.device_index() ||
               (t.device().index() < 0 && stream.device_index() == current_device()),
           "[record_stream] the tensor is on {}, the stream on cuda:{}", t.device().str(),
           stream.device_index());
  cuda_backend::record_stream(t.impl()->storage->data, stream.device_index(), stream.handle());
}

size_t memory_allocated(int d) { return memory::stats(Device(kCUDA, resolve(d))).allocated; }
size_t max_memory_allocated(int d) {
  return memory::stats(Device(kCUDA, resolve(d))).peak_allocated;
}
size_t memory_reserved(int d) { return memory::stats(Device(kCUDA, resolve(d))).reserved; }
void reset_peak_memory_stats(int d) { memory::reset_peak_stats(Device(kCUDA, resolve(d))); }
void empty_cache(int d) { memory::empty_cache(Device(kCUDA, resolve(d))); }
int current_device() { return cuda_backend::current_device(); }

}  // namespace oneflow::cuda

// graph.cpp: CUDA Graph capture and launch for traced steps (NOTE [CUDA Graph replay] in
// src/trace/executor.cpp), and the capture-time hooks of the kernels.
// NOTE [CUDA Graph capture]: a traced plan captures its CUDA steps on the device's current
// stream (thread-local capture mode), with the caching allocator drawing every block the
// kernels allocate from a private pool of the plan (so the graph's addresses stay its own),
// and instantiates the graph once. While a capture is active on this thread:
//  - host synchronizations (device/stream/event synchronize, blocking copies, item()) raise
//    "[cuda] <what> synchronizes the host, which a CUDA Graph capture cannot contain";
//  - random kernels read (seed, offset) from the device slot the executor set (graph_slots), so
//    a replay that writes new values there draws new numbers, as eager would;
//  - index checks (embedding, cross entropy, index_select, index_add) cannot read their result
//    back: they set the device flag the executor set, which it reads before the next replay.
#include "cuda/cuda_check.h"
#include "cuda/module.h"

namespace oneflow::cuda_module {
namespace {
thread_local const void* t_graph_rng = nullptr;
thread_local void* t_graph_flag = nullptr;

cudaStream_t capture_stream(int device) { return current_stream_of(resolve_device(device)); }
}  // namespace

bool capturing() {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(current_stream_of(d), &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

void refuse_if_capturing(const char* what) {
  if (capturing())
    fail("[cuda] {} synchronizes the host, which a CUDA Graph capture cannot contain", what);
}

const uint64_t* graph_rng() {
  const void* p = t_graph_rng;
  t_graph_rng = nullptr;  // one random kernel per slot
  return static_cast<const uint64_t*>(p);
}
int* graph_flag() { return static_cast<int*>(t_graph_flag); }

void graph_slots(const void* rng, void* flag) {
  t_graph_rng = rng;
  t_graph_flag = flag;
}

void graph_capture_begin(int device, int pool_id) {
  const int d = resolve_device(device);
  DeviceGuard guard(d);
  cudaStream_t s = capture_stream(d);
  OF_CHECK(s != nullptr, "[cuda] cannot capture a CUDA Graph on the legacy default stream");
  begin_pool(d, s, pool_id);
  const cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    end_pool(d, s);
    throw_cuda_error(err, "cudaStreamBeginCapture", __FILE__, __LINE__);
  }
}

void* graph_capture_end(int device) {
  const int d = resolve_device(device);
  DeviceGuard guard(d);
  cudaStream_t s = capture_stream(d);
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(s, &graph);
  end_pool(d, s);
  t_graph_rng = nullptr;
  t_graph_flag = nullptr;
  if (err != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    throw_cuda_error(err, "cudaStreamEndCapture", __FILE__, __LINE__);
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ierr = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (ierr != cudaSuccess) throw_cuda_error(ierr, "cudaGraphInstantiate", __FILE__, __LINE__);
  return exec;
}

void graph_capture_abort(int device) noexcept {
  int d = device;
  if (d < 0 && cudaGetDevice(&d) != cudaSuccess) return;
  cudaStream_t s = current_stream_of(d);
  cudaGraph_t graph = nullptr;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGetLastError();
  try {
    end_pool(d, s);
  } catch (...) {}
  t_graph_rng = nullptr;
  t_graph_flag = nullptr;
}

void graph_launch(void* exec, int device) {
  const int d = resolve_device(device);
  DeviceGuard guard(d);
  note_launch("cuda graph");
  const cudaError_t err = cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), capture_stream(d));
  if (err != cudaSuccess) throw_cuda_error(err, "cudaGraphLaunch", __FILE__, __LINE__);
  after_launch("cuda graph");
}

void graph_destroy(void* exec) noexcept {
  if (exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

void memset_async(void* ptr, int value, size_t n, int device) {
  const int d = resolve_device(device);
  DeviceGuard guard(d);
  OF_CUDA_CHECK(cudaMemsetAsync(ptr, value, n, capture_stream(d)));
}

}  // namespace oneflow::cuda_module

// cuda_loader.cpp: loads the CUDA backend module (liboneflow_cuda.so) on first use and forwards
// the core's CUDA entry points to it. NOTE [CUDA module]: the core never links the CUDA
// libraries; a program that asks for no CUDA device maps none of them (and starts on machines
// without them). Where the module is looked for, in order:
//   1. $OF_CUDA_MODULE, when set (a path to the module; "" or "none" disables CUDA),
//   2. beside liboneflow.so (the build folder, or the installed libdir),
//   3. the loader's search path (LD_LIBRARY_PATH, ld.so.cache).
#include <cstdlib>
#include <mutex>

#include "cuda/module_abi.h"
#include "oneflow/context.h"
#include "cuda_backend.h"
#include "module_loader.h"

namespace oneflow::cuda_backend {
namespace {

struct Loaded {
  const ModuleV1* module = nullptr;
  std::string why;  // why module is null
};

#ifdef ONEFLOW_CUDA_MODULE
void set_cuda_kernel(const char* op, KernelFn fn) { set_op_cuda_kernel(op, fn); }
void set_cuda_16bit(const char* op) { set_op_cuda_16bit(op); }

Loaded load() {
  Loaded r;
  void* handle = load_core_module("OF_CUDA_MODULE", "liboneflow_cuda.so", &r.why);
  if (!handle) return r;
  // Never dlclose'd: storages and kernels of the module live until the process exits.
  auto init = reinterpret_cast<ModuleInitFn>(module_symbol(handle, kModuleInitSymbol, &r.why));
  if (!init) return r;
  static const CoreV1 core{.abi = kModuleAbi, .build_id = ONEFLOW_BUILD_ID,
                           .set_cuda_kernel = set_cuda_kernel,
                           .set_cuda_16bit = set_cuda_16bit,
                           .allow_tf32_cublas = [] { return globalContext().allowTF32CuBLAS(); }};
  try {
    r.module = init(&core);
  } catch (const Error& e) {
    r.why = e.what();
    r.module = nullptr;
  }
  if (r.module && r.module->abi != kModuleAbi) {
    r.why = fmt::format("liboneflow_cuda.so returned a table of ABI {}, expected {}", r.module->abi,
                        kModuleAbi);
    r.module = nullptr;
  }
  return r;
}
#else
Loaded load() {
  return {nullptr,
          "oneflow was built without CUDA support (reconfigure with -Dcuda=enabled on a machine "
          "with the CUDA toolkit)"};
}
#endif

const Loaded& loaded() {
  static const Loaded l = load();  // thread-safe, once
  return l;
}

// The module, with a usable device; else "[cuda] not available: ..." naming what was attempted.
const ModuleV1& need(const char* what) {
  const Loaded& l = loaded();
  if (!l.module) fail("[cuda] not available: {} (while trying to {})", l.why, what);
  return *l.module;
}

const ModuleV1& need_device(const char* what) {
  const ModuleV1& m = need(what);
  if (std::string why = m.unavailable_reason(); !why.empty())
    fail("[cuda] not available: {} (while trying to {})", why, what);
  return m;
}

}  // namespace

bool built() {
#ifdef ONEFLOW_CUDA_MODULE
  return true;
#else
  return false;
#endif
}

std::string unavailable_reason() {
  const Loaded& l = loaded();
  if (!l.module) return l.why;
  return l.module->unavailable_reason();
}

bool is_available() { return unavailable_reason().empty(); }

int device_count() {
  const Loaded& l = loaded();
  return l.module ? l.module->device_count() : 0;
}

int current_device() { return need_device("query the current CUDA device").current_device(); }

void synchronize(int device) { need_device("synchronize a CUDA device").synchronize(device); }

Storage allocate_storage(size_t nbytes, int device) {
  const std::string what =
      fmt::format("allocate {} bytes on cuda:{}", nbytes, device < 0 ? 0 : device);
  return need_device(what.c_str()).allocate_storage(nbytes, device);
}

memory::Stats stats(int device) { return need("read CUDA memory statistics").stats(device); }
void reset_peak_stats(int device) {
  need("reset CUDA memory statistics").reset_peak_stats(device);
}
void empty_cache(int device) { need("empty the CUDA memory cache").empty_cache(device); }

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) {
  const std::string what = fmt::format("copy from {} to {}", src_dev.str(), dst_dev.str());
  need_device(what.c_str()).copy_bytes(dst, dst_dev, src, src_dev, n);
}

Storage allocate_pinned(size_t nbytes) {
  const std::string what = fmt::format("allocate {} bytes of pinned host memory", nbytes);
  return need_device(what.c_str()).allocate_pinned(nbytes);
}

void copy_bytes_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) {
  const std::string what = fmt::format("copy from {} to {}", src_dev.str(), dst_dev.str());
  need_device(what.c_str()).copy_bytes_async(dst, dst_dev, src, src_dev, n);
}

void* current_stream(int device) { return need_device("get the current CUDA stream").current_stream(device); }
void* default_stream(int device) { return need_device("get the default CUDA stream").default_stream(device); }
void* pool_stream(int device, bool high_priority) {
  return need_device("get a CUDA stream from the pool").pool_stream(device, high_priority);
}
void set_current_stream(int device, void* stream) {
  need_device("set the current CUDA stream").set_current_stream(device, stream);
}
bool stream_query(int device, void* stream) {
  return need_device("query a CUDA stream").stream_query(device, stream);
}
void stream_synchronize(int device, void* stream) {
  need_device("synchronize a CUDA stream").stream_synchronize(device, stream);
}
void* event_create(int device, bool timing) {
  return need_device("create a CUDA event").event_create(device, timing);
}
void event_destroy(void* event) noexcept {
  const Loaded& l = loaded();
  if (l.module && event) l.module->event_destroy(event);
}
void event_record(void* event, int device, void* stream) {
  need_device("record a CUDA event").event_record(event, device, stream);
}
bool event_query(void* event) { return need_device("query a CUDA event").event_query(event); }
void event_synchronize(void* event) { need_device("synchronize a CUDA event").event_synchronize(event); }
void event_block(void* event, int device, void* stream) {
  need_device("make a CUDA stream wait for an event").event_block(event, device, stream);
}
float event_elapsed_ms(void* start, void* end) {
  return need_device("time CUDA events").event_elapsed_ms(start, end);
}
void record_stream(void* ptr, int device, void* stream) {
  need_device("record a stream on a CUDA tensor").record_stream(ptr, device, stream);
}
void begin_pool(int device, void* stream, int id) {
  need_device("begin a CUDA graph memory pool").begin_pool(device, stream, id);
}
void end_pool(int device, void* stream) { need_device("end a CUDA graph memory pool").end_pool(device, stream); }
void release_pool(int device, int id) {
  need_device("release a CUDA graph memory pool").release_pool(device, id);
}
void note_launch(const char* op) {
  if (const Loaded& l = loaded(); l.module) l.module->note_launch(op);
}
void graph_capture_begin(int device, int pool_id) {
  need_device("capture a CUDA graph").graph_capture_begin(device, pool_id);
}
void* graph_capture_end(int device) { return need_device("capture a CUDA graph").graph_capture_end(device); }
void graph_capture_abort(int device) noexcept {
  if (const Loaded& l = loaded(); l.module) l.module->graph_capture_abort(device);
}
void graph_launch(void* exec, int device) { need_device("launch a CUDA graph").graph_launch(exec, device); }
void graph_destroy(void* exec) noexcept {
  if (const Loaded& l = loaded(); l.module && exec) l.module->graph_destroy(exec);
}
void graph_slots(const void* rng, void* flag) {
  need_device("capture a CUDA graph").graph_slots(rng, flag);
}
void memset_async(void* ptr, int value, size_t n, int device) {
  need_device("set CUDA memory").memset_async(ptr, value, n, device);
}
bool capturing() {
  const Loaded& l = loaded();
  return l.module && l.module->capturing();
}

std::shared_ptr<global::Communicator> nccl_comm(std::shared_ptr<global::Communicator> host,
                                                int device) {
  return std::shared_ptr<global::Communicator>(
      need_device("create an NCCL communicator").nccl_comm_create(&host, device));
}
std::string fused_check(const std::string& source, const std::string& name, int sm_arch) {
  return need("compile a fused kernel with NVRTC").fused_check(source, name, sm_arch);
}
void* fused_compile(const std::string& source, const std::string& name, int device) {
  return need_device("load a fused CUDA kernel").fused_compile(source, name, device);
}
void fused_launch(void* kernel, const void* params, size_t param_bytes, int64_t numel, int device) {
  need_device("launch a fused CUDA kernel").fused_launch(kernel, params, param_bytes, numel, device);
}
std::string nccl_version() {
  const Loaded& l = loaded();
  return l.module ? l.module->nccl_version() : std::string();
}

}  // namespace oneflow::cuda_backend

namespace oneflow::cuda {

bool is_available() { return cuda_backend::is_available(); }
int device_count() { return cuda_backend::device_count(); }
void synchronize(int device) { cuda_backend::synchronize(device); }

}  // namespace oneflow::cuda

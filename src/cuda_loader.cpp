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

Loaded load() {
  Loaded r;
  void* handle = load_core_module("OF_CUDA_MODULE", "liboneflow_cuda.so", &r.why);
  if (!handle) return r;
  // Never dlclose'd: storages and kernels of the module live until the process exits.
  auto init = reinterpret_cast<ModuleInitFn>(module_symbol(handle, kModuleInitSymbol, &r.why));
  if (!init) return r;
  static const CoreV1 core{.abi = kModuleAbi, .build_id = ONEFLOW_BUILD_ID,
                           .set_cuda_kernel = set_cuda_kernel};
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

}  // namespace oneflow::cuda_backend

namespace oneflow::cuda {

bool is_available() { return cuda_backend::is_available(); }
int device_count() { return cuda_backend::device_count(); }
void synchronize(int device) { cuda_backend::synchronize(device); }

}  // namespace oneflow::cuda

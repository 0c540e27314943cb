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
#include "op_table.h"
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
  static const CoreV1 core{.abi = kModuleAbi,
                           .build_id = ONEFLOW_BUILD_ID,
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
const ModuleV1& need(std::string_view what) {
  const Loaded& l = loaded();
  if (!l.module) fail("[cuda] not available: {} (while trying to {})", l.why, what);
  return *l.module;
}

const ModuleV1& need_device(std::string_view what) {
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

void event_destroy(void* event) noexcept {
  const Loaded& l = loaded();
  if (l.module && event) l.module->event_destroy(event);
}
void graph_destroy(void* exec) noexcept {
  if (const Loaded& l = loaded(); l.module && exec) l.module->graph_destroy(exec);
}

// The rest forward as module_entries.inc says (NOTE [Module entries]).
#define OF_CUDA_FORWARD_D(ret, name, params, args, what, ex) \
  ret name params ex { return need_device(what).name args; }
#define OF_CUDA_FORWARD_M(ret, name, params, args, what, ex) \
  ret name params ex { return need(what).name args; }
#define OF_CUDA_FORWARD_Q(ret, name, params, args, what, ex) \
  ret name params ex {                                       \
    const Loaded& l = loaded();                              \
    if (!l.module) return ret();                             \
    return l.module->name args;                              \
  }
#define OF_CUDA_FORWARD_H(ret, name, params, args, what, ex)
#define OF_CUDA_FORWARD_N(ret, name, params, args, what, ex)
#define OF_CUDA_ENTRY(ret, name, params, args, guard, what, ex) \
  OF_CUDA_FORWARD_##guard(ret, name, params, args, what, ex)
#include "cuda/module_entries.inc"
#undef OF_CUDA_ENTRY

std::shared_ptr<global::Communicator> nccl_comm(std::shared_ptr<global::Communicator> host,
                                                int device) {
  return std::shared_ptr<global::Communicator>(
      need_device("create an NCCL communicator").nccl_comm_create(&host, device));
}

}  // namespace oneflow::cuda_backend

namespace oneflow::cuda {

bool is_available() { return cuda_backend::is_available(); }
int device_count() { return cuda_backend::device_count(); }
void synchronize(int device) { cuda_backend::synchronize(device); }

}  // namespace oneflow::cuda

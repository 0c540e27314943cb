// cuda_backend.h (internal): what the core asks of the CUDA backend. The backend is a separate
// module, liboneflow_cuda.so (src/cuda/*, built when the toolkit is found), loaded with dlopen
// by src/cuda_loader.cpp the first time one of these is called; a CPU-only process never maps
// the CUDA libraries. Without the module (not built, not found, its libraries or the driver
// missing) the queries report "no CUDA" and every other entry throws
// "[cuda] not available: <why>". The module fills the op table's CUDA kernel slots when loaded.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "op_def.h"
#include "global/comm.h"
#include "oneflow/runtime.h"

namespace oneflow::cuda_backend {

bool built();         // the module was built beside this core (-Dcuda found the toolkit)
bool is_available();  // the module loads and sees at least one device

// The module's entries (NOTE [Module entries]: cuda/module_entries.inc says what each does and
// needs), forwarded by cuda_loader.cpp. unavailable_reason says why CUDA cannot be used ("" when
// it can): built without it, module or library missing, no driver or device; it loads the module
// on first use.
#define OF_CUDA_CORE_D(ret, name, params, ex) ret name params ex;
#define OF_CUDA_CORE_M OF_CUDA_CORE_D
#define OF_CUDA_CORE_Q OF_CUDA_CORE_D
#define OF_CUDA_CORE_H OF_CUDA_CORE_D
#define OF_CUDA_CORE_N(ret, name, params, ex)
#define OF_CUDA_ENTRY(ret, name, params, args, guard, what, ex) \
  OF_CUDA_CORE_##guard(ret, name, params, ex)
#include "cuda/module_entries.inc"
#undef OF_CUDA_ENTRY

// NCCL (NOTE [NCCL communicator] in src/cuda/nccl.cpp): a communicator over the ranks of the
// host communicator `host`, for tensors on cuda:`device`; collective over those ranks.
std::shared_ptr<global::Communicator> nccl_comm(std::shared_ptr<global::Communicator> host,
                                                int device);

}  // namespace oneflow::cuda_backend

// module.cpp: the entry point of liboneflow_cuda.so. The core dlopens this module the first
// time a CUDA device is asked for and calls oneflow_cuda_module_init_v1 once.
#include "cuda/module.h"

#include "cuda/cudnn.h"
#include "cuda/fusion.h"
#include "cuda/index.h"
#include "cuda/select.h"
#include "cuda/sort.h"

namespace oneflow::cuda_module {
const cuda_backend::CoreV1* g_core = nullptr;
namespace {

const cuda_backend::ModuleV1 kTable = {
    .abi = cuda_backend::kModuleAbi,
    .build_id = ONEFLOW_BUILD_ID,
#define OF_CUDA_ENTRY(ret, name, params, args, guard, what, ex) .name = name,
#include "cuda/module_entries.inc"
#undef OF_CUDA_ENTRY
};

}  // namespace
}  // namespace oneflow::cuda_module

extern "C" __attribute__((visibility("default"))) const oneflow::cuda_backend::ModuleV1*
oneflow_cuda_module_init_v1(const oneflow::cuda_backend::CoreV1* core) {
  using namespace oneflow;
  OF_CHECK(core != nullptr && core->abi == cuda_backend::kModuleAbi,
           "[cuda] not available: liboneflow_cuda.so speaks module ABI {}, the core {}",
           cuda_backend::kModuleAbi, core ? core->abi : 0u);
  OF_CHECK(std::string_view(core->build_id) == ONEFLOW_BUILD_ID,
           "[cuda] not available: liboneflow_cuda.so is from build '{}', the core from '{}' "
           "(install both from the same build)",
           ONEFLOW_BUILD_ID, core->build_id);
  cuda_module::g_core = core;
  core->set_cuda_kernel("copy", cuda_module::copy_strided_kernel);
  core->set_cuda_kernel("mm", cuda_module::mm_kernel);
  core->set_cuda_kernel("bmm", cuda_module::bmm_kernel);
  cuda_module::register_elementwise_kernels(*core);
  cuda_module::register_reduce_kernels(*core);
  cuda_module::register_factory_kernels(*core);
  cuda_module::register_nn_kernels(*core);
  cuda_module::register_index_kernels(*core);
  cuda_module::register_select_kernels(*core);
  cuda_module::register_sort_kernels(*core);
  cuda_module::register_pad_kernels(*core);
  cuda_module::register_lstm_kernels(*core);
  cuda_module::register_pool_kernels(*core);
  cuda_module::register_cudnn_kernels(*core);
  return &cuda_module::kTable;
}

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
    .unavailable_reason = unavailable_reason,
    .device_count = device_count,
    .current_device = current_device,
    .synchronize = synchronize,
    .allocate_storage = allocate_storage,
    .stats = stats,
    .reset_peak_stats = reset_peak_stats,
    .empty_cache = empty_cache,
    .copy_bytes = copy_bytes,
    .allocate_pinned = allocate_pinned,
    .is_pinned = is_pinned,
    .copy_bytes_async = copy_bytes_async,
    .current_stream = current_stream,
    .default_stream = default_stream,
    .pool_stream = pool_stream,
    .set_current_stream = set_current_stream,
    .stream_query = stream_query,
    .stream_synchronize = stream_synchronize,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .event_block = event_block,
    .event_elapsed_ms = event_elapsed_ms,
    .record_stream = record_stream,
    .begin_pool = begin_pool,
    .end_pool = end_pool,
    .release_pool = release_pool,
    .note_launch = note_launch,
    .graph_capture_begin = graph_capture_begin,
    .graph_capture_end = graph_capture_end,
    .graph_capture_abort = graph_capture_abort,
    .graph_launch = graph_launch,
    .graph_destroy = graph_destroy,
    .graph_slots = graph_slots,
    .memset_async = memset_async,
    .capturing = capturing,
    .nccl_comm_create = nccl_comm_create,
    .nccl_version = nccl_version,
    .fused_check = fused_check,
    .fused_compile = fused_compile,
    .fused_launch = fused_launch,
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
  cuda_module::register_attention_kernels(*core);
  cuda_module::register_cudnn_kernels(*core);
  return &cuda_module::kTable;
}

// cuda_stub.cpp: the CUDA backend when oneflow is built without the toolkit. The queries
// report "no CUDA"; every other entry throws a clear of::Error naming what was attempted.
#include "cuda/cuda_backend.h"

namespace oneflow::cuda_backend {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  fail("[cuda] cannot {}: oneflow was built without CUDA support (reconfigure with "
       "-Dcuda=enabled on a machine with the CUDA toolkit)",
       what);
}

}  // namespace

bool built() { return false; }
bool is_available() { return false; }
int device_count() { return 0; }
int current_device() { no_cuda("query the current CUDA device"); }
void synchronize(int) { no_cuda("synchronize a CUDA device"); }

Storage allocate_storage(size_t nbytes, int device) {
  no_cuda(fmt::format("allocate {} bytes on cuda:{}", nbytes, device < 0 ? 0 : device).c_str());
}
memory::Stats stats(int) { no_cuda("read CUDA memory statistics"); }
void reset_peak_stats(int) { no_cuda("reset CUDA memory statistics"); }
void empty_cache(int) { no_cuda("empty the CUDA memory cache"); }

void copy_bytes(void*, Device dst_dev, const void*, Device src_dev, size_t) {
  no_cuda(fmt::format("copy from {} to {}", src_dev.str(), dst_dev.str()).c_str());
}

void copy_strided_kernel(const KernelArgs&) { no_cuda("run the CUDA kernel of [contiguous]"); }
void mm_kernel(const KernelArgs&) { no_cuda("run the CUDA kernel of [mm]"); }
void bmm_kernel(const KernelArgs&) { no_cuda("run the CUDA kernel of [bmm]"); }

}  // namespace oneflow::cuda_backend

namespace oneflow::cuda {

bool is_available() { return false; }
int device_count() { return 0; }
void synchronize(int) {
  fail("[cuda] cannot synchronize a CUDA device: oneflow was built without CUDA support "
       "(reconfigure with -Dcuda=enabled on a machine with the CUDA toolkit)");
}

}  // namespace oneflow::cuda

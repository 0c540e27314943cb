// nn.h (internal): the CUDA kernels of cross entropy, layer/rms/group norm and index gathers
// and scatters (index_select, embedding, index_add). Plain C++ so that nn.cu stays light for
// nvcc; nn.cpp is the host side, with the CPU kernels' attrs, checks and formulas.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h

namespace cuda_module {

// Cross entropy with class indices over x [N, C, inner] (dense), target int64 [N * inner],
// optional weight [C]; rows = N * inner. reduction: 0 none, 1 mean, 2 sum (Reduction in nn).
struct CeParams {
  int64_t N = 0, C = 0, inner = 1, rows = 0;
  const void* x = nullptr;
  const int64_t* target = nullptr;
  const void* weight = nullptr;  // may be null
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  int reduction = 1;
  ScalarType dtype;
  // forward
  void* loss = nullptr;          // [rows] (none) or []
  void* lse = nullptr;           // [rows]
  void* total_weight = nullptr;  // []
  double* work = nullptr;        // 3 * rows + 4 doubles of scratch
  // backward
  const void* grad = nullptr;      // [rows] (none) or []
  const void* lse_in = nullptr;    // [rows]
  const void* total_in = nullptr;  // []
  void* grad_x = nullptr;          // like x
};
cudaError_t launch_cross_entropy(const CeParams& p, cudaStream_t stream);
cudaError_t launch_cross_entropy_backward(const CeParams& p, cudaStream_t stream);

// Normalization over M rows of N elements (dense); row r's channels start at (r % G) * cg,
// each channel spans hw elements. mode: 0 layer, 1 rms (no mean, no bias), 2 group.
struct NormParams {
  int mode = 0;
  int64_t M = 0, N = 1, G = 1, cg = 1, hw = 1;
  double eps = 0;
  ScalarType dtype;
  const void* x = nullptr;
  const void* weight = nullptr;  // may be null
  const void* bias = nullptr;    // may be null
  void* y = nullptr;
  void* mean = nullptr;  // [M]; null for rms
  void* rstd = nullptr;  // [M]
  // backward
  const void* dy = nullptr;
  const void* mean_in = nullptr;  // null for rms
  const void* rstd_in = nullptr;
  void* gx = nullptr;
  void* gw = nullptr;  // [G * cg]
  void* gb = nullptr;  // [G * cg]
  // the weight/bias gradients' partial sums: [2][splits][G * cg] doubles (norm_param_splits)
  double* ws = nullptr;
  int64_t splits = 1;
};
cudaError_t launch_norm(const NormParams& p, cudaStream_t stream);
// The row chunks the weight/bias gradients are summed in (the workspace's middle extent).
int64_t norm_param_splits(const NormParams& p);
cudaError_t launch_norm_backward(const NormParams& p, cudaStream_t stream);

// out[o, i, j] = x[o, index[i], j] (x dense [outer, size, inner], out [outer, count, inner]);
// add: out[o, index[i], j] += alpha * src[o, i, j] (atomics: floating sums are not ordered).
struct IndexParams {
  int64_t outer = 1, size = 0, count = 0, inner = 1;
  const void* index = nullptr;
  bool index64 = true;
  ScalarType dtype;
  const void* src = nullptr;
  void* out = nullptr;
  double alpha = 1;
};
cudaError_t launch_index_select(const IndexParams& p, cudaStream_t stream);
// *flag = 1 when an index (int64 or int32, n of them) outside [0, size) other than `allowed`
// (when has_allowed) is present: the check of a CUDA Graph capture (no host read).
cudaError_t launch_index_flag(const void* index, bool index64, int64_t n, int64_t size,
                              bool has_allowed, int64_t allowed, int* flag, cudaStream_t stream);
cudaError_t launch_index_add(const IndexParams& p, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

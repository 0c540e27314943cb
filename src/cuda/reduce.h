// reduce.h (internal): the CUDA reductions, softmax and scans over a dense [outer, n, inner]
// view (the reduced or scanned dims in the middle, as the CPU kernels canonicalize them:
// canon_reduce/canon_dim in ops/reduce_common.h). Plain C++ so that reduce.cu stays light for
// nvcc; reduce.cpp turns a KernelArgs into ReduceParams. NOTE [CUDA reductions] in reduce.cu.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h

namespace cuda_module {

// What each op writes per output (T: the input dtype):
//   sum, prod: T for floating inputs, int64 for the others; mean: T (floating inputs only);
//   amax, amin: T (NaN propagates); all, any: bool; norm0/1/2/inf/neginf: T (floating);
//   mean_d: double (var's first pass); max_shift: T, the max ignoring NaN (logsumexp's shift);
//   sqdev: T, sum((x - shift[o])^2) / denom, its sqrt when take_sqrt (shift: double);
//   logsumexp: T, shift' + log(sum(exp(x - shift'))) with shift' = shift[o] (T), 0 if infinite;
//   argmax, argmin: int64 indices into idx (the first extreme; the first NaN), and the values
//   into out when out is not null (max_dim, min_dim).
enum class RedOp : int {
  sum,
  prod,
  mean,
  amax,
  amin,
  all,
  any,
  norm0,
  norm1,
  norm2,
  norm_inf,
  norm_neginf,
  mean_d,
  max_shift,
  sqdev,
  logsumexp,
  argmax,
  argmin,
};

struct ReduceParams {
  int64_t outer = 1, n = 1, inner = 1;  // input element (o, k, j) at (o * n + k) * inner + j
  const void* in = nullptr;
  void* out = nullptr;  // outer * inner outputs, row-major (o, j)
  int64_t* idx = nullptr;
  const void* shift = nullptr;
  double denom = 1;
  bool take_sqrt = false;
  ScalarType dtype;  // the input's
};

// Device workspace (bytes) the launch needs for partial results; 0 when it needs none.
size_t reduce_workspace_bytes(RedOp op, const ReduceParams& p);
// Launches on `stream`; cudaErrorInvalidValue for a dtype the op does not take (the host side
// checks first and raises a clear error), else the launch status.
cudaError_t launch_reduce(RedOp op, const ReduceParams& p, void* workspace, cudaStream_t stream);

// softmax / log_softmax along n (T floating), into out (same layout).
cudaError_t launch_softmax(bool log, const ReduceParams& p, cudaStream_t stream);
// cumsum / cumprod along n (int64 or floating), reverse: from the end.
cudaError_t launch_scan(bool prod, bool reverse, const ReduceParams& p, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

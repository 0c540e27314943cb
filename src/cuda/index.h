// index.h (internal): the CUDA kernels of the shape and indexing ops of src/ops/index.cpp —
// cat, gather, scatter/scatter_add, tril/triu, flip, roll, repeat, pad (every mode) and
// one_hot — and the device-side index check they share. Plain C++ so that index.cu stays light
// for nvcc; index.cpp is the host side, with the CPU kernels' attrs, checks and messages.
//
// Every operand is described by its strides (in elements; the pointers include the storage
// offset), so the kernels read any layout; dims of size 1 are dropped and dims laid out back to
// back in every operand are merged on the host, and at most kMaxIndexDims remain.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h
namespace cuda_backend {
struct CoreV1;  // cuda/module_abi.h
}

namespace cuda_module {

// index.cpp: puts the kernels below into the op table's CUDA slots ("cat", "gather",
// "scatter", "scatter_add", "tril", "triu", "flip", "roll", "repeat", "pad", "one_hot").
void register_index_kernels(const cuda_backend::CoreV1& core);

inline constexpr int kMaxIndexDims = 12;

// How output coordinate i along a dim maps to a source coordinate j (n = src_sizes[d],
// a = arg[d]); kConstant reads the fill value when j falls outside [0, n).
enum class MapKind : int8_t {
  kIdentity,   // j = i
  kFlip,       // j = n - 1 - i
  kRoll,       // j = (i - a) mod n, a in [0, n)
  kRepeat,     // j = i mod n
  kConstant,   // j = i - a (a: the left pad, maybe negative)
  kReflect,    // j = |i - a|, then 2 (n - 1) - j past the end
  kReplicate,  // j = clamp(i - a, 0, n - 1)
  kCircular,   // j = (i - a) mod n
};

// dst[offset(i)] = src[mapped offset(i)] over `sizes` (row-major i): cat (identity maps into a
// view of the output), flip, roll, repeat and pad.
struct RemapParams {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxIndexDims] = {};
  int64_t dst_strides[kMaxIndexDims] = {};
  int64_t src_strides[kMaxIndexDims] = {};
  int64_t src_sizes[kMaxIndexDims] = {};
  int64_t arg[kMaxIndexDims] = {};
  MapKind kind[kMaxIndexDims] = {};
  const void* src = nullptr;
  void* dst = nullptr;
  ScalarType dtype;
  uint64_t fill_bits = 0;  // kConstant: the fill value's bytes as the output dtype
};
cudaError_t launch_remap(const RemapParams& p, cudaStream_t stream);

// tril/triu: dst (dense, `sizes`) = src where j - i <= diag (lower) or >= diag, else 0; i and j
// are the coordinates along the last two dims (rows, cols).
struct TriParams {
  int ndim = 0;
  int64_t numel = 0;
  int64_t rows = 0, cols = 0, diag = 0;
  bool lower = true;
  int64_t sizes[kMaxIndexDims] = {};  // the batch dims, then rows and cols
  int64_t src_strides[kMaxIndexDims] = {};
  const void* src = nullptr;
  void* dst = nullptr;
  ScalarType dtype;
};
cudaError_t launch_tri(const TriParams& p, cudaStream_t stream);

// gather: out[o(i)] = x[xo(i) + index[io(i)] * x_dim_stride] over the index's shape; strides
// [0] out, [1] index, [2] x with the gathered dim's stride 0. Index int64.
struct GatherParams {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxIndexDims] = {};
  int64_t strides[3][kMaxIndexDims] = {};
  int64_t dim_size = 1, dim_stride = 0;  // x along the gathered dim
  const void* x = nullptr;
  const int64_t* index = nullptr;
  void* out = nullptr;
  ScalarType dtype;
};
cudaError_t launch_gather(const GatherParams& p, cudaStream_t stream);

// scatter/scatter_add into out (already holding self): a thread per line along the scattered
// dim walks it in order, as the CPU kernel does (NOTE [Scatter determinism]), so duplicate
// indices resolve (last write wins, sums in index order) exactly as on the CPU. Lines are the
// index's shape without that dim; strides [0] index, [1] src, [2] out with that dim's stride 0.
// Integer sums (exact in any order) run a thread per element with atomics instead.
struct ScatterParams {
  int ndim = 0;
  int64_t lines = 0;
  int64_t sizes[kMaxIndexDims] = {};
  int64_t strides[3][kMaxIndexDims] = {};
  int64_t n = 1;                         // the index's size along the dim
  int64_t index_step = 0, src_step = 0;  // their strides along the dim
  int64_t dim_size = 1, dim_stride = 0;  // out along the dim
  bool add = false;
  const int64_t* index = nullptr;
  const void* src = nullptr;
  void* out = nullptr;
  ScalarType dtype;
};
cudaError_t launch_scatter(const ScatterParams& p, cudaStream_t stream);

// one_hot: out[e] (int64, dense [x..., classes]) = x[offset(e / classes)] == e % classes.
struct OneHotParams {
  int ndim = 0;
  int64_t numel = 0;  // of x
  int64_t classes = 0;
  int64_t sizes[kMaxIndexDims] = {};
  int64_t strides[kMaxIndexDims] = {};
  const int64_t* x = nullptr;
  int64_t* out = nullptr;
};
cudaError_t launch_one_hot(const OneHotParams& p, cudaStream_t stream);

// NOTE [CUDA index checks] for the ops here: result[0] = the smallest row-major position of a
// value outside [0, size) in the index (any strides, int64 or int32), result[1] = that value;
// result[0] stays ~0 (all bits set, as the caller initialized it) when every value is valid.
struct IndexCheckParams {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxIndexDims] = {};
  int64_t strides[kMaxIndexDims] = {};
  const void* index = nullptr;
  bool index64 = true;
  int64_t size = 0;
  int64_t* result = nullptr;  // 2 int64 on the device
};
cudaError_t launch_first_bad_index(const IndexCheckParams& p, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

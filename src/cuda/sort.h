// sort.h (internal): the CUDA kernels of sort/topk and pad_backward (src/ops/sort.cpp,
// src/ops/moves.cpp) and of the fused LSTM cell arithmetic (src/ops/nn_rnn.cpp). Plain C++ so
// that sort.cu stays light for nvcc; sort.cpp is the host side, with the CPU kernels' attrs,
// checks and messages.
//
// NOTE [CUDA sort]: the CPU sorts each line with std::stable_sort (sort) or a partial_sort
// breaking ties by the lower index (topk), NaN the largest value. Both are the order of the
// pairs (value, index) under "value first (less_nan, or its reverse when descending/largest),
// then the lower index", which is a strict total order: any sorting network that sorts the
// pairs by it gives the CPU's permutation exactly, whatever its own stability. Values are the
// CPU's compute_t round trip (T(compute_t<T>(x))), so the outputs are bitwise the CPU's.
//   - lines up to kSortTile elements: a block per line, a bitonic sort of (key, index) in
//     shared memory padded to a power of two (padding sorts last by its index);
//   - longer lines: the same block sort per tile of kSortTile elements into a global work
//     buffer, then merge passes that double the sorted runs (a thread per element places it
//     at its rank in its own run plus its rank in the other run, by binary search); the last
//     pass writes the outputs. The passes depend only on the shape (CUDA Graph safe).
// topk is the first k of the sort.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace oneflow {

enum class ScalarType : int8_t;  // oneflow/dtype.h
namespace cuda_backend {
struct CoreV1;  // cuda/module_abi.h
}

namespace cuda_module {

// Put their ops' kernels into the op table's CUDA slots: sort.cpp ("sort", "topk"), pad.cpp
// ("pad_backward"), lstm.cpp ("lstm_cell", "lstm_cell_backward", "lstm_layer",
// "lstm_layer_backward"); the device code of all three is sort.cu.
void register_sort_kernels(const cuda_backend::CoreV1& core);
void register_pad_kernels(const cuda_backend::CoreV1& core);
void register_lstm_kernels(const cuda_backend::CoreV1& core);

inline constexpr int kMaxSortDims = 12;
inline constexpr int64_t kSortTile = 4096;  // elements sorted in shared memory per block

// Lines: the input's shape without the sorted dim (row-major line numbers), strides [0] x,
// [1] values, [2] indices; n elements per line, the first k of each written out.
struct SortParams {
  int ndim = 0;
  int64_t lines = 0, n = 0, k = 0;
  int64_t sizes[kMaxSortDims] = {};
  int64_t strides[3][kMaxSortDims] = {};
  int64_t x_step = 0, v_step = 0, i_step = 0;  // strides along the sorted dim
  bool descending = false;
  const void* x = nullptr;
  void* values = nullptr;
  int64_t* indices = nullptr;
  ScalarType dtype;
  // n > kSortTile: two buffers of lines * n keys (sort_key_size bytes each) and indices
  void* work_keys[2] = {nullptr, nullptr};
  int64_t* work_idx[2] = {nullptr, nullptr};
};
int sort_key_size(ScalarType dtype);  // sizeof(compute_t<T>), 0 for an unknown dtype
cudaError_t launch_sort(const SortParams& p, cudaStream_t stream);

// pad_backward: gin (dense, `sizes`) [j] = sum of g[i] over the padded positions i that pad
// reads j from, added in row-major order of i (the CPU's mapped_add order), one thread per j.
// kConstant (not reached from pad's VJP, which pads with negated widths): the crop, i = j + l.
enum class PadBwdKind : int8_t { kIdentity, kConstant, kReflect, kReplicate, kCircular };
struct PadBackwardParams {
  int ndim = 0;
  int64_t numel = 0;                 // of gin
  int64_t sizes[kMaxSortDims] = {};  // gin's
  int64_t gin_strides[kMaxSortDims] = {};
  int64_t g_strides[kMaxSortDims] = {};
  int64_t left[kMaxSortDims] = {}, right[kMaxSortDims] = {};
  PadBwdKind kind[kMaxSortDims] = {};
  const void* g = nullptr;
  void* gin = nullptr;
  ScalarType dtype;
};
cudaError_t launch_pad_backward(const PadBackwardParams& p, cudaStream_t stream);

// The LSTM cell update over rows x H (NOTE [Fused LSTM cell]), dense row-major buffers:
// gates [rows, 4H] (+ add [rows, 4H] when set, the sum written to gates_out), c [rows, H] ->
// h_out, c_out [rows, H].
struct LstmCellParams {
  int64_t rows = 0, H = 0;
  const void* gates = nullptr;
  const void* add = nullptr;  // may be null
  void* gates_out = nullptr;  // with add
  const void* c = nullptr;
  void* h_out = nullptr;
  void* c_out = nullptr;
  ScalarType dtype;
};
cudaError_t launch_lstm_cell(const LstmCellParams& p, cudaStream_t stream);

// Its gradient: dh (+ dh_add), dc (+ dc_add) (a null dh/dc is zero, a null *_add nothing),
// gates, c (before), c_new -> dgates [rows, 4H] (+ dgates_add), dc_prev [rows, H].
struct LstmCellBackwardParams {
  int64_t rows = 0, H = 0;
  const void* dh = nullptr;
  const void* dh_add = nullptr;
  const void* dc = nullptr;
  const void* dc_add = nullptr;
  const void* gates = nullptr;
  const void* c = nullptr;
  const void* c_new = nullptr;
  const void* dgates_add = nullptr;
  void* dgates = nullptr;
  void* dc_prev = nullptr;
  ScalarType dtype;
};
cudaError_t launch_lstm_cell_backward(const LstmCellBackwardParams& p, cudaStream_t stream);

}  // namespace cuda_module
}  // namespace oneflow

// global.h: global tensors (placement + SBP) and the distributed runtime.
// NOTE [Global tensors] in placement.h; docs/GLOBAL.md explains placements, SBP, the rules,
// boxing and what happens when a rank fails.
#pragma once
#include <cstdint>

#include "oneflow/ops.h"
#include "oneflow/placement.h"
#include "oneflow/tensor.h"

namespace oneflow {

namespace distributed {
// Sets up the world: a process started by mpirun (or any launcher that sets Open MPI's or PMI's
// rank variables) joins the MPI world through liboneflow_mpi.so; any other process is a world
// of one. Idempotent; every other call here initializes on first use.
void init();
bool is_initialized();
int rank();
int world_size();
void barrier();
// "self" or "mpi".
std::string backend();
// Collectives this rank has issued on every communicator together (tests count boxing).
uint64_t collectives_issued();

// Data-parallel gradient reduction (NOTE [Bucketed gradient all-reduce], docs/GLOBAL.md): a
// broadcast parameter's partial-sum gradient is packed into a bucket during backward; a bucket
// of at least this many bytes starts its all-reduce at once and overlaps the rest of backward,
// and backward returns once every bucket is reduced. Default 1 MiB ($OF_GRAD_BUCKET_BYTES);
// 0 reduces each gradient when it is accumulated, waiting for it.
void set_grad_bucket_bytes(int64_t bytes);
int64_t grad_bucket_bytes();
// What this process' backward passes did: gradients reduced through buckets and the buckets
// (all-reduces) that carried them, gradients reduced one by one, and the seconds backward spent
// in gradient reduction (packing, polling and waiting for buckets, or the blocking all-reduces)
// — the communication time the overlap did not hide.
struct GradReductionStats {
  uint64_t gradients_bucketed = 0, buckets = 0, gradients_unbucketed = 0;
  double seconds = 0;
};
GradReductionStats grad_reduction_stats();
void reset_grad_reduction_stats();

// NOTE [Checked global meta] (src/global/global.cpp): to_global and the conversions it runs
// compare what every rank of the placement asked for (placement, SBP, logical shape, dtype:
// a 64-bit hash, one small all-gather) before any data moves, and raise on every rank, naming
// the ranks and what differed, when they disagree. On by default; set_check_global_meta(false)
// (or OF_CHECK_GLOBAL_META=0) skips the check for speed. A traced step checks once, when it is
// recorded.
void set_check_global_meta(bool on);
bool check_global_meta();
}  // namespace distributed

// Global factories: the same logical tensor for any SBP and any world size (drawn from the
// same generator state on every rank; each rank keeps its piece).
Tensor randn(IntArrayRef size, const Placement& placement, const NdSbp& sbp,
             TensorOptions options = {});
Tensor rand(IntArrayRef size, const Placement& placement, const NdSbp& sbp,
            TensorOptions options = {});
Tensor zeros(IntArrayRef size, const Placement& placement, const NdSbp& sbp,
             TensorOptions options = {});
Tensor ones(IntArrayRef size, const Placement& placement, const NdSbp& sbp,
            TensorOptions options = {});
Tensor full(IntArrayRef size, const Scalar& value, const Placement& placement, const NdSbp& sbp,
            TensorOptions options = {});
// `value`, a local tensor every rank computes alike (an index list, a fill value, zeros), as a
// broadcast global tensor on `like`'s placement, with no communication; `value` itself when
// `like` is local or `value` is global. Composite ops and VJPs make their constants with it, so
// the same code serves local and global operands. (Tensor::new_zeros and the *_like factories
// follow a global tensor's placement and SBP the same way.)
Tensor broadcast_like(const Tensor& value, const Tensor& like);

inline Tensor randn(IntArrayRef size, const Placement& p, Sbp s, TensorOptions o = {}) {
  return randn(size, p, NdSbp{s}, o);
}
inline Tensor rand(IntArrayRef size, const Placement& p, Sbp s, TensorOptions o = {}) {
  return rand(size, p, NdSbp{s}, o);
}
inline Tensor zeros(IntArrayRef size, const Placement& p, Sbp s, TensorOptions o = {}) {
  return zeros(size, p, NdSbp{s}, o);
}
inline Tensor ones(IntArrayRef size, const Placement& p, Sbp s, TensorOptions o = {}) {
  return ones(size, p, NdSbp{s}, o);
}
inline Tensor full(IntArrayRef size, const Scalar& v, const Placement& p, Sbp s,
                   TensorOptions o = {}) {
  return full(size, v, p, NdSbp{s}, o);
}

}  // namespace oneflow

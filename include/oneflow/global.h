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

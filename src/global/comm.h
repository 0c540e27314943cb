// comm.h (internal): the communicator interface the global layer talks to.
// NOTE [Communicators]: boxing and the process-group API see only this interface. A world of
// one process uses SelfComm (no library at all); a world started by mpirun uses the MPI module
// (liboneflow_mpi.so, dlopen'ed by distributed::init, NOTE [MPI module]); NCCL implements the
// same interface for CUDA tensors. Every call is blocking and collective over the
// communicator's ranks unless it says otherwise; a failure of the library is an of::Error
// naming the call and, where it has one, the library's message. Counts are elements of
// `dtype`; byte counts are bytes.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "oneflow/dtype.h"

namespace oneflow::global {

// Counts of the collectives a communicator issued (tests check the number of boxing calls).
struct CommStats {
  uint64_t allreduce = 0, allgather = 0, reduce_scatter = 0, alltoall = 0, broadcast = 0, send = 0,
           recv = 0, barrier = 0;
  uint64_t total() const {
    return allreduce + allgather + reduce_scatter + alltoall + broadcast + send + recv + barrier;
  }
};

// A collective started without waiting for it (Communicator::iallreduce_sum). test() advances
// it (MPI progresses a non-blocking collective only inside MPI calls) and says whether it has
// finished; wait() blocks until it has. Its buffer must stay untouched until then.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // within this communicator
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "self", "mpi", "nccl"
  // In place: buf (count elements) becomes the elementwise sum over the ranks.
  virtual void allreduce_sum(void* buf, int64_t count, ScalarType dtype) = 0;
  // The same into another buffer (send is unchanged); no copy of send is made first.
  virtual void allreduce_sum_into(const void* send, void* recv, int64_t count, ScalarType dtype) {
    if (count > 0 && send != recv) std::memcpy(recv, send, size_t(count) * itemsize(dtype));
    allreduce_sum(recv, count, dtype);
  }
  // Non-blocking in-place sum (count elements of a dtype MPI can sum). Every rank of the
  // communicator starts the same non-blocking collectives in the same order. The default
  // (a world of one) finishes at once.
  virtual std::unique_ptr<CommRequest> iallreduce_sum(void* buf, int64_t count, ScalarType dtype);
  // Rank r contributes recv_bytes[r] bytes; recv gets every rank's bytes in rank order.
  virtual void allgatherv(const void* send, void* recv, const std::vector<int64_t>& recv_bytes) = 0;
  // send holds counts[0] + counts[1] + ... elements; rank r receives the sum over ranks of the
  // counts[r] elements at the r-th block.
  virtual void reduce_scatterv_sum(const void* send, void* recv, const std::vector<int64_t>& counts,
                                   ScalarType dtype) = 0;
  // Rank r sends send_bytes[q] bytes (blocks in q order) to rank q and receives recv_bytes[q]
  // bytes from it (blocks in q order).
  virtual void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                         const std::vector<int64_t>& recv_bytes) = 0;
  // A block of a buffer laid out as `rows` runs of `row_bytes` bytes, `stride` bytes apart,
  // starting `offset` bytes in (the slice [start, start + size) along one dim of a dense
  // tensor: rows = the product of the dims before it).
  struct StridedBlock {
    int64_t offset = 0, rows = 0, row_bytes = 0, stride = 0;
    int64_t bytes() const { return rows * row_bytes; }
  };
  // All-to-all of strided blocks: this rank sends block send[q] of `sendbuf` to rank q and
  // receives rank q's block into recv[q] of `recvbuf` (the same number of bytes). The default
  // packs and unpacks around alltoallv; MPI describes the blocks as datatypes, so the blocks
  // go straight from and to the tensors (NOTE [Strided all-to-all]).
  virtual void alltoall_blocks(const void* sendbuf, const std::vector<StridedBlock>& send,
                               void* recvbuf, const std::vector<StridedBlock>& recv);
  virtual void broadcast(void* buf, int64_t bytes, int root) = 0;
  // Point to point (not collective).
  virtual void send(const void* buf, int64_t bytes, int dst, int tag) = 0;
  virtual void recv(void* buf, int64_t bytes, int src, int tag) = 0;
  // send without waiting: the buffer must stay untouched until the request has finished.
  // The default (a world of one, which has no other rank) raises.
  virtual std::unique_ptr<CommRequest> isend(const void* buf, int64_t bytes, int dst, int tag);
  virtual void barrier() = 0;
  // The communicator of `ranks` (ranks of *this* communicator, ascending). Collective over
  // those ranks only; a calling rank must be among them. Cached: the same list gives the same
  // communicator.
  virtual std::shared_ptr<Communicator> group(const std::vector<int>& ranks) = 0;
  const CommStats& stats() const { return stats_; }

 protected:
  CommStats stats_;
};

// The world this process belongs to: SelfComm when not launched by mpirun, else the MPI
// module's world communicator (loaded and initialized on the first call; thread-safe).
Communicator& world();
// True once world() has been set up (and MPI initialized, when it is used).
bool world_initialized();

// The communicator of a world of one process.
std::shared_ptr<Communicator> make_self_comm();

// NOTE [MPI module]: the module's entry point. The core passes its build id; the module
// initializes MPI (MPI_THREAD_FUNNELED) and returns the world communicator, or throws
// of::Error.
using MpiModuleInitFn = Communicator* (*)(const char* build_id);
inline constexpr const char* kMpiModuleInitSymbol = "oneflow_mpi_module_init_v1";

}  // namespace oneflow::global

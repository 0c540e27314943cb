// c10d.h: libtorch's process-group API (torch/csrc/distributed/c10d, 1.13 signatures) on
// oneflow's communicators, so that libtorch distributed C++ programs port by swapping
// `torch::` for `of::`: `c10d::ProcessGroupMPI::createProcessGroupMPI()`, getRank/getSize, and
// the collectives returning Work objects. `c10d::` names oneflow::c10d at global scope (the
// swap leaves it untouched in user code); define ONEFLOW_NO_TORCH_NAMES to leave that out.
// NOTE [c10d on communicators] in src/global/c10d.cpp; docs/GLOBAL.md "Process groups (c10d)".
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "oneflow/compat.h"
#include "oneflow/tensor.h"

namespace oneflow::c10d {

// The reduction of allreduce / reduce / reduce_scatter. MPI-backed: SUM, PRODUCT, MIN, MAX;
// the others raise an of::Error naming the op (as libtorch's MPI backend does for AVG).
struct ReduceOp {
  enum RedOpType : uint8_t {
    SUM = 0,
    AVG = 1,
    PRODUCT = 2,
    MIN = 3,
    MAX = 4,
    BAND = 5,
    BOR = 6,
    BXOR = 7,
    PREMUL_SUM = 8,
    UNUSED = 9
  };
  ReduceOp() = default;
  ReduceOp(RedOpType op) : op_(op) {}
  operator RedOpType() const { return op_; }
  bool operator==(const ReduceOp& other) const { return op_ == other.op_; }
  bool operator==(RedOpType other) const { return op_ == other; }
  RedOpType op_ = SUM;
};
// "SUM", "MIN", ...
std::string reduce_op_name(ReduceOp op);

inline constexpr auto kUnsetTimeout = std::chrono::milliseconds(-1);
inline constexpr auto kNoTimeout = std::chrono::milliseconds(0);

// Options as libtorch spells them; timeouts are accepted and ignored (every call is blocking).
struct BroadcastOptions {
  int64_t rootRank = 0;
  int64_t rootTensor = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct AllreduceOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct AllreduceCoalescedOptions : AllreduceOptions {};
struct ReduceOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  int64_t rootRank = 0;
  int64_t rootTensor = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct AllgatherOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct GatherOptions {
  int64_t rootRank = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct ScatterOptions {
  int64_t rootRank = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct ReduceScatterOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct AllToAllOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct BarrierOptions {
  std::vector<int64_t> device_ids;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};

enum class OpType : uint8_t {
  BROADCAST = 0,
  ALLREDUCE = 1,
  ALLREDUCE_COALESCED = 2,
  REDUCE = 3,
  ALLGATHER = 4,
  _ALLGATHER_BASE = 5,
  ALLGATHER_COALESCED = 6,
  GATHER = 7,
  SCATTER = 8,
  REDUCE_SCATTER = 9,
  ALLTOALL_BASE = 10,
  ALLTOALL = 11,
  SEND = 12,
  RECV = 13,
  RECVANYSOURCE = 14,
  BARRIER = 15,
  _REDUCE_SCATTER_BASE = 16,
  UNKNOWN = 100,
};
// "allreduce", "broadcast", ...
std::string opTypeToString(OpType op);

// The handle of one collective. Every collective here completes before it returns (NOTE [c10d
// on communicators]), so a Work is born completed: wait() returns true at once, isCompleted()
// is true, and an error was already thrown by the call itself.
class Work {
 public:
  Work(int rank = -1, OpType opType = OpType::UNKNOWN, const char* profilingTitle = nullptr,
       const optional<std::vector<Tensor>>& inputTensors = nullopt);
  virtual ~Work();
  virtual bool isCompleted();
  virtual bool isSuccess() const;
  virtual std::exception_ptr exception() const;
  // The rank a recvAnysource received from (of::Error for other works).
  virtual int sourceRank() const;
  // The tensors the collective wrote.
  virtual std::vector<Tensor> result();
  virtual void synchronize();
  // Blocks until the work is done (it is): true. The timeout is accepted and ignored.
  virtual bool wait(std::chrono::milliseconds timeout = kNoTimeout);
  virtual void abort();
  OpType retrieveOpType();

 protected:
  const int rank_;
  OpType opType_;
  std::vector<Tensor> outputs_;
};

// libtorch's abstract process group: each collective by default raises "does not support".
class ProcessGroup {
 public:
  using Work = c10d::Work;  // libtorch 1.13 spells it ProcessGroup::Work

  ProcessGroup(int rank, int size);
  virtual ~ProcessGroup();
  int getRank() const { return rank_; }
  int getSize() const { return size_; }
  virtual const std::string getBackendName() const;

  // tensors[0] on every rank becomes the root's.
  virtual intrusive_ptr<Work> broadcast(std::vector<Tensor>& tensors,
                                        const BroadcastOptions& opts = BroadcastOptions());
  // tensors[0] becomes the reduction over the ranks, in place.
  virtual intrusive_ptr<Work> allreduce(std::vector<Tensor>& tensors,
                                        const AllreduceOptions& opts = AllreduceOptions());
  // Every tensor of the list all-reduced (one call per tensor here).
  virtual intrusive_ptr<Work> allreduce_coalesced(
      std::vector<Tensor>& tensors,
      const AllreduceCoalescedOptions& opts = AllreduceCoalescedOptions());
  // The root's tensors[0] becomes the reduction; the others' are left unchanged.
  virtual intrusive_ptr<Work> reduce(std::vector<Tensor>& tensors,
                                     const ReduceOptions& opts = ReduceOptions());
  // outputTensors[0][r] becomes rank r's inputTensors[0].
  virtual intrusive_ptr<Work> allgather(std::vector<std::vector<Tensor>>& outputTensors,
                                        std::vector<Tensor>& inputTensors,
                                        const AllgatherOptions& opts = AllgatherOptions());
  // outputbuffer (size x inputbuffer's numel elements) holds the ranks' inputs in rank order.
  virtual intrusive_ptr<Work> _allgather_base(Tensor& outputbuffer, Tensor& inputbuffer,
                                              const AllgatherOptions& opts = AllgatherOptions());
  // The root's outputTensors[0][r] becomes rank r's inputTensors[0] (outputs empty elsewhere).
  virtual intrusive_ptr<Work> gather(std::vector<std::vector<Tensor>>& outputTensors,
                                     std::vector<Tensor>& inputTensors,
                                     const GatherOptions& opts = GatherOptions());
  // outputTensors[0] on rank r becomes the root's inputTensors[0][r].
  virtual intrusive_ptr<Work> scatter(std::vector<Tensor>& outputTensors,
                                      std::vector<std::vector<Tensor>>& inputTensors,
                                      const ScatterOptions& opts = ScatterOptions());
  // outputTensors[0] on rank r becomes the reduction over the ranks of inputTensors[0][r].
  virtual intrusive_ptr<Work> reduce_scatter(
      std::vector<Tensor>& outputTensors, std::vector<std::vector<Tensor>>& inputTensors,
      const ReduceScatterOptions& opts = ReduceScatterOptions());
  // outputTensors[q] becomes rank q's inputTensors[this rank].
  virtual intrusive_ptr<Work> alltoall(std::vector<Tensor>& outputTensors,
                                       std::vector<Tensor>& inputTensors,
                                       const AllToAllOptions& opts = AllToAllOptions());
  // Point to point: tensors[0] to / from one rank (blocking).
  virtual intrusive_ptr<Work> send(std::vector<Tensor>& tensors, int dstRank, int tag);
  virtual intrusive_ptr<Work> recv(std::vector<Tensor>& tensors, int srcRank, int tag);
  virtual intrusive_ptr<Work> barrier(const BarrierOptions& opts = BarrierOptions());

 protected:
  const int rank_;
  const int size_;
};

// The process group over MPI (oneflow's communicator, NOTE [Communicators]). A process not
// started by mpirun is a group of one.
class ProcessGroupMPI : public ProcessGroup {
 public:
  struct Impl;
  ProcessGroupMPI(int rank, int size, std::shared_ptr<Impl> impl);
  ~ProcessGroupMPI() override;
  const std::string getBackendName() const override { return "mpi"; }
  // Ends the whole job at once (libtorch calls MPI_Abort): this process exits with status 1,
  // and mpirun then stops the other ranks.
  [[noreturn]] void abort();

  intrusive_ptr<Work> broadcast(std::vector<Tensor>& data,
                                const BroadcastOptions& opts = BroadcastOptions()) override;
  intrusive_ptr<Work> allreduce(std::vector<Tensor>& tensors,
                                const AllreduceOptions& opts = AllreduceOptions()) override;
  intrusive_ptr<Work> allreduce_coalesced(
      std::vector<Tensor>& tensors,
      const AllreduceCoalescedOptions& opts = AllreduceCoalescedOptions()) override;
  intrusive_ptr<Work> reduce(std::vector<Tensor>& tensors,
                             const ReduceOptions& opts = ReduceOptions()) override;
  intrusive_ptr<Work> allgather(std::vector<std::vector<Tensor>>& outputTensors,
                                std::vector<Tensor>& inputTensors,
                                const AllgatherOptions& opts = AllgatherOptions()) override;
  intrusive_ptr<Work> _allgather_base(Tensor& outputbuffer, Tensor& inputbuffer,
                                      const AllgatherOptions& opts = AllgatherOptions()) override;
  intrusive_ptr<Work> gather(std::vector<std::vector<Tensor>>& outputTensors,
                             std::vector<Tensor>& inputTensors,
                             const GatherOptions& opts = GatherOptions()) override;
  intrusive_ptr<Work> scatter(std::vector<Tensor>& outputTensors,
                              std::vector<std::vector<Tensor>>& inputTensors,
                              const ScatterOptions& opts = ScatterOptions()) override;
  intrusive_ptr<Work> reduce_scatter(
      std::vector<Tensor>& outputTensors, std::vector<std::vector<Tensor>>& inputTensors,
      const ReduceScatterOptions& opts = ReduceScatterOptions()) override;
  intrusive_ptr<Work> alltoall(std::vector<Tensor>& outputTensors,
                               std::vector<Tensor>& inputTensors,
                               const AllToAllOptions& opts = AllToAllOptions()) override;
  intrusive_ptr<Work> send(std::vector<Tensor>& tensors, int dstRank, int tag) override;
  intrusive_ptr<Work> recv(std::vector<Tensor>& tensors, int srcRank, int tag) override;
  intrusive_ptr<Work> barrier(const BarrierOptions& opts = BarrierOptions()) override;

  // The group of `ranks` (world ranks, ascending; empty: the whole world), initializing the
  // world on first use. Collective over those ranks only; a rank outside them gets a null
  // pointer, as in libtorch.
  static intrusive_ptr<ProcessGroupMPI> createProcessGroupMPI(std::vector<int> ranks = {});

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace oneflow::c10d

#ifndef ONEFLOW_NO_TORCH_NAMES
namespace c10d = ::oneflow::c10d;
#endif

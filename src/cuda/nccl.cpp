// nccl.cpp: the NCCL communicator of the CUDA module (NOTE [NCCL communicator]).
//
// NOTE [NCCL communicator]: global CUDA tensors move their pieces with NCCL behind the same
// interface as MPI (global/comm.h). The core makes one per (ranks, device) when a CUDA
// placement's mesh axis, or a move between CUDA placements, first needs one
// (global::device_comm, src/global/global.cpp):
//  - Bootstrap: the host communicator of the same ranks (MPI under mpirun, the self
//    communicator in a process of one) broadcasts an ncclUniqueId from its rank 0; every rank
//    then calls ncclCommInitRank with the tensors' device current. Sub-communicators
//    (group()) bootstrap the same way over the host communicator's group.
//  - Ordering instead of blocking: every call is enqueued on the device's current stream and
//    returns without waiting for the GPU. Stream order makes the result visible to every later
//    kernel on that stream, as for any CUDA op, and a read by the host (a copy to the CPU)
//    synchronizes; nothing waits on the host, so the calls can be captured in a CUDA Graph
//    (a traced step's boxing nodes).
//  - Collectives NCCL lacks: allgatherv with unequal pieces is a group of broadcasts (one per
//    rank, from its piece); reduce_scatterv with unequal counts a group of reduces (one per
//    rank, to it); alltoallv a group of sends and receives (the own block is a device copy).
//    Strided blocks (alltoall_blocks) are packed into and unpacked from device buffers with
//    cudaMemcpy2DAsync around the grouped exchange. Empty pieces take no call.
//  - Point to point: ncclSend/ncclRecv; NCCL has no tags: messages between two ranks arrive
//    in the order they were sent, which is the order the callers use (a move sends at most one
//    message per pair). isend runs on the current stream too; its request tests an event.
//  - The non-blocking all-reduce (DDP buckets) runs on a stream of its own after an event of
//    the current stream, so the reduction overlaps the rest of backward; wait() makes the
//    current stream wait for it (no host wait), and the bucket's memory is recorded on the
//    comm stream for the caching allocator.
//  - barrier(): the current stream is synchronized, then the host communicator's barrier.
//  - 16-bit floats: NCCL sums float16/bfloat16 natively, but boxing widens them to float32 on
//    every backend (as MPI must), so both give the same bits.
//  - Errors: "[nccl] <call> failed: <ncclGetErrorString>: <ncclGetLastError>".
// Built when meson finds libnccl and nccl.h (-DONEFLOW_WITH_NCCL); without them creating one
// raises, naming what is missing.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/module.h"
#include "global/comm.h"

#ifdef ONEFLOW_WITH_NCCL
#include <nccl.h>
#endif

namespace oneflow::cuda_module {

#ifdef ONEFLOW_WITH_NCCL
namespace {

[[noreturn]] void throw_nccl(ncclResult_t r, const char* call, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  fail("[nccl] {} failed: {}{}{}", call, ncclGetErrorString(r), last && *last ? ": " : "",
       last ? last : "");
}
#define OF_NCCL_CHECK(expr, comm)                                         \
  do {                                                                    \
    ncclResult_t of_nccl_r_ = (expr);                                     \
    if (of_nccl_r_ != ncclSuccess) throw_nccl(of_nccl_r_, #expr, (comm)); \
  } while (0)

ncclDataType_t nccl_type(ScalarType t, const char* call) {
  switch (t) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kFloat16:
      return ncclFloat16;
    case kBFloat16:
      return ncclBfloat16;
    case kInt32:
      return ncclInt32;
    case kInt64:
      return ncclInt64;
    case kUInt8:
      return ncclUint8;
    default:
      fail("[nccl] {}: no NCCL reduction for dtype {}", call, dtype_name(t));
  }
}

// A group of NCCL calls (ncclGroupStart/End); the end runs even when a call inside throws.
class NcclGroup {
 public:
  explicit NcclGroup(ncclComm_t c) : comm_(c) { OF_NCCL_CHECK(ncclGroupStart(), comm_); }
  void end() {
    if (open_) {
      open_ = false;
      OF_NCCL_CHECK(ncclGroupEnd(), comm_);
    }
  }
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }

 private:
  ncclComm_t comm_;
  bool open_ = true;
};

class NcclRequest final : public global::CommRequest {
 public:
  NcclRequest(int device, cudaEvent_t done) : device_(device), done_(done) {}
  ~NcclRequest() override {
    if (!done_) return;
    if (!waited_) {  // the buffer is released after this: order its users after the reduction
      DeviceGuard g(device_);
      cudaStreamWaitEvent(current_stream_of(device_), done_, 0);
    }
    cudaEventDestroy(done_);
  }
  bool test() override { return completed(cudaEventQuery(done_), "cudaEventQuery (NCCL request)"); }
  void wait() override {
    DeviceGuard g(device_);
    OF_CUDA_CHECK(cudaStreamWaitEvent(current_stream_of(device_), done_, 0));
    waited_ = true;
  }

 private:
  int device_;
  cudaEvent_t done_ = nullptr;
  bool waited_ = false;
};

class NcclComm final : public global::Communicator {
 public:
  NcclComm(std::shared_ptr<global::Communicator> host, int device)
      : host_(std::move(host)), device_(device) {
    rank_ = host_->rank();
    size_ = host_->size();
    ncclUniqueId id{};
    if (rank_ == 0) OF_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
    host_->broadcast(&id, int64_t(sizeof id), 0);
    DeviceGuard g(device_);
    OF_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_), nullptr);
  }
  ~NcclComm() override {
    if (comm_) ncclCommDestroy(comm_);
    if (side_) cudaStreamDestroy(side_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void allreduce_sum(void* buf, int64_t count, ScalarType dtype) override {
    allreduce_sum_into(buf, buf, count, dtype);
  }
  void allreduce_sum_into(const void* send, void* recv, int64_t count, ScalarType dtype) override {
    ++stats_.allreduce;
    if (count == 0) return;
    DeviceGuard g(device_);
    OF_NCCL_CHECK(ncclAllReduce(send, recv, size_t(count), nccl_type(dtype, "ncclAllReduce"),
                                ncclSum, comm_, stream()),
                  comm_);
  }
  std::unique_ptr<global::CommRequest> iallreduce_sum(void* buf, int64_t count,
                                                      ScalarType dtype) override {
    ++stats_.allreduce;
    DeviceGuard g(device_);
    const ncclDataType_t t = nccl_type(dtype, "ncclAllReduce");
    cudaStream_t cur = stream();
    cudaEvent_t ready = nullptr, done = nullptr;
    OF_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    OF_CUDA_CHECK(cudaEventRecord(ready, cur));
    cudaStream_t side = side_stream();
    OF_CUDA_CHECK(cudaStreamWaitEvent(side, ready, 0));
    cudaEventDestroy(ready);
    record_stream(buf, device_, side);  // not reused on the current stream before it is done
    if (count > 0)
      OF_NCCL_CHECK(ncclAllReduce(buf, buf, size_t(count), t, ncclSum, comm_, side), comm_);
    OF_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    OF_CUDA_CHECK(cudaEventRecord(done, side));
    return std::make_unique<NcclRequest>(device_, done);
  }

  void allgatherv(const void* send, void* recv, const std::vector<int64_t>& recv_bytes) override {
    ++stats_.allgather;
    check_ranks(recv_bytes.size(), "allgatherv");
    DeviceGuard g(device_);
    bool equal = true;
    for (int64_t b : recv_bytes) equal = equal && b == recv_bytes[0];
    char* out = static_cast<char*>(recv);
    if (equal) {
      if (recv_bytes[0] > 0)
        OF_NCCL_CHECK(ncclAllGather(send, recv, size_t(recv_bytes[0]), ncclUint8, comm_, stream()),
                      comm_);
      return;
    }
    NcclGroup grp(comm_);
    int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t n = recv_bytes[size_t(r)];
      if (n > 0)
        OF_NCCL_CHECK(ncclBroadcast(r == rank_ ? send : out + off, out + off, size_t(n), ncclUint8,
                                    r, comm_, stream()),
                      comm_);
      off += n;
    }
    grp.end();
  }

  void reduce_scatterv_sum(const void* send, void* recv, const std::vector<int64_t>& counts,
                           ScalarType dtype) override {
    ++stats_.reduce_scatter;
    check_ranks(counts.size(), "reduce_scatterv");
    DeviceGuard g(device_);
    const ncclDataType_t t = nccl_type(dtype, "ncclReduceScatter");
    bool equal = true;
    for (int64_t c : counts) equal = equal && c == counts[0];
    if (equal) {
      if (counts[0] > 0)
        OF_NCCL_CHECK(ncclReduceScatter(send, recv, size_t(counts[0]), t, ncclSum, comm_, stream()),
                      comm_);
      return;
    }
    const char* in = static_cast<const char*>(send);
    const size_t item = itemsize(dtype);
    NcclGroup grp(comm_);
    int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t n = counts[size_t(r)];
      if (n > 0)
        OF_NCCL_CHECK(ncclReduce(in + off * int64_t(item), r == rank_ ? recv : nullptr, size_t(n),
                                 t, ncclSum, r, comm_, stream()),
                      comm_);
      off += n;
    }
    grp.end();
  }

  void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                 const std::vector<int64_t>& recv_bytes) override {
    ++stats_.alltoall;
    check_ranks(send_bytes.size(), "alltoallv");
    check_ranks(recv_bytes.size(), "alltoallv");
    DeviceGuard g(device_);
    exchange(static_cast<const char*>(send), send_bytes, static_cast<char*>(recv), recv_bytes);
  }

  void alltoall_blocks(const void* sendbuf, const std::vector<StridedBlock>& send, void* recvbuf,
                       const std::vector<StridedBlock>& recv) override {
    ++stats_.alltoall;
    check_ranks(send.size(), "alltoall_blocks");
    check_ranks(recv.size(), "alltoall_blocks");
    DeviceGuard g(device_);
    cudaStream_t s = stream();
    std::vector<int64_t> sb, rb;
    int64_t st = 0, rt = 0;
    for (const StridedBlock& b : send) st += b.bytes();
    for (const StridedBlock& b : recv) rt += b.bytes();
    for (const StridedBlock& b : send) sb.push_back(b.bytes());
    for (const StridedBlock& b : recv) rb.push_back(b.bytes());
    // staging from the caching allocator (stream-ordered on the current stream)
    Storage spack = allocate_storage(size_t(st), device_);
    Storage rpack = allocate_storage(size_t(rt), device_);
    char* sp = static_cast<char*>(spack->data);
    char* rp = static_cast<char*>(rpack->data);
    int64_t off = 0;
    for (const StridedBlock& b : send) {
      if (b.bytes() > 0)
        OF_CUDA_CHECK(cudaMemcpy2DAsync(
            sp + off, size_t(b.row_bytes), static_cast<const char*>(sendbuf) + b.offset,
            size_t(b.stride), size_t(b.row_bytes), size_t(b.rows), cudaMemcpyDeviceToDevice, s));
      off += b.bytes();
    }
    exchange(sp, sb, rp, rb);
    off = 0;
    for (const StridedBlock& b : recv) {
      if (b.bytes() > 0)
        OF_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(recvbuf) + b.offset, size_t(b.stride),
                                        rp + off, size_t(b.row_bytes), size_t(b.row_bytes),
                                        size_t(b.rows), cudaMemcpyDeviceToDevice, s));
      off += b.bytes();
    }
  }

  void broadcast(void* buf, int64_t bytes, int root) override {
    ++stats_.broadcast;
    if (root < 0 || root >= size_)
      fail("[nccl] broadcast: root {} is not a rank of this communicator of {}", root, size_);
    if (bytes == 0) return;
    DeviceGuard g(device_);
    OF_NCCL_CHECK(ncclBroadcast(buf, buf, size_t(bytes), ncclUint8, root, comm_, stream()), comm_);
  }
  void send(const void* buf, int64_t bytes, int dst, int /*tag*/) override {
    ++stats_.send;
    check_peer(dst, "send");
    if (bytes == 0) return;
    DeviceGuard g(device_);
    OF_NCCL_CHECK(ncclSend(buf, size_t(bytes), ncclUint8, dst, comm_, stream()), comm_);
  }
  void recv(void* buf, int64_t bytes, int src, int /*tag*/) override {
    ++stats_.recv;
    check_peer(src, "recv");
    if (bytes == 0) return;
    DeviceGuard g(device_);
    OF_NCCL_CHECK(ncclRecv(buf, size_t(bytes), ncclUint8, src, comm_, stream()), comm_);
  }
  std::unique_ptr<global::CommRequest> isend(const void* buf, int64_t bytes, int dst,
                                             int tag) override {
    send(buf, bytes, dst, tag);
    DeviceGuard g(device_);
    cudaEvent_t done = nullptr;
    OF_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    OF_CUDA_CHECK(cudaEventRecord(done, stream()));
    return std::make_unique<NcclRequest>(device_, done);
  }
  void barrier() override {
    ++stats_.barrier;
    refuse_if_capturing("[nccl] barrier");
    stream_synchronize(device_, stream());
    host_->barrier();
  }
  std::shared_ptr<Communicator> group(const std::vector<int>& ranks) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = groups_.find(ranks);
    if (it != groups_.end()) return it->second;
    auto c = std::make_shared<NcclComm>(host_->group(ranks), device_);
    groups_.emplace(ranks, c);
    return c;
  }

 private:
  cudaStream_t stream() const { return current_stream_of(device_); }
  cudaStream_t side_stream() {
    if (!side_) OF_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    return side_;
  }
  void check_ranks(size_t n, const char* call) const {
    if (n != size_t(size_))
      fail("[nccl] {}: {} per-rank sizes for a communicator of {} ranks", call, n, size_);
  }
  void check_peer(int r, const char* call) const {
    if (r < 0 || r >= size_ || r == rank_)
      fail("[nccl] {}: peer {} is not another rank of this communicator (rank {} of {})", call, r,
           rank_, size_);
  }
  // Grouped sends and receives of byte blocks laid out one after another in rank order; the
  // own block is a device copy.
  void exchange(const char* send, const std::vector<int64_t>& sb, char* recv,
                const std::vector<int64_t>& rb) {
    cudaStream_t s = stream();
    std::vector<int64_t> so(sb.size() + 1, 0), ro(rb.size() + 1, 0);
    for (size_t q = 0; q < sb.size(); ++q) so[q + 1] = so[q] + sb[q];
    for (size_t q = 0; q < rb.size(); ++q) ro[q + 1] = ro[q] + rb[q];
    if (sb[size_t(rank_)] != rb[size_t(rank_)])
      fail("[nccl] alltoall: rank {} sends itself {} bytes but expects {}", rank_,
           sb[size_t(rank_)], rb[size_t(rank_)]);
    if (sb[size_t(rank_)] > 0)
      OF_CUDA_CHECK(cudaMemcpyAsync(recv + ro[size_t(rank_)], send + so[size_t(rank_)],
                                    size_t(sb[size_t(rank_)]), cudaMemcpyDeviceToDevice, s));
    NcclGroup grp(comm_);
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      if (sb[size_t(q)] > 0)
        OF_NCCL_CHECK(ncclSend(send + so[size_t(q)], size_t(sb[size_t(q)]), ncclUint8, q, comm_, s),
                      comm_);
      if (rb[size_t(q)] > 0)
        OF_NCCL_CHECK(ncclRecv(recv + ro[size_t(q)], size_t(rb[size_t(q)]), ncclUint8, q, comm_, s),
                      comm_);
    }
    grp.end();
  }

  std::shared_ptr<global::Communicator> host_;
  int device_ = 0;
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t side_ = nullptr;
  std::mutex mu_;
  std::map<std::vector<int>, std::shared_ptr<Communicator>> groups_;
};

}  // namespace

global::Communicator* nccl_comm_create(const std::shared_ptr<global::Communicator>* host,
                                       int device) {
  OF_CHECK(host && *host, "[nccl] a communicator needs the host communicator of its ranks");
  const int d = resolve_device(device);
  return new NcclComm(*host, d);
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

#else  // no NCCL in this build

global::Communicator* nccl_comm_create(const std::shared_ptr<global::Communicator>*, int) {
  fail(
      "[nccl] global CUDA tensors need NCCL, and this build has none (meson found no libnccl "
      "and nccl.h when it was configured)");
}

std::string nccl_version() { return ""; }

#endif

}  // namespace oneflow::cuda_module

// c10d.cpp: libtorch's process-group API on global::Communicator.
// NOTE [c10d on communicators]: every collective is blocking and completes before it returns
// (the Work it hands back is already completed), on the calling thread (MPI is initialized
// FUNNELED). A call checks its arguments on this rank first (contiguous CPU local tensors, the
// dtypes and shapes libtorch requires, the root in range, a supported ReduceOp) and raises
// before communicating; then, in a group of more than one rank, the ranks all-gather a short
// description of the call (op, reduce op, root, dtype, shape) so that ranks that disagree raise
// the same of::Error on every rank instead of hanging or reading past a buffer: one small
// extra collective per call, which libtorch only does under TORCH_DISTRIBUTED_DEBUG=DETAIL.
// Sums use the communicator's all-reduce / reduce-scatter (float16/bfloat16 summed in float32);
// PRODUCT, MIN and MAX all-gather the operands and reduce them locally.
#include "oneflow/c10d.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/ranges.h>

#include "global/global.h"
#include "oneflow/ops.h"

namespace oneflow::c10d {

using global::Communicator;

struct ProcessGroupMPI::Impl {
  std::shared_ptr<Communicator> comm;
};

std::string reduce_op_name(ReduceOp op) {
  static const char* const names[] = {"SUM",  "AVG", "PRODUCT", "MIN",        "MAX",
                                      "BAND", "BOR", "BXOR",    "PREMUL_SUM", "UNUSED"};
  return size_t(op.op_) < std::size(names) ? names[op.op_] : "UNKNOWN";
}

std::string opTypeToString(OpType op) {
  switch (op) {
    case OpType::BROADCAST:
      return "broadcast";
    case OpType::ALLREDUCE:
      return "allreduce";
    case OpType::ALLREDUCE_COALESCED:
      return "allreduce_coalesced";
    case OpType::REDUCE:
      return "reduce";
    case OpType::ALLGATHER:
      return "allgather";
    case OpType::_ALLGATHER_BASE:
      return "_allgather_base";
    case OpType::ALLGATHER_COALESCED:
      return "allgather_coalesced";
    case OpType::GATHER:
      return "gather";
    case OpType::SCATTER:
      return "scatter";
    case OpType::REDUCE_SCATTER:
      return "reduce_scatter";
    case OpType::ALLTOALL_BASE:
      return "alltoall_base";
    case OpType::ALLTOALL:
      return "alltoall";
    case OpType::SEND:
      return "send";
    case OpType::RECV:
      return "recv";
    case OpType::RECVANYSOURCE:
      return "recvAnysource";
    case OpType::BARRIER:
      return "barrier";
    case OpType::_REDUCE_SCATTER_BASE:
      return "_reduce_scatter_base";
    case OpType::UNKNOWN:
      break;
  }
  return "unknown";
}

// ---------------------------------------------------------------- Work

Work::Work(int rank, OpType opType, const char*, const optional<std::vector<Tensor>>&)
    : rank_(rank), opType_(opType) {}
Work::~Work() = default;
bool Work::isCompleted() { return true; }
bool Work::isSuccess() const { return true; }
std::exception_ptr Work::exception() const { return nullptr; }
int Work::sourceRank() const {
  fail("[c10d] sourceRank() may only be called on the work of a recvAnysource (this is a {})",
       opTypeToString(opType_));
}
std::vector<Tensor> Work::result() { return outputs_; }
void Work::synchronize() {}
bool Work::wait(std::chrono::milliseconds) { return true; }
void Work::abort() {}
OpType Work::retrieveOpType() { return opType_; }

namespace {

// A finished collective and the tensors it wrote.
class CompletedWork final : public Work {
 public:
  CompletedWork(int rank, OpType type, std::vector<Tensor> outputs) : Work(rank, type) {
    outputs_ = std::move(outputs);
  }
};

intrusive_ptr<Work> done(int rank, OpType type, std::vector<Tensor> outputs = {}) {
  return make_intrusive<CompletedWork>(rank, type, std::move(outputs));
}

}  // namespace

// ---------------------------------------------------------------- ProcessGroup defaults

ProcessGroup::ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}
ProcessGroup::~ProcessGroup() = default;
const std::string ProcessGroup::getBackendName() const { return "undefined"; }

#define OF_C10D_UNSUPPORTED(op) \
  fail("[c10d] ProcessGroup {} does not support " op, getBackendName())
intrusive_ptr<Work> ProcessGroup::broadcast(std::vector<Tensor>&, const BroadcastOptions&) {
  OF_C10D_UNSUPPORTED("broadcast");
}
intrusive_ptr<Work> ProcessGroup::allreduce(std::vector<Tensor>&, const AllreduceOptions&) {
  OF_C10D_UNSUPPORTED("allreduce");
}
intrusive_ptr<Work> ProcessGroup::allreduce_coalesced(std::vector<Tensor>&,
                                                      const AllreduceCoalescedOptions&) {
  OF_C10D_UNSUPPORTED("allreduce_coalesced");
}
intrusive_ptr<Work> ProcessGroup::reduce(std::vector<Tensor>&, const ReduceOptions&) {
  OF_C10D_UNSUPPORTED("reduce");
}
intrusive_ptr<Work> ProcessGroup::allgather(std::vector<std::vector<Tensor>>&, std::vector<Tensor>&,
                                            const AllgatherOptions&) {
  OF_C10D_UNSUPPORTED("allgather");
}
intrusive_ptr<Work> ProcessGroup::_allgather_base(Tensor&, Tensor&, const AllgatherOptions&) {
  OF_C10D_UNSUPPORTED("_allgather_base");
}
intrusive_ptr<Work> ProcessGroup::gather(std::vector<std::vector<Tensor>>&, std::vector<Tensor>&,
                                         const GatherOptions&) {
  OF_C10D_UNSUPPORTED("gather");
}
intrusive_ptr<Work> ProcessGroup::scatter(std::vector<Tensor>&, std::vector<std::vector<Tensor>>&,
                                          const ScatterOptions&) {
  OF_C10D_UNSUPPORTED("scatter");
}
intrusive_ptr<Work> ProcessGroup::reduce_scatter(std::vector<Tensor>&,
                                                 std::vector<std::vector<Tensor>>&,
                                                 const ReduceScatterOptions&) {
  OF_C10D_UNSUPPORTED("reduce_scatter");
}
intrusive_ptr<Work> ProcessGroup::alltoall(std::vector<Tensor>&, std::vector<Tensor>&,
                                           const AllToAllOptions&) {
  OF_C10D_UNSUPPORTED("alltoall");
}
intrusive_ptr<Work> ProcessGroup::send(std::vector<Tensor>&, int, int) {
  OF_C10D_UNSUPPORTED("send");
}
intrusive_ptr<Work> ProcessGroup::recv(std::vector<Tensor>&, int, int) {
  OF_C10D_UNSUPPORTED("recv");
}
intrusive_ptr<Work> ProcessGroup::barrier(const BarrierOptions&) { OF_C10D_UNSUPPORTED("barrier"); }
#undef OF_C10D_UNSUPPORTED

// ---------------------------------------------------------------- checks

namespace {

std::string describe(const Tensor& t) {
  return fmt::format("{} {}", dtype_name(t.dtype()), shape_str(t.sizes()));
}

// A tensor a collective may read and write: defined, local, on the CPU, contiguous.
void check_tensor(const char* op, const Tensor& t, const std::string& what) {
  OF_CHECK(t.defined(), "[c10d] {}: {} is an undefined tensor", op, what);
  OF_CHECK(!t.is_global(),
           "[c10d] {}: {} is a global tensor; process groups take local tensors "
           "(this rank's value)",
           op, what);
  OF_CHECK(t.is_cpu(), "[c10d] {}: {} must be a CPU tensor (the MPI backend), got a {} tensor", op,
           what, t.device().str());
  OF_CHECK(t.is_contiguous(), "[c10d] {}: {} must be contiguous, got a non-contiguous {}", op, what,
           describe(t));
}

// libtorch's MPI backend takes exactly one tensor per list.
const Tensor& single(const char* op, const std::vector<Tensor>& ts, const char* what) {
  OF_CHECK(ts.size() == 1,
           "[c10d] {}: the MPI process group takes exactly one tensor in {}, got {}", op, what,
           ts.size());
  check_tensor(op, ts[0], fmt::format("{}[0]", what));
  return ts[0];
}

// `t` must have the dtype and shape of `ref`.
void check_like(const char* op, const Tensor& t, const std::string& what, const Tensor& ref,
                const char* ref_what) {
  check_tensor(op, t, what);
  OF_CHECK(t.dtype() == ref.dtype() && t.sizes() == ref.sizes(),
           "[c10d] {}: {} is {}, but {} is {}: they must have the same dtype and shape", op, what,
           describe(t), ref_what, describe(ref));
}

// A list of `n` tensors like `ref`.
void check_list(const char* op, const std::vector<Tensor>& ts, const char* what, size_t n,
                const Tensor& ref, const char* ref_what) {
  OF_CHECK(ts.size() == n, "[c10d] {}: {} must hold one tensor per rank ({}), got {}", op, what, n,
           ts.size());
  for (size_t i = 0; i < n; ++i)
    check_like(op, ts[i], fmt::format("{}[{}]", what, i), ref, ref_what);
}

// A list of lists holding one list of one tensor per rank like `ref` (libtorch's MPI backend).
void single_list(const char* op, const std::vector<std::vector<Tensor>>& lists, const char* what,
                 int size, const Tensor& ref, const char* ref_what) {
  OF_CHECK(lists.size() == 1,
           "[c10d] {}: the MPI process group takes exactly one list in {}, got {}", op, what,
           lists.size());
  check_list(op, lists[0], fmt::format("{}[0]", what).c_str(), size_t(size), ref, ref_what);
}

void check_root(const char* op, int64_t root, int size) {
  OF_CHECK(root >= 0 && root < size, "[c10d] {}: rank {} is out of range for a group of {}", op,
           root, size);
}

// The dtype a reduction runs in (float16/bfloat16 in float32).
ScalarType reduce_dtype(const char* op, ReduceOp rop, ScalarType t) {
  OF_CHECK(rop == ReduceOp::SUM || rop == ReduceOp::PRODUCT || rop == ReduceOp::MIN ||
               rop == ReduceOp::MAX,
           "[c10d] {}: ReduceOp {} is not supported by the MPI process group (SUM, PRODUCT, MIN "
           "and MAX are)",
           op, reduce_op_name(rop));
  OF_CHECK(t != kBool, "[c10d] {}: cannot reduce bool tensors", op);
  return t == kFloat16 || t == kBFloat16 ? kFloat32 : t;
}

// What one rank's call looks like, all-gathered to find ranks that disagree.
struct CallDesc {
  static constexpr int kMaxDims = 8;
  int64_t op = 0, reduce_op = 0, root = 0, dtype = -1, ndim = -1, numel = 0, dims_hash = 0;
  int64_t dims[kMaxDims] = {};

  CallDesc(OpType type, ReduceOp rop, int64_t root_rank, const Tensor* t)
      : op(int64_t(type)), reduce_op(rop.op_), root(root_rank) {
    if (!t) return;
    dtype = int64_t(t->dtype());
    ndim = t->dim();
    numel = t->numel();
    for (int64_t d = 0; d < ndim; ++d) {
      if (d < kMaxDims) dims[d] = t->size(d);
      dims_hash = dims_hash * 1000003 + t->size(d);
    }
  }
  bool operator==(const CallDesc& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
  std::string str() const {
    std::string s = opTypeToString(OpType(op));
    if (ndim >= 0) {
      std::vector<int64_t> shown(dims, dims + std::min<int64_t>(ndim, kMaxDims));
      s += fmt::format(" {} {}{}", dtype_name(ScalarType(dtype)), shape_str(shown),
                       ndim > kMaxDims ? " (first dims)" : "");
    }
    const auto type = OpType(op);
    if (type == OpType::ALLREDUCE || type == OpType::REDUCE || type == OpType::REDUCE_SCATTER)
      s += fmt::format(" {}", reduce_op_name(ReduceOp(ReduceOp::RedOpType(reduce_op))));
    if (type == OpType::BROADCAST || type == OpType::REDUCE || type == OpType::GATHER ||
        type == OpType::SCATTER)
      s += fmt::format(" root {}", root);
    return s;
  }
};
static_assert(std::is_trivially_copyable_v<CallDesc>);

// Raises the same error on every rank when the ranks' calls differ (NOTE [c10d on
// communicators]); collective.
void agree(Communicator& c, const char* op, const CallDesc& mine) {
  const int p = c.size();
  if (p == 1) return;
  std::vector<CallDesc> all(size_t(p), mine);
  c.allgatherv(&mine, all.data(), std::vector<int64_t>(size_t(p), int64_t(sizeof(CallDesc))));
  std::string diff;
  int shown = 0;
  for (int r = 1; r < p; ++r) {
    if (all[size_t(r)] == all[0]) continue;
    if (shown++ < 4) diff += fmt::format("; rank {}: {}", r, all[size_t(r)].str());
  }
  OF_CHECK(diff.empty(), "[c10d] {}: the ranks' calls disagree: rank 0: {}{}{}", op, all[0].str(),
           diff, shown > 4 ? fmt::format(" (and {} more ranks)", shown - 4) : "");
}

// gather's outputs / scatter's inputs: on the root one list of one tensor per rank like `ref`,
// on the other ranks no list; then the ranks agree on the call. True on the root.
bool check_rooted(Communicator& c, const char* op, OpType type, int64_t root,
                  const std::vector<std::vector<Tensor>>& lists, const char* what,
                  const Tensor& ref, const char* ref_what) {
  check_root(op, root, c.size());
  const bool is_root = c.rank() == root;
  if (is_root) {
    single_list(op, lists, what, c.size(), ref, ref_what);
  } else {
    OF_CHECK(lists.empty(), "[c10d] {}: {} must be empty on a non-root rank, got {} lists", op,
             what, lists.size());
  }
  agree(c, op, CallDesc(type, ReduceOp::SUM, root, &ref));
  return is_root;
}

void bump_version(const Tensor& t) {
  t.impl()->storage->version.fetch_add(1, std::memory_order_relaxed);
}

// Every rank's `t`, stacked along a new dim 0 (any dtype).
Tensor gather_all(Communicator& c, const Tensor& t) {
  DimVector shape{int64_t(c.size())};
  for (int64_t s : t.sizes()) shape.push_back(s);
  Tensor out = empty(shape, t.options());
  c.allgatherv(t.data_ptr(), out.data_ptr(),
               std::vector<int64_t>(size_t(c.size()), int64_t(t.nbytes())));
  return out;
}

// The reduction over the ranks of `t`, as a new tensor in the reduction's dtype.
Tensor reduced(Communicator& c, const Tensor& t, ReduceOp rop, ScalarType rdtype) {
  Tensor x = t.dtype() == rdtype ? t.clone() : t.to(rdtype);
  if (rop == ReduceOp::SUM) {
    c.allreduce_sum(x.data_ptr(), x.numel(), rdtype);
    return x;
  }
  Tensor all = gather_all(c, x);
  if (rop == ReduceOp::MIN) return amin(all, {0});
  if (rop == ReduceOp::MAX) return amax(all, {0});
  return prod(all, 0);
}

// The bytes of each tensor of `ts` one after the other.
Tensor concat_bytes(const std::vector<Tensor>& ts) {
  std::vector<Tensor> flat;
  for (const Tensor& t : ts) flat.push_back(t.reshape({-1}));
  return cat(flat, 0);
}

// One all-to-all moving `bytes` between the root and each rank: every rank's to the root
// (gather, the root receives them in rank order) or the root's q-th block to rank q (scatter).
void root_exchange(Communicator& c, int root, bool to_root, const void* send, void* recv,
                   int64_t bytes) {
  const size_t p = size_t(c.size());
  const bool me_root = c.rank() == root;
  std::vector<int64_t> out(p, 0), in(p, 0);
  (to_root ? out : in)[size_t(root)] = bytes;
  if (me_root) std::fill_n((to_root ? in : out).begin(), p, bytes);
  c.alltoallv(send, out, recv, in);
}

}  // namespace

// ---------------------------------------------------------------- ProcessGroupMPI

ProcessGroupMPI::ProcessGroupMPI(int rank, int size, std::shared_ptr<Impl> impl)
    : ProcessGroup(rank, size), impl_(std::move(impl)) {}
ProcessGroupMPI::~ProcessGroupMPI() = default;

void ProcessGroupMPI::abort() {
  std::fprintf(stderr, "[c10d] ProcessGroupMPI::abort() on rank %d: exiting\n", rank_);
  std::fflush(stderr);
  std::_Exit(EXIT_FAILURE);
}

intrusive_ptr<ProcessGroupMPI> ProcessGroupMPI::createProcessGroupMPI(std::vector<int> ranks) {
  Communicator& w = global::world();
  auto impl = std::make_shared<Impl>();
  if (ranks.empty()) {
    impl->comm = std::shared_ptr<Communicator>(&w, [](Communicator*) {});
  } else {
    for (size_t i = 0; i < ranks.size(); ++i) {
      OF_CHECK(ranks[i] >= 0 && ranks[i] < w.size(),
               "[c10d] createProcessGroupMPI: rank {} is outside the world of {} ranks", ranks[i],
               w.size());
      OF_CHECK(i == 0 || ranks[i] > ranks[i - 1],
               "[c10d] createProcessGroupMPI: the ranks must be ascending and distinct, got [{}]",
               fmt::join(ranks, ", "));
    }
    if (!std::binary_search(ranks.begin(), ranks.end(), w.rank())) return nullptr;
    impl->comm = w.group(ranks);
  }
  const int rank = impl->comm->rank(), size = impl->comm->size();
  return make_intrusive<ProcessGroupMPI>(rank, size, std::move(impl));
}

intrusive_ptr<Work> ProcessGroupMPI::broadcast(std::vector<Tensor>& data,
                                               const BroadcastOptions& opts) {
  const char* op = "broadcast";
  const Tensor& t = single(op, data, "tensors");
  check_root(op, opts.rootRank, size_);
  OF_CHECK(opts.rootTensor == 0, "[c10d] broadcast: rootTensor must be 0, got {}", opts.rootTensor);
  Communicator& c = *impl_->comm;
  agree(c, op, CallDesc(OpType::BROADCAST, ReduceOp::SUM, opts.rootRank, &t));
  c.broadcast(t.data_ptr(), int64_t(t.nbytes()), int(opts.rootRank));
  bump_version(t);
  return done(rank_, OpType::BROADCAST, data);
}

intrusive_ptr<Work> ProcessGroupMPI::allreduce(std::vector<Tensor>& tensors,
                                               const AllreduceOptions& opts) {
  const char* op = "allreduce";
  const Tensor& t = single(op, tensors, "tensors");
  const ScalarType rdtype = reduce_dtype(op, opts.reduceOp, t.dtype());
  Communicator& c = *impl_->comm;
  agree(c, op, CallDesc(OpType::ALLREDUCE, opts.reduceOp, 0, &t));
  if (opts.reduceOp == ReduceOp::SUM && rdtype == t.dtype()) {
    c.allreduce_sum(t.data_ptr(), t.numel(), rdtype);  // in place
    bump_version(t);
  } else {
    Tensor(t).copy_(reduced(c, t, opts.reduceOp, rdtype));
  }
  return done(rank_, OpType::ALLREDUCE, tensors);
}

intrusive_ptr<Work> ProcessGroupMPI::allreduce_coalesced(std::vector<Tensor>& tensors,
                                                         const AllreduceCoalescedOptions& opts) {
  const char* op = "allreduce_coalesced";
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(op, tensors[i], fmt::format("tensors[{}]", i));
    reduce_dtype(op, opts.reduceOp, tensors[i].dtype());
  }
  for (Tensor& t : tensors) {
    std::vector<Tensor> one{t};
    allreduce(one, opts);
  }
  return done(rank_, OpType::ALLREDUCE_COALESCED, tensors);
}

intrusive_ptr<Work> ProcessGroupMPI::reduce(std::vector<Tensor>& tensors,
                                            const ReduceOptions& opts) {
  const char* op = "reduce";
  const Tensor& t = single(op, tensors, "tensors");
  check_root(op, opts.rootRank, size_);
  const ScalarType rdtype = reduce_dtype(op, opts.reduceOp, t.dtype());
  Communicator& c = *impl_->comm;
  agree(c, op, CallDesc(OpType::REDUCE, opts.reduceOp, opts.rootRank, &t));
  // An all-reduce whose result only the root keeps (the interface has no rooted reduce).
  Tensor r = reduced(c, t, opts.reduceOp, rdtype);
  if (rank_ == opts.rootRank) Tensor(t).copy_(r);
  return done(rank_, OpType::REDUCE, tensors);
}

intrusive_ptr<Work> ProcessGroupMPI::allgather(std::vector<std::vector<Tensor>>& outputTensors,
                                               std::vector<Tensor>& inputTensors,
                                               const AllgatherOptions&) {
  const char* op = "allgather";
  const Tensor& in = single(op, inputTensors, "inputTensors");
  single_list(op, outputTensors, "outputTensors", size_, in, "inputTensors[0]");
  Communicator& c = *impl_->comm;
  agree(c, op, CallDesc(OpType::ALLGATHER, ReduceOp::SUM, 0, &in));
  Tensor all = gather_all(c, in);
  for (int r = 0; r < size_; ++r) outputTensors[0][size_t(r)].copy_(all[r]);
  return done(rank_, OpType::ALLGATHER, outputTensors[0]);
}

intrusive_ptr<Work> ProcessGroupMPI::_allgather_base(Tensor& outputbuffer, Tensor& inputbuffer,
                                                     const AllgatherOptions&) {
  const char* op = "_allgather_base";
  check_tensor(op, inputbuffer, "inputbuffer");
  check_tensor(op, outputbuffer, "outputbuffer");
  OF_CHECK(outputbuffer.dtype() == inputbuffer.dtype() &&
               outputbuffer.numel() == int64_t(size_) * inputbuffer.numel(),
           "[c10d] _allgather_base: outputbuffer ({}) must hold {} x inputbuffer ({}) elements "
           "of its dtype",
           describe(outputbuffer), size_, describe(inputbuffer));
  Communicator& c = *impl_->comm;
  agree(c, op, CallDesc(OpType::_ALLGATHER_BASE, ReduceOp::SUM, 0, &inputbuffer));
  c.allgatherv(inputbuffer.data_ptr(), outputbuffer.data_ptr(),
               std::vector<int64_t>(size_t(size_), int64_t(inputbuffer.nbytes())));
  bump_version(outputbuffer);
  return done(rank_, OpType::_ALLGATHER_BASE, {outputbuffer});
}

intrusive_ptr<Work> ProcessGroupMPI::gather(std::vector<std::vector<Tensor>>& outputTensors,
                                            std::vector<Tensor>& inputTensors,
                                            const GatherOptions& opts) {
  const char* op = "gather";
  const Tensor& in = single(op, inputTensors, "inputTensors");
  Communicator& c = *impl_->comm;
  const bool root = check_rooted(c, op, OpType::GATHER, opts.rootRank, outputTensors,
                                 "outputTensors", in, "inputTensors[0]");
  Tensor all = empty({root ? int64_t(size_) * in.numel() : 0}, in.options());
  root_exchange(c, int(opts.rootRank), true, in.data_ptr(), all.data_ptr(), int64_t(in.nbytes()));
  if (root)
    for (int r = 0; r < size_; ++r)
      outputTensors[0][size_t(r)].copy_(all.narrow(0, r * in.numel(), in.numel()).view(in.sizes()));
  return done(rank_, OpType::GATHER, root ? outputTensors[0] : std::vector<Tensor>{});
}

intrusive_ptr<Work> ProcessGroupMPI::scatter(std::vector<Tensor>& outputTensors,
                                             std::vector<std::vector<Tensor>>& inputTensors,
                                             const ScatterOptions& opts) {
  const char* op = "scatter";
  const Tensor& out = single(op, outputTensors, "outputTensors");
  Communicator& c = *impl_->comm;
  const bool root = check_rooted(c, op, OpType::SCATTER, opts.rootRank, inputTensors,
                                 "inputTensors", out, "outputTensors[0]");
  Tensor blocks = root ? concat_bytes(inputTensors[0]) : empty({0}, out.options());
  root_exchange(c, int(opts.rootRank), false, blocks.data_ptr(), out.data_ptr(),
                int64_t(out.nbytes()));
  bump_version(out);
  return done(rank_, OpType::SCATTER, outputTensors);
}

intrusive_ptr<Work> ProcessGroupMPI::reduce_scatter(std::vector<Tensor>& outputTensors,
                                                    std::vector<std::vector<Tensor>>& inputTensors,
                                                    const ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  const Tensor& out = single(op, outputTensors, "outputTensors");
  single_list(op, inputTensors, "inputTensors", size_, out, "outputTensors[0]");
  const ScalarType rdtype = reduce_dtype(op, opts.reduceOp, out.dtype());
  Communicator& c = *impl_->comm;
  agree(c, op, CallDesc(OpType::REDUCE_SCATTER, opts.reduceOp, 0, &out));
  Tensor blocks = concat_bytes(inputTensors[0]);
  if (opts.reduceOp == ReduceOp::SUM) {
    if (blocks.dtype() != rdtype) blocks = blocks.to(rdtype);
    Tensor mine = rdtype == out.dtype() ? out : empty(out.sizes(), out.options().dtype(rdtype));
    c.reduce_scatterv_sum(blocks.data_ptr(), mine.data_ptr(),
                          std::vector<int64_t>(size_t(size_), out.numel()), rdtype);
    if (rdtype == out.dtype()) bump_version(out);
    else Tensor(out).copy_(mine);
  } else {
    Tensor all = reduced(c, blocks, opts.reduceOp, rdtype);
    Tensor(out).copy_(all.narrow(0, rank_ * out.numel(), out.numel()).view(out.sizes()));
  }
  return done(rank_, OpType::REDUCE_SCATTER, outputTensors);
}

intrusive_ptr<Work> ProcessGroupMPI::alltoall(std::vector<Tensor>& outputTensors,
                                              std::vector<Tensor>& inputTensors,
                                              const AllToAllOptions&) {
  const char* op = "alltoall";
  OF_CHECK(inputTensors.size() == size_t(size_) && outputTensors.size() == size_t(size_),
           "[c10d] alltoall: inputTensors and outputTensors must hold one tensor per rank ({}), "
           "got {} and {}",
           size_, inputTensors.size(), outputTensors.size());
  std::vector<int64_t> send, recv;
  for (int q = 0; q < size_; ++q) {
    check_tensor(op, inputTensors[size_t(q)], fmt::format("inputTensors[{}]", q));
    check_tensor(op, outputTensors[size_t(q)], fmt::format("outputTensors[{}]", q));
    OF_CHECK(inputTensors[size_t(q)].dtype() == inputTensors[0].dtype() &&
                 outputTensors[size_t(q)].dtype() == inputTensors[0].dtype(),
             "[c10d] alltoall: every tensor must have one dtype ({}), got inputTensors[{}] {} and "
             "outputTensors[{}] {}",
             dtype_name(inputTensors[0].dtype()), q, describe(inputTensors[size_t(q)]), q,
             describe(outputTensors[size_t(q)]));
    send.push_back(int64_t(inputTensors[size_t(q)].nbytes()));
    recv.push_back(int64_t(outputTensors[size_t(q)].nbytes()));
  }
  Communicator& c = *impl_->comm;
  // the shapes differ from rank to rank; the op and the dtype must agree
  Tensor probe = empty({0}, inputTensors[0].options());
  agree(c, op, CallDesc(OpType::ALLTOALL, ReduceOp::SUM, 0, &probe));
  Tensor sendbuf = concat_bytes(inputTensors);
  int64_t total = 0;
  for (const Tensor& t : outputTensors) total += t.numel();
  Tensor recvbuf = empty({total}, inputTensors[0].options());
  c.alltoallv(sendbuf.data_ptr(), send, recvbuf.data_ptr(), recv);
  int64_t off = 0;
  for (Tensor& t : outputTensors) {
    t.copy_(recvbuf.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
  return done(rank_, OpType::ALLTOALL, outputTensors);
}

intrusive_ptr<Work> ProcessGroupMPI::send(std::vector<Tensor>& tensors, int dstRank, int tag) {
  const Tensor& t = single("send", tensors, "tensors");
  check_root("send", dstRank, size_);
  impl_->comm->send(t.data_ptr(), int64_t(t.nbytes()), dstRank, tag);
  return done(rank_, OpType::SEND);
}

intrusive_ptr<Work> ProcessGroupMPI::recv(std::vector<Tensor>& tensors, int srcRank, int tag) {
  const Tensor& t = single("recv", tensors, "tensors");
  check_root("recv", srcRank, size_);
  impl_->comm->recv(t.data_ptr(), int64_t(t.nbytes()), srcRank, tag);
  bump_version(t);
  return done(rank_, OpType::RECV, tensors);
}

intrusive_ptr<Work> ProcessGroupMPI::barrier(const BarrierOptions&) {
  impl_->comm->barrier();
  return done(rank_, OpType::BARRIER);
}

}  // namespace oneflow::c10d

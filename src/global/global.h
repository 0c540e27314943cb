// global.h (internal): the global-tensor layer's shared pieces (NOTE [Global tensors]).
#pragma once
#include <functional>
#include <mutex>
#include <unordered_map>

#include "dispatch.h"
#include "global/comm.h"
#include "oneflow/global.h"

namespace oneflow {

// What a global tensor's impl carries. The impl itself has the logical sizes (row-major
// strides), the dtype and device; its storage is the local piece's, so in-place writes to the
// piece bump the global tensor's version counter.
struct GlobalMeta {
  Placement placement;
  NdSbp sbp;
  Tensor local;  // this rank's piece
  // NOTE [ZeRO]: a parameter of a ZeroRedundancyAdam keeps a partial-sum gradient (backward
  // does not all-reduce it); the optimizer's step reduce-scatters the group's gradients at once
  bool partial_grad = false;
};

struct PlacementImpl {
  DeviceType device_type = kCPU;
  std::vector<int> ranks;          // row-major over the mesh
  std::vector<int64_t> hierarchy;  // mesh shape
  std::mutex mu;
  std::unordered_map<int64_t, std::shared_ptr<global::Communicator>> axis_comms;
  std::shared_ptr<global::Communicator> all_comm;
};

namespace global {

struct Range {
  int64_t start = 0, size = 0;
};
// Piece r of p balanced pieces of n (the first n % p pieces one larger).
Range balanced_piece(int64_t n, int64_t p, int64_t r);
// Start and size of this rank's piece in every dim of `logical`.
struct Box {
  DimVector start, size;
};
Box piece_box(IntArrayRef logical, const NdSbp& sbp, const Placement& pl,
              const std::vector<int64_t>& coord);
// This process' rank in the world, and its mesh coordinate in `pl` ([op] error when absent).
int this_rank();
// A meta check of to_global (NOTE [Checked global meta]) issued one collective; how many so far.
void note_meta_check();
uint64_t meta_checks();
// NOTE [Ranks outside a placement]: whether this rank holds pieces of tensors on `pl` (an
// [op] error when pl names ranks beyond the world). On the other ranks a global tensor on pl
// is a handle: its logical shape, dtype, placement and SBP, with an empty local piece; ops on
// handles compute the same metadata and signatures (so every rank runs the same program and
// records the same autograd graph) but no data and no collective.
bool holds_piece(const Placement& pl, const char* op);
// This rank's coordinate in `pl`, empty when it holds no piece (the same [op] error).
std::vector<int64_t> coord_in(const Placement& pl, const char* op);
Tensor make_handle(IntArrayRef logical, ScalarType dtype, Device device, const Placement& pl,
                   NdSbp sbp);
// Moves a global tensor to another placement (NOTE [Moving between placements]): every rank
// of either placement takes part; differentiable (the gradient moves back).
Tensor move_placement(const Tensor& t, const Placement& dst, const NdSbp& to);
std::vector<int64_t> my_coord(const Placement& pl, const char* op);
// The communicator of the ranks sharing every coordinate but `axis` with this rank.
Communicator& axis_comm(const Placement& pl, int64_t axis);
// The communicator of every rank of the placement.
Communicator& placement_comm(const Placement& pl);
// NOTE [Device communicators]: the communicators above carry host memory (the pieces of CPU
// tensors, and every host-side exchange: shapes, fingerprints). The pieces of CUDA tensors go
// through an NCCL communicator over the same ranks (NOTE [NCCL communicator]), bootstrapped
// over the host one and cached per (ranks, device): these return it for a tensor on `dev`, and
// the host communicator for a CPU tensor.
Communicator& axis_data_comm(const Placement& pl, int64_t axis, Device dev);
// Of world ranks `sorted` (ascending, this rank among them).
Communicator& ranks_data_comm(const std::vector<int>& sorted, Device dev);

// This thread's global-dispatch signature cache (NOTE [Signature cache]): lookups that found an
// entry, lookups that did not, and the entries held.
struct SignatureCacheStats {
  uint64_t hits = 0, misses = 0;
  size_t entries = 0;
};
SignatureCacheStats signature_cache_stats();

// Wraps `local` (this rank's piece) as a global tensor of the given logical sizes.
Tensor make_global(const Tensor& local, IntArrayRef logical, const Placement& pl, NdSbp sbp);
const GlobalMeta& meta(const Tensor& t);  // t must be global
// The SBP list checked against the placement and the logical rank (split dims in range).
void check_sbp(const char* op, const Placement& pl, const NdSbp& sbp, int64_t ndim);

// Boxing on local pieces: the piece of the same logical tensor under `to` (collectives on the
// placement's axis communicators). Not differentiable by itself (the boxing op is).
Tensor box_local(const Tensor& local, IntArrayRef logical, const Placement& pl, const NdSbp& from,
                 const NdSbp& to);

// Registers the global layer's own ops (NOTE [Boxing ops]); register_global_ops calls it.
void register_boxing_ops();
// The hook dispatch() calls for ops with global inputs (installed by the op table).
TensorList global_dispatch(const OpDef& op, TensorList inputs, Attrs attrs, Tensor* out);
// The boxing op: a global tensor under another SBP (differentiable; the VJP boxes back).
Tensor boxing(const Tensor& t, const NdSbp& to);

// The whole logical value of a global tensor on this rank (collective: every rank calls it).
Tensor logical_value(const Tensor& t);
// Zeros of a global tensor's shape (an output no gradient reached), partial sums as broadcast.
Tensor zeros_for(IntArrayRef sizes, ScalarType dtype, const GlobalMeta& m);
// This rank's `piece` as the piece of a global tensor of `logical` under `sbp` on `pl`, with no
// communication (the caller knows the logical shape); differentiable (the gradient is the
// piece of the global gradient). For ops computed piece by piece (attention split by heads).
Tensor piece_to_global(const Tensor& piece, const Placement& pl, const NdSbp& sbp,
                       IntArrayRef logical);
// This rank's piece of a global tensor with no partial-sum axis, for ops computed piece by
// piece and wrapped back with piece_to_global under the same SBP: its gradient is the piece of
// the gradient under that same SBP (to_local's is the dual: a local result's gradient is an
// addend, which would count a broadcast axis' copies once each).
Tensor piece_of(const Tensor& t);
// The box `b` of a whole value (a view), and whether the rank at `coord` holds the value under
// `sbp`'s partial sums (the first rank of each P axis does; the others hold zeros).
Tensor box_slice(const Tensor& full, const Box& b);
bool partial_keeper(const NdSbp& sbp, const std::vector<int64_t>& coord);
// The logical tensor of `size` made by `make` in full on every rank, each rank keeping its
// piece of `sbp` on `pl` (the global factories; `op` names them in errors).
Tensor global_factory(const char* op, IntArrayRef size, const Placement& pl, const NdSbp& sbp,
                      const TensorOptions& o,
                      const std::function<Tensor(IntArrayRef, TensorOptions)>& make);

// NOTE [Bucketed gradient all-reduce] (reducer.cpp): open for the length of one backward pass
// (run_backward opens one when the world has several ranks, bucketing is on and no graph is
// built or traced). AccumulateGrad offers a global leaf's gradient; offer() takes it when the
// gradient only needs P -> B on one mesh axis. poll() advances the started all-reduces;
// finish() waits for them and returns each leaf with its reduced gradient (leaf's SBP).
class GradReducer {
 public:
  GradReducer();
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;
  static GradReducer* current();  // this thread's open reducer, or null
  bool offer(const std::shared_ptr<TensorImpl>& var, const Tensor& g);
  void poll();
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> finish();

 private:
  struct Pending {
    std::shared_ptr<TensorImpl> var;
    Tensor local;  // the partial-sum piece, until it is copied into its bucket
    DimVector local_sizes, logical;
    Placement placement;
    NdSbp to;
  };
  struct Bucket;
  void start(std::unique_ptr<Bucket> b, bool blocking);
  int64_t cap_;
  GradReducer* prev_;
  std::vector<std::unique_ptr<Bucket>> open_, started_;  // started_: in start order
  uint64_t gradients_ = 0, buckets_ = 0;
  double seconds_ = 0;
};
// Adds time spent reducing gradients outside a bucket (AccumulateGrad's blocking boxing) to
// distributed::grad_reduction_stats().
void note_unbucketed_reduction(double seconds);

// The number of collectives issued so far by this rank, all communicators together.
uint64_t collectives_issued();
void count_collective();

}  // namespace global
}  // namespace oneflow

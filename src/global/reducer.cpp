// reducer.cpp: the bucketed, overlapped all-reduce of data-parallel gradients.
//
// NOTE [Bucketed gradient all-reduce]: a broadcast parameter's gradient arrives at its
// AccumulateGrad as a partial sum (docs/GLOBAL.md, NOTE [Boxing gradients]). Reducing each
// one there, with a blocking all-reduce, makes backward wait for every rank at every
// parameter, and sends many small messages. Instead, while a backward pass runs (a
// GradReducer, opened by run_backward when the world has several ranks and bucketing is on),
// AccumulateGrad offers such a gradient here: one that differs from its leaf's SBP only by
// P -> B on one mesh axis (the all-reduce of the local piece over that axis' group). The
// offered gradients are packed in arrival order — the order backward produces them, the same
// on every rank — into buckets, one open bucket per (communicator, dtype); a bucket whose
// gradients reach `grad_bucket_bytes()` is copied into one flat buffer and its all-reduce is
// started without waiting (MPI_Iallreduce). The engine polls the started buckets after every
// node it runs (MPI progresses a non-blocking collective only inside MPI calls), so the
// reduction proceeds while backward computes the gradients of earlier layers. When backward
// has run every node, the rest of the open buckets are reduced with the blocking all-reduce
// (nothing is left to overlap them with, and Open MPI's blocking all-reduce is faster than its
// non-blocking one), the started ones are waited for, and each
// gradient (a view of its bucket, under the leaf's SBP) is accumulated into `.grad` as
// AccumulateGrad would have. Every rank starts the same buckets in the same order, so the
// non-blocking collectives match. Not deferred (reduced at once, as before): a backward that
// builds a graph (create_graph), a traced step, float16/bfloat16 gradients (reduced in float32
// by boxing), and any other SBP change.
#include <chrono>

#include "global/global.h"

namespace oneflow {

namespace distributed {
namespace {
int64_t initial_bucket_bytes() {
  if (const char* e = std::getenv("OF_GRAD_BUCKET_BYTES")) {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end && *end == '\0' && v >= 0) return v;
    fail("[distributed] OF_GRAD_BUCKET_BYTES must be a byte count >= 0, got '{}'", e);
  }
  return int64_t(1) << 20;
}
std::atomic<int64_t> g_bucket_bytes{-1};
GradReductionStats g_stats;
std::mutex g_stats_mu;
}  // namespace

void set_grad_bucket_bytes(int64_t bytes) {
  if (bytes < 0) fail("[distributed::set_grad_bucket_bytes] bytes must be >= 0, got {}", bytes);
  g_bucket_bytes.store(bytes);
}
int64_t grad_bucket_bytes() {
  int64_t b = g_bucket_bytes.load();
  if (b < 0) {
    b = initial_bucket_bytes();
    g_bucket_bytes.store(b);
  }
  return b;
}
GradReductionStats grad_reduction_stats() {
  std::lock_guard<std::mutex> lk(g_stats_mu);
  return g_stats;
}
void reset_grad_reduction_stats() {
  std::lock_guard<std::mutex> lk(g_stats_mu);
  g_stats = {};
}
}  // namespace distributed

namespace global {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

thread_local GradReducer* t_current = nullptr;

// The mesh axis on which `from` is P and `to` is B when that is the only difference, else -1.
int64_t single_partial_axis(const NdSbp& from, const NdSbp& to) {
  if (from.size() != to.size()) return -1;
  int64_t axis = -1;
  for (size_t a = 0; a < from.size(); ++a) {
    if (from[a] == to[a]) continue;
    if (axis >= 0 || !from[a].is_partial_sum() || !to[a].is_broadcast()) return -1;
    axis = int64_t(a);
  }
  return axis;
}

}  // namespace

void note_unbucketed_reduction(double seconds) {
  std::lock_guard<std::mutex> lk(distributed::g_stats_mu);
  distributed::g_stats.seconds += seconds;
  ++distributed::g_stats.gradients_unbucketed;
}

struct GradReducer::Bucket {
  Communicator* comm = nullptr;
  ScalarType dtype = kFloat32;
  int64_t bytes = 0;
  std::vector<Pending> pending;
  Tensor flat;
  std::unique_ptr<CommRequest> request;
  bool done = false;
};

GradReducer::GradReducer() : cap_(distributed::grad_bucket_bytes()), prev_(t_current) {
  t_current = this;
}

GradReducer::~GradReducer() {
  t_current = prev_;
  // Unwinding (an exception in backward): started collectives still write their buffers, so
  // they finish (the request's destructor waits) before the buffers go.
  for (auto& b : started_) b->request.reset();  // (null for a blocking bucket)
}

GradReducer* GradReducer::current() { return t_current; }

bool GradReducer::offer(const std::shared_ptr<TensorImpl>& var, const Tensor& g) {
  if (cap_ <= 0 || !var->global || !g.is_global()) return false;
  const GlobalMeta& gm = meta(g);
  const NdSbp& to = var->global->sbp;
  const int64_t axis = single_partial_axis(gm.sbp, to);
  const ScalarType dt = g.dtype();
  if (axis < 0 || (dt != kFloat32 && dt != kFloat64) || !(gm.placement == var->global->placement))
    return false;
  if (!holds_piece(gm.placement, "backward")) return false;  // a handle: nothing to reduce here
  const double t0 = now_s();
  Communicator& c = axis_data_comm(gm.placement, axis, gm.local.device());
  Bucket* b = nullptr;
  for (auto& o : open_)
    if (o->comm == &c && o->dtype == dt) b = o.get();
  if (!b) {
    open_.push_back(std::make_unique<Bucket>());
    b = open_.back().get();
    b->comm = &c;
    b->dtype = dt;
  }
  b->pending.push_back({var, gm.local, DimVector(gm.local.sizes().begin(), gm.local.sizes().end()),
                        DimVector(g.sizes().begin(), g.sizes().end()), gm.placement, to});
  b->bytes += gm.local.numel() * int64_t(itemsize(dt));
  ++gradients_;
  if (b->bytes >= cap_) {
    for (size_t k = 0; k < open_.size(); ++k)
      if (open_[k].get() == b) {
        start(std::move(open_[k]), false);
        open_.erase(open_.begin() + std::ptrdiff_t(k));
        break;
      }
  }
  seconds_ += now_s() - t0;
  return true;
}

void GradReducer::start(std::unique_ptr<Bucket> b, bool blocking) {
  NoGradGuard ng;
  int64_t n = 0;
  for (auto& p : b->pending) n += p.local.numel();
  b->flat = empty({n}, TensorOptions().dtype(b->dtype).device(b->pending.front().local.device()));
  int64_t off = 0;
  for (auto& p : b->pending) {
    const int64_t k = p.local.numel();
    if (k > 0) b->flat.narrow(0, off, k).view(p.local.sizes()).copy_(p.local);
    p.local = Tensor();  // the bucket holds the values now
    off += k;
  }
  if (blocking) {  // nothing left to overlap: the blocking collective is the faster one
    b->comm->allreduce_sum(b->flat.data_ptr(), n, b->dtype);
    b->done = true;
  } else {
    b->request = b->comm->iallreduce_sum(b->flat.data_ptr(), n, b->dtype);
  }
  ++buckets_;
  started_.push_back(std::move(b));
}

void GradReducer::poll() {
  if (started_.empty()) return;
  const double t0 = now_s();
  for (auto& b : started_)
    if (!b->done) b->done = b->request->test();
  seconds_ += now_s() - t0;
}

std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> GradReducer::finish() {
  const double t0 = now_s();
  // Backward is over: the rest of the open buckets are reduced at once (blocking).
  while (!open_.empty()) {
    start(std::move(open_.front()), true);
    open_.erase(open_.begin());
  }
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> out;
  for (auto& b : started_) {
    if (!b->done) b->request->wait();  // in start order, as every rank
    b->done = true;
    int64_t off = 0;
    for (auto& p : b->pending) {
      int64_t k = 1;
      for (int64_t s : p.local_sizes) k *= s;
      Tensor piece = b->flat.narrow(0, off, k).view(p.local_sizes);
      off += k;
      out.emplace_back(p.var, make_global(piece, p.logical, p.placement, p.to));
    }
  }
  started_.clear();
  seconds_ += now_s() - t0;
  std::lock_guard<std::mutex> lk(distributed::g_stats_mu);
  distributed::g_stats.gradients_bucketed += gradients_;
  distributed::g_stats.buckets += buckets_;
  distributed::g_stats.seconds += seconds_;
  return out;
}

}  // namespace global
}  // namespace oneflow

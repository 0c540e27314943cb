// global.cpp: placements, SBP, the world, global tensor construction and conversion.
// NOTE [Global tensors] (placement.h) and docs/GLOBAL.md.
#include "global/global.h"

#include <atomic>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "allocator.h"
#include "cuda_backend.h"
#include "autograd/node.h"
#include "module_loader.h"

namespace oneflow {

// ---------------------------------------------------------------- Sbp, Placement

std::string Sbp::str() const {
  switch (kind_) {
    case Kind::Split:
      return fmt::format("S({})", dim_);
    case Kind::Broadcast:
      return "B";
    case Kind::PartialSum:
      return "P";
  }
  return "?";
}

std::string sbp_str(const NdSbp& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + ")";
}

std::ostream& operator<<(std::ostream& os, const Sbp& s) { return os << s.str(); }
std::ostream& operator<<(std::ostream& os, const Placement& p) { return os << p.str(); }

namespace {

DeviceType placement_device(std::string_view type) {
  if (type == "cpu") return kCPU;
  if (type == "cuda") return kCUDA;
  fail("[Placement] device type must be \"cpu\" or \"cuda\", got \"{}\"", type);
}

std::shared_ptr<PlacementImpl> make_placement(std::string_view type, std::vector<int> ranks,
                                              std::vector<int64_t> hierarchy) {
  auto p = std::make_shared<PlacementImpl>();
  p->device_type = placement_device(type);
  OF_CHECK(!ranks.empty(), "[Placement] needs at least one rank");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    OF_CHECK(sorted[i] >= 0, "[Placement] rank {} is negative", sorted[i]);
    OF_CHECK(i == 0 || sorted[i] != sorted[i - 1], "[Placement] rank {} appears twice", sorted[i]);
  }
  p->ranks = std::move(ranks);
  p->hierarchy = std::move(hierarchy);
  return p;
}

}  // namespace

Placement::Placement(std::string_view device_type, std::vector<int> ranks)
    : impl_(make_placement(device_type, ranks, {int64_t(ranks.size())})) {}

Placement::Placement(std::string_view device_type, std::vector<std::vector<int>> mesh) {
  OF_CHECK(!mesh.empty() && !mesh[0].empty(), "[Placement] the mesh is empty");
  std::vector<int> flat;
  for (const auto& row : mesh) {
    if (row.size() != mesh[0].size())
      fail("[Placement] mesh rows must have the same length, got {} and {}", mesh[0].size(),
           row.size());
    flat.insert(flat.end(), row.begin(), row.end());
  }
  impl_ =
      make_placement(device_type, std::move(flat), {int64_t(mesh.size()), int64_t(mesh[0].size())});
}

namespace {
std::vector<int> int_ranks(const std::vector<int64_t>& ranks) {
  std::vector<int> r;
  r.reserve(ranks.size());
  for (int64_t k : ranks) {
    // a negative rank that fits is refused by make_placement, naming it
    OF_CHECK(k >= std::numeric_limits<int>::min() && k <= std::numeric_limits<int>::max(),
             "[Placement] rank {} is out of range (ranks are 0 .. {})", k,
             std::numeric_limits<int>::max());
    r.push_back(int(k));
  }
  return r;
}
}  // namespace

Placement::Placement(std::string_view device_type, const std::vector<int64_t>& ranks)
    : Placement(device_type, int_ranks(ranks)) {}

Placement::Placement(std::string_view device_type, const std::vector<std::vector<int64_t>>& mesh)
    : Placement(device_type, [&] {
        std::vector<std::vector<int>> m;
        for (const auto& row : mesh) m.push_back(int_ranks(row));
        return m;
      }()) {}

Placement Placement::all(std::string_view device_type) {
  std::vector<int> r(static_cast<size_t>(distributed::world_size()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = int(i);
  return Placement(device_type, std::move(r));
}

DeviceType Placement::device_type() const { return impl_->device_type; }
const std::vector<int>& Placement::ranks() const { return impl_->ranks; }
const std::vector<int64_t>& Placement::hierarchy() const { return impl_->hierarchy; }
bool Placement::contains(int rank) const {
  return std::find(impl_->ranks.begin(), impl_->ranks.end(), rank) != impl_->ranks.end();
}

std::vector<int64_t> Placement::coord_of(int rank) const {
  auto it = std::find(impl_->ranks.begin(), impl_->ranks.end(), rank);
  if (it == impl_->ranks.end()) return {};
  int64_t flat = it - impl_->ranks.begin();
  std::vector<int64_t> c(impl_->hierarchy.size());
  for (size_t a = c.size(); a-- > 0;) {
    c[a] = flat % impl_->hierarchy[a];
    flat /= impl_->hierarchy[a];
  }
  return c;
}

std::string Placement::str() const {
  const char* dev = impl_->device_type == kCPU ? "cpu" : "cuda";
  std::string r;
  if (impl_->hierarchy.size() == 1) {
    r = fmt::format("[{}]", fmt::join(impl_->ranks, ", "));
  } else {
    const int64_t cols = impl_->hierarchy[1];
    r = "[";
    for (int64_t i = 0; i < impl_->hierarchy[0]; ++i) {
      std::vector<int> row(impl_->ranks.begin() + i * cols, impl_->ranks.begin() + (i + 1) * cols);
      r += fmt::format("{}[{}]", i ? ", " : "", fmt::join(row, ", "));
    }
    r += "]";
  }
  return fmt::format("Placement({}, ranks={})", dev, r);
}

bool operator==(const Placement& a, const Placement& b) {
  return a.impl_ == b.impl_ ||
         (a.impl_->device_type == b.impl_->device_type && a.impl_->ranks == b.impl_->ranks &&
          a.impl_->hierarchy == b.impl_->hierarchy);
}

// ---------------------------------------------------------------- the world

namespace global {
namespace {

class SelfComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  void allreduce_sum(void*, int64_t, ScalarType) override { ++stats_.allreduce; }
  void allgatherv(const void* send, void* recv, const std::vector<int64_t>& b) override {
    ++stats_.allgather;
    if (b[0] && send != recv) std::memmove(recv, send, size_t(b[0]));
  }
  void reduce_scatterv_sum(const void* send, void* recv, const std::vector<int64_t>& counts,
                           ScalarType dtype) override {
    ++stats_.reduce_scatter;
    if (counts[0]) std::memmove(recv, send, size_t(counts[0]) * itemsize(dtype));
  }
  void alltoallv(const void* send, const std::vector<int64_t>& sb, void* recv,
                 const std::vector<int64_t>&) override {
    ++stats_.alltoall;
    if (sb[0]) std::memmove(recv, send, size_t(sb[0]));
  }
  void broadcast(void*, int64_t, int) override { ++stats_.broadcast; }
  void send(const void*, int64_t, int dst, int) override {
    fail("[distributed] send to rank {} in a world of one process", dst);
  }
  void recv(void*, int64_t, int src, int) override {
    fail("[distributed] recv from rank {} in a world of one process", src);
  }
  void barrier() override { ++stats_.barrier; }
  std::shared_ptr<Communicator> group(const std::vector<int>& ranks) override {
    OF_CHECK(ranks.size() == 1 && ranks[0] == 0, "[distributed] group of ranks outside the world");
    return make_self_comm();
  }
};

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

std::mutex g_world_mu;
Communicator* g_world = nullptr;
std::vector<std::shared_ptr<Communicator>> g_all_comms;  // for collectives_issued()

Communicator* create_world() {
  if (!launched_by_mpi()) {
    auto s = make_self_comm();
    g_all_comms.push_back(s);
    return s.get();
  }
  std::string why;
  void* handle = load_core_module("OF_MPI_MODULE", "liboneflow_mpi.so", &why);
  if (!handle)
    fail(
        "[distributed] this process was started by an MPI launcher, but the MPI communicator "
        "is not available: {} (oneflow builds liboneflow_mpi.so when Open MPI's development "
        "files are installed)",
        why);
  auto init = reinterpret_cast<MpiModuleInitFn>(module_symbol(handle, kMpiModuleInitSymbol, &why));
  if (!init) fail("[distributed] liboneflow_mpi.so: {}", why);
  Communicator* w = init(ONEFLOW_BUILD_ID);
  g_all_comms.push_back(std::shared_ptr<Communicator>(w, [](Communicator*) {}));
  return w;
}

}  // namespace

namespace {
struct DoneRequest final : CommRequest {
  bool test() override { return true; }
  void wait() override {}
};
}  // namespace

std::unique_ptr<CommRequest> Communicator::iallreduce_sum(void* buf, int64_t count,
                                                          ScalarType dtype) {
  allreduce_sum(buf, count, dtype);
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<CommRequest> Communicator::isend(const void*, int64_t, int dst, int) {
  fail("[{}] isend to rank {}: this communicator of {} rank(s) has no point-to-point transport",
       backend(), dst, size());
}

void Communicator::alltoall_blocks(const void* sendbuf, const std::vector<StridedBlock>& send,
                                   void* recvbuf, const std::vector<StridedBlock>& recv) {
  std::vector<int64_t> sb, rb;
  int64_t st = 0, rt = 0;
  for (const StridedBlock& b : send) st += sb.emplace_back(b.bytes());
  for (const StridedBlock& b : recv) rt += rb.emplace_back(b.bytes());
  std::vector<char> packed(size_t(std::max<int64_t>(st, 1))), got(size_t(std::max<int64_t>(rt, 1)));
  char* p = packed.data();
  for (const StridedBlock& b : send)
    for (int64_t r = 0; r < b.rows; ++r, p += b.row_bytes)
      std::memcpy(p, static_cast<const char*>(sendbuf) + b.offset + r * b.stride,
                  size_t(b.row_bytes));
  alltoallv(packed.data(), sb, got.data(), rb);
  const char* q = got.data();
  for (const StridedBlock& b : recv)
    for (int64_t r = 0; r < b.rows; ++r, q += b.row_bytes)
      std::memcpy(static_cast<char*>(recvbuf) + b.offset + r * b.stride, q, size_t(b.row_bytes));
}

std::shared_ptr<Communicator> make_self_comm() { return std::make_shared<SelfComm>(); }

Communicator& world() {
  std::lock_guard<std::mutex> lk(g_world_mu);
  if (!g_world) g_world = create_world();
  return *g_world;
}

bool world_initialized() {
  std::lock_guard<std::mutex> lk(g_world_mu);
  return g_world != nullptr;
}

int this_rank() { return world().rank(); }

std::atomic<uint64_t> g_meta_checks{0};

// (the meta checks of to_global, NOTE [Checked global meta], are not counted: tests count the
// collectives that move data)
uint64_t collectives_issued() {
  Communicator& w = world();
  std::lock_guard<std::mutex> lk(g_world_mu);
  (void)w;
  uint64_t n = 0;
  for (const auto& c : g_all_comms) n += c->stats().total();
  return n - g_meta_checks.load();
}

void note_meta_check() { g_meta_checks.fetch_add(1); }
uint64_t meta_checks() { return g_meta_checks.load(); }

namespace {
void remember_comm(const std::shared_ptr<Communicator>& c) {
  std::lock_guard<std::mutex> lk(g_world_mu);
  for (const auto& k : g_all_comms)
    if (k.get() == c.get()) return;
  g_all_comms.push_back(c);
}
// The communicator of world ranks `sorted` (ascending): the world itself when it is all of it.
std::shared_ptr<Communicator> comm_of(const std::vector<int>& sorted) {
  std::shared_ptr<Communicator> c =
      sorted.size() == size_t(world().size())
          ? std::shared_ptr<Communicator>(&world(), [](Communicator*) {})
          : world().group(sorted);
  remember_comm(c);
  return c;
}
}  // namespace

namespace {
// The world ranks sharing every coordinate but `axis` with this rank, in the order of their
// coordinate on `axis` (which must be ascending: communicator ranks ascend).
std::vector<int> axis_members(const Placement& pl, int64_t axis) {
  PlacementImpl& p = *pl.impl();
  std::vector<int64_t> coord = my_coord(pl, "boxing");
  std::vector<int> members;
  for (int r : p.ranks) {
    std::vector<int64_t> c = pl.coord_of(r);
    bool same = true;
    for (size_t a = 0; a < c.size(); ++a)
      if (int64_t(a) != axis && c[a] != coord[a]) same = false;
    if (same) members.push_back(r);
  }
  OF_CHECK(std::is_sorted(members.begin(), members.end()),
           "[boxing] placement {}: ranks along a mesh axis must ascend with the coordinate",
           pl.str());
  return members;
}
}  // namespace

Communicator& axis_comm(const Placement& pl, int64_t axis) {
  PlacementImpl& p = *pl.impl();
  my_coord(pl, "boxing");
  {
    std::lock_guard<std::mutex> lk(p.mu);
    auto it = p.axis_comms.find(axis);
    if (it != p.axis_comms.end()) return *it->second;
  }
  std::shared_ptr<Communicator> c = comm_of(axis_members(pl, axis));
  std::lock_guard<std::mutex> lk(p.mu);
  p.axis_comms.emplace(axis, c);
  return *c;
}

Communicator& ranks_data_comm(const std::vector<int>& sorted, Device dev) {
  if (dev.is_cpu()) return *comm_of(sorted);
  static std::mutex mu;
  static std::map<std::pair<std::vector<int>, int>, std::shared_ptr<Communicator>> cache;
  const int index = dev.index() < 0 ? cuda_backend::current_device() : dev.index();
  const auto key = std::make_pair(sorted, index);
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return *it->second;
  }
  std::shared_ptr<Communicator> c = cuda_backend::nccl_comm(comm_of(sorted), index);
  remember_comm(c);
  std::lock_guard<std::mutex> lk(mu);
  return *cache.emplace(key, c).first->second;
}

Communicator& axis_data_comm(const Placement& pl, int64_t axis, Device dev) {
  if (dev.is_cpu()) return axis_comm(pl, axis);
  return ranks_data_comm(axis_members(pl, axis), dev);
}

Communicator& placement_comm(const Placement& pl) {
  PlacementImpl& p = *pl.impl();
  my_coord(pl, "placement");
  {
    std::lock_guard<std::mutex> lk(p.mu);
    if (p.all_comm) return *p.all_comm;
  }
  std::vector<int> sorted = p.ranks;
  std::sort(sorted.begin(), sorted.end());
  std::shared_ptr<Communicator> c = comm_of(sorted);
  std::lock_guard<std::mutex> lk(p.mu);
  p.all_comm = c;
  return *c;
}

// ---------------------------------------------------------------- pieces

Range balanced_piece(int64_t n, int64_t p, int64_t r) {
  const int64_t base = n / p, extra = n % p;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

Box piece_box(IntArrayRef logical, const NdSbp& sbp, const Placement& pl,
              const std::vector<int64_t>& coord) {
  Box b;
  b.start.assign(logical.size(), 0);
  b.size = DimVector(logical.begin(), logical.end());
  for (size_t a = 0; a < sbp.size(); ++a) {
    if (!sbp[a].is_split()) continue;
    const size_t d = size_t(sbp[a].dim());
    Range r = balanced_piece(b.size[d], pl.hierarchy()[a], coord[a]);
    b.start[d] += r.start;
    b.size[d] = r.size;
  }
  return b;
}

std::vector<int64_t> coord_in(const Placement& pl, const char* op) {
  const int n = world().size();
  for (int r : pl.ranks())
    if (r >= n) fail("[{}] {} names rank {}, but the world has {} process(es)", op, pl.str(), r, n);
  return pl.coord_of(this_rank());
}

bool holds_piece(const Placement& pl, const char* op) { return !coord_in(pl, op).empty(); }

Tensor make_handle(IntArrayRef logical, ScalarType dtype, Device device, const Placement& pl,
                   NdSbp sbp) {
  return make_global(empty({0}, TensorOptions(dtype).device(device)), logical, pl, std::move(sbp));
}

std::vector<int64_t> my_coord(const Placement& pl, const char* op) {
  std::vector<int64_t> c = coord_in(pl, op);
  if (c.empty())
    fail("[{}] rank {} is not in {}: a rank works only on tensors placed on it", op, this_rank(),
         pl.str());
  return c;
}

void check_sbp(const char* op, const Placement& pl, const NdSbp& sbp, int64_t ndim) {
  if (int64_t(sbp.size()) != pl.ndim())
    fail("[{}] {} has {} mesh axes, but {} SBP(s) were given {}", op, pl.str(), pl.ndim(),
         sbp.size(), sbp_str(sbp));
  for (const Sbp& s : sbp)
    if (s.is_split() && (s.dim() < 0 || s.dim() >= ndim))
      fail("[{}] {} splits dim {} of a tensor with {} dim(s)", op, sbp_str(sbp), s.dim(), ndim);
}

const GlobalMeta& meta(const Tensor& t) {
  if (!t.is_global()) fail("[global] the tensor is local (call to_global first)");
  return *t.impl()->global;
}

Tensor make_global(const Tensor& local, IntArrayRef logical, const Placement& pl, NdSbp sbp) {
  auto g = new_tensor_impl();
  g->storage = local.impl()->storage;
  g->offset = local.impl()->offset;
  g->sizes = DimVector(logical.begin(), logical.end());
  g->strides = contiguous_strides(logical);
  g->dtype = local.dtype();
  g->device = local.device();
  g->refresh_contiguous();
  g->global = std::make_shared<GlobalMeta>(GlobalMeta{pl, std::move(sbp), local});
  return Tensor(std::move(g));
}

}  // namespace global

// ---------------------------------------------------------------- distributed API

namespace distributed {
void init() { global::world(); }
bool is_initialized() { return global::world_initialized(); }
int rank() { return global::world().rank(); }
int world_size() { return global::world().size(); }
void barrier() { global::world().barrier(); }
std::string backend() { return global::world().backend(); }
uint64_t collectives_issued() { return global::collectives_issued(); }

namespace {
// -1: not set yet (OF_CHECK_GLOBAL_META=0 turns the check off; on by default)
std::atomic<int> g_check_meta{-1};
}  // namespace
void set_check_global_meta(bool on) { g_check_meta.store(on ? 1 : 0); }
bool check_global_meta() {
  int v = g_check_meta.load();
  if (v < 0) {
    const char* e = std::getenv("OF_CHECK_GLOBAL_META");
    v = e && std::string(e) == "0" ? 0 : 1;
    g_check_meta.store(v);
  }
  return v == 1;
}
}  // namespace distributed

}  // namespace oneflow

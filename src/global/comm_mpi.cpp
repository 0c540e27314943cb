// comm_mpi.cpp: the MPI communicator, built into liboneflow_mpi.so (NOTE [MPI module]).
// The core dlopen's this module only when the process was started by an MPI launcher, so a
// single-process program maps no MPI library. Every MPI return code is checked (the world
// communicator returns errors instead of aborting) and becomes an of::Error naming the call.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "global/comm.h"
#include "oneflow/error.h"

namespace oneflow::global {
namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING + 1] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("[mpi] {} failed: {}", call, std::string(msg, size_t(len)));
}

// NOTE [Collective watchdog]: MPI has no timeouts. Every collective call marks its start; a
// watchdog thread ends this rank (exit status 3; mpirun then ends the others) when one has not
// finished within $OF_COLLECTIVE_TIMEOUT seconds (default 300; 0 disables), saying which call
// and which collective number it was, so a dead, diverged or stuck rank never hangs the job.
//
// NOTE [Peer heartbeat]: across hosts the collective timeout is the wrong tool. A host that is
// cut off (its link down, a switch gone) resets no connection: MPI's TCP sockets retransmit for
// ~15 minutes, so each rank waits in its collective until the 300 s watchdog, and the ranks of
// the two sides cannot tell a partition from a slow peer. So when the world spans more than one
// host (MPI_COMM_TYPE_SHARED splits it), the watchdog thread also sends a UDP datagram every
// second to each rank on another host (to every IPv4 address that rank's host has, exchanged at
// start-up) and notes when each one was last heard from. The thread runs whatever the main
// thread does, so a rank that is busy (a long step, a checkpoint write) still beats; silence
// means the process is gone, stopped, or unreachable. A rank waiting in a collective while a
// peer has been silent for $OF_PEER_TIMEOUT seconds (default 40; 0 disables; one host has no
// heartbeat, mpirun sees its ranks die) ends with exit status 3, naming the call, the silent
// rank and its host. Only a rank waiting in a collective ends: a peer that finished and exited
// normally falls silent too; and a peer never heard from (UDP blocked between the hosts, no
// IPv4 address) is not watched, the collective watchdog still covering it. The launcher's own
// lifeline (mpirun's TCP keepalive to its remote daemons, docs/GLOBAL.md "Multi-host
// launching") ends mpirun; it should detect the loss first, since mpirun no longer treats a
// lost daemon as ended once a rank has failed.
struct PeerInfo {
  static constexpr int kMaxAddrs = 8;
  uint32_t addrs[kMaxAddrs];  // IPv4, network order
  int32_t n_addrs;
  int32_t host;   // the lowest world rank on the same host
  uint16_t port;  // the heartbeat socket's, network order
  char name[64];  // the host name, for messages
};

struct Heartbeat {
  static constexpr uint32_t kMagic = 0x4f464842;  // "OFHB"
  struct Datagram {
    uint32_t magic;
    uint32_t nonce;  // the job's, from rank 0: ignores another job's beats
    int32_t rank;
  };
  int fd = -1;
  uint32_t nonce = 0;
  std::vector<PeerInfo> peers;
  std::vector<int> remote;  // the ranks on other hosts
  std::unique_ptr<std::atomic<int64_t>[]> last_heard_ms;
};

struct Watchdog {
  std::atomic<const char*> call{nullptr};
  std::atomic<int64_t> started_ms{0};
  std::atomic<uint64_t> sequence{0};
  double timeout_s = 300;
  double peer_timeout_s = 0;
  int rank = 0;
  Heartbeat hb;

  void start() {
    if (const char* e = std::getenv("OF_COLLECTIVE_TIMEOUT")) timeout_s = std::atof(e);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    start_heartbeat();
    if (timeout_s <= 0 && peer_timeout_s <= 0) return;
    std::thread([this] {
      int64_t last_beat = 0;
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const int64_t now = now_ms();
        if (peer_timeout_s > 0) {
          if (now - last_beat >= 1000) {
            beat();
            last_beat = now;
          }
          listen(now);
        }
        const char* c = call.load();
        if (!c) continue;
        const double waited = double(now - started_ms.load()) / 1e3;
        if (timeout_s > 0 && waited > timeout_s && call.load() == c) {
          std::fprintf(stderr,
                       "[mpi] rank %d: %s (collective #%llu of this rank) did not complete "
                       "within %.0f s (OF_COLLECTIVE_TIMEOUT): another rank died, took another "
                       "path or is stuck; aborting every rank\n",
                       rank, c, (unsigned long long)sequence.load(), timeout_s);
          abort_rank();
        }
        if (peer_timeout_s > 0) check_peers(c, now);
      }
    }).detach();
  }

  // Exchanges the heartbeat addresses (main thread, collective over the world) and decides
  // whether the heartbeat runs (NOTE [Peer heartbeat]).
  void start_heartbeat() {
    int world = 1;
    check(MPI_Comm_size(MPI_COMM_WORLD, &world), "MPI_Comm_size");
    MPI_Comm node = MPI_COMM_NULL;
    int host = rank;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
      check(MPI_Allreduce(&rank, &host, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce");
      MPI_Comm_free(&node);
    }
    int is_leader = host == rank ? 1 : 0, hosts = 1;
    check(MPI_Allreduce(&is_leader, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    peer_timeout_s = 40;
    if (const char* e = std::getenv("OF_PEER_TIMEOUT")) peer_timeout_s = std::atof(e);
    if (hosts < 2) peer_timeout_s = 0;
    int want = peer_timeout_s > 0 && world > 1 ? 1 : 0, all_want = 0;
    check(MPI_Allreduce(&want, &all_want, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    PeerInfo me{};
    me.host = host;
    gethostname(me.name, sizeof me.name - 1);
    if (all_want) open_socket(&me);
    // every rank takes part in the exchange, so the ranks agree on whether it happened
    int ok = hb.fd >= 0 ? 1 : 0, all_ok = 0;
    check(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (!all_want || !all_ok) {
      if (all_want && rank == 0)
        std::fprintf(stderr,
                     "[mpi] no UDP socket for the peer heartbeat on some rank: silent hosts are "
                     "caught by the collective watchdog only\n");
      if (hb.fd >= 0) close(hb.fd), hb.fd = -1;
      peer_timeout_s = 0;
      return;
    }
    uint32_t nonce = std::random_device{}();
    check(MPI_Bcast(&nonce, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
    hb.nonce = nonce;
    hb.peers.resize(size_t(world));
    check(MPI_Allgather(&me, int(sizeof me), MPI_BYTE, hb.peers.data(), int(sizeof me), MPI_BYTE,
                        MPI_COMM_WORLD),
          "MPI_Allgather");
    for (int r = 0; r < world; ++r)
      if (hb.peers[size_t(r)].host != host) hb.remote.push_back(r);
    hb.last_heard_ms.reset(new std::atomic<int64_t>[size_t(world)]);
    for (int r = 0; r < world; ++r) hb.last_heard_ms[size_t(r)].store(0);  // not yet heard
  }

  // A non-blocking UDP socket on every interface, and this host's IPv4 addresses but loopback.
  void open_socket(PeerInfo* me) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      close(fd);
      return;
    }
    me->port = a.sin_port;
    ifaddrs* ifs = nullptr;
    if (getifaddrs(&ifs) == 0) {
      for (ifaddrs* i = ifs; i && me->n_addrs < PeerInfo::kMaxAddrs; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK))
          me->addrs[me->n_addrs++] = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      freeifaddrs(ifs);
    }
    hb.fd = fd;
  }

  void beat() {
    const Heartbeat::Datagram d{Heartbeat::kMagic, hb.nonce, rank};
    for (int r : hb.remote) {
      const PeerInfo& p = hb.peers[size_t(r)];
      for (int k = 0; k < p.n_addrs; ++k) {
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = p.port;
        to.sin_addr.s_addr = p.addrs[k];
        // errors (no route while a link is down) are what the silence then reports
        (void)sendto(hb.fd, &d, sizeof d, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to),
                     sizeof to);
      }
    }
  }

  void listen(int64_t now) {
    Heartbeat::Datagram d{};
    for (;;) {
      const ssize_t n = recv(hb.fd, &d, sizeof d, MSG_DONTWAIT);
      if (n < 0) return;
      if (n == ssize_t(sizeof d) && d.magic == Heartbeat::kMagic && d.nonce == hb.nonce &&
          d.rank >= 0 && size_t(d.rank) < hb.peers.size())
        hb.last_heard_ms[size_t(d.rank)].store(now);
    }
  }

  void check_peers(const char* c, int64_t now) {
    for (int r : hb.remote) {
      const int64_t heard = hb.last_heard_ms[size_t(r)].load();
      // a peer never heard from (UDP blocked between the hosts, no IPv4) is not watched
      if (heard == 0) continue;
      const double silent = double(now - heard) / 1e3;
      if (silent <= peer_timeout_s || call.load() != c) continue;
      const PeerInfo& p = hb.peers[size_t(r)];
      char addr[INET_ADDRSTRLEN] = "?";
      if (p.n_addrs > 0) inet_ntop(AF_INET, &p.addrs[0], addr, sizeof addr);
      std::fprintf(stderr,
                   "[mpi] rank %d (host %s): in %s (collective #%llu of this rank) and rank %d "
                   "on host %s (%s) has been silent for %.0f s (OF_PEER_TIMEOUT): that host "
                   "died, stopped or is cut off from this one; aborting every rank\n",
                   rank, hb.peers[size_t(rank)].name, c, (unsigned long long)sequence.load(), r,
                   p.name, addr, silent);
      abort_rank();
    }
  }

  [[noreturn]] static void abort_rank() {
    std::fflush(stderr);
    // Not MPI_Abort: under MPI_THREAD_FUNNELED only the main thread may call MPI, and the main
    // thread is blocked in the call. A rank that exits non-zero makes mpirun end the others.
    std::_Exit(3);
  }
  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};
// Never destroyed: its thread is detached and runs until the process ends, so the static
// destructors at exit must not free the peers' table or the heard-from times under it (they
// did: a rank that finished cleanly could die of SIGSEGV in the heartbeat while exiting).
Watchdog& g_watchdog = *new Watchdog;

// Marks one collective call for the watchdog.
struct Timed {
  explicit Timed(const char* c) {
    g_watchdog.sequence.fetch_add(1);
    g_watchdog.started_ms.store(Watchdog::now_ms());
    g_watchdog.call.store(c);
  }
  ~Timed() { g_watchdog.call.store(nullptr); }
};

int as_int(int64_t n, const char* call) {
  if (n < 0 || n > INT_MAX)
    fail("[mpi] {}: a count of {} does not fit MPI's int counts (at most {})", call, n, INT_MAX);
  return int(n);
}

MPI_Datatype mpi_type(ScalarType t, const char* call) {
  switch (t) {
    case kFloat32:
      return MPI_FLOAT;
    case kFloat64:
      return MPI_DOUBLE;
    case kInt32:
      return MPI_INT32_T;
    case kInt64:
      return MPI_INT64_T;
    case kUInt8:
      return MPI_UINT8_T;
    default:
      fail("[mpi] {}: no MPI reduction for dtype {}", call, dtype_name(t));
  }
}

// Byte counts and displacements as MPI's ints.
struct Counts {
  std::vector<int> n, displ;
  Counts(const std::vector<int64_t>& c, const char* call) {
    int64_t off = 0;
    for (int64_t x : c) {
      n.push_back(as_int(x, call));
      displ.push_back(as_int(off, call));
      off += x;
    }
    as_int(off, call);
  }
};

// The MPI datatypes of strided blocks (NOTE [Strided all-to-all]), freed with the set (also
// when an MPI call raises).
class BlockTypes {
 public:
  BlockTypes() = default;
  BlockTypes(const BlockTypes&) = delete;
  BlockTypes& operator=(const BlockTypes&) = delete;
  ~BlockTypes() {
    for (MPI_Datatype& t : types_) MPI_Type_free(&t);
  }
  // The block as a committed vector type of bytes; its extent `extent` bytes when positive.
  MPI_Datatype make(const Communicator::StridedBlock& b, int64_t extent, const char* call) {
    MPI_Datatype t = MPI_DATATYPE_NULL;
    check(MPI_Type_create_hvector(as_int(b.rows, call), as_int(b.row_bytes, call),
                                  MPI_Aint(b.stride), MPI_BYTE, &t),
          "MPI_Type_create_hvector");
    types_.push_back(t);
    if (extent > 0) {
      check(MPI_Type_create_resized(t, 0, MPI_Aint(extent), &t), "MPI_Type_create_resized");
      types_.push_back(t);
    }
    check(MPI_Type_commit(&t), "MPI_Type_commit");
    return t;
  }

 private:
  std::vector<MPI_Datatype> types_;
};

// Whether non-empty blocks of one shape lie at offsets a constant positive step apart.
bool evenly_spaced(const std::vector<Communicator::StridedBlock>& b) {
  if (b.size() < 2 || b[0].bytes() == 0) return false;
  const int64_t step = b[1].offset - b[0].offset;
  for (size_t q = 0; q < b.size(); ++q)
    if (b[q].rows != b[0].rows || b[q].row_bytes != b[0].row_bytes || b[q].stride != b[0].stride ||
        b[q].offset != b[0].offset + int64_t(q) * step)
      return false;
  return step > 0;
}

// A started non-blocking call (MPI_Iallreduce, MPI_Isend). The watchdog covers wait(); test()
// returns at once. `test_call` and `wait_call` name the calls in errors.
class MpiRequest final : public CommRequest {
 public:
  MpiRequest(const char* test_call, const char* wait_call)
      : what_test_(test_call), what_wait_(wait_call) {}
  ~MpiRequest() override {
    // A request dropped unfinished (an exception unwound the backward pass): finish it, since
    // MPI still writes its buffer.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (req_ != MPI_REQUEST_NULL && !finalized) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int flag = 0;
    check(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), what_test_);
    return flag != 0;
  }
  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    Timed timed(what_wait_);
    check(MPI_Wait(&req_, MPI_STATUS_IGNORE), what_wait_);
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 private:
  const char* what_test_;
  const char* what_wait_;
};

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm c, bool owned) : comm_(c), owned_(owned) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void allreduce_sum(void* buf, int64_t count, ScalarType dtype) override {
    ++stats_.allreduce;
    Timed timed("MPI_Allreduce");
    check(MPI_Allreduce(MPI_IN_PLACE, buf, as_int(count, "MPI_Allreduce"),
                        mpi_type(dtype, "MPI_Allreduce"), MPI_SUM, comm_),
          "MPI_Allreduce");
  }
  void allreduce_sum_into(const void* send, void* recv, int64_t count, ScalarType dtype) override {
    if (send == recv) return allreduce_sum(recv, count, dtype);
    ++stats_.allreduce;
    Timed timed("MPI_Allreduce");
    check(MPI_Allreduce(send, recv, as_int(count, "MPI_Allreduce"),
                        mpi_type(dtype, "MPI_Allreduce"), MPI_SUM, comm_),
          "MPI_Allreduce");
  }
  std::unique_ptr<CommRequest> iallreduce_sum(void* buf, int64_t count, ScalarType dtype) override {
    ++stats_.allreduce;
    auto r = std::make_unique<MpiRequest>("MPI_Test (MPI_Iallreduce)", "MPI_Wait (MPI_Iallreduce)");
    check(MPI_Iallreduce(MPI_IN_PLACE, buf, as_int(count, "MPI_Iallreduce"),
                         mpi_type(dtype, "MPI_Iallreduce"), MPI_SUM, comm_, &r->req_),
          "MPI_Iallreduce");
    return r;
  }
  void allgatherv(const void* send, void* recv, const std::vector<int64_t>& recv_bytes) override {
    ++stats_.allgather;
    Counts c(recv_bytes, "MPI_Allgatherv");
    Timed timed("MPI_Allgatherv");
    check(MPI_Allgatherv(send, c.n[size_t(rank_)], MPI_BYTE, recv, c.n.data(), c.displ.data(),
                         MPI_BYTE, comm_),
          "MPI_Allgatherv");
  }
  void reduce_scatterv_sum(const void* send, void* recv, const std::vector<int64_t>& counts,
                           ScalarType dtype) override {
    ++stats_.reduce_scatter;
    Counts c(counts, "MPI_Reduce_scatter");
    Timed timed("MPI_Reduce_scatter");
    check(MPI_Reduce_scatter(send, recv, c.n.data(), mpi_type(dtype, "MPI_Reduce_scatter"), MPI_SUM,
                             comm_),
          "MPI_Reduce_scatter");
  }
  void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                 const std::vector<int64_t>& recv_bytes) override {
    ++stats_.alltoall;
    Counts s(send_bytes, "MPI_Alltoallv"), r(recv_bytes, "MPI_Alltoallv");
    Timed timed("MPI_Alltoallv");
    check(MPI_Alltoallv(send, s.n.data(), s.displ.data(), MPI_BYTE, recv, r.n.data(),
                        r.displ.data(), MPI_BYTE, comm_),
          "MPI_Alltoallv");
  }
  // NOTE [Strided all-to-all]: each block is an MPI vector type (rows of row_bytes bytes, a
  // stride apart) at a byte displacement, so MPI packs the blocks straight out of the source
  // tensor and into the target, with no staging copies. Equal blocks at evenly spaced offsets
  // (an even split) take one type each way, resized to the spacing, through MPI_Alltoall (the
  // tuned algorithms); any others MPI_Alltoallw.
  void alltoall_blocks(const void* sendbuf, const std::vector<StridedBlock>& send, void* recvbuf,
                       const std::vector<StridedBlock>& recv) override {
    ++stats_.alltoall;
    BlockTypes types;
    if (evenly_spaced(send) && evenly_spaced(recv)) {
      const char* call = "MPI_Alltoall";
      const MPI_Datatype st = types.make(send[0], send[1].offset - send[0].offset, call);
      const MPI_Datatype rt = types.make(recv[0], recv[1].offset - recv[0].offset, call);
      Timed timed(call);
      check(MPI_Alltoall(static_cast<const char*>(sendbuf) + send[0].offset, 1, st,
                         static_cast<char*>(recvbuf) + recv[0].offset, 1, rt, comm_),
            call);
      return;
    }
    const char* call = "MPI_Alltoallw";
    const size_t n = send.size();
    std::vector<int> sc(n, 0), sd(n), rc(n, 0), rd(n);
    std::vector<MPI_Datatype> st(n, MPI_BYTE), rt(n, MPI_BYTE);
    for (size_t q = 0; q < n; ++q) {
      if (send[q].bytes()) st[q] = types.make(send[q], 0, call), sc[q] = 1;
      if (recv[q].bytes()) rt[q] = types.make(recv[q], 0, call), rc[q] = 1;
      sd[q] = as_int(send[q].offset, call);
      rd[q] = as_int(recv[q].offset, call);
    }
    Timed timed(call);
    check(MPI_Alltoallw(sendbuf, sc.data(), sd.data(), st.data(), recvbuf, rc.data(), rd.data(),
                        rt.data(), comm_),
          call);
  }
  void broadcast(void* buf, int64_t bytes, int root) override {
    ++stats_.broadcast;
    Timed timed("MPI_Bcast");
    check(MPI_Bcast(buf, as_int(bytes, "MPI_Bcast"), MPI_BYTE, root, comm_), "MPI_Bcast");
  }
  void send(const void* buf, int64_t bytes, int dst, int tag) override {
    ++stats_.send;
    Timed timed("MPI_Send");
    check(MPI_Send(buf, as_int(bytes, "MPI_Send"), MPI_BYTE, dst, tag, comm_), "MPI_Send");
  }
  void recv(void* buf, int64_t bytes, int src, int tag) override {
    ++stats_.recv;
    Timed timed("MPI_Recv");
    check(MPI_Recv(buf, as_int(bytes, "MPI_Recv"), MPI_BYTE, src, tag, comm_, MPI_STATUS_IGNORE),
          "MPI_Recv");
  }
  std::unique_ptr<CommRequest> isend(const void* buf, int64_t bytes, int dst, int tag) override {
    ++stats_.send;
    auto r = std::make_unique<MpiRequest>("MPI_Test (MPI_Isend)", "MPI_Wait (MPI_Isend)");
    check(MPI_Isend(buf, as_int(bytes, "MPI_Isend"), MPI_BYTE, dst, tag, comm_, &r->req_),
          "MPI_Isend");
    return r;
  }
  void barrier() override {
    ++stats_.barrier;
    Timed timed("MPI_Barrier");
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }
  std::shared_ptr<Communicator> group(const std::vector<int>& ranks) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = groups_.find(ranks);
    if (it != groups_.end()) return it->second;
    MPI_Group all, sub;
    check(MPI_Comm_group(comm_, &all), "MPI_Comm_group");
    check(MPI_Group_incl(all, int(ranks.size()), ranks.data(), &sub), "MPI_Group_incl");
    MPI_Comm c = MPI_COMM_NULL;
    // Collective over the group's members only (MPI-3), so disjoint placements need no
    // participation of the other ranks.
    {
      // (ranks that disagree on the members wait here: the watchdog ends them)
      Timed timed("MPI_Comm_create_group");
      check(MPI_Comm_create_group(comm_, sub, 0, &c), "MPI_Comm_create_group");
    }
    MPI_Group_free(&sub);
    MPI_Group_free(&all);
    if (c == MPI_COMM_NULL) fail("[mpi] rank {} is not among the group's ranks", rank_);
    check(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    auto g = std::make_shared<MpiComm>(c, true);
    groups_.emplace(ranks, g);
    return g;
  }

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  std::mutex mu_;
  std::map<std::vector<int>, std::shared_ptr<Communicator>> groups_;
};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace
}  // namespace oneflow::global

extern "C" __attribute__((visibility("default"))) oneflow::global::Communicator*
oneflow_mpi_module_init_v1(const char* build_id) {
  using namespace oneflow;
  if (!build_id || std::strcmp(build_id, ONEFLOW_BUILD_ID) != 0)
    fail(
        "[mpi] liboneflow_mpi.so is from build {}, the core from {}: they must come from the "
        "same build",
        ONEFLOW_BUILD_ID, build_id ? build_id : "(none)");
  int initialized = 0;
  global::check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    int provided = 0;
    global::check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                  "MPI_Init_thread");
    std::atexit(global::finalize_at_exit);
  }
  global::check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                "MPI_Comm_set_errhandler");
  global::g_watchdog.start();
  // Never freed: the world lives until the process exits (the module is never unloaded).
  return new global::MpiComm(MPI_COMM_WORLD, false);
}

// test_multihost.cpp: several hosts over real TCP. Two "hosts" are two Linux network namespaces
// joined by a veth pair (tools/netns_hosts.sh: 10.231.0.1 and 10.231.0.2 on a /24 that exists
// only between them, each with its own host name); `mpirun --hostfile` runs in the first and
// starts the second one's daemon through an rsh agent that enters that namespace, and MPI talks
// TCP over the veth link (docs/GLOBAL.md, "Multi-host launching"). The cases: data parallel on
// 2 hosts x 2 ranks against 1 host x 4, bitwise; every rank of one host killed; one host cut off
// (its link taken down); a checkpoint written on 2 hosts resumed on 1. They skip, saying why,
// where network namespaces cannot be made (not root, no `ip`, no CAP_NET_ADMIN).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace of = oneflow;
using Clock = std::chrono::steady_clock;

const std::string kTool = std::string(ONEFLOW_SOURCE_ROOT) + "/tools/netns_hosts.sh";

// examples/data_parallel, built beside the tests.
std::string data_parallel_example() {
  std::string path = ONEFLOW_GLOBAL_WORKER;
  path = path.substr(0, path.rfind('/'));
  return path.substr(0, path.rfind('/') + 1) + "examples/data_parallel";
}

int shell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Why two hosts cannot be made here, or "" when they can (a probe pair is made and removed).
[[maybe_unused]] std::string why_no_hosts() {
  static const std::string why = [] {
    if (geteuid() != 0) return std::string("not root (network namespaces need CAP_NET_ADMIN)");
    if (shell("command -v ip >/dev/null 2>&1") != 0)
      return std::string("no `ip` command (iproute2)");
    if (shell("command -v unshare >/dev/null 2>&1") != 0)
      return std::string("no `unshare` command (util-linux)");
    const std::string tag = fmt::format("ofmhprobe{}", getpid());
    const int rc = shell(fmt::format("{} up {} >/dev/null 2>&1", kTool, tag));
    // a host also needs its own UTS namespace (unshare: CAP_SYS_ADMIN)
    const int exec_rc =
        rc == 0 ? shell(fmt::format("{} exec {}_a true >/dev/null 2>&1", kTool, tag)) : 1;
    shell(fmt::format("{} down {} >/dev/null 2>&1", kTool, tag));
    if (rc != 0) return std::string("cannot make network namespaces and a veth pair here");
    if (exec_rc != 0)
      return std::string("cannot give a network namespace its own host name (unshare --uts)");
    return std::string();
  }();
  return why;
}

// Two hosts for one case, removed (with whatever still runs in them) at the end.
class Hosts {
 public:
  Hosts() : tag_(fmt::format("ofmh{}x{}", getpid(), next_++)) {
    REQUIRE(shell(fmt::format("{} up {}", kTool, tag_)) == 0);
    hostfile_ = fmt::format("/tmp/{}.hosts", tag_);
    std::ofstream(hostfile_) << "10.231.0.1 slots=2\n10.231.0.2 slots=2\n";
  }
  ~Hosts() {
    shell(fmt::format("{} down {} >/dev/null 2>&1", kTool, tag_));
    std::error_code ec;
    std::filesystem::remove(hostfile_, ec);
    // Open MPI's session directories, left behind by a job that was killed
    for (char h : {'a', 'b'})
      std::filesystem::remove_all(fmt::format("/tmp/ompi.{}.{}", host_name(h), getuid()), ec);
  }
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;
  std::string ns(char host) const { return fmt::format("{}_{}", tag_, host); }
  std::string host_name(char host) const { return fmt::format("{}-{}", tag_, host); }
  // mpirun on host a over both hosts (2 ranks each), `extra` after the common options. The two
  // hosts share this machine's cores, which mpirun cannot see: without mpi_yield_when_idle the
  // 4 ranks' busy polling makes training ~15x slower.
  // `launcher`: mpirun itself, or the project's tools/oneflow-mpirun.
  std::string mpirun(const std::string& program, const std::string& args, int deadline_s,
                     const std::string& extra = "", const std::string& launcher = "mpirun") const {
    return fmt::format(
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 {} {} exec {} "
        "{} --hostfile {} -np 4 --mca plm_rsh_agent '{} agent' --mca btl self,vader,tcp "
        "--mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24 "
        "--mca mpi_yield_when_idle 1 {} {} {}",
        deadline_s, kTool, ns('a'), launcher, hostfile_, kTool, extra, program, args);
  }
  // The pids of the processes named `comm` in host h's namespace.
  std::vector<int> pids(char h, const std::string& comm) const {
    std::vector<int> out;
    FILE* p = popen(fmt::format("ip netns pids {} 2>/dev/null", ns(h)).c_str(), "r");
    if (!p) return out;
    int pid = 0;
    while (std::fscanf(p, "%d", &pid) == 1) {
      std::string c = read_file(fmt::format("/proc/{}/comm", pid));
      while (!c.empty() && c.back() == '\n') c.pop_back();
      if (c == comm) out.push_back(pid);
    }
    pclose(p);
    return out;
  }

 private:
  static inline int next_ = 0;
  std::string tag_, hostfile_;
};

// The project's launcher (tools/oneflow-mpirun): mpirun with TCP keepalive probes on the idle
// connections to its remote daemons, so a cut-off host is detected in ~25 s instead of ~8
// minutes (docs/GLOBAL.md "Multi-host launching").
const std::string kLauncher = std::string(ONEFLOW_SOURCE_ROOT) + "/tools/oneflow-mpirun";

// A command run in the background (its own process group), its output into a file.
class Job {
 public:
  explicit Job(const std::string& cmd)
      : log_(fmt::format("/tmp/ofmh_job{}_{}.log", getpid(), next_++)) {
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      setpgid(0, 0);
      const std::string c = fmt::format("{} > {} 2>&1", cmd, log_);
      execl("/bin/sh", "sh", "-c", c.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid_, pid_);
  }
  ~Job() {
    if (!status_) {
      ::kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(log_);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  // The exit code (128 + signal when killed) once it ends within `seconds`, else nullopt.
  std::optional<int> wait_for(double seconds) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (!status_) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_)
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      else if (Clock::now() > end) break;
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return status_;
  }
  // Waits (up to `seconds`) until the output holds `text`.
  bool wait_for_output(const std::string& text, double seconds) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      if (output().find(text) != std::string::npos) return true;
      if (wait_for(0)) return output().find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string output() const { return read_file(log_); }

 private:
  static inline int next_ = 0;
  pid_t pid_ = -1;
  std::string log_;
  std::optional<int> status_;
};

// Removes the paths when the case ends, passed or not.
struct RemovedAtEnd {
  std::vector<std::string> paths;
  ~RemovedAtEnd() {
    std::error_code ec;
    for (const std::string& p : paths) std::filesystem::remove_all(p, ec);
  }
};

// Runs a command to its end (it carries its own deadline), returning the exit code and output.
int run(const std::string& cmd, std::string* out) {
  Job job(cmd);
  const std::optional<int> rc = job.wait_for(600);
  *out = job.output();
  if (out->size() > 8000) *out = out->substr(out->size() - 8000);
  return rc.value_or(124);
}

std::string one_host_mpirun(const std::string& program, const std::string& args, int deadline_s) {
  return fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 {} mpirun "
      "--oversubscribe -np 4 {} {}",
      deadline_s, program, args);
}

void check_same_bits(const std::string& a, const std::string& b) {
  const auto ta = of::load_tensors(a), tb = of::load_tensors(b);
  REQUIRE(ta.size() == tb.size());
  CHECK(ta.size() == 4);
  for (size_t i = 0; i < ta.size(); ++i) {
    CAPTURE(ta[i].first);
    CHECK(ta[i].first == tb[i].first);
    REQUIRE(ta[i].second.sizes() == tb[i].second.sizes());
    CHECK(std::memcmp(ta[i].second.data_ptr(), tb[i].second.data_ptr(), ta[i].second.nbytes()) ==
          0);
  }
}

// Whether the multi-host cases can run here; says why not.
bool can_run() {
#if ONEFLOW_HAVE_MPI
  if (const std::string why = why_no_hosts(); !why.empty()) {
    MESSAGE("two hosts as network namespaces cannot be made: " << why << "; skipped");
    return false;
  }
  if (!std::filesystem::exists(data_parallel_example())) {
    FAIL(data_parallel_example() << " is not built");
    return false;
  }
  if (!std::filesystem::exists(of::data::kFashionMnistDir)) {
    MESSAGE("Fashion-MNIST is not at " << of::data::kFashionMnistDir << ": skipped");
    return false;
  }
  return true;
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-host cases run in the regular build");
  return false;
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
  return false;
#endif
}

}  // namespace

TEST_CASE(
    "multihost: data parallel (Adam, ZeRO) on 2 hosts x 2 ranks equals 1 host x 4 ranks "
    "bitwise") {
  if (!can_run()) return;
  Hosts hosts;
  // the ranks are where the hostfile says: two on each host, each host under its own name
  std::string out;
  CHECK(run(hosts.mpirun("/bin/sh", "-c 'echo on $(hostname)'", 60), &out) == 0);
  INFO(out);
  size_t on_a = 0, on_b = 0;
  for (size_t at = 0; (at = out.find("on ", at)) != std::string::npos; ++at) {
    const std::string name = out.substr(at + 3, out.find('\n', at) - at - 3);
    on_a += name == hosts.host_name('a');
    on_b += name == hosts.host_name('b');
  }
  CHECK(on_a == 2);
  CHECK(on_b == 2);

  const std::string base = fmt::format("/tmp/ofmh_dp{}", getpid());
  RemovedAtEnd removed{{base + ".2h", base + ".1h"}};
  const std::string example = data_parallel_example();
  // plain Adam (all-reduced gradients) and ZeRO's (reduce-scattered gradients, all-gathered
  // parameters)
  for (std::string mode : {"", "zero"}) {
    CAPTURE(mode);
    std::filesystem::remove(base + ".2h");
    std::filesystem::remove(base + ".1h");
    std::string two, one;
    // (each run's output logged before its exit status is checked: a crash shows its site)
    const int rc_two =
        run(hosts.mpirun(example, fmt::format("200 '' {} --final {}.2h", mode, base), 120), &two);
    INFO(two);
    CHECK(rc_two == 0);
    CHECK(two.find("over 4 rank(s)") != std::string::npos);
    const int rc_one = run(
        one_host_mpirun(example, fmt::format("200 '' {} --final {}.1h", mode, base), 120), &one);
    INFO(one);
    CHECK(rc_one == 0);
    check_same_bits(base + ".2h", base + ".1h");
  }
}

TEST_CASE("multihost: killing every rank of one host ends the job non-zero within 20 s") {
  if (!can_run()) return;
  Hosts hosts;
  Job job(hosts.mpirun(data_parallel_example(), "50000 ''", 240));
  REQUIRE_MESSAGE(job.wait_for_output("step  100", 120), job.output());
  const std::vector<int> victims = hosts.pids('b', "data_parallel");
  CHECK(victims.size() == 2);
  const auto t0 = Clock::now();
  for (int pid : victims) ::kill(pid, SIGKILL);
  const std::optional<int> rc = job.wait_for(60);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO(job.output());
  MESSAGE(fmt::format("every rank of host b killed: mpirun returned {} after {:.1f} s",
                      rc.value_or(-1), secs));
  REQUIRE(rc.has_value());
  CHECK(*rc != 0);
  CHECK(secs < 20);
  CHECK(job.output().find("steps in") == std::string::npos);  // it did not finish
  CHECK(hosts.pids('a', "data_parallel").empty());
}

TEST_CASE(
    "multihost: a host cut off ends every rank non-zero and the launcher (oneflow-mpirun, no "
    "settings given) within 60 s") {
  if (!can_run()) return;
  Hosts hosts;
  // OMPI_MCA_* settings of the caller's environment would override the launcher's defaults
  for (const char* v : {"OMPI_MCA_oob_tcp_keepalive_time", "OMPI_MCA_oob_tcp_keepalive_intvl",
                        "OMPI_MCA_oob_tcp_keepalive_probes"})
    REQUIRE_MESSAGE(std::getenv(v) == nullptr, v);
  Job job(hosts.mpirun(data_parallel_example(), "50000 ''", 240, "", kLauncher));
  REQUIRE_MESSAGE(job.wait_for_output("step  100", 120), job.output());
  const auto t0 = Clock::now();
  REQUIRE(shell(fmt::format("ip -n {} link set veth_a down", hosts.ns('a'))) == 0);
  const std::optional<int> rc = job.wait_for(60);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO(job.output());
  MESSAGE(fmt::format("host b cut off: mpirun returned {} after {:.1f} s", rc.value_or(-1), secs));
  REQUIRE(rc.has_value());
  CHECK(*rc != 0);
  CHECK(secs < 60);
  CHECK(job.output().find("lost communication with a remote daemon") != std::string::npos);
  // the ranks of both sides are gone (those of host b ended by their own daemon, which lost
  // mpirun), within the same bound
  for (char h : {'a', 'b'}) {
    CAPTURE(h);
    std::vector<int> left = hosts.pids(h, "data_parallel");
    while (!left.empty() && std::chrono::duration<double>(Clock::now() - t0).count() < 60) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      left = hosts.pids(h, "data_parallel");
    }
    CHECK(left.empty());
  }
}

TEST_CASE(
    "multihost: without the launcher's lifeline the peer heartbeat ends the ranks of both "
    "sides, naming the call and the silent peer") {
  if (!can_run()) return;
  Hosts hosts;
  // mpirun's keepalive at its default (300 s idle): only the ranks' heartbeat notices
  Job job(hosts.mpirun(data_parallel_example(), "50000 ''", 240, "-x OF_PEER_TIMEOUT=8"));
  REQUIRE_MESSAGE(job.wait_for_output("step  100", 120), job.output());
  const auto t0 = Clock::now();
  REQUIRE(shell(fmt::format("ip -n {} link set veth_a down", hosts.ns('a'))) == 0);
  double gone_s[2] = {-1, -1};
  while (std::chrono::duration<double>(Clock::now() - t0).count() < 40 &&
         (gone_s[0] < 0 || gone_s[1] < 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (int h = 0; h < 2; ++h)
      if (gone_s[h] < 0 && hosts.pids(char('a' + h), "data_parallel").empty())
        gone_s[h] = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const std::string out = job.output();
  INFO(out);
  MESSAGE(
      fmt::format("host b cut off, OF_PEER_TIMEOUT=8: the ranks of host a ended after "
                  "{:.1f} s, those of host b after {:.1f} s",
                  gone_s[0], gone_s[1]));
  // not before the heartbeat's timeout (less the second between beats)
  CHECK(gone_s[0] > 6.5);
  CHECK(gone_s[0] < 20);
  CHECK(gone_s[1] > 6.5);
  CHECK(gone_s[1] < 20);
  // host a's ranks say which call waited and which rank of which host fell silent (host b's
  // words cannot reach mpirun any more)
  CHECK(out.find("OF_PEER_TIMEOUT") != std::string::npos);
  // "in MPI_Allreduce (collective #509 of this rank)": the call it waits in
  CHECK(out.find("): in MPI_") != std::string::npos);
  CHECK(out.find(" (collective #") != std::string::npos);
  CHECK(out.find(fmt::format("on host {} (10.231.0.2) has been silent", hosts.host_name('b'))) !=
        std::string::npos);
  CHECK(out.find("steps in") == std::string::npos);
}

TEST_CASE("multihost: a host whose ranks are stopped (SIGSTOP) is caught by the peer heartbeat") {
  if (!can_run()) return;
  Hosts hosts;
  // the daemons and the links are fine, so only the heartbeat can tell: a stopped process beats
  // no more
  Job job(hosts.mpirun(data_parallel_example(), "50000 ''", 240, "-x OF_PEER_TIMEOUT=8"));
  REQUIRE_MESSAGE(job.wait_for_output("step  100", 120), job.output());
  const std::vector<int> stopped = hosts.pids('b', "data_parallel");
  CHECK(stopped.size() == 2);
  const auto t0 = Clock::now();
  for (int pid : stopped) ::kill(pid, SIGSTOP);
  const std::optional<int> rc = job.wait_for(40);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO(job.output());
  MESSAGE(
      fmt::format("the ranks of host b stopped, OF_PEER_TIMEOUT=8: mpirun returned {} after "
                  "{:.1f} s",
                  rc.value_or(-1), secs));
  REQUIRE(rc.has_value());
  CHECK(*rc != 0);
  CHECK(secs > 6.5);
  CHECK(secs < 20);
  CHECK(job.output().find(fmt::format("on host {} (10.231.0.2) has been silent",
                                      hosts.host_name('b'))) != std::string::npos);
}

TEST_CASE("multihost: a checkpoint written on 2 hosts resumes on 1 to the same parameters") {
  if (!can_run()) return;
  Hosts hosts;
  const std::string base = fmt::format("/tmp/ofmh_ckpt{}", getpid());
  const std::string example = data_parallel_example();
  RemovedAtEnd removed{{base + ".ref", base + ".run", base + ".ref.final", base + ".run.final"}};
  std::filesystem::remove_all(base + ".ref");
  std::filesystem::remove_all(base + ".run");
  // the reference: 300 steps on one host, checkpointing every 100
  std::string out;
  CHECK(run(one_host_mpirun(
                example,
                fmt::format("300 '' --ckpt-every 100 --ckpt {0}.ref --final {0}.ref.final", base),
                120),
            &out) == 0);
  INFO(out);
  // 200 steps on two hosts, then the last 100 resumed on one host from their checkpoint
  std::string two;
  CHECK(run(hosts.mpirun(example, fmt::format("200 '' --ckpt-every 100 --ckpt {}.run", base), 120),
            &two) == 0);
  INFO(two);
  std::string resumed;
  CHECK(run(one_host_mpirun(
                example,
                fmt::format("300 '' --ckpt-every 100 --ckpt {0}.run --resume {0}.run --final "
                            "{0}.run.final",
                            base),
                120),
            &resumed) == 0);
  INFO(resumed);
  CHECK(resumed.find("at step 200") != std::string::npos);
  check_same_bits(base + ".ref.final", base + ".run.final");
}

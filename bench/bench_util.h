// bench_util.h: timing, machine info, result tables and a busy-core helper shared by the
// benchmarks. Header-only; nothing here touches libtorch.
#pragma once
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace oneflow::bench {

inline constexpr const char* kNoTorch = "libtorch: not installed";

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Keeps `v` observable so the compiler cannot drop the work that produced it.
template <class T> inline void keep(const T& v) { asm volatile("" : : "r,m"(v) : "memory"); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Seconds per call of f: `warmup` untimed calls, then timed calls until `min_runs` are done
// and `min_time` seconds have passed (or `max_runs` are done); the median of the runs.
template <class F>
double median_time(F&& f, int warmup = 2, int min_runs = 5, double min_time = 0.3,
                   int max_runs = 200) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ts;
  double start = now_s();
  while (int(ts.size()) < max_runs && (int(ts.size()) < min_runs || now_s() - start < min_time)) {
    double t0 = now_s();
    f();
    ts.push_back(now_s() - t0);
  }
  return median(ts);
}

// Seconds per call of each function, measured in interleaved rounds (one call of each per
// round, the order rotating), so that a shared host's slow phases hit every side alike: the
// median per function over rounds until `min_rounds` are done and `min_time` has passed.
inline std::vector<double> interleaved_median_times(const std::vector<std::function<void()>>& fs,
                                                    int warmup = 2, int min_rounds = 7,
                                                    double min_time = 1.0, int max_rounds = 200) {
  for (int i = 0; i < warmup; ++i)
    for (const auto& f : fs) f();
  std::vector<std::vector<double>> ts(fs.size());
  const double start = now_s();
  for (int r = 0; r < max_rounds && (r < min_rounds || now_s() - start < min_time); ++r)
    for (size_t k = 0; k < fs.size(); ++k) {
      const size_t i = (k + size_t(r)) % fs.size();
      const double t0 = now_s();
      fs[i]();
      ts[i].push_back(now_s() - t0);
    }
  std::vector<double> out;
  for (auto& t : ts) out.push_back(median(t));
  return out;
}

inline std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  }
  return "unknown";
}

// The load average: other processes on the machine make every figure below noisier.
inline double load_1min() {
  double l = 0;
  std::sscanf(read_first_line("/proc/loadavg").c_str(), "%lf", &l);
  return l;
}

inline void print_machine(const char* bench_name, int threads_used) {
  char date[64];
  std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  fmt::print("== {}  ({})\n", bench_name, date);
  fmt::print("machine: {} | nproc {} | threads used {} | load average {}\n", cpu_model(),
             std::thread::hardware_concurrency(), threads_used, read_first_line("/proc/loadavg"));
}

// One result table with the fixed columns case, ours, peer, ratio, target, verdict (and any
// extra columns named in `extra`).
class Table {
 public:
  explicit Table(std::string title, std::vector<std::string> extra = {})
      : title_(std::move(title)) {
    header_ = {"case", "ours", "peer", "ratio", "target", "verdict"};
    header_.insert(header_.end(), extra.begin(), extra.end());
  }
  void row(std::vector<std::string> cells) {
    cells.resize(header_.size());
    rows_.push_back(std::move(cells));
  }
  void print() const {
    std::vector<size_t> w(header_.size());
    auto widen = [&](const std::vector<std::string>& r) {
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    };
    widen(header_);
    for (auto& r : rows_) widen(r);
    auto line = [&](const std::vector<std::string>& r) {
      std::string s = "|";
      for (size_t i = 0; i < r.size(); ++i) s += fmt::format(" {:<{}} |", r[i], w[i]);
      fmt::print("{}\n", s);
    };
    fmt::print("\n{}\n", title_);
    line(header_);
    std::string sep = "|";
    for (size_t x : w) sep += std::string(x + 2, '-') + "|";
    fmt::print("{}\n", sep);
    for (auto& r : rows_) line(r);
    std::fflush(stdout);
  }

 private:
  std::string title_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

inline std::string verdict(bool met) { return met ? "met" : "NOT met"; }
inline std::string ratio_str(double r) { return fmt::format("{:.2f}x", r); }

// A child process spinning on one core for as long as this object lives: the honest model
// of "another job holds a core". Killed in the destructor; PR_SET_PDEATHSIG also kills it if
// this process dies first (crash, Ctrl-C).
class BusyProcess {
 public:
  BusyProcess() {
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      volatile uint64_t x = 0;
      for (;;) x = x + 1;
    }
    // Let the scheduler see the spinner before measuring.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ~BusyProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  BusyProcess(const BusyProcess&) = delete;
  BusyProcess& operator=(const BusyProcess&) = delete;
  bool ok() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

struct Result {
  double seconds = -1;
  double peak_mb = -1;
};

// Runs f in a fork()ed child process; returns its result (seconds, -1 on failure) and the
// child's peak RSS.
inline Result in_child(const std::function<double()>& f) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    double t = -1;
    try {
      t = f();
    } catch (const std::exception& e) { std::fprintf(stderr, "workload failed: %s\n", e.what()); }
    ssize_t w = write(fds[1], &t, sizeof t);
    (void)w;
    _exit(0);
  }
  close(fds[1]);
  Result r;
  double t = -1;
  if (read(fds[0], &t, sizeof t) == ssize_t(sizeof t)) r.seconds = t;
  close(fds[0]);
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  r.peak_mb = double(ru.ru_maxrss) / 1024.0;
  return r;
}

// NOTE [Bench side process]: a side of a memory comparison runs as its own program (fork +
// execv), so that its peak RSS holds only the libraries it links: a fork()ed child of a binary
// linking both libraries would carry the other's mapped pages, and ru_maxrss survives exec, so
// the child reports its own VmHWM (per address space, reset by exec) on its last line:
// "result <seconds> <VmHWM kB>".
inline double vm_hwm_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::atof(line + 6);
  std::fclose(f);
  return kib;
}

// The child side: runs f, prints the result line, returns the exit status.
inline int report_side(const std::function<double()>& f) {
  double t = -1;
  try {
    t = f();
  } catch (const std::exception& e) { std::fprintf(stderr, "workload failed: %s\n", e.what()); }
  std::printf("result %.9g %.0f\n", t, vm_hwm_kib());
  std::fflush(stdout);
  return t < 0 ? 1 : 0;
}

// The parent side: runs `argv` (argv[0] a path) and reads the child's result line.
inline Result in_program(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", argv[0].c_str());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  const size_t at = out.rfind("result ");
  double t = -1, kib = -1;
  if (at != std::string::npos && std::sscanf(out.c_str() + at, "result %lf %lf", &t, &kib) == 2) {
    r.seconds = t;
    r.peak_mb = kib / 1024.0;
  }
  return r;
}

// The folder of the running executable ("." when it cannot be told).
inline std::string exe_dir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  std::string p(path, size_t(n));
  return p.substr(0, p.rfind('/'));
}

}  // namespace oneflow::bench

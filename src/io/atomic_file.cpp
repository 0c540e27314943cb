// atomic_file.cpp: NOTE [Atomic file replacement] (io/atomic_file.h).
#include "io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "oneflow/error.h"

namespace oneflow {

namespace {

std::atomic<bool> g_use_tmpfile{true};
std::atomic<uint64_t> g_temp_counter{0};

std::string errno_text(int err) { return std::string(std::strerror(err)); }

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// The pid of a temporary of `base`: ".<base>.oftmp.<pid>.<n>" (ours) or "<base>.tmp.<pid>"
// (the writer before the O_TMPFILE one); 0 when `name` is neither.
pid_t temp_owner(const std::string& name, const std::string& base) {
  auto digits = [](std::string_view s, size_t* used) -> long long {
    size_t i = 0;
    long long v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i < 10) v = v * 10 + (s[i++] - '0');
    *used = i;
    return v;
  };
  std::string_view s = name;
  size_t used = 0;
  const std::string ours = "." + base + ".oftmp.", legacy = base + ".tmp.";
  if (s.starts_with(ours)) {
    s.remove_prefix(ours.size());
    long long pid = digits(s, &used);
    if (used == 0 || used >= s.size() || s[used] != '.') return 0;
    std::string_view n = s.substr(used + 1);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string_view::npos) return 0;
    return pid > 0 && pid <= 0x7fffffff ? pid_t(pid) : 0;
  }
  if (s.starts_with(legacy)) {
    s.remove_prefix(legacy.size());
    long long pid = digits(s, &used);
    if (used == 0 || used != s.size()) return 0;
    return pid > 0 && pid <= 0x7fffffff ? pid_t(pid) : 0;
  }
  return 0;
}

// Where O_TMPFILE is usable: the kernel and file system (tried per call: the directory decides)
// and /proc, through which the unnamed file gets its name.
bool proc_fd_available() {
  static const bool ok = ::access("/proc/self/fd", X_OK) == 0;
  return ok;
}

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

}  // namespace

bool set_atomic_write_tmpfile(bool enabled) { return g_use_tmpfile.exchange(enabled); }

void write_fully(int fd, const void* data, size_t n, const std::string& path, const char* op) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t(1) << 30);
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("[{}] {}: writing failed: {}", op, path, errno_text(errno));
    }
    p += w;
    n -= size_t(w);
  }
}

int remove_stale_temporaries(const std::string& path) {
  const std::string dir = parent_dir(path), base = base_name(path);
  if (base.empty()) return 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const pid_t pid = temp_owner(name, base);
    if (pid == 0 || pid == self) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge (EPERM)
    // Only regular files, and only while nobody holds the writer's lock: a writer in another
    // pid namespace (a container sharing the directory) has a pid we cannot see.
    const std::string full = join(dir, name);
    Fd f(::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (f.fd < 0) continue;
    struct stat st;
    if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::flock(f.fd, LOCK_EX | LOCK_NB) != 0) continue;
    if (::unlink(full.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

void write_file_atomically(const std::string& path, const std::function<void(int fd)>& write,
                           const char* op) {
  OF_CHECK(!path.empty(), "[{}] the path is empty", op);
  const std::string dir = parent_dir(path), base = base_name(path);
  OF_CHECK(!base.empty(), "[{}] {}: the path names a directory, not a file", op, path);
  remove_stale_temporaries(path);

  const std::string tmp =
      join(dir, fmt::format(".{}.oftmp.{}.{}", base, ::getpid(), g_temp_counter.fetch_add(1)));
  // 1. An unnamed file where the file system has them, else the named temporary.
  Fd f;
  bool named = false;  // whether `tmp` exists and must be removed on failure
  if (g_use_tmpfile.load() && proc_fd_available())
    f.fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (f.fd < 0) {
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0)
      fail("[{}] {}: cannot create the temporary {}: {}", op, path, tmp, errno_text(errno));
    named = true;
  }
  // Held until the file is renamed or removed: remove_stale_temporaries skips locked files.
  (void)::flock(f.fd, LOCK_EX | LOCK_NB);
  try {
    // 2. The content, made durable before it gets the target's name.
    write(f.fd);
    if (::fsync(f.fd) != 0)
      fail("[{}] {}: fsync of the temporary failed: {}", op, path, errno_text(errno));
    if (!named) {
      const std::string proc = "/proc/self/fd/" + std::to_string(f.fd);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0)
        fail("[{}] {}: cannot name the temporary {}: {}", op, path, tmp, errno_text(errno));
      named = true;
    }
    // 3. The switch: readers see the old file or the new one, never a part.
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail("[{}] {}: cannot rename {} over it: {}", op, path, tmp, errno_text(errno));
    named = false;
  } catch (...) {
    if (named) ::unlink(tmp.c_str());
    throw;
  }
  // The lock goes with the descriptor; close's result says nothing fsync did not already.
  ::close(f.release());
  // Make the rename itself durable (best effort: the new file is already in place).
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.fd >= 0) (void)::fsync(dfd.fd);
}

}  // namespace oneflow

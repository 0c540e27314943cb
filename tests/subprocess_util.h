// subprocess_util.h: what the tests that ask a Python oracle share — the test venv's python, a
// shell command's exit status and output, a file's bytes, a temporary directory removed at scope
// exit.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace th {

// .venv-test/bin/python (./run test makes the venv; tests that need it skip without it)
inline std::filesystem::path venv_python() {
  return std::filesystem::path(ONEFLOW_SOURCE_ROOT) / ".venv-test" / "bin" / "python";
}

// `cmd` through the shell, standard error with standard output into *out: its exit status.
inline int run(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::string s;
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof buf, p)) s.append(buf, k);
  const int st = pclose(p);
  if (out) *out = s;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// A whole file's bytes (empty when it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "of_test_")
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace th

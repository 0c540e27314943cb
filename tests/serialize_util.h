// serialize_util.h: helpers of the file tests (test_serialize.cpp, test_checkpoint.cpp,
// test_train_graph.cpp): scratch directories, whole-file reads and writes, and what /proc says
// about mappings.
#pragma once
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <oneflow/oneflow.h>

namespace ser {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed (with its contents) at the end of the test.
struct TmpDir {
  std::string path;
  TmpDir() {
    char templ[] = "/tmp/oneflow-serialize-XXXXXX";
    char* p = ::mkdtemp(templ);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TmpDir() {
    std::error_code ec;
    ::chmod(path.c_str(), 0700);
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}
// The tensor's elements in row-major order, as raw bytes.
inline std::string raw(const of::Tensor& t) {
  of::Tensor c = t.detach().cpu().contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}
inline bool exists(const std::string& p) { return fs::exists(fs::symlink_status(p)); }
// The entries of `dir` that look like a save's temporary (NOTE [Atomic file replacement]).
inline std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.find(".oftmp.") != std::string::npos || n.find(".tmp.") != std::string::npos)
      out.push_back(n);
  }
  return out;
}

// Whether `p` lies in a mapping of the file `path` (by /proc/self/maps).
inline bool mapped_from(const void* p, const std::string& path) {
  const std::string want = fs::canonical(path).string();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string file = line.substr(slash);
    if (file.ends_with(" (deleted)")) file.resize(file.size() - 10);
    if (file == want && addr >= lo && addr < hi) return true;
  }
  return false;
}
// How many mappings of `path` this process has.
inline int mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line))
    if (line.find(path) != std::string::npos) ++n;
  return n;
}

}  // namespace ser

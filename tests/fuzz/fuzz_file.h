// fuzz_file.h: the file readers take paths, so each fuzz input is written to a file of this
// process (in /dev/shm when there is one) first.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <string>

#include <oneflow/oneflow.h>

namespace offuzz {

// A forged file or shape may legitimately ask for more memory than libFuzzer's malloc limit
// (-rss_limit_mb=2560, which ./run fuzz passes): the library's own cap turns that request into
// the of::Error a caller would see, instead of a fuzzer "out-of-memory" crash.
inline void cap_memory() { oneflow::memory::set_cpu_limit(size_t(1) << 30); }

inline std::string write_input(const void* data, size_t size, const char* ext) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/oneflow-fuzz-" + std::to_string(getpid()) + ext;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return path;
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace offuzz

// libFuzzer target: the IDX reader of the MNIST datasets (of::data::read_idx), plain and
// gzip'd. The first byte picks the form: bit0 set: the rest is gzip-compressed here and read
// from a ".gz" file (fuzzing the IDX parser behind zlib); else the rest is the file as given,
// named ".gz" when bit1 is set (fuzzing the gzip error paths) and plain otherwise.
#include <zlib.h>

#include <cstdio>
#include <cstdlib>

#include <oneflow/oneflow.h>

#include "fuzz_file.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  offuzz::cap_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace of = oneflow;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const uint8_t* p = data + 1;
  const size_t n = size - 1;
  std::string path;
  if (mode & 1) {
    path = offuzz::write_input(nullptr, 0, ".idx.gz");
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) return 0;
    if (n) gzwrite(f, p, unsigned(n));
    gzclose(f);
  } else {
    path = offuzz::write_input(p, n, (mode & 2) ? ".idx.gz" : ".idx");
  }
  try {
    of::Tensor t = of::data::read_idx(path);
    if (t.numel() > 0) (void)t.to(of::kFloat64).sum().item<double>();
  } catch (const of::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_idx: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

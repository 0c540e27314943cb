// libFuzzer target: the traced-graph file loader (of::jit::load). The file's checksum would
// stop nearly every mutation at the first check, so by default this harness writes the
// header (magic, version, payload size, CRC-32) itself around the input: the fuzzer then
// reaches every structural check of the payload. An input whose first byte is 0xFF is written
// as it is (the header checks themselves). Loaded graphs are lowered, not run.
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <oneflow/oneflow.h>

#include "fuzz_file.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  offuzz::cap_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace of = oneflow;
  std::string file;
  if (size > 0 && data[0] == 0xFF) {
    file.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    const char magic[8] = {'O', 'F', 'T', 'R', 'A', 'C', 'E', '\0'};
    const uint32_t version = 1;
    const uint64_t n = size;
    const uint32_t crc = uint32_t(crc32(0L, data, uInt(size)));
    file.append(magic, 8);
    file.append(reinterpret_cast<const char*>(&version), 4);
    file.append(reinterpret_cast<const char*>(&n), 8);
    file.append(reinterpret_cast<const char*>(&crc), 4);
    file.append(reinterpret_cast<const char*>(data), size);
  }
  const std::string path = offuzz::write_input(file.data(), file.size(), ".oftrace");
  try {
    of::jit::LoadedGraph g = of::jit::load(path);
    (void)g.graph();
  } catch (const of::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_jit_load: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

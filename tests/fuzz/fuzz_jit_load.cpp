// libFuzzer target: the traced-graph file loader (of::jit::load). The file's checksum would
// stop nearly every mutation at the first check, so by default this harness writes the
// header (magic, version, payload size, CRC-32) itself around the input: the fuzzer then
// reaches every structural check of the payload. The input's first byte picks the header: 0xFF
// writes the rest as it is (the header checks themselves), 0xFD a version-2 header around the
// rest, 0xFC a version-3 header (the current format), anything else a version-1 header around the
// whole input (the older seeds). A graph that loads is then run on zeros of its inputs' declared
// dtypes and sizes (symbolic dims at their smallest and largest), so mutations that pass the
// loader's checks reach the kernels (ASan).
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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
    uint32_t version = 1;
    if (size > 0 && (data[0] == 0xFD || data[0] == 0xFC)) {
      version = data[0] == 0xFD ? 2 : 3;
      ++data;
      --size;
    }
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
    for (int end = 0; end < 2; ++end) {
      std::vector<of::Tensor> inputs;
      for (const of::jit::InputSpec& s : g.input_specs()) {
        std::vector<int64_t> sizes;
        int64_t numel = 1;
        for (const of::jit::DimSpec& d : s.dims) {
          sizes.push_back(end ? d.max : d.min);
          numel *= std::max<int64_t>(sizes.back(), 1);
        }
        if (numel > (int64_t(1) << 20)) return 0;  // too large to be a test
        inputs.push_back(of::zeros(sizes, of::TensorOptions(s.dtype)));
      }
      try {
        (void)g.run(inputs);
      } catch (const of::Error&) {}
    }
  } catch (const of::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_jit_load: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

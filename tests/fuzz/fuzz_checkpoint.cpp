// libFuzzer target: the safetensors checkpoint reader (of::load_tensors, of::load(Tensor&),
// and of::load(Module&) through a small module). Every input must load or raise of::Error,
// and the mapped and the owned load must agree (the same error, or the same tensors).
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
  const std::string path = offuzz::write_input(data, size, ".safetensors");
  // The same file read both ways: the error message, or the names and bytes of every tensor.
  auto read = [&](bool mapped) {
    std::string out;
    try {
      std::map<std::string, std::string> meta;
      auto named = of::load_tensors(path, of::LoadOptions().mmap(mapped), &meta);
      for (auto& [k, t] : named) {
        (void)t.sum().item<double>();
        out += k + '\0' + std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()) + '\0';
      }
    } catch (const of::Error& e) {
      out = std::string("error: ") + e.what();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz_checkpoint: non-of::Error exception: %s\n", e.what());
      std::abort();
    }
    return out;
  };
  if (read(true) != read(false)) {
    std::fprintf(stderr, "fuzz_checkpoint: the mapped and the owned load differ\n");
    std::abort();
  }
  try {
    of::Tensor t;
    of::load(t, path);
  } catch (const of::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_checkpoint: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  try {
    of::nn::Linear lin(2, 3);
    of::load(lin, path, /*strict=*/false);
  } catch (const of::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_checkpoint: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

// libFuzzer target: the safetensors checkpoint reader (of::load_tensors, of::load(Tensor&),
// and of::load(Module&) through a small module). Every input must load or raise of::Error.
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
  const std::string path = offuzz::write_input(data, size, ".safetensors");
  try {
    std::map<std::string, std::string> meta;
    auto named = of::load_tensors(path, &meta);
    for (auto& [k, t] : named) (void)t.sum().item<double>();
  } catch (const of::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_checkpoint: non-of::Error exception: %s\n", e.what());
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

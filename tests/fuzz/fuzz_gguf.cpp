// libFuzzer target: GGUF files (of::gguf::File). A file opens or raises of::Error; an opened
// file's metadata is walked, and every tensor's info is checked (its bytes inside the file,
// its element count the product of its dimensions) and its blocks dequantized. Anything but
// of::Error, or an info out of place, aborts.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <oneflow/error.h>
#include <oneflow/gguf.h>

#include "fuzz_file.h"

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_gguf: %s\n", what);
  std::abort();
}

size_t walk(const oneflow::gguf::Value& v) {
  size_t n = 1;
  for (const oneflow::gguf::Value& x : v.items) {
    if (x.type != v.elem) fail("an array element of another type than the array's");
    n += walk(x);
  }
  return n;
}

void check(const oneflow::gguf::File& f, size_t size) {
  namespace gg = oneflow::gguf;
  for (const auto& kv : f.metadata()) {
    if (f.find(kv.first) != &kv.second) fail("find() does not give a key's value");
    (void)walk(kv.second);
    (void)kv.second.as_int();
    (void)kv.second.as_float();
  }
  if (f.data_offset() % f.alignment() != 0) fail("the data section is not aligned");
  for (const gg::TensorInfo& t : f.tensors()) {
    int64_t numel = 1;
    for (int64_t d : t.dims) numel *= d;
    if (numel != t.numel || t.offset > size || t.nbytes > size - t.offset ||
        uint64_t(t.numel / gg::block_size(t.type) * gg::block_bytes(t.type)) != t.nbytes)
      fail("a tensor info out of place");
    if (f.find_tensor(t.name) != &t) fail("find_tensor() does not give a tensor's info");
    const oneflow::Tensor x = f.dequantize(t.name);
    if (x.numel() != t.numel) fail("a dequantized tensor of another size");
  }
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  offuzz::cap_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace gg = oneflow::gguf;
  try {
    const gg::File f = gg::File::from_bytes(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
    check(f, size);
  } catch (const oneflow::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_gguf: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  // the same bytes mapped from a file
  const std::string path = offuzz::write_input(data, size, ".gguf");
  try {
    check(gg::File::open(path), size);
  } catch (const oneflow::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_gguf: non-of::Error exception (mapped): %s\n", e.what());
    std::abort();
  }
  std::remove(path.c_str());
  return 0;
}

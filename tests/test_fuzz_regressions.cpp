// Regression tests for what the sanitized suite and the fuzzers (tests/fuzz) found.
#include <doctest/doctest.h>

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>

#include "dispatch.h"
#include "harness.h"

TEST_CASE("fuzz regressions: sizes whose bytes wrap around 2^64 are refused") {
  // 2^62 elements pass the element-count check; times 8 bytes they wrapped to a 0-byte storage
  const int64_t big = int64_t(1) << 31;
  CHECK(th::throws_with([&] { (void)of::empty({big, big}, of::kFloat64); },
                        {"[empty]", "(2147483648, 2147483648)", "float64"}));
  CHECK(th::throws_with([&] { (void)of::zeros({big, big}, of::kInt32); }, {"[empty]"}));
}

TEST_CASE("fuzz regressions: an IDX header whose shape times item size wraps is refused") {
  // int32 items, shape (2^31, 2^31): 2^62 * 4 bytes = 2^64, which wrapped to "0 data bytes"
  const std::string path = "fuzz_regression_wrap.idx";
  {
    std::ofstream f(path, std::ios::binary);
    const unsigned char h[] = {0, 0, 0x0C, 2, 0x80, 0, 0, 0, 0x80, 0, 0, 0};
    f.write(reinterpret_cast<const char*>(h), sizeof h);
  }
  std::string msg;
  CHECK(th::throws_with([&] { (void)of::data::read_idx(path); }, {"(2147483648, 2147483648)"}, &msg));
  std::remove(path.c_str());
}

TEST_CASE("fuzz regressions: softmax of NaN is NaN (fast_exp converted NaN to int32)") {
  of::Tensor y = of::tensor({std::nanf(""), 1.0f, 2.0f}).softmax(0);
  CHECK(std::isnan(y[0].item<float>()));
}

TEST_CASE("fuzz regressions: norm ops refuse a bad axis or group count in their attributes") {
  // reachable through saved graphs (of::jit::load), which carry any attribute values
  of::Tensor x = of::randn({2, 4, 3});
  CHECK(th::throws_with([&] {
    (void)of::dispatch(of::find_op("layer_norm"), {x, {}, {}}, {int64_t(7), 1e-5, false, false});
  }, {"[layer_norm]", "axis 7"}));
  CHECK(th::throws_with([&] {
    (void)of::dispatch(of::find_op("layer_norm"), {x, {}, {}}, {int64_t(-1), 1e-5, false, false});
  }, {"[layer_norm]", "axis -1"}));
  for (int64_t g : {0, -2, 3})
    CHECK(th::throws_with([&] {
      (void)of::dispatch(of::find_op("group_norm"), {x, {}, {}}, {g, 1e-5, false, false});
    }, {"[group_norm]", "num_groups " + std::to_string(g)}));
  CHECK(th::throws_with([&] { (void)of::group_norm(of::randn({4}), 2); }, {"[group_norm]"}));
}

TEST_CASE("fuzz regressions: an empty tensor with huge other sizes (stride product overflowed)") {
  const int64_t big = int64_t(1) << 40;
  of::Tensor t = of::empty({0, big, big});  // strides: big, then big * big
  CHECK(t.numel() == 0);
  CHECK(t.sizes()[1] == big);
}

namespace {

// A traced-graph file around `payload`: the header and checksum jit.load expects (as
// tests/fuzz/fuzz_jit_load.cpp writes them), so the payload's own checks are reached.
std::string oftrace_file(const std::string& payload) {
  const char magic[8] = {'O', 'F', 'T', 'R', 'A', 'C', 'E', '\0'};
  const uint32_t version = 1;
  const uint64_t n = payload.size();
  const uint32_t crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), uInt(n)));
  std::string file(magic, 8);
  file.append(reinterpret_cast<const char*>(&version), 4);
  file.append(reinterpret_cast<const char*>(&n), 8);
  file.append(reinterpret_cast<const char*>(&crc), 4);
  file += payload;
  return file;
}

}  // namespace

TEST_CASE("fuzz regressions: jit.load refuses a buffer count the file cannot hold") {
  // a valid header and checksum around a payload claiming 2^32-1 buffers: it sized a table
  // of 2^32 entries (64 GiB) before reading any of them
  std::string payload(40, '\0');
  const uint32_t nb = 0xFFFFFFFFu;
  std::memcpy(payload.data(), &nb, 4);
  const std::string file = oftrace_file(payload);
  const std::string path = "fuzz_regression_buffers.oftrace";
  std::ofstream(path, std::ios::binary) << file;
  CHECK(th::throws_with([&] { (void)of::jit::load(path); }, {"[jit.load]", "more buffers"}));
  std::remove(path.c_str());
}

TEST_CASE("fuzz regressions: elementwise ops refuse operands of different dtypes at dispatch") {
  // fuzz_ops: fmod dispatched with a float64 (4, 1) and a float16 (3) operand read the float16
  // buffer as doubles (out of bounds). The public functions promote first; dispatch refuses.
  const of::Tensor a = of::ones({4, 1}, of::kFloat64), b = of::ones({3}, of::kFloat16);
  CHECK(th::throws_with([&] { of::dispatch(of::find_op("fmod"), {a, b}); },
                        {"operand 1 is float16", "operand 0 is float64"}));
  CHECK(th::throws_with([&] { of::dispatch(of::find_op("add"), {a, b.to(of::kInt32)}); },
                        {"operand 1 is int32"}));
  CHECK(of::fmod(a, b).dtype() == of::kFloat64);  // the public function promotes
}

TEST_CASE("fuzz regressions: jit.load refuses extents that overflow") {
  // fuzz_jit_load's finding (tests/fuzz/regressions/jit_load_extent_overflow.bin, a payload the
  // target wraps in a header and checksum): (size - 1) * stride overflowed int64 in the check
  // that a value lies inside its buffer; the check is overflow-checked now.
  std::ifstream in(ONEFLOW_SOURCE_ROOT "/tests/fuzz/regressions/jit_load_extent_overflow.bin",
                   std::ios::binary);
  REQUIRE(in.good());
  const std::string payload((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string file = oftrace_file(payload);
  const std::string path = "fuzz_regression_extent.oftrace";
  std::ofstream(path, std::ios::binary) << file;
  CHECK(th::throws_with([&] { (void)of::jit::load(path); }, {"[jit.load]", "extent overflows"}));
  std::remove(path.c_str());
}

TEST_CASE("fuzz regressions: jit.load refuses dangling producers, groups and draws") {
  // fuzz_jit_load (jit_load_missing_producer.bin): a value naming a producer node past the end
  // reached the memory planner (an out-of-bounds read in buffer_intervals).
  std::ifstream in(ONEFLOW_SOURCE_ROOT "/tests/fuzz/regressions/jit_load_missing_producer.bin",
                   std::ios::binary);
  REQUIRE(in.good());
  const std::string payload((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = "fuzz_regression_producer.oftrace";
  std::ofstream(path, std::ios::binary) << oftrace_file(payload);
  std::string msg;
  CHECK(th::throws_with([&] { (void)of::jit::load(path); }, {"[jit.load]", "missing producer"}, &msg));
  INFO(msg);
  std::remove(path.c_str());
}

TEST_CASE("fuzz regressions: randint dispatched with an empty or huge range is refused") {
  // fuzz_ops (ops_randint_empty_range.bin): the op's kernel took `v % (high - low)` with
  // high == low (division by zero); randint() checks, a direct dispatch did not.
  auto call = [](double lo, double hi) {
    return of::dispatch(of::find_op("randint"), {},
                        {of::DimVector{4}, of::kInt64, int64_t(of::DeviceType::CPU), int64_t(-1),
                         int64_t(1), int64_t(0), lo, hi});
  };
  CHECK(th::throws_with([&] { call(3, 3); }, {"[randint]", "low < high"}));
  CHECK(th::throws_with([&] { call(0, 1e300); }, {"[randint]", "2^62"}));
  CHECK(th::throws_with([&] { call(0, NAN); }, {"[randint]"}));
  CHECK(call(0, 2)[0].to_vector<int64_t>().size() == 4);
}

TEST_CASE("fuzz regressions: a forged buffer size is refused, not wrapped") {
  // fuzz_jit_load (jit_load_huge_buffer.bin): a buffer of ~2^64 bytes wrapped the allocator's
  // bucket arithmetic (an out-of-range free-list index); allocation now refuses it.
  std::ifstream in(ONEFLOW_SOURCE_ROOT "/tests/fuzz/regressions/jit_load_huge_buffer.bin",
                   std::ios::binary);
  REQUIRE(in.good());
  const std::string payload((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = "fuzz_regression_huge_buffer.oftrace";
  std::ofstream(path, std::ios::binary) << oftrace_file(payload);
  CHECK(th::throws_with([&] { (void)of::jit::load(path); }, {"[allocate]", "more memory than"}));
  std::remove(path.c_str());
}

TEST_CASE("fuzz regressions: integer sums wrap instead of overflowing") {
  // fuzz_checkpoint: summing loaded int64 extremes was signed overflow (undefined behaviour).
  const of::Tensor t = of::tensor(std::vector<int64_t>{INT64_MAX, 1}, {}, of::kInt64);
  CHECK(t.sum().item<int64_t>() == INT64_MIN);
}

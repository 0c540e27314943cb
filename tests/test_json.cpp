// NOTE [One JSON parser] (src/io/json.h): the library's one JSON reader, checked directly
// (safetensors headers and the sharded index reach it through their files: test_serialize.cpp,
// test_dist_checkpoint.cpp); and the binary formats' bounds-checked reader (io/byte_reader.h).
#include <cmath>
#include <limits>
#include <string>

#include <doctest/doctest.h>
#include "harness.h"
#include "io/byte_reader.h"
#include "io/json.h"

namespace {

const of::io::JsonErrors kErrors{"[test] x.json: bad JSON at byte", "end of text", 8};

of::io::JsonValue parse(const std::string& s) { return of::io::parse_json(s, kErrors); }

}  // namespace

TEST_CASE("json: values, members in file order, integers and doubles") {
  using J = of::io::JsonValue;
  const J v = parse(
      " {\"b\": [1, -2, 0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808,"
      " 1.5, -2e3, 1e999, -1e999, 1e-999, 0.5e-3], \"a\": {\"x\": null, \"y\": true}, "
      "\"s\": \"caf\\u00e9 \\ud83d\\ude00 \\n\\\"\"} ");
  REQUIRE(v.kind == J::Object);
  REQUIRE(v.obj.size() == 3);
  CHECK(v.obj[0].first == "b");
  CHECK(v.obj[1].first == "a");
  const J* b = v.find("b");
  REQUIRE(b);
  REQUIRE(b->arr.size() == 13);
  CHECK(*b->arr[0].int64() == 1);
  CHECK(*b->arr[1].int64() == -2);
  CHECK(*b->arr[2].int64() == 0);
  CHECK(*b->arr[3].int64() == 0);
  CHECK(*b->arr[4].int64() == std::numeric_limits<int64_t>::max());
  CHECK(*b->arr[5].int64() == std::numeric_limits<int64_t>::min());
  CHECK(!b->arr[6].int64());  // 2^63 does not fit
  CHECK(b->arr[6].is_uint);
  CHECK(!b->arr[7].int64());  // a fraction
  CHECK(*b->arr[7].number() == 1.5);
  CHECK(!b->arr[8].int64());  // an exponent
  CHECK(*b->arr[8].number() == -2000.0);
  CHECK(*b->arr[9].number() == std::numeric_limits<double>::infinity());
  CHECK(*b->arr[10].number() == -std::numeric_limits<double>::infinity());
  CHECK(*b->arr[11].number() == 0.0);
  CHECK(*b->arr[12].number() == 0.0005);
  CHECK(!v.find("a")->find("x")->int64());
  CHECK(v.find("a")->find("x")->kind == J::Null);
  CHECK(v.find("a")->find("y")->b);
  CHECK(v.find("a")->find("z") == nullptr);
  CHECK(b->find("a") == nullptr);  // not an object
  CHECK(v.find("s")->s == "caf\xc3\xa9 \xf0\x9f\x98\x80 \n\"");
  CHECK(!v.find("s")->number());
}

TEST_CASE("json: malformed text raises with the caller's prefix, the offset and what was found") {
  struct Case {
    std::string text;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {"{\"a\":1,}", {"[test] x.json: bad JSON at byte 7:", "expected a string key, found '}'"}},
      {"[1 2]", {"at byte 3:", "expected ',' or ']'"}},
      {"{\"a\":1,\"a\":2}", {"duplicate key \"a\""}},
      {"[[[[[[[[[[1]]]]]]]]]]", {"nesting deeper than 8 levels"}},
      {"[01]", {"leading zeros"}},
      {"\"\\ud800x\"", {"not followed by a low one"}},
      {"\"a\nb\"", {"unescaped control character 0x0a"}},
      {"{\"a\":", {"expected a value, found end of text"}},
      {"[1] x", {"unexpected 'x' after the top-level value"}},
      {"// c\n1", {"expected a value, found '/'"}},
      {"nan", {"expected a value"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    std::string msg;
    CHECK(th::throws_with([&] { (void)parse(c.text); }, c.needles, &msg));
  }
  CHECK(of::io::find_bad_utf8("ok \xc3\xa9") == std::string::npos);
  CHECK(of::io::find_bad_utf8("ok \xc0\xaf") == 3);  // overlong
  CHECK(of::io::json_quoted("a\"\x01") == "\"a\\\"\\u0001\"");
}

// io::ByteReader (src/io/byte_reader.h): the bounds-checked reader of the binary formats.
TEST_CASE("io: the byte reader checks every read against what is left, counts before sizing") {
  std::string buf;
  auto put = [&](const auto& v) { buf.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(uint32_t(7));
  put(uint64_t(3));
  buf += "abc";
  put(int64_t(-5));
  of::io::ByteReader r(buf.data(), buf.size(), "test.bin");
  CHECK(r.pod<uint32_t>() == 7);
  CHECK(r.str() == "abc");
  CHECK(r.position() == 15);
  CHECK(r.pod<int64_t>() == -5);
  CHECK(r.done());
  // a read past the end raises, naming the bytes, and moves nothing
  CHECK(th::throws_with([&] { r.pod<uint8_t>(); }, {"[test.bin]", "ends early"}));
  CHECK(r.done());
  // a length that runs past the end (a hostile 2^63) is refused before any allocation
  std::string h;
  const uint64_t huge = uint64_t(1) << 63;
  h.append(reinterpret_cast<const char*>(&huge), 8);
  h += "xy";
  of::io::ByteReader s(h.data(), h.size(), "hostile.bin");
  CHECK(th::throws_with([&] { s.str(); }, {"[hostile.bin]", "ends early"}));
  of::io::ByteReader t(h.data(), h.size(), "hostile.bin");
  uint64_t n = 0;
  CHECK(th::throws_with([&] { t.bytes(n); }, {"ends early"}));
  // count_of: a count of items that the bytes left could not hold, overflow-safe
  of::io::ByteReader u(h.data(), h.size(), "hostile.bin");
  u.skip(8);
  CHECK(u.count_of(2, 1, "the list") == 2);
  CHECK(u.count_of(0, 8, "the list") == 0);
  CHECK(th::throws_with([&] { u.count_of(3, 1, "the list"); },
                        {"[hostile.bin] the list counts more items"}));
  CHECK(th::throws_with([&] { u.count_of(huge, 16, "the list"); }, {"counts more items"}));
  CHECK(u.raw(2) == "xy");
  CHECK(th::throws_with([&] { u.seek(11); }, {"an offset past the end"}));
  u.seek(0);
  CHECK(u.pod<uint64_t>() == huge);
}

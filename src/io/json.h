// io/json.h (internal): NOTE [One JSON parser]: the library's one JSON reader and the string
// writer its files share — safetensors headers (io/safetensors.cpp), the sharded checkpoint's index
// (global/dist_checkpoint_common.h) and any other JSON a file of the library holds. The parser is
// strict RFC 8259 over text that must be valid UTF-8: no trailing commas, comments, leading
// zeros, unpaired surrogates, unescaped control characters or duplicate keys; nesting is
// bounded. Errors are of::Error with the caller's prefix (naming the op and the file), the byte
// offset and what was found there.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oneflow/tensor.h"

namespace oneflow::io {

// Object members are JsonMembers, not std::pair<std::string, JsonValue>: pair needs a complete
// JsonValue where JsonValue is still being defined (clang with libstdc++ rejects it).
struct JsonMember;
struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool b = false;
  std::string s;         // String: the decoded text; Number: the literal as written
  bool is_uint = false;  // Number: a non-negative integer literal that fits in uint64
  uint64_t u = 0;
  std::vector<JsonValue> arr;
  std::vector<JsonMember> obj;  // in file order; keys are unique

  // The member named `key` of an object (null: none, or not an object).
  const JsonValue* find(std::string_view key) const;
  // A Number that is an integer literal (no fraction, no exponent) within int64; else nullopt.
  std::optional<int64_t> int64() const;
  // A Number's value as the nearest double; else nullopt.
  std::optional<double> number() const;

  const char* kind_name() const {
    static constexpr const char* kNames[] = {"null",     "a boolean", "a number",
                                             "a string", "an array",  "an object"};
    return kNames[kind];
  }
};
struct JsonMember {
  std::string first;
  JsonValue second;
  JsonMember(std::string k, JsonValue v) : first(std::move(k)), second(std::move(v)) {}
};

// How parse_json reports: "<prefix> <byte offset>: <what>" (prefix e.g. "[load] m.safetensors:
// malformed header JSON at header byte"); `end_name` names the end of the text in messages.
struct JsonErrors {
  std::string prefix;
  std::string end_name = "end of text";
  int max_depth = 64;
};

// Parses one JSON document (whitespace around it allowed, nothing else); text that is not valid
// UTF-8 (find_bad_utf8) is refused first, at its first bad byte. Strings are returned decoded.
JsonValue parse_json(std::string_view text, const JsonErrors& errors);

// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF): the byte index of
// the first bad byte, or npos.
size_t find_bad_utf8(std::string_view s);
// Appends code point cp (<= U+10FFFF) as UTF-8.
void append_utf8(std::string& out, uint32_t cp);
// Appends a JSON string literal for s (valid UTF-8; non-ASCII written as is, control
// characters escaped).
void append_json_string(std::string& out, std::string_view s);
// s as a JSON string literal: how names appear in error messages, control characters visible.
std::string json_quoted(std::string_view s);
// [1,2,3]
std::string json_ints(IntArrayRef v);

}  // namespace oneflow::io

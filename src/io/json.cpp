// io/json.cpp: NOTE [One JSON parser] (io/json.h).
#include "io/json.h"

#include <charconv>
#include <limits>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "oneflow/error.h"

namespace oneflow::io {

// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). Returns the byte
// index of the first bad byte, or npos.
size_t find_bad_utf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return i;
    if (i + size_t(len) > n) return i;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += size_t(len);
  }
  return std::string_view::npos;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// A JSON string literal for s (s is valid UTF-8; non-ASCII is written as is).
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", unsigned(c));
        else out += ch;
    }
  }
  out += '"';
}

std::string json_quoted(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

std::string json_ints(IntArrayRef v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (kind != Object) return nullptr;
  for (const JsonMember& m : obj)
    if (m.first == key) return &m.second;
  return nullptr;
}

std::optional<int64_t> JsonValue::int64() const {
  if (kind != Number) return std::nullopt;
  if (is_uint) {
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return int64_t(u);
  }
  // a negative integer literal: '-' then digits only
  if (s.size() < 2 || s[0] != '-' || s.find_first_of(".eE") != std::string::npos)
    return std::nullopt;
  uint64_t m = 0;
  for (size_t k = 1; k < s.size(); ++k) {
    const uint64_t d = uint64_t(s[k] - '0');
    if (m > (uint64_t(1) << 63) / 10 || m * 10 + d > (uint64_t(1) << 63)) return std::nullopt;
    m = m * 10 + d;
  }
  return m == (uint64_t(1) << 63) ? std::numeric_limits<int64_t>::min() : -int64_t(m);
}

std::optional<double> JsonValue::number() const {
  if (kind != Number) return std::nullopt;
  // (from_chars: the C locale's decimal point whatever the program's locale; a JSON number is
  // valid for it, and one beyond double's range comes back as an error: the nearest infinity)
  double d = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec == std::errc::result_out_of_range) {
    // beyond double's range: an underflow (a negative exponent, or 0.000...) goes to zero,
    // an overflow to infinity, signed as written
    const size_t e = s.find_first_of("eE");
    const bool tiny =
        e != std::string::npos ? s[e + 1] == '-' : s.compare(s[0] == '-' ? 1 : 0, 2, "0.") == 0;
    const double mag = tiny ? 0.0 : std::numeric_limits<double>::infinity();
    return s[0] == '-' ? -mag : mag;
  }
  return d;
}

namespace {

class JsonParser {
 public:
  JsonParser(std::string_view text, const JsonErrors& errors) : text_(text), errors_(errors) {}

  JsonValue parse_document() {
    skip_ws();
    JsonValue v = parse_value(0);
    skip_ws();
    if (pos_ != text_.size()) error("unexpected {} after the top-level value", describe());
    return v;
  }

 private:
  template <class... Args> [[noreturn]] void error(fmt::format_string<Args...> f, Args&&... args) {
    throw Error(fmt::format("{} {}: {}", errors_.prefix, pos_,
                            fmt::format(f, std::forward<Args>(args)...)));
  }
  std::string describe() const {
    if (pos_ >= text_.size()) return errors_.end_name;
    unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7F) return fmt::format("'{}'", char(c));
    return fmt::format("byte 0x{:02x}", unsigned(c));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (at_end() || peek() != c) error("expected '{}', found {}", c, describe());
    ++pos_;
  }

  JsonValue parse_value(int depth) {
    if (depth > errors_.max_depth) error("nesting deeper than {} levels", errors_.max_depth);
    if (at_end()) error("expected a value, found {}", errors_.end_name);
    char c = peek();
    JsonValue v;
    if (c == '{') {
      v.kind = JsonValue::Object;
      ++pos_;
      skip_ws();
      if (!at_end() && peek() == '}') {
        ++pos_;
        return v;
      }
      std::unordered_set<std::string> seen;
      while (true) {
        skip_ws();
        if (at_end() || peek() != '"') error("expected a string key, found {}", describe());
        size_t key_pos = pos_;
        std::string key = parse_string();
        if (!seen.insert(key).second) {
          pos_ = key_pos;
          error("duplicate key {}", json_quoted(key));
        }
        skip_ws();
        expect(':');
        skip_ws();
        JsonValue member = parse_value(depth + 1);
        v.obj.emplace_back(std::move(key), std::move(member));
        skip_ws();
        if (!at_end() && peek() == ',') {
          ++pos_;
          continue;
        }
        if (!at_end() && peek() == '}') {
          ++pos_;
          return v;
        }
        error("expected ',' or '}}', found {}", describe());
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Array;
      ++pos_;
      skip_ws();
      if (!at_end() && peek() == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        skip_ws();
        v.arr.push_back(parse_value(depth + 1));
        skip_ws();
        if (!at_end() && peek() == ',') {
          ++pos_;
          continue;
        }
        if (!at_end() && peek() == ']') {
          ++pos_;
          return v;
        }
        error("expected ',' or ']', found {}", describe());
      }
    }
    if (c == '"') {
      v.kind = JsonValue::String;
      v.s = parse_string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    if (literal("true")) {
      v.kind = JsonValue::Bool;
      v.b = true;
      return v;
    }
    if (literal("false")) {
      v.kind = JsonValue::Bool;
      return v;
    }
    if (literal("null")) return v;
    error("expected a value, found {}", describe());
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  JsonValue parse_number() {
    JsonValue v;
    v.kind = JsonValue::Number;
    size_t start = pos_;
    bool neg = false, integral = true, overflow = false;
    uint64_t u = 0;
    auto digit = [&] { return !at_end() && peek() >= '0' && peek() <= '9'; };
    if (peek() == '-') {
      neg = true;
      ++pos_;
    }
    if (!digit()) error("expected a digit, found {}", describe());
    if (peek() == '0') {
      ++pos_;
      if (digit()) error("numbers may not have leading zeros");
    } else {
      while (digit()) {
        uint64_t d = uint64_t(peek() - '0');
        if (u > (std::numeric_limits<uint64_t>::max() - d) / 10) overflow = true;
        else u = u * 10 + d;
        ++pos_;
      }
    }
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      if (!digit()) error("expected a digit after '.', found {}", describe());
      while (digit()) ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digit()) error("expected a digit in the exponent, found {}", describe());
      while (digit()) ++pos_;
    }
    v.s = std::string(text_.substr(start, pos_ - start));
    v.is_uint = integral && !overflow && !(neg && u != 0);
    v.u = v.is_uint ? u : 0;
    return v;
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) error("truncated \\u escape");
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      char h = text_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= uint32_t(h - 'A' + 10);
      else {
        --pos_;
        error("bad hex digit in \\u escape: {}", describe());
      }
    }
    return cp;
  }

  // At an opening quote; the text is already known to be valid UTF-8.
  std::string parse_string() {
    ++pos_;
    std::string out;
    while (true) {
      if (at_end()) error("unterminated string");
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) error("unescaped control character 0x{:02x} in a string", unsigned(c));
      if (c != '\\') {
        out += char(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) error("unterminated escape");
      char e = peek();
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) error("unpaired low surrogate \\u{:04x}", cp);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!literal("\\u")) error("high surrogate \\u{:04x} not followed by a low one", cp);
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF)
              error("high surrogate \\u{:04x} not followed by a low one", cp);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          error("bad escape '\\{}'", e);
      }
    }
  }

  std::string_view text_;
  const JsonErrors& errors_;
  size_t pos_ = 0;
};

}  // namespace

JsonValue parse_json(std::string_view text, const JsonErrors& errors) {
  if (const size_t bad = find_bad_utf8(text); bad != std::string_view::npos)
    throw Error(fmt::format("{} {}: not valid UTF-8", errors.prefix, bad));
  return JsonParser(text, errors).parse_document();
}

}  // namespace oneflow::io

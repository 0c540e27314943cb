// precompiled.cpp: the Precompiled normalizer, SentencePiece's character map as HF carries it
// (`precompiled_charsmap`, base64): a little-endian u32 trie size in bytes, a Darts double-array
// trie of that size mapping UTF-8 sequences to offsets, then the replacement strings, each ended
// by a NUL. HF (its spm_precompiled crate) replaces each extended grapheme cluster of under 6
// bytes by the replacement of the shortest trie key that starts it, else each character by its
// own; so does this. The whole map is checked when read: every trie walk a text can make stays
// inside the array, and every value names a NUL-ended string inside the blob.
#include <utf8proc.h>

#include <algorithm>

#include "text/pipeline.h"
#include "text/unicode.h"

namespace oneflow::text {

namespace {

std::string base64_decode(const Where& w, const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(s.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '=') {
      ++pad;
      continue;
    }
    const int v = val(c);
    if (v < 0 || pad) w.bad(fmt::format("not base64: byte {} is {:?}", i, std::string(1, c)));
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xFF));
    }
  }
  if (pad > 2 || (s.size() % 4) != 0) w.bad(fmt::format("not base64: {} characters", s.size()));
  return out;
}

struct Precompiled final : Normalizer {
  std::vector<uint32_t> array;
  std::string normalized;

  static bool has_leaf(uint32_t u) { return (u >> 8) & 1; }
  static uint32_t value(uint32_t u) { return u & ((1u << 31) - 1); }
  static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
  static size_t offset(uint32_t u) { return size_t(u >> 10) << ((u & (1u << 9)) >> 6); }

  // The value of the shortest key that starts `key`, or -1.
  int64_t first_prefix(std::string_view key) const {
    size_t pos = 0;
    pos ^= offset(array[0]);
    for (const char ch : key) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == 0) break;
      pos ^= c;
      if (pos >= array.size()) return -1;
      const uint32_t u = array[pos];
      if (label(u) != c) return -1;
      pos ^= offset(u);
      if (pos >= array.size()) return -1;
      if (has_leaf(u)) return value(array[pos]);
    }
    return -1;
  }
  // The replacement of `key`'s first prefix, if any.
  std::optional<std::u32string> transform(std::string_view key) const {
    const int64_t v = first_prefix(key);
    if (v < 0) return std::nullopt;
    const size_t end = normalized.find('\0', size_t(v));
    return uni::decode_lossy(std::string_view(normalized).substr(size_t(v), end - size_t(v)));
  }

  void run(Piece& p) const override {
    // (character, change) as HF's replace(): the new characters 0, the extra ones +1, or the last
    // one carrying the loss
    std::vector<std::pair<char32_t, int>> t;
    t.reserve(p.size());
    bool modified = false;
    auto replace = [&](size_t old_count, const std::u32string& repl) {
      const long diff = long(repl.size()) - long(old_count);
      for (char32_t c : repl) t.push_back({c, 0});
      if (diff > 0)
        for (size_t k = 0; k < size_t(diff); ++k) t[t.size() - 1 - k].second = 1;
      else if (diff < 0 && !t.empty()) t.back().second += int(diff);
      modified = true;
    };
    std::string g;
    utf8proc_int32_t state = 0;
    size_t i = 0;
    while (i < p.size()) {
      size_t j = i + 1;
      state = 0;
      while (j < p.size() &&
             !utf8proc_grapheme_break_stateful(utf8proc_int32_t(p.chars[j - 1]),
                                               utf8proc_int32_t(p.chars[j]), &state))
        ++j;
      g = uni::to_utf8(std::u32string_view(p.chars).substr(i, j - i));
      if (g.size() < 6)
        if (auto r = transform(g)) {
          replace(j - i, *r);
          i = j;
          continue;
        }
      for (size_t k = i; k < j; ++k) {
        std::string one;
        io::append_utf8(one, uint32_t(p.chars[k]));
        if (auto r = transform(one)) replace(1, *r);
        else t.push_back({p.chars[k], 0});
      }
      i = j;
    }
    if (!modified) return;
    apply_changes(p, t);
  }

  // Every walk from the root stays inside the array and ends at a value inside the blob.
  void check(const Where& w) const {
    if (array.empty()) w.bad("the trie is empty");
    std::vector<std::pair<size_t, int>> stack{{offset(array[0]), 0}};
    std::vector<bool> seen(array.size(), false);
    while (!stack.empty()) {
      const auto [base, depth] = stack.back();
      stack.pop_back();
      if (depth > 64) w.bad("the trie is deeper than 64 bytes");
      for (uint32_t c = 1; c < 256; ++c) {
        const size_t pos = base ^ c;
        if (pos >= array.size() || label(array[pos]) != c) continue;
        if (seen[pos]) continue;
        seen[pos] = true;
        const size_t next = pos ^ offset(array[pos]);
        if (next >= array.size())
          w.bad(fmt::format("the trie's unit {} points outside its {} units", pos, array.size()));
        if (has_leaf(array[pos]) && value(array[next]) >= normalized.size())
          w.bad(fmt::format("the trie's value {} is outside the {} bytes of replacements",
                            value(array[next]), normalized.size()));
        stack.push_back({next, depth + 1});
      }
    }
    if (!normalized.empty() && normalized.back() != '\0')
      w.bad("the replacements do not end with a NUL");
    if (io::find_bad_utf8(normalized) != std::string::npos) w.bad("the replacements are not UTF-8");
  }
};

}  // namespace

std::unique_ptr<Normalizer> load_precompiled(const Where& w, const JsonValue& v) {
  const Where wc = w.at("precompiled_charsmap");
  const JsonValue* m = v.find("precompiled_charsmap");
  if (!m) wc.bad("missing");
  auto n = std::make_unique<Precompiled>();
  if (m->kind == JsonValue::Null) return n;  // HF: no map, no change
  const std::string bytes = base64_decode(wc, get_string(w, v, "precompiled_charsmap"));
  if (bytes.size() < 4) wc.bad(fmt::format("{} bytes, under the 4 of its header", bytes.size()));
  uint32_t trie = 0;
  for (int k = 0; k < 4; ++k)
    trie |= uint32_t(static_cast<unsigned char>(bytes[size_t(k)])) << (8 * k);
  if (trie % 4 != 0 || trie > bytes.size() - 4)
    wc.bad(fmt::format("a trie of {} bytes in a map of {}", trie, bytes.size()));
  n->array.resize(trie / 4);
  for (size_t k = 0; k < n->array.size(); ++k) {
    uint32_t u = 0;
    for (size_t b = 0; b < 4; ++b)
      u |= uint32_t(static_cast<unsigned char>(bytes[4 + 4 * k + b])) << (8 * b);
    n->array[k] = u;
  }
  n->normalized = bytes.substr(4 + trie);
  n->check(wc);
  return n;
}

}  // namespace oneflow::text

// pieces.cpp: what the pipeline's components share (pipeline.h): the JSON field readers, the
// patterns of Split and Replace (literal text, or Oniguruma regular expressions as HF compiles
// them: its onig crate's default syntax, UTF-8, no options), and HF's split and replace of a
// NormalizedString carried over to Pieces.
#include <oniguruma.h>

#include <algorithm>
#include <array>
#include <mutex>

#include "text/pipeline.h"
#include "text/unicode.h"

namespace oneflow::text {

// ---------------------------------------------------------------- JSON fields

const JsonValue& need_object(const Where& w, const JsonValue& v) {
  if (v.kind != JsonValue::Object) w.bad(std::string("expected an object, got ") + v.kind_name());
  return v;
}
const JsonValue& need_array(const Where& w, const JsonValue& v) {
  if (v.kind != JsonValue::Array) w.bad(std::string("expected an array, got ") + v.kind_name());
  return v;
}
bool get_bool(const Where& w, const JsonValue& o, std::string_view key, bool dflt) {
  return get_opt_bool(w, o, key).value_or(dflt);
}
std::optional<bool> get_opt_bool(const Where& w, const JsonValue& o, std::string_view key) {
  const JsonValue* v = o.find(key);
  if (!v || v->kind == JsonValue::Null) return std::nullopt;
  if (v->kind != JsonValue::Bool)
    w.at(key).bad(std::string("expected a boolean, got ") + v->kind_name());
  return v->b;
}
std::string get_string(const Where& w, const JsonValue& o, std::string_view key,
                       std::optional<std::string> dflt) {
  const JsonValue* v = o.find(key);
  if (!v || v->kind == JsonValue::Null) {
    if (dflt) return *dflt;
    w.at(key).bad("missing");
  }
  if (v->kind != JsonValue::String)
    w.at(key).bad(std::string("expected a string, got ") + v->kind_name());
  return v->s;
}
char32_t get_char(const Where& w, const JsonValue& o, std::string_view key, char32_t dflt) {
  if (!o.find(key) || o.find(key)->kind == JsonValue::Null) return dflt;
  const std::u32string s = uni::decode_lossy(get_string(w, o, key));
  if (s.size() != 1) w.at(key).bad(fmt::format("expected one character, got {}", s.size()));
  return s[0];
}
int64_t get_int(const Where& w, const JsonValue& o, std::string_view key,
                std::optional<int64_t> dflt, int64_t lo, int64_t hi) {
  const JsonValue* v = o.find(key);
  if (!v || v->kind == JsonValue::Null) {
    if (dflt) return *dflt;
    w.at(key).bad("missing");
  }
  const std::optional<int64_t> x = v->int64();
  if (!x) w.at(key).bad(std::string("expected an integer, got ") + v->kind_name());
  if (*x < lo || *x > hi) w.at(key).bad(fmt::format("{} is out of range [{}, {}]", *x, lo, hi));
  return *x;
}
std::string type_of(const Where& w, const JsonValue& o) {
  need_object(w, o);
  return get_string(w, o, "type");
}
const JsonValue& member(const JsonValue& o, std::string_view key) {
  static const JsonValue null;
  const JsonValue* v = o.kind == JsonValue::Object ? o.find(key) : nullptr;
  return v ? *v : null;
}
void unsupported(const Where& w, const std::string& type,
                 std::initializer_list<const char*> built) {
  std::string list;
  for (const char* b : built) list += (list.empty() ? "" : ", ") + std::string(b);
  w.at("type").bad("'" + type + "' is not supported (built: " + list + ")");
}

// ---------------------------------------------------------------- patterns

namespace {

// A regular expression that runs past this many backtracking steps in one search is refused
// with an error (a hostile pattern cannot hang an encode); HF's own patterns use a few per byte.
constexpr unsigned long kRetryLimit = 10'000'000;

void init_onig() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding enc[] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
    onig_set_retry_limit_in_match(kRetryLimit);
    onig_set_retry_limit_in_search(kRetryLimit);
  });
}

std::string onig_message(int code, OnigErrorInfo* info) {
  OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int n = info ? onig_error_code_to_str(buf, code, info) : onig_error_code_to_str(buf, code);
  return std::string(reinterpret_cast<const char*>(buf), size_t(std::max(n, 0)));
}

}  // namespace

struct Pattern::Impl {
  std::u32string literal;  // a String pattern
  OnigRegex re = nullptr;  // a Regex pattern
  std::string source;
  ~Impl() {
    if (re) onig_free(re);
  }
};

Pattern::Pattern() : impl_(std::make_unique<Impl>()) {}

Pattern::Pattern(const Where& w, const JsonValue& v) : Pattern() {
  need_object(w, v);
  if (v.obj.size() != 1 || (v.obj[0].first != "String" && v.obj[0].first != "Regex"))
    w.bad("expected {\"String\": ...} or {\"Regex\": ...}");
  const std::string kind = v.obj[0].first;
  compile(w, kind, get_string(w, v, kind));
}

Pattern Pattern::regex(const Where& w, const std::string& re) {
  Pattern p;
  p.compile(w, "Regex", re);
  return p;
}

void Pattern::compile(const Where& w, const std::string& kind, const std::string& s) {
  if (io::find_bad_utf8(s) != std::string::npos) w.at(kind).bad("not UTF-8");
  if (s.empty()) w.at(kind).bad("empty (it would match everywhere)");
  impl_->source = s;
  if (kind == "String") {
    impl_->literal = uni::decode_lossy(s);
    return;
  }
  init_onig();
  OnigErrorInfo info{};
  const auto* p = reinterpret_cast<const OnigUChar*>(s.data());
  const int r = onig_new(&impl_->re, p, p + s.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_DEFAULT, &info);
  if (r != ONIG_NORMAL) {
    impl_->re = nullptr;
    w.at(kind).bad(fmt::format("not a valid regular expression {}: {}", io::json_quoted(s),
                               onig_message(r, &info)));
  }
}
Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;

std::vector<Pattern::Run> Pattern::find(std::u32string_view s) const {
  std::vector<Run> out;
  if (s.empty()) {
    out.push_back({0, 0, false});
    return out;
  }
  size_t prev = 0;
  auto add = [&](size_t b, size_t e) {
    if (prev != b) out.push_back({prev, b, false});
    out.push_back({b, e, true});
    prev = e;
  };
  if (!impl_->re) {
    const std::u32string& lit = impl_->literal;
    for (size_t at = s.find(lit); at != std::u32string_view::npos;
         at = s.find(lit, at + lit.size()))
      add(at, at + lit.size());
  } else {
    // UTF-8 for Oniguruma, with the character index of every byte offset (per-thread buffers:
    // find() is called for every word)
    thread_local std::string u;
    thread_local std::vector<size_t> char_at;
    u.clear();
    char_at.clear();
    for (size_t i = 0; i < s.size(); ++i) {
      io::append_utf8(u, uint32_t(s[i]));
      char_at.resize(u.size(), i);
    }
    char_at.push_back(s.size());
    const auto* str = reinterpret_cast<const OnigUChar*>(u.data());
    const OnigUChar* end = str + u.size();
    struct Region {
      OnigRegion* r = onig_region_new();
      ~Region() { onig_region_free(r, 1); }
    };
    thread_local Region held;
    OnigRegion* region = held.r;
    // the onig crate's find_iter: no empty match right after the previous match
    size_t last_end = 0;
    std::optional<size_t> last_match_end;
    while (last_end <= u.size()) {
      onig_region_clear(region);
      const int r = onig_search(impl_->re, str, end, str + last_end, end, region, ONIG_OPTION_NONE);
      if (r == ONIG_MISMATCH) break;
      if (r < 0)
        fail("[tokenizer] the regular expression {} failed on a text of {} bytes: {}",
             io::json_quoted(impl_->source), u.size(), onig_message(r, nullptr));
      const size_t b = size_t(region->beg[0]), e = size_t(region->end[0]);
      if (b == e && last_match_end == e) {
        // step over one character
        size_t k = last_end + 1;
        while (k < u.size() && (static_cast<unsigned char>(u[k]) & 0xC0) == 0x80) ++k;
        last_end = k;
        continue;
      }
      last_end = e;
      last_match_end = e;
      add(char_at[b], char_at[e]);
    }
  }
  if (prev != s.size()) out.push_back({prev, s.size(), false});
  return out;
}

std::vector<Pattern::Run> find_chars(std::u32string_view s,
                                     const std::function<bool(char32_t)>& f) {
  if (s.empty()) return {{0, 0, false}};
  std::vector<Pattern::Run> out;
  size_t last = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!f(s[i])) continue;
    if (last < i) out.push_back({last, i, false});
    out.push_back({i, i + 1, true});
    last = i + 1;
  }
  if (last < s.size()) out.push_back({last, s.size(), false});
  return out;
}

SplitBehavior parse_behavior(const Where& w, const std::string& s) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  w.bad("unknown behavior '" + s +
        "' (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
}

void split_piece(const Piece& p, std::vector<Pattern::Run> runs, SplitBehavior b,
                 std::vector<Piece>& out) {
  using Run = Pattern::Run;
  std::vector<Run> merged;
  bool prev_match = false;
  switch (b) {
    case SplitBehavior::kIsolated:
      for (Run& r : runs) r.match = false;
      merged = std::move(runs);
      break;
    case SplitBehavior::kRemoved:
      merged = std::move(runs);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Run& r : runs) {
        if (r.match && !prev_match && !merged.empty()) merged.back().end = r.end;
        else merged.push_back({r.start, r.end, false});
        prev_match = r.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t k = runs.size(); k-- > 0;) {
        const Run& r = runs[k];
        if (r.match && !prev_match && !merged.empty()) merged.back().start = r.start;
        else merged.push_back({r.start, r.end, false});
        prev_match = r.match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Run& r : runs) {
        if (r.match == prev_match && !merged.empty()) merged.back().end = r.end;
        else merged.push_back({r.start, r.end, false});
        prev_match = r.match;
      }
      break;
  }
  for (const Run& r : merged)
    if (!r.match && r.end > r.start) out.push_back(p.sub(r.start, r.end));
}

void replace_matches(Piece& p, const std::vector<Pattern::Run>& runs, std::u32string_view content) {
  // HF: the matched characters go, and each character of `content` takes the span of the last
  // one matched (an insertion after it)
  Piece out;
  out.origin = p.origin;
  for (const Pattern::Run& r : runs) {
    if (!r.match) {
      for (size_t i = r.start; i < r.end; ++i) out.push(p.chars[i], p.spans[i]);
      continue;
    }
    const Span s = r.end > 0 ? p.spans[r.end - 1] : Span{p.origin, p.origin};
    for (char32_t c : content) out.push(c, s);
  }
  p = std::move(out);
}

char32_t byte_char(uint8_t b) {
  static const auto table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int x = 0; x < 256; ++x) {
      const bool self = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
      t[size_t(x)] = self ? char32_t(x) : next++;
    }
    return t;
  }();
  return table[b];
}

int char_byte(char32_t c) {
  static const auto table = [] {
    std::array<int, 324> t{};
    t.fill(-1);
    for (int x = 0; x < 256; ++x) t[byte_char(uint8_t(x))] = x;
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

}  // namespace oneflow::text

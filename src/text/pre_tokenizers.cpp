// pre_tokenizers.cpp: the pre-tokenizers of `tokenizer.json` (HF's pre_tokenizers module): each
// refines the list of words, splitting them as HF's PreTokenizedString::split does (empty words
// dropped), the byte-level one also mapping each word's UTF-8 bytes to GPT-2's characters.
#include <algorithm>

#include "text/pipeline.h"
#include "text/unicode.h"

namespace oneflow::text {

namespace {

// BertPreTokenizer: words split at whitespace (removed) and at each punctuation character (a
// word of its own), in one pass.
struct BertPre final : PreTokenizer {
  void split(std::vector<Piece>& words) const override {
    std::vector<Piece> out;
    for (const Piece& p : words) {
      size_t start = 0;
      auto flush = [&](size_t end) {
        if (end > start) out.push_back(p.sub(start, end));
      };
      for (size_t i = 0; i < p.size(); ++i) {
        const char32_t c = p.chars[i];
        if (uni::is_whitespace(c)) {
          flush(i);
          start = i + 1;
        } else if (uni::is_punctuation(c)) {
          flush(i);
          out.push_back(p.sub(i, i + 1));
          start = i + 1;
        }
      }
      flush(p.size());
    }
    words = std::move(out);
  }
};

// GPT-2's pattern, which HF's ByteLevel splits with.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteLevelPre final : PreTokenizer {
  bool add_prefix_space = true, use_regex = true;
  Pattern regex;
  explicit ByteLevelPre(Pattern re) : regex(std::move(re)) {}
  void split(std::vector<Piece>& words) const override {
    std::vector<Piece> parts;
    for (Piece& p : words) {
      if (add_prefix_space && !p.empty() && p.chars[0] != U' ') {
        p.chars.insert(p.chars.begin(), U' ');
        p.spans.insert(p.spans.begin(), p.spans[0]);
      }
      if (use_regex) split_piece(p, regex.find(p.chars), SplitBehavior::kIsolated, parts);
      else if (!p.empty()) parts.push_back(std::move(p));
    }
    // each character's UTF-8 bytes as GPT-2's characters, each with the character's span
    // (in place for ASCII, which maps one byte to one character)
    words.clear();
    words.reserve(parts.size());
    std::string u;
    for (Piece& p : parts) {
      if (std::all_of(p.chars.begin(), p.chars.end(), [](char32_t c) { return c < 0x80; })) {
        for (char32_t& c : p.chars) c = byte_char(uint8_t(c));
        words.push_back(std::move(p));
        continue;
      }
      Piece b;
      b.origin = p.origin;
      b.chars.reserve(p.size());
      b.spans.reserve(p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        if (p.chars[i] < 0x80) {
          b.push(byte_char(uint8_t(p.chars[i])), p.spans[i]);
          continue;
        }
        u.clear();
        io::append_utf8(u, uint32_t(p.chars[i]));
        for (char ch : u) b.push(byte_char(static_cast<uint8_t>(ch)), p.spans[i]);
      }
      words.push_back(std::move(b));
    }
  }
};

struct Metaspace final : PreTokenizer {
  enum Scheme { kAlways, kNever, kFirst } scheme = kAlways;
  char32_t replacement = 0x2581;
  bool split_words = true;
  void split(std::vector<Piece>& words) const override {
    std::vector<Piece> out;
    for (Piece& p : words) {
      for (char32_t& c : p.chars)
        if (c == U' ') c = replacement;
      const bool starts = !p.empty() && p.chars[0] == replacement;
      if (!p.empty() && !starts && (scheme == kAlways || (scheme == kFirst && p.origin == 0))) {
        p.chars.insert(p.chars.begin(), replacement);
        p.spans.insert(p.spans.begin(), p.spans[0]);
      }
      if (split_words) {
        const char32_t r = replacement;
        split_piece(p, find_chars(p.chars, [r](char32_t c) { return c == r; }),
                    SplitBehavior::kMergedWithNext, out);
      } else if (!p.empty()) {
        out.push_back(std::move(p));
      }
    }
    words = std::move(out);
  }
};

struct SplitPre final : PreTokenizer {
  Pattern pattern;
  SplitBehavior behavior;
  bool invert;
  SplitPre(Pattern p, SplitBehavior b, bool inv)
      : pattern(std::move(p)), behavior(b), invert(inv) {}
  void split(std::vector<Piece>& words) const override {
    std::vector<Piece> out;
    for (const Piece& p : words) {
      std::vector<Pattern::Run> runs = pattern.find(p.chars);
      if (invert)
        for (Pattern::Run& r : runs) r.match = !r.match;
      split_piece(p, std::move(runs), behavior, out);
    }
    words = std::move(out);
  }
};

// Splits by a character predicate.
struct CharSplit final : PreTokenizer {
  std::function<bool(char32_t)> pred;
  SplitBehavior behavior;
  CharSplit(std::function<bool(char32_t)> f, SplitBehavior b) : pred(std::move(f)), behavior(b) {}
  void split(std::vector<Piece>& words) const override {
    std::vector<Piece> out;
    for (const Piece& p : words) split_piece(p, find_chars(p.chars, pred), behavior, out);
    words = std::move(out);
  }
};

struct SequencePre final : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  void split(std::vector<Piece>& words) const override {
    for (const auto& p : parts) p->split(words);
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> load_pre_tokenizer(const Where& where, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return nullptr;
  const std::string type = type_of(where, v);
  const Where w = where.typed(type);
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPre>(Pattern::regex(w, kGpt2Pattern));
    p->add_prefix_space = get_bool(w, v, "add_prefix_space", true);
    p->use_regex = get_bool(w, v, "use_regex", true);
    get_bool(w, v, "trim_offsets", true);  // read by the post-processor of the same name only
    return p;
  }
  if (type == "Metaspace") {
    auto p = std::make_unique<Metaspace>();
    p->replacement = get_char(w, v, "replacement", 0x2581);
    p->split_words = get_bool(w, v, "split", true);
    if (v.find("prepend_scheme") && member(v, "prepend_scheme").kind != JsonValue::Null) {
      const std::string s = get_string(w, v, "prepend_scheme");
      if (s == "always") p->scheme = Metaspace::kAlways;
      else if (s == "never") p->scheme = Metaspace::kNever;
      else if (s == "first") p->scheme = Metaspace::kFirst;
      else
        w.at("prepend_scheme").bad("unknown scheme '" + s + "' (expected always, never or first)");
    } else {
      p->scheme = get_bool(w, v, "add_prefix_space", true) ? Metaspace::kAlways : Metaspace::kNever;
    }
    return p;
  }
  if (type == "Split") {
    const JsonValue* pat = v.find("pattern");
    if (!pat) w.at("pattern").bad("missing");
    Pattern p(w.at("pattern"), *pat);
    return std::make_unique<SplitPre>(
        std::move(p), parse_behavior(w.at("behavior"), get_string(w, v, "behavior")),
        get_bool(w, v, "invert", false));
  }
  if (type == "Whitespace") {
    return std::make_unique<SplitPre>(Pattern::regex(w, R"(\w+|[^\w\s]+)"), SplitBehavior::kRemoved,
                                      true);
  }
  if (type == "WhitespaceSplit")
    return std::make_unique<CharSplit>(uni::is_whitespace, SplitBehavior::kRemoved);
  if (type == "Punctuation")
    return std::make_unique<CharSplit>(
        uni::is_punctuation,
        parse_behavior(w.at("behavior"), get_string(w, v, "behavior", std::string("Isolated"))));
  if (type == "Digits")
    return std::make_unique<CharSplit>(uni::is_numeric, get_bool(w, v, "individual_digits", false)
                                                            ? SplitBehavior::kIsolated
                                                            : SplitBehavior::kContiguous);
  if (type == "CharDelimiterSplit") {
    const char32_t d = get_char(w, v, "delimiter", 0);
    if (!d) w.at("delimiter").bad("missing");
    return std::make_unique<CharSplit>([d](char32_t c) { return c == d; }, SplitBehavior::kRemoved);
  }
  if (type == "Sequence") {
    auto s = std::make_unique<SequencePre>();
    const Where wp = w.at("pretokenizers");
    const JsonValue* a = v.find("pretokenizers");
    if (!a) wp.bad("missing");
    need_array(wp, *a);
    for (size_t k = 0; k < a->arr.size(); ++k) {
      if (a->arr[k].kind == JsonValue::Null) wp.index(k).bad("expected a pre-tokenizer, got null");
      s->parts.push_back(load_pre_tokenizer(wp.index(k), a->arr[k]));
    }
    return s;
  }
  unsupported(where, type,
              {"BertPreTokenizer", "ByteLevel", "Metaspace", "Split", "Whitespace",
               "WhitespaceSplit", "Punctuation", "Digits", "CharDelimiterSplit", "Sequence"});
}

}  // namespace oneflow::text

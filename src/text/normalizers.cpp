// normalizers.cpp: the normalizers of `tokenizer.json` (HF's normalizers module), each a Piece to
// Piece transformation that keeps every character's input span as HF keeps its alignments.
//
// NOTE [Tokenizer spans]: HF rewrites a NormalizedString by a list of (character, change): change
// 0 replaces the next original character and takes its alignment, +1 inserts a character with the
// alignment of the one before it, -n replaces the next character and drops n more. apply_changes()
// is that rule on Pieces; the Unicode normalization forms produce their changes as the
// unicode-normalization-alignments crate HF uses does (each decomposition's first character 0,
// the rest +1, canonical reordering moving a change with its character, a composition of two
// characters the sum of their changes less one).
#include <algorithm>

#include "text/pipeline.h"
#include "text/unicode.h"

namespace oneflow::text {

namespace {

using Change = std::pair<char32_t, int>;

}  // namespace

void apply_changes(Piece& p, const std::vector<std::pair<char32_t, int>>& dest) {
  Piece out;
  out.origin = p.origin;
  out.chars.reserve(dest.size());
  out.spans.reserve(dest.size());
  size_t idx = 0;
  const Span none{p.origin, p.origin};
  for (const auto& [c, change] : dest) {
    if (change > 0) {
      out.push(c, idx > 0 && idx <= p.size() ? p.spans[idx - 1] : none);
    } else {
      out.push(c, idx < p.size() ? p.spans[idx] : (p.empty() ? none : p.spans.back()));
      idx += 1 + size_t(-change);
    }
  }
  p = std::move(out);
}

namespace {

bool all_ascii(const Piece& p) {
  return std::all_of(p.chars.begin(), p.chars.end(), [](char32_t c) { return c < 0x80; });
}

// NFD or NFKD as (character, change), canonically ordered.
std::vector<Change> decompose(const std::u32string& s, bool compat) {
  std::vector<Change> out;
  out.reserve(s.size());
  std::u32string d;
  for (char32_t c : s) {
    d.clear();
    compat ? uni::append_nfkd(c, d) : uni::append_nfd(c, d);
    for (size_t k = 0; k < d.size(); ++k) out.push_back({d[k], k ? 1 : 0});
  }
  for (size_t i = 0; i < out.size();) {
    if (uni::combining_class(out[i].first) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && uni::combining_class(out[j].first) != 0) ++j;
    std::stable_sort(out.begin() + long(i), out.begin() + long(j),
                     [](const Change& a, const Change& b) {
                       return uni::combining_class(a.first) < uni::combining_class(b.first);
                     });
    i = j;
  }
  return out;
}

// Canonical composition of a decomposed sequence (the crate's Recompositions).
std::vector<Change> compose(const std::vector<Change>& in) {
  std::vector<Change> out, buffer;
  out.reserve(in.size());
  std::optional<Change> composee;
  std::optional<int> last_ccc;
  for (const Change& x : in) {
    const int cls = uni::combining_class(x.first);
    if (!composee) {
      if (cls != 0) out.push_back(x);
      else composee = x;
      continue;
    }
    if (last_ccc && *last_ccc >= cls) {  // blocked from the composee
      if (cls == 0) {
        out.push_back(*composee);
        out.insert(out.end(), buffer.begin(), buffer.end());
        buffer.clear();
        composee = x;
        last_ccc.reset();
      } else {
        buffer.push_back(x);
        last_ccc = cls;
      }
      continue;
    }
    if (const char32_t r = uni::compose(composee->first, x.first)) {
      composee = Change{r, composee->second + x.second - 1};
      continue;
    }
    if (!last_ccc && cls == 0) {
      out.push_back(*composee);
      composee = x;
      continue;
    }
    buffer.push_back(x);
    last_ccc = cls;
  }
  if (composee) out.push_back(*composee);
  out.insert(out.end(), buffer.begin(), buffer.end());
  return out;
}

struct UnicodeForm final : Normalizer {
  bool compat, composed;
  UnicodeForm(bool compat_, bool composed_) : compat(compat_), composed(composed_) {}
  void run(Piece& p) const override {
    if (all_ascii(p)) return;
    std::vector<Change> d = decompose(p.chars, compat);
    if (composed) d = compose(d);
    apply_changes(p, d);
  }
};

struct BertNormalizer final : Normalizer {
  bool clean_text = true, handle_chinese_chars = true, strip_accents = true, lowercase = true;

  void run(Piece& p) const override {
    Piece out;
    out.origin = p.origin;
    auto next = [&] {
      p = std::move(out);
      out = Piece();
      out.origin = p.origin;
    };
    if (clean_text) {
      for (size_t i = 0; i < p.size(); ++i) {
        const char32_t c = p.chars[i];
        if (c == 0 || c == 0xFFFD || uni::is_bert_control(c)) continue;
        out.push(uni::is_whitespace(c) ? U' ' : c, p.spans[i]);
      }
      next();
    }
    if (handle_chinese_chars) {
      for (size_t i = 0; i < p.size(); ++i) {
        const char32_t c = p.chars[i];
        if (uni::is_chinese(c)) {
          out.push(U' ', p.spans[i]);
          out.push(c, p.spans[i]);
          out.push(U' ', p.spans[i]);
        } else {
          out.push(c, p.spans[i]);
        }
      }
      next();
    }
    if (strip_accents) {
      // NFD without the nonspacing marks, character by character, then the canonical order of
      // the combining characters left (HF: NFD of the whole, then the marks removed)
      std::u32string d;
      for (size_t i = 0; i < p.size(); ++i) {
        d.clear();
        uni::append_stripped(p.chars[i], d);
        for (char32_t c : d) out.push(c, p.spans[i]);
      }
      reorder(out);
      next();
    }
    if (lowercase) {
      std::u32string l;
      for (size_t i = 0; i < p.size(); ++i) {
        l.clear();
        uni::append_lowercase(p.chars[i], l);
        for (char32_t c : l) out.push(c, p.spans[i]);
      }
      next();
    }
  }
  // Canonical ordering: each run of non-starters sorted stably by combining class.
  static void reorder(Piece& p) {
    size_t i = 0;
    while (i < p.size()) {
      if (uni::combining_class(p.chars[i]) == 0) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < p.size() && uni::combining_class(p.chars[j]) != 0) ++j;
      if (j - i > 1) {
        std::vector<size_t> idx(j - i);
        for (size_t k = 0; k < idx.size(); ++k) idx[k] = i + k;
        std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
          return uni::combining_class(p.chars[a]) < uni::combining_class(p.chars[b]);
        });
        Piece run;
        for (size_t k : idx) run.push(p.chars[k], p.spans[k]);
        std::copy(run.chars.begin(), run.chars.end(), p.chars.begin() + long(i));
        std::copy(run.spans.begin(), run.spans.end(), p.spans.begin() + long(i));
      }
      i = j;
    }
  }
};

struct Lowercase final : Normalizer {
  void run(Piece& p) const override {
    Piece out;
    out.origin = p.origin;
    std::u32string l;
    for (size_t i = 0; i < p.size(); ++i) {
      const char32_t c = p.chars[i];
      if (c < 0x80) {
        out.push(c >= 'A' && c <= 'Z' ? c + 32 : c, p.spans[i]);
        continue;
      }
      l.clear();
      uni::append_lowercase(c, l);
      for (char32_t x : l) out.push(x, p.spans[i]);
    }
    p = std::move(out);
  }
};

// The characters `keep` accepts (HF's NormalizedString::filter: each keeps its span).
template <class F> void filter(Piece& p, F keep) {
  size_t n = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (keep(p.chars[i])) {
      p.chars[n] = p.chars[i];
      p.spans[n] = p.spans[i];
      ++n;
    }
  p.chars.resize(n);
  p.spans.resize(n);
}

struct StripAccents final : Normalizer {
  void run(Piece& p) const override {
    filter(p, [](char32_t c) { return c < 0x300 || !uni::is_mark(c); });
  }
};

struct Strip final : Normalizer {
  bool left, right;
  Strip(bool l, bool r) : left(l), right(r) {}
  void run(Piece& p) const override {
    size_t b = 0, e = p.size();
    if (left)
      while (b < e && uni::is_whitespace(p.chars[b])) ++b;
    if (right)
      while (e > b && uni::is_whitespace(p.chars[e - 1])) --e;
    if (b == 0 && e == p.size()) return;
    const int64_t origin = p.origin;
    p = p.sub(b, e);
    p.origin = origin;
  }
};

struct Replace final : Normalizer {
  Pattern pattern;
  std::u32string content;
  Replace(Pattern pat, std::u32string c) : pattern(std::move(pat)), content(std::move(c)) {}
  void run(Piece& p) const override { replace_matches(p, pattern.find(p.chars), content); }
};

struct Prepend final : Normalizer {
  std::u32string prepend;
  explicit Prepend(std::u32string s) : prepend(std::move(s)) {}
  void run(Piece& p) const override {
    if (p.empty()) return;
    // every prepended character takes the first character's span (HF's prepend)
    Piece out;
    out.origin = p.origin;
    for (char32_t c : prepend) out.push(c, p.spans[0]);
    out.chars += p.chars;
    out.spans.insert(out.spans.end(), p.spans.begin(), p.spans.end());
    p = std::move(out);
  }
};

struct Sequence final : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> parts;
  void run(Piece& p) const override {
    for (const auto& n : parts) n->run(p);
  }
};

}  // namespace

std::unique_ptr<Normalizer> load_precompiled(const Where& w, const JsonValue& v);

std::unique_ptr<Normalizer> load_normalizer(const Where& where, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return nullptr;
  const std::string type = type_of(where, v);
  const Where w = where.typed(type);
  if (type == "BertNormalizer") {
    // every field present, as HF requires (strip_accents may be null: it follows lowercase)
    for (const char* key : {"clean_text", "handle_chinese_chars", "strip_accents", "lowercase"})
      if (!v.find(key)) w.at(key).bad("missing");
    auto n = std::make_unique<BertNormalizer>();
    n->clean_text = get_bool(w, v, "clean_text", true);
    n->handle_chinese_chars = get_bool(w, v, "handle_chinese_chars", true);
    n->lowercase = get_bool(w, v, "lowercase", true);
    n->strip_accents = get_opt_bool(w, v, "strip_accents").value_or(n->lowercase);
    return n;
  }
  if (type == "NFC") return std::make_unique<UnicodeForm>(false, true);
  if (type == "NFD") return std::make_unique<UnicodeForm>(false, false);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(true, true);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(true, false);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(get_bool(w, v, "strip_left", true),
                                   get_bool(w, v, "strip_right", true));
  if (type == "Replace") {
    const JsonValue* pat = v.find("pattern");
    if (!pat) w.at("pattern").bad("missing");
    Pattern p(w.at("pattern"), *pat);
    return std::make_unique<Replace>(std::move(p), uni::decode_lossy(get_string(w, v, "content")));
  }
  if (type == "Prepend")
    return std::make_unique<Prepend>(uni::decode_lossy(get_string(w, v, "prepend")));
  if (type == "Precompiled") return load_precompiled(w, v);
  if (type == "Sequence") {
    auto s = std::make_unique<Sequence>();
    const Where wn = w.at("normalizers");
    const JsonValue* a = v.find("normalizers");
    if (!a) wn.bad("missing");
    need_array(wn, *a);
    for (size_t k = 0; k < a->arr.size(); ++k) {
      if (a->arr[k].kind == JsonValue::Null) wn.index(k).bad("expected a normalizer, got null");
      s->parts.push_back(load_normalizer(wn.index(k), a->arr[k]));
    }
    return s;
  }
  unsupported(where, type,
              {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Strip",
               "Replace", "Prepend", "Precompiled", "Sequence"});
}

}  // namespace oneflow::text

// tokenizer.cpp: NOTE [Tokenizers]. A `tokenizer.json` read and checked whole into a pipeline
// that runs as Hugging Face's does: the input decoded (invalid UTF-8 as U+FFFD), split around the
// added tokens that match the raw text, each piece normalized with every character keeping the
// span of input characters it came from, split around the added tokens that match normalized
// text, pre-tokenized into words, each word run through the model, and the post-processor's
// template applied; decoding maps ids back to tokens and through the decoder. Offsets are spans
// of input code points, as HF's Python API reports them.
#include "oneflow/text.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "io/json.h"
#include "oneflow/error.h"
#include "text/unicode.h"

namespace oneflow::text {

using io::JsonValue;

namespace {

using Span = std::pair<int64_t, int64_t>;

// Text on its way through the pipeline: characters, each with the input span it came from.
struct Piece {
  std::u32string chars;
  std::vector<Span> spans;
  void push(char32_t c, Span s) {
    chars.push_back(c);
    spans.push_back(s);
  }
};

// One token of the model or an added token, before the post-processor.
struct Tok {
  int64_t id;
  std::string value;
  Span span;
};

// Hashing std::string keys looked up by std::string_view.
struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int64_t, SvHash, std::equal_to<>>;

// Errors name the file and the component's path: "[tokenizer] t.json: normalizer.lowercase: ...".
struct Where {
  const std::string& file;
  std::string path;
  [[noreturn]] void bad(const std::string& what) const {
    fail("[tokenizer] {}: {}: {}", file, path, what);
  }
  Where at(std::string_view key) const {
    return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
  }
};

const JsonValue& need_object(const Where& w, const JsonValue& v) {
  if (v.kind != JsonValue::Object) w.bad(std::string("expected an object, got ") + v.kind_name());
  return v;
}
bool get_bool(const Where& w, const JsonValue& o, std::string_view key, bool dflt) {
  const JsonValue* v = o.find(key);
  if (!v || v->kind == JsonValue::Null) return dflt;
  if (v->kind != JsonValue::Bool)
    w.at(key).bad(std::string("expected a boolean, got ") + v->kind_name());
  return v->b;
}
std::optional<bool> get_opt_bool(const Where& w, const JsonValue& o, std::string_view key) {
  const JsonValue* v = o.find(key);
  if (!v || v->kind == JsonValue::Null) return std::nullopt;
  if (v->kind != JsonValue::Bool)
    w.at(key).bad(std::string("expected a boolean, got ") + v->kind_name());
  return v->b;
}
std::string get_string(const Where& w, const JsonValue& o, std::string_view key,
                       std::optional<std::string> dflt = std::nullopt) {
  const JsonValue* v = o.find(key);
  if (!v || v->kind == JsonValue::Null) {
    if (dflt) return *dflt;
    w.at(key).bad("missing");
  }
  if (v->kind != JsonValue::String)
    w.at(key).bad(std::string("expected a string, got ") + v->kind_name());
  return v->s;
}
int64_t get_int(const Where& w, const JsonValue& o, std::string_view key,
                std::optional<int64_t> dflt = std::nullopt, int64_t lo = 0,
                int64_t hi = int64_t(1) << 40) {
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

// ---------------------------------------------------------------- normalizers

struct BertNormalizer {
  bool clean_text = true, handle_chinese_chars = true, strip_accents = true, lowercase = true;

  void run(Piece& p) const {
    Piece out;
    if (clean_text) {
      for (size_t i = 0; i < p.chars.size(); ++i) {
        const char32_t c = p.chars[i];
        if (c == 0 || c == 0xFFFD || uni::is_bert_control(c)) continue;
        out.push(uni::is_whitespace(c) ? U' ' : c, p.spans[i]);
      }
      p = std::move(out);
      out = Piece();
    }
    if (handle_chinese_chars) {
      for (size_t i = 0; i < p.chars.size(); ++i) {
        const char32_t c = p.chars[i];
        if (uni::is_chinese(c)) {
          out.push(U' ', p.spans[i]);
          out.push(c, p.spans[i]);
          out.push(U' ', p.spans[i]);
        } else {
          out.push(c, p.spans[i]);
        }
      }
      p = std::move(out);
      out = Piece();
    }
    if (strip_accents) {
      // NFD without the nonspacing marks, character by character, then the canonical order of
      // the combining characters left (HF: NFD of the whole, then the marks removed)
      std::u32string d;
      for (size_t i = 0; i < p.chars.size(); ++i) {
        d.clear();
        uni::append_stripped(p.chars[i], d);
        for (char32_t c : d) out.push(c, p.spans[i]);
      }
      reorder(out);
      p = std::move(out);
      out = Piece();
    }
    if (lowercase) {
      std::u32string l;
      for (size_t i = 0; i < p.chars.size(); ++i) {
        l.clear();
        uni::append_lowercase(p.chars[i], l);
        for (char32_t c : l) out.push(c, p.spans[i]);
      }
      p = std::move(out);
    }
  }
  // Canonical ordering: each run of non-starters sorted stably by combining class.
  static void reorder(Piece& p) {
    size_t i = 0;
    while (i < p.chars.size()) {
      if (uni::combining_class(p.chars[i]) == 0) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < p.chars.size() && uni::combining_class(p.chars[j]) != 0) ++j;
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

// ---------------------------------------------------------------- pre-tokenizers

// BertPreTokenizer: words split at whitespace (removed) and at each punctuation character (a
// word of its own).
void bert_pre_tokenize(const Piece& p, std::vector<Piece>& words) {
  Piece cur;
  auto flush = [&] {
    if (!cur.chars.empty()) words.push_back(std::move(cur));
    cur = Piece();
  };
  for (size_t i = 0; i < p.chars.size(); ++i) {
    const char32_t c = p.chars[i];
    if (uni::is_whitespace(c)) {
      flush();
    } else if (uni::is_punctuation(c)) {
      flush();
      cur.push(c, p.spans[i]);
      flush();
    } else {
      cur.push(c, p.spans[i]);
    }
  }
  flush();
}

// ---------------------------------------------------------------- models

struct WordPiece {
  Vocab vocab;
  std::vector<std::string> by_id;
  std::string unk_token = "[UNK]", prefix = "##";
  int64_t max_chars = 100;
  int64_t unk_id = -1;
  size_t max_token_bytes = 0;  // the longest vocabulary entry

  void tokenize(const Piece& w, std::vector<Tok>& out, const Where& where) const {
    auto unk = [&] {
      if (unk_id < 0)
        where.bad("a word is unknown and the unk_token '" + unk_token +
                  "' is not in the vocabulary");
      out.push_back({unk_id, unk_token, {w.spans.front().first, w.spans.back().second}});
    };
    if (int64_t(w.chars.size()) > max_chars) return unk();
    // byte offsets of each character in the word's UTF-8
    std::string s;
    std::vector<size_t> at;
    for (char32_t c : w.chars) {
      at.push_back(s.size());
      io::append_utf8(s, uint32_t(c));
    }
    at.push_back(s.size());
    const size_t n = w.chars.size();
    const size_t first = out.size();
    std::string key;
    size_t start = 0;
    while (start < n) {
      // no token is longer than the vocabulary's longest: the search starts there (the same
      // result, in time linear in the word for a bounded vocabulary; a hostile file's
      // max_input_chars_per_word cannot make it quadratic in a long word)
      const size_t room = max_token_bytes - (start ? std::min(max_token_bytes, prefix.size()) : 0);
      size_t end = size_t(std::upper_bound(at.begin() + long(start), at.end(), at[start] + room) -
                          at.begin()) -
                   1;
      end = std::min(end, n);
      int64_t id = -1;
      while (start < end) {
        const std::string_view sub(s.data() + at[start], at[end] - at[start]);
        const Vocab::const_iterator it = [&] {
          if (start == 0) return vocab.find(sub);
          key.assign(prefix);
          key.append(sub);
          return vocab.find(std::string_view(key));
        }();
        if (it != vocab.end()) {
          id = it->second;
          break;
        }
        --end;
      }
      if (id < 0) {
        out.resize(first);
        return unk();
      }
      out.push_back({id, by_id[size_t(id)], {w.spans[start].first, w.spans[end - 1].second}});
      start = end;
    }
  }
};

// ---------------------------------------------------------------- added tokens

struct AddedToken {
  int64_t id;
  std::string content;
  // what its id decodes to and its tokens show: the content, normalized for a normalized token
  // (HF's added vocabulary maps ids to the normalized form, contents to ids as written)
  std::string shown;
  std::u32string chars;
  bool special, single_word, lstrip, rstrip, normalized;
};

bool is_word_char(char32_t c) {
  // HF's single_word boundary: a letter, digit or underscore on that side
  if (c < 0x80)
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return !uni::is_whitespace(c) && !uni::is_punctuation(c);
}

// The non-overlapping leftmost-longest matches of `tokens` in `text` (HF's added-vocabulary
// split), each with its span in `text` after lstrip/rstrip: [start, end) and the token.
struct Match {
  size_t start, end;
  const AddedToken* token;
};
std::vector<Match> find_added(const std::u32string& text,
                              const std::vector<const AddedToken*>& tokens) {
  std::vector<Match> out;
  size_t i = 0, prev_end = 0;
  while (i < text.size()) {
    const AddedToken* best = nullptr;
    for (const AddedToken* t : tokens) {
      const size_t n = t->chars.size();
      if (n == 0 || i + n > text.size() || (best && n <= best->chars.size())) continue;
      if (text.compare(i, n, t->chars) == 0) best = t;
    }
    if (!best) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + best->chars.size();
    i = stop;
    if (best->single_word) {
      const bool start_ok = start == 0 || !is_word_char(text[start - 1]);
      const bool stop_ok = stop == text.size() || !is_word_char(text[stop]);
      if (!start_ok || !stop_ok) continue;
    }
    if (best->lstrip) {
      size_t s = start;
      while (s > prev_end && uni::is_whitespace(text[s - 1])) --s;
      start = s;
    }
    if (best->rstrip)
      while (stop < text.size() && uni::is_whitespace(text[stop])) ++stop;
    i = stop;
    prev_end = stop;
    out.push_back({start, stop, best});
  }
  return out;
}

// ---------------------------------------------------------------- post-processors

struct TemplatePiece {
  bool special;       // a special token (else the sequence)
  int sequence = 0;   // 0: A, 1: B
  std::string token;  // the special token's name
  int64_t type_id = 0;
};
struct SpecialEntry {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;
};
struct PostProcessor {
  enum Kind { kNone, kTemplate, kBert } kind = kNone;
  std::vector<TemplatePiece> single, pair;
  std::unordered_map<std::string, SpecialEntry> specials;
};

// ---------------------------------------------------------------- decoders

struct Decoder {
  enum Kind { kNone, kWordPiece } kind = kNone;
  std::string prefix = "##";
  bool cleanup = true;
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  size_t p = 0;
  while ((p = s.find(from, p)) != std::string::npos) {
    s.replace(p, from.size(), to);
    p += to.size();
  }
}
// HF's WordPiece cleanup of one decoded token
void cleanup(std::string& s) {
  replace_all(s, " .", ".");
  replace_all(s, " ?", "?");
  replace_all(s, " !", "!");
  replace_all(s, " ,", ",");
  replace_all(s, " ' ", "'");
  replace_all(s, " n't", "n't");
  replace_all(s, " 'm", "'m");
  replace_all(s, " do not", " don't");
  replace_all(s, " 's", "'s");
  replace_all(s, " 've", "'ve");
  replace_all(s, " 're", "'re");
}

}  // namespace

// ---------------------------------------------------------------- the tokenizer

struct Tokenizer::Impl {
  std::string file;
  std::optional<BertNormalizer> normalizer;
  bool bert_pre_tokenizer = false;
  WordPiece model;
  std::vector<AddedToken> added;
  std::vector<const AddedToken*> raw_added, normalized_added;
  std::unordered_map<int64_t, const AddedToken*> added_by_id;
  Vocab added_by_content;
  PostProcessor post;
  Decoder decoder;

  // The tokens of one input, before the post-processor.
  std::vector<Tok> tokenize(std::string_view text) const {
    const Where where{file, "model"};
    const std::u32string in = uni::decode_lossy(text);
    std::vector<Tok> toks;
    auto model_on = [&](const Piece& p, size_t b, size_t e) {
      Piece q;
      for (size_t i = b; i < e; ++i) q.push(p.chars[i], p.spans[i]);
      std::vector<Piece> words;
      if (bert_pre_tokenizer) bert_pre_tokenize(q, words);
      else if (!q.chars.empty()) words.push_back(std::move(q));
      for (const Piece& w : words) model.tokenize(w, toks, where);
    };
    auto run_text = [&](size_t b, size_t e) {
      Piece p;
      for (size_t i = b; i < e; ++i) p.push(in[i], {int64_t(i), int64_t(i) + 1});
      if (normalizer) normalizer->run(p);
      // added tokens that match normalized text split the normalized piece
      size_t from = 0;
      for (const Match& m : find_added(p.chars, normalized_added)) {
        if (m.start > from) model_on(p, from, m.start);
        toks.push_back(
            {m.token->id, m.token->shown, {p.spans[m.start].first, p.spans[m.end - 1].second}});
        from = m.end;
      }
      if (from < p.chars.size()) model_on(p, from, p.chars.size());
    };
    size_t from = 0;
    for (const Match& m : find_added(in, raw_added)) {
      if (m.start > from) run_text(from, m.start);
      toks.push_back({m.token->id, m.token->shown, {int64_t(m.start), int64_t(m.end)}});
      from = m.end;
    }
    if (from < in.size()) run_text(from, in.size());
    return toks;
  }

  Encoding process(const std::vector<Tok>& a, const std::vector<Tok>* b, bool add_special) const {
    Encoding e;
    auto push = [&](int64_t id, const std::string& tok, int64_t type, Span off, bool special) {
      e.ids.push_back(id);
      e.tokens.push_back(tok);
      e.type_ids.push_back(type);
      e.attention_mask.push_back(1);
      e.special_tokens_mask.push_back(special ? 1 : 0);
      e.offsets.push_back(off);
    };
    auto push_seq = [&](const std::vector<Tok>& s, int64_t type) {
      for (const Tok& t : s) push(t.id, t.value, type, t.span, false);
    };
    if (post.kind == PostProcessor::kTemplate) {
      for (const TemplatePiece& p : b ? post.pair : post.single) {
        if (!p.special) {
          push_seq(p.sequence == 0 ? a : *b, p.type_id);
        } else if (add_special) {
          const SpecialEntry& s = post.specials.at(p.token);
          for (size_t k = 0; k < s.ids.size(); ++k)
            push(s.ids[k], s.tokens[k], p.type_id, {0, 0}, true);
        }
      }
      return e;
    }
    if (post.kind == PostProcessor::kBert && add_special) {
      const SpecialEntry& cls = post.specials.at("cls");
      const SpecialEntry& sep = post.specials.at("sep");
      push(cls.ids[0], cls.tokens[0], 0, {0, 0}, true);
      push_seq(a, 0);
      push(sep.ids[0], sep.tokens[0], 0, {0, 0}, true);
      if (b) {
        push_seq(*b, 1);
        push(sep.ids[0], sep.tokens[0], 1, {0, 0}, true);
      }
      return e;
    }
    push_seq(a, 0);
    if (b) push_seq(*b, 0);
    return e;
  }
};

namespace {

void load_normalizer(Tokenizer::Impl& t, const Where& w, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return;
  const std::string type = type_of(w, v);
  if (type != "BertNormalizer")
    w.at("type").bad("'" + type + "' is not supported (built: BertNormalizer)");
  // every field present, as HF requires (strip_accents may be null: it follows lowercase)
  for (const char* key : {"clean_text", "handle_chinese_chars", "strip_accents", "lowercase"})
    if (!v.find(key)) w.at(key).bad("missing");
  BertNormalizer n;
  n.clean_text = get_bool(w, v, "clean_text", true);
  n.handle_chinese_chars = get_bool(w, v, "handle_chinese_chars", true);
  n.lowercase = get_bool(w, v, "lowercase", true);
  n.strip_accents = get_opt_bool(w, v, "strip_accents").value_or(n.lowercase);
  t.normalizer = n;
}

void load_pre_tokenizer(Tokenizer::Impl& t, const Where& w, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return;
  const std::string type = type_of(w, v);
  if (type != "BertPreTokenizer")
    w.at("type").bad("'" + type + "' is not supported (built: BertPreTokenizer)");
  t.bert_pre_tokenizer = true;
}

void load_model(Tokenizer::Impl& t, const Where& w, const JsonValue& v) {
  const std::string type = type_of(w, v);
  if (type != "WordPiece") w.at("type").bad("'" + type + "' is not supported (built: WordPiece)");
  WordPiece& m = t.model;
  m.unk_token = get_string(w, v, "unk_token", std::string("[UNK]"));
  m.prefix = get_string(w, v, "continuing_subword_prefix", std::string("##"));
  m.max_chars = get_int(w, v, "max_input_chars_per_word", 100);
  const JsonValue* vocab = v.find("vocab");
  const Where wv = w.at("vocab");
  if (!vocab) wv.bad("missing");
  need_object(wv, *vocab);
  if (vocab->obj.empty()) wv.bad("empty");
  const int64_t n = int64_t(vocab->obj.size());
  m.by_id.assign(size_t(n), std::string());
  std::vector<bool> seen(size_t(n), false);
  m.vocab.reserve(size_t(n));
  for (const io::JsonMember& e : vocab->obj) {
    const Where we = wv.at(io::json_quoted(e.first));
    const std::optional<int64_t> id = e.second.int64();
    if (!id) we.bad(std::string("expected an integer id, got ") + e.second.kind_name());
    if (*id < 0 || *id >= n)
      we.bad(fmt::format("id {} is outside [0, {}) (the ids must be 0 .. size - 1)", *id, n));
    if (seen[size_t(*id)]) we.bad(fmt::format("id {} is given to two tokens", *id));
    seen[size_t(*id)] = true;
    m.by_id[size_t(*id)] = e.first;
    m.vocab.emplace(e.first, *id);
    m.max_token_bytes = std::max(m.max_token_bytes, e.first.size());
  }
  const auto it = m.vocab.find(std::string_view(m.unk_token));
  m.unk_id = it == m.vocab.end() ? -1 : it->second;
}

void load_added(Tokenizer::Impl& t, const Where& w, const JsonValue* v) {
  if (!v || v->kind == JsonValue::Null) return;
  if (v->kind != JsonValue::Array) w.bad(std::string("expected an array, got ") + v->kind_name());
  t.added.reserve(v->arr.size());
  for (size_t k = 0; k < v->arr.size(); ++k) {
    const Where wk{w.file, w.path + "[" + std::to_string(k) + "]"};
    const JsonValue& a = need_object(wk, v->arr[k]);
    AddedToken tok;
    tok.id = get_int(wk, a, "id");
    tok.content = get_string(wk, a, "content");
    if (tok.content.empty()) wk.at("content").bad("empty");
    if (io::find_bad_utf8(tok.content) != std::string::npos) wk.at("content").bad("not UTF-8");
    tok.chars = uni::decode_lossy(tok.content);
    tok.special = get_bool(wk, a, "special", false);
    tok.single_word = get_bool(wk, a, "single_word", false);
    tok.lstrip = get_bool(wk, a, "lstrip", false);
    tok.rstrip = get_bool(wk, a, "rstrip", false);
    tok.normalized = get_bool(wk, a, "normalized", !tok.special);
    for (const AddedToken& o : t.added) {
      if (o.id == tok.id)
        wk.at("id").bad(fmt::format("id {} is given to two added tokens", tok.id));
      if (o.content == tok.content) wk.at("content").bad("'" + tok.content + "' is added twice");
    }
    // an id the model has must be the model's id of that token
    if (tok.id < int64_t(t.model.by_id.size()) && t.model.by_id[size_t(tok.id)] != tok.content)
      wk.at("id").bad(fmt::format("id {} is the model's token '{}', not '{}'", tok.id,
                                  t.model.by_id[size_t(tok.id)], tok.content));
    t.added.push_back(std::move(tok));
  }
  for (AddedToken& a : t.added) {
    if (a.normalized && t.normalizer) {  // matched against normalized text in its normalized form
      Piece p;
      for (char32_t c : a.chars) p.push(c, {0, 0});
      t.normalizer->run(p);
      if (!p.chars.empty()) a.chars = p.chars;
    }
    a.shown = uni::to_utf8(a.chars);
  }
  for (const AddedToken& a : t.added) {
    (a.normalized ? t.normalized_added : t.raw_added).push_back(&a);
    t.added_by_id.emplace(a.id, &a);
    t.added_by_content.emplace(a.content, a.id);
  }
}

int64_t id_of(const Tokenizer::Impl& t, const std::string& token) {
  if (auto it = t.added_by_content.find(std::string_view(token)); it != t.added_by_content.end())
    return it->second;
  if (auto it = t.model.vocab.find(std::string_view(token)); it != t.model.vocab.end())
    return it->second;
  return -1;
}

void load_post(Tokenizer::Impl& t, const Where& w, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return;
  const std::string type = type_of(w, v);
  PostProcessor& p = t.post;
  if (type == "BertProcessing") {
    p.kind = PostProcessor::kBert;
    for (const char* key : {"sep", "cls"}) {
      const Where wk = w.at(key);
      const JsonValue* e = v.find(key);
      if (!e) wk.bad("missing");
      if (e->kind != JsonValue::Array || e->arr.size() != 2 || e->arr[0].kind != JsonValue::String)
        wk.bad("expected [token, id]");
      const std::optional<int64_t> id = e->arr[1].int64();
      if (!id || *id < 0) wk.bad("expected [token, id] with a non-negative integer id");
      p.specials[key] = {{*id}, {e->arr[0].s}};
    }
    return;
  }
  if (type != "TemplateProcessing")
    w.at("type").bad("'" + type + "' is not supported (built: TemplateProcessing, BertProcessing)");
  p.kind = PostProcessor::kTemplate;
  const JsonValue* sp = v.find("special_tokens");
  const Where ws = w.at("special_tokens");
  if (sp && sp->kind != JsonValue::Null) {
    need_object(ws, *sp);
    for (const io::JsonMember& m : sp->obj) {
      const Where we = ws.at(io::json_quoted(m.first));
      need_object(we, m.second);
      SpecialEntry e;
      const JsonValue* ids = m.second.find("ids");
      const JsonValue* toks = m.second.find("tokens");
      if (!ids || ids->kind != JsonValue::Array) we.at("ids").bad("expected an array of ids");
      if (!toks || toks->kind != JsonValue::Array)
        we.at("tokens").bad("expected an array of tokens");
      if (ids->arr.size() != toks->arr.size() || ids->arr.empty())
        we.bad(fmt::format("{} ids for {} tokens", ids->arr.size(), toks->arr.size()));
      for (size_t k = 0; k < ids->arr.size(); ++k) {
        const std::optional<int64_t> id = ids->arr[k].int64();
        if (!id || *id < 0) we.at("ids").bad("expected non-negative integer ids");
        if (toks->arr[k].kind != JsonValue::String) we.at("tokens").bad("expected strings");
        e.ids.push_back(*id);
        e.tokens.push_back(toks->arr[k].s);
      }
      p.specials.emplace(m.first, std::move(e));
    }
  }
  auto read_template = [&](const char* key, std::vector<TemplatePiece>& out, bool pair) {
    const Where wt = w.at(key);
    const JsonValue* a = v.find(key);
    if (!a || a->kind != JsonValue::Array) wt.bad("expected an array of template pieces");
    bool has_a = false, has_b = false;
    for (size_t k = 0; k < a->arr.size(); ++k) {
      const Where wk{w.file, wt.path + "[" + std::to_string(k) + "]"};
      const JsonValue& e = need_object(wk, a->arr[k]);
      if (e.obj.size() != 1) wk.bad("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      const io::JsonMember& m = e.obj[0];
      const Where wm = wk.at(m.first);
      need_object(wm, m.second);
      TemplatePiece tp;
      tp.type_id = get_int(wm, m.second, "type_id", 0, 0, 1 << 20);
      const std::string id = get_string(wm, m.second, "id");
      if (m.first == "SpecialToken") {
        tp.special = true;
        tp.token = id;
        if (!p.specials.count(id)) wm.at("id").bad("'" + id + "' is not in special_tokens");
      } else if (m.first == "Sequence") {
        tp.special = false;
        if (id == "A") tp.sequence = 0, has_a = true;
        else if (id == "B") tp.sequence = 1, has_b = true;
        else wm.at("id").bad("expected 'A' or 'B', got '" + id + "'");
      } else {
        wk.bad("unknown template piece '" + m.first + "'");
      }
      out.push_back(std::move(tp));
    }
    if (!has_a || has_b != pair)
      wt.bad(pair ? "a pair template must name sequences A and B"
                  : "a single template must name sequence A only");
  };
  read_template("single", p.single, false);
  read_template("pair", p.pair, true);
}

void load_decoder(Tokenizer::Impl& t, const Where& w, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return;
  const std::string type = type_of(w, v);
  if (type != "WordPiece") w.at("type").bad("'" + type + "' is not supported (built: WordPiece)");
  t.decoder.kind = Decoder::kWordPiece;
  t.decoder.prefix = get_string(w, v, "prefix", std::string("##"));
  t.decoder.cleanup = get_bool(w, v, "cleanup", true);
}

}  // namespace

Tokenizer Tokenizer::from_string(std::string_view json, std::string name) {
  auto t = std::make_shared<Impl>();
  t->file = name;
  const JsonValue root = io::parse_json(
      json, io::JsonErrors{fmt::format("[tokenizer] {}: malformed JSON at byte", name)});
  const Where w{t->file, ""};
  if (root.kind != JsonValue::Object) fail("[tokenizer] {}: expected a JSON object", name);
  auto member = [&](const char* key) -> const JsonValue& {
    static const JsonValue null;
    const JsonValue* v = root.find(key);
    return v ? *v : null;
  };
  const JsonValue* model = root.find("model");
  if (!model) w.at("model").bad("missing");
  load_model(*t, w.at("model"), *model);
  load_normalizer(*t, w.at("normalizer"), member("normalizer"));
  load_pre_tokenizer(*t, w.at("pre_tokenizer"), member("pre_tokenizer"));
  load_added(*t, w.at("added_tokens"), root.find("added_tokens"));
  load_post(*t, w.at("post_processor"), member("post_processor"));
  load_decoder(*t, w.at("decoder"), member("decoder"));
  // every token the post-processor adds is one the vocabulary has, under that id
  for (const auto& [key, e] : t->post.specials)
    for (size_t k = 0; k < e.ids.size(); ++k)
      if (id_of(*t, e.tokens[k]) != e.ids[k])
        w.at("post_processor")
            .at("special_tokens")
            .bad(fmt::format(
                "'{}' has id {}, which the vocabulary gives to {}", e.tokens[k], e.ids[k],
                id_of(*t, e.tokens[k]) < 0
                    ? std::string("no token")
                    : "'" + e.tokens[k] + "' as " + std::to_string(id_of(*t, e.tokens[k]))));
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("[tokenizer] {}: cannot open the file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) fail("[tokenizer] {}: read error", path);
  const std::string text = ss.str();
  if (text.empty()) fail("[tokenizer] {}: the file is empty", path);
  return from_string(text, path);
}

Encoding Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->process(impl_->tokenize(text), nullptr, add_special_tokens);
}

Encoding Tokenizer::encode(std::string_view first, std::string_view second,
                           bool add_special_tokens) const {
  const std::vector<Tok> b = impl_->tokenize(second);
  return impl_->process(impl_->tokenize(first), &b, add_special_tokens);
}

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  const int64_t id = id_of(*impl_, std::string(token));
  return id < 0 ? std::nullopt : std::optional<int64_t>(id);
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end())
    return it->second->shown;
  if (id >= 0 && id < int64_t(impl_->model.by_id.size())) return impl_->model.by_id[size_t(id)];
  return std::nullopt;
}

int64_t Tokenizer::vocab_size(bool with_added_tokens) const {
  int64_t n = int64_t(impl_->model.by_id.size());
  if (with_added_tokens)
    for (const AddedToken& a : impl_->added)
      if (a.id >= int64_t(impl_->model.by_id.size())) ++n;
  return n;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> toks;
  for (int64_t id : ids) {
    const auto a = impl_->added_by_id.find(id);
    if (a != impl_->added_by_id.end()) {
      if (skip_special_tokens && a->second->special) continue;
      toks.push_back(a->second->shown);
    } else if (id >= 0 && id < int64_t(impl_->model.by_id.size())) {
      toks.push_back(impl_->model.by_id[size_t(id)]);
    }
  }
  std::string out;
  if (impl_->decoder.kind == Decoder::kNone) {
    for (size_t i = 0; i < toks.size(); ++i) out += (i ? " " : "") + toks[i];
    return out;
  }
  const Decoder& d = impl_->decoder;
  for (size_t i = 0; i < toks.size(); ++i) {
    std::string t = toks[i];
    if (i != 0) {
      if (t.compare(0, d.prefix.size(), d.prefix) == 0) t.erase(0, d.prefix.size());
      else t = " " + t;
    }
    if (d.cleanup) cleanup(t);
    out += t;
  }
  return out;
}

}  // namespace oneflow::text

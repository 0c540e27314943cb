// decoders.cpp: the post-processors (special tokens around the sequences, type ids, the byte-level
// offset trimming) and the decoders (tokens back to text) of `tokenizer.json`, as HF's
// processors and decoders modules define them.
#include <algorithm>

#include "text/pipeline.h"
#include "text/unicode.h"

namespace oneflow::text {

namespace {

// ---------------------------------------------------------------- post-processors

struct SpecialEntry {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;
};

// The special tokens `s` appended (their own encoding merged in, so that the overflowing windows
// get them too, as HF's merge does).
void push_special(Encoding& e, const SpecialEntry& s, int64_t type) {
  Encoding x;
  for (size_t k = 0; k < s.ids.size(); ++k) {
    x.ids.push_back(s.ids[k]);
    x.tokens.push_back(s.tokens[k]);
    x.type_ids.push_back(type);
    x.attention_mask.push_back(1);
    x.special_tokens_mask.push_back(1);
    x.offsets.push_back({0, 0});
  }
  merge_into(e, x);
}
void append(Encoding& e, const Encoding& x) { merge_into(e, x); }
void set_type(Encoding& e, int64_t t) { std::fill(e.type_ids.begin(), e.type_ids.end(), t); }

SpecialEntry read_pair(const Where& w, const JsonValue& v, const char* key) {
  const Where wk = w.at(key);
  const JsonValue* e = v.find(key);
  if (!e) wk.bad("missing");
  if (e->kind != JsonValue::Array || e->arr.size() != 2 || e->arr[0].kind != JsonValue::String)
    wk.bad("expected [token, id]");
  const std::optional<int64_t> id = e->arr[1].int64();
  if (!id || *id < 0) wk.bad("expected [token, id] with a non-negative integer id");
  return {{*id}, {e->arr[0].s}};
}

struct TemplatePiece {
  bool special;       // a special token (else the sequence)
  int sequence = 0;   // 0: A, 1: B
  std::string token;  // the special token's name
  int64_t type_id = 0;
};

struct Template final : PostProcessor {
  std::vector<TemplatePiece> single, pair;
  std::unordered_map<std::string, SpecialEntry> specials_;
  void process(std::vector<Encoding>& encs, bool add_special) const override {
    Encoding out;
    for (const TemplatePiece& p : encs.size() == 2 ? pair : single) {
      if (!p.special) {
        Encoding e = encs[size_t(p.sequence)];
        set_type(e, p.type_id);
        append(out, e);
      } else if (add_special) {
        push_special(out, specials_.at(p.token), p.type_id);
      }
    }
    encs = {std::move(out)};
  }
  void specials(std::vector<std::pair<std::string, int64_t>>& out) const override {
    for (const auto& [name, e] : specials_)
      for (size_t k = 0; k < e.ids.size(); ++k) out.push_back({e.tokens[k], e.ids[k]});
  }
  size_t added_tokens(bool is_pair) const override {
    size_t n = 0;
    for (const TemplatePiece& p : is_pair ? pair : single)
      if (p.special) n += specials_.at(p.token).ids.size();
    return n;
  }
};

struct Bert final : PostProcessor {
  SpecialEntry cls, sep;
  void process(std::vector<Encoding>& encs, bool add_special) const override {
    if (!add_special) return;
    Encoding out;
    push_special(out, cls, 0);
    set_type(encs[0], 0);
    append(out, encs[0]);
    push_special(out, sep, 0);
    if (encs.size() == 2) {
      set_type(encs[1], 1);
      append(out, encs[1]);
      push_special(out, sep, 1);
    }
    encs = {std::move(out)};
  }
  void specials(std::vector<std::pair<std::string, int64_t>>& out) const override {
    out.push_back({cls.tokens[0], cls.ids[0]});
    out.push_back({sep.tokens[0], sep.ids[0]});
  }
  size_t added_tokens(bool pair) const override { return pair ? 3 : 2; }
};

// HF's byte-level process_offsets: a token's leading and trailing spaces (as 'Ġ' or whitespace)
// are not part of its offsets, except the one space add_prefix_space put before the first word.
void trim_offsets(Encoding& e, bool add_prefix_space) {
  for (Encoding& o : e.overflowing) trim_offsets(o, add_prefix_space);
  const char32_t space = byte_char(' ');
  for (size_t i = 0; i < e.size(); ++i) {
    const std::u32string t = uni::decode_lossy(e.tokens[i]);
    auto is_space = [&](char32_t c) { return c == space || uni::is_whitespace(c); };
    size_t lead = 0, trail = 0;
    while (lead < t.size() && is_space(t[lead])) ++lead;
    while (trail < t.size() && is_space(t[t.size() - 1 - trail])) ++trail;
    auto& [s, f] = e.offsets[i];
    if (lead > 0) {
      const bool first = i == 0 || s == 0;
      if (first && add_prefix_space && lead == 1) lead = 0;
      s = std::min(s + int64_t(lead), f);
    }
    if (trail > 0 && f >= int64_t(trail)) f = std::max(f - int64_t(trail), s);
  }
}

struct Roberta final : PostProcessor {
  SpecialEntry cls, sep;
  bool trim = true, add_prefix_space = true;
  void process(std::vector<Encoding>& encs, bool add_special) const override {
    for (Encoding& e : encs) {
      if (trim) trim_offsets(e, add_prefix_space);
      set_type(e, 0);  // (HF: "Roberta is weird, and every encoding is type_id=0")
      for (Encoding& o : e.overflowing) set_type(o, 0);
    }
    if (!add_special) return;
    Encoding out;
    push_special(out, cls, 0);
    append(out, encs[0]);
    push_special(out, sep, 0);
    if (encs.size() == 2) {
      push_special(out, sep, 0);
      append(out, encs[1]);
      push_special(out, sep, 0);
    }
    encs = {std::move(out)};
  }
  void specials(std::vector<std::pair<std::string, int64_t>>& out) const override {
    out.push_back({cls.tokens[0], cls.ids[0]});
    out.push_back({sep.tokens[0], sep.ids[0]});
  }
  size_t added_tokens(bool pair) const override { return pair ? 4 : 2; }
};

struct ByteLevelPost final : PostProcessor {
  bool trim = true, add_prefix_space = true;
  void process(std::vector<Encoding>& encs, bool) const override {
    if (trim)
      for (Encoding& e : encs) trim_offsets(e, add_prefix_space);
  }
  void specials(std::vector<std::pair<std::string, int64_t>>&) const override {}
  size_t added_tokens(bool) const override { return 0; }
};

struct SequencePost final : PostProcessor {
  std::vector<std::unique_ptr<PostProcessor>> parts;
  void process(std::vector<Encoding>& encs, bool add_special) const override {
    for (const auto& p : parts) p->process(encs, add_special);
  }
  void specials(std::vector<std::pair<std::string, int64_t>>& out) const override {
    for (const auto& p : parts) p->specials(out);
  }
  size_t added_tokens(bool pair) const override {
    size_t n = 0;
    for (const auto& p : parts) n += p->added_tokens(pair);
    return n;
  }
};

std::unique_ptr<PostProcessor> load_template(const Where& w, const JsonValue& v) {
  auto p = std::make_unique<Template>();
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
      p->specials_.emplace(m.first, std::move(e));
    }
  }
  auto read_template = [&](const char* key, std::vector<TemplatePiece>& out, bool pair) {
    const Where wt = w.at(key);
    const JsonValue* a = v.find(key);
    if (!a || a->kind != JsonValue::Array) wt.bad("expected an array of template pieces");
    bool has_a = false, has_b = false;
    for (size_t k = 0; k < a->arr.size(); ++k) {
      const Where wk = wt.index(k);
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
        if (!p->specials_.count(id)) wm.at("id").bad("'" + id + "' is not in special_tokens");
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
  read_template("single", p->single, false);
  read_template("pair", p->pair, true);
  return p;
}

// ---------------------------------------------------------------- decoders

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
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

struct WordPieceDec final : Decoder {
  std::string prefix = "##";
  bool cleanup_ = true;
  void decode_chain(std::vector<std::string>& toks) const override {
    for (size_t i = 0; i < toks.size(); ++i) {
      std::string& t = toks[i];
      if (i != 0) {
        if (t.compare(0, prefix.size(), prefix) == 0) t.erase(0, prefix.size());
        else t.insert(0, " ");
      }
      if (cleanup_) cleanup(t);
    }
  }
};

struct ByteLevelDec final : Decoder {
  void decode_chain(std::vector<std::string>& toks) const override {
    std::string bytes;
    for (const std::string& t : toks) {
      const std::u32string cs = uni::decode_lossy(t);
      const size_t before = bytes.size();
      bool all = true;
      for (char32_t c : cs) {
        const int b = char_byte(c);
        if (b < 0) {
          all = false;
          break;
        }
        bytes.push_back(char(b));
      }
      if (!all) {  // a token that is not all byte characters stands as its own text
        bytes.resize(before);
        bytes += t;
      }
    }
    toks = {uni::to_utf8(uni::decode_lossy(bytes))};
  }
};

struct MetaspaceDec final : Decoder {
  char32_t replacement = 0x2581;
  bool prepend = true;  // prepend_scheme other than never
  void decode_chain(std::vector<std::string>& toks) const override {
    for (size_t i = 0; i < toks.size(); ++i) {
      std::u32string out;
      for (char32_t c : uni::decode_lossy(toks[i])) {
        if (c != replacement) out.push_back(c);
        else if (!(i == 0 && prepend)) out.push_back(U' ');
      }
      toks[i] = uni::to_utf8(out);
    }
  }
};

struct ByteFallbackDec final : Decoder {
  void decode_chain(std::vector<std::string>& toks) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (io::find_bad_utf8(pending) == std::string::npos) out.push_back(pending);
      else
        for (size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (std::string& t : toks) {
      std::optional<uint8_t> byte;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        int v = 0;
        bool ok = true;
        for (size_t k = 3; k < 5; ++k) {
          const char c = t[k];
          const int d = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
          if (d < 0) ok = false;
          v = v * 16 + d;
        }
        if (ok) byte = uint8_t(v);
      }
      if (byte) {
        pending.push_back(char(*byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    toks = std::move(out);
  }
};

struct FuseDec final : Decoder {
  void decode_chain(std::vector<std::string>& toks) const override {
    std::string all;
    for (const std::string& t : toks) all += t;
    toks = {std::move(all)};
  }
};

struct StripDec final : Decoder {
  char32_t content;
  size_t start, stop;
  StripDec(char32_t c, size_t b, size_t e) : content(c), start(b), stop(e) {}
  void decode_chain(std::vector<std::string>& toks) const override {
    for (std::string& t : toks) {
      const std::u32string cs = uni::decode_lossy(t);
      size_t b = 0, e = cs.size();
      while (b < std::min(start, cs.size()) && cs[b] == content) ++b;
      for (size_t k = 0; k < stop && e > b && cs[e - 1] == content; ++k) --e;
      t = uni::to_utf8(std::u32string_view(cs).substr(b, e - b));
    }
  }
};

struct ReplaceDec final : Decoder {
  Pattern pattern;
  std::u32string content;
  ReplaceDec(Pattern p, std::u32string c) : pattern(std::move(p)), content(std::move(c)) {}
  void decode_chain(std::vector<std::string>& toks) const override {
    for (std::string& t : toks) {
      Piece p;
      for (char32_t c : uni::decode_lossy(t)) p.push(c, {0, 0});
      replace_matches(p, pattern.find(p.chars), content);
      t = uni::to_utf8(p.chars);
    }
  }
};

struct BpeDec final : Decoder {
  std::string suffix = "</w>";
  void decode_chain(std::vector<std::string>& toks) const override {
    for (size_t i = 0; i < toks.size(); ++i)
      replace_all(toks[i], suffix, i + 1 == toks.size() ? "" : " ");
  }
};

struct CtcDec final : Decoder {
  std::string pad = "<pad>", delimiter = "|";
  bool cleanup_ = true;
  void decode_chain(std::vector<std::string>& toks) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < toks.size(); ++i) {
      if (i > 0 && toks[i] == toks[i - 1]) continue;  // consecutive repeats as one
      std::string t = toks[i];
      replace_all(t, pad, "");
      if (cleanup_) {
        cleanup(t);
        replace_all(t, delimiter, " ");
      }
      if (!t.empty()) out.push_back(std::move(t));
    }
    toks = std::move(out);
  }
};

struct SequenceDec final : Decoder {
  std::vector<std::unique_ptr<Decoder>> parts;
  void decode_chain(std::vector<std::string>& toks) const override {
    for (const auto& d : parts) d->decode_chain(toks);
  }
};

template <class T, class F>
std::vector<std::unique_ptr<T>> load_list(const Where& w, const JsonValue& v, const char* key,
                                          F load) {
  const Where wl = w.at(key);
  const JsonValue* a = v.find(key);
  if (!a) wl.bad("missing");
  need_array(wl, *a);
  std::vector<std::unique_ptr<T>> out;
  for (size_t k = 0; k < a->arr.size(); ++k) {
    if (a->arr[k].kind == JsonValue::Null) wl.index(k).bad("expected an object, got null");
    out.push_back(load(wl.index(k), a->arr[k]));
  }
  return out;
}

}  // namespace

std::unique_ptr<PostProcessor> load_post_processor(const Where& where, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return nullptr;
  const std::string type = type_of(where, v);
  const Where w = where.typed(type);
  if (type == "TemplateProcessing") return load_template(w, v);
  if (type == "BertProcessing") {
    auto p = std::make_unique<Bert>();
    p->sep = read_pair(w, v, "sep");
    p->cls = read_pair(w, v, "cls");
    return p;
  }
  if (type == "RobertaProcessing") {
    auto p = std::make_unique<Roberta>();
    p->sep = read_pair(w, v, "sep");
    p->cls = read_pair(w, v, "cls");
    p->trim = get_bool(w, v, "trim_offsets", true);
    p->add_prefix_space = get_bool(w, v, "add_prefix_space", true);
    return p;
  }
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPost>();
    p->trim = get_bool(w, v, "trim_offsets", true);
    p->add_prefix_space = get_bool(w, v, "add_prefix_space", true);
    return p;
  }
  if (type == "Sequence") {
    auto p = std::make_unique<SequencePost>();
    p->parts = load_list<PostProcessor>(w, v, "processors", load_post_processor);
    return p;
  }
  unsupported(
      w, type,
      {"TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevel", "Sequence"});
}

std::unique_ptr<Decoder> load_decoder(const Where& where, const JsonValue& v) {
  if (v.kind == JsonValue::Null) return nullptr;
  const std::string type = type_of(where, v);
  const Where w = where.typed(type);
  if (type == "WordPiece") {
    auto d = std::make_unique<WordPieceDec>();
    d->prefix = get_string(w, v, "prefix", std::string("##"));
    d->cleanup_ = get_bool(w, v, "cleanup", true);
    return d;
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDec>();
    d->replacement = get_char(w, v, "replacement", 0x2581);
    if (member(v, "prepend_scheme").kind != JsonValue::Null) {
      const std::string s = get_string(w, v, "prepend_scheme");
      if (s != "always" && s != "never" && s != "first")
        w.at("prepend_scheme").bad("unknown scheme '" + s + "' (expected always, never or first)");
      d->prepend = s != "never";
    } else {
      d->prepend = get_bool(w, v, "add_prefix_space", true);
    }
    return d;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip")
    return std::make_unique<StripDec>(get_char(w, v, "content", U' '),
                                      size_t(get_int(w, v, "start", 0, 0, 1 << 20)),
                                      size_t(get_int(w, v, "stop", 0, 0, 1 << 20)));
  if (type == "Replace") {
    const JsonValue* pat = v.find("pattern");
    if (!pat) w.at("pattern").bad("missing");
    Pattern p(w.at("pattern"), *pat);
    return std::make_unique<ReplaceDec>(std::move(p),
                                        uni::decode_lossy(get_string(w, v, "content")));
  }
  if (type == "BPEDecoder") {
    auto d = std::make_unique<BpeDec>();
    d->suffix = get_string(w, v, "suffix", std::string("</w>"));
    return d;
  }
  if (type == "CTC") {
    auto d = std::make_unique<CtcDec>();
    d->pad = get_string(w, v, "pad_token", std::string("<pad>"));
    d->delimiter = get_string(w, v, "word_delimiter_token", std::string("|"));
    d->cleanup_ = get_bool(w, v, "cleanup", true);
    return d;
  }
  if (type == "Sequence") {
    auto d = std::make_unique<SequenceDec>();
    d->parts = load_list<Decoder>(w, v, "decoders", load_decoder);
    return d;
  }
  unsupported(where, type,
              {"WordPiece", "ByteLevel", "Metaspace", "ByteFallback", "Fuse", "Strip", "Replace",
               "BPEDecoder", "CTC", "Sequence"});
}

}  // namespace oneflow::text

// tokenizer.cpp: NOTE [Tokenizers]. A `tokenizer.json` read and checked whole into a pipeline
// that runs as Hugging Face's does: the input decoded (invalid UTF-8 as U+FFFD), split around the
// added tokens that match the raw text, each piece normalized with every character keeping the
// span of input characters it came from, split around the added tokens that match normalized
// text, pre-tokenized into words, each word run through the model, and the post-processor
// applied to the sequences' encodings; decoding maps ids back to tokens and through the decoder.
// Offsets are spans of input code points, as HF's Python API reports them. The components live
// in normalizers.cpp, pre_tokenizers.cpp, models.cpp and decoders.cpp (pipeline.h).
#include "oneflow/text.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <thread>

#include "text/pipeline.h"
#include "text/unicode.h"

namespace oneflow::text {

namespace {

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

// Added tokens indexed by their first character, each list longest first: a position whose
// character starts no token costs one look-up (ASCII: an array), and one that does tries only the
// tokens starting with it.
struct AddedSet {
  std::array<std::vector<const AddedToken*>, 128> ascii;
  std::unordered_map<char32_t, std::vector<const AddedToken*>> other;
  bool empty = true;
  void add(const AddedToken* t) {
    if (t->chars.empty()) return;
    const char32_t c = t->chars[0];
    auto& list = c < 128 ? ascii[c] : other[c];
    list.push_back(t);
    std::stable_sort(list.begin(), list.end(), [](const AddedToken* x, const AddedToken* y) {
      return x->chars.size() > y->chars.size();
    });
    empty = false;
  }
  const std::vector<const AddedToken*>* starting(char32_t c) const {
    if (c < 128) return ascii[c].empty() ? nullptr : &ascii[c];
    const auto it = other.find(c);
    return it == other.end() ? nullptr : &it->second;
  }
};

// The non-overlapping leftmost-longest matches of `tokens` in `text` (HF's added-vocabulary
// split), each with its span in `text` after lstrip/rstrip: [start, end) and the token.
struct Match {
  size_t start, end;
  const AddedToken* token;
};
std::vector<Match> find_added(const std::u32string& text, const AddedSet& tokens) {
  std::vector<Match> out;
  if (tokens.empty) return out;
  size_t i = 0, prev_end = 0;
  while (i < text.size()) {
    const AddedToken* best = nullptr;
    if (const auto* list = tokens.starting(text[i]))
      for (const AddedToken* t : *list) {  // longest first: the first that matches
        const size_t n = t->chars.size();
        if (i + n <= text.size() && text.compare(i, n, t->chars) == 0) {
          best = t;
          break;
        }
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

Encoding to_encoding(const std::vector<Tok>& toks, int64_t type) {
  Encoding e;
  const size_t n = toks.size();
  e.ids.reserve(n);
  e.tokens.reserve(n);
  e.offsets.reserve(n);
  for (const Tok& t : toks) {
    e.ids.push_back(t.id);
    e.tokens.push_back(t.value);
    e.offsets.push_back(t.span);
  }
  e.type_ids.assign(n, type);
  e.attention_mask.assign(n, 1);
  e.special_tokens_mask.assign(n, 0);
  return e;
}

}  // namespace

// ---------------------------------------------------------------- the tokenizer

struct Tokenizer::Impl {
  std::string file;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  AddedSet raw_added, normalized_added;
  std::unordered_map<int64_t, const AddedToken*> added_by_id;
  Vocab added_by_content;
  EncodeOptions file_options;  // the file's truncation and padding

  // The tokens of one input, before the post-processor.
  std::vector<Tok> tokenize(std::string_view text) const {
    const std::u32string in = uni::decode_lossy(text);
    std::vector<Tok> toks;
    std::vector<Piece> words;
    auto model_on = [&](const Piece& p, size_t b, size_t e) {
      words.clear();
      words.push_back(p.sub(b, e));
      if (pre_tokenizer) pre_tokenizer->split(words);
      for (const Piece& w : words)
        if (!w.empty()) model->tokenize(w, toks);
    };
    auto run_text = [&](size_t b, size_t e) {
      Piece p;
      p.origin = int64_t(b);
      p.chars.assign(in, b, e - b);
      p.spans.reserve(e - b);
      for (size_t i = b; i < e; ++i) p.spans.push_back({int64_t(i), int64_t(i) + 1});
      if (normalizer) normalizer->run(p);
      // added tokens that match normalized text split the normalized piece
      size_t from = 0;
      for (const Match& m : find_added(p.chars, normalized_added)) {
        if (m.start > from) model_on(p, from, m.start);
        toks.push_back(
            {m.token->id, m.token->shown, {p.spans[m.start].first, p.spans[m.end - 1].second}});
        from = m.end;
      }
      if (from < p.size()) model_on(p, from, p.size());
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

  // The post-processed encoding of one input or pair, truncated and padded as `o` says.
  Encoding process(const std::vector<Tok>& a, const std::vector<Tok>* b,
                   const EncodeOptions& o) const {
    std::vector<Encoding> encs;
    encs.push_back(to_encoding(a, 0));
    if (b) encs.push_back(to_encoding(*b, 1));
    if (o.truncation) {
      const Truncation& t = *o.truncation;
      const size_t added = o.add_special_tokens && post ? post->added_tokens(b != nullptr) : 0;
      if (t.max_length < 0 || t.stride < 0)
        fail("[tokenizer] truncation: max_length {} and stride {} must be non-negative",
             t.max_length, t.stride);
      if (size_t(t.max_length) < added)
        fail(
            "[tokenizer] truncation: max_length {} leaves no room: the post-processor adds {} "
            "special tokens",
            t.max_length, added);
      if (size_t(t.max_length) - added < size_t(t.stride))
        fail(
            "[tokenizer] truncation: the stride {} is over the effective max length {} (= "
            "max_length {} - {} added special tokens)",
            t.stride, size_t(t.max_length) - added, t.max_length, added);
      truncate_pair(encs[0], b ? &encs[1] : nullptr, t, size_t(t.max_length) - added);
    }
    if (post) post->process(encs, o.add_special_tokens);
    Encoding e = std::move(encs[0]);
    for (size_t k = 1; k < encs.size(); ++k) merge_into(e, encs[k]);
    return e;
  }

  // Pads the rows as `p` says (HF's pad_encodings).
  void pad_rows(std::vector<Encoding>& rows, const Padding& p) const {
    if (rows.empty()) return;
    std::optional<int64_t> id = p.pad_id;
    std::string token = p.pad_token;
    if (!id && file_options.padding) {
      id = file_options.padding->pad_id;
      if (token.empty()) token = file_options.padding->pad_token;
    }
    if (!id)
      fail(
          "[tokenizer] {}: padding needs a pad id and the file's \"padding\" gives none: set "
          "Padding::pad_id",
          file);
    if (token.empty()) {
      if (auto it = added_by_id.find(*id); it != added_by_id.end()) token = it->second->shown;
      else if (*id >= 0 && *id < int64_t(model->by_id.size())) token = model->by_id[size_t(*id)];
    }
    if (p.length && *p.length < 0) fail("[tokenizer] padding: length {} is negative", *p.length);
    if (p.pad_to_multiple_of < 0)
      fail("[tokenizer] padding: pad_to_multiple_of {} is negative", p.pad_to_multiple_of);
    size_t length = 0;
    if (p.length) length = size_t(*p.length);
    else
      for (const Encoding& e : rows) length = std::max(length, e.size());
    const size_t m = size_t(p.pad_to_multiple_of);
    if (m > 0 && length % m) length += m - length % m;
    for (Encoding& e : rows) pad(e, length, *id, p.pad_type_id, token, p.direction);
  }

  int64_t id_of(std::string_view token) const {
    if (auto it = added_by_content.find(token); it != added_by_content.end()) return it->second;
    if (auto it = model->vocab.find(token); it != model->vocab.end()) return it->second;
    return -1;
  }
};

namespace {

void load_added(Tokenizer::Impl& t, const Where& w, const JsonValue* v) {
  if (!v || v->kind == JsonValue::Null) return;
  need_array(w, *v);
  const std::vector<std::string>& model_ids = t.model->by_id;
  t.added.reserve(v->arr.size());
  for (size_t k = 0; k < v->arr.size(); ++k) {
    const Where wk = w.index(k);
    const JsonValue& a = need_object(wk, v->arr[k]);
    AddedToken tok;
    tok.id = get_int(wk, a, "id");
    tok.content = get_string(wk, a, "content");
    if (tok.content.empty()) wk.at("content").bad("empty");
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
    if (tok.id < int64_t(model_ids.size()) && model_ids[size_t(tok.id)] != tok.content)
      wk.at("id").bad(fmt::format("id {} is the model's token '{}', not '{}'", tok.id,
                                  model_ids[size_t(tok.id)], tok.content));
    t.added.push_back(std::move(tok));
  }
  for (AddedToken& a : t.added) {
    if (a.normalized && t.normalizer) {  // matched against normalized text in its normalized form
      Piece p;
      for (char32_t c : a.chars) p.push(c, {0, 0});
      t.normalizer->run(p);
      if (!p.empty()) a.chars = p.chars;
    }
    a.shown = uni::to_utf8(a.chars);
  }
  for (const AddedToken& a : t.added) {
    (a.normalized ? t.normalized_added : t.raw_added).add(&a);
    t.added_by_id.emplace(a.id, &a);
    t.added_by_content.emplace(a.content, a.id);
  }
}

Side read_side(const Where& w, const JsonValue& v) {
  const std::string d = get_string(w, v, "direction", std::string("Right"));
  if (d == "Right") return Side::kRight;
  if (d == "Left") return Side::kLeft;
  w.at("direction").bad("expected Right or Left, got '" + d + "'");
}

void load_file_options(Tokenizer::Impl& t, const Where& root_w, const JsonValue& root) {
  if (const JsonValue& v = member(root, "truncation"); v.kind != JsonValue::Null) {
    const Where w = root_w.at("truncation");
    need_object(w, v);
    Truncation tr;
    tr.max_length = get_int(w, v, "max_length", 512);
    tr.stride = get_int(w, v, "stride", 0);
    tr.direction = read_side(w, v);
    const std::string s = get_string(w, v, "strategy", std::string("LongestFirst"));
    if (s == "LongestFirst") tr.strategy = Truncation::kLongestFirst;
    else if (s == "OnlyFirst") tr.strategy = Truncation::kOnlyFirst;
    else if (s == "OnlySecond") tr.strategy = Truncation::kOnlySecond;
    else w.at("strategy").bad("expected LongestFirst, OnlyFirst or OnlySecond, got '" + s + "'");
    t.file_options.truncation = tr;
  }
  if (const JsonValue& v = member(root, "padding"); v.kind != JsonValue::Null) {
    const Where w = root_w.at("padding");
    need_object(w, v);
    Padding p;
    const JsonValue& st = member(v, "strategy");
    if (st.kind == JsonValue::Object && st.find("Fixed"))
      p.length = get_int(w.at("strategy"), st, "Fixed");
    else if (!(st.kind == JsonValue::String && st.s == "BatchLongest") &&
             st.kind != JsonValue::Null)
      w.at("strategy").bad("expected \"BatchLongest\" or {\"Fixed\": n}");
    p.direction = read_side(w, v);
    p.pad_to_multiple_of = get_int(w, v, "pad_to_multiple_of", 0);
    p.pad_id = get_int(w, v, "pad_id", 0);
    p.pad_type_id = get_int(w, v, "pad_type_id", 0);
    p.pad_token = get_string(w, v, "pad_token", std::string("[PAD]"));
    t.file_options.padding = p;
  }
}

}  // namespace

Tokenizer Tokenizer::from_string(std::string_view json, std::string name) {
  auto t = std::make_shared<Impl>();
  t->file = name;
  const JsonValue root = io::parse_json(
      json, io::JsonErrors{fmt::format("[tokenizer] {}: malformed JSON at byte", name)});
  const Where w{t->file, ""};
  if (root.kind != JsonValue::Object) fail("[tokenizer] {}: expected a JSON object", name);
  const JsonValue* model = root.find("model");
  if (!model) w.at("model").bad("missing");
  t->model = load_model(w.at("model"), *model);
  t->normalizer = load_normalizer(w.at("normalizer"), member(root, "normalizer"));
  t->pre_tokenizer = load_pre_tokenizer(w.at("pre_tokenizer"), member(root, "pre_tokenizer"));
  load_added(*t, w.at("added_tokens"), root.find("added_tokens"));
  t->post = load_post_processor(w.at("post_processor"), member(root, "post_processor"));
  t->decoder = load_decoder(w.at("decoder"), member(root, "decoder"));
  load_file_options(*t, w, root);
  // every token the post-processor adds is one the vocabulary has, under that id
  std::vector<std::pair<std::string, int64_t>> specials;
  if (t->post) t->post->specials(specials);
  for (const auto& [token, id] : specials) {
    const int64_t have = t->id_of(token);
    if (have != id)
      w.at("post_processor")
          .bad(fmt::format(
              "'{}' has id {}, which the vocabulary gives to {}", token, id,
              have < 0 ? std::string("no token") : "'" + token + "' as " + std::to_string(have)));
  }
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
  EncodeOptions o;
  o.add_special_tokens = add_special_tokens;
  return encode(text, o);
}

Encoding Tokenizer::encode(std::string_view first, std::string_view second,
                           bool add_special_tokens) const {
  EncodeOptions o;
  o.add_special_tokens = add_special_tokens;
  return encode(first, second, o);
}

Encoding Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<Encoding> one;
  one.push_back(impl_->process(impl_->tokenize(text), nullptr, options));
  if (options.padding) impl_->pad_rows(one, *options.padding);
  return std::move(one[0]);
}

Encoding Tokenizer::encode(std::string_view first, std::string_view second,
                           const EncodeOptions& options) const {
  const std::vector<Tok> b = impl_->tokenize(second);
  std::vector<Encoding> one;
  one.push_back(impl_->process(impl_->tokenize(first), &b, options));
  if (options.padding) impl_->pad_rows(one, *options.padding);
  return std::move(one[0]);
}

namespace {

// f(i) for i in [0, n) over `threads` threads, each a contiguous share; the first error wins.
template <class F> void parallel_rows(size_t n, int threads, F f) {
  const size_t t = std::clamp<size_t>(size_t(std::max(threads, 1)), 1, std::max<size_t>(n, 1));
  if (t == 1) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(t);
  for (size_t k = 0; k < t; ++k)
    pool.emplace_back([&, k] {
      try {
        for (size_t i = n * k / t; i < n * (k + 1) / t; ++i) f(i);
      } catch (...) { errors[k] = std::current_exception(); }
    });
  for (std::thread& th : pool) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

std::vector<Encoding> Tokenizer::encode_all(const std::vector<std::string>& texts,
                                            const EncodeOptions& options) const {
  std::vector<Encoding> rows(texts.size());
  parallel_rows(texts.size(), options.threads, [&](size_t i) {
    rows[i] = impl_->process(impl_->tokenize(texts[i]), nullptr, options);
  });
  if (options.padding) impl_->pad_rows(rows, *options.padding);
  return rows;
}

std::vector<Encoding> Tokenizer::encode_all(
    const std::vector<std::pair<std::string, std::string>>& pairs,
    const EncodeOptions& options) const {
  std::vector<Encoding> rows(pairs.size());
  parallel_rows(pairs.size(), options.threads, [&](size_t i) {
    const std::vector<Tok> b = impl_->tokenize(pairs[i].second);
    rows[i] = impl_->process(impl_->tokenize(pairs[i].first), &b, options);
  });
  if (options.padding) impl_->pad_rows(rows, *options.padding);
  return rows;
}

Batch Tokenizer::encode_batch(const std::vector<std::string>& texts,
                              const EncodeOptions& options) const {
  return to_batch(encode_all(texts, options), options.padding);
}

Batch Tokenizer::encode_batch(const std::vector<std::pair<std::string, std::string>>& pairs,
                              const EncodeOptions& options) const {
  return to_batch(encode_all(pairs, options), options.padding);
}

EncodeOptions Tokenizer::file_options() const { return impl_->file_options; }

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  const int64_t id = impl_->id_of(token);
  return id < 0 ? std::nullopt : std::optional<int64_t>(id);
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end())
    return it->second->shown;
  const std::vector<std::string>& by_id = impl_->model->by_id;
  if (id >= 0 && id < int64_t(by_id.size())) return by_id[size_t(id)];
  return std::nullopt;
}

int64_t Tokenizer::vocab_size(bool with_added_tokens) const {
  const int64_t model = int64_t(impl_->model->by_id.size());
  int64_t n = model;
  if (with_added_tokens)
    for (const AddedToken& a : impl_->added)
      if (a.id >= model) ++n;
  return n;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  const std::vector<std::string>& by_id = impl_->model->by_id;
  for (int64_t id : ids) {
    const auto a = impl_->added_by_id.find(id);
    if (a != impl_->added_by_id.end()) {
      if (skip_special_tokens && a->second->special) continue;
      toks.push_back(a->second->shown);
    } else if (id >= 0 && id < int64_t(by_id.size())) {
      toks.push_back(by_id[size_t(id)]);
    }
  }
  std::string out;
  if (!impl_->decoder) {
    for (size_t i = 0; i < toks.size(); ++i) out += (i ? " " : "") + toks[i];
    return out;
  }
  impl_->decoder->decode_chain(toks);
  for (const std::string& t : toks) out += t;
  return out;
}

std::string DecodeStream::step(int64_t id) {
  ids_.push_back(id);
  const std::string text = tok_->decode(ids_, skip_);
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  const bool incomplete =
      text.size() >= kReplacement.size() &&
      text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
  if (text.size() <= prefix_.size() || incomplete) return {};
  if (text.compare(0, prefix_.size(), prefix_) != 0)
    fail(
        "[tokenizer] DecodeStream: the text of the ids so far no longer starts with what was "
        "already emitted ({:?} then {:?})",
        prefix_, text);
  std::string fresh = text.substr(prefix_.size());
  const size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + long(prefix_index_));
  prefix_ = tok_->decode(ids_, skip_);
  prefix_index_ = new_prefix_index;
  return fresh;
}

std::function<bool(int64_t)> stream_text(const Tokenizer& tokenizer,
                                         std::function<bool(const std::string&)> on_text,
                                         bool skip_special_tokens) {
  auto ds = std::make_shared<DecodeStream>(tokenizer, skip_special_tokens);
  return [ds, on_text = std::move(on_text)](int64_t id) {
    const std::string piece = ds->step(id);
    return piece.empty() || on_text(piece);
  };
}

}  // namespace oneflow::text

// models.cpp: the models of `tokenizer.json` (HF's models module): WordPiece (greedy longest
// match with a continuation prefix), BPE (merges by rank, lowest first and leftmost on ties, as
// HF's heap of merges gives; byte fallback, unknown-token fusing, ignore_merges) and Unigram
// (Viterbi over the pieces' log-probabilities, unknown characters fused, byte fallback). Each
// token keeps the span of the input characters it covers; a token of part of a character (a
// byte) carries that character's whole span, as HF's offsets do.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <string>
#include <queue>

#include "text/pipeline.h"
#include "text/unicode.h"

namespace oneflow::text {

namespace {

// The UTF-8 of a word, with the byte offset of each character (and the end).
struct Utf8Word {
  std::string s;
  std::vector<size_t> at;
  explicit Utf8Word(const Piece& w) {
    at.reserve(w.size() + 1);
    for (char32_t c : w.chars) {
      at.push_back(s.size());
      io::append_utf8(s, uint32_t(c));
    }
    at.push_back(s.size());
  }
  std::string_view chars(size_t b, size_t e) const {
    return std::string_view(s).substr(at[b], at[e] - at[b]);
  }
};

Span span_of(const Piece& w, size_t b, size_t e) {
  return {w.spans[b].first, w.spans[e - 1].second};
}

// The ids of "<0x00>" .. "<0xFF>" (-1 where missing).
std::array<int64_t, 256> byte_tokens(const Vocab& vocab) {
  std::array<int64_t, 256> ids;
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(std::string_view(fmt::format("<0x{:02X}>", b)));
    ids[size_t(b)] = it == vocab.end() ? -1 : it->second;
  }
  return ids;
}

// ---------------------------------------------------------------- WordPiece

struct WordPiece final : Model {
  std::string unk_token = "[UNK]", prefix = "##";
  int64_t max_chars = 100;
  int64_t unk_id = -1;
  size_t max_token_bytes = 0;  // the longest vocabulary entry

  void tokenize(const Piece& w, std::vector<Tok>& out) const override {
    auto unk = [&] {
      if (unk_id < 0)
        fail(
            "[tokenizer] {}: model: a word is unknown and the unk_token '{}' is not in the "
            "vocabulary",
            file, unk_token);
      out.push_back({unk_id, unk_token, span_of(w, 0, w.size())});
    };
    if (int64_t(w.size()) > max_chars) return unk();
    const Utf8Word u(w);
    const size_t n = w.size();
    const size_t first = out.size();
    std::string key;
    size_t start = 0;
    while (start < n) {
      // no token is longer than the vocabulary's longest: the search starts there (the same
      // result, in time linear in the word for a bounded vocabulary; a hostile file's
      // max_input_chars_per_word cannot make it quadratic in a long word)
      const size_t room = max_token_bytes - (start ? std::min(max_token_bytes, prefix.size()) : 0);
      size_t end =
          size_t(std::upper_bound(u.at.begin() + long(start), u.at.end(), u.at[start] + room) -
                 u.at.begin()) -
          1;
      end = std::min(end, n);
      int64_t id = -1;
      while (start < end) {
        const std::string_view sub = u.chars(start, end);
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
      out.push_back({id, by_id[size_t(id)], span_of(w, start, end)});
      start = end;
    }
  }
};

// ---------------------------------------------------------------- BPE

// (left id, right id) -> (rank, merged id): open addressing over a power-of-two table, the
// look-up BPE makes for every adjacent pair.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0, merged = 0;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }
  // a later merge of the same pair replaces the earlier (HF's map insert)
  void put(uint64_t key, int32_t rank, int32_t merged) {
    Entry& e = slot(key);
    if (e.key == kEmpty) ++size_;
    e = {key, rank, merged};
  }
  const Entry* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    const Entry& e = const_cast<MergeTable*>(this)->slot(key);
    return e.key == kEmpty ? nullptr : &e;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  Entry& slot(uint64_t key) {
    size_t i = size_t((key * 0x9E3779B97F4A7C15ull) >> 17) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    return slots_[i];
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0, size_ = 0;
};

struct Bpe final : Model {
  // (left id, right id) -> (rank, merged id)
  MergeTable merges;
  std::optional<std::string> unk_token;
  int64_t unk_id = -1;
  std::optional<std::string> prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::array<int64_t, 256> byte_ids{};

  static uint64_t key(int64_t a, int64_t b) { return (uint64_t(a) << 32) | uint64_t(b); }

  struct Sym {
    int64_t id;
    size_t cb, ce;  // the characters it covers
    long prev, next;
    bool alive = true;
  };

  // The merged symbols of a word depend on its text alone: each thread keeps the words it
  // tokenized last (HF's BPE keeps a cache too), keyed by this model's serial number so that a
  // later model at the same address never reads them.
  static uint64_t next_serial() {
    static std::atomic<uint64_t> n{1};
    return n++;
  }
  const uint64_t serial = next_serial();
  struct Cached {
    int64_t id;
    uint32_t cb, ce;  // the characters of the word it covers
  };
  struct WordCache {
    uint64_t owner = 0;
    std::unordered_map<std::string, std::vector<Cached>, SvHash, std::equal_to<>> words;
  };
  static constexpr size_t kCacheWords = 1 << 16, kCacheWordBytes = 64;

  void tokenize(const Piece& w, std::vector<Tok>& out) const override {
    if (w.empty()) return;
    const Utf8Word u(w);
    auto emit = [&](const std::vector<Cached>& syms) {
      for (const Cached& c : syms)
        out.push_back({c.id, by_id[size_t(c.id)], span_of(w, c.cb, c.ce)});
    };
    if (u.s.size() > kCacheWordBytes) {
      std::vector<Cached> syms;
      merge_word(w, u, syms);
      return emit(syms);
    }
    thread_local WordCache cache;
    if (cache.owner != serial) {
      cache.words.clear();
      cache.owner = serial;
    }
    if (auto it = cache.words.find(std::string_view(u.s)); it != cache.words.end())
      return emit(it->second);
    std::vector<Cached> syms;  // filled before it enters the cache, so a throw leaves no entry
    merge_word(w, u, syms);
    emit(syms);
    if (cache.words.size() >= kCacheWords) cache.words.clear();
    cache.words.emplace(u.s, std::move(syms));
  }

  void merge_word(const Piece& w, const Utf8Word& u, std::vector<Cached>& result) const {
    if (ignore_merges)
      if (auto it = vocab.find(std::string_view(u.s)); it != vocab.end()) {
        result.push_back({it->second, 0, uint32_t(w.size())});
        return;
      }
    std::vector<Sym> syms;
    syms.reserve(w.size());
    auto add = [&](int64_t id, size_t cb, size_t ce) {
      const long k = long(syms.size());
      syms.push_back({id, cb, ce, k - 1, k + 1});
    };
    std::optional<Sym> unk;  // a pending unknown (cb, ce)
    auto flush_unk = [&] {
      if (unk) add(unk->id, unk->cb, unk->ce);
      unk.reset();
    };
    std::string s;
    for (size_t i = 0; i < w.size(); ++i) {
      s.clear();
      if (i > 0 && prefix) s += *prefix;
      s += u.chars(i, i + 1);
      if (i + 1 == w.size() && suffix) s += *suffix;
      if (auto it = vocab.find(std::string_view(s)); it != vocab.end()) {
        flush_unk();
        add(it->second, i, i + 1);
        continue;
      }
      if (byte_fallback &&
          std::all_of(s.begin(), s.end(), [&](char c) { return byte_ids[uint8_t(c)] >= 0; })) {
        // (HF leaves a pending unknown pending across these)
        for (char c : s) add(byte_ids[uint8_t(c)], i, i + 1);
        continue;
      }
      if (!unk_token) continue;  // HF drops the character
      if (unk && fuse_unk) {
        unk->ce = i + 1;
      } else {
        flush_unk();
        unk = Sym{unk_id, i, i + 1, 0, 0};
      }
    }
    flush_unk();
    if (!syms.empty()) syms.back().next = long(syms.size());
    merge_all(syms);
    for (const Sym& x : syms)
      if (x.alive) result.push_back({x.id, uint32_t(x.cb), uint32_t(x.ce)});
  }

  void merge_all(std::vector<Sym>& syms) const {
    struct Cand {
      int32_t rank;
      long pos;
      int32_t new_id;
      bool operator<(const Cand& o) const {  // the heap's top: lowest rank, then leftmost
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Cand> q;
    auto consider = [&](long pos) {
      const long nx = syms[size_t(pos)].next;
      if (nx >= long(syms.size())) return;
      if (const MergeTable::Entry* e = merges.find(key(syms[size_t(pos)].id, syms[size_t(nx)].id)))
        q.push({e->rank, pos, e->merged});
    };
    for (long k = 0; k + 1 < long(syms.size()); ++k) consider(k);
    while (!q.empty()) {
      const Cand top = q.top();
      q.pop();
      Sym& cur = syms[size_t(top.pos)];
      if (!cur.alive || cur.next >= long(syms.size())) continue;
      Sym& right = syms[size_t(cur.next)];
      const MergeTable::Entry* e = merges.find(key(cur.id, right.id));
      if (!e || e->merged != top.new_id) continue;  // a stale entry
      cur.id = top.new_id;
      cur.ce = right.ce;
      right.alive = false;
      cur.next = right.next;
      if (cur.next < long(syms.size())) syms[size_t(cur.next)].prev = top.pos;
      if (cur.prev >= 0) consider(cur.prev);
      consider(top.pos);
    }
  }
};

// ---------------------------------------------------------------- Unigram

struct Unigram final : Model {
  std::vector<double> scores;
  int64_t unk_id = -1;
  bool byte_fallback = false;
  double min_score = 0;
  size_t max_token_bytes = 0;
  std::array<int64_t, 256> byte_ids{};
  static constexpr double kUnkPenalty = 10.0;

  void tokenize(const Piece& w, std::vector<Tok>& out) const override {
    if (w.empty()) return;
    const Utf8Word u(w);
    const size_t n = w.size();
    struct Node {
      int64_t id = -1;
      double score = 0;
      long start = -1;  // in characters; -1: not reached
    };
    std::vector<Node> best(n + 1);
    const double unk_score = min_score - kUnkPenalty;
    for (size_t i = 0; i < n; ++i) {
      const double here = best[i].score;
      bool single = false;
      for (size_t e = i + 1; e <= n && u.at[e] - u.at[i] <= max_token_bytes; ++e) {
        const auto it = vocab.find(u.chars(i, e));
        if (it == vocab.end()) continue;
        const double cand = scores[size_t(it->second)] + here;
        Node& t = best[e];
        if (t.start < 0 || cand > t.score) t = {it->second, cand, long(i)};
        if (e == i + 1) single = true;
      }
      if (!single) {
        if (unk_id < 0)
          fail(
              "[tokenizer] {}: model: the text has a character no piece covers and the model "
              "has no unk_id",
              file);
        Node& t = best[i + 1];
        const double cand = unk_score + here;
        if (t.start < 0 || cand > t.score) t = {unk_id, cand, long(i)};
      }
    }
    // back from the end; consecutive unknowns fused into one piece
    std::vector<std::pair<size_t, size_t>> pieces;  // character ranges, end to start
    size_t e = n;
    bool in_unk = false;
    while (e > 0) {
      const Node& node = best[e];
      const size_t s = size_t(node.start);
      if (node.id == unk_id) {
        if (in_unk) pieces.back().first = s;
        else pieces.push_back({s, e});
        in_unk = true;
      } else {
        pieces.push_back({s, e});
        in_unk = false;
      }
      e = s;
    }
    for (size_t k = pieces.size(); k-- > 0;) {
      const auto [b, f] = pieces[k];
      const std::string_view text = u.chars(b, f);
      const Span sp = span_of(w, b, f);
      if (auto it = vocab.find(text); it != vocab.end()) {
        out.push_back({it->second, std::string(text), sp});
        continue;
      }
      if (byte_fallback && std::all_of(text.begin(), text.end(),
                                       [&](char c) { return byte_ids[uint8_t(c)] >= 0; })) {
        for (char c : text)
          out.push_back({byte_ids[uint8_t(c)], fmt::format("<0x{:02X}>", uint8_t(c)), sp});
        continue;
      }
      out.push_back({unk_id, std::string(text), sp});
    }
  }
};

// ---------------------------------------------------------------- loading

// A JSON number as HF reads it: serde_json without its float_roundtrip feature, which gathers up
// to 19 digits of significand into a u64 (ignoring digits past that), converts it to f64 and
// multiplies or divides by one power of ten — two roundings, so a score can land one ulp away from
// the nearest double, and Viterbi's ties then break as HF's do only from HF's value.
double serde_f64(std::string_view lit) {
  static const auto pow10 = [] {
    std::array<double, 309> t{};
    for (size_t k = 0; k < t.size(); ++k) t[k] = std::stod("1e" + std::to_string(k));
    return t;
  }();
  size_t i = 0;
  const bool positive = !(i < lit.size() && lit[i] == '-');
  if (!positive) ++i;
  uint64_t sig = 0;
  int64_t exp = 0;
  bool overflowed = false;
  auto digit_in = [&](char c, bool fraction) {
    const uint64_t d = uint64_t(c - '0');
    const uint64_t max = UINT64_MAX;
    if (overflowed || (sig >= max / 10 && (sig > max / 10 || d > max % 10))) {
      overflowed = true;
      if (!fraction) ++exp;  // an integer digit past the significand still scales it
      return;
    }
    sig = sig * 10 + d;
    if (fraction) --exp;
  };
  for (; i < lit.size() && lit[i] >= '0' && lit[i] <= '9'; ++i) digit_in(lit[i], false);
  if (i < lit.size() && lit[i] == '.')
    for (++i; i < lit.size() && lit[i] >= '0' && lit[i] <= '9'; ++i) digit_in(lit[i], true);
  if (i < lit.size() && (lit[i] == 'e' || lit[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < lit.size() && (lit[i] == '+' || lit[i] == '-')) neg = lit[i++] == '-';
    int64_t e = 0;
    for (; i < lit.size() && lit[i] >= '0' && lit[i] <= '9'; ++i)
      e = std::min<int64_t>(e * 10 + (lit[i] - '0'), int64_t(1) << 40);
    exp += neg ? -e : e;
  }
  double f = double(sig);
  while (true) {
    const uint64_t a = uint64_t(exp < 0 ? -exp : exp);
    if (a < pow10.size()) {
      if (exp >= 0) f *= pow10[a];
      else f /= pow10[a];
      break;
    }
    if (f == 0 || exp >= 0) break;  // (HF refuses an overflow; the caller checks finiteness)
    f /= 1e308;
    exp += 308;
  }
  if (exp >= int64_t(pow10.size()) && f != 0) f = HUGE_VAL;
  return positive ? f : -f;
}

std::optional<std::string> get_opt_string(const Where& w, const JsonValue& v, const char* key) {
  if (member(v, key).kind == JsonValue::Null) return std::nullopt;
  return get_string(w, v, key);
}

std::unique_ptr<Model> load_wordpiece(const Where& w, const JsonValue& v) {
  auto m = std::make_unique<WordPiece>();
  m->unk_token = get_string(w, v, "unk_token", std::string("[UNK]"));
  m->prefix = get_string(w, v, "continuing_subword_prefix", std::string("##"));
  m->max_chars = get_int(w, v, "max_input_chars_per_word", 100);
  read_vocab(w, v, *m);
  for (const std::string& t : m->by_id) m->max_token_bytes = std::max(m->max_token_bytes, t.size());
  const auto it = m->vocab.find(std::string_view(m->unk_token));
  m->unk_id = it == m->vocab.end() ? -1 : it->second;
  return m;
}

std::unique_ptr<Model> load_bpe(const Where& w, const JsonValue& v) {
  auto m = std::make_unique<Bpe>();
  if (const JsonValue& d = member(v, "dropout"); d.kind != JsonValue::Null) {
    const std::optional<double> p = d.number();
    if (!p || !(*p >= 0 && *p <= 1)) w.at("dropout").bad("expected a probability in [0, 1]");
    // (dropout is a training regularizer: encoding for inference ignores it, as HF does with 0)
  }
  m->unk_token = get_opt_string(w, v, "unk_token");
  m->prefix = get_opt_string(w, v, "continuing_subword_prefix");
  m->suffix = get_opt_string(w, v, "end_of_word_suffix");
  m->fuse_unk = get_bool(w, v, "fuse_unk", false);
  m->byte_fallback = get_bool(w, v, "byte_fallback", false);
  m->ignore_merges = get_bool(w, v, "ignore_merges", false);
  read_vocab(w, v, *m);
  if (m->unk_token) {
    const auto it = m->vocab.find(std::string_view(*m->unk_token));
    if (it == m->vocab.end())
      w.at("unk_token").bad("'" + *m->unk_token + "' is not in the vocabulary");
    m->unk_id = it->second;
  }
  m->byte_ids = byte_tokens(m->vocab);
  const Where wm = w.at("merges");
  const JsonValue* merges = v.find("merges");
  if (!merges) wm.bad("missing");
  need_array(wm, *merges);
  if (merges->arr.size() >= size_t(1) << 31) wm.bad("too many merges");
  m->merges.reserve(merges->arr.size());
  const size_t plen = m->prefix ? m->prefix->size() : 0;
  auto id = [&](const Where& wk, const std::string& t) {
    const auto it = m->vocab.find(std::string_view(t));
    if (it == m->vocab.end()) wk.bad("'" + t + "' is not in the vocabulary");
    return it->second;
  };
  for (size_t k = 0; k < merges->arr.size(); ++k) {
    const Where wk = wm.index(k);
    const JsonValue& e = merges->arr[k];
    std::string a, b;
    if (e.kind == JsonValue::String) {
      const size_t sp = e.s.find(' ');
      if (sp == std::string::npos) wk.bad("expected \"left right\", got " + io::json_quoted(e.s));
      a = e.s.substr(0, sp);
      b = e.s.substr(sp + 1);
    } else if (e.kind == JsonValue::Array && e.arr.size() == 2 &&
               e.arr[0].kind == JsonValue::String && e.arr[1].kind == JsonValue::String) {
      a = e.arr[0].s;
      b = e.arr[1].s;
    } else {
      wk.bad(std::string("expected \"left right\" or [left, right], got ") + e.kind_name());
    }
    if (b.compare(0, plen, m->prefix ? *m->prefix : std::string()) != 0)
      wk.bad("the right part '" + b + "' does not start with the continuing_subword_prefix");
    const int64_t ia = id(wk, a), ib = id(wk, b), merged = id(wk, a + b.substr(plen));
    m->merges.put(Bpe::key(ia, ib), int32_t(k), int32_t(merged));
  }
  return m;
}

std::unique_ptr<Model> load_unigram(const Where& w, const JsonValue& v) {
  auto m = std::make_unique<Unigram>();
  m->byte_fallback = get_bool(w, v, "byte_fallback", false);
  const Where wv = w.at("vocab");
  const JsonValue* vocab = v.find("vocab");
  if (!vocab) wv.bad("missing");
  need_array(wv, *vocab);
  if (vocab->arr.empty()) wv.bad("empty");
  if (vocab->arr.size() >= size_t(1) << 31) wv.bad("too many pieces");
  m->min_score = 0;
  for (size_t k = 0; k < vocab->arr.size(); ++k) {
    const Where wk = wv.index(k);
    const JsonValue& e = vocab->arr[k];
    if (e.kind != JsonValue::Array || e.arr.size() != 2 || e.arr[0].kind != JsonValue::String)
      wk.bad("expected [piece, score]");
    const std::optional<double> score = e.arr[1].kind == JsonValue::Number
                                            ? std::optional<double>(serde_f64(e.arr[1].s))
                                            : std::nullopt;
    if (!score || !std::isfinite(*score)) wk.bad("expected [piece, score] with a finite score");
    const std::string& piece = e.arr[0].s;
    if (!m->vocab.emplace(piece, int64_t(k)).second)
      wk.bad("the piece '" + piece + "' is listed twice");
    m->by_id.push_back(piece);
    m->scores.push_back(*score);
    m->min_score = k == 0 ? *score : std::min(m->min_score, *score);
    m->max_token_bytes = std::max(m->max_token_bytes, piece.size());
  }
  if (member(v, "unk_id").kind != JsonValue::Null)
    m->unk_id = get_int(w, v, "unk_id", std::nullopt, 0, int64_t(m->by_id.size()) - 1);
  m->byte_ids = byte_tokens(m->vocab);
  return m;
}

}  // namespace

void read_vocab(const Where& w, const JsonValue& v, Model& m) {
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
  }
}

std::unique_ptr<Model> load_model(const Where& where, const JsonValue& v) {
  const std::string type = type_of(where, v);
  const Where w = where.typed(type);
  std::unique_ptr<Model> m;
  if (type == "WordPiece") m = load_wordpiece(w, v);
  else if (type == "BPE") m = load_bpe(w, v);
  else if (type == "Unigram") m = load_unigram(w, v);
  else unsupported(where, type, {"WordPiece", "BPE", "Unigram"});
  m->file = w.file;
  return m;
}

}  // namespace oneflow::text

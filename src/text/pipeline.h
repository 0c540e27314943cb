// pipeline.h (internal): NOTE [Tokenizers]. The parts of a `tokenizer.json` pipeline, each read
// and checked whole from its JSON by a loader that names the component and field in its errors:
// normalizers (normalizers.cpp), pre-tokenizers (pre_tokenizers.cpp), models (models.cpp),
// post-processors and decoders (decoders.cpp). tokenizer.cpp strings them together.
//
// Text travels as a Piece: characters, each with the span of input code points it came from, as
// HF's NormalizedString keeps an alignment per byte. Every transformation follows HF's rule for
// those spans (NOTE [Tokenizer spans] in normalizers.cpp), so offsets come out as HF's.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/json.h"
#include "oneflow/error.h"
#include "oneflow/text.h"

namespace oneflow::text {

using io::JsonValue;
using Span = std::pair<int64_t, int64_t>;

// Text on its way through the pipeline: characters, each with the input span it came from, and
// where in the input the piece starts (HF's offsets_original().0, which Metaspace's "first"
// prepend scheme reads).
struct Piece {
  std::u32string chars;
  std::vector<Span> spans;
  int64_t origin = 0;
  void push(char32_t c, Span s) {
    chars.push_back(c);
    spans.push_back(s);
  }
  size_t size() const { return chars.size(); }
  bool empty() const { return chars.empty(); }
  // characters [b, e) as a piece of their own
  Piece sub(size_t b, size_t e) const {
    Piece p;
    p.chars.assign(chars, b, e - b);
    p.spans.assign(spans.begin() + long(b), spans.begin() + long(e));
    p.origin = b < spans.size() ? spans[b].first : origin;
    return p;
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
  // the component the path is inside and its type ("pre_tokenizer", "Split"), once known
  std::string component, type;
  [[noreturn]] void bad(const std::string& what) const {
    if (type.empty()) fail("[tokenizer] {}: {}: {}", file, path, what);
    fail("[tokenizer] {}: {}: {} (in {}, a {})", file, path, what, component, type);
  }
  Where at(std::string_view key) const {
    return {file, path.empty() ? std::string(key) : path + "." + std::string(key), component, type};
  }
  // (an element of a list is a component of its own)
  Where index(size_t k) const { return {file, path + "[" + std::to_string(k) + "]"}; }
  // this path as the component of that type
  Where typed(const std::string& t) const { return {file, path, path, t}; }
};

// The JSON field readers: a missing or null field takes its default (or is refused as missing
// where there is none); a field of the wrong kind is refused naming it.
const JsonValue& need_object(const Where& w, const JsonValue& v);
const JsonValue& need_array(const Where& w, const JsonValue& v);
bool get_bool(const Where& w, const JsonValue& o, std::string_view key, bool dflt);
std::optional<bool> get_opt_bool(const Where& w, const JsonValue& o, std::string_view key);
std::string get_string(const Where& w, const JsonValue& o, std::string_view key,
                       std::optional<std::string> dflt = std::nullopt);
// a string of exactly one character
char32_t get_char(const Where& w, const JsonValue& o, std::string_view key, char32_t dflt);
int64_t get_int(const Where& w, const JsonValue& o, std::string_view key,
                std::optional<int64_t> dflt = std::nullopt, int64_t lo = 0,
                int64_t hi = int64_t(1) << 40);
// the object's "type"
std::string type_of(const Where& w, const JsonValue& o);
// the member, or a null value
const JsonValue& member(const JsonValue& o, std::string_view key);
// "'X' is not supported (built: A, B, ...)" for an unknown type
[[noreturn]] void unsupported(const Where& w, const std::string& type,
                              std::initializer_list<const char*> built);

// ---------------------------------------------------------------- patterns

// A pattern of Split, Replace (normalizer and decoder): {"String": s} (the literal text) or
// {"Regex": r} (Oniguruma, as HF's; text/regex.cpp).
class Pattern {
 public:
  Pattern(const Where& w, const JsonValue& v);
  // a regular expression of the library's own (the pre-tokenizers' built-in patterns)
  static Pattern regex(const Where& w, const std::string& re);
  ~Pattern();
  Pattern(Pattern&&) noexcept;
  // The pieces of `s`: [start, end) in characters, true where the pattern matched, covering `s`
  // (HF's Pattern::find_matches; one unmatched (0, 0) for empty text).
  struct Run {
    size_t start, end;
    bool match;
  };
  std::vector<Run> find(std::u32string_view s) const;

 private:
  Pattern();
  void compile(const Where& w, const std::string& kind, const std::string& s);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Matches of a character predicate, each matching character one match (HF's Fn(char) pattern).
std::vector<Pattern::Run> find_chars(std::u32string_view s, const std::function<bool(char32_t)>& f);

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
SplitBehavior parse_behavior(const Where& w, const std::string& s);
// HF's NormalizedString::split: the runs merged as `b` says, empty ones dropped.
void split_piece(const Piece& p, std::vector<Pattern::Run> runs, SplitBehavior b,
                 std::vector<Piece>& out);
// HF's NormalizedString::replace of every match by `content`.
void replace_matches(Piece& p, const std::vector<Pattern::Run>& runs, std::u32string_view content);

// NOTE [Tokenizer spans]: rewrites `p` by HF's (character, change) list.
void apply_changes(Piece& p, const std::vector<std::pair<char32_t, int>>& dest);

// ---------------------------------------------------------------- the components

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void run(Piece& p) const = 0;
};
std::unique_ptr<Normalizer> load_normalizer(const Where& w, const JsonValue& v);

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  // refines the splits (the words so far) in place
  virtual void split(std::vector<Piece>& words) const = 0;
};
std::unique_ptr<PreTokenizer> load_pre_tokenizer(const Where& w, const JsonValue& v);

struct Model {
  Vocab vocab;
  std::vector<std::string> by_id;
  std::string file;  // for the errors of tokenize
  virtual ~Model() = default;
  // appends the tokens of one word
  virtual void tokenize(const Piece& word, std::vector<Tok>& out) const = 0;
};
std::unique_ptr<Model> load_model(const Where& w, const JsonValue& v);
// Reads a {token: id} vocabulary whose ids are exactly 0 .. size - 1.
void read_vocab(const Where& w, const JsonValue& v, Model& m);

// One sequence's encoding (or the special tokens a processor adds) on its way to the result.
struct PostProcessor {
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<Encoding>& encodings, bool add_special) const = 0;
  // the (token, id) pairs it adds, each checked against the vocabulary
  virtual void specials(std::vector<std::pair<std::string, int64_t>>& out) const = 0;
  // how many tokens it adds to one sequence or a pair (what truncation leaves room for)
  virtual size_t added_tokens(bool pair) const = 0;
};
std::unique_ptr<PostProcessor> load_post_processor(const Where& w, const JsonValue& v);

struct Decoder {
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
std::unique_ptr<Decoder> load_decoder(const Where& w, const JsonValue& v);

// ---------------------------------------------------------------- encodings (batch.cpp)

// The most a row may hold, its overflowing windows (nested, as HF nests them) included, counting
// one per token and one per encoding: truncation, merging and padding are refused, before they
// allocate, where they would pass it (NOTE [Tokenizer row bound] in batch.cpp).
constexpr size_t kMaxRowCells = size_t(1) << 20;
// HF's Encoding::merge_with: `pair` appended, the overflowing windows of both crossed.
void merge_into(Encoding& self, const Encoding& pair);
// HF's Encoding::truncate: the first window kept, the others (stride tokens overlapping) as
// overflowing.
void truncate(Encoding& e, size_t max_len, size_t stride, Side direction);
// HF's truncate_encodings for one sequence or a pair, to max_length tokens in all.
void truncate_pair(Encoding& a, Encoding* b, const Truncation& t, size_t max_length);
// HF's Encoding::pad (the overflowing windows too).
void pad(Encoding& e, size_t length, int64_t pad_id, int64_t pad_type_id,
         const std::string& pad_token, Side direction);
// The rows as int64 [rows, seq] tensors (refused unless they are all one length).
Batch to_batch(std::vector<Encoding> encs, const std::optional<Padding>& padding);

// GPT-2's byte-to-character map of the byte-level components (bytes 33-126, 161-172 and 174-255
// as themselves, the others as U+0100 on), and its inverse (-1 for a character no byte maps to).
char32_t byte_char(uint8_t b);
int char_byte(char32_t c);

}  // namespace oneflow::text

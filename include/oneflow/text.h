// text.h: Hugging Face tokenizers from their `tokenizer.json` (NOTE [Tokenizers], docs/TEXT.md):
// text in, token ids out, and back, id for id what the `tokenizers` library gives.
//
//   auto tok = of::text::Tokenizer::from_file("tokenizer.json");
//   of::text::Encoding e = tok.encode("Hello, world!");   // e.ids: 101 7592 1010 2088 999 102
//   std::string s = tok.decode(e.ids, /*skip_special_tokens=*/true);   // "hello, world!"
//
// Every model (WordPiece, BPE, Unigram), normalizer, pre-tokenizer, post-processor and decoder of
// HF's format is built (docs/TEXT.md lists them); a file naming anything else is refused with an
// error naming it.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oneflow/tensor.h"

namespace oneflow::text {

// One encoded input (or pair): per token its id, its text, its type id (0 for the first
// sequence, 1 for the second, as the post-processor's template says), 1 in the attention mask,
// 1 in the special-tokens mask for tokens the post-processor added (not for special tokens the
// text itself holds, as HF), and
// its offsets: [start, end) in Unicode code points of the input it came from (0, 0 for a token the
// post-processor added), as HF's Python `Encoding.offsets` gives them.
struct Encoding {
  std::vector<int64_t> ids, type_ids, attention_mask, special_tokens_mask;
  std::vector<std::string> tokens;
  std::vector<std::pair<int64_t, int64_t>> offsets;
  // With truncation: the windows cut off (each `stride` tokens overlapping the one before), each
  // post-processed and padded as the kept part is (HF's Encoding.overflowing).
  std::vector<Encoding> overflowing;
  size_t size() const { return ids.size(); }
};

enum class Side { kRight, kLeft };

// HF's TruncationParams: at most max_length tokens, special tokens included.
struct Truncation {
  int64_t max_length = 512;
  // longest first: shorten the longer of a pair first; only first / only second: that one alone
  enum Strategy { kLongestFirst, kOnlyFirst, kOnlySecond } strategy = kLongestFirst;
  int64_t stride = 0;             // tokens each overflowing window repeats from the one before
  Side direction = Side::kRight;  // which end is cut
};

// HF's PaddingParams: every row padded to the batch's longest (length unset) or to `length`, then
// up to a multiple of pad_to_multiple_of (0: none).
struct Padding {
  std::optional<int64_t> length;
  Side direction = Side::kRight;
  int64_t pad_to_multiple_of = 0;
  std::optional<int64_t> pad_id;  // unset: the file's padding's, else refused
  int64_t pad_type_id = 0;
  std::string pad_token;  // empty: the pad id's token
};

struct EncodeOptions {
  bool add_special_tokens = true;
  std::optional<Truncation> truncation;
  std::optional<Padding> padding;
  int threads = 1;  // encode_batch: the inputs split over this many threads
};

// A batch ready for a model: int64 [batch, seq] tensors, and each row's Encoding.
struct Batch {
  Tensor input_ids, attention_mask, token_type_ids;
  std::vector<Encoding> encodings;
};

class Tokenizer {
 public:
  // Reads and validates a whole `tokenizer.json` (an of::Error naming the file, the component and
  // the field for anything malformed or not supported).
  static Tokenizer from_file(const std::string& path);
  // The same from the file's text; `name` names it in errors.
  static Tokenizer from_string(std::string_view json, std::string name = "tokenizer.json");

  // The text as UTF-8 (invalid bytes read as U+FFFD, as HF reads them); add_special_tokens:
  // run the post-processor (BERT's [CLS] ... [SEP]).
  Encoding encode(std::string_view text, bool add_special_tokens = true) const;
  Encoding encode(std::string_view first, std::string_view second,
                  bool add_special_tokens = true) const;
  // (a string literal as the second argument is the pair's second text, not the bool)
  Encoding encode(std::string_view first, const char* second,
                  bool add_special_tokens = true) const {
    return encode(first, std::string_view(second), add_special_tokens);
  }
  // One input with truncation and padding as `options` say (HF's encode with the tokenizer's
  // truncation and padding set so).
  Encoding encode(std::string_view text, const EncodeOptions& options) const;
  Encoding encode(std::string_view first, std::string_view second,
                  const EncodeOptions& options) const;
  // Many inputs (or pairs), padded together: HF's encode_batch. Refused when the rows cannot make
  // a rectangle (a fixed padding length shorter than a row), naming the row.
  Batch encode_batch(const std::vector<std::string>& texts,
                     const EncodeOptions& options = {}) const;
  Batch encode_batch(const std::vector<std::pair<std::string, std::string>>& pairs,
                     const EncodeOptions& options = {}) const;
  // (a braced list of strings is a list of texts, not one pair)
  Batch encode_batch(std::initializer_list<std::string> texts,
                     const EncodeOptions& options = {}) const {
    return encode_batch(std::vector<std::string>(texts), options);
  }
  // The same rows without the tensors, as HF's encode_batch returns them: each input's Encoding
  // (padded together where options say; without padding the rows keep their own lengths).
  std::vector<Encoding> encode_all(const std::vector<std::string>& texts,
                                   const EncodeOptions& options = {}) const;
  std::vector<Encoding> encode_all(const std::vector<std::pair<std::string, std::string>>& pairs,
                                   const EncodeOptions& options = {}) const;
  // The file's own "truncation" and "padding" settings (unset where the file has null).
  EncodeOptions file_options() const;

  // The text of `ids` (unknown ids are skipped, as HF skips them).
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;

  std::optional<int64_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int64_t id) const;
  // Ids in the model's vocabulary and the added tokens (HF's get_vocab_size(with_added_tokens)).
  int64_t vocab_size(bool with_added_tokens = true) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Text for a growing list of ids, as generation makes them (HF's DecodeStream): step(id) gives the
// text the new id completes, or nothing while the text so far ends inside a character (a
// byte-level or byte-fallback token of part of one waits for the rest), so the pieces joined are
// the decoded whole. The tokenizer must outlive the stream.
class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tok_(&tokenizer), skip_(skip_special_tokens) {}
  std::string step(int64_t id);

 private:
  const Tokenizer* tok_;
  bool skip_;
  std::vector<int64_t> ids_;
  std::string prefix_;
  size_t prefix_index_ = 0;
};

// An on_token callback for of::generation::generate that streams text: each new id through a
// DecodeStream, and the text it completes (nothing while a character is incomplete) to
// `on_text`, whose false stops the generation. The tokenizer must outlive the callback.
std::function<bool(int64_t)> stream_text(const Tokenizer& tokenizer,
                                         std::function<bool(const std::string&)> on_text,
                                         bool skip_special_tokens = true);

}  // namespace oneflow::text

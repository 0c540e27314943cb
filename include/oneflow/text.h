// text.h: Hugging Face tokenizers from their `tokenizer.json` (NOTE [Tokenizers], docs/TEXT.md):
// text in, token ids out, and back, id for id what the `tokenizers` library gives.
//
//   auto tok = of::text::Tokenizer::from_file("tokenizer.json");
//   of::text::Encoding e = tok.encode("Hello, world!");   // e.ids: 101 7592 1010 2088 999 102
//   std::string s = tok.decode(e.ids, /*skip_special_tokens=*/true);   // "hello, world!"
//
// Built so far: the WordPiece pipeline of the BERT family (BertNormalizer, BertPreTokenizer,
// WordPiece, TemplateProcessing and BertProcessing, the WordPiece decoder) and added tokens with
// every flag. A file naming any other component is refused with an error naming it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  size_t size() const { return ids.size(); }
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

}  // namespace oneflow::text

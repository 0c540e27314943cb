// libFuzzer target: tokenizer.json files and the text they tokenize (of::text::Tokenizer). The
// input is a tokenizer.json, then a NUL byte, then texts separated by NUL bytes (no NUL: the
// whole input is the file). A file loads or raises of::Error; a loaded tokenizer encodes every
// text alone and in pairs (with and without special tokens), decodes the ids (skipping special
// tokens and not) and looks every token up again, streams them through a DecodeStream, and
// encodes the texts as a batch with the file's truncation and padding and with ones drawn from
// the input (lengths, stride, strategy, sides, multiples). Anything but of::Error, an id, offset
// or mask out of place, or a batch whose tensors disagree with its rows, aborts.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <oneflow/error.h>
#include <oneflow/text.h>

#include "fuzz_file.h"

namespace {
void check_encoding(const oneflow::text::Encoding& e, const oneflow::text::Tokenizer& t,
                    size_t text_chars) {
  const size_t n = e.ids.size();
  if (e.type_ids.size() != n || e.attention_mask.size() != n || e.special_tokens_mask.size() != n ||
      e.tokens.size() != n || e.offsets.size() != n) {
    std::fprintf(stderr, "fuzz_tokenizer: an encoding's fields differ in length\n");
    std::abort();
  }
  for (size_t i = 0; i < n; ++i) {
    if (e.ids[i] < 0 || !t.id_to_token(e.ids[i]) || e.offsets[i].first < 0 ||
        e.offsets[i].first > e.offsets[i].second || size_t(e.offsets[i].second) > text_chars) {
      std::fprintf(
          stderr, "fuzz_tokenizer: token %zu has id %lld or offsets %lld:%lld out of place\n", i,
          (long long)e.ids[i], (long long)e.offsets[i].first, (long long)e.offsets[i].second);
      std::abort();
    }
  }
}
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", what);
  std::abort();
}

// A batch's tensors are its rows, padded to one length.
void check_batch(const oneflow::text::Batch& b, size_t rows) {
  if (b.encodings.size() != rows) fail("a batch has a different number of rows");
  const int64_t seq = rows ? int64_t(b.encodings[0].size()) : 0;
  for (const oneflow::Tensor* t : {&b.input_ids, &b.attention_mask, &b.token_type_ids}) {
    if (t->dim() != 2 || t->size(0) != int64_t(rows) || t->size(1) != seq)
      fail("a batch's tensor has the wrong shape");
  }
  const oneflow::Tensor ids = b.input_ids.contiguous(), mask = b.attention_mask.contiguous();
  const int64_t* pi = ids.data_ptr<int64_t>();
  const int64_t* pm = mask.data_ptr<int64_t>();
  for (size_t r = 0; r < rows; ++r) {
    const oneflow::text::Encoding& e = b.encodings[r];
    if (int64_t(e.size()) != seq) fail("a batch's rows differ in length");
    for (size_t i = 0; i < e.size(); ++i)
      if (pi[r * size_t(seq) + i] != e.ids[i] || pm[r * size_t(seq) + i] != e.attention_mask[i])
        fail("a batch's tensors differ from its rows");
  }
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  offuzz::cap_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace tx = oneflow::text;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view json = all.substr(0, nul);
  std::vector<std::string_view> texts;
  if (nul != std::string_view::npos) {
    std::string_view rest = all.substr(nul + 1);
    for (size_t k = 0; k < 16; ++k) {
      const size_t at = rest.find('\0');
      texts.push_back(rest.substr(0, at));
      if (at == std::string_view::npos) break;
      rest = rest.substr(at + 1);
    }
  }
  try {
    const tx::Tokenizer t = tx::Tokenizer::from_string(json, "fuzz.json");
    for (size_t k = 0; k < texts.size(); ++k) {
      // the input's code points (invalid bytes count as one U+FFFD each, at most the bytes)
      const size_t chars = texts[k].size();
      for (bool special : {true, false}) {
        const tx::Encoding e = t.encode(texts[k], special);
        check_encoding(e, t, chars);
        (void)t.decode(e.ids, false);
        (void)t.decode(e.ids, true);
        for (const std::string& tok : e.tokens) (void)t.token_to_id(tok);
        if (k + 1 < texts.size()) {
          const tx::Encoding p = t.encode(texts[k], texts[k + 1], special);
          check_encoding(p, t, std::max(chars, texts[k + 1].size()));
        }
      }
    }
    // ids the vocabulary does not have are skipped by decode
    (void)t.decode({-1, 0, 1, t.vocab_size(), int64_t(1) << 40}, false);
    // the streaming decoder over each text's ids, then over ids of every kind
    for (const std::string_view text : texts) {
      tx::DecodeStream stream(t, text.size() % 2 == 0);
      for (const int64_t id : t.encode(text, true).ids) (void)stream.step(id);
    }
    {
      tx::DecodeStream stream(t);
      for (const int64_t id : {int64_t(0), int64_t(-1), t.vocab_size() - 1, t.vocab_size()})
        (void)stream.step(id);
    }
    // batches: the file's own truncation and padding, then options drawn from the input
    std::vector<std::string> rows(texts.begin(), texts.end());
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t k = 0; k + 1 < rows.size(); k += 2) pairs.emplace_back(rows[k], rows[k + 1]);
    auto run_batches = [&](const tx::EncodeOptions& o) {
      try {
        check_batch(t.encode_batch(rows, o), rows.size());
        for (const tx::Encoding& e : t.encode_all(rows, o))
          for (const tx::Encoding& w : e.overflowing)
            if (w.ids.size() != w.attention_mask.size()) fail("an overflowing window is ragged");
        check_batch(t.encode_batch(pairs, o), pairs.size());
      } catch (const oneflow::Error&) {}
    };
    run_batches(t.file_options());
    tx::EncodeOptions o;
    o.threads = 1 + int(size % 2);
    o.add_special_tokens = (size / 2) % 2 == 0;
    tx::Truncation tr;
    tr.max_length = int64_t(data[size / 3] % 24);
    tr.stride = int64_t(data[size / 5] % 6);
    tr.strategy = tx::Truncation::Strategy(data[size / 7] % 3);
    tr.direction = data[size / 11] % 2 ? tx::Side::kLeft : tx::Side::kRight;
    o.truncation = tr;
    tx::Padding pad;
    if (data[size / 13] % 2) pad.length = int64_t(data[size / 17] % 32);
    pad.direction = data[size / 19] % 2 ? tx::Side::kLeft : tx::Side::kRight;
    pad.pad_to_multiple_of = int64_t(data[size / 23] % 4);
    pad.pad_id = int64_t(data[size / 29] % 4);
    o.padding = pad;
    run_batches(o);
    o.truncation.reset();
    run_batches(o);
  } catch (const oneflow::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_tokenizer: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

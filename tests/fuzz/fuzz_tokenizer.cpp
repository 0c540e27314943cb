// libFuzzer target: tokenizer.json files and the text they tokenize (of::text::Tokenizer). The
// input is a tokenizer.json, then a NUL byte, then texts separated by NUL bytes (no NUL: the
// whole input is the file). A file loads or raises of::Error; a loaded tokenizer encodes every
// text alone and in pairs (with and without special tokens), decodes the ids (skipping special
// tokens and not) and looks every token up again. Anything but of::Error, or an id, offset or
// mask out of place, aborts.
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
  } catch (const oneflow::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_tokenizer: non-of::Error exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

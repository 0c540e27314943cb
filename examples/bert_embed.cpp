// bert_embed: sentence embeddings from a Hugging Face BERT checkpoint, served by one traced
// graph with symbolic batch and sequence length.
//
//   build/examples/bert_embed CHECKPOINT_DIR SENTENCES.txt [SENTENCES.txt ...]
//   build/examples/bert_embed --ids CHECKPOINT_DIR TOKENS.txt [TOKENS.txt ...]
//
// CHECKPOINT_DIR holds config.json, model.safetensors and tokenizer.json as the Hugging Face
// tools write them (BertModel names, with or without the "bert." prefix of the task models; F32,
// F16 or BF16 entries). Each line of a sentence file is one sentence of text, tokenized with the
// checkpoint's tokenizer.json (of::text::Tokenizer; cut to the model's positions); with --ids,
// each line is space-separated token ids instead ([CLS] ... [SEP], no tokenizer needed). For each
// file the sentences run as one padded batch; each sentence's mean-pooled embedding is printed as
// "emb FILE LINE v0 v1 ..." (sentence-transformers' embedding, before its normalization).
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "bert.h"
#include "oneflow/text.h"

int main(int argc, char** argv) {
  const bool ids_mode = argc > 1 && std::string(argv[1]) == "--ids";
  const int first = ids_mode ? 2 : 1;
  if (argc < first + 2) {
    std::fprintf(stderr,
                 "usage: %s CHECKPOINT_DIR SENTENCES.txt [SENTENCES.txt ...]\n"
                 "       %s --ids CHECKPOINT_DIR TOKENS.txt [TOKENS.txt ...]\n",
                 argv[0], argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[first];
    const bert::Config cfg = bert::read_config(dir + "/config.json");
    bert::Bert model(cfg);
    bert::load_weights(model, dir + "/model.safetensors");
    model->eval();
    of::NoGradGuard ng;
    of::jit::Dim batch("batch", 1, 64), seq("seq", 1, cfg.max_position_embeddings);
    auto embed = of::jit::trace(
        [&](const of::Tensor& ids, const of::Tensor& mask) {
          return bert::mean_pool(model->forward(ids, mask), mask);
        },
        of::jit::TraceOptions()
            .dynamic(0, {{0, batch}, {1, seq}})
            .dynamic(1, {{0, batch}, {1, seq}}));
    std::printf("bert: %lld layers, hidden %lld, %lld heads\n", (long long)cfg.num_hidden_layers,
                (long long)cfg.hidden_size, (long long)cfg.num_attention_heads);
    std::optional<of::text::Tokenizer> tok;
    if (!ids_mode) tok = of::text::Tokenizer::from_file(dir + "/tokenizer.json");
    for (int f = first + 1; f < argc; ++f) {
      std::ifstream in(argv[f], std::ios::binary);
      if (!in) throw of::Error(std::string("[bert_embed] cannot open ") + argv[f]);
      std::vector<std::vector<int64_t>> sentences;
      std::string line;
      while (std::getline(in, line)) {
        if (tok) {
          if (line.empty()) continue;
          of::text::EncodeOptions o;
          o.truncation = of::text::Truncation{cfg.max_position_embeddings};
          sentences.push_back(tok->encode(line, o).ids);
          continue;
        }
        std::istringstream ls(line);
        std::vector<int64_t> ids;
        for (int64_t id; ls >> id;) ids.push_back(id);
        if (!ids.empty()) sentences.push_back(std::move(ids));
      }
      if (sentences.empty()) continue;
      size_t len = 0;
      for (const auto& s : sentences) len = std::max(len, s.size());
      const int64_t b = int64_t(sentences.size()), s = int64_t(len);
      std::vector<int64_t> ids(size_t(b * s), 0);
      std::vector<float> mask(size_t(b * s), 0.f);
      for (int64_t i = 0; i < b; ++i)
        for (size_t j = 0; j < sentences[size_t(i)].size(); ++j) {
          ids[size_t(i * s) + j] = sentences[size_t(i)][j];
          mask[size_t(i * s) + j] = 1.f;
        }
      const of::Tensor e = embed(of::tensor(ids, {b, s}), of::tensor(mask, {b, s}));
      const std::vector<float> v = e.contiguous().to_vector<float>();
      for (int64_t i = 0; i < b; ++i) {
        std::printf("emb %s %lld", argv[f], (long long)i);
        for (int64_t k = 0; k < cfg.hidden_size; ++k)
          std::printf(" %.9g", double(v[size_t(i * cfg.hidden_size + k)]));
        std::printf("\n");
      }
    }
    const of::jit::TraceStats st = embed.stats();
    std::printf(
        "trace: %zu recording, %zu probe recordings, %zu shapes compiled without "
        "recording, %zu replays\n",
        st.recordings, st.probes, st.instantiations, st.replays);
  } catch (const of::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

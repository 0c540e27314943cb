// char_gpt: a small character-level GPT (pre-norm causal Transformer blocks) trained on the
// fortunes text from Debian's `fortunes` package; prints the loss falling and a sample.
// Usage: char_gpt [steps] [fortune_dir]
#include <oneflow/oneflow.h>
#include <oneflow/text.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

namespace nn = of::nn;

struct GptImpl : nn::Module {
  GptImpl(int64_t vocab, int64_t block, int64_t d_model, int64_t heads, int64_t layers)
      : block_size(block) {
    tok = register_module("tok", nn::Embedding(vocab, d_model));
    pos = register_module("pos", nn::Embedding(block, d_model));
    blocks = register_module("blocks", nn::ModuleList());
    for (int64_t i = 0; i < layers; ++i)
      blocks->push_back(
          nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(d_model, heads)
                                          .dim_feedforward(4 * d_model)
                                          .dropout(0.1)
                                          .activation(of::kGELU)
                                          .norm_first(true)));
    norm = register_module("norm", nn::LayerNorm(std::vector<int64_t>{d_model}));
    head = register_module("head", nn::Linear(d_model, vocab));
    mask = register_buffer(
        "mask", of::zeros({block, block})
                    .masked_fill(of::ones({block, block}, of::kBool).triu(1), -INFINITY));
  }
  // ids [L, N] (sequence first) -> logits [L, N, vocab]
  of::Tensor forward(const of::Tensor& ids) {
    const int64_t L = ids.size(0);
    of::Tensor h = tok(ids) + pos(of::arange(L, of::kInt64)).unsqueeze(1);
    of::Tensor m = mask.narrow(0, 0, L).narrow(1, 0, L);
    for (size_t i = 0; i < blocks->size(); ++i)
      h = blocks->ptr<nn::TransformerEncoderLayerImpl>(i)->forward(h, m);
    return head(norm(h));
  }
  int64_t block_size;
  nn::Embedding tok{nullptr}, pos{nullptr};
  nn::ModuleList blocks{nullptr};
  nn::LayerNorm norm{nullptr};
  nn::Linear head{nullptr};
  of::Tensor mask;
};
OF_MODULE(Gpt);

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 200;
  const std::string dir = argc > 2 ? argv[2] : "/usr/share/games/fortunes";
  const int64_t block = 64, batch = 32, d_model = 128, heads = 4, layers = 2;
  of::manual_seed(0);

  // every fortune file (not the .dat indexes or the .u8 links)
  std::string text;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension().empty())
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) text += of::data::read_text_file(f.string());
  auto ds = std::make_shared<of::data::CharDataset>(text, block);
  const int64_t vocab = ds->vocab().size();
  std::printf("fortunes: %zu files, %zu characters, vocabulary %lld\n", files.size(), text.size(),
              (long long)vocab);

  Gpt gpt(vocab, block, d_model, heads, layers);
  int64_t nparams = 0;
  for (auto& p : gpt->parameters()) nparams += p.numel();
  std::printf("GPT: %lld layers, d_model %lld, %lld heads, block %lld, %lld parameters\n",
              (long long)layers, (long long)d_model, (long long)heads, (long long)block,
              (long long)nparams);
  of::optim::AdamW opt(gpt->parameters(), of::optim::AdamWOptions(3e-3).weight_decay(0.01));
  of::optim::CosineAnnealingLR sched(opt, steps, 3e-4);
  of::data::DataLoader loader(ds, of::data::DataLoaderOptions(batch).shuffle(true).seed(2));

  auto t0 = std::chrono::steady_clock::now();
  int step = 0;
  double avg = 0;
  while (step < steps) {
    for (auto& b : loader) {
      if (step >= steps) break;
      of::Tensor x = b.data.t().contiguous(), y = b.target.t().contiguous();  // [L, N]
      opt.zero_grad();
      of::Tensor logits = gpt(x);
      of::Tensor loss = of::cross_entropy(logits.reshape({-1, vocab}), y.reshape({-1}));
      loss.backward();
      of::nn::utils::clip_grad_norm_(gpt->parameters(), 1.0);
      opt.step();
      sched.step();
      avg = step == 0 ? loss.item<float>() : 0.9 * avg + 0.1 * loss.item<float>();
      if (++step % 25 == 0 || step == 1) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("step %4d  loss %.3f  (%.0f tokens/s)\n", step, avg,
                    double(step) * double(batch * block) / s);
      }
    }
  }

  // generation (NOTE [Traced decoding]): one token per call of a decode step that writes its key
  // and value into a preallocated cache at a position tensor; the step traced once and replayed
  // for every token, beside the same step run eagerly (the same tokens, by construction)
  gpt->eval();
  of::NoGradGuard no_grad;
  namespace gen = of::generation;
  gen::KVCache eager_cache(layers, 1, heads, block, d_model / heads),
      traced_cache(layers, 1, heads, block, d_model / heads);
  auto decode_step = [&](gen::KVCache& cache) {
    return [&](const of::Tensor& token, const of::Tensor& pos) {
      of::Tensor h = gpt->tok(token.view({1, 1})) + gpt->pos(pos.view({1})).unsqueeze(1);
      for (size_t l = 0; l < gpt->blocks->size(); ++l)
        h = gen::cached_encoder_layer(*gpt->blocks->ptr<nn::TransformerEncoderLayerImpl>(l), h,
                                      cache, int64_t(l), pos);
      return gpt->head(gpt->norm(h)).view({-1});
    };
  };
  auto eager_step = decode_step(eager_cache);
  auto traced_step =
      of::jit::trace(decode_step(traced_cache), of::jit::TraceOptions().arena_outputs(true));
  // the vocabulary as a tokenizer (of::text): each character a token, bytes that are not
  // printable ASCII as SentencePiece's <0xXX> tokens, decoded by byte fallback, so the sample
  // streams out as UTF-8 text, a character at a time (NOTE [Tokenizers])
  std::string vocab_json;
  for (int64_t i = 0; i < vocab; ++i) {
    const unsigned char c = static_cast<unsigned char>(ds->vocab().char_at(i));
    char buf[16];
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') std::snprintf(buf, sizeof buf, "%c", c);
    else if (c == '"' || c == '\\') std::snprintf(buf, sizeof buf, "\\%c", c);
    else std::snprintf(buf, sizeof buf, "<0x%02X>", c);
    vocab_json += (i ? ", \"" : "\"") + std::string(buf) + "\": " + std::to_string(i);
  }
  const of::text::Tokenizer tok = of::text::Tokenizer::from_string(
      R"({"model": {"type": "BPE", "byte_fallback": true, "merges": [], "vocab": {)" + vocab_json +
          R"(}}, "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}})",
      "char_gpt vocabulary");
  const std::vector<int64_t> prompt = tok.encode("The ").ids;
  gen::GenerateOptions options;
  options.max_new_tokens = block - int64_t(prompt.size());  // the cache holds `block` positions
  options.temperature = 0.8;
  options.top_k = 20;
  options.seed = 7;
  auto timed = [&](auto& fn, std::vector<int64_t>& out, const std::function<bool(int64_t)>& on) {
    const auto s0 = std::chrono::steady_clock::now();
    out = gen::generate(fn, prompt, options, on);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  };
  std::vector<int64_t> eager_out, traced_out;
  const double te = timed(eager_step, eager_out, {});
  // the traced run streams its text as it is drawn
  std::printf("sample (traced decode step, temperature 0.8, top-k 20):\nThe ");
  std::string streamed;
  const double tr =
      timed(traced_step, traced_out, of::text::stream_text(tok, [&](const std::string& piece) {
              streamed += piece;
              std::fputs(piece.c_str(), stdout);
              std::fflush(stdout);
              return true;
            }));
  std::printf("\n");
  if (streamed != tok.decode(traced_out)) {
    std::printf("the streamed text differs from the decoded tokens\n");
    return 1;
  }
  const double n = double(prompt.size() + traced_out.size());
  std::printf(
      "decode: eager %.0f tokens/s, traced %.0f tokens/s (%.1fx); %zu recording, %zu "
      "replays; traced tokens %s eager's\n",
      n / te, n / tr, te / tr, traced_step.stats().recordings, traced_step.stats().replays,
      traced_out == eager_out ? "equal" : "DIFFER FROM");
  return traced_out == eager_out ? 0 : 1;
}

// char_gpt: a small character-level GPT (pre-norm causal Transformer blocks) trained on the
// fortunes text from Debian's `fortunes` package; prints the loss falling and a sample.
// Usage: char_gpt [steps] [fortune_dir]
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
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

  // sample: temperature 0.8, seeded
  gpt->eval();
  of::NoGradGuard no_grad;
  std::mt19937 rng(7);
  std::string out = "The ";
  for (int i = 0; i < 300; ++i) {
    const std::string ctx =
        out.size() > size_t(block) ? out.substr(out.size() - size_t(block)) : out;
    of::Tensor ids = ds->vocab().encode(ctx).unsqueeze(1);  // [L, 1]
    of::Tensor last = gpt(ids).select(0, ids.size(0) - 1).select(0, 0);
    std::vector<float> p = of::softmax(last / 0.8, 0).to_vector<float>();
    std::discrete_distribution<int> pick(p.begin(), p.end());
    out.push_back(ds->vocab().char_at(pick(rng)));
  }
  std::printf("sample:\n%s\n", out.c_str());
  return 0;
}

// tp_gpt: a character-level GPT (2 pre-norm causal blocks, d_model 128, 4 heads) trained
// tensor parallel, Megatron-style, written only as SBPs of the weights (docs/GLOBAL.md): in
// each block the q, k, v and first MLP projections are column parallel (weights split S(0): each
// rank computes its heads and its slice of the hidden layer), the attention output and second
// MLP projections are row parallel (weights split S(1): partial sums), and attention runs on
// each rank's heads (NOTE [Attention split by heads]). Embeddings, layer norms and the LM head
// are broadcast. Every rank sees the whole batch. The same program on one process trains the
// same model to the same losses:
//   mpirun -np 2 ./build/examples/tp_gpt [steps] [fortune_dir]       (-np 1, 2 or 4: 4 heads)
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

namespace nn = of::nn;
namespace F = of::nn::functional;

struct BlockImpl : nn::Module {
  BlockImpl(int64_t d, int64_t heads) : d_model(d), heads(heads) {
    ln1 = register_module("ln1", nn::LayerNorm(std::vector<int64_t>{d}));
    q = register_module("q", nn::Linear(d, d));
    k = register_module("k", nn::Linear(d, d));
    v = register_module("v", nn::Linear(d, d));
    proj = register_module("proj", nn::Linear(d, d));
    ln2 = register_module("ln2", nn::LayerNorm(std::vector<int64_t>{d}));
    fc1 = register_module("fc1", nn::Linear(d, 4 * d));
    fc2 = register_module("fc2", nn::Linear(4 * d, d));
  }
  // x [B, L, d]
  of::Tensor forward(const of::Tensor& x) {
    const int64_t B = x.size(0), L = x.size(1), E = d_model / heads;
    auto split_heads = [&](const of::Tensor& t) {
      return t.view({B, L, heads, E}).permute({0, 2, 1, 3});
    };
    of::Tensor h = ln1(x);
    of::Tensor a = F::scaled_dot_product_attention(split_heads(q(h)), split_heads(k(h)),
                                                   split_heads(v(h)), {}, 0.0, /*is_causal=*/true);
    of::Tensor y = x + proj(a.permute({0, 2, 1, 3}).reshape({B, L, d_model}));
    return y + fc2(of::gelu(fc1(ln2(y))));
  }
  // Megatron's split: column-parallel weights S(0) (their biases too), row-parallel S(1)
  void shard(const of::Placement& pl) {
    of::NoGradGuard ng;
    for (nn::Linear* l : {&q, &k, &v, &fc1}) {
      (*l)->weight.set_data((*l)->weight.to_global(pl, of::sbp::split(0)));
      (*l)->bias.set_data((*l)->bias.to_global(pl, of::sbp::split(0)));
    }
    for (nn::Linear* l : {&proj, &fc2})
      (*l)->weight.set_data((*l)->weight.to_global(pl, of::sbp::split(1)));
  }
  int64_t d_model, heads;
  nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};
OF_MODULE(Block);

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 100;
  const std::string dir = argc > 2 && *argv[2] ? argv[2] : "/usr/share/games/fortunes";
  const int64_t block = 64, batch = 16, d_model = 128, heads = 4, layers = 2;
  of::distributed::init();
  const int rank = of::distributed::rank(), world = of::distributed::world_size();
  if (heads % world != 0) {
    if (rank == 0)
      std::fprintf(stderr, "%lld heads do not split over %d ranks\n", (long long)heads, world);
    return 2;
  }
  std::string text;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension().empty())
        files.push_back(e.path());
  if (files.empty()) {
    if (rank == 0)
      std::fprintf(stderr, "no fortune files in %s (Debian's fortunes package)\n", dir.c_str());
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) text += of::data::read_text_file(f.string());
  auto ds = std::make_shared<of::data::CharDataset>(text, block);
  const int64_t vocab = ds->vocab().size();

  of::manual_seed(0);  // the same initial model on every rank (and on one process)
  nn::Embedding tok(vocab, d_model), pos(block, d_model);
  std::vector<Block> blocks;
  for (int64_t i = 0; i < layers; ++i) blocks.emplace_back(d_model, heads);
  nn::LayerNorm norm(std::vector<int64_t>{d_model});
  nn::Linear head(d_model, vocab);
  std::vector<of::Tensor> params;
  of::Placement pl = of::Placement::all("cpu");
  auto add = [&](nn::Module& m) {
    m.to_global(pl, of::sbp::broadcast());
    for (auto& p : m.parameters()) params.push_back(p);
  };
  add(*tok);
  add(*pos);
  for (auto& b : blocks) {
    b->to_global(pl, of::sbp::broadcast());
    b->shard(pl);
    for (auto& p : b->parameters()) params.push_back(p);
  }
  add(*norm);
  add(*head);
  int64_t nparams = 0;
  for (auto& p : params) nparams += p.numel();
  if (rank == 0)
    std::printf(
        "tensor-parallel GPT on %d rank(s) (%s): %lld layers, d_model %lld, %lld heads "
        "(%lld per rank), %lld parameters\n",
        world, of::distributed::backend().c_str(), (long long)layers, (long long)d_model,
        (long long)heads, (long long)(heads / world), (long long)nparams);
  of::optim::AdamW opt(params, of::optim::AdamWOptions(3e-3).weight_decay(0.01));
  of::data::DataLoader loader(ds, of::data::DataLoaderOptions(batch).shuffle(true).seed(2));
  of::Tensor positions = of::arange(block, of::kInt64).to_global(pl, of::sbp::broadcast());

  auto t0 = std::chrono::steady_clock::now();
  int step = 0;
  double avg = 0;
  uint64_t comm_per_step = 0;
  while (step < steps) {
    for (auto& b : loader) {
      if (step >= steps) break;
      of::Tensor x = b.data.to_global(pl, of::sbp::broadcast());  // [B, L]
      of::Tensor y = b.target.to_global(pl, of::sbp::broadcast());
      const uint64_t c0 = of::distributed::collectives_issued();
      opt.zero_grad();
      of::Tensor h = tok(x) + pos(positions);
      for (auto& blk : blocks) h = blk(h);
      of::Tensor logits = head(norm(h));
      of::Tensor loss = F::cross_entropy(logits.reshape({-1, vocab}), y.reshape({-1}));
      loss.backward();
      opt.step();
      if (step == 1) comm_per_step = of::distributed::collectives_issued() - c0;
      const double l = loss.item<double>();
      avg = step == 0 ? l : 0.9 * avg + 0.1 * l;
      if (++step % 25 == 0 || step == 1) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rank == 0)
          std::printf("step %4d  loss %.4f  (%.0f tokens/s)\n", step, avg,
                      double(step) * double(batch * block) / s);
      }
    }
  }
  if (rank == 0)
    std::printf(
        "%llu collectives per step (forward: one all-reduce per row-parallel sum the next "
        "layer norm needs; backward: the column-parallel layers' input gradients)\n",
        (unsigned long long)comm_per_step);
  return 0;
}

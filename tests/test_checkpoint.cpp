// test_checkpoint.cpp: module checkpoints from and for other tools: Hugging Face style files
// (16-bit floats, other names) through LoadOptions' rename and strict(false), and of::save's
// files read by PyTorch (safetensors.torch.load_file + load_state_dict) and written back.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness.h"
#include "serialize_util.h"

using th::throws_with;
using namespace ser;
namespace nn = of::nn;

namespace {

// A BERT-like toy whose names differ from the Hugging Face checkpoint's.
struct TinyEncoderImpl : nn::Module {
  TinyEncoderImpl() : nn::Module("TinyEncoder") {
    emb = register_module("emb", nn::Embedding(10, 4));
    norm = register_module("norm", nn::LayerNorm(std::vector<int64_t>{4}));
    layers = register_module("layers", nn::ModuleList(nn::Linear(4, 4), nn::Linear(4, 4)));
    head = register_module("head", nn::Linear(4, 2));
  }
  nn::Embedding emb{nullptr};
  nn::LayerNorm norm{nullptr};
  nn::ModuleList layers{nullptr};
  nn::Linear head{nullptr};
};
OF_MODULE(TinyEncoder);

std::string replace_prefix(const std::string& k, const std::string& from, const std::string& to) {
  return k.starts_with(from) ? to + k.substr(from.size()) : k;
}

// Hugging Face names -> ours; the pooler is dropped.
std::string hf_to_ours(const std::string& k) {
  if (k.starts_with("bert.pooler.")) return "";
  std::string r = replace_prefix(k, "bert.embeddings.word_embeddings.", "emb.");
  r = replace_prefix(r, "bert.embeddings.LayerNorm.gamma", "norm.weight");
  r = replace_prefix(r, "bert.embeddings.LayerNorm.beta", "norm.bias");
  r = replace_prefix(r, "bert.encoder.layer.", "layers.");
  if (size_t at = r.find(".output.dense."); at != std::string::npos) r.replace(at, 14, ".");
  return replace_prefix(r, "classifier.", "head.");
}

}  // namespace

TEST_CASE("checkpoint: Hugging Face style files load with rename and strict(false)") {
  TmpDir dir;
  const std::string path = dir.file("model.safetensors");
  of::manual_seed(5);
  // As Python's safetensors writes them: sorted by alignment then name, 16-bit floats, "pt".
  std::vector<std::pair<std::string, of::Tensor>> hf = {
      {"classifier.weight", of::randn({2, 4}, of::kFloat64)},
      {"bert.encoder.layer.0.output.dense.weight", of::randn({4, 4})},
      {"bert.encoder.layer.1.output.dense.bias", of::randn({4})},
      {"bert.embeddings.LayerNorm.beta", of::randn({4}).to(of::kBFloat16)},
      {"bert.embeddings.LayerNorm.gamma", of::randn({4}).to(of::kBFloat16)},
      {"bert.embeddings.word_embeddings.weight", of::randn({10, 4}).to(of::kFloat16)},
      {"bert.encoder.layer.0.output.dense.bias", of::randn({4}).to(of::kFloat16)},
      {"bert.encoder.layer.1.output.dense.weight", of::randn({4, 4}).to(of::kBFloat16)},
      {"bert.pooler.dense.weight", of::randn({4, 4}).to(of::kFloat16)},
      {"cls.predictions.bias", of::randn({10}).to(of::kFloat16)},
  };
  of::save_tensors(hf, path, {{"format", "pt"}});
  auto hf_value = [&](const std::string& ours) {
    for (auto& [k, v] : hf)
      if (hf_to_ours(k) == ours) return v;
    return of::Tensor();
  };

  for (bool mapped : {true, false}) {
    INFO("mmap " << mapped);
    TinyEncoder model;
    const of::Tensor head_bias = model->head->bias.clone();
    auto opts = of::LoadOptions().mmap(mapped).rename(hf_to_ours);

    // strict (the default): the key sets differ, so nothing is loaded; the error names both.
    const auto before = raw(model->layers->ptr<nn::LinearImpl>(0)->weight);
    CHECK(throws_with(
        [&] { of::load(model, path, opts); },
        {"[load_state_dict]", "missing keys: head.bias", "unexpected keys: cls.predictions.bias"}));
    CHECK(raw(model->layers->ptr<nn::LinearImpl>(0)->weight) == before);

    of::IncompatibleKeys keys = of::load(model, path, opts.strict(false));
    CHECK(keys.missing_keys == std::vector<std::string>{"head.bias"});
    CHECK(keys.unexpected_keys == std::vector<std::string>{"cls.predictions.bias"});
    CHECK(!keys.empty());
    for (const auto& kv : model->state_dict()) {
      INFO(kv.key());
      CHECK(kv.value().dtype() == of::kFloat32);  // converted to the parameter's dtype
      of::Tensor src = hf_value(kv.key());
      if (kv.key() == "head.bias") {
        CHECK(!src.defined());
        CHECK(of::equal(kv.value(), head_bias));  // missing: left as it was
        continue;
      }
      REQUIRE(src.defined());
      CHECK(of::equal(kv.value(), src.to(of::kFloat32)));  // the conversion .to() makes
    }
    CHECK(model->emb->weight.requires_grad());

    // Without the rename nothing matches; strict(false) says so and changes nothing.
    TinyEncoder other;
    const auto other_before = raw(other->emb->weight);
    auto none = of::load(other, path, of::LoadOptions().mmap(mapped).strict(false));
    CHECK(none.missing_keys.size() == other->state_dict().size());
    CHECK(none.unexpected_keys.size() == hf.size());
    CHECK(raw(other->emb->weight) == other_before);
  }

  // A shape or kind mismatch is an error even with strict(false), and loads nothing.
  of::save_tensors({{"bert.embeddings.word_embeddings.weight", of::zeros({9, 4}, of::kFloat16)}},
                   path, {{"format", "pt"}});
  TinyEncoder model;
  const auto before = raw(model->emb->weight);
  auto lax = of::LoadOptions().rename(hf_to_ours).strict(false);
  CHECK(throws_with([&] { of::load(model, path, lax); },
                    {"[load_state_dict]", "size mismatch for 'emb.weight'", "(9, 4)"}));
  of::save_tensors({{"classifier.weight", of::zeros({2, 4}, of::kInt32)},
                    {"bert.embeddings.word_embeddings.weight", of::zeros({10, 4})}},
                   path);
  CHECK(throws_with([&] { of::load(model, path, lax); },
                    {"[load_state_dict]", "dtype mismatch for 'head.weight'", "int32"}));
  CHECK(raw(model->emb->weight) == before);
  // The old spellings still work and still refuse what strict refuses.
  CHECK(throws_with([&] { of::load(model, path); }, {"[load_state_dict]", "missing keys"}));
  of::save(model, path);
  TinyEncoder copy;
  of::load(copy, path);
  CHECK(raw(copy->emb->weight) == before);
  CHECK(of::load(copy, path, of::LoadOptions()).empty());
}

TEST_CASE("checkpoint: of::save(module) aligns every tensor, so a mapped load copies none") {
  TmpDir dir;
  const std::string path = dir.file("aligned.safetensors");
  // Odd float counts (Linear(3, 5): 15 + 5), an int64 counter (BatchNorm) and float16 weights:
  // in state-dict order these would leave the int64 and float32 entries misaligned.
  nn::Sequential net(nn::Linear(3, 5), nn::BatchNorm1d(5), nn::Linear(5, 3));
  (*net)[2]->to(of::kFloat16);
  (*net)[0]->to(of::kFloat64);
  of::save(net, path);
  auto named = of::load_tensors(path);
  REQUIRE(named.size() == net->state_dict().size());
  for (auto& [k, t] : named) {
    const std::string name = k;  // INFO's lambda: clang captures no structured bindings
    INFO(name);
    CHECK(mapped_from(t.data_ptr(), path));
    CHECK(of::equal(t, net->state_dict()[k]));
  }
  nn::Sequential back(nn::Linear(3, 5), nn::BatchNorm1d(5), nn::Linear(5, 3));
  (*back)[2]->to(of::kFloat16);
  (*back)[0]->to(of::kFloat64);
  of::load(back, path);
  for (const auto& kv : net->state_dict())
    CHECK(of::equal(kv.value(), back->state_dict()[kv.key()]));
}

// ==================================================================== PyTorch

namespace {

// Run by the interpreter in OF_TEST_PYTHON (default python3): loads our checkpoint into the
// equivalent torch module (load_state_dict, strict), runs it on x, and writes back the state
// changed (2v + 1, counters + 1) in float32 and in 16-bit floats, and the output. Without
// torch the same with safetensors.numpy and the forward pass written out in numpy.
const char* kInteropScript = R"PY(
import sys
model_path, x_path, out_path, out16_path, y_path = sys.argv[1:6]
try:
    import torch
    from safetensors.torch import load_file, save_file
    backend = "torch"
except ImportError:
    try:
        import numpy as np
        from safetensors.numpy import load_file, save_file
        backend = "numpy"
    except ImportError:
        sys.exit(4)
keys = ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
        "1.num_batches_tracked", "3.weight", "3.bias"]
sd = load_file(model_path)
if sorted(sd) != sorted(keys):
    print("unexpected keys", sorted(sd))
    sys.exit(2)
x = load_file(x_path)["x"]
if backend == "torch":
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Tanh(),
                              torch.nn.Linear(8, 3))
    net.load_state_dict(sd, strict=True)
    for k, v in net.state_dict().items():
        if v.dtype != sd[k].dtype or not torch.equal(v, sd[k]):
            print("differs after load_state_dict:", k)
            sys.exit(2)
    net.eval()
    with torch.no_grad():
        y = net(x)
    new = {k: (v * 2 + 1 if v.is_floating_point() else v + 1).contiguous()
           for k, v in net.state_dict().items()}
    half = {}
    for i, k in enumerate(sorted(new)):
        v = new[k]
        if v.is_floating_point():
            v = v.to(torch.float16 if i % 2 == 0 else torch.bfloat16)
        half[k] = v
else:
    f = np.float32
    h = x @ sd["0.weight"].T + sd["0.bias"]
    h = (h - sd["1.running_mean"]) / np.sqrt(sd["1.running_var"] + f(1e-5))
    h = h * sd["1.weight"] + sd["1.bias"]
    y = np.tanh(h) @ sd["3.weight"].T + sd["3.bias"]
    new = {k: np.asarray(v * f(2) + f(1) if v.dtype.kind == "f" else v + 1)
           for k, v in sd.items()}
    half = {k: (v.astype(np.float16) if v.dtype.kind == "f" else v) for k, v in new.items()}
save_file(new, out_path)
save_file(half, out16_path)
save_file({"y": y}, y_path)
print(backend)
)PY";

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

TEST_CASE("checkpoint: of::save(module) files round-trip through PyTorch's safetensors") {
  const char* env = std::getenv("OF_TEST_PYTHON");
  const std::string py = env && *env ? env : "python3";
  if (std::system((shell_quote(py) + " -c 'import safetensors' >/dev/null 2>&1").c_str()) != 0) {
    MESSAGE("skipped: " << py
                        << " cannot import safetensors (set OF_TEST_PYTHON to an interpreter "
                           "with safetensors and torch, or numpy)");
    return;
  }
  TmpDir dir;
  of::manual_seed(3);
  nn::Sequential net(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::Tanh(), nn::Linear(8, 3));
  {
    of::NoGradGuard ng;
    for (int i = 0; i < 3; ++i) net->forward(of::randn({16, 4}) * 2 + 1);  // running statistics
  }
  net->eval();
  of::Tensor x = of::randn({5, 4});
  of::save(net, dir.file("model.safetensors"));
  of::save_tensors({{"x", x}}, dir.file("x.safetensors"));
  const std::string script = dir.file("interop.py"), log = dir.file("log.txt");
  write_bytes(script, kInteropScript);
  std::string cmd = "timeout 300 " + shell_quote(py) + " " + shell_quote(script);
  for (const char* f : {"model", "x", "out", "out16", "y"})
    cmd += " " + shell_quote(dir.file(std::string(f) + ".safetensors"));
  const int rc = std::system((cmd + " >" + shell_quote(log) + " 2>&1").c_str());
  const std::string out = read_bytes(log);
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 4) {
    MESSAGE("skipped: " << py << " has safetensors but neither torch nor numpy");
    return;
  }
  REQUIRE_MESSAGE((WIFEXITED(rc) && WEXITSTATUS(rc) == 0), out);
  const std::string backend = out.substr(0, out.find('\n'));
  MESSAGE("read back by safetensors." << backend);

  // The forward pass over our weights agrees: the bytes meant the same numbers to PyTorch.
  auto y = of::load_tensors(dir.file("y.safetensors"));
  REQUIRE(y.size() == 1);
  CHECK(of::allclose(y[0].second, net->forward(x), 1e-5, 1e-5));

  // What it wrote back loads (strict) into the same module: 2v + 1 exactly, the counter + 1.
  nn::Sequential back(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::Tanh(), nn::Linear(8, 3));
  of::load(back, dir.file("out.safetensors"));
  auto ours = net->state_dict();
  for (const auto& kv : back->state_dict()) {
    INFO(kv.key());
    const of::Tensor& o = ours[kv.key()];
    CHECK(of::equal(kv.value(), o.is_floating_point() ? o * 2 + 1 : o + 1));
  }
  // And in 16-bit floats: converted to float32 on load; the rounding agrees with ours.
  nn::Sequential back16(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::Tanh(), nn::Linear(8, 3));
  of::load(back16, dir.file("out16.safetensors"));
  auto file16 = of::load_tensors(dir.file("out16.safetensors"));
  bool saw_f16 = false;
  for (auto& [k, t] : file16) {
    const std::string name = k;
    INFO(name);
    const of::Tensor& o = ours[k];
    if (!o.is_floating_point()) continue;
    saw_f16 = saw_f16 || t.dtype() == of::kFloat16;
    CHECK((t.dtype() == of::kFloat16 || t.dtype() == of::kBFloat16));
    CHECK(of::equal(t, (o * 2 + 1).to(t.dtype())));
    CHECK(of::equal(back16->state_dict()[k], t.to(of::kFloat32)));
  }
  CHECK(saw_f16);
}

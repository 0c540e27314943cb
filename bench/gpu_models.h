// gpu_models.h: the models of issue 10's GPU training benchmarks (bench/bench_gpu_models.cpp),
// shared with their CPU smoke test (tests/test_gpu_models.cpp): ResNet-50 as torchvision builds
// it (bottleneck blocks [3, 4, 6, 3], 1000 classes) and a BERT-base-shaped encoder with a
// masked-LM head (12 post-norm layers, d 768, 12 heads, ff 3072, GELU, vocab 30522) as
// bench/gpu_models.py builds both in PyTorch. Both are parameterized so a test can run them
// small; one training step of each (AMP under autocast + GradScaler) is `train_step`.
#pragma once
#include <oneflow/oneflow.h>

#include <cmath>

namespace oneflow::bench {

namespace nn = of::nn;

// ---------------------------------------------------------------- ResNet

struct BottleneckImpl : nn::Module {
  BottleneckImpl(int64_t in, int64_t width, int64_t stride) {
    const int64_t out = width * 4;
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in, width, 1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(width));
    conv2 = register_module(
        "conv2",
        nn::Conv2d(nn::Conv2dOptions(width, width, 3).stride(stride).padding(1).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(width));
    conv3 = register_module("conv3", nn::Conv2d(nn::Conv2dOptions(width, out, 1).bias(false)));
    bn3 = register_module("bn3", nn::BatchNorm2d(out));
    if (stride != 1 || in != out)
      down = register_module(
          "downsample",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
  }
  of::Tensor forward(const of::Tensor& x) {
    of::Tensor y = bn1(conv1(x)).relu();
    y = bn2(conv2(y)).relu();
    y = bn3(conv3(y));
    return (y + (down ? down->forward(x) : x)).relu();
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential down{nullptr};
};
OF_MODULE(Bottleneck);

// blocks per stage: {3, 4, 6, 3} is ResNet-50; `base` 64 its stem width.
struct ResNetImpl : nn::Module {
  ResNetImpl(std::vector<int64_t> blocks = {3, 4, 6, 3}, int64_t classes = 1000,
             int64_t base = 64) {
    stem = register_module(
        "stem",
        nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, base, 7).stride(2).padding(3).bias(false)),
                       nn::BatchNorm2d(base), nn::ReLU(),
                       nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1))));
    layers = register_module("layers", nn::Sequential());
    int64_t in = base;
    for (size_t s = 0; s < blocks.size(); ++s) {
      const int64_t width = base << s;
      for (int64_t b = 0; b < blocks[s]; ++b) {
        layers->push_back(Bottleneck(in, width, b == 0 && s > 0 ? 2 : 1));
        in = width * 4;
      }
    }
    pool = register_module("pool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})));
    fc = register_module("fc", nn::Linear(in, classes));
  }
  of::Tensor forward(const of::Tensor& x) {
    return fc(pool(layers->forward(stem->forward(x))).flatten(1));
  }
  nn::Sequential stem{nullptr}, layers{nullptr};
  nn::AdaptiveAvgPool2d pool{nullptr};
  nn::Linear fc{nullptr};
};
OF_MODULE(ResNet);

// ---------------------------------------------------------------- BERT

struct BertShape {
  int64_t vocab = 30522, max_len = 512, d = 768, heads = 12, ff = 3072, layers = 12;
  double dropout = 0.1;
};

// Token and position embeddings, post-norm encoder layers, and a masked-LM head (dense, GELU,
// layer norm, projection to the vocabulary); input ids [seq, batch], logits [seq, batch, vocab].
struct BertImpl : nn::Module {
  explicit BertImpl(BertShape s = {}) : shape(s) {
    tok = register_module("tok", nn::Embedding(s.vocab, s.d));
    pos = register_module("pos", nn::Embedding(s.max_len, s.d));
    norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({s.d}).eps(1e-12)));
    drop = register_module("drop", nn::Dropout(s.dropout));
    encoder = register_module("encoder", nn::ModuleList());
    for (int64_t i = 0; i < s.layers; ++i)
      encoder->push_back(
          nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(s.d, s.heads)
                                          .dim_feedforward(s.ff)
                                          .dropout(s.dropout)
                                          .activation(of::kGELU)
                                          .layer_norm_eps(1e-12)));
    dense = register_module("dense", nn::Linear(s.d, s.d));
    head_norm = register_module("head_norm", nn::LayerNorm(nn::LayerNormOptions({s.d}).eps(1e-12)));
    decoder = register_module("decoder", nn::Linear(s.d, s.vocab));
  }
  of::Tensor forward(const of::Tensor& ids) {
    const of::Tensor positions =
        of::arange(ids.size(0), of::TensorOptions(of::kInt64).device(ids.device()));
    of::Tensor h = drop(norm(tok(ids) + pos(positions).unsqueeze(1)));
    for (size_t i = 0; i < encoder->size(); ++i)
      h = encoder->ptr<nn::TransformerEncoderLayerImpl>(i)->forward(h);
    return decoder(head_norm(of::gelu(dense(h))));
  }
  BertShape shape;
  nn::Embedding tok{nullptr}, pos{nullptr};
  nn::LayerNorm norm{nullptr}, head_norm{nullptr};
  nn::Dropout drop{nullptr};
  nn::ModuleList encoder{nullptr};
  nn::Linear dense{nullptr}, decoder{nullptr};
};
OF_MODULE(Bert);

// One mixed-precision training step: forward under autocast (`amp` 16-bit dtype), cross
// entropy over the flattened logits, scaled backward, GradScaler step and update.
template <class Model>
of::Tensor train_step(Model& model, of::optim::Optimizer& opt, of::amp::GradScaler& scaler,
                      of::DeviceType device, of::ScalarType amp, const of::Tensor& x,
                      const of::Tensor& y) {
  opt.zero_grad();
  of::Tensor loss;
  {
    of::autocast::Guard guard(device, amp);
    of::Tensor logits = model->forward(x);
    loss =
        of::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(of::kFloat32), y.reshape({-1}));
  }
  scaler.scale(loss).backward();
  scaler.step(opt);
  scaler.update();
  return loss;
}

}  // namespace oneflow::bench

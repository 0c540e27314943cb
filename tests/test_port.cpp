// test_port.cpp: libtorch's DCGAN example (pytorch/examples, cpp/dcgan/dcgan.cpp) with
// `torch` replaced by `of`, compiled and run for a few batches on a small MNIST-format dataset
// written by the test. It exercises the libtorch spellings a port relies on: `using namespace
// of; nn::...`, options with chained setters, nn::Sequential of holders, LeakyReLU options,
// datasets::MNIST(...).map(Normalize<>).map(Stack<>), make_data_loader(dataset,
// DataLoaderOptions().batch_size(..).workers(..)), data::Example<>, AdamOptions betas as a
// tuple, of::empty(n, device).uniform_, of::binary_cross_entropy, save/load of modules and
// optimizers. The differences from the original are marked "port:".
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <oneflow/c10d.h>

#include "harness.h"

namespace fs = std::filesystem;

namespace dcgan {

// The size of the noise vector fed to the generator.
const int64_t kNoiseSize = 100;

// The batch size for training.
const int64_t kBatchSize = 4;  // port: was 64 (a 12-image dataset)

// The number of epochs to train.
const int64_t kNumberOfEpochs = 1;  // port: was 30

// After how many batches to create a new checkpoint periodically.
const int64_t kCheckpointEvery = 2;  // port: was 200

// How many images to sample at every checkpoint.
const int64_t kNumberOfSamplesPerCheckpoint = 10;

// After how many batches to log a new update with the loss value.
const int64_t kLogInterval = 1;  // port: was 10

using namespace of;

struct DCGANGeneratorImpl : nn::Module {
  DCGANGeneratorImpl(int kNoiseSize)
      : conv1(nn::ConvTranspose2dOptions(kNoiseSize, 256, 4).bias(false)),
        batch_norm1(256),
        conv2(nn::ConvTranspose2dOptions(256, 128, 3).stride(2).padding(1).bias(false)),
        batch_norm2(128),
        conv3(nn::ConvTranspose2dOptions(128, 64, 4).stride(2).padding(1).bias(false)),
        batch_norm3(64),
        conv4(nn::ConvTranspose2dOptions(64, 1, 4).stride(2).padding(1).bias(false)) {
    // register_module() is needed if we want to use the parameters() method later on
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv3", conv3);
    register_module("conv4", conv4);
    register_module("batch_norm1", batch_norm1);
    register_module("batch_norm2", batch_norm2);
    register_module("batch_norm3", batch_norm3);
  }

  of::Tensor forward(of::Tensor x) {
    x = of::relu(batch_norm1(conv1(x)));
    x = of::relu(batch_norm2(conv2(x)));
    x = of::relu(batch_norm3(conv3(x)));
    x = of::tanh(conv4(x));
    return x;
  }

  nn::ConvTranspose2d conv1, conv2, conv3, conv4;
  nn::BatchNorm2d batch_norm1, batch_norm2, batch_norm3;
};

TORCH_MODULE(DCGANGenerator);

struct Result {
  std::vector<float> d_losses, g_losses;
  int64_t checkpoints = 0;
};

// port: main() with the data folder and the checkpoint folder as arguments, and the losses
// returned for the test.
Result run(const std::string& kDataFolder, const std::string& out) {
  Result result;
  of::manual_seed(1);

  // Create the device we pass around based on whether CUDA is available.
  of::Device device(of::kCPU);
  if (of::cuda::is_available() && false) {  // port: the test stays on the CPU
    std::cout << "CUDA is available! Training on GPU." << std::endl;
    device = of::Device(of::kCUDA);
  }

  DCGANGenerator generator(kNoiseSize);
  generator->to(device);

  nn::Sequential discriminator(
      // Layer 1
      nn::Conv2d(nn::Conv2dOptions(1, 64, 4).stride(2).padding(1).bias(false)),
      nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
      // Layer 2
      nn::Conv2d(nn::Conv2dOptions(64, 128, 4).stride(2).padding(1).bias(false)),
      nn::BatchNorm2d(128), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
      // Layer 3
      nn::Conv2d(nn::Conv2dOptions(128, 256, 4).stride(2).padding(1).bias(false)),
      nn::BatchNorm2d(256), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
      // Layer 4
      nn::Conv2d(nn::Conv2dOptions(256, 1, 3).stride(1).padding(0).bias(false)), nn::Sigmoid());
  discriminator->to(device);

  // Assume the MNIST dataset is available under `kDataFolder`;
  auto dataset = of::data::datasets::MNIST(kDataFolder)
                     .map(of::data::transforms::Normalize<>(0.5, 0.5))
                     .map(of::data::transforms::Stack<>());
  const int64_t batches_per_epoch =
      std::ceil(dataset.size().value() / static_cast<double>(kBatchSize));

  auto data_loader = of::data::make_data_loader(
      std::move(dataset), of::data::DataLoaderOptions().batch_size(kBatchSize).workers(2));

  of::optim::Adam generator_optimizer(
      generator->parameters(), of::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.5)));
  of::optim::Adam discriminator_optimizer(
      discriminator->parameters(), of::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.5)));

  int64_t checkpoint_counter = 1;
  for (int64_t epoch = 1; epoch <= kNumberOfEpochs; ++epoch) {
    int64_t batch_index = 0;
    for (of::data::Example<>& batch : *data_loader) {
      // Train discriminator with real images.
      discriminator->zero_grad();
      of::Tensor real_images = batch.data.to(device);
      of::Tensor real_labels = of::empty(batch.data.size(0), device).uniform_(0.8, 1.0);
      of::Tensor real_output = discriminator->forward(real_images).reshape(real_labels.sizes());
      of::Tensor d_loss_real = of::binary_cross_entropy(real_output, real_labels);
      d_loss_real.backward();

      // Train discriminator with fake images.
      of::Tensor noise = of::randn({batch.data.size(0), kNoiseSize, 1, 1}, device);
      of::Tensor fake_images = generator->forward(noise);
      of::Tensor fake_labels = of::zeros(batch.data.size(0), device);
      of::Tensor fake_output =
          discriminator->forward(fake_images.detach()).reshape(fake_labels.sizes());
      of::Tensor d_loss_fake = of::binary_cross_entropy(fake_output, fake_labels);
      d_loss_fake.backward();

      of::Tensor d_loss = d_loss_real + d_loss_fake;
      discriminator_optimizer.step();

      // Train generator.
      generator->zero_grad();
      fake_labels.fill_(1);
      fake_output = discriminator->forward(fake_images).reshape(fake_labels.sizes());
      of::Tensor g_loss = of::binary_cross_entropy(fake_output, fake_labels);
      g_loss.backward();
      generator_optimizer.step();
      batch_index++;
      if (batch_index % kLogInterval == 0) {
        std::printf("\r[%2ld/%2ld][%3ld/%3ld] D_loss: %.4f | G_loss: %.4f\n", epoch,
                    kNumberOfEpochs, batch_index, batches_per_epoch, d_loss.item<float>(),
                    g_loss.item<float>());
      }
      result.d_losses.push_back(d_loss.item<float>());  // port: for the test
      result.g_losses.push_back(g_loss.item<float>());  // port: for the test

      if (batch_index % kCheckpointEvery == 0) {
        // Checkpoint the model and optimizer state.
        of::save(generator, out + "/generator-checkpoint.pt");  // port: out + "/..."
        of::save(generator_optimizer, out + "/generator-optimizer-checkpoint.pt");
        of::save(discriminator, out + "/discriminator-checkpoint.pt");
        of::save(discriminator_optimizer, out + "/discriminator-optimizer-checkpoint.pt");
        // Sample the generator and save the images.
        of::Tensor samples = generator->forward(
            of::randn({kNumberOfSamplesPerCheckpoint, kNoiseSize, 1, 1}, device));
        of::save((samples + 1.0) / 2.0,
                 of::str(out, "/dcgan-sample-", checkpoint_counter, ".pt"));  // port: the folder
        std::cout << "\n-> checkpoint " << ++checkpoint_counter << '\n';
        result.checkpoints++;  // port: for the test
      }
    }
  }
  std::cout << "Training complete!" << std::endl;
  return result;
}

}  // namespace dcgan

namespace {

std::string idx(uint8_t ndims, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = {'\0', '\0', char(0x08), char(ndims)};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(char(d >> shift));
  return s + payload;
}

}  // namespace

TEST_CASE("port: libtorch's DCGAN example compiles with torch -> of and trains") {
  const fs::path dir = fs::temp_directory_path() / ("oneflow_port_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // 12 images: a bright square at a position that depends on the label
  const int n = 12;
  std::string pixels(size_t(n * 28 * 28), '\0'), labels;
  for (int i = 0; i < n; ++i) {
    labels.push_back(char(i % 10));
    for (int y = 4 + i % 5; y < 14 + i % 5; ++y)
      for (int x = 6; x < 18; ++x) pixels[size_t((i * 28 + y) * 28 + x)] = char(200);
  }
  std::ofstream(dir / "train-images-idx3-ubyte", std::ios::binary)
      << idx(3, {uint32_t(n), 28, 28}, pixels);
  std::ofstream(dir / "train-labels-idx1-ubyte", std::ios::binary) << idx(1, {uint32_t(n)}, labels);

  const dcgan::Result r = dcgan::run(dir.string(), dir.string());
  REQUIRE(r.d_losses.size() == 3);
  CHECK(r.checkpoints == 1);
  for (size_t i = 0; i < r.d_losses.size(); ++i) {
    CHECK(std::isfinite(r.d_losses[i]));
    CHECK(std::isfinite(r.g_losses[i]));
    CHECK(r.d_losses[i] > 0);  // binary cross entropy of soft labels
  }
  // The checkpoint restores into fresh modules and optimizers (kRestoreFromCheckpoint's path).
  dcgan::DCGANGenerator g2(dcgan::kNoiseSize);
  of::load(g2, (dir / "generator-checkpoint.pt").string());
  of::optim::Adam opt2(g2->parameters(), of::optim::AdamOptions(2e-4));
  of::load(opt2, (dir / "generator-optimizer-checkpoint.pt").string());
  // the saved group options (betas (0.5, 0.5)) replace the constructor's defaults
  CHECK(std::get<0>(
            static_cast<of::optim::AdamOptions&>(opt2.param_groups()[0].options()).betas()) == 0.5);
  fs::remove_all(dir);
}

// A libtorch-style sequence classifier (the shape of the usual torch::nn::LSTM tutorial code)
// with `torch` replaced by `of`: Embedding -> bidirectional 2-layer LSTM (batch_first) ->
// Linear on the last step, trained with Adam on "does the sequence contain token 1".
namespace lstm_port {

using namespace of;

struct ClassifierImpl : nn::Module {
  ClassifierImpl(int64_t vocab, int64_t embed, int64_t hidden, int64_t classes)
      : embedding(vocab, embed),
        lstm(nn::LSTMOptions(embed, hidden).num_layers(2).batch_first(true).bidirectional(true)),
        fc(2 * hidden, classes) {
    register_module("embedding", embedding);
    register_module("lstm", lstm);
    register_module("fc", fc);
  }

  of::Tensor forward(of::Tensor x) {
    auto out = lstm->forward(embedding->forward(x));
    of::Tensor h = std::get<0>(out);                   // [batch, seq, 2 * hidden]
    auto h_n = std::get<0>(std::get<1>(out));          // [layers * 2, batch, hidden]
    of::Tensor last = of::cat({h_n[-2], h_n[-1]}, 1);  // both directions of the top layer
    (void)h;
    return fc->forward(last);
  }

  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear fc;
};
TORCH_MODULE(Classifier);

std::vector<float> train(int steps) {
  of::manual_seed(1);
  Classifier model(5, 8, 16, 2);
  of::optim::Adam optimizer(model->parameters(), of::optim::AdamOptions(1e-2));
  of::Tensor x = of::randint(2, 5, {16, 6}, of::kInt64);  // tokens 2..4
  // half the sequences contain token 1 somewhere
  for (int64_t i = 0; i < 8; ++i) x[i][i % 6].fill_(1);
  of::Tensor y = of::cat({of::ones({8}, of::kInt64), of::zeros({8}, of::kInt64)});
  std::vector<float> losses;
  model->train();
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    of::Tensor loss = of::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}

}  // namespace lstm_port

TEST_CASE("port: a libtorch LSTM classifier compiles with torch -> of and learns") {
  const std::vector<float> losses = lstm_port::train(30);
  for (float l : losses) CHECK(std::isfinite(l));
  CHECK(losses.front() > 0.5f);  // chance level is ln 2
  CHECK(losses.back() < 0.5f * losses.front());
}

// A libtorch-style seq2seq nn::Transformer learning to copy its input (teacher forcing with
// generate_square_subsequent_mask), and a CTC model: the torch -> of spellings of both.
namespace transformer_port {

namespace nn = of::nn;

struct Seq2SeqImpl : nn::Module {
  Seq2SeqImpl(int64_t vocab, int64_t d_model)
      : embed(register_module("embed", nn::Embedding(vocab, d_model))),
        transformer(register_module(
            "transformer",
            nn::Transformer(
                nn::TransformerOptions(d_model, 2, 1, 1).dim_feedforward(32).dropout(0.0)))),
        out(register_module("out", nn::Linear(d_model, vocab))) {}

  of::Tensor forward(const of::Tensor& src, const of::Tensor& tgt_in) {
    auto mask = nn::TransformerImpl::generate_square_subsequent_mask(tgt_in.size(0));
    return out->forward(transformer->forward(embed->forward(src), embed->forward(tgt_in),
                                             /*src_mask=*/{}, /*tgt_mask=*/mask));
  }

  nn::Embedding embed;
  nn::Transformer transformer;
  nn::Linear out;
};
TORCH_MODULE(Seq2Seq);

std::vector<float> train_copy(int steps) {
  of::manual_seed(3);
  const int64_t vocab = 6;
  Seq2Seq model(vocab, 16);
  of::optim::Adam optimizer(model->parameters(), of::optim::AdamOptions(1e-2));
  of::Tensor src = of::randint(1, vocab, {5, 8}, of::kInt64);  // [S, N], 0 is BOS
  of::Tensor tgt_in = of::cat({of::zeros({1, 8}, of::kInt64), src.narrow(0, 0, 4)});
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    of::Tensor logits = model->forward(src, tgt_in);
    of::Tensor loss =
        of::nn::functional::cross_entropy(logits.view({-1, vocab}), src.reshape({-1}));
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}

std::vector<float> train_ctc(int steps) {
  of::manual_seed(4);
  nn::Linear proj(4, 5);  // 4 features -> blank + 4 labels
  nn::CTCLoss ctc(nn::CTCLossOptions().blank(0).zero_infinity(true));
  of::optim::SGD optimizer(proj->parameters(), of::optim::SGDOptions(0.5));
  of::Tensor x = of::randn({12, 3, 4});
  of::Tensor targets = of::tensor(std::vector<int64_t>{1, 2, 3, 4, 4, 0, 2, 2, 1}, {3, 3});
  of::Tensor input_lengths = of::tensor(std::vector<int64_t>{12, 10, 12});
  of::Tensor target_lengths = of::tensor(std::vector<int64_t>{3, 2, 3});
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    of::Tensor log_probs = proj->forward(x).log_softmax(2);
    of::Tensor loss = ctc->forward(log_probs, targets, input_lengths, target_lengths);
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}

}  // namespace transformer_port

TEST_CASE("port: a libtorch seq2seq nn::Transformer and a CTC model train") {
  const std::vector<float> copy = transformer_port::train_copy(40);
  for (float l : copy) CHECK(std::isfinite(l));
  CHECK(copy.back() < 0.5f * copy.front());
  const std::vector<float> ctc = transformer_port::train_ctc(30);
  for (float l : ctc) CHECK(std::isfinite(l));
  CHECK(ctc.back() < 0.8f * ctc.front());
}

// The libtorch custom-dataset tutorial's shape with `torch` replaced by `of`: a dataset class
// reading a CSV file (label, features...) into tensors, .map(Stack<>()), make_data_loader with a
// RandomSampler and worker threads, and an MLP trained with SGD.
namespace csv_port {

class CustomDataset : public of::data::datasets::Dataset<CustomDataset> {
 private:
  std::vector<of::Tensor> features_;
  std::vector<int64_t> labels_;

 public:
  explicit CustomDataset(const std::string& file_names_csv) {
    std::ifstream in(file_names_csv);
    std::string line;
    while (std::getline(in, line)) {
      std::stringstream ss(line);
      std::string cell;
      std::getline(ss, cell, ',');
      labels_.push_back(std::stoll(cell));
      std::vector<float> values;
      while (std::getline(ss, cell, ',')) values.push_back(std::stof(cell));
      features_.push_back(of::tensor(values, {int64_t(values.size())}));
    }
  }

  of::data::Example<> get(size_t index) override {
    of::Tensor sample_img = features_.at(index);
    of::Tensor sample_label = of::full({}, labels_.at(index), of::kInt64);
    return {sample_img.clone(), sample_label.clone()};
  }

  of::optional<size_t> size() const override { return labels_.size(); }
};

std::vector<float> run(const std::string& csv) {
  of::manual_seed(0);
  auto data_set = CustomDataset(csv).map(of::data::transforms::Stack<>());
  auto data_loader = of::data::make_data_loader<of::data::samplers::RandomSampler>(
      std::move(data_set), of::data::DataLoaderOptions().batch_size(8).workers(2));
  of::nn::Sequential net(of::nn::Linear(2, 16), of::nn::ReLU(), of::nn::Linear(16, 2));
  of::optim::SGD optimizer(net->parameters(), of::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<float> epoch_losses;
  for (size_t epoch = 0; epoch < 15; ++epoch) {
    float sum = 0;
    int batches = 0;
    for (auto& batch : *data_loader) {
      optimizer.zero_grad();
      auto loss = of::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      sum += loss.item<float>();
      ++batches;
    }
    epoch_losses.push_back(sum / float(batches));
  }
  return epoch_losses;
}

}  // namespace csv_port

TEST_CASE("port: a libtorch custom CSV dataset with make_data_loader trains") {
  const fs::path path =
      fs::temp_directory_path() / ("oneflow_csv_" + std::to_string(::getpid()) + ".csv");
  {
    std::ofstream out(path);
    for (int i = 0; i < 60; ++i) {
      const float x = float(i % 10) / 5.0f - 1.0f, y = float(i / 10) / 3.0f - 1.0f;
      out << (x + y > 0 ? 1 : 0) << ',' << x << ',' << y << '\n';
    }
  }
  const std::vector<float> losses = csv_port::run(path.string());
  fs::remove(path);
  for (float l : losses) CHECK(std::isfinite(l));
  CHECK(losses.back() < 0.5f * losses.front());
}

// ---------------------------------------------------------------- 1-D audio classifier
// An M5-style raw-waveform classifier as libtorch code (torch:: -> of::): strided Conv1d,
// BatchNorm1d, MaxPool1d (one through forward_with_indices), AvgPool1d, AdaptiveMaxPool1d,
// ConvTranspose1d and the root and nn::functional 1-D pools. Two classes of synthetic "audio":
// low- and high-frequency tones with noise.
namespace audio_port {

using namespace of;

struct M5Impl : nn::Module {
  M5Impl(int64_t n_input = 1, int64_t n_output = 2, int64_t stride = 4, int64_t n_channel = 8)
      : conv1(register_module(
            "conv1", nn::Conv1d(nn::Conv1dOptions(n_input, n_channel, 20).stride(stride)))),
        bn1(register_module("bn1", nn::BatchNorm1d(n_channel))),
        pool1(register_module("pool1", nn::MaxPool1d(4))),
        conv2(register_module("conv2", nn::Conv1d(n_channel, n_channel, 3))),
        bn2(register_module("bn2", nn::BatchNorm1d(n_channel))),
        pool2(register_module("pool2", nn::AvgPool1d(nn::AvgPool1dOptions(4).stride(2)))),
        up(register_module(
            "up",
            nn::ConvTranspose1d(nn::ConvTranspose1dOptions(n_channel, n_channel, 2).stride(2)))),
        gpool(register_module("gpool", nn::AdaptiveMaxPool1d(2))),
        fc1(register_module("fc1", nn::Linear(2 * n_channel, n_output))) {}

  of::Tensor forward(of::Tensor x) {
    x = of::relu(bn1(conv1(x)));
    auto [p, idx] = pool1->forward_with_indices(x);
    indices = idx;
    x = of::relu(bn2(conv2(p)));
    x = pool2(x);
    x = of::relu(up(x));
    x = nn::functional::max_pool1d(x, nn::functional::MaxPool1dFuncOptions(3).stride(1).padding(1));
    x = gpool(x);                                 // [batch, channels, 2]
    x = x + 0.1 * of::adaptive_avg_pool1d(x, 1);  // broadcast over the 2 positions
    return fc1(x.flatten(1));
  }

  nn::Conv1d conv1;
  nn::BatchNorm1d bn1;
  nn::MaxPool1d pool1;
  nn::Conv1d conv2;
  nn::BatchNorm1d bn2;
  nn::AvgPool1d pool2;
  nn::ConvTranspose1d up;
  nn::AdaptiveMaxPool1d gpool;
  nn::Linear fc1;
  of::Tensor indices;
};
TORCH_MODULE(M5);

// Returns the losses and the final training accuracy.
std::pair<std::vector<float>, double> train(int steps) {
  of::manual_seed(3);
  const int64_t n = 16, L = 400;
  of::Tensor t = of::arange(L, of::kFloat32).div(L);
  of::Tensor freq = of::cat({of::full({n / 2, 1}, 3.0f), of::full({n / 2, 1}, 40.0f)});
  of::Tensor phase = of::rand({n, 1}) * 6.28f;
  of::Tensor wave = of::sin(freq * t.unsqueeze(0) * 6.2831853f + phase) + 0.2 * of::randn({n, L});
  of::Tensor x = wave.unsqueeze(1);  // [batch, 1, L]
  of::Tensor y = of::cat({of::zeros({n / 2}, of::kLong), of::ones({n / 2}, of::kLong)});
  M5 model;
  of::optim::Adam optimizer(model->parameters(), of::optim::AdamOptions(1e-2));
  std::vector<float> losses;
  model->train();
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    of::Tensor loss = of::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<float>());
  }
  model->eval();
  of::NoGradGuard no_grad;
  of::Tensor pred = model->forward(x).argmax(1);
  const double acc = pred.eq(y).to(of::kFloat64).mean().item<double>();
  CHECK(model->indices.scalar_type() == of::kLong);
  CHECK(model->indices.size(2) == 24);  // (400 - 20) / 4 + 1 = 96 -> MaxPool1d(4) -> 24
  return {losses, acc};
}

}  // namespace audio_port

TEST_CASE("port: a libtorch 1-D audio classifier (Conv1d, 1-D pools) compiles and learns") {
  auto [losses, acc] = audio_port::train(25);
  for (float l : losses) CHECK(std::isfinite(l));
  CHECK(losses.back() < 0.5f * losses.front());
  CHECK(acc >= 0.9);
}

// ---------------------------------------------------------------- distributed data parallel
// The shape of libtorch's distributed MNIST example (pytorch/examples, cpp/distributed) as
// libtorch code: c10d::ProcessGroupMPI::createProcessGroupMPI(), a DistributedRandomSampler
// feeding make_data_loader, and the gradients all-reduced by hand then divided by the number of
// ranks. Here it runs as one process (a group of one); global_worker.cpp runs the same pattern
// under mpirun. Both the libtorch 1.13 (c10::intrusive_ptr) and the older (std::shared_ptr)
// spellings of the group and its works are used.
namespace dist_port {

struct Points : of::data::datasets::Dataset<Points> {
  of::data::Example<> get(size_t index) override {
    const float x = float(index % 8) / 4.0f - 1.0f, y = float(index / 8) / 4.0f - 1.0f;
    return {of::tensor({x, y}), of::full({}, x + y > 0 ? 1 : 0, of::kInt64)};
  }
  of::optional<size_t> size() const override { return 64; }
};

struct Model : of::nn::Module {
  Model() : fc1(2, 16), fc2(16, 2) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  of::Tensor forward(of::Tensor x) { return fc2->forward(of::relu(fc1->forward(x))); }
  of::nn::Linear fc1, fc2;
};

void waitWork(c10::intrusive_ptr<::c10d::ProcessGroupMPI> pg,
              std::vector<c10::intrusive_ptr<c10d::Work>> works) {
  for (auto& work : works) {
    try {
      work->wait();
    } catch (const std::exception& ex) {
      std::cerr << "Exception received: " << ex.what() << std::endl;
      pg->abort();
    }
  }
}

// The older spelling: the group and its works as std::shared_ptr.
void waitWorkShared(std::shared_ptr<c10d::ProcessGroup> pg,
                    std::vector<std::shared_ptr<c10d::ProcessGroup::Work>> works) {
  for (auto& work : works) CHECK(work->wait());
  CHECK(pg->getSize() >= 1);
}

std::vector<float> run() {
  of::manual_seed(0);
  auto pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
  auto numranks = pg->getSize();
  auto rank = pg->getRank();
  auto train_dataset = Points().map(of::data::transforms::Stack<>());
  auto data_sampler = of::data::samplers::DistributedRandomSampler(train_dataset.size().value(),
                                                                   numranks, rank, false);
  auto total_batch_size = 16;
  auto batch_size_per_proc = total_batch_size / numranks;
  auto data_loader =
      of::data::make_data_loader(std::move(train_dataset), data_sampler, batch_size_per_proc);
  auto model = std::make_shared<Model>();
  of::optim::SGD optimizer(model->parameters(), of::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<float> losses;
  for (size_t epoch = 1; epoch <= 20; ++epoch) {
    float sum = 0;
    int batches = 0;
    for (auto& batch : *data_loader) {
      model->zero_grad();
      auto loss = of::nll_loss(of::log_softmax(model->forward(batch.data), 1), batch.target);
      loss.backward();
      // average the gradients over the ranks
      for (auto& param : model->named_parameters()) {
        std::vector<of::Tensor> tmp = {param.value().grad()};
        auto work = pg->allreduce(tmp);
        waitWork(pg, {work});
        param.value().grad().data() = param.value().grad().data() / numranks;
      }
      optimizer.step();
      sum += loss.item<float>();
      ++batches;
    }
    losses.push_back(sum / float(batches));
  }
  std::shared_ptr<c10d::ProcessGroup> shared = pg;
  waitWorkShared(shared, {shared->barrier()});
  return losses;
}

}  // namespace dist_port

TEST_CASE("port: libtorch's distributed (c10d + DistributedRandomSampler) training loop") {
  const std::vector<float> losses = dist_port::run();
  for (float l : losses) CHECK(std::isfinite(l));
  CHECK(losses.back() < 0.5f * losses.front());
}

TEST_CASE("port: a program that includes only <oneflow/oneflow.h> gets the standard headers") {
  // pytorch/examples' cpp/mnist calls std::isnan with only <torch/torch.h> included; the
  // umbrella header brings <cmath>, <iostream>, <iomanip>, <numeric>, ... too
  // (tests/port_headers.cpp compiles only while it does)
  std::string out;
  CHECK(th::run_capture(ONEFLOW_PORT_HEADERS, &out) == 0);
  INFO(out);
  CHECK(out.find("mean loss, ok") != std::string::npos);
}

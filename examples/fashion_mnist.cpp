// fashion_mnist: a small CNN trained on Fashion-MNIST (Debian's dataset-fashion-mnist) with
// of::nn, of::optim and of::data; saves a checkpoint, reloads it into a fresh model and checks
// the accuracy again. Usage: fashion_mnist [epochs] [data_dir]
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

namespace nn = of::nn;

struct NetImpl : nn::Module {
  NetImpl() {
    features = register_module(
        "features",
        nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::BatchNorm2d(32),
                       nn::ReLU(), nn::MaxPool2d(2),  // 32 x 14 x 14
                       nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::BatchNorm2d(64),
                       nn::ReLU(), nn::MaxPool2d(2)));  // 64 x 7 x 7
    classifier = register_module(
        "classifier", nn::Sequential(nn::Flatten(), nn::Linear(64 * 7 * 7, 128), nn::ReLU(),
                                     nn::Dropout(0.25), nn::Linear(128, 10)));
  }
  of::Tensor forward(const of::Tensor& x) { return classifier(features(x)); }
  nn::Sequential features{nullptr}, classifier{nullptr};
};
OF_MODULE(Net);

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double accuracy(Net& net, of::data::DataLoader& loader) {
  of::NoGradGuard no_grad;
  net->eval();
  int64_t correct = 0, total = 0;
  for (auto& batch : loader) {
    of::Tensor pred = net(batch.data).argmax(1);
    correct += pred.eq(batch.target).sum().item<int64_t>();
    total += batch.target.size(0);
  }
  net->train();
  return double(correct) / double(total);
}

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 2;
  const std::string dir = argc > 2 ? argv[2] : of::data::kFashionMnistDir;
  of::manual_seed(0);

  auto t0 = std::chrono::steady_clock::now();
  auto train_set = std::make_shared<of::data::FashionMNIST>(dir, of::data::MNIST::Mode::kTrain);
  auto test_set = std::make_shared<of::data::FashionMNIST>(dir, of::data::MNIST::Mode::kTest);
  std::printf(
      "Fashion-MNIST from %s: %zu training and %zu test images (read in %.1f s), %d threads\n",
      dir.c_str(), train_set->size(), test_set->size(), seconds_since(t0), of::get_num_threads());
  // normalize with the training set's statistics
  const double mean = train_set->data().mean().item<float>();
  const double stdev = train_set->data().std().item<float>();
  auto normalized = [&](const of::data::MNIST& d) {
    return std::make_shared<of::data::TensorDataset>((d.data() - mean) / stdev, d.targets());
  };
  // full batches only: the saved training step (below) takes one batch shape
  of::data::DataLoader train_loader(
      normalized(*train_set),
      of::data::DataLoaderOptions(128).shuffle(true).seed(1).drop_last(true));
  of::data::DataLoader test_loader(normalized(*test_set), of::data::DataLoaderOptions(1000));

  Net net;
  std::cout << *net << std::endl;
  int64_t nparams = 0;
  for (auto& p : net->parameters()) nparams += p.numel();
  std::printf("parameters: %lld\n", (long long)nparams);

  of::optim::Adam optimizer(net->parameters(), of::optim::AdamOptions(2e-3));
  of::optim::StepLR scheduler(optimizer, 1, 0.5);
  // One training step: the loss and how many of the batch it classified right. Epoch 1 calls it
  // eagerly; later epochs call its traced form, which records the step (forward, backward and
  // the Adam update) once per batch shape and then replays the optimized graph.
  auto train_step = [&](const of::Tensor& x, const of::Tensor& y) {
    optimizer.zero_grad();
    of::Tensor logits = net(x);
    of::Tensor loss = of::nn::functional::cross_entropy(logits, y);
    loss.backward();
    optimizer.step();
    return std::pair<of::Tensor, of::Tensor>{loss, logits.argmax(1).eq(y).sum()};
  };
  auto traced_step = of::jit::trace(train_step);
  std::vector<double> rates;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const bool traced = epoch > 1;
    auto te = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t seen = 0, step = 0;
    for (auto& batch : train_loader) {
      of::Tensor loss = traced ? traced_step(batch.data, batch.target).first
                               : train_step(batch.data, batch.target).first;
      loss_sum += loss.item<float>() * double(batch.target.size(0));
      seen += batch.target.size(0);
      if (++step % 100 == 0)
        std::printf("  epoch %d step %4lld  loss %.4f  %.0f samples/s\n", epoch, (long long)step,
                    loss_sum / double(seen), double(seen) / seconds_since(te));
    }
    const double train_s = seconds_since(te);
    rates.push_back(double(seen) / train_s);
    const double acc = accuracy(net, test_loader);
    std::printf(
        "epoch %d (%s): train loss %.4f, %.1f s (%.0f samples/s), lr %.4g, test accuracy "
        "%.4f\n",
        epoch, traced ? "traced" : "eager", loss_sum / double(seen), train_s,
        double(seen) / train_s, optimizer.param_groups()[0].options().get_lr(), acc);
    scheduler.step();
  }
  if (epochs > 1) {
    std::printf("traced training: %.0f samples/s vs %.0f eager: %.2fx\n", rates.back(), rates[0],
                rates.back() / rates[0]);
    std::printf("%s", traced_step.stats().str().c_str());
    // The traced training step with its state (parameters, BatchNorm statistics, Adam's
    // moments and step counts, the learning rate, the generator): examples/train_graph
    // continues training from this file without this file's model code.
    const std::string step_path = "fashion_mnist_step.oftrace";
    of::jit::save(traced_step, step_path, of::jit::state_names(*net, optimizer));
    std::printf("saved the traced training step and its state to %s\n", step_path.c_str());
  }

  // The inference graph: traced in eval mode on a test batch, saved for of::jit::load (the
  // trace_inference example runs it without this file's model code).
  {
    of::NoGradGuard no_grad;
    net->eval();
    auto infer = of::jit::trace([&](const of::Tensor& x) { return net(x); });
    for (auto& batch : test_loader) {
      infer(batch.data);
      break;
    }
    const std::string graph_path = "fashion_mnist_cnn.oftrace";
    of::jit::save(infer, graph_path);
    // (the trace report is several lines, each ending in a newline)
    std::printf("saved the traced inference graph to %s; its trace report:\n%s", graph_path.c_str(),
                infer.stats().str().c_str());
    net->train();
  }

  // checkpoint round trip: a fresh model loaded from the file must score the same
  const std::string path = "fashion_mnist.safetensors";
  of::save(net, path);
  Net restored;
  of::load(restored, path);
  const double acc = accuracy(restored, test_loader);
  std::printf("saved %s and reloaded it into a fresh model (total time %.1f s)\n", path.c_str(),
              seconds_since(t0));
  std::printf("test accuracy: %.4f\n", acc);
  return 0;
}

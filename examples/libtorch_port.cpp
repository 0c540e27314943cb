// libtorch_port: the libtorch C++ MNIST example (pytorch/examples, cpp/mnist) ported to
// oneflow by replacing `torch::` with `of::` and the include. The remaining differences from
// the original are marked "port:": the data root (Debian's Fashion-MNIST, same file format) and
// the epoch count (1, to keep the demo short). AT_ASSERT works as in libtorch (of::compat.h).
#include <oneflow/oneflow.h>  // port: was <torch/torch.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

// Where to find the MNIST dataset.
const char* kDataRoot = of::data::kFashionMnistDir;  // port: was "./data"

// The batch size for training.
const int64_t kTrainBatchSize = 64;

// The batch size for testing.
const int64_t kTestBatchSize = 1000;

// The number of epochs to train.
const int64_t kNumberOfEpochs = 1;  // port: was 10

// After how many batches to log a new update with the loss value.
const int64_t kLogInterval = 10;

struct Net : of::nn::Module {
  Net()
      : conv1(1, 10, /*kernel_size=*/5),
        conv2(10, 20, /*kernel_size=*/5),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  of::Tensor forward(of::Tensor x) {
    x = of::relu(of::max_pool2d(conv1->forward(x), 2));
    x = of::relu(of::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 320});
    x = of::relu(fc1->forward(x));
    x = of::dropout(x, /*p=*/0.5, /*training=*/is_training());
    x = fc2->forward(x);
    return of::log_softmax(x, /*dim=*/1);
  }

  of::nn::Conv2d conv1;
  of::nn::Conv2d conv2;
  of::nn::Dropout2d conv2_drop;
  of::nn::Linear fc1;
  of::nn::Linear fc2;
};

template <typename DataLoader>
void train(size_t epoch, Net& model, of::Device device, DataLoader& data_loader,
           of::optim::Optimizer& optimizer, size_t dataset_size) {
  model.train();
  size_t batch_idx = 0;
  for (auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = of::nll_loss(output, targets);
    AT_ASSERT(!std::isnan(loss.template item<float>()));
    loss.backward();
    optimizer.step();

    if (batch_idx++ % kLogInterval == 0) {
      std::printf("\rTrain Epoch: %ld [%5ld/%5ld] Loss: %.4f", long(epoch),
                  long(batch_idx * batch.data.size(0)), long(dataset_size),
                  loss.template item<float>());
    }
  }
}

template <typename DataLoader>
void test(Net& model, of::Device device, DataLoader& data_loader, size_t dataset_size) {
  of::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int32_t correct = 0;
  for (const auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model.forward(data);
    test_loss += of::nll_loss(output, targets,
                              /*weight=*/{}, of::Reduction::Sum)
                     .template item<float>();
    auto pred = output.argmax(1);
    correct += pred.eq(targets).sum().template item<int64_t>();
  }

  test_loss /= dataset_size;
  std::printf("\nTest set: Average loss: %.4f | Accuracy: %.3f\n", test_loss,
              static_cast<double>(correct) / dataset_size);
}

auto main() -> int {
  of::manual_seed(1);

  of::DeviceType device_type;
  if (of::cuda::is_available()) {
    std::cout << "CUDA available! Training on GPU." << std::endl;
    device_type = of::kCUDA;
  } else {
    std::cout << "Training on CPU." << std::endl;
    device_type = of::kCPU;
  }
  of::Device device(device_type);

  Net model;
  model.to(device);

  auto train_dataset = of::data::datasets::MNIST(kDataRoot)
                           .map(of::data::transforms::Normalize<>(0.1307, 0.3081))
                           .map(of::data::transforms::Stack<>());
  const size_t train_dataset_size = train_dataset.size().value();
  auto train_loader = of::data::make_data_loader<of::data::samplers::SequentialSampler>(
      std::move(train_dataset), kTrainBatchSize);

  auto test_dataset = of::data::datasets::MNIST(kDataRoot, of::data::datasets::MNIST::Mode::kTest)
                          .map(of::data::transforms::Normalize<>(0.1307, 0.3081))
                          .map(of::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader = of::data::make_data_loader(std::move(test_dataset), kTestBatchSize);

  of::optim::SGD optimizer(model.parameters(), of::optim::SGDOptions(0.01).momentum(0.5));

  for (size_t epoch = 1; epoch <= kNumberOfEpochs; ++epoch) {
    train(epoch, model, device, *train_loader, optimizer, train_dataset_size);
    test(model, device, *test_loader, test_dataset_size);
  }
}

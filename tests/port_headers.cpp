// port_headers.cpp: a program that includes nothing but <oneflow/oneflow.h>, as ported libtorch
// programs include nothing but <torch/torch.h>, and uses the standard library the way
// pytorch/examples' cpp/mnist does (std::isnan on the loss, std::printf, std::cout with
// manipulators, std::vector, std::string, std::chrono, ...). It compiles only while the umbrella
// header brings those headers; test_port.cpp runs it.
#include <oneflow/oneflow.h>

namespace of = oneflow;

int main() {
  of::manual_seed(1);
  auto net = of::nn::Sequential(of::nn::Linear(8, 16), of::nn::ReLU(), of::nn::Linear(16, 2));
  of::optim::SGD optimizer(net->parameters(), of::optim::SGDOptions(0.01).momentum(0.5));
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> losses;
  for (size_t batch_idx = 0; batch_idx < 5; ++batch_idx) {
    of::Tensor data = of::randn({4, 8}), targets = of::randint(0, 2, {4}, of::kInt64);
    optimizer.zero_grad();
    of::Tensor loss = of::nll_loss(of::log_softmax(net->forward(data), 1), targets);
    if (std::isnan(loss.template item<float>())) return 1;  // mnist.cpp's AT_ASSERT
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<float>());
    std::printf("\rTrain Epoch: %ld [%5ld/%5ld] Loss: %.4f", long(1), long(batch_idx * 4), long(20),
                double(losses.back()));
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "\n"
            << std::setw(8) << std::fixed << std::setprecision(2)
            << std::accumulate(losses.begin(), losses.end(), 0.0f) / float(losses.size())
            << " mean loss, " << std::string(ms >= 0 ? "ok" : "?") << std::endl;
  return 0;
}

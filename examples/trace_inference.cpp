// Runs a traced graph saved by of::jit::save without the model's code: the Fashion-MNIST CNN
// that examples/fashion_mnist traced in eval mode and saved (./run demo runs both).
//   trace_inference [graph file] [Fashion-MNIST dir]
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "fashion_mnist_cnn.oftrace";
  const std::string dir = argc > 2 ? argv[2] : of::data::kFashionMnistDir;
  auto t0 = std::chrono::steady_clock::now();
  of::jit::LoadedGraph graph = of::jit::load(path);  // checks version, sizes and checksum first
  std::printf("loaded %s: %zu input(s)\n", path.c_str(), graph.num_inputs());
  auto train_set = std::make_shared<of::data::FashionMNIST>(dir, of::data::MNIST::Mode::kTrain);
  auto test_set = std::make_shared<of::data::FashionMNIST>(dir, of::data::MNIST::Mode::kTest);
  // the same normalization the training program used
  const double mean = train_set->data().mean().item<float>();
  const double stdev = train_set->data().std().item<float>();
  auto data = std::make_shared<of::data::TensorDataset>((test_set->data() - mean) / stdev,
                                                        test_set->targets());
  of::data::DataLoader loader(data, of::data::DataLoaderOptions(1000));
  int64_t correct = 0, total = 0;
  for (auto& batch : loader) {
    of::Tensor logits = graph(batch.data);
    correct += logits.argmax(1).eq(batch.target).sum().item<int64_t>();
    total += batch.target.size(0);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%lld test images in %.2f s\n", (long long)total, s);
  std::printf("test accuracy (loaded graph): %.4f\n", double(correct) / double(total));
  return 0;
}

// Continues training a saved traced training step without the model's code: the Fashion-MNIST
// CNN step (forward, backward, Adam) that examples/fashion_mnist traced and saved with its
// state (./run demo runs both). Each call of the loaded graph trains on one batch and updates
// the state it holds; the learning rate is that state too ("lr"), so this driver runs the
// schedule (StepLR: halved every epoch) and writes the state back as a checkpoint at the end.
//   train_graph [epochs] [step file] [Fashion-MNIST dir] [output file]
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 1;
  const std::string path = argc > 2 ? argv[2] : "fashion_mnist_step.oftrace";
  const std::string dir = argc > 3 ? argv[3] : of::data::kFashionMnistDir;
  const std::string out = argc > 4 ? argv[4] : "fashion_mnist_step_continued.oftrace";
  auto t0 = std::chrono::steady_clock::now();
  of::jit::LoadedGraph step = of::jit::load(path);  // checks version, sizes and checksum first
  if (!step.trains()) {
    std::fprintf(stderr, "%s is not a saved training step\n", path.c_str());
    return 1;
  }
  const auto specs = step.input_specs();
  std::printf("loaded %s: inputs %s and %s, %zu state tensors:", path.c_str(),
              specs.at(0).str().c_str(), specs.at(1).str().c_str(), step.state().size());
  for (const auto& [name, t] : step.state())
    if (name.rfind("optimizer.", 0) != 0) std::printf(" %s", name.c_str());
  std::printf(" and the optimizer's\n");
  of::Tensor lr = step.state("lr");
  of::Tensor adam_steps;  // one parameter's step count (they all advance together)
  for (const auto& [name, t] : step.state())
    if (name.rfind("optimizer.", 0) == 0 && name.size() > 5 &&
        name.compare(name.size() - 5, 5, ".step") == 0)
      adam_steps = t;
  if (!adam_steps.defined()) {
    std::fprintf(stderr, "%s holds no optimizer step count\n", path.c_str());
    return 1;
  }
  std::printf("continuing from Adam step %.0f at lr %.4g\n", adam_steps.item<double>(),
              lr.item<double>());

  auto train_set = std::make_shared<of::data::FashionMNIST>(dir, of::data::MNIST::Mode::kTrain);
  // the same normalization and batches the training program used
  const double mean = train_set->data().mean().item<float>();
  const double stdev = train_set->data().std().item<float>();
  auto data = std::make_shared<of::data::TensorDataset>((train_set->data() - mean) / stdev,
                                                        train_set->targets());
  const int64_t batch = specs.at(0).dims.at(0).size;
  of::data::DataLoader loader(
      data, of::data::DataLoaderOptions(batch).shuffle(true).seed(2).drop_last(true));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    auto te = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    for (auto& b : loader) {
      std::vector<of::Tensor> r = step.run({b.data, b.target});  // {loss, correct}
      loss_sum += r[0].item<float>() * double(b.target.size(0));
      correct += r[1].item<int64_t>();
      seen += b.target.size(0);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - te).count();
    std::printf(
        "epoch %d (loaded graph): train loss %.4f, train accuracy %.4f, lr %.4g, %.1f s (%.0f "
        "samples/s)\n",
        epoch, loss_sum / double(seen), double(correct) / double(seen), lr.item<double>(), s,
        double(seen) / s);
    lr.fill_(lr.item<double>() * 0.5);  // StepLR(step_size 1, gamma 0.5), through the state
  }
  of::jit::save(step, out);  // the state as it is now: a checkpoint to continue from
  std::printf("wrote %s (Adam step %.0f); total %.1f s\n", out.c_str(), adam_steps.item<double>(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

// data_parallel: an MLP trained on Fashion-MNIST with global tensors (docs/GLOBAL.md).
// Every rank reads the data set and walks the same shuffled order; each global batch is split
// S(0) over the ranks, the parameters are broadcast, and their gradients arrive as partial
// sums that are all-reduced when accumulated. The same program runs on one process or under
//   mpirun -np 2 ./build/examples/data_parallel [steps] [data_dir]
#include <oneflow/oneflow.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace nn = of::nn;

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::stoll(argv[1]) : 300;
  const std::string dir = argc > 2 ? argv[2] : of::data::kFashionMnistDir;
  of::distributed::init();
  const int rank = of::distributed::rank(), world = of::distributed::world_size();
  of::Placement pl = of::Placement::all("cpu");

  of::data::FashionMNIST train(dir, of::data::MNIST::Mode::kTrain);
  of::data::FashionMNIST test(dir, of::data::MNIST::Mode::kTest);
  const double mean = train.data().mean().item<float>(), stdev = train.data().std().item<float>();
  of::Tensor xs = ((train.data() - mean) / stdev).reshape({-1, 784});
  of::Tensor ys = train.targets();

  of::manual_seed(0);  // the same initial parameters on every rank
  auto net = nn::Sequential(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10));
  net->to_global(pl, of::sbp::broadcast());
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-3));
  if (rank == 0)
    std::printf("data parallel on %d rank(s) (%s), %d thread(s) each: MLP 784-256-10, global "
                "batch 128 split S(0)\n", world, of::distributed::backend().c_str(),
                of::get_num_threads());

  const int64_t batch = 128, n = xs.size(0);
  const int64_t base = batch / world, extra = batch % world;
  const int64_t start = rank * base + std::min<int64_t>(rank, extra), len = base + (rank < extra);
  of::Tensor order = of::randperm(n);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t comm_before = of::distributed::collectives_issued(), comm_per_step = 0;
  double loss_sum = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t off = (step * batch) % (n - batch);
    of::Tensor idx = order.narrow(0, off + start, len);
    of::Tensor x = xs.index_select(0, idx).to_global(pl, of::sbp::split(0));
    of::Tensor y = ys.index_select(0, idx).to_global(pl, of::sbp::split(0));
    opt.zero_grad();
    of::Tensor loss = of::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    if (step == 0) comm_per_step = of::distributed::collectives_issued() - comm_before;
    loss_sum += loss.item<double>();
    if ((step + 1) % 100 == 0 && rank == 0)
      std::printf("  step %4lld  loss %.4f\n", (long long)step + 1, loss_sum / 100), loss_sum = 0;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // every rank holds the same parameters: evaluate locally on rank 0
  int64_t correct = 0;
  {
    of::NoGradGuard ng;
    of::Tensor xt = ((test.data() - mean) / stdev).reshape({-1, 784});
    std::vector<of::Tensor> p = net->parameters();
    of::Tensor h = of::relu(of::linear(xt, p[0].to_local(), p[1].to_local()));
    of::Tensor pred = of::linear(h, p[2].to_local(), p[3].to_local()).argmax(1);
    correct = pred.eq(test.targets()).sum().item<int64_t>();
  }
  if (rank == 0)
    std::printf("%lld steps in %.2f s: %.0f samples/s over %d rank(s), %llu collectives per "
                "step, test accuracy %.4f\n", (long long)steps, secs,
                double(steps * batch) / secs, world, (unsigned long long)comm_per_step,
                double(correct) / double(test.size()));
  return 0;
}

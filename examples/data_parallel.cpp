// data_parallel: an MLP trained on Fashion-MNIST with global tensors (docs/GLOBAL.md).
// Every rank reads the data set and walks the same shuffled order; each global batch is split
// S(0) over the ranks, the parameters are broadcast, and their gradients arrive as partial
// sums that are all-reduced when accumulated. The same program runs on one process or under
//   mpirun -np 2 ./build/examples/data_parallel [steps] [data_dir]      (or -np 4, ...)
// With "hybrid" as the third argument on 4 ranks it trains data x tensor parallel on a 2 x 2
// mesh: mesh axis 0 splits the batch, axis 1 splits the layers Megatron-style (the first
// Linear column-parallel, the second row-parallel), written only as SBPs of the weights:
//   mpirun -np 4 ./build/examples/data_parallel 300 "" hybrid
// With "traced" the training step is recorded once by of::jit::trace and replayed (each rank
// replays its local ops and the recorded collectives: NOTE [Traced boxing]):
//   mpirun -np 2 ./build/examples/data_parallel 300 "" traced
// With "zero" the optimizer is ZeRO's Adam (NOTE [ZeRO]): its moments split over the ranks, the
// gradients left as partial sums by backward and reduce-scattered by the step:
//   mpirun -np 2 ./build/examples/data_parallel 300 "" zero
#include <oneflow/oneflow.h>
#include <oneflow/zero.h>

#include <memory>

#include <chrono>
#include <cstdio>
#include <string>

namespace nn = of::nn;

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::stoll(argv[1]) : 300;
  const std::string dir = argc > 2 && *argv[2] ? argv[2] : of::data::kFashionMnistDir;
  const bool hybrid = argc > 3 && std::string(argv[3]) == "hybrid";
  const bool traced = argc > 3 && std::string(argv[3]) == "traced";
  const bool zero = argc > 3 && std::string(argv[3]) == "zero";
  of::distributed::init();
  const int rank = of::distributed::rank(), world = of::distributed::world_size();
  if (hybrid && world != 4) {
    if (rank == 0)
      std::fprintf(stderr, "hybrid runs on a 2 x 2 mesh: start it with mpirun -np 4\n");
    return 2;
  }
  const of::Sbp B = of::sbp::broadcast(), S0 = of::sbp::split(0), S1 = of::sbp::split(1);
  of::Placement pl = hybrid ? of::Placement("cpu", {{0, 1}, {2, 3}}) : of::Placement::all("cpu");
  const of::NdSbp whole = hybrid ? of::NdSbp{B, B} : of::NdSbp{B};
  const of::NdSbp batch_sbp = hybrid ? of::NdSbp{S0, B} : of::NdSbp{S0};
  // the ranks that split the batch: all of them, or the 2 groups of mesh axis 0
  const int data_ranks = hybrid ? 2 : world, data_rank = hybrid ? rank / 2 : rank;

  of::data::FashionMNIST train(dir, of::data::MNIST::Mode::kTrain);
  of::data::FashionMNIST test(dir, of::data::MNIST::Mode::kTest);
  const double mean = train.data().mean().item<float>(), stdev = train.data().std().item<float>();
  of::Tensor xs = ((train.data() - mean) / stdev).reshape({-1, 784});
  of::Tensor ys = train.targets();

  of::manual_seed(0);  // the same initial parameters on every rank
  auto net = nn::Sequential(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10));
  net->to_global(pl, whole);
  if (hybrid) {  // tensor parallel on axis 1: W1, b1 split by rows (column-parallel), W2 by columns
    of::NoGradGuard ng;
    std::vector<of::Tensor> p = net->parameters();
    p[0].set_data(p[0].to_global(pl, {B, S0}));
    p[1].set_data(p[1].to_global(pl, {B, S0}));
    p[2].set_data(p[2].to_global(pl, {B, S1}));
  }
  std::unique_ptr<of::optim::Optimizer> optimizer;
  if (zero)
    optimizer = std::make_unique<of::distributed::ZeroRedundancyAdam>(net->parameters(),
                                                                      of::optim::AdamOptions(1e-3));
  else
    optimizer = std::make_unique<of::optim::Adam>(net->parameters(), of::optim::AdamOptions(1e-3));
  of::optim::Optimizer& opt = *optimizer;
  if (rank == 0)
    std::printf(
        "%s%s on %d rank(s) (%s), %d thread(s) each: MLP 784-256-10, global batch 128 "
        "split %s\n",
        hybrid ? "data x tensor parallel (2 x 2 mesh)" : "data parallel",
        traced ? ", traced step"
        : zero ? ", ZeRO Adam"
               : "",
        world, of::distributed::backend().c_str(), of::get_num_threads(),
        of::sbp_str(batch_sbp).c_str());
  auto train_step = [&](const of::Tensor& x, const of::Tensor& y) {
    opt.zero_grad();
    of::Tensor loss = of::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  auto traced_step = of::jit::trace(train_step);

  const int64_t batch = 128, n = xs.size(0);
  const int64_t base = batch / data_ranks, extra = batch % data_ranks;
  const int64_t start = data_rank * base + std::min<int64_t>(data_rank, extra),
                len = base + (data_rank < extra);
  of::Tensor order = of::randperm(n);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t comm_before = of::distributed::collectives_issued(), comm_per_step = 0;
  double loss_sum = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t off = (step * batch) % (n - batch);
    of::Tensor idx = order.narrow(0, off + start, len);
    of::Tensor x = xs.index_select(0, idx).to_global(pl, batch_sbp);
    of::Tensor y = ys.index_select(0, idx).to_global(pl, batch_sbp);
    of::Tensor loss = traced ? traced_step(x, y) : train_step(x, y);
    if (step == 0) comm_per_step = of::distributed::collectives_issued() - comm_before;
    loss_sum += loss.item<double>();
    if ((step + 1) % 100 == 0 && rank == 0)
      std::printf("  step %4lld  loss %.4f\n", (long long)step + 1, loss_sum / 100), loss_sum = 0;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // evaluate locally on every rank with the whole parameters (gathered from their pieces)
  int64_t correct = 0;
  {
    of::NoGradGuard ng;
    of::Tensor xt = ((test.data() - mean) / stdev).reshape({-1, 784});
    std::vector<of::Tensor> p;
    for (const of::Tensor& t : net->parameters()) p.push_back(t.to_global(pl, whole).to_local());
    of::Tensor h = of::relu(of::linear(xt, p[0], p[1]));
    of::Tensor pred = of::linear(h, p[2], p[3]).argmax(1);
    correct = pred.eq(test.targets()).sum().item<int64_t>();
  }
  if (rank == 0)
    std::printf(
        "%lld steps in %.2f s: %.0f samples/s over %d rank(s), %llu collectives per "
        "step, test accuracy %.4f\n",
        (long long)steps, secs, double(steps * batch) / secs, world,
        (unsigned long long)comm_per_step, double(correct) / double(test.size()));
  return 0;
}

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
// Checkpoints (docs/GLOBAL.md, "Sharded checkpoints"): `--ckpt-every K --ckpt DIR` saves the
// model, the optimizer, the step, the data order and the generator state every K steps
// (asynchronously: the files are written while training goes on, and published at the next
// save); `--resume DIR` continues from the last complete checkpoint there, so a run killed at
// any point and restarted ends with the same parameters, bitwise, as one never interrupted.
// `--final PATH` writes the final parameters (rank 0, safetensors).
//   mpirun -np 2 ./build/examples/data_parallel 600 "" --ckpt-every 100 --ckpt /tmp/ck
//   mpirun -np 2 ./build/examples/data_parallel 600 "" --ckpt-every 100 --ckpt /tmp/ck \
//     --resume /tmp/ck
#include <oneflow/dist_checkpoint.h>
#include <oneflow/oneflow.h>
#include <oneflow/zero.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace nn = of::nn;

int main(int argc, char** argv) {
  std::vector<std::string> args;  // the positional arguments; the --options are taken out
  int64_t ckpt_every = 0;
  std::string ckpt_dir, resume_dir, final_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--ckpt-every" && has_value) ckpt_every = std::stoll(argv[++i]);
    else if (a == "--ckpt" && has_value) ckpt_dir = argv[++i];
    else if (a == "--resume" && has_value) resume_dir = argv[++i];
    else if (a == "--final" && has_value) final_path = argv[++i];
    else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "unknown or incomplete option %s\n", a.c_str());
      return 2;
    } else args.push_back(a);
  }
  if (ckpt_every > 0 && ckpt_dir.empty()) {
    std::fprintf(stderr, "--ckpt-every needs --ckpt DIR\n");
    return 2;
  }
  const int64_t steps = args.size() > 0 ? std::stoll(args[0]) : 300;
  const std::string dir =
      args.size() > 1 && !args[1].empty() ? args[1] : of::data::kFashionMnistDir;
  const std::string mode = args.size() > 2 ? args[2] : "";
  const bool hybrid = mode == "hybrid", traced = mode == "traced", zero = mode == "zero";
  of::distributed::init();
  const int rank = of::distributed::rank(), world = of::distributed::world_size();
  if (!ckpt_dir.empty()) {  // so that a test can stop one rank mid-run
    std::printf("rank %d pid %d\n", rank, int(getpid()));
    std::fflush(stdout);
  }
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
  int64_t first_step = 0;
  double loss_sum = 0;
  if (!resume_dir.empty()) {
    // the step, the order and the loss sum come back with the model and the optimizer; the
    // generators too (nothing draws here after the order, but a model with dropout would)
    auto extra = of::distributed::load_checkpoint(resume_dir, net, opt, {.random_state = true});
    first_step = extra.at("step").item<int64_t>();
    order = extra.at("order");
    loss_sum = extra.at("loss_sum").item<double>();
    if (rank == 0)
      std::printf("resumed from %s at step %lld\n", resume_dir.c_str(), (long long)first_step);
  }
  of::distributed::CheckpointHandle pending;  // the save being written
  auto t0 = std::chrono::steady_clock::now();
  uint64_t comm_before = of::distributed::collectives_issued(), comm_per_step = 0;
  for (int64_t step = first_step; step < steps; ++step) {
    const int64_t off = (step * batch) % (n - batch);
    of::Tensor idx = order.narrow(0, off + start, len);
    of::Tensor x = xs.index_select(0, idx).to_global(pl, batch_sbp);
    of::Tensor y = ys.index_select(0, idx).to_global(pl, batch_sbp);
    of::Tensor loss = traced ? traced_step(x, y) : train_step(x, y);
    if (step == first_step) comm_per_step = of::distributed::collectives_issued() - comm_before;
    loss_sum += loss.item<double>();
    if ((step + 1) % 100 == 0) {
      if (rank == 0) std::printf("  step %4lld  loss %.4f\n", (long long)step + 1, loss_sum / 100);
      std::fflush(stdout);
      loss_sum = 0;
    }
    if (ckpt_every > 0 && (step + 1) % ckpt_every == 0)  // publishes the previous one first
      pending = of::distributed::save_checkpoint(
          ckpt_dir, net, opt,
          {.async = true,
           .extra = {{"step", of::full({}, step + 1, of::dtype(of::kInt64))},
                     {"order", order},
                     {"loss_sum", of::full({}, loss_sum, of::dtype(of::kFloat64))}}});
  }
  pending.wait();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // evaluate locally on every rank with the whole parameters (gathered from their pieces)
  int64_t correct = 0;
  {
    of::NoGradGuard ng;
    of::Tensor xt = ((test.data() - mean) / stdev).reshape({-1, 784});
    std::vector<of::Tensor> p;
    std::vector<std::pair<std::string, of::Tensor>> named;
    for (const auto& kv : net->named_parameters()) {
      p.push_back(kv.value().to_global(pl, whole).to_local());
      named.emplace_back(kv.key(), p.back());
    }
    if (!final_path.empty() && rank == 0) of::save_tensors(named, final_path);
    of::Tensor h = of::relu(of::linear(xt, p[0], p[1]));
    of::Tensor pred = of::linear(h, p[2], p[3]).argmax(1);
    correct = pred.eq(test.targets()).sum().item<int64_t>();
  }
  if (rank == 0)
    std::printf(
        "%lld steps in %.2f s: %.0f samples/s over %d rank(s), %llu collectives per "
        "step, test accuracy %.4f\n",
        (long long)(steps - first_step), secs, double((steps - first_step) * batch) / secs, world,
        (unsigned long long)comm_per_step, double(correct) / double(test.size()));
  return 0;
}

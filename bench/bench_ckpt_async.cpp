// bench_ckpt_async: what a sharded checkpoint every 100 steps costs a data-parallel training
// run (dist_checkpoint.h), asynchronous and synchronous. The step: the Fashion-MNIST MLP of
// examples/data_parallel (784-256-10, ReLU, cross entropy, Adam; global batch 128 split S(0);
// synthetic inputs of Fashion-MNIST's shape), with the loss read every step as a training loop
// logs it. Windows of 100 steps, interleaved over rounds so that drift hits all alike:
//   none   no checkpoint;
//   async  save_checkpoint(..., {.async = true}) at the window's first step, wait() at its end
//          (the next save would wait there anyway): the copies to host buffers, the background
//          thread's writes and fsyncs competing for the cores, and publishing the index;
//   sync   save_checkpoint(...) at the window's first step.
// Printed: the mean step time of each (ms), the overhead against none (target for async:
// <= 5%), and the save's own time on the training thread.
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ONEFLOW_NUM_THREADS=1
//     mpirun --oversubscribe -np 2 ./build/bench/bench_ckpt_async [rounds] [dir] [hidden]
// (hidden: the MLP's width, 256 by default; a wider one shows what the asynchronous mode hides
// as the checkpoint grows)
#include <oneflow/dist_checkpoint.h>
#include <oneflow/oneflow.h>

#include <filesystem>

#include "bench_util.h"

namespace of = oneflow;
namespace nn = of::nn;
namespace dist = of::distributed;
using of::bench::median;
using of::bench::now_s;

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string dir = argc > 2 ? argv[2] : "/tmp/of_bench_ckpt_async";
  const int64_t hidden = argc > 3 ? std::atoll(argv[3]) : 256;  // 256: the example's MLP
  constexpr int kWindow = 100;
  dist::init();
  const int rank = dist::rank(), world = dist::world_size();
  if (rank == 0) std::filesystem::remove_all(dir);
  dist::barrier();
  of::Placement pl = of::Placement::all("cpu");
  of::manual_seed(0);
  auto net = nn::Sequential(nn::Linear(784, hidden), nn::ReLU(), nn::Linear(hidden, 10));
  int64_t param_elems = 0;
  for (const auto& p : net->parameters()) param_elems += p.numel();
  net->to_global(pl, of::sbp::broadcast());
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-3));
  const int64_t batch = 128;
  const int64_t local = batch / world + (rank < batch % world ? 1 : 0);
  // 8 batches of Fashion-MNIST's shape, cycled
  std::vector<of::Tensor> xs, ys;
  of::manual_seed(1 + uint64_t(rank));
  for (int b = 0; b < 8; ++b) {
    xs.push_back(of::rand({local, 784}).to_global(pl, of::sbp::split(0)));
    ys.push_back(
        of::randint(0, 10, {local}, of::dtype(of::kInt64)).to_global(pl, of::sbp::split(0)));
  }
  int step_no = 0;
  double loss_sum = 0;
  auto step = [&] {
    opt.zero_grad();
    of::Tensor loss = nn::functional::cross_entropy(net->forward(xs[size_t(step_no % 8)]),
                                                    ys[size_t(step_no % 8)]);
    loss.backward();
    opt.step();
    loss_sum += loss.item<double>();
    ++step_no;
  };
  for (int i = 0; i < 20; ++i) step();   // warm-up (the optimizer state exists from here on)
  dist::save_checkpoint(dir, net, opt);  // the directory and page cache warmed alike

  struct Side {
    const char* name;
    std::vector<double> step_ms, save_ms;
  };
  std::vector<Side> sides = {{"none", {}, {}}, {"async", {}, {}}, {"sync", {}, {}}};
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < sides.size(); ++k) {
      Side& s = sides[k];
      dist::barrier();
      double saving = 0;
      const double t0 = now_s();
      dist::CheckpointHandle pending;
      for (int i = 0; i < kWindow; ++i) {
        if (i == 0 && k > 0) {
          const double s0 = now_s();
          pending = dist::save_checkpoint(dir, net, opt, {.async = k == 1});
          saving += now_s() - s0;
        }
        step();
      }
      const double w0 = now_s();
      pending.wait();
      saving += now_s() - w0;
      s.step_ms.push_back((now_s() - t0) * 1e3 / kWindow);
      s.save_ms.push_back(saving * 1e3);
    }
  }
  if (rank == 0) {
    uint64_t bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind("rank-", 0) == 0) bytes += e.file_size();
    std::printf(
        "bench_ckpt_async: MLP 784-%lld-10 (%lld parameters), Adam, global batch 128 over %d "
        "rank(s) x %d thread(s); a checkpoint of %.2f MB (parameters + Adam state, all ranks' "
        "files) every %d steps; medians of %d rounds\n\n",
        (long long)hidden, (long long)param_elems, world, of::get_num_threads(),
        double(bytes) / 1e6, kWindow, rounds);
    const double base = median(sides[0].step_ms);
    std::printf("%-8s %14s %12s %26s\n", "save", "ms per step", "overhead",
                "save on the training thread");
    for (const Side& s : sides)
      std::printf("%-8s %14.3f %11.1f%% %23.1f ms\n", s.name, median(s.step_ms),
                  (median(s.step_ms) / base - 1) * 100, median(s.save_ms));
    std::printf("\nasync overhead target: <= 5%% of the step at one save per %d steps\n", kWindow);
    std::printf("(mean loss over the run %.4f)\n", loss_sum / step_no);
  }
  return 0;
}

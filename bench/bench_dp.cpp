// bench_dp: a data-parallel training step of a Fashion-MNIST CNN (conv 1->32 3x3, ReLU, max
// pool 2, conv 32->64 3x3, ReLU, max pool 2, Linear 3136->128, ReLU, Linear 128->10; Adam;
// global batch 64 split S(0)), with the gradients' all-reduce bucketed and overlapped with the
// rest of backward (NOTE [Bucketed gradient all-reduce]) and without (each gradient all-reduced,
// blocking, when it is accumulated). Both run in the same processes, rounds interleaved:
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ONEFLOW_NUM_THREADS=1
//     mpirun --oversubscribe -np 2 ./build/bench/bench_dp
//   ONEFLOW_NUM_THREADS=2 ./build/bench/bench_dp        # the peer: one process, same batch
// Printed: step time of each, the backward time spent in gradient reduction (what the overlap
// leaves exposed), the share of the blocking version's reduction time the overlap hid, and the
// limit: one raw MPI_Allreduce of all the gradient bytes.
#include <mpi.h>

#include <oneflow/oneflow.h>

#include "bench_util.h"

namespace of = oneflow;
namespace nn = of::nn;
using of::bench::median;
using of::bench::now_s;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
  of::distributed::init();
  const int rank = of::distributed::rank(), world = of::distributed::world_size();
  of::Placement pl = of::Placement::all("cpu");
  of::manual_seed(0);
  auto net = nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(),
                            nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)),
                            nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(3136, 128),
                            nn::ReLU(), nn::Linear(128, 10));
  int64_t param_elems = 0;
  for (const auto& p : net->parameters()) param_elems += p.numel();
  if (world > 1) net->to_global(pl, of::sbp::broadcast());
  of::optim::Adam opt(net->parameters(), of::optim::AdamOptions(1e-3));
  const int64_t batch = 64, local = batch / world;
  of::manual_seed(1 + rank);
  of::Tensor x = of::randn({local, 1, 28, 28}),
             y = of::randint(0, 10, {local}, of::dtype(of::kInt64));
  if (world > 1) {
    x = x.to_global(pl, of::sbp::split(0));
    y = y.to_global(pl, of::sbp::split(0));
  }
  auto step = [&] {
    opt.zero_grad();
    of::Tensor loss = nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
  };
  if (rank == 0)
    std::printf(
        "bench_dp: Fashion-MNIST CNN (%lld parameters), Adam, global batch %lld, %d "
        "rank(s) x %d thread(s), median of %d steps per round, rounds interleaved\n\n",
        (long long)param_elems, (long long)batch, world, of::get_num_threads(), steps);
  if (world == 1) {
    for (int i = 0; i < 3; ++i) step();
    std::vector<double> t;
    for (int i = 0; i < 3 * steps; ++i) {
      const double t0 = now_s();
      step();
      t.push_back(now_s() - t0);
    }
    std::printf("one process: %.2f ms per step, %.0f samples/s\n", median(t) * 1e3,
                double(batch) / median(t));
    return 0;
  }
  struct Side {
    const char* name;
    int64_t bucket;
    std::vector<double> step_s, reduce_s;
  };
  const int64_t cap = of::distributed::grad_bucket_bytes();  // 1 MiB, or $OF_GRAD_BUCKET_BYTES
  const std::string bucketed = "bucketed, overlapped (" + std::to_string(cap >> 10) + " KiB)";
  std::vector<Side> sides = {{bucketed.c_str(), cap, {}, {}},
                             {"blocking, per gradient", 0, {}, {}}};
  for (auto& s : sides) {  // warm-up
    of::distributed::set_grad_bucket_bytes(s.bucket);
    for (int i = 0; i < 3; ++i) step();
  }
  std::vector<float> raw(size_t(param_elems), 1.0f);
  std::vector<double> raw_s;
  for (int round = 0; round < 3; ++round) {
    for (auto& s : sides) {
      of::distributed::set_grad_bucket_bytes(s.bucket);
      for (int i = 0; i < steps; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        of::distributed::reset_grad_reduction_stats();
        const double t0 = now_s();
        step();
        s.step_s.push_back(now_s() - t0);
        s.reduce_s.push_back(of::distributed::grad_reduction_stats().seconds);
      }
    }
    for (int i = 0; i < steps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_s();
      MPI_Allreduce(MPI_IN_PLACE, raw.data(), int(raw.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      raw_s.push_back(now_s() - t0);
    }
  }
  of::distributed::set_grad_bucket_bytes(cap);
  if (rank == 0) {
    std::printf("%-38s %12s %12s %14s\n", "gradient reduction", "step ms", "samples/s",
                "exposed red. ms");
    for (auto& s : sides)
      std::printf("%-38s %12.2f %12.0f %14.3f\n", s.name, median(s.step_s) * 1e3,
                  double(batch) / median(s.step_s), median(s.reduce_s) * 1e3);
    const double hidden = 1.0 - median(sides[0].reduce_s) / median(sides[1].reduce_s);
    std::printf(
        "\nreduction time hidden by the overlap: %.0f%% (target >= 50%%); step %.2fx "
        "faster than blocking\nlimit: one raw MPI_Allreduce of all %lld gradient "
        "floats: %.3f ms\n",
        hidden * 100, median(sides[1].step_s) / median(sides[0].step_s), (long long)param_elems,
        median(raw_s) * 1e3);
  }
  return 0;
}

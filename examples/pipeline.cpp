// pipeline: an MLP trained on Fashion-MNIST in two pipeline stages (docs/GLOBAL.md, NOTE
// [Pipeline 1F1B]). Stage 0 (Linear 784->256, ReLU) runs on the first half of the ranks,
// stage 1 (Linear 256->10 and the loss) on the second half; each global batch of 128 is cut
// into 4 micro-batches scheduled one-forward-one-backward, activations and their gradients
// sent point to point between the stages. With 4 ranks each stage is also data parallel over
// its 2 ranks (rank k of stage 0 feeds rank k of stage 1).
//   mpirun -np 2 ./build/examples/pipeline [steps] [data_dir]        (or -np 4)
#include <oneflow/oneflow.h>
#include <oneflow/pipeline.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace nn = of::nn;

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::stoll(argv[1]) : 300;
  const std::string dir = argc > 2 && *argv[2] ? argv[2] : of::data::kFashionMnistDir;
  of::distributed::init();
  const int rank = of::distributed::rank(), world = of::distributed::world_size();
  if (world % 2 != 0) {
    if (rank == 0)
      std::fprintf(stderr, "two stages need an even number of ranks (mpirun -np 2 or 4)\n");
    return 2;
  }
  const int per_stage = world / 2;
  std::vector<int> r0, r1;
  for (int k = 0; k < per_stage; ++k) r0.push_back(k), r1.push_back(per_stage + k);
  of::Placement p0("cpu", r0), p1("cpu", r1);

  of::data::FashionMNIST train(dir, of::data::MNIST::Mode::kTrain);
  of::data::FashionMNIST test(dir, of::data::MNIST::Mode::kTest);
  const double mean = train.data().mean().item<float>(), stdev = train.data().std().item<float>();
  of::Tensor xs = ((train.data() - mean) / stdev).reshape({-1, 784});
  of::Tensor ys = train.targets();

  of::manual_seed(0);  // the same initial parameters as data_parallel's MLP
  auto stage0 = nn::Sequential(nn::Linear(784, 256), nn::ReLU());
  auto stage1 = nn::Sequential(nn::Linear(256, 10));
  of::distributed::Pipeline pipe(
      {[&](const of::Tensor& x) { return stage0->forward(x); },
       [&](const of::Tensor& h) { return stage1->forward(h); }},
      {p0, p1},
      [](const of::Tensor& out, const of::Tensor& y) {
        return of::nn::functional::cross_entropy(out, y);
      },
      /*micro_batches=*/4);
  auto& mine = pipe.stage() == 0 ? stage0 : stage1;
  mine->to_global(pipe.stage() == 0 ? p0 : p1, of::sbp::broadcast());  // only this rank's stage
  of::optim::Adam opt(mine->parameters(), of::optim::AdamOptions(1e-3));
  if (rank == 0)
    std::printf(
        "pipeline: 2 stages x %d rank(s), %d thread(s) each: MLP 784-256 | 256-10, global "
        "batch 128 in 4 micro-batches (1F1B)\n",
        per_stage, of::get_num_threads());

  const int64_t batch = 128, n = xs.size(0), local = batch / per_stage;
  const int k = rank % per_stage;  // rank k of each stage works on the k-th piece of the batch
  of::Tensor order = of::randperm(n);
  auto t0 = std::chrono::steady_clock::now();
  double loss_sum = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t off = (step * batch) % (n - batch);
    of::Tensor idx = order.narrow(0, off + k * local, local);
    opt.zero_grad();
    of::Tensor loss = pipe.step(xs.index_select(0, idx), ys.index_select(0, idx));
    opt.step();
    if (pipe.stage() == 1) loss_sum += loss.item<double>();
    if ((step + 1) % 100 == 0 && rank == per_stage)  // the first rank of the last stage
      std::printf("  step %4lld  loss %.4f\n", (long long)step + 1, loss_sum / 100), loss_sum = 0;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == per_stage) std::printf("  schedule of stage 1: %s\n", pipe.last_schedule().c_str());
  if (rank == 0)
    std::printf("  schedule of stage 0: %s (%lld micro-batches held at most)\n",
                pipe.last_schedule().c_str(), (long long)pipe.max_in_flight());
  // evaluate through the stages (forward only): the last stage's ranks get the logits
  of::Tensor xt = ((test.data() - mean) / stdev).reshape({-1, 784});
  const int64_t nt = xt.size(0) / per_stage;
  of::Tensor logits = pipe.predict(xt.narrow(0, k * nt, nt));
  if (pipe.stage() == 1) {
    const int64_t correct =
        logits.argmax(1).eq(test.targets().narrow(0, k * nt, nt)).sum().item<int64_t>();
    if (rank == per_stage)
      std::printf("  test accuracy (rank %d's %lld images) %.4f\n", rank, (long long)nt,
                  double(correct) / double(nt));
  }
  of::distributed::barrier();
  if (rank == 0)
    std::printf("%lld steps in %.2f s: %.0f samples/s over %d rank(s)\n", (long long)steps, secs,
                double(steps * batch) / secs, world);
  return 0;
}

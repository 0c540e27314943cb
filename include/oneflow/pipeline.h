// pipeline.h: pipeline-parallel training: a model cut into stages, each stage on its own
// placement, micro-batches scheduled one-forward-one-backward (1F1B). `#include
// <oneflow/pipeline.h>` (docs/GLOBAL.md, NOTE [Pipeline 1F1B]).
//
//   of::Placement p0("cpu", {0}), p1("cpu", {1});
//   of::distributed::Pipeline pipe(
//       {[&](const of::Tensor& x) { return stage0->forward(x); },
//        [&](const of::Tensor& h) { return stage1->forward(h); }},
//       {p0, p1}, [](const of::Tensor& out, const of::Tensor& y) { return F::cross_entropy(out, y);
//       },
//       /*micro_batches=*/4);
//   if (pipe.stage() == 0) stage0->to_global(p0, of::sbp::broadcast());  // a rank places only
//   if (pipe.stage() == 1) stage1->to_global(p1, of::sbp::broadcast());  // its own stage
//   of::optim::Adam opt(pipe.stage() == 0 ? stage0->parameters() : stage1->parameters());
//   opt.zero_grad();                                    // every rank: its own stage's parameters
//   of::Tensor loss = pipe.step(x, y);                  // forward + backward of the whole batch
//   opt.step();
//
// Every rank runs the same program; a rank runs only its own stage. Stage s receives its input
// from stage s - 1 and sends its output to stage s + 1 point to point (rank k of a stage talks
// to rank k of the next: stages have the same number of ranks, and a stage of several ranks is
// data parallel inside, its pieces split S(0)); the last stage computes the loss. Gradients of
// each stage's parameters are accumulated over the micro-batches (each micro-batch's loss is
// divided by their number), as gradient accumulation of the same micro-batches in one process.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "oneflow/global.h"

namespace oneflow::distributed {

class Pipeline {
 public:
  using Stage = std::function<Tensor(const Tensor&)>;
  using Loss = std::function<Tensor(const Tensor& output, const Tensor& target)>;
  // stages[s] runs on placements[s]: 1-D, disjoint, all with the same number of ranks.
  Pipeline(std::vector<Stage> stages, std::vector<Placement> placements, Loss loss,
           int64_t micro_batches = 4);

  // One training step over this rank's batch, cut into micro-batches along dim 0: `x` is read
  // on the first stage's ranks and `target` on the last stage's (rank k of each stage holds the
  // k-th piece of the global batch; the other argument may be undefined). Returns the loss
  // summed over the micro-batches (each divided by their number: the mean loss) on the last
  // stage's ranks as a local 0-d tensor, an undefined tensor on the others.
  Tensor step(const Tensor& x, const Tensor& target);

  // Inference: `x` (read on the first stage's ranks) runs forward through every stage in one
  // piece, without gradients; the last stage's ranks get its output (local), the others an
  // undefined tensor.
  Tensor predict(const Tensor& x);

  int stage() const { return stage_; }  // this rank's stage (-1: none)
  int num_stages() const { return int(stages_.size()); }
  int64_t micro_batches() const { return micro_batches_; }
  // The most micro-batches whose activations this rank held at once in the last step (1F1B:
  // at most min(stages - stage, micro_batches)).
  int64_t max_in_flight() const { return max_in_flight_; }
  // This rank's schedule in the last step, e.g. "F0 F1 B0 F2 B1 F3 B2 B3" for stage 0 of 2.
  const std::string& last_schedule() const { return schedule_; }

 private:
  std::vector<Stage> stages_;
  std::vector<Placement> placements_;
  Loss loss_;
  int64_t micro_batches_;
  int stage_ = -1, position_ = -1;  // this rank's stage and its index among the stage's ranks
  int64_t max_in_flight_ = 0;
  std::string schedule_;
};

}  // namespace oneflow::distributed

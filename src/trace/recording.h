// recording.h (internal): recording one eager call into a Graph (recorder.cpp).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trace/graph.h"

namespace oneflow::trace {

struct Recording {
  Graph graph;
  std::vector<Tensor> outputs;  // what the eager call returned (detached)
  std::string not_committable;  // why this recording cannot become a graph (empty: it can)
  size_t eager_peak_bytes = 0;
  double ms = 0;
};
using EagerFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// Runs fn once eagerly on `inputs` while recording it.
Recording record(const EagerFn& fn, const std::vector<Tensor>& inputs);
bool recording();
// Makes the call being recorded (if any) run eagerly only, the next call recording again, and
// lets the rest of it read tensor data on the host: for a call that cannot be a graph anyway
// (it creates optimizer state) but must read to stay exact (GradScaler's first skipped step).
void give_up_recording(std::string why);
// A 0-d float64 CPU tensor holding `value` (made without dispatch). While recording it is a
// root that every replay refreshes from `getter` (an error once `owner` has died): how
// optimizers hand the learning rate of a schedule to a traced step.
Tensor host_scalar(double value, std::function<double()> getter, std::weak_ptr<void> owner);

}  // namespace oneflow::trace

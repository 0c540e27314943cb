// zero.h: ZeRO (stage 1) for data-parallel training on global tensors: Adam whose moments are
// split over the data-parallel ranks instead of repeated on each. `#include <oneflow/zero.h>`.
//
//   model->to_global(pl, of::sbp::broadcast());                 // data parallel
//   of::distributed::ZeroRedundancyAdam opt(model->parameters(), of::optim::AdamOptions(1e-3));
//   ... loss.backward(); opt.step();                             // as with of::optim::Adam
//
// NOTE [ZeRO]: at each step the parameters of a group (every one with a gradient) are viewed
// as one flat vector of `total` elements; the optimizer state is that vector split S(0) over
// the placement (balanced pieces: at most ceil(total / ranks) elements per rank and buffer).
// The parameters keep their gradients as partial sums (backward reduces nothing for them;
// `p.grad()` still reads as the summed gradient). The update slices this rank's piece of the
// (broadcast) parameters, takes its piece of the group's gradients with one reduce-scatter,
// runs Adam's arithmetic on the pieces (the same elementwise operations in the same order as
// of::optim::Adam), and all-gathers the new parameters once per group: a reduce-scatter and an
// all-gather per step, 2(n-1)/n of the group's bytes each way instead of the 3(n-1)/n an
// all-reduce and the all-gather take. Parameters must be global and broadcast on every mesh
// axis (data parallel).
#pragma once
#include "oneflow/global.h"
#include "oneflow/optim.h"

namespace oneflow::distributed {

class ZeroRedundancyAdam : public optim::Optimizer {
 public:
  ZeroRedundancyAdam(std::vector<optim::OptimizerParamGroup> groups,
                     optim::AdamOptions defaults = {});
  ZeroRedundancyAdam(std::vector<Tensor> params, optim::AdamOptions defaults = {})
      : ZeroRedundancyAdam(
            std::vector<optim::OptimizerParamGroup>{optim::OptimizerParamGroup(std::move(params))},
            defaults) {}
  Tensor step(optim::LossClosure closure = nullptr) override;
  std::vector<Tensor> update_targets() const override;
  bool has_state(const Tensor& p) const override;
  void drop_state(const Tensor& p) override;
  // Bytes of optimizer state (moments) this rank holds.
  int64_t local_state_bytes() const;
  // The split state of each parameter group, for sharded checkpoints (dist_checkpoint.h): the
  // parameters of the group's flat vector in order, the step count (0-d float64) and the
  // buffers (global [total] tensors, S(0) on every mesh axis); empty for a group that has not
  // stepped. set_split_state replaces every group's state (the loader has checked it).
  struct SplitState {
    std::vector<Tensor> params;
    Tensor step;
    std::vector<std::pair<std::string, Tensor>> buffers;
  };
  std::vector<SplitState> split_state() const;
  void set_split_state(const std::vector<SplitState>& state);

 private:
  void keep_partial_grads();
  struct GroupState {
    std::vector<const TensorImpl*> layout;  // the parameters of the flat vector, in order
    ParamState state;                       // step and the split moments
  };
  std::vector<GroupState> zero_;
};

}  // namespace oneflow::distributed

// pipeline.cpp: of::distributed::Pipeline (include/oneflow/pipeline.h).
//
// NOTE [Pipeline 1F1B]: with S stages and M micro-batches, stage s first runs
// w = min(S - 1 - s, M) forwards (warm-up), then alternates one forward and one backward until
// every forward has run, then runs the w backwards left (cool-down). Micro-batches finish in
// the order they started, so a stage holds at most w + 1 micro-batches of activations (the
// first stage min(S, M)), where running all forwards before any backward would hold M.
// Activations go forward and gradients backward point to point, rank k of stage s to rank k of
// stage s +- 1: a header (dtype, sizes) and the data, both sent without waiting (MPI_Isend),
// so the sender goes on computing while the message travels; the receiver waits for it where
// it needs it. Every message of a step has its own tag (micro-batch, direction, part), and MPI
// delivers messages of one tag between two ranks in order, so steps cannot mix. A stage's
// input is a leaf of its backward: the gradient that reaches it is what goes back to stage
// s - 1. Parameters' gradients accumulate in `.grad` over the micro-batches (the bucketed
// all-reduce of a data-parallel stage runs at every micro-batch's backward).
#include "oneflow/pipeline.h"

#include <deque>

#include "global/global.h"

namespace oneflow::distributed {
namespace {

constexpr int kMaxDims = 8;
enum Kind { kActivation = 0, kGradient = 1 };
int tag_of(int64_t micro, Kind kind, int part) { return int((micro * 2 + kind) * 2 + part); }

struct Send {
  std::unique_ptr<global::CommRequest> header, data;
  std::vector<int64_t> head;  // kept until the header has gone
  Tensor keep;                // the data, likewise
};

Send send_tensor(global::Communicator& w, const Tensor& t, int dst, int64_t micro, Kind kind,
                 const char* op) {
  Send q;
  q.keep = t.contiguous();
  if (q.keep.dim() > kMaxDims)
    fail("[{}] a {}-D tensor between stages (at most {})", op, q.keep.dim(), kMaxDims);
  q.head.assign(size_t(kMaxDims + 2), 0);
  q.head[0] = int64_t(q.keep.dtype());
  q.head[1] = q.keep.dim();
  for (int64_t d = 0; d < q.keep.dim(); ++d) q.head[size_t(d) + 2] = q.keep.size(d);
  q.header =
      w.isend(q.head.data(), int64_t(q.head.size() * sizeof(int64_t)), dst, tag_of(micro, kind, 0));
  q.data = w.isend(q.keep.data_ptr(), int64_t(q.keep.nbytes()), dst, tag_of(micro, kind, 1));
  return q;
}

Tensor recv_tensor(global::Communicator& w, int src, int64_t micro, Kind kind) {
  std::vector<int64_t> head(size_t(kMaxDims + 2));
  w.recv(head.data(), int64_t(head.size() * sizeof(int64_t)), src, tag_of(micro, kind, 0));
  DimVector sizes(head.begin() + 2, head.begin() + 2 + head[1]);
  Tensor t = empty(sizes, TensorOptions().dtype(ScalarType(head[0])));
  w.recv(t.data_ptr(), int64_t(t.nbytes()), src, tag_of(micro, kind, 1));
  return t;
}

// Stage s on its input; its result must be a global tensor on the stage's placement.
Tensor run_stage(const Pipeline::Stage& fn, const Tensor& in, int s, const Placement& pl,
                 const char* op) {
  Tensor out = fn(in);
  if (!out.defined() || !out.is_global() || !(out.placement() == pl))
    fail("[{}] stage {} must return a global tensor on its placement {}", op, s, pl.str());
  return out;
}

void wait_all(std::vector<Send>& sends) {
  for (Send& q : sends) {
    if (q.header) q.header->wait();
    if (q.data) q.data->wait();
  }
}

}  // namespace

Pipeline::Pipeline(std::vector<Stage> stages, std::vector<Placement> placements, Loss loss,
                   int64_t micro_batches)
    : stages_(std::move(stages)),
      placements_(std::move(placements)),
      loss_(std::move(loss)),
      micro_batches_(micro_batches) {
  const char* op = "distributed::Pipeline";
  if (stages_.empty()) fail("[{}] needs at least one stage", op);
  if (placements_.size() != stages_.size())
    fail("[{}] got {} stages and {} placements: one placement per stage", op, stages_.size(),
         placements_.size());
  if (micro_batches_ < 1) fail("[{}] micro_batches must be >= 1, got {}", op, micro_batches_);
  if (!loss_) fail("[{}] needs a loss function", op);
  const int world = world_size(), me = rank();
  std::vector<int> owner(size_t(world), -1);
  for (size_t s = 0; s < placements_.size(); ++s) {
    const Placement& p = placements_[s];
    if (!stages_[s]) fail("[{}] stage {} has no function", op, s);
    if (p.device_type() != kCPU)
      fail(
          "[{}] stage {} is on {}: stages pass activations with MPI point to point from host "
          "memory, and CUDA stages (NCCL send/recv between stages) are not built; use CPU "
          "placements for pipelines",
          op, s, p.str());
    if (p.ndim() != 1)
      fail(
          "[{}] stage {}'s placement {} must be 1-D (a stage of several ranks is data "
          "parallel inside)",
          op, s, p.str());
    if (p.ranks().size() != placements_[0].ranks().size())
      fail(
          "[{}] every stage needs the same number of ranks: stage 0 has {} ({}), stage {} has "
          "{} ({})",
          op, placements_[0].ranks().size(), placements_[0].str(), s, p.ranks().size(), p.str());
    for (int r : p.ranks()) {
      if (r < 0 || r >= world)
        fail("[{}] stage {}'s placement {} names rank {}, outside the world of {}", op, s, p.str(),
             r, world);
      if (owner[size_t(r)] >= 0)
        fail(
            "[{}] rank {} is in the placements of stages {} and {}: stages need disjoint "
            "placements",
            op, r, owner[size_t(r)], s);
      owner[size_t(r)] = int(s);
    }
  }
  stage_ = owner[size_t(me)];
  if (stage_ >= 0) {
    const auto& rs = placements_[size_t(stage_)].ranks();
    position_ = int(std::find(rs.begin(), rs.end(), me) - rs.begin());
  }
}

Tensor Pipeline::step(const Tensor& x, const Tensor& target) {
  schedule_.clear();
  max_in_flight_ = 0;
  if (stage_ < 0) return {};
  const char* op = "distributed::Pipeline::step";
  const int S = num_stages(), s = stage_;
  const int64_t M = micro_batches_;
  const bool first = s == 0, last = s == S - 1;
  const Placement& pl = placements_[size_t(s)];
  const Sbp S0 = sbp::split(0);
  auto chunks = [&](const Tensor& t, const char* what) {
    if (!t.defined()) fail("[{}] stage {} needs {} (undefined)", op, s, what);
    if (t.is_global())
      fail("[{}] {} must be this rank's local batch, got a global tensor", op, what);
    if (t.dim() == 0 || t.size(0) % M != 0)
      fail("[{}] {} of shape {} does not cut into {} micro-batches along dim 0", op, what,
           shape_str(t.sizes()), M);
    return t.chunk(M, 0);
  };
  std::vector<Tensor> xs, ts;
  if (first) xs = chunks(x, "x");
  if (last) ts = chunks(target, "target");
  global::Communicator& w = global::world();
  const int prev = first ? -1 : placements_[size_t(s) - 1].ranks()[size_t(position_)];
  const int next = last ? -1 : placements_[size_t(s) + 1].ranks()[size_t(position_)];
  std::vector<Send> sends;
  auto poll_sends = [&] {
    for (Send& q : sends) {
      if (q.header && q.header->test()) q.header.reset();
      if (q.data && q.data->test()) q.data.reset();
    }
  };
  struct InFlight {
    Tensor input, output;  // the stage's input leaf (stage > 0) and its output (or the loss)
  };
  std::deque<InFlight> flight;
  Tensor loss_sum;
  int64_t forwards = 0, backwards = 0;
  auto forward = [&] {
    const int64_t m = forwards++;
    schedule_ += (schedule_.empty() ? "F" : " F") + std::to_string(m);
    InFlight f;
    if (first) {
      f.input = xs[size_t(m)].to_global(pl, S0);
    } else {
      f.input = recv_tensor(w, prev, m, kActivation).to_global(pl, S0).detach().requires_grad_();
    }
    Tensor out = run_stage(stages_[size_t(s)], f.input, s, pl, op);
    if (last) {
      f.output = loss_(out, ts[size_t(m)].to_global(pl, S0)) / double(M);
      if (f.output.numel() != 1)
        fail("[{}] the loss must be a scalar, got shape {}", op, shape_str(f.output.sizes()));
      Tensor l = f.output.detach();
      loss_sum = loss_sum.defined() ? loss_sum + l : l;
    } else {
      f.output = out.to_global(pl, S0);
      sends.push_back(send_tensor(w, f.output.to_local(), next, m, kActivation, op));
    }
    flight.push_back(std::move(f));
    max_in_flight_ = std::max<int64_t>(max_in_flight_, int64_t(flight.size()));
    poll_sends();
  };
  auto backward = [&] {
    const int64_t m = backwards++;
    schedule_ += " B" + std::to_string(m);
    InFlight f = std::move(flight.front());
    flight.pop_front();
    if (last) {
      f.output.backward();
    } else {
      Tensor g = recv_tensor(w, next, m, kGradient).to_global(pl, S0);
      f.output.backward(g);
    }
    if (!first) {
      Tensor gi = f.input.grad();
      if (!gi.defined())
        fail("[{}] stage {}'s output does not depend on its input: no gradient for stage {}", op, s,
             s - 1);
      sends.push_back(send_tensor(w, gi.to_global(pl, S0).to_local(), prev, m, kGradient, op));
    }
    poll_sends();
  };
  const int64_t warm = std::min<int64_t>(S - 1 - s, M);
  for (int64_t i = 0; i < warm; ++i) forward();
  for (int64_t i = warm; i < M; ++i) {
    forward();
    backward();
  }
  while (backwards < M) backward();
  wait_all(sends);
  if (!last) return {};
  return loss_sum.to_global(pl, NdSbp{sbp::broadcast()}).to_local();
}

Tensor Pipeline::predict(const Tensor& x) {
  if (stage_ < 0) return {};
  const char* op = "distributed::Pipeline::predict";
  NoGradGuard ng;
  const int S = num_stages(), s = stage_;
  const Placement& pl = placements_[size_t(s)];
  global::Communicator& w = global::world();
  // micro-batch numbers past any step's, so a prediction never matches a step's messages
  const int64_t tag_micro = micro_batches_;
  Tensor in;
  if (s == 0) {
    if (!x.defined() || x.is_global())
      fail("[{}] the first stage needs this rank's local input (a defined local tensor)", op);
    in = x.to_global(pl, sbp::split(0));
  } else {
    in = recv_tensor(w, placements_[size_t(s) - 1].ranks()[size_t(position_)], tag_micro,
                     kActivation)
             .to_global(pl, sbp::split(0));
  }
  Tensor out = run_stage(stages_[size_t(s)], in, s, pl, op);
  Tensor piece = out.to_global(pl, sbp::split(0)).to_local();
  if (s == S - 1) return piece;
  std::vector<Send> sends;
  sends.push_back(send_tensor(w, piece, placements_[size_t(s) + 1].ranks()[size_t(position_)],
                              tag_micro, kActivation, op));
  wait_all(sends);
  return {};
}

}  // namespace oneflow::distributed

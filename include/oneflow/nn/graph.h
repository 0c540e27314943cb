// nn/graph.h: of::nn::Graph, OneFlow's static-graph interface over of::jit::trace. Subclass it
// (passing yourself as the template argument), write `build(...)` with the model's forward
// (and `loss.backward()` for training), register optimizers with add_optimizer, and call the
// graph: the first call with a new signature records, later calls replay. With optimizers
// added, every call ends with their step() and zero_grad() inside the graph, and the
// schedulers step after the call (their lr reaches the replay through the optimizers).
//
//   struct TrainGraph : of::nn::Graph<TrainGraph> {
//     TrainGraph(Net net, of::optim::Adam& opt) : net(net) { add_optimizer(opt); }
//     of::Tensor build(const of::Tensor& x, const of::Tensor& y) {
//       auto loss = F::cross_entropy(net->forward(x), y);
//       loss.backward();
//       return loss;
//     }
//     Net net;
//   };
#pragma once
#include <vector>

#include "oneflow/jit.h"
#include "oneflow/optim.h"

namespace oneflow::nn {

// Per-graph switches (OneFlow's graph.config): passes and caching of the underlying trace.
struct GraphConfig {
  jit::TraceOptions options;
  GraphConfig& enable_fuse(bool v) {
    options.fuse(v);
    return *this;
  }
  GraphConfig& enable_memplan(bool v) {
    options.memplan(v);
    return *this;
  }
  GraphConfig& enable_cse(bool v) {
    options.cse(v);
    return *this;
  }
  GraphConfig& enable_dce(bool v) {
    options.dce(v);
    return *this;
  }
  GraphConfig& enable_fold(bool v) {
    options.fold(v);
    return *this;
  }
  GraphConfig& enable_inplace(bool v) {
    options.inplace(v);
    return *this;
  }
  GraphConfig& enable_remat(bool v) {
    options.remat(v);
    return *this;
  }
  GraphConfig& enable_schedule(bool v) {
    options.schedule(v);
    return *this;
  }
  GraphConfig& strict(bool v) {
    options.strict(v);
    return *this;
  }
  GraphConfig& verbose(bool v) {
    options.verbose(v);
    return *this;
  }
};

template <class Derived> class Graph {
 public:
  GraphConfig config;

  // The optimizer's step() and zero_grad() run at the end of every call, inside the graph;
  // the scheduler (optional) steps after each call.
  void add_optimizer(optim::Optimizer& optimizer, optim::LRScheduler* scheduler = nullptr) {
    optimizers_.push_back(&optimizer);
    if (scheduler) schedulers_.push_back(scheduler);
  }

  template <class... A> auto operator()(A&&... args) {
    using Body = decltype(make_body());
    if (!traced_) traced_ = std::make_shared<Holder<Body>>(make_body(), config.options);
    auto r = static_cast<Holder<Body>*>(traced_.get())->fn(std::forward<A>(args)...);
    for (optim::LRScheduler* s : schedulers_) s->step();
    return r;
  }

  std::string graph() const { return traced_ ? traced_->graph() : "graph: not built yet\n"; }
  jit::TraceStats stats() const { return traced_ ? traced_->stats() : jit::TraceStats{}; }

 private:
  struct HolderBase {
    virtual ~HolderBase() = default;
    virtual std::string graph() const = 0;
    virtual jit::TraceStats stats() const = 0;
  };
  template <class F> struct Holder : HolderBase {
    Holder(F f, const jit::TraceOptions& o) : fn(std::move(f), o) {}
    std::string graph() const override { return fn.graph(); }
    jit::TraceStats stats() const override { return fn.stats(); }
    jit::TracedFunction<F> fn;
  };
  auto make_body() {
    return [this](auto&&... a) {
      auto r = static_cast<Derived*>(this)->build(a...);
      for (optim::Optimizer* o : optimizers_) {
        o->step();
        o->zero_grad();
      }
      return r;
    };
  }
  std::shared_ptr<HolderBase> traced_;
  std::vector<optim::Optimizer*> optimizers_;
  std::vector<optim::LRScheduler*> schedulers_;
};

}  // namespace oneflow::nn

// test_cuda_global.cpp: global CUDA tensors over NCCL (NOTE [NCCL communicator], NOTE [Device
// communicators]). The machine that lends a GPU has one, so NCCL runs with one rank here (every
// conversion that moves data still goes through an NCCL call); the multi-rank boxing logic is
// the CPU one, tested under mpirun. Cases needing a device skip cleanly without one.
#include <doctest/doctest.h>

#include "cuda_test_util.h"

#include <oneflow/oneflow.h>
#include <oneflow/pipeline.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "global/global.h"

namespace of = oneflow;
using namespace cuda_test;

namespace {

using NdSbp = of::NdSbp;

std::vector<NdSbp> one_axis_sbps() {
  return {
      {of::sbp::split(0)}, {of::sbp::split(1)}, {of::sbp::broadcast()}, {of::sbp::partial_sum()}};
}

// x placed under `from` then converted to `to`, as the local piece (on the host).
of::Tensor convert(const of::Tensor& x, const of::Placement& pl, const NdSbp& from,
                   const NdSbp& to) {
  return x.to_global(pl, from).to_global(pl, to).to_local().cpu();
}

}  // namespace

TEST_CASE("cuda global: the module links NCCL when meson found it") {
  const std::string v = of::cuda_backend::nccl_version();
#if ONEFLOW_TEST_EXPECT_NCCL
  INFO("nccl version: '" << v << "'");
  REQUIRE(!v.empty());
  CHECK(v.rfind("2.", 0) == 0);
  CHECK(std::count(v.begin(), v.end(), '.') == 2);
#else
  CHECK(v.empty());
#endif
}

TEST_CASE("cuda global: pipelines refuse CUDA stages with a clear error") {
  using P = of::distributed::Pipeline;
  P::Stage id = [](const of::Tensor& t) { return t; };
  P::Loss loss = [](const of::Tensor& o, const of::Tensor&) { return o.sum(); };
  const std::string e = error_of([&] { P p({id}, {of::Placement("cuda", {0})}, loss, 1); });
  CHECK(e.find("stage 0 is on Placement(cuda") != std::string::npos);
  CHECK(e.find("not built") != std::string::npos);
}

TEST_CASE("cuda global: every one-axis conversion over NCCL equals the CPU's, bitwise") {
  SKIP_WITHOUT_CUDA();
  REQUIRE(!of::cuda_backend::nccl_version().empty());
  of::manual_seed(11);
  const of::Placement cpu("cpu", {0}), gpu("cuda", {0});
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64, of::kFloat16, of::kInt64}) {
    const of::Tensor x = (of::randn({6, 5}) * 4.0).to(dt);
    for (const NdSbp& from : one_axis_sbps())
      for (const NdSbp& to : one_axis_sbps()) {
        INFO(int(dt) << ": " << of::sbp_str(from) << " -> " << of::sbp_str(to));
        const of::Tensor want = convert(x, cpu, from, to);
        const of::Tensor got = convert(x.to(kCuda0), gpu, from, to);
        REQUIRE(got.sizes() == want.sizes());
        CHECK(got.to_vector<double>() == want.to_vector<double>());
      }
  }
  // the data went through the NCCL communicator of the placement's axis
  of::global::Communicator& c = of::global::axis_data_comm(gpu, 0, kCuda0);
  CHECK(c.backend() == "nccl");
  CHECK(c.size() == 1);
  const uint64_t before = c.stats().allgather + c.stats().allreduce;
  (void)convert(of::randn({4, 3}).to(kCuda0), gpu, {of::sbp::split(0)}, {of::sbp::broadcast()});
  (void)convert(of::randn({4, 3}).to(kCuda0), gpu, {of::sbp::partial_sum()},
                {of::sbp::broadcast()});
  CHECK(c.stats().allgather + c.stats().allreduce == before + 2);
  // a CPU tensor keeps the host communicator
  CHECK(of::global::axis_data_comm(cpu, 0, of::Device("cpu")).backend() == "self");
}

TEST_CASE("cuda global: a 2-D mesh, autograd and a traced step on global CUDA tensors") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(12);
  const of::Placement cpu("cpu", std::vector<std::vector<int>>{{0}});
  const of::Placement gpu("cuda", std::vector<std::vector<int>>{{0}});
  const NdSbp xs{of::sbp::split(0), of::sbp::broadcast()};
  const NdSbp ws{of::sbp::broadcast(), of::sbp::split(0)};
  const of::Tensor x = of::randn({8, 6}), w = of::randn({4, 6});
  auto run = [&](const of::Placement& pl, of::Device dev) {
    of::Tensor leaf = w.to(dev).detach().requires_grad_();
    of::Tensor xg = x.to(dev).to_global(pl, xs);
    of::Tensor y = of::linear(xg, leaf.to_global(pl, ws));
    of::Tensor loss = (of::tanh(y) * y).sum();
    loss.backward();
    return std::make_pair(loss.to_local().cpu(), leaf.grad().cpu());
  };
  auto [lc, gc] = run(cpu, of::Device("cpu"));
  auto [lg, gg] = run(gpu, kCuda0);
  check_close(lg.to(kCuda0), lc, 1e-5);
  check_close(gg.to(kCuda0), gc, 1e-5);
  // traced: a step of global CUDA tensors replays equal to eager, boxing nodes included
  const of::Tensor xg = x.to(kCuda0).to_global(gpu, xs);
  const of::Tensor wg = w.to(kCuda0).to_global(gpu, ws);
  auto body = [](const of::Tensor& a, const of::Tensor& b) {
    return of::linear(a, b)
        .to_global(b.placement(), NdSbp{of::sbp::broadcast(), of::sbp::broadcast()})
        .sum(1);
  };
  auto step = of::jit::trace(body);
  const std::vector<double> eager = body(xg, wg).to_local().cpu().to_vector<double>();
  for (int k = 0; k < 4; ++k) CHECK(step(xg, wg).to_local().cpu().to_vector<double>() == eager);
  CHECK(step.stats().replays == 3);
}

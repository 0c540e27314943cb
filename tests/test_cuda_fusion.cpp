// test_cuda_fusion.cpp: fused elementwise groups as kernels generated at run time
// (trace/fusion_codegen.cpp, src/cuda/fusion.cpp). The first cases run everywhere: real groups of
// traced CPU steps become sources that NVRTC compiles (through the CUDA module, which loads
// without a device; skipped when the module or NVRTC is missing), and an op without a generated
// form is refused by name. The last case needs a device: a traced CUDA step with fused groups
// replays bitwise equal to eager, its groups running as generated kernels.
#include <doctest/doctest.h>

#include "cuda_test_util.h"

#include <oneflow/oneflow.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "trace/fusion_codegen.h"
#include "trace/graph.h"
#include "trace/passes.h"
#include "trace/recording.h"

namespace of = oneflow;
using namespace cuda_test;

namespace {

using Fn = std::function<std::vector<of::Tensor>(const std::vector<of::Tensor>&)>;

// The graph of one call of fn after the passes that shape fused groups.
of::trace::Graph fused_graph(const Fn& fn, const std::vector<of::Tensor>& in) {
  of::trace::Graph g = of::trace::record(fn, in).graph;
  return of::trace::fuse(of::trace::remat(of::trace::fold(of::trace::cse(of::trace::dce(g)))));
}

// NVRTC's log for source (compiled to PTX for sm_90), or null when NVRTC cannot be reached here
// (no CUDA module built, or it or libnvrtc does not load).
std::optional<std::string> nvrtc_log(const of::trace::FusedKernelSource& k) {
  if (!of::cuda_backend::built()) return std::nullopt;
  try {
    return of::cuda_backend::fused_check(k.source, k.name, 90);
  } catch (const of::Error& e) {
    if (std::string(e.what()).find("[cuda] not available") != std::string::npos)
      return std::nullopt;
    throw;
  }
}

// Generates every group of g and requires each compiles without a diagnostic. Returns them.
std::vector<of::trace::FusedKernelSource> compile_all(const of::trace::Graph& g, const char* what) {
  INFO(what);
  REQUIRE(!g.groups.empty());
  std::vector<of::trace::FusedKernelSource> out;
  bool skipped = false;
  for (size_t i = 0; i < g.groups.size(); ++i) {
    of::trace::FusedKernelSource k = of::trace::generate_fused_kernel(g, int(i));
    INFO("group ", i, ": ", k.why_not);
    REQUIRE(k.ok);
    CHECK(k.hash == of::trace::fnv1a64(k.source));
    CHECK(k.source.find("extern \"C\" __global__") != std::string::npos);
    CHECK(!k.output_values.empty());
    const std::optional<std::string> log = nvrtc_log(k);
    if (!log) {
      // only a build without the CUDA module may skip: with it, NVRTC must be reachable
      REQUIRE_MESSAGE(!of::cuda_backend::built(),
                      "the CUDA module is built but NVRTC is unreachable");
      skipped = true;
    } else {
      INFO(k.name, "\n", k.source.substr(k.source.find("#line 1 \"fused_group.cu\"")));
      CHECK(*log == "");
    }
    out.push_back(std::move(k));
  }
  if (skipped) MESSAGE("NVRTC not reachable (no CUDA module or libnvrtc): sources not compiled");
  return out;
}

size_t group_nodes(const of::trace::Graph& g) {
  size_t n = 0;
  for (const auto& grp : g.groups) n += grp.size();
  return n;
}

}  // namespace

TEST_CASE("cuda fusion: GELU/tanh chains and broadcast operands generate compiling kernels") {
  const Fn gelu = [](const std::vector<of::Tensor>& x) {
    const of::Tensor& t = x[0];
    of::Tensor inner = (t + t * t * t * 0.044715) * 0.7978845608;
    return std::vector<of::Tensor>{t * 0.5 * (inner.tanh() + 1), of::gelu(t * 2, "tanh").exp()};
  };
  const of::trace::Graph g = fused_graph(gelu, {of::randn({64, 256})});
  auto ks = compile_all(g, "gelu chain");
  CHECK(group_nodes(g) >= 8);
  // a value only the group reads is never stored: fewer outputs than members
  size_t outs = 0;
  for (const auto& k : ks) outs += k.output_values.size();
  CHECK(outs < group_nodes(g));

  // broadcast (rows, columns, a 0-d scalar) and a transposed operand: strided reads
  const Fn bcast = [](const std::vector<of::Tensor>& x) {
    of::Tensor y = (x[0] * x[1] + x[2]).relu() - x[0] * x[3] + x[4].t();
    return std::vector<of::Tensor>{y.sigmoid() * of::maximum(x[0], x[2])};
  };
  const of::trace::Graph gb =
      fused_graph(bcast, {of::randn({32, 128}), of::randn({128}), of::randn({32, 1}), of::randn({}),
                          of::randn({128, 32})});
  auto kb = compile_all(gb, "broadcast");
  REQUIRE(kb.size() == 1);
  CHECK(kb[0].input_values.size() == 5);
  CHECK(kb[0].static_params.size() > 2);  // sizes and strides of the strided inputs
  CHECK(kb[0].static_params[0] == 32 * 128);

  // the same ops and layouts at another size share the kernel (sizes are parameters)
  const of::trace::Graph g2 = fused_graph(gelu, {of::randn({16, 512})});
  REQUIRE(g2.groups.size() == g.groups.size());
  for (size_t i = 0; i < g.groups.size(); ++i)
    CHECK(of::trace::generate_fused_kernel(g2, int(i)).hash == ks[i].hash);
}

TEST_CASE("cuda fusion: an Adam step (in-place updates, scalar operands) generates kernels") {
  of::manual_seed(4);
  of::Tensor w = (of::randn({64, 96}) * 0.1).set_requires_grad(true);
  of::Tensor b = of::zeros({96}).set_requires_grad(true);
  of::optim::Adam opt({w, b}, of::optim::AdamOptions(1e-3).weight_decay(0.01));
  auto body = [&](const std::vector<of::Tensor>& x) {
    opt.zero_grad();
    of::Tensor loss = (x[0].matmul(w) + b).tanh().square().mean();
    loss.backward();
    opt.step();
    return std::vector<of::Tensor>{loss};
  };
  body({of::randn({32, 64})});  // the first step creates the optimizer state
  const of::trace::Graph g = fused_graph(body, {of::randn({32, 64})});
  auto ks = compile_all(g, "adam");
  // the moments and the parameter are written in place: stored, and read before they are
  bool inplace = false;
  for (const auto& k : ks)
    for (int v : k.output_values)
      for (int u : k.input_values) inplace = inplace || u == v;
  CHECK(inplace);
}

TEST_CASE("cuda fusion: float16, bfloat16, casts, comparisons and where generate kernels") {
  for (of::ScalarType dt : {of::kFloat16, of::kBFloat16}) {
    INFO(of::dtype_name(dt));
    const Fn half = [](const std::vector<of::Tensor>& x) {
      of::Tensor h = (x[0] * 2 + 1).sigmoid() * x[1];
      return std::vector<of::Tensor>{h.to(of::kFloat32).exp().to(x[0].dtype()) - h};
    };
    const of::trace::Graph g =
        fused_graph(half, {of::randn({64, 64}).to(dt), of::randn({64}).to(dt)});
    auto ks = compile_all(g, "16-bit");
    bool named = false;
    for (const auto& k : ks)
      named = named || k.source.find(dt == of::kFloat16 ? "oneflow::Half" : "oneflow::BFloat16") !=
                           std::string::npos;
    CHECK(named);
  }
  const Fn select = [](const std::vector<of::Tensor>& x) {
    of::Tensor m = of::logical_and(x[0] > 0, of::logical_not(x[1].isnan()));
    of::Tensor y = of::where(m, x[0] * x[1], x[1].clamp(-0.5, 0.5));
    of::Tensor c = y.to(of::kInt32) * 3 + x[2];
    return std::vector<of::Tensor>{y.pow(3.0) + c.to(of::kFloat32),
                                   of::maximum(c.abs(), x[2]) == 2};
  };
  compile_all(fused_graph(select, {of::randn({48, 64}), of::randn({48, 64}),
                                   of::randint(-5, 5, {48, 64}, of::kInt32)}),
              "comparisons, where, clamp, casts, int32");
  // fill_ and copy_ into a strided view of a fresh tensor
  const Fn fills = [](const std::vector<of::Tensor>& x) {
    of::Tensor z = of::empty({64, 64});
    z.fill_(0.25);
    z.copy_(x[0].to(of::kFloat64));
    return std::vector<of::Tensor>{(z + 1).exp2()};
  };
  compile_all(fused_graph(fills, {of::randn({64})}), "fill_, copy_");
}

TEST_CASE("cuda fusion: a group with an op that has no generated form is refused by name") {
  // integer division has no CUDA kernel (no error path for a zero divisor on the device): the
  // CPU fuses it, the generator refuses and the group would run unfused
  const Fn idiv = [](const std::vector<of::Tensor>& x) {
    return std::vector<of::Tensor>{of::div(x[0] + 1, x[1], "trunc") * 2};
  };
  of::trace::Graph g = fused_graph(
      idiv, {of::randint(-9, 9, {64, 64}, of::kInt32), of::randint(1, 9, {64, 64}, of::kInt32)});
  REQUIRE(g.groups.size() == 1);
  of::trace::FusedKernelSource k = of::trace::generate_fused_kernel(g, 0);
  CHECK(!k.ok);
  CHECK(k.why_not.find("[div_trunc] int32 operands have no CUDA kernel") != std::string::npos);
  for (int ni : g.groups[0]) {
    const of::trace::Node& n = g.nodes[size_t(ni)];
    CHECK(of::trace::fused_unsupported(g, n).empty() == (n.op->name != "div_trunc"));
  }

  // a member that is no elementwise op at all (a hand-edited graph) names the op
  g = fused_graph(
      [](const std::vector<of::Tensor>& x) {
        return std::vector<of::Tensor>{(x[0] * 2).exp() + 1};
      },
      {of::randn({64, 64})});
  REQUIRE(g.groups.size() == 1);
  g.nodes[size_t(g.groups[0][1])].op = &of::find_op("softmax");
  k = of::trace::generate_fused_kernel(g, 0);
  CHECK(!k.ok);
  CHECK(k.why_not == "[softmax] is not an elementwise op");
  CHECK(!of::trace::generate_fused_kernel(g, 7).ok);  // no such group
}

TEST_CASE(
    "cuda fusion: a traced CUDA step replays its fused groups as generated kernels, "
    "bitwise equal to eager") {
  SKIP_WITHOUT_CUDA();
  // GELU, softplus-like and Adam's moment updates: float32 and float16, broadcast operands
  auto make = [] {
    of::manual_seed(5);
    return std::vector<of::Tensor>{(of::randn({128, 256}) * 0.1).to(kCuda0).set_requires_grad(true),
                                   of::zeros({256}).to(kCuda0).set_requires_grad(true)};
  };
  std::vector<of::Tensor> xs;
  of::manual_seed(6);
  for (int i = 0; i < 5; ++i) xs.push_back(of::randn({64, 128}).to(kCuda0));
  auto run = [&](bool traced) {
    std::vector<of::Tensor> p = make();
    of::optim::Adam opt(p, of::optim::AdamOptions(1e-2));
    auto body = [&](const of::Tensor& x) {
      opt.zero_grad();
      of::Tensor h = of::gelu(x.matmul(p[0]) + p[1], "tanh");
      of::Tensor s = (h * 1.5).sigmoid() * h + (h.to(of::kFloat16) * 2).exp().to(of::kFloat32);
      of::Tensor loss = s.square().mean();
      loss.backward();
      opt.step();
      return std::vector<of::Tensor>{loss, s};
    };
    std::vector<of::Tensor> res;
    if (traced) {
      auto step = of::jit::trace(body);
      body(xs[0]);  // eager step 0 (optimizer state), as below
      for (size_t i = 1; i < xs.size(); ++i)
        for (const of::Tensor& t : step(xs[i])) res.push_back(t.cpu());
      const of::jit::TraceStats st = step.stats();
      CHECK(st.replay_mode == "cuda graph");
      CHECK(st.fused_groups > 0);
      CHECK(st.fused_kernels == st.fused_groups);  // every group ran as a generated kernel
    } else {
      body(xs[0]);
      for (size_t i = 1; i < xs.size(); ++i)
        for (const of::Tensor& t : body(xs[i])) res.push_back(t.cpu());
    }
    for (const of::Tensor& t : p) res.push_back(t.cpu());
    return res;
  };
  const std::vector<of::Tensor> eager = run(false), traced = run(true);
  REQUIRE(eager.size() == traced.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    INFO("result ", i);
    check_bitwise(traced[i].to(kCuda0), eager[i]);
  }
}

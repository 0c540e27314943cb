// test_cuda_kernels.cpp: the CUDA reductions, softmax, scans, random numbers, nn kernels, the
// shape and indexing kernels (bit for bit) and CUDA Graph replay of traced steps, against the
// CPU. Every case needs a device and skips cleanly without one (bench/gpu_check.sh runs them
// on a lent GPU); the last case runs everywhere: the trace stats say a CPU plan replays on the
// CPU.
#include <doctest/doctest.h>

#include "cuda_test_util.h"

#include <oneflow/oneflow.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace of = oneflow;
using namespace cuda_test;
namespace F = of::nn::functional;

TEST_CASE("cuda: reductions match the CPU (dims, keepdim, strided, one long row, columns)") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(3);
  using R = std::function<of::Tensor(const of::Tensor&)>;
  const std::vector<std::pair<const char*, R>> rows = {
      {"sum all", [](auto& x) { return x.sum(); }},
      {"sum 0", [](auto& x) { return x.sum({0}); }},
      {"sum 1 keep", [](auto& x) { return x.sum({1}, true); }},
      {"sum 0,2",
       [](auto& x) {
         return x.sum({0, 2});
       }},
      {"mean 2", [](auto& x) { return x.mean({2}); }},
      {"prod 1", [](auto& x) { return of::prod(x * 0.1 + 1, 1); }},
      {"amax 1", [](auto& x) { return of::amax(x, {1}); }},
      {"amin 0,2",
       [](auto& x) {
         return of::amin(x, {0, 2});
       }},
      {"all", [](auto& x) { return of::all(x > -10); }},
      {"any 1", [](auto& x) { return of::any(x > 1.5, 1); }},
      {"norm 2", [](auto& x) { return of::norm(x, 2, {2}); }},
      {"norm 1", [](auto& x) { return of::norm(x, 1, {0}); }},
      {"norm inf", [](auto& x) { return of::norm(x, INFINITY, {1}); }},
      {"norm 3", [](auto& x) { return of::norm(x, 3, {2}); }},
      {"var 2", [](auto& x) { return of::var(x, of::IntArrayRef{2}); }},
      {"std 0", [](auto& x) { return of::std(x, of::IntArrayRef{0}, false); }},
      {"logsumexp 1", [](auto& x) { return of::logsumexp(x, {1}); }},
      {"max dim values", [](auto& x) { return std::get<0>(of::max(x, 2)); }},
      {"max dim indices", [](auto& x) { return std::get<1>(of::max(x, 1)); }},
      {"min dim indices", [](auto& x) { return std::get<1>(of::min(x, 0)); }},
      {"argmax", [](auto& x) { return of::argmax(x); }},
      {"argmin 2", [](auto& x) { return of::argmin(x, 2); }},
      {"cumsum 1", [](auto& x) { return of::cumsum(x, 1); }},
      {"cumprod 2", [](auto& x) { return of::cumprod(x * 0.1 + 1, 2); }},
      {"softmax 2", [](auto& x) { return of::softmax(x, 2); }},
      {"softmax 0", [](auto& x) { return of::softmax(x, 0); }},
      {"log_softmax 1", [](auto& x) { return of::log_softmax(x, 1); }},
  };
  for (auto dt : {of::kFloat32, of::kFloat64}) {
    const of::Tensor x = of::randn({7, 33, 65}).to(dt);
    const of::Tensor xs = of::randn({65, 33, 7}).to(dt).permute({2, 1, 0});  // strided
    const double tol = dt == of::kFloat32 ? 1e-5 : 1e-12;
    for (const auto& row : rows) {
      const char* name = row.first;
      INFO(name, " ", of::dtype_name(dt));
      for (const of::Tensor& in : {x, xs})
        check_close(row.second(in.to(kCuda0)), row.second(in), tol);
    }
  }
  // one long row (split into chunks and merged) and integer sums
  const of::Tensor big = of::rand({1 << 22});
  check_close(big.to(kCuda0).sum(), big.sum(), 1e-6);
  check_close(of::amax(big.to(kCuda0)), of::amax(big), 0);
  check_equal(of::argmax(big.to(kCuda0)), of::argmax(big));
  const of::Tensor ints = of::randint(-1000, 1000, {300, 41}, of::kInt64);
  check_equal(ints.to(kCuda0).sum({0}), ints.sum({0}));
  check_equal(ints.to(kCuda0).sum(), ints.sum());
  check_equal(of::cumsum(ints.to(kCuda0), 1), of::cumsum(ints, 1));
  check_equal(ints.to(of::kInt32).to(kCuda0).sum({1}), ints.to(of::kInt32).sum({1}));
  // NaN propagates through amax and is the first index of argmax, as on the CPU
  of::Tensor n = of::randn({4, 9});
  n.index_put_({1, 3}, NAN);
  check_equal(of::amax(n.to(kCuda0), {1}), of::amax(n, {1}));
  check_equal(of::argmax(n.to(kCuda0), 1), of::argmax(n, 1));
}

TEST_CASE("cuda: random numbers equal the CPU generator's for the same seed and offset") {
  SKIP_WITHOUT_CUDA();
  for (auto dt : {of::kFloat32, of::kFloat64}) {
    INFO(of::dtype_name(dt));
    of::manual_seed(42);
    const of::Tensor u_cpu = of::rand({1001}, of::TensorOptions(dt));
    const of::Tensor n_cpu = of::randn({1001}, of::TensorOptions(dt));
    of::manual_seed(42);
    const of::Tensor u_gpu = of::rand({1001}, of::TensorOptions(dt).device(kCuda0));
    const of::Tensor n_gpu = of::randn({1001}, of::TensorOptions(dt).device(kCuda0));
    check_equal(u_gpu, u_cpu);
    check_close(n_gpu, n_cpu, dt == of::kFloat32 ? 1e-6 : 1e-13);  // device log/sin/cos: ulps
  }
  of::manual_seed(7);
  const of::Tensor i_cpu = of::randint(-5, 17, {999}, of::kInt64);
  of::manual_seed(7);
  check_equal(of::randint(-5, 17, {999}, of::TensorOptions(of::kInt64).device(kCuda0)), i_cpu);
  // dropout keeps the same elements
  const of::Tensor x = of::randn({37, 29});
  of::manual_seed(9);
  const of::Tensor d_cpu = of::dropout(x, 0.3, true);
  of::manual_seed(9);
  check_close(of::dropout(x.to(kCuda0), 0.3, true), d_cpu, 1e-6);
}

TEST_CASE("cuda: nn kernels match the CPU, forward and backward") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(5);
  auto both = [](const of::Tensor& t) {
    of::Tensor c = t.clone().set_requires_grad(true);
    of::Tensor g = t.to(kCuda0).set_requires_grad(true);
    return std::make_pair(c, g);
  };
  // cross entropy: mean / sum / none, weights, ignore_index, label smoothing, [N, C, d]
  {
    auto [xc, xg] = both(of::randn({6, 11, 3}));
    of::Tensor t = of::randint(0, 11, {6, 3}, of::kInt64);
    t.index_put_({2, 1}, -100);
    const of::Tensor w = of::rand({11}) + 0.5;
    for (int64_t red : {of::Reduction::Mean, of::Reduction::Sum, of::Reduction::None})
      for (double eps : {0.0, 0.1}) {
        INFO("reduction ", red, " smoothing ", eps);
        of::Tensor lc = of::cross_entropy(xc, t, w, red, -100, eps);
        of::Tensor lg = of::cross_entropy(xg, t.to(kCuda0), w.to(kCuda0), red, -100, eps);
        check_close(lg, lc, 1e-5);
        lc.sum().backward();
        lg.sum().backward();
        check_close(xg.grad(), xc.grad(), 1e-5);
        xc.mutable_grad() = of::Tensor();
        xg.mutable_grad() = of::Tensor();
      }
    // a target out of range is the CPU's error
    of::Tensor bad = t.to(kCuda0);
    bad.index_put_({0, 0}, 11);
    std::string msg;
    try {
      of::cross_entropy(xg, bad);
    } catch (const of::Error& e) { msg = e.what(); }
    CHECK(msg.find("target index 11 is out of range") != std::string::npos);
  }
  // layer norm / rms norm / group norm with affine parameters
  {
    auto [xc, xg] = both(of::randn({5, 7, 24}));
    auto [wc, wg] = both(of::rand({24}) + 0.5);
    auto [bc, bg] = both(of::randn({24}));
    of::Tensor yc = of::layer_norm(xc, {24}, wc, bc, 1e-5);
    of::Tensor yg = of::layer_norm(xg, {24}, wg, bg, 1e-5);
    check_close(yg, yc, 1e-5);
    (yc * yc).sum().backward();
    (yg * yg).sum().backward();
    check_close(xg.grad(), xc.grad(), 1e-4);
    check_close(wg.grad(), wc.grad(), 1e-4);
    check_close(bg.grad(), bc.grad(), 1e-4);
    of::Tensor rc = of::rms_norm(xc.detach(), {24}, wc.detach(), 1e-6);
    check_close(of::rms_norm(xg.detach(), {24}, wg.detach(), 1e-6), rc, 1e-5);
    auto [gxc, gxg] = both(of::randn({4, 6, 5, 5}));
    of::Tensor gc = of::group_norm(gxc, 3, of::Tensor(), of::Tensor(), 1e-5);
    of::Tensor gg = of::group_norm(gxg, 3, of::Tensor(), of::Tensor(), 1e-5);
    check_close(gg, gc, 1e-5);
    (gc * gc).sum().backward();
    (gg * gg).sum().backward();
    check_close(gxg.grad(), gxc.grad(), 1e-4);
  }
  // linear, embedding, index_select, index_add
  {
    auto [xc, xg] = both(of::randn({9, 13}));
    auto [wc, wg] = both(of::randn({5, 13}));
    auto [bc, bg] = both(of::randn({5}));
    of::Tensor lc = of::linear(xc, wc, bc), lg = of::linear(xg, wg, bg);
    check_close(lg, lc, 1e-5);
    // the CUDA linear op itself ran (cuBLASLt's bias epilogue), not addmm in its place
    CHECK(lg.grad_fn()->name() == lc.grad_fn()->name());
    {
      of::NoGradGuard ng;  // a bias-free and a batched (3-D) input reach the same kernel
      check_close(of::linear(xg, wg, of::Tensor()), of::linear(xc, wc, of::Tensor()), 1e-5);
      const of::Tensor x3 = of::randn({2, 4, 13});
      check_close(of::linear(x3.to(kCuda0), wg, bg), of::linear(x3, wc, bc), 1e-5);
    }
    lc.sum().backward();
    lg.sum().backward();
    check_close(wg.grad(), wc.grad(), 1e-5);
    check_close(bg.grad(), bc.grad(), 1e-5);
    auto [ec, eg] = both(of::randn({20, 6}));
    const of::Tensor idx = of::randint(0, 20, {4, 7}, of::kInt64);
    of::Tensor oc = of::embedding(ec, idx), og = of::embedding(eg, idx.to(kCuda0));
    check_close(og, oc, 0);
    (oc * oc).sum().backward();
    (og * og).sum().backward();
    check_close(eg.grad(), ec.grad(), 1e-5);  // index_add (floating atomics: order differs)
    const of::Tensor x = of::randn({6, 8, 3});
    const of::Tensor i1 = of::randint(0, 8, {11}, of::kInt64);
    check_close(of::index_select(x.to(kCuda0), 1, i1.to(kCuda0)), of::index_select(x, 1, i1), 0);
    std::string msg;
    try {
      of::index_select(x.to(kCuda0), 1, (i1 + 8).to(kCuda0));
    } catch (const of::Error& e) { msg = e.what(); }
    CHECK(msg.find("out of bounds for dimension 1 with size 8") != std::string::npos);
  }
}

TEST_CASE("cuda: attention matches the CPU (causal, masks, dropout), forward and backward") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(8);
  const of::Tensor q0 = of::randn({2, 3, 7, 8}), k0 = of::randn({2, 3, 9, 8}),
                   v0 = of::randn({2, 3, 9, 5});
  const of::Tensor bmask = of::rand({7, 9}) > 0.3, amask = of::randn({7, 9});
  for (int variant = 0; variant < 4; ++variant) {
    INFO("variant ", variant);
    std::vector<of::Tensor> cpu, gpu;
    for (const of::Tensor& t : {q0, k0, v0}) {
      cpu.push_back(t.clone().set_requires_grad(true));
      gpu.push_back(t.to(kCuda0).set_requires_grad(true));
    }
    auto run = [&](std::vector<of::Tensor>& in, const of::Device& d) {
      of::manual_seed(77);
      if (variant == 0) return of::scaled_dot_product_attention(in[0], in[1], in[2]);
      if (variant == 1) return of::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true);
      if (variant == 2) return of::scaled_dot_product_attention(in[0], in[1], in[2], bmask.to(d));
      return of::scaled_dot_product_attention(in[0], in[1], in[2], amask.to(d), 0.25);
    };
    of::Tensor oc = run(cpu, of::Device("cpu")), og = run(gpu, kCuda0);
    check_close(og, oc, 1e-5);
    (oc * oc).sum().backward();
    (og * og).sum().backward();
    for (size_t i = 0; i < 3; ++i) check_close(gpu[i].grad(), cpu[i].grad(), 1e-4);
  }
}

TEST_CASE("cuda: shape and indexing kernels equal the CPU bit for bit (every dtype, any layout)") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(11);
  auto sample = [](const std::vector<int64_t>& shape, of::ScalarType dt) {
    if (dt == of::kBool) return of::randn(shape) > 0.0;
    if (of::is_floating_point(dt)) return of::randn(shape).to(dt);
    return of::randint(0, 100, shape, dt);
  };
  // each layout gives a [6, 8, 5] view of a base tensor; the same view is taken on both devices
  struct Layout {
    const char* name;
    std::vector<int64_t> base;
    std::function<of::Tensor(const of::Tensor&)> view;
  };
  const std::vector<Layout> layouts = {
      {"contiguous", {6, 8, 5}, [](const of::Tensor& t) { return t; }},
      {"transposed", {5, 8, 6}, [](const of::Tensor& t) { return t.transpose(0, 2); }},
      {"sliced",
       {7, 16, 5},
       [](const of::Tensor& t) { return t.slice(0, 1, 7).slice(1, 0, 16, 2); }},
  };
  const std::vector<of::ScalarType> dtypes = {of::kFloat32,  of::kFloat64, of::kFloat16,
                                              of::kBFloat16, of::kInt32,   of::kInt64,
                                              of::kUInt8,    of::kBool};
  using Fn = std::function<of::Tensor(const of::Tensor&, const of::Tensor&, const of::Tensor&)>;
  // (x, y: [6, 8, 5] in the layout; i: int64 indices) -> result; run on the CPU and on CUDA
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"cat dim 1",
       [](auto& x, auto& y, auto&) {
         return of::cat({x, y.slice(1, 0, 3)}, 1);
       }},
      {"cat dim 0 (3 inputs, one empty)",
       [](auto& x, auto& y, auto&) {
         return of::cat({y, x.slice(0, 0, 0), x}, 0);
       }},
      {"cat dim -1",
       [](auto& x, auto& y, auto&) {
         return of::cat({x, y}, -1);
       }},
      {"tril 1", [](auto& x, auto&, auto&) { return x.tril(1); }},
      {"triu -2", [](auto& x, auto&, auto&) { return x.triu(-2); }},
      {"tril of a transposed matrix",
       [](auto& x, auto&, auto&) { return x.transpose(1, 2).tril(); }},
      {"flip 0 2",
       [](auto& x, auto&, auto&) {
         return x.flip({0, 2});
       }},
      {"flip -2", [](auto& x, auto&, auto&) { return x.flip({-2}); }},
      {"roll",
       [](auto& x, auto&, auto&) {
         return x.roll({3, -12}, {1, 2});
       }},
      {"roll flat", [](auto& x, auto&, auto&) { return x.roll({7}); }},
      {"repeat",
       [](auto& x, auto&, auto&) {
         return x.repeat({2, 1, 3});
       }},
      {"repeat with a leading dim",
       [](auto& x, auto&, auto&) {
         return x.repeat({2, 1, 1, 2});
       }},
      {"pad constant",
       [](auto& x, auto&, auto&) {
         return of::pad(x, {1, 2, 0, 3}, "constant", 1.5);
       }},
      {"pad constant negative",
       [](auto& x, auto&, auto&) {
         return of::pad(x, {-1, 2, 2, -3});
       }},
      {"pad reflect",
       [](auto& x, auto&, auto&) {
         return of::pad(x, {2, 4, 1, 1}, "reflect");
       }},
      {"pad replicate",
       [](auto& x, auto&, auto&) {
         return of::pad(x, {3, 0, 2, 2}, "replicate");
       }},
      {"pad circular",
       [](auto& x, auto&, auto&) {
         return of::pad(x, {2, 5, 1, 0}, "circular");
       }},
      {"gather dim 1", [](auto& x, auto&, auto& i) { return x.gather(1, i.slice(2, 0, 5)); }},
      {"gather dim 2, transposed index",
       [](auto& x, auto&, auto& i) {
         return x.gather(2, i.transpose(1, 2).slice(1, 0, 5).slice(2, 0, 5));
       }},
      {"scatter dim 1 (duplicates)",
       [](auto& x, auto& y, auto& i) { return x.scatter(1, i.slice(0, 0, 4).slice(2, 0, 5), y); }},
      {"scatter a value",
       [](auto& x, auto&, auto& i) {
         return of::scatter(x, 1, i.slice(2, 0, 5), of::Scalar(int64_t(3)));
       }},
      {"scatter_add dim 1 (duplicates)",
       [](auto& x, auto& y, auto& i) { return x.scatter_add(1, i.slice(2, 0, 5), y); }},
      {"scatter_add dim 0 (one long line per column)",
       [](auto& x, auto& y, auto&) {
         const of::Tensor idx =
             of::arange(int64_t(6), of::kInt64).repeat({8}).reshape({48, 1, 1}).expand({48, 8, 5});
         return x.scatter_add(0, idx.to(x.device()), of::cat({y, y, y, y, y, y, y, y}, 0));
       }},
  };
  for (const Layout& l : layouts)
    for (of::ScalarType dt : dtypes) {
      const of::Tensor xb = sample(l.base, dt), yb = sample(l.base, dt);
      const of::Tensor xc = l.view(xb), yc = l.view(yb), xg = l.view(xb.to(kCuda0)),
                       yg = l.view(yb.to(kCuda0));
      // indices into dims of size 6 (dim 0), 8 (dim 1) and 5 (dim 2): [0, 5), with duplicates
      const of::Tensor ic = of::randint(0, 5, {6, 8, 7}, of::kInt64), ig = ic.to(kCuda0);
      for (const auto& op : ops) {  // (no structured binding: INFO captures it, clang 14)
        INFO(op.first, ", ", l.name, ", ", of::dtype_name(dt));
        check_bitwise(op.second(xg, yg, ig), op.second(xc, yc, ic));
      }
    }
  // one_hot: int64 classes, contiguous and transposed
  {
    const of::Tensor c = of::randint(0, 5, {6, 8}, of::kInt64), g = c.to(kCuda0);
    check_bitwise(of::one_hot(g, 5), of::one_hot(c, 5));
    check_bitwise(of::one_hot(g.t(), 7), of::one_hot(c.t(), 7));
    check_bitwise(of::one_hot(g), of::one_hot(c));
  }
  // out-of-range indices: the CPU's error, naming the same (first, row-major) value
  {
    const of::Tensor x = of::randn({6, 8, 5});
    const of::Tensor xg = x.to(kCuda0);
    of::Tensor bad = of::randint(0, 5, {6, 8, 5}, of::kInt64);
    bad.index_put_({1, 2, 3}, 9);
    bad.index_put_({4, 0, 0}, -1);
    const of::Tensor badg = bad.to(kCuda0);
    struct Case {
      const char* name;
      std::function<void(const of::Tensor&, const of::Tensor&)> fn;
    };
    const std::vector<Case> cases = {
        {"gather", [](auto& t, auto& i) { t.gather(1, i); }},
        {"gather transposed",
         [](auto& t, auto& i) { t.gather(2, i.transpose(0, 2).slice(0, 0, 5).slice(2, 0, 5)); }},
        {"scatter", [](auto& t, auto& i) { t.scatter(1, i, t); }},
        {"scatter_add", [](auto& t, auto& i) { t.scatter_add(2, i, t); }},
    };
    for (const Case& c : cases) {
      INFO(c.name);
      const std::string want = error_of([&] { c.fn(x, bad); });
      const std::string got = error_of([&] { c.fn(xg, badg); });
      CHECK(want.find("out of bounds") != std::string::npos);
      CHECK(got == want);
    }
    const of::Tensor cls = bad.slice(2, 0, 1).squeeze(2), clsg = cls.to(kCuda0);
    for (int64_t n : {int64_t(5), int64_t(3)}) {
      INFO("one_hot ", n);
      const std::string want = error_of([&] { of::one_hot(cls, n); });
      CHECK(!want.empty());
      CHECK(error_of([&] { of::one_hot(clsg, n); }) == want);
    }
  }
}

TEST_CASE("cuda: traced steps with shape and index kernels capture; a bad index fails the replay") {
  SKIP_WITHOUT_CUDA();
  const of::Tensor x = of::randn({4, 6}).to(kCuda0);
  auto shapes = of::jit::trace([](const of::Tensor& t) {
    return of::cat(
        {of::pad(t, {1, 1}).flip({1}), t.roll({1}, {0}).tril().repeat({1, 1}).narrow(1, 0, 6)}, 1);
  });
  for (int i = 0; i < 3; ++i)
    check_bitwise(shapes(x), of::cat({of::pad(x.cpu(), {1, 1}).flip({1}),
                                      x.cpu().roll({1}, {0}).tril().narrow(1, 0, 6)},
                                     1));
  CHECK(shapes.stats().replay_mode == "cuda graph");
  const of::Tensor idx = of::randint(0, 6, {4, 3}, of::kInt64).to(kCuda0);
  auto gathers =
      of::jit::trace([](const of::Tensor& t, const of::Tensor& i) { return t.gather(1, i) * 2; });
  for (int i = 0; i < 3; ++i) check_bitwise(gathers(x, idx), x.cpu().gather(1, idx.cpu()) * 2);
  // the index check sets the graph's flag (NOTE [CUDA index checks]): captured, and a replay
  // with an index out of range raises after it runs
  CHECK(gathers.stats().replay_mode == "cuda graph");
  const of::Tensor bad = of::full({4, 3}, 6, of::kInt64).to(kCuda0);
  CHECK_THROWS_WITH(gathers(x, bad), doctest::Contains("out of range"));
  check_bitwise(gathers(x, idx), x.cpu().gather(1, idx.cpu()) * 2);
}

TEST_CASE("cuda: a traced training step replays as one CUDA Graph and equals eager") {
  SKIP_WITHOUT_CUDA();
  // MLP with dropout, SGD with momentum: the graph's random draws and optimizer state must
  // follow eager step for step (the same kernels run in the same order: equal bits).
  auto make = [] {
    of::manual_seed(1);
    std::vector<of::Tensor> p = {(of::randn({32, 20}) * 0.2).to(kCuda0).set_requires_grad(true),
                                 of::zeros({32}).to(kCuda0).set_requires_grad(true),
                                 (of::randn({10, 32}) * 0.2).to(kCuda0).set_requires_grad(true),
                                 of::zeros({10}).to(kCuda0).set_requires_grad(true)};
    return p;
  };
  std::vector<of::Tensor> xs, ys;
  of::manual_seed(2);
  for (int i = 0; i < 6; ++i) {
    xs.push_back(of::randn({16, 20}).to(kCuda0));
    ys.push_back(of::randint(0, 10, {16}, of::kInt64).to(kCuda0));
  }
  auto run = [&](bool traced) {
    std::vector<of::Tensor> p = make();
    of::optim::SGD opt(p, of::optim::SGDOptions(0.1).momentum(0.9));
    auto body = [&](const of::Tensor& x, const of::Tensor& y) {
      opt.zero_grad();
      of::Tensor h = of::dropout(of::linear(x, p[0], p[1]).relu(), 0.2, true);
      of::Tensor loss = of::cross_entropy(of::linear(h, p[2], p[3]), y);
      loss.backward();
      opt.step();
      return loss;
    };
    std::vector<of::Tensor> losses;
    of::manual_seed(3);
    if (traced) {
      auto step = of::jit::trace(body);
      for (size_t i = 0; i < xs.size(); ++i) losses.push_back(step(xs[i], ys[i]).cpu());
      CHECK(step.stats().replay_mode == "cuda graph");
    } else {
      for (size_t i = 0; i < xs.size(); ++i) losses.push_back(body(xs[i], ys[i]).cpu());
    }
    for (const of::Tensor& t : p) losses.push_back(t.cpu());
    return losses;
  };
  const std::vector<of::Tensor> eager = run(false), traced = run(true);
  REQUIRE(eager.size() == traced.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    INFO("result ", i);
    CHECK(eager[i].to_vector<double>() == traced[i].to_vector<double>());
  }
}

TEST_CASE("cuda: a CPU plan says it replays on the CPU") {
  const of::Tensor w = of::randn({4, 4});
  auto f = of::jit::trace([&](const of::Tensor& x) { return (x.matmul(w) + 1).relu(); });
  const of::Tensor x = of::randn({3, 4});
  f(x);
  f(x);
  CHECK(f.stats().replay_mode == "cpu");
  CHECK(f.stats().str().find("replay:") == std::string::npos);
}

TEST_CASE(
    "cuda: nonzero, masked_select and its backward equal the CPU (order, broadcast, layouts)") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(21);
  for (of::ScalarType dt : {of::kFloat32, of::kInt64, of::kBool, of::kFloat16}) {
    INFO("dtype ", of::dtype_name(dt));
    const of::Tensor x = (of::rand({5, 7, 3}) > 0.6).to(dt);
    check_bitwise(x.to(kCuda0).nonzero(), x.nonzero());
    check_bitwise(x.transpose(0, 2).to(kCuda0).nonzero(), x.transpose(0, 2).nonzero());  // strided
    check_bitwise(of::zeros({4}, dt).to(kCuda0).nonzero(), of::zeros({4}, dt).nonzero());  // none
  }
  check_bitwise(of::ones({}).to(kCuda0).nonzero(), of::ones({}).nonzero());  // 0-d: [1, 0]
  const of::Tensor v = of::randn({4, 6});
  const of::Tensor m = of::rand({6}) > 0.5;  // broadcast over rows
  check_bitwise(of::masked_select(v.to(kCuda0), m.to(kCuda0)), of::masked_select(v, m));
  check_bitwise(of::masked_select(v.t().to(kCuda0), (of::rand({6, 4}) > 2).to(kCuda0)),
                of::masked_select(v.t(), of::rand({6, 4}) > 2));  // nothing selected
  // the gradient scatters back to the selected places, zeros elsewhere
  const of::Tensor vg = v.to(kCuda0).detach().requires_grad_(true);
  of::masked_select(vg, m.to(kCuda0)).pow(2).sum().backward();
  const of::Tensor vc = v.detach().requires_grad_(true);
  of::masked_select(vc, m).pow(2).sum().backward();
  check_close(vg.grad(), vc.grad(), 1e-6);
  // the mask on another device than the input is an error naming both
  const std::string msg = error_of([&] { (void)of::masked_select(v.to(kCuda0), m); });
  CHECK(msg.find("[masked_select]") != std::string::npos);
}

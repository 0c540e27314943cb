// test_cudnn.cpp: the CUDA convolutions and batch norm (cuDNN, src/cuda/cudnn.cpp) and the
// pooling kernels (src/cuda/pool.cu) against the CPU ops: values and gradients, float64 and
// float32, contiguous and not, and the CPU's error for a bad input. Every case needs a device
// and skips cleanly without one (bench/gpu_check.sh runs them on a lent GPU); the convolution
// and batch-norm cases also skip when the module was built without cuDNN.
#include <doctest/doctest.h>

#include "cuda_test_util.h"

#include <oneflow/oneflow.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace of = oneflow;
using namespace cuda_test;

namespace {

const of::Device kCpu("cpu");

// Whether the module fills the cuDNN ops' slots (built with -DONEFLOW_WITH_CUDNN).
bool have_cudnn() {
  const std::string msg = error_of([] {
    const of::Tensor x = of::zeros({1, 1, 2, 2}, of::TensorOptions(of::kFloat32).device(kCuda0));
    of::conv2d(x, x).cpu();
  });
  return msg.find("has no CUDA implementation") == std::string::npos;
}

#define SKIP_WITHOUT_CUDNN()                                       \
  do {                                                             \
    SKIP_WITHOUT_CUDA();                                           \
    if (!have_cudnn()) {                                           \
      MESSAGE("the CUDA module was built without cuDNN: skipped"); \
      return;                                                      \
    }                                                              \
  } while (0)

using Tensors = std::vector<of::Tensor>;
using Fn = std::function<Tensors(const Tensors&)>;

// Runs f on CPU leaves, then on their CUDA copies (undefined inputs stay undefined, `grad`
// inputs require grad), and compares every output; then the gradients of sum(out0 * up) for a
// random `up` at every leaf that requires grad.
void compare(const Tensors& cpu_in, const Fn& f, double tol, const std::vector<bool>& grad) {
  Tensors c, g;
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    if (!cpu_in[i].defined()) {
      c.emplace_back();
      g.emplace_back();
      continue;
    }
    const bool rg = i < grad.size() && grad[i];
    c.push_back(cpu_in[i].detach().clone().set_requires_grad(rg));
    g.push_back(cpu_in[i].detach().to(kCuda0, false, /*copy=*/true).set_requires_grad(rg));
  }
  const Tensors oc = f(c), og = f(g);
  REQUIRE(oc.size() == og.size());
  for (size_t i = 0; i < oc.size(); ++i) {
    INFO("output ", i);
    check_close(og[i], oc[i], tol);
  }
  bool any = false;
  for (bool b : grad) any = any || b;
  if (!any) return;
  const of::Tensor up = of::randn(oc[0].sizes(), oc[0].dtype());
  (oc[0] * up).sum().backward();
  (og[0] * up.to(kCuda0)).sum().backward();
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].defined() || !(i < grad.size() && grad[i])) continue;
    INFO("gradient of input ", i);
    check_close(g[i].grad(), c[i].grad(), tol);
  }
}

// f raises the same error on both devices (the op's checks run before any kernel).
void same_error(const std::function<void(of::Device)>& f) {
  const std::string cpu = error_of([&] { f(kCpu); });
  const std::string gpu = error_of([&] { f(kCuda0); });
  CHECK(!cpu.empty());
  CHECK(gpu == cpu);
}

of::Tensor randn64(of::IntArrayRef s) { return of::randn(s, of::kFloat64); }

double tol_for(of::ScalarType t, double f64) { return t == of::kFloat64 ? f64 : 1e-4; }

}  // namespace

TEST_CASE("cuda: cuDNN conv1d/2d/3d match the CPU (groups, stride, padding, dilation, bias)") {
  SKIP_WITHOUT_CUDNN();
  of::manual_seed(11);
  struct Case {
    of::DimVector x, w;
    of::DimVector stride, padding, dilation;
    int64_t groups;
    bool bias;
  };
  const std::vector<Case> cases2d = {
      {{2, 4, 9, 11}, {6, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{3, 6, 10, 7}, {4, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, false},
      {{1, 4, 8, 8}, {8, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 4, true},  // 1x1, depthwise groups
      {{2, 3, 12, 12}, {5, 3, 5, 5}, {3, 3}, {2, 2}, {1, 1}, 1, true},
  };
  for (auto dt : {of::kFloat64, of::kFloat32}) {
    const double tol = tol_for(dt, 1e-9);
    for (size_t ci = 0; ci < cases2d.size(); ++ci) {
      const Case& k = cases2d[ci];
      INFO("conv2d case ", ci, " ", of::dtype_name(dt));
      const of::Tensor b = k.bias ? randn64({k.w[0]}).to(dt) : of::Tensor();
      compare({randn64(k.x).to(dt), randn64(k.w).to(dt), b},
              [&](const Tensors& in) {
                return Tensors{
                    of::conv2d(in[0], in[1], in[2], k.stride, k.padding, k.dilation, k.groups)};
              },
              tol, {true, true, true});
    }
    // a non-contiguous (channels-last strided) input
    INFO("conv2d non-contiguous ", of::dtype_name(dt));
    compare({randn64({2, 7, 9, 4}).to(dt), randn64({5, 4, 3, 3}).to(dt), randn64({5}).to(dt)},
            [](const Tensors& in) {
              return Tensors{of::conv2d(in[0].permute({0, 3, 1, 2}), in[1], in[2], 2, 1)};
            },
            tol, {true, true, true});
  }
  // conv1d lowers to conv2d over a unit H dim; conv3d is its own op
  compare({randn64({2, 3, 17}), randn64({4, 3, 5}), randn64({4})},
          [](const Tensors& in) { return Tensors{of::conv1d(in[0], in[1], in[2], 2, 2, 1)}; }, 1e-9,
          {true, true, true});
  compare({randn64({2, 4, 5, 6, 7}), randn64({6, 2, 3, 3, 2}), randn64({6})},
          [](const Tensors& in) {
            return Tensors{of::conv3d(in[0], in[1], in[2], {1, 2, 1}, {1, 1, 0}, {1, 1, 2}, 2)};
          },
          1e-9, {true, true, true});
  // an empty batch: an empty output and a zero weight gradient
  compare({randn64({0, 4, 6, 6}), randn64({3, 4, 3, 3})},
          [](const Tensors& in) { return Tensors{of::conv2d(in[0], in[1])}; }, 0, {false, true});
  // the CPU's error for a channel mismatch
  same_error([](of::Device d) {
    of::conv2d(of::zeros({1, 5, 6, 6}, of::TensorOptions(of::kFloat64).device(d)),
               of::zeros({3, 4, 3, 3}, of::TensorOptions(of::kFloat64).device(d)));
  });
}

TEST_CASE("cuda: cuDNN conv_transpose2d/3d match the CPU (output_padding, groups, dilation)") {
  SKIP_WITHOUT_CUDNN();
  of::manual_seed(12);
  for (auto dt : {of::kFloat64, of::kFloat32}) {
    const double tol = tol_for(dt, 1e-9);
    INFO(of::dtype_name(dt));
    // stride 2 with output_padding 1, 3 groups
    compare({randn64({2, 6, 5, 4}).to(dt), randn64({6, 2, 3, 3}).to(dt), randn64({6}).to(dt)},
            [](const Tensors& in) {
              return Tensors{of::conv_transpose2d(in[0], in[1], in[2], 2, 1, 1, 3)};
            },
            tol, {true, true, true});
    // output_padding >= stride (allowed below the dilation): the unpadded adjoint, cropped
    compare({randn64({2, 3, 6, 5}).to(dt), randn64({3, 4, 3, 2}).to(dt), randn64({4}).to(dt)},
            [](const Tensors& in) {
              return Tensors{of::conv_transpose2d(in[0], in[1], in[2], 1, {1, 0}, {1, 1}, 1, 2)};
            },
            tol, {true, true, true});
    // a non-contiguous input
    compare({randn64({2, 5, 4, 3}).to(dt), randn64({3, 2, 2, 2}).to(dt)},
            [](const Tensors& in) {
              return Tensors{of::conv_transpose2d(in[0].permute({0, 3, 1, 2}), in[1], {}, 2)};
            },
            tol, {true, true});
  }
  compare({randn64({2, 4, 3, 4, 3}), randn64({4, 3, 2, 3, 2}), randn64({6})},
          [](const Tensors& in) {
            return Tensors{
                of::conv_transpose3d(in[0], in[1], in[2], {2, 1, 2}, {0, 1, 1}, {1, 0, 0}, 2)};
          },
          1e-9, {true, true, true});
  same_error([](of::Device d) {
    of::conv_transpose2d(of::zeros({1, 4, 3, 3}, of::TensorOptions(of::kFloat64).device(d)),
                         of::zeros({4, 2, 3, 3}, of::TensorOptions(of::kFloat64).device(d)), {}, 1,
                         0, /*output_padding=*/2);
  });
}

TEST_CASE("cuda: max pooling matches the CPU (values, indices, gradients, ties, NaN)") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(13);
  using MP = std::function<std::tuple<of::Tensor, of::Tensor>(const of::Tensor&)>;
  const std::vector<std::pair<const char*, MP>> rows = {
      {"k3 s2 p1", [](auto& x) { return of::max_pool2d_with_indices(x, 3, 2, 1); }},
      {"k2 s2", [](auto& x) { return of::max_pool2d_with_indices(x, 2); }},
      {"k(3,2) s(1,2) p(1,0) d(2,1) ceil",
       [](auto& x) {
         return of::max_pool2d_with_indices(x, {3, 2}, {1, 2}, {1, 0}, {2, 1}, true);
       }},
      {"k3 s2 ceil", [](auto& x) { return of::max_pool2d_with_indices(x, 3, 2, 0, 1, true); }},
      {"adaptive 2d (4, 3)",
       [](auto& x) {
         return of::adaptive_max_pool2d(x, {4, 3});
       }},
  };
  for (auto dt : {of::kFloat64, of::kFloat32}) {
    // random values, then small integers (ties: the first maximum wins)
    for (const of::Tensor& x0 :
         {randn64({2, 3, 11, 10}), of::randint(0, 3, {2, 3, 11, 10}).to(of::kFloat64)}) {
      for (const auto& row : rows) {
        INFO(std::string(row.first), " ", of::dtype_name(dt));
        compare({x0.to(dt)},
                [&](const Tensors& in) {
                  auto [y, i] = row.second(in[0]);
                  return Tensors{y, i};
                },
                0, {true});
      }
    }
  }
  // a non-contiguous input, 1-D and 3-D pools
  compare({randn64({2, 9, 8, 3})},
          [](const Tensors& in) {
            auto [y, i] = of::max_pool2d_with_indices(in[0].permute({0, 3, 1, 2}), 3, 2, 1);
            return Tensors{y, i};
          },
          0, {true});
  compare({randn64({3, 4, 19})},
          [](const Tensors& in) {
            auto [y, i] = of::max_pool1d_with_indices(in[0], 4, 3, 2, 1, true);
            return Tensors{y, i};
          },
          0, {true});
  compare({randn64({2, 2, 7, 6, 9})},
          [](const Tensors& in) {
            auto [y, i] =
                of::max_pool3d_with_indices(in[0], {3, 2, 3}, {2, 2, 2}, {1, 0, 1}, {1, 2, 1});
            return Tensors{y, i};
          },
          0, {true});
  compare({randn64({2, 3, 7, 5, 6})},
          [](const Tensors& in) {
            auto [y, i] = of::adaptive_max_pool3d(in[0], {3, 2, 4});
            return Tensors{y, i};
          },
          0, {true});
  // NaN propagates and its index is the CPU's
  {
    of::Tensor x = randn64({1, 2, 6, 6});
    x.index_put_({0, 1, 2, 3}, NAN);
    x.index_put_({0, 0, 4, 4}, NAN);
    compare({x},
            [](const Tensors& in) {
              auto [y, i] = of::max_pool2d_with_indices(in[0], 3, 2, 1);
              return Tensors{y, i};
            },
            0, {false});
  }
  same_error([](of::Device d) {
    of::max_pool2d(of::zeros({1, 2, 6, 6}, of::TensorOptions(of::kFloat64).device(d)), 2, 2, 2);
  });
}

TEST_CASE(
    "cuda: average pooling matches the CPU (count_include_pad, ceil_mode, divisor, adaptive)") {
  SKIP_WITHOUT_CUDA();
  of::manual_seed(14);
  using AP = std::function<of::Tensor(const of::Tensor&)>;
  const std::vector<std::pair<const char*, AP>> rows = {
      {"k3 s2 p1", [](auto& x) { return of::avg_pool2d(x, 3, 2, 1); }},
      {"k(3,2) s(2,3) p1 ceil exclude",
       [](auto& x) {
         return of::avg_pool2d(x, {3, 2}, {2, 3}, 1, true, false);
       }},
      {"k2 s1 ceil divisor 3", [](auto& x) { return of::avg_pool2d(x, 2, 1, 0, true, true, 3); }},
      {"k3 s3 p1 ceil include", [](auto& x) { return of::avg_pool2d(x, 3, 3, 1, true, true); }},
      {"adaptive (4, 3)",
       [](auto& x) {
         return of::adaptive_avg_pool2d(x, {4, 3});
       }},
      {"adaptive (13, 1)",
       [](auto& x) {
         return of::adaptive_avg_pool2d(x, {13, 1});
       }},
  };
  // the CPU's terms in the CPU's order: equal to an ulp or so
  for (auto dt : {of::kFloat64, of::kFloat32}) {
    const double tol = dt == of::kFloat64 ? 1e-12 : 1e-6;
    for (const auto& row : rows) {
      INFO(std::string(row.first), " ", of::dtype_name(dt));
      compare({randn64({2, 3, 11, 10}).to(dt)},
              [&](const Tensors& in) { return Tensors{row.second(in[0])}; }, tol, {true});
    }
  }
  compare({randn64({2, 10, 9, 3})},
          [](const Tensors& in) {
            return Tensors{of::avg_pool2d(in[0].permute({0, 3, 1, 2}), 3, 2, 1, false, false)};
          },
          1e-12, {true});
  compare({randn64({3, 4, 19})},
          [](const Tensors& in) { return Tensors{of::avg_pool1d(in[0], 4, 3, 2, true, false)}; },
          1e-12, {true});
  compare({randn64({2, 2, 7, 6, 9})},
          [](const Tensors& in) {
            return Tensors{of::avg_pool3d(in[0], {3, 2, 3}, {2, 2, 2}, {1, 0, 1}, true, false)};
          },
          1e-12, {true});
  compare({randn64({2, 2, 7, 6, 9})},
          [](const Tensors& in) { return Tensors{of::avg_pool3d(in[0], 2, 2, 1, false, true, 5)}; },
          1e-12, {true});
  compare({randn64({2, 3, 7, 5, 6})},
          [](const Tensors& in) {
            return Tensors{of::adaptive_avg_pool3d(in[0], {3, 2, 4})};
          },
          1e-12, {true});
  same_error([](of::Device d) {
    of::avg_pool2d(of::zeros({1, 2, 6, 6}, of::TensorOptions(of::kFloat64).device(d)), 3, 0);
  });
}

TEST_CASE("cuda: cuDNN batch_norm matches the CPU (training, evaluation, running statistics)") {
  SKIP_WITHOUT_CUDNN();
  of::manual_seed(15);
  struct Case {
    of::DimVector x;
    bool affine;
    bool permuted;  // the input is a permuted view ([N, *, C] storage)
  };
  const std::vector<Case> cases = {
      {{4, 3, 5, 6}, true, false},
      {{2, 3, 3}, true, false},  // 6 values per channel: the unbiased
                                 // variance differs by 6/5
      {{8, 5}, false, false},
      {{3, 4, 2, 3, 2}, true, false},
      {{3, 4, 5, 2}, true, true},
  };
  for (auto dt : {of::kFloat64, of::kFloat32}) {
    const double tol = tol_for(dt, 1e-9);
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& k = cases[ci];
      const int64_t C = k.x[1];
      for (bool training : {true, false}) {
        INFO("case ", ci, " training ", training, " ", of::dtype_name(dt));
        of::DimVector store = k.x;
        if (k.permuted) std::swap(store[1], store[store.size() - 1]);
        const of::Tensor w = k.affine ? (of::rand({C}, of::kFloat64) + 0.5).to(dt) : of::Tensor();
        const of::Tensor b = k.affine ? randn64({C}).to(dt) : of::Tensor();
        const of::Tensor rm0 = randn64({C}).to(dt),
                         rv0 = (of::rand({C}, of::kFloat64) + 0.5).to(dt);
        of::Tensor rm_c = rm0.clone(), rv_c = rv0.clone();
        of::Tensor rm_g = rm0.to(kCuda0, false, true), rv_g = rv0.to(kCuda0, false, true);
        int calls = 0;  // compare runs the CPU first
        compare({(randn64(store) * 2 + 1).to(dt), w, b},
                [&](const Tensors& in) {
                  of::Tensor x = in[0];
                  if (k.permuted) x = x.transpose(1, x.dim() - 1);
                  const bool cuda = calls++ == 1;
                  return Tensors{of::batch_norm(x, in[1], in[2], cuda ? rm_g : rm_c,
                                                cuda ? rv_g : rv_c, training, 0.1, 1e-5)};
                },
                tol, {true, k.affine, k.affine});
        check_close(rm_g, rm_c, tol);
        check_close(rv_g, rv_c, tol);
      }
    }
  }
  // training without running statistics
  compare({randn64({4, 3, 5}), randn64({3}), randn64({3})},
          [](const Tensors& in) {
            return Tensors{of::batch_norm(in[0], in[1], in[2], {}, {}, true, 0.1, 1e-3)};
          },
          1e-9, {true, true, true});
  same_error([](of::Device d) {
    const of::TensorOptions o = of::TensorOptions(of::kFloat64).device(d);
    of::batch_norm(of::zeros({1, 3}, o), {}, {}, of::zeros({3}, o), of::ones({3}, o), true, 0.1,
                   1e-5);
  });
}

TEST_CASE("cuda: a traced conv / batch-norm / pooling step replays as one CUDA Graph") {
  SKIP_WITHOUT_CUDNN();
  auto make = [] {
    of::manual_seed(21);
    const of::TensorOptions o = of::TensorOptions(of::kFloat32).device(kCuda0);
    return std::vector<of::Tensor>{
        (of::randn({8, 3, 3, 3}) * 0.3).to(kCuda0).set_requires_grad(true),
        of::zeros({8}, o).set_requires_grad(true),
        of::ones({8}, o).set_requires_grad(true),
        of::zeros({8}, o).set_requires_grad(true),
        (of::randn({10, 32}) * 0.2).to(kCuda0).set_requires_grad(true),
        of::zeros({10}, o).set_requires_grad(true)};
  };
  std::vector<of::Tensor> xs, ys;
  of::manual_seed(22);
  for (int i = 0; i < 5; ++i) {
    xs.push_back(of::randn({6, 3, 8, 8}).to(kCuda0));
    ys.push_back(of::randint(0, 10, {6}, of::kInt64).to(kCuda0));
  }
  auto run = [&](bool traced) {
    std::vector<of::Tensor> p = make();
    of::Tensor rm = of::zeros({8}).to(kCuda0), rv = of::ones({8}).to(kCuda0);
    of::optim::SGD opt(p, of::optim::SGDOptions(0.05).momentum(0.9));
    auto body = [&](const of::Tensor& x, const of::Tensor& y) {
      opt.zero_grad();
      of::Tensor h = of::conv2d(x, p[0], p[1], 1, 1);
      h = of::batch_norm(h, p[2], p[3], rm, rv, true, 0.1, 1e-5).relu();
      h = of::avg_pool2d(of::max_pool2d(h, 2), 2);
      of::Tensor loss = of::cross_entropy(of::linear(h.reshape({x.size(0), 32}), p[4], p[5]), y);
      loss.backward();
      opt.step();
      return loss;
    };
    std::vector<of::Tensor> out;
    if (traced) {
      auto step = of::jit::trace(body);
      for (size_t i = 0; i < xs.size(); ++i) out.push_back(step(xs[i], ys[i]).cpu());
      CHECK(step.stats().replay_mode == "cuda graph");
    } else {
      for (size_t i = 0; i < xs.size(); ++i) out.push_back(body(xs[i], ys[i]).cpu());
    }
    for (const of::Tensor& t : p) out.push_back(t.cpu());
    out.push_back(rm.cpu());
    out.push_back(rv.cpu());
    return out;
  };
  const std::vector<of::Tensor> eager = run(false), traced = run(true);
  REQUIRE(eager.size() == traced.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    INFO("result ", i);
    CHECK(of::allclose(traced[i], eager[i], 1e-5, 1e-6));
  }
}

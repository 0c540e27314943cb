// test_cuda_sort.cpp: the CUDA kernels of src/cuda/sort.{h,cpp,cu} against the CPU — sort and
// topk (bitwise: the CPU's tie order and NaN placement, every dtype, strided inputs, rows
// longer than the shared-memory tile), pad_backward (bitwise: the CPU's summation order), the
// fused LSTM ops (forward and gradients, to a tolerance: cuBLAS GEMMs), errors and CUDA Graph
// capture. Every case needs a device and skips cleanly without one.
#include <doctest/doctest.h>

#include "cuda_test_util.h"

#include <oneflow/oneflow.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/rnn_ops.h"

namespace of = oneflow;
using namespace cuda_test;

namespace {

// Random values of `dt` (CPU): with ties (small integers) or spread out; floating dtypes also
// get NaN, -0.0 and +0.0 (which compare equal: their order is the index order).
of::Tensor sample(const std::vector<int64_t>& shape, of::ScalarType dt, bool ties,
                  std::mt19937_64& rng) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  std::normal_distribution<double> nd(0, 3);
  for (double& e : v) {
    e = ties ? std::round(nd(rng)) : nd(rng) * 50;
    if (dt == of::kUInt8) e = std::fabs(e);
    if (dt == of::kBool) e = e > 0;
    if (of::is_floating_point(dt)) {
      const uint64_t u = rng() % 10;
      if (u == 0) e = NAN;
      else if (u == 1) e = -0.0;
      else if (u == 2) e = 0.0;
    }
  }
  return of::tensor(v, shape, of::TensorOptions(of::kFloat64)).to(dt);
}

const of::ScalarType kAllDtypes[] = {of::kFloat32, of::kFloat64, of::kFloat16, of::kBFloat16,
                                     of::kInt32,   of::kInt64,   of::kUInt8,   of::kBool};

}  // namespace

TEST_CASE("cuda: sort and topk equal the CPU bit for bit (dtypes, ties, NaN, strides, long rows)") {
  SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(11);
  const std::vector<std::vector<int64_t>> shapes = {{5, 37}, {3, 9000}, {2, 3, 1},   {1, 4097},
                                                    {7},     {300, 3},  {2, 5000, 2}};
  for (of::ScalarType dt : kAllDtypes) {
    for (const auto& shape : shapes) {
      for (bool ties : {false, true}) {
        for (bool strided : {false, true}) {
          of::Tensor x = sample(shape, dt, ties, rng);
          if (strided && x.dim() >= 2) x = x.transpose(0, x.dim() - 1);
          const of::Tensor xg = x.to(kCuda0);
          std::vector<int64_t> dims = {0, -1};
          if (x.dim() == 1) dims = {0};
          if (x.dim() == 3) dims.push_back(1);
          for (int64_t dim : dims) {
            for (bool desc : {false, true}) {
              INFO(of::dtype_name(dt), " ", of::shape_str(x.sizes()), " dim ", dim, " desc ", desc,
                   " ties ", ties, " strided ", strided);
              auto [cv, ci] = of::sort(x, dim, desc);
              auto [gv, gi] = of::sort(xg, dim, desc);
              check_bitwise(gv, cv);
              check_bitwise(gi, ci);
              const int64_t n = x.size(dim);
              for (int64_t k : {int64_t(0), int64_t(1), n / 3, n}) {
                auto [tv, ti] = of::topk(x, k, dim, desc, true);
                auto [uv, ui] = of::topk(xg, k, dim, desc, true);
                check_bitwise(uv, tv);
                check_bitwise(ui, ti);
              }
            }
          }
        }
      }
    }
  }
  // 0-d and empty inputs
  for (const of::Tensor& x : {of::tensor(2.5), of::randn({0, 4}), of::randn({4, 0})}) {
    auto [cv, ci] = of::sort(x, -1);
    auto [gv, gi] = of::sort(x.to(kCuda0), -1);
    check_bitwise(gv, cv);
    check_bitwise(gi, ci);
  }
  check_bitwise(of::argsort(of::tensor(3.0).to(kCuda0)), of::argsort(of::tensor(3.0)));
}

TEST_CASE("cuda: sort and topk gradients equal the CPU's") {
  SKIP_WITHOUT_CUDA();
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    const of::Tensor base = of::randn({6, 50}, of::TensorOptions(dt));
    const of::Tensor w = of::randn({6, 50}, of::TensorOptions(dt));
    const of::Tensor wk = of::randn({6, 7}, of::TensorOptions(dt));
    of::Tensor xc = base.clone().requires_grad_(), xg = base.to(kCuda0).requires_grad_();
    (std::get<0>(of::sort(xc, 1, true)) * w).sum().backward();
    (std::get<0>(of::sort(xg, 1, true)) * w.to(kCuda0)).sum().backward();
    check_bitwise(xg.grad(), xc.grad());
    of::Tensor yc = base.t().clone().requires_grad_(), yg = base.t().to(kCuda0).requires_grad_();
    (std::get<0>(of::topk(yc, 7, 0, false, true)) * wk.t()).sum().backward();
    (std::get<0>(of::topk(yg, 7, 0, false, true)) * wk.t().to(kCuda0)).sum().backward();
    check_bitwise(yg.grad(), yc.grad());
  }
}

TEST_CASE("cuda: pad_backward equals the CPU bit for bit (reflect, replicate, circular)") {
  SKIP_WITHOUT_CUDA();
  struct Case {
    std::vector<int64_t> shape, pads;
  };
  const std::vector<Case> cases = {{{2, 3, 5, 6}, {2, 3, 4, 1}},
                                   {{4, 7}, {3, 3}},
                                   {{1, 1, 5}, {4, 4}},
                                   {{3, 4, 4}, {0, 0, 3, 2}},
                                   {{2, 2, 3, 3, 3}, {2, 2, 1, 2, 2, 0}},
                                   {{6, 1}, {1, 1, 5, 5}},
                                   {{2, 3, 40}, {39, 20}}};
  std::mt19937_64 rng(5);
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64, of::kFloat16, of::kBFloat16}) {
    for (const char* mode : {"reflect", "replicate", "circular"}) {
      for (const Case& c : cases) {
        bool valid = true;
        for (size_t q = 0; q < c.pads.size() / 2; ++q) {
          const int64_t n = c.shape[c.shape.size() - 1 - q];
          if (std::string(mode) == "reflect" && (c.pads[2 * q] >= n || c.pads[2 * q + 1] >= n))
            valid = false;
          if (std::string(mode) == "circular" && (c.pads[2 * q] > n || c.pads[2 * q + 1] > n))
            valid = false;
        }
        if (!valid) continue;
        for (bool strided : {false, true}) {
          INFO(of::dtype_name(dt), " ", mode, " ", of::shape_str(c.shape), " strided ", strided);
          const of::Tensor x0 = of::zeros(c.shape, of::TensorOptions(dt));
          of::Tensor xc = x0.clone().requires_grad_(), xg = x0.to(kCuda0).requires_grad_();
          const of::Tensor yc = of::pad(xc, c.pads, mode), yg = of::pad(xg, c.pads, mode);
          of::Tensor g = of::randn(yc.sizes(), of::TensorOptions(of::kFloat64)).mul(7.0).to(dt);
          of::Tensor gg = g.to(kCuda0);
          if (strided) {  // the same values laid out transposed
            const int64_t last = g.dim() - 1;
            g = g.transpose(0, last).contiguous().transpose(0, last);
            gg = gg.transpose(0, last).contiguous().transpose(0, last);
          }
          yc.backward(g);
          yg.backward(gg);
          check_bitwise(xg.grad(), xc.grad());
        }
      }
    }
  }
}

TEST_CASE("cuda: lstm_cell and lstm_layer equal the CPU (forward and gradients)") {
  SKIP_WITHOUT_CUDA();
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    const double tol = dt == of::kFloat32 ? 2e-5 : 1e-10;
    const of::TensorOptions o(dt);
    // the cell
    {
      const of::Tensor gates = of::randn({5, 28}, o) * 2, c = of::randn({5, 7}, o);
      of::Tensor gc = gates.clone().requires_grad_(), cc = c.clone().requires_grad_();
      of::Tensor gg = gates.to(kCuda0).requires_grad_(), cg = c.to(kCuda0).requires_grad_();
      auto [h1, c1] = of::lstm_cell_update(gc, cc);
      auto [h2, c2] = of::lstm_cell_update(gg, cg);
      check_close(h2, h1.detach(), tol);
      check_close(c2, c1.detach(), tol);
      const of::Tensor dh = of::randn({5, 7}, o), dc = of::randn({5, 7}, o);
      ((h1 * dh).sum() + (c1 * dc).sum()).backward();
      ((h2 * dh.to(kCuda0)).sum() + (c2 * dc.to(kCuda0)).sum()).backward();
      check_close(gg.grad(), gc.grad(), tol);
      check_close(cg.grad(), cc.grad(), tol);
    }
    // the layer: forward and reverse, one and several steps, gradients through every output
    for (int64_t T : {1, 4}) {
      for (bool reverse : {false, true}) {
        for (bool all_outputs : {false, true}) {
          INFO(of::dtype_name(dt), " T ", T, " reverse ", reverse, " all ", all_outputs);
          const int64_t B = 3, H = 6;
          const of::Tensor xp = of::randn({T * B, 4 * H}, o), h0 = of::randn({B, H}, o),
                           c0 = of::randn({B, H}, o), w = of::randn({4 * H, H}, o) * 0.5;
          const of::Tensor r1 = of::randn({T * B, H}, o), r2 = of::randn({T * B, H}, o),
                           r3 = of::randn({T * B, 4 * H}, o);
          std::vector<of::Tensor> cpu_in, gpu_in;
          for (const of::Tensor& t : {xp, h0, c0, w}) {
            cpu_in.push_back(t.clone().requires_grad_());
            gpu_in.push_back(t.to(kCuda0).requires_grad_());
          }
          auto run = [&](std::vector<of::Tensor>& in, const of::Device& dev) {
            auto [out, cs, gates] = of::lstm_layer(in[0], in[1], in[2], in[3], T, reverse);
            of::Tensor loss = (out * r1.to(dev)).sum();
            if (all_outputs) loss = loss + (cs * r2.to(dev)).sum() + (gates * r3.to(dev)).sum();
            loss.backward();
            return std::vector<of::Tensor>{out.detach(), cs.detach(), gates.detach()};
          };
          const auto cpu_out = run(cpu_in, of::Device(of::kCPU));
          const auto gpu_out = run(gpu_in, kCuda0);
          for (size_t i = 0; i < 3; ++i) check_close(gpu_out[i], cpu_out[i], tol);
          for (size_t i = 0; i < 4; ++i) check_close(gpu_in[i].grad(), cpu_in[i].grad(), 10 * tol);
        }
      }
    }
  }
}

TEST_CASE("cuda: sort, topk and lstm errors are the CPU's") {
  SKIP_WITHOUT_CUDA();
  const of::Tensor x = of::randn({3, 4});
  const of::Tensor xg = x.to(kCuda0);
  const std::string want = error_of([&] { of::topk(x, 5, 1, true, true); });
  CHECK(!want.empty());
  CHECK(error_of([&] { of::topk(xg, 5, 1, true, true); }) == want);
  const std::string dim_err = error_of([&] { of::sort(x, 2); });
  CHECK(!dim_err.empty());
  CHECK(error_of([&] { of::sort(xg, 2); }) == dim_err);
  const of::Tensor gi = of::zeros({2, 8}, of::TensorOptions(of::kInt32)),
                   ci = of::zeros({2, 2}, of::TensorOptions(of::kInt32));
  const std::string cell_err = error_of([&] { of::lstm_cell_update(gi, ci); });
  CHECK(!cell_err.empty());
  CHECK(error_of([&] { of::lstm_cell_update(gi.to(kCuda0), ci.to(kCuda0)); }) == cell_err);
}

TEST_CASE("cuda: traced sort, topk and lstm_layer steps capture into a CUDA Graph") {
  SKIP_WITHOUT_CUDA();
  const of::Tensor x = of::randn({4, 300}).to(kCuda0);
  auto sorted = of::jit::trace([](const of::Tensor& t) {
    return std::get<0>(of::sort(t, 1, true)) + std::get<0>(of::topk(t, 300, 1, true, true));
  });
  auto order = of::jit::trace([](const of::Tensor& t) { return of::argsort(t * 2, 1); });
  for (int i = 0; i < 3; ++i) {
    const of::Tensor v = std::get<0>(of::sort(x.cpu(), 1, true));
    check_bitwise(sorted(x), v + v);
    check_bitwise(order(x), of::argsort(x.cpu() * 2, 1));
  }
  CHECK(sorted.stats().replay_mode == "cuda graph");
  CHECK(order.stats().replay_mode == "cuda graph");
  const int64_t T = 3, B = 2, H = 4;
  const of::Tensor xp = of::randn({T * B, 4 * H}).to(kCuda0), h0 = of::randn({B, H}).to(kCuda0),
                   c0 = of::randn({B, H}).to(kCuda0), w = of::randn({4 * H, H}).to(kCuda0);
  auto layer = of::jit::trace(
      [&](const of::Tensor& p) { return std::get<0>(of::lstm_layer(p, h0, c0, w, T, false)); });
  const of::Tensor want = std::get<0>(of::lstm_layer(xp, h0, c0, w, T, false));
  for (int i = 0; i < 3; ++i) check_close(layer(xp), want.cpu(), 1e-6);
  CHECK(layer.stats().replay_mode == "cuda graph");
}

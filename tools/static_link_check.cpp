// static_link_check.cpp: built by tools/check_static_link.sh from an installed tree into one
// executable (`pkg-config --static --libs oneflow`, liboneflow.a) and run. It calls ops of every
// family of the op table and checks each result against a value worked out by hand, so an op
// family lost to the static link (its registration, its kernels) fails here by name. It prints
// one line per family and exits 1 at the first wrong value or error.
//   static_link_check [scratch dir for the saved graph]
#include <oneflow/oneflow.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const char* family, const std::string& what) {
  std::printf("%s %-12s %s\n", ok ? "ok  " : "FAIL", family, what.c_str());
  if (!ok) ++failures;
}
bool near(double a, double b, double tol = 1e-5) { return std::fabs(a - b) <= tol; }
bool same(const of::Tensor& a, const std::vector<float>& b) {
  std::vector<float> v = a.to_vector<float>();
  if (v.size() != b.size()) return false;
  for (size_t i = 0; i < v.size(); ++i)
    if (!near(v[i], b[i], 1e-4)) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  try {
    of::manual_seed(0);
    const of::Tensor x = of::arange(6, of::kF32).reshape({2, 3});  // [[0 1 2] [3 4 5]]

    expect(same((x * 2 + 1).exp().log(), {1, 3, 5, 7, 9, 11}) &&
               same(of::relu(x - 2), {0, 0, 0, 1, 2, 3}) &&
               near(of::sigmoid(of::zeros({1})).item<double>(), 0.5),
           "elementwise", "add mul exp log relu sigmoid");
    expect(x.sum().item<double>() == 15 && near(x.mean().item<double>(), 2.5) &&
               same(x.amax(1), {2, 5}) && x.argmax().item<int64_t>() == 5 &&
               same(x.sum(0), {3, 5, 7}),
           "reduction", "sum mean amax argmax");
    expect(same(of::matmul(x, x.t()), {5, 14, 14, 50}) &&
               same(of::mm(of::eye(2), x), {0, 1, 2, 3, 4, 5}),
           "linalg", "matmul mm eye");
    // a 3x3 image of ones, a 2x2 kernel of ones: every output sums four ones
    const of::Tensor img = of::ones({1, 1, 3, 3});
    expect(same(of::conv2d(img, of::ones({1, 1, 2, 2})), {4, 4, 4, 4}), "conv", "conv2d");
    const of::Tensor grid = of::arange(16, of::kF32).reshape({1, 1, 4, 4});
    expect(same(of::max_pool2d(grid, {2, 2}), {5, 7, 13, 15}) &&
               same(of::avg_pool2d(grid, {2, 2}), {2.5, 4.5, 10.5, 12.5}),
           "pooling", "max_pool2d avg_pool2d");
    const of::Tensor idx = of::tensor(std::vector<int64_t>{2, 0}, {2});
    expect(same(of::index_select(x, 1, idx), {2, 0, 5, 3}) && same(x.index({1}), {3, 4, 5}) &&
               same(of::gather(x, 1, of::tensor(std::vector<int64_t>{1, 1, 0, 2}, {2, 2})),
                    {1, 1, 3, 5}),
           "indexing", "index_select index gather");
    expect(same(x.t().contiguous(), {0, 3, 1, 4, 2, 5}) && x.reshape({3, 2}).size(0) == 3 &&
               same(of::cat({x, x}, 0).sum(1), {3, 12, 3, 12}) &&
               of::stack({x, x}).sizes() == of::IntArrayRef({2, 2, 3}) &&
               same(x.unsqueeze(0).permute({2, 1, 0}).flatten(), {0, 3, 1, 4, 2, 5}),
           "shape/view", "t reshape cat stack permute flatten");
    of::manual_seed(7);
    const of::Tensor r1 = of::randn({1000});
    of::manual_seed(7);
    const of::Tensor r2 = of::randn({1000});
    const double m = r1.mean().item<double>(), s = r1.std().item<double>();
    const of::Tensor kept = of::dropout(of::ones({1000}), 0.5, true);
    expect(of::equal(r1, r2) && std::fabs(m) < 0.15 && std::fabs(s - 1) < 0.15 &&
               kept.eq(0).sum().item<int64_t>() > 300 && kept.eq(2).sum().item<int64_t>() > 300,
           "random", "manual_seed randn dropout");
    // uniform logits over 4 classes: the loss is log 4 whatever the target
    const of::Tensor logits = of::zeros({2, 4});
    const of::Tensor target = of::tensor(std::vector<int64_t>{1, 3}, {2});
    expect(near(of::cross_entropy(logits, target).item<double>(), std::log(4.0)) &&
               near(of::mse_loss(x, x + 2).item<double>(), 4),
           "loss", "cross_entropy mse_loss");
    // SGD on (w - 3)^2 from w = 0, lr 0.25: w moves half way each step (0, 1.5, 2.25, ...)
    of::Tensor w = of::zeros({1}, of::requires_grad(true));
    of::optim::SGD sgd({w}, of::optim::SGDOptions(0.25));
    for (int i = 0; i < 3; ++i) {
      sgd.zero_grad();
      (w - 3).square().sum().backward();
      sgd.step();
    }
    expect(near(w.item<double>(), 2.625), "optimizer", "SGD step (autograd, backward)");
    // a small net traced, replayed, saved and loaded back
    of::nn::Sequential net(of::nn::Linear(3, 4), of::nn::ReLU(), of::nn::Linear(4, 2));
    net->eval();
    auto fn = of::jit::trace([&](const of::Tensor& in) { return net->forward(in).softmax(1); });
    const of::Tensor eager = net->forward(x).softmax(1);
    of::Tensor recorded, replayed;
    {
      of::NoGradGuard no_grad;
      recorded = fn(x);
      replayed = fn(x + 0);
    }
    const std::string path = dir + "/static_link_check.oftrace";
    of::jit::save(fn, path);
    of::jit::LoadedGraph loaded = of::jit::load(path);
    const of::Tensor again = loaded(x);
    std::remove(path.c_str());
    expect(of::allclose(recorded, eager) && of::allclose(replayed, eager) &&
               of::allclose(again, eager) && fn.stats().str().size() > 0,
           "trace+replay", "trace, replay, jit::save, jit::load");
  } catch (const std::exception& e) {
    std::printf("FAIL error: %s\n", e.what());
    return 1;
  }
  // a CUDA request: the CUDA module needs liboneflow.so, so a static program says why it is off
  std::string cuda = "available";
  try {
    of::ones({1}).to(of::kCUDA);
  } catch (const of::Error& e) { cuda = e.what(); }
  std::printf("cuda: %s\n", cuda.c_str());
  std::printf("%s\n", failures ? "static link check FAILED" : "static link check passed");
  return failures ? 1 : 0;
}

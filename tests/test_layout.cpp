// test_layout.cpp: the elementwise engine's layout handling (src/cpu/loops.h and
// NOTE [Output layout] in src/dispatch.cpp): dims ordered by stride, tiled walks with gathered
// transposed operands (tile edges, batch dims, every element size), and outputs that keep a
// dense permuted input layout.
#include <doctest/doctest.h>

#include <vector>

#include "harness.h"

namespace of = oneflow;

namespace {

// out[i][j] = a[j][i] + b[i][j] by plain loops over row-major host copies.
std::vector<double> ref_t_plus(const of::Tensor& a, const of::Tensor& b) {
  const int64_t r = b.size(0), c = b.size(1);
  std::vector<double> av = a.to(of::kFloat64).to_vector<double>();
  std::vector<double> bv = b.to(of::kFloat64).to_vector<double>();
  std::vector<double> o(size_t(r * c));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      o[size_t(i * c + j)] = av[size_t(j * r + i)] + bv[size_t(i * c + j)];
  return o;
}

}  // namespace

TEST_CASE("layout: transposed + row-major operands (tiled walk) for every element size") {
  // 130 x 197: tile edges in both dims (tiles are 64 x 64); large enough to take the tiled path.
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64, of::kFloat16, of::kInt64, of::kUInt8}) {
    of::manual_seed(5);
    of::Tensor a = (of::rand({197, 130}, of::kFloat64) * 50).to(dt);
    of::Tensor b = (of::rand({130, 197}, of::kFloat64) * 50).to(dt);
    const std::vector<double> expect = ref_t_plus(a, b);
    INFO(std::string(of::dtype_name(dt)));
    of::Tensor out = of::empty({130, 197}, dt);
    of::add_out(out, a.t(), b);  // row-major output, transposed input
    std::vector<double> got = out.to(of::kFloat64).to_vector<double>();
    // sums below 100 round to 1/16 in float16 and to ~8e-6 in float32; the others are exact
    const double tol = dt == of::kFloat16 ? 0.07 : dt == of::kFloat32 ? 1e-5 : 0.0;
    bool same = got.size() == expect.size();
    for (size_t i = 0; same && i < got.size(); ++i)
      same = std::abs(got[i] - (dt == of::kUInt8 ? double(uint8_t(int(expect[i]))) : expect[i])) <=
             tol;
    CHECK(same);
    // a transposing copy takes the same path
    std::vector<double> at = a.t().contiguous().to(of::kFloat64).to_vector<double>();
    std::vector<double> av = a.to(of::kFloat64).to_vector<double>();
    bool tr = true;
    for (int64_t i = 0; i < 130; ++i)
      for (int64_t j = 0; j < 197; ++j)
        tr = tr && at[size_t(i * 197 + j)] == av[size_t(j * 130 + i)];
    CHECK(tr);
  }
}

TEST_CASE("layout: batch dims outside the tiles, and a strided (non-dense) operand") {
  of::manual_seed(6);
  of::Tensor x = of::rand({3, 150, 140}, of::kFloat64);
  of::Tensor y = of::rand({3, 140, 150}, of::kFloat64);
  of::Tensor z = x.permute({0, 2, 1}) * y;  // (3, 140, 150)
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(),
                      zv = z.to_vector<double>();
  bool ok = true;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < 140; ++i)
      for (int64_t j = 0; j < 150; ++j)
        ok = ok && zv[size_t((b * 140 + i) * 150 + j)] ==
                       xv[size_t((b * 150 + j) * 140 + i)] * yv[size_t((b * 140 + i) * 150 + j)];
  CHECK(ok);
  // every other column of a transposed view: large strides in both dims
  of::Tensor big = of::rand({300, 260}, of::kFloat64);
  of::Tensor s = big.t().slice(1, 0, 300, 2);  // (260, 150), strides (1, 520)
  of::Tensor r = s + of::ones({260, 150}, of::kFloat64);
  std::vector<double> bv = big.to_vector<double>(), rv = r.to_vector<double>();
  bool ok2 = true;
  for (int64_t i = 0; i < 260; ++i)
    for (int64_t j = 0; j < 150; ++j)
      ok2 = ok2 && rv[size_t(i * 150 + j)] == bv[size_t(2 * j * 260 + i)] + 1;
  CHECK(ok2);
}

TEST_CASE("layout: elementwise results keep a dense permuted layout; contiguous/clone do not") {
  of::Tensor A = of::rand({64, 48}), B = of::rand({64, 48});
  of::Tensor s = A.t() + B.t();
  CHECK(s.sizes().vec() == std::vector<int64_t>{48, 64});
  CHECK(s.stride(0) == 1);
  CHECK(s.stride(1) == 48);
  CHECK(th::compare(s, th::to_ref(A.t().contiguous() + B.t().contiguous()), 0, 0).empty());
  CHECK(of::gelu(A.t()).stride(0) == 1);
  CHECK(A.t().contiguous().is_contiguous());
  CHECK(A.t().clone().is_contiguous());
  CHECK(A.t().to(of::kFloat64).is_contiguous());
  // a row-major operand first decides: row-major result
  CHECK((B.t().contiguous() + A.t()).is_contiguous());
  // view() on a permuted result fails clearly; reshape() copies
  CHECK(th::throws_with([&] { (void)s.view({-1}); }, {"[view]", "reshape"}));
  CHECK(s.reshape({-1}).numel() == 48 * 64);
}

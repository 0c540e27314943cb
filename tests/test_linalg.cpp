// test_linalg.cpp: matmul, mm, mm_out, bmm, addmm, baddbmm, dot, outer, einsum.
// Table rows (forward vs float64 loop references, float32/float64, non-contiguous inputs,
// finite-difference VJPs) plus cases for strided views, out=, dtypes and error messages.
#include <doctest/doctest.h>

#include <array>
#include <limits>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cpu/gemm_bf16.h"
#include "cpu/gemm_f32.h"
#include "harness.h"

namespace of = oneflow;
using th::Ref;
using th::Shape;

namespace {

// ---------------------------------------------------------------- references (plain loops)

// libtorch matmul semantics on host data: 1-D operands promoted, batch dims broadcast.
Ref ref_matmul(const Ref& a, const Ref& b) {
  Shape sa = a.shape, sb = b.shape;
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape batch = th::broadcast(ba, bb);
  const int64_t nb = Ref::numel(batch);
  Shape full = batch;
  full.push_back(m);
  full.push_back(n);
  Ref out(full);
  Ref bref(batch);  // index helper only
  // Offset of matrix (batch index idx) inside an operand with batch shape `own`.
  auto matrix_offset = [&](const Shape& own, const Shape& idx, int64_t mat) {
    int64_t f = 0;
    const size_t off = idx.size() - own.size();
    for (size_t d = 0; d < own.size(); ++d) f = f * own[d] + (own[d] == 1 ? 0 : idx[off + d]);
    return f * mat;
  };
  for (int64_t bi = 0; bi < nb; ++bi) {
    const Shape idx = batch.empty() ? Shape{} : bref.index(bi);
    const int64_t oa = matrix_offset(ba, idx, m * k), ob = matrix_offset(bb, idx, k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q)
          s += a.v[size_t(oa + i * k + q)] * b.v[size_t(ob + q * n + j)];
        out.v[size_t(bi * m * n + i * n + j)] = s;
      }
  }
  Shape res = batch;
  if (!va) res.push_back(m);
  if (!vb) res.push_back(n);
  out.shape = res;
  return out;
}

// beta * self (broadcast) + alpha * (a @ b); beta == 0 ignores self.
Ref ref_addmm(const Ref& self, const Ref& a, const Ref& b, double beta, double alpha) {
  Ref p = ref_matmul(a, b);
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double s = beta == 0 ? 0.0 : beta * self.at_broadcast(p.index(i));
    p.v[size_t(i)] = s + alpha * p.v[size_t(i)];
  }
  return p;
}

// Explicit-form einsum ("ij,jk->ik", letters only) by enumerating every label assignment.
Ref ref_einsum(const std::string& eq, const std::vector<Ref>& in) {
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow), rhs = eq.substr(arrow + 2);
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',') terms.emplace_back();
    else terms.back() += c;
  }
  std::map<char, int64_t> size;
  std::string letters;
  for (size_t t = 0; t < terms.size(); ++t)
    for (size_t d = 0; d < terms[t].size(); ++d) {
      const char c = terms[t][d];
      const int64_t s = in[t].shape[d];
      if (!size.count(c)) {
        letters += c;
        size[c] = s;
      } else if (size[c] == 1) {
        size[c] = s;  // a size-1 dim broadcasts
      }
    }
  Shape out_shape;
  for (char c : rhs) out_shape.push_back(size[c]);
  Ref out(out_shape);
  Shape all;
  for (char c : letters) all.push_back(size[c]);
  const int64_t total = Ref::numel(all);
  Ref walker(all);
  for (int64_t f = 0; f < total; ++f) {
    const Shape idx = walker.index(f);
    auto value_of = [&](char c) { return idx[letters.find(c)]; };
    double p = 1;
    for (size_t t = 0; t < terms.size(); ++t) {
      Shape ii;
      for (size_t d = 0; d < terms[t].size(); ++d)
        ii.push_back(in[t].shape[d] == 1 ? 0 : value_of(terms[t][d]));
      p *= in[t].at(ii);
    }
    Shape oi;
    for (char c : rhs) oi.push_back(value_of(c));
    out.v[size_t(out.flat(oi))] += p;
  }
  return out;
}

using Fn = std::function<of::Tensor(const std::vector<of::Tensor>&)>;
using RefFn = std::function<Ref(const std::vector<Ref>&)>;

constexpr auto mm_row = th::make_row;

th::OpRow matmul_row(std::string name, std::vector<std::string> ops, std::vector<Shape> shapes) {
  return mm_row(
      "matmul/" + name, std::move(ops), std::move(shapes),
      [](const std::vector<of::Tensor>& x) { return of::matmul(x[0], x[1]); },
      [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); });
}

th::OpRow einsum_row(std::string eq, std::string ref_eq, std::vector<std::string> ops,
                     std::vector<Shape> shapes, const std::string& tag = "") {
  return mm_row(
      "einsum/" + eq + tag, std::move(ops), std::move(shapes),
      [eq](const std::vector<of::Tensor>& x) { return of::einsum(eq, x); },
      [ref_eq](const std::vector<Ref>& r) { return ref_einsum(ref_eq, r); });
}

}  // namespace

// clang-format off
TH_ROWS({
    // matmul: every rank combination, broadcast batches, empty dims.
    matmul_row("1d.1d", {"mm"}, {{5}, {5}}),
    matmul_row("2d.1d", {"mm"}, {{3, 4}, {4}}),
    matmul_row("1d.2d", {"mm"}, {{4}, {4, 3}}),
    matmul_row("2d.2d", {"mm"}, {{3, 4}, {4, 5}}),
    matmul_row("3d.2d", {"mm", "bmm"}, {{2, 3, 4}, {4, 5}}),
    matmul_row("3d.1d", {"mm", "bmm"}, {{2, 3, 4}, {4}}),
    matmul_row("1d.3d", {"bmm"}, {{4}, {2, 4, 3}}),
    matmul_row("2d.3d", {"bmm"}, {{3, 4}, {2, 4, 5}}),
    matmul_row("3d.3d", {"bmm"}, {{2, 3, 4}, {2, 4, 5}}),
    matmul_row("4d.4d", {"bmm"}, {{2, 2, 3, 4}, {2, 2, 4, 3}}),
    matmul_row("broadcast/4d.3d", {"bmm"}, {{2, 1, 3, 4}, {3, 4, 5}}),
    matmul_row("broadcast/3d.3d", {"bmm"}, {{1, 3, 4}, {2, 4, 2}}),
    matmul_row("broadcast/4d.1d", {"mm", "bmm"}, {{2, 3, 2, 4}, {4}}),
    matmul_row("empty/k0", {"mm"}, {{3, 0}, {0, 4}}),
    matmul_row("empty/m0", {"mm"}, {{0, 4}, {4, 3}}),
    matmul_row("empty/batch0", {"mm", "bmm"}, {{0, 3, 4}, {4, 2}}),
    matmul_row("empty/batch-k0", {"bmm"}, {{2, 3, 0}, {2, 0, 4}}),
    matmul_row("empty/1d.1d", {"mm"}, {{0}, {0}}),

    mm_row("mm", {"mm"}, {{3, 4}, {4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::mm(x[0], x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("mm/row.col", {"mm"}, {{1, 7}, {7, 1}},
           [](const std::vector<of::Tensor>& x) { return x[0].mm(x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("mm/k0", {"mm"}, {{2, 0}, {0, 3}},
           [](const std::vector<of::Tensor>& x) { return of::mm(x[0], x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("mm/m0", {"mm"}, {{0, 3}, {3, 2}},
           [](const std::vector<of::Tensor>& x) { return of::mm(x[0], x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("bmm", {"bmm"}, {{3, 2, 4}, {3, 4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::bmm(x[0], x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("bmm/method", {"bmm"}, {{2, 5, 3}, {2, 3, 1}},
           [](const std::vector<of::Tensor>& x) { return x[0].bmm(x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("bmm/k0", {"bmm"}, {{2, 3, 0}, {2, 0, 4}},
           [](const std::vector<of::Tensor>& x) { return of::bmm(x[0], x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),

    mm_row("addmm", {"addmm"}, {{3, 5}, {3, 4}, {4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::addmm(x[0], x[1], x[2]); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 1, 1); }),
    mm_row("addmm/beta.alpha", {"addmm"}, {{3, 5}, {3, 4}, {4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::addmm(x[0], x[1], x[2], 0.5, -2); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 0.5, -2); }),
    mm_row("addmm/bias-row", {"addmm"}, {{5}, {3, 4}, {4, 5}},
           [](const std::vector<of::Tensor>& x) { return x[0].addmm(x[1], x[2], 2, 3); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 2, 3); }),
    mm_row("addmm/bias-col", {"addmm"}, {{3, 1}, {3, 4}, {4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::addmm(x[0], x[1], x[2], 1, 0.25); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 1, 0.25); }),
    mm_row("addmm/beta0", {"addmm"}, {{3, 5}, {3, 4}, {4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::addmm(x[0], x[1], x[2], 0, 1.5); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 0, 1.5); }),
    mm_row("addmm/k0", {"addmm"}, {{2, 3}, {2, 0}, {0, 3}},
           [](const std::vector<of::Tensor>& x) { return of::addmm(x[0], x[1], x[2], 0.5, 2); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 0.5, 2); }),
    mm_row("baddbmm", {"baddbmm"}, {{2, 3, 5}, {2, 3, 4}, {2, 4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::baddbmm(x[0], x[1], x[2]); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 1, 1); }),
    mm_row("baddbmm/beta.alpha.broadcast", {"baddbmm"}, {{3, 1}, {2, 3, 4}, {2, 4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::baddbmm(x[0], x[1], x[2], 0.5, -1.5); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 0.5, -1.5); }),
    mm_row("baddbmm/beta0", {"baddbmm"}, {{2, 3, 5}, {2, 3, 4}, {2, 4, 5}},
           [](const std::vector<of::Tensor>& x) { return of::baddbmm(x[0], x[1], x[2], 0, 2); },
           [](const std::vector<Ref>& r) { return ref_addmm(r[0], r[1], r[2], 0, 2); }),

    mm_row("dot", {"mm"}, {{6}, {6}},
           [](const std::vector<of::Tensor>& x) { return of::dot(x[0], x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("dot/method.empty", {"mm"}, {{0}, {0}},
           [](const std::vector<of::Tensor>& x) { return x[0].dot(x[1]); },
           [](const std::vector<Ref>& r) { return ref_matmul(r[0], r[1]); }),
    mm_row("outer", {"mul"}, {{3}, {4}},
           [](const std::vector<of::Tensor>& x) { return of::outer(x[0], x[1]); },
           [](const std::vector<Ref>& r) { return ref_einsum("i,j->ij", r); }),
    mm_row("outer/method", {"mul"}, {{1}, {5}},
           [](const std::vector<of::Tensor>& x) { return x[0].outer(x[1]); },
           [](const std::vector<Ref>& r) { return ref_einsum("i,j->ij", r); }),

    // einsum: the common forms, implicit output, diagonals, ellipsis, 3-operand chains.
    einsum_row("ij,jk->ik", "ij,jk->ik", {"mm"}, {{3, 4}, {4, 5}}),
    einsum_row("ij,jk", "ij,jk->ik", {"mm"}, {{3, 4}, {4, 2}}),
    einsum_row("ba,ac", "ba,ac->bc", {"mm"}, {{3, 4}, {4, 2}}),
    einsum_row("bij,bjk->bik", "bij,bjk->bik", {"bmm"}, {{2, 3, 4}, {2, 4, 5}}),
    einsum_row("i,i->", "i,i->", {"mm"}, {{5}, {5}}),
    einsum_row("i,j->ij", "i,j->ij", {"mul"}, {{3}, {4}}),
    einsum_row("ii->i", "ii->i", {"diagonal"}, {{4, 4}}),
    einsum_row("ii", "ii->", {"diagonal", "sum"}, {{3, 3}}),
    einsum_row("bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {"bmm"}, {{2, 2, 3, 4}, {2, 2, 5, 4}}),
    einsum_row("ij->ji", "ij->ji", {"permute"}, {{3, 4}}),
    einsum_row("ij->j", "ij->j", {"sum"}, {{3, 4}}),
    einsum_row("ijk,ik->ij", "ijk,ik->ij", {"bmm"}, {{2, 3, 4}, {2, 4}}),
    einsum_row("ij,jk,kl->il", "ij,jk,kl->il", {"mm"}, {{2, 3}, {3, 4}, {4, 5}}),
    einsum_row("bi,bij,bj->b", "bi,bij,bj->b", {"bmm", "mul"}, {{2, 3}, {2, 3, 4}, {2, 4}}),
    einsum_row("i,ij,j", "i,ij,j->", {"mm"}, {{3}, {3, 4}, {4}}),
    einsum_row("ij,ij->ij", "ij,ij->ij", {"mul"}, {{3, 4}, {3, 4}}),
    einsum_row("ij,ij->", "ij,ij->", {"mm"}, {{3, 4}, {3, 4}}),
    einsum_row("...ij,...jk->...ik", "aij,ajk->aik", {"bmm"}, {{2, 3, 4}, {1, 4, 5}}),
    einsum_row("bij,jk->bik", "bij,jk->bik", {"mm"}, {{2, 3, 4}, {4, 5}}),
    einsum_row("ij,kj->ik", "ij,kj->ik", {"mm"}, {{0, 3}, {2, 3}}),
    einsum_row("ij,jk->ik", "ij,jk->ik", {"mm"}, {{2, 0}, {0, 3}}, "/k0"),
});
// clang-format on

// ---------------------------------------------------------------- plain cases

namespace {

void check_close(const of::Tensor& got, const of::Tensor& want, double rtol = 1e-5,
                 double atol = 1e-6) {
  REQUIRE(got.sizes() == want.sizes());
  CHECK(got.dtype() == want.dtype());
  CHECK(of::allclose(got, want, rtol, atol));
}

// The ordinary triple loop in double, from host data.
of::Tensor loop_mm(const of::Tensor& a, const of::Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q)
      for (int64_t j = 0; j < n; ++j)
        c[size_t(i * n + j)] += av[size_t(i * k + q)] * bv[size_t(q * n + j)];
  return of::tensor(c, {m, n}, of::kFloat64);
}

}  // namespace

TEST_CASE("linalg: transposed and strided views give the same result as contiguous inputs") {
  of::manual_seed(10);
  for (of::ScalarType t : {of::kFloat32, of::kFloat64}) {
    INFO("dtype " << of::dtype_name(t));
    const double rtol = t == of::kFloat32 ? 1e-5 : 1e-12;
    const of::Tensor a = of::randn({37, 53}, t), b = of::randn({53, 29}, t);
    const of::Tensor at = of::randn({53, 37}, t).t(), bt = of::randn({29, 53}, t).t();
    REQUIRE(!at.is_contiguous());
    // Transposed views (BLAS Trans, no copy) against their contiguous copies.
    check_close(of::mm(at, b), of::mm(at.contiguous(), b), rtol);
    check_close(of::mm(a, bt), of::mm(a, bt.contiguous()), rtol);
    check_close(of::mm(at, bt), of::mm(at.contiguous(), bt.contiguous()), rtol);
    check_close(of::matmul(at, bt), of::mm(at.contiguous(), bt.contiguous()), rtol);
    // Row step (ld > cols), column step (neither stride 1: copied), both against a loop.
    const of::Tensor big = of::randn({2 * 37, 2 * 53}, t);
    const of::Tensor rows = big.slice(0, 0, 2 * 37, 2).slice(1, 0, 53);
    const of::Tensor both = big.slice(0, 0, 2 * 37, 2).slice(1, 0, 2 * 53, 2);
    check_close(of::mm(rows, b), of::mm(rows.contiguous(), b), rtol);
    check_close(of::mm(both, b), of::mm(both.contiguous(), b), rtol);
    check_close(of::mm(both, b).to(of::kFloat64), loop_mm(both, b), 1e-4, 1e-4);
    // Expanded operands (stride 0) and size-1 dims.
    const of::Tensor col = of::randn({53, 1}, t).expand({53, 29});
    check_close(of::mm(a, col), of::mm(a, col.contiguous()), rtol);
    // bmm with transposed inner matrices and a batch-broadcast matmul.
    const of::Tensor x = of::randn({4, 9, 17}, t), y = of::randn({4, 11, 17}, t);
    check_close(of::bmm(x, y.transpose(1, 2)), of::bmm(x, y.transpose(1, 2).contiguous()), rtol);
    check_close(of::bmm(y.transpose(1, 2).transpose(1, 2), x.transpose(1, 2)),
                of::bmm(y, x.transpose(1, 2).contiguous()), rtol);
    const of::Tensor w = of::randn({17, 5}, t);
    check_close(of::matmul(x, w), of::bmm(x, w.expand({4, 17, 5}).contiguous()), rtol);
    check_close(of::matmul(x.transpose(1, 2).contiguous().transpose(1, 2), w), of::matmul(x, w),
                rtol);
  }
}

TEST_CASE("linalg: larger GEMMs and many small batched GEMMs match a float64 loop") {
  of::manual_seed(11);
  const of::Tensor a = of::randn({130, 70}), b = of::randn({70, 90});
  check_close(of::mm(a, b).to(of::kFloat64), loop_mm(a, b), 1e-4, 1e-4);
  // Many tiny GEMMs: spread over the thread pool.
  const of::Tensor x = of::randn({64, 5, 6}, of::kFloat64), y = of::randn({64, 6, 3}, of::kFloat64);
  const of::Tensor got = of::bmm(x, y);
  for (int64_t i = 0; i < 64; i += 7) check_close(got[i], loop_mm(x[i], y[i]), 1e-12, 1e-12);
}

TEST_CASE("linalg: mm_out writes into out, including non-contiguous and aliasing outs") {
  of::manual_seed(12);
  const of::Tensor a = of::randn({3, 4}), b = of::randn({4, 5});
  of::Tensor out = of::empty({3, 5});
  of::Tensor& r = of::mm_out(out, a, b);
  CHECK(&r == &out);
  check_close(out, of::mm(a, b));
  // Non-contiguous out.
  of::Tensor outt = of::empty({5, 3}).t();
  of::mm_out(outt, a, b);
  check_close(outt, of::mm(a, b));
  // float64 out for float32 operands (a widening cast is allowed).
  of::Tensor out64 = of::empty({3, 5}, of::kFloat64);
  of::mm_out(out64, a, b);
  check_close(out64, of::mm(a, b).to(of::kFloat64));
  // out aliases an operand: the result is as if computed into a fresh tensor.
  of::Tensor sq = of::randn({4, 4});
  const of::Tensor sq0 = sq.clone(), c = of::randn({4, 4});
  of::mm_out(sq, sq, c);
  check_close(sq, of::mm(sq0, c));
  // Wrong shape: an [mm] error, out untouched.
  of::Tensor bad = of::zeros({2, 5});
  CHECK(th::throws_with([&] { of::mm_out(bad, a, b); }, {"[mm]", "(2, 5)", "(3, 5)"}));
  CHECK(bad.abs().sum().item<double>() == 0);
}

TEST_CASE("linalg: addmm and baddbmm with beta = 0 ignore NaN and Inf in self") {
  of::manual_seed(13);
  const of::Tensor a = of::randn({3, 4}), b = of::randn({4, 5});
  const of::Tensor self = of::full({3, 5}, NAN);
  const of::Tensor r = of::addmm(self, a, b, 0, 2);
  CHECK(of::allclose(r, of::mm(a, b) * 2, 1e-5, 1e-6));
  const of::Tensor selfi = of::full({5}, INFINITY);
  CHECK(of::allclose(of::addmm(selfi, a, b, 0), of::mm(a, b)));
  const of::Tensor x = of::randn({2, 3, 4}), y = of::randn({2, 4, 5});
  CHECK(of::allclose(of::baddbmm(of::full({2, 3, 5}, NAN), x, y, 0, 1), of::bmm(x, y)));
  // beta != 0 does propagate NaN.
  CHECK(of::isnan(of::addmm(self, a, b, 1, 1)).all().item<bool>());
}

TEST_CASE("linalg: integer and 16-bit float operands (fallback paths)") {
  const of::Tensor a = of::arange(12, of::kInt64).reshape({3, 4}) - 5;
  const of::Tensor b = of::arange(20, of::kInt64).reshape({4, 5}) * 3 - 7;
  const of::Tensor c = of::mm(a, b);
  CHECK(c.dtype() == of::kInt64);
  CHECK(c.to_vector<double>() == loop_mm(a, b).to_vector<double>());
  // Strided integer operands and int32.
  CHECK(of::mm(b.t(), a.t()).to_vector<double>() == loop_mm(b.t(), a.t()).to_vector<double>());
  const of::Tensor ai = a.to(of::kInt32), bi = b.to(of::kInt32);
  CHECK(of::matmul(ai, bi).dtype() == of::kInt32);
  CHECK(of::matmul(ai, bi).to_vector<double>() == c.to_vector<double>());
  CHECK(of::addmm(of::ones({5}, of::kInt64), a, b, 2, 3).to_vector<double>() ==
        (c * 3 + 2).to_vector<double>());
  CHECK(th::throws_with([&] { of::addmm(of::ones({5}, of::kInt64), a, b, 0.5, 1); },
                        {"[addmm]", "int64"}));
  const of::Tensor bt = of::bmm(a.unsqueeze(0).expand({2, 3, 4}), b.unsqueeze(0).expand({2, 4, 5}));
  CHECK(bt[1].to_vector<double>() == c.to_vector<double>());
  // float16 / bfloat16: float accumulation, dtype kept.
  of::manual_seed(14);
  const of::Tensor x = of::randn({16, 32}), y = of::randn({32, 8});
  for (of::ScalarType t : {of::kHalf, of::kBFloat16}) {
    INFO("dtype " << of::dtype_name(t));
    const of::Tensor want = of::mm(x.to(t).to(of::kFloat32), y.to(t).to(of::kFloat32));
    const of::Tensor got = of::mm(x.to(t), y.to(t));
    CHECK(got.dtype() == t);
    CHECK(of::allclose(got.to(of::kFloat32), want, 2e-2, 5e-2));
    CHECK(of::allclose(of::matmul(x.to(t).t(), x.to(t)).to(of::kFloat32),
                       of::mm(x.to(t).to(of::kFloat32).t(), x.to(t).to(of::kFloat32)), 2e-2, 1e-1));
  }
  CHECK(th::throws_with(
      [] {
        of::mm(of::ones({2, 2}, of::kBool), of::ones({2, 2}, of::kBool));
      },
      {"[mm]", "bool"}));
}

TEST_CASE("linalg: gradients flow through broadcast matmul, einsum and addmm") {
  of::manual_seed(15);
  const of::Tensor a = of::randn({2, 3, 4}, of::kFloat64).requires_grad_();
  const of::Tensor w = of::randn({4, 5}, of::kFloat64).requires_grad_();
  // Non-contiguous a takes the bmm path with w expanded.
  of::matmul(a.transpose(0, 1), w).sum().backward();
  REQUIRE(a.grad().defined());
  REQUIRE(w.grad().defined());
  CHECK(a.grad().sizes() == a.sizes());
  CHECK(w.grad().sizes() == w.sizes());
  // d/dw sum(a @ w) = sum over rows of a, broadcast over columns.
  const of::Tensor want = a.detach().sum({0, 1}).unsqueeze(1).expand({4, 5});
  CHECK(of::allclose(w.grad(), want, 1e-10, 1e-10));
  const std::string err =
      th::gradcheck([](const std::vector<of::Tensor>& x) { return of::einsum("bij,jk->bki", x); },
                    {of::randn({2, 3, 4}, of::kFloat64), of::randn({4, 2}, of::kFloat64)});
  CHECK_MESSAGE(err.empty(), err);
}

TEST_CASE("linalg: einsum output order, uppercase labels and views") {
  of::manual_seed(16);
  const of::Tensor a = of::randn({3, 4});
  // Implicit output is alphabetical: "ba" -> "ab", a transpose.
  check_close(of::einsum("ba", {a}), a.t().contiguous());
  check_close(of::einsum("Ab,bC->AC", {a, of::eye(4)}), a);
  check_close(of::einsum(" i j , j k -> i k ", {a, of::eye(4)}), a);
  CHECK(of::einsum("ij->ij", {a}).sizes() == a.sizes());
  const of::Tensor s = of::einsum("ij->", {a});
  CHECK(s.dim() == 0);
  CHECK(std::abs(s.item<double>() - a.sum().item<double>()) < 1e-4);
}

TEST_CASE("linalg: error messages name the op, shapes and dtypes") {
  const of::Tensor a = of::zeros({3, 4}), b = of::zeros({5, 2});
  CHECK(th::throws_with([&] { of::matmul(a, b); }, {"[matmul]", "(3, 4)", "(5, 2)", "4 != 5"}));
  CHECK(th::throws_with([&] { a.matmul(b); }, {"[matmul]", "(3, 4)", "(5, 2)"}));
  CHECK(th::throws_with([&] { of::mm(a, b); }, {"[mm]", "(3, 4)", "(5, 2)", "4 != 5"}));
  CHECK(th::throws_with([&] { of::matmul(of::zeros({3}), of::zeros({4})); },
                        {"[matmul]", "(3,)", "(4,)"}));
  CHECK(th::throws_with(
      [&] {
        of::matmul(of::zeros({2, 3, 4}), of::zeros({3, 4, 2}));
      },
      {"[matmul]", "(2, 3, 4)", "(3, 4, 2)"}));
  CHECK(th::throws_with([&] { of::matmul(of::scalar_tensor(1.0), a); }, {"[matmul]", "0-D"}));
  CHECK(th::throws_with(
      [&] {
        of::mm(a, of::zeros({4, 2}, of::kFloat64));
      },
      {"[mm]", "same dtype", "float32", "float64"}));
  CHECK(th::throws_with(
      [&] {
        of::matmul(a, of::zeros({4, 2}, of::kFloat64));
      },
      {"[matmul]", "float32", "float64"}));
  CHECK(th::throws_with([&] { of::mm(of::zeros({4}), a); }, {"[mm]", "2-D", "(4,)"}));
  CHECK(th::throws_with([&] { of::bmm(a, a); }, {"[bmm]", "3-D"}));
  CHECK(th::throws_with(
      [&] {
        of::bmm(of::zeros({2, 3, 4}), of::zeros({3, 4, 5}));
      },
      {"[bmm]", "(2, 3, 4)", "(3, 4, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::bmm(of::zeros({2, 3, 4}), of::zeros({2, 5, 5}));
      },
      {"[bmm]", "4 != 5"}));
  CHECK(th::throws_with(
      [&] {
        of::addmm(of::zeros({2, 5}), a, of::zeros({4, 5}));
      },
      {"[addmm]", "(2, 5)", "(3, 5)"}));
  CHECK(th::throws_with(
      [&] {
        of::addmm(of::zeros({3, 5}, of::kFloat64), a, of::zeros({4, 5}));
      },
      {"[addmm]", "float64", "float32"}));
  CHECK(th::throws_with(
      [&] {
        of::baddbmm(of::zeros({2, 3, 5}), of::zeros({2, 3, 4}), of::zeros({2, 5, 5}));
      },
      {"[baddbmm]", "4 != 5"}));
  CHECK(th::throws_with([&] { of::dot(a, a); }, {"[dot]", "1-D"}));
  CHECK(
      th::throws_with([&] { of::dot(of::zeros({3}), of::zeros({4})); }, {"[dot]", "(3,)", "(4,)"}));
  CHECK(th::throws_with([&] { of::outer(a, of::zeros({3})); }, {"[outer]", "1-D"}));
  // einsum equations.
  CHECK(th::throws_with([&] { of::einsum("ij,jk->ik", {a}); },
                        {"[einsum]", "2 operands", "1 was given"}));
  CHECK(th::throws_with(
      [&] {
        of::einsum("ijk,jk->ik", {a, a});
      },
      {"[einsum]", "operand 0", "ijk", "(3, 4)"}));
  CHECK(th::throws_with(
      [&] {
        of::einsum("ij,jk->ix", {a, of::zeros({4, 2})});
      },
      {"[einsum]", "'x'"}));
  CHECK(th::throws_with([&] { of::einsum("ij->ii", {a}); }, {"[einsum]", "'i'", "more than once"}));
  CHECK(th::throws_with([&] { of::einsum("i1->i", {of::zeros({3, 3})}); }, {"[einsum]", "'1'"}));
  CHECK(th::throws_with(
      [&] {
        of::einsum("ij,jk->ik", {a, of::zeros({5, 2})});
      },
      {"[einsum]", "'j'", "5", "4"}));
  CHECK(th::throws_with([&] { of::einsum("ii->i", {a}); }, {"[einsum]", "'i'", "3 != 4"}));
  CHECK(th::throws_with([&] { of::einsum("ij->i->j", {a}); }, {"[einsum]", "->"}));
  CHECK(th::throws_with([&] { of::einsum("ij", {}); }, {"[einsum]"}));
  CHECK(th::throws_with(
      [&] {
        of::einsum("ij,jk", {a, of::zeros({4, 2}, of::kFloat64)});
      },
      {"[einsum]", "float32", "float64"}));
}

namespace {
// The product of the same (rounded) operands in float64: what the GEMM kernels are held to.
of::Tensor matmul64(const of::Tensor& a, const of::Tensor& b) {
  return of::matmul(a.to(of::kFloat64), b.to(of::kFloat64));
}
}  // namespace

TEST_CASE("linalg: bfloat16 GEMMs on AVX512-BF16 (NOTE [bfloat16 GEMM]) match float64") {
  // mm / bmm / addmm / linear on bfloat16 operands: against a float64 product of the same
  // (rounded) operands, through the AVX512-BF16 kernel where the CPU has it and through the
  // widened sgemm; shapes cross the kernel's tile (12 rows), strip (32 columns) and k-block (512)
  // edges, operands come transposed, batched and broadcast.
  const bool kernel = of::cpu::gemm_bf16_supported();
  const bool amx = of::cpu::gemm_bf16_amx();
  const std::string on_cpu = kernel ? "yes" : "no (the widened path only)";
  const std::string amx_here = amx ? "yes (k a multiple of 32)" : "no";
  MESSAGE("AVX512-BF16 kernel on this CPU: " << on_cpu << "; AMX-BF16: " << amx_here);
  of::manual_seed(41);
  auto close = [](const of::Tensor& got, const of::Tensor& want, int64_t k) {
    // the output is rounded to bfloat16 once (2^-8 relative); float32 sums add ~k * 2^-24
    const double atol = 1e-6 * double(k) * want.abs().max().item<double>() + 1e-30;
    return of::allclose(got.to(of::kFloat64), want, 8e-3, atol);
  };
  // (k = 32, 64, 384, 1024: AMX where the CPU has it; m crosses its 32-row blocks; at most 4
  // rows against a transposed B: dot products, NOTE [bfloat16 GEMV], k crossing its 32 values)
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1},      {5, 17, 2},   {12, 32, 7},    {13, 33, 64}, {30, 70, 1100},
      {128, 96, 384}, {17, 31, 32}, {33, 65, 1024}, {64, 32, 96}, {1, 50, 100},
      {3, 37, 33},    {4, 5, 64},   {2, 300, 1}};
  // the kernel with AMX, the kernel without (AVX512-BF16 only), the widened sgemm
  for (int path = 0; path < 3; ++path) {
    const bool use_kernel = path < 2;
    const bool prev = of::cpu::set_gemm_bf16_enabled(use_kernel);
    const bool prev_amx = of::cpu::set_gemm_bf16_amx(path == 0);
    for (const auto& shape : shapes) {  // (no structured binding: clang 14's doctest lambdas)
      const int64_t m = shape[0], n = shape[1], k = shape[2];
      INFO("path " << path << " m " << m << " n " << n << " k " << k);
      const of::Tensor a = of::randn({m, k}).to(of::kBFloat16);
      const of::Tensor b = of::randn({k, n}).to(of::kBFloat16);
      const of::Tensor w = of::randn({n, k}).to(of::kBFloat16);  // linear's [out, in]
      const of::Tensor bias = of::randn({n}).to(of::kBFloat16);
      const of::Tensor got = of::mm(a, b);
      CHECK(got.dtype() == of::kBFloat16);
      CHECK(close(got, matmul64(a, b), k));
      // a transposed operand (read in place) and a copied one (strided in both dims)
      CHECK(close(of::mm(a, w.t()), matmul64(a, w.t()), k));
      CHECK(close(of::mm(b.t(), a.t()), matmul64(b.t(), a.t()), k));
      const of::Tensor a2 = of::randn({m, 2 * k}).to(of::kBFloat16).slice(1, 0, 2 * k, 2);
      CHECK(close(of::mm(a2, b), matmul64(a2, b), k));
      // linear (bias preloaded, beta = 1) and addmm (alpha, beta)
      CHECK(close(of::linear(a, w, bias), matmul64(a, w.t()) + bias.to(of::kFloat64), k));
      const of::Tensor self = of::randn({m, n}).to(of::kBFloat16);
      CHECK(close(of::addmm(self, a, b, 0.5, 2.0),
                  matmul64(a, b) * 2.0 + self.to(of::kFloat64) * 0.5, k));
      // bmm, one operand's batch broadcast
      const of::Tensor ab = of::randn({3, m, k}).to(of::kBFloat16);
      CHECK(close(of::matmul(ab, b), matmul64(ab, b), k));
      CHECK(close(of::bmm(ab, b.unsqueeze(0).expand({3, k, n})), matmul64(ab, b), k));
    }
    of::cpu::set_gemm_bf16_enabled(prev);
    of::cpu::set_gemm_bf16_amx(prev_amx);
  }
  if (amx) {  // inf and NaN reach the output on the tile unit too
    of::Tensor a = of::randn({40, 64}).to(of::kBFloat16), b = of::randn({64, 20}).to(of::kBFloat16);
    a.index_put_({3, 5}, std::numeric_limits<float>::infinity());
    a.index_put_({35, 7}, std::numeric_limits<float>::quiet_NaN());
    const of::Tensor got = of::mm(a, b).to(of::kFloat32);
    CHECK(of::isinf(got.select(0, 3)).any().item<bool>());
    CHECK(of::isnan(got.select(0, 35)).all().item<bool>());
    CHECK(!of::isnan(got.select(0, 4)).any().item<bool>());
    CHECK(!of::isinf(got.select(0, 4)).any().item<bool>());
  }
  // the sums do not depend on the thread count; both paths agree to bfloat16 rounding
  const of::Tensor a = of::randn({64, 640}).to(of::kBFloat16),
                   b = of::randn({640, 200}).to(of::kBFloat16);
  const int threads = of::get_num_threads();
  of::set_num_threads(1);
  const of::Tensor one = of::mm(a, b);
  of::set_num_threads(2);
  const of::Tensor two = of::mm(a, b);
  // more threads than cores: a thread done with its region takes tasks of the others (NOTE
  // [GEMM task regions]) whenever one is descheduled
  of::set_num_threads(5);
  for (int rep = 0; rep < 20; ++rep) CHECK(of::equal(of::mm(a, b), one));
  of::set_num_threads(threads);
  CHECK(of::equal(one, two));
  const bool prev = of::cpu::set_gemm_bf16_enabled(false);
  const of::Tensor widened = of::mm(a, b);
  of::cpu::set_gemm_bf16_enabled(prev);
  CHECK(of::allclose(one.to(of::kFloat32), widened.to(of::kFloat32), 8e-3, 1e-3));
  // a decoding step's dot products: thread count and replay (the weight not packed) give
  // eager's bits
  const of::Tensor x = of::randn({1, 640}).to(of::kBFloat16),
                   w = of::randn({300, 640}).to(of::kBFloat16);
  of::set_num_threads(1);
  const of::Tensor g1 = of::linear(x, w);
  of::set_num_threads(2);
  const of::Tensor g2 = of::linear(x, w);
  of::set_num_threads(threads);
  CHECK(of::equal(g1, g2));
  auto step = of::jit::trace([&](const of::Tensor& in) { return of::linear(in, w); });
  of::NoGradGuard ng;
  const size_t packed_before = of::cpu::packed_constant_operands();
  for (int call = 0; call < 3; ++call) {
    const of::Tensor in = of::randn({call + 1, 640}).to(of::kBFloat16);
    (void)step(in);  // (a new shape records; the next call replays)
    CHECK(th::same_bits(step(in), of::linear(in, w)));
  }
  // where the CPU has the kernel, the dot products ran: the replays packed no weight
  if (kernel) CHECK(of::cpu::packed_constant_operands() == packed_before);
}

TEST_CASE("linalg: the float32 GEMM kernel (NOTE [float32 GEMM]) matches float64 and sgemm") {
  // 2-D float32 GEMMs (mm, matmul folded to 2-D, addmm, linear with its bias in the epilogue)
  // through the AVX-512 kernel where the CPU has it, and through OpenBLAS's sgemm: shapes cross
  // the kernel's tile (12 rows), strip (32 columns), k block (256) and row block (144) edges;
  // operands come transposed (read in place) and strided in both dims (copied).
  const bool kernel = of::cpu::gemm_f32_supported();
  const std::string on_cpu = kernel ? "yes" : "no (sgemm only)";
  MESSAGE("AVX-512 float32 kernel on this CPU: " << on_cpu);
  of::manual_seed(43);
  auto close = [](const of::Tensor& got, const of::Tensor& want, int64_t k) {
    const double atol = 4e-7 * double(k) * want.abs().max().item<double>() + 1e-30;
    return of::allclose(got.to(of::kFloat64), want, 1e-5, atol);
  };
  // (at most 4 rows against a transposed B, linear's: dot products, NOTE [float32 GEMV]; k
  // crosses its 16 lanes, n its 4 rows)
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1},      {5, 17, 2},   {12, 32, 7}, {13, 33, 257}, {150, 70, 600},
      {128, 96, 384}, {1, 50, 100}, {3, 37, 33}, {4, 5, 16},    {2, 300, 1}};
  for (bool use_kernel : {true, false}) {
    const bool prev = of::cpu::set_gemm_f32_enabled(use_kernel);
    for (const auto& shape : shapes) {  // (no structured binding: clang 14's doctest lambdas)
      const int64_t m = shape[0], n = shape[1], k = shape[2];
      INFO("kernel " << use_kernel << " m " << m << " n " << n << " k " << k);
      const of::Tensor a = of::randn({m, k}), b = of::randn({k, n}), w = of::randn({n, k});
      const of::Tensor bias = of::randn({n});
      CHECK(close(of::mm(a, b), matmul64(a, b), k));
      CHECK(close(of::mm(a, w.t()), matmul64(a, w.t()), k));
      CHECK(close(of::mm(b.t(), a.t()), matmul64(b.t(), a.t()), k));
      const of::Tensor a2 = of::randn({m, 2 * k}).slice(1, 0, 2 * k, 2);
      CHECK(close(of::mm(a2, b), matmul64(a2, b), k));
      if (k <= 256) {  // rows 272 floats apart: the kernel's packed layout, read without a copy
        const of::Tensor a3 = of::randn({m, 272}).slice(1, 0, k);
        CHECK(close(of::mm(a3, b), matmul64(a3, b), k));
      }
      CHECK(close(of::linear(a, w, bias), matmul64(a, w.t()) + bias.to(of::kFloat64), k));
      CHECK(close(of::linear(a, w), matmul64(a, w.t()), k));
      const of::Tensor self = of::randn({m, n});
      CHECK(close(of::addmm(self, a, b, 0.5, 2.0),
                  matmul64(a, b) * 2.0 + self.to(of::kFloat64) * 0.5, k));
      CHECK(close(of::addmm(self, a, w.t(), 0.5, 2.0),
                  matmul64(a, w.t()) * 2.0 + self.to(of::kFloat64) * 0.5, k));
      // out= into a buffer holding garbage (beta = 0 never reads it)
      of::Tensor out = of::full({m, n}, NAN);
      of::mm_out(out, a, b);
      CHECK(close(out, matmul64(a, b), k));
    }
    of::cpu::set_gemm_f32_enabled(prev);
  }
  // the sums do not depend on the thread count
  const of::Tensor a = of::randn({300, 700}), b = of::randn({700, 200});
  const int threads = of::get_num_threads();
  of::set_num_threads(1);
  const of::Tensor one = of::mm(a, b);
  of::set_num_threads(2);
  const of::Tensor two = of::mm(a, b);
  // more threads than cores: a thread done with its region takes tasks of the others (NOTE
  // [GEMM task regions]) whenever one is descheduled
  of::set_num_threads(5);
  for (int rep = 0; rep < 20; ++rep) CHECK(of::equal(of::mm(a, b), one));
  of::set_num_threads(threads);
  CHECK(of::equal(one, two));
  // the same for the dot products of a decoding step (one row against a weight), and a traced
  // replay (its weight a constant: not packed for this shape) gives eager's bits
  const of::Tensor x = of::randn({1, 700}), w = of::randn({300, 700}), bias = of::randn({300});
  of::set_num_threads(1);
  const of::Tensor g1 = of::linear(x, w, bias);
  of::set_num_threads(2);
  const of::Tensor g2 = of::linear(x, w, bias);
  of::set_num_threads(threads);
  CHECK(of::equal(g1, g2));
  auto step = of::jit::trace([&](const of::Tensor& in) { return of::linear(in, w, bias).relu(); });
  of::NoGradGuard ng;
  for (int call = 0; call < 3; ++call) {
    const of::Tensor in = of::randn({call + 1, 700});
    (void)step(in);  // (a new shape records; the next call replays)
    CHECK(th::same_bits(step(in), of::linear(in, w, bias).relu()));
  }
}

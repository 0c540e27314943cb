// test_layers_extra.cpp: nn/extra.h and nn/losses.h. Table rows for the ops (im2col, col2im,
// ctc_loss against plain loops and a brute-force sum over all CTC alignments); the composite
// losses and layers against float64 loop references, gradchecked, with their error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

using th::OpRow;
using th::Ref;
using th::Shape;
using T = of::Tensor;
using V = std::vector<T>;
using R = std::vector<Ref>;
namespace F = of::nn::functional;

namespace {

struct ColP {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

// col[n, (c*kh + i)*kw + j, oh*OW + ow] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
Ref ref_im2col(const Ref& x, const ColP& p) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = (H + 2 * p.ph - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  const int64_t OW = (W + 2 * p.pw - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  Ref y({N, C * p.kh * p.kw, OH * OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < p.kh; ++i)
        for (int64_t j = 0; j < p.kw; ++j)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t h = oh * p.sh - p.ph + i * p.dh, w = ow * p.sw - p.pw + j * p.dw;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              y.v[size_t(y.flat({n, (c * p.kh + i) * p.kw + j, oh * OW + ow}))] =
                  x.at({n, c, h, w});
            }
  return y;
}

Ref ref_col2im(const Ref& col, int64_t H, int64_t W, const ColP& p) {
  const int64_t N = col.shape[0], C = col.shape[1] / (p.kh * p.kw);
  const int64_t OH = (H + 2 * p.ph - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  const int64_t OW = (W + 2 * p.pw - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  Ref y({N, C, H, W});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < p.kh; ++i)
        for (int64_t j = 0; j < p.kw; ++j)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t h = oh * p.sh - p.ph + i * p.dh, w = ow * p.sw - p.pw + j * p.dw;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              y.v[size_t(y.flat({n, c, h, w}))] +=
                  col.at({n, (c * p.kh + i) * p.kw + j, oh * OW + ow});
            }
  return y;
}

const ColP kCol{2, 3, 2, 1, 1, 0, 2, 1};  // output (3, 4) blocks for a 5 x 6 image

// -log sum over every path of length Tb (C^Tb of them) that collapses to the target.
double ref_ctc_nll(const Ref& lp, int64_t b, int64_t Tb, const std::vector<int64_t>& tgt,
                   int64_t blank) {
  const int64_t N = lp.shape[1], C = lp.shape[2];
  int64_t paths = 1;
  for (int64_t t = 0; t < Tb; ++t) paths *= C;
  double total = 0;
  for (int64_t code = 0; code < paths; ++code) {
    std::vector<int64_t> path;
    int64_t c = code;
    double lsum = 0;
    for (int64_t t = 0; t < Tb; ++t) {
      path.push_back(c % C);
      lsum += lp.v[size_t((t * N + b) * C + c % C)];
      c /= C;
    }
    std::vector<int64_t> collapsed;
    for (int64_t t = 0; t < Tb; ++t)
      if (path[size_t(t)] != blank && (t == 0 || path[size_t(t)] != path[size_t(t - 1)]))
        collapsed.push_back(path[size_t(t)]);
    if (collapsed == tgt) total += std::exp(lsum);
  }
  return -std::log(total);
}

T longs(std::vector<int64_t> v, Shape s = {}) {
  if (s.empty()) s = {int64_t(v.size())};
  return of::tensor(v, s);
}

}  // namespace

// clang-format off
TH_ROWS({
    th::make_row("im2col", {"im2col"}, {{2, 2, 5, 6}},
                 [](const V& a) { return of::im2col(a[0], {2, 3}, {2, 1}, {1, 0}, {2, 1}); },
                 [](const R& r) { return ref_im2col(r[0], kCol); }),
    th::make_row("col2im", {"col2im"}, {{2, 12, 12}},
                 [](const V& a) { return of::col2im(a[0], {5, 6}, {2, 3}, {2, 1}, {1, 0}, {2, 1}); },
                 [](const R& r) { return ref_col2im(r[0], 5, 6, kCol); }),
    // padded targets [N, S], reduction none; sample 1 has a repeated label and a shorter input
    th::make_row("ctc_loss/padded", {"ctc_loss", "ctc_loss_backward"}, {{4, 2, 3}},
                 [](const V& a) {
                   return of::ctc_loss(a[0], th::like(longs({1, 2, 1, 1}, {2, 2}), a[0]),
                                       th::like(longs({4, 3}), a[0]), th::like(longs({2, 2}), a[0]),
                                       0, of::Reduction::None);
                 },
                 [](const R& r) {
                   Ref y({2});
                   y.v[0] = ref_ctc_nll(r[0], 0, 4, {1, 2}, 0);
                   y.v[1] = ref_ctc_nll(r[0], 1, 3, {1, 1}, 0);
                   return y;
                 }),
    // concatenated targets, blank = 2, mean over target lengths (one empty target)
    th::make_row("ctc_loss/concat_mean", {"ctc_loss", "ctc_loss_backward"}, {{3, 3, 3}},
                 [](const V& a) {
                   return of::ctc_loss(a[0], th::like(longs({0, 1, 0}), a[0]),
                                       th::like(longs({3, 3, 2}), a[0]),
                                       th::like(longs({2, 0, 1}), a[0]), 2, of::Reduction::Mean);
                 },
                 [](const R& r) {
                   const double l0 = ref_ctc_nll(r[0], 0, 3, {0, 1}, 2) / 2;
                   const double l1 = ref_ctc_nll(r[0], 1, 3, {}, 2) / 1;
                   const double l2 = ref_ctc_nll(r[0], 2, 2, {0}, 2) / 1;
                   return Ref({}, {(l0 + l1 + l2) / 3});
                 }),
});
// clang-format on

namespace {

T d64(Shape s, uint64_t seed, double lo = -1, double hi = 1) {
  of::manual_seed(seed);
  return of::rand(s, of::kFloat64) * (hi - lo) + lo;
}
std::vector<double> vec(const T& t) { return t.contiguous().to_vector<double>(); }
void near(const T& t, const std::vector<double>& ref, double tol = 1e-9) {
  std::vector<double> v = vec(t);
  REQUIRE(v.size() == ref.size());
  for (size_t i = 0; i < v.size(); ++i)
    CHECK_MESSAGE(std::abs(v[i] - ref[i]) <= tol * (1 + std::abs(ref[i])), "at ", i, ": ", v[i],
                  " vs ", ref[i]);
}
void grad_ok(const std::function<T(const V&)>& fn, const V& in, std::vector<int> nondiff = {}) {
  std::string msg = th::gradcheck(fn, in, nondiff);
  CHECK_MESSAGE(msg.empty(), msg);
}
void throws(const std::function<void()>& fn, std::vector<std::string> needles) {
  std::string msg;
  CHECK_MESSAGE(th::throws_with(fn, needles, &msg), msg);
}
double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

}  // namespace

TEST_CASE("ctc_loss: zero_infinity, sum reduction, log_softmax gradient and the loss module") {
  // target [1, 1] needs 3 frames: 2 frames give an infinite loss
  T lp = d64({2, 1, 3}, 1).log_softmax(-1).detach().requires_grad_(true);
  T inf = of::ctc_loss(lp, longs({1, 1}, {1, 2}), longs({2}), longs({2}), 0, of::Reduction::Sum);
  CHECK(std::isinf(inf.item<double>()));
  T z =
      of::ctc_loss(lp, longs({1, 1}, {1, 2}), longs({2}), longs({2}), 0, of::Reduction::Sum, true);
  CHECK(z.item<double>() == 0);
  z.backward();
  for (double g : vec(lp.grad())) CHECK(g == 0);
  // through log_softmax our gradient equals libtorch's exp(lp) - exp(lcab - nll - lp) form
  T x = d64({4, 2, 3}, 2);
  grad_ok(
      [](const V& a) {
        return F::ctc_loss(a[0].log_softmax(2), longs({1, 2, 1, 1}, {2, 2}), longs({4, 4}),
                           longs({2, 2}), F::CTCLossFuncOptions().reduction(of::kSum));
      },
      {x});
  of::nn::CTCLoss crit(of::nn::CTCLossOptions().blank(0));
  T l = crit(x.log_softmax(2), longs({1, 2, 1, 1}, {2, 2}), longs({4, 4}), longs({2, 2}));
  const R r{th::to_ref(x.log_softmax(2))};
  CHECK(l.item<double>() ==
        doctest::Approx((ref_ctc_nll(r[0], 0, 4, {1, 2}, 0) + ref_ctc_nll(r[0], 1, 4, {1, 1}, 0)) /
                        4));
  // IntArrayRef lengths and int32 tensors are accepted
  T a = of::ctc_loss(x, longs({1, 2, 1, 1}, {2, 2}), std::vector<int64_t>{4, 4},
                     std::vector<int64_t>{2, 2});
  T b = of::ctc_loss(x, longs({1, 2, 1, 1}, {2, 2}).to(of::kInt32), longs({4, 4}).to(of::kInt32),
                     longs({2, 2}));
  CHECK(a.item<double>() == doctest::Approx(b.item<double>()));
}

TEST_CASE("ctc_loss and fold/unfold errors name the op and the shapes") {
  T lp = d64({4, 2, 3}, 3);
  throws(
      [&] {
        of::ctc_loss(lp, longs({1, 2, 1, 1}, {2, 2}), longs({5, 4}), longs({2, 2}));
      },
      {"[ctc_loss]", "input_lengths", "5"});
  throws(
      [&] {
        of::ctc_loss(lp, longs({1, 3, 1, 1}, {2, 2}), longs({4, 4}), longs({2, 2}));
      },
      {"[ctc_loss]", "target label", "3"});
  throws(
      [&] {
        of::ctc_loss(lp, longs({1, 2}, {1, 2}), longs({4, 4}), longs({2, 2}));
      },
      {"[ctc_loss]", "(1, 2)"});
  throws(
      [&] {
        of::ctc_loss(lp, longs({1, 2, 1, 1}, {2, 2}), longs({4}), longs({2, 2}));
      },
      {"[ctc_loss]", "input_lengths", "(1,)"});
  throws(
      [&] {
        of::ctc_loss(lp, longs({1, 2, 1, 1}, {2, 2}), longs({4, 4}), longs({2, 2}), 3);
      },
      {"[ctc_loss]", "blank 3"});
  throws([&] { F::unfold(d64({2, 5, 6}, 1), F::UnfoldFuncOptions(2)); }, {"[unfold]", "3D"});
  throws([&] { of::im2col(d64({1, 1, 2, 2}, 1), {3, 3}, {1}, {0}, {1}); }, {"[im2col]", "(3, 3)"});
  throws(
      [&] {
        F::fold(d64({1, 12, 11}, 1),
                F::FoldFuncOptions({5, 6}, {2, 3}).padding({1, 0}).stride({2, 1}).dilation({2, 1}));
      },
      {"[col2im]", "12", "11"});
  throws(
      [&] {
        of::col2im(d64({1, 7, 12}, 1), {5, 6}, {2, 3}, {1}, {0}, {1});
      },
      {"[col2im]", "divisible", "7"});
}

TEST_CASE("Fold and Unfold modules are adjoint and invert for non-overlapping blocks") {
  of::nn::Unfold unfold(of::nn::UnfoldOptions({2, 2}).stride(2));
  of::nn::Fold fold(of::nn::FoldOptions({4, 6}, {2, 2}).stride(2));
  T x = d64({2, 3, 4, 6}, 4);
  T cols = unfold(x);
  CHECK(cols.sizes() == of::IntArrayRef({2, 12, 6}));
  near(fold(cols), vec(x));
  // <unfold(x), c> == <x, fold(c)>
  T c = d64({2, 12, 6}, 5);
  CHECK((unfold(x) * c).sum().item<double>() ==
        doctest::Approx((x * fold(c)).sum().item<double>()));
  // unbatched fold
  CHECK(fold(cols[0]).sizes() == of::IntArrayRef({3, 4, 6}));
}

TEST_CASE("elementwise margin losses match float64 references in each reduction") {
  T x = d64({3, 4}, 6), x2 = d64({3, 4}, 7);
  T y = of::where(d64({3, 4}, 8) > 0, 1.0, -1.0).to(of::kFloat64);
  std::vector<double> xv = vec(x), x2v = vec(x2), yv = vec(y);
  auto check_red = [&](const std::function<T(int64_t)>& f, const std::vector<double>& per) {
    near(f(of::Reduction::None), per);
    double s = 0;
    for (double v : per) s += v;
    near(f(of::Reduction::Sum), {s});
    near(f(of::Reduction::Mean), {s / double(per.size())});
  };
  std::vector<double> hinge, soft, rank, pois, poisf;
  T tg = d64({3, 4}, 9, 0, 3);
  std::vector<double> tv = vec(tg);
  for (size_t i = 0; i < xv.size(); ++i) {
    hinge.push_back(yv[i] == 1 ? xv[i] : std::max(0.0, 0.5 - xv[i]));
    soft.push_back(std::log1p(std::exp(-yv[i] * xv[i])));
    rank.push_back(std::max(0.0, -yv[i] * (xv[i] - x2v[i]) + 0.1));
    pois.push_back(std::exp(xv[i]) - tv[i] * xv[i]);
    const double st =
        tv[i] > 1 ? tv[i] * std::log(tv[i]) - tv[i] + 0.5 * std::log(2 * M_PI * tv[i]) : 0;
    poisf.push_back(std::exp(xv[i]) - tv[i] * xv[i] + st);
  }
  check_red([&](int64_t r) { return of::hinge_embedding_loss(x, y, 0.5, r); }, hinge);
  check_red([&](int64_t r) { return of::soft_margin_loss(x, y, r); }, soft);
  check_red([&](int64_t r) { return of::margin_ranking_loss(x, x2, y, 0.1, r); }, rank);
  check_red([&](int64_t r) { return of::poisson_nll_loss(x, tg, true, false, 1e-8, r); }, pois);
  check_red([&](int64_t r) { return of::poisson_nll_loss(x, tg, true, true, 1e-8, r); }, poisf);
  // modules and functional forms with libtorch's options
  near(of::nn::HingeEmbeddingLoss(of::nn::HingeEmbeddingLossOptions().margin(0.5))(x, y),
       {mean_of(hinge)});
  near(of::nn::SoftMarginLoss(of::kSum)(x, y), {mean_of(soft) * 12});
  near(of::nn::MarginRankingLoss(of::nn::MarginRankingLossOptions().margin(0.1))(x, x2, y),
       {mean_of(rank)});
  near(of::nn::PoissonNLLLoss()(x, tg), {mean_of(pois)});
  T xp = d64({3, 4}, 10, 0.5, 2);
  std::vector<double> pv = vec(xp), pn;
  for (size_t i = 0; i < pv.size(); ++i) pn.push_back(pv[i] - tv[i] * std::log(pv[i] + 1e-8));
  near(F::poisson_nll_loss(xp, tg, F::PoissonNLLLossFuncOptions().log_input(false)), {mean_of(pn)});
  grad_ok([&](const V& a) { return of::hinge_embedding_loss(a[0], y, 0.5, of::Reduction::Sum); },
          {x});
  grad_ok([&](const V& a) { return of::soft_margin_loss(a[0], y); }, {x});
  grad_ok([&](const V& a) { return of::margin_ranking_loss(a[0], a[1], y, 0.1); }, {x, x2});
  grad_ok([&](const V& a) { return of::poisson_nll_loss(a[0], tg, true, true, 1e-8, 1); }, {x});
  grad_ok(
      [&](const V& a) {
        return F::poisson_nll_loss(a[0], tg, F::PoissonNLLLossFuncOptions().log_input(false));
      },
      {xp});
}

TEST_CASE("class-wise margin losses match float64 references") {
  T x = d64({3, 4}, 11);
  std::vector<double> xv = vec(x);
  // multi_margin_loss with p = 2, margin 0.7 and a class weight
  T tgt = longs({2, 0, 3});
  T w = d64({4}, 12, 0.5, 1.5);
  std::vector<double> wv = vec(w), mm;
  const int64_t ys[] = {2, 0, 3};
  for (int n = 0; n < 3; ++n) {
    double s = 0;
    for (int i = 0; i < 4; ++i)
      if (i != ys[n]) {
        const double z = std::max(0.0, 0.7 - xv[n * 4 + ys[n]] + xv[n * 4 + i]);
        s += z * z * wv[ys[n]];
      }
    mm.push_back(s / 4);
  }
  auto mmo = F::MultiMarginLossFuncOptions().p(2).margin(0.7).weight(w).reduction(of::kNone);
  near(F::multi_margin_loss(x, tgt, mmo), mm);
  near(of::nn::MultiMarginLoss(of::nn::MultiMarginLossOptions().p(2).margin(0.7).weight(w))(x, tgt),
       {mean_of(mm)});
  grad_ok([&](const V& a) { return F::multi_margin_loss(a[0], tgt, mmo); }, {x});
  grad_ok([&](const V& a) { return of::multi_margin_loss(a[0], tgt); }, {x});
  // multilabel_margin_loss: labels up to the first -1
  T mt = longs({3, 0, -1, 1, 1, -1, 2, 0, -1, 1, 0, 0}, {3, 4});
  const std::vector<std::vector<int>> labels = {{3, 0}, {1}, {}};
  std::vector<double> ml;
  for (int n = 0; n < 3; ++n) {
    double s = 0;
    for (int j : labels[size_t(n)])
      for (int i = 0; i < 4; ++i) {
        bool is_t = false;
        for (int k : labels[size_t(n)]) is_t |= k == i;
        if (!is_t) s += std::max(0.0, 1 - (xv[size_t(n * 4 + j)] - xv[size_t(n * 4 + i)]));
      }
    ml.push_back(s / 4);
  }
  near(of::multilabel_margin_loss(x, mt, of::Reduction::None), ml);
  near(of::nn::MultiLabelMarginLoss()(x, mt), {mean_of(ml)});
  near(of::multilabel_margin_loss(x[0], mt[0], of::Reduction::None), {ml[0]});
  grad_ok([&](const V& a) { return of::multilabel_margin_loss(a[0], mt); }, {x});
  // multilabel_soft_margin_loss with weight
  T st = of::where(d64({3, 4}, 13) > 0, 1.0, 0.0).to(of::kFloat64);
  std::vector<double> sv = vec(st), msm;
  for (int n = 0; n < 3; ++n) {
    double s = 0;
    for (int i = 0; i < 4; ++i) {
      const double v = xv[size_t(n * 4 + i)], t = sv[size_t(n * 4 + i)];
      s += -(t * std::log(1 / (1 + std::exp(-v))) + (1 - t) * std::log(1 / (1 + std::exp(v)))) *
           wv[size_t(i)];
    }
    msm.push_back(s / 4);
  }
  near(F::multilabel_soft_margin_loss(
           x, st, F::MultilabelSoftMarginLossFuncOptions().weight(w).reduction(of::kNone)),
       msm);
  near(of::nn::MultiLabelSoftMarginLoss(of::nn::MultiLabelSoftMarginLossOptions().weight(w))(x, st),
       {mean_of(msm)});
  grad_ok([&](const V& a) { return F::multilabel_soft_margin_loss(a[0], st); }, {x});
}

TEST_CASE("embedding, triplet and Gaussian losses match float64 references") {
  T a = d64({3, 5}, 14), p = d64({3, 5}, 15), n = d64({3, 5}, 16);
  std::vector<double> av = vec(a), pv = vec(p), nv = vec(n);
  auto dist = [&](const std::vector<double>& u, const std::vector<double>& v, int r, double q) {
    double s = 0;
    for (int k = 0; k < 5; ++k)
      s += std::pow(std::abs(u[size_t(r * 5 + k)] - v[size_t(r * 5 + k)] + 1e-6), q);
    return std::pow(s, 1 / q);
  };
  std::vector<double> trip, trip_swap, cosl, pd;
  T y = longs({1, -1, -1}).to(of::kFloat64);
  for (int r = 0; r < 3; ++r) {
    trip.push_back(std::max(0.0, 1.0 + dist(av, pv, r, 3) - dist(av, nv, r, 3)));
    trip_swap.push_back(
        std::max(0.0, 1.0 + dist(av, pv, r, 2) - std::min(dist(av, nv, r, 2), dist(pv, nv, r, 2))));
    double d12 = 0, d11 = 0, d22 = 0;
    for (int k = 0; k < 5; ++k) {
      d12 += av[size_t(r * 5 + k)] * pv[size_t(r * 5 + k)];
      d11 += av[size_t(r * 5 + k)] * av[size_t(r * 5 + k)];
      d22 += pv[size_t(r * 5 + k)] * pv[size_t(r * 5 + k)];
    }
    const double c = d12 / std::sqrt((d11 + 1e-12) * (d22 + 1e-12));
    cosl.push_back(r == 0 ? 1 - c : std::max(0.0, c - 0.1));
    pd.push_back(dist(av, pv, r, 2));
  }
  near(F::triplet_margin_loss(a, p, n, F::TripletMarginLossFuncOptions().p(3).reduction(of::kNone)),
       trip);
  near(of::nn::TripletMarginLoss(of::nn::TripletMarginLossOptions().swap(true))(a, p, n),
       {mean_of(trip_swap)});
  near(of::nn::TripletMarginWithDistanceLoss(
           of::nn::TripletMarginWithDistanceLossOptions().swap(true))(a, p, n),
       {mean_of(trip_swap)});
  // a custom distance: 1 - cosine similarity
  auto cosd = [](const T& u, const T& v) { return 1 - of::cosine_similarity(u, v); };
  T tw = F::triplet_margin_with_distance_loss(
      a, p, n,
      F::TripletMarginWithDistanceLossFuncOptions().distance_function(cosd).margin(0.3).reduction(
          of::kSum));
  T ref = (0.3 + cosd(a, p) - cosd(a, n)).clamp_min(0).sum();
  near(tw, vec(ref));
  near(of::cosine_embedding_loss(a, p, y, 0.1, of::Reduction::None), cosl);
  near(of::nn::CosineEmbeddingLoss(of::nn::CosineEmbeddingLossOptions().margin(0.1))(a, p, y),
       {mean_of(cosl)});
  near(of::nn::PairwiseDistance()(a, p), pd);
  grad_ok([&](const V& v) { return of::triplet_margin_loss(v[0], v[1], v[2], 1.0, 3, 1e-6, true); },
          {a, p, n});
  grad_ok([&](const V& v) { return of::cosine_embedding_loss(v[0], v[1], y, 0.1); }, {a, p});
  // Gaussian NLL: var with the input's shape, without the last dim, and with 1 there
  T t = d64({3, 5}, 17), var = d64({3, 5}, 18, 0.2, 2), var1 = d64({3}, 19, 0.2, 2);
  std::vector<double> tv = vec(t), vv = vec(var), v1 = vec(var1), g, g1;
  for (int i = 0; i < 15; ++i) {
    const double d = av[size_t(i)] - tv[size_t(i)];
    g.push_back(0.5 * (std::log(vv[size_t(i)]) + d * d / vv[size_t(i)]) + 0.5 * std::log(2 * M_PI));
    g1.push_back(0.5 * (std::log(v1[size_t(i / 5)]) + d * d / v1[size_t(i / 5)]));
  }
  near(F::gaussian_nll_loss(a, t, var,
                            F::GaussianNLLLossFuncOptions().full(true).reduction(of::kNone)),
       g);
  near(of::nn::GaussianNLLLoss()(a, t, var1), {mean_of(g1)});
  near(of::nn::GaussianNLLLoss()(a, t, var1.unsqueeze(1)), {mean_of(g1)});
  grad_ok([&](const V& v) { return F::gaussian_nll_loss(v[0], t, v[1]); }, {a, var});
  // eps clamps var's value but lets its gradient through, as PyTorch's in-place clamp
  T small = of::full({3, 5}, 1e-9, of::kFloat64).requires_grad_(true);
  F::gaussian_nll_loss(a, t, small, F::GaussianNLLLossFuncOptions().reduction(of::kSum)).backward();
  CHECK(std::isfinite(vec(small.grad())[0]));
  CHECK(vec(small.grad())[0] != 0);
}

TEST_CASE("loss errors name the loss and the shapes") {
  T x = d64({3, 4}, 20);
  throws([&] { of::margin_ranking_loss(x, x, d64({3}, 1)); },
         {"[margin_ranking_loss]", "(3,)", "(3, 4)"});
  throws([&] { of::soft_margin_loss(x, d64({4, 3}, 1)); }, {"[soft_margin_loss]", "(4, 3)"});
  throws(
      [&] {
        of::hinge_embedding_loss(x, d64({2, 4}, 1));
      },
      {"[hinge_embedding_loss]", "(2, 4)"});
  throws([&] { of::multi_margin_loss(x, longs({1, 2})); }, {"[multi_margin_loss]", "(2,)"});
  throws([&] { of::multi_margin_loss(x, longs({1, 2, 0}), 3); }, {"[multi_margin_loss]", "p == 1"});
  throws(
      [&] {
        of::multilabel_margin_loss(x, longs({1, 2, 0}));
      },
      {"[multilabel_margin_loss]", "(3,)"});
  throws([&] { of::cosine_embedding_loss(x, x, d64({2}, 1)); },
         {"[cosine_embedding_loss]", "(2,)"});
  throws([&] { of::triplet_margin_loss(x, x, d64({4}, 1)); }, {"[triplet_margin_loss]", "1D"});
  throws([&] { F::gaussian_nll_loss(x, x, d64({4}, 1, 0.1, 1)); }, {"[gaussian_nll_loss]", "(4,)"});
  throws(
      [&] {
        F::gaussian_nll_loss(x, x, -of::ones({3, 4}, of::kFloat64));
      },
      {"[gaussian_nll_loss]", "negative"});
}

TEST_CASE("Bilinear, PixelShuffle, CosineSimilarity and PairwiseDistance") {
  of::manual_seed(0);
  of::nn::Bilinear bl(of::nn::BilinearOptions(3, 2, 4));
  CHECK(bl->weight.sizes() == of::IntArrayRef({4, 3, 2}));
  CHECK(bl->bias.sizes() == of::IntArrayRef({4}));
  CHECK(vec(bl->weight.abs().amax()).at(0) <= 1 / std::sqrt(3.0));
  T x1 = d64({5, 3}, 21), x2 = d64({5, 2}, 22), w = d64({4, 3, 2}, 23), b = d64({4}, 24);
  std::vector<double> v1 = vec(x1), v2 = vec(x2), wv = vec(w), bv = vec(b), ref;
  for (int n = 0; n < 5; ++n)
    for (int o = 0; o < 4; ++o) {
      double s = bv[size_t(o)];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j)
          s += v1[size_t(n * 3 + i)] * wv[size_t((o * 3 + i) * 2 + j)] * v2[size_t(n * 2 + j)];
      ref.push_back(s);
    }
  near(F::bilinear(x1, x2, w, b), ref);
  grad_ok([](const V& a) { return of::bilinear(a[0], a[1], a[2], a[3]); }, {x1, x2, w, b});
  CHECK(bl(x1.to(of::kFloat32), x2.to(of::kFloat32)).sizes() == of::IntArrayRef({5, 4}));
  throws([&] { of::bilinear(x1, d64({4, 2}, 1), w); }, {"[bilinear]", "(5, 3)", "(4, 2)"});
  // pixel shuffle: out[n, c, h*r + i, w*r + j] = in[n, c*r*r + i*r + j, h, w]
  T x = d64({2, 8, 2, 3}, 25);
  of::nn::PixelShuffle ps(of::nn::PixelShuffleOptions(2));
  T y = ps(x);
  CHECK(y.sizes() == of::IntArrayRef({2, 2, 4, 6}));
  const Ref xr = th::to_ref(x), yr = th::to_ref(y);
  for (int64_t i = 0; i < yr.numel(); ++i) {
    Shape idx = yr.index(i);
    CHECK(yr.v[size_t(i)] ==
          xr.at({idx[0], idx[1] * 4 + (idx[2] % 2) * 2 + idx[3] % 2, idx[2] / 2, idx[3] / 2}));
  }
  near(of::nn::PixelUnshuffle(of::nn::PixelUnshuffleOptions(2))(y), vec(x));
  CHECK(F::pixel_shuffle(x[0], 2).sizes() == of::IntArrayRef({2, 4, 6}));
  throws([&] { ps(d64({1, 6, 2, 2}, 1)); }, {"[pixel_shuffle]", "6", "4"});
  throws(
      [&] {
        F::pixel_unshuffle(d64({1, 1, 3, 2}, 1), 2);
      },
      {"[pixel_unshuffle]", "(1, 1, 3, 2)"});
  // cosine similarity over dim 1 with broadcasting
  T a = d64({4, 3}, 26), c = d64({1, 3}, 27);
  std::vector<double> av = vec(a), cv = vec(c), cs;
  for (int r = 0; r < 4; ++r) {
    double d = 0, na = 0, nc = 0;
    for (int k = 0; k < 3; ++k) {
      d += av[size_t(r * 3 + k)] * cv[size_t(k)];
      na += av[size_t(r * 3 + k)] * av[size_t(r * 3 + k)];
      nc += cv[size_t(k)] * cv[size_t(k)];
    }
    cs.push_back(d / (std::sqrt(na) * std::sqrt(nc)));
  }
  near(of::nn::CosineSimilarity()(a, c), cs);
  near(F::cosine_similarity(a.t(), c.t(), F::CosineSimilarityFuncOptions().dim(0)), cs);
  grad_ok([](const V& v) { return of::cosine_similarity(v[0], v[1]); }, {a, c});
  grad_ok([](const V& v) { return of::pairwise_distance(v[0], v[1], 1.5, 1e-6, true); }, {a, c});
  CHECK(F::pairwise_distance(a, c, F::PairwiseDistanceFuncOptions().keepdim(true)).sizes() ==
        of::IntArrayRef({4, 1}));
  throws(
      [&] {
        of::cosine_similarity(a, d64({2, 3}, 1));
      },
      {"[cosine_similarity]", "(4, 3)", "(2, 3)"});
  throws([&] { of::pairwise_distance(a, d64({4, 2}, 1)); }, {"[pairwise_distance]", "(4, 2)"});
}

TEST_CASE("InstanceNorm1d/2d/3d: statistics per sample and channel, running stats, affine") {
  T x = d64({2, 3, 4, 5}, 28);
  of::nn::InstanceNorm2d in2(
      of::nn::InstanceNorm2dOptions(3).affine(true).track_running_stats(true));
  in2->to(of::kFloat64);
  CHECK(in2->named_parameters().keys() == std::vector<std::string>{"weight", "bias"});
  CHECK(in2->named_buffers().keys() ==
        std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  {
    of::NoGradGuard g;
    in2->weight.copy_(of::tensor(std::vector<double>{1.0, 2.0, 0.5}));
    in2->bias.copy_(of::tensor(std::vector<double>{0.0, -1.0, 1.0}));
  }
  T y = in2(x);
  const Ref xr = th::to_ref(x), yr = th::to_ref(y);
  std::vector<double> rm(3, 0), rv(3, 0);
  const double wv[] = {1, 2, 0.5}, bv[] = {0, -1, 1};
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) {
      double m = 0, v = 0;
      for (int k = 0; k < 20; ++k) m += xr.v[size_t((n * 3 + c) * 20 + k)];
      m /= 20;
      for (int k = 0; k < 20; ++k) v += std::pow(xr.v[size_t((n * 3 + c) * 20 + k)] - m, 2);
      for (int k = 0; k < 20; ++k) {
        const double e =
            (xr.v[size_t((n * 3 + c) * 20 + k)] - m) / std::sqrt(v / 20 + 1e-5) * wv[c] + bv[c];
        CHECK(yr.v[size_t((n * 3 + c) * 20 + k)] == doctest::Approx(e).epsilon(1e-9));
      }
      rm[size_t(c)] += 0.1 * m / 2;
      rv[size_t(c)] += 0.1 * (v / 19) / 2;
    }
  for (int c = 0; c < 3; ++c) rv[size_t(c)] += 0.9;
  near(in2->running_mean, rm);
  near(in2->running_var, rv);
  // eval uses the running stats
  in2->eval();
  T ye = in2(x);
  near(ye, vec((x - in2->running_mean.view({1, 3, 1, 1})) /
                   (in2->running_var.view({1, 3, 1, 1}) + 1e-5).sqrt() *
                   in2->weight.view({1, 3, 1, 1}) +
               in2->bias.view({1, 3, 1, 1})));
  // default options: no parameters, no buffers, always input statistics; unbatched input
  of::nn::InstanceNorm1d in1(3);
  CHECK(in1->parameters().empty());
  CHECK(in1->buffers().empty());
  T s = d64({3, 6}, 29).to(of::kFloat32);
  near(in1(s), vec(in1(s.unsqueeze(0)).squeeze(0)), 1e-6);
  CHECK(of::nn::InstanceNorm3d(2)(d64({1, 2, 2, 2, 3}, 1)).sizes() ==
        of::IntArrayRef({1, 2, 2, 2, 3}));
  grad_ok(
      [](const V& v) {
        return F::instance_norm(v[0], F::InstanceNormFuncOptions().weight(v[1]).bias(v[2]));
      },
      {d64({2, 3, 5}, 30), d64({3}, 31), d64({3}, 32)});
  throws([&] { in1(d64({2, 3, 4, 5}, 1).to(of::kFloat32)); }, {"[InstanceNorm1d]", "(2, 3, 4, 5)"});
  throws(
      [&] {
        in1(d64({2, 4, 5}, 1).to(of::kFloat32));
      },
      {"[InstanceNorm1d]", "3 channels", "(2, 4, 5)"});
}

TEST_CASE("Transformer family: structure, masks, libtorch names and gradients") {
  of::manual_seed(0);
  CHECK(of::nn::TransformerOptions().d_model() == 512);
  CHECK(of::nn::TransformerOptions().num_encoder_layers() == 6);
  T m = of::nn::TransformerImpl::generate_square_subsequent_mask(3);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(vec(m) == std::vector<double>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0});
  throws([] { of::nn::TransformerImpl::generate_square_subsequent_mask(-1); },
         {"[Transformer]", "-1"});

  of::nn::TransformerDecoderLayer dl(
      of::nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0).activation(
          of::kGELU));
  const auto names = dl->named_parameters().keys();
  for (const char* n :
       {"self_attn.in_proj_weight", "multihead_attn.in_proj_weight",
        "multihead_attn.out_proj.weight", "linear1.weight", "linear2.bias", "norm3.weight"})
    CHECK_MESSAGE(std::find(names.begin(), names.end(), n) != names.end(), n);
  T tgt = of::randn({4, 2, 8}), mem = of::randn({5, 2, 8});
  T out = dl(tgt, mem, of::nn::TransformerImpl::generate_square_subsequent_mask(4));
  CHECK(out.sizes() == of::IntArrayRef({4, 2, 8}));
  // the causal mask: output at step 0 does not depend on later target steps
  T tgt2 = tgt.clone();
  {
    of::NoGradGuard g;
    tgt2.narrow(0, 2, 2).fill_(3.0);
  }
  T out2 = dl(tgt2, mem, of::nn::TransformerImpl::generate_square_subsequent_mask(4));
  CHECK((out2[0] - out[0]).abs().max().item<double>() < 1e-5);
  CHECK((out2[3] - out[3]).abs().max().item<double>() > 1e-3);
  // memory key padding: a masked memory position has no influence
  T kpm = of::zeros({2, 5}, of::kBool);
  {
    of::NoGradGuard g;
    kpm.select(1, 4).fill_(1);
  }
  T mem2 = mem.clone();
  {
    of::NoGradGuard g;
    mem2.select(0, 4).fill_(5.0);
  }
  T a1 = dl(tgt, mem, T(), T(), T(), kpm), a2 = dl(tgt, mem2, T(), T(), T(), kpm);
  CHECK((a1 - a2).abs().max().item<double>() < 1e-5);

  // encoder/decoder stacks: clones of the prototype layer, then the norm
  of::nn::TransformerEncoderLayer el(
      of::nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0));
  of::nn::TransformerEncoder enc(of::nn::TransformerEncoderOptions(el, 2).norm(
      of::nn::AnyModule(of::nn::LayerNorm(of::nn::LayerNormOptions({8})))));
  CHECK(enc->layers->size() == 2);
  auto sd = enc->named_parameters();
  CHECK(sd.contains("layers.1.linear1.weight"));
  CHECK(sd.contains("norm.weight"));
  CHECK(
      (sd["layers.0.linear1.weight"] - sd["layers.1.linear1.weight"]).abs().max().item<double>() ==
      0);
  CHECK(!sd["layers.0.linear1.weight"].is_same(sd["layers.1.linear1.weight"]));
  of::nn::TransformerDecoder dec(of::nn::TransformerDecoderOptions(
      of::nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0), 3));
  CHECK(dec->layers->size() == 3);
  CHECK(dec->norm.is_empty());
  T e = enc(mem);
  CHECK(e.sizes() == of::IntArrayRef({5, 2, 8}));
  CHECK(dec(tgt, e).sizes() == of::IntArrayRef({4, 2, 8}));

  // the full model, gradchecked in float64 on a tiny configuration
  of::nn::Transformer tf(of::nn::TransformerOptions(4, 2, 1, 1).dim_feedforward(6).dropout(0.0));
  CHECK(tf->named_parameters().contains("encoder.layers.0.self_attn.in_proj_weight"));
  CHECK(tf->named_parameters().contains("decoder.norm.bias"));
  tf->to(of::kFloat64);
  T src = d64({3, 2, 4}, 33), tg = d64({2, 2, 4}, 34);
  grad_ok(
      [&](const V& v) {
        return tf(v[0], v[1], T(),
                  of::nn::TransformerImpl::generate_square_subsequent_mask(2).to(of::kFloat64));
      },
      {src, tg});
  throws([&] { tf(src, d64({2, 3, 4}, 1)); }, {"[Transformer]", "batch", "(3, 2, 4)", "(2, 3, 4)"});
  throws([&] { tf(d64({3, 2, 5}, 1), tg); }, {"[Transformer]", "d_model 4"});
  throws([&] { dl(tgt, of::randn({5, 3, 8})); }, {"[TransformerDecoderLayer]", "(5, 3, 8)"});
  throws([&] { of::nn::TransformerEncoder(of::nn::TransformerEncoderOptions(el, 0)); },
         {"[TransformerEncoder]", "num_layers"});
  // a custom encoder through AnyModule
  of::nn::Transformer tc(of::nn::TransformerOptions(8, 2, 1, 1)
                             .dim_feedforward(16)
                             .custom_encoder(of::nn::AnyModule(of::nn::TransformerEncoder(el, 1))));
  CHECK(tc(mem, tgt).sizes() == of::IntArrayRef({4, 2, 8}));
  throws([&] { of::nn::AnyModule(of::nn::Linear(2, 2)).forward(tgt, tgt); },
         {"[AnyModule]", "2 tensors"});
}

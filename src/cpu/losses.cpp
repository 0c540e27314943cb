// cpu/losses.cpp: the CPU kernels of cross_entropy (class indices) and its backward
// (ops/nn_losses.cpp: inputs, attributes and outputs; NOTE [nn kernels] in cpu/nn.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "cpu/losses.h"

#include <cmath>
#include <limits>
#include <vector>

#include "ops/functors.h"
#include "ops/nn_common.h"

namespace oneflow::cpu {
using namespace nn_detail;

void cross_entropy(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor t = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const int64_t reduction = CrossEntropyAttrs::get<"reduction">(k.attrs),
                ignore = CrossEntropyAttrs::get<"ignore_index">(k.attrs);
  const double eps = CrossEntropyAttrs::get<"label_smoothing">(k.attrs);
  const CeGeom g = ce_geom(x.sizes());
  check_target_range(t, g.C, ignore, "cross_entropy", x);
  dispatch_f(x.dtype(), "cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    const int64_t* pt = cptr<int64_t>(t);
    const T* pw = cptr<T>(w);
    T* ploss = mptr<T>(k.outputs[0]);
    T* plse = mptr<T>(k.outputs[1]);
    const int64_t C = g.C, inner = g.inner;
    double wsum_all = 0;
    if (pw)
      for (int64_t c = 0; c < C; ++c) wsum_all += double(pw[c]);
    else wsum_all = double(C);
    // per row: nll (weighted), smoothing term (weighted), weight of the target
    std::vector<double> nll(size_t(g.rows)), smooth(size_t(g.rows)), wt(size_t(g.rows));
    parallel_for(0, g.rows, grain_for(3 * C), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / inner, d = r % inner;
        const T* __restrict p = px + n * C * inner + d;
        T mx = -std::numeric_limits<T>::infinity();
        double lse;
        if (inner == 1) {
          T m[kL];
          for (int l = 0; l < kL; ++l) m[l] = mx;
          int64_t c = 0;
          for (; c + kL <= C; c += kL)
            for (int l = 0; l < kL; ++l) m[l] = p[c + l] > m[l] ? p[c + l] : m[l];
          for (; c < C; ++c) m[0] = p[c] > m[0] ? p[c] : m[0];
          for (int l = 0; l < kL; ++l) mx = m[l] > mx ? m[l] : mx;
          T s[kL] = {};
          c = 0;
          for (; c + kL <= C; c += kL)
            for (int l = 0; l < kL; ++l) s[l] += fn::exp_<T>(p[c + l] - mx);
          double sum = 0;
          for (; c < C; ++c) sum += double(fn::exp_<T>(p[c] - mx));
          for (int l = 0; l < kL; ++l) sum += double(s[l]);
          lse = double(mx) + std::log(sum);
        } else {
          for (int64_t c = 0; c < C; ++c) mx = p[c * inner] > mx ? p[c * inner] : mx;
          double sum = 0;
          for (int64_t c = 0; c < C; ++c) sum += double(fn::exp_<T>(p[c * inner] - mx));
          lse = double(mx) + std::log(sum);
        }
        plse[r] = T(lse);
        const int64_t tr = pt[r];
        if (tr == ignore) {
          nll[size_t(r)] = smooth[size_t(r)] = wt[size_t(r)] = 0;
          continue;
        }
        const double wr = pw ? double(pw[tr]) : 1.0;
        wt[size_t(r)] = wr;
        nll[size_t(r)] = wr * (lse - double(p[tr * inner]));
        if (eps > 0) {
          double sx = 0;
          if (pw)
            for (int64_t c = 0; c < C; ++c) sx += double(pw[c]) * double(p[c * inner]);
          else
            for (int64_t c = 0; c < C; ++c) sx += double(p[c * inner]);
          smooth[size_t(r)] = wsum_all * lse - sx;
        } else {
          smooth[size_t(r)] = 0;
        }
      }
    });
    const double sc = eps / double(C);
    if (reduction == kReduceNone) {
      for (int64_t r = 0; r < g.rows; ++r)
        ploss[r] = T((1 - eps) * nll[size_t(r)] + sc * smooth[size_t(r)]);
      mptr<T>(k.outputs[2])[0] = T(0);
      return;
    }
    double sn = 0, ss = 0, sw = 0;
    for (int64_t r = 0; r < g.rows; ++r) {
      sn += nll[size_t(r)];
      ss += smooth[size_t(r)];
      sw += wt[size_t(r)];
    }
    mptr<T>(k.outputs[2])[0] = T(sw);
    double loss;
    if (reduction == kReduceSum) {
      loss = (1 - eps) * sn + sc * ss;
    } else {
      loss = (1 - eps) * (sn / sw);
      // PyTorch: the smoothing term's mean divides by the weight sum when weighted, else by
      // the number of rows (ignored rows included).
      if (eps > 0) loss += sc * (pw ? ss / sw : ss / double(g.rows));
    }
    ploss[0] = T(loss);
  });
}

void cross_entropy_backward(const KernelArgs& k) {
  const Tensor go = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor t = kernel_contiguous(k.inputs[2]);
  const Tensor w = kernel_contiguous(k.inputs[3]);
  const Tensor lse = kernel_contiguous(k.inputs[4]);
  const int64_t reduction = CrossEntropyAttrs::get<"reduction">(k.attrs),
                ignore = CrossEntropyAttrs::get<"ignore_index">(k.attrs);
  const double eps = CrossEntropyAttrs::get<"label_smoothing">(k.attrs);
  const CeGeom g = ce_geom(x.sizes());
  check_target_range(t, g.C, ignore, "cross_entropy_backward", x);
  dispatch_f(x.dtype(), "cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* pg = cptr<T>(go);
    const T* px = cptr<T>(x);
    const int64_t* pt = cptr<int64_t>(t);
    const T* pw = cptr<T>(w);
    const T* pl = cptr<T>(lse);
    T* pgx = mptr<T>(k.outputs[0]);
    const int64_t C = g.C, inner = g.inner;
    const double tw = double(k.inputs[5].item<T>());
    double wsum_all = 0;
    if (pw)
      for (int64_t c = 0; c < C; ++c) wsum_all += double(pw[c]);
    else wsum_all = double(C);
    const double sc = eps / double(C);
    parallel_for(0, g.rows, grain_for(2 * C), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / inner, d = r % inner;
        const T* __restrict p = px + n * C * inner + d;
        T* __restrict q = pgx + n * C * inner + d;
        const int64_t tr = pt[r];
        if (tr == ignore) {
          for (int64_t c = 0; c < C; ++c) q[c * inner] = T(0);
          continue;
        }
        double gn, gs;  // scales of the nll and smoothing terms for this row
        if (reduction == kReduceNone) {
          gn = gs = double(pg[r]);
        } else if (reduction == kReduceSum) {
          gn = gs = double(pg[0]);
        } else {
          gn = double(pg[0]) / tw;
          gs = pw ? gn : double(pg[0]) / double(g.rows);
        }
        const double wr = pw ? double(pw[tr]) : 1.0;
        const double a = (1 - eps) * gn * wr;  // * (p_c - [c == t])
        const double b = sc * gs;              // * (wsum * p_c - w_c)
        const T coef = T(a + b * wsum_all), l = pl[r];
        if (inner == 1) {
          for (int64_t c = 0; c < C; ++c) q[c] = fn::exp_<T>(p[c] - l) * coef;
        } else {
          for (int64_t c = 0; c < C; ++c) q[c * inner] = fn::exp_<T>(p[c * inner] - l) * coef;
        }
        if (b != 0) {
          if (pw)
            for (int64_t c = 0; c < C; ++c) q[c * inner] -= T(b * double(pw[c]));
          else
            for (int64_t c = 0; c < C; ++c) q[c * inner] -= T(b);
        }
        q[tr * inner] -= T(a);
      }
    });
  });
}

}  // namespace oneflow::cpu

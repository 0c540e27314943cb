// cpu/norm.cpp: the CPU kernels of the normalization ops (ops/nn_norm.cpp): layer_norm,
// group_norm and rms_norm (the row norms, NOTE [Row norm geometry] in ops/nn_common.h) and
// batch_norm, with their fused backward ops (NOTE [nn kernels] in cpu/nn.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "cpu/norm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "ops/functors.h"
#include "ops/index_common.h"
#include "ops/nn_common.h"

namespace oneflow::cpu {
using namespace nn_detail;
namespace {

// ================================================================ row norms (layer/group/rms)

// One row of a row norm: p (g.N values) normalized into q, the row's mean and rstd stored.
template <int Mode, class T>
void norm_row(const T* __restrict p, T* __restrict q, int64_t r, const NormGeom& g, double eps,
              const T* pw, const T* pb, T* pmean, T* prstd) {
  const int64_t N = g.N;
  const double mu = Mode == kRms || N == 0 ? 0.0 : sum_d(p, N) / double(N);
  const double var = N == 0 ? 0.0 : sqdev_d(p, N, mu) / double(N);
  const double rs = 1.0 / std::sqrt(var + eps);
  if (Mode != kRms) pmean[r] = T(mu);
  prstd[r] = T(rs);
  const T m = T(mu), s = T(rs);
  const int64_t c0 = (r % g.G) * g.cg;
  if (g.hw == 1) {
    const T* __restrict wr = pw ? pw + c0 : nullptr;
    const T* __restrict br = pb ? pb + c0 : nullptr;
    if (wr && br)
      for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s * wr[i] + br[i];
    else if (wr)
      for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s * wr[i];
    else if (br)
      for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s + br[i];
    else
      for (int64_t i = 0; i < N; ++i) q[i] = (p[i] - m) * s;
  } else {
    for (int64_t j = 0; j < g.cg; ++j) {
      const T a = s * (pw ? pw[c0 + j] : T(1));
      const T c = (pb ? pb[c0 + j] : T(0)) - m * a;
      const T* __restrict pj = p + j * g.hw;
      T* __restrict qj = q + j * g.hw;
      for (int64_t i = 0; i < g.hw; ++i) qj[i] = pj[i] * a + c;
    }
  }
}

// Add: the add_layer_norm / add_rms_norm kernels (NOTE [Add and norm] in
// trace/rewrite_add_norm.cpp): inputs x, residual, weight[, bias]; outputs y, sum, [mean,] rstd.
// Each row is x + residual, summed as the add op does, into the sum output when it is wanted
// (write_sum) or a row buffer, then normalized by the same code as the plain norm: bitwise the add,
// then the norm.
template <int Mode, bool Add = false> void norm_cpu(const KernelArgs& k) {
  constexpr int in0 = Add ? 1 : 0, out0 = Add ? 1 : 0;
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor res = Add ? kernel_contiguous(k.inputs[1]) : Tensor();
  const Tensor w = kernel_contiguous(k.inputs[in0 + 1]);
  const Tensor b = Mode == kRms ? Tensor() : kernel_contiguous(k.inputs[in0 + 2]);
  const NormGeom g = norm_geom(Mode, x.sizes(), k.attrs);
  const double eps = NormAttrs::get<"eps">(k.attrs);
  const bool write_sum = Add && AddNormAttrs::get<"write_sum">(k.attrs);
  dispatch_f(x.dtype(), norm_name(Mode), [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    const T* pres = Add ? cptr<T>(res) : nullptr;
    const T* pw = cptr<T>(w);
    const T* pb = cptr<T>(b);
    T* py = mptr<T>(k.outputs[0]);
    T* psum = write_sum ? mptr<T>(k.outputs[1]) : nullptr;
    T* pmean = Mode == kRms ? nullptr : mptr<T>(k.outputs[out0 + 1]);
    T* prstd = mptr<T>(k.outputs[out0 + (Mode == kRms ? 1 : 2)]);
    const int64_t N = g.N;
    parallel_for(0, g.M, grain_for(Add ? 3 * N : 2 * N), [&](int64_t r0, int64_t r1) {
      std::vector<T> row(size_t(Add && !write_sum ? N : 0));
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict p = px + r * N;
        if constexpr (Add) {
          T* __restrict s = write_sum ? psum + r * N : row.data();
          const T* __restrict a = px + r * N;
          const T* __restrict c = pres + r * N;
          for (int64_t i = 0; i < N; ++i) s[i] = fn::Add{}(a[i], c[i]);
          p = s;
        }
        norm_row<Mode>(p, py + r * N, r, g, eps, pw, pb, pmean, prstd);
      }
    });
  });
}

template <int Mode> void norm_bwd_cpu(const KernelArgs& k) {
  const Tensor dy = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const Tensor mean = kernel_contiguous(k.inputs[3]);
  const Tensor rstd = kernel_contiguous(k.inputs[4]);
  const NormGeom g = norm_geom(Mode, x.sizes(), k.attrs);
  dispatch_f(x.dtype(), norm_name(Mode), [&](auto z) {
    using T = decltype(z);
    const T* pdy = cptr<T>(dy);
    const T* px = cptr<T>(x);
    const T* pw = cptr<T>(w);
    const T* pm = cptr<T>(mean);
    const T* ps = cptr<T>(rstd);
    T* pgx = mptr<T>(k.outputs[0]);
    T* pgw = mptr<T>(k.outputs[1]);
    T* pgb = mptr<T>(k.outputs[2]);
    const int64_t N = g.N, hw = g.hw, cg = g.cg;
    // gx, row by row: rstd * (dy*w - mean(dy*w) - xhat * mean(dy*w*xhat))
    parallel_for(0, g.M, grain_for(3 * N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict d = pdy + r * N;
        const T* __restrict p = px + r * N;
        T* __restrict q = pgx + r * N;
        const double m = pm ? double(pm[r]) : 0.0, s = double(ps[r]);
        const int64_t c0 = (r % g.G) * cg;
        if (hw == 1) {
          // one element per channel: flat loops (vectorizable)
          const T* __restrict wr = pw ? pw + c0 : nullptr;
          double a1[kL] = {}, a2[kL] = {};
          int64_t e = 0;
          for (; e + kL <= N; e += kL)
            for (int l = 0; l < kL; ++l) {
              const double dw = double(d[e + l]) * (wr ? double(wr[e + l]) : 1.0);
              a1[l] += dw;
              a2[l] += dw * (double(p[e + l]) - m);
            }
          for (; e < N; ++e) {
            const double dw = double(d[e]) * (wr ? double(wr[e]) : 1.0);
            a1[0] += dw;
            a2[0] += dw * (double(p[e]) - m);
          }
          double s1 = 0, s2 = 0;
          for (int l = 0; l < kL; ++l) {
            s1 += a1[l];
            s2 += a2[l];
          }
          const T c1 = T(Mode == kRms || N == 0 ? 0.0 : s1 / double(N));
          const T c2 = T(N == 0 ? 0.0 : s2 * s / double(N));
          const T ts = T(s), tm = T(m);
          if (wr)
            for (int64_t i = 0; i < N; ++i) q[i] = ts * (wr[i] * d[i] - c1 - (p[i] - tm) * ts * c2);
          else
            for (int64_t i = 0; i < N; ++i) q[i] = ts * (d[i] - c1 - (p[i] - tm) * ts * c2);
          continue;
        }
        double s1 = 0, s2 = 0;
        for (int64_t j = 0; j < cg; ++j) {
          const double wj = pw ? double(pw[c0 + j]) : 1.0;
          double a1 = 0, a2 = 0;
          for (int64_t i = 0; i < hw; ++i) {
            const double dv = double(d[j * hw + i]);
            a1 += dv;
            a2 += dv * (double(p[j * hw + i]) - m);
          }
          s1 += wj * a1;
          s2 += wj * a2 * s;
        }
        const double c1 = Mode == kRms || N == 0 ? 0.0 : s1 / double(N);
        const double c2 = N == 0 ? 0.0 : s2 / double(N);
        for (int64_t j = 0; j < cg; ++j) {
          const double wj = pw ? double(pw[c0 + j]) : 1.0;
          for (int64_t i = 0; i < hw; ++i) {
            const int64_t e = j * hw + i;
            const double xh = (double(p[e]) - m) * s;
            q[e] = T(s * (wj * double(d[e]) - c1 - xh * c2));
          }
        }
      }
    });
    // gweight/gbias: sums over the rows sharing an affine channel, in row order.
    if (g.G == 1 && hw == 1) {
      // layer/rms norm: blocks of kW columns walked down the rows (row-major reads)
      constexpr int64_t kW = 64;
      const int64_t nblk = (N + kW - 1) / kW;
      parallel_for(0, nblk, grain_for(g.M * kW * 2), [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t j0 = blk * kW, w = std::min(kW, N - j0);
          double aw[kW] = {}, ab[kW] = {};
          for (int64_t r = 0; r < g.M; ++r) {
            const double m = pm ? double(pm[r]) : 0.0, s = double(ps[r]);
            const T* __restrict d = pdy + r * N + j0;
            const T* __restrict p = px + r * N + j0;
            for (int64_t j = 0; j < w; ++j) {
              aw[j] += double(d[j]) * ((double(p[j]) - m) * s);
              ab[j] += double(d[j]);
            }
          }
          for (int64_t j = 0; j < w; ++j) {
            pgw[j0 + j] = T(aw[j]);
            pgb[j0 + j] = T(ab[j]);
          }
        }
      });
      return;
    }
    const int64_t C = g.G * cg;
    const int64_t per = g.M / std::max<int64_t>(g.G, 1);
    parallel_for(0, C, grain_for(per * hw * 2), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t grp = c / cg, j = c % cg;
        double aw = 0, ab = 0;
        for (int64_t n = 0; n < per; ++n) {
          const int64_t r = n * g.G + grp;
          const double m = pm ? double(pm[r]) : 0.0, s = double(ps[r]);
          const T* __restrict d = pdy + r * N + j * hw;
          const T* __restrict p = px + r * N + j * hw;
          for (int64_t i = 0; i < hw; ++i) {
            aw += double(d[i]) * (double(p[i]) - m) * s;
            ab += double(d[i]);
          }
        }
        pgw[c] = T(aw);
        pgb[c] = T(ab);
      }
    });
  });
}

}  // namespace

void layer_norm(const KernelArgs& k) { norm_cpu<kLayer>(k); }
void layer_norm_backward(const KernelArgs& k) { norm_bwd_cpu<kLayer>(k); }
void group_norm(const KernelArgs& k) { norm_cpu<kGroup>(k); }
void group_norm_backward(const KernelArgs& k) { norm_bwd_cpu<kGroup>(k); }
void rms_norm(const KernelArgs& k) { norm_cpu<kRms>(k); }
void rms_norm_backward(const KernelArgs& k) { norm_bwd_cpu<kRms>(k); }
void add_layer_norm(const KernelArgs& k) { norm_cpu<kLayer, true>(k); }
void add_rms_norm(const KernelArgs& k) { norm_cpu<kRms, true>(k); }

// NOTE [Embeddings and norm]: embedding_layer_norm (made by the add_norm rewrite from
// embedding lookups summed and layer-normalized, as BERT's embeddings are): inputs table0,
// ids0, table1, ids1[, table2, ids2], weight, bias; each output row r takes its row of every
// table (ids broadcast to the output's rows), sums them as the recorded adds did,
// ((e0 + e1) + e2), and normalizes the sum by layer_norm's code: bitwise the unfused lookups,
// adds and norm, without writing the gathered rows or the sums.
void embedding_layer_norm(const KernelArgs& k) {
  const int n = k.inputs[4].defined() ? 3 : 2;
  const Tensor& y = k.outputs[0];
  const DimVector rows(y.sizes().begin(), y.sizes().end() - 1);
  const NormGeom g = norm_geom(kLayer, y.sizes(), k.attrs);
  const double eps = NormAttrs::get<"eps">(k.attrs);
  // per table, the index of each output row (ids broadcast to `rows`)
  std::vector<std::vector<int64_t>> idx(size_t(n), std::vector<int64_t>(size_t(g.M)));
  for (int t = 0; t < n; ++t) {
    const Tensor& ids = k.inputs[size_t(2 * t + 1)];
    const int64_t extra = int64_t(rows.size()) - ids.dim();
    std::array<DimVector, 1> st{DimVector(rows.size(), 0)};  // ids' strides over the rows
    for (int64_t d = extra; d < int64_t(rows.size()); ++d)
      if (ids.size(d - extra) != 1) st[0][size_t(d)] = ids.stride(d - extra);
    index_detail::dispatch_index(ids.dtype(), [&](auto zi) {
      using I = decltype(zi);
      const I* ip = static_cast<const I*>(ids.impl()->storage->data) + ids.impl()->offset;
      int64_t* out = idx[size_t(t)].data();
      index_detail::for_each_run<1>(rows, st, INT64_MAX,
                                    [&](const auto& off, int64_t len, const auto& in) {
                                      for (int64_t j = 0; j < len; ++j)
                                        *out++ = int64_t(ip[off[0] + j * in[0]]);
                                    });
    });
  }
  const Tensor w = kernel_contiguous(k.inputs[6]), b = kernel_contiguous(k.inputs[7]);
  dispatch_f(y.dtype(), "embedding_layer_norm", [&](auto z) {
    using T = decltype(z);
    const T* tab[3] = {};
    int64_t rs[3] = {}, cs[3] = {};
    for (int t = 0; t < n; ++t) {
      const Tensor& tt = k.inputs[size_t(2 * t)];
      tab[t] = static_cast<const T*>(tt.impl()->storage->data) + tt.impl()->offset;
      rs[t] = tt.stride(0);
      cs[t] = tt.stride(1);
    }
    const T* pw = cptr<T>(w);
    const T* pb = cptr<T>(b);
    T* py = mptr<T>(y);
    T* pmean = mptr<T>(k.outputs[1]);
    T* prstd = mptr<T>(k.outputs[2]);
    const int64_t N = g.N;
    parallel_for(0, g.M, grain_for(4 * N), [&](int64_t r0, int64_t r1) {
      std::vector<T> sum(static_cast<size_t>(N));
      for (int64_t r = r0; r < r1; ++r) {
        const T* e0 = tab[0] + idx[0][size_t(r)] * rs[0];
        const T* e1 = tab[1] + idx[1][size_t(r)] * rs[1];
        for (int64_t i = 0; i < N; ++i) sum[size_t(i)] = fn::Add{}(e0[i * cs[0]], e1[i * cs[1]]);
        if (n == 3) {
          const T* e2 = tab[2] + idx[2][size_t(r)] * rs[2];
          for (int64_t i = 0; i < N; ++i) sum[size_t(i)] = fn::Add{}(sum[size_t(i)], e2[i * cs[2]]);
        }
        norm_row<kLayer>(sum.data(), py + r * N, r, g, eps, pw, pb, pmean, prstd);
      }
    });
  });
}

// ================================================================ batch norm

namespace {
struct BnGeom {
  int64_t N, C, HW;
};
BnGeom bn_geom(IntArrayRef s) { return {s[0], s[1], prod_range(s, 2, s.size())}; }
}  // namespace

void batch_norm(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor w = kernel_contiguous(k.inputs[1]);
  const Tensor b = kernel_contiguous(k.inputs[2]);
  const Tensor rm = kernel_contiguous(k.inputs[3]);
  const Tensor rv = kernel_contiguous(k.inputs[4]);
  const bool training = BatchNormAttrs::get<"training">(k.attrs);
  const double eps = BatchNormAttrs::get<"eps">(k.attrs);
  const BnGeom g = bn_geom(x.sizes());
  dispatch_f(x.dtype(), "batch_norm", [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    const T* pw = cptr<T>(w);
    const T* pb = cptr<T>(b);
    const T* prm = cptr<T>(rm);
    const T* prv = cptr<T>(rv);
    T* py = mptr<T>(k.outputs[0]);
    T* pmean = mptr<T>(k.outputs[1]);
    T* pinv = mptr<T>(k.outputs[2]);
    T* pvar = mptr<T>(k.outputs[3]);
    const int64_t N = g.N, C = g.C, HW = g.HW;
    const double cnt = double(N * HW);
    parallel_for(0, C, grain_for(3 * N * HW), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double mu, inv;
        if (training) {
          double s = 0;
          for (int64_t n = 0; n < N; ++n) s += sum_d(px + (n * C + c) * HW, HW);
          mu = s / cnt;
          double ss = 0;
          for (int64_t n = 0; n < N; ++n) ss += sqdev_d(px + (n * C + c) * HW, HW, mu);
          inv = 1.0 / std::sqrt(ss / cnt + eps);
          pvar[c] = T(ss / (cnt - 1));
        } else {
          mu = double(prm[c]);
          inv = 1.0 / std::sqrt(double(prv[c]) + eps);
          pvar[c] = prv[c];
        }
        pmean[c] = T(mu);
        pinv[c] = T(inv);
        const double a = inv * (pw ? double(pw[c]) : 1.0);
        const T ta = T(a), tb = T((pb ? double(pb[c]) : 0.0) - mu * a);
        for (int64_t n = 0; n < N; ++n) {
          const T* __restrict p = px + (n * C + c) * HW;
          T* __restrict q = py + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) q[i] = p[i] * ta + tb;
        }
      }
    });
  });
}

void batch_norm_backward(const KernelArgs& k) {
  const Tensor dy = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const Tensor mean = kernel_contiguous(k.inputs[3]);
  const Tensor inv = kernel_contiguous(k.inputs[4]);
  const bool training = BatchNormAttrs::get<"training">(k.attrs);
  const BnGeom g = bn_geom(x.sizes());
  dispatch_f(x.dtype(), "batch_norm", [&](auto z) {
    using T = decltype(z);
    const T* pdy = cptr<T>(dy);
    const T* px = cptr<T>(x);
    const T* pw = cptr<T>(w);
    const T* pm = cptr<T>(mean);
    const T* pi = cptr<T>(inv);
    T* pgx = mptr<T>(k.outputs[0]);
    T* pgw = mptr<T>(k.outputs[1]);
    T* pgb = mptr<T>(k.outputs[2]);
    const int64_t N = g.N, C = g.C, HW = g.HW;
    const double cnt = double(N * HW);
    parallel_for(0, C, grain_for(3 * N * HW), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const double mu = double(pm[c]), is = double(pi[c]);
        double sd = 0, sdx = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* __restrict d = pdy + (n * C + c) * HW;
          const T* __restrict p = px + (n * C + c) * HW;
          double a[kL] = {}, bsum[kL] = {};
          int64_t i = 0;
          for (; i + kL <= HW; i += kL)
            for (int l = 0; l < kL; ++l) {
              a[l] += double(d[i + l]);
              bsum[l] += double(d[i + l]) * (double(p[i + l]) - mu);
            }
          for (; i < HW; ++i) {
            a[0] += double(d[i]);
            bsum[0] += double(d[i]) * (double(p[i]) - mu);
          }
          for (int l = 0; l < kL; ++l) {
            sd += a[l];
            sdx += bsum[l];
          }
        }
        pgw[c] = T(sdx * is);
        pgb[c] = T(sd);
        const double wc = pw ? double(pw[c]) : 1.0;
        // gx = (dy - mean(dy) - (x - mu) * is^2 * mean(dy * (x - mu))) * is * w  (training)
        const double kx = training ? sdx * is * is / cnt : 0.0;
        const double gm = training ? sd / cnt : 0.0;
        const T ts = T(is * wc), tk = T(kx), tm = T(gm), tmu = T(mu);
        for (int64_t n = 0; n < N; ++n) {
          const T* __restrict d = pdy + (n * C + c) * HW;
          const T* __restrict p = px + (n * C + c) * HW;
          T* __restrict q = pgx + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) q[i] = (d[i] - tm - (p[i] - tmu) * tk) * ts;
        }
      }
    });
  });
}

}  // namespace oneflow::cpu

// nn_conv.cpp: convolution ops (conv1d/2d/3d, conv_transpose, the weight gradient); pooling
// and resampling are in nn_pool.cpp (registered from here), what both use in conv_common.h.
// NOTE [Conv lowering]: conv2d runs im2col + GEMM per image (OpenBLAS), conv_transpose2d is
// conv2d's input-gradient (GEMM W^T * x, then col2im), and conv2d_backward_weight is the
// weight-gradient (sum over images of g * col^T). Their VJPs are written with these three
// ops, so gradients of any order exist. Images are split into parts, one per pool thread,
// each running single-threaded BLAS (per-part weight-gradient buffers are summed in part
// order, so results depend only on the thread count); a batch smaller than the thread count
// runs its images in turn with multi-threaded BLAS instead.
// conv3d, conv_transpose3d and conv3d_backward_weight are the same three kernels over a depth
// axis (im2col is vol2col; a 2-D geometry has unit depth); the 1-D forms are views over the
// 2-D ops with a unit H dim.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "global/global.h"
#include "global/rules.h"
#include "cpu/blas.h"
#include "cpu/loops.h"
#include "dispatch.h"
#include "oneflow/ops_conv.h"
#include "thread_pool.h"
#include "ops/checks.h"
#include "ops/conv_common.h"

namespace oneflow {
void register_pool_ops();
using namespace conv_detail;
namespace {

// ---------------------------------------------------------------- conv geometry

// A convolution in "forward" terms: x [N, C, (D,) H, W] * w [M, C/G, (kd,) kh, kw] ->
// y [N, M, (OD,) OH, OW]. conv_transpose is the adjoint, so it uses the same geometry with x and y
// swapped. 2-D convolutions have a unit depth (D = kd = OD = 1).
struct Geom {
  int64_t N, C, H, W, M, G, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
  int64_t D = 1, kd = 1, sd = 1, pd = 0, dd = 1, OD = 1;
  int64_t K() const { return (C / G) * kd * kh * kw; }  // GEMM depth per group
  int64_t L() const { return OD * OH * OW; }
  int64_t img() const { return C * D * H * W; }
  bool direct() const {  // 1x1, stride 1, no padding: the image is its own column matrix
    return kd == 1 && kh == 1 && kw == 1 && sd == 1 && sh == 1 && sw == 1 && pd == 0 && ph == 0 &&
           pw == 0;
  }
};

// Validates a (transposed) convolution on 4-D (2-D conv) or 5-D (3-D conv) input/weight and
// returns its geometry; the spatial rank is the size of p.stride. `one_d` prints shapes and
// parameters as conv1d sees them (the unit H dim dropped).
Geom conv_geom_sz(const char* op, const Tensor& x, IntArrayRef wsz, ScalarType wdt, Device wdev,
                  const Tensor* bias, const ConvParams& p, bool transposed, bool one_d) {
  const int64_t sp = int64_t(p.stride.size());
  // a direct dispatch may pass lists of any lengths: one value per spatial dim, 1 to 3 dims
  if (sp < 1 || sp > 3 || p.padding.size() != p.stride.size() ||
      p.dilation.size() != p.stride.size() || p.output_padding.size() != p.stride.size())
    fail(
        "[{}] expected stride, padding, dilation (and output_padding) of one value per "
        "spatial dim (1 to 3), got {}, {}, {} and {}",
        op, vals(p.stride), vals(p.padding), vals(p.dilation), vals(p.output_padding));
  auto shp = [&](IntArrayRef s) {
    if (!one_d || s.size() < 3) return shape_str(s);
    DimVector d = s.dims();
    d.erase(d.begin() + 2);
    return shape_str(d);
  };
  auto pv = [&](const DimVector& v) { return one_d ? std::to_string(v.back()) : vals(v); };
  check_float(op, x, "input");
  if (x.dim() != sp + 2)
    fail("[{}] expected a {}-D (batched) input, got shape {}", op, one_d ? 3 : sp + 2,
         shp(x.sizes()));
  if (int64_t(wsz.size()) != sp + 2)
    fail("[{}] expected a {}-D weight, got shape {}", op, one_d ? 3 : sp + 2, shp(wsz));
  if (x.dtype() != wdt)
    fail("[{}] input ({}, shape {}) and weight ({}, shape {}) must have the same dtype", op,
         dtype_name(x.dtype()), shp(x.sizes()), dtype_name(wdt), shp(wsz));
  if (x.device() != wdev)
    fail("[{}] input is on {} but weight is on {}", op, x.device().str(), wdev.str());
  for (size_t i = 0; i < size_t(sp); ++i) {
    if (p.stride[i] <= 0) fail("[{}] stride must be positive, got {}", op, pv(p.stride));
    if (p.dilation[i] <= 0) fail("[{}] dilation must be positive, got {}", op, pv(p.dilation));
    if (p.padding[i] < 0) fail("[{}] padding must be non-negative, got {}", op, pv(p.padding));
  }
  const int64_t G = p.groups;
  if (G <= 0) fail("[{}] groups must be positive, got {}", op, G);
  // Overflow-checked size arithmetic: a weight may have a huge dim and no elements, and the
  // parameters any value (fuzz_ops: dilation * (kernel - 1) overflowed).
  auto checked = [&](bool overflowed, int64_t r) {
    if (overflowed)
      fail("[{}] input {}, weight {} and these parameters give sizes that overflow", op,
           shp(x.sizes()), shp(wsz));
    return r;
  };
  auto mul = [&](int64_t a, int64_t b) {
    int64_t r;
    const bool o = __builtin_mul_overflow(a, b, &r);
    return checked(o, r);
  };
  auto add = [&](int64_t a, int64_t b) {
    int64_t r;
    const bool o = __builtin_add_overflow(a, b, &r);
    return checked(o, r);
  };
  // per-axis values, depth first; a 2-D convolution leaves the depth axis at its unit defaults
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, opad[3] = {0, 0, 0};
  const size_t o3 = size_t(3 - sp);
  for (size_t i = 0; i < size_t(sp); ++i) {
    k[o3 + i] = wsz[2 + i];
    s[o3 + i] = p.stride[i];
    pad[o3 + i] = p.padding[i];
    dil[o3 + i] = p.dilation[i];
    if (transposed) opad[o3 + i] = p.output_padding[i];
  }
  for (size_t i = 0; i < 3; ++i)
    if (k[i] <= 0) fail("[{}] weight {} has an empty kernel", op, shp(wsz));
  auto spatial = [&](const int64_t* v, int64_t add) {
    DimVector r;
    for (size_t i = o3; i < 3; ++i) r.push_back(v[i] + add * pad[i]);
    return r;
  };
  Geom g{};
  g.N = x.size(0);
  g.G = G;
  int64_t out_ch;
  if (!transposed) {
    g.C = x.size(1);
    g.M = wsz[0];
    for (size_t i = 0; i < size_t(sp); ++i) in[o3 + i] = x.size(2 + int64_t(i));
    if (mul(wsz[1], G) != g.C || g.C == 0)
      fail(
          "[{}] given groups={} and weight of shape {}, expected input {} to have {} channels, "
          "but got {} channels",
          op, G, shp(wsz), shp(x.sizes()), wsz[1] * G, g.C);
    if (g.M % G != 0)
      fail("[{}] out_channels of weight {} ({}) must be divisible by groups={}", op, shp(wsz), g.M,
           G);
    int64_t eff[3];
    bool too_big = false;
    for (size_t i = 0; i < 3; ++i) {
      eff[i] = add(mul(dil[i], k[i] - 1), 1);
      too_big = too_big || eff[i] > add(in[i], mul(2, pad[i]));
    }
    if (too_big)
      fail(
          "[{}] kernel size {} (with dilation {}) is larger than the padded input size {} of "
          "input {} with padding {}",
          op, pv(spatial(eff, 0)), pv(p.dilation), pv(spatial(in, 2)), shp(x.sizes()),
          pv(p.padding));
    for (size_t i = 0; i < 3; ++i) out[i] = (add(in[i], mul(2, pad[i])) - eff[i]) / s[i] + 1;
    out_ch = g.M;
  } else {
    // x [N, Cin, ...], w [Cin, Cout/G, k...] -> y [N, Cout, ...]; in conv terms the output y is
    // the conv input (C = Cout) and x the conv output (M = Cin).
    const int64_t cin = x.size(1);
    if (wsz[0] != cin || cin == 0)
      fail("[{}] weight {} expects {} input channels, but input {} has {} channels", op, shp(wsz),
           wsz[0], shp(x.sizes()), cin);
    if (cin % G != 0)
      fail("[{}] input channels of input {} ({}) must be divisible by groups={}", op,
           shp(x.sizes()), cin, G);
    for (size_t i = 0; i < size_t(sp); ++i) {
      const int64_t op_ = p.output_padding[i];
      if (op_ < 0 || (op_ >= p.stride[i] && op_ >= p.dilation[i]))
        fail(
            "[{}] output_padding {} must be non-negative and smaller than either stride {} or "
            "dilation {}",
            op, pv(p.output_padding), pv(p.stride), pv(p.dilation));
    }
    g.M = cin;
    g.C = mul(wsz[1], G);
    bool empty = false;
    for (size_t i = 0; i < size_t(sp); ++i) out[o3 + i] = x.size(2 + int64_t(i));
    for (size_t i = 0; i < 3; ++i) {
      in[i] = add(add(add(mul(out[i] - 1, s[i]), -mul(2, pad[i])), mul(dil[i], k[i] - 1)),
                  add(opad[i], 1));
      empty = empty || in[i] <= 0;
    }
    if (empty)
      fail(
          "[{}] input {} with stride {}, padding {}, dilation {} and kernel {} gives a "
          "non-positive output size {}",
          op, shp(x.sizes()), pv(p.stride), pv(p.padding), pv(p.dilation), shp(wsz),
          pv(spatial(in, 0)));
    out_ch = g.C;
  }
  g.D = in[0], g.H = in[1], g.W = in[2];
  g.kd = k[0], g.kh = k[1], g.kw = k[2];
  g.sd = s[0], g.sh = s[1], g.sw = s[2];
  g.pd = pad[0], g.ph = pad[1], g.pw = pad[2];
  g.dd = dil[0], g.dh = dil[1], g.dw = dil[2];
  g.OD = out[0], g.OH = out[1], g.OW = out[2];
  if (g.OD <= 0 || g.OH <= 0 || g.OW <= 0)
    fail("[{}] input {} gives an empty output", op, shp(x.sizes()));
  if (bias && bias->defined()) {
    if (bias->dtype() != x.dtype())
      fail("[{}] bias ({}) must have the input's dtype ({})", op, dtype_name(bias->dtype()),
           dtype_name(x.dtype()));
    if (bias->dim() != 1 || bias->size(0) != out_ch)
      fail("[{}] expected bias of shape ({},) for {} output channels, got {}", op, out_ch, out_ch,
           shape_str(bias->sizes()));
  }
  return g;
}

Geom conv_geom(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias,
               const ConvParams& p, bool transposed, bool one_d) {
  check_float(op, x, "input");
  check_float(op, w, "weight");
  return conv_geom_sz(op, x, w.sizes(), w.dtype(), w.device(), bias, p, transposed, one_d);
}

// ---------------------------------------------------------------- BLAS and im2col

inline void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c,
              blasint(ldc));
}
inline void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                    double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c,
              blasint(ldc));
}

// Sets OpenBLAS's thread count for a scope and restores the pool's count afterwards.
struct BlasThreads {
  explicit BlasThreads(int n) { openblas_set_num_threads(n); }
  ~BlasThreads() { openblas_set_num_threads(num_threads()); }
};

// Valid output range [o0, o1) for a kernel tap at offset `off` (input index = o * s + off).
inline void valid_range(int64_t off, int64_t s, int64_t in, int64_t out, int64_t& o0, int64_t& o1) {
  o0 = off >= 0 ? 0 : (-off + s - 1) / s;
  o1 = in - off > 0 ? (in - off + s - 1) / s : 0;
  o0 = std::min(o0, out);
  o1 = std::clamp(o1, o0, out);
}

// col [C*kd*kh*kw, OD*OH*OW] (rows `ld` apart) <- the patches of one image x [C, D, H, W]
// (vol2col; a 2-D image has D = kd = OD = 1).
template <class T> void im2col(const T* x, T* col, const Geom& g, int64_t ld) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t a = 0; a < g.kd; ++a) {
      for (int64_t i = 0; i < g.kh; ++i) {
        for (int64_t j = 0; j < g.kw; ++j) {
          T* dst = col + (((c * g.kd + a) * g.kh + i) * g.kw + j) * ld;
          const int64_t offw = j * g.dw - g.pw;
          int64_t w0, w1;
          valid_range(offw, g.sw, g.W, g.OW, w0, w1);
          for (int64_t od = 0; od < g.OD; ++od, dst += OHW) {
            const int64_t id = od * g.sd - g.pd + a * g.dd;
            if (id < 0 || id >= g.D) {
              std::fill(dst, dst + OHW, T(0));
              continue;
            }
            const T* plane = x + (c * g.D + id) * HW;
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              T* d = dst + oh * g.OW;
              const int64_t ih = oh * g.sh - g.ph + i * g.dh;
              if (ih < 0 || ih >= g.H) {
                std::fill(d, d + g.OW, T(0));
                continue;
              }
              const T* row = plane + ih * g.W + offw;
              std::fill(d, d + w0, T(0));
              if (g.sw == 1) {
                std::memcpy(d + w0, row + w0, size_t(w1 - w0) * sizeof(T));
              } else {
                for (int64_t ow = w0; ow < w1; ++ow) d[ow] = row[ow * g.sw];
              }
              std::fill(d + w1, d + g.OW, T(0));
            }
          }
        }
      }
    }
  }
}

// x [C, D, H, W] = the sum of the patches in col [C*kd*kh*kw, OD*OH*OW] (rows `ld` apart): the
// adjoint of im2col.
template <class T> void col2im(const T* col, T* x, const Geom& g, int64_t ld) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  std::fill(x, x + g.img(), T(0));
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t a = 0; a < g.kd; ++a) {
      for (int64_t i = 0; i < g.kh; ++i) {
        for (int64_t j = 0; j < g.kw; ++j) {
          const T* src = col + (((c * g.kd + a) * g.kh + i) * g.kw + j) * ld;
          const int64_t offw = j * g.dw - g.pw;
          int64_t w0, w1;
          valid_range(offw, g.sw, g.W, g.OW, w0, w1);
          for (int64_t od = 0; od < g.OD; ++od, src += OHW) {
            const int64_t id = od * g.sd - g.pd + a * g.dd;
            if (id < 0 || id >= g.D) continue;
            T* plane = x + (c * g.D + id) * HW;
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              const int64_t ih = oh * g.sh - g.ph + i * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              const T* s = src + oh * g.OW;
              T* row = plane + ih * g.W + offw;
              if (g.sw == 1) {
                for (int64_t ow = w0; ow < w1; ++ow) row[ow] += s[ow];
              } else {
                for (int64_t ow = w0; ow < w1; ++ow) row[ow * g.sw] += s[ow];
              }
            }
          }
        }
      }
    }
  }
}

// Splits the N images into parts: one per pool thread (each part runs single-threaded BLAS)
// when there are at least as many images as threads, else one part with threaded BLAS.
// f(part, n0, n1) handles images [n0, n1). Returns the number of parts.
template <class F> int64_t for_image_parts(int64_t N, F&& f) {
  const int nt = num_threads();
  if (nt > 1 && N >= nt && !in_parallel_region()) {
    const int64_t P = nt;
    cpu::SerialBlas serial;
    parallel_for(0, P, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) f(p, p * N / P, (p + 1) * N / P);
    });
    return P;
  }
  if (!in_parallel_region()) {
    BlasThreads bt(nt);
    f(0, 0, N);
  } else {
    f(0, 0, N);
  }
  return 1;
}

// Images per GEMM: OpenBLAS runs near full speed from about 1024 columns on (a 64x256x288
// GEMM per image takes twice as long as the same work as one 64x1024x288 GEMM per 4 images).
// Larger images run one at a time: gathering them would cost more than it saves.
inline int64_t chunk_images(int64_t L, int64_t n) {
  return std::clamp<int64_t>((1024 + L - 1) / std::max<int64_t>(L, 1), 1, std::max<int64_t>(n, 1));
}

// dst [M, nb*L] <- the nb images [M, L] starting at src (image i in columns i*L ...).
template <class T> void gather_images(const T* src, T* dst, int64_t nb, int64_t M, int64_t L) {
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t m = 0; m < M; ++m)
      std::memcpy(dst + m * nb * L + i * L, src + (i * M + m) * L, size_t(L) * sizeof(T));
}

// y [N, M, OH, OW] = conv(x [N, C, H, W], w [M, C/G, kh, kw]) (+ bias [M]).
template <class T> void conv_forward(const T* x, const T* w, const T* bias, T* y, const Geom& g) {
  const int64_t K = g.K(), L = g.L(), Mg = g.M / g.G, img = g.img();
  for_image_parts(g.N, [&](int64_t, int64_t n0, int64_t n1) {
    const int64_t cb = chunk_images(L, n1 - n0);
    const bool direct = g.direct() && cb == 1;
    std::vector<T> col(direct ? 0 : size_t(K * g.G * L * cb));
    std::vector<T> tmp(cb > 1 ? size_t(g.M * L * cb) : 0);
    for (int64_t c0 = n0; c0 < n1; c0 += cb) {
      const int64_t nb = std::min(cb, n1 - c0), ld = nb * L;
      const T* cx = x + c0 * img;
      if (!direct) {
        for (int64_t i = 0; i < nb; ++i) im2col(x + (c0 + i) * img, col.data() + i * L, g, ld);
        cx = col.data();
      }
      T* dst = nb > 1 ? tmp.data() : y + c0 * g.M * L;
      for (int64_t gi = 0; gi < g.G; ++gi)
        gemm_rm(false, false, Mg, ld, K, T(1), w + gi * Mg * K, K, cx + gi * K * ld, ld, T(0),
                dst + gi * Mg * ld, ld);
      if (nb == 1 && !bias) continue;
      for (int64_t i = 0; i < nb; ++i)
        for (int64_t m = 0; m < g.M; ++m) {
          T* r = y + ((c0 + i) * g.M + m) * L;
          if (nb > 1) std::memcpy(r, dst + m * ld + i * L, size_t(L) * sizeof(T));
          if (bias) {
            const T b = bias[m];
            for (int64_t l = 0; l < L; ++l) r[l] += b;
          }
        }
    }
  });
}

// x [N, C, H, W] = conv's input-adjoint of y [N, M, OH, OW] (col = W^T y, then col2im).
template <class T> void conv_backward_input(const T* y, const T* w, T* x, const Geom& g) {
  const int64_t K = g.K(), L = g.L(), Mg = g.M / g.G, img = g.img();
  for_image_parts(g.N, [&](int64_t, int64_t n0, int64_t n1) {
    const int64_t cb = chunk_images(L, n1 - n0);
    const bool direct = g.direct() && cb == 1;
    std::vector<T> col(direct ? 0 : size_t(K * g.G * L * cb));
    std::vector<T> tmp(cb > 1 ? size_t(g.M * L * cb) : 0);
    for (int64_t c0 = n0; c0 < n1; c0 += cb) {
      const int64_t nb = std::min(cb, n1 - c0), ld = nb * L;
      const T* src = y + c0 * g.M * L;
      if (nb > 1) {
        gather_images(src, tmp.data(), nb, g.M, L);
        src = tmp.data();
      }
      T* dst = direct ? x + c0 * img : col.data();
      for (int64_t gi = 0; gi < g.G; ++gi)
        gemm_rm(true, false, K, ld, Mg, T(1), w + gi * Mg * K, K, src + gi * Mg * ld, ld, T(0),
                dst + gi * K * ld, ld);
      if (!direct)
        for (int64_t i = 0; i < nb; ++i) col2im(col.data() + i * L, x + (c0 + i) * img, g, ld);
    }
  });
}

// dw [M, C/G, kh, kw] = sum over images of dy_n * col(x_n)^T.
template <class T> void conv_backward_weight(const T* dy, const T* x, T* dw, const Geom& g) {
  const int64_t K = g.K(), L = g.L(), Mg = g.M / g.G, img = g.img();
  const int64_t wsize = g.M * K;
  const int nt = num_threads();
  const int64_t parts = nt > 1 && g.N >= nt && !in_parallel_region() ? nt : 1;
  std::vector<T> acc(size_t(std::max<int64_t>(parts - 1, 0) * wsize));
  for_image_parts(g.N, [&](int64_t p, int64_t n0, int64_t n1) {
    T* out = p == 0 ? dw : acc.data() + (p - 1) * wsize;
    const int64_t cb = chunk_images(L, n1 - n0);
    const bool direct = g.direct() && cb == 1;
    std::vector<T> col(direct ? 0 : size_t(K * g.G * L * cb));
    std::vector<T> tmp(cb > 1 ? size_t(g.M * L * cb) : 0);
    for (int64_t c0 = n0; c0 < n1; c0 += cb) {
      const int64_t nb = std::min(cb, n1 - c0), ld = nb * L;
      const T* cx = x + c0 * img;
      if (!direct) {
        for (int64_t i = 0; i < nb; ++i) im2col(x + (c0 + i) * img, col.data() + i * L, g, ld);
        cx = col.data();
      }
      const T* src = dy + c0 * g.M * L;
      if (nb > 1) {
        gather_images(src, tmp.data(), nb, g.M, L);
        src = tmp.data();
      }
      const T beta = c0 == n0 ? T(0) : T(1);
      for (int64_t gi = 0; gi < g.G; ++gi)
        gemm_rm(false, true, Mg, K, ld, T(1), src + gi * Mg * ld, ld, cx + gi * K * ld, ld, beta,
                out + gi * Mg * K, K);
    }
    if (n0 == n1) std::fill(out, out + wsize, T(0));
  });
  for (int64_t p = 1; p < parts; ++p) {
    const T* a = acc.data() + (p - 1) * wsize;
    for (int64_t i = 0; i < wsize; ++i) dw[i] += a[i];
  }
}

// Adds bias [C] to every plane of y [N, C, H, W].
template <class T> void add_bias(T* y, const T* b, int64_t N, int64_t C, int64_t HW) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      T* r = y + (n * C + c) * HW;
      for (int64_t i = 0; i < HW; ++i) r[i] += b[c];
    }
}

// ---------------------------------------------------------------- conv2d / conv3d

template <int Sp> const OpDef& conv_bw_op() {
  return Sp == 2 ? OF_OP("conv2d_backward_weight") : OF_OP("conv3d_backward_weight");
}

// [N, channels, (D,) H, W] for Sp = 2 or 3.
template <int Sp> DimVector conv_shape(int64_t N, int64_t ch, int64_t D, int64_t H, int64_t W) {
  if constexpr (Sp == 2) return {N, ch, H, W};
  else return {N, ch, D, H, W};
}
// The spatial dims of a [N, C, spatial...] tensor, for the bias gradient.
template <int Sp> DimVector spatial_dims() {
  if constexpr (Sp == 2) return {2, 3};
  else return {2, 3, 4};
}

// conv2d / conv3d (x, w, bias?; stride, padding, dilation, groups)
template <int Sp> void conv_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Geom g =
      conv_geom(conv_name<Sp>(), in[0], in[1], &in[2], conv_params(a, false), false, false);
  out.push_back({conv_shape<Sp>(g.N, g.M, g.OD, g.OH, g.OW), {}, 0, in[0].dtype(), in[0].device()});
}
template <int Sp> void conv_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]), w = kernel_contiguous(k.inputs[1]);
  const Tensor b = k.inputs[2].defined() ? kernel_contiguous(k.inputs[2]) : Tensor();
  const Geom g = conv_geom(conv_name<Sp>(), x, w, &b, conv_params(k.attrs, false), false, false);
  if (k.outputs[0].numel() == 0) return;
  float_or_double(x.dtype(), conv_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    conv_forward<T>(x.data_ptr<T>(), w.data_ptr<T>(), b.defined() ? b.data_ptr<T>() : nullptr,
                    k.outputs[0].data_ptr<T>(), g);
  });
}
// The output_padding that makes conv_transpose reproduce the convolution's input size.
DimVector adjoint_output_padding(const Geom& g, size_t sp) {
  DimVector r{g.D - ((g.OD - 1) * g.sd - 2 * g.pd + g.dd * (g.kd - 1) + 1),
              g.H - ((g.OH - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + 1),
              g.W - ((g.OW - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + 1)};
  if (sp == 2) r.erase(r.begin());
  return r;
}
template <int Sp> Tensor conv_public(const Tensor& x, const Tensor& w, const ConvParams& p) {
  if constexpr (Sp == 2) return conv2d(x, w, {}, p.stride, p.padding, p.dilation, p.groups);
  else return conv3d(x, w, {}, p.stride, p.padding, p.dilation, p.groups);
}
template <int Sp>
Tensor conv_t_public(const Tensor& x, const Tensor& w, const ConvParams& p,
                     const DimVector& output_padding) {
  if constexpr (Sp == 2)
    return conv_transpose2d(x, w, {}, p.stride, p.padding, output_padding, p.groups, p.dilation);
  else return conv_transpose3d(x, w, {}, p.stride, p.padding, output_padding, p.groups, p.dilation);
}
template <int Sp> TensorList conv_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), false);
  Tensor gx, gw, gb;
  const Tensor& g = gr[0];
  if (c.needs_input_grad(0)) {
    const Geom geo = conv_geom(conv_name<Sp>(), c.input(0), c.input(1), nullptr, p, false, false);
    gx = conv_t_public<Sp>(g, c.input(1), p, adjoint_output_padding(geo, Sp));
  }
  if (c.needs_input_grad(1))
    gw = dispatch1(conv_bw_op<Sp>(), {g, c.input(0)},
                   ConvWeightGradAttrs::make(p.stride, p.padding, p.dilation, p.groups,
                                             c.input_sizes(1).dims()));
  if (c.needs_input_grad(2)) gb = g.sum(spatial_dims<Sp>()).sum(0);  // faster than one sum
  return {gx, gw, gb};
}

// ---------------------------------------------------------------- conv_transpose2d / 3d

// conv_transpose2d / 3d (x, w, bias?; stride, padding, dilation, groups, output_padding)
template <int Sp> void conv_transpose_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Geom g =
      conv_geom(conv_t_name<Sp>(), in[0], in[1], &in[2], conv_params(a, true), true, false);
  out.push_back({conv_shape<Sp>(g.N, g.C, g.D, g.H, g.W), {}, 0, in[0].dtype(), in[0].device()});
}
template <int Sp> void conv_transpose_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]), w = kernel_contiguous(k.inputs[1]);
  const Tensor b = k.inputs[2].defined() ? kernel_contiguous(k.inputs[2]) : Tensor();
  const Geom g = conv_geom(conv_t_name<Sp>(), x, w, &b, conv_params(k.attrs, true), true, false);
  if (k.outputs[0].numel() == 0) return;
  float_or_double(x.dtype(), conv_t_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    T* y = k.outputs[0].data_ptr<T>();
    conv_backward_input<T>(x.data_ptr<T>(), w.data_ptr<T>(), y, g);
    if (b.defined()) add_bias<T>(y, b.data_ptr<T>(), g.N, g.C, g.D * g.H * g.W);
  });
}
template <int Sp> TensorList conv_transpose_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), true);
  Tensor gx, gw, gb;
  const Tensor& g = gr[0];
  // An output_padding of at least the stride (allowed below the dilation) makes the
  // convolution of the output floor(output_padding / stride) rows longer than the input in
  // that dim: those rows belong to no input element, so the input gradient drops them and the
  // weight gradient pairs them with zero rows of the input.
  DimVector extra;
  bool any_extra = false;
  for (size_t i = 0; i < p.stride.size(); ++i) {
    extra.push_back(p.output_padding[i] / p.stride[i]);
    any_extra = any_extra || extra.back() > 0;
  }
  if (c.needs_input_grad(0)) {
    gx = conv_public<Sp>(g, c.input(1), p);
    if (any_extra)
      for (size_t i = 0; i < extra.size(); ++i)
        gx = gx.narrow(int64_t(i) + 2, 0, gx.size(int64_t(i) + 2) - extra[i]);
  }
  if (c.needs_input_grad(1)) {
    Tensor x = c.input(0);
    if (any_extra) {
      DimVector pads;  // last dim first, zeros after the end
      for (size_t i = extra.size(); i-- > 0;) {
        pads.push_back(0);
        pads.push_back(extra[i]);
      }
      x = pad(x, pads, "constant", 0.0);
    }
    gw = dispatch1(conv_bw_op<Sp>(), {x, g},
                   ConvWeightGradAttrs::make(p.stride, p.padding, p.dilation, p.groups,
                                             c.input_sizes(1).dims()));
  }
  if (c.needs_input_grad(2)) gb = g.sum(spatial_dims<Sp>()).sum(0);  // faster than one sum
  return {gx, gw, gb};
}

// ---------------------------------------------------------------- conv2d/3d_backward_weight

// conv2d_backward_weight(grad_output [N, M, OH, OW], input [N, C, H, W]; stride, padding,
// dilation, groups, weight_size) -> grad_weight [M, C/G, kh, kw]; conv3d_backward_weight
// likewise with a depth dim.
template <int Sp> Geom bw_geom(const Tensor& dy, const Tensor& x, const Attrs& a) {
  const char* op = conv_bw_name<Sp>();
  const DimVector& ws = ConvWeightGradAttrs::get<"weight_size">(a);
  OF_CHECK(ws.size() == Sp + 2, "[{}] weight_size must have {} values, got {}", op, Sp + 2,
           vals(ws));
  const ConvParams p = conv_params(a, false);
  check_float(op, x, "input");
  check_float(op, dy, "grad_output");
  const Geom g = conv_geom_sz(op, x, ws, x.dtype(), x.device(), nullptr, p, false, false);
  const DimVector expect = conv_shape<Sp>(g.N, g.M, g.OD, g.OH, g.OW);
  if (!(dy.sizes() == IntArrayRef(expect)) || dy.dtype() != x.dtype())
    fail("[{}] grad_output {} ({}) does not match the convolution output {} ({})", op,
         shape_str(dy.sizes()), dtype_name(dy.dtype()), vals(expect), dtype_name(x.dtype()));
  return g;
}
template <int Sp>
void conv_backward_weight_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  bw_geom<Sp>(in[0], in[1], a);
  out.push_back({ConvWeightGradAttrs::get<"weight_size">(a), {}, 0, in[1].dtype(), in[1].device()});
}
template <int Sp> void conv_backward_weight_cpu(const KernelArgs& k) {
  const Tensor dy = kernel_contiguous(k.inputs[0]), x = kernel_contiguous(k.inputs[1]);
  const Geom g = bw_geom<Sp>(dy, x, k.attrs);
  if (k.outputs[0].numel() == 0) return;
  float_or_double(x.dtype(), conv_bw_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    conv_backward_weight<T>(dy.data_ptr<T>(), x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), g);
  });
}
template <int Sp> TensorList conv_backward_weight_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), false);
  const Tensor& gg = gr[0];  // gradient w.r.t. grad_weight
  Tensor gdy, gx;
  if (c.needs_input_grad(0)) gdy = conv_public<Sp>(c.input(1), gg, p);
  if (c.needs_input_grad(1)) {
    const Geom geo = conv_geom(conv_name<Sp>(), c.input(1), gg, nullptr, p, false, false);
    gx = conv_t_public<Sp>(c.input(0), gg, p, adjoint_output_padding(geo, Sp));
  }
  return {gdy, gx};
}

// conv1d/2d/3d and conv_transpose1d/2d/3d; 1-D runs as 2-D over a unit H dim (`sp` = 1, 2, 3).
Tensor conv_impl(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const ConvParams& p, bool transposed, int64_t sp) {
  const OpDef& def = sp == 3 ? (transposed ? OF_OP("conv_transpose3d") : OF_OP("conv3d"))
                             : (transposed ? OF_OP("conv_transpose2d") : OF_OP("conv2d"));
  check_defined(op, input, "input");
  check_defined(op, weight, "weight");  // an undefined weight is named before a bad dtype
  check_float(op, input, "input");
  const bool one_d = sp == 1;
  const bool unbatched = input.dim() == sp + 1;
  Tensor x = batched(op, input, sp), w = weight;
  if (one_d) {
    x = x.dim() == 3 ? x.unsqueeze(2) : x;
    if (w.dim() == 3) w = w.unsqueeze(2);
    else fail("[{}] expected a 3-D weight, got shape {}", op, shape_str(w.sizes()));
  }
  // shapes and parameters checked as conv1d sees them; the dtypes and the bias are the op's
  // infer_meta's (after autocast's casts, before any 16-bit widening: dispatch steps 0 and 2),
  // so this wrapper runs once under autocast
  check_float(op, w, "weight");
  conv_geom_sz(op, x, w.sizes(), x.dtype(), w.device(), nullptr, p, transposed, one_d);
  Attrs attrs = transposed ? ConvTransposeAttrs::make(p.stride, p.padding, p.dilation, p.groups,
                                                      p.output_padding)
                           : ConvAttrs::make(p.stride, p.padding, p.dilation, p.groups);
  Tensor y = dispatch1(def, {x, w, bias}, std::move(attrs));
  if (one_d) y = y.squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

ConvParams make_params(const char* op, int64_t sp, IntArrayRef stride, IntArrayRef padding,
                       IntArrayRef dilation, int64_t groups, IntArrayRef output_padding = 0) {
  ConvParams p;
  p.stride = expand_param(stride, sp, op, "stride");
  p.padding = expand_param(padding, sp, op, "padding");
  p.dilation = expand_param(dilation, sp, op, "dilation");
  p.output_padding = expand_param(output_padding, sp, op, "output_padding");
  p.groups = groups;
  if (sp == 1) {  // conv1d runs as conv2d over a unit H dim
    p.stride.insert(p.stride.begin(), 1);
    p.padding.insert(p.padding.begin(), 0);
    p.dilation.insert(p.dilation.begin(), 1);
    p.output_padding.insert(p.output_padding.begin(), 0);
  }
  return p;
}

// "valid" / "same" padding: same pads d*(k-1) in total per dim, the odd unit at the end.
Tensor conv_padding_mode(const char* op, int64_t sp, const Tensor& input, const Tensor& weight,
                         const Tensor& bias, IntArrayRef stride, std::string_view padding,
                         IntArrayRef dilation, int64_t groups) {
  check_defined(op, input, "input");
  check_defined(op, weight, "weight");
  ConvParams p = make_params(op, sp, stride, 0, dilation, groups);
  if (padding == "valid") return conv_impl(op, input, weight, bias, p, false, sp);
  if (padding != "same")
    fail("[{}] padding must be 'valid' or 'same' (or integers), got '{}'", op, padding);
  for (int64_t s : p.stride)
    if (s != 1)
      fail("[{}] padding='same' is not supported for strided convolutions (stride {})", op,
           vals(expand_param(stride, sp, op, "stride")));
  if (weight.dim() != sp + 2)
    fail("[{}] expected a {}-D weight, got shape {}", op, sp + 2, shape_str(weight.sizes()));
  const size_t off = p.padding.size() - size_t(sp);  // conv1d's params carry a unit H dim
  DimVector extra;                                   // pad() order: last dim first
  bool asym = false;
  for (int64_t d = sp - 1; d >= 0; --d) {
    const int64_t dil = p.dilation[off + size_t(d)];
    const int64_t total = dil * (weight.size(2 + d) - 1);
    p.padding[off + size_t(d)] = total / 2;
    extra.push_back(0);
    extra.push_back(total % 2);
    asym = asym || total % 2 != 0;
  }
  Tensor x = input;
  if (asym) {
    check_float(op, input, "input");
    x = pad(batched(op, input, sp), extra);
    if (input.dim() == sp + 1) x = x.squeeze(0);
  }
  return conv_impl(op, x, weight, bias, p, false, sp);
}

}  // namespace

void register_conv_ops() {
  register_op({.name = "conv2d",
               .traits = kWidens16Bit,
               .attr_names = ConvAttrs::names(),
               .attr_types = ConvAttrs::types(),
               .infer_meta = conv_meta<2>,
               .cpu = conv_cpu<2>,
               .vjp = conv_vjp<2>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kPerSample,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  register_op({.name = "conv3d",
               .traits = kWidens16Bit,
               .attr_names = ConvAttrs::names(),
               .attr_types = ConvAttrs::types(),
               .infer_meta = conv_meta<3>,
               .cpu = conv_cpu<3>,
               .vjp = conv_vjp<3>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kPerSample,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  register_op({.name = "conv_transpose2d",
               .traits = kWidens16Bit,
               .attr_names = ConvTransposeAttrs::names(),
               .attr_types = ConvTransposeAttrs::types(),
               .infer_meta = conv_transpose_meta<2>,
               .cpu = conv_transpose_cpu<2>,
               .vjp = conv_transpose_vjp<2>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kPerSample,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  register_op({.name = "conv_transpose3d",
               .traits = kWidens16Bit,
               .attr_names = ConvTransposeAttrs::names(),
               .attr_types = ConvTransposeAttrs::types(),
               .infer_meta = conv_transpose_meta<3>,
               .cpu = conv_transpose_cpu<3>,
               .vjp = conv_transpose_vjp<3>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kPerSample,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  register_op({.name = "conv2d_backward_weight",
               .traits = kWidens16Bit,
               .attr_names = ConvWeightGradAttrs::names(),
               .attr_types = ConvWeightGradAttrs::types(),
               .infer_meta = conv_backward_weight_meta<2>,
               .cpu = conv_backward_weight_cpu<2>,
               .vjp = conv_backward_weight_vjp<2>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kPerSampleWeightGrad,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "conv3d_backward_weight",
               .traits = kWidens16Bit,
               .attr_names = ConvWeightGradAttrs::names(),
               .attr_types = ConvWeightGradAttrs::types(),
               .infer_meta = conv_backward_weight_meta<3>,
               .cpu = conv_backward_weight_cpu<3>,
               .vjp = conv_backward_weight_vjp<3>,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kPerSampleWeightGrad,
               .contiguous_inputs = kEveryInput});
  register_pool_ops();
}

// ---------------------------------------------------------------- public functions

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_impl("conv2d", input, weight, bias,
                   make_params("conv2d", 2, stride, padding, dilation, groups), false, 2);
}
Tensor conv2d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_impl("conv1d", input, weight, bias,
                   make_params("conv1d", 1, stride, padding, dilation, groups), false, 1);
}
Tensor conv1d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_impl("conv3d", input, weight, bias,
                   make_params("conv3d", 3, stride, padding, dilation, groups), false, 3);
}
Tensor conv3d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv3d", 3, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                        int64_t groups, IntArrayRef dilation) {
  return conv_impl(
      "conv_transpose1d", input, weight, bias,
      make_params("conv_transpose1d", 1, stride, padding, dilation, groups, output_padding), true,
      1);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                        int64_t groups, IntArrayRef dilation) {
  return conv_impl(
      "conv_transpose2d", input, weight, bias,
      make_params("conv_transpose2d", 2, stride, padding, dilation, groups, output_padding), true,
      2);
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                        int64_t groups, IntArrayRef dilation) {
  return conv_impl(
      "conv_transpose3d", input, weight, bias,
      make_params("conv_transpose3d", 3, stride, padding, dilation, groups, output_padding), true,
      3);
}

}  // namespace oneflow

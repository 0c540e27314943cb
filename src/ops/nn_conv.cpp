// nn_conv.cpp: convolution, pooling and resampling ops.
// NOTE [Conv lowering]: conv2d runs im2col + GEMM per image (OpenBLAS), conv_transpose2d is
// conv2d's input-gradient (GEMM W^T * x, then col2im), and conv2d_backward_weight is the
// weight-gradient (sum over images of g * col^T). Their VJPs are written with these three
// ops, so gradients of any order exist. Images are split into parts, one per pool thread,
// each running single-threaded BLAS (per-part weight-gradient buffers are summed in part
// order, so results depend only on the thread count); a batch smaller than the thread count
// runs its images in turn with multi-threaded BLAS instead.
// NOTE [Separable resampling]: avg_pool2d, adaptive_avg_pool2d, upsample_nearest2d and
// upsample_bilinear2d are all y = Rh * x * Rw^T per plane with sparse rows: one forward and
// one adjoint kernel (the *_backward ops) serve the four, each with its own index maps.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "dispatch.h"
#include "oneflow/ops_conv.h"
#include "thread_pool.h"

namespace oneflow {
namespace {



// ---------------------------------------------------------------- argument helpers

// One value per spatial dim: a single value is broadcast to all `n` dims.
DimVector expand_param(IntArrayRef v, int64_t n, const char* op, const char* name) {
  if (int64_t(v.size()) == n) return v.dims();
  if (v.size() == 1) return DimVector(size_t(n), v[0]);
  fail("[{}] {} must have 1 or {} values, got {} ({})", op, name, n, v.size(), shape_str(v));
}

// "(a, b)" without the trailing comma shape_str puts on one-element lists.
std::string vals(const DimVector& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

void check_float(const char* op, const Tensor& t, const char* what) {
  if (!t.defined()) fail("[{}] {} is undefined", op, what);
  if (!is_floating_point(t.dtype()))
    fail("[{}] expected a floating-point {}, got {} (shape {})", op, what, dtype_name(t.dtype()),
         shape_str(t.sizes()));
}

bool is_half(ScalarType t) { return t == kFloat16 || t == kBFloat16; }
Tensor widen(const Tensor& t) { return t.defined() && is_half(t.dtype()) ? t.to(kFloat32) : t; }

// A [N, C, H, W] view of an unbatched [C, H, W] input (the op wrappers' rank handling).
Tensor batched(const char* op, const Tensor& x, int64_t spatial) {
  if (x.dim() == spatial + 2) return x;
  if (x.dim() == spatial + 1) return x.unsqueeze(0);
  fail("[{}] expected a {}-D (unbatched) or {}-D (batched) input, got a {}-D input of shape {}",
       op, spatial + 1, spatial + 2, x.dim(), shape_str(x.sizes()));
}

// PyTorch's pooling_output_shape (floor division, ceil_mode drops a window starting in padding).
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}

// ---------------------------------------------------------------- conv geometry

// A convolution in "forward" terms: x [N, C, H, W] * w [M, C/G, kh, kw] -> y [N, M, OH, OW].
// conv_transpose2d is the adjoint, so it uses the same geometry with x and y swapped.
struct Geom {
  int64_t N, C, H, W, M, G, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
  int64_t K() const { return (C / G) * kh * kw; }  // GEMM depth per group
  int64_t L() const { return OH * OW; }
  bool direct() const {  // 1x1, stride 1, no padding: the image is its own column matrix
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
  }
};

struct ConvParams {
  DimVector stride, padding, dilation, output_padding;
  int64_t groups = 1;
};

// Validates a (transposed) convolution on 4-D input/weight and returns its geometry.
// `one_d` prints shapes and parameters as conv1d sees them (the unit H dim dropped).
Geom conv_geom_sz(const char* op, const Tensor& x, IntArrayRef wsz, ScalarType wdt, Device wdev,
                  const Tensor* bias, const ConvParams& p, bool transposed, bool one_d) {
  auto shp = [&](IntArrayRef s) {
    if (!one_d || s.size() < 3) return shape_str(s);
    DimVector d = s.dims();
    d.erase(d.begin() + 2);
    return shape_str(d);
  };
  auto pv = [&](const DimVector& v) { return one_d ? std::to_string(v[1]) : vals(v); };
  check_float(op, x, "input");
  if (x.dim() != 4)
    fail("[{}] expected a {}-D (batched) input, got shape {}", op, one_d ? 3 : 4,
         shp(x.sizes()));
  if (int64_t(wsz.size()) != 4)
    fail("[{}] expected a {}-D weight, got shape {}", op, one_d ? 3 : 4, shp(wsz));
  if (x.dtype() != wdt)
    fail("[{}] input ({}, shape {}) and weight ({}, shape {}) must have the same dtype", op,
         dtype_name(x.dtype()), shp(x.sizes()), dtype_name(wdt), shp(wsz));
  if (x.device() != wdev)
    fail("[{}] input is on {} but weight is on {}", op, x.device().str(), wdev.str());
  for (size_t i = 0; i < 2; ++i) {
    if (p.stride[i] <= 0) fail("[{}] stride must be positive, got {}", op, pv(p.stride));
    if (p.dilation[i] <= 0) fail("[{}] dilation must be positive, got {}", op, pv(p.dilation));
    if (p.padding[i] < 0) fail("[{}] padding must be non-negative, got {}", op, pv(p.padding));
  }
  const int64_t G = p.groups;
  if (G <= 0) fail("[{}] groups must be positive, got {}", op, G);
  Geom g{};
  g.N = x.size(0);
  g.G = G;
  g.kh = wsz[2];
  g.kw = wsz[3];
  g.sh = p.stride[0];
  g.sw = p.stride[1];
  g.ph = p.padding[0];
  g.pw = p.padding[1];
  g.dh = p.dilation[0];
  g.dw = p.dilation[1];
  if (g.kh <= 0 || g.kw <= 0) fail("[{}] weight {} has an empty kernel", op, shp(wsz));
  int64_t out_ch;
  if (!transposed) {
    g.C = x.size(1);
    g.M = wsz[0];
    g.H = x.size(2);
    g.W = x.size(3);
    if (wsz[1] * G != g.C || g.C == 0)
      fail("[{}] given groups={} and weight of shape {}, expected input {} to have {} channels, "
           "but got {} channels", op, G, shp(wsz), shp(x.sizes()), wsz[1] * G, g.C);
    if (g.M % G != 0)
      fail("[{}] out_channels of weight {} ({}) must be divisible by groups={}", op,
           shp(wsz), g.M, G);
    const int64_t eh = g.dh * (g.kh - 1) + 1, ew = g.dw * (g.kw - 1) + 1;
    if (eh > g.H + 2 * g.ph || ew > g.W + 2 * g.pw)
      fail("[{}] kernel size {} (with dilation {}) is larger than the padded input size {} of "
           "input {} with padding {}", op, one_d ? std::to_string(ew) : vals({eh, ew}),
           pv(p.dilation), one_d ? std::to_string(g.W + 2 * g.pw)
                                  : vals({g.H + 2 * g.ph, g.W + 2 * g.pw}),
           shp(x.sizes()), pv(p.padding));
    g.OH = (g.H + 2 * g.ph - eh) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw - ew) / g.sw + 1;
    out_ch = g.M;
  } else {
    // x [N, Cin, H, W], w [Cin, Cout/G, kh, kw] -> y [N, Cout, OH, OW]; in conv terms the
    // output y is the conv input (C = Cout) and x the conv output (M = Cin).
    const int64_t cin = x.size(1);
    if (wsz[0] != cin || cin == 0)
      fail("[{}] weight {} expects {} input channels, but input {} has {} channels", op,
           shp(wsz), wsz[0], shp(x.sizes()), cin);
    if (cin % G != 0)
      fail("[{}] input channels of input {} ({}) must be divisible by groups={}", op,
           shp(x.sizes()), cin, G);
    for (size_t i = 0; i < 2; ++i) {
      const int64_t op_ = p.output_padding[i];
      if (op_ < 0 || (op_ >= p.stride[i] && op_ >= p.dilation[i]))
        fail("[{}] output_padding {} must be non-negative and smaller than either stride {} or "
             "dilation {}", op, pv(p.output_padding), pv(p.stride), pv(p.dilation));
    }
    g.M = cin;
    g.C = wsz[1] * G;
    g.OH = x.size(2);
    g.OW = x.size(3);
    g.H = (g.OH - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + p.output_padding[0] + 1;
    g.W = (g.OW - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + p.output_padding[1] + 1;
    if (g.H <= 0 || g.W <= 0)
      fail("[{}] input {} with stride {}, padding {}, dilation {} and kernel {} gives a "
           "non-positive output size {}", op, shp(x.sizes()), pv(p.stride), pv(p.padding),
           pv(p.dilation), shp(wsz), one_d ? std::to_string(g.W) : vals({g.H, g.W}));
    out_ch = g.C;
  }
  if (g.OH <= 0 || g.OW <= 0)
    fail("[{}] input {} gives an empty output", op, shp(x.sizes()));
  if (bias && bias->defined()) {
    if (bias->dtype() != x.dtype())
      fail("[{}] bias ({}) must have the input's dtype ({})", op, dtype_name(bias->dtype()),
           dtype_name(x.dtype()));
    if (bias->dim() != 1 || bias->size(0) != out_ch)
      fail("[{}] expected bias of shape ({},) for {} output channels, got {}", op, out_ch,
           out_ch, shape_str(bias->sizes()));
  }
  return g;
}

Geom conv_geom(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias,
               const ConvParams& p, bool transposed, bool one_d) {
  check_float(op, x, "input");
  check_float(op, w, "weight");
  return conv_geom_sz(op, x, w.sizes(), w.dtype(), w.device(), bias, p, transposed, one_d);
}

ConvParams conv_params(const Attrs& a, bool transposed) {
  ConvParams p;
  p.stride = a.ints(0);
  p.padding = a.ints(1);
  if (transposed) {
    p.output_padding = a.ints(2);
    p.groups = a.i(3);
    p.dilation = a.ints(4);
  } else {
    p.dilation = a.ints(2);
    p.groups = a.i(3);
    p.output_padding = {0, 0};
  }
  return p;
}

// ---------------------------------------------------------------- BLAS and im2col

inline void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta,
              c, blasint(ldc));
}
inline void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                    double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta,
              c, blasint(ldc));
}

// Sets OpenBLAS's thread count for a scope and restores the pool's count afterwards.
struct BlasThreads {
  explicit BlasThreads(int n) { openblas_set_num_threads(n); }
  ~BlasThreads() { openblas_set_num_threads(num_threads()); }
};

// Valid output range [o0, o1) for a kernel tap at offset `off` (input index = o * s + off).
inline void valid_range(int64_t off, int64_t s, int64_t in, int64_t out, int64_t& o0,
                        int64_t& o1) {
  o0 = off >= 0 ? 0 : (-off + s - 1) / s;
  o1 = in - off > 0 ? (in - off + s - 1) / s : 0;
  o0 = std::min(o0, out);
  o1 = std::clamp(o1, o0, out);
}

// col [C*kh*kw, OH*OW] (rows `ld` apart) <- the patches of one image x [C, H, W].
template <class T> void im2col(const T* x, T* col, const Geom& g, int64_t ld) {
  for (int64_t c = 0; c < g.C; ++c) {
    const T* plane = x + c * g.H * g.W;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* dst = col + ((c * g.kh + i) * g.kw + j) * ld;
        const int64_t offw = j * g.dw - g.pw;
        int64_t w0, w1;
        valid_range(offw, g.sw, g.W, g.OW, w0, w1);
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

// x [C, H, W] = the sum of the patches in col [C*kh*kw, OH*OW] (rows `ld` apart): the adjoint
// of im2col.
template <class T> void col2im(const T* col, T* x, const Geom& g, int64_t ld) {
  std::fill(x, x + g.C * g.H * g.W, T(0));
  for (int64_t c = 0; c < g.C; ++c) {
    T* plane = x + c * g.H * g.W;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* src = col + ((c * g.kh + i) * g.kw + j) * ld;
        const int64_t offw = j * g.dw - g.pw;
        int64_t w0, w1;
        valid_range(offw, g.sw, g.W, g.OW, w0, w1);
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

// Splits the N images into parts: one per pool thread (each part runs single-threaded BLAS)
// when there are at least as many images as threads, else one part with threaded BLAS.
// f(part, n0, n1) handles images [n0, n1). Returns the number of parts.
template <class F> int64_t for_image_parts(int64_t N, F&& f) {
  const int nt = num_threads();
  if (nt > 1 && N >= nt && !in_parallel_region()) {
    const int64_t P = nt;
    BlasThreads bt(1);
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
template <class T>
void conv_forward(const T* x, const T* w, const T* bias, T* y, const Geom& g) {
  const int64_t K = g.K(), L = g.L(), Mg = g.M / g.G, img = g.C * g.H * g.W;
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
  const int64_t K = g.K(), L = g.L(), Mg = g.M / g.G, img = g.C * g.H * g.W;
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
  const int64_t K = g.K(), L = g.L(), Mg = g.M / g.G, img = g.C * g.H * g.W;
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

template <class F> void float_or_double(ScalarType t, const char* op, F&& f) {
  if (t == kFloat32) return f(float{});
  if (t == kFloat64) return f(double{});
  fail("[{}] internal: unsupported dtype {}", op, dtype_name(t));
}

// ---------------------------------------------------------------- conv2d

// conv2d(x, w, bias?; stride, padding, dilation, groups)
void conv2d_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Geom g = conv_geom("conv2d", in[0], in[1], &in[2], conv_params(a, false), false, false);
  out.push_back({{g.N, g.M, g.OH, g.OW}, {}, 0, in[0].dtype(), in[0].device()});
}
void conv2d_cpu(const KernelArgs& k) {
  const Tensor x = k.inputs[0].contiguous(), w = k.inputs[1].contiguous();
  const Tensor b = k.inputs[2].defined() ? k.inputs[2].contiguous() : Tensor();
  const Geom g = conv_geom("conv2d", x, w, &b, conv_params(k.attrs, false), false, false);
  if (k.outputs[0].numel() == 0) return;
  float_or_double(x.dtype(), "conv2d", [&](auto z) {
    using T = decltype(z);
    conv_forward<T>(x.data_ptr<T>(), w.data_ptr<T>(), b.defined() ? b.data_ptr<T>() : nullptr,
                    k.outputs[0].data_ptr<T>(), g);
  });
}
// The output_padding that makes conv_transpose2d reproduce an input of size `in`.
DimVector adjoint_output_padding(const Geom& g) {
  return {g.H - ((g.OH - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + 1),
          g.W - ((g.OW - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + 1)};
}
TensorList conv2d_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), false);
  Tensor gx, gw, gb;
  const Tensor& g = gr[0];
  if (c.needs_input_grad(0)) {
    const Geom geo = conv_geom("conv2d", c.input(0), c.input(1), nullptr, p, false, false);
    gx = conv_transpose2d(g, c.input(1), {}, p.stride, p.padding, adjoint_output_padding(geo),
                          p.groups, p.dilation);
  }
  if (c.needs_input_grad(1))
    gw = dispatch1(OF_OP("conv2d_backward_weight"), {g, c.input(0)},
                   {c.input_sizes(1).dims(), p.stride, p.padding, p.dilation, p.groups});
  if (c.needs_input_grad(2)) gb = g.sum({2, 3}).sum(0);  // faster than sum({0, 2, 3})
  return {gx, gw, gb};
}

// ---------------------------------------------------------------- conv_transpose2d

// conv_transpose2d(x, w, bias?; stride, padding, output_padding, groups, dilation)
void conv_transpose2d_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Geom g =
      conv_geom("conv_transpose2d", in[0], in[1], &in[2], conv_params(a, true), true, false);
  out.push_back({{g.N, g.C, g.H, g.W}, {}, 0, in[0].dtype(), in[0].device()});
}
void conv_transpose2d_cpu(const KernelArgs& k) {
  const Tensor x = k.inputs[0].contiguous(), w = k.inputs[1].contiguous();
  const Tensor b = k.inputs[2].defined() ? k.inputs[2].contiguous() : Tensor();
  const Geom g =
      conv_geom("conv_transpose2d", x, w, &b, conv_params(k.attrs, true), true, false);
  if (k.outputs[0].numel() == 0) return;
  float_or_double(x.dtype(), "conv_transpose2d", [&](auto z) {
    using T = decltype(z);
    T* y = k.outputs[0].data_ptr<T>();
    conv_backward_input<T>(x.data_ptr<T>(), w.data_ptr<T>(), y, g);
    if (b.defined()) add_bias<T>(y, b.data_ptr<T>(), g.N, g.C, g.H * g.W);
  });
}
TensorList conv_transpose2d_vjp(const VjpCtx& c, const TensorList& gr) {
  const ConvParams p = conv_params(c.attrs(), true);
  Tensor gx, gw, gb;
  const Tensor& g = gr[0];
  if (c.needs_input_grad(0)) gx = conv2d(g, c.input(1), {}, p.stride, p.padding, p.dilation,
                                         p.groups);
  if (c.needs_input_grad(1))
    gw = dispatch1(OF_OP("conv2d_backward_weight"), {c.input(0), g},
                   {c.input_sizes(1).dims(), p.stride, p.padding, p.dilation, p.groups});
  if (c.needs_input_grad(2)) gb = g.sum({2, 3}).sum(0);  // faster than sum({0, 2, 3})
  return {gx, gw, gb};
}

// ---------------------------------------------------------------- conv2d_backward_weight

// conv2d_backward_weight(grad_output [N, M, OH, OW], input [N, C, H, W]; weight_size, stride,
// padding, dilation, groups) -> grad_weight [M, C/G, kh, kw].
Geom bw_geom(const Tensor& dy, const Tensor& x, const Attrs& a) {
  const char* op = "conv2d_backward_weight";
  const DimVector& ws = a.ints(0);
  OF_CHECK(ws.size() == 4, "[{}] weight_size must have 4 values, got {}", op, vals(ws));
  ConvParams p;
  p.stride = a.ints(1);
  p.padding = a.ints(2);
  p.dilation = a.ints(3);
  p.groups = a.i(4);
  p.output_padding = {0, 0};
  check_float(op, x, "input");
  check_float(op, dy, "grad_output");
  const Geom g = conv_geom_sz(op, x, ws, x.dtype(), x.device(), nullptr, p, false, false);
  if (!(dy.sizes() == IntArrayRef(DimVector{g.N, g.M, g.OH, g.OW})) || dy.dtype() != x.dtype())
    fail("[{}] grad_output {} ({}) does not match the convolution output {} ({})", op,
         shape_str(dy.sizes()), dtype_name(dy.dtype()), vals({g.N, g.M, g.OH, g.OW}),
         dtype_name(x.dtype()));
  return g;
}
void conv2d_backward_weight_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  bw_geom(in[0], in[1], a);
  out.push_back({a.ints(0), {}, 0, in[1].dtype(), in[1].device()});
}
void conv2d_backward_weight_cpu(const KernelArgs& k) {
  const Tensor dy = k.inputs[0].contiguous(), x = k.inputs[1].contiguous();
  const Geom g = bw_geom(dy, x, k.attrs);
  if (k.outputs[0].numel() == 0) return;
  float_or_double(x.dtype(), "conv2d_backward_weight", [&](auto z) {
    using T = decltype(z);
    conv_backward_weight<T>(dy.data_ptr<T>(), x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), g);
  });
}
TensorList conv2d_backward_weight_vjp(const VjpCtx& c, const TensorList& gr) {
  const Attrs& a = c.attrs();
  const DimVector stride = a.ints(1), padding = a.ints(2), dilation = a.ints(3);
  const int64_t groups = a.i(4);
  const Tensor& gg = gr[0];  // gradient w.r.t. grad_weight
  Tensor gdy, gx;
  if (c.needs_input_grad(0)) gdy = conv2d(c.input(1), gg, {}, stride, padding, dilation, groups);
  if (c.needs_input_grad(1)) {
    ConvParams p{stride, padding, dilation, {0, 0}, groups};
    const Geom geo = conv_geom("conv2d", c.input(1), gg, nullptr, p, false, false);
    gx = conv_transpose2d(c.input(0), gg, {}, stride, padding, adjoint_output_padding(geo),
                          groups, dilation);
  }
  return {gdy, gx};
}

// ---------------------------------------------------------------- max_pool2d

struct PoolGeom {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
};

// max_pool2d / avg_pool2d parameter checks and output size (PyTorch's pool2d_shape_check).
PoolGeom pool_geom(const char* op, const Tensor& x, const DimVector& k, const DimVector& s,
                   const DimVector& p, const DimVector& d, bool ceil_mode) {
  check_float(op, x, "input");
  if (x.dim() != 4)
    fail("[{}] expected a 3-D or 4-D input, got shape {}", op, shape_str(x.sizes()));
  for (size_t i = 0; i < 2; ++i) {
    if (k[i] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
    if (s[i] <= 0) fail("[{}] stride must be positive, got {}", op, vals(s));
    if (d[i] <= 0) fail("[{}] dilation must be positive, got {}", op, vals(d));
    if (p[i] < 0 || p[i] > k[i] / 2)
      fail("[{}] padding {} must be non-negative and at most half of kernel_size {}", op,
           vals(p), vals(k));
  }
  PoolGeom g{x.size(0), x.size(1), x.size(2), x.size(3), k[0], k[1], s[0], s[1], p[0], p[1],
             d[0], d[1], 0, 0};
  g.OH = pool_out(g.H, g.kh, g.ph, g.sh, g.dh, ceil_mode);
  g.OW = pool_out(g.W, g.kw, g.pw, g.sw, g.dw, ceil_mode);
  if (g.OH <= 0 || g.OW <= 0)
    fail("[{}] input {} with kernel_size {}, stride {}, padding {}, dilation {} gives output size "
         "{}, which is too small", op, shape_str(x.sizes()), vals(k), vals(s), vals(p), vals(d),
         vals({g.OH, g.OW}));
  return g;
}

// attrs: kernel_size, stride, padding, dilation, ceil_mode
PoolGeom max_geom(const Tensor& x, const Attrs& a) {
  return pool_geom("max_pool2d_with_indices", x, a.ints(0), a.ints(1), a.ints(2), a.ints(3),
                   a.b(4));
}
void max_pool2d_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const PoolGeom g = max_geom(in[0], a);
  out.push_back({{g.N, g.C, g.OH, g.OW}, {}, 0, in[0].dtype(), in[0].device()});
  out.push_back({{g.N, g.C, g.OH, g.OW}, {}, 0, kInt64, in[0].device()});
}
void max_pool2d_cpu(const KernelArgs& k) {
  const Tensor x = k.inputs[0].contiguous();
  const PoolGeom g = max_geom(x, k.attrs);
  float_or_double(x.dtype(), "max_pool2d_with_indices", [&](auto z) {
    using T = decltype(z);
    const T* xp = x.data_ptr<T>();
    T* yp = k.outputs[0].data_ptr<T>();
    int64_t* ip = k.outputs[1].data_ptr<int64_t>();
    const int64_t planes = g.N * g.C, in_sz = g.H * g.W, out_sz = g.OH * g.OW;
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(out_sz * g.kh * g.kw, 1));
    // 2x2 windows, stride 2, no padding or dilation (the common case): the same scan order
    // and NaN rule as the general loop below, without its per-window bounds and branches
    const bool k2s2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 &&
                      g.pw == 0 && g.dh == 1 && g.dw == 1 && 2 * g.OH <= g.H && 2 * g.OW <= g.W;
    parallel_for(0, planes, grain, [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const T* src = xp + pl * in_sz;
        T* dst = yp + pl * out_sz;
        int64_t* idx = ip + pl * out_sz;
        if (k2s2) {
          // four passes over an output row, one per window element in the general loop's scan
          // order; `|` rather than `||` and selects keep the data-dependent compares branch-free
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const T* r0 = src + 2 * oh * g.W;
            const T* r1 = r0 + g.W;
            const int64_t base = 2 * oh * g.W;
            T* d = dst + oh * g.OW;
            int64_t* ix = idx + oh * g.OW;
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              d[ow] = r0[2 * ow];
              ix[ow] = base + 2 * ow;
            }
            using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
            auto pass = [&](const T* row, int64_t at) {
              for (int64_t ow = 0; ow < g.OW; ++ow) {
                const T v = row[2 * ow];
                const T m = d[ow];
                // masks instead of selects: GCC turns these selects into unpredictable branches
                const uint64_t up = uint64_t(0) - uint64_t((v > m) | (v != v));
                const Bits bm = Bits(up);
                d[ow] = std::bit_cast<T>(Bits((std::bit_cast<Bits>(v) & bm) |
                                              (std::bit_cast<Bits>(m) & ~bm)));
                ix[ow] = int64_t((uint64_t(at + 2 * ow) & up) | (uint64_t(ix[ow]) & ~up));
              }
            };
            pass(r0 + 1, base + 1);
            pass(r1, base + g.W);
            pass(r1 + 1, base + g.W + 1);
          }
          continue;
        }
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          int64_t h0 = oh * g.sh - g.ph;
          const int64_t h1 = std::min(h0 + (g.kh - 1) * g.dh + 1, g.H);
          while (h0 < 0) h0 += g.dh;
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            int64_t w0 = ow * g.sw - g.pw;
            const int64_t w1 = std::min(w0 + (g.kw - 1) * g.dw + 1, g.W);
            while (w0 < 0) w0 += g.dw;
            int64_t best = h0 * g.W + w0;
            T mv = -std::numeric_limits<T>::infinity();
            for (int64_t ih = h0; ih < h1; ih += g.dh)
              for (int64_t iw = w0; iw < w1; iw += g.dw) {
                const T v = src[ih * g.W + iw];
                if (v > mv || std::isnan(v)) {
                  mv = v;
                  best = ih * g.W + iw;
                }
              }
            dst[oh * g.OW + ow] = mv;
            idx[oh * g.OW + ow] = best;
          }
        }
      }
    });
  });
}
TensorList max_pool2d_vjp(const VjpCtx& c, const TensorList& gr) {
  const IntArrayRef s = c.input_sizes(0);
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  Tensor gx = zeros({N, C, HW}, gr[0].options())
                  .scatter_add(2, c.output(1).reshape({N, C, -1}), gr[0].reshape({N, C, -1}));
  return {gx.view(s)};
}

// ---------------------------------------------------------------- separable resampling

enum class Mode { kAvg, kAdaptive, kNearest, kBilinear };

const char* mode_name(Mode m, bool backward) {
  switch (m) {
    case Mode::kAvg: return backward ? "avg_pool2d_backward" : "avg_pool2d";
    case Mode::kAdaptive:
      return backward ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool2d";
    case Mode::kNearest: return backward ? "upsample_nearest2d_backward" : "upsample_nearest2d";
    case Mode::kBilinear:
      return backward ? "upsample_bilinear2d_backward" : "upsample_bilinear2d";
  }
  return "";
}

// One axis of a separable map: output o reads src[off[o] .. off[o+1]) with weights wt.
struct AxisMap {
  int64_t in = 0, out = 0;
  std::vector<int64_t> off, src;
  std::vector<double> wt;
  void add(int64_t s, double w) {
    src.push_back(s);
    wt.push_back(w);
  }
  void next() { off.push_back(int64_t(src.size())); }
};

// Attrs per mode (the *_backward ops append input_size):
//   avg:       kernel_size, stride, padding, ceil_mode, count_include_pad, divisor (0: none)
//   adaptive: output_size;   nearest: output_size, scales_h, scales_w;
//   bilinear: output_size, align_corners, scales_h, scales_w
// A scale (double) <= 0 means "none": the source step is then in/out; a given scale s makes the
// step 1/s, as at::upsample_*2d's optional scales (interpolate's scale_factor).
struct Resample {
  AxisMap h, w;
};

void check_output_size(const char* op, const DimVector& os, IntArrayRef in) {
  if (os[0] <= 0 || os[1] <= 0)
    fail("[{}] output_size must be positive, got {} for input {}", op, vals(os), shape_str(in));
}

Resample make_resample(Mode mode, IntArrayRef in, const Attrs& a, const char* op) {
  if (in.size() != 4)
    fail("[{}] expected a 3-D or 4-D input, got shape {}", op, shape_str(in));
  Resample r;
  AxisMap* axes[2] = {&r.h, &r.w};
  const int64_t insz[2] = {in[2], in[3]};
  if (mode == Mode::kAvg) {
    const DimVector &k = a.ints(0), &s = a.ints(1), &p = a.ints(2);
    const bool ceil_mode = a.b(3), include_pad = a.b(4);
    const int64_t divisor = a.i(5);
    for (size_t i = 0; i < 2; ++i) {
      if (k[i] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
      if (s[i] <= 0) fail("[{}] stride must be positive, got {}", op, vals(s));
      if (p[i] < 0 || p[i] > k[i] / 2)
        fail("[{}] padding {} must be non-negative and at most half of kernel_size {}", op,
             vals(p), vals(k));
    }
    if (divisor < 0) fail("[{}] divisor_override must be positive, got {}", op, divisor);
    const int64_t o0 = pool_out(insz[0], k[0], p[0], s[0], 1, ceil_mode);
    const int64_t o1 = pool_out(insz[1], k[1], p[1], s[1], 1, ceil_mode);
    if (o0 <= 0 || o1 <= 0)
      fail("[{}] input {} with kernel_size {}, stride {}, padding {} gives output size {}, "
           "which is too small", op, shape_str(in), vals(k), vals(s), vals(p), vals({o0, o1}));
    const int64_t outsz[2] = {o0, o1};
    for (size_t i = 0; i < 2; ++i) {
      AxisMap& m = *axes[i];
      m.in = insz[i];
      m.out = outsz[i];
      m.next();
      for (int64_t o = 0; o < m.out; ++o) {
        int64_t a0 = o * s[i] - p[i];
        int64_t a1 = std::min(a0 + k[i], m.in + p[i]);
        const int64_t pool = a1 - a0;
        a0 = std::max<int64_t>(a0, 0);
        a1 = std::min(a1, m.in);
        double f = divisor > 0 ? (i == 0 ? 1.0 : 1.0 / double(divisor))
                               : 1.0 / double(include_pad ? pool : std::max<int64_t>(a1 - a0, 1));
        for (int64_t t = a0; t < a1; ++t) m.add(t, f);
        m.next();
      }
    }
    return r;
  }
  const DimVector& os = a.ints(0);
  check_output_size(op, os, in);
  const size_t scale_attr = mode == Mode::kNearest ? 1 : 2;
  for (size_t i = 0; i < 2; ++i) {
    AxisMap& m = *axes[i];
    m.in = insz[i];
    m.out = os[i];
    if (m.in <= 0)
      fail("[{}] input {} has an empty spatial dimension", op, shape_str(in));
    const double given = mode == Mode::kAdaptive ? 0.0 : a.f(scale_attr + i);
    m.next();
    for (int64_t o = 0; o < m.out; ++o) {
      if (mode == Mode::kAdaptive) {
        const int64_t a0 = (o * m.in) / m.out, a1 = ((o + 1) * m.in + m.out - 1) / m.out;
        for (int64_t t = a0; t < a1; ++t) m.add(t, 1.0 / double(a1 - a0));
      } else if (mode == Mode::kNearest) {
        int64_t sidx;
        if (m.out == m.in) {
          sidx = o;
        } else if (m.out == 2 * m.in) {
          sidx = o >> 1;
        } else {
          const float scale = given > 0 ? float(1.0 / given) : float(m.in) / float(m.out);
          sidx = std::min(int64_t(std::floor(float(o) * scale)), m.in - 1);
        }
        m.add(sidx, 1.0);
      } else {
        const bool align = a.b(1);
        double srcf;
        if (align) {
          const double scale = m.out > 1 ? double(m.in - 1) / double(m.out - 1) : 0.0;
          srcf = scale * double(o);
        } else {
          const double scale = given > 0 ? 1.0 / given : double(m.in) / double(m.out);
          srcf = std::max(scale * (double(o) + 0.5) - 0.5, 0.0);
        }
        const int64_t i0 = std::min(int64_t(srcf), m.in - 1);
        const int64_t i1 = i0 + (i0 < m.in - 1 ? 1 : 0);
        const double l1 = std::clamp(srcf - double(i0), 0.0, 1.0);
        m.add(i0, 1.0 - l1);
        m.add(i1, l1);
      }
      m.next();
    }
  }
  return r;
}

DimVector in_size_attr(const Attrs& a) { return a.ints(a.size() - 1); }

template <Mode M> void resample_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = mode_name(M, false);
  check_float(op, in[0], "input");
  const Resample r = make_resample(M, in[0].sizes(), a, op);
  out.push_back({{in[0].size(0), in[0].size(1), r.h.out, r.w.out}, {}, 0, in[0].dtype(),
                 in[0].device()});
}
template <Mode M> void resample_backward_meta(const TensorList& in, const Attrs& a,
                                              MetaList& out) {
  const char* op = mode_name(M, true);
  check_float(op, in[0], "grad_output");
  const DimVector isz = in_size_attr(a);
  const Resample r = make_resample(M, isz, a, op);
  const DimVector expect{isz[0], isz[1], r.h.out, r.w.out};
  if (!(in[0].sizes() == IntArrayRef(expect)))
    fail("[{}] grad_output {} does not match the output size {}", op, shape_str(in[0].sizes()),
         vals(expect));
  out.push_back({isz, {}, 0, in[0].dtype(), in[0].device()});
}

// y [P, OH, OW] = Rh x Rw^T per plane (forward) or x [P, H, W] = Rh^T y Rw (adjoint).
template <class T> void resample_planes(const Resample& r, const T* src, T* dst, int64_t planes,
                                        bool adjoint) {
  const AxisMap &h = r.h, &w = r.w;
  std::vector<T> wh(h.wt.begin(), h.wt.end()), ww(w.wt.begin(), w.wt.end());
  const int64_t in_sz = h.in * w.in, out_sz = h.out * w.out;
  // taps per output element, averaged over each axis
  const int64_t th = int64_t(h.src.size()) / std::max<int64_t>(h.out, 1);
  const int64_t tw = int64_t(w.src.size()) / std::max<int64_t>(w.out, 1);
  const int64_t work = std::max<int64_t>(1, out_sz * std::max<int64_t>(th, 1) *
                                                std::max<int64_t>(tw, 1));
  const int64_t grain = std::max<int64_t>(1, 32768 / work);
  parallel_for(0, planes, grain, [&](int64_t b, int64_t e) {
    std::vector<T> acc(size_t(w.out));
    for (int64_t pl = b; pl < e; ++pl) {
      if (!adjoint) {
        const T* x = src + pl * in_sz;
        T* y = dst + pl * out_sz;
        for (int64_t oh = 0; oh < h.out; ++oh) {
          std::fill(acc.begin(), acc.end(), T(0));
          for (int64_t eh = h.off[oh]; eh < h.off[oh + 1]; ++eh) {
            const T a = wh[eh];
            const T* row = x + h.src[eh] * w.in;
            for (int64_t ow = 0; ow < w.out; ++ow) {
              T s = 0;
              for (int64_t ew = w.off[ow]; ew < w.off[ow + 1]; ++ew) s += ww[ew] * row[w.src[ew]];
              acc[ow] += a * s;
            }
          }
          std::copy(acc.begin(), acc.end(), y + oh * w.out);
        }
      } else {
        const T* g = src + pl * out_sz;
        T* x = dst + pl * in_sz;
        std::fill(x, x + in_sz, T(0));
        for (int64_t oh = 0; oh < h.out; ++oh) {
          for (int64_t eh = h.off[oh]; eh < h.off[oh + 1]; ++eh) {
            const T a = wh[eh];
            T* row = x + h.src[eh] * w.in;
            for (int64_t ow = 0; ow < w.out; ++ow) {
              const T gv = a * g[oh * w.out + ow];
              for (int64_t ew = w.off[ow]; ew < w.off[ow + 1]; ++ew) row[w.src[ew]] += ww[ew] * gv;
            }
          }
        }
      }
    }
  });
}

template <Mode M> void resample_cpu(const KernelArgs& k) {
  const Tensor x = k.inputs[0].contiguous();
  const Resample r = make_resample(M, x.sizes(), k.attrs, mode_name(M, false));
  float_or_double(x.dtype(), mode_name(M, false), [&](auto z) {
    using T = decltype(z);
    resample_planes<T>(r, x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), x.size(0) * x.size(1),
                       false);
  });
}
template <Mode M> void resample_backward_cpu(const KernelArgs& k) {
  const Tensor g = k.inputs[0].contiguous();
  const Tensor& out = k.outputs[0];
  const Resample r = make_resample(M, out.sizes(), k.attrs, mode_name(M, true));
  float_or_double(g.dtype(), mode_name(M, true), [&](auto z) {
    using T = decltype(z);
    resample_planes<T>(r, g.data_ptr<T>(), out.data_ptr<T>(), out.size(0) * out.size(1), true);
  });
}

const OpDef* backward_op(Mode m) {
  switch (m) {
    case Mode::kAvg: return &OF_OP("avg_pool2d_backward");
    case Mode::kAdaptive: return &OF_OP("adaptive_avg_pool2d_backward");
    case Mode::kNearest: return &OF_OP("upsample_nearest2d_backward");
    case Mode::kBilinear: return &OF_OP("upsample_bilinear2d_backward");
  }
  return nullptr;
}
const OpDef* forward_op(Mode m) {
  switch (m) {
    case Mode::kAvg: return &OF_OP("avg_pool2d");
    case Mode::kAdaptive: return &OF_OP("adaptive_avg_pool2d");
    case Mode::kNearest: return &OF_OP("upsample_nearest2d");
    case Mode::kBilinear: return &OF_OP("upsample_bilinear2d");
  }
  return nullptr;
}

template <Mode M> TensorList resample_vjp(const VjpCtx& c, const TensorList& g) {
  Attrs a = c.attrs();
  a.values.push_back(c.input_sizes(0).dims());
  return {dispatch1(*backward_op(M), {g[0]}, std::move(a))};
}
template <Mode M> TensorList resample_backward_vjp(const VjpCtx& c, const TensorList& g) {
  Attrs a = c.attrs();
  a.values.pop_back();
  return {dispatch1(*forward_op(M), {g[0]}, std::move(a))};
}

// ---------------------------------------------------------------- wrapper helpers

void check_defined(const char* op, const Tensor& t, const char* what) {
  if (!t.defined()) fail("[{}] {} is undefined", op, what);
}

// Calls f on the (widened, batched) input and restores the rank and dtype of the result.
template <class F> Tensor on_batched(const char* op, const Tensor& input, F&& f) {
  check_defined(op, input, "input");
  check_float(op, input, "input");
  const Tensor x = batched(op, input, 2);
  Tensor y = f(widen(x));
  if (is_half(input.dtype())) y = y.to(input.dtype());
  return input.dim() == 3 ? y.squeeze(0) : y;
}

Tensor conv2d_impl(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const ConvParams& p, bool transposed, bool one_d) {
  check_defined(op, input, "input");
  check_defined(op, weight, "weight");
  check_float(op, input, "input");
  const int64_t sp = one_d ? 1 : 2;
  const bool unbatched = input.dim() == sp + 1;
  Tensor x = batched(op, input, sp), w = weight;
  if (one_d) {
    x = x.dim() == 3 ? x.unsqueeze(2) : x;
    if (w.dim() == 3) w = w.unsqueeze(2);
    else fail("[{}] expected a 3-D weight, got shape {}", op, shape_str(w.sizes()));
  }
  conv_geom(op, x, w, &bias, p, transposed, one_d);  // errors before anything runs
  const ScalarType dt = input.dtype();
  Attrs attrs = transposed ? Attrs{p.stride, p.padding, p.output_padding, p.groups, p.dilation}
                           : Attrs{p.stride, p.padding, p.dilation, p.groups};
  Tensor y = dispatch1((transposed ? OF_OP("conv_transpose2d") : OF_OP("conv2d")),
                       {widen(x), widen(w), widen(bias)}, std::move(attrs));
  if (is_half(dt)) y = y.to(dt);
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
  if (padding == "valid") return conv2d_impl(op, input, weight, bias, p, false, sp == 1);
  if (padding != "same")
    fail("[{}] padding must be 'valid' or 'same' (or integers), got '{}'", op, padding);
  for (int64_t s : p.stride)
    if (s != 1) fail("[{}] padding='same' is not supported for strided convolutions (stride {})",
                     op, vals(expand_param(stride, sp, op, "stride")));
  if (weight.dim() != sp + 2)
    fail("[{}] expected a {}-D weight, got shape {}", op, sp + 2, shape_str(weight.sizes()));
  DimVector extra;  // pad() order: last dim first
  bool asym = false;
  for (int64_t d = sp - 1; d >= 0; --d) {
    const int64_t dil = p.dilation[size_t(d + 2 - sp)];
    const int64_t total = dil * (weight.size(2 + d) - 1);
    p.padding[size_t(d + 2 - sp)] = total / 2;
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
  return conv2d_impl(op, x, weight, bias, p, false, sp == 1);
}

}  // namespace

void register_conv_ops() {
  register_op({.name = "conv2d", .attr_names = {"stride", "padding", "dilation",
                                                           "groups"},
                          .infer_meta = conv2d_meta, .cpu = conv2d_cpu, .vjp = conv2d_vjp,
                          .save_inputs = 3,
                 .contiguous_inputs = ~0u});
  register_op(
      {.name = "conv_transpose2d",
       .attr_names = {"stride", "padding", "output_padding", "groups", "dilation"},
       .infer_meta = conv_transpose2d_meta, .cpu = conv_transpose2d_cpu,
       .vjp = conv_transpose2d_vjp, .save_inputs = 3, .contiguous_inputs = ~0u});
  register_op(
      {.name = "conv2d_backward_weight",
       .attr_names = {"weight_size", "stride", "padding", "dilation", "groups"},
       .infer_meta = conv2d_backward_weight_meta, .cpu = conv2d_backward_weight_cpu,
       .vjp = conv2d_backward_weight_vjp, .save_inputs = 3, .contiguous_inputs = ~0u});
  register_op(
      {.name = "max_pool2d_with_indices",
       .attr_names = {"kernel_size", "stride", "padding", "dilation", "ceil_mode"},
       .infer_meta = max_pool2d_meta, .cpu = max_pool2d_cpu, .vjp = max_pool2d_vjp,
       .save_outputs = 2, .contiguous_inputs = ~0u});
  const std::vector<std::string> avg_attrs = {"kernel_size", "stride", "padding", "ceil_mode",
                                              "count_include_pad", "divisor_override"};
  auto with_size = [](std::vector<std::string> v) {
    v.push_back("input_size");
    return v;
  };
  register_op({.name = "avg_pool2d", .attr_names = avg_attrs,
                              .infer_meta = resample_meta<Mode::kAvg>,
                              .cpu = resample_cpu<Mode::kAvg>,
                              .vjp = resample_vjp<Mode::kAvg>,
                 .contiguous_inputs = ~0u});
  register_op({.name = "avg_pool2d_backward",
                                       .attr_names = with_size(avg_attrs),
                                       .infer_meta = resample_backward_meta<Mode::kAvg>,
                                       .cpu = resample_backward_cpu<Mode::kAvg>,
                                       .vjp = resample_backward_vjp<Mode::kAvg>,
                 .contiguous_inputs = ~0u});
  register_op({.name = "adaptive_avg_pool2d", .attr_names = {"output_size"},
                                       .infer_meta = resample_meta<Mode::kAdaptive>,
                                       .cpu = resample_cpu<Mode::kAdaptive>,
                                       .vjp = resample_vjp<Mode::kAdaptive>,
                 .contiguous_inputs = ~0u});
  register_op({.name = "adaptive_avg_pool2d_backward",
                   .attr_names = {"output_size", "input_size"},
                   .infer_meta = resample_backward_meta<Mode::kAdaptive>,
                   .cpu = resample_backward_cpu<Mode::kAdaptive>,
                   .vjp = resample_backward_vjp<Mode::kAdaptive>,
                 .contiguous_inputs = ~0u});
  register_op({.name = "upsample_nearest2d",
                                      .attr_names = {"output_size", "scales_h", "scales_w"},
                                      .infer_meta = resample_meta<Mode::kNearest>,
                                      .cpu = resample_cpu<Mode::kNearest>,
                                      .vjp = resample_vjp<Mode::kNearest>,
                 .contiguous_inputs = ~0u});
  register_op({.name = "upsample_nearest2d_backward",
                   .attr_names = {"output_size", "scales_h", "scales_w", "input_size"},
                   .infer_meta = resample_backward_meta<Mode::kNearest>,
                   .cpu = resample_backward_cpu<Mode::kNearest>,
                   .vjp = resample_backward_vjp<Mode::kNearest>,
                 .contiguous_inputs = ~0u});
  register_op({.name = "upsample_bilinear2d",
                   .attr_names = {"output_size", "align_corners", "scales_h", "scales_w"},
                   .infer_meta = resample_meta<Mode::kBilinear>,
                   .cpu = resample_cpu<Mode::kBilinear>,
                   .vjp = resample_vjp<Mode::kBilinear>,
                 .contiguous_inputs = ~0u});
  register_op({.name = "upsample_bilinear2d_backward",
                   .attr_names = {"output_size", "align_corners", "scales_h", "scales_w", "input_size"},
                   .infer_meta = resample_backward_meta<Mode::kBilinear>,
                   .cpu = resample_backward_cpu<Mode::kBilinear>,
                   .vjp = resample_backward_vjp<Mode::kBilinear>,
                 .contiguous_inputs = ~0u});
}

// ---------------------------------------------------------------- public functions

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv2d_impl("conv2d", input, weight, bias,
                     make_params("conv2d", 2, stride, padding, dilation, groups), false, false);
}
Tensor conv2d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv2d_impl("conv1d", input, weight, bias,
                     make_params("conv1d", 1, stride, padding, dilation, groups), false, true);
}
Tensor conv1d_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation,
                      int64_t groups) {
  return conv_padding_mode("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                        int64_t groups, IntArrayRef dilation) {
  return conv2d_impl(
      "conv_transpose2d", input, weight, bias,
      make_params("conv_transpose2d", 2, stride, padding, dilation, groups, output_padding), true,
      false);
}

namespace {
// max_pool2d and max_pool2d_with_indices; `op` is the name the caller's errors carry.
std::tuple<Tensor, Tensor> max_pool_impl(const char* op, const Tensor& input,
                                         IntArrayRef kernel_size, IntArrayRef stride,
                                         IntArrayRef padding, IntArrayRef dilation,
                                         bool ceil_mode) {
  const DimVector k = expand_param(kernel_size, 2, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 2, op, "stride");
  const DimVector p = expand_param(padding, 2, op, "padding");
  const DimVector d = expand_param(dilation, 2, op, "dilation");
  check_defined(op, input, "input");
  check_float(op, input, "input");
  const Tensor x = batched(op, input, 2);
  pool_geom(op, x, k, s, p, d, ceil_mode);
  TensorList r = dispatch(OF_OP("max_pool2d_with_indices"), {widen(x)}, {k, s, p, d, ceil_mode});
  Tensor y = is_half(input.dtype()) ? r[0].to(input.dtype()) : r[0];
  Tensor idx = r[1];
  if (input.dim() == 3) {
    y = y.squeeze(0);
    idx = idx.squeeze(0);
  }
  return {y, idx};
}
}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return max_pool_impl("max_pool2d_with_indices", input, kernel_size, stride, padding, dilation,
                       ceil_mode);
}
Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_impl("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  const DimVector k = expand_param(kernel_size, 2, op, "kernel_size");
  const DimVector s = stride.empty() ? k : expand_param(stride, 2, op, "stride");
  const DimVector p = expand_param(padding, 2, op, "padding");
  if (divisor_override && *divisor_override <= 0)
    fail("[{}] divisor_override must be positive, got {}", op, *divisor_override);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a{k, s, p, ceil_mode, count_include_pad, divisor_override.value_or(0)};
    make_resample(Mode::kAvg, x.sizes(), a, op);
    return dispatch1(OF_OP("avg_pool2d"), {x}, std::move(a));
  });
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a{os};
    make_resample(Mode::kAdaptive, x.sizes(), a, op);
    return dispatch1(OF_OP("adaptive_avg_pool2d"), {x}, std::move(a));
  });
}

namespace {
double scale_value(const char* op, const char* name, std::optional<double> s) {
  if (!s) return 0.0;
  if (!(*s > 0) || !std::isfinite(*s)) fail("[{}] {} must be positive and finite, got {}", op, name, *s);
  return *s;
}
}  // namespace

Tensor upsample_nearest2d(const Tensor& input, IntArrayRef output_size,
                          std::optional<double> scales_h, std::optional<double> scales_w) {
  const char* op = "upsample_nearest2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  const double sh = scale_value(op, "scales_h", scales_h), sw = scale_value(op, "scales_w", scales_w);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a{os, sh, sw};
    make_resample(Mode::kNearest, x.sizes(), a, op);
    return dispatch1(OF_OP("upsample_nearest2d"), {x}, std::move(a));
  });
}

Tensor upsample_bilinear2d(const Tensor& input, IntArrayRef output_size, bool align_corners,
                           std::optional<double> scales_h, std::optional<double> scales_w) {
  const char* op = "upsample_bilinear2d";
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  const double sh = scale_value(op, "scales_h", scales_h), sw = scale_value(op, "scales_w", scales_w);
  return on_batched(op, input, [&](const Tensor& x) {
    Attrs a{os, align_corners, sh, sw};
    make_resample(Mode::kBilinear, x.sizes(), a, op);
    return dispatch1(OF_OP("upsample_bilinear2d"), {x}, std::move(a));
  });
}

}  // namespace oneflow

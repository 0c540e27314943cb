// conv.cpp: the CPU kernels of the convolution family (conv2d/3d, conv_transpose2d/3d and the
// weight gradients); their meta, VJPs and registration are in ops/nn_conv.cpp, the geometry
// they share with it in ops/conv_geom.h.
// NOTE [Conv lowering]: conv2d runs im2col + GEMM per image (OpenBLAS), conv_transpose2d is
// conv2d's input-gradient (GEMM W^T * x, then col2im), and conv2d_backward_weight is the
// weight-gradient (sum over images of g * col^T). Images are split into parts, one per pool
// thread, each running single-threaded BLAS (per-part weight-gradient buffers are summed in
// part order, so results depend only on the thread count); a batch smaller than the thread
// count runs its images in turn with multi-threaded BLAS instead. The 3-D kernels are the same
// three over a depth axis (im2col is vol2col; a 2-D geometry has unit depth). The kernels run
// after infer_meta validated the call (NOTE [Conv geometry]): they only compute.
#include "cpu/conv.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/blas.h"
#include "kernel_support.h"
#include "ops/conv_common.h"
#include "ops/conv_geom.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace conv_detail;
namespace {

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
// (The ceilings without `a + s - 1`: a stride near INT64_MAX, which the geometry accepts, would
// overflow it; fuzz_ops, tests/fuzz/regressions/ops_conv_stride_max.bin.)
inline void valid_range(int64_t off, int64_t s, int64_t in, int64_t out, int64_t& o0, int64_t& o1) {
  auto ceil_div = [s](int64_t a) { return a / s + (a % s != 0 ? 1 : 0); };  // a > 0
  o0 = off >= 0 ? 0 : ceil_div(-off);
  o1 = in - off > 0 ? ceil_div(in - off) : 0;
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
    SerialBlas serial;
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

// ---------------------------------------------------------------- the kernels

// conv2d / conv3d (x, w, bias?)
template <int Sp> void conv_kernel(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]), w = kernel_contiguous(k.inputs[1]);
  const Tensor b = k.inputs[2].defined() ? kernel_contiguous(k.inputs[2]) : Tensor();
  if (k.outputs[0].numel() == 0) return;
  const Geom g = conv_geometry(x.sizes(), w.sizes(), conv_params(k.attrs, false), false);
  dispatch_f(x.dtype(), conv_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    conv_forward<T>(x.data_ptr<T>(), w.data_ptr<T>(), b.defined() ? b.data_ptr<T>() : nullptr,
                    k.outputs[0].data_ptr<T>(), g);
  });
}

// conv_transpose2d / 3d (x, w, bias?): conv's input-adjoint, plus the bias
template <int Sp> void conv_transpose_kernel(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]), w = kernel_contiguous(k.inputs[1]);
  const Tensor b = k.inputs[2].defined() ? kernel_contiguous(k.inputs[2]) : Tensor();
  if (k.outputs[0].numel() == 0) return;
  const Geom g = conv_geometry(x.sizes(), w.sizes(), conv_params(k.attrs, true), true);
  dispatch_f(x.dtype(), conv_t_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    T* y = k.outputs[0].data_ptr<T>();
    conv_backward_input<T>(x.data_ptr<T>(), w.data_ptr<T>(), y, g);
    if (b.defined()) add_bias<T>(y, b.data_ptr<T>(), g.N, g.C, g.D * g.H * g.W);
  });
}

// conv2d/3d_backward_weight (grad_output, input; ..., weight_size)
template <int Sp> void conv_backward_weight_kernel(const KernelArgs& k) {
  const Tensor dy = kernel_contiguous(k.inputs[0]), x = kernel_contiguous(k.inputs[1]);
  if (k.outputs[0].numel() == 0) return;
  const Geom g = conv_geometry(x.sizes(), ConvWeightGradAttrs::get<"weight_size">(k.attrs),
                               conv_params(k.attrs, false), false);
  dispatch_f(x.dtype(), conv_bw_name<Sp>(), [&](auto z) {
    using T = decltype(z);
    conv_backward_weight<T>(dy.data_ptr<T>(), x.data_ptr<T>(), k.outputs[0].data_ptr<T>(), g);
  });
}

}  // namespace

void conv2d(const KernelArgs& k) { conv_kernel<2>(k); }
void conv3d(const KernelArgs& k) { conv_kernel<3>(k); }
void conv_transpose2d(const KernelArgs& k) { conv_transpose_kernel<2>(k); }
void conv_transpose3d(const KernelArgs& k) { conv_transpose_kernel<3>(k); }
void conv2d_backward_weight(const KernelArgs& k) { conv_backward_weight_kernel<2>(k); }
void conv3d_backward_weight(const KernelArgs& k) { conv_backward_weight_kernel<3>(k); }

}  // namespace oneflow::cpu

// nn_extra_common.h: what the im2col / col2im and CTC loss ops (ops/nn_extra.cpp) and their CPU
// kernels (cpu/nn_extra.cpp) share: the input checks and the geometry both compute (ColGeom,
// CtcGeom).
#pragma once
#include <string>
#include <utility>

#include "kernel_support.h"
#include "ops/checks.h"
#include "ops/nn_attrs.h"

namespace oneflow::nn_extra_detail {
using nn_detail::Col2imAttrs;
using nn_detail::CtcAttrs;
using nn_detail::Im2colAttrs;

inline std::string vals(const DimVector& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// ---------------------------------------------------------------- im2col / col2im geometry

struct ColGeom {
  int64_t N, C, H, W, kh, kw, dh, dw, ph, pw, sh, sw, OH, OW;
  int64_t L() const { return OH * OW; }
};

// The window of im2col or col2im (S: its schema). H, W: the image size.
template <class S>
ColGeom col_geom(const char* op, int64_t N, int64_t C, int64_t H, int64_t W, const Attrs& a) {
  const DimVector& k = S::template get<"kernel_size">(a);
  const DimVector& d = S::template get<"dilation">(a);
  const DimVector& p = S::template get<"padding">(a);
  const DimVector& s = S::template get<"stride">(a);
  if (k.size() != 2 || d.size() != 2 || p.size() != 2 || s.size() != 2)
    fail(
        "[{}] expected kernel_size, dilation, padding and stride of 2 values each, got {}, {}, "
        "{} and {}",
        op, vals(k), vals(d), vals(p), vals(s));
  if (k[0] <= 0 || k[1] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
  if (d[0] <= 0 || d[1] <= 0) fail("[{}] dilation must be positive, got {}", op, vals(d));
  if (p[0] < 0 || p[1] < 0) fail("[{}] padding must be non-negative, got {}", op, vals(p));
  if (s[0] <= 0 || s[1] <= 0) fail("[{}] stride must be positive, got {}", op, vals(s));
  ColGeom g{N, C, H, W, k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1], 0, 0};
  // overflow-checked: the attrs of a direct dispatch may hold any values (fuzz_ops)
  auto extent = [&](int64_t n, int64_t pad, int64_t dil, int64_t ker) {
    int64_t twice, padded, reach, e;
    if (__builtin_mul_overflow(pad, 2, &twice) || __builtin_add_overflow(n, twice, &padded) ||
        __builtin_mul_overflow(dil, ker - 1, &reach) || __builtin_sub_overflow(padded, reach, &e))
      fail("[{}] kernel_size {}, dilation {} and padding {} overflow the sizes", op, vals(k),
           vals(d), vals(p));
    return e - 1;
  };
  const int64_t eh = extent(H, g.ph, g.dh, g.kh), ew = extent(W, g.pw, g.dw, g.kw);
  if (eh < 0 || ew < 0)
    fail(
        "[{}] the dilated kernel {} does not fit the padded input of size ({}, {}) "
        "(padding {}, dilation {})",
        op, vals(k), H + 2 * g.ph, W + 2 * g.pw, vals(p), vals(d));
  g.OH = eh / g.sh + 1;
  g.OW = ew / g.sw + 1;
  // the products the metas and the loops form
  checked_mul(checked_mul(C, checked_mul(g.kh, g.kw, op, "the kernel size"), op,
                          "channels times the kernel size"),
              checked_mul(g.OH, g.OW, op, "the number of sliding blocks"), op,
              "the column matrix size");
  return g;
}

inline void check_floating(const char* op, const Tensor& x, const char* what) {
  check_defined(op, x, what);
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64)
    fail("[{}] expected a float32 or float64 {}, got {} (shape {})", op, what,
         dtype_name(x.dtype()), shape_str(x.sizes()));
}

inline ColGeom im2col_geom(const Tensor& x, const Attrs& a) {
  const char* op = "im2col";
  check_floating(op, x, "input");
  if (x.dim() != 4)
    fail("[{}] expected a 4-D input [N, C, H, W], got shape {}", op, shape_str(x.sizes()));
  return col_geom<Im2colAttrs>(op, x.size(0), x.size(1), x.size(2), x.size(3), a);
}

// attrs (col2im): output_size, kernel_size, dilation, padding, stride.
inline ColGeom col2im_geom(const Tensor& x, const Attrs& a) {
  const char* op = "col2im";
  check_floating(op, x, "input");
  if (x.dim() != 3)
    fail("[{}] expected a 3-D input [N, C*kh*kw, L], got shape {}", op, shape_str(x.sizes()));
  using A = Col2imAttrs;
  const DimVector& os = A::get<"output_size">(a);
  const DimVector& k = A::get<"kernel_size">(a);
  if (os.size() != 2 || k.size() != 2)
    fail("[{}] expected output_size and kernel_size of 2 values each, got {} and {}", op, vals(os),
         vals(k));
  if (os[0] <= 0 || os[1] <= 0) fail("[{}] output_size must be positive, got {}", op, vals(os));
  if (k[0] <= 0 || k[1] <= 0) fail("[{}] kernel_size must be positive, got {}", op, vals(k));
  const int64_t kk = checked_mul(k[0], k[1], op, "the kernel size");
  if (x.size(1) % kk != 0)
    fail(
        "[{}] expected size of input's dimension 1 ({}, input shape {}) to be divisible by the "
        "product of kernel_size {} = {}",
        op, x.size(1), shape_str(x.sizes()), vals(k), kk);
  const ColGeom g = col_geom<A>(op, x.size(0), x.size(1) / kk, os[0], os[1], a);
  if (x.size(2) != g.L())
    fail(
        "[{}] given output_size={}, kernel_size={}, dilation={}, padding={}, stride={}, "
        "expected size of input's dimension 2 to match the calculated number of sliding "
        "blocks {} * {} = {}, but got input.size(2)={} (input shape {})",
        op, vals(os), vals(k), vals(A::get<"dilation">(a)), vals(A::get<"padding">(a)),
        vals(A::get<"stride">(a)), g.OH, g.OW, g.L(), x.size(2), shape_str(x.sizes()));
  return g;
}

// ---------------------------------------------------------------- ctc_loss

// Inputs: log_probs [T, N, C] (float), targets [N, S] or 1-D concatenated (int64),
// input_lengths [N], target_lengths [N] (int64). Attrs: blank, zero_infinity.
struct CtcGeom {
  int64_t T, N, C, S;  // S: the most target labels a sample can have
  bool concat;
};

inline CtcGeom ctc_geom(const char* op, const TensorList& in, int64_t blank) {
  const Tensor &lp = in[0], &tg = in[1], &il = in[2], &tl = in[3];
  check_floating(op, lp, "log_probs");
  if (lp.dim() != 3)
    fail("[{}] expected log_probs of shape [T, N, C], got {}", op, shape_str(lp.sizes()));
  const int64_t T = lp.size(0), N = lp.size(1), C = lp.size(2);
  for (auto [t, what] :
       {std::pair{&tg, "targets"}, {&il, "input_lengths"}, {&tl, "target_lengths"}})
    if (!t->defined() || t->dtype() != kInt64)
      fail("[{}] expected {} to be an int64 tensor, got {}", op, what,
           t->defined() ? dtype_name(t->dtype()) : "an undefined tensor");
  if (il.dim() != 1 || il.size(0) != N || tl.dim() != 1 || tl.size(0) != N)
    fail(
        "[{}] expected input_lengths and target_lengths of shape [N] = ({}), got {} and {} "
        "(log_probs {})",
        op, N, shape_str(il.sizes()), shape_str(tl.sizes()), shape_str(lp.sizes()));
  if (!(tg.dim() == 1 || (tg.dim() == 2 && tg.size(0) == N)))
    fail("[{}] expected targets of shape [N, S] with N = {} or 1-D concatenated targets, got {}",
         op, N, shape_str(tg.sizes()));
  if (blank < 0 || blank >= C)
    fail("[{}] blank {} must be in [0, {}) (log_probs {})", op, blank, C, shape_str(lp.sizes()));
  return {T, N, C, tg.dim() == 2 ? tg.size(1) : tg.numel(), tg.dim() == 1};
}

}  // namespace oneflow::nn_extra_detail

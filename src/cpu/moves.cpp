// moves.cpp: the CPU kernels of the shape moves (cat, pad, pad_backward, tril, triu, flip, roll,
// repeat); their meta, VJPs and registration are in ops/moves.cpp, what they share with it (and
// with cpu/index.cpp) in ops/index_common.h. Non-constant pads, flip, roll and repeat copy
// through per-dim index maps (mapped_copy); pad_backward adds back through them (mapped_add).
#include "cpu/moves.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernel_support.h"
#include "ops/index_common.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace index_detail;
namespace {

// Per-dim source-index maps: out index i along dim d reads x index maps[d][i] (empty: identity).
using Maps = std::vector<std::vector<int64_t>>;

// out (contiguous) = x gathered through per-dim maps.
template <class T> void mapped_copy(const Tensor& out, const Tensor& x, const Maps& maps) {
  const int64_t nd = out.dim();
  if (out.numel() == 0) return;
  T* op = static_cast<T*>(out.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  if (nd == 0) {
    *op = *xp;
    return;
  }
  IntArrayRef shape = out.sizes(), xs = x.strides();
  const int64_t last = shape[nd - 1], rows = out.numel() / last, xsl = xs[nd - 1];
  const std::vector<int64_t>& ml = maps[nd - 1];
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / last), [&](int64_t b, int64_t e) {
    DimVector idx(size_t(nd - 1), 0);
    int64_t r = b;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = r % shape[d];
      r /= shape[d];
    }
    for (int64_t row = b; row < e; ++row) {
      int64_t xoff = 0;
      for (int64_t d = 0; d < nd - 1; ++d)
        xoff += (maps[d].empty() ? idx[d] : maps[d][idx[d]]) * xs[d];
      T* o = op + row * last;
      const T* xr = xp + xoff;
      if (!ml.empty()) {
        for (int64_t j = 0; j < last; ++j) o[j] = xr[ml[j] * xsl];
      } else if (xsl == 1) {
        std::copy(xr, xr + last, o);
      } else {
        for (int64_t j = 0; j < last; ++j) o[j] = xr[j * xsl];
      }
      for (int64_t d = nd - 2; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  });
}

// gin (contiguous, zeroed, shape of x) += g scattered back through the maps of mapped_copy.
// Parallel only over the leading identity-mapped dims, so accumulation order is fixed.
template <class T> void mapped_add(const Tensor& gin, const Tensor& g, const Maps& maps) {
  const int64_t nd = g.dim();
  if (g.numel() == 0) return;
  T* ip = static_cast<T*>(gin.data_ptr());
  const T* gp = static_cast<const T*>(g.data_ptr());
  if (nd == 0) {
    *ip = T(compute_t<T>(*ip) + compute_t<T>(*gp));
    return;
  }
  IntArrayRef shape = g.sizes(), gs = g.strides(), is = gin.strides();
  int64_t p = 0;
  while (p < nd - 1 && maps[p].empty()) ++p;
  const int64_t outer = prod_of(shape, 0, size_t(p));
  const int64_t rpo = prod_of(shape, size_t(p), size_t(nd - 1));
  const int64_t last = shape[nd - 1];
  const std::vector<int64_t>& ml = maps[nd - 1];
  parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, rpo * last)),
               [&](int64_t ob, int64_t oe) {
                 const int64_t b = ob * rpo, e = oe * rpo;
                 DimVector idx(size_t(nd - 1), 0);
                 int64_t r = b;
                 for (int64_t d = nd - 2; d >= 0; --d) {
                   idx[d] = r % shape[d];
                   r /= shape[d];
                 }
                 for (int64_t row = b; row < e; ++row) {
                   int64_t ioff = 0, goff = 0;
                   for (int64_t d = 0; d < nd - 1; ++d) {
                     ioff += (maps[d].empty() ? idx[d] : maps[d][idx[d]]) * is[d];
                     goff += idx[d] * gs[d];
                   }
                   T* ir = ip + ioff;
                   const T* gr = gp + goff;
                   for (int64_t j = 0; j < last; ++j) {
                     T& dst = ir[ml.empty() ? j : ml[j]];
                     dst = T(compute_t<T>(dst) + compute_t<T>(gr[j * gs[nd - 1]]));
                   }
                   for (int64_t d = nd - 2; d >= 0; --d) {
                     if (++idx[d] < shape[d]) break;
                     idx[d] = 0;
                   }
                 }
               });
}

Maps pad_maps(IntArrayRef in, const DimVector& pads, PadMode mode) {
  const int64_t nd = int64_t(in.size()), np = int64_t(pads.size()) / 2;
  Maps maps(static_cast<size_t>(nd));
  for (int64_t p = 0; p < np; ++p) {
    const int64_t d = nd - 1 - p, l = pads[2 * p], r = pads[2 * p + 1], n = in[d];
    if (l == 0 && r == 0) continue;
    auto& m = maps[d];
    m.resize(size_t(n + l + r));
    for (int64_t i = 0; i < n + l + r; ++i) {
      int64_t j = i - l;
      switch (mode) {
        case PadMode::kReflect:
          if (j < 0) j = -j;
          if (j >= n) j = 2 * (n - 1) - j;
          break;
        case PadMode::kReplicate:
          j = std::clamp<int64_t>(j, 0, n - 1);
          break;
        case PadMode::kCircular:
          j = ((j % n) + n) % n;
          break;
        case PadMode::kConstant:
          break;
      }
      m[i] = j;
    }
  }
  return maps;
}

template <bool Lower> void tri_cpu(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t diag = TriAttrs::get<"diagonal">(k.attrs);
  const int64_t nd = out.dim(), R = out.sizes()[nd - 2], C = out.sizes()[nd - 1];
  DimVector shape = out.sizes().dims();
  std::array<DimVector, 2> st{out.strides().dims(), k.inputs[0].strides().dims()};
  // iterate [batch..., R] rows by folding C into the run
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    T* op = static_cast<T*>(out.data_ptr());
    const T* xp = static_cast<const T*>(k.inputs[0].data_ptr());
    const int64_t rows = out.numel() / std::max<int64_t>(C, 1);
    if (out.numel() == 0) return;
    const int64_t xr = st[1][nd - 2], xc = st[1][nd - 1];
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / C), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        // batch offset of x from the row's batch index
        int64_t rem = row / R, xoff = 0;
        for (int64_t d = nd - 3; d >= 0; --d) {
          xoff += (rem % shape[d]) * st[1][d];
          rem /= shape[d];
        }
        const int64_t i = row % R;
        const T* xrow = xp + xoff + i * xr;
        T* o = op + row * C;
        for (int64_t j = 0; j < C; ++j) {
          const bool keep = Lower ? (j - i <= diag) : (j - i >= diag);
          o[j] = keep ? xrow[j * xc] : T(compute_t<T>(0));
        }
      }
    });
  });
}

}  // namespace

// ---------------------------------------------------------------- cat

void cat(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(k.attrs), out.dim(), "cat");
  int64_t off = 0;
  for (const Tensor& t : k.inputs) {
    if (t.numel() > 0) {
      Tensor v =
          make_view(out, t.sizes(), out.strides(), out.storage_offset() + off * out.strides()[d]);
      copy_any(v, t);
    }
    off += t.sizes()[d];
  }
}

// ---------------------------------------------------------------- pad

void pad(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &out = k.outputs[0];
  const DimVector& pads = PadAttrs::get<"pad">(k.attrs);
  const PadMode mode = pad_mode(PadAttrs::get<"mode">(k.attrs));
  // an empty output has nothing to map: its other dims may be huge (fuzz_ops: the index maps
  // of a [0, 2^50] output were allocated)
  if (out.numel() == 0) return;
  if (mode != PadMode::kConstant) {
    Maps maps = pad_maps(x.sizes(), pads, mode);
    dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(out, x, maps); });
    return;
  }
  fill_any(out, PadAttrs::get<"value">(k.attrs));
  const int64_t nd = x.dim(), np = int64_t(pads.size()) / 2;
  DimVector len = x.sizes().dims();
  int64_t xoff = x.storage_offset(), ooff = out.storage_offset();
  for (int64_t p = 0; p < np; ++p) {
    const int64_t d = nd - 1 - p, l = pads[2 * p], r = pads[2 * p + 1];
    len[d] = x.sizes()[d] + std::min<int64_t>(l, 0) + std::min<int64_t>(r, 0);
    if (len[d] <= 0) return;
    xoff += std::max<int64_t>(-l, 0) * x.strides()[d];
    ooff += std::max<int64_t>(l, 0) * out.strides()[d];
  }
  if (prod_of(len) == 0) return;
  Tensor src = make_view(x, len, x.strides(), xoff);
  Tensor dst = make_view(out, len, out.strides(), ooff);
  copy_any(dst, src);
}
void pad_backward(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  fill_any(out, 0.0);
  if (out.numel() == 0 || k.inputs[0].numel() == 0) return;  // nothing to map (see pad)
  Maps maps = pad_maps(out.sizes(), PadBackwardAttrs::get<"pad">(k.attrs),
                       pad_mode(PadBackwardAttrs::get<"mode">(k.attrs)));
  dispatch_dtype(out.dtype(), [&](auto z) { mapped_add<decltype(z)>(out, k.inputs[0], maps); });
}

// ---------------------------------------------------------------- tril / triu

void tril(const KernelArgs& k) { tri_cpu<true>(k); }
void triu(const KernelArgs& k) { tri_cpu<false>(k); }

// ---------------------------------------------------------------- flip / roll / repeat

void flip(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  Maps maps(size_t(x.dim()));
  if (x.dim() > 0)
    for (int64_t d : flip_dims(x, DimsAttrs::get<"dims">(k.attrs))) {
      const int64_t n = x.sizes()[d];
      maps[d].resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) maps[d][i] = n - 1 - i;
    }
  dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(k.outputs[0], x, maps); });
}
void roll(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const DimVector &shifts = RollAttrs::get<"shifts">(k.attrs),
                  &dims = RollAttrs::get<"dims">(k.attrs);
  // shifts summed modulo each size: any int64 shifts (a loaded graph's) cannot overflow
  DimVector total(size_t(std::max<int64_t>(x.dim(), 1)), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "roll"), n = x.dim() ? x.sizes()[d] : 1;
    if (n) total[d] = (total[d] + shifts[i] % n) % n;
  }
  Maps maps(size_t(x.dim()));
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t n = x.sizes()[d];
    if (n == 0 || total[d] == 0) continue;
    const int64_t s = (total[d] + n) % n;
    maps[d].resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) maps[d][i] = (i - s + n) % n;
  }
  dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(k.outputs[0], x, maps); });
}
void repeat(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &out = k.outputs[0];
  if (out.numel() == 0) return;  // nothing to map (its other dims may be huge: fuzz_ops)
  const int64_t nd = out.dim(), lead = nd - x.dim();
  DimVector xs(size_t(nd), 0), xsz(size_t(nd), 1);
  for (int64_t d = lead; d < nd; ++d) {
    xs[d] = x.strides()[d - lead];
    xsz[d] = x.sizes()[d - lead];
  }
  Tensor xv = make_view(x, xsz, xs, x.storage_offset());
  Maps maps(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) {
    if (out.sizes()[d] == xsz[d]) continue;
    maps[d].resize(size_t(out.sizes()[d]));
    for (int64_t i = 0; i < out.sizes()[d]; ++i) maps[d][i] = i % xsz[d];
  }
  dispatch_dtype(x.dtype(), [&](auto z) { mapped_copy<decltype(z)>(out, xv, maps); });
}

}  // namespace oneflow::cpu

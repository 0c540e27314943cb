// reduce.h (internal): the CPU reduction engine shared by sum/mean/prod/max/min/all/any/norm...
// NOTE [Reductions]: reduced dims are ordered by decreasing stride (order-free reductions may
// walk memory in storage order), then one of three loops runs:
//   row    -- the reduced block is one contiguous run: a vectorizable loop per output (also
//             used run by run when only the innermost reduced dim is contiguous: sum(0, 2, 3)
//             of NCHW);
//   column -- the innermost kept dim has stride 1: outputs are updated in vector-wide blocks
//             while walking the reduced dims (sum over dim 0 of a row-major matrix);
//   general-- nested strided loops.
// Parallelism splits outputs; a single output (full reduction) splits its contiguous run into
// fixed-size blocks merged in order, so results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "kernel_support.h"
#include "thread_pool.h"

namespace oneflow::cpu {

// Op policy: using Acc; static Acc init(); static Acc step(Acc, C x); static Acc merge(Acc, Acc);
// static Out finish(Acc, int64_t count).
template <class T, class Out, class Op>
void reduce_kernel(const Tensor& x, IntArrayRef reduce_dims, const Tensor& out) {
  using C = compute_t<T>;
  using Acc = typename Op::Acc;
  const int64_t nd = x.dim();
  std::vector<bool> is_red(std::max<int64_t>(nd, 1), false);
  Out* o = static_cast<Out*>(out.data_ptr());
  // first: an empty input may have other sizes whose products with the strides overflow
  // (fuzz_ops), and the geometry below multiplies them
  if (x.numel() == 0) {
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = Op::finish(Op::init(), 0);
    return;
  }
  for (int64_t d : reduce_dims) is_red[d] = true;
  DimVector ksz, kst, rsz, rst;
  for (int64_t d = 0; d < nd; ++d) {
    if (x.sizes()[d] == 1) continue;
    if (is_red[d]) {
      rsz.push_back(x.sizes()[d]);
      rst.push_back(x.strides()[d]);
    } else {
      ksz.push_back(x.sizes()[d]);
      kst.push_back(x.strides()[d]);
    }
  }
  // order reduced dims by decreasing stride, then merge linear neighbours
  {
    std::vector<size_t> idx(rsz.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return rst[a] > rst[b]; });
    DimVector s2, t2;
    for (size_t i : idx) {
      if (!s2.empty() && t2.back() == rst[i] * rsz[i]) {
        s2.back() *= rsz[i];
        t2.back() = rst[i];
      } else {
        s2.push_back(rsz[i]);
        t2.push_back(rst[i]);
      }
    }
    rsz = s2;
    rst = t2;
  }
  {
    DimVector s2, t2;
    for (size_t i = 0; i < ksz.size(); ++i) {
      if (!s2.empty() && t2.back() == kst[i] * ksz[i]) {
        s2.back() *= ksz[i];
        t2.back() = kst[i];
      } else {
        s2.push_back(ksz[i]);
        t2.push_back(kst[i]);
      }
    }
    ksz = s2;
    kst = t2;
  }
  int64_t n_out = 1, n_red = 1;
  for (auto s : ksz) n_out *= s;
  for (auto s : rsz) n_red *= s;
  const T* base = static_cast<const T*>(x.data_ptr());
  // offset of output element i (kept dims in order) within x
  auto out_offset = [&](int64_t i) {
    int64_t off = 0;
    for (int64_t d = int64_t(ksz.size()) - 1; d >= 0; --d) {
      off += (i % ksz[d]) * kst[d];
      i /= ksz[d];
    }
    return off;
  };
  // reduce a contiguous run of n elements
  auto reduce_run = [&](const T* q, int64_t n) -> Acc {
    // kW independent accumulators (element i goes to a[i % kW]): the j loop becomes a few
    // vector operations without reassociating any one accumulator's sum.
    constexpr int64_t kW = 16;
    if constexpr (requires { Op::kPlainSum; } && std::is_same_v<C, float>) {
      // float sums: float lanes over blocks of up to 256 elements per lane (vector adds, no
      // conversions), each block then added into double lanes
      constexpr int64_t kB = 256 * kW;
      double a[kW] = {};
      int64_t i = 0;
      while (i + kW <= n) {
        const int64_t end = i + std::min<int64_t>(kB, (n - i) / kW * kW);
        float f[kW] = {};
        for (; i < end; i += kW)
          for (int64_t j = 0; j < kW; ++j) f[j] += C(q[i + j]);
        for (int64_t j = 0; j < kW; ++j) a[j] += double(f[j]);
      }
      for (; i < n; ++i) a[0] += double(C(q[i]));
      for (int64_t w = kW / 2; w >= 1; w /= 2)
        for (int64_t j = 0; j < w; ++j) a[j] += a[j + w];
      return Acc(a[0]);
    }
    Acc a[kW];
    for (int64_t j = 0; j < kW; ++j) a[j] = Op::init();
    int64_t i = 0;
    for (; i + kW <= n; i += kW)
      for (int64_t j = 0; j < kW; ++j) a[j] = Op::step(a[j], C(q[i + j]));
    for (; i < n; ++i) a[0] = Op::step(a[0], C(q[i]));
    for (int64_t w = kW / 2; w >= 1; w /= 2)
      for (int64_t j = 0; j < w; ++j) a[j] = Op::merge(a[j], a[j + w]);
    return a[0];
  };
  // reduce the run of reduced elements starting at p, from flat reduced index rb to re
  auto reduce_range = [&](const T* p, int64_t rb, int64_t re) -> Acc {
    Acc acc = Op::init();
    if (rsz.empty()) return Op::step(acc, C(p[0]));
    const int64_t rn = int64_t(rsz.size());
    if (rn == 1 && rst[0] == 1) return reduce_run(p + rb, re - rb);
    if (rst[rn - 1] == 1 && rsz[rn - 1] >= 16) {
      // the innermost reduced dim is contiguous: vectorized runs, merged in order
      const int64_t L = rsz[rn - 1];
      for (int64_t k = rb; k < re;) {
        const int64_t ip = k % L, len = std::min(L - ip, re - k);
        int64_t rem = k / L, off = ip;
        for (int64_t d = rn - 2; d >= 0; --d) {
          off += (rem % rsz[d]) * rst[d];
          rem /= rsz[d];
        }
        acc = Op::merge(acc, reduce_run(p + off, len));
        k += len;
      }
      return acc;
    }
    DimVector idx(rn, 0);
    int64_t rem = rb;
    for (int64_t d = rn - 1; d >= 0; --d) {
      idx[d] = rem % rsz[d];
      rem /= rsz[d];
    }
    int64_t off = 0;
    for (int64_t d = 0; d < rn; ++d) off += idx[d] * rst[d];
    for (int64_t k = rb; k < re; ++k) {
      acc = Op::step(acc, C(p[off]));
      for (int64_t d = rn - 1; d >= 0; --d) {
        off += rst[d];
        if (++idx[d] < rsz[d]) break;
        off -= rst[d] * rsz[d];
        idx[d] = 0;
      }
    }
    return acc;
  };
  const bool column = !ksz.empty() && kst.back() == 1 && !(rsz.size() == 1 && rst[0] == 1);
  if (n_out == 1) {
    // Single output: fixed blocks of the reduced range, merged in order.
    constexpr int64_t kBlock = 1 << 16;
    int64_t nb = (n_red + kBlock - 1) / kBlock;
    std::unique_ptr<Acc[]> part(new Acc[size_t(nb)]);  // not vector: Acc may be bool
    parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        part[b] = reduce_range(base, b * kBlock, std::min(n_red, (b + 1) * kBlock));
    });
    Acc acc = Op::init();
    for (int64_t b = 0; b < nb; ++b) acc = Op::merge(acc, part[b]);
    o[0] = Op::finish(acc, n_red);
  } else if (column) {
    // Outputs along the innermost kept dim are contiguous in x: update a block of them per
    // reduced position.
    const int64_t inner = ksz.back();
    const int64_t n_outer = n_out / inner;
    constexpr int64_t kW = 64;
    const int64_t nblk = (inner + kW - 1) / kW;
    parallel_for(0, n_outer * nblk,
                 std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n_red * kW)),
                 [&](int64_t b0, int64_t b1) {
                   Acc acc[kW];
                   for (int64_t b = b0; b < b1; ++b) {
                     int64_t ob = b / nblk, j0 = (b % nblk) * kW, w = std::min(kW, inner - j0);
                     const T* p = base + out_offset(ob * inner + j0);
                     for (int64_t j = 0; j < w; ++j) acc[j] = Op::init();
                     const int64_t rn = int64_t(rsz.size());
                     DimVector idx(rn, 0);
                     int64_t off = 0;
                     for (int64_t k = 0; k < n_red; ++k) {
                       const T* q = p + off;
                       for (int64_t j = 0; j < w; ++j) acc[j] = Op::step(acc[j], C(q[j]));
                       for (int64_t d = rn - 1; d >= 0; --d) {
                         off += rst[d];
                         if (++idx[d] < rsz[d]) break;
                         off -= rst[d] * rsz[d];
                         idx[d] = 0;
                       }
                     }
                     for (int64_t j = 0; j < w; ++j)
                       o[ob * inner + j0 + j] = Op::finish(acc[j], n_red);
                   }
                 });
  } else {
    parallel_for(0, n_out, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n_red)),
                 [&](int64_t b0, int64_t b1) {
                   for (int64_t i = b0; i < b1; ++i)
                     o[i] = Op::finish(reduce_range(base + out_offset(i), 0, n_red), n_red);
                 });
  }
}

// reduce_kernel with the policy Op<compute_t<T>>, its result converted to the output type O.
template <template <class> class Op, class T, class O>
void reduce_as(const Tensor& x, IntArrayRef dims, const Tensor& out) {
  struct Wrapped : Op<compute_t<T>> {
    using Base = Op<compute_t<T>>;
    // a float result into an integer output saturates (a mean of int64 extremes, fuzz_ops)
    static O finish(typename Base::Acc a, int64_t n) {
      if constexpr (std::is_integral_v<O> && !std::is_same_v<O, bool>)
        return saturate_cast<O>(Base::finish(a, n));
      else return O(compute_t<O>(Base::finish(a, n)));
    }
  };
  reduce_kernel<T, O, Wrapped>(x, dims, out);
}

}  // namespace oneflow::cpu

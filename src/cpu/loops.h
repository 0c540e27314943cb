// loops.h (internal): the CPU elementwise engine every elementwise kernel runs on.
// NOTE [Elementwise loops]: operands (output first) are broadcast to the output's shape with
// zero strides, adjacent dims that stay linear for every operand are merged, and the flat
// index range is split over the thread pool. The innermost run calls a loop specialised for
// "all contiguous" and "one operand is a scalar", which the compiler vectorises.
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernel_support.h"
#include "strided_dims.h"
#include "thread_pool.h"

namespace oneflow::cpu {

// c ? u : v by bit masks, with no branch: GCC turns a select on a data-dependent bool into a
// branch per element, which mispredicts on relu and dropout masks and on window maxima.
template <class T> inline T bit_select(bool c, T u, T v) {
  using Bits = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(Bits) == sizeof(T));
  const Bits m = Bits(Bits(0) - Bits(c));
  return std::bit_cast<T>(Bits((std::bit_cast<Bits>(u) & m) | (std::bit_cast<Bits>(v) & Bits(~m))));
}

inline constexpr int kMaxOperands = 5;

struct ElementwiseIter {
  int ntensors = 0;
  DimVector shape;                              // coalesced iteration shape (outermost first)
  std::array<DimVector, kMaxOperands> strides;  // in bytes, per operand
  std::array<char*, kMaxOperands> base{};
  std::array<int64_t, kMaxOperands> elem{};  // element size in bytes, per operand
  int64_t numel = 1;

  // out first, then inputs (each broadcastable to out's shape).
  ElementwiseIter(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
    const int64_t nd = out.dim();
    ntensors = 1 + int(inputs.size());
    shape = DimVector(out.sizes().begin(), out.sizes().end());
    numel = out.numel();
    auto fill = [&](int k, const Tensor& t) {
      base[k] = static_cast<char*>(t.data_ptr());
      const int64_t es = int64_t(t.element_size());
      elem[k] = es;
      DimVector st(nd, 0);
      const int64_t off = nd - t.dim();
      for (int64_t d = 0; d < t.dim(); ++d)
        st[off + d] = t.sizes()[d] == 1 && shape[off + d] != 1 ? 0 : t.strides()[d] * es;
      strides[k] = std::move(st);
    };
    fill(0, out);
    int k = 1;
    for (const Tensor* t : inputs) fill(k++, *t);
    reorder();
    coalesce();
  }

  // Orders dims outermost -> innermost by decreasing stride, the output deciding first, then
  // the inputs in turn (a transposed output with transposed inputs becomes one linear run).
  void reorder() {
    const int64_t nd = int64_t(shape.size());
    if (nd < 2) return;
    auto inner_first = [&](int64_t outer, int64_t inner) {  // should `outer` move inwards?
      for (int k = 0; k < ntensors; ++k) {
        const int64_t so = strides[k][outer], si = strides[k][inner];
        if (so == 0 || si == 0 || so == si) continue;
        return so < si;
      }
      return false;
    };
    DimVector perm(nd, 0);
    for (int64_t d = 0; d < nd; ++d) perm[d] = d;
    bool moved = false;
    for (int64_t i = 1; i < nd; ++i)
      for (int64_t j = i; j > 0 && inner_first(perm[j - 1], perm[j]); --j) {
        std::swap(perm[j - 1], perm[j]);
        moved = true;
      }
    if (!moved) return;
    DimVector ns(nd, 0);
    for (int64_t d = 0; d < nd; ++d) ns[d] = shape[perm[d]];
    shape = std::move(ns);
    for (int k = 0; k < ntensors; ++k) {
      DimVector st(nd, 0);
      for (int64_t d = 0; d < nd; ++d) st[d] = strides[k][perm[d]];
      strides[k] = std::move(st);
    }
  }

  // True when some operand runs across the innermost dim with a large stride but along the
  // next dim with a small one (out = a.t() + b): a row-by-row walk would touch a new cache
  // line per element of that operand, so the last two dims are walked in square tiles.
  bool wants_tiles() const {
    const int64_t nd = int64_t(shape.size());
    if (nd < 2 || shape[nd - 1] < 2 * kTile || shape[nd - 2] < 2 * kTile) return false;
    for (int k = 0; k < ntensors; ++k) {
      const int64_t si = std::abs(strides[k][nd - 1]), so = std::abs(strides[k][nd - 2]);
      if (si > 64 && so != 0 && so < si) return true;
    }
    return false;
  }

  static constexpr int64_t kTile = 64;

  void coalesce() {
    // NOTE [Merged dims]: size-1 dims dropped, neighbours linear for every operand merged
    const MergedDims m = merge_dims(
        shape.size(), size_t(ntensors), [&](size_t d) { return shape[d]; },
        [&](size_t k, size_t d) { return strides[k][d]; });
    DimVector ns;
    std::array<DimVector, kMaxOperands> nst;
    for (const MergedDim& g : m) {
      ns.push_back(g.size);
      for (int k = 0; k < ntensors; ++k) nst[k].push_back(strides[k][g.inner]);
    }
    if (ns.empty()) {
      ns.push_back(1);
      for (int k = 0; k < ntensors; ++k) nst[k].push_back(0);
    }
    shape = std::move(ns);
    for (int k = 0; k < ntensors; ++k) strides[k] = std::move(nst[k]);
  }

  // Calls inner(ptrs, inner_strides, n) for consecutive runs along the innermost dim,
  // covering flat indices [begin, end).
  template <class Inner> void run_range(int64_t begin, int64_t end, Inner& inner) const {
    const int64_t nd = int64_t(shape.size());
    const int64_t inner_n = shape[nd - 1];
    DimVector idx(nd, 0);
    int64_t rem = begin;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    std::array<char*, kMaxOperands> row;  // operand pointers at the start of the current row
    std::array<char*, kMaxOperands> ptr;
    std::array<int64_t, kMaxOperands> inner_st;
    for (int k = 0; k < ntensors; ++k) {
      inner_st[k] = strides[k][nd - 1];
      char* p = base[k];
      for (int64_t d = 0; d < nd - 1; ++d) p += idx[d] * strides[k][d];
      row[k] = p;
      ptr[k] = p + idx[nd - 1] * inner_st[k];
    }
    int64_t pos = begin;
    int64_t col = idx[nd - 1];
    for (;;) {
      int64_t n = std::min(inner_n - col, end - pos);
      inner(ptr.data(), inner_st.data(), n);
      pos += n;
      if (pos >= end) break;
      for (int64_t d = nd - 2; d >= 0; --d) {
        for (int k = 0; k < ntensors; ++k) row[k] += strides[k][d];
        if (++idx[d] < shape[d]) break;
        for (int k = 0; k < ntensors; ++k) row[k] -= strides[k][d] * shape[d];
        idx[d] = 0;
      }
      col = 0;
      for (int k = 0; k < ntensors; ++k) ptr[k] = row[k];
    }
  }

  // Tiles of kTile x kTile over the last two dims, [begin, end) in tile units. An input that
  // runs across the tile with a large stride is first gathered into a row-major tile buffer,
  // reading it along its own short stride (a 4096-float transpose would otherwise hit one cache
  // set per column), so every row the inner loop sees is contiguous.
  template <class Inner> void run_tiles(int64_t begin, int64_t end, Inner& inner) const {
    const int64_t nd = int64_t(shape.size());
    const int64_t R = shape[nd - 2], C = shape[nd - 1];
    const int64_t tr = (R + kTile - 1) / kTile, tc = (C + kTile - 1) / kTile;
    std::array<bool, kMaxOperands> gather{};
    std::array<std::unique_ptr<char[]>, kMaxOperands> buf;
    std::array<char*, kMaxOperands> ptr;
    std::array<int64_t, kMaxOperands> inner_st;
    for (int k = 0; k < ntensors; ++k) {
      const int64_t si = strides[k][nd - 1];
      gather[k] = k > 0 && si != 0 && si != elem[k];
      if (gather[k]) buf[k].reset(new char[size_t(kTile * kTile * elem[k])]);
      inner_st[k] = gather[k] ? elem[k] : si;
    }
    for (int64_t t = begin; t < end; ++t) {
      int64_t outer = t / (tr * tc), rem = t % (tr * tc);
      const int64_t r0 = rem / tc * kTile, c0 = rem % tc * kTile;
      std::array<char*, kMaxOperands> base_t = base;
      for (int64_t d = nd - 3; d >= 0; --d) {
        const int64_t i = outer % shape[d];
        outer /= shape[d];
        for (int k = 0; k < ntensors; ++k) base_t[k] += i * strides[k][d];
      }
      const int64_t r1 = std::min(R, r0 + kTile), n = std::min(kTile, C - c0);
      for (int k = 1; k < ntensors; ++k) {
        if (!gather[k]) continue;
        const int64_t es = elem[k], sr = strides[k][nd - 2], sc = strides[k][nd - 1];
        const char* src = base_t[k] + r0 * sr + c0 * sc;
        char* dst = buf[k].get();
        auto copy_tile = [&](auto zero) {
          using E = decltype(zero);
          E* d = reinterpret_cast<E*>(dst);
          for (int64_t c = 0; c < n; ++c)
            for (int64_t r = 0; r < r1 - r0; ++r)
              std::memcpy(d + r * kTile + c, src + r * sr + c * sc, sizeof(E));
        };
        switch (es) {
          case 1:
            copy_tile(uint8_t());
            break;
          case 2:
            copy_tile(uint16_t());
            break;
          case 4:
            copy_tile(uint32_t());
            break;
          default:
            copy_tile(uint64_t());
            break;
        }
      }
      for (int64_t r = r0; r < r1; ++r) {
        for (int k = 0; k < ntensors; ++k)
          ptr[k] = gather[k] ? buf[k].get() + (r - r0) * kTile * elem[k]
                             : base_t[k] + r * strides[k][nd - 2] + c0 * inner_st[k];
        inner(ptr.data(), inner_st.data(), n);
      }
    }
  }

  template <class Inner> void for_each(Inner inner, int64_t grain = kParallelGrain) const {
    if (numel == 0) return;
    if (wants_tiles()) {
      const int64_t nd = int64_t(shape.size());
      const int64_t ntiles = numel / (shape[nd - 1] * shape[nd - 2]) *
                             ((shape[nd - 2] + kTile - 1) / kTile) *
                             ((shape[nd - 1] + kTile - 1) / kTile);
      parallel_for(0, ntiles, std::max<int64_t>(1, grain / (kTile * kTile)),
                   [&](int64_t b, int64_t e) { run_tiles(b, e, inner); });
      return;
    }
    parallel_for(0, numel, grain, [&](int64_t b, int64_t e) { run_range(b, e, inner); });
  }
};

template <class T> inline compute_t<T> load(const char* p) {
  return compute_t<T>(*reinterpret_cast<const T*>(p));
}

// out = f(in...) elementwise. Out and In are storage types; f sees compute types.
template <class Out, class... In, class F>
void cpu_kernel(const Tensor& out, std::array<const Tensor*, sizeof...(In)> ins, F f,
                int64_t grain = kParallelGrain) {
  constexpr int N = int(sizeof...(In));
  const int64_t numel = out.numel();
  if (numel == 0) return;
  // Fast paths without building an iterator: everything dense in the same order, or (binary)
  // one operand a single element.
  if (out.is_contiguous()) {
    bool all_dense = true;
    for (int k = 0; k < N; ++k)
      all_dense = all_dense && ins[k]->is_contiguous() && ins[k]->numel() == numel;
    Out* __restrict o = static_cast<Out*>(out.data_ptr());
    if (all_dense) {
      [&]<size_t... I>(std::index_sequence<I...>) {
        std::tuple<const In*...> in{static_cast<const In*>(ins[I]->data_ptr())...};
        parallel_for(0, numel, grain, [&](int64_t b, int64_t e) {
          std::tuple<const In* __restrict...> p{std::get<I>(in)...};
          for (int64_t i = b; i < e; ++i) o[i] = Out(f(compute_t<In>(std::get<I>(p)[i])...));
        });
      }
      (std::make_index_sequence<N>{});
      return;
    }
    if constexpr (N == 2) {
      using A = std::tuple_element_t<0, std::tuple<In...>>;
      using B = std::tuple_element_t<1, std::tuple<In...>>;
      if (ins[0]->is_contiguous() && ins[0]->numel() == numel && ins[1]->numel() == 1) {
        const A* __restrict a = static_cast<const A*>(ins[0]->data_ptr());
        const compute_t<B> bv = compute_t<B>(*static_cast<const B*>(ins[1]->data_ptr()));
        parallel_for(0, numel, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) o[i] = Out(f(compute_t<A>(a[i]), bv));
        });
        return;
      }
      if (ins[1]->is_contiguous() && ins[1]->numel() == numel && ins[0]->numel() == 1) {
        const B* __restrict bp = static_cast<const B*>(ins[1]->data_ptr());
        const compute_t<A> av = compute_t<A>(*static_cast<const A*>(ins[0]->data_ptr()));
        parallel_for(0, numel, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) o[i] = Out(f(av, compute_t<B>(bp[i])));
        });
        return;
      }
    }
  }
  auto make_iter = [&]<size_t... I>(std::index_sequence<I...>) {
    return ElementwiseIter(out, {ins[I]...});
  };
  ElementwiseIter it = make_iter(std::make_index_sequence<N>{});
  auto inner = [&](char** p, const int64_t* s, int64_t n) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      bool contig = s[0] == int64_t(sizeof(Out)) && ((s[I + 1] == int64_t(sizeof(In))) && ...);
      Out* __restrict o = reinterpret_cast<Out*>(p[0]);
      if (contig) {
        std::tuple<const In* __restrict...> in{reinterpret_cast<const In*>(p[I + 1])...};
        for (int64_t i = 0; i < n; ++i) o[i] = Out(f(compute_t<In>(std::get<I>(in)[i])...));
        return;
      }
      if constexpr (N == 2) {
        // one operand constant along the run (x + scalar, bias add)
        using A = std::tuple_element_t<0, std::tuple<In...>>;
        using B = std::tuple_element_t<1, std::tuple<In...>>;
        if (s[0] == int64_t(sizeof(Out)) && s[1] == 0 && s[2] == int64_t(sizeof(B))) {
          const compute_t<A> a = load<A>(p[1]);
          const B* __restrict b = reinterpret_cast<const B*>(p[2]);
          for (int64_t i = 0; i < n; ++i) o[i] = Out(f(a, compute_t<B>(b[i])));
          return;
        }
        if (s[0] == int64_t(sizeof(Out)) && s[2] == 0 && s[1] == int64_t(sizeof(A))) {
          const A* __restrict a = reinterpret_cast<const A*>(p[1]);
          const compute_t<B> b = load<B>(p[2]);
          for (int64_t i = 0; i < n; ++i) o[i] = Out(f(compute_t<A>(a[i]), b));
          return;
        }
      }
      const int64_t so = s[0];
      char* po = p[0];
      [[maybe_unused]] std::array<const char*, N> pi{p[I + 1]...};
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(po + i * so) = Out(f(load<In>(pi[I] + i * s[I + 1])...));
      }
    }
    (std::make_index_sequence<N>{});
  };
  it.for_each(inner, grain);
}

}  // namespace oneflow::cpu

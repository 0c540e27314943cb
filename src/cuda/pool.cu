// pool.cu: max / average pooling on CUDA, 2-D and 3-D, fixed and adaptive windows (cudnn.h,
// NOTE [CUDA pooling]). cuDNN's pooling is not used: it gives no argmax indices (the max ops
// return them and their gradient scatters through them), has no ceil_mode window clipped at
// in + padding and no divisor_override. A thread per output element (forward) or per input
// element (the average ops' backward, a gather over the windows that contain the element, so
// no atomics and a fixed order); the terms and their order are the CPU kernels'.
#include <cmath>
#include <limits>

#include "cuda/cudnn.h"
#include "cuda/launch.cuh"

namespace oneflow::cuda_module {
namespace {

__device__ __forceinline__ int64_t grid_start() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() { return int64_t(blockDim.x) * gridDim.x; }

// The taps [lo, hi) (step) of output o along axis a, and the axis factor of the average kinds.
struct Win {
  int64_t lo, hi, step;
  double f;
};
__device__ Win window(const PoolAxis& a, PoolKind kind, bool include_pad, int64_t divisor,
                      bool last_axis, int64_t o) {
  Win w{0, 0, 1, 1.0};
  switch (kind) {
    case PoolKind::kMax: {
      int64_t start = o * a.s - a.p;
      w.hi = std::min(start + (a.k - 1) * a.d + 1, a.in);
      if (start < 0) start += ((-start + a.d - 1) / a.d) * a.d;
      w.lo = start;
      w.step = a.d;
      break;
    }
    case PoolKind::kAdaptiveMax:
    case PoolKind::kAdaptiveAvg:
      w.lo = (o * a.in) / a.out;
      w.hi = ((o + 1) * a.in + a.out - 1) / a.out;
      if (kind == PoolKind::kAdaptiveAvg) w.f = 1.0 / double(w.hi - w.lo);
      break;
    case PoolKind::kAvg: {
      const int64_t a0 = o * a.s - a.p;
      const int64_t a1 = std::min(a0 + a.k, a.in + a.p);
      w.lo = std::max<int64_t>(a0, 0);
      w.hi = std::min(a1, a.in);
      if (divisor > 0) w.f = last_axis ? 1.0 / double(divisor) : 1.0;
      else w.f = 1.0 / double(include_pad ? a1 - a0 : std::max<int64_t>(w.hi - w.lo, 1));
      break;
    }
  }
  return w;
}

// The outputs whose windows may contain input i along axis a (checked by the caller).
__device__ void candidates(const PoolAxis& a, PoolKind kind, int64_t i, int64_t& o0, int64_t& o1) {
  if (kind == PoolKind::kAvg) {
    const int64_t t = i + a.p - a.k;
    o0 = t < 0 ? 0 : t / a.s + 1;
    o1 = (i + a.p) / a.s;
  } else {  // adaptive
    o0 = (i * a.out) / a.in;
    o1 = ((i + 1) * a.out + a.in - 1) / a.in - 1;
  }
  o0 = std::max<int64_t>(o0 - 1, 0);  // one more on each side: the membership test decides
  o1 = std::min<int64_t>(o1 + 1, a.out - 1);
}

template <class T> __global__ void max_pool_kernel(PoolParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const PoolAxis &ad = p.ax[0], &ah = p.ax[1], &aw = p.ax[2];
  const int64_t out_sz = ad.out * ah.out * aw.out, in_sz = ad.in * ah.in * aw.in;
  const int64_t total = p.planes * out_sz;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t ow = e % aw.out, oh = (e / aw.out) % ah.out,
                  od = (e / (aw.out * ah.out)) % ad.out;
    const int64_t pl = e / out_sz;
    const Win wd = window(ad, p.kind, false, 0, false, od);
    const Win wh = window(ah, p.kind, false, 0, false, oh);
    const Win ww = window(aw, p.kind, false, 0, true, ow);
    const T* src = x + pl * in_sz;
    int64_t best = (wd.lo * ah.in + wh.lo) * aw.in + ww.lo;
    T mv = -std::numeric_limits<T>::infinity();
    for (int64_t id = wd.lo; id < wd.hi; id += wd.step)
      for (int64_t ih = wh.lo; ih < wh.hi; ih += wh.step) {
        const int64_t base = (id * ah.in + ih) * aw.in;
        for (int64_t iw = ww.lo; iw < ww.hi; iw += ww.step) {
          const T v = src[base + iw];
          if (v > mv || v != v) {
            mv = v;
            best = base + iw;
          }
        }
      }
    y[e] = mv;
    p.indices[e] = best;
  }
}

// y = sum over depth and height taps of (fd * fh) * (sum over width taps of fw * x): the CPU's
// separable order (NOTE [Separable resampling] in src/cpu/pool.cpp).
template <class T> __global__ void avg_pool_kernel(PoolParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const PoolAxis &ad = p.ax[0], &ah = p.ax[1], &aw = p.ax[2];
  const int64_t out_sz = ad.out * ah.out * aw.out, in_sz = ad.in * ah.in * aw.in;
  const int64_t total = p.planes * out_sz;
  const bool inc = p.count_include_pad;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t ow = e % aw.out, oh = (e / aw.out) % ah.out,
                  od = (e / (aw.out * ah.out)) % ad.out;
    const int64_t pl = e / out_sz;
    const Win wd = window(ad, p.kind, inc, p.divisor, false, od);
    const Win wh = window(ah, p.kind, inc, p.divisor, false, oh);
    const Win ww = window(aw, p.kind, inc, p.divisor, true, ow);
    const T fd = T(wd.f), fh = T(wh.f), fw = T(ww.f);
    const T* src = x + pl * in_sz;
    T acc = T(0);
    for (int64_t id = wd.lo; id < wd.hi; ++id)
      for (int64_t ih = wh.lo; ih < wh.hi; ++ih) {
        const T a = fd * fh;
        const T* row = src + (id * ah.in + ih) * aw.in;
        T s = T(0);
        for (int64_t iw = ww.lo; iw < ww.hi; ++iw) s += fw * row[iw];
        acc += a * s;
      }
    y[e] = acc;
  }
}

// grad_in[i] = sum over the outputs o whose windows contain i, in row-major order of o, of
// fw(o) * ((fd(o) * fh(o)) * grad_out[o]): the CPU adjoint's terms in the CPU's order.
template <class T> __global__ void avg_pool_backward_kernel(PoolParams p) {
  const T* g = static_cast<const T*>(p.grad_out);
  T* gx = static_cast<T*>(p.grad_in);
  const PoolAxis &ad = p.ax[0], &ah = p.ax[1], &aw = p.ax[2];
  const int64_t out_sz = ad.out * ah.out * aw.out, in_sz = ad.in * ah.in * aw.in;
  const int64_t total = p.planes * in_sz;
  const bool inc = p.count_include_pad;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t iw = e % aw.in, ih = (e / aw.in) % ah.in, id = (e / (aw.in * ah.in)) % ad.in;
    const int64_t pl = e / in_sz;
    const T* gp = g + pl * out_sz;
    int64_t d0, d1, h0, h1, w0, w1;
    candidates(ad, p.kind, id, d0, d1);
    candidates(ah, p.kind, ih, h0, h1);
    candidates(aw, p.kind, iw, w0, w1);
    T acc = T(0);
    for (int64_t od = d0; od <= d1; ++od) {
      const Win wd = window(ad, p.kind, inc, p.divisor, false, od);
      if (id < wd.lo || id >= wd.hi) continue;
      for (int64_t oh = h0; oh <= h1; ++oh) {
        const Win wh = window(ah, p.kind, inc, p.divisor, false, oh);
        if (ih < wh.lo || ih >= wh.hi) continue;
        const T a = T(wd.f) * T(wh.f);
        const T* grow = gp + (od * ah.out + oh) * aw.out;
        for (int64_t ow = w0; ow <= w1; ++ow) {
          const Win ww = window(aw, p.kind, inc, p.divisor, true, ow);
          if (iw < ww.lo || iw >= ww.hi) continue;
          acc += T(ww.f) * (a * grow[ow]);
        }
      }
    }
    gx[e] = acc;
  }
}

template <class G> cudaError_t visit_f(ScalarType t, G&& go) {
  switch (t) {
    case ScalarType::Float32:
      return go(float{});
    case ScalarType::Float64:
      return go(double{});
    default:
      return cudaErrorInvalidValue;
  }
}

int64_t out_numel(const PoolParams& p) {
  return p.planes * p.ax[0].out * p.ax[1].out * p.ax[2].out;
}
int64_t in_numel(const PoolParams& p) { return p.planes * p.ax[0].in * p.ax[1].in * p.ax[2].in; }

}  // namespace

cudaError_t launch_pool(const PoolParams& p, cudaStream_t stream) {
  return visit_f(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    const int64_t n = out_numel(p);
    if (n == 0) return cudaSuccess;
    if (p.kind == PoolKind::kMax || p.kind == PoolKind::kAdaptiveMax)
      max_pool_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(p);
    else avg_pool_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_pool_backward(const PoolParams& p, cudaStream_t stream) {
  if (p.kind != PoolKind::kAvg && p.kind != PoolKind::kAdaptiveAvg) return cudaErrorInvalidValue;
  return visit_f(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    const int64_t n = in_numel(p);
    if (n == 0) return cudaSuccess;
    avg_pool_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace oneflow::cuda_module

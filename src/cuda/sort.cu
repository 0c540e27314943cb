// sort.cu: sort/topk (NOTE [CUDA sort] in sort.h), pad_backward and the LSTM cell arithmetic on
// CUDA. Keys and sums are the CPU kernels' (compute_t, the same comparisons and additions in the
// same order), so sort, topk and pad_backward are bitwise the CPU's; the LSTM cell uses the
// CPU's functors (ops/functors.h) on the device's exp/tanh.
#include <type_traits>

#include "cuda/launch.cuh"
#include "cuda/sort.h"
#include "ops/functors.h"

namespace oneflow::cuda_module {
namespace {

__device__ __forceinline__ int64_t grid_start() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() { return int64_t(blockDim.x) * gridDim.x; }

// ---------------------------------------------------------------- sort / topk

template <class C> __device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}
// The CPU's less_nan: a strict order with NaN the largest value.
template <class C> __device__ __forceinline__ bool less_nan(C a, C b) {
  return is_nan(b) ? !is_nan(a) : a < b;
}
// (a, ia) comes before (b, ib) in the output (NOTE [CUDA sort]).
template <class C>
__device__ __forceinline__ bool before(C a, int64_t ia, C b, int64_t ib, bool desc) {
  if (desc) {
    if (less_nan(b, a)) return true;
    if (less_nan(a, b)) return false;
  } else {
    if (less_nan(a, b)) return true;
    if (less_nan(b, a)) return false;
  }
  return ia < ib;
}

__device__ __forceinline__ void line_offsets(const SortParams& p, int64_t l, int64_t& xo,
                                             int64_t& vo, int64_t& io) {
  xo = vo = io = 0;
  for (int d = p.ndim - 1; d >= 0; --d) {
    const int64_t s = p.sizes[d], i = l % s;
    l /= s;
    xo += i * p.strides[0][d];
    vo += i * p.strides[1][d];
    io += i * p.strides[2][d];
  }
}

inline int64_t next_pow2(int64_t n) {
  int64_t m = 2;  // at least 2: the keys start 8-byte aligned after the indices
  while (m < n) m <<= 1;
  return m;
}
__host__ __device__ inline size_t key_offset(int64_t N) { return size_t((N * 4 + 7) / 8 * 8); }

// Block b sorts segment (b % segs) of line (b / segs): `seg` elements per segment (the last one
// shorter), padded to N (a power of two) in shared memory. to_work: into work_keys/idx[0]
// (line * n + position), else the first k of the line into the outputs.
template <class T>
__global__ void block_sort_kernel(SortParams p, int64_t seg, int64_t segs, int64_t N,
                                  bool to_work) {
  using C = compute_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  int32_t* idx = reinterpret_cast<int32_t*>(smem);
  C* keys = reinterpret_cast<C*>(smem + key_offset(N));
  const T* x = static_cast<const T*>(p.x);
  const int64_t total = p.lines * segs;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    const int64_t line = b / segs, sg = b % segs;
    const int64_t base = sg * seg;
    const int64_t len = p.n - base < seg ? p.n - base : seg;
    int64_t xo, vo, io;
    line_offsets(p, line, xo, vo, io);
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      idx[i] = int32_t(i);  // i >= len: padding, after every element (by its index)
      keys[i] = i < len ? C(x[xo + (base + i) * p.x_step]) : C(0);
    }
    __syncthreads();
    const bool desc = p.descending;
    for (int64_t k = 2; k <= N; k <<= 1) {
      for (int64_t j = k >> 1; j > 0; j >>= 1) {
        for (int64_t t = threadIdx.x; t < N / 2; t += blockDim.x) {
          const int64_t a = (t / j) * 2 * j + (t % j), c = a + j;
          const int64_t ia = idx[a], ic = idx[c];
          bool c_first;
          if (ia >= len || ic >= len) c_first = ic < ia;
          else c_first = before(keys[c], ic, keys[a], ia, desc);
          const bool up = (a & k) == 0;
          if (up == c_first) {
            const C kt = keys[a];
            keys[a] = keys[c];
            keys[c] = kt;
            idx[a] = int32_t(ic);
            idx[c] = int32_t(ia);
          }
        }
        __syncthreads();
      }
    }
    if (to_work) {
      C* wk = static_cast<C*>(p.work_keys[0]) + line * p.n + base;
      int64_t* wi = p.work_idx[0] + line * p.n + base;
      for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        wk[i] = keys[i];
        wi[i] = base + idx[i];
      }
    } else {
      T* v = static_cast<T*>(p.values);
      const int64_t kk = len < p.k ? len : p.k;
      for (int64_t i = threadIdx.x; i < kk; i += blockDim.x) {
        v[vo + i * p.v_step] = T(keys[i]);
        p.indices[io + i * p.i_step] = idx[i];
      }
    }
    __syncthreads();  // before the next line reuses the shared memory
  }
}

// How many elements of the sorted run (rk, ri)[0, len) come before (key, id).
template <class C>
__device__ __forceinline__ int64_t rank_in(const C* rk, const int64_t* ri, int64_t len, C key,
                                           int64_t id, bool desc) {
  int64_t lo = 0, hi = len;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (before(rk[mid], ri[mid], key, id, desc)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Runs of w sorted elements in every line of src merge pairwise into runs of 2w in dst, or, on
// the last pass, into the first k of the outputs.
template <class T> __global__ void merge_kernel(SortParams p, int64_t w, int src, bool last) {
  using C = compute_t<T>;
  const C* sk = static_cast<const C*>(p.work_keys[src]);
  const int64_t* si = p.work_idx[src];
  C* dk = static_cast<C*>(p.work_keys[1 - src]);
  int64_t* di = p.work_idx[1 - src];
  const int64_t total = p.lines * p.n;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t line = e / p.n, pos = e % p.n;
    const int64_t s = pos / (2 * w) * (2 * w);
    const int64_t a_len = p.n - s < w ? p.n - s : w;
    const int64_t b_start = s + a_len;
    const int64_t b_len = p.n - b_start < w ? p.n - b_start : w;
    const C* lk = sk + line * p.n;
    const int64_t* li = si + line * p.n;
    const C key = lk[pos];
    const int64_t id = li[pos];
    int64_t q;
    if (pos < b_start) q = pos + rank_in(lk + b_start, li + b_start, b_len, key, id, p.descending);
    else q = s + (pos - b_start) + rank_in(lk + s, li + s, a_len, key, id, p.descending);
    if (!last) {
      dk[line * p.n + q] = key;
      di[line * p.n + q] = id;
    } else if (q < p.k) {
      int64_t xo, vo, io;
      line_offsets(p, line, xo, vo, io);
      static_cast<T*>(p.values)[vo + q * p.v_step] = T(key);
      p.indices[io + q * p.i_step] = id;
    }
  }
}

// ---------------------------------------------------------------- pad_backward

// The padded positions i (of m = n + l + r) that read input position j, as up to 3 sorted,
// disjoint runs [lo, hi] (pad_maps in src/cpu/moves.cpp inverted).
struct Runs {
  int count = 0;
  int64_t lo[3], hi[3];
  __device__ void add(int64_t a, int64_t b) {
    lo[count] = a;
    hi[count] = b;
    ++count;
  }
};

__device__ Runs preimages(PadBwdKind kind, int64_t j, int64_t n, int64_t l, int64_t r) {
  Runs u;
  const int64_t m = n + l + r;
  switch (kind) {
    case PadBwdKind::kIdentity:
      u.add(j, j);
      break;
    case PadBwdKind::kConstant:
      if (j + l >= 0 && j + l < m) u.add(j + l, j + l);
      break;
    case PadBwdKind::kReflect: {
      if (j >= 1 && j <= l) u.add(l - j, l - j);
      u.add(j + l, j + l);
      const int64_t i = l + 2 * (n - 1) - j;
      if (j < n - 1 && i < m) u.add(i, i);
      break;
    }
    case PadBwdKind::kReplicate:
      u.add(j == 0 ? 0 : j + l, j == n - 1 ? m - 1 : j + l);
      break;
    case PadBwdKind::kCircular: {
      for (int64_t i = j + l - 2 * n; i < m; i += n)  // l, r <= n: at most 3 of them
        if (i >= 0) u.add(i, i);
      break;
    }
  }
  return u;
}

template <class T> __global__ void pad_backward_kernel(PadBackwardParams p) {
  using C = compute_t<T>;
  const T* g = static_cast<const T*>(p.g);
  T* gin = static_cast<T*>(p.gin);
  const int nd = p.ndim;
  for (int64_t e = grid_start(); e < p.numel; e += grid_step()) {
    Runs runs[kMaxSortDims];
    int cur_run[kMaxSortDims];
    int64_t cur[kMaxSortDims];
    int64_t rem = e, go = 0, io = 0;
    bool none = false;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t s = p.sizes[d], j = rem % s;
      rem /= s;
      io += j * p.gin_strides[d];
      runs[d] = preimages(p.kind[d], j, s, p.left[d], p.right[d]);
      cur_run[d] = 0;
      if (runs[d].count == 0) {
        none = true;
        runs[d].add(0, 0);
      }
      cur[d] = runs[d].lo[0];
      go += cur[d] * p.g_strides[d];
    }
    // the preimages in row-major order: an odometer over the per-dim runs
    T acc = T(0);
    while (!none) {
      acc = T(C(acc) + C(g[go]));
      int d = nd - 1;
      for (; d >= 0; --d) {
        if (cur[d] < runs[d].hi[cur_run[d]]) {
          ++cur[d];
          go += p.g_strides[d];
          break;
        }
        if (cur_run[d] + 1 < runs[d].count) {
          ++cur_run[d];
          go += (runs[d].lo[cur_run[d]] - cur[d]) * p.g_strides[d];
          cur[d] = runs[d].lo[cur_run[d]];
          break;
        }
        go -= (cur[d] - runs[d].lo[0]) * p.g_strides[d];  // back to the first, carry
        cur_run[d] = 0;
        cur[d] = runs[d].lo[0];
      }
      if (d < 0) break;
    }
    gin[io] = acc;
  }
}

// ---------------------------------------------------------------- LSTM cell

template <class T> __global__ void lstm_cell_kernel(LstmCellParams p) {
  const int64_t H = p.H, G = 4 * H, total = p.rows * H;
  const T* gates = static_cast<const T*>(p.gates);
  const T* add = static_cast<const T*>(p.add);
  const T* c = static_cast<const T*>(p.c);
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t r = e / H, j = e % H;
    const T* gr = gates + r * G;
    T gi = gr[j], gf = gr[H + j], gg = gr[2 * H + j], go = gr[3 * H + j];
    if (add) {
      const T* ar = add + r * G;
      gi = gi + ar[j];
      gf = gf + ar[H + j];
      gg = gg + ar[2 * H + j];
      go = go + ar[3 * H + j];
      T* o = static_cast<T*>(p.gates_out) + r * G;
      o[j] = gi;
      o[H + j] = gf;
      o[2 * H + j] = gg;
      o[3 * H + j] = go;
    }
    const T cn = fn::sigmoid_(gf) * c[e] + fn::sigmoid_(gi) * fn::tanh_(gg);
    static_cast<T*>(p.c_out)[e] = cn;
    static_cast<T*>(p.h_out)[e] = fn::sigmoid_(go) * fn::tanh_(cn);
  }
}

template <class T> __global__ void lstm_cell_backward_kernel(LstmCellBackwardParams p) {
  const int64_t H = p.H, G = 4 * H, total = p.rows * H;
  auto in = [](const void* q) { return static_cast<const T*>(q); };
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t r = e / H, j = e % H;
    T dh = p.dh ? in(p.dh)[e] : T(0);
    if (p.dh_add) dh = dh + in(p.dh_add)[e];
    T dc = p.dc ? in(p.dc)[e] : T(0);
    if (p.dc_add) dc = dc + in(p.dc_add)[e];
    const T* gr = in(p.gates) + r * G;
    const T i = fn::sigmoid_(gr[j]), f = fn::sigmoid_(gr[H + j]), g = fn::tanh_(gr[2 * H + j]),
            o = fn::sigmoid_(gr[3 * H + j]);
    const T tc = fn::tanh_(in(p.c_new)[e]);
    const T dcn = dc + dh * o * (T(1) - tc * tc);
    T v[4] = {dcn * g * i * (T(1) - i), dcn * in(p.c)[e] * f * (T(1) - f), dcn * i * (T(1) - g * g),
              dh * tc * o * (T(1) - o)};
    T* dg = static_cast<T*>(p.dgates) + r * G;
    for (int q = 0; q < 4; ++q) {
      if (p.dgates_add) v[q] = v[q] + in(p.dgates_add)[r * G + q * H + j];
      dg[q * H + j] = v[q];
    }
    static_cast<T*>(p.dc_prev)[e] = dcn * f;
  }
}

template <class G> cudaError_t visit_f32_f64(ScalarType t, G&& go) {
  if (t == ScalarType::Float32) return go(float{});
  if (t == ScalarType::Float64) return go(double{});
  return cudaErrorInvalidValue;
}

}  // namespace

int sort_key_size(ScalarType dtype) {
  int size = 0;
  visit(dtype, [&](auto tag) {
    size = int(sizeof(compute_t<decltype(tag)>));
    return cudaSuccess;
  });
  return size;
}

cudaError_t launch_sort(const SortParams& p, cudaStream_t stream) {
  if (p.lines <= 0 || p.n <= 0 || p.k <= 0) return cudaSuccess;
  if (p.ndim < 0 || p.ndim > kMaxSortDims || p.k > p.n) return cudaErrorInvalidValue;
  return visit(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    using C = compute_t<T>;
    const bool tiled = p.n > kSortTile;
    const int64_t seg = tiled ? kSortTile : p.n;
    const int64_t segs = (p.n + seg - 1) / seg;
    const int64_t N = next_pow2(seg);
    const size_t shmem = key_offset(N) + size_t(N) * sizeof(C);
    const int threads = int(N / 2 < 32 ? 32 : (N / 2 > 1024 ? 1024 : N / 2));
    const int64_t blocks64 = p.lines * segs;
    const unsigned blocks = unsigned(blocks64 < (1 << 20) ? blocks64 : (1 << 20));
    if (tiled && (!p.work_keys[0] || !p.work_keys[1] || !p.work_idx[0] || !p.work_idx[1]))
      return cudaErrorInvalidValue;
    block_sort_kernel<T><<<blocks, threads, shmem, stream>>>(p, seg, segs, N, tiled);
    if (!tiled) return cudaGetLastError();
    int src = 0;
    for (int64_t w = seg; w < p.n; w *= 2) {
      const bool last = 2 * w >= p.n;
      merge_kernel<T><<<blocks_for(p.lines * p.n), kThreads, 0, stream>>>(p, w, src, last);
      src = 1 - src;
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_pad_backward(const PadBackwardParams& p, cudaStream_t stream) {
  if (p.numel <= 0) return cudaSuccess;
  if (p.ndim < 0 || p.ndim > kMaxSortDims) return cudaErrorInvalidValue;
  return visit(p.dtype, [&](auto tag) {
    pad_backward_kernel<decltype(tag)><<<blocks_for(p.numel), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_lstm_cell(const LstmCellParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.H <= 0) return cudaSuccess;
  return visit_f32_f64(p.dtype, [&](auto tag) {
    lstm_cell_kernel<decltype(tag)><<<blocks_for(p.rows * p.H), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_lstm_cell_backward(const LstmCellBackwardParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.H <= 0) return cudaSuccess;
  return visit_f32_f64(p.dtype, [&](auto tag) {
    lstm_cell_backward_kernel<decltype(tag)><<<blocks_for(p.rows * p.H), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace oneflow::cuda_module

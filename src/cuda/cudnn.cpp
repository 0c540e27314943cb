// cudnn.cpp: convolutions and batch norm on CUDA through cuDNN's descriptor API (when the
// module is built with -DONEFLOW_WITH_CUDNN; the pooling kernels' host side is pool.cpp). Inputs
// were validated by the op's infer_meta (the CPU's checks and messages) before a kernel here runs;
// the kernels keep the CPU kernels' attrs and outputs.
//
// NOTE [cuDNN on the module's streams]: one cuDNN handle per (thread, device), created on first
// use and pointed at the current stream before every call (NOTE [CUDA streams]); a thread that
// ends gives its handles to the next thread that needs one (they are never destroyed, like the
// allocator). Workspaces come from the caching allocator on the current stream, so they are
// stream-ordered and, while a CUDA Graph captures, drawn from the capture's private pool.
//
// NOTE [cuDNN algorithm choice]: no benchmarking (cudnnFind* times candidates, synchronizes and
// cannot run inside a capture). The algorithms are cuDNN's heuristic ranking
// (cudnnGetConvolution*Algorithm_v7, a host-side query) for the shape, filtered and cached per
// (direction, device, dtype, TF32 switch, shape, parameters): deterministic algorithms first,
// in cuDNN's order, then the others; float32 runs FMA math only (no TF32) unless
// of::globalContext().setAllowTF32CuDNN(true); the TENSOR_OP_MATH_ALLOW_CONVERSION variants
// (float16 arithmetic for float32 data) never run. A call takes the first cached candidate
// whose workspace can be allocated; one that cuDNN refuses at run time (NOT_SUPPORTED) is
// dropped from the cache. The same shape thus runs the same algorithm on every call, eager or
// replayed, and a capture never queries anything new.
//
// NOTE [cuDNN batches]: the descriptor API takes int sizes and strides, so a batch whose
// tensors exceed 2^31 - 1 elements runs in chunks of whole images (the weight gradient
// accumulates chunk after chunk with beta = 1); one image or weight over that is an error.
// conv_transpose with an output_padding >= stride (allowed by the CPU when it is below the
// dilation) has no cuDNN geometry: its full adjoint (no padding) runs into a temporary and the
// padded window is copied out.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cudnn.h"
#include "cuda/dims.h"
#include "cuda/module.h"
#include "oneflow/context.h"
#include "cuda/elementwise.h"
#include "cuda/host_checks.h"
#include "ops/conv_common.h"
#include "ops/nn_attrs.h"

#ifdef ONEFLOW_WITH_CUDNN
#include <cudnn.h>
#endif

namespace oneflow::cuda_module {
namespace {

// Convolutions also take float16/bfloat16 (float accumulation, tensor cores): NOTE [Reduced-
// precision convolutions].
void check_conv_dtype(const Tensor& t, const char* op) {
  OF_CHECK(t.dtype() == kFloat32 || t.dtype() == kFloat64 || t.dtype() == kFloat16 ||
               t.dtype() == kBFloat16,
           "[{}] cuda: expected a float32, float64, float16 or bfloat16 input, got {} (shape {})",
           op, dtype_name(t.dtype()), shape_str(t.sizes()));
}

#ifdef ONEFLOW_WITH_CUDNN
// ================================================================ cuDNN plumbing

// What a failing call names: the op and its operands' shapes and dtype.
struct Where {
  const char* op;
  const char* names[3];
  const Tensor* t[3];
  std::string str() const {
    std::string s;
    for (int i = 0; i < 3; ++i) {
      if (!t[i] || !t[i]->defined()) continue;
      if (!s.empty()) s += ", ";
      s += fmt::format("{} {}", names[i], shape_str(t[i]->sizes()));
    }
    if (t[0] && t[0]->defined()) s += fmt::format(" ({})", dtype_name(t[0]->dtype()));
    return s;
  }
};

[[noreturn]] void cudnn_fail(cudnnStatus_t st, const char* call, const Where& w) {
  cudaGetLastError();  // a failed launch inside cuDNN leaves the runtime's error slot set
  fail("[{}] cudnn: {} failed: {}: {}", w.op, call, cudnnGetErrorString(st), w.str());
}

#define OF_CUDNN(call, where)                                         \
  do {                                                                \
    const cudnnStatus_t of_cudnn_st_ = (call);                        \
    if (of_cudnn_st_ != CUDNN_STATUS_SUCCESS)                         \
      ::oneflow::cuda_module::cudnn_fail(of_cudnn_st_, #call, where); \
  } while (0)

// NOTE [cuDNN on the module's streams]
struct HandlePool {
  std::mutex mu;
  std::vector<std::vector<cudnnHandle_t>> free;  // per device
};
HandlePool& handle_pool() {
  static auto* p = new HandlePool();  // never destroyed (threads may end after static dtors)
  return *p;
}
struct ThreadHandles {
  std::vector<cudnnHandle_t> h;  // per device
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    for (size_t d = 0; d < h.size(); ++d) {
      if (!h[d]) continue;
      if (pool.free.size() <= d) pool.free.resize(d + 1);
      pool.free[d].push_back(h[d]);
    }
  }
};

cudnnHandle_t handle_for(int device, const Where& w) {
  thread_local ThreadHandles mine;
  if (mine.h.size() <= size_t(device)) mine.h.resize(size_t(device) + 1, nullptr);
  cudnnHandle_t& h = mine.h[size_t(device)];
  if (!h) {
    {
      HandlePool& pool = handle_pool();
      std::lock_guard<std::mutex> lock(pool.mu);
      if (pool.free.size() > size_t(device) && !pool.free[size_t(device)].empty()) {
        h = pool.free[size_t(device)].back();
        pool.free[size_t(device)].pop_back();
      }
    }
    if (!h) {
      DeviceGuard guard(device);
      cudnnHandle_t created = nullptr;
      OF_CUDNN(cudnnCreate(&created), w);
      h = created;
    }
  }
  OF_CUDNN(cudnnSetStream(h, current_stream_of(device)), w);
  return h;
}

template <class D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)> struct Desc {
  D d = nullptr;
  explicit Desc(const Where& w) { OF_CUDNN(Create(&d), w); }
  ~Desc() {
    if (d) Destroy(d);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
};
using TensorDesc =
    Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                      cudnnDestroyConvolutionDescriptor>;

cudnnDataType_t cudnn_type(ScalarType t) {
  switch (t) {
    case kFloat64:
      return CUDNN_DATA_DOUBLE;
    case kFloat16:
      return CUDNN_DATA_HALF;
    case kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}
// NOTE [Reduced-precision convolutions]: float16/bfloat16 tensors with float arithmetic (the
// convolution descriptor's compute type; scaling factors are floats), any math type cuDNN
// ranks (tensor cores), deterministic algorithms first as for float32. The ops are marked
// OpDef::cuda_16bit, so autocast's half-precision convolutions stay half on the GPU.
cudnnDataType_t compute_type(ScalarType t) {
  return t == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// Host scaling factors: double for double tensors, float otherwise.
struct Scale {
  float f;
  double d;
  explicit Scale(double v) : f(float(v)), d(v) {}
  const void* of(ScalarType t) const { return t == kFloat64 ? static_cast<const void*>(&d) : &f; }
};

int to_int(int64_t v, const Where& w, const char* what) {
  if (v < 0 || v > INT_MAX)
    fail("[{}] cudnn: {} {} does not fit cuDNN's int sizes: {}", w.op, what, v, w.str());
  return int(v);
}

// A dense row-major tensor descriptor of `dims`.
void set_tensor(TensorDesc& desc, ScalarType t, const std::vector<int>& dims, const Where& w) {
  std::vector<int> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = int(s);
    s *= std::max(dims[i], 1);
  }
  OF_CUDNN(cudnnSetTensorNdDescriptor(desc.d, cudnn_type(t), int(dims.size()), dims.data(),
                                      strides.data()),
           w);
}

// ================================================================ convolutions

// A convolution in forward terms: x [N, C, in...] * w [M, C/G, k...] -> y [N, M, out...].
struct ConvGeom {
  int sp = 2;  // spatial dims: 2 or 3 (conv1d arrives as conv2d over a unit H dim)
  int64_t N = 0, C = 0, M = 0, G = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int pad[3] = {0, 0, 0}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
  ScalarType dtype = kFloat32;

  int64_t x_image() const {
    int64_t v = C;
    for (int i = 0; i < sp; ++i) v *= in[i];
    return v;
  }
  int64_t y_image() const {
    int64_t v = M;
    for (int i = 0; i < sp; ++i) v *= out[i];
    return v;
  }
  std::vector<int> x_dims(int64_t n) const {
    std::vector<int> d{int(n), int(C)};
    for (int i = 0; i < sp; ++i) d.push_back(int(in[i]));
    return d;
  }
  std::vector<int> y_dims(int64_t n) const {
    std::vector<int> d{int(n), int(M)};
    for (int i = 0; i < sp; ++i) d.push_back(int(out[i]));
    return d;
  }
  std::vector<int> w_dims() const {
    std::vector<int> d{int(M), int(C / G)};
    for (int i = 0; i < sp; ++i) d.push_back(int(k[i]));
    return d;
  }
};

// Images per chunk (NOTE [cuDNN batches]); checks every size fits an int.
int64_t images_per_chunk(const ConvGeom& g, const Where& w) {
  const int64_t per = std::max(g.x_image(), g.y_image());
  to_int(per, w, "one image has");
  int64_t wn = g.M * (g.C / g.G);
  for (int i = 0; i < g.sp; ++i) wn *= g.k[i];
  to_int(wn, w, "the weight has");
  const int64_t n = std::max<int64_t>(1, INT_MAX / std::max<int64_t>(per, 1));
  return std::min(n, std::max<int64_t>(g.N, 1));
}

// The geometry of a kernel of the convolution family in forward terms: x [N, C, in...] the
// convolution's input, y [N, M, out...] its output, wsz the weight's sizes [M, C/G, k...]
// (conv_transpose passes its output as x and its input as y; the weight gradient its weight's
// sizes); the parameters are the family's shared attributes (conv_detail::ConvAttrs).
ConvGeom conv_geom(int sp, const Tensor& x, IntArrayRef wsz, const Tensor& y, const Attrs& a,
                   const Where& w) {
  using conv_detail::ConvAttrs;
  ConvGeom g;
  g.sp = sp;
  g.dtype = x.dtype();
  g.N = x.size(0), g.C = x.size(1), g.M = y.size(1), g.G = ConvAttrs::get<"groups">(a);
  const DimVector &stride = ConvAttrs::get<"stride">(a), &pad = ConvAttrs::get<"padding">(a),
                  &dil = ConvAttrs::get<"dilation">(a);
  for (int i = 0; i < sp; ++i) {
    g.in[i] = x.size(2 + i);
    g.k[i] = wsz[size_t(2 + i)];
    g.out[i] = y.size(2 + i);
    g.stride[i] = to_int(stride[size_t(i)], w, "stride");
    g.pad[i] = to_int(pad[size_t(i)], w, "padding");
    g.dil[i] = to_int(dil[size_t(i)], w, "dilation");
  }
  return g;
}

// The descriptors of one chunk of n images.
struct ConvDescs {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  ConvDescs(const ConvGeom& g, int64_t n, const Where& wh) : x(wh), y(wh), w(wh), conv(wh) {
    set_tensor(x, g.dtype, g.x_dims(n), wh);
    set_tensor(y, g.dtype, g.y_dims(n), wh);
    const std::vector<int> wd = g.w_dims();
    OF_CUDNN(cudnnSetFilterNdDescriptor(w.d, cudnn_type(g.dtype), CUDNN_TENSOR_NCHW, int(wd.size()),
                                        wd.data()),
             wh);
    OF_CUDNN(cudnnSetConvolutionNdDescriptor(conv.d, g.sp, g.pad, g.stride, g.dil,
                                             CUDNN_CROSS_CORRELATION, compute_type(g.dtype)),
             wh);
    OF_CUDNN(cudnnSetConvolutionGroupCount(conv.d, int(g.G)), wh);
  }
};

enum class Dir : int { kForward, kBackwardData, kBackwardFilter };

struct Candidate {
  int algo;
  cudnnMathType_t math;
  size_t workspace;
};

// NOTE [cuDNN algorithm choice]: the cache.
struct AlgoCache {
  std::mutex mu;
  std::map<std::vector<int64_t>, std::vector<Candidate>> map;
};
AlgoCache& algo_cache() {
  static auto* c = new AlgoCache();
  return *c;
}

std::vector<int64_t> cache_key(Dir dir, int device, bool tf32, const ConvGeom& g, int64_t n) {
  std::vector<int64_t> key{int64_t(dir), device, int64_t(g.dtype), tf32, g.sp, n, g.C, g.M, g.G};
  for (int i = 0; i < 3; ++i) {
    key.push_back(g.in[i]);
    key.push_back(g.out[i]);
    key.push_back(g.k[i]);
    key.push_back(g.pad[i]);
    key.push_back(g.stride[i]);
    key.push_back(g.dil[i]);
  }
  return key;
}

// cuDNN's heuristic ranking for `dir`, filtered (deterministic first, no down-conversion, FMA
// math for float32 without TF32) with each candidate's workspace size. float16/bfloat16 ask for
// tensor-core math: with the default math the heuristics ranked CUDA-core algorithms first (the
// first GPU run: ResNet-50's float16 convolutions at ~3 TFLOP/s, 80% of its step).
template <class Perf, class Query, class Size>
std::vector<Candidate> rank(cudnnConvolutionDescriptor_t conv, bool fp32, bool half, bool tf32,
                            int count, Query&& query, Size&& size, const Where& w) {
  const cudnnMathType_t base = fp32 && !tf32 ? CUDNN_FMA_MATH
                               : half        ? CUDNN_TENSOR_OP_MATH
                                             : CUDNN_DEFAULT_MATH;
  OF_CUDNN(cudnnSetConvolutionMathType(conv, base), w);
  std::vector<Perf> perf(static_cast<size_t>(count));
  int returned = 0;
  OF_CUDNN(query(count, &returned, perf.data()), w);
  std::vector<Candidate> out;
  for (const bool want_det : {true, false}) {
    for (int i = 0; i < returned; ++i) {
      const Perf& r = perf[size_t(i)];
      if (r.status != CUDNN_STATUS_SUCCESS) continue;
      if ((r.determinism == CUDNN_DETERMINISTIC) != want_det) continue;
      cudnnMathType_t math = r.mathType;
      if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      if (fp32 && !tf32) {
        if (math == CUDNN_TENSOR_OP_MATH) continue;
        math = CUDNN_FMA_MATH;
      }
      bool seen = false;
      for (const Candidate& c : out) seen = seen || (c.algo == int(r.algo) && c.math == math);
      if (seen) continue;
      if (cudnnSetConvolutionMathType(conv, math) != CUDNN_STATUS_SUCCESS) continue;
      size_t ws = 0;
      if (size(int(r.algo), &ws) != CUDNN_STATUS_SUCCESS) continue;
      out.push_back({int(r.algo), math, ws});
    }
  }
  OF_CUDNN(cudnnSetConvolutionMathType(conv, base), w);
  return out;
}

std::vector<Candidate> find_candidates(Dir dir, cudnnHandle_t h, const ConvDescs& d,
                                       const ConvGeom& g, bool tf32, const Where& w) {
  const bool fp32 = g.dtype == kFloat32, half = g.dtype == kFloat16 || g.dtype == kBFloat16;
  switch (dir) {
    case Dir::kForward:
      return rank<cudnnConvolutionFwdAlgoPerf_t>(
          d.conv.d, fp32, half, tf32, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
          [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* p) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.d, d.w.d, d.conv.d, d.y.d, n, got,
                                                          p);
          },
          [&](int algo, size_t* ws) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.d, d.w.d, d.conv.d, d.y.d,
                                                           cudnnConvolutionFwdAlgo_t(algo), ws);
          },
          w);
    case Dir::kBackwardData:
      return rank<cudnnConvolutionBwdDataAlgoPerf_t>(
          d.conv.d, fp32, half, tf32, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
          [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* p) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.d, d.y.d, d.conv.d, d.x.d, n,
                                                               got, p);
          },
          [&](int algo, size_t* ws) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(
                h, d.w.d, d.y.d, d.conv.d, d.x.d, cudnnConvolutionBwdDataAlgo_t(algo), ws);
          },
          w);
    case Dir::kBackwardFilter:
      return rank<cudnnConvolutionBwdFilterAlgoPerf_t>(
          d.conv.d, fp32, half, tf32, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
          [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* p) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.d, d.y.d, d.conv.d, d.w.d,
                                                                 n, got, p);
          },
          [&](int algo, size_t* ws) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                h, d.x.d, d.y.d, d.conv.d, d.w.d, cudnnConvolutionBwdFilterAlgo_t(algo), ws);
          },
          w);
  }
  return {};
}

// Runs one chunk of `dir`: x/y/w as the forward names them (for kBackwardData y is the input
// gradient dy and x the result; for kBackwardFilter w is the result). beta blends into the
// result (the weight gradient's later chunks accumulate).
void run_conv(Dir dir, int device, const ConvGeom& g, int64_t n, const void* x, const void* w,
              const void* y, void* result, double beta, const Where& wh) {
  cudnnHandle_t h = handle_for(device, wh);
  const ConvDescs d(g, n, wh);
  const bool tf32 = g.dtype == kFloat32 && globalContext().allowTF32CuDNN();
  const std::vector<int64_t> key = cache_key(dir, device, tf32, g, n);
  AlgoCache& cache = algo_cache();
  std::vector<Candidate> cands;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.map.find(key);
    if (it != cache.map.end()) cands = it->second;
  }
  if (cands.empty()) {
    cands = find_candidates(dir, h, d, g, tf32, wh);
    OF_CHECK(!cands.empty(), "[{}] cudnn: no convolution algorithm supports {}", wh.op, wh.str());
    // OF_CUDNN_DEBUG=1: the ranked candidates of each new shape on stderr (the first is tried
    // first): what the heuristics chose for a slow convolution
    static const bool debug = std::getenv("OF_CUDNN_DEBUG") != nullptr;
    if (debug) {
      static const char* const kDir[] = {"forward", "backward data", "backward filter"};
      std::string list;
      for (const Candidate& c : cands)
        list += fmt::format(" algo {}{} ws {} KiB;", c.algo,
                            c.math == CUDNN_TENSOR_OP_MATH ? " (tensor op)"
                            : c.math == CUDNN_FMA_MATH     ? " (fma)"
                                                           : "",
                            c.workspace >> 10);
      std::fprintf(stderr, "[cudnn] %s %s, %lld images:%s\n", kDir[int(dir)], wh.str().c_str(),
                   (long long)n, list.c_str());
    }
    std::lock_guard<std::mutex> lock(cache.mu);
    cache.map.emplace(key, cands);
  }
  const Scale one(1.0), b(beta);
  const void* alpha = one.of(g.dtype);
  const void* bp = b.of(g.dtype);
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate& c = cands[i];
    const bool last = i + 1 == cands.size();
    Storage ws;
    if (c.workspace > 0) {
      try {
        ws = allocate_storage(c.workspace, device);
      } catch (const Error&) {
        if (last) throw;
        continue;  // the next candidate may need less
      }
    }
    void* wsp = ws ? ws->data : nullptr;
    OF_CUDNN(cudnnSetConvolutionMathType(d.conv.d, c.math), wh);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    const char* call = "";
    switch (dir) {
      case Dir::kForward:
        call = "cudnnConvolutionForward";
        st = cudnnConvolutionForward(h, alpha, d.x.d, x, d.w.d, w, d.conv.d,
                                     cudnnConvolutionFwdAlgo_t(c.algo), wsp, c.workspace, bp, d.y.d,
                                     result);
        break;
      case Dir::kBackwardData:
        call = "cudnnConvolutionBackwardData";
        st = cudnnConvolutionBackwardData(h, alpha, d.w.d, w, d.y.d, y, d.conv.d,
                                          cudnnConvolutionBwdDataAlgo_t(c.algo), wsp, c.workspace,
                                          bp, d.x.d, result);
        break;
      case Dir::kBackwardFilter:
        call = "cudnnConvolutionBackwardFilter";
        st = cudnnConvolutionBackwardFilter(h, alpha, d.x.d, x, d.y.d, y, d.conv.d,
                                            cudnnConvolutionBwdFilterAlgo_t(c.algo), wsp,
                                            c.workspace, bp, d.w.d, result);
        break;
    }
    if (st == CUDNN_STATUS_SUCCESS) {
      after_launch(wh.op);
      return;
    }
    if (st == CUDNN_STATUS_NOT_SUPPORTED && !last) {
      std::lock_guard<std::mutex> lock(cache.mu);  // never again for this shape
      auto it = cache.map.find(key);
      if (it != cache.map.end()) {
        auto& v = it->second;
        for (size_t j = 0; j < v.size(); ++j)
          if (v[j].algo == c.algo && v[j].math == c.math) {
            v.erase(v.begin() + int64_t(j));
            break;
          }
      }
      continue;
    }
    cudnn_fail(st, call, wh);
  }
}

using conv_detail::conv_bw_name;
using conv_detail::conv_name;
using conv_detail::conv_t_name;

void add_bias(const Tensor& out, const Tensor& bias) {
  if (!bias.defined() || out.numel() == 0) return;
  DimVector shape(size_t(out.dim()) - 1, 1);
  shape[0] = bias.size(0);  // [M, 1, ...]: broadcast over out's trailing dims from dim 1
  add_into(out, kernel_view(bias, shape));
}

// conv2d / conv3d (x, w, bias?; stride, padding, dilation, groups)
template <int Sp> void conv_kernel(const KernelArgs& k) {
  const char* op = conv_name<Sp>();
  const Tensor x = kernel_contiguous(k.inputs[0]), w = kernel_contiguous(k.inputs[1]);
  const Tensor b = k.inputs[2].defined() ? kernel_contiguous(k.inputs[2]) : Tensor();
  const Tensor& y = k.outputs[0];
  const Where wh{op, {"input", "weight", "output"}, {&x, &w, &y}};
  const int device = device_of(x, op);
  if (y.numel() == 0) return;
  check_conv_dtype(x, op);
  check_dense_output(y, op);
  DeviceGuard guard(device);
  const ConvGeom g = conv_geom(Sp, x, w.sizes(), y, k.attrs, wh);
  const int64_t chunk = images_per_chunk(g, wh);
  const size_t es = itemsize(g.dtype);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t n = std::min(chunk, g.N - n0);
    run_conv(Dir::kForward, device, g, n, static_cast<const char*>(cptr(x)) + n0 * g.x_image() * es,
             cptr(w), nullptr, static_cast<char*>(mptr(y)) + n0 * g.y_image() * es, 0.0, wh);
  }
  add_bias(y, b);
}

// dx [N, C, in...] = the input-adjoint of dy [N, M, out...] under g, in chunks of images.
void backward_data(int device, const ConvGeom& g, const Tensor& dy, const Tensor& w,
                   const Tensor& dx, const Where& wh) {
  const int64_t chunk = images_per_chunk(g, wh);
  const size_t es = itemsize(g.dtype);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t n = std::min(chunk, g.N - n0);
    run_conv(Dir::kBackwardData, device, g, n, nullptr, cptr(w),
             static_cast<const char*>(cptr(dy)) + n0 * g.y_image() * es,
             static_cast<char*>(mptr(dx)) + n0 * g.x_image() * es, 0.0, wh);
  }
}

// conv_transpose2d / 3d (x, w, bias?; stride, padding, dilation, groups, output_padding):
// cuDNN's backward data with x as the convolution's output gradient.
template <int Sp> void conv_transpose_kernel(const KernelArgs& k) {
  const char* op = conv_t_name<Sp>();
  const Tensor x = kernel_contiguous(k.inputs[0]), w = kernel_contiguous(k.inputs[1]);
  const Tensor b = k.inputs[2].defined() ? kernel_contiguous(k.inputs[2]) : Tensor();
  const Tensor& y = k.outputs[0];
  const Where wh{op, {"input", "weight", "output"}, {&x, &w, &y}};
  const int device = device_of(x, op);
  if (y.numel() == 0) return;
  check_conv_dtype(x, op);
  check_dense_output(y, op);
  DeviceGuard guard(device);
  const ConvGeom g = conv_geom(Sp, y, w.sizes(), x, k.attrs, wh);  // y = x's input-adjoint
  const DimVector& opad = conv_detail::ConvTransposeAttrs::get<"output_padding">(k.attrs);
  bool exact = true;  // every output_padding < stride: cuDNN's geometry gives y's size
  for (int i = 0; i < Sp; ++i) exact = exact && opad[size_t(i)] < g.stride[i];
  if (exact) {
    backward_data(device, g, x, w, y, wh);
  } else {
    // NOTE [cuDNN batches]: the unpadded adjoint, then y = its window at the padding offsets
    ConvGeom full = g;
    DimVector full_sizes{g.N, g.C};
    for (int i = 0; i < Sp; ++i) {
      full.pad[i] = 0;
      full.in[i] = (g.out[i] - 1) * g.stride[i] + int64_t(g.dil[i]) * (g.k[i] - 1) + 1;
      full_sizes.push_back(full.in[i]);
    }
    const Tensor tmp = make_empty(full_sizes, g.dtype, x.device());
    backward_data(device, full, x, w, tmp, wh);
    kernel_fill(y, 0);
    Tensor dst = y, src = tmp;
    bool empty = false;
    for (int i = 0; i < Sp; ++i) {
      const int64_t len = std::min(g.in[i], full.in[i] - g.pad[i]);
      if (len <= 0) {
        empty = true;
        break;
      }
      dst = kernel_narrow(dst, 2 + i, 0, len);
      src = kernel_narrow(src, 2 + i, g.pad[i], len);
    }
    if (!empty) kernel_copy_into(dst, src);
  }
  add_bias(y, b);
}

// conv2d/3d_backward_weight (grad_output, input; stride, padding, dilation, groups,
// weight_size) -> grad_weight.
template <int Sp> void conv_backward_weight_kernel(const KernelArgs& k) {
  const char* op = conv_bw_name<Sp>();
  const Tensor dy = kernel_contiguous(k.inputs[0]), x = kernel_contiguous(k.inputs[1]);
  const Tensor& dw = k.outputs[0];
  const Where wh{op, {"input", "grad_output", "grad_weight"}, {&x, &dy, &dw}};
  const int device = device_of(x, op);
  if (dw.numel() == 0) return;
  check_conv_dtype(x, op);
  check_dense_output(dw, op);
  DeviceGuard guard(device);
  if (x.size(0) == 0) {  // no images: a zero gradient (as the CPU kernel)
    kernel_fill(dw, 0);
    return;
  }
  const ConvGeom g = conv_geom(Sp, x, conv_detail::ConvWeightGradAttrs::get<"weight_size">(k.attrs),
                               dy, k.attrs, wh);
  const int64_t chunk = images_per_chunk(g, wh);
  const size_t es = itemsize(g.dtype);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t n = std::min(chunk, g.N - n0);
    run_conv(Dir::kBackwardFilter, device, g, n,
             static_cast<const char*>(cptr(x)) + n0 * g.x_image() * es, nullptr,
             static_cast<const char*>(cptr(dy)) + n0 * g.y_image() * es, mptr(dw),
             n0 == 0 ? 0.0 : 1.0, wh);
  }
}

// ================================================================ batch norm
// batch_norm (x [N, C, *], weight?, bias?, running_mean?, running_var?; training, eps,
// has_weight) -> y, save_mean, save_invstd, batch variance (unbiased; the running variance in
// evaluation). The running statistics are updated by the caller (of::batch_norm) from outputs 1
// and 3, as on the CPU. cuDNN's spatial mode over x viewed as [N, C, prod(*), 1].

struct BnDescs {
  TensorDesc x, p;
  BnDescs(const Tensor& x_, const Where& w) : x(w), p(w) {
    int64_t hw = 1;
    for (int64_t d = 2; d < x_.dim(); ++d) hw *= x_.size(d);
    to_int(x_.numel(), w, "the input has");
    set_tensor(x, x_.dtype(), {int(x_.size(0)), int(x_.size(1)), int(hw), 1}, w);
    OF_CUDNN(cudnnDeriveBNTensorDescriptor(p.d, x.d, CUDNN_BATCHNORM_SPATIAL), w);
  }
};

Tensor param_or(const Tensor& t, int64_t C, double v, const Tensor& like) {
  if (t.defined()) return kernel_contiguous(t);
  const Tensor r = make_empty({C}, like.dtype(), like.device());
  kernel_fill(r, v);
  return r;
}

// [1, C, 1, ...] for broadcasting a per-channel tensor over x.
DimVector channel_shape(const Tensor& x) {
  DimVector s(size_t(x.dim()), 1);
  s[1] = x.size(1);
  return s;
}

void bn_kernel(const KernelArgs& k) {
  const char* op = "batch_norm";
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor &y = k.outputs[0], &mean = k.outputs[1], &invstd = k.outputs[2], &var = k.outputs[3];
  const Where wh{op, {"input", "output", nullptr}, {&x, &y, nullptr}};
  const int device = device_of(x, op);
  check_dtype(x, op);
  for (const Tensor* t : {&y, &mean, &invstd, &var}) check_dense_output(*t, op);
  DeviceGuard guard(device);
  const bool training = nn_detail::BatchNormAttrs::get<"training">(k.attrs);
  const double eps = nn_detail::BatchNormAttrs::get<"eps">(k.attrs);
  const int64_t C = x.size(1);
  if (!training) {  // the statistics are the running ones (as the CPU kernel)
    const Tensor rv = k.inputs[4];
    kernel_copy_into(mean, k.inputs[3]);
    kernel_copy_into(var, rv);
    // invstd = 1 / sqrt(rv + eps), in float64
    const Tensor r = kernel_cast(rv, kFloat64), e = make_empty({}, kFloat64, rv.device());
    kernel_fill(e, eps);
    elementwise_into(ElemOp::add, r, {r, e}, kFloat64);
    elementwise_into(ElemOp::sqrt, r, {r}, kFloat64);
    elementwise_into(ElemOp::reciprocal, r, {r}, kFloat64);
    kernel_copy_into(invstd, r);
  }
  if (x.numel() == 0 || C == 0) return;
  const Tensor w = param_or(k.inputs[1], C, 1.0, x), b = param_or(k.inputs[2], C, 0.0, x);
  const BnDescs d(x, wh);
  cudnnHandle_t h = handle_for(device, wh);
  const Scale one(1.0), zero(0.0);
  const ScalarType t = x.dtype();
  if (training) {
    // NOTE: cuDNN's "running" outputs with factor 1 are this batch's mean and unbiased
    // variance (0 * previous + 1 * new, the previous zeroed so that no NaN survives)
    kernel_fill(var, 0);
    const Tensor scratch = make_empty({C}, x.dtype(), x.device());
    kernel_fill(scratch, 0);
    OF_CUDNN(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, one.of(t),
                                                    zero.of(t), d.x.d, cptr(x), d.x.d, mptr(y),
                                                    d.p.d, cptr(w), cptr(b), 1.0, mptr(scratch),
                                                    mptr(var), eps, mptr(mean), mptr(invstd)),
             wh);
  } else {
    const Tensor rm = kernel_contiguous(k.inputs[3]), rv = kernel_contiguous(k.inputs[4]);
    OF_CUDNN(cudnnBatchNormalizationForwardInference(
                 h, CUDNN_BATCHNORM_SPATIAL, one.of(t), zero.of(t), d.x.d, cptr(x), d.x.d, mptr(y),
                 d.p.d, cptr(w), cptr(b), cptr(rm), cptr(rv), eps),
             wh);
  }
  after_launch(op);
}

// batch_norm_backward (dy, x, weight?, save_mean, save_invstd; attrs as forward) -> gx,
// gweight, gbias.
void bn_backward_kernel(const KernelArgs& k) {
  const char* op = "batch_norm_backward";
  const Tensor dy = kernel_contiguous(k.inputs[0]), x = kernel_contiguous(k.inputs[1]);
  const Tensor mean = kernel_contiguous(k.inputs[3]), invstd = kernel_contiguous(k.inputs[4]);
  const Tensor &gx = k.outputs[0], &gw = k.outputs[1], &gb = k.outputs[2];
  const Where wh{op, {"input", "grad_output", nullptr}, {&x, &dy, nullptr}};
  const int device = device_of(x, op);
  check_dtype(x, op);
  for (const Tensor* t : {&gx, &gw, &gb}) check_dense_output(*t, op);
  DeviceGuard guard(device);
  const bool training = nn_detail::BatchNormAttrs::get<"training">(k.attrs);
  const int64_t C = x.size(1);
  if (C == 0) return;
  if (!training || x.numel() == 0) {
    // evaluation: the statistics are constants, gx = dy * invstd * w per channel
    DimVector dims{0};
    for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
    // (the arithmetic of the former public-op form, by the module's own kernels)
    // gb = sum(dy); gw = sum(dy * (x - mean)) * invstd; gx = dy * (invstd * w, in float64).
    // The elementwise kernels take operands of one dtype: fresh copies in the one needed.
    const DimVector cs = channel_shape(x);
    const ScalarType t = x.dtype();
    sum_into(gb, dy, dims);
    const Tensor xc = make_empty(x.sizes(), t, x.device());
    elementwise_into(ElemOp::sub, xc, {x, kernel_view(kernel_cast(mean, t), cs)}, t);
    elementwise_into(ElemOp::mul, xc, {dy, xc}, t);
    const Tensor gwt = make_empty({C}, t, x.device());
    sum_into(gwt, xc, dims);
    elementwise_into(ElemOp::mul, gwt, {gwt, kernel_cast(invstd, t)}, t);
    kernel_copy_into(gw, gwt);
    if (gx.numel() > 0) {
      const Tensor s = kernel_cast(invstd, kFloat64);
      if (k.inputs[2].defined())
        elementwise_into(ElemOp::mul, s, {s, kernel_cast(k.inputs[2], kFloat64)}, kFloat64);
      elementwise_into(ElemOp::mul, gx, {dy, kernel_view(kernel_cast(s, t), cs)}, t);
    }
    return;
  }
  const Tensor w = param_or(k.inputs[2], C, 1.0, x);
  const BnDescs d(x, wh);
  cudnnHandle_t h = handle_for(device, wh);
  const Scale one(1.0), zero(0.0);
  const ScalarType t = x.dtype();
  OF_CUDNN(cudnnBatchNormalizationBackward(
               h, CUDNN_BATCHNORM_SPATIAL, one.of(t), zero.of(t), one.of(t), zero.of(t), d.x.d,
               cptr(x), d.x.d, cptr(dy), d.x.d, mptr(gx), d.p.d, cptr(w), mptr(gw), mptr(gb),
               nn_detail::BatchNormAttrs::get<"eps">(k.attrs), cptr(mean), cptr(invstd)),
           wh);
  after_launch(op);
}
#endif  // ONEFLOW_WITH_CUDNN

}  // namespace

void register_cudnn_kernels(const cuda_backend::CoreV1& core) {
#ifdef ONEFLOW_WITH_CUDNN
  // cuDNN takes float16/bfloat16 operands (float accumulation): OpDef::cuda_16bit beside each
  auto conv = [&](const char* op, auto kernel) {
    core.set_cuda_kernel(op, kernel);
    core.set_cuda_16bit(op);
  };
  conv("conv2d", conv_kernel<2>);
  conv("conv3d", conv_kernel<3>);
  conv("conv_transpose2d", conv_transpose_kernel<2>);
  conv("conv_transpose3d", conv_transpose_kernel<3>);
  conv("conv2d_backward_weight", conv_backward_weight_kernel<2>);
  conv("conv3d_backward_weight", conv_backward_weight_kernel<3>);
  core.set_cuda_kernel("batch_norm", bn_kernel);
  core.set_cuda_kernel("batch_norm_backward", bn_backward_kernel);
#endif
}

}  // namespace oneflow::cuda_module

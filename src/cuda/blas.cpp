// blas.cpp: "mm" and "bmm" on CUDA through cuBLAS (one handle per device, created lazily).
// NOTE [Row-major GEMM on cuBLAS]: cuBLAS is column-major, so a row-major C[m,n] is the
// column-major C^T and we compute C^T = B^T A^T. An operand with inner stride 1 (row-major, ld =
// row stride) is read as its own transpose with no op (CUBLAS_OP_N); one with row stride 1
// (a transposed view, ld = column stride) is read with CUBLAS_OP_T. Anything else (expanded or
// sliced in both dims) is first copied into a contiguous temporary.
#include <cublasLt.h>

#include <climits>
#include <mutex>
#include <vector>

#include "cuda/module.h"
#include "cuda/cuda_check.h"
#include "cuda/strided_copy.h"

namespace oneflow::cuda_module {
namespace {

// One handle of type H per device, made by create(&h) on first use; never destroyed (see the
// allocator). `device` was validated by resolve_device.
template <class H, class Create> H per_device_handle(int device, Create&& create) {
  static std::mutex mu;
  static auto* handles = new std::vector<H>();
  std::lock_guard<std::mutex> lock(mu);
  if (handles->empty()) handles->resize(size_t(device_count()), nullptr);
  H& h = (*handles)[size_t(device)];
  if (h == nullptr) {
    DeviceGuard guard(device);
    H created = nullptr;
    create(&created);
    h = created;
  }
  return h;
}

cublasHandle_t handle_for(int device) {
  cublasHandle_t h = per_device_handle<cublasHandle_t>(
      device, [](cublasHandle_t* c) { OF_CUBLAS_CHECK(cublasCreate(c)); });
  // Full-precision fp32 unless of::globalContext().setAllowTF32CuBLAS(true) (then TF32 tensor
  // cores, as libtorch's switch); read at every call.
  const bool tf32 = g_core && g_core->allow_tf32_cublas && g_core->allow_tf32_cublas();
  OF_CUBLAS_CHECK(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  // every call on the current stream (NOTE [CUDA streams])
  OF_CUBLAS_CHECK(cublasSetStream(h, current_stream_of(device)));
  return h;
}

// One GEMM operand as cuBLAS reads it.
struct Operand {
  const void* data = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1;
  int64_t batch_stride = 0;
  Storage temp;  // keeps a contiguous copy alive when one was needed
};

// `t` is [rows, cols] or [batch, rows, cols]; a batch of size 1 is broadcast (stride 0).
Operand make_operand(const Tensor& t, const char* op) {
  const TensorImpl& impl = *t.impl();
  const size_t nd = impl.sizes.size();
  const int64_t rows = impl.sizes[nd - 2], cols = impl.sizes[nd - 1];
  const int64_t rs = impl.strides[nd - 2], cs = impl.strides[nd - 1];
  Operand o;
  const bool batched = nd == 3;
  const int64_t batch_stride = batched && impl.sizes[0] != 1 ? impl.strides[0] : 0;
  const bool row_major = (cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1));
  const bool col_major = (rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1));
  if (row_major) {
    o.op = CUBLAS_OP_N;
    o.ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
  } else if (col_major) {
    o.op = CUBLAS_OP_T;
    o.ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
  }
  if ((row_major || col_major) && o.ld <= INT_MAX && batch_stride >= 0) {
    o.data = impl.raw_data();
    o.batch_stride = batch_stride;
    return o;
  }
  o.temp = allocate_storage(size_t(impl.numel) * itemsize(impl.dtype), impl.device.index());
  copy_to_contiguous(impl, impl.dtype, o.temp->data, op);
  o.data = o.temp->data;
  o.op = CUBLAS_OP_N;
  o.ld = std::max<int64_t>(cols, 1);
  o.batch_stride = batched && impl.sizes[0] != 1 ? rows * cols : 0;
  return o;
}

void check_operands(const KernelArgs& args, int64_t nd, const char* op) {
  OF_CHECK(args.inputs.size() == 2 && args.outputs.size() == 1,
           "[{}] cuda: expected 2 inputs and 1 output, got {} and {}", op, args.inputs.size(),
           args.outputs.size());
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& c = args.outputs[0];
  OF_CHECK(a.dim() == nd && b.dim() == nd && c.dim() == nd,
           "[{}] cuda: expected {}-D operands, got {}, {} and output {}", op, nd,
           shape_str(a.sizes()), shape_str(b.sizes()), shape_str(c.sizes()));
  OF_CHECK(a.is_cuda() && b.device() == a.device() && c.device() == a.device(),
           "[{}] cuda: operands must be on one CUDA device, got {}, {} and output {}", op,
           a.device().str(), b.device().str(), c.device().str());
  OF_CHECK(a.dtype() == b.dtype() && c.dtype() == a.dtype(),
           "[{}] cuda: dtypes must match, got {}, {} and output {}", op, dtype_name(a.dtype()),
           dtype_name(b.dtype()), dtype_name(c.dtype()));
  const ScalarType t = a.dtype();
  const IntArrayRef as = a.sizes(), bs = b.sizes(), cs = c.sizes();
  OF_CHECK(t == kFloat32 || t == kFloat64 || t == kFloat16 || t == kBFloat16,
           "[{}] cuda: unsupported dtype {} (float32, float64, float16 and bfloat16 only)", op,
           dtype_name(t));
  OF_CHECK(c.is_contiguous(), "[{}] cuda: the output must be contiguous", op);
  const size_t r = size_t(nd) - 2;  // index of the row dim
  const int64_t m = as[r], k = as[r + 1], n = bs[r + 1];
  OF_CHECK(bs[r] == k && cs[r] == m && cs[r + 1] == n,
           "[{}] cuda: shapes {} and {} cannot be multiplied into {}", op, shape_str(a.sizes()),
           shape_str(b.sizes()), shape_str(c.sizes()));
  if (nd == 3) {
    const int64_t batch = cs[0];
    OF_CHECK((as[0] == batch || as[0] == 1) && (bs[0] == batch || bs[0] == 1),
             "[{}] cuda: batch sizes {} and {} do not match the output batch {}", op, as[0], bs[0],
             batch);
    OF_CHECK(batch <= INT_MAX, "[{}] cuda: batch {} is too large for cuBLAS", op, batch);
  }
  OF_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX,
           "[{}] cuda: dimensions m={}, n={}, k={} are too large for cuBLAS", op, m, n, k);
}

cudaDataType_t cuda_type(ScalarType t) {
  switch (t) {
    case kFloat64:
      return CUDA_R_64F;
    case kFloat16:
      return CUDA_R_16F;
    case kBFloat16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// C[batch, m, n] = A[batch, m, k] B[batch, k, n] (batch 0: plain 2-D mm).
void gemm(const KernelArgs& args, int64_t batch, const char* op) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& c = args.outputs[0];
  const size_t r = a.sizes().size() - 2;  // index of the row dim
  const int64_t m = a.sizes()[r], k = a.sizes()[r + 1], n = b.sizes()[r + 1];
  const int device = resolve_device(a.device().index());
  DeviceGuard guard(device);
  void* c_data = c.impl()->raw_data();
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {  // empty sum: C is zeros
    OF_CUDA_CHECK(cudaMemsetAsync(c_data, 0, c.nbytes(), current_stream_of(device)));
    return;
  }
  const Operand oa = make_operand(a, op), ob = make_operand(b, op);
  cublasHandle_t h = handle_for(device);
  const int im = int(m), in = int(n), ik = int(k), lda = int(oa.ld), ldb = int(ob.ld);
  const int64_t stride_c = m * n;
  const ScalarType t = c.dtype();
  if (t == kFloat32) {
    const float alpha = 1.f, beta = 0.f;
    auto* cp = static_cast<float*>(c_data);
    auto* ap = static_cast<const float*>(oa.data);
    auto* bp = static_cast<const float*>(ob.data);
    if (batch < 0) {
      OF_CUBLAS_CHECK(
          cublasSgemm(h, ob.op, oa.op, in, im, ik, &alpha, bp, ldb, ap, lda, &beta, cp, in));
    } else {
      OF_CUBLAS_CHECK(cublasSgemmStridedBatched(h, ob.op, oa.op, in, im, ik, &alpha, bp, ldb,
                                                ob.batch_stride, ap, lda, oa.batch_stride, &beta,
                                                cp, in, stride_c, int(batch)));
    }
  } else if (t == kFloat64) {
    const double alpha = 1.0, beta = 0.0;
    auto* cp = static_cast<double*>(c_data);
    auto* ap = static_cast<const double*>(oa.data);
    auto* bp = static_cast<const double*>(ob.data);
    if (batch < 0) {
      OF_CUBLAS_CHECK(
          cublasDgemm(h, ob.op, oa.op, in, im, ik, &alpha, bp, ldb, ap, lda, &beta, cp, in));
    } else {
      OF_CUBLAS_CHECK(cublasDgemmStridedBatched(h, ob.op, oa.op, in, im, ik, &alpha, bp, ldb,
                                                ob.batch_stride, ap, lda, oa.batch_stride, &beta,
                                                cp, in, stride_c, int(batch)));
    }
  } else {  // float16 / bfloat16: fp32 accumulation
    const float alpha = 1.f, beta = 0.f;
    const cudaDataType_t dt = cuda_type(t);
    if (batch < 0) {
      OF_CUBLAS_CHECK(cublasGemmEx(h, ob.op, oa.op, in, im, ik, &alpha, ob.data, dt, ldb, oa.data,
                                   dt, lda, &beta, c_data, dt, in, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
    } else {
      OF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          h, ob.op, oa.op, in, im, ik, &alpha, ob.data, dt, ldb, ob.batch_stride, oa.data, dt, lda,
          oa.batch_stride, &beta, c_data, dt, in, stride_c, int(batch), CUBLAS_COMPUTE_32F,
          CUBLAS_GEMM_DEFAULT));
    }
  }
  // The temporaries (if any) go back to the cache when `oa`/`ob` die; the default stream orders
  // their reuse after this GEMM.
}

}  // namespace

void mm_kernel(const KernelArgs& args) {
  check_operands(args, 2, "mm");
  gemm(args, -1, "mm");
}

void bmm_kernel(const KernelArgs& args) {
  check_operands(args, 3, "bmm");
  gemm(args, args.outputs[0].sizes()[0], "bmm");
}

// ---------------------------------------------------------------- cuBLASLt: linear + bias

namespace {

cublasLtHandle_t lt_handle_for(int device) {
  return per_device_handle<cublasLtHandle_t>(
      device, [](cublasLtHandle_t* h) { OF_CUBLAS_CHECK(cublasLtCreate(h)); });
}

// Destroys the cuBLASLt descriptors of one call however it leaves.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

constexpr size_t kLtWorkspace = size_t(4) << 20;

}  // namespace

// NOTE [Linear on cuBLASLt]: out [R, O] = x [R, I] @ w [O, I]^T + b as one cublasLtMatmul whose
// epilogue adds the bias (CUBLASLT_EPILOGUE_BIAS: the bias is a vector over the rows of the
// column-major result, i.e. over O). Row-major out is column-major out^T [O, R] = w (read
// transposed from its [I, O] column-major storage) times x^T ([I, R]). float32 (TF32 when
// allowed), float16 and bfloat16 with float accumulation; false (the caller runs cuBLAS and a
// bias kernel) for float64, an empty reduction dim, pointers cuBLASLt will not take or no
// algorithm from its heuristics.
bool lt_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
               int device) {
  const ScalarType dt = x.dtype();
  if (dt != kFloat32 && dt != kFloat16 && dt != kBFloat16) return false;
  const int64_t R = x.size(0), I = x.size(1), O = w.size(0);
  if (R == 0 || O == 0 || I == 0 || R > INT_MAX || I > INT_MAX || O > INT_MAX) return false;
  if (!x.is_contiguous() || !w.is_contiguous() || !out.is_contiguous()) return false;
  if (bias.defined() &&
      (!bias.is_contiguous() || reinterpret_cast<uintptr_t>(bias.impl()->raw_data()) % 16 != 0))
    return false;
  const cudaDataType_t t = dt == kFloat32 ? CUDA_R_32F : dt == kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
  const bool tf32 =
      dt == kFloat32 && g_core && g_core->allow_tf32_cublas && g_core->allow_tf32_cublas();
  const cublasComputeType_t ct = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream_of(device);
  cublasLtHandle_t lt = lt_handle_for(device);
  LtDescs ds;
  OF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&ds.op, ct, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  OF_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  OF_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias.defined()) {
    const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    const void* bp = bias.impl()->raw_data();
    OF_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    OF_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  OF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ds.a, t, uint64_t(I), uint64_t(O), int64_t(I)));
  OF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ds.b, t, uint64_t(I), uint64_t(R), int64_t(I)));
  OF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ds.d, t, uint64_t(O), uint64_t(R), int64_t(O)));
  OF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&ds.pref));
  const size_t ws_bytes = kLtWorkspace;
  OF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt, ds.op, ds.a, ds.b, ds.d, ds.d, ds.pref, 1, &heur,
                                     &found) != CUBLAS_STATUS_SUCCESS ||
      found == 0)
    return false;
  Storage ws = allocate_storage(heur.workspaceSize ? heur.workspaceSize : 1, device);
  const float one = 1.0f, zero = 0.0f;
  OF_CUBLAS_CHECK(cublasLtMatmul(lt, ds.op, &one, w.impl()->raw_data(), ds.a, x.impl()->raw_data(),
                                 ds.b, &zero, out.impl()->raw_data(), ds.d, out.impl()->raw_data(),
                                 ds.d, &heur.algo, ws->data, heur.workspaceSize, stream));
  return true;
}

}  // namespace oneflow::cuda_module

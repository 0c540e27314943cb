// blas.h (internal): CPU GEMM for the linalg ops, on OpenBLAS for float32/float64.
// NOTE [CPU GEMM operands]: an operand [rows, cols] with strides (rs, cs) is read by BLAS
// without a copy when one inner stride is 1 and the other is at least the matching size:
// cs == 1 -> CblasNoTrans, lda = rs; rs == 1 -> CblasTrans, lda = cs (a transposed view).
// Only operands strided in both dims (or with overlapping rows) are copied to contiguous.
// float16/bfloat16 are widened to float32 and run through sgemm (float accumulation);
// integer dtypes run a plain loop accumulating in int64.
#pragma once
#include <functional>
#include <memory>

#include "kernel_support.h"

namespace oneflow::cpu {

// c = alpha * a @ b + beta * c. a: [m, k] or [batch, m, k]; b: [k, n] or [batch, k, n];
// c: contiguous [m, n] or [batch, m, n]. A batch dim of a or b may have stride 0 (broadcast).
// beta == 0: c is not read (NaN/Inf in c do not propagate). All of a, b, c share one dtype
// (not bool). `op` names the op in errors.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, const Scalar& alpha,
          const Scalar& beta, const char* op);

// NOTE [GEMM epilogues]: c = act(a @ b + bias) with the bias and the activation applied to each
// output tile of the float32 kernel (NOTE [float32 GEMM]) right after its sums, while it is in
// cache: linear's bias without a pass that preloads it into c, and the trace's epilogue rewrite
// (linear_act) without a pass over the output for the activation, a constant scale and a
// residual add (each of those rounded apart, as the unfused mul and add). The bias enters as the
// first k block's C with beta 1, as a preloaded bias does, and `act` is the elementwise op's
// own function (cpu/elementwise.h, act_fn), so the result is bitwise the unfused one. Returns
// false, doing nothing, where the float32 kernel does not run this GEMM (another dtype, no
// AVX-512, a batch, aliasing): the caller then preloads the bias, runs gemm() and the
// activation's kernel. bias: [n] or undefined; act: null for none.
// Then (linear_act's scale and residual) c = c * scale (unless 1) and c = c + residual (a
// tensor of c's shape, or undefined), each rounded as the unfused mul and add round.
bool gemm_epilogue(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& bias,
                   void (*act)(float*, int64_t), float scale = 1.f,
                   const Tensor& residual = Tensor());

// Row-major GEMM on dense buffers, for kernels that loop over GEMMs (the fused LSTM layer):
// c = alpha * op(a) @ op(b) + beta * c with op(x) = x^T when its flag is set; m, n, k > 0.
// Threads follow of::set_num_threads like gemm().
void gemm_raw(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm_raw(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
              int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// OpenBLAS single-threaded for a scope, restored afterwards: for kernels that call GEMMs from
// several pool threads at once (attention's heads, convolution's image parts). OpenBLAS would
// otherwise thread each call, and its threads fight the pool's for the same cores (a 2-core
// GPT step spent a third of its time in exec_blas_async). No-op inside a parallel region.
class SerialBlas {
 public:
  SerialBlas();
  ~SerialBlas();
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;

 private:
  bool active_;
};

// NOTE [Prepacked weights]: a kernel's transformed form of a constant operand (a replay names
// it: constant_operand_storage()), made by make() once per storage, view, storage version and
// kind, held (up to 4 GiB in all) while the storage lives and its version is unchanged.
enum class ConstantForm { kBf16Strips, kF32Strips, kInt8Weight };
std::shared_ptr<const void> cached_form(const Tensor& b, ConstantForm kind,
                                        const std::function<std::shared_ptr<const void>()>& make,
                                        const std::function<size_t(const void*)>& bytes_of);

// Whether a [rows, cols] matrix with these strides can be handed to BLAS without a copy.
bool blas_compatible(int64_t rows, int64_t cols, int64_t rs, int64_t cs);
// The same, saying how: transposed or not, and the leading dimension.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool& trans, int64_t& ld);

}  // namespace oneflow::cpu

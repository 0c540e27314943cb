// blas.h (internal): CPU GEMM for the linalg ops, on OpenBLAS for float32/float64.
// NOTE [CPU GEMM operands]: an operand [rows, cols] with strides (rs, cs) is read by BLAS
// without a copy when one inner stride is 1 and the other is at least the matching size:
// cs == 1 -> CblasNoTrans, lda = rs; rs == 1 -> CblasTrans, lda = cs (a transposed view).
// Only operands strided in both dims (or with overlapping rows) are copied to contiguous.
// float16/bfloat16 are widened to float32 and run through sgemm (float accumulation);
// integer dtypes run a plain loop accumulating in int64.
#pragma once
#include "dispatch.h"

namespace oneflow::cpu {

// c = alpha * a @ b + beta * c. a: [m, k] or [batch, m, k]; b: [k, n] or [batch, k, n];
// c: contiguous [m, n] or [batch, m, n]. A batch dim of a or b may have stride 0 (broadcast).
// beta == 0: c is not read (NaN/Inf in c do not propagate). All of a, b, c share one dtype
// (not bool). `op` names the op in errors.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, const Scalar& alpha,
          const Scalar& beta, const char* op);

// Whether a [rows, cols] matrix with these strides can be handed to BLAS without a copy.
bool blas_compatible(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

}  // namespace oneflow::cpu

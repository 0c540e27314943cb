// linalg.cpp: the CPU kernels of mm, bmm, addmm and baddbmm: cpu::gemm (OpenBLAS, NOTE [CPU
// GEMM operands] in cpu/blas.h); the ops themselves are in ops/linalg.cpp.
#include "cpu/linalg.h"

#include "cpu/blas.h"
#include "cpu/loops.h"
#include "ops/linalg_attrs.h"

namespace oneflow::cpu {
namespace {

// out = beta * self + alpha * (a @ b), self broadcast to out
template <bool Batched> void addmm_kernel(const KernelArgs& k) {
  const Tensor& self = k.inputs[0];
  const Tensor& out = k.outputs[0];
  const Scalar& beta = AddmmAttrs::get<"beta">(k.attrs);
  const Scalar& alpha = AddmmAttrs::get<"alpha">(k.attrs);
  const bool beta_zero = beta.to_double() == 0.0;
  if (!beta_zero && !self.is_same(out) && out.numel() > 0) {
    // out <- self (broadcast); the GEMM then scales it by beta in place.
    dispatch_dtype(out.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu_kernel<T, T>(out, {&self}, [](compute_t<T> x) { return x; });
    });
  }
  gemm(k.inputs[1], k.inputs[2], out, alpha, beta_zero ? Scalar(0) : beta,
       Batched ? "baddbmm" : "addmm");
}

}  // namespace

void mm(const KernelArgs& k) {
  gemm(k.inputs[0], k.inputs[1], k.outputs[0], Scalar(1), Scalar(0), "mm");
}
void bmm(const KernelArgs& k) {
  gemm(k.inputs[0], k.inputs[1], k.outputs[0], Scalar(1), Scalar(0), "bmm");
}
void addmm(const KernelArgs& k) { addmm_kernel<false>(k); }
void baddbmm(const KernelArgs& k) { addmm_kernel<true>(k); }

}  // namespace oneflow::cpu

// kernel_support.h (internal): what a kernel may use besides its arguments: fresh tensors and views
// made directly (no dispatch), the copy and fill kernels of a device called directly, the scope
// dispatch runs a kernel in, and the constant operand a replay names (NOTE [Prepacked weights]).
// NOTE [No kernel dispatches]: nothing here dispatches an op, and a kernel file includes no
// public op API (tools/check_layers.py, the `layers` test, enforces it).
#pragma once
#include "oneflow/guards.h"
#include "op_def.h"
#include "shapes.h"

namespace oneflow {

// NOTE [Prepacked weights]: a replayed step whose op has a weight_input that is a root of the
// graph (a parameter or constant) no node of the graph writes runs its kernel inside a
// ConstantOperandScope naming that input's storage. A kernel may then keep a transformed copy
// of the operand (the bfloat16 GEMM's packed strips, cpu/gemm_bf16.cpp) keyed by the storage,
// the view and the storage's version, and reuse it while the version is unchanged: every write
// through the library (in-place ops, copy_, an optimizer step, a replay's in-place write)
// bumps the version. Memory written behind the library's back (through data_ptr) is not seen,
// as ONNX Runtime's and a frozen TorchScript module's prepacked weights do not see it. Eager
// calls never name a constant operand.
const StorageImpl* constant_operand_storage();
class ConstantOperandScope {
 public:
  explicit ConstantOperandScope(const StorageImpl* s);
  ~ConstantOperandScope();
  ConstantOperandScope(const ConstantOperandScope&) = delete;
  ConstantOperandScope& operator=(const ConstantOperandScope&) = delete;

 private:
  const StorageImpl* prev_;
};

// What dispatch wraps around a kernel call (executors that call kernels directly use it too):
// no autograd recording, and ops the kernel dispatches count as internal.
// (inline: dispatch asks on every op; >0 while a kernel runs)
namespace kernel_detail {
extern OF_TLS int t_kernel_depth;
}  // namespace kernel_detail
struct KernelScope {
  NoGradGuard no_grad;
  KernelScope() { ++kernel_detail::t_kernel_depth; }
  ~KernelScope() { --kernel_detail::t_kernel_depth; }
  KernelScope(const KernelScope&) = delete;
};
// True while a kernel runs on this thread (ops it dispatches are internal, never recorded).
inline bool in_kernel() { return kernel_detail::t_kernel_depth > 0; }

// Allocates an uninitialized contiguous tensor (no autograd, no dispatch).
Tensor make_empty(IntArrayRef sizes, ScalarType dtype, Device device);
// A new impl viewing `base`'s storage.
Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t offset);
// For kernels, which dispatch no op (NOTE [No kernel dispatches]): `t` itself when it is
// row-major, else a row-major scratch copy made by the copy kernel of t's device, nothing
// dispatched (the scratch lives while the kernel holds it).
Tensor kernel_contiguous(const Tensor& t);
// For kernels: a fresh row-major copy of `t` converted to `dtype` (the copy kernel; clone()
// when dtype is t's own).
Tensor kernel_cast(const Tensor& t, ScalarType dtype);
// For kernels: a view of `t` with its dims taken in `perm` order (t.permute(perm)), or the last
// two swapped (t.t() of a matrix), made directly.
Tensor kernel_permute(const Tensor& t, IntArrayRef perm);
Tensor kernel_transpose(const Tensor& t);
// For kernels: a row-major `t` seen with other sizes of the same count (t.view(sizes)), and
// t.narrow(dim, start, length); views made directly.
Tensor kernel_view(const Tensor& t, IntArrayRef sizes);
Tensor kernel_narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
// For kernels: dst <- src (cast to dst's dtype, broadcast) by the copy_ kernel of dst's device,
// and t <- v by the fill_ kernel; nothing dispatched.
void kernel_copy_into(const Tensor& dst, const Tensor& src);
void kernel_fill(const Tensor& t, const Scalar& v);

// The epilogue activation form named `name` (linear_act's `act`; NOTE [Epilogue activations]
// in op_def.h) among the table's ops' forms; null when no op has it. epilogue_act_names: all of
// them, comma-separated (for error messages).
const EpilogueAct* find_epilogue_act(std::string_view name);
std::string epilogue_act_names();

}  // namespace oneflow

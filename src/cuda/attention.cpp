// attention.cpp: scaled_dot_product_attention (forward and backward) on CUDA, composed from
// the module's kernels (cuBLAS batched GEMMs, softmax pieces, the dropout draw), with the CPU
// kernel's semantics (src/ops/nn.cpp, NOTE [Attention kernel]): the same mask kinds, causal
// rule, saved log-sum-exp and dropout elements (Philox word (b * L + i) * S + j of the op's
// counters). It materializes the [B, L, S] scores: the fused (flash) kernel is not built.
#include <cmath>
#include <limits>

#include "cuda/cuda_check.h"
#include "cuda/module.h"
#include "oneflow/ops.h"

namespace oneflow::cuda_module {
namespace {

// inputs q [B, L, E], k [B, S, E], v [B, S, Ev], mask; attrs scale, is_causal, dropout_p,
// seed, offset, mask_kind (0 none, 1 bool: true attends, 2 additive)
struct Scores {
  Tensor s;  // scaled scores, -inf where not attended
  Tensor z;  // dropout multiplier (undefined without dropout)
};

Scores scores(const Tensor& q, const Tensor& k, const Tensor& mask, const Attrs& a) {
  const int64_t L = q.size(1), S = k.size(1);
  Scores r;
  Tensor s = q.bmm(k.transpose(1, 2)) * a.f(0);
  const int64_t kind = a.i(5);
  const double ninf = -std::numeric_limits<double>::infinity();
  if (kind == 2) s = s + mask;
  Tensor allowed;
  if (kind == 1) allowed = mask;
  if (a.b(1)) {
    const TensorOptions o = TensorOptions(kInt64).device(q.device());
    const Tensor causal = arange(0, S, 1, o).view({1, S}) <= arange(0, L, 1, o).view({L, 1});
    allowed = allowed.defined() ? (allowed & causal) : causal;
  }
  if (allowed.defined()) s = where(allowed, s, Scalar(ninf));
  r.s = s;
  const double p = a.f(2);
  // NOTE [Attention draw map] (src/ops/nn.cpp): a piece of a larger batch drawing as its place
  // in the whole; global CUDA tensors need NCCL, which is not built, so no caller makes one yet
  OF_CHECK(p == 0 || a.size() <= 6 || a.ints(6).empty(),
           "[scaled_dot_product_attention] cuda: dropout with a draw map (attention split by "
           "heads over ranks) is not built on CUDA");
  if (p > 0)
    r.z =
        dropout_multiplier(s.sizes(), q.dtype(), q.device(), p, uint64_t(a.i(3)), uint64_t(a.i(4)));
  return r;
}

void check_device(const Tensor& q, const char* op) {
  OF_CHECK(q.is_cuda(), "[{}] cuda: the query is on {}", op, q.device().str());
  OF_CHECK(q.dtype() == kFloat32 || q.dtype() == kFloat64,
           "[{}] cuda: float32 or float64 (16-bit inputs are widened by dispatch), got {}", op,
           dtype_name(q.dtype()));
}

void sdpa_kernel(const KernelArgs& k) {
  const Tensor &q = k.inputs[0], &key = k.inputs[1], &v = k.inputs[2];
  check_device(q, "scaled_dot_product_attention");
  DeviceGuard guard(resolve_device(q.device().index()));
  const Scores sc = scores(q, key, k.inputs[3], k.attrs);
  const Tensor lse = logsumexp(sc.s, {2}, true);  // all -inf row: -inf (its output is NaN)
  Tensor p = (sc.s - lse).exp();
  if (sc.z.defined()) p = p * sc.z;
  Tensor(k.outputs[0]).copy_(p.bmm(v));
  Tensor(k.outputs[1]).copy_(lse.view({q.size(0), q.size(1)}));
}

// inputs dout, q, k, v, mask, out, lse; outputs dq, dk, dv
void sdpa_backward_kernel(const KernelArgs& k) {
  const Tensor &dout = k.inputs[0], &q = k.inputs[1], &key = k.inputs[2], &v = k.inputs[3];
  const Tensor &out = k.inputs[5], &lse_in = k.inputs[6];
  check_device(q, "scaled_dot_product_attention_backward");
  DeviceGuard guard(resolve_device(q.device().index()));
  const Scores sc = scores(q, key, k.inputs[4], k.attrs);
  const Tensor lse = lse_in.view({q.size(0), q.size(1), 1});
  // rows with no attended key (lse not finite) get no gradient, as on the CPU
  const Tensor finite = lse.abs() < Scalar(std::numeric_limits<double>::infinity());
  const Tensor p = where(finite, (sc.s - lse).exp(), Scalar(0.0));
  const Tensor d = (dout * out).sum({2}, true);
  Tensor dpz = dout.bmm(v.transpose(1, 2));
  Tensor pz = p;
  if (sc.z.defined()) {
    dpz = dpz * sc.z;
    pz = p * sc.z;
  }
  const Tensor ds = p * (dpz - d) * k.attrs.f(0);
  Tensor(k.outputs[0]).copy_(ds.bmm(key));
  Tensor(k.outputs[1]).copy_(ds.transpose(1, 2).bmm(q));
  Tensor(k.outputs[2]).copy_(pz.transpose(1, 2).bmm(dout));
}

}  // namespace

void register_attention_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("scaled_dot_product_attention", sdpa_kernel);
  core.set_cuda_kernel("scaled_dot_product_attention_backward", sdpa_backward_kernel);
}

}  // namespace oneflow::cuda_module

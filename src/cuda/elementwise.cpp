// elementwise.cpp: host side of the CUDA elementwise kernels (NOTE [CUDA elementwise] in
// elementwise.cu): operand strides against the output's shape, dims coalesced, the launch on
// the current stream, and the kernels the module puts into the op table's CUDA slots.
#include <array>
#include <string_view>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/elementwise.h"
#include "cuda/module.h"
#include "cuda/strided_copy.h"
#include "ops/core_attrs.h"
#include "ops/elementwise_attrs.h"
#include "ops/functors.h"
#include "strided_dims.h"

namespace oneflow::cuda_module {
namespace {

struct OpInfo {
  const char* name;
  bool int_unsafe;
};

constexpr OpInfo info_of(ElemOp op) {
  switch (op) {
#define OF_INFO(n, functor) \
  case ElemOp::n:           \
    return {#n, fn::functor::kind == ElemKind::kIntUnsafe};
    OF_CUDA_UNARY_OPS(OF_INFO)
    OF_CUDA_BINARY_OPS(OF_INFO)
#undef OF_INFO
    case ElemOp::gelu_erf:
    case ElemOp::gelu_tanh:
      return {"gelu", false};
    case ElemOp::where:
      return {"where", false};
    case ElemOp::fill:
      return {"fill_", false};
    case ElemOp::identity:
      return {"copy_", false};
    case ElemOp::pow_scalar:
      return {"pow_scalar", false};
    case ElemOp::clamp:
      return {"clamp", false};
  }
  return {"elementwise", false};
}

// The params of out = f(ins...) with each input broadcast to out's shape.
ElemParams make_params(const Tensor& out, const TensorList& ins, ScalarType dtype, const char* op) {
  const size_t nd = size_t(out.dim());
  const size_t nops = ins.size() + 1;
  OF_CHECK(ins.size() <= size_t(kMaxElemInputs), "[{}] cuda: at most {} inputs", op,
           kMaxElemInputs);
  // strides[k][d] against out's dims, in elements; 0 where input k broadcasts
  std::vector<std::array<int64_t, kMaxElemInputs + 1>> st(nd);
  std::vector<int64_t> sz(nd);
  for (size_t d = 0; d < nd; ++d) {
    sz[d] = out.size(int64_t(d));
    st[d][0] = out.impl()->strides[d];
  }
  for (size_t k = 0; k < ins.size(); ++k) {
    const TensorImpl& t = *ins[k].impl();
    const size_t tn = t.sizes.size();
    OF_CHECK(tn <= nd, "[{}] cuda: input {} has more dims ({}) than the output ({})", op, k, tn,
             nd);
    for (size_t d = 0; d < nd; ++d) {
      if (d < nd - tn) {
        st[d][k + 1] = 0;
        continue;
      }
      const size_t td = d - (nd - tn);
      st[d][k + 1] = t.sizes[td] == 1 && sz[d] != 1 ? 0 : t.strides[td];
    }
  }
  // NOTE [Merged dims]
  std::vector<int64_t> msz;
  std::vector<std::array<int64_t, kMaxElemInputs + 1>> mst;
  for (const MergedDim& m : merge_dims(
           nd, nops, [&](size_t d) { return sz[d]; },
           [&](size_t k, size_t d) { return st[d][k]; })) {
    msz.push_back(m.size);
    mst.push_back(st[m.inner]);
  }
  OF_CHECK(msz.size() <= size_t(kMaxElemDims),
           "[{}] cuda: at most {} non-mergeable dims, got output shape {}", op, kMaxElemDims,
           shape_str(out.sizes()));
  ElemParams p;
  p.ndim = int(msz.size());
  p.nin = int(ins.size());
  p.numel = out.numel();
  p.dtype = dtype;
  p.out = out.impl()->raw_data();
  for (size_t k = 0; k < ins.size(); ++k) p.in[k] = ins[k].impl()->raw_data();
  p.contiguous = true;
  for (size_t d = 0; d < msz.size(); ++d) {
    p.sizes[d] = msz[d];
    for (size_t k = 0; k < nops; ++k) {
      p.strides[k][d] = mst[d][k];
      p.contiguous = p.contiguous && d + 1 == msz.size() && mst[d][k] == 1;
    }
  }
  return p;
}

void run(ElemOp op, const Tensor& out, const TensorList& ins, ScalarType dtype,
         const ElemParams* scalars = nullptr) {
  const OpInfo info = info_of(op);
  OF_CHECK(out.is_cuda(), "[{}] cuda: the output is on {}", info.name, out.device().str());
  if (info.int_unsafe && !is_floating_point(dtype))
    fail(
        "[{}] cuda: {} operands are not supported on CUDA (integer division by zero has no "
        "error path on the device); compute in a floating dtype or on the CPU",
        info.name, dtype_name(dtype));
  if (out.numel() == 0) return;
  const int device = resolve_device(out.device().index());
  DeviceGuard guard(device);
  ElemParams p = make_params(out, ins, dtype, info.name);
  if (scalars) {
    for (int i = 0; i < 4; ++i) p.scalars[i] = scalars->scalars[i];
    p.iscalar = scalars->iscalar;
    p.bscalar = scalars->bscalar;
  }
  check_launch(launch_elementwise(op, p, current_stream_of(device)), info.name, dtype);
}

void run(ElemOp op, const KernelArgs& k, ScalarType dtype) {
  run(op, k.outputs[0], k.inputs, dtype);
}

}  // namespace

void add_into(const Tensor& out, const Tensor& b) { run(ElemOp::add, out, {out, b}, out.dtype()); }
void elementwise_into(ElemOp op, const Tensor& out, const TensorList& ins, ScalarType dtype,
                      double scalar) {
  ElemParams s;
  s.scalars[0] = scalar;
  run(op, out, ins, dtype, &s);
}

namespace {

template <ElemOp Op> void elementwise_kernel(const KernelArgs& k) {
  run(Op, k, k.inputs[0].dtype());
}

void gelu_kernel(const KernelArgs& k) {
  const bool tanh = elem_attrs::GeluAttrs::get<"approximate">(k.attrs) == "tanh";
  run(tanh ? ElemOp::gelu_tanh : ElemOp::gelu_erf, k, k.inputs[0].dtype());
}

void where_kernel(const KernelArgs& k) {
  OF_CHECK(k.inputs.size() == 3 && k.inputs[0].dtype() == kBool,
           "[where] cuda: expected a bool condition and two values");
  run(ElemOp::where, k, k.inputs[1].dtype());
}

// fill_ {value} writes inputs[0] in place (any strides); full {size, value, ...} its output.
void fill_into(const Tensor& out, const Scalar& v) {
  ElemParams s;
  s.scalars[0] = v.to_double();
  s.iscalar = v.to_long();
  s.bscalar = v.to_bool();
  run(ElemOp::fill, out, {}, out.dtype(), &s);
}
void fill__kernel(const KernelArgs& k) {
  fill_into(k.outputs[0], core_detail::FillAttrs::get<"value">(k.attrs));
}
void full_kernel(const KernelArgs& k) {
  fill_into(k.outputs[0], core_detail::FullAttrs::get<"value">(k.attrs));
}

// copy_(self, src): src broadcast into self's strides, converted to self's dtype first (a dense
// temporary) when the dtypes differ.
void copy__kernel(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  Tensor src = k.inputs[1];
  OF_CHECK(src.is_cuda() && src.device() == out.device(),
           "[copy_] cuda: the source is on {}, the destination on {} (to() moves between devices)",
           src.device().str(), out.device().str());
  if (src.dtype() != out.dtype()) {
    Tensor tmp = make_empty(src.sizes(), out.dtype(), src.device());
    DeviceGuard guard(resolve_device(src.device().index()));
    copy_to_contiguous(*src.impl(), out.dtype(), tmp.impl()->raw_data(), "copy_");
    src = tmp;
  }
  run(ElemOp::identity, out, {src}, out.dtype());
}

void pow_scalar_kernel(const KernelArgs& k) {
  ElemParams s;
  s.scalars[0] = elem_attrs::PowScalarAttrs::get<"exponent">(k.attrs);
  run(ElemOp::pow_scalar, k.outputs[0], k.inputs, k.inputs[0].dtype(), &s);
}
void clamp_kernel(const KernelArgs& k) {
  ElemParams s;
  using A = elem_attrs::ClampAttrs;
  s.scalars[0] = A::get<"has_min">(k.attrs);
  s.scalars[1] = A::get<"min">(k.attrs);
  s.scalars[2] = A::get<"has_max">(k.attrs);
  s.scalars[3] = A::get<"max">(k.attrs);
  run(ElemOp::clamp, k.outputs[0], k.inputs, k.inputs[0].dtype(), &s);
}

}  // namespace

void register_elementwise_kernels(const cuda_backend::CoreV1& core) {
#define OF_REGISTER(n, functor) core.set_cuda_kernel(#n, elementwise_kernel<ElemOp::n>);
  OF_CUDA_UNARY_OPS(OF_REGISTER)
  OF_CUDA_BINARY_OPS(OF_REGISTER)
#undef OF_REGISTER
  core.set_cuda_kernel("gelu", gelu_kernel);
  core.set_cuda_kernel("where", where_kernel);
  core.set_cuda_kernel("fill_", fill__kernel);
  core.set_cuda_kernel("full", full_kernel);
  core.set_cuda_kernel("copy_", copy__kernel);
  core.set_cuda_kernel("pow_scalar", pow_scalar_kernel);
  core.set_cuda_kernel("clamp", clamp_kernel);
}

}  // namespace oneflow::cuda_module

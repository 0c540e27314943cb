// Unary elementwise ops. Each is one row: functor (ops/functors.h), dtype rule, VJP.
#include <array>
#include <cmath>

#include "autograd/node.h"
#include "global/rules.h"
#include "cpu/elementwise.h"
#include "ops/elementwise.h"
#include "ops/elementwise_attrs.h"

namespace oneflow {

namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kInvSqrt2 = 0.70710678118654752440;

TensorList neg_vjp(const VjpCtx&, const TensorList& g) { return {-g[0]}; }
TensorList abs_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] * c.input(0).sign()}; }
TensorList zero_vjp(const VjpCtx&, const TensorList& g) { return {zeros_like(g[0])}; }
TensorList exp_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] * c.output(0)}; }
TensorList exp2_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] * c.output(0) * kLn2}; }
TensorList log_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] / c.input(0)}; }
TensorList log2_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] / (c.input(0) * kLn2)}; }
TensorList log1p_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] / (c.input(0) + 1)}; }
TensorList expm1_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] * (c.output(0) + 1)}; }
TensorList sqrt_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] / (2 * c.output(0))}; }
TensorList rsqrt_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  return {g[0] * (y * y * y) * -0.5};
}
TensorList reciprocal_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  return {-g[0] * y * y};
}
TensorList square_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] * c.input(0) * 2}; }
TensorList sin_vjp(const VjpCtx& c, const TensorList& g) { return {g[0] * c.input(0).cos()}; }
TensorList cos_vjp(const VjpCtx& c, const TensorList& g) { return {-g[0] * c.input(0).sin()}; }
TensorList tan_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  return {g[0] * (1 + y * y)};
}
TensorList tanh_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  return {g[0] * (1 - y * y)};
}
TensorList sigmoid_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor y = c.output(0);
  return {g[0] * y * (1 - y)};
}
TensorList relu_vjp(const VjpCtx& c, const TensorList& g) {
  // a select, as libtorch's threshold_backward: one pass fewer than a 0/1 cast and a multiply,
  // and a NaN gradient does not leak through a zero output
  return {where(c.output(0) > 0, g[0], Scalar(0.0))};
}
TensorList silu_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  Tensor s = x.sigmoid();
  return {g[0] * s * (1 + x * (1 - s))};
}
TensorList erf_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  return {g[0] * kTwoOverSqrtPi * (-(x * x)).exp()};
}
TensorList gelu_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  if (elem_attrs::GeluAttrs::get<"approximate">(c.attrs()) == "tanh") {
    constexpr double k = 0.79788456080286535588, a = 0.044715;
    Tensor inner = k * (x + a * x * x * x);
    Tensor th = inner.tanh();
    Tensor d_inner = k * (1 + 3 * a * x * x);
    return {g[0] * (0.5 * (1 + th) + 0.5 * x * (1 - th * th) * d_inner)};
  }
  Tensor cdf = 0.5 * (1 + (x * kInvSqrt2).erf());
  Tensor pdf = kInvSqrt2Pi * (-0.5 * x * x).exp();
  return {g[0] * (cdf + x * pdf)};
}

// A row's functor gives its name (for generated fused kernels), its kind (NOTE [Elementwise
// kinds]) and the CPU kernel that kind takes (cpu/elementwise.h).
#define OF_ROW_FN(F) "fn::" #F, fn::F::kind, cpu::unary_kernel_of<fn::F>()

struct UnaryRow {
  const char* name;
  const char* functor;  // ops/functors.h, for generated fused kernels
  ElemKind kind;
  KernelFn cpu;
  VjpFn vjp;
  uint32_t save_in, save_out;  // masks: in(0), out(0)
  AutocastPolicy autocast = AutocastPolicy::kNone;
  bool rejects_bool = false;  // a kAll op PyTorch refuses for bool tensors
  const SbpRule* sbp = nullptr;
  // NOTE [Epilogue activations]: the op's one form (its name: the row's), or none
  EpilogueAct epilogue = {};
};

// An epilogue form of a row: its loops, the name filled in from the row's at registration.
#define OF_EPILOGUE(F) cpu::epilogue_act_of<fn::F>(nullptr)

// One row per op, one line per row (kept as written by clang-format).
// clang-format off
constexpr UnaryRow kRows[] = {
    {"neg", OF_ROW_FN(Neg), neg_vjp, 0, 0, AutocastPolicy::kNone, true, &sbp_rules::kLinearElementwise},
    {"abs", OF_ROW_FN(Abs), abs_vjp, in(0), 0, AutocastPolicy::kNone, true},
    {"sign", OF_ROW_FN(Sign), zero_vjp, 0, 0, AutocastPolicy::kNone, true},
    {"exp", OF_ROW_FN(Exp), exp_vjp, 0, out(0), AutocastPolicy::kFloat32},
    {"exp2", OF_ROW_FN(Exp2), exp2_vjp, 0, out(0)},
    {"log", OF_ROW_FN(Log), log_vjp, in(0), 0, AutocastPolicy::kFloat32},
    {"log2", OF_ROW_FN(Log2), log2_vjp, in(0), 0, AutocastPolicy::kFloat32},
    {"log1p", OF_ROW_FN(Log1p), log1p_vjp, in(0), 0, AutocastPolicy::kFloat32},
    {"expm1", OF_ROW_FN(Expm1), expm1_vjp, 0, out(0), AutocastPolicy::kFloat32},
    {"sqrt", OF_ROW_FN(Sqrt), sqrt_vjp, 0, out(0)},
    {"rsqrt", OF_ROW_FN(Rsqrt), rsqrt_vjp, 0, out(0), AutocastPolicy::kFloat32},
    {"reciprocal", OF_ROW_FN(Reciprocal), reciprocal_vjp, 0, out(0), AutocastPolicy::kFloat32},
    {"square", OF_ROW_FN(Square), square_vjp, in(0), 0, AutocastPolicy::kNone, true},
    {"sin", OF_ROW_FN(Sin), sin_vjp, in(0), 0},
    {"cos", OF_ROW_FN(Cos), cos_vjp, in(0), 0},
    {"tan", OF_ROW_FN(Tan), tan_vjp, 0, out(0), AutocastPolicy::kFloat32},
    {"tanh", OF_ROW_FN(Tanh), tanh_vjp, 0, out(0), AutocastPolicy::kNone, false, nullptr, OF_EPILOGUE(Tanh)},
    {"sigmoid", OF_ROW_FN(Sigmoid), sigmoid_vjp, 0, out(0)},
    {"relu", OF_ROW_FN(Relu), relu_vjp, 0, out(0), AutocastPolicy::kNone, true, nullptr, OF_EPILOGUE(Relu)},
    {"silu", OF_ROW_FN(Silu), silu_vjp, in(0), 0, AutocastPolicy::kNone, false, nullptr, OF_EPILOGUE(Silu)},
    {"erf", OF_ROW_FN(Erf), erf_vjp, in(0), 0},
    {"floor", OF_ROW_FN(Floor), zero_vjp, 0, 0},
    {"ceil", OF_ROW_FN(Ceil), zero_vjp, 0, 0},
    {"round", OF_ROW_FN(Round), zero_vjp, 0, 0},
    {"trunc", OF_ROW_FN(Trunc), zero_vjp, 0, 0},
    {"isnan", OF_ROW_FN(IsNan), nullptr, 0, 0},
    {"isinf", OF_ROW_FN(IsInf), nullptr, 0, 0},
    {"logical_not", OF_ROW_FN(LogicalNot), nullptr, 0, 0},
};
// clang-format on

const OpDef& row_op(size_t i) { return oneflow::row_op<kRows>(i); }

// The row named `name`, found at compile time (a name no row has does not compile).
consteval int row_id(std::string_view name) { return find_row<kRows>(name); }

// Input dtype handling: float ops promote integers to float32; integer-capable ops reject bool
// where PyTorch does.
Tensor unary_input(const UnaryRow& r, const Tensor& x) {
  OF_CHECK(x.defined(), "[{}] input tensor is undefined", r.name);
  if (r.kind == ElemKind::kFloat && !x.is_floating_point()) return x.to(kFloat32);
  if (r.rejects_bool && x.dtype() == kBool)
    fail("[{}] is not supported for bool tensors (got a bool tensor of shape {})", r.name,
         shape_str(x.sizes()));
  return x;
}

Tensor run_unary(int idx, const Tensor& x) {
  const UnaryRow& r = kRows[idx];
  return dispatch1(row_op(size_t(idx)), {unary_input(r, x)});
}

Tensor& run_unary_(int idx, Tensor& x) {
  const UnaryRow& r = kRows[idx];
  Tensor in = unary_input(r, x);
  if (in.dtype() != x.dtype())
    fail("[{}_] result type {} can't be cast to the desired output type {}", r.name,
         dtype_name(in.dtype()), dtype_name(x.dtype()));
  dispatch(row_op(size_t(idx)), {x}, {}, &x);
  return x;
}

}  // namespace

void register_unary_ops() {
  for (size_t i = 0; i < std::size(kRows); ++i) {
    const UnaryRow& r = kRows[i];
    OpDef d;
    d.name = r.name;
    d.functor = r.functor;
    d.elem_kind = r.kind;
    d.traits = kElementwise | kInplaceOk;
    d.infer_meta = r.kind == ElemKind::kCompare || r.kind == ElemKind::kLogical
                       ? elementwise_bool_meta
                       : elementwise_meta;
    d.cpu = r.cpu;
    d.vjp = r.vjp;
    d.save_inputs = r.save_in;
    d.save_outputs = r.save_out;
    d.sbp_rule = r.sbp;  // neg: -P is P
    d.autocast = r.autocast;
    if (r.epilogue.rows_f32) {
      d.epilogue_acts = {r.epilogue};
      d.epilogue_acts[0].name = r.name;
    }
    register_op(std::move(d));
  }
  register_op({.name = "gelu",
               .traits = kElementwise | kInplaceOk,
               .attr_names = elem_attrs::GeluAttrs::names(),
               .attr_types = elem_attrs::GeluAttrs::types(),
               .infer_meta = elementwise_meta,
               .cpu = cpu::gelu,
               .vjp = gelu_vjp,
               .save_inputs = in(0),
               .fused_form = FusedForm::kGelu,
               // approximate 'none' and 'tanh' (NOTE [Epilogue activations])
               .epilogue_acts = {cpu::epilogue_act_of<fn::GeluErf>("gelu"),
                                 cpu::epilogue_act_of<fn::GeluTanh>("gelu_tanh")},
               .epilogue_form = [](const Attrs& a) -> size_t {
                 return elem_attrs::GeluAttrs::get<"approximate">(a) == "tanh" ? 1 : 0;
               }});
}

#define OF_UNARY_DEF(name)                                     \
  Tensor name(const Tensor& x) {                               \
    constexpr int idx = row_id(#name);                         \
    return run_unary(idx, x);                                  \
  }                                                            \
  Tensor& name##_(Tensor& x) {                                 \
    constexpr int idx = row_id(#name);                         \
    return run_unary_(idx, x);                                 \
  }                                                            \
  Tensor Tensor::name() const { return oneflow::name(*this); } \
  Tensor& Tensor::name##_() { return oneflow::name##_(*this); }
// clang-format off
OF_UNARY_DEF(neg)
OF_UNARY_DEF(abs)
OF_UNARY_DEF(sign)
OF_UNARY_DEF(exp)
OF_UNARY_DEF(exp2)
OF_UNARY_DEF(log)
OF_UNARY_DEF(log2)
OF_UNARY_DEF(log1p)
OF_UNARY_DEF(expm1)
OF_UNARY_DEF(sqrt)
OF_UNARY_DEF(rsqrt)
OF_UNARY_DEF(reciprocal)
OF_UNARY_DEF(square)
OF_UNARY_DEF(sin)
OF_UNARY_DEF(cos)
OF_UNARY_DEF(tan)
OF_UNARY_DEF(tanh)
OF_UNARY_DEF(sigmoid)
OF_UNARY_DEF(relu)
OF_UNARY_DEF(silu)
OF_UNARY_DEF(erf)
OF_UNARY_DEF(floor)
OF_UNARY_DEF(ceil)
OF_UNARY_DEF(round)
OF_UNARY_DEF(trunc)
// clang-format on
#undef OF_UNARY_DEF

Tensor isnan(const Tensor& x) {
  constexpr int idx = row_id("isnan");
  return run_unary(idx, x);
}
Tensor isinf(const Tensor& x) {
  constexpr int idx = row_id("isinf");
  return run_unary(idx, x);
}
Tensor logical_not(const Tensor& x) {
  constexpr int idx = row_id("logical_not");
  return run_unary(idx, x);
}
Tensor Tensor::isnan() const { return oneflow::isnan(*this); }
Tensor Tensor::isinf() const { return oneflow::isinf(*this); }
Tensor Tensor::logical_not() const { return oneflow::logical_not(*this); }

Tensor gelu(const Tensor& x, std::string_view approximate) {
  const OpDef& op = OF_OP("gelu");
  OF_CHECK(approximate == "none" || approximate == "tanh",
           "[gelu] approximate must be 'none' or 'tanh', got '{}'", approximate);
  Tensor in = x.is_floating_point() ? x : x.to(kFloat32);
  return dispatch1(op, {in}, elem_attrs::GeluAttrs::make(std::string(approximate)));
}
Tensor Tensor::gelu(std::string_view approximate) const {
  return oneflow::gelu(*this, approximate);
}

}  // namespace oneflow

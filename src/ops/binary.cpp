// Binary (and ternary) elementwise ops with broadcasting and PyTorch type promotion.
#include <array>
#include <cmath>

#include "autograd/node.h"
#include "global/rules.h"
#include "cpu/elementwise.h"
#include "ops/elementwise.h"
#include "ops/elementwise_attrs.h"

namespace oneflow {

namespace {

TensorList add_vjp(const VjpCtx& c, const TensorList& g) {
  return {sum_to_size(g[0], c.input_sizes(0)), sum_to_size(g[0], c.input_sizes(1))};
}
TensorList sub_vjp(const VjpCtx& c, const TensorList& g) {
  return {sum_to_size(g[0], c.input_sizes(0)), sum_to_size(-g[0], c.input_sizes(1))};
}
TensorList mul_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor ga, gb;
  if (c.needs_input_grad(0)) ga = sum_to_size(g[0] * c.input(1), c.input_sizes(0));
  if (c.needs_input_grad(1)) gb = sum_to_size(g[0] * c.input(0), c.input_sizes(1));
  return {ga, gb};
}
TensorList div_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor b = c.input(1);
  Tensor ga, gb;
  if (c.needs_input_grad(0)) ga = sum_to_size(g[0] / b, c.input_sizes(0));
  if (c.needs_input_grad(1)) gb = sum_to_size(-g[0] * c.input(0) / (b * b), c.input_sizes(1));
  return {ga, gb};
}
TensorList div_round_vjp(const VjpCtx& c, const TensorList& g) {
  return {sum_to_size(zeros_like(g[0]), c.input_sizes(0)),
          sum_to_size(zeros_like(g[0]), c.input_sizes(1))};
}
// maximum/minimum: the gradient goes to the selected operand, split evenly on ties.
TensorList max_min_vjp(const VjpCtx& c, const TensorList& g, bool is_max) {
  Tensor a = c.input(0), b = c.input(1);
  Tensor a_wins = (is_max ? a > b : a < b).to(g[0].dtype());
  Tensor tie = (a == b).to(g[0].dtype());
  Tensor wa = a_wins + 0.5 * tie;
  Tensor wb = 1 - wa;
  return {sum_to_size(g[0] * wa, c.input_sizes(0)), sum_to_size(g[0] * wb, c.input_sizes(1))};
}
TensorList maximum_vjp(const VjpCtx& c, const TensorList& g) { return max_min_vjp(c, g, true); }
TensorList minimum_vjp(const VjpCtx& c, const TensorList& g) { return max_min_vjp(c, g, false); }
TensorList fmod_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor q = div(c.input(0), c.input(1), "trunc");
  return {sum_to_size(g[0], c.input_sizes(0)), sum_to_size(-g[0] * q, c.input_sizes(1))};
}
TensorList remainder_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor q = div(c.input(0), c.input(1), "floor");
  return {sum_to_size(g[0], c.input_sizes(0)), sum_to_size(-g[0] * q, c.input_sizes(1))};
}
TensorList atan2_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor a = c.input(0), b = c.input(1);
  Tensor r = a * a + b * b;
  return {sum_to_size(g[0] * b / r, c.input_sizes(0)),
          sum_to_size(-g[0] * a / r, c.input_sizes(1))};
}
TensorList pow_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor a = c.input(0), b = c.input(1);
  Tensor ga, gb;
  if (c.needs_input_grad(0)) {
    Tensor d = b * pow(a, b - 1);
    d = where(b == 0, zeros_like(d), d);
    ga = sum_to_size(g[0] * d, c.input_sizes(0));
  }
  if (c.needs_input_grad(1)) {
    Tensor d = c.output(0) * a.log();
    d = where((a == 0) & (b >= 0), zeros_like(d), d);
    gb = sum_to_size(g[0] * d, c.input_sizes(1));
  }
  return {ga, gb};
}
TensorList pow_scalar_vjp(const VjpCtx& c, const TensorList& g) {
  double e = elem_attrs::PowScalarAttrs::get<"exponent">(c.attrs());
  if (e == 0) return {zeros_like(g[0])};
  return {g[0] * e * pow(c.input(0), e - 1)};
}
TensorList where_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor cond = c.input(0);
  Tensor z = zeros_like(g[0]);
  Tensor gx, gy;
  if (c.needs_input_grad(1)) gx = sum_to_size(where(cond, g[0], z), c.input_sizes(1));
  if (c.needs_input_grad(2)) gy = sum_to_size(where(cond, z, g[0]), c.input_sizes(2));
  return {Tensor(), gx, gy};
}
TensorList clamp_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor x = c.input(0);
  using A = elem_attrs::ClampAttrs;
  const Attrs& a = c.attrs();
  Tensor keep = ones_like(x, kBool);
  if (A::get<"has_min">(a)) keep = keep & (x >= A::get<"min">(a));
  if (A::get<"has_max">(a)) keep = keep & (x <= A::get<"max">(a));
  return {g[0] * keep.to(g[0].dtype())};
}

void pow_scalar_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  elementwise_meta(in, a, out);
}
void where_meta(const TensorList& in, const Attrs&, MetaList& out) {
  OF_CHECK(in[0].dtype() == kBool, "[where] condition must be a bool tensor, got {}",
           dtype_name(in[0].dtype()));
  // where() casts x and y to their result type; the kernel reads both as x's dtype
  OF_CHECK(in[1].dtype() == in[2].dtype(), "[where] expected x and y of one dtype, got {} and {}",
           dtype_name(in[1].dtype()), dtype_name(in[2].dtype()));
  DimVector s = broadcast_shapes(broadcast_shapes(in[0].sizes(), in[1].sizes()), in[2].sizes());
  out.push_back({std::move(s), {}, 0, in[1].dtype(), in[1].device()});
}
#define OF_ROW_FN(F) "fn::" #F, fn::F::kind, cpu::binary_kernel_of<fn::F>()

bool bool_result(ElemKind k) { return k == ElemKind::kCompare || k == ElemKind::kLogical; }

struct BinaryRow {
  const char* name;
  const char* functor;  // ops/functors.h, for generated fused kernels
  ElemKind kind;
  KernelFn cpu;
  VjpFn vjp;
  uint32_t save_in;
  uint32_t save_out;
  // SBP rules beside the VJPs (NOTE [SBP rules]): sums of partial sums stay partial, and a
  // partial sum times (or over) a broadcast value is still one.
  const SbpRule* sbp = nullptr;
  AutocastPolicy autocast = AutocastPolicy::kNone;
  FoldIdentity identities[2] = {};  // x+0, 0+x, x-0, x*1, 1*x, x/1 (unused slots: keep -1)
};

constexpr auto kOther = FoldIdentity::kOtherInputIs;
// One row per op, one line per row (kept as written by clang-format).
// clang-format off
constexpr BinaryRow kRows[] = {
    {"add", OF_ROW_FN(Add), add_vjp, 0, 0,
     &sbp_rules::kLinearElementwise, AutocastPolicy::kNone, {{kOther, 0, 0}, {kOther, 1, 0}}},
    {"sub", OF_ROW_FN(Sub), sub_vjp, 0, 0,
     &sbp_rules::kLinearElementwise, AutocastPolicy::kNone, {{kOther, 0, 0}}},
    {"mul", OF_ROW_FN(Mul), mul_vjp, in(0) | in(1), 0,
     &sbp_rules::kBilinearElementwise, AutocastPolicy::kNone, {{kOther, 0, 1}, {kOther, 1, 1}}},
    {"div", OF_ROW_FN(Div), div_vjp, in(0) | in(1), 0,
     &sbp_rules::kLinearInFirstElementwise, AutocastPolicy::kNone, {{kOther, 0, 1}}},
    {"div_trunc", OF_ROW_FN(DivTrunc), div_round_vjp, 0, 0},
    {"div_floor", OF_ROW_FN(DivFloor), div_round_vjp, 0, 0},
    {"maximum", OF_ROW_FN(Maximum), maximum_vjp, in(0) | in(1), 0},
    {"minimum", OF_ROW_FN(Minimum), minimum_vjp, in(0) | in(1), 0},
    {"fmod", OF_ROW_FN(Fmod), fmod_vjp, in(0) | in(1), 0},
    {"remainder", OF_ROW_FN(Remainder), remainder_vjp, in(0) | in(1), 0},
    {"atan2", OF_ROW_FN(Atan2), atan2_vjp, in(0) | in(1), 0},
    {"pow", OF_ROW_FN(Pow), pow_vjp, in(0) | in(1), out(0), nullptr, AutocastPolicy::kFloat32},
    {"eq", OF_ROW_FN(Eq), nullptr, 0, 0},
    {"ne", OF_ROW_FN(Ne), nullptr, 0, 0},
    {"lt", OF_ROW_FN(Lt), nullptr, 0, 0},
    {"le", OF_ROW_FN(Le), nullptr, 0, 0},
    {"gt", OF_ROW_FN(Gt), nullptr, 0, 0},
    {"ge", OF_ROW_FN(Ge), nullptr, 0, 0},
    {"logical_and", OF_ROW_FN(LogicalAnd), nullptr, 0, 0},
    {"logical_or", OF_ROW_FN(LogicalOr), nullptr, 0, 0},
    {"logical_xor", OF_ROW_FN(LogicalXor), nullptr, 0, 0},
};
// clang-format on
// The row named `name`, found at compile time (a name no row has does not compile).
consteval int row_id(std::string_view name) { return find_row<kRows>(name); }
const OpDef& row_op(size_t i) { return oneflow::row_op<kRows>(i); }

ScalarType compute_dtype(const BinaryRow& r, ScalarType common) {
  switch (r.kind) {
    case ElemKind::kFloat:
      return is_floating_point(common) ? common : kFloat32;
    case ElemKind::kLogical:
      return kBool;
    default:
      return common;
  }
}

Device operand_device(const Tensor& a, const Tensor& b) {
  if (a.impl()->is_wrapped_number) return b.device();
  if (b.impl()->is_wrapped_number) return a.device();
  if (a.dim() == 0 && a.is_cpu()) return b.device();  // CPU 0-d tensors mix with any device
  return a.device();
}

Tensor run_binary(int id, const Tensor& a, const Tensor& b) {
  const BinaryRow& r = kRows[id];
  OF_CHECK(a.defined() && b.defined(), "[{}] got an undefined tensor", r.name);
  const TensorImpl *ai = a.impl(), *bi = b.impl();
  if (ai->dtype == bi->dtype && ai->device == bi->device && !ai->is_wrapped_number &&
      !bi->is_wrapped_number && compute_dtype(r, ai->dtype) == ai->dtype &&
      !(id == row_id("sub") && ai->dtype == kBool))
    return dispatch1(row_op(size_t(id)), {a, b});  // the common case: nothing to convert or move
  ScalarType common = a.dtype() == b.dtype() ? a.dtype() : result_type(a, b);
  if (id == row_id("sub") && common == kBool)
    fail(
        "[sub] subtraction, the `-` operator, with two bool tensors is not supported; use "
        "logical_xor() instead (shapes {} and {})",
        shape_str(a.sizes()), shape_str(b.sizes()));
  ScalarType ct = compute_dtype(r, common);
  Device dev = operand_device(a, b);
  Tensor x = prepare_operand(a, ct, dev), y = prepare_operand(b, ct, dev);
  if (x.device() != y.device() && x.dim() == 0 && x.is_cpu()) x = x.to(y.device());
  if (x.device() != y.device() && y.dim() == 0 && y.is_cpu()) y = y.to(x.device());
  return dispatch1(row_op(size_t(id)), {x, y});
}

Tensor& run_binary_(int id, Tensor& self, const Tensor& b) {
  const BinaryRow& r = kRows[id];
  OF_CHECK(self.defined() && b.defined(), "[{}_] got an undefined tensor", r.name);
  ScalarType common = result_type(self, b);
  ScalarType ct = compute_dtype(r, common);
  if (bool_result(r.kind)) ct = common;
  if (!can_cast(ct, self.dtype()))
    fail("[{}_] result type {} can't be cast to the desired output type {}", r.name, dtype_name(ct),
         dtype_name(self.dtype()));
  if (bool_result(r.kind)) {
    // The result is bool: compute out of place, then write back with conversion.
    Tensor res = run_binary(id, self, b);
    self.copy_(res);
    return self;
  }
  Tensor y = prepare_operand(b, self.dtype(), self.device());
  dispatch(row_op(size_t(id)), {self, y}, {}, &self);
  return self;
}

int div_id(std::optional<std::string_view> mode) {
  if (!mode) return row_id("div");
  if (*mode == "trunc") return row_id("div_trunc");
  if (*mode == "floor") return row_id("div_floor");
  fail("[div] expected rounding_mode to be one of None, 'trunc' or 'floor' but found '{}'", *mode);
}

}  // namespace

void register_binary_ops() {
  for (size_t i = 0; i < std::size(kRows); ++i) {
    const BinaryRow& r = kRows[i];
    OpDef d;
    d.name = r.name;
    d.functor = r.functor;
    d.elem_kind = r.kind;
    d.traits = kElementwise | kInplaceOk;
    d.infer_meta = bool_result(r.kind) ? elementwise_bool_meta : elementwise_meta;
    d.cpu = r.cpu;
    d.vjp = r.vjp;
    d.save_inputs = r.save_in;
    d.save_outputs = r.save_out;
    d.sbp_rule = r.sbp;
    d.autocast = r.autocast;
    for (const FoldIdentity& f : r.identities)
      if (f.keep >= 0) d.fold_identities.push_back(f);
    register_op(std::move(d));
  }
  register_op({.name = "pow_scalar",
               .traits = kElementwise | kInplaceOk,
               .attr_names = elem_attrs::PowScalarAttrs::names(),
               .attr_types = elem_attrs::PowScalarAttrs::types(),
               .infer_meta = pow_scalar_meta,
               .cpu = cpu::pow_scalar,
               .vjp = pow_scalar_vjp,
               .save_inputs = in(0),
               .autocast = AutocastPolicy::kFloat32,
               .fold_identities = {{FoldIdentity::kScalarAttrIs, 0, 1.0}},
               .fused_form = FusedForm::kPowScalar});
  register_op({.name = "where",
               .traits = kElementwise,
               .infer_meta = where_meta,
               .cpu = cpu::where,
               .vjp = where_vjp,
               .save_inputs = in(0),
               .nondiff_inputs = in(0),
               .fused_form = FusedForm::kWhere});
  register_op({.name = "clamp",
               .traits = kElementwise | kInplaceOk,
               .attr_names = elem_attrs::ClampAttrs::names(),
               .attr_types = elem_attrs::ClampAttrs::types(),
               .infer_meta = elementwise_meta,
               .cpu = cpu::clamp,
               .vjp = clamp_vjp,
               .save_inputs = in(0),
               .fused_form = FusedForm::kClamp});
}

// ---------------------------------------------------------------- public functions

#define OF_BINARY_DEF(name, id)                                                                   \
  Tensor name(const Tensor& a, const Tensor& b) { return run_binary(id, a, b); }                  \
  Tensor name(const Tensor& a, const Scalar& b) { return run_binary(id, a, scalar_operand(b)); }  \
  Tensor Tensor::name(const Tensor& o) const { return run_binary(id, *this, o); }                 \
  Tensor Tensor::name(const Scalar& o) const { return run_binary(id, *this, scalar_operand(o)); } \
  Tensor& Tensor::name##_(const Tensor& o) { return run_binary_(id, *this, o); }                  \
  Tensor& Tensor::name##_(const Scalar& o) { return run_binary_(id, *this, scalar_operand(o)); }
OF_BINARY_DEF(mul, row_id("mul"))
OF_BINARY_DEF(maximum, row_id("maximum"))
OF_BINARY_DEF(minimum, row_id("minimum"))
OF_BINARY_DEF(fmod, row_id("fmod"))
OF_BINARY_DEF(remainder, row_id("remainder"))
OF_BINARY_DEF(atan2, row_id("atan2"))
OF_BINARY_DEF(eq, row_id("eq"))
OF_BINARY_DEF(ne, row_id("ne"))
OF_BINARY_DEF(lt, row_id("lt"))
OF_BINARY_DEF(le, row_id("le"))
OF_BINARY_DEF(gt, row_id("gt"))
OF_BINARY_DEF(ge, row_id("ge"))
OF_BINARY_DEF(logical_and, row_id("logical_and"))
OF_BINARY_DEF(logical_or, row_id("logical_or"))
OF_BINARY_DEF(logical_xor, row_id("logical_xor"))
#undef OF_BINARY_DEF

namespace {
bool is_one(const Scalar& s) { return s.to_double() == 1.0; }
Tensor scaled(const Tensor& b, const Scalar& alpha) { return is_one(alpha) ? b : b * alpha; }
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return run_binary(row_id("add"), a, scaled(b, alpha));
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return run_binary(row_id("add"), a,
                    scalar_operand(is_one(alpha) ? b : Scalar(b.to_double() * alpha.to_double())));
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return run_binary(row_id("sub"), a, scaled(b, alpha));
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return run_binary(row_id("sub"), a,
                    scalar_operand(is_one(alpha) ? b : Scalar(b.to_double() * alpha.to_double())));
}
Tensor rsub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return sub(b, a, alpha); }
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return run_binary(row_id("sub"), scalar_operand(b), scaled(a, alpha));
}
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> mode) {
  return run_binary(div_id(mode), a, b);
}
Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string_view> mode) {
  return run_binary(div_id(mode), a, scalar_operand(b));
}
Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor y = scaled(b, alpha);
  ScalarType ct = result_type(a, y);
  Device dev = operand_device(a, y);
  dispatch(row_op(row_id("add")), {prepare_operand(a, ct, dev), prepare_operand(y, ct, dev)}, {},
           &out);
  return out;
}
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b) {
  ScalarType ct = result_type(a, b);
  Device dev = operand_device(a, b);
  dispatch(row_op(row_id("mul")), {prepare_operand(a, ct, dev), prepare_operand(b, ct, dev)}, {},
           &out);
  return out;
}

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const {
  return oneflow::add(*this, o, alpha);
}
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const {
  return oneflow::add(*this, o, alpha);
}
Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) {
  return run_binary_(row_id("add"), *this, scaled(o, alpha));
}
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) {
  return run_binary_(row_id("add"), *this,
                     scalar_operand(is_one(alpha) ? o : Scalar(o.to_double() * alpha.to_double())));
}
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const {
  return oneflow::sub(*this, o, alpha);
}
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const {
  return oneflow::sub(*this, o, alpha);
}
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) {
  return run_binary_(row_id("sub"), *this, scaled(o, alpha));
}
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) {
  return run_binary_(row_id("sub"), *this,
                     scalar_operand(is_one(alpha) ? o : Scalar(o.to_double() * alpha.to_double())));
}
Tensor Tensor::div(const Tensor& o, std::optional<std::string_view> m) const {
  return oneflow::div(*this, o, m);
}
Tensor Tensor::div(const Scalar& o, std::optional<std::string_view> m) const {
  return oneflow::div(*this, o, m);
}
Tensor& Tensor::div_(const Tensor& o, std::optional<std::string_view> m) {
  return run_binary_(div_id(m), *this, o);
}
Tensor& Tensor::div_(const Scalar& o, std::optional<std::string_view> m) {
  return run_binary_(div_id(m), *this, scalar_operand(o));
}

Tensor pow(const Tensor& base, const Tensor& exponent) {
  return run_binary(row_id("pow"), base, exponent);
}
Tensor pow(const Tensor& base, const Scalar& e) {
  OF_CHECK(base.defined(), "[pow] got an undefined tensor");
  ScalarType dt = result_type(base, scalar_operand(e));
  if (!is_floating_point(dt) && e.is_integral() && e.to_long() < 0)
    fail("[pow] integers to negative integer powers are not allowed (base {}, exponent {})",
         dtype_name(base.dtype()), e.to_long());
  return dispatch1(OF_OP("pow_scalar"), {cast_if_needed(base, dt)},
                   elem_attrs::PowScalarAttrs::make(e.to_double()));
}
Tensor pow(const Scalar& base, const Tensor& exponent) {
  return run_binary(row_id("pow"), scalar_operand(base), exponent);
}
Tensor Tensor::pow(const Tensor& e) const { return oneflow::pow(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return oneflow::pow(*this, e); }
Tensor& Tensor::pow_(const Scalar& e) {
  ScalarType dt = result_type(*this, scalar_operand(e));
  if (!can_cast(dt, dtype()))
    fail("[pow_] result type {} can't be cast to the desired output type {}", dtype_name(dt),
         dtype_name(dtype()));
  dispatch(OF_OP("pow_scalar"), {*this}, elem_attrs::PowScalarAttrs::make(e.to_double()), this);
  return *this;
}

Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  OF_CHECK(cond.defined() && x.defined() && y.defined(), "[where] got an undefined tensor");
  OF_CHECK(cond.dtype() == kBool, "[where] condition must be a bool tensor, got {}",
           dtype_name(cond.dtype()));
  ScalarType ct = result_type(x, y);
  Device dev = cond.device();
  if (!x.impl()->is_wrapped_number && !(x.dim() == 0 && x.is_cpu())) dev = x.device();
  else if (!y.impl()->is_wrapped_number && !(y.dim() == 0 && y.is_cpu())) dev = y.device();
  Tensor xx = prepare_operand(x, ct, dev), yy = prepare_operand(y, ct, dev);
  if (xx.device() != dev && xx.dim() == 0) xx = xx.to(dev);
  if (yy.device() != dev && yy.dim() == 0) yy = yy.to(dev);
  return dispatch1(OF_OP("where"), {cond, xx, yy});
}
Tensor where(const Tensor& cond, const Scalar& x, const Tensor& y) {
  return where(cond, scalar_operand(x), y);
}
Tensor where(const Tensor& cond, const Tensor& x, const Scalar& y) {
  return where(cond, x, scalar_operand(y));
}
Tensor where(const Tensor& cond, const Scalar& x, const Scalar& y) {
  return where(cond, scalar_operand(x), scalar_operand(y));
}
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return oneflow::where(condition, *this, other);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  OF_CHECK(mask.defined() && mask.dtype() == kBool, "[masked_fill] expected a bool mask, got {}",
           mask.defined() ? dtype_name(mask.dtype()) : "undefined");
  DimVector b = broadcast_shapes(x.sizes(), mask.sizes());
  if (!(IntArrayRef(b) == x.sizes()))
    fail("[masked_fill] mask of shape {} cannot be broadcast to the input shape {}",
         shape_str(mask.sizes()), shape_str(x.sizes()));
  Tensor v = wrap_scalar(value, x.dtype(), x.device());
  return dispatch1(OF_OP("where"), {mask, v, x});
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  OF_CHECK(value.dim() == 0,
           "[masked_fill] only supports a 0-dimensional value tensor, got shape {}",
           shape_str(value.sizes()));
  OF_CHECK(mask.defined() && mask.dtype() == kBool, "[masked_fill] expected a bool mask");
  DimVector b = broadcast_shapes(x.sizes(), mask.sizes());
  if (!(IntArrayRef(b) == x.sizes()))
    fail("[masked_fill] mask of shape {} cannot be broadcast to the input shape {}",
         shape_str(mask.sizes()), shape_str(x.sizes()));
  return dispatch1(OF_OP("where"), {mask, cast_if_needed(value, x.dtype()).to(x.device()), x});
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& v) const {
  return oneflow::masked_fill(*this, mask, v);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& v) {
  Tensor r = oneflow::masked_fill(*this, mask, v);
  if (requires_grad() || r.requires_grad()) {
    // Express the in-place fill through where so autograd sees it.
    Tensor vt = wrap_scalar(v, dtype(), device());
    dispatch(OF_OP("where"), {mask, vt, *this}, {}, this);
  } else {
    copy_(r);
  }
  return *this;
}

Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  return start + weight * (end - start);
}
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  return start + weight * (end - start);
}
Tensor Tensor::lerp(const Tensor& end, const Scalar& w) const {
  return oneflow::lerp(*this, end, w);
}
Tensor Tensor::lerp(const Tensor& end, const Tensor& w) const {
  return oneflow::lerp(*this, end, w);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  OF_CHECK(x.defined(), "[clamp] got an undefined tensor");
  OF_CHECK(min || max, "[clamp] at least one of 'min' or 'max' must not be None");
  OF_CHECK(x.dtype() != kBool, "[clamp] is not supported for bool tensors");
  ScalarType dt = x.dtype();
  if (!x.is_floating_point() &&
      ((min && min->is_floating_point()) || (max && max->is_floating_point())))
    dt = kFloat32;
  return dispatch1(OF_OP("clamp"), {cast_if_needed(x, dt)},
                   elem_attrs::ClampAttrs::make(bool(min), min ? min->to_double() : 0.0, bool(max),
                                                max ? max->to_double() : 0.0));
}
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  OF_CHECK((min && min->defined()) || (max && max->defined()),
           "[clamp] at least one of 'min' or 'max' must not be None");
  Tensor r = x;
  if (min && min->defined()) r = maximum(r, *min);
  if (max && max->defined()) r = minimum(r, *max);
  return r;
}
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  OF_CHECK(min || max, "[clamp_] at least one of 'min' or 'max' must not be None");
  dispatch(OF_OP("clamp"), {x},
           elem_attrs::ClampAttrs::make(bool(min), min ? min->to_double() : 0.0, bool(max),
                                        max ? max->to_double() : 0.0),
           &x);
  return x;
}
Tensor clamp_min(const Tensor& x, const Scalar& m) { return clamp(x, m, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& m) { return clamp(x, std::nullopt, m); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return oneflow::clamp(*this, min, max);
}
Tensor Tensor::clamp(const std::optional<Tensor>& min, const std::optional<Tensor>& max) const {
  return oneflow::clamp(*this, min, max);
}
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  return oneflow::clamp_(*this, min, max);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return isclose(a, b, rtol, atol, equal_nan).all().item<bool>();
}
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  OF_CHECK(a.dtype() == b.dtype(), "[isclose] expected tensors of the same dtype, got {} and {}",
           dtype_name(a.dtype()), dtype_name(b.dtype()));
  NoGradGuard ng;
  Tensor ad = a.to(kFloat64), bd = b.to(kFloat64);
  Tensor close = (ad - bd).abs() <= (atol + rtol * bd.abs());
  close = close | (ad == bd);
  if (equal_nan) close = close | (ad.isnan() & bd.isnan());
  return close;
}
bool equal(const Tensor& a, const Tensor& b) {
  if (!(a.sizes() == b.sizes()) || a.dtype() != b.dtype()) return false;
  return eq(a, b).all().item<bool>();
}

// ---------------------------------------------------------------- operators
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, const Tensor& b) { return run_binary(row_id("add"), a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) {
  return run_binary(row_id("add"), a, scalar_operand(b));
}
Tensor operator+(const Scalar& a, const Tensor& b) {
  return run_binary(row_id("add"), b, scalar_operand(a));
}
Tensor operator-(const Tensor& a, const Tensor& b) { return run_binary(row_id("sub"), a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) {
  return run_binary(row_id("sub"), a, scalar_operand(b));
}
Tensor operator-(const Scalar& a, const Tensor& b) {
  return run_binary(row_id("sub"), scalar_operand(a), b);
}
Tensor operator*(const Tensor& a, const Tensor& b) { return run_binary(row_id("mul"), a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) {
  return run_binary(row_id("mul"), a, scalar_operand(b));
}
Tensor operator*(const Scalar& a, const Tensor& b) {
  return run_binary(row_id("mul"), b, scalar_operand(a));
}
Tensor operator/(const Tensor& a, const Tensor& b) { return run_binary(row_id("div"), a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) {
  return run_binary(row_id("div"), a, scalar_operand(b));
}
Tensor operator/(const Scalar& a, const Tensor& b) {
  return run_binary(row_id("div"), scalar_operand(a), b);
}
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return logical_xor(a, b); }
Tensor operator~(const Tensor& a) { return logical_not(a); }

}  // namespace oneflow

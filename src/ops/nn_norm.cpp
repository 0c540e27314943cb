// Normalization ops: layer_norm, group_norm and rms_norm (the row norms) and batch_norm,
// with their fused backward ops: meta, VJPs, registration (kernels: src/cpu/norm.cpp, NOTE
// [nn kernels] in cpu/nn.cpp), and their public functions (synchronized batch norm over
// global tensors among them).
#include <algorithm>
#include <limits>

#include "autocast.h"
#include "cpu/norm.h"
#include "global/rules.h"
#include "oneflow/ops_nn.h"
#include "ops/index_common.h"
#include "ops/nn_common.h"
#include "ops/nn_op_helpers.h"

namespace oneflow {
using namespace nn_detail;
namespace {

// ================================================================ row norms (layer/group/rms)
// (geometry: NOTE [Row norm geometry] in ops/nn_common.h)

// inputs: x, weight, bias (rms: x, weight); outputs: y, mean, rstd (rms: y, rstd).
template <int Mode> void norm_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = norm_name(Mode);
  const Tensor& x = in[0];
  check_float(op, x, "input");
  NormGeom g = norm_geom(Mode, x.sizes(), a);
  check_param(in[1], x, g.param_shape, op, "weight");
  if (Mode != kRms) check_param(in[2], x, g.param_shape, op, "bias");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  if (Mode != kRms) out.push_back({{g.M}, {}, 0, x.dtype(), x.device()});
  out.push_back({{g.M}, {}, 0, x.dtype(), x.device()});
}

// Backward inputs: dy, x, weight, mean, rstd (rms: no mean, passed undefined);
// outputs: gx, gweight, gbias (param-shaped; zero-filled when that parameter is absent).
// Dispatched directly (or from a loaded graph) its inputs are arbitrary: every one the kernel
// reads with x's geometry is checked here.
template <int Mode> void norm_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const std::string name = std::string(norm_name(Mode)) + "_backward";
  const char* op = name.c_str();
  const Tensor& x = in[1];
  check_float(op, x, "input");
  NormGeom g = norm_geom(Mode, x.sizes(), a);
  check_saved(in[0], x, x.sizes(), op, "grad_output");
  check_param(in[2], x, g.param_shape, op, "weight");
  const DimVector rows{g.M};
  if (Mode == kRms) check_param(in[3], x, rows, op, "mean");  // rms_norm has none: unused
  else check_saved(in[3], x, rows, op, "mean");
  check_saved(in[4], x, rows, op, "rstd");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({g.param_shape, {}, 0, x.dtype(), x.device()});
  out.push_back({g.param_shape, {}, 0, x.dtype(), x.device()});
}

template <int Mode> TensorList norm_vjp(const VjpCtx& c, const TensorList& g) {
  const bool has_w = NormAttrs::get<"has_weight">(c.attrs());
  Tensor w = has_w ? c.input(1) : Tensor();
  Tensor mean = Mode == kRms ? Tensor() : c.output(1);
  Tensor rstd = c.output(Mode == kRms ? 1 : 2);
  const OpDef& bop = Mode == kLayer   ? OF_OP("layer_norm_backward")
                     : Mode == kGroup ? OF_OP("group_norm_backward")
                                      : OF_OP("rms_norm_backward");
  TensorList r = dispatch(bop, {g[0], c.input(0), w, mean, rstd}, c.attrs());
  TensorList res;
  res.push_back(c.needs_input_grad(0) ? r[0] : Tensor());
  res.push_back(c.needs_input_grad(1) ? r[1] : Tensor());
  if (Mode != kRms) res.push_back(c.needs_input_grad(2) ? r[2] : Tensor());
  return res;
}

// add_layer_norm / add_rms_norm (NOTE [Add and norm] in src/trace/rewrite_add_norm.cpp, which makes
// them): inputs x, residual (x's shape, dtype and device), weight[, bias]; attrs as the norm's
// and write_sum; outputs y, sum (x's shape when write_sum, else empty), [mean,] rstd.
template <int Mode> void add_norm_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = Mode == kLayer ? "add_layer_norm" : "add_rms_norm";
  const Tensor& x = in[0];
  check_float(op, x, "input");
  check_saved(in[1], x, x.sizes(), op, "residual");
  TensorList rest{x, in[2]};
  if (Mode != kRms) rest.push_back(in[3]);
  norm_meta<Mode>(rest, a, out);
  const bool write_sum = AddNormAttrs::get<"write_sum">(a);
  out.insert(out.begin() + 1,
             {write_sum ? x.sizes().dims() : DimVector{0}, {}, 0, x.dtype(), x.device()});
}

// embedding_layer_norm (NOTE [Embeddings and norm] in cpu/norm.cpp; the add_norm rewrite makes
// it): inputs table0, ids0, table1, ids1[, table2, ids2] (tables [V_k, H] of one float dtype,
// ids int64/int32 broadcasting together to the rows), weight, bias ([H], per has_weight /
// has_bias); attrs as layer_norm's over the last dim; outputs y [rows..., H], mean, rstd.
void emb_norm_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "embedding_layer_norm";
  const Tensor& t0 = in[0];
  check_defined(op, t0, "table 0");
  check_float(op, t0, "table 0");
  if (t0.dim() != 2)
    fail("[{}] table 0 must be 2-D [rows, dim], got {}", op, shape_str(t0.sizes()));
  const int n = in[4].defined() || in[5].defined() ? 3 : 2;
  DimVector rows;
  for (int k = 0; k < n; ++k) {
    const Tensor &t = in[size_t(2 * k)], &ids = in[size_t(2 * k + 1)];
    const std::string tn = fmt::format("table {}", k), in_ = fmt::format("ids {}", k);
    check_defined(op, t, tn.c_str());
    check_defined(op, ids, in_.c_str());
    if (t.dim() != 2 || t.size(1) != t0.size(1) || t.dtype() != t0.dtype() ||
        t.device() != t0.device())
      fail("[{}] {} must be a {} [rows, {}] table on {} as table 0, got {} {} on {}", op, tn,
           dtype_name(t0.dtype()), t0.size(1), t0.device().str(), dtype_name(t.dtype()),
           shape_str(t.sizes()), t.device().str());
    index_detail::check_index_dtype(ids, op, true, in_.c_str());
    if (ids.device() != t0.device())
      fail("[{}] {} is on {}, the tables on {}", op, in_, ids.device().str(), t0.device().str());
    // the rows: the ids' shapes broadcast together
    const IntArrayRef is = ids.sizes();
    const size_t nd = std::max(rows.size(), is.size());
    DimVector b(nd, 1);
    for (size_t d = 0; d < nd; ++d) {
      const int64_t x = d + rows.size() >= nd ? rows[d + rows.size() - nd] : 1;
      const int64_t y = d + is.size() >= nd ? is[d + is.size() - nd] : 1;
      if (x != y && x != 1 && y != 1)
        fail("[{}] {} of shape {} does not broadcast with the other ids, {}", op, in_,
             shape_str(is), shape_str(rows));
      b[d] = x == 1 ? y : x;
    }
    rows = k == 0 ? DimVector(is.begin(), is.end()) : b;
    const int64_t num = t.size(0);
    if (ids.is_cpu() && !ids.is_global() && ids.numel() > 0)  // global: checked on the pieces
      index_detail::for_each_index(ids, [&](int64_t v) {
        if (v < 0 || v >= num)
          fail("[{}] index {} of {} is out of range for table {} of shape {} ({} rows)", op, v, in_,
               k, shape_str(t.sizes()), num);
      });
  }
  DimVector shape = rows;
  shape.push_back(t0.size(1));
  const NormGeom g = norm_geom(kLayer, shape, a);
  if (g.param_shape != DimVector{t0.size(1)})
    fail("[{}] normalizes over the last dim (axis {}), got axis {}", op, shape.size() - 1,
         NormAttrs::get<"axis">(a));
  check_param(in[6], t0, g.param_shape, op, "weight");
  check_param(in[7], t0, g.param_shape, op, "bias");
  out.push_back({shape, {}, 0, t0.dtype(), t0.device()});
  out.push_back({{g.M}, {}, 0, t0.dtype(), t0.device()});
  out.push_back({{g.M}, {}, 0, t0.dtype(), t0.device()});
}

// ================================================================ batch norm
// inputs: x [N, C, *], weight, bias, running_mean, running_var (each optional [C]);
// attrs: training, eps, has_weight; outputs: y, save_mean, save_invstd, batch var (unbiased).

void bn_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  check_float("batch_norm", x, "input");
  if (x.dim() < 2)
    fail("[batch_norm] expected an input of at least 2 dims (N, C[, *]), got shape {}",
         shape_str(x.sizes()));
  const int64_t C = x.size(1);
  const DimVector cs{C};
  check_param(in[1], x, cs, "batch_norm", "weight");
  check_param(in[2], x, cs, "batch_norm", "bias");
  check_param(in[3], x, cs, "batch_norm", "running_mean");
  check_param(in[4], x, cs, "batch_norm", "running_var");
  const bool training = BatchNormAttrs::get<"training">(a);
  if (!training && (!in[3].defined() || !in[4].defined()))
    fail(
        "[batch_norm] running_mean and running_var must be defined in evaluation mode "
        "(training = false)");
  // values per channel: N times the spatial size (a piece with no channels has them too)
  if (training && x.size(0) * prod_range(x.sizes(), 2, size_t(x.dim())) <= 1)
    fail(
        "[batch_norm] expected more than 1 value per channel when training, got input of "
        "shape {}",
        shape_str(x.sizes()));
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  for (int i = 0; i < 3; ++i) out.push_back({cs, {}, 0, x.dtype(), x.device()});
}

// Backward inputs: dy, x, weight, save_mean, save_invstd; attrs as forward;
// outputs: gx, gweight [C], gbias [C].
void bn_bwd_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const char* op = "batch_norm_backward";
  const Tensor& x = in[1];
  check_float(op, x, "input");
  if (x.dim() < 2)
    fail("[{}] expected an input of at least 2 dims (N, C[, *]), got shape {}", op,
         shape_str(x.sizes()));
  const DimVector cs{x.size(1)};
  check_saved(in[0], x, x.sizes(), op, "grad_output");
  check_param(in[2], x, cs, op, "weight");
  check_saved(in[3], x, cs, op, "save_mean");
  check_saved(in[4], x, cs, op, "save_invstd");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
  out.push_back({{x.size(1)}, {}, 0, x.dtype(), x.device()});
  out.push_back({{x.size(1)}, {}, 0, x.dtype(), x.device()});
}

TensorList bn_vjp(const VjpCtx& c, const TensorList& g) {
  const bool has_w = BatchNormAttrs::get<"has_weight">(c.attrs());
  Tensor w = has_w ? c.input(1) : Tensor();
  TensorList r = dispatch(OF_OP("batch_norm_backward"),
                          {g[0], c.input(0), w, c.output(1), c.output(2)}, c.attrs());
  return {c.needs_input_grad(0) ? r[0] : Tensor(), c.needs_input_grad(1) ? r[1] : Tensor(),
          c.needs_input_grad(2) ? r[2] : Tensor(), Tensor(), Tensor()};
}

}  // namespace

void register_norm_ops() {
  register_op({.name = "layer_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
               .infer_meta = norm_meta<kLayer>,
               .cpu = cpu::layer_norm,
               .vjp = norm_vjp<kLayer>,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1) | out(2),
               .sbp_rule = &sbp_rules::kRowStatistics,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "embedding_layer_norm",
               .traits = kChecksIndices,
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
               .infer_meta = emb_norm_meta,
               .cpu = cpu::embedding_layer_norm,
               .sbp_rule = &sbp_rules::kWholeValues});  // CPU graphs only: no CUDA kernel
  register_op({.name = "add_layer_norm",
               .attr_names = AddNormAttrs::names(),
               .attr_types = AddNormAttrs::types(),
               .infer_meta = add_norm_meta<kLayer>,
               .cpu = cpu::add_layer_norm,
               .sbp_rule = &sbp_rules::kWholeValues,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "add_rms_norm",
               .attr_names = AddNormAttrs::names(),
               .attr_types = AddNormAttrs::types(),
               .infer_meta = add_norm_meta<kRms>,
               .cpu = cpu::add_rms_norm,
               .sbp_rule = &sbp_rules::kWholeValues,
               .contiguous_inputs = kEveryInput});
  register_op({.name = "layer_norm_backward",
               .traits = kWidens16Bit,
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
               .infer_meta = norm_bwd_meta<kLayer>,
               .cpu = cpu::layer_norm_backward,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kRowStatisticsBackward});
  register_op({.name = "group_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = GroupNormAttrs::names(),
               .attr_types = GroupNormAttrs::types(),
               .infer_meta = norm_meta<kGroup>,
               .cpu = cpu::group_norm,
               .vjp = norm_vjp<kGroup>,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1) | out(2),
               .sbp_rule = &sbp_rules::kGroupStatistics,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "group_norm_backward",
               .traits = kWidens16Bit,
               .attr_names = GroupNormAttrs::names(),
               .attr_types = GroupNormAttrs::types(),
               .infer_meta = norm_bwd_meta<kGroup>,
               .cpu = cpu::group_norm_backward,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kGroupStatisticsBackward});
  register_op({.name = "rms_norm",
               .traits = kCheapRecompute | kWidens16Bit,
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
               .infer_meta = norm_meta<kRms>,
               .cpu = cpu::rms_norm,
               .vjp = norm_vjp<kRms>,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1),
               .sbp_rule = &sbp_rules::kRowStatistics,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "rms_norm_backward",
               .traits = kWidens16Bit,
               .attr_names = NormAttrs::names(),
               .attr_types = NormAttrs::types(),
               .infer_meta = norm_bwd_meta<kRms>,
               .cpu = cpu::rms_norm_backward,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kRowStatisticsBackward});
  register_op({.name = "batch_norm",
               .traits = kWidens16Bit,
               .attr_names = BatchNormAttrs::names(),
               .attr_types = BatchNormAttrs::types(),
               .infer_meta = bn_meta,
               .cpu = cpu::batch_norm,
               .vjp = bn_vjp,
               .save_inputs = in(0) | in(1),
               .save_outputs = out(1) | out(2),
               .nondiff_inputs = in(3) | in(4),
               .sbp_rule = &sbp_rules::kChannelStatistics,
               .contiguous_inputs = in(0) | in(1) | in(2),
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "batch_norm_backward",
               .traits = kWidens16Bit,
               .attr_names = BatchNormAttrs::names(),
               .attr_types = BatchNormAttrs::types(),
               .infer_meta = bn_bwd_meta,
               .cpu = cpu::batch_norm_backward,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kChannelStatisticsBackward});
}

// ================================================================ public functions

namespace {
// Whether a global input's samples are spread over ranks: split on a dim other than the
// channels, or a partial sum, on some mesh axis.
bool splits_samples(const Tensor& x) {
  for (const Sbp& s : x.sbp())
    if (s.is_partial_sum() || (s.is_split() && s.dim() != 1)) return true;
  return false;
}
// NOTE [Synchronized batch norm]: training on a batch spread over ranks needs the statistics
// of the whole batch. They are composed from global ops: the per-channel sums of the pieces
// are partial sums, made whole by one small all-reduce each (the mean, then the variance), so
// the activations never move; the normalization runs on each rank's samples and autograd
// differentiates the composition (its gradient needs two more small all-reduces). The
// arithmetic is the single-process batch norm's (biased variance for normalizing, unbiased for
// the running variance), so results agree to rounding.
Tensor synchronized_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var,
                               double momentum, double eps) {
  MetaList metas;  // the kernel's checks on the logical shapes, before any collective
  bn_meta({x, weight, bias, running_mean, running_var}, Attrs{true, eps, weight.defined()}, metas);
  DimVector dims{0}, pshape(size_t(x.dim()), 1);
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const int64_t C = x.size(1);
  pshape[1] = C;
  const double cnt = double(x.numel() / std::max<int64_t>(C, 1));
  // the per-channel statistics made whole (partial sums all-reduced) where they are partial,
  // so that the elementwise steps keep the samples split
  auto whole = [](const Tensor& t) {
    return t.to_global(t.placement(), partial_to_broadcast(t.sbp()));
  };
  Tensor mean = whole(x.sum(dims, true) / cnt);
  Tensor xc = x - mean;
  Tensor var = whole((xc * xc).sum(dims, true) / cnt);
  Tensor y = xc * (var + eps).rsqrt();
  if (weight.defined()) y = y * weight.reshape(pshape);
  if (bias.defined()) y = y + bias.reshape(pshape);
  NoGradGuard ng;
  if (running_mean.defined()) {
    Tensor rm = running_mean;
    rm.mul_(1.0 - momentum).add_(mean.detach().reshape({C}), momentum);
  }
  if (running_var.defined()) {
    Tensor rv = running_var;
    rv.mul_(1.0 - momentum).add_(var.detach().reshape({C}) * (cnt / (cnt - 1)), momentum);
  }
  return y;
}
}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps, bool cudnn_enabled) {
  (void)cudnn_enabled;
  if (!input.defined()) fail("[batch_norm] input is undefined");
  if (!(eps >= 0)) fail("[batch_norm] eps must be non-negative, got {}", eps);
  if (training && input.is_global() && splits_samples(input)) {
    // a composite of public ops: its arguments cast once as dispatch would cast the op's
    Tensor x = input, w = weight, b = bias;
    autocast_detail::autocast_args(OF_OP("batch_norm"), {&x, &w, &b});
    return synchronized_batch_norm(x, w, b, running_mean, running_var, momentum, eps);
  }
  TensorList r = dispatch(OF_OP("batch_norm"), {input, weight, bias, running_mean, running_var},
                          BatchNormAttrs::make(training, eps, weight.defined()));
  if (training && (running_mean.defined() || running_var.defined())) {
    NoGradGuard ng;
    if (running_mean.defined()) {
      Tensor rm = running_mean;
      rm.mul_(1.0 - momentum).add_(r[1], momentum);
    }
    if (running_var.defined()) {
      Tensor rv = running_var;
      rv.mul_(1.0 - momentum).add_(r[3], momentum);
    }
  }
  return r[0];
}

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_float("layer_norm", input, "input");
  const int64_t nd = int64_t(normalized_shape.size());
  bool ok = nd >= 1 && nd <= input.dim();
  for (int64_t i = 0; ok && i < nd; ++i)
    ok = input.size(input.dim() - nd + i) == normalized_shape[size_t(i)];
  if (!ok)
    fail("[layer_norm] normalized_shape {} does not match the trailing dims of input of shape {}",
         shape_str(normalized_shape), shape_str(input.sizes()));
  return dispatch1(OF_OP("layer_norm"), {input, weight, bias},
                   NormAttrs::make(input.dim() - nd, eps, weight.defined(), bias.defined()));
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_float("group_norm", input, "input");
  if (input.dim() < 2)
    fail("[group_norm] expected an input of at least 2 dims (N, C[, *]), got shape {}",
         shape_str(input.sizes()));
  const int64_t C = input.size(1);
  if (num_groups <= 0 || C % num_groups != 0)
    fail(
        "[group_norm] num_groups {} must be positive and divide the number of channels {} "
        "(input shape {})",
        num_groups, C, shape_str(input.sizes()));
  return dispatch1(OF_OP("group_norm"), {input, weight, bias},
                   GroupNormAttrs::make(num_groups, eps, weight.defined(), bias.defined()));
}

Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  check_float("rms_norm", input, "input");
  const int64_t nd = int64_t(normalized_shape.size());
  bool ok = nd >= 1 && nd <= input.dim();
  for (int64_t i = 0; ok && i < nd; ++i)
    ok = input.size(input.dim() - nd + i) == normalized_shape[size_t(i)];
  if (!ok)
    fail("[rms_norm] normalized_shape {} does not match the trailing dims of input of shape {}",
         shape_str(normalized_shape), shape_str(input.sizes()));
  // the machine epsilon of the dtype the op runs in (PyTorch's default: torch.finfo(dtype).eps),
  // after autocast's cast of the input
  const ScalarType dt = autocast_detail::dtype_for(OF_OP("rms_norm"), input);
  const double e = eps.value_or(dt == kFloat32    ? double(std::numeric_limits<float>::epsilon())
                                : dt == kBFloat16 ? 0.0078125     // 2^-7
                                : dt == kFloat16  ? 0.0009765625  // 2^-10
                                                  : std::numeric_limits<double>::epsilon());
  return dispatch1(OF_OP("rms_norm"), {input, weight},
                   NormAttrs::make(input.dim() - nd, e, weight.defined(), false));
}

}  // namespace oneflow

// Losses: cross_entropy (class indices; a fused op with its backward, NOTE [nn kernels] in
// ops/nn.cpp) and the losses written with public ops (nll, mse, l1, smooth l1, binary
// cross entropy with and without logits, kl_div).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autocast.h"
#include "global/rules.h"
#include "oneflow/ops_nn.h"
#include "ops/functors.h"
#include "ops/nn_common.h"

namespace oneflow {
using namespace nn_detail;
namespace {

// ================================================================ cross entropy (class indices)
// inputs: x [N, C, inner] (any rank >= 2; class dim 1), target int64 [N, inner...], weight [C]
// (optional); attrs: reduction, ignore_index, label_smoothing;
// outputs: loss, per-row logsumexp [rows], total weight [] (sum of weights of kept targets).

struct CeGeom {
  int64_t N, C, inner, rows;
};
CeGeom ce_geom(IntArrayRef s) {
  CeGeom g{s[0], s[1], prod_range(s, 2, s.size()), 0};
  g.rows = g.N * g.inner;
  return g;
}

// The checks of cross_entropy() for a direct dispatch (the op takes x of at least 2 dims);
// the class indices' values are checked by the kernels, before they write.
CeGeom ce_check(const Tensor& x, const Tensor& t, const Tensor& w, const Attrs& a, const char* op) {
  check_float(op, x, "input");
  if (x.dim() < 2)
    fail("[{}] expected an input of shape (N, C, d1, ...), got {}", op, shape_str(x.sizes()));
  using A = CrossEntropyAttrs;
  check_reduction(A::get<"reduction">(a), op);
  const double smoothing = A::get<"label_smoothing">(a);
  if (!(smoothing >= 0.0 && smoothing <= 1.0))
    fail("[{}] label_smoothing must be between 0.0 and 1.0, got {}", op, smoothing);
  check_class_targets(x, t, w, A::get<"ignore_index">(a), op, false);
  if (w.defined()) check_param(w, x, DimVector{x.size(1)}, op, "weight");
  return ce_geom(x.sizes());
}

void ce_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Tensor& x = in[0];
  const Tensor& t = in[1];
  const CeGeom g = ce_check(x, t, in[2], a, "cross_entropy");
  const int64_t reduction = CrossEntropyAttrs::get<"reduction">(a);
  if (reduction == Reduction::None) out.push_back({t.sizes().dims(), {}, 0, x.dtype(), x.device()});
  else out.push_back({{}, {}, 0, x.dtype(), x.device()});
  out.push_back({{g.rows}, {}, 0, x.dtype(), x.device()});
  out.push_back({{}, {}, 0, x.dtype(), x.device()});
}

void ce_cpu(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const Tensor t = kernel_contiguous(k.inputs[1]);
  const Tensor w = kernel_contiguous(k.inputs[2]);
  const int64_t reduction = CrossEntropyAttrs::get<"reduction">(k.attrs),
                ignore = CrossEntropyAttrs::get<"ignore_index">(k.attrs);
  const double eps = CrossEntropyAttrs::get<"label_smoothing">(k.attrs);
  const CeGeom g = ce_geom(x.sizes());
  check_target_range(t, g.C, ignore, "cross_entropy", x);
  dispatch_f(x.dtype(), "cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    const int64_t* pt = cptr<int64_t>(t);
    const T* pw = cptr<T>(w);
    T* ploss = mptr<T>(k.outputs[0]);
    T* plse = mptr<T>(k.outputs[1]);
    const int64_t C = g.C, inner = g.inner;
    double wsum_all = 0;
    if (pw)
      for (int64_t c = 0; c < C; ++c) wsum_all += double(pw[c]);
    else wsum_all = double(C);
    // per row: nll (weighted), smoothing term (weighted), weight of the target
    std::vector<double> nll(size_t(g.rows)), smooth(size_t(g.rows)), wt(size_t(g.rows));
    parallel_for(0, g.rows, grain_for(3 * C), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / inner, d = r % inner;
        const T* __restrict p = px + n * C * inner + d;
        T mx = -std::numeric_limits<T>::infinity();
        double lse;
        if (inner == 1) {
          T m[kL];
          for (int l = 0; l < kL; ++l) m[l] = mx;
          int64_t c = 0;
          for (; c + kL <= C; c += kL)
            for (int l = 0; l < kL; ++l) m[l] = p[c + l] > m[l] ? p[c + l] : m[l];
          for (; c < C; ++c) m[0] = p[c] > m[0] ? p[c] : m[0];
          for (int l = 0; l < kL; ++l) mx = m[l] > mx ? m[l] : mx;
          T s[kL] = {};
          c = 0;
          for (; c + kL <= C; c += kL)
            for (int l = 0; l < kL; ++l) s[l] += fn::exp_<T>(p[c + l] - mx);
          double sum = 0;
          for (; c < C; ++c) sum += double(fn::exp_<T>(p[c] - mx));
          for (int l = 0; l < kL; ++l) sum += double(s[l]);
          lse = double(mx) + std::log(sum);
        } else {
          for (int64_t c = 0; c < C; ++c) mx = p[c * inner] > mx ? p[c * inner] : mx;
          double sum = 0;
          for (int64_t c = 0; c < C; ++c) sum += double(fn::exp_<T>(p[c * inner] - mx));
          lse = double(mx) + std::log(sum);
        }
        plse[r] = T(lse);
        const int64_t tr = pt[r];
        if (tr == ignore) {
          nll[size_t(r)] = smooth[size_t(r)] = wt[size_t(r)] = 0;
          continue;
        }
        const double wr = pw ? double(pw[tr]) : 1.0;
        wt[size_t(r)] = wr;
        nll[size_t(r)] = wr * (lse - double(p[tr * inner]));
        if (eps > 0) {
          double sx = 0;
          if (pw)
            for (int64_t c = 0; c < C; ++c) sx += double(pw[c]) * double(p[c * inner]);
          else
            for (int64_t c = 0; c < C; ++c) sx += double(p[c * inner]);
          smooth[size_t(r)] = wsum_all * lse - sx;
        } else {
          smooth[size_t(r)] = 0;
        }
      }
    });
    const double sc = eps / double(C);
    if (reduction == Reduction::None) {
      for (int64_t r = 0; r < g.rows; ++r)
        ploss[r] = T((1 - eps) * nll[size_t(r)] + sc * smooth[size_t(r)]);
      mptr<T>(k.outputs[2])[0] = T(0);
      return;
    }
    double sn = 0, ss = 0, sw = 0;
    for (int64_t r = 0; r < g.rows; ++r) {
      sn += nll[size_t(r)];
      ss += smooth[size_t(r)];
      sw += wt[size_t(r)];
    }
    mptr<T>(k.outputs[2])[0] = T(sw);
    double loss;
    if (reduction == Reduction::Sum) {
      loss = (1 - eps) * sn + sc * ss;
    } else {
      loss = (1 - eps) * (sn / sw);
      // PyTorch: the smoothing term's mean divides by the weight sum when weighted, else by
      // the number of rows (ignored rows included).
      if (eps > 0) loss += sc * (pw ? ss / sw : ss / double(g.rows));
    }
    ploss[0] = T(loss);
  });
}

// Backward inputs: g, x, target, weight, lse, total_weight; output: gx.
void ce_bwd_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const char* op = "cross_entropy_backward";
  const Tensor& x = in[1];
  const CeGeom g = ce_check(x, in[2], in[3], a, op);
  const bool none = CrossEntropyAttrs::get<"reduction">(a) == Reduction::None;
  check_saved(in[0], x, none ? in[2].sizes() : IntArrayRef(), op, "grad_output");
  check_saved(in[4], x, DimVector{g.rows}, op, "logsumexp");
  check_saved(in[5], x, IntArrayRef(), op, "total_weight");
  out.push_back({x.sizes().dims(), {}, 0, x.dtype(), x.device()});
}

void ce_bwd_cpu(const KernelArgs& k) {
  const Tensor go = kernel_contiguous(k.inputs[0]);
  const Tensor x = kernel_contiguous(k.inputs[1]);
  const Tensor t = kernel_contiguous(k.inputs[2]);
  const Tensor w = kernel_contiguous(k.inputs[3]);
  const Tensor lse = kernel_contiguous(k.inputs[4]);
  const int64_t reduction = CrossEntropyAttrs::get<"reduction">(k.attrs),
                ignore = CrossEntropyAttrs::get<"ignore_index">(k.attrs);
  const double eps = CrossEntropyAttrs::get<"label_smoothing">(k.attrs);
  const CeGeom g = ce_geom(x.sizes());
  check_target_range(t, g.C, ignore, "cross_entropy_backward", x);
  dispatch_f(x.dtype(), "cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* pg = cptr<T>(go);
    const T* px = cptr<T>(x);
    const int64_t* pt = cptr<int64_t>(t);
    const T* pw = cptr<T>(w);
    const T* pl = cptr<T>(lse);
    T* pgx = mptr<T>(k.outputs[0]);
    const int64_t C = g.C, inner = g.inner;
    const double tw = double(k.inputs[5].item<T>());
    double wsum_all = 0;
    if (pw)
      for (int64_t c = 0; c < C; ++c) wsum_all += double(pw[c]);
    else wsum_all = double(C);
    const double sc = eps / double(C);
    parallel_for(0, g.rows, grain_for(2 * C), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / inner, d = r % inner;
        const T* __restrict p = px + n * C * inner + d;
        T* __restrict q = pgx + n * C * inner + d;
        const int64_t tr = pt[r];
        if (tr == ignore) {
          for (int64_t c = 0; c < C; ++c) q[c * inner] = T(0);
          continue;
        }
        double gn, gs;  // scales of the nll and smoothing terms for this row
        if (reduction == Reduction::None) {
          gn = gs = double(pg[r]);
        } else if (reduction == Reduction::Sum) {
          gn = gs = double(pg[0]);
        } else {
          gn = double(pg[0]) / tw;
          gs = pw ? gn : double(pg[0]) / double(g.rows);
        }
        const double wr = pw ? double(pw[tr]) : 1.0;
        const double a = (1 - eps) * gn * wr;  // * (p_c - [c == t])
        const double b = sc * gs;              // * (wsum * p_c - w_c)
        const T coef = T(a + b * wsum_all), l = pl[r];
        if (inner == 1) {
          for (int64_t c = 0; c < C; ++c) q[c] = fn::exp_<T>(p[c] - l) * coef;
        } else {
          for (int64_t c = 0; c < C; ++c) q[c * inner] = fn::exp_<T>(p[c * inner] - l) * coef;
        }
        if (b != 0) {
          if (pw)
            for (int64_t c = 0; c < C; ++c) q[c * inner] -= T(b * double(pw[c]));
          else
            for (int64_t c = 0; c < C; ++c) q[c * inner] -= T(b);
        }
        q[tr * inner] -= T(a);
      }
    });
  });
}

TensorList ce_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor w = CrossEntropyAttrs::get<"has_weight">(c.attrs()) ? c.input(2) : Tensor();
  Tensor gx = dispatch1(OF_OP("cross_entropy_backward"),
                        {g[0], c.input(0), c.input(1), w, c.output(1), c.output(2)}, c.attrs());
  return {gx, Tensor(), Tensor()};
}

}  // namespace

void register_loss_ops() {
  register_op({.name = "cross_entropy",
               .traits = kWidens16Bit | kChecksIndices,
               .attr_names = CrossEntropyAttrs::names(),
               .attr_types = CrossEntropyAttrs::types(),
               .infer_meta = ce_meta,
               .cpu = ce_cpu,
               .vjp = ce_vjp,
               .save_inputs = in(0) | in(1) | in(2),
               .save_outputs = out(1) | out(2),
               .nondiff_inputs = in(1) | in(2),
               .sbp_rule = &sbp_rules::kCrossEntropy,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kFloat32});
  register_op({.name = "cross_entropy_backward",
               .traits = kWidens16Bit | kChecksIndices,
               .attr_names = CrossEntropyAttrs::names(),
               .attr_types = CrossEntropyAttrs::types(),
               .infer_meta = ce_bwd_meta,
               .cpu = ce_bwd_cpu,
               .vjp = fused_backward_vjp,
               .sbp_rule = &sbp_rules::kCrossEntropyBackward});
}

// ================================================================ public functions

Tensor cross_entropy(const Tensor& input_arg, const Tensor& target, const Tensor& weight_arg,
                     int64_t reduction, int64_t ignore_index, double label_smoothing) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  // The probability-target form below is a composite of public ops that compares dtypes: the
  // arguments are cast once, as dispatch casts the op's (no second pass over the function).
  Tensor input = input_arg, weight = weight_arg;
  autocast_detail::autocast_args(OF_OP("cross_entropy"), {&input, &weight});
  const char* op = "cross_entropy";
  check_float(op, input, "input");
  check_reduction(reduction, op);
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    fail("[cross_entropy] label_smoothing must be between 0.0 and 1.0, got {}", label_smoothing);
  if (!target.defined()) fail("[cross_entropy] target is undefined");
  if (target.is_floating_point()) {
    // class probabilities: same shape as input
    check_same_shape(input, target, op,
                     " (floating-point targets are class probabilities of the input's shape; "
                     "class indices must be int64)");
    if (target.dtype() != input.dtype())
      fail("[cross_entropy] expected probability targets of the input's dtype {}, got {}",
           dtype_name(input.dtype()), dtype_name(target.dtype()));
    if (ignore_index >= 0)
      fail("[cross_entropy] ignore_index ({}) is not supported for probability targets",
           ignore_index);
    const int64_t cdim = input.dim() >= 2 ? 1 : 0;
    const int64_t C = input.size(cdim);
    if (weight.defined()) check_param(weight, input, DimVector{C}, op, "weight");
    Tensor t = target;
    if (label_smoothing > 0) t = t * (1.0 - label_smoothing) + label_smoothing / double(C);
    Tensor lp = log_softmax(input, cdim);
    Tensor prod = lp * t;
    if (weight.defined()) {
      DimVector ws(size_t(input.dim()), 1);
      ws[size_t(cdim)] = C;
      prod = prod * weight.reshape(ws);
    }
    Tensor l = -sum(prod, {cdim});
    if (reduction == Reduction::Mean) {
      const int64_t rows = input.numel() / std::max<int64_t>(C, 1);
      return l.sum() / double(rows);
    }
    return reduce_loss(l, reduction);
  }
  check_class_targets(input, target, weight, ignore_index, op);
  if (input.dim() == 1) {
    // unbatched: [C] with a 0-d target
    Tensor r = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight, reduction,
                             ignore_index, label_smoothing);
    return reduction == Reduction::None ? r.squeeze(0) : r;
  }
  // A global mean is the global sum over the global total weight: a mean of split rows would
  // average the pieces' means (the op's SBP rule splits rows for None and Sum only). Unweighted
  // label smoothing divides its term by the row count instead: that case runs on whole values.
  if (input.is_global() && reduction == Reduction::Mean && input.dim() == 2 &&
      (label_smoothing == 0.0 || weight.defined())) {
    TensorList r = dispatch(OF_OP("cross_entropy"), {input, target, weight},
                            CrossEntropyAttrs::make(int64_t(Reduction::Sum), ignore_index,
                                                    label_smoothing, weight.defined()));
    return r[0] / r[2].detach();
  }
  TensorList r =
      dispatch(OF_OP("cross_entropy"), {input, target, weight},
               CrossEntropyAttrs::make(reduction, ignore_index, label_smoothing, weight.defined()));
  return r[0];
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                int64_t ignore_index) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "nll_loss";
  check_float(op, input, "input");
  check_reduction(reduction, op);
  check_class_targets(input, target, weight, ignore_index, op);
  if (input.dim() == 1) {
    Tensor r = nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, reduction, ignore_index);
    return reduction == Reduction::None ? r.squeeze(0) : r;
  }
  const Tensor valid = target != ignore_index;
  const Tensor t0 = where(valid, target, Scalar(int64_t(0)));
  const Tensor picked = gather(input, 1, t0.unsqueeze(1)).squeeze(1);
  Tensor w = valid.to(input.dtype());
  if (weight.defined()) w = w * index_select(weight, 0, t0.flatten()).reshape(target.sizes());
  const Tensor l = -picked * w;
  if (reduction == Reduction::Mean) return l.sum() / w.sum();
  return reduce_loss(l, reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("mse_loss", input, "input");
  check_same_shape(input, target, "mse_loss");
  check_float("mse_loss", target, "target");
  check_reduction(reduction, "mse_loss");
  return reduce_loss((input - target).square(), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("l1_loss", input, "input");
  check_same_shape(input, target, "l1_loss");
  check_float("l1_loss", target, "target");
  check_reduction(reduction, "l1_loss");
  return reduce_loss((input - target).abs(), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, int64_t reduction, double beta) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  check_float("smooth_l1_loss", input, "input");
  check_same_shape(input, target, "smooth_l1_loss");
  check_float("smooth_l1_loss", target, "target");
  check_reduction(reduction, "smooth_l1_loss");
  if (!(beta >= 0)) fail("[smooth_l1_loss] beta must be non-negative, got {}", beta);
  const Tensor ad = (input - target).abs();
  if (beta == 0) return reduce_loss(ad, reduction);
  const Tensor l = where(ad < beta, ad.square() * (0.5 / beta), ad - 0.5 * beta);
  return reduce_loss(l, reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "binary_cross_entropy";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  if (weight.defined()) {
    check_float(op, weight, "weight");
    if (!broadcasts_to(weight.sizes(), input.sizes()))
      fail("[{}] weight of shape {} does not broadcast to the input shape {}", op,
           shape_str(weight.sizes()), shape_str(input.sizes()));
  }
  if (input.is_cpu() && input.numel() > 0) {
    const Tensor bad = (input < 0) | (input > 1);
    if (bad.any().item<bool>()) fail("[{}] all elements of input should be between 0 and 1", op);
  }
  Tensor l = -(target * input.log().clamp_min(-100.0) +
               (1.0 - target) * (1.0 - input).log().clamp_min(-100.0));
  if (weight.defined()) l = l * weight;
  return reduce_loss(l, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        int64_t reduction) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "binary_cross_entropy_with_logits";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  for (const Tensor* t : {&weight, &pos_weight}) {
    if (!t->defined()) continue;
    const char* what = t == &weight ? "weight" : "pos_weight";
    check_float(op, *t, what);
    if (!broadcasts_to(t->sizes(), input.sizes()))
      fail("[{}] {} of shape {} does not broadcast to the input shape {}", op, what,
           shape_str(t->sizes()), shape_str(input.sizes()));
  }
  // (1 - t) x + lw * (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t
  const Tensor sp = (-input.abs()).exp().log1p() + (-input).relu();
  Tensor l;
  if (pos_weight.defined()) l = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * sp;
  else l = (1.0 - target) * input + sp;
  if (weight.defined()) l = l * weight;
  return reduce_loss(l, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, int64_t reduction, bool log_target) {
  autocast_detail::Float32Region fp32;  // NOTE [Autocast]: losses in float32
  const char* op = "kl_div";
  check_float(op, input, "input");
  check_same_shape(input, target, op);
  check_float(op, target, "target");
  check_reduction(reduction, op);
  Tensor l;
  if (log_target) {
    l = target.exp() * (target - input);
  } else {
    // xlogy(t, t) - t * input, with 0 * log(0) = 0
    const Tensor safe = where(target > 0, target, Scalar(1.0));
    l = target * safe.log() - target * input;
  }
  return reduce_loss(l, reduction);
}

}  // namespace oneflow

// linalg.cpp: mm, bmm, addmm, baddbmm as ops (CPU kernels in cpu/linalg.cpp, on OpenBLAS;
// cuBLAS on CUDA) and the composites built on them with public ops (so autograd, tracing and
// the global layer see only those): matmul, dot, outer, einsum.
// NOTE [matmul lowering]: 1-D operands get a dim prepended (left) / appended (right) that is
// removed from the result; 2-D x 2-D is mm; a contiguous N-D left operand times a 2-D/1-D
// right one folds its batch into the rows of one mm; everything else broadcasts the batch
// dims (expand: stride 0, no copy), flattens them and runs bmm.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "global/rules.h"
#include "cpu/linalg.h"
#include "cuda_backend.h"
#include "ops/linalg_attrs.h"
#include "ops/checks.h"

namespace oneflow {
namespace {

// ---------------------------------------------------------------- checks

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail("[{}] expected both operands to have the same dtype, got {} and {}", op,
         dtype_name(a.dtype()), dtype_name(b.dtype()));
}

void check_gemm_dtype(const char* op, ScalarType t, Device d) {
  if (t == kBool) fail("[{}] bool operands are not supported (got bool)", op);
  if (d.is_cuda() && !is_floating_point(t))
    fail("[{}] cuda: unsupported dtype {} (float32, float64, float16 and bfloat16 only)", op,
         dtype_name(t));
}

void check_dim(const char* op, const Tensor& t, int64_t nd, const char* what) {
  if (t.dim() != nd)
    fail("[{}] expected {} to be a {}-D tensor, but got a {}-D tensor of shape {}", op, what, nd,
         t.dim(), shape_str(t.sizes()));
}

[[noreturn]] void cannot_multiply(const char* op, IntArrayRef a, IntArrayRef b, int64_t ka,
                                  int64_t kb) {
  fail("[{}] shapes {} and {} cannot be multiplied: {} != {}", op, shape_str(a), shape_str(b), ka,
       kb);
}

// Integer GEMMs take integer alpha/beta only (as in PyTorch).
void check_scalars(const char* op, ScalarType t, const Scalar& beta, const Scalar& alpha) {
  if (!is_floating_point(t) && (beta.is_floating_point() || alpha.is_floating_point()))
    fail(
        "[{}] for integral input tensors ({}), beta and alpha must not be floating point "
        "numbers",
        op, dtype_name(t));
}

// `self` must broadcast to `target` (addmm / baddbmm).
void check_broadcastable(const char* op, const Tensor& self, IntArrayRef target) {
  bool ok = self.dim() <= int64_t(target.size());
  for (int64_t d = 0; ok && d < self.dim(); ++d) {
    int64_t s = self.sizes()[size_t(d)];
    int64_t t = target[size_t(int64_t(target.size()) - self.dim() + d)];
    ok = s == 1 || s == t;
  }
  if (!ok)
    fail("[{}] self of shape {} cannot be broadcast to the result shape {}", op,
         shape_str(self.sizes()), shape_str(target));
}

// ---------------------------------------------------------------- metas

void mm_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  check_dim("mm", a, 2, "mat1");
  check_dim("mm", b, 2, "mat2");
  check_same_dtype("mm", a, b);
  check_gemm_dtype("mm", a.dtype(), a.device());
  if (a.size(1) != b.size(0)) cannot_multiply("mm", a.sizes(), b.sizes(), a.size(1), b.size(0));
  out.push_back({{a.size(0), b.size(1)}, {}, 0, a.dtype(), a.device()});
}

void bmm_meta(const TensorList& in, const Attrs&, MetaList& out) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  check_dim("bmm", a, 3, "batch1");
  check_dim("bmm", b, 3, "batch2");
  check_same_dtype("bmm", a, b);
  check_gemm_dtype("bmm", a.dtype(), a.device());
  if (a.size(0) != b.size(0))
    fail("[bmm] batch sizes of shapes {} and {} do not match: {} != {}", shape_str(a.sizes()),
         shape_str(b.sizes()), a.size(0), b.size(0));
  if (a.size(2) != b.size(1)) cannot_multiply("bmm", a.sizes(), b.sizes(), a.size(2), b.size(1));
  out.push_back({{a.size(0), a.size(1), b.size(2)}, {}, 0, a.dtype(), a.device()});
}

// addmm / baddbmm: inputs (self, x1, x2), attrs (beta, alpha).
template <bool Batched> void addmm_meta(const TensorList& in, const Attrs& attrs, MetaList& out) {
  const char* op = Batched ? "baddbmm" : "addmm";
  const Tensor& self = in[0];
  const Tensor& a = in[1];
  const Tensor& b = in[2];
  const int64_t nd = Batched ? 3 : 2;
  check_dim(op, a, nd, Batched ? "batch1" : "mat1");
  check_dim(op, b, nd, Batched ? "batch2" : "mat2");
  check_same_dtype(op, a, b);
  if (self.dtype() != a.dtype())
    fail("[{}] expected self and the operands to have the same dtype, got {} and {}", op,
         dtype_name(self.dtype()), dtype_name(a.dtype()));
  check_gemm_dtype(op, a.dtype(), a.device());
  check_scalars(op, a.dtype(), AddmmAttrs::get<"beta">(attrs), AddmmAttrs::get<"alpha">(attrs));
  DimVector res;
  if (Batched) {
    if (a.size(0) != b.size(0))
      fail("[{}] batch sizes of shapes {} and {} do not match: {} != {}", op, shape_str(a.sizes()),
           shape_str(b.sizes()), a.size(0), b.size(0));
    res.push_back(a.size(0));
  }
  if (a.size(-1) != b.size(-2)) cannot_multiply(op, a.sizes(), b.sizes(), a.size(-1), b.size(-2));
  res.push_back(a.size(-2));
  res.push_back(b.size(-1));
  check_broadcastable(op, self, res);
  out.push_back({std::move(res), {}, 0, a.dtype(), a.device()});
}

// addmm/baddbmm where there is no kernel (CUDA: cuBLAS through mm/bmm, then the elementwise
// ops; NOTE [Decompositions]). beta = 0 ignores self, NaN included, as the kernel does.
template <bool Batched> TensorList addmm_decompose(const TensorList& in, const Attrs& a) {
  const Tensor& self = in[0];
  const Scalar& beta = AddmmAttrs::get<"beta">(a);
  const Scalar& alpha = AddmmAttrs::get<"alpha">(a);
  Tensor r = Batched ? bmm(in[1], in[2]) : mm(in[1], in[2]);
  if (alpha.to_double() != 1.0) r = r * alpha;
  if (beta.to_double() != 0.0) r = r + (beta.to_double() == 1.0 ? self : self * beta);
  return {r};
}

// ---------------------------------------------------------------- VJPs

Tensor scaled(const Tensor& t, const Scalar& s) { return s.to_double() == 1.0 ? t : t * s; }

TensorList mm_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor ga, gb;
  if (c.needs_input_grad(0)) ga = g[0].mm(c.input(1).t());
  if (c.needs_input_grad(1)) gb = c.input(0).t().mm(g[0]);
  return {ga, gb};
}

TensorList bmm_vjp(const VjpCtx& c, const TensorList& g) {
  Tensor ga, gb;
  if (c.needs_input_grad(0)) ga = g[0].bmm(c.input(1).transpose(1, 2));
  if (c.needs_input_grad(1)) gb = c.input(0).transpose(1, 2).bmm(g[0]);
  return {ga, gb};
}

template <bool Batched> TensorList addmm_vjp(const VjpCtx& c, const TensorList& g) {
  const Scalar& beta = AddmmAttrs::get<"beta">(c.attrs());
  const Scalar& alpha = AddmmAttrs::get<"alpha">(c.attrs());
  Tensor gs, ga, gb;
  if (c.needs_input_grad(0)) gs = sum_to_size(scaled(g[0], beta), c.input_sizes(0));
  if (Batched) {
    if (c.needs_input_grad(1)) ga = scaled(g[0].bmm(c.input(2).transpose(1, 2)), alpha);
    if (c.needs_input_grad(2)) gb = scaled(c.input(1).transpose(1, 2).bmm(g[0]), alpha);
  } else {
    if (c.needs_input_grad(1)) ga = scaled(g[0].mm(c.input(2).t()), alpha);
    if (c.needs_input_grad(2)) gb = scaled(c.input(1).t().mm(g[0]), alpha);
  }
  return {gs, ga, gb};
}

// ---------------------------------------------------------------- einsum

constexpr int kLetters = 52;  // 'A'..'Z' -> 0..25, 'a'..'z' -> 26..51; ellipsis dims follow

int label_of(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
  return -1;
}
char char_of(int label) {
  if (label < 26) return char('A' + label);
  if (label < kLetters) return char('a' + label - 26);
  return '.';
}

struct Term {
  std::vector<int> letters;  // labels in order; kEllipsis marks where "..." stands
  bool ellipsis = false;
  std::string text;
};
constexpr int kEllipsis = -2;

Term parse_term(std::string_view s, std::string_view eq) {
  Term t;
  t.text = std::string(s);
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '.') {
      if (s.substr(i, 3) != "..." || t.ellipsis)
        fail("[einsum] invalid equation '{}': '.' must appear as a single '...' per operand", eq);
      t.ellipsis = true;
      t.letters.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int l = label_of(ch);
    if (l < 0)
      fail(
          "[einsum] invalid subscript '{}' in equation '{}': only letters, '...', ',' and '->' "
          "are allowed",
          ch, eq);
    t.letters.push_back(l);
  }
  return t;
}

// Sums `dims` (keepdim) when there is any.
Tensor sum_keep(const Tensor& t, const DimVector& dims) {
  if (dims.empty()) return t;
  return sum(t, dims, true);
}

Tensor einsum_impl(std::string_view equation, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ' && ch != '\t' && ch != '\n') eq += ch;
  if (operands.empty()) fail("[einsum] expected at least one operand, got none ('{}')", equation);
  for (const Tensor& t : operands)
    if (!t.defined()) fail("[einsum] got an undefined tensor");
  for (size_t i = 1; i < operands.size(); ++i)
    if (operands[i].dtype() != operands[0].dtype())
      fail(
          "[einsum] expected all operands to have the same dtype, got {} (operand 0) and {} "
          "(operand {})",
          dtype_name(operands[0].dtype()), dtype_name(operands[i].dtype()), i);

  // --- parse
  const size_t arrow = eq.find("->");
  const std::string_view eqv(eq);
  const std::string_view lhs = eqv.substr(0, arrow);
  const bool explicit_out = arrow != std::string::npos;
  const std::string_view rhs = explicit_out ? eqv.substr(arrow + 2) : std::string_view();
  if (rhs.find("->") != std::string_view::npos || rhs.find(',') != std::string_view::npos ||
      lhs.find('-') != std::string_view::npos || lhs.find('>') != std::string_view::npos ||
      rhs.find('-') != std::string_view::npos || rhs.find('>') != std::string_view::npos)
    fail("[einsum] invalid equation '{}': expected one '->' followed by a single output term",
         equation);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(
        lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start),
        equation));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size())
    fail("[einsum] the equation '{}' specifies {} operand{} but {} {} given", equation,
         terms.size(), terms.size() == 1 ? "" : "s", operands.size(),
         operands.size() == 1 ? "was" : "were");

  // --- expand ellipses into labels kLetters + j (right-aligned over the widest one)
  const size_t nops = operands.size();
  int64_t ell_rank = 0;
  std::vector<int64_t> ell_dims(nops, 0);
  for (size_t i = 0; i < nops; ++i) {
    const int64_t named = int64_t(terms[i].letters.size()) - (terms[i].ellipsis ? 1 : 0);
    const int64_t nd = operands[i].dim();
    if (terms[i].ellipsis ? named > nd : named != nd)
      fail("[einsum] operand {} has {} dimension{} (shape {}) but the subscript '{}' names {}", i,
           nd, nd == 1 ? "" : "s", shape_str(operands[i].sizes()), terms[i].text, named);
    if (terms[i].ellipsis) ell_dims[i] = nd - named;
    ell_rank = std::max(ell_rank, ell_dims[i]);
  }
  const int nlabels = kLetters + int(ell_rank);
  std::vector<std::vector<int>> labels(nops);
  std::vector<int> count(size_t(nlabels), 0);
  std::vector<int64_t> label_size(size_t(nlabels), -1);
  for (size_t i = 0; i < nops; ++i) {
    for (int l : terms[i].letters) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < ell_dims[i]; ++j)
          labels[i].push_back(kLetters + int(ell_rank - ell_dims[i] + j));
      } else {
        labels[i].push_back(l);
      }
    }
    std::vector<bool> seen(size_t(nlabels), false);
    for (size_t d = 0; d < labels[i].size(); ++d) {
      const int l = labels[i][d];
      const int64_t s = operands[i].size(int64_t(d));
      if (seen[size_t(l)]) {
        // Repeated within one operand (a diagonal): sizes must match exactly.
        for (size_t e = 0; e < d; ++e)
          if (labels[i][e] == l && operands[i].size(int64_t(e)) != s)
            fail(
                "[einsum] subscript '{}' is repeated for operand {} but the sizes don't match, "
                "{} != {}",
                char_of(l), i, operands[i].size(int64_t(e)), s);
        continue;
      }
      seen[size_t(l)] = true;
      ++count[size_t(l)];
      int64_t& ls = label_size[size_t(l)];
      if (ls == -1 || ls == 1) {
        ls = s;
      } else if (s != 1 && s != ls) {
        if (l >= kLetters)
          fail(
              "[einsum] the '...' dimensions of operand {} (shape {}) do not broadcast with "
              "those of the other operands: size {} vs {}",
              i, shape_str(operands[i].sizes()), s, ls);
        fail(
            "[einsum] subscript '{}' has size {} for operand {} (shape {}), which does not "
            "broadcast with the previously seen size {}",
            char_of(l), s, i, shape_str(operands[i].sizes()), ls);
      }
    }
  }

  // --- output labels
  std::vector<int> out_labels;
  if (explicit_out) {
    Term o = parse_term(rhs, equation);
    std::vector<bool> in_out(size_t(nlabels), false);
    for (int l : o.letters) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < ell_rank; ++j) out_labels.push_back(kLetters + int(j));
        continue;
      }
      if (count[size_t(l)] == 0)
        fail(
            "[einsum] output subscript '{}' does not appear in the equation for any input "
            "operand ('{}')",
            char_of(l), equation);
      if (in_out[size_t(l)])
        fail("[einsum] output subscript '{}' appears more than once in the output ('{}')",
             char_of(l), equation);
      in_out[size_t(l)] = true;
      out_labels.push_back(l);
    }
  } else {
    for (int64_t j = 0; j < ell_rank; ++j) out_labels.push_back(kLetters + int(j));
    for (int l = 0; l < kLetters; ++l)
      if (count[size_t(l)] == 1) {
        // A label repeated inside its only operand is summed (trace), not output.
        size_t reps = 0;
        for (size_t i = 0; i < nops; ++i)
          reps += size_t(std::count(labels[i].begin(), labels[i].end(), l));
        if (reps == 1) out_labels.push_back(l);
      }
  }

  // --- global label order: the output first, then the contracted labels
  std::vector<int> order = out_labels;
  std::vector<int> pos(size_t(nlabels), -1);
  for (size_t d = 0; d < order.size(); ++d) pos[size_t(order[d])] = int(d);
  for (int l = 0; l < nlabels; ++l)
    if (count[size_t(l)] > 0 && pos[size_t(l)] < 0) {
      pos[size_t(l)] = int(order.size());
      order.push_back(l);
    }
  const int64_t L = int64_t(order.size());
  const int64_t nout = int64_t(out_labels.size());
  std::vector<bool> is_out(size_t(L), false);
  for (int64_t d = 0; d < nout; ++d) is_out[size_t(d)] = true;

  // --- each operand: diagonals for repeated labels, then aligned to the global order
  std::vector<Tensor> ops(nops);
  std::vector<std::vector<bool>> present(nops, std::vector<bool>(size_t(L), false));
  for (size_t i = 0; i < nops; ++i) {
    Tensor t = operands[i];
    std::vector<int> ls = labels[i];
    for (bool again = true; again;) {
      again = false;
      for (size_t p = 0; p < ls.size() && !again; ++p)
        for (size_t q = p + 1; q < ls.size() && !again; ++q)
          if (ls[p] == ls[q]) {
            t = t.diagonal(0, int64_t(p), int64_t(q));  // the diagonal becomes the last dim
            const int l = ls[p];
            ls.erase(ls.begin() + int64_t(q));
            ls.erase(ls.begin() + int64_t(p));
            ls.push_back(l);
            again = true;
          }
    }
    DimVector perm, shape;
    std::vector<int64_t> dim_of(size_t(L), -1);
    for (size_t d = 0; d < ls.size(); ++d) dim_of[size_t(pos[size_t(ls[d])])] = int64_t(d);
    for (int64_t g = 0; g < L; ++g) {
      if (dim_of[size_t(g)] >= 0) {
        perm.push_back(dim_of[size_t(g)]);
        shape.push_back(t.size(dim_of[size_t(g)]));
        present[i][size_t(g)] = true;
      } else {
        shape.push_back(1);
      }
    }
    bool identity = true;
    for (size_t d = 0; d < perm.size(); ++d) identity = identity && perm[d] == int64_t(d);
    if (!identity) t = t.permute(perm);
    if (int64_t(perm.size()) != L) t = t.reshape(shape);
    ops[i] = t;
  }

  // --- labels used by one operand only and not in the output: summed right away
  for (size_t i = 0; i < nops; ++i) {
    DimVector dims;
    for (int64_t g = nout; g < L; ++g) {
      if (!present[i][size_t(g)]) continue;
      bool elsewhere = false;
      for (size_t j = 0; j < nops; ++j)
        if (j != i && present[j][size_t(g)]) elsewhere = true;
      if (!elsewhere) {
        dims.push_back(g);
        present[i][size_t(g)] = false;
      }
    }
    ops[i] = sum_keep(ops[i], dims);
  }

  // --- contract left to right
  Tensor cur = ops[0];
  std::vector<bool> cur_present = present[0];
  for (size_t i = 1; i < nops; ++i) {
    Tensor b = ops[i];
    std::vector<bool> kept(is_out);
    for (size_t j = i + 1; j < nops; ++j)
      for (int64_t g = 0; g < L; ++g)
        if (present[j][size_t(g)]) kept[size_t(g)] = true;
    DimVector lro, lo, ro, sdims, rest, sum_a, sum_b;
    for (int64_t g = 0; g < L; ++g) {
      const bool ha = cur.size(g) != 1, hb = b.size(g) != 1;
      if (kept[size_t(g)]) {
        if (ha && hb) lro.push_back(g);
        else if (ha) lo.push_back(g);
        else if (hb) ro.push_back(g);
        else rest.push_back(g);
      } else {
        if (ha && hb) {
          sdims.push_back(g);
          continue;
        }
        if (ha) sum_a.push_back(g);
        if (hb) sum_b.push_back(g);
        rest.push_back(g);
      }
    }
    cur = sum_keep(cur, sum_a);
    b = sum_keep(b, sum_b);
    if (sdims.empty()) {
      cur = cur * b;  // nothing contracted: a broadcasting product
    } else {
      auto prod = [&](const DimVector& ds) {
        int64_t p = 1;
        for (int64_t g : ds) p *= label_size[size_t(order[size_t(g)])];
        return p;
      };
      const int64_t nb = prod(lro), nl = prod(lo), nr = prod(ro), ns = prod(sdims);
      DimVector pa, pb, pr;  // permutations: A [lro lo s ro rest], B [lro s ro lo rest]
      auto append = [](DimVector& dst, std::initializer_list<const DimVector*> srcs) {
        for (const DimVector* v : srcs)
          for (int64_t g : *v) dst.push_back(g);
      };
      append(pa, {&lro, &lo, &sdims, &ro, &rest});
      append(pb, {&lro, &sdims, &ro, &lo, &rest});
      Tensor r;
      if (lro.empty()) {
        r = cur.permute(pa).reshape({nl, ns}).mm(b.permute(pb).reshape({ns, nr}));
      } else {
        r = cur.permute(pa).reshape({nb, nl, ns}).bmm(b.permute(pb).reshape({nb, ns, nr}));
      }
      // r is [lro lo ro]; add the size-1 dims back and return to the global order.
      DimVector rshape;
      for (auto* v : {&lro, &lo, &ro})
        for (int64_t g : *v) rshape.push_back(label_size[size_t(order[size_t(g)])]);
      for (size_t j = 0; j < sdims.size() + rest.size(); ++j) rshape.push_back(1);
      append(pr, {&lro, &lo, &ro, &sdims, &rest});
      DimVector inv(static_cast<size_t>(L), 0);
      for (int64_t d = 0; d < L; ++d) inv[size_t(pr[size_t(d)])] = d;
      cur = r.reshape(rshape).permute(inv);
    }
    for (int64_t g = 0; g < L; ++g)
      cur_present[size_t(g)] = kept[size_t(g)] && (cur_present[size_t(g)] || present[i][size_t(g)]);
  }

  // --- the output: contracted labels are size 1 by now
  DimVector tail;
  for (int64_t g = nout; g < L; ++g)
    if (cur.size(g) != 1) tail.push_back(g);
  cur = sum_keep(cur, tail);
  DimVector out_shape;
  for (int64_t d = 0; d < nout; ++d) {
    // An output label broadcast to size 1 in every operand keeps size 1 here.
    out_shape.push_back(cur.size(d));
  }
  if (cur.dim() != nout) cur = cur.reshape(out_shape);
  return cur;
}

}  // namespace

void register_linalg_ops() {
  register_op({.name = "mm",
               .traits = 0,
               .attr_names = {},
               .infer_meta = mm_meta,
               .cpu = cpu::mm,
               .vjp = mm_vjp,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kMatmul,
               .autocast = AutocastPolicy::kLower,
               .weight_input = 1});
  register_op({.name = "bmm",
               .traits = 0,
               .attr_names = {},
               .infer_meta = bmm_meta,
               .cpu = cpu::bmm,
               .vjp = bmm_vjp,
               .save_inputs = in(0) | in(1),
               .sbp_rule = &sbp_rules::kBatchedMatmul,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
  register_op({.name = "addmm",
               .traits = 0,
               .attr_names = AddmmAttrs::names(),
               .attr_types = AddmmAttrs::types(),
               .infer_meta = addmm_meta<false>,
               .cpu = cpu::addmm,
               .decompose = addmm_decompose<false>,
               .vjp = addmm_vjp<false>,
               .save_inputs = in(1) | in(2),
               .sbp_rule = &sbp_rules::kMatmulPlusSelf,
               .autocast = AutocastPolicy::kLower,
               .weight_input = 2});
  register_op({.name = "baddbmm",
               .traits = 0,
               .attr_names = AddmmAttrs::names(),
               .attr_types = AddmmAttrs::types(),
               .infer_meta = addmm_meta<true>,
               .cpu = cpu::baddbmm,
               .decompose = addmm_decompose<true>,
               .vjp = addmm_vjp<true>,
               .save_inputs = in(1) | in(2),
               .sbp_rule = &sbp_rules::kBatchedMatmulPlusSelf,
               .contiguous_inputs = kEveryInput,
               .autocast = AutocastPolicy::kLower});
}

// ---------------------------------------------------------------- public functions

Tensor mm(const Tensor& a, const Tensor& b) {
  check_defined("mm", {{&a, "input"}, {&b, "mat2"}});
  return dispatch1(OF_OP("mm"), {a, b});
}
Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b) {
  check_defined("mm", {{&out, "out"}, {&a, "input"}, {&b, "mat2"}});
  dispatch(OF_OP("mm"), {a, b}, {}, &out);
  return out;
}
Tensor bmm(const Tensor& a, const Tensor& b) {
  check_defined("bmm", {{&a, "input"}, {&b, "mat2"}});
  return dispatch1(OF_OP("bmm"), {a, b});
}
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  check_defined("addmm", {{&self, "input"}, {&mat1, "mat1"}, {&mat2, "mat2"}});
  return dispatch1(OF_OP("addmm"), {self, mat1, mat2}, AddmmAttrs::make(beta, alpha));
}
Tensor baddbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const Scalar& beta,
               const Scalar& alpha) {
  check_defined("baddbmm", {{&self, "input"}, {&b1, "batch1"}, {&b2, "batch2"}});
  return dispatch1(OF_OP("baddbmm"), {self, b1, b2}, AddmmAttrs::make(beta, alpha));
}

Tensor dot(const Tensor& a, const Tensor& b) {
  check_defined("dot", {{&a, "input"}, {&b, "tensor"}});
  if (a.dim() != 1 || b.dim() != 1)
    fail("[dot] 1-D tensors expected, but got {}-D and {}-D tensors (shapes {} and {})", a.dim(),
         b.dim(), shape_str(a.sizes()), shape_str(b.sizes()));
  check_same_dtype("dot", a, b);
  if (a.size(0) != b.size(0))
    fail(
        "[dot] inconsistent tensor size: shapes {} and {} must have the same number of "
        "elements",
        shape_str(a.sizes()), shape_str(b.sizes()));
  check_gemm_dtype("dot", a.dtype(), a.device());
  return mm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
}

Tensor outer(const Tensor& a, const Tensor& b) {
  check_defined("outer", {{&a, "input"}, {&b, "vec2"}});
  if (a.dim() != 1 || b.dim() != 1)
    fail("[outer] 1-D tensors expected, but got {}-D and {}-D tensors (shapes {} and {})", a.dim(),
         b.dim(), shape_str(a.sizes()), shape_str(b.sizes()));
  return a.unsqueeze(1) * b.unsqueeze(0);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined("matmul", {{&a, "input"}, {&b, "other"}});
  const int64_t da = a.dim(), db = b.dim();
  if (da == 0 || db == 0)
    fail("[matmul] both arguments to matmul need to be at least 1-D, but they are {}-D and {}-D",
         da, db);
  check_same_dtype("matmul", a, b);
  check_gemm_dtype("matmul", a.dtype(), a.device());
  const int64_t ka = a.size(-1), kb = db == 1 ? b.size(0) : b.size(-2);
  if (ka != kb) cannot_multiply("matmul", a.sizes(), b.sizes(), ka, kb);

  if (da == 1 && db == 1) return dot(a, b);
  if (da == 2 && db == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (da == 1 && db == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 2) return mm(a, b);
  if (da >= 3 && db <= 2 && a.is_contiguous()) {
    // Fold the batch into the rows: one mm, no copies.
    const Tensor bb = db == 1 ? b.unsqueeze(1) : b;
    DimVector out_shape(a.sizes().begin(), a.sizes().end() - 1);
    if (db == 2) out_shape.push_back(b.size(1));
    int64_t rows = 1;
    for (int64_t d = 0; d < da - 1; ++d) rows *= a.size(d);
    const Tensor a2 = a.reshape({rows, ka});
    return a2.mm(bb).reshape(out_shape);
  }
  // General case: broadcast the batch dims and run bmm.
  const Tensor aa = da == 1 ? a.unsqueeze(0) : a;
  const Tensor bb = db == 1 ? b.unsqueeze(1) : b;
  const IntArrayRef sa = aa.sizes(), sb = bb.sizes();
  const IntArrayRef ba(sa.data(), sa.size() - 2), bbatch(sb.data(), sb.size() - 2);
  DimVector batch;
  {
    const size_t n = std::max(ba.size(), bbatch.size());
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
      const int64_t y = i < n - bbatch.size() ? 1 : bbatch[i - (n - bbatch.size())];
      if (x != y && x != 1 && y != 1)
        fail("[matmul] batch dimensions of shapes {} and {} cannot be broadcast: {} vs {}",
             shape_str(a.sizes()), shape_str(b.sizes()), shape_str(ba), shape_str(bbatch));
      batch.push_back(x == 1 ? y : x);
    }
  }
  const int64_t m = aa.size(-2), n = bb.size(-1);
  const int64_t nb = checked_numel(batch, "matmul");
  auto batched = [&](const Tensor& t, int64_t r, int64_t c) {
    DimVector full = batch;
    full.push_back(r);
    full.push_back(c);
    Tensor e = t.sizes() == IntArrayRef(full) ? t : t.expand(full);
    return e.reshape({nb, r, c});
  };
  Tensor r = bmm(batched(aa, m, ka), batched(bb, ka, n));
  DimVector out_shape = batch;
  if (da > 1) out_shape.push_back(m);
  if (db > 1) out_shape.push_back(n);
  return r.reshape(out_shape);
}

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  return einsum_impl(equation, operands);
}

// ---------------------------------------------------------------- Tensor methods

Tensor Tensor::matmul(const Tensor& o) const { return oneflow::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return oneflow::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return oneflow::bmm(*this, o); }
Tensor Tensor::dot(const Tensor& o) const { return oneflow::dot(*this, o); }
Tensor Tensor::outer(const Tensor& o) const { return oneflow::outer(*this, o); }
Tensor Tensor::addmm(const Tensor& m1, const Tensor& m2, const Scalar& beta,
                     const Scalar& alpha) const {
  return oneflow::addmm(*this, m1, m2, beta, alpha);
}

}  // namespace oneflow

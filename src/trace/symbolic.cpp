// Symbolic shapes: binding, probing, fitting and instantiating (NOTE [Symbolic shapes] in
// trace/symbolic.h).
#include "trace/symbolic.h"
#include "trace/executor.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include "allocator.h"
#include "output_layout.h"

namespace oneflow::trace {

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Exact rationals for the fit (int128: products of a few sizes never come near its range).
struct Rational {
  __int128 n = 0, d = 1;
  static __int128 gcd(__int128 a, __int128 b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b != 0) {
      const __int128 t = a % b;
      a = b;
      b = t;
    }
    return a == 0 ? 1 : a;
  }
  Rational norm() const {
    Rational r{n, d};
    if (r.d < 0) {
      r.n = -r.n;
      r.d = -r.d;
    }
    const __int128 g = gcd(r.n, r.d);
    r.n /= g;
    r.d /= g;
    return r;
  }
  Rational operator-(const Rational& o) const {
    return Rational{n * o.d - o.n * d, d * o.d}.norm();
  }
  Rational operator*(const Rational& o) const { return Rational{n * o.n, d * o.d}.norm(); }
  Rational operator/(const Rational& o) const { return Rational{n * o.d, d * o.n}.norm(); }
};

std::string vals_str(const std::vector<SymDim>& syms, const std::vector<int64_t>& vals) {
  std::string s;
  for (size_t i = 0; i < syms.size(); ++i)
    s += fmt::format("{}{}={}", i ? ", " : "", syms[i].name, vals[i]);
  return s;
}

std::string symbols_in(const std::vector<SymDim>& syms, uint32_t mask) {
  std::string s;
  for (size_t i = 0; i < syms.size(); ++i)
    if ((mask >> i) & 1u) s += (s.empty() ? "" : ", ") + syms[i].name;
  return s;
}

// The structure a symbol value belongs to: [lo, hi] of the values it shares a recording with.
void structure_range(const SymDim& s, bool at_one, int64_t& lo, int64_t& hi) {
  if (at_one) {
    lo = hi = 1;
  } else if (s.min <= 1 && s.max >= 2) {
    lo = 2;
    hi = s.max;
  } else {
    lo = s.min;
    hi = s.max;
  }
}

bool integral(double d, int64_t& out) {
  if (!(std::abs(d) < 9007199254740992.0) || d != std::floor(d)) return false;
  out = int64_t(d);
  return true;
}

// An integer-valued scalar attribute (int64, or a double or Scalar holding a whole number:
// arange's end of a size): what can follow the symbols.
bool int_slot(const AttrValue& v, int64_t& out) {
  if (std::holds_alternative<int64_t>(v)) {
    out = std::get<int64_t>(v);
    return true;
  }
  if (std::holds_alternative<double>(v)) return integral(std::get<double>(v), out);
  if (std::holds_alternative<Scalar>(v)) {
    const Scalar& s = std::get<Scalar>(v);
    if (s.kind() == Scalar::Kind::Int) {
      out = s.to_long();
      return true;
    }
    if (s.kind() == Scalar::Kind::Float) return integral(s.to_double(), out);
  }
  return false;
}

std::string node_name(const Graph& g, size_t n) {
  return fmt::format("node {} ({})", n, g.nodes[n].op->name);
}

// How b's structure differs from a's ("" when only integer attributes differ).
std::string structure_diff(const Graph& a, const Graph& b) {
  if (a.buffers.size() != b.buffers.size() || a.values.size() != b.values.size() ||
      a.nodes.size() != b.nodes.size())
    return fmt::format("{} ops and {} tensors at one shape, {} ops and {} tensors at another",
                       a.nodes.size(), a.values.size(), b.nodes.size(), b.values.size());
  if (a.inputs != b.inputs || a.outputs != b.outputs)
    return "the inputs or results are other tensors";
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const Buffer &x = a.buffers[i], &y = b.buffers[i];
    if (x.kind != y.kind || x.input != y.input || x.device != y.device || x.escapes != y.escapes)
      return fmt::format("tensor memory {} is a {} at one shape and a {} at another", i,
                         buf_kind_name(x.kind), buf_kind_name(y.kind));
    if (x.kind == BufKind::External && x.recorded_storage != y.recorded_storage)
      return "the function reads other outside tensors at different shapes (it makes tensors "
             "from host data: make them outside the function or with factory ops)";
    if (x.kind == BufKind::Constant) {
      const StorageImpl& s = *x.impls[0]->storage;
      const StorageImpl& t = *y.impls[0]->storage;
      if (s.nbytes != t.nbytes || std::memcmp(s.data, t.data, s.nbytes) != 0)
        return "a constant differs between shapes";
    }
  }
  for (size_t v = 0; v < a.values.size(); ++v) {
    const Value &x = a.values[v], &y = b.values[v];
    if (x.buffer != y.buffer || x.dtype != y.dtype || x.producer != y.producer ||
        x.is_view != y.is_view || x.sizes.size() != y.sizes.size())
      return fmt::format("tensor %{} differs in kind or rank between shapes", v);
  }
  for (size_t n = 0; n < a.nodes.size(); ++n) {
    const Node &x = a.nodes[n], &y = b.nodes[n];
    if (x.op != y.op)
      return fmt::format("op {} is {} at one shape and {} at another", n, x.op->name, y.op->name);
    if (x.inputs != y.inputs || x.outputs != y.outputs || x.writes_existing != y.writes_existing ||
        x.attrs.size() != y.attrs.size())
      return node_name(a, n) + " reads or writes other tensors at different shapes";
    for (size_t k = 0; k < x.attrs.size(); ++k) {
      const AttrValue &p = x.attrs.values[k], &q = y.attrs.values[k];
      int64_t i0, i1;
      if (p.index() != q.index())
        return node_name(a, n) + fmt::format(": attribute {} changes type", k);
      if (int_slot(p, i0) && int_slot(q, i1)) continue;
      if (std::holds_alternative<DimVector>(p)) {
        if (std::get<DimVector>(p).size() != std::get<DimVector>(q).size())
          return node_name(a, n) + fmt::format(": attribute {} changes length", k);
        continue;
      }
      Attrs pa, qa;
      pa.values.push_back(p);
      qa.values.push_back(q);
      const bool same = pa == qa;
      if (!same)
        return node_name(a, n) +
               fmt::format(
                   ": attribute '{}' depends on the shape in a way the graph cannot "
                   "express (only integers follow the symbols)",
                   k < x.op->attr_names.size() ? x.op->attr_names[k] : std::to_string(k));
    }
  }
  return {};
}

// Fits y over the grid as a multilinear polynomial of the free symbols (exact rationals).
AttrExpr fit_one(const ProbePlan& plan, const std::vector<int64_t>& ys, size_t nsym) {
  std::vector<int> free;
  for (size_t i = 0; i < nsym; ++i)
    if ((plan.free >> i) & 1u) free.push_back(int(i));
  const size_t k = free.size();
  // coefficients over the monomials of the free symbols, by separable 2-point interpolation
  std::vector<Rational> c(size_t(1) << k);
  for (size_t p = 0; p < c.size(); ++p) c[p] = Rational{ys[p], 1};
  for (size_t j = 0; j < k; ++j) {
    const int64_t a = plan.grid[0][size_t(free[j])];
    const int64_t b = plan.grid[size_t(1) << j][size_t(free[j])];
    for (size_t p = 0; p < c.size(); ++p) {
      if ((p >> j) & 1u) continue;
      const Rational ya = c[p], yb = c[p | (size_t(1) << j)];
      const Rational slope = (yb - ya) / Rational{b - a, 1};
      c[p] = ya - slope * Rational{a, 1};
      c[p | (size_t(1) << j)] = slope;
    }
  }
  AttrExpr e;
  __int128 den = 1;
  for (const Rational& r : c) den = den / Rational::gcd(den, r.d) * r.d;
  e.den = int64_t(den);
  e.num.assign(size_t(1) << nsym, 0);
  for (size_t p = 0; p < c.size(); ++p) {
    uint32_t m = 0;
    for (size_t j = 0; j < k; ++j)
      if ((p >> j) & 1u) m |= 1u << free[j];
    e.num[m] = int64_t(c[p].n * (den / c[p].d));
  }
  return e;
}

// y = floor((p1 * s_j + p0) / c) over every probe, for one free symbol j and the smallest c
// that fits (pooling and strided convolutions: floor((s - k) / stride) + 1). Empty when none.
std::optional<AttrExpr> fit_floor(const std::vector<std::vector<int64_t>>& points,
                                  const std::vector<int64_t>& ys, uint32_t free, size_t nsym) {
  for (size_t j = 0; j < nsym; ++j) {
    if (!((free >> j) & 1u)) continue;
    for (int64_t c = 2; c <= 64; ++c) {
      // p1 from the first two points that differ in s_j
      size_t q = 1;
      while (q < points.size() && points[q][j] == points[0][j]) ++q;
      if (q == points.size()) break;
      const int64_t ds = points[q][j] - points[0][j];
      const int64_t lo1 = (c * (ys[q] - ys[0]) - (c - 1)) / ds - 1;
      const int64_t hi1 = (c * (ys[q] - ys[0]) + (c - 1)) / ds + 1;
      for (int64_t p1 = std::min(lo1, hi1); p1 <= std::max(lo1, hi1); ++p1) {
        // p0 within every point's interval: c*y <= p1*s + p0 <= c*y + c - 1
        int64_t lo0 = INT64_MIN, hi0 = INT64_MAX;
        for (size_t k = 0; k < points.size(); ++k) {
          lo0 = std::max(lo0, c * ys[k] - p1 * points[k][j]);
          hi0 = std::min(hi0, c * ys[k] + c - 1 - p1 * points[k][j]);
        }
        if (lo0 > hi0) continue;
        AttrExpr e;
        e.num.assign(size_t(1) << nsym, 0);
        e.num[size_t(1) << j] = p1;
        e.num[0] = lo0;
        e.den = c;
        return e;
      }
    }
  }
  return std::nullopt;
}

Tensor meta_tensor(const Value& v, const Storage& st) { return Tensor(value_impl(st, v)); }

bool same_geometry(const Value& a, const Value& b) {
  return IntArrayRef(a.sizes) == IntArrayRef(b.sizes) &&
         IntArrayRef(a.strides) == IntArrayRef(b.strides) && a.offset == b.offset;
}

// Every tensor of `want` has the geometry `got` derived for it (else which node's does not).
void check_derived(const Graph& got, const Graph& want, const std::string& at) {
  for (size_t v = 0; v < want.values.size(); ++v) {
    if (same_geometry(got.values[v], want.values[v])) continue;
    const Value& w = want.values[v];
    const std::string who = w.producer >= 0 ? node_name(want, size_t(w.producer)) : "an input";
    fail(
        "[jit.trace] symbolic shapes: {} makes tensor %{} {} strides {} at {}, but deriving "
        "it from its inputs gives {} strides {}; this function cannot be traced with symbolic "
        "dims",
        who, v, shape_str(w.sizes), shape_str(w.strides), at, shape_str(got.values[v].sizes),
        shape_str(got.values[v].strides));
  }
}

}  // namespace

int64_t AttrExpr::eval(const std::vector<int64_t>& vals) const {
  // overflow-checked: a loaded file's coefficients are anyone's
  int64_t s = 0;
  for (size_t m = 0; m < num.size(); ++m) {
    if (num[m] == 0) continue;
    int64_t p = num[m], t = 0;
    for (size_t i = 0; i < vals.size(); ++i)
      if (((m >> i) & 1u) && __builtin_mul_overflow(p, vals[i], &p))
        fail("[jit.trace] symbolic shapes: an attribute expression overflows");
    if (__builtin_add_overflow(s, p, &t))
      fail("[jit.trace] symbolic shapes: an attribute expression overflows");
    s = t;
  }
  if (den <= 0) fail("[jit.trace] symbolic shapes: an expression with a bad denominator");
  return floor_div(s, den);
}

std::vector<int64_t> bind_symbols(const std::vector<SymDim>& symbols,
                                  const std::vector<std::vector<int>>& input_dims,
                                  const std::vector<Tensor>& inputs, const char* who) {
  std::vector<int64_t> vals(symbols.size(), -1);
  std::vector<std::pair<size_t, size_t>> from(symbols.size());
  if (inputs.size() < input_dims.size())
    fail("[{}] the graph takes {} inputs, got {}", who, input_dims.size(), inputs.size());
  for (size_t i = 0; i < input_dims.size(); ++i) {
    const std::vector<int>& dims = input_dims[i];
    if (dims.empty()) continue;
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("[{}] input {} is undefined", who, i);
    if (size_t(t.dim()) != dims.size())
      fail("[{}] input {} has {} dims; the graph takes {} ({} symbolic)", who, i, t.dim(),
           dims.size(), shape_str(t.sizes()));
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] < 0) continue;
      const SymDim& s = symbols[size_t(dims[d])];
      const int64_t n = t.size(int64_t(d));
      if (n < s.min || n > s.max)
        fail("[{}] input {} dim {} is {}, outside the range of symbol '{}' [{}, {}]", who, i, d, n,
             s.name, s.min, s.max);
      int64_t& v = vals[size_t(dims[d])];
      if (v < 0) {
        v = n;
        from[size_t(dims[d])] = {i, d};
      } else if (v != n) {
        fail(
            "[{}] input {} dim {} is {}, but symbol '{}' (range [{}, {}]) is {} from input {} "
            "dim {}",
            who, i, d, n, s.name, s.min, s.max, v, from[size_t(dims[d])].first,
            from[size_t(dims[d])].second);
      }
    }
  }
  for (size_t k = 0; k < symbols.size(); ++k)
    if (vals[k] < 0) fail("[{}] symbol '{}' names no input dim", who, symbols[k].name);
  return vals;
}

uint32_t one_mask_of(const std::vector<SymDim>& symbols, const std::vector<int64_t>& vals) {
  uint32_t m = 0;
  for (size_t i = 0; i < symbols.size(); ++i)
    if (vals[i] == 1 && symbols[i].min <= 1 && symbols[i].max >= 2) m |= 1u << i;
  return m;
}

ProbePlan probe_plan(const std::vector<SymDim>& symbols, uint32_t one_mask,
                     const std::vector<int64_t>& actual) {
  ProbePlan p;
  const size_t n = symbols.size();
  std::vector<int64_t> a(n), b(n), c(n);
  std::vector<bool> has_check(n, false);
  std::vector<int> free;
  for (size_t i = 0; i < n; ++i) {
    int64_t lo, hi;
    structure_range(symbols[i], (one_mask >> i) & 1u, lo, hi);
    a[i] = actual[i] >= lo && actual[i] <= hi ? actual[i] : lo;
    if (lo == hi) continue;
    free.push_back(int(i));
    p.free |= 1u << i;
    b[i] = a[i] + 1 <= hi ? a[i] + 1 : a[i] - 1;
    for (int64_t cand : {a[i] + 3, a[i] - 3, a[i] + 2, a[i] - 2, lo, hi})
      if (cand >= lo && cand <= hi && cand != a[i] && cand != b[i]) {
        c[i] = cand;
        has_check[i] = true;
        break;
      }
  }
  for (size_t q = 0; q < (size_t(1) << free.size()); ++q) {
    std::vector<int64_t> v = a;
    for (size_t j = 0; j < free.size(); ++j)
      if ((q >> j) & 1u) v[size_t(free[j])] = b[size_t(free[j])];
    p.grid.push_back(std::move(v));
  }
  auto add_check = [&](std::vector<int64_t> v) {
    if (std::find(p.grid.begin(), p.grid.end(), v) == p.grid.end() &&
        std::find(p.checks.begin(), p.checks.end(), v) == p.checks.end())
      p.checks.push_back(std::move(v));
  };
  // the third values together, every symbol at its low end, and each symbol at its high end
  // alone (all at their highs at once would cost the largest call the ranges allow)
  std::vector<int64_t> chk = a, lows = a;
  std::vector<std::vector<int64_t>> highs;
  for (int i : free) {
    if (has_check[size_t(i)]) chk[size_t(i)] = c[size_t(i)];
    int64_t lo, hi;
    structure_range(symbols[size_t(i)], false, lo, hi);
    lows[size_t(i)] = lo;
    std::vector<int64_t> h = a;
    h[size_t(i)] = hi;
    highs.push_back(std::move(h));
  }
  add_check(std::move(chk));
  add_check(std::move(lows));
  for (auto& h : highs) add_check(std::move(h));
  return p;
}

std::vector<Tensor> probe_inputs(const std::vector<Tensor>& inputs,
                                 const std::vector<std::vector<int>>& input_dims,
                                 const std::vector<int64_t>& vals) {
  NoGradGuard ng;
  std::vector<Tensor> out = inputs;
  for (size_t i = 0; i < input_dims.size() && i < inputs.size(); ++i) {
    Tensor t = inputs[i];
    for (size_t d = 0; d < input_dims[i].size(); ++d) {
      const int s = input_dims[i][d];
      if (s < 0 || t.size(int64_t(d)) == vals[size_t(s)]) continue;
      const Tensor idx =
          arange(vals[size_t(s)], TensorOptions(kInt64)).remainder(Scalar(t.size(int64_t(d))));
      t = t.index_select(int64_t(d), idx);
    }
    out[i] = t.contiguous();
  }
  return out;
}

Graph instantiate(const SymbolicGraph& s, const std::vector<int64_t>& vals) {
  Graph g = s.tmpl;
  for (const AttrExpr& e : s.exprs) {
    AttrValue& a = g.nodes[size_t(e.node)].attrs.values[size_t(e.attr)];
    const int64_t x = e.eval(vals);
    if (e.elem >= 0) std::get<DimVector>(a)[size_t(e.elem)] = x;
    else if (std::holds_alternative<double>(a)) a = double(x);
    else if (std::holds_alternative<Scalar>(a))
      a = std::get<Scalar>(a).kind() == Scalar::Kind::Float ? Scalar(double(x)) : Scalar(x);
    else a = x;
  }
  for (size_t i = 0; i < g.inputs.size() && i < s.input_dims.size(); ++i) {
    Value& v = g.values[size_t(g.inputs[i])];
    for (size_t d = 0; d < s.input_dims[i].size() && d < v.sizes.size(); ++d)
      if (s.input_dims[i][d] >= 0) v.sizes[d] = vals[size_t(s.input_dims[i][d])];
    if (!s.input_dims[i].empty()) v.strides = contiguous_strides(v.sizes);
  }
  std::vector<Storage> fake(g.buffers.size());
  auto storage_of = [&](int b) -> const Storage& {
    Storage& st = fake[size_t(b)];
    if (!st)
      st = std::make_shared<StorageImpl>(nullptr, 0, g.buffers[size_t(b)].device,
                                         std::function<void(void*)>());
    return st;
  };
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    Node& n = g.nodes[ni];
    TensorList ins;
    for (int v : n.inputs)
      ins.push_back(v >= 0
                        ? meta_tensor(g.values[size_t(v)], storage_of(g.values[size_t(v)].buffer))
                        : Tensor());
    MetaList metas;
    n.op->infer_meta(ins, n.attrs, metas);
    if (metas.size() != n.outputs.size())
      fail("[jit.trace] symbolic shapes: {} makes {} results at {}, {} when recorded",
           node_name(g, ni), metas.size(), vals_str(s.symbols, vals), n.outputs.size());
    for (size_t k = 0; k < metas.size(); ++k) {
      const TensorMeta& m = metas[k];
      Value& o = g.values[size_t(n.outputs[k])];
      if (k == 0 && n.writes_existing) {
        if (!(IntArrayRef(o.sizes) == IntArrayRef(m.sizes)))
          fail("[jit.trace] symbolic shapes: {} writes {} into a tensor of {} at {}",
               node_name(g, ni), shape_str(m.sizes), shape_str(o.sizes), vals_str(s.symbols, vals));
        continue;
      }
      o.sizes = m.sizes;
      if (m.view_of >= 0) {
        o.strides = m.strides.empty() ? contiguous_strides(m.sizes) : m.strides;
        o.offset = m.offset;
      } else {
        o.strides = fresh_output_strides(*n.op, ins, m);
        o.offset = 0;
      }
    }
  }
  // every buffer holds what its tensors reach
  std::vector<size_t> reach(g.buffers.size(), 0);
  for (const Value& v : g.values) {
    int64_t hi = v.offset, step = 0, bytes = 0;
    bool empty = false;
    for (size_t d = 0; d < v.sizes.size(); ++d) {
      if (v.sizes[d] == 0) empty = true;
      else if (v.strides[d] > 0 && (__builtin_mul_overflow(v.sizes[d] - 1, v.strides[d], &step) ||
                                    __builtin_add_overflow(hi, step, &hi)))
        fail("[jit.trace] symbolic shapes: a tensor's extent overflows at {}",
             vals_str(s.symbols, vals));
    }
    if (!empty && (__builtin_add_overflow(hi, 1, &hi) ||
                   __builtin_mul_overflow(hi, int64_t(itemsize(v.dtype)), &bytes)))
      fail("[jit.trace] symbolic shapes: a tensor's extent overflows at {}",
           vals_str(s.symbols, vals));
    if (!empty) reach[size_t(v.buffer)] = std::max(reach[size_t(v.buffer)], size_t(bytes));
  }
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    Buffer& buf = g.buffers[b];
    if (buf.kind == BufKind::Intermediate || buf.kind == BufKind::Input) buf.nbytes = reach[b];
  }
  return g;
}

SymbolicGraph fit_symbolic(const std::vector<SymDim>& symbols,
                           const std::vector<std::vector<int>>& input_dims, uint32_t one_mask,
                           const ProbePlan& plan, std::vector<Graph> graphs) {
  const size_t ngrid = plan.grid.size();
  auto point = [&](size_t p) -> const std::vector<int64_t>& {
    return p < ngrid ? plan.grid[p] : plan.checks[p - ngrid];
  };
  if (graphs.size() != ngrid + plan.checks.size())
    fail("[jit.trace] symbolic shapes: internal error: {} recordings for {} probes", graphs.size(),
         ngrid);
  const Graph& g0 = graphs[0];
  const std::string at0 = vals_str(symbols, plan.grid[0]);
  if (!g0.grad_effects.empty() || !g0.rng_counters.empty())
    fail(
        "[jit.trace] symbolic dims need a function that neither sets .grad nor draws random "
        "numbers (an inference function)");
  for (const Buffer& b : g0.buffers)
    if (b.kind == BufKind::GradOf || b.kind == BufKind::HostScalar)
      fail(
          "[jit.trace] symbolic dims need an inference function; this one reads .grad or a "
          "learning rate");
  for (size_t v = 0; v < g0.values.size(); ++v) {
    const Value& val = g0.values[v];
    const BufKind k = g0.buffers[size_t(val.buffer)].kind;
    const bool is_input = std::find(g0.inputs.begin(), g0.inputs.end(), int(v)) != g0.inputs.end();
    if (val.producer < 0 && !is_input && (k == BufKind::Intermediate || k == BufKind::Input))
      fail(
          "[jit.trace] symbolic shapes: tensor %{} {} was made without an op (a view built "
          "outside dispatch), so its shape cannot follow the symbols",
          v, shape_str(val.sizes));
  }
  for (size_t p = 1; p < graphs.size(); ++p) {
    const std::string d = structure_diff(g0, graphs[p]);
    if (!d.empty()) {
      const std::string at = vals_str(symbols, point(p));
      fail(
          "[jit.trace] symbolic shapes: the function records another graph at {} than at {}: "
          "{} (a branch on a symbolic size?)",
          at, at0, d);
    }
  }
  SymbolicGraph s;
  s.symbols = symbols;
  s.input_dims = input_dims;
  s.one_mask = one_mask;
  s.recorded = plan.grid[0];
  // integer attributes: constant, or fitted over the grid and checked at the check point
  for (size_t ni = 0; ni < g0.nodes.size(); ++ni) {
    const Node& n = g0.nodes[ni];
    for (size_t k = 0; k < n.attrs.size(); ++k) {
      const AttrValue& a = n.attrs.values[k];
      const bool dims = std::holds_alternative<DimVector>(a);
      int64_t scalar;
      if (!dims && !int_slot(a, scalar)) continue;
      const size_t elems = dims ? std::get<DimVector>(a).size() : 1;
      for (size_t e = 0; e < elems; ++e) {
        auto at = [&](const Graph& g) {
          const AttrValue& x = g.nodes[ni].attrs.values[k];
          int64_t y = 0;
          if (dims) y = std::get<DimVector>(x)[e];
          else int_slot(x, y);
          return y;
        };
        std::vector<int64_t> ys;
        for (size_t p = 0; p < ngrid; ++p) ys.push_back(at(graphs[p]));
        bool constant = true;
        for (size_t p = 0; p < graphs.size(); ++p) constant = constant && at(graphs[p]) == ys[0];
        if (constant) continue;
        AttrExpr ex = fit_one(plan, ys, symbols.size());
        ex.node = int(ni);
        ex.attr = int(k);
        ex.elem = dims ? int(e) : -1;
        const std::string name =
            k < n.op->attr_names.size() ? n.op->attr_names[k] : std::to_string(k);
        uint32_t used = 0;
        for (size_t m = 0; m < ex.num.size(); ++m)
          if (ex.num[m] != 0) used |= uint32_t(m);
        bool fits = true;
        for (size_t p = ngrid; p < graphs.size(); ++p)
          fits = fits && ex.eval(point(p)) == at(graphs[p]);
        if (!fits) {  // not a multilinear polynomial: a floor division of one symbol?
          std::vector<std::vector<int64_t>> pts;
          std::vector<int64_t> all;
          for (size_t p = 0; p < graphs.size(); ++p) {
            pts.push_back(point(p));
            all.push_back(at(graphs[p]));
          }
          if (auto fl = fit_floor(pts, all, plan.free, symbols.size())) {
            fl->node = ex.node;
            fl->attr = ex.attr;
            fl->elem = ex.elem;
            ex = std::move(*fl);
            used = 0;
            for (size_t m = 0; m < ex.num.size(); ++m)
              if (ex.num[m] != 0) used |= uint32_t(m);
          }
        }
        for (size_t p = ngrid; p < graphs.size(); ++p)
          if (ex.eval(point(p)) != at(graphs[p]))
            fail(
                "[jit.trace] symbolic shapes: {} attribute '{}'{} is {} at {} but {} at {}: no "
                "sum, product or floor division of the symbols ({}) gives that",
                node_name(g0, ni), name, dims ? fmt::format(" element {}", e) : "", ys[0], at0,
                at(graphs[p]), vals_str(symbols, point(p)), symbols_in(symbols, used));
        s.exprs.push_back(std::move(ex));
      }
    }
  }
  s.tmpl = std::move(graphs[0]);
  // the derivation gives every recording back
  for (size_t p = 0; p < graphs.size(); ++p) {
    const std::vector<int64_t>& vals = point(p);
    const Graph& want = p == 0 ? s.tmpl : graphs[p];
    check_derived(instantiate(s, vals), want, vals_str(symbols, vals));
  }
  return s;
}

}  // namespace oneflow::trace

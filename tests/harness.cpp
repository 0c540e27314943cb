#include "harness.h"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace th {

bool same_bits(const of::Tensor& a, const of::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || !(a.sizes() == b.sizes())) return false;
  of::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * x.element_size()) == 0;
}

std::vector<OpRow>& rows() {
  static std::vector<OpRow> r;
  return r;
}

OpRow make_row_tol(std::string name, std::vector<std::string> ops, std::vector<Shape> shapes,
                   std::function<of::Tensor(const std::vector<of::Tensor>&)> fn,
                   std::function<Ref(const std::vector<Ref>&)> ref, double rtol, double atol) {
  OpRow r;
  r.name = std::move(name);
  r.ops = std::move(ops);
  r.shapes = std::move(shapes);
  r.fn = std::move(fn);
  r.ref = std::move(ref);
  r.rtol = rtol;
  r.atol = atol;
  return r;
}

OpRow make_row(std::string name, std::vector<std::string> ops, std::vector<Shape> shapes,
               std::function<of::Tensor(const std::vector<of::Tensor>&)> fn,
               std::function<Ref(const std::vector<Ref>&)> ref) {
  return make_row_tol(std::move(name), std::move(ops), std::move(shapes), std::move(fn),
                      std::move(ref), 1e-4, 1e-5);
}

int add_rows(std::vector<OpRow> rs) {
  for (auto& r : rs) rows().push_back(std::move(r));
  return int(rs.size());
}

std::vector<of::Tensor> make_inputs(const OpRow& row, uint64_t seed) {
  if (row.make) return row.make(seed);
  of::manual_seed(seed);
  std::vector<of::Tensor> in;
  for (auto& s : row.shapes) in.push_back(of::rand(s, of::kFloat64) * (row.hi - row.lo) + row.lo);
  return in;
}

bool is_nondiff(const OpRow& row, size_t i) {
  return std::find(row.nondiff.begin(), row.nondiff.end(), int(i)) != row.nondiff.end();
}

of::Tensor like(const of::Tensor& value, const of::Tensor& ref) {
  if (!ref.is_global()) return value.device() == ref.device() ? value : value.to(ref.device());
  const of::Placement pl = ref.placement();
  return value.to_global(pl, of::NdSbp(size_t(pl.ndim()), of::Sbp::broadcast()));
}

Ref to_ref(const of::Tensor& t) {
  Ref r;
  r.shape = t.sizes().vec();
  r.v = t.to_vector<double>();
  return r;
}

Shape broadcast(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    r[i] = x == 1 ? y : x;
  }
  return r;
}

Ref map_ref(const std::vector<Ref>& in,
            const std::function<double(const std::vector<double>&)>& f) {
  Shape s;
  for (auto& r : in) s = broadcast(s, r.shape);
  Ref out(s);
  std::vector<double> args(in.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = out.index(i);
    for (size_t k = 0; k < in.size(); ++k) args[k] = in[k].at_broadcast(idx);
    out.v[size_t(i)] = f(args);
  }
  return out;
}

of::Tensor noncontig(const of::Tensor& t) {
  if (t.dim() == 0 || t.numel() == 0) return t;
  if (t.dim() >= 2) {
    // a transpose of a contiguous copy of the transposed values
    of::Tensor c = t.transpose(0, t.dim() - 1).contiguous();
    of::Tensor r = c.transpose(0, t.dim() - 1);
    return r;
  }
  // 1-D: every other element of a buffer twice as long
  of::Tensor big = of::zeros({t.size(0) * 2}, t.options());
  of::Tensor v = big.slice(0, 0, std::nullopt, 2);
  {
    of::NoGradGuard ng;
    v.copy_(t);
  }
  return v;
}

std::string compare(const of::Tensor& t, const Ref& r, double rtol, double atol) {
  if (!t.defined()) return "result is undefined";
  if (t.sizes().vec() != r.shape) {
    std::ostringstream os;
    os << "shape mismatch: got " << of::shape_str(t.sizes()) << ", expected "
       << of::shape_str(of::IntArrayRef(r.shape));
    return os.str();
  }
  std::vector<double> got = t.to_vector<double>();
  double worst = 0;
  int64_t wi = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double a = got[i], b = r.v[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::isinf(b) && a == b) continue;
    double err = std::fabs(a - b) - (atol + rtol * std::fabs(b));
    if (!(err <= 0) && (wi < 0 || !(err <= worst))) {
      worst = err;
      wi = int64_t(i);
    }
  }
  if (wi < 0) return "";
  std::ostringstream os;
  os << "value mismatch at flat index " << wi << ": got " << got[size_t(wi)] << ", expected "
     << r.v[size_t(wi)] << " (rtol " << rtol << ", atol " << atol << ")";
  return os.str();
}

std::string gradcheck(const std::function<of::Tensor(const std::vector<of::Tensor>&)>& fn,
                      const std::vector<of::Tensor>& inputs, const std::vector<int>& nondiff,
                      double eps, double atol, double rtol) {
  auto is_diff = [&](size_t i) {
    return inputs[i].is_floating_point() &&
           std::find(nondiff.begin(), nondiff.end(), int(i)) == nondiff.end();
  };
  std::vector<of::Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    of::Tensor x = inputs[i].detach().clone();
    if (is_diff(i)) x.set_requires_grad(true);
    leaves.push_back(x);
  }
  of::Tensor y = fn(leaves);
  if (!y.requires_grad()) return "output does not require grad";
  // A fixed random cotangent: L = sum(y * v).
  of::manual_seed(1234);
  of::Tensor v = of::randn(y.sizes(), of::kFloat64);
  of::Tensor loss = (y * v).sum();
  std::vector<of::Tensor> diff_inputs;
  for (size_t i = 0; i < leaves.size(); ++i)
    if (is_diff(i)) diff_inputs.push_back(leaves[i]);
  std::vector<of::Tensor> grads =
      of::autograd::grad({loss}, diff_inputs, {}, std::nullopt, false, true);
  size_t k = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!is_diff(i)) continue;
    of::Tensor g = grads[k++];
    std::vector<double> analytic =
        g.defined() ? g.to_vector<double>() : std::vector<double>(size_t(leaves[i].numel()), 0.0);
    of::Tensor base = inputs[i].detach().clone().contiguous();
    double* p = base.data_ptr<double>();
    for (int64_t j = 0; j < base.numel(); ++j) {
      double orig = p[j];
      auto eval = [&](double val) {
        p[j] = val;
        std::vector<of::Tensor> in2;
        for (size_t m = 0; m < leaves.size(); ++m) in2.push_back(m == i ? base : inputs[m]);
        of::NoGradGuard ng;
        return (fn(in2).to(of::kFloat64) * v).sum().item<double>();
      };
      double numeric = (eval(orig + eps) - eval(orig - eps)) / (2 * eps);
      p[j] = orig;
      double a = analytic[size_t(j)];
      if (!(std::fabs(a - numeric) <= atol + rtol * std::fabs(numeric))) {
        std::ostringstream os;
        os << "gradient of input " << i << " at flat index " << j << ": analytic " << a
           << ", numeric " << numeric;
        return os.str();
      }
    }
  }
  return "";
}

bool throws_with(const std::function<void()>& fn, const std::vector<std::string>& needles,
                 std::string* msg) {
  try {
    fn();
  } catch (const of::Error& e) {
    std::string m = e.what();
    if (msg) *msg = m;
    for (auto& n : needles)
      if (m.find(n) == std::string::npos) return false;
    return true;
  } catch (const std::exception& e) {
    if (msg) *msg = std::string("non-of::Error exception: ") + e.what();
    return false;
  }
  if (msg) *msg = "no exception";
  return false;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  buf[n] = 0;
  return buf;
}

int run_capture(const std::string& cmd, std::string* out, size_t tail) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return 128;
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof buf, p)) out->append(buf, k);
  const int st = pclose(p);
  if (out->size() > tail) *out = out->substr(out->size() - tail);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

}  // namespace th

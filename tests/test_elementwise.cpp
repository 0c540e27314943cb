// Table rows for the core, unary, binary, view and basic reduction ops.
#include <doctest/doctest.h>

#include <cmath>

#include "dispatch.h"
#include "harness.h"

using th::OpRow;
using th::Ref;
using T = of::Tensor;
using V = std::vector<T>;

namespace {

double sgn(double x) { return double((0 < x) - (x < 0)); }
double erf_d(double x) { return std::erf(x); }

OpRow unary(const char* name, std::function<T(const T&)> f, double (*r)(double), double lo = -2,
            double hi = 2, bool grad = true) {
  OpRow row;
  row.name = name;
  row.ops = {name};
  row.shapes = {{3, 5}};
  row.fn = [f](const V& in) { return f(in[0]); };
  row.ref = [r](const std::vector<Ref>& in) {
    return th::map_ref(in, [r](const std::vector<double>& a) { return r(a[0]); });
  };
  row.lo = lo;
  row.hi = hi;
  row.grad = grad;
  return row;
}

OpRow binary(std::string name, std::vector<std::string> ops, th::Shape a, th::Shape b,
             std::function<T(const T&, const T&)> f, std::function<double(double, double)> r,
             double lo = -2, double hi = 2, bool grad = true) {
  OpRow row;
  row.name = name;
  row.ops = std::move(ops);
  row.shapes = {a, b};
  row.fn = [f](const V& in) { return f(in[0], in[1]); };
  row.ref = [r](const std::vector<Ref>& in) {
    return th::map_ref(in, [r](const std::vector<double>& v) { return r(v[0], v[1]); });
  };
  row.lo = lo;
  row.hi = hi;
  row.grad = grad;
  return row;
}

// Divisor inputs bounded away from zero, with both signs.
std::vector<T> numerator_divisor(uint64_t seed, th::Shape a, th::Shape b) {
  of::manual_seed(seed);
  T x = of::rand(a, of::kFloat64) * 6 - 3;
  T mag = of::rand(b, of::kFloat64) * 1.5 + 0.5;
  T sign = of::where(of::rand(b, of::kFloat64) > 0.5, 1.0, -1.0).to(of::kFloat64);
  return {x, mag * sign};
}

// Reference for view-like ops: out[i] = in[map(out index)].
Ref gather_ref(const Ref& in, th::Shape out_shape, std::function<th::Shape(const th::Shape&)> map) {
  Ref out(out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.v[size_t(i)] = in.at(map(out.index(i)));
  return out;
}

Ref reduce_ref(const Ref& in, std::vector<int64_t> dims, bool keepdim, bool mean) {
  if (dims.empty())
    for (int64_t d = 0; d < in.dim(); ++d) dims.push_back(d);
  th::Shape os, ks;
  for (int64_t d = 0; d < in.dim(); ++d) {
    bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!red) os.push_back(in.shape[size_t(d)]);
    ks.push_back(red ? 1 : in.shape[size_t(d)]);
  }
  Ref keep(ks);
  std::vector<int64_t> count(size_t(keep.numel()), 0);
  for (int64_t i = 0; i < in.numel(); ++i) {
    th::Shape idx = in.index(i);
    for (int64_t d : dims) idx[size_t(d)] = 0;
    keep.v[size_t(keep.flat(idx))] += in.v[size_t(i)];
    count[size_t(keep.flat(idx))]++;
  }
  if (mean)
    for (size_t k = 0; k < keep.v.size(); ++k) keep.v[k] /= double(count[k]);
  if (keepdim) return keep;
  return Ref(os, keep.v);
}

}  // namespace

// clang-format off
TH_ROWS({
    unary("neg", [](const T& x) { return -x; }, [](double x) { return -x; }),
    unary("abs", [](const T& x) { return x.abs(); }, [](double x) { return std::fabs(x); }),
    unary("sign", [](const T& x) { return x.sign(); }, sgn),
    unary("exp", [](const T& x) { return x.exp(); }, [](double x) { return std::exp(x); }, -5, 5),
    unary("exp2", [](const T& x) { return of::exp2(x); }, [](double x) { return std::exp2(x); }),
    unary("log", [](const T& x) { return x.log(); }, [](double x) { return std::log(x); }, 0.1, 3),
    unary("log2", [](const T& x) { return of::log2(x); }, [](double x) { return std::log2(x); }, 0.1, 3),
    unary("log1p", [](const T& x) { return of::log1p(x); }, [](double x) { return std::log1p(x); }, -0.9, 3),
    unary("expm1", [](const T& x) { return of::expm1(x); }, [](double x) { return std::expm1(x); }),
    unary("sqrt", [](const T& x) { return x.sqrt(); }, [](double x) { return std::sqrt(x); }, 0.1, 3),
    unary("rsqrt", [](const T& x) { return x.rsqrt(); }, [](double x) { return 1 / std::sqrt(x); }, 0.1, 3),
    unary("reciprocal", [](const T& x) { return x.reciprocal(); }, [](double x) { return 1 / x; }, 0.3, 3),
    unary("square", [](const T& x) { return x.square(); }, [](double x) { return x * x; }),
    unary("sin", [](const T& x) { return x.sin(); }, [](double x) { return std::sin(x); }, -4, 4),
    unary("cos", [](const T& x) { return x.cos(); }, [](double x) { return std::cos(x); }, -4, 4),
    unary("tan", [](const T& x) { return x.tan(); }, [](double x) { return std::tan(x); }, -1.2, 1.2),
    unary("tanh", [](const T& x) { return x.tanh(); }, [](double x) { return std::tanh(x); }, -4, 4),
    unary("sigmoid", [](const T& x) { return x.sigmoid(); },
          [](double x) { return 1 / (1 + std::exp(-x)); }, -6, 6),
    unary("relu", [](const T& x) { return x.relu(); }, [](double x) { return x > 0 ? x : 0; }),
    unary("silu", [](const T& x) { return x.silu(); },
          [](double x) { return x / (1 + std::exp(-x)); }, -6, 6),
    unary("erf", [](const T& x) { return x.erf(); }, erf_d, -3, 3),
    unary("floor", [](const T& x) { return x.floor(); }, [](double x) { return std::floor(x); }, -4, 4),
    unary("ceil", [](const T& x) { return x.ceil(); }, [](double x) { return std::ceil(x); }, -4, 4),
    unary("round", [](const T& x) { return x.round(); }, [](double x) { return std::nearbyint(x); }, -4, 4),
    unary("trunc", [](const T& x) { return x.trunc(); }, [](double x) { return std::trunc(x); }, -4, 4),
    [] {
      OpRow r = unary("gelu", [](const T& x) { return x.gelu(); },
                      [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -5, 5);
      r.name = "gelu/exact";
      return r;
    }(),
    [] {
      OpRow r = unary("gelu", [](const T& x) { return of::gelu(x, "tanh"); },
                      [](double x) {
                        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
                      }, -5, 5);
      r.name = "gelu/tanh";
      return r;
    }(),
    [] {
      OpRow r = unary("isnan", [](const T& x) { return of::isnan(x.log()); },
                      [](double x) { return double(std::isnan(std::log(x))); }, -1, 1, false);
      r.ops = {"isnan", "log"};
      return r;
    }(),
    [] {
      OpRow r = unary("isinf", [](const T& x) { return of::isinf(1.0 / x.floor()); },
                      [](double x) { return double(std::isinf(1.0 / std::floor(x))); }, -1, 1, false);
      r.ops = {"isinf"};
      return r;
    }(),
    [] {
      OpRow r = unary("logical_not", [](const T& x) { return of::logical_not(x.round()); },
                      [](double x) { return double(std::nearbyint(x) == 0); }, -1, 1, false);
      return r;
    }(),
});
// clang-format on

TH_ROWS({
    binary(
        "add/same", {"add"}, {3, 4}, {3, 4}, [](const T& a, const T& b) { return a + b; },
        [](double a, double b) { return a + b; }),
    binary(
        "add/broadcast", {"add"}, {2, 3, 4}, {4}, [](const T& a, const T& b) { return a + b; },
        [](double a, double b) { return a + b; }),
    binary(
        "add/outer-broadcast", {"add"}, {3, 1}, {1, 4},
        [](const T& a, const T& b) { return of::add(a, b, 2.5); },
        [](double a, double b) { return a + 2.5 * b; }),
    binary(
        "add/0-d", {"add"}, {}, {3}, [](const T& a, const T& b) { return a + b; },
        [](double a, double b) { return a + b; }),
    binary(
        "add/empty", {"add"}, {0, 3}, {3}, [](const T& a, const T& b) { return a + b; },
        [](double a, double b) { return a + b; }),
    binary(
        "add/scalar", {"add"}, {3, 4}, {1},
        [](const T& a, const T& b) { return 2 + a + b * 0.5 - 1; },
        [](double a, double b) { return 2 + a + b * 0.5 - 1; }),
    binary(
        "sub", {"sub"}, {2, 3}, {2, 1}, [](const T& a, const T& b) { return of::sub(a, b, 3); },
        [](double a, double b) { return a - 3 * b; }),
    binary(
        "mul", {"mul"}, {2, 3, 4}, {3, 1}, [](const T& a, const T& b) { return a * b; },
        [](double a, double b) { return a * b; }),
    binary(
        "div", {"div"}, {4, 3}, {3}, [](const T& a, const T& b) { return a / b; },
        [](double a, double b) { return a / b; }, 0.5, 2),
    [] {
      OpRow r = binary(
          "div/trunc", {"div_trunc"}, {4, 3}, {3},
          [](const T& a, const T& b) { return of::div(a, b, "trunc"); },
          [](double a, double b) { return std::trunc(a / b); });
      r.make = [](uint64_t s) { return numerator_divisor(s, {4, 3}, {3}); };
      return r;
    }(),
    [] {
      OpRow r = binary(
          "div/floor", {"div_floor"}, {4, 3}, {3},
          [](const T& a, const T& b) { return of::div(a, b, "floor"); },
          [](double a, double b) { return std::floor(a / b); });
      r.make = [](uint64_t s) { return numerator_divisor(s, {4, 3}, {3}); };
      return r;
    }(),
    binary(
        "maximum", {"maximum"}, {3, 4}, {4},
        [](const T& a, const T& b) { return of::maximum(a, b); },
        [](double a, double b) { return std::max(a, b); }),
    binary(
        "minimum", {"minimum"}, {3, 4}, {3, 1},
        [](const T& a, const T& b) { return of::minimum(a, b); },
        [](double a, double b) { return std::min(a, b); }),
    [] {
      OpRow r = binary(
          "fmod", {"fmod"}, {4, 3}, {3}, [](const T& a, const T& b) { return of::fmod(a, b); },
          [](double a, double b) { return std::fmod(a, b); });
      r.make = [](uint64_t s) { return numerator_divisor(s, {4, 3}, {3}); };
      return r;
    }(),
    [] {
      OpRow r = binary(
          "remainder", {"remainder"}, {4, 3}, {3},
          [](const T& a, const T& b) { return of::remainder(a, b); },
          [](double a, double b) { return a - b * std::floor(a / b); });
      r.make = [](uint64_t s) { return numerator_divisor(s, {4, 3}, {3}); };
      r.atol = 2e-6;
      return r;
    }(),
    binary(
        "atan2", {"atan2"}, {3, 4}, {3, 4}, [](const T& a, const T& b) { return of::atan2(a, b); },
        [](double a, double b) { return std::atan2(a, b); }),
    binary(
        "pow", {"pow"}, {3, 4}, {4}, [](const T& a, const T& b) { return of::pow(a, b); },
        [](double a, double b) { return std::pow(a, b); }, 0.5, 2),
    binary(
        "eq", {"eq"}, {3, 4}, {4}, [](const T& a, const T& b) { return a.round() == b.round(); },
        [](double a, double b) { return double(std::nearbyint(a) == std::nearbyint(b)); }, -2, 2,
        false),
    binary(
        "ne", {"ne"}, {3, 4}, {4}, [](const T& a, const T& b) { return a.round() != b.round(); },
        [](double a, double b) { return double(std::nearbyint(a) != std::nearbyint(b)); }, -2, 2,
        false),
    binary(
        "lt", {"lt"}, {3, 4}, {4}, [](const T& a, const T& b) { return a < b; },
        [](double a, double b) { return double(a < b); }, -2, 2, false),
    binary(
        "le", {"le"}, {3, 4}, {4}, [](const T& a, const T& b) { return a <= b; },
        [](double a, double b) { return double(a <= b); }, -2, 2, false),
    binary(
        "gt", {"gt"}, {3, 4}, {4}, [](const T& a, const T& b) { return a > b; },
        [](double a, double b) { return double(a > b); }, -2, 2, false),
    binary(
        "ge", {"ge"}, {3, 4}, {4}, [](const T& a, const T& b) { return a >= 0.5; },
        [](double a, double) { return double(a >= 0.5); }, -2, 2, false),
    binary(
        "logical_and", {"logical_and"}, {3, 4}, {4},
        [](const T& a, const T& b) { return of::logical_and(a > 0, b > 0); },
        [](double a, double b) { return double(a > 0 && b > 0); }, -2, 2, false),
    binary(
        "logical_or", {"logical_or"}, {3, 4}, {4},
        [](const T& a, const T& b) { return of::logical_or(a > 0, b > 0); },
        [](double a, double b) { return double(a > 0 || b > 0); }, -2, 2, false),
    binary(
        "logical_xor", {"logical_xor"}, {3, 4}, {4},
        [](const T& a, const T& b) { return (a > 0) ^ (b > 0); },
        [](double a, double b) { return double((a > 0) != (b > 0)); }, -2, 2, false),
    binary(
        "pow_scalar", {"pow_scalar"}, {3, 4}, {1},
        [](const T& a, const T&) { return a.pow(2.5) + a.pow(2); },
        [](double a, double) { return std::pow(a, 2.5) + a * a; }, 0.2, 2),
    binary(
        "clamp", {"clamp"}, {3, 4}, {1}, [](const T& a, const T&) { return a.clamp(-0.5, 0.7); },
        [](double a, double) { return std::min(std::max(a, -0.5), 0.7); }),
    binary(
        "clamp/tensor", {"maximum", "minimum"}, {3, 4}, {4},
        [](const T& a, const T& b) {
          return a.clamp(std::optional<T>(b - 1), std::optional<T>(b));
        },
        [](double a, double b) { return std::min(std::max(a, b - 1), b); }),
    binary(
        "lerp", {"add", "mul", "sub"}, {3, 4}, {3, 4},
        [](const T& a, const T& b) { return of::lerp(a, b, 0.3); },
        [](double a, double b) { return a + 0.3 * (b - a); }),
    [] {
      OpRow r;
      r.name = "where";
      r.ops = {"where"};
      r.make = [](uint64_t s) {
        of::manual_seed(s);
        return V{of::rand({3, 4}) > 0.5, of::randn({3, 4}, of::kFloat64),
                 of::randn({4}, of::kFloat64)};
      };
      r.nondiff = {0};
      r.fn = [](const V& in) { return of::where(in[0], in[1], in[2]); };
      r.ref = [](const std::vector<Ref>& in) {
        return th::map_ref(in,
                           [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "masked_fill";
      r.ops = {"where"};
      r.make = [](uint64_t s) {
        of::manual_seed(s);
        return V{of::randn({3, 4}, of::kFloat64), of::rand({4}) > 0.5};
      };
      r.nondiff = {1};
      r.fn = [](const V& in) { return in[0].masked_fill(in[1], -1.5); };
      r.ref = [](const std::vector<Ref>& in) {
        return th::map_ref(in,
                           [](const std::vector<double>& v) { return v[1] != 0 ? -1.5 : v[0]; });
      };
      return r;
    }(),
});

// Copies, fills, factories and random ops.
// clang-format off
TH_ROWS({
    unary("copy", [](const T& x) { return x.clone() + x.contiguous(); }, [](double x) { return 2 * x; }),
    [] {
      OpRow r = unary("copy_", [](const T& x) {
        T z = th::like(of::zeros({2, 3, 5}, x.dtype()), x);
        z.copy_(x);
        return z;
      }, [](double x) { return x; });
      r.ref = [](const std::vector<Ref>& in) {
        Ref o({2, 3, 5});
        for (int64_t i = 0; i < o.numel(); ++i) o.v[size_t(i)] = in[0].v[size_t(i % 15)];
        return o;
      };
      return r;
    }(),
    [] {
      OpRow r = unary("fill_", [](const T& x) {
        T y = x * 1;
        y.fill_(2.5);
        return y + x;
      }, [](double x) { return 2.5 + x; });
      r.ops = {"fill_"};
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "factories";
      r.ops = {"full", "arange", "linspace", "eye"};
      r.fn = [](const V&) {
        T a = of::full({3, 4}, 1.5, of::kFloat64) + of::arange(4, of::kFloat64) +
              of::linspace(-1, 1, 4, of::kFloat64) + of::eye(3, 4, of::kFloat64) +
              of::arange(1, 2, 0.25, of::kFloat64);
        return a;
      };
      r.ref = [](const std::vector<Ref>&) {
        Ref o({3, 4});
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 4; ++j)
            o.v[size_t(i * 4 + j)] = 1.5 + double(j) + (-1 + 2.0 * double(j) / 3) + (i == j) + (1 + 0.25 * double(j));
        return o;
      };
      r.grad = false;
      r.float32 = false;
      return r;
    }(),
    [] {
      // The device-transfer op, run CPU -> CPU through the op table (Tensor::to skips it when
      // the device does not change; test_cuda.cpp covers host <-> device when a GPU exists).
      OpRow r;
      r.name = "to_device/cpu";
      r.ops = {"to_device"};
      r.shapes = {{3, 5}};
      r.fn = [](const V& in) {
        return of::dispatch1(of::find_op("to_device"), {in[0].contiguous()},
                             {int64_t(of::DeviceType::CPU), int64_t(-1)});
      };
      r.ref = [](const std::vector<Ref>& in) { return in[0]; };
      return r;
    }(),
    [] {
      // Statistics of 20000 draws (tolerances ~5 standard errors).
      OpRow r;
      r.name = "random/statistics";
      r.ops = {"uniform", "normal", "randint"};
      r.fn = [](const V&) {
        of::manual_seed(3);
        T u = of::rand({20000}, of::kFloat64), n = of::randn({20000}, of::kFloat64);
        T k = of::randint(2, 7, {20000}, of::kFloat64);
        return of::stack({u.mean(), ((u - 0.5).square()).mean(), n.mean(), n.var(),
                          k.mean(), (k.amin() + k.amax())});
      };
      r.ref = [](const std::vector<Ref>&) { return Ref({6}, {0.5, 1.0 / 12, 0.0, 1.0, 4.0, 8.0}); };
      r.rtol = r.rtol64 = 0;
      r.atol = r.atol64 = 0.03;
      r.grad = false;
      r.float32 = false;
      return r;
    }(),
});
// clang-format on

// Views.
// clang-format off
TH_ROWS({
    [] {
      OpRow r;
      r.name = "view/reshape";
      r.ops = {"view"};
      r.shapes = {{2, 3, 4}};
      r.fn = [](const V& in) { return in[0].reshape({4, -1}).view({2, 12}).flatten().unsqueeze(0).squeeze(0); };
      r.ref = [](const std::vector<Ref>& in) { return Ref({24}, in[0].v); };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "permute";
      r.ops = {"permute"};
      r.shapes = {{2, 3, 4}};
      r.fn = [](const V& in) { return in[0].permute({2, 0, 1}) * 1.0; };
      r.ref = [](const std::vector<Ref>& in) {
        return gather_ref(in[0], {4, 2, 3}, [](const th::Shape& o) { return th::Shape{o[1], o[2], o[0]}; });
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "transpose/t";
      r.ops = {"permute"};
      r.shapes = {{3, 5}};
      r.fn = [](const V& in) { return in[0].t().transpose(0, -1).t(); };
      r.ref = [](const std::vector<Ref>& in) {
        return gather_ref(in[0], {5, 3}, [](const th::Shape& o) { return th::Shape{o[1], o[0]}; });
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "expand";
      r.ops = {"expand"};
      r.shapes = {{3, 1}};
      r.fn = [](const V& in) { return in[0].expand({2, 3, 4}) * 1.0; };
      r.ref = [](const std::vector<Ref>& in) {
        return gather_ref(in[0], {2, 3, 4}, [](const th::Shape& o) { return th::Shape{o[1], 0}; });
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "slice/narrow";
      r.ops = {"slice", "view_scatter"};
      r.shapes = {{5, 6}};
      r.fn = [](const V& in) { return in[0].slice(1, 1, 6, 2).narrow(0, 1, 3); };
      r.ref = [](const std::vector<Ref>& in) {
        return gather_ref(in[0], {3, 3}, [](const th::Shape& o) { return th::Shape{o[0] + 1, 1 + 2 * o[1]}; });
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "select";
      r.ops = {"select"};
      r.shapes = {{3, 4, 2}};
      r.fn = [](const V& in) { return in[0].select(1, -1)[2]; };
      r.ref = [](const std::vector<Ref>& in) {
        return gather_ref(in[0], {2}, [](const th::Shape& o) { return th::Shape{2, 3, o[0]}; });
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "diagonal";
      r.ops = {"diagonal"};
      r.shapes = {{4, 5}};
      r.fn = [](const V& in) { return in[0].diagonal(1) + in[0].diagonal(-1, 1, 0); };
      r.ref = [](const std::vector<Ref>& in) {
        Ref o({4});
        for (int64_t i = 0; i < 4; ++i) o.v[size_t(i)] = in[0].at({i, i + 1}) + in[0].at({i, i + 1});
        return o;
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "as_strided";
      r.ops = {"as_strided"};
      r.shapes = {{12}};
      r.noncontig = false;  // as_strided addresses storage directly
      r.fn = [](const V& in) { return in[0].as_strided({3, 3}, {3, 1}, 1) + in[0].as_strided({2, 2}, {1, 1}).sum(); };
      r.ref = [](const std::vector<Ref>& in) {
        Ref o({3, 3});
        double s = in[0].v[0] + 2 * in[0].v[1] + in[0].v[2];
        for (int64_t i = 0; i < 9; ++i) o.v[size_t(i)] = in[0].v[size_t(1 + (i / 3) * 3 + i % 3)] + s;
        return o;
      };
      return r;
    }(),
});
// clang-format on

// Basic reductions.
// clang-format off
TH_ROWS({
    [] {
      OpRow r;
      r.name = "sum/all";
      r.ops = {"sum"};
      r.shapes = {{4, 5, 3}};
      r.fn = [](const V& in) { return in[0].sum(); };
      r.ref = [](const std::vector<Ref>& in) { return reduce_ref(in[0], {}, false, false); };
      r.rtol = 1e-5;
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "sum/dims";
      r.ops = {"sum"};
      r.shapes = {{4, 5, 3}};
      r.fn = [](const V& in) { return in[0].sum({0, -1}, true) + in[0].sum(1).sum(0, true).sum(1); };
      r.ref = [](const std::vector<Ref>& in) {
        Ref a = reduce_ref(in[0], {0, 2}, true, false);  // (1,5,1)
        Ref b = reduce_ref(in[0], {}, false, false);
        for (auto& v : a.v) v += b.v[0];
        return a;
      };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "sum/0-d";
      r.ops = {"sum"};
      r.shapes = {{}};
      r.fn = [](const V& in) { return in[0].sum() + in[0].sum(0); };
      r.ref = [](const std::vector<Ref>& in) { return Ref({}, {2 * in[0].v[0]}); };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "mean";
      r.ops = {"mean"};
      r.shapes = {{4, 6}};
      r.fn = [](const V& in) { return in[0].mean({1}); };
      r.ref = [](const std::vector<Ref>& in) { return reduce_ref(in[0], {1}, false, true); };
      return r;
    }(),
    [] {
      OpRow r;
      r.name = "all/any";
      r.ops = {"all", "any"};
      r.shapes = {{4, 6}};
      r.fn = [](const V& in) { const of::ScalarType dt = in[0].dtype();
        return (in[0] > -1.5).all(1).to(dt) + 2 * (in[0] > 1.5).any(1).to(dt); };
      r.ref = [](const std::vector<Ref>& in) {
        Ref o({4});
        for (int64_t i = 0; i < 4; ++i) {
          bool all = true, any = false;
          for (int64_t j = 0; j < 6; ++j) {
            all = all && in[0].at({i, j}) > -1.5;
            any = any || in[0].at({i, j}) > 1.5;
          }
          o.v[size_t(i)] = double(all) + 2 * double(any);
        }
        return o;
      };
      r.grad = false;
      return r;
    }(),
});
// clang-format on

// test_rnn.cpp: RNN, LSTM, GRU and their cells against an independent float64 loop written
// here (every option combination that changes the math), gradients against finite differences,
// libtorch's parameter names and shapes, packed sequences against per-sequence runs, and the
// error paths.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "harness.h"

namespace {

using th::Ref;
using th::Shape;
namespace nn = of::nn;
using Vec = std::vector<double>;

enum class Mode { Tanh, Relu, Lstm, Gru };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Tanh:
      return "RNN(tanh)";
    case Mode::Relu:
      return "RNN(relu)";
    case Mode::Lstm:
      return "LSTM";
    default:
      return "GRU";
  }
}

double sigm(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// y = W v (+ b): W [rows, cols] row-major.
Vec matvec(const Ref& w, const Vec& v, const Ref* b) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  Vec y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = b ? b->v[size_t(r)] : 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += w.v[size_t(r * cols + c)] * v[size_t(c)];
    y[size_t(r)] = acc;
  }
  return y;
}

// One recurrence step of the textbook formulas (PyTorch's documentation), state h (and c).
void ref_step(Mode mode, const std::map<std::string, Ref>& p, const std::string& sfx, int64_t H,
              const Vec& x, Vec& h, Vec& c) {
  auto get = [&](const std::string& k) -> const Ref* {
    auto it = p.find(k + sfx);
    return it == p.end() ? nullptr : &it->second;
  };
  const Vec gx = matvec(*get("weight_ih"), x, get("bias_ih"));
  const Vec gh = matvec(*get("weight_hh"), h, get("bias_hh"));
  if (mode == Mode::Tanh || mode == Mode::Relu) {
    for (int64_t j = 0; j < H; ++j) {
      const double a = gx[size_t(j)] + gh[size_t(j)];
      h[size_t(j)] = mode == Mode::Tanh ? std::tanh(a) : std::max(a, 0.0);
    }
  } else if (mode == Mode::Lstm) {
    Vec hh(static_cast<size_t>(H));
    for (int64_t j = 0; j < H; ++j) {
      auto g = [&](int64_t k) { return gx[size_t(k * H + j)] + gh[size_t(k * H + j)]; };
      const double i = sigm(g(0)), f = sigm(g(1)), gg = std::tanh(g(2)), o = sigm(g(3));
      c[size_t(j)] = f * c[size_t(j)] + i * gg;
      hh[size_t(j)] = o * std::tanh(c[size_t(j)]);
    }
    const Ref* whr = get("weight_hr");
    h = whr ? matvec(*whr, hh, nullptr) : hh;
  } else {
    for (int64_t j = 0; j < H; ++j) {
      const double r = sigm(gx[size_t(j)] + gh[size_t(j)]);
      const double z = sigm(gx[size_t(H + j)] + gh[size_t(H + j)]);
      const double n = std::tanh(gx[size_t(2 * H + j)] + r * gh[size_t(2 * H + j)]);
      h[size_t(j)] = (1 - z) * n + z * h[size_t(j)];
    }
  }
}

struct RefOut {
  Ref out, hn, cn;
};

// The whole stack, time-major x [T, B, F]; h0 [L*D, B, P] and c0 [L*D, B, H] (nullptr: zeros).
RefOut ref_rnn(Mode mode, const std::map<std::string, Ref>& p, int64_t L, bool bidir, int64_t H,
               int64_t P, const Ref& x, const Ref* h0, const Ref* c0) {
  const int64_t T = x.shape[0], B = x.shape[1], D = bidir ? 2 : 1;
  std::vector<std::vector<Vec>> in(static_cast<size_t>(T),
                                   std::vector<Vec>(static_cast<size_t>(B)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < x.shape[2]; ++f) in[size_t(t)][size_t(b)].push_back(x.at({t, b, f}));
  RefOut r{Ref({T, B, D * P}), Ref({L * D, B, P}), Ref({L * D, B, H})};
  for (int64_t l = 0; l < L; ++l) {
    std::vector<std::vector<Vec>> out(
        static_cast<size_t>(T),
        std::vector<Vec>(static_cast<size_t>(B), Vec(static_cast<size_t>(D * P))));
    for (int64_t d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      const int64_t k = l * D + d;
      for (int64_t b = 0; b < B; ++b) {
        Vec h(size_t(P), 0.0), c(size_t(H), 0.0);
        for (int64_t j = 0; j < P; ++j) h[size_t(j)] = h0 ? h0->at({k, b, j}) : 0.0;
        for (int64_t j = 0; j < H; ++j) c[size_t(j)] = c0 ? c0->at({k, b, j}) : 0.0;
        for (int64_t s = 0; s < T; ++s) {
          const int64_t t = d ? T - 1 - s : s;
          ref_step(mode, p, sfx, H, in[size_t(t)][size_t(b)], h, c);
          for (int64_t j = 0; j < P; ++j)
            out[size_t(t)][size_t(b)][size_t(d * P + j)] = h[size_t(j)];
        }
        for (int64_t j = 0; j < P; ++j) r.hn.v[size_t(r.hn.flat({k, b, j}))] = h[size_t(j)];
        for (int64_t j = 0; j < H; ++j) r.cn.v[size_t(r.cn.flat({k, b, j}))] = c[size_t(j)];
      }
    }
    in = out;
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < D * P; ++j)
        r.out.v[size_t(r.out.flat({t, b, j}))] = in[size_t(t)][size_t(b)][size_t(j)];
  return r;
}

std::map<std::string, Ref> param_refs(const nn::Module& m) {
  std::map<std::string, Ref> p;
  for (const auto& item : m.named_parameters()) p[item.key()] = th::to_ref(item.value());
  return p;
}

Ref transpose01(const Ref& a) {
  Ref r({a.shape[1], a.shape[0], a.shape[2]});
  for (int64_t i = 0; i < a.shape[0]; ++i)
    for (int64_t j = 0; j < a.shape[1]; ++j)
      for (int64_t k = 0; k < a.shape[2]; ++k) r.v[size_t(r.flat({j, i, k}))] = a.at({i, j, k});
  return r;
}

struct Config {
  Mode mode;
  int64_t layers = 1;
  bool bidir = false, batch_first = false, bias = true, states = false, noncontig = false;
  int64_t proj = 0;
  std::string str() const {
    std::ostringstream s;
    s << mode_name(mode) << " layers=" << layers << " bidir=" << bidir
      << " batch_first=" << batch_first << " bias=" << bias << " states=" << states
      << " noncontig=" << noncontig << " proj=" << proj;
    return s.str();
  }
};

constexpr int64_t kIn = 3, kHidden = 4, kT = 5, kB = 2;

// A module of the configured kind with its forward as (output, h_n, c_n).
struct AnyRnn {
  std::shared_ptr<nn::Module> module;
  std::function<std::tuple<of::Tensor, of::Tensor, of::Tensor>(const of::Tensor&, const of::Tensor&,
                                                               const of::Tensor&)>
      fwd;
};

AnyRnn make_rnn(const Config& c) {
  AnyRnn r;
  if (c.mode == Mode::Lstm) {
    nn::LSTM m(nn::LSTMOptions(kIn, kHidden)
                   .num_layers(c.layers)
                   .bidirectional(c.bidir)
                   .batch_first(c.batch_first)
                   .bias(c.bias)
                   .proj_size(c.proj));
    r.module = m.ptr();
    r.fwd = [m](const of::Tensor& x, const of::Tensor& h, const of::Tensor& cc) {
      auto [out, hc] = h.defined() ? m(x, std::make_tuple(h, cc)) : m(x);
      return std::make_tuple(out, std::get<0>(hc), std::get<1>(hc));
    };
  } else if (c.mode == Mode::Gru) {
    nn::GRU m(nn::GRUOptions(kIn, kHidden)
                  .num_layers(c.layers)
                  .bidirectional(c.bidir)
                  .batch_first(c.batch_first)
                  .bias(c.bias));
    r.module = m.ptr();
    r.fwd = [m](const of::Tensor& x, const of::Tensor& h, const of::Tensor&) {
      auto [out, hn] = m(x, h);
      return std::make_tuple(out, hn, of::Tensor());
    };
  } else {
    nn::RNNOptions o(kIn, kHidden);
    o.num_layers(c.layers).bidirectional(c.bidir).batch_first(c.batch_first).bias(c.bias);
    if (c.mode == Mode::Relu) o.nonlinearity(of::kReLU);
    nn::RNN m(o);
    r.module = m.ptr();
    r.fwd = [m](const of::Tensor& x, const of::Tensor& h, const of::Tensor&) {
      auto [out, hn] = m(x, h);
      return std::make_tuple(out, hn, of::Tensor());
    };
  }
  return r;
}

std::vector<Config> configs() {
  std::vector<Config> cs;
  for (Mode m : {Mode::Tanh, Mode::Relu, Mode::Lstm, Mode::Gru}) {
    cs.push_back({m});
    cs.push_back({m, 2, true, false, true, true, false});
    cs.push_back({m, 2, false, true, true, false, true});
    cs.push_back({m, 1, true, true, false, true, true});
    cs.push_back({m, 3, true, false, true, false, false});
  }
  cs.push_back({Mode::Lstm, 2, true, false, true, true, false, 2});
  cs.push_back({Mode::Lstm, 1, false, true, false, false, true, 3});
  return cs;
}

// Runs config c in dtype dt and compares output, h_n, c_n with the float64 reference.
void check_against_ref(const Config& c, of::ScalarType dt, double rtol, double atol) {
  of::manual_seed(7);
  AnyRnn r = make_rnn(c);
  r.module->to(dt);
  const int64_t D = c.bidir ? 2 : 1, P = c.proj ? c.proj : kHidden;
  of::Tensor x = of::randn(c.batch_first ? Shape{kB, kT, kIn} : Shape{kT, kB, kIn}, dt);
  of::Tensor h0, c0;
  if (c.states) {
    h0 = of::randn({c.layers * D, kB, P}, dt);
    c0 = of::randn({c.layers * D, kB, kHidden}, dt);
  }
  of::Tensor xin = c.noncontig ? th::noncontig(x) : x;
  if (c.noncontig) REQUIRE_FALSE(xin.is_contiguous());
  // named references, not a structured binding: clang 14 cannot capture bindings in lambdas
  auto res = r.fwd(xin, h0, c0);
  auto& out = std::get<0>(res);
  auto& hn = std::get<1>(res);
  auto& cn = std::get<2>(res);
  Ref xr = th::to_ref(x);
  if (c.batch_first) xr = transpose01(xr);
  Ref h0r = c.states ? th::to_ref(h0) : Ref(), c0r = c.states ? th::to_ref(c0) : Ref();
  RefOut want = ref_rnn(c.mode, param_refs(*r.module), c.layers, c.bidir, kHidden, P, xr,
                        c.states ? &h0r : nullptr, c.states ? &c0r : nullptr);
  if (c.batch_first) want.out = transpose01(want.out);
  CHECK_MESSAGE(th::compare(out, want.out, rtol, atol) == "", c.str(), " output ",
                th::compare(out, want.out, rtol, atol));
  CHECK_MESSAGE(th::compare(hn, want.hn, rtol, atol) == "", c.str(), " h_n");
  if (c.mode == Mode::Lstm)
    CHECK_MESSAGE(th::compare(cn, want.cn, rtol, atol) == "", c.str(), " c_n");
}

// d(sum(f() * v))/d(param) by backward vs central differences on the parameter's data.
std::string param_gradcheck(nn::Module& m, const std::function<of::Tensor()>& f) {
  of::manual_seed(99);
  of::Tensor y0 = f();
  of::Tensor v = of::randn(y0.sizes(), of::kFloat64);
  m.zero_grad();
  (f() * v).sum().backward();
  for (const auto& item : m.named_parameters()) {
    of::Tensor p = item.value();
    std::vector<double> analytic = p.grad().defined() ? p.grad().to_vector<double>()
                                                      : std::vector<double>(size_t(p.numel()), 0.0);
    double* d = p.data_ptr<double>();
    for (int64_t j = 0; j < p.numel(); ++j) {
      const double orig = d[j], eps = 1e-6;
      of::NoGradGuard ng;
      d[j] = orig + eps;
      const double up = (f() * v).sum().item<double>();
      d[j] = orig - eps;
      const double down = (f() * v).sum().item<double>();
      d[j] = orig;
      const double numeric = (up - down) / (2 * eps), a = analytic[size_t(j)];
      if (!(std::fabs(a - numeric) <= 1e-5 + 1e-3 * std::fabs(numeric)))
        return item.key() + "[" + std::to_string(j) + "]: analytic " + std::to_string(a) +
               ", numeric " + std::to_string(numeric);
    }
  }
  return "";
}

}  // namespace

TEST_CASE(
    "rnn lstm gru: forward equals a float64 loop (layers, bidirectional, batch_first, bias, "
    "states, proj)") {
  for (const Config& c : configs()) {
    check_against_ref(c, of::kFloat64, 1e-10, 1e-12);
    check_against_ref(c, of::kFloat32, 1e-4, 1e-5);
  }
}

TEST_CASE("rnn lstm gru: unbatched input equals batch of one") {
  for (Mode mode : {Mode::Tanh, Mode::Lstm, Mode::Gru}) {
    Config c{mode, 2, true};
    of::manual_seed(3);
    AnyRnn r = make_rnn(c);
    of::Tensor x = of::randn({kT, kIn});
    of::Tensor h0 = of::randn({4, kHidden}), c0 = of::randn({4, kHidden});
    auto [o1, h1, c1] = r.fwd(x, h0, c0);
    auto [o2, h2, c2] = r.fwd(x.unsqueeze(1), h0.unsqueeze(1), c0.unsqueeze(1));
    CHECK(o1.sizes() == of::IntArrayRef(Shape{kT, 2 * kHidden}));
    CHECK(h1.sizes() == of::IntArrayRef(Shape{4, kHidden}));
    CHECK(of::allclose(o1, o2.squeeze(1)));
    CHECK(of::allclose(h1, h2.squeeze(1)));
    if (mode == Mode::Lstm) CHECK(of::allclose(c1, c2.squeeze(1)));
  }
}

TEST_CASE("rnn lstm gru: gradients of input, states and every parameter match finite differences") {
  for (Config c : std::vector<Config>{{Mode::Tanh, 2, true, false, true, true},
                                      {Mode::Relu, 1, false, true, false, true},
                                      {Mode::Lstm, 2, true, true, true, true},
                                      {Mode::Lstm, 1, true, false, true, true, false, 2},
                                      {Mode::Gru, 2, true, false, true, true},
                                      {Mode::Gru, 1, false, false, false, true}}) {
    of::manual_seed(11);
    AnyRnn r = make_rnn(c);
    r.module->to(of::kFloat64);
    const int64_t D = c.bidir ? 2 : 1, P = c.proj ? c.proj : kHidden, T = 3;
    of::Tensor x = of::randn(c.batch_first ? Shape{kB, T, kIn} : Shape{T, kB, kIn}, of::kFloat64);
    of::Tensor h0 = of::randn({c.layers * D, kB, P}, of::kFloat64);
    of::Tensor c0 = of::randn({c.layers * D, kB, kHidden}, of::kFloat64);
    // all outputs in one tensor so every path is checked
    auto all = [&](const std::vector<of::Tensor>& in) {
      auto [out, hn, cn] = r.fwd(in[0], in[1], in[2]);
      std::vector<of::Tensor> parts{out.flatten(), hn.flatten()};
      if (cn.defined()) parts.push_back(cn.flatten());
      return of::cat(parts);
    };
    std::vector<of::Tensor> ins{x, h0, c0};
    if (c.mode != Mode::Lstm) ins.pop_back(), ins.push_back(of::zeros({1}, of::kFloat64));
    CHECK_MESSAGE(
        th::gradcheck(all, ins, c.mode == Mode::Lstm ? std::vector<int>{} : std::vector<int>{2}) ==
            "",
        c.str());
    CHECK_MESSAGE(param_gradcheck(*r.module, [&] { return all(ins); }) == "", c.str());
  }
}

TEST_CASE("rnn lstm gru: parameter names, shapes and init as libtorch") {
  nn::LSTM lstm(nn::LSTMOptions(12, 20).num_layers(2).bidirectional(true).proj_size(5));
  std::vector<std::pair<std::string, Shape>> want;
  for (int l = 0; l < 2; ++l)
    for (std::string s : {"", "_reverse"}) {
      const std::string k = std::to_string(l) + s;
      want.push_back({"weight_ih_l" + k,
                      {80, l == 0 ? 12 : 10}});  // layer 1 reads both directions' projections
      want.push_back({"weight_hh_l" + k, {80, 5}});
      want.push_back({"bias_ih_l" + k, {80}});
      want.push_back({"bias_hh_l" + k, {80}});
      want.push_back({"weight_hr_l" + k, {5, 20}});
    }
  auto got = lstm->named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].key() == want[i].first);
    CHECK(got[i].value().sizes() == of::IntArrayRef(want[i].second));
  }
  nn::GRU gru(nn::GRUOptions(7, 6).bias(false));
  auto g = gru->named_parameters();
  REQUIRE(g.size() == 2);
  CHECK(g[0].key() == "weight_ih_l0");
  CHECK(g[0].value().sizes() == of::IntArrayRef(Shape{18, 7}));
  CHECK(g[1].value().sizes() == of::IntArrayRef(Shape{18, 6}));
  nn::RNN rnn(nn::RNNOptions(3, 16).num_layers(2));
  CHECK(rnn->named_parameters()[4].key() == "weight_ih_l1");
  CHECK(rnn->named_parameters()[4].value().sizes() == of::IntArrayRef(Shape{16, 16}));
  // U(-1/sqrt(H), 1/sqrt(H)) with H = 16: every value within 0.25, spread over the range
  for (const auto& p : rnn->parameters()) {
    CHECK(p.abs().max().item<float>() <= 0.25f);
    CHECK(p.requires_grad());
  }
  CHECK(rnn->parameters()[0].abs().max().item<float>() > 0.2f);
  nn::LSTMCell cell(4, 3);
  auto cp = cell->named_parameters();
  REQUIRE(cp.size() == 4);
  CHECK(cp[0].key() == "weight_ih");
  CHECK(cp[0].value().sizes() == of::IntArrayRef(Shape{12, 4}));
  CHECK(cp[3].key() == "bias_hh");
  std::ostringstream s;
  s << *lstm << " " << *cell << " "
    << *nn::RNNCell(nn::RNNCellOptions(2, 3).nonlinearity(of::kReLU).bias(false));
  CHECK(s.str() ==
        "LSTM(input_size=12, hidden_size=20, num_layers=2, bias=true, batch_first=false, "
        "dropout=0, bidirectional=true, proj_size=5) LSTMCell(4, 3) "
        "RNNCell(2, 3, bias=false, nonlinearity=kReLU)");
}

TEST_CASE("rnn lstm gru cells: one step equals the float64 loop, gradients match") {
  for (Mode mode : {Mode::Tanh, Mode::Relu, Mode::Lstm, Mode::Gru})
    for (bool bias : {true, false})
      for (bool given : {true, false}) {
        of::manual_seed(5);
        std::shared_ptr<nn::Module> m;
        std::function<std::tuple<of::Tensor, of::Tensor>(const of::Tensor&, const of::Tensor&,
                                                         const of::Tensor&)>
            f;
        if (mode == Mode::Lstm) {
          nn::LSTMCell cell(nn::LSTMCellOptions(kIn, kHidden).bias(bias));
          m = cell.ptr();
          f = [cell](const of::Tensor& x, const of::Tensor& h, const of::Tensor& c) {
            return h.defined() ? cell(x, std::make_tuple(h, c)) : cell(x);
          };
        } else if (mode == Mode::Gru) {
          nn::GRUCell cell(nn::GRUCellOptions(kIn, kHidden).bias(bias));
          m = cell.ptr();
          f = [cell](const of::Tensor& x, const of::Tensor& h, const of::Tensor&) {
            return std::make_tuple(cell(x, h), of::Tensor());
          };
        } else {
          nn::RNNCellOptions o(kIn, kHidden);
          o.bias(bias);
          if (mode == Mode::Relu) o.nonlinearity(of::kReLU);
          nn::RNNCell cell(o);
          m = cell.ptr();
          f = [cell](const of::Tensor& x, const of::Tensor& h, const of::Tensor&) {
            return std::make_tuple(cell(x, h), of::Tensor());
          };
        }
        m->to(of::kFloat64);
        of::Tensor x = th::noncontig(of::randn({kB, kIn}, of::kFloat64));
        of::Tensor h = given ? of::randn({kB, kHidden}, of::kFloat64) : of::Tensor();
        of::Tensor c = given ? of::randn({kB, kHidden}, of::kFloat64) : of::Tensor();
        auto [h1, c1] = f(x, h, c);
        // the reference: one time step of the layer loop with the cell's parameters as layer 0
        std::map<std::string, Ref> p;
        for (const auto& item : m->named_parameters())
          p[item.key() + "_l0"] = th::to_ref(item.value());
        Ref xr = th::to_ref(x.unsqueeze(0)), hr = given ? th::to_ref(h.unsqueeze(0)) : Ref(),
            cr = given ? th::to_ref(c.unsqueeze(0)) : Ref();
        RefOut want = ref_rnn(mode, p, 1, false, kHidden, kHidden, xr, given ? &hr : nullptr,
                              given ? &cr : nullptr);
        const std::string what = std::string(mode_name(mode)) +
                                 "Cell bias=" + std::to_string(bias) +
                                 " given=" + std::to_string(given);
        CHECK_MESSAGE(th::compare(h1.unsqueeze(0), want.hn, 1e-10, 1e-12) == "", what);
        if (mode == Mode::Lstm)
          CHECK_MESSAGE(th::compare(c1.unsqueeze(0), want.cn, 1e-10, 1e-12) == "", what);
        // unbatched: one sample
        auto [hu, cu] = f(x[0], given ? h[0] : of::Tensor(), given ? c[0] : of::Tensor());
        CHECK(of::allclose(hu, h1[0]));
        if (given) {
          auto both = [&](const std::vector<of::Tensor>& in) {
            auto [a, b] = f(in[0], in[1], in[2]);
            return b.defined() ? of::cat({a.flatten(), b.flatten()}) : a;
          };
          CHECK_MESSAGE(th::gradcheck(both, {x, h, c}) == "", what);
          CHECK_MESSAGE(param_gradcheck(*m, [&] { return both({x, h, c}); }) == "", what);
        }
      }
}

TEST_CASE("rnn lstm gru: dropout between layers only while training") {
  of::manual_seed(2);
  nn::LSTM m(nn::LSTMOptions(kIn, kHidden).num_layers(2).dropout(0.5));
  of::Tensor x = of::randn({kT, kB, kIn});
  m->eval();
  auto [e1, s1] = m(x);
  nn::LSTM plain(nn::LSTMOptions(kIn, kHidden).num_layers(2));
  plain->load_state_dict(m->state_dict());
  auto [p1, s2] = plain(x);
  CHECK(of::equal(e1, p1));
  m->train();
  auto [t1, s3] = m(x);
  CHECK_FALSE(of::allclose(t1, p1));
  // single-layer output never sees the dropout
  nn::GRU g(nn::GRUOptions(kIn, kHidden).dropout(0.5));
  auto [g1, gh1] = g(x);
  g->eval();
  auto [g2, gh2] = g(x);
  CHECK(of::equal(g1, g2));
}

TEST_CASE("rnn lstm gru: packed sequences equal each sequence run alone") {
  namespace U = nn::utils::rnn;
  of::manual_seed(8);
  const std::vector<int64_t> lens{3, 5, 1, 4};  // unsorted
  std::vector<of::Tensor> seqs;
  for (int64_t l : lens) seqs.push_back(of::randn({l, kIn}, of::kFloat64));
  of::Tensor padded = U::pad_sequence(seqs);  // [5, 4, kIn]
  REQUIRE(padded.sizes() == of::IntArrayRef(Shape{5, 4, kIn}));
  CHECK(of::equal(padded.select(1, 2).narrow(0, 1, 4), of::zeros({4, kIn}, of::kFloat64)));
  CHECK(of::equal(U::pad_sequence(seqs, true).transpose(0, 1), padded));
  U::PackedSequence ps = U::pack_padded_sequence(padded, of::tensor(lens), false, false);
  CHECK(ps.batch_sizes().to_vector<int64_t>() == std::vector<int64_t>{4, 3, 3, 2, 1});
  CHECK(ps.data().size(0) == 13);
  auto [unpacked, ulens] = U::pad_packed_sequence(ps);
  CHECK(of::equal(unpacked, padded));
  CHECK(ulens.to_vector<int64_t>() == lens);
  auto [unpacked_bf, l2] = U::pad_packed_sequence(ps, true, -1.0, 7);
  CHECK(unpacked_bf.sizes() == of::IntArrayRef(Shape{4, 7, kIn}));
  CHECK(unpacked_bf.select(0, 2).select(0, 3).eq(-1.0).all().item<bool>());

  for (Mode mode : {Mode::Tanh, Mode::Lstm, Mode::Gru}) {
    Config c{mode, 2, true};
    AnyRnn r = make_rnn(c);
    r.module->to(of::kFloat64);
    of::Tensor h0 = of::randn({4, 4, kHidden}, of::kFloat64),
               c0 = of::randn({4, 4, kHidden}, of::kFloat64);
    of::Tensor out, hn, cn;
    if (mode == Mode::Lstm) {
      auto m = std::dynamic_pointer_cast<nn::LSTMImpl>(r.module);
      auto [po, hc] = m->forward_with_packed_input(ps, std::make_tuple(h0, c0));
      out = std::get<0>(U::pad_packed_sequence(po));
      hn = std::get<0>(hc);
      cn = std::get<1>(hc);
    } else if (mode == Mode::Gru) {
      auto [po, h] =
          std::dynamic_pointer_cast<nn::GRUImpl>(r.module)->forward_with_packed_input(ps, h0);
      out = std::get<0>(U::pad_packed_sequence(po));
      hn = h;
    } else {
      auto [po, h] =
          std::dynamic_pointer_cast<nn::RNNImpl>(r.module)->forward_with_packed_input(ps, h0);
      out = std::get<0>(U::pad_packed_sequence(po));
      hn = h;
    }
    REQUIRE(out.sizes() == of::IntArrayRef(Shape{5, 4, 2 * kHidden}));
    for (size_t b = 0; b < lens.size(); ++b) {
      const int64_t bi = int64_t(b);
      auto [o1, h1, c1] = r.fwd(seqs[b].unsqueeze(1), h0.narrow(1, bi, 1).contiguous(),
                                c0.narrow(1, bi, 1).contiguous());
      const std::string what = std::string(mode_name(mode)) + " sequence " + std::to_string(b);
      CHECK_MESSAGE(of::allclose(out.narrow(0, 0, lens[b]).narrow(1, bi, 1), o1, 1e-10, 1e-12),
                    what);
      CHECK_MESSAGE(of::allclose(hn.narrow(1, bi, 1), h1, 1e-10, 1e-12), what);
      if (mode == Mode::Lstm)
        CHECK_MESSAGE(of::allclose(cn.narrow(1, bi, 1), c1, 1e-10, 1e-12), what);
      if (lens[b] < 5)  // padding rows of the output are zero
        CHECK(of::equal(out.narrow(0, lens[b], 5 - lens[b]).narrow(1, bi, 1),
                        of::zeros({5 - lens[b], 1, 2 * kHidden}, of::kFloat64)));
    }
  }
  // gradients flow through pack -> LSTM -> pad
  nn::LSTM m(nn::LSTMOptions(kIn, kHidden).bidirectional(true));
  m->to(of::kFloat64);
  auto f = [&](const std::vector<of::Tensor>& in) {
    U::PackedSequence p = U::pack_padded_sequence(in[0], of::tensor(lens), false, false);
    return std::get<0>(U::pad_packed_sequence(std::get<0>(m->forward_with_packed_input(p))));
  };
  CHECK(th::gradcheck(f, {padded.narrow(0, 0, 5)}) == "");
}

TEST_CASE("rnn lstm gru: bad input raises a bracketed error naming the shapes") {
  nn::LSTM lstm(nn::LSTMOptions(10, 20).num_layers(2));
  std::string msg;
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      lstm(of::randn({5, 3, 7}));
                    },
                    {"[LSTM] input of shape (5, 3, 7) has 7 features, expected 10"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      lstm(of::randn({5, 3, 10}),
                           std::make_tuple(of::zeros({1, 3, 20}), of::zeros({2, 3, 20})));
                    },
                    {"[LSTM] h_0 of shape (1, 3, 20)", "expected (2, 3, 20)"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      lstm(of::randn({5, 3, 10}),
                           std::make_tuple(of::zeros({2, 3, 20}), of::zeros({2, 4, 20})));
                    },
                    {"[LSTM] c_0 of shape (2, 4, 20)"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      lstm(of::randn({2, 3, 4, 10}));
                    },
                    {"[LSTM] input of shape (2, 3, 4, 10) must be 3-D"}, &msg),
                msg);
  nn::GRU gru(nn::GRUOptions(4, 3).bidirectional(true));
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      gru(of::randn({5, 2, 4}), of::zeros({1, 2, 3}));
                    },
                    {"[GRU] hx of shape (1, 2, 3)", "expected (2, 2, 3)"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      gru(of::randn({5, 2, 4}), of::zeros({2, 2, 3}, of::kFloat64));
                    },
                    {"[GRU] hx", "dtype"}, &msg),
                msg);
  nn::RNNCell cell(4, 3);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      cell(of::randn({2, 5}));
                    },
                    {"[RNNCell] input of shape (2, 5) has 5 features, expected 4"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      cell(of::randn({2, 4}), of::zeros({3, 3}));
                    },
                    {"[RNNCell] hx of shape (3, 3)", "(2, 3)"}, &msg),
                msg);
  nn::LSTMCell lc(4, 3);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      lc(of::randn({2, 4}), std::make_tuple(of::zeros({2, 3}), of::zeros({2, 2})));
                    },
                    {"[LSTMCell] hx[1] of shape (2, 2)"}, &msg),
                msg);
  CHECK_MESSAGE(th::throws_with([&] { nn::LSTM(nn::LSTMOptions(4, 3).proj_size(3)); },
                                {"[LSTM] proj_size 3 must be smaller than hidden_size 3"}, &msg),
                msg);
  CHECK_MESSAGE(
      th::throws_with([&] { nn::GRU(nn::GRUOptions(4, 3).dropout(1.5)); }, {"[GRU] dropout"}, &msg),
      msg);
  namespace U = nn::utils::rnn;
  CHECK_MESSAGE(
      th::throws_with(
          [&] {
            U::pack_padded_sequence(of::randn({4, 2, 3}), of::tensor(std::vector<int64_t>{2, 3}));
          },
          {"[pack_padded_sequence] lengths must be non-increasing"}, &msg),
      msg);
  CHECK_MESSAGE(
      th::throws_with(
          [&] {
            U::pack_padded_sequence(of::randn({4, 2, 3}), of::tensor(std::vector<int64_t>{5, 3}));
          },
          {"[pack_padded_sequence] length 5 of sequence 0 is outside [1, 4]"}, &msg),
      msg);
  CHECK_MESSAGE(th::throws_with(
                    [&] {
                      U::pad_sequence({of::randn({2, 3}), of::randn({2, 4})});
                    },
                    {"[pad_sequence] sequence 1 of shape (2, 4)"}, &msg),
                msg);
  // a failed call changes nothing: parameters untouched, no gradient recorded
  auto before = lstm->parameters()[0].clone();
  CHECK(th::throws_with([&] { lstm(of::randn({5, 3, 7})); }, {"[LSTM]"}));
  CHECK(of::equal(before, lstm->parameters()[0]));
  CHECK_FALSE(lstm->parameters()[0].grad().defined());
}

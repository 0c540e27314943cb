// The trace's inference rewrites (src/trace/rewrite_*.cpp): graphs that must and must not match,
// what Graph::rewrites and stats() report, and the rewritten replay against the unfused replay
// of the same function (the documented tolerance) and a float64 eager reference.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "harness.h"
#include "serialize_util.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/passes.h"
#include "trace/recording.h"

namespace {

using Fn = std::function<std::vector<of::Tensor>(const std::vector<of::Tensor>&)>;

of::trace::Graph recorded(const Fn& fn, const std::vector<of::Tensor>& in) {
  of::NoGradGuard ng;
  return of::trace::record(fn, in).graph;
}
size_t count_op(const of::trace::Graph& g, const std::string& name) {
  size_t n = 0;
  for (auto& node : g.nodes) n += node.op->name == name;
  return n;
}
bool has_line(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}
double max_diff(const of::Tensor& a, const of::Tensor& b) {
  return (a.to(of::kFloat64) - b.to(of::kFloat64)).abs().max().item<double>();
}
// Dropout in training mode (on attention's probabilities, as Hugging Face's BERT in training).
of::Tensor train_dropout(const of::Tensor& p, double rate) {
  return of::nn::functional::dropout(
      p, of::nn::functional::DropoutFuncOptions().p(rate).training(true));
}
// The .grad of each tensor (undefined where none), taken away: the next call starts from none.
std::vector<of::Tensor> take_grads(const std::vector<of::Tensor*>& ts) {
  std::vector<of::Tensor> g;
  for (of::Tensor* t : ts) {
    g.push_back(t->grad().defined() ? t->grad().clone() : of::Tensor());
    if (t->requires_grad()) t->mutable_grad() = of::Tensor();
  }
  return g;
}

// BERT's self-attention as examples/bert.h writes it: x [B, S, H] -> [B, S, H], `heads` heads,
// an additive mask [B, 1, 1, S].
struct SelfAttn {
  of::Tensor wq, wk, wv, bq, bk, bv;
  int64_t heads;
  SelfAttn(int64_t h, int64_t heads_, of::ScalarType dt) : heads(heads_) {
    of::manual_seed(7);
    wq = of::randn({h, h}, dt) * 0.3;
    wk = of::randn({h, h}, dt) * 0.3;
    wv = of::randn({h, h}, dt) * 0.3;
    bq = of::randn({h}, dt) * 0.1;
    bk = of::randn({h}, dt) * 0.1;
    bv = of::randn({h}, dt) * 0.1;
  }
  // the same weights in another dtype
  SelfAttn to(of::ScalarType dt) const {
    SelfAttn r = *this;
    for (of::Tensor* t : {&r.wq, &r.wk, &r.wv, &r.bq, &r.bk, &r.bv}) *t = t->to(dt);
    return r;
  }
  // (dropout > 0: on the probabilities, as Hugging Face's BERT in training)
  of::Tensor operator()(const of::Tensor& x, const of::Tensor& mask_add, double dropout = 0) const {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), d = h / heads;
    auto split = [&](const of::Tensor& t) { return t.view({b, s, heads, d}).transpose(1, 2); };
    const of::Tensor q = split(of::linear(x, wq, bq)), k = split(of::linear(x, wk, bk)),
                     v = split(of::linear(x, wv, bv));
    const of::Tensor scores =
        of::matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(d))) + mask_add;
    of::Tensor p = scores.softmax(-1);
    if (dropout > 0) p = train_dropout(p, dropout);
    return of::matmul(p, v).transpose(1, 2).reshape({b, s, h});
  }
};

of::Tensor padding_mask(int64_t b, int64_t s, of::ScalarType dt) {
  // sequence 1 has its last two positions padded
  of::Tensor keep = of::ones({b, s}, dt);
  if (b > 1) keep.select(0, 1).narrow(0, s - 2, 2).fill_(0);
  return ((1.0 - keep) * -10000.0).unsqueeze(1).unsqueeze(2);
}

}  // namespace

TEST_CASE("trace rewrite: attention fuses BERT's self-attention and matches the unfused replay") {
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    CAPTURE(dt);
    const SelfAttn attn(16, 4, dt);
    of::manual_seed(3);
    const of::Tensor x = of::randn({2, 6, 16}, dt), mask = padding_mask(2, 6, dt);
    const Fn fn = [&](const std::vector<of::Tensor>& in) {
      return std::vector<of::Tensor>{attn(in[0], in[1])};
    };
    const of::trace::Graph g = recorded(fn, {x, mask});
    CHECK(count_op(g, "softmax") == 1);
    CHECK(count_op(g, "bmm") == 2);
    const size_t copies = count_op(g, "copy");
    CHECK(copies == 4);  // q, k^T and v for bmm, and the merge of the heads
    const of::trace::Graph f = of::trace::dce(of::trace::fuse_attention(g));
    CHECK(count_op(f, "fused_attention") == 1);
    CHECK(count_op(f, "softmax") == 0);
    CHECK(count_op(f, "bmm") == 0);
    // the operands are read where the head split left them, and the merge of the heads is the
    // kernel's own output layout (NOTE [Merged heads])
    CHECK(count_op(f, "copy") == 0);
    REQUIRE(f.rewrites.size() == 1);
    CHECK(f.rewrites[0].find("fused_attention (scale 0.5") != std::string::npos);
    CHECK(f.rewrites[0].find("additive mask (2, 1, 1, 6), 4 heads merged in the output") !=
          std::string::npos);

    // replays: fused vs unfused (the same function, attention(false)) vs float64 eager
    auto fused =
        of::jit::trace([&](const of::Tensor& a, const of::Tensor& m) { return attn(a, m); });
    auto plain =
        of::jit::trace([&](const of::Tensor& a, const of::Tensor& m) { return attn(a, m); },
                       of::jit::TraceOptions().attention(false));
    of::NoGradGuard ng;
    for (int call = 0; call < 3; ++call) {
      const of::Tensor xi = of::randn({2, 6, 16}, dt);
      const of::Tensor a = fused(xi, mask), p = plain(xi, mask);
      const SelfAttn ref64 = attn.to(of::kFloat64);
      const of::Tensor r = ref64(xi.to(of::kFloat64), mask.to(of::kFloat64));
      const double tol = dt == of::kFloat32 ? 2e-6 : 1e-13;
      CHECK(max_diff(a, p) <= tol);
      CHECK(max_diff(a, r) <= (dt == of::kFloat32 ? 2e-5 : 1e-12));
    }
    CHECK(has_line(fused.stats().rewrites, "-> fused_attention"));
    CHECK(plain.stats().rewrites.empty());
    // batch 1: the scores [1, H, L, S] against the query's [H, L, E] (matmul folded the 1
    // away), the mask [1, 1, 1, S]
    const of::Tensor x1 = of::randn({1, 6, 16}, dt), m1 = padding_mask(1, 6, dt);
    const of::Tensor one = fused(x1, m1);
    CHECK(max_diff(one, plain(x1, m1)) <= (dt == of::kFloat32 ? 2e-6 : 1e-13));
    CHECK(fused.graph().find("fused_attention") != std::string::npos);
    CHECK(fused.graph().find("fused_attention") != std::string::npos);
    CHECK(plain.graph().find("fused_attention") == std::string::npos);
  }
}

TEST_CASE("trace rewrite: attention without a mask or a scale, and with 3-D operands") {
  of::manual_seed(5);
  const of::Tensor q = of::randn({3, 4, 8}), k = of::randn({3, 7, 8}), v = of::randn({3, 7, 5});
  const Fn fn = [](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{
        of::matmul(of::matmul(in[0], in[1].transpose(1, 2)).softmax(-1), in[2])};
  };
  const of::trace::Graph f = of::trace::dce(of::trace::fuse_attention(recorded(fn, {q, k, v})));
  CHECK(count_op(f, "fused_attention") == 1);
  CHECK(count_op(f, "copy") == 0);  // k^T is read transposed in place
  auto t = of::jit::trace([](const of::Tensor& a, const of::Tensor& b, const of::Tensor& c) {
    return of::matmul(of::matmul(a, b.transpose(1, 2)).softmax(-1), c);
  });
  of::NoGradGuard ng;
  (void)t(q, k, v);
  const of::Tensor r =
      of::matmul(of::matmul(q.to(of::kFloat64), k.to(of::kFloat64).transpose(1, 2)).softmax(-1),
                 v.to(of::kFloat64));
  CHECK(max_diff(t(q, k, v), r) <= 2e-6);
  CHECK(has_line(t.stats().rewrites, "scale 1, no mask"));
  // divided by a constant: the scale is its reciprocal
  const Fn div = [](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{
        of::matmul((of::matmul(in[0], in[1].transpose(1, 2)) / 4.0).softmax(-1), in[2])};
  };
  const of::trace::Graph d = of::trace::fuse_attention(recorded(div, {q, k, v}));
  CHECK(has_line(d.rewrites, "scale 0.25"));
}

TEST_CASE("trace rewrite: attention refuses what it must not fuse, saying why") {
  of::manual_seed(9);
  const of::Tensor q = of::randn({2, 4, 8}), k = of::randn({2, 5, 8}), v = of::randn({2, 5, 3});
  auto fused_count = [](const Fn& fn, const std::vector<of::Tensor>& in) {
    return count_op(of::trace::fuse_attention(recorded(fn, in)), "fused_attention");
  };
  // the probabilities are returned too (attention weights)
  const Fn returned = [](const std::vector<of::Tensor>& in) {
    const of::Tensor p = of::matmul(in[0], in[1].transpose(1, 2)).softmax(-1);
    return std::vector<of::Tensor>{of::matmul(p, in[2]), p};
  };
  const of::trace::Graph g1 = of::trace::fuse_attention(recorded(returned, {q, k, v}));
  CHECK(count_op(g1, "fused_attention") == 0);
  CHECK(has_line(g1.rewrites, "refused: the value made by node"));
  // softmax over another dim: not attention
  const Fn other_dim = [](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{
        of::matmul(of::matmul(in[0], in[1].transpose(1, 2)).softmax(1), in[2])};
  };
  const of::trace::Graph g2 = of::trace::fuse_attention(recorded(other_dim, {q, k, v}));
  CHECK(count_op(g2, "fused_attention") == 0);
  CHECK(has_line(g2.rewrites, "softmax over dim 1"));
  // scores not made by a matmul
  const Fn no_mm = [](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{of::matmul(in[0].exp().softmax(-1), in[1])};
  };
  CHECK(fused_count(no_mm, {of::randn({2, 4, 5}), v}) == 0);
  // bfloat16: the fused kernel is float32/float64
  const Fn plain = [](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{
        of::matmul(of::matmul(in[0], in[1].transpose(1, 2)).softmax(-1), in[2])};
  };
  const of::trace::Graph g3 = of::trace::fuse_attention(
      recorded(plain, {q.to(of::kBFloat16), k.to(of::kBFloat16), v.to(of::kBFloat16)}));
  CHECK(count_op(g3, "fused_attention") == 0);
  CHECK(has_line(g3.rewrites, "bfloat16"));
  // an operand written in place between the copies and the second matmul: the copies read
  // the old values, so reading the operand at the end would be wrong
  const Fn written = [](const std::vector<of::Tensor>& in) {
    of::Tensor x = in[0].clone();  // [2, 5, 8]: q and v are views of it
    const of::Tensor p = of::matmul(x.narrow(1, 0, 4), in[1].transpose(1, 2)).softmax(-1);
    x.mul_(2.0);
    return std::vector<of::Tensor>{of::matmul(p, x.narrow(2, 0, 3))};
  };
  const of::trace::Graph g4 = of::trace::fuse_attention(recorded(written, {k, k}));
  CHECK(count_op(g4, "fused_attention") == 0);
  CHECK(has_line(g4.rewrites, "written between"));
  // training: the chain and its backward become the training pair (NOTE [Fused attention,
  // training]), never the inference kernel, which keeps nothing for backward
  of::Tensor qg = q.clone().set_requires_grad(true);
  auto step = of::jit::trace([](const of::Tensor& a, const of::Tensor& b, const of::Tensor& c) {
    of::Tensor out = of::matmul(of::matmul(a, b.transpose(1, 2)).softmax(-1), c);
    out.sum().backward();
    return out.detach();
  });
  (void)step(qg, k, v);
  CHECK(step.graph().find("fused_attention(") == std::string::npos);
  CHECK(step.graph().find("fused_attention_forward") != std::string::npos);
}

// NOTE [Fused attention, training]: a training step through BERT's self-attention, written out
// (matmul * scale + mask -> softmax -> matmul): the forward chain and the backward autograd
// records for it become fused_attention_forward and fused_attention_backward.
TEST_CASE("trace rewrite: attention fuses a training step's chain and its backward") {
  for (const double drop : {0.0, 0.25})
    for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
      CAPTURE(dt);
      CAPTURE(drop);
      SelfAttn attn(16, 4, dt);
      for (of::Tensor* w : {&attn.wq, &attn.wk, &attn.wv, &attn.bq, &attn.bk, &attn.bv})
        w->set_requires_grad(true);
      of::manual_seed(3);
      const of::Tensor mask = padding_mask(2, 6, dt);
      const std::vector<of::Tensor*> params = {&attn.wq, &attn.wk, &attn.wv,
                                               &attn.bq, &attn.bk, &attn.bv};
      // the loss weighs each output element differently (a plain sum's gradient would be uniform)
      const of::Tensor wout = of::randn({2, 6, 16}, dt);
      auto fn = [&](const of::Tensor& x, const of::Tensor& m) {
        of::Tensor o = attn(x, m, drop);
        (o * wout).sum().backward();
        return o.detach();
      };
      auto fused = of::jit::trace(fn);
      auto plain = of::jit::trace(fn, of::jit::TraceOptions().attention(false));
      auto grads = [&] { return take_grads(params); };
      for (int call = 0; call < 3; ++call) {
        const of::Tensor x = of::randn({2, 6, 16}, dt);
        // (each side draws the same dropout elements: the generator set alike before each)
        of::manual_seed(uint64_t(100 + call));
        const of::Tensor a = fused(x, mask);
        const std::vector<of::Tensor> ga = grads();
        of::manual_seed(uint64_t(100 + call));
        const of::Tensor p = plain(x, mask);
        const std::vector<of::Tensor> gp = grads();
        // float64 eager reference
        SelfAttn r64 = attn.to(of::kFloat64);
        std::vector<of::Tensor*> p64 = {&r64.wq, &r64.wk, &r64.wv, &r64.bq, &r64.bk, &r64.bv};
        for (of::Tensor* w : p64) *w = w->detach().set_requires_grad(true);
        of::manual_seed(uint64_t(100 + call));
        const of::Tensor r = r64(x.to(of::kFloat64), mask.to(of::kFloat64), drop);
        (r * wout.to(of::kFloat64)).sum().backward();
        const double tol = dt == of::kFloat32 ? 2e-6 : 1e-13;
        CHECK(max_diff(a, p) <= tol);
        CHECK(max_diff(a, r) <= (dt == of::kFloat32 ? 2e-5 : 1e-12));
        for (size_t i = 0; i < params.size(); ++i) {
          CAPTURE(i);
          const double scale = gp[i].abs().max().item<double>();
          CHECK(max_diff(ga[i], gp[i]) <=
                (dt == of::kFloat32 ? 2e-6 : 1e-13) * std::max(scale, 1.0));
          CHECK(max_diff(ga[i], p64[i]->grad()) <=
                (dt == of::kFloat32 ? 2e-5 : 1e-12) * std::max(scale, 1.0));
        }
      }
      CHECK(has_line(fused.stats().rewrites,
                     drop > 0
                         ? "-> fused_attention_forward (scale 0.5, additive mask (2, 1, 1, 6), "
                           "dropout 0.25) and its backward at node"
                         : "-> fused_attention_forward (scale 0.5, additive mask (2, 1, 1, 6)) "
                           "and its backward at node"));
      const std::string gf = fused.graph();
      CHECK(gf.find("fused_attention_backward") != std::string::npos);
      CHECK(gf.find("softmax") == std::string::npos);
      CHECK(gf.find("bmm") == std::string::npos);
      CHECK(plain.graph().find("fused_attention") == std::string::npos);
    }
}

TEST_CASE(
    "trace rewrite: a training step with fused attention and dropout saves, loads and replays "
    "bitwise") {
  const ser::TmpDir tmp;
  SelfAttn attn(16, 4, of::kFloat32);
  std::vector<of::Tensor*> params = {&attn.wq, &attn.wk, &attn.wv, &attn.bq, &attn.bk, &attn.bv};
  of::jit::NamedTensors names;
  const char* const nm[] = {"wq", "wk", "wv", "bq", "bk", "bv"};
  for (size_t i = 0; i < params.size(); ++i) {
    params[i]->set_requires_grad(true);
    names.push_back({nm[i], *params[i]});
  }
  std::vector<of::Tensor> ps;
  for (of::Tensor* w : params) ps.push_back(*w);
  of::optim::SGD opt(ps, of::optim::SGDOptions(0.05));
  const of::Tensor mask = padding_mask(2, 6, of::kFloat32);
  auto step = of::jit::trace([&](const of::Tensor& x, const of::Tensor& m) {
    opt.zero_grad();
    of::Tensor loss = attn(x, m, 0.1).square().mean();  // (dropout: the saved generator state)
    loss.backward();
    opt.step();
    return loss;
  });
  of::manual_seed(5);
  std::vector<of::Tensor> xs;
  for (int i = 0; i < 6; ++i) xs.push_back(of::randn({2, 6, 16}));
  for (int i = 0; i < 3; ++i) step(xs[size_t(i)], mask);
  REQUIRE(step.graph().find("fused_attention_backward") != std::string::npos);
  REQUIRE(step.graph().find("dropout_p=0.1") != std::string::npos);
  const std::string path = tmp.path + "/attn.oftrace";
  of::jit::save(step, path, names);
  of::jit::LoadedGraph loaded = of::jit::load(path);
  for (int i = 3; i < 6; ++i) {
    const of::Tensor a = step(xs[size_t(i)], mask), b = loaded(xs[size_t(i)], mask);
    CHECK(th::same_bits(a, b));
  }
  for (size_t i = 0; i < params.size(); ++i)
    CHECK(th::same_bits(loaded.state(nm[i]), params[i]->detach()));
}

// Every combination the training rewrite meets: 3-D operands or 4-D head views, a scale by mul,
// by div or none, no mask, a broadcast or a full additive mask, dropout or not, and gradients
// for any subset of q, k, v: the replay (fused where the rewrite fires) against the unfused
// replay of the same step, under the same generator state.
TEST_CASE("trace rewrite: attention in training graphs in every form against the unfused replay") {
  int fused_count = 0, cases = 0;
  for (int four_d = 0; four_d < 2; ++four_d)
    for (int scale_kind = 0; scale_kind < 3; ++scale_kind)
      for (int mask_kind = 0; mask_kind < 3; ++mask_kind)
        for (double drop : {0.0, 0.3})
          for (int needs = 1; needs < 8; ++needs) {
            CAPTURE(four_d);
            CAPTURE(scale_kind);
            CAPTURE(mask_kind);
            CAPTURE(drop);
            CAPTURE(needs);
            of::manual_seed(uint64_t(11 + needs));
            const of::DimVector lead = four_d ? of::DimVector{2, 3} : of::DimVector{4};
            auto shape = [&](int64_t r, int64_t c) {
              of::DimVector d = lead;
              d.push_back(r);
              d.push_back(c);
              return d;
            };
            std::vector<of::Tensor> qkv = {of::randn(shape(5, 4)), of::randn(shape(7, 4)),
                                           of::randn(shape(7, 3))};
            for (int i = 0; i < 3; ++i)
              if ((needs >> i) & 1) qkv[size_t(i)].set_requires_grad(true);
            of::DimVector ms = shape(5, 7);
            if (mask_kind == 1) {  // broadcast over the heads / query rows
              for (size_t d = 1; d + 1 < ms.size(); ++d) ms[d] = 1;
            }
            const of::Tensor mask = of::rand(ms) * -3.0;
            const of::Tensor wout = of::randn(shape(5, 3));
            auto fn = [&](const of::Tensor& q) {
              of::Tensor s = of::matmul(q, qkv[1].transpose(-1, -2));
              if (scale_kind == 1) s = s * 0.4;
              if (scale_kind == 2) s = s / 3.0;
              if (mask_kind > 0) s = s + mask;
              of::Tensor p = s.softmax(-1);
              if (drop > 0) p = train_dropout(p, drop);
              of::Tensor o = of::matmul(p, qkv[2]);
              (o * wout).sum().backward();
              return o.detach();
            };
            auto fused = of::jit::trace(fn);
            auto plain = of::jit::trace(fn, of::jit::TraceOptions().attention(false));
            auto grads = [&] { return take_grads({&qkv[0], &qkv[1], &qkv[2]}); };
            for (int call = 0; call < 3; ++call) {
              of::manual_seed(uint64_t(50 + call));
              const of::Tensor a = fused(qkv[0]);
              const std::vector<of::Tensor> ga = grads();
              of::manual_seed(uint64_t(50 + call));
              const of::Tensor b = plain(qkv[0]);
              const std::vector<of::Tensor> gb = grads();
              CHECK(max_diff(a, b) <= 2e-6);
              for (size_t i = 0; i < 3; ++i) {
                CAPTURE(i);
                REQUIRE(ga[i].defined() == gb[i].defined());
                if (ga[i].defined()) CHECK(max_diff(ga[i], gb[i]) <= 1e-5);
              }
            }
            const std::string gf = fused.graph();
            const bool fused_here = gf.find("fused_attention_backward") != std::string::npos;
            fused_count += fused_here;
            ++cases;
            // fused, except (refused, saying why): only v needs a gradient (no softmax
            // backward: the probabilities are kept for dV alone); 4-D operands whose key
            // transpose the trace folded to 3-D [6, 4, 7] with a 4-D mask (the mask's batch
            // dims are not the operands', as in inference graphs)
            const bool refused_4d = four_d && mask_kind > 0;
            CHECK(fused_here == (needs != 4 && !refused_4d));
            if (!fused_here) CHECK(has_line(fused.stats().rewrites, "refused"));
            if (refused_4d && needs != 4)
              CHECK(has_line(fused.stats().rewrites, "are not batched as the query (6, 5, 4)"));
          }
  MESSAGE("training attention forms: " << fused_count << " of " << cases << " fused");
}

TEST_CASE(
    "trace rewrite: attention in a training graph refuses what it must not fuse, saying why") {
  of::manual_seed(9);
  const of::Tensor k = of::randn({2, 5, 8}), v = of::randn({2, 5, 3});
  of::Tensor q = of::randn({2, 4, 8}).set_requires_grad(true);
  // the mask needs a gradient too: the scores' gradient is also reduced into the mask's
  of::Tensor mask = (of::rand({2, 4, 5}) * -1.0).set_requires_grad(true);
  auto masked = of::jit::trace([&](const of::Tensor& a) {
    of::Tensor o = of::matmul((of::matmul(a, k.transpose(1, 2)) * 0.5 + mask).softmax(-1), v);
    o.sum().backward();
    return o.detach();
  });
  (void)masked(q);
  (void)masked(q);
  CHECK(has_line(masked.stats().rewrites,
                 "refused: training graph: the scores' gradient is read "
                 "elsewhere (a mask that needs a gradient?)"));
  CHECK(masked.graph().find("fused_attention") == std::string::npos);
  // the probabilities returned as well
  auto weights = of::jit::trace([&](const of::Tensor& a) {
    of::Tensor p = of::matmul(a, k.transpose(1, 2)).softmax(-1);
    of::Tensor o = of::matmul(p, v);
    o.sum().backward();
    return std::vector<of::Tensor>{o.detach(), p.detach()};
  });
  (void)weights(q);
  (void)weights(q);
  CHECK(weights.graph().find("fused_attention") == std::string::npos);
  CHECK(has_line(weights.stats().rewrites, "refused"));
  // the probabilities' gradient used elsewhere too (a second loss on the probabilities)
  auto extra = of::jit::trace([&](const of::Tensor& a) {
    of::Tensor p = of::matmul(a, k.transpose(1, 2)).softmax(-1);
    of::Tensor o = of::matmul(p, v);
    (o.sum() + p.square().sum()).backward();
    return o.detach();
  });
  (void)extra(q);
  (void)extra(q);
  CHECK(extra.graph().find("fused_attention") == std::string::npos);
  CHECK(has_line(extra.stats().rewrites, "refused: training graph"));
  // a dropout on the probabilities outside a training graph: the inference kernel has none
  const Fn dropped = [](const std::vector<of::Tensor>& in) {
    const of::Tensor p = train_dropout(of::matmul(in[0], in[1].transpose(1, 2)).softmax(-1), 0.1);
    return std::vector<of::Tensor>{of::matmul(p, in[2])};
  };
  const of::trace::Graph gd = of::trace::fuse_attention(recorded(dropped, {q.detach(), k, v}));
  CHECK(count_op(gd, "fused_attention") + count_op(gd, "fused_attention_forward") == 0);
  CHECK(has_line(gd.rewrites,
                 "refused: a dropout between the softmax and the matmul outside a "
                 "training graph"));
  // without a scale or a mask, 3-D operands: fused
  auto bare = of::jit::trace([&](const of::Tensor& a) {
    of::Tensor o = of::matmul(of::matmul(a, k.transpose(1, 2)).softmax(-1), v);
    o.sum().backward();
    return o.detach();
  });
  (void)bare(q);
  q.mutable_grad() = of::Tensor();
  (void)bare(q);
  const of::Tensor g1 = q.grad().clone();
  CHECK(has_line(bare.stats().rewrites, "-> fused_attention_forward (scale 1, no mask)"));
  q.mutable_grad() = of::Tensor();
  of::Tensor q64 = q.detach().to(of::kFloat64).set_requires_grad(true);
  of::matmul(of::matmul(q64, k.to(of::kFloat64).transpose(1, 2)).softmax(-1), v.to(of::kFloat64))
      .sum()
      .backward();
  CHECK(max_diff(g1, q64.grad()) <= 2e-6);
}

TEST_CASE("trace rewrite: the training attention ops and embedding_layer_norm check their inputs") {
  const of::OpDef &fwd = of::find_op("fused_attention_forward"),
                  &bwd = of::find_op("fused_attention_backward"),
                  &emb = of::find_op("embedding_layer_norm");
  auto call = [](const of::OpDef& op, of::TensorList in, of::Attrs a) {
    return [=, &op] { (void)of::dispatch(op, in, a); };
  };
  const of::Tensor q = of::randn({2, 2, 3, 4}), kt = of::randn({2, 2, 4, 5}),
                   v = of::randn({2, 2, 5, 6});
  auto attrs = [](double p, int64_t kind) {
    return of::Attrs{0.5, false, p, int64_t(1), int64_t(0), kind};
  };
  const of::TensorList o = of::dispatch(fwd, {q, kt, v, {}}, attrs(0, 0));
  CHECK(o[0].sizes() == of::IntArrayRef(of::DimVector{4, 3, 6}));
  CHECK(o[1].sizes() == of::IntArrayRef(of::DimVector{4, 3}));
  CHECK(th::throws_with(call(fwd, {q, kt.transpose(-1, -2), v, {}}, attrs(0, 0)),
                        {"[fused_attention_forward]", "(2, 2, 3, 4)", "(2, 2, 5, 4)"}));
  CHECK(th::throws_with(call(fwd, {q, kt, v, of::zeros({3, 5})}, attrs(0, 1)),
                        {"[fused_attention_forward]", "boolean mask", "bool"}));
  CHECK(th::throws_with(call(fwd, {q, kt, v, {}}, attrs(1.0, 0)),
                        {"[fused_attention_forward]", "dropout_p must be in [0, 1)"}));
  CHECK(th::throws_with(call(fwd, {q, kt, v, {}}, attrs(0, 3)),
                        {"[fused_attention_forward]", "mask_kind 3"}));
  // the backward: grad_output as [B, L, Ev] or with q's batch dims; out and lse as made
  const of::Tensor dout = of::randn({4, 3, 6});
  const of::TensorList g = of::dispatch(bwd, {dout, q, kt, v, {}, o[0], o[1]}, attrs(0, 0));
  CHECK(g[1].sizes() == of::IntArrayRef(of::DimVector{4, 4, 5}));
  const of::TensorList g4 =
      of::dispatch(bwd, {dout.view({2, 2, 3, 6}), q, kt, v, {}, o[0], o[1]}, attrs(0, 0));
  for (int i = 0; i < 3; ++i) CHECK(th::same_bits(g[size_t(i)], g4[size_t(i)]));
  CHECK(th::throws_with(call(bwd, {of::randn({4, 3, 5}), q, kt, v, {}, o[0], o[1]}, attrs(0, 0)),
                        {"[fused_attention_backward]", "grad_output", "(4, 3, 6)"}));
  CHECK(th::throws_with(call(bwd, {dout, q, kt, v, {}, o[0], of::randn({4, 2})}, attrs(0, 0)),
                        {"[fused_attention_backward]", "logsumexp"}));
  // embedding_layer_norm
  const of::Tensor t0 = of::randn({5, 4}), t1 = of::randn({3, 4}), w = of::ones({4}),
                   b = of::zeros({4});
  const of::Tensor i0 = of::tensor(std::vector<int64_t>{0, 4, 2}, {3}),
                   i1 = of::tensor(std::vector<int64_t>{1, 2}, {2, 1});
  const of::Attrs ln{int64_t(2), 1e-5, true, true};
  CHECK(of::dispatch(emb, {t0, i0, t1, i1, {}, {}, w, b}, ln)[0].sizes() ==
        of::IntArrayRef(of::DimVector{2, 3, 4}));
  CHECK(th::throws_with(call(emb, {t0, i0, of::randn({3, 5}), i1, {}, {}, w, b}, ln),
                        {"[embedding_layer_norm]", "table 1", "(3, 5)"}));
  CHECK(th::throws_with(call(emb, {t0, i0.to(of::kFloat32), t1, i1, {}, {}, w, b}, ln),
                        {"[embedding_layer_norm]", "ids 0", "int64"}));
  CHECK(th::throws_with(
      call(emb, {t0, i0, t1, of::tensor(std::vector<int64_t>{0, 1}, {2}), {}, {}, w, b}, ln),
      {"[embedding_layer_norm]", "ids 1", "does not broadcast"}));
  CHECK(th::throws_with(
      call(emb, {t0, i0, t1, of::full({2, 1}, 3, of::TensorOptions(of::kInt64)), {}, {}, w, b}, ln),
      {"[embedding_layer_norm]", "index 3", "table 1", "(3 rows)"}));
  CHECK(th::throws_with(call(emb, {t0, i0, t1, i1, t1, {}, w, b}, ln),
                        {"[embedding_layer_norm]", "ids 2"}));
  CHECK(th::throws_with(
      call(emb, {t0, i0, t1, i1, {}, {}, w, b}, of::Attrs{int64_t(1), 1e-5, true, true}),
      {"[embedding_layer_norm]", "last dim"}));
  CHECK(th::throws_with(call(emb, {t0, i0, t1, i1, {}, {}, of::ones({3}), b}, ln),
                        {"[embedding_layer_norm]", "weight"}));
}

TEST_CASE("trace rewrite: fused_attention checks its operands") {
  const of::OpDef& op = of::find_op("fused_attention");
  auto call = [&](of::TensorList in, of::Attrs a) {
    return [=, &op] { (void)of::dispatch(op, in, a); };
  };
  const of::Tensor q = of::randn({2, 3, 4}), kt = of::randn({2, 4, 5}), v = of::randn({2, 5, 6});
  const of::Attrs none{0.5, int64_t(0)}, additive{0.5, int64_t(2)};
  CHECK(of::dispatch(op, {q, kt, v, {}}, none)[0].sizes() ==
        of::IntArrayRef(of::DimVector{2, 3, 6}));
  CHECK(th::throws_with(call({q, of::randn({2, 5, 5}), v, {}}, none),
                        {"[fused_attention]", "(2, 3, 4)", "(2, 5, 5)"}));
  CHECK(th::throws_with(call({q, kt, of::randn({3, 5, 6}), {}}, none),
                        {"[fused_attention]", "batch dims"}));
  CHECK(th::throws_with(call({q.flatten(), kt, v, {}}, none), {"[fused_attention]"}));
  CHECK(th::throws_with(call({q, kt.to(of::kFloat64), v, {}}, none), {"[fused_attention]"}));
  CHECK(th::throws_with(call({q, kt, v, {}}, additive), {"[fused_attention]", "mask"}));
  CHECK(th::throws_with(call({q, kt, v, of::zeros({2, 4, 5})}, additive),
                        {"[fused_attention]", "broadcast to the scores (2, 3, 5)"}));
  CHECK(th::throws_with(call({q, kt, v, of::zeros({3, 5}, of::kFloat64)}, additive),
                        {"[fused_attention]", "float32"}));
  CHECK(th::throws_with(call({q, kt, v, {}}, of::Attrs{0.5, int64_t(1)}),
                        {"[fused_attention]", "mask_kind 1"}));
  CHECK(th::throws_with(call({q.to(of::kInt64), kt, v, {}}, none), {"[fused_attention]"}));
  // heads merged in the output: [B / heads, L, heads, Ev], heads dividing B
  CHECK(of::dispatch(op, {q, kt, v, {}}, of::Attrs{0.5, int64_t(0), int64_t(2)})[0].sizes() ==
        of::IntArrayRef(of::DimVector{1, 3, 2, 6}));
  CHECK(th::throws_with(call({q, kt, v, {}}, of::Attrs{0.5, int64_t(0), int64_t(3)}),
                        {"[fused_attention]", "heads 3", "2 batch matrices"}));
  CHECK(th::throws_with(call({q, kt, v, {}}, of::Attrs{0.5, int64_t(0), int64_t(0)}),
                        {"[fused_attention]", "heads 0"}));
  // a row masked everywhere attends to nothing: NaN, as the unfused softmax gives
  of::Tensor m = of::zeros({3, 5});
  m.select(0, 1).fill_(-INFINITY);
  const of::Tensor o = of::dispatch(op, {q, kt, v, m}, additive)[0];
  CHECK(std::isnan(o.select(1, 1).sum().item<double>()));
  CHECK(std::isfinite(o.select(1, 0).sum().item<double>()));
}

TEST_CASE("trace rewrite: add_norm makes a residual add and its LayerNorm/RMSNorm one pass") {
  of::manual_seed(11);
  const of::Tensor w = of::randn({8, 8}), lw = of::randn({8}), lb = of::randn({8});
  const of::Tensor x = of::randn({3, 5, 8});
  // BERT's DenseNorm: LayerNorm(dense(x) + x)
  const Fn block = [&](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{of::layer_norm(of::linear(in[0], w) + in[0], {8}, lw, lb)};
  };
  const of::trace::Graph g = recorded(block, {x});
  const of::trace::Graph f = of::trace::dce(of::trace::fuse_add_norm(g));
  CHECK(count_op(g, "add") == 1);
  CHECK(count_op(f, "add") == 0);
  CHECK(count_op(f, "layer_norm") == 0);
  CHECK(count_op(f, "add_layer_norm") == 1);
  REQUIRE(f.rewrites.size() == 1);
  CHECK(f.rewrites[0].find("-> add_layer_norm ((3, 5, 8))") != std::string::npos);
  // the sum read after the norm too: written by the fused op
  const Fn reused = [&](const std::vector<of::Tensor>& in) {
    const of::Tensor s = in[0] + in[1];
    return std::vector<of::Tensor>{of::rms_norm(s, {8}, lw) * 2 + s};
  };
  const of::trace::Graph r = of::trace::dce(of::trace::fuse_add_norm(recorded(reused, {x, x * 3})));
  CHECK(count_op(r, "add_rms_norm") == 1);
  CHECK(has_line(r.rewrites, "the sum also written"));
  // refused: the sum read before the norm, a broadcast add, a bias-only add of another shape
  const Fn before = [&](const std::vector<of::Tensor>& in) {
    const of::Tensor s = in[0] + in[1];
    const of::Tensor e = s.exp();
    return std::vector<of::Tensor>{of::layer_norm(s, {8}) + e};
  };
  const of::trace::Graph b = of::trace::fuse_add_norm(recorded(before, {x, x}));
  CHECK(count_op(b, "add_layer_norm") == 0);
  CHECK(has_line(b.rewrites, "reads the sum before the norm"));
  const Fn bcast = [&](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{of::layer_norm(in[0] + lb, {8})};
  };
  const of::trace::Graph c = of::trace::fuse_add_norm(recorded(bcast, {x}));
  CHECK(count_op(c, "add_layer_norm") == 0);
  CHECK(has_line(c.rewrites, "not both contiguous"));
  // replays: bitwise the unfused replay and eager (the kernel is the add's and the norm's own
  // arithmetic), float32 and float64, layer and RMS norms
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    CAPTURE(dt);
    const of::Tensor wd = w.to(dt), lwd = lw.to(dt), lbd = lb.to(dt);
    auto fn = [&](const of::Tensor& a, const of::Tensor& res) {
      const of::Tensor s = of::linear(a, wd) + res;
      return of::layer_norm(s, {8}, lwd, lbd) + of::rms_norm(of::layer_norm(s, {8}) + a, {8}, lwd);
    };
    auto fused = of::jit::trace(fn);
    auto plain = of::jit::trace(fn, of::jit::TraceOptions().add_norm(false));
    of::NoGradGuard ng;
    for (int call = 0; call < 3; ++call) {
      const of::Tensor a = of::randn({4, 6, 8}, dt), res = of::randn({4, 6, 8}, dt);
      const of::Tensor y = fused(a, res);
      CHECK(th::same_bits(y, plain(a, res)));
      CHECK(th::same_bits(y, fn(a, res)));
    }
    CHECK(has_line(fused.stats().rewrites, "-> add_rms_norm"));
    CHECK(has_line(fused.stats().rewrites, "-> add_layer_norm"));
    CHECK(fused.graph().find("add_layer_norm") != std::string::npos);
    CHECK(plain.graph().find("add_layer_norm") == std::string::npos);
  }
  // a training graph keeps the plain norm (its statistics feed the backward)
  const of::Tensor lwg = lw.clone().set_requires_grad(true);
  auto train = of::jit::trace([&](const of::Tensor& a) {
    of::Tensor y = of::layer_norm(a + a * 2, {8}, lwg);
    y.sum().backward();
    return y.detach();
  });
  (void)train(x);
  CHECK(train.graph().find("add_layer_norm") == std::string::npos);
  CHECK(has_line(train.stats().rewrites, "statistics are read"));
}

// NOTE [Embeddings and norm]: BERT's embeddings (word + position + token type, then LayerNorm).
TEST_CASE("trace rewrite: add_norm makes embedding lookups, their sum and the LayerNorm one pass") {
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    CAPTURE(dt);
    of::manual_seed(4);
    const of::Tensor word = of::randn({50, 16}, dt), pos = of::randn({20, 16}, dt),
                     type = of::randn({2, 16}, dt), w = of::rand({16}, dt) + 0.5,
                     b = of::randn({16}, dt);
    auto bert = [&](const of::Tensor& ids, const of::Tensor& types) {
      const of::Tensor p = of::arange(ids.size(1), of::TensorOptions(of::kInt64));
      const of::Tensor h =
          of::embedding(word, ids) + of::embedding(pos, p) + of::embedding(type, types);
      return of::layer_norm(h, {16}, w, b, 1e-12);
    };
    const of::Tensor ids = of::randint(0, 50, {3, 7}, of::kInt64);
    const of::Tensor types = of::randint(0, 2, {3, 7}, of::kInt64);
    const Fn fn = [&](const std::vector<of::Tensor>& in) {
      return std::vector<of::Tensor>{bert(in[0], in[1])};
    };
    const of::trace::Graph f = of::trace::dce(of::trace::fuse_add_norm(recorded(fn, {ids, types})));
    CHECK(count_op(f, "embedding_layer_norm") == 1);
    CHECK(count_op(f, "embedding") == 0);
    CHECK(count_op(f, "add") == 0);
    CHECK(has_line(f.rewrites, "3 embedding lookups + add + add_layer_norm at node"));
    of::NoGradGuard ng;
    auto fused = of::jit::trace(bert);
    auto plain = of::jit::trace(bert, of::jit::TraceOptions().add_norm(false));
    for (int call = 0; call < 3; ++call) {
      const of::Tensor i2 = of::randint(0, 50, {3, 7}, of::kInt64);
      const of::Tensor t2 = of::randint(0, 2, {3, 7}, of::kInt64);
      const of::Tensor a = fused(i2, t2);
      CHECK(th::same_bits(a, plain(i2, t2)));  // the recorded order of the sums: the same bits
      CHECK(th::same_bits(a, bert(i2, t2)));
    }
    CHECK(fused.graph().find("embedding_layer_norm") != std::string::npos);
    // an index out of range at a replay: the op's error, before it runs
    const of::Tensor bad = of::full({3, 7}, 50, of::TensorOptions(of::kInt64));
    CHECK(th::throws_with([&] { fused(bad, types); },
                          {"[embedding_layer_norm]", "index 50", "out of range", "(50, 16)"}));
  }
  of::manual_seed(5);
  const of::Tensor word = of::randn({30, 8}), type = of::randn({2, 8});
  const of::Tensor ids = of::randint(0, 30, {2, 5}, of::kInt64);
  const of::Tensor types = of::randint(0, 2, {2, 5}, of::kInt64);
  // two tables
  const Fn two = [&](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{
        of::layer_norm(of::embedding(word, in[0]) + of::embedding(type, in[1]), {8})};
  };
  const of::trace::Graph g2 = of::trace::fuse_add_norm(recorded(two, {ids, types}));
  CHECK(has_line(g2.rewrites, "2 embedding lookups + add_layer_norm at node"));
  // refused: the norm over the last two dims
  const Fn wide = [&](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{
        of::layer_norm(of::embedding(word, in[0]) + of::embedding(type, in[1]), {5, 8})};
  };
  const of::trace::Graph g3 = of::trace::fuse_add_norm(recorded(wide, {ids, types}));
  CHECK(count_op(g3, "embedding_layer_norm") == 0);
  CHECK(has_line(g3.rewrites, "refused: the norm is not over the last dim"));
  // a lookup also returned: not a candidate (the add_layer_norm stays)
  const Fn shared = [&](const std::vector<of::Tensor>& in) {
    const of::Tensor e = of::embedding(word, in[0]);
    return std::vector<of::Tensor>{of::layer_norm(e + of::embedding(type, in[1]), {8}), e};
  };
  const of::trace::Graph g4 = of::trace::fuse_add_norm(recorded(shared, {ids, types}));
  CHECK(count_op(g4, "embedding_layer_norm") == 0);
  CHECK(count_op(g4, "add_layer_norm") == 1);
}

TEST_CASE("trace rewrite: epilogue runs the activation after a linear in the GEMM's output pass") {
  of::manual_seed(13);
  const of::Tensor w1 = of::randn({40, 16}), b1 = of::randn({40}), w2 = of::randn({16, 40});
  const of::Tensor x = of::randn({3, 7, 16});
  // BERT's FFN: gelu(dense(x)) through linear's batch folding (a reshape of its output)
  const Fn ffn = [&](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{of::linear(of::gelu(of::linear(in[0], w1, b1)), w2)};
  };
  const of::trace::Graph g = recorded(ffn, {x});
  const of::trace::Graph f = of::trace::dce(of::trace::fuse_epilogue(g));
  CHECK(count_op(g, "gelu") == 1);
  CHECK(count_op(f, "gelu") == 0);
  CHECK(count_op(f, "linear_act") == 1);
  CHECK(count_op(f, "linear") == 1);
  CHECK(has_line(f.rewrites, "-> linear_act (gelu, output (21, 40))"));
  // refused: the linear's output read elsewhere, the activation's output returned
  const Fn shared = [&](const std::vector<of::Tensor>& in) {
    const of::Tensor y = of::linear(in[0], w1, b1);
    return std::vector<of::Tensor>{of::linear(y.relu(), w2) + of::linear(y, w2)};
  };
  CHECK(count_op(of::trace::fuse_epilogue(recorded(shared, {x})), "linear_act") == 0);
  const Fn returned = [&](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{of::linear(in[0], w1, b1).tanh()};
  };
  const of::trace::Graph r = of::trace::fuse_epilogue(recorded(returned, {x}));
  CHECK(count_op(r, "linear_act") == 0);
  CHECK(has_line(r.rewrites, "returned"));
  // replays: bitwise the unfused replay and eager, each activation, float32 (the kernel's
  // epilogue where the CPU has AVX-512) and float64 (after the GEMM)
  using Act = std::function<of::Tensor(const of::Tensor&)>;
  const std::vector<std::pair<std::string, Act>> acts = {
      {"relu", [](const of::Tensor& t) { return t.relu(); }},
      {"gelu", [](const of::Tensor& t) { return of::gelu(t); }},
      {"gelu_tanh", [](const of::Tensor& t) { return of::gelu(t, "tanh"); }},
      {"silu", [](const of::Tensor& t) { return of::silu(t); }},
      {"tanh", [](const of::Tensor& t) { return t.tanh(); }}};
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    for (const auto& act : acts) {
      INFO(act.first << " " << of::dtype_name(dt));
      const of::Tensor w = w1.to(dt), b = b1.to(dt), v = w2.to(dt);
      auto fn = [&](const of::Tensor& a) { return of::linear(act.second(of::linear(a, w, b)), v); };
      auto fused = of::jit::trace(fn);
      auto plain = of::jit::trace(fn, of::jit::TraceOptions().epilogue(false));
      of::NoGradGuard ng;
      for (int call = 0; call < 2; ++call) {
        const of::Tensor a = of::randn({5, 30, 16}, dt);
        const of::Tensor y = fused(a);
        CHECK(th::same_bits(y, plain(a)));
        CHECK(th::same_bits(y, fn(a)));
      }
      CHECK(has_line(fused.stats().rewrites, "(" + act.first + ", output (150, 40))"));
      CHECK(plain.graph().find("linear_act") == std::string::npos);
    }
  }
  // a training graph keeps the activation's input for backward: no rewrite
  const of::Tensor wg = w1.clone().set_requires_grad(true);
  auto train = of::jit::trace([&](const of::Tensor& a) {
    of::Tensor y = of::gelu(of::linear(a, wg, b1));
    y.sum().backward();
    return y.detach();
  });
  (void)train(x);
  CHECK(train.graph().find("linear_act") == std::string::npos);
}

TEST_CASE("trace rewrite: epilogue folds a constant scale and a residual add into the GEMM") {
  of::manual_seed(17);
  const of::Tensor w1 = of::randn({16, 16}) * 0.3, b1 = of::randn({16}), w2 = of::randn({40, 16});
  const of::Tensor x = of::randn({3, 7, 16});
  // a pre-norm block's residual: h = x + proj(a); the activation, scale and residual together
  const Fn block = [&](const std::vector<of::Tensor>& in) {
    const of::Tensor h = in[0] + of::linear(of::layer_norm(in[0], {16}), w1, b1);
    return std::vector<of::Tensor>{of::linear(of::gelu(of::linear(h, w2)) * 0.5, w2.t()) + h};
  };
  const of::trace::Graph g = recorded(block, {x});
  const of::trace::Graph f = of::trace::dce(of::trace::fuse_epilogue(g));
  CHECK(count_op(f, "linear_act") == 2);
  CHECK(count_op(f, "linear") == 1);  // the last: its residual add is what the graph returns
  CHECK(count_op(f, "add") == 1);
  CHECK(count_op(f, "mul") == 0);
  CHECK(has_line(f.rewrites, "-> linear_act (no activation, residual, output (21, 16))"));
  CHECK(has_line(f.rewrites, "-> linear_act (gelu, scale 0.5, output (21, 40))"));
  CHECK(has_line(f.rewrites, "refused: the last step's output is returned"));
  // replays: bitwise the unfused replay and eager, float32 (the kernel's epilogue where the CPU
  // has AVX-512) and float64 (after the GEMM). Chained rewrites: a linear reads the previous
  // one's residual sum through a view, and a draw between them takes arena memory (the view's
  // reads must keep the first linear's output alive: a dropped add's buffer once misled the
  // memory plan into reusing it)
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
    INFO(of::dtype_name(dt));
    const of::Tensor a1 = w1.to(dt), c1 = b1.to(dt), a2 = w2.to(dt);
    auto fn = [&](const of::Tensor& in) {
      const of::Tensor h = in + of::linear(of::layer_norm(in, {16}), a1, c1);
      const of::Tensor r = of::randn({3, 7, 40}, dt);  // (drawn: computed before the linear)
      return of::linear(of::silu(of::linear(h, a2)) * 1.7, a2.t()) + h +
             (of::linear(h, a2, {}) * 3.0 + r).sum();
    };
    auto fused = of::jit::trace(fn);
    auto plain = of::jit::trace(fn, of::jit::TraceOptions().epilogue(false));
    of::NoGradGuard ng;
    for (int call = 0; call < 2; ++call) {
      const of::Tensor in = of::randn({3, 7, 16}, dt);
      of::manual_seed(100 + call);
      const of::Tensor y = fused(in);
      of::manual_seed(100 + call);
      CHECK(th::same_bits(y, plain(in)));
      of::manual_seed(100 + call);
      CHECK(th::same_bits(y, fn(in)));
    }
    CHECK(has_line(fused.stats().rewrites, "(silu, scale 1.7, output (21, 40))"));
    CHECK(has_line(fused.stats().rewrites, "(no activation, scale 3, residual, output (21, 40))"));
    CHECK(plain.graph().find("linear_act") == std::string::npos);
  }
  // refused, saying why: a residual computed after the linear; one written in place in between;
  // a scale that is a tensor, not a constant (no rewrite at all)
  const Fn late = [&](const std::vector<of::Tensor>& in) {
    const of::Tensor y = of::linear(in[0], w1, b1);
    return std::vector<of::Tensor>{y + in[0].exp()};
  };
  const of::trace::Graph l = of::trace::fuse_epilogue(recorded(late, {x}));
  CHECK(count_op(l, "linear_act") == 0);
  CHECK(has_line(l.rewrites, "the residual is computed after the linear"));
  const Fn written = [&](const std::vector<of::Tensor>& in) {
    of::Tensor r = in[0].exp();
    const of::Tensor y = of::linear(in[0], w1, b1);
    r.mul_(2.0);
    return std::vector<of::Tensor>{y + r};
  };
  const of::trace::Graph wr = of::trace::fuse_epilogue(recorded(written, {x}));
  CHECK(count_op(wr, "linear_act") == 0);
  CHECK(has_line(wr.rewrites, "written between the linear and the add"));
  const Fn tensor_scale = [&](const std::vector<of::Tensor>& in) {
    return std::vector<of::Tensor>{of::linear(in[0], w1, b1) * in[1]};
  };
  CHECK(count_op(of::trace::fuse_epilogue(recorded(tensor_scale, {x, of::randn({16})})),
                 "linear_act") == 0);
}

TEST_CASE("trace rewrite: linear_act checks its activation") {
  const of::OpDef& op = of::find_op("linear_act");
  const of::Tensor x = of::randn({2, 3}), w = of::randn({4, 3});
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(op, {x, w, {}}, of::Attrs{std::string("exp")});
      },
      {"[linear_act]", "unknown activation 'exp'"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(op, {x, of::randn({4, 2}), {}}, of::Attrs{std::string("relu")});
      },
      {"[linear]", "(2, 3)", "(4, 2)"}));
  // the residual must have the output's shape and dtype; the scale must be finite
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(op, {x, w, {}, of::randn({2, 5})}, of::Attrs{std::string("none"), 1.0});
      },
      {"[linear_act]", "residual", "(2, 4)", "(2, 5)"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(op, {x, w, {}, of::randn({2, 4}, of::kFloat64)},
                           of::Attrs{std::string("none"), 1.0});
      },
      {"[linear_act]", "residual", "float64"}));
  CHECK(th::throws_with(
      [&] {
        (void)of::dispatch(op, {x, w, {}}, of::Attrs{std::string("relu"), INFINITY});
      },
      {"[linear_act]", "scale", "inf"}));
  // called directly: act(x wᵀ + b) * scale + residual, each step rounded as its op
  const of::Tensor b = of::randn({4}), r = of::randn({2, 4});
  const of::Tensor got = of::dispatch(op, {x, w, b, r}, of::Attrs{std::string("tanh"), 0.25})[0];
  CHECK(th::same_bits(got, of::linear(x, w, b).tanh() * 0.25 + r));
}

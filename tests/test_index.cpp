// Table rows and plain tests for the shape and indexing ops (src/ops/index.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dispatch.h"
#include "harness.h"

using th::OpRow;
using th::Ref;
using th::Shape;
using T = of::Tensor;
using V = std::vector<T>;
using R = std::vector<Ref>;

namespace {

// ---------------------------------------------------------------- input generators

T uniform(Shape s, uint64_t seed, double lo = -2, double hi = 2) {
  of::manual_seed(seed);
  return of::rand(s, of::kFloat64) * (hi - lo) + lo;
}
T longs(std::vector<int64_t> v, Shape s) { return of::tensor(v, s); }
// Distinct values (no ties), spaced 0.37 apart, shuffled deterministically by seed.
T distinct(Shape s, uint64_t seed) {
  int64_t n = Ref::numel(s);
  of::manual_seed(seed);
  return (of::randperm(n).to(of::kFloat64) * 0.37 - 1.5).reshape(s);
}

// ---------------------------------------------------------------- references (plain loops)

int64_t wrap(int64_t d, int64_t nd) { return d < 0 ? d + nd : d; }

Ref ref_cat(const R& in, int64_t dim) {
  std::vector<Ref> use;
  for (auto& r : in)
    if (!(r.dim() == 1 && r.shape[0] == 0)) use.push_back(r);
  int64_t d = wrap(dim, use[0].dim());
  Shape s = use[0].shape;
  s[d] = 0;
  for (auto& r : use) s[d] += r.shape[d];
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = out.index(i);
    int64_t k = idx[d];
    size_t t = 0;
    while (k >= use[t].shape[d]) k -= use[t++].shape[d];
    idx[d] = k;
    out.v[i] = use[t].at(idx);
  }
  return out;
}

Ref ref_gather(const Ref& x, int64_t d, const Ref& index) {
  Ref out(index.shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = out.index(i);
    idx[d] = int64_t(index.v[i]);
    out.v[i] = x.at(idx);
  }
  return out;
}

// scatter / scatter_add with src of any shape >= index (reads src at index positions)
Ref ref_scatter(const Ref& x, int64_t d, const Ref& index, const Ref* src, double value, bool add) {
  Ref out = x;
  for (int64_t i = 0; i < index.numel(); ++i) {
    Shape idx = index.index(i);
    double v = src ? src->at(idx) : value;
    idx[d] = int64_t(index.v[i]);
    double& o = out.v[out.flat(idx)];
    o = add ? o + v : v;
  }
  return out;
}

Ref ref_index_select(const Ref& x, int64_t d, const Ref& index) {
  Shape s = x.shape;
  s[d] = index.numel();
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = out.index(i);
    idx[d] = int64_t(index.v[idx[d]]);
    out.v[i] = x.at(idx);
  }
  return out;
}

Ref ref_index_add(const Ref& x, int64_t d, const Ref& index, const Ref& src, double alpha) {
  Ref out = x;
  for (int64_t i = 0; i < src.numel(); ++i) {
    Shape idx = src.index(i);
    idx[d] = int64_t(index.v[idx[d]]);
    out.v[out.flat(idx)] += alpha * src.v[i];
  }
  return out;
}

Ref ref_masked_select(const Ref& x, const Ref& mask) {
  Shape b = th::broadcast(x.shape, mask.shape);
  Ref tmp(b);
  std::vector<double> vals;
  for (int64_t i = 0; i < tmp.numel(); ++i) {
    Shape idx = tmp.index(i);
    if (mask.at_broadcast(idx) != 0) vals.push_back(x.at_broadcast(idx));
  }
  return Ref({int64_t(vals.size())}, vals);
}

Ref ref_pad(const Ref& x, std::vector<int64_t> pads, const std::string& mode, double value) {
  int64_t nd = x.dim(), np = int64_t(pads.size()) / 2;
  Shape s = x.shape;
  std::vector<int64_t> left(nd, 0);
  for (int64_t p = 0; p < np; ++p) {
    int64_t d = nd - 1 - p;
    left[d] = pads[2 * p];
    s[d] += pads[2 * p] + pads[2 * p + 1];
  }
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = out.index(i);
    bool inside = true;
    for (int64_t d = 0; d < nd; ++d) {
      int64_t j = idx[d] - left[d], n = x.shape[d];
      if (mode == "constant") {
        if (j < 0 || j >= n) inside = false;
      } else if (mode == "reflect") {
        if (j < 0) j = -j;
        if (j >= n) j = 2 * (n - 1) - j;
      } else if (mode == "replicate") {
        j = std::min(std::max<int64_t>(j, 0), n - 1);
      } else {
        j = ((j % n) + n) % n;
      }
      idx[d] = j;
    }
    out.v[i] = inside ? x.at(idx) : value;
  }
  return out;
}

Ref ref_tri(const Ref& x, int64_t k, bool lower) {
  Ref out = x;
  int64_t nd = x.dim();
  for (int64_t i = 0; i < x.numel(); ++i) {
    Shape idx = x.index(i);
    int64_t r = idx[nd - 2], c = idx[nd - 1];
    bool keep = lower ? c - r <= k : c - r >= k;
    if (!keep) out.v[i] = 0;
  }
  return out;
}

// out[idx] = x[f(idx)] for a per-dim index map f
Ref ref_map(const Ref& x, Shape out_shape, const std::function<int64_t(int64_t d, int64_t i)>& f) {
  Ref out(out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = out.index(i);
    Shape src(idx.size());
    for (size_t d = 0; d < idx.size(); ++d) src[d] = f(int64_t(d), idx[d]);
    out.v[i] = x.at(src);
  }
  return out;
}

// sort (values) or topk along dim d; k < 0 means all
std::pair<Ref, Ref> ref_sort(const Ref& x, int64_t d, bool desc, int64_t k = -1) {
  int64_t n = x.shape[d];
  if (k < 0) k = n;
  Shape s = x.shape;
  s[d] = k;
  Ref vals(s), inds(s);
  for (int64_t i = 0; i < vals.numel(); ++i) {
    Shape idx = vals.index(i);
    if (idx[d] != 0) continue;
    std::vector<std::pair<double, int64_t>> line;
    for (int64_t j = 0; j < n; ++j) {
      Shape xi = idx;
      xi[d] = j;
      line.push_back({x.at(xi), j});
    }
    std::stable_sort(line.begin(), line.end(), [desc](auto& a, auto& b) {
      return desc ? a.first > b.first : a.first < b.first;
    });
    for (int64_t j = 0; j < k; ++j) {
      Shape oi = idx;
      oi[d] = j;
      vals.v[vals.flat(oi)] = line[j].first;
      inds.v[inds.flat(oi)] = double(line[j].second);
    }
  }
  return {vals, inds};
}

Ref ref_embedding(const Ref& w, const Ref& idx) {
  int64_t D = w.shape[1];
  Shape s = idx.shape;
  s.push_back(D);
  Ref out(s);
  for (int64_t i = 0; i < idx.numel(); ++i)
    for (int64_t j = 0; j < D; ++j) out.v[i * D + j] = w.v[int64_t(idx.v[i]) * D + j];
  return out;
}

OpRow row(std::string name, std::vector<std::string> ops, std::vector<Shape> shapes,
          std::function<T(const V&)> fn, std::function<Ref(const R&)> ref) {
  return th::make_row_tol(std::move(name), std::move(ops), std::move(shapes), std::move(fn),
                          std::move(ref), 1e-5, 1e-6);
}
OpRow with_make(OpRow r, std::function<V(uint64_t)> make, std::vector<int> nondiff) {
  r.make = std::move(make);
  r.nondiff = std::move(nondiff);
  return r;
}

}  // namespace

// ---------------------------------------------------------------- the table

// clang-format off
TH_ROWS({
    row("cat/dim1", {"cat"}, {{2, 3}, {2, 4}, {2, 1}},
        [](const V& in) { return of::cat({in[0], in[1], in[2]}, 1); },
        [](const R& in) { return ref_cat(in, 1); }),
    with_make(row("cat/neg_dim_legacy_empty", {"cat"}, {},
                  [](const V& in) { return of::cat({in[0], in[1], in[2]}, -2); },
                  [](const R& in) { return ref_cat(in, -2); }),
              [](uint64_t s) { return V{uniform({3, 2}, s), of::zeros({0}, of::kFloat64), uniform({1, 2}, s + 1)}; },
              {}),
    row("stack/dim1", {"cat", "view"}, {{2, 3}, {2, 3}},
        [](const V& in) { return of::stack({in[0], in[1]}, 1); },
        [](const R& in) {
          Ref out({2, 2, 3});
          for (int64_t i = 0; i < out.numel(); ++i) {
            Shape idx = out.index(i);
            out.v[i] = in[idx[1]].at({idx[0], idx[2]});
          }
          return out;
        }),
    row("split/size", {"slice"}, {{3, 5}}, [](const V& in) { return in[0].split(2, 1)[1]; },
        [](const R& in) { return ref_map(in[0], {3, 2}, [](int64_t d, int64_t i) { return d == 1 ? i + 2 : i; }); }),
    row("split/sizes", {"slice"}, {{3, 5}}, [](const V& in) { return of::split(in[0], {1, 3, 1}, 1)[1]; },
        [](const R& in) { return ref_map(in[0], {3, 3}, [](int64_t d, int64_t i) { return d == 1 ? i + 1 : i; }); }),
    row("chunk", {"slice"}, {{7, 2}}, [](const V& in) { return in[0].chunk(3, 0)[2]; },
        [](const R& in) { return ref_map(in[0], {1, 2}, [](int64_t d, int64_t i) { return d == 0 ? i + 6 : i; }); }),
    row("unbind", {"select"}, {{3, 4}}, [](const V& in) { return of::unbind(in[0], 1)[2]; },
        [](const R& in) {
          Ref out({3});
          for (int64_t i = 0; i < 3; ++i) out.v[i] = in[0].at({i, 2});
          return out;
        }),
    with_make(row("gather/dim1_dups", {"gather", "scatter_add"}, {},
                  [](const V& in) { return of::gather(in[0], 1, in[1]); },
                  [](const R& in) { return ref_gather(in[0], 1, in[1]); }),
              [](uint64_t s) {
                return V{uniform({3, 4}, s), longs({0, 3, 3, 1, 2, 2, 0, 1, 3, 3, 0, 0, 1, 2, 3}, {3, 5})};
              },
              {1}),
    with_make(row("gather/dim0_smaller_index", {"gather", "scatter_add"}, {},
                  [](const V& in) { return in[0].gather(0, in[1]); },
                  [](const R& in) { return ref_gather(in[0], 0, in[1]); }),
              [](uint64_t s) { return V{uniform({4, 3}, s), longs({3, 0, 2, 1, 1, 0}, {2, 3})}; }, {1}),
    with_make(row("scatter/src_dim1", {"scatter", "gather", "pad"}, {},
                  [](const V& in) { return of::scatter(in[0], 1, in[1], in[2]); },
                  [](const R& in) { return ref_scatter(in[0], 1, in[1], &in[2], 0, false); }),
              [](uint64_t s) {
                return V{uniform({3, 5}, s), longs({0, 3, 4, 1, 2, 0}, {3, 2}), uniform({3, 4}, s + 1)};
              },
              {1}),
    with_make(row("scatter/src_dim0", {"scatter", "gather"}, {},
                  [](const V& in) { return in[0].scatter(0, in[1], in[2]); },
                  [](const R& in) { return ref_scatter(in[0], 0, in[1], &in[2], 0, false); }),
              [](uint64_t s) {
                return V{uniform({4, 3}, s), longs({3, 0, 2, 1, 2, 0}, {2, 3}), uniform({2, 3}, s + 1)};
              },
              {1}),
    with_make(row("scatter/value", {"scatter"}, {},
                  [](const V& in) { return of::scatter(in[0], 1, in[1], 1.5); },
                  [](const R& in) { return ref_scatter(in[0], 1, in[1], nullptr, 1.5, false); }),
              [](uint64_t s) { return V{uniform({3, 5}, s), longs({0, 3, 4, 4, 2, 1}, {3, 2})}; }, {1}),
    with_make(row("scatter_add/dim0_dups", {"scatter_add", "gather"}, {},
                  [](const V& in) { return of::scatter_add(in[0], 0, in[1], in[2]); },
                  [](const R& in) { return ref_scatter(in[0], 0, in[1], &in[2], 0, true); }),
              [](uint64_t s) {
                return V{uniform({3, 4}, s),
                         longs({0, 2, 2, 1, 0, 0, 2, 1, 1, 2, 0, 0, 2, 2, 1, 0, 0, 1, 1, 2}, {5, 4}),
                         uniform({5, 4}, s + 1)};
              },
              {1}),
    with_make(row("index_select/dim0_dups", {"index_select", "index_add"}, {},
                  [](const V& in) { return of::index_select(in[0], 0, in[1]); },
                  [](const R& in) { return ref_index_select(in[0], 0, in[1]); }),
              [](uint64_t s) { return V{uniform({4, 3}, s), longs({3, 0, 3, 1, 2}, {5})}; }, {1}),
    with_make(row("index_select/dim1_int32", {"index_select", "index_add"}, {},
                  [](const V& in) { return in[0].index_select(-1, in[1]); },
                  [](const R& in) { return ref_index_select(in[0], 2, in[1]); }),
              [](uint64_t s) {
                return V{uniform({2, 4, 3}, s), of::tensor(std::vector<int32_t>{2, 2, 0, 1}, {4})};
              },
              {1}),
    with_make(row("index_add/dim1_alpha", {"index_add", "index_select"}, {},
                  [](const V& in) { return of::index_add(in[0], 1, in[1], in[2], 2.0); },
                  [](const R& in) { return ref_index_add(in[0], 1, in[1], in[2], 2.0); }),
              [](uint64_t s) {
                return V{uniform({3, 4}, s), longs({1, 3, 1, 0, 1}, {5}), uniform({3, 5}, s + 1)};
              },
              {1}),
    with_make(row("masked_select/broadcast_mask", {"masked_select", "masked_select_backward"}, {},
                  [](const V& in) { return of::masked_select(in[0], in[1]); },
                  [](const R& in) { return ref_masked_select(in[0], in[1]); }),
              [](uint64_t s) {
                return V{uniform({3, 4}, s), of::tensor(std::vector<bool>{true, false, true, true}, {4})};
              },
              {1}),
    with_make(row("masked_select/broadcast_input", {"masked_select", "masked_select_backward"}, {},
                  [](const V& in) { return in[0].masked_select(in[1]); },
                  [](const R& in) { return ref_masked_select(in[0], in[1]); }),
              [](uint64_t s) {
                return V{uniform({4}, s), of::tensor(std::vector<bool>{true, false, false, true, true, true,
                                                                       false, false, true, false, true, false},
                                                     {3, 4})};
              },
              {1}),
    with_make(row("take_along_dim/broadcast", {"gather", "expand"}, {},
                  [](const V& in) { return of::take_along_dim(in[0], in[1], 1); },
                  [](const R& in) {
                    Ref idx({3, 2});
                    for (int64_t i = 0; i < 6; ++i) idx.v[i] = in[1].v[i % 2];
                    return ref_gather(in[0], 1, idx);
                  }),
              [](uint64_t s) { return V{uniform({3, 4}, s), longs({3, 1}, {1, 2})}; }, {1}),
    with_make(row("take_along_dim/flat", {"gather", "view"}, {},
                  [](const V& in) { return of::take_along_dim(in[0], in[1]); },
                  [](const R& in) {
                    Ref out({5});
                    for (int64_t i = 0; i < 5; ++i) out.v[i] = in[0].v[int64_t(in[1].v[i])];
                    return out;
                  }),
              [](uint64_t s) { return V{uniform({3, 4}, s), longs({11, 0, 5, 5, 7}, {5})}; }, {1}),
    row("pad/constant_value", {"pad"}, {{2, 3, 4}},
        [](const V& in) { return of::pad(in[0], {1, 2}, "constant", 0.5); },
        [](const R& in) { return ref_pad(in[0], {1, 2}, "constant", 0.5); }),
    row("pad/constant_negative_crop", {"pad"}, {{2, 3, 4}},
        [](const V& in) { return of::pad(in[0], {1, -1, -1, 2}); },
        [](const R& in) {
          // crop one row at the top of dim 1, then pad; equivalently map through a shifted index
          Ref out({2, 4, 4});
          for (int64_t i = 0; i < out.numel(); ++i) {
            Shape idx = out.index(i);
            int64_t r = idx[1] + 1, c = idx[2] - 1;
            out.v[i] = (r < 3 && c >= 0 && c < 3) ? in[0].at({idx[0], r, c}) : 0.0;
          }
          return out;
        }),
    row("pad/reflect", {"pad", "pad_backward"}, {{2, 3, 4}},
        [](const V& in) { return of::pad(in[0], {2, 3, 2, 1}, "reflect"); },
        [](const R& in) { return ref_pad(in[0], {2, 3, 2, 1}, "reflect", 0); }),
    row("pad/replicate", {"pad", "pad_backward"}, {{2, 3, 4}},
        [](const V& in) { return of::pad(in[0], {1, 3, 2, 0}, "replicate"); },
        [](const R& in) { return ref_pad(in[0], {1, 3, 2, 0}, "replicate", 0); }),
    row("pad/circular", {"pad", "pad_backward"}, {{2, 3, 4}},
        [](const V& in) { return of::pad(in[0], {4, 1, 1, 3}, "circular"); },
        [](const R& in) { return ref_pad(in[0], {4, 1, 1, 3}, "circular", 0); }),
    row("tril/batched_k1", {"tril"}, {{2, 4, 5}}, [](const V& in) { return of::tril(in[0], 1); },
        [](const R& in) { return ref_tri(in[0], 1, true); }),
    row("tril/k-2", {"tril"}, {{4, 3}}, [](const V& in) { return in[0].tril(-2); },
        [](const R& in) { return ref_tri(in[0], -2, true); }),
    row("triu/batched", {"triu"}, {{2, 3, 4, 4}}, [](const V& in) { return of::triu(in[0]); },
        [](const R& in) { return ref_tri(in[0], 0, false); }),
    row("triu/k-1", {"triu"}, {{5, 3}}, [](const V& in) { return in[0].triu(-1); },
        [](const R& in) { return ref_tri(in[0], -1, false); }),
    row("flip/dims02", {"flip"}, {{3, 4, 2}}, [](const V& in) { return of::flip(in[0], {0, -1}); },
        [](const R& in) {
          return ref_map(in[0], in[0].shape, [&](int64_t d, int64_t i) {
            return d == 1 ? i : in[0].shape[d] - 1 - i;
          });
        }),
    row("roll/dims", {"roll"}, {{3, 4}}, [](const V& in) { return of::roll(in[0], {1, -3}, {0, 1}); },
        [](const R& in) {
          return ref_map(in[0], {3, 4}, [](int64_t d, int64_t i) {
            return d == 0 ? (i - 1 + 3) % 3 : (i + 3) % 4;
          });
        }),
    row("roll/flat", {"roll", "view"}, {{3, 4}}, [](const V& in) { return in[0].roll({5}); },
        [](const R& in) {
          Ref out({3, 4});
          for (int64_t i = 0; i < 12; ++i) out.v[i] = in[0].v[(i - 5 + 12) % 12];
          return out;
        }),
    row("repeat/more_dims", {"repeat"}, {{2, 3}}, [](const V& in) { return of::repeat(in[0], {2, 1, 3}); },
        [](const R& in) {
          Ref out({2, 2, 9});
          for (int64_t i = 0; i < out.numel(); ++i) {
            Shape idx = out.index(i);
            out.v[i] = in[0].at({idx[1] % 2, idx[2] % 3});
          }
          return out;
        }),
    [] {
      OpRow r = with_make(row("nonzero/2d", {"nonzero"}, {}, [](const V& in) { return of::nonzero(in[0]); },
                              [](const R& in) {
                                std::vector<double> v;
                                for (int64_t i = 0; i < in[0].numel(); ++i)
                                  if (in[0].v[i] != 0) {
                                    Shape idx = in[0].index(i);
                                    v.insert(v.end(), idx.begin(), idx.end());
                                  }
                                return Ref({int64_t(v.size() / 2), 2}, v);
                              }),
                          [](uint64_t) {
                            return V{of::tensor(std::vector<double>{0, 1, 0, 2, 3, 0, 0, 0, -1, 0, 0, 4}, {3, 4})};
                          },
                          {});
      r.grad = false;
      return r;
    }(),
    [] {
      OpRow r = with_make(row("one_hot/4", {"one_hot"}, {}, [](const V& in) { return of::one_hot(in[0], 4); },
                              [](const R& in) {
                                Shape s = in[0].shape;
                                s.push_back(4);
                                Ref out(s);
                                for (int64_t i = 0; i < in[0].numel(); ++i) out.v[i * 4 + int64_t(in[0].v[i])] = 1;
                                return out;
                              }),
                          [](uint64_t) { return V{longs({3, 0, 1, 1, 2, 0}, {2, 3})}; }, {0});
      r.grad = false;
      return r;
    }(),
    row("repeat_interleave/int_dim1", {"index_select"}, {{2, 3}},
        [](const V& in) { return in[0].repeat_interleave(2, 1); },
        [](const R& in) { return ref_map(in[0], {2, 6}, [](int64_t d, int64_t i) { return d == 1 ? i / 2 : i; }); }),
    row("repeat_interleave/int_flat", {"index_select"}, {{2, 2}},
        [](const V& in) { return of::repeat_interleave(in[0], 3); },
        [](const R& in) {
          Ref out({12});
          for (int64_t i = 0; i < 12; ++i) out.v[i] = in[0].v[i / 3];
          return out;
        }),
    with_make(row("repeat_interleave/tensor_dim0", {"index_select"}, {},
                  [](const V& in) { return of::repeat_interleave(in[0], in[1], 0); },
                  [](const R& in) {
                    std::vector<int64_t> src;
                    for (int64_t i = 0; i < 3; ++i)
                      for (int64_t r = 0; r < int64_t(in[1].v[i]); ++r) src.push_back(i);
                    Ref out({int64_t(src.size()), 2});
                    for (int64_t i = 0; i < out.numel(); ++i) out.v[i] = in[0].v[src[i / 2] * 2 + i % 2];
                    return out;
                  }),
              [](uint64_t s) { return V{uniform({3, 2}, s), longs({2, 0, 3}, {3})}; }, {1}),
    with_make(row("sort/desc_dim1", {"sort", "scatter"}, {},
                  [](const V& in) { return std::get<0>(of::sort(in[0], 1, true)); },
                  [](const R& in) { return ref_sort(in[0], 1, true).first; }),
              [](uint64_t s) { return V{distinct({3, 5}, s)}; }, {}),
    with_make(row("sort/asc_dim0", {"sort", "scatter"}, {},
                  [](const V& in) { return std::get<0>(in[0].sort(0)); },
                  [](const R& in) { return ref_sort(in[0], 0, false).first; }),
              [](uint64_t s) { return V{distinct({4, 3}, s)}; }, {}),
    with_make(row("topk/largest_dim1", {"topk", "scatter"}, {},
                  [](const V& in) { return std::get<0>(of::topk(in[0], 3, 1)); },
                  [](const R& in) { return ref_sort(in[0], 1, true, 3).first; }),
              [](uint64_t s) { return V{distinct({4, 6}, s)}; }, {}),
    with_make(row("topk/smallest_dim0", {"topk", "scatter"}, {},
                  [](const V& in) { return std::get<0>(in[0].topk(2, 0, false)); },
                  [](const R& in) { return ref_sort(in[0], 0, false, 2).first; }),
              [](uint64_t s) { return V{distinct({5, 3}, s)}; }, {}),
    with_make(row("embedding/int64", {"embedding", "index_add"}, {},
                  [](const V& in) { return of::embedding(in[0], in[1]); },
                  [](const R& in) { return ref_embedding(in[0], in[1]); }),
              [](uint64_t s) { return V{uniform({5, 3}, s), longs({4, 0, 4, 2, 1, 4}, {2, 3})}; }, {1}),
    with_make(row("embedding/int32_1d", {"embedding", "index_add"}, {},
                  [](const V& in) { return of::embedding(in[0], in[1]); },
                  [](const R& in) { return ref_embedding(in[0], in[1]); }),
              [](uint64_t s) {
                return V{uniform({4, 2}, s), of::tensor(std::vector<int32_t>{3, 3, 0}, {3})};
              },
              {1}),
});
// clang-format on

// ---------------------------------------------------------------- plain tests

namespace {
std::vector<int64_t> L(const T& t) { return t.to_vector<int64_t>(); }
std::vector<double> D(const T& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("index: nonzero") {
  T x = of::tensor(std::vector<double>{0, 1.5, 0, -2, 0, 3}, {2, 3});
  T nz = of::nonzero(x);
  CHECK(nz.dtype() == of::kInt64);
  CHECK(nz.sizes().vec() == std::vector<int64_t>{3, 2});
  CHECK(L(nz) == std::vector<int64_t>{0, 1, 1, 0, 1, 2});
  CHECK(L(x.t().nonzero()) == std::vector<int64_t>{0, 1, 1, 0, 2, 1});  // non-contiguous input
  CHECK(of::nonzero(of::zeros({4, 2})).sizes().vec() == std::vector<int64_t>{0, 2});
  T b = of::tensor(std::vector<bool>{false, true, true});
  CHECK(L(b.nonzero()) == std::vector<int64_t>{1, 2});
  CHECK(of::nonzero(of::scalar_tensor(3.0)).sizes().vec() == std::vector<int64_t>{1, 0});
  CHECK(of::find_op("nonzero").has(of::kSyncsHost));
  CHECK(of::find_op("masked_select").has(of::kSyncsHost));
}

TEST_CASE("index: sort is stable, argsort, indices") {
  T x = of::tensor(std::vector<double>{3, 1, 2, 1, 3, 0}, {6});
  auto [v, i] = of::sort(x);
  CHECK(D(v) == std::vector<double>{0, 1, 1, 2, 3, 3});
  CHECK(L(i) == std::vector<int64_t>{5, 1, 3, 2, 0, 4});
  auto [vd, id] = x.sort(0, true);
  CHECK(D(vd) == std::vector<double>{3, 3, 2, 1, 1, 0});
  CHECK(L(id) == std::vector<int64_t>{0, 4, 2, 1, 3, 5});
  CHECK(L(of::argsort(x)) == L(i));
  // NaN sorts as the largest value
  T n = of::tensor(std::vector<double>{2, NAN, -1});
  CHECK(L(of::argsort(n)) == std::vector<int64_t>{2, 0, 1});
  CHECK(L(of::argsort(n, 0, true)) == std::vector<int64_t>{1, 0, 2});
  // int dtype, 2-D along dim 0
  T m = of::tensor(std::vector<int64_t>{5, 1, 2, 7, 0, 9}, {3, 2});
  auto [mv, mi] = of::sort(m, 0);
  CHECK(mv.dtype() == of::kInt64);
  CHECK(L(mv) == std::vector<int64_t>{0, 1, 2, 7, 5, 9});
  CHECK(L(mi) == std::vector<int64_t>{2, 0, 1, 1, 0, 2});
  // empty and 0-d
  auto [ev, ei] = of::sort(of::zeros({0, 3}), 0);
  CHECK(ev.sizes().vec() == std::vector<int64_t>{0, 3});
  auto [zv, zi] = of::sort(of::scalar_tensor(4.0));
  CHECK(zv.dim() == 0);
  CHECK(zv.item<float>() == 4.0f);
  CHECK(zi.item<int64_t>() == 0);
}

TEST_CASE("index: topk indices and gradient") {
  T x = of::tensor(std::vector<double>{1, 5, 3, 5, 0, 2, 8, 4}, {2, 4});
  auto [v, i] = of::topk(x, 2);
  CHECK(D(v) == std::vector<double>{5, 5, 8, 4});
  CHECK(L(i) == std::vector<int64_t>{1, 3, 2, 3});
  auto [sv, si] = x.topk(1, 0, false);
  CHECK(D(sv) == std::vector<double>{0, 2, 3, 4});
  CHECK(L(si) == std::vector<int64_t>{1, 1, 0, 1});
  T xg = x.clone().set_requires_grad(true);
  std::get<0>(xg.topk(2)).sum().backward();
  CHECK(D(xg.grad()) == std::vector<double>{0, 1, 0, 1, 0, 0, 1, 1});
  auto [kv, ki] = of::topk(x, 0);
  CHECK(kv.sizes().vec() == std::vector<int64_t>{2, 0});
}

TEST_CASE("index: one_hot") {
  T c = of::tensor(std::vector<int64_t>{0, 2, 1, 2}, {2, 2});
  T oh = of::one_hot(c);
  CHECK(oh.dtype() == of::kInt64);
  CHECK(oh.sizes().vec() == std::vector<int64_t>{2, 2, 3});
  CHECK(L(oh) == std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1});
  CHECK(of::one_hot(c, 5).sizes().vec() == std::vector<int64_t>{2, 2, 5});
  CHECK(of::one_hot(of::zeros({0}, of::kInt64), 4).sizes().vec() == std::vector<int64_t>{0, 4});
  CHECK(th::throws_with(
      [&] {
        of::one_hot(of::tensor(std::vector<int64_t>{1, -1}));
      },
      {"[one_hot]", "non-negative"}));
  CHECK(th::throws_with([&] { of::one_hot(c, 2); }, {"[one_hot]", "2", "num_classes"}));
  CHECK(th::throws_with([&] { of::one_hot(c.to(of::kInt32), 3); }, {"[one_hot]", "int32"}));
  CHECK(th::throws_with([&] { of::one_hot(of::zeros({0}, of::kInt64)); }, {"[one_hot]", "empty"}));
}

TEST_CASE("index: int / bool dtype flows and promotion") {
  T a = of::tensor(std::vector<int64_t>{1, 2});
  T b = of::tensor(std::vector<int64_t>{3});
  T c = of::cat({a, b});
  CHECK(c.dtype() == of::kInt64);
  CHECK(L(c) == std::vector<int64_t>{1, 2, 3});
  T f = of::cat({a, of::tensor(std::vector<float>{0.5f})});
  CHECK(f.dtype() == of::kFloat32);
  CHECK(D(f) == std::vector<double>{1, 2, 0.5});
  T i32 = of::tensor(std::vector<int32_t>{7});
  CHECK(of::cat({i32, a}).dtype() == of::kInt64);
  // legacy empty (0,) float tensor still takes part in promotion
  CHECK(of::cat({a, of::zeros({0})}).dtype() == of::kFloat32);
  T m = of::tensor(std::vector<bool>{true, false, false}, {3});
  T fm = of::flip(m, {0});
  CHECK(fm.dtype() == of::kBool);
  CHECK(fm.to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(of::stack({m, m}).sizes().vec() == std::vector<int64_t>{2, 3});
  T ri = of::tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
  CHECK(L(ri.roll({1}, {1})) == std::vector<int64_t>{2, 1, 4, 3});
  CHECK(L(ri.repeat({1, 2})) == std::vector<int64_t>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(L(ri.tril()) == std::vector<int64_t>{1, 0, 3, 4});
  CHECK(L(of::pad(ri, {1, 0}, "constant", 9)) == std::vector<int64_t>{9, 1, 2, 9, 3, 4});
  CHECK(L(of::gather(ri, 1, of::tensor(std::vector<int64_t>{1, 1, 0, 1}, {2, 2}))) ==
        std::vector<int64_t>{2, 2, 3, 4});
  CHECK(L(ri.scatter_add(0, of::tensor(std::vector<int64_t>{1, 1}, {1, 2}), ri)) ==
        std::vector<int64_t>{1, 2, 4, 6});
  CHECK(L(ri.masked_select(ri > 1)) == std::vector<int64_t>{2, 3, 4});
  CHECK(L(ri.repeat_interleave(2)) == std::vector<int64_t>{1, 1, 2, 2, 3, 3, 4, 4});
}

TEST_CASE("index: empty tensors and 0-d inputs") {
  T x = of::ones({3, 4});
  CHECK(of::gather(x, 1, of::zeros({3, 0}, of::kInt64)).sizes().vec() ==
        std::vector<int64_t>{3, 0});
  CHECK(of::index_select(x, 0, of::zeros({0}, of::kInt64)).sizes().vec() ==
        std::vector<int64_t>{0, 4});
  CHECK(of::masked_select(x, x < 0).sizes().vec() == std::vector<int64_t>{0});
  CHECK(of::cat({x, of::zeros({0, 4})}).sizes().vec() == std::vector<int64_t>{3, 4});
  CHECK(of::cat({of::zeros({0}), of::zeros({0})}).sizes().vec() == std::vector<int64_t>{0});
  CHECK(of::pad(x, {-2, -2}).sizes().vec() == std::vector<int64_t>{3, 0});
  CHECK(of::flip(of::zeros({0, 2}), {0}).numel() == 0);
  CHECK(of::repeat(x, {0, 1}).sizes().vec() == std::vector<int64_t>{0, 4});
  T s = of::scalar_tensor(2.5);
  CHECK(of::flip(s, {}).item<float>() == 2.5f);
  CHECK(of::repeat(s, {3}).sizes().vec() == std::vector<int64_t>{3});
  CHECK(of::index_select(s, 0, of::tensor(std::vector<int64_t>{0})).item<float>() == 2.5f);
  CHECK(of::roll(s, {2}).item<float>() == 2.5f);
  auto ch = of::chunk(of::zeros({0}), 3);
  CHECK(ch.size() == 3);
  CHECK(of::split(of::zeros({0, 2}), 2).size() == 1);
}

TEST_CASE("index: split / chunk / unbind return views") {
  T x = of::arange(10, of::kFloat64).reshape({2, 5});
  auto s = x.split(2, 1);
  REQUIRE(s.size() == 3);
  CHECK(s[2].sizes().vec() == std::vector<int64_t>{2, 1});
  auto c = of::chunk(x, 2, 1);
  REQUIRE(c.size() == 2);
  CHECK(c[0].size(1) == 3);
  CHECK(c[1].size(1) == 2);
  CHECK(of::chunk(of::zeros({5}), 10).size() == 5);
  auto u = x.unbind(0);
  REQUIRE(u.size() == 2);
  CHECK(D(u[1]) == std::vector<double>{5, 6, 7, 8, 9});
  s[0].fill_(-1);  // writes through the view
  CHECK(x.select(1, 0).to_vector<double>() == std::vector<double>{-1, -1});
  CHECK(u[0].data_ptr() == x.data_ptr());
}

TEST_CASE("index: embedding padding_idx and scale_grad_by_freq") {
  T w = of::arange(12, of::kFloat64).reshape({4, 3}).set_requires_grad(true);
  T idx = of::tensor(std::vector<int64_t>{1, 2, 1, 0}, {2, 2});
  T y = of::embedding(w, idx, 1);
  CHECK(y.sizes().vec() == std::vector<int64_t>{2, 2, 3});
  CHECK(D(y.select(0, 0).select(0, 1)) == std::vector<double>{6, 7, 8});
  y.sum().backward();
  CHECK(D(w.grad()) == std::vector<double>{1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0});
  T w2 = of::ones({4, 3}, of::kFloat64).set_requires_grad(true);
  of::embedding(w2, idx, -1, true).sum().backward();
  CHECK(D(w2.grad()) == std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0});
}

TEST_CASE("index: large inputs are deterministic across thread counts") {
  const int64_t n = 300000;
  (void)of::find_op("gather");  // builds the op table (random factories need it)
  of::manual_seed(3);
  T x = of::randn({n / 100, 100}, of::kFloat32);
  T idx = of::randint(0, 50, {n / 100 * 3}, of::kInt64);
  T src = of::randn({n / 100 * 3, 100}, of::kFloat32);
  T gidx = of::randint(0, 100, {n / 100, 100}, of::kInt64);
  int prev = of::get_num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 4}) {
    of::set_num_threads(threads);
    std::vector<float> r;
    auto add = [&](const T& t) {
      auto v = t.to_vector<float>();
      r.insert(r.end(), v.begin(), v.end());
    };
    add(of::zeros({50, 100}).index_add(0, idx, src));
    add(of::scatter_add(of::zeros({50, 100}), 0, gidx.narrow(0, 0, 50).remainder(50),
                        x.narrow(0, 0, 50)));
    add(x.gather(1, gidx));
    add(std::get<0>(x.sort(0)));
    add(of::pad(x, {3, 3, 1, 1}, "reflect"));
    results.push_back(r);
  }
  of::set_num_threads(prev);
  CHECK(results[0] == results[1]);
  // gather matches a plain loop
  T g = x.gather(1, gidx);
  auto xv = x.to_vector<float>(), gv = g.to_vector<float>();
  auto iv = gidx.to_vector<int64_t>();
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= gv[i] == xv[(i / 100) * 100 + iv[i]];
  CHECK(ok);
}

TEST_CASE("index: errors name the op and the offending values") {
  T x = of::zeros({3, 5});
  T i64 = of::tensor(std::vector<int64_t>{0, 7, 1}, {3, 1});
  CHECK(th::throws_with([&] { of::gather(x, 1, i64); },
                        {"[gather]", "index 7 is out of bounds for dimension 1 with size 5"}));
  CHECK(th::throws_with([&] { of::gather(x, 1, -i64); }, {"[gather]", "index -7"}));
  CHECK(th::throws_with([&] { of::gather(x, 2, i64); }, {"[gather]", "dimension out of range"}));
  CHECK(th::throws_with([&] { of::gather(x, 1, i64.to(of::kInt32)); },
                        {"[gather]", "int64", "int32"}));
  CHECK(th::throws_with([&] { of::gather(x, 1, i64.to(of::kFloat32)); }, {"[gather]", "float32"}));
  CHECK(th::throws_with(
      [&] {
        of::scatter(x, 1, i64, of::ones({3, 1}));
      },
      {"[scatter]", "index 7"}));
  CHECK(th::throws_with(
      [&] {
        of::scatter(x, 1, i64.clamp(0, 4), of::ones({3, 1}, of::kInt64));
      },
      {"[scatter]", "dtype"}));
  CHECK(th::throws_with(
      [&] {
        of::scatter_add(x, 0, i64, of::ones({3, 1}));
      },
      {"[scatter_add]", "index 7 is out of bounds for dimension 0 with size 3"}));
  CHECK(th::throws_with([&] { of::index_select(x, 0, of::tensor(std::vector<int64_t>{3})); },
                        {"[index_select]", "index 3", "size 3"}));
  CHECK(th::throws_with(
      [&] {
        of::index_select(x, 0, of::zeros({2, 2}, of::kInt64));
      },
      {"[index_select]", "1-D"}));
  CHECK(th::throws_with(
      [&] {
        of::index_add(x, 1, of::tensor(std::vector<int64_t>{0}), of::ones({3, 2}));
      },
      {"[index_add]", "(3, 2)"}));
  CHECK(th::throws_with(
      [&] {
        of::cat({x, of::zeros({2, 4})}, 0);
      },
      {"[cat]", "dimension 0", "expected size 5 but got size 4", "tensor number 1"}));
  CHECK(th::throws_with(
      [&] {
        of::cat({x, of::zeros({5})}, 0);
      },
      {"[cat]", "same number of dimensions"}));
  CHECK(th::throws_with([&] { of::cat({}, 0); }, {"[cat]", "non-empty"}));
  CHECK(th::throws_with([&] { of::cat({x}, 3); }, {"[cat]", "dimension out of range"}));
  CHECK(th::throws_with([&] { of::cat({of::scalar_tensor(1.0)}); }, {"[cat]", "zero-dimensional"}));
  CHECK(th::throws_with(
      [&] {
        of::stack({x, of::zeros({3, 4})});
      },
      {"[stack]", "(3, 5)", "(3, 4)"}));
  CHECK(th::throws_with([&] { of::chunk(x, 0); }, {"[chunk]", "greater than 0"}));
  CHECK(th::throws_with([&] { of::split(x, 0); }, {"[split]", "positive"}));
  CHECK(th::throws_with([&] { of::split(x, {1, 1}); }, {"[split]", "sum to"}));
  CHECK(th::throws_with([&] { of::topk(x, 6); }, {"[topk]", "k (6)", "size 5"}));
  CHECK(th::throws_with(
      [&] {
        of::pad(x, {5, 0}, "reflect");
      },
      {"[pad]", "reflect", "(5, 0)", "size 5"}));
  CHECK(th::throws_with([&] { of::pad(x, {1}); }, {"[pad]", "divisible by 2"}));
  CHECK(th::throws_with([&] { of::pad(x, {1, 1, 1, 1, 1, 1}); }, {"[pad]", "too large"}));
  CHECK(th::throws_with([&] { of::pad(x, {1, 1}, "wrap"); }, {"[pad]", "wrap"}));
  CHECK(th::throws_with([&] { of::pad(x, {-4, -4}); }, {"[pad]", "negative"}));
  CHECK(th::throws_with([&] { of::repeat(x, {2}); }, {"[repeat]", "can not be smaller"}));
  CHECK(th::throws_with([&] { of::tril(of::zeros({3})); }, {"[tril]", "at least 2 dimensions"}));
  CHECK(th::throws_with([&] { of::flip(x, {0, -2}); }, {"[flip]", "multiple times"}));
  CHECK(th::throws_with([&] { of::roll(x, {1, 2}); }, {"[roll]"}));
  CHECK(th::throws_with([&] { of::roll(x, {1}, {0, 1}); }, {"[roll]", "align"}));
  CHECK(th::throws_with([&] { of::embedding(x, of::tensor(std::vector<int64_t>{3})); },
                        {"[embedding]", "index 3", "(3, 5)"}));
  CHECK(th::throws_with([&] { of::embedding(x, of::zeros({2})); }, {"[embedding]", "float32"}));
  CHECK(th::throws_with([&] { of::masked_select(x, x); }, {"[masked_select]", "bool"}));
  CHECK(th::throws_with(
      [&] {
        of::repeat_interleave(x, of::tensor(std::vector<int64_t>{1, 2}), 0);
      },
      {"[repeat_interleave]", "size"}));
  CHECK(th::throws_with([&] { of::take_along_dim(x, of::zeros({3}, of::kInt64), 0); },
                        {"[take_along_dim]", "same number of dimensions"}));
}

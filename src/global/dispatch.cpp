// global/dispatch.cpp: ops on global tensors (NOTE [SBP rules] in op_def.h).
// The op's meta is inferred on the logical shapes; a signature is chosen per mesh axis; inputs
// in another SBP are boxed (differentiable boxing ops, so autograd sees them); the op runs on
// the local pieces through the ordinary dispatch (no autograd there); the outputs are wrapped
// as global tensors and the op is recorded for autograd on the global tensors, so its VJP
// runs on global tensors too.
#include "global/global.h"
#include "global/rules.h"

#include "autograd/node.h"
#include "ops/reduce_common.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>

namespace oneflow {
namespace global {
namespace {

// Bytes a rank moves to convert a tensor of T bytes over p ranks (ARCHITECTURE.md's costs).
double box_cost(Sbp from, Sbp to, double T, double p) {
  if (from == to || p == 1) return 0;
  if (from.is_broadcast()) return to.is_partial_sum() ? 1e-3 * T : 0;  // a slice or zeros
  if (to.is_partial_sum()) return 1e-3 * T;                            // S -> P: local zeros
  if (from.is_split() && to.is_split()) return T * (p - 1) / p;
  if (from.is_partial_sum() && to.is_broadcast()) return 2 * T * (p - 1);
  return T * (p - 1);  // S -> B, P -> S
}

void signatures_of(const SbpRuleCtx& c, std::vector<SbpSig>& sigs) {
  const OpDef& op = c.op;
  if (op.sbp_rule && op.sbp_rule->signatures) {
    op.sbp_rule->signatures(c, sigs);
  } else if (op.has(kElementwise) && !op.has(kRandom)) {
    sbp_rules::elementwise_signatures(c, sigs);
  } else if (op.has(kReduction) && reduce_detail::has_reduction_attrs(op)) {
    // its attributes lead with the reduced dims (or one dim) and keepdim, which this rule reads
    sbp_rules::reduction_signatures(c, sigs, false);
  } else {
    // no rule and no trait default: running on gathered whole values would be a silent guess
    // (wrong for views and writes), so the op refuses; its row names kWholeValues where it is right
    std::string got;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      if (c.inputs[i].defined() && c.inputs[i].is_global())
        got += fmt::format("{}input {} {} {}", got.empty() ? "" : ", ", i,
                           shape_str(c.inputs[i].sizes()), sbp_str(c.inputs[i].sbp()));
    fail(
        "[{}] has no SBP rule, so it cannot run on global tensors (got {}): convert its inputs "
        "with to_local(), or give the op a rule (NOTE [SBP rules])",
        op.name, got);
  }
  for (const SbpSig& s : sigs)
    if (s.in.size() != c.inputs.size() || s.out.size() != c.metas.size())
      fail("[{}] internal error: an SBP signature with {} inputs and {} outputs for {} and {}",
           op.name, s.in.size(), s.out.size(), c.inputs.size(), c.metas.size());
}

// The signature for mesh axis `a`: the first exact match of the inputs' SBPs, else the least
// bytes moved.
const SbpSig& choose(const std::vector<SbpSig>& sigs, const TensorList& inputs, size_t a,
                     int64_t p) {
  for (const SbpSig& s : sigs) {
    bool exact = true;
    for (size_t i = 0; i < inputs.size() && exact; ++i)
      exact = !inputs[i].defined() || inputs[i].impl()->global->sbp[a] == s.in[i];
    if (exact) return s;
  }
  const SbpSig* best = nullptr;
  double best_cost = 0;
  for (const SbpSig& s : sigs) {
    double cost = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined()) continue;
      const Sbp cur = inputs[i].impl()->global->sbp[a];
      cost += box_cost(cur, s.in[i], double(inputs[i].nbytes()), double(p));
    }
    if (!best || cost < best_cost) {
      best = &s;
      best_cost = cost;
    }
  }
  return *best;
}

// NOTE [Divergence check]: with OF_GLOBAL_CHECK=1 every global op first all-gathers a
// fingerprint over its placement's ranks: the op's sequence number on this process, its name,
// attrs, and each input's dtype, logical shape and SBP. Ranks that run a different op, or the
// same op on other shapes or SBPs, would otherwise meet in mismatched collectives (a hang
// until the watchdog, or silently wrong sums); with the check every rank raises an of::Error
// naming the op and sequence number of each rank that differs, before any of the op's
// collectives. It costs one small all-gather per global op (off by default).
bool divergence_check_on() {
  static const bool on = [] {
    const char* e = std::getenv("OF_GLOBAL_CHECK");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

uint64_t g_global_op_seq = 0;  // global ops dispatched by this process (the main thread's)

struct Fingerprint {
  uint64_t hash = 0, seq = 0;
  char name[48] = {};
};

uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

std::string op_signature_str(const OpDef& op, const TensorList& inputs) {
  std::string s = op.name + "(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s += ", ";
    const Tensor& t = inputs[i];
    if (!t.defined()) s += "undefined";
    else if (!t.is_global())
      s += fmt::format("local {} {}", dtype_name(t.dtype()), shape_str(t.sizes()));
    else
      s += fmt::format("{} {} {}", dtype_name(t.dtype()), shape_str(t.sizes()),
                       sbp_str(t.impl()->global->sbp));
  }
  return s + ")";
}

void check_divergence(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                      const Placement& place, uint64_t seq) {
  Fingerprint mine;
  mine.seq = seq;
  std::snprintf(mine.name, sizeof mine.name, "%s", op.name.c_str());
  uint64_t h = 1469598103934665603ull;
  h = fnv(h, op.name.data(), op.name.size());
  const uint64_t ah = hash_attrs(attrs);
  h = fnv(h, &ah, sizeof ah);
  for (const Tensor& t : inputs) {
    const int64_t tag = !t.defined()    ? -1
                        : t.is_global() ? int64_t(t.dtype())
                                        : 1000 + int64_t(t.dtype());
    h = fnv(h, &tag, sizeof tag);
    if (!t.defined()) continue;
    for (int64_t d : t.sizes()) h = fnv(h, &d, sizeof d);
    if (t.is_global()) {
      const std::string sb = sbp_str(t.impl()->global->sbp);
      h = fnv(h, sb.data(), sb.size());
    }
  }
  h = fnv(h, &seq, sizeof seq);
  mine.hash = h;
  Communicator& comm = placement_comm(place);
  const int n = comm.size();
  std::vector<Fingerprint> all(static_cast<size_t>(n));
  comm.allgatherv(&mine, all.data(), std::vector<int64_t>(size_t(n), int64_t(sizeof(Fingerprint))));
  std::string diff;
  for (int r = 0; r < n; ++r)
    if (all[size_t(r)].hash != all[0].hash) {
      diff = "differ";
      break;
    }
  if (diff.empty()) return;
  diff.clear();
  for (int r = 0; r < n; ++r) {
    const Fingerprint& f = all[size_t(r)];
    diff +=
        fmt::format("{}rank {}: op #{} '{}'{}", diff.empty() ? "" : "; ", place.ranks()[size_t(r)],
                    f.seq, std::string(f.name, strnlen(f.name, sizeof f.name)),
                    f.hash == mine.hash ? "" : " (differs from this rank)");
  }
  fail(
      "[{}] global op #{} diverged across the ranks of {} (OF_GLOBAL_CHECK): this rank runs {}; "
      "{}",
      op.name, seq, place.str(), op_signature_str(op, inputs), diff);
}

// NOTE [Signature cache]: an op's logical metas and the SBPs chosen per mesh axis depend only
// on the op, its attrs, the placement and each input's dtype, logical geometry and SBP; the
// steps of a training loop repeat them. They are cached per thread under exactly that key
// (compared in full, not by hash alone). Ops that read tensor data to know their shapes
// (kSyncsHost) are not cached, and a call that raises stores nothing.
struct InputKey {
  bool defined = false, wrapped = false;
  ScalarType dtype = kFloat32;
  DimVector sizes, strides;
  int64_t offset = 0;
  NdSbp sbp;
  bool operator==(const InputKey& o) const {
    return defined == o.defined && wrapped == o.wrapped && dtype == o.dtype && sizes == o.sizes &&
           strides == o.strides && offset == o.offset && sbp == o.sbp;
  }
};
struct SigKey {
  const OpDef* op = nullptr;
  Attrs attrs;
  Placement place;
  std::vector<InputKey> in;
  bool operator==(const SigKey& o) const {
    return op == o.op && attrs == o.attrs && place == o.place && in == o.in;
  }
};
struct SigEntry {
  SigKey key;
  MetaList metas;
  std::vector<NdSbp> in_sbp, out_sbp;
};
struct SigCache {
  std::unordered_map<size_t, std::vector<SigEntry>> map;
  size_t entries = 0;
  uint64_t hits = 0, misses = 0;
};
OF_TLS SigCache* t_sig_cache = nullptr;
SigCache& sig_cache() {
  if (!t_sig_cache) t_sig_cache = new SigCache();  // per thread, kept to the thread's end
  return *t_sig_cache;
}
constexpr size_t kSigCacheCapacity = 4096;  // then it starts over (a loop repeats few keys)

size_t key_hash_of(const OpDef& op, const TensorList& inputs, const Attrs& attrs) {
  size_t h = std::hash<const void*>()(&op) ^ (hash_attrs(attrs) * 31);
  for (const Tensor& t : inputs) {
    h = h * 7 + (t.defined() ? 1 : 0);
    if (!t.defined()) continue;
    const TensorImpl* impl = t.impl();
    for (int64_t d : impl->sizes) h = h * 1000003 ^ size_t(d);
    h = h * 31 + size_t(impl->dtype);
    for (const Sbp& b : impl->global->sbp) h = h * 131 + size_t(int(b.kind()) * 64 + b.dim() + 1);
  }
  return h;
}
bool key_matches(const SigKey& k, const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                 const Placement& place) {
  if (k.op != &op || k.in.size() != inputs.size() || !(k.attrs == attrs) || !(k.place == place))
    return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputKey& ik = k.in[i];
    const Tensor& t = inputs[i];
    if (ik.defined != t.defined()) return false;
    if (!ik.defined) continue;
    const TensorImpl* impl = t.impl();
    if (ik.wrapped != impl->is_wrapped_number || ik.dtype != impl->dtype ||
        !(ik.sizes == impl->sizes) || !(ik.strides == impl->strides) || ik.offset != impl->offset ||
        !(ik.sbp == impl->global->sbp))
      return false;
  }
  return true;
}
SigKey make_key(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                const Placement& place) {
  SigKey k{&op, attrs, place, {}};
  for (const Tensor& t : inputs) {
    InputKey ik;
    if (t.defined()) {
      const TensorImpl* impl = t.impl();
      ik = {true,         impl->is_wrapped_number, impl->dtype, impl->sizes, impl->strides,
            impl->offset, impl->global->sbp};
    }
    k.in.push_back(std::move(ik));
  }
  return k;
}

[[noreturn]] void placement_mismatch(const OpDef& op, const TensorList& inputs) {
  std::string what;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    what += fmt::format("{}input {}: {}", what.empty() ? "" : ", ", i,
                        inputs[i].is_global() ? inputs[i].placement().str() : std::string("local"));
  }
  fail("[{}] expected all tensors to be global on the same placement, but got {}", op.name, what);
}

}  // namespace

TensorList global_dispatch(const OpDef& op, TensorList inputs, Attrs attrs, Tensor* out) {
  // 1. one placement; local 0-d tensors (scalars, optimizer step counts) count as broadcast
  const Placement* pl = nullptr;
  for (const Tensor& t : inputs)
    if (t.defined() && t.is_global()) {
      if (!pl) pl = &t.impl()->global->placement;
      else if (*pl != t.impl()->global->placement) placement_mismatch(op, inputs);
    }
  if (out && !out->is_global())
    fail("[{}] the output tensor is local, but the inputs are global on {}", op.name, pl->str());
  if (out && out->impl()->global->placement != *pl) placement_mismatch(op, inputs);
  const Placement place = *pl;
  const uint64_t seq = ++g_global_op_seq;
  // NOTE [Ranks outside a placement]: a rank holding no piece runs the op on handles
  const std::vector<int64_t> coord = coord_in(place, op.name.c_str());
  // (inside of::jit::trace such a call records nothing: the rank's graph has no node for it)
  const bool member = !coord.empty();
  if (member && divergence_check_on()) check_divergence(op, inputs, attrs, place, seq);
  const NdSbp all_b(size_t(place.ndim()), Sbp::broadcast());
  for (Tensor& t : inputs) {
    if (!t.defined() || t.is_global()) continue;
    if (t.dim() != 0 || (place.device_type() == kCPU) != t.is_cpu()) placement_mismatch(op, inputs);
    const bool wrapped = t.impl()->is_wrapped_number;
    t = make_global(t, {}, place, all_b);
    t.impl()->is_wrapped_number = wrapped;
  }
  // 2. logical metadata (errors here come before any communication). Ops whose shapes depend
  // on data read it on the host: they run on broadcast values, whose local pieces are whole.
  // 3. a signature per mesh axis. Both come from the cache when this call repeats an earlier
  // one (NOTE [Signature cache]).
  MetaList metas;
  std::vector<NdSbp> in_sbp(inputs.size()), out_sbp;
  const SigEntry* cached = nullptr;
  size_t key_hash = 0;
  if (!op.has(kSyncsHost)) {
    key_hash = key_hash_of(op, inputs, attrs);
    SigCache& cache = sig_cache();
    auto it = cache.map.find(key_hash);
    if (it != cache.map.end())
      for (const SigEntry& e : it->second)
        if (key_matches(e.key, op, inputs, attrs, place)) {
          cached = &e;
          break;
        }
    if (cached) ++cache.hits;
    else ++cache.misses;
  }
  if (cached) {
    metas = cached->metas;
    in_sbp = cached->in_sbp;
    out_sbp = cached->out_sbp;
  } else if (op.has(kSyncsHost)) {
    if (!member)
      fail(
          "[{}] the result's shape depends on the values of tensors on {}, of which rank {} holds "
          "no piece",
          op.name, place.str(), this_rank());
    for (Tensor& t : inputs)
      if (t.defined() && !(t.impl()->global->sbp == all_b)) t = boxing(t, all_b);
    TensorList local;
    for (const Tensor& t : inputs)
      local.push_back(t.defined() ? t.impl()->global->local : Tensor());
    op.infer_meta(local, attrs, metas);
  } else {
    op.infer_meta(inputs, attrs, metas);
  }
  if (out && !(out->sizes() == IntArrayRef(metas[0].sizes)))
    fail("[{}] output with shape {} doesn't match the result shape {}", op.name,
         shape_str(out->sizes()), shape_str(metas[0].sizes));
  const SbpRuleCtx ctx{op, inputs, attrs, metas};
  if (!cached) {
    std::vector<SbpSig> sigs;
    signatures_of(ctx, sigs);
    out_sbp.assign(metas.size(), NdSbp{});
    for (size_t a = 0; a < size_t(place.ndim()); ++a) {
      const SbpSig& s = choose(sigs, inputs, a, place.hierarchy()[a]);
      for (size_t i = 0; i < inputs.size(); ++i) in_sbp[i].push_back(s.in[i]);
      for (size_t j = 0; j < metas.size(); ++j) out_sbp[j].push_back(s.out[j]);
    }
    if (!op.has(kSyncsHost)) {
      SigCache& cache = sig_cache();
      if (cache.entries >= kSigCacheCapacity) {
        cache.map.clear();
        cache.entries = 0;
      }
      cache.map[key_hash].push_back({make_key(op, inputs, attrs, place), metas, in_sbp, out_sbp});
      ++cache.entries;
    }
  }
  // 4. boxing (differentiable); an in-place op whose target must move computes out of place
  bool out_via_copy = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& t = inputs[i];
    if (!t.defined() || t.impl()->global->sbp == in_sbp[i]) continue;
    if (out && t.is_same(*out)) out_via_copy = true;
    t = boxing(t, in_sbp[i]);
  }
  if (out && !(out_sbp[0] == out->impl()->global->sbp)) out_via_copy = true;
  GradPlan gp = plan_autograd(op, inputs, out_via_copy ? nullptr : out);
  if (!member) {
    // handles out: the same metadata and autograd record as on the ranks that compute
    TensorList outputs;
    for (size_t j = 0; j < metas.size(); ++j)
      outputs.push_back(
          make_handle(metas[j].sizes, metas[j].dtype, metas[j].device, place, out_sbp[j]));
    if (out) outputs[0] = *out;
    if (gp.needs_grad)
      autograd::record(op, inputs, attrs, outputs, gp.snapshot.empty() ? nullptr : &gp.snapshot);
    return outputs;
  }
  // 5. the op on the local pieces
  TensorList local;
  for (const Tensor& t : inputs) local.push_back(t.defined() ? t.impl()->global->local : Tensor());
  std::vector<DimVector> local_sizes;
  for (size_t j = 0; j < metas.size(); ++j)
    local_sizes.push_back(piece_box(metas[j].sizes, out_sbp[j], place, coord).size);
  Attrs local_attrs = attrs;
  if (op.sbp_rule && op.sbp_rule->localize) op.sbp_rule->localize(ctx, local_sizes, local_attrs);
  Tensor local_out;
  if (out && !out_via_copy) local_out = out->impl()->global->local;
  TensorList res;
  {
    NoGradGuard ng;
    res = dispatch(op, std::move(local), std::move(local_attrs),
                   local_out.defined() ? &local_out : nullptr);
  }
  TensorList outputs;
  for (size_t j = 0; j < res.size(); ++j) {
    if (!(res[j].sizes() == IntArrayRef(local_sizes[j])))
      fail("[{}] internal error: under {} output {} has a local piece of shape {}, expected {}",
           op.name, sbp_str(out_sbp[j]), j, shape_str(res[j].sizes()), shape_str(local_sizes[j]));
    Tensor g = make_global(res[j], metas[j].sizes, place, out_sbp[j]);
    if (metas[j].view_of >= 0) {
      const Tensor& base = inputs[size_t(metas[j].view_of)];
      if (!metas[j].strides.empty()) {
        g.impl()->strides = metas[j].strides;
        g.impl()->refresh_contiguous();
      }
      g.impl()->view_base = base.impl()->view_base ? base.impl()->view_base : base.impl_ptr();
    }
    outputs.push_back(std::move(g));
  }
  if (out) {
    if (out_via_copy) {
      NoGradGuard ng;
      Tensor r = boxing(outputs[0], out->impl()->global->sbp);
      out->impl()->global->local.copy_(r.impl()->global->local);
    }
    outputs[0] = *out;
  }
  // 6. autograd on the global tensors
  if (gp.needs_grad)
    autograd::record(op, inputs, attrs, outputs, gp.snapshot.empty() ? nullptr : &gp.snapshot);
  return outputs;
}

}  // namespace global

namespace global {
SignatureCacheStats signature_cache_stats() {
  const SigCache& c = sig_cache();
  return {c.hits, c.misses, c.entries};
}
}  // namespace global

void register_global_ops() {
  global::register_boxing_ops();
  g_global_dispatch_hook = global::global_dispatch;
}

}  // namespace oneflow

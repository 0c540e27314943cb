// boxing.cpp: converting a global tensor between SBPs (collectives on local pieces), the
// differentiable boxing / to_global / to_local ops (the global factories: factories.cpp).
// NOTE [Boxing]: one mesh axis at a time, on that axis' communicator. A change on one axis
// whose later axes are all broadcast is done directly (P->B all-reduce, P->S reduce-scatter,
// S->B all-gather, S(i)->S(j) all-to-all, B->S slice, B->P / S->P local); any other change
// first gathers the changed axes from the last one inwards to broadcast, then distributes
// them outwards to the target. Uneven pieces use the v-collectives; a piece may be empty.
#include <algorithm>
#include <cstring>

#include "autograd/node.h"
#include "global/global.h"
#include "global/meta_check.h"
#include "ops/attr_schema.h"

namespace oneflow {
namespace global {
namespace {

// NOTE [No kernel dispatches]: the conversions below run inside the boxing_axis and
// move_pieces kernels (or eagerly, under no-grad and no recording): their local copies,
// views and fills are the kernel helpers of kernel_support.h, not ops.
Tensor zeros_piece(IntArrayRef sizes, const TensorOptions& o) {
  Tensor t = make_empty(sizes, o.dtype(), o.device());
  kernel_fill(t, 0);
  return t;
}

DimVector front_perm(int64_t nd, int64_t d) {
  DimVector p{d};
  for (int64_t k = 0; k < nd; ++k)
    if (k != d) p.push_back(k);
  return p;
}
DimVector back_perm(int64_t nd, int64_t d) {  // inverse of front_perm
  DimVector p;
  for (int64_t k = 0; k < nd; ++k) p.push_back(k < d ? k + 1 : (k == d ? 0 : k));
  return p;
}
// x row-major with dim d moved to the front (x itself when it already is): a send buffer.
Tensor to_front(const Tensor& x, int64_t d) {
  return kernel_contiguous(d == 0 ? x : kernel_permute(x, front_perm(x.dim(), d)));
}
Tensor from_front(const Tensor& y, int64_t d) {
  return d == 0 ? y : kernel_contiguous(kernel_permute(y, back_perm(y.dim(), d)));
}
int64_t inner_bytes(IntArrayRef shape_front, ScalarType dt) {
  int64_t n = int64_t(itemsize(dt));
  for (size_t k = 1; k < shape_front.size(); ++k) n *= shape_front[k];
  return n;
}
DimVector front_shape(IntArrayRef L, int64_t d) {
  DimVector s{L[size_t(d)]};
  for (size_t k = 0; k < L.size(); ++k)
    if (int64_t(k) != d) s.push_back(L[k]);
  return s;
}

// Reductions of half types run in float32 (MPI has no 16-bit float sum).
bool reduce_via_float(ScalarType t) { return t == kFloat16 || t == kBFloat16; }

Tensor allreduce(Communicator& c, const Tensor& x) {
  if (reduce_via_float(x.dtype()))
    return kernel_cast(allreduce(c, kernel_cast(x, kFloat32)), x.dtype());
  const Tensor src = kernel_contiguous(x);
  Tensor y = empty(x.sizes(), x.options());
  c.allreduce_sum_into(src.data_ptr(), y.data_ptr(), y.numel(), y.dtype());
  return y;
}

Tensor allgather(Communicator& c, const Tensor& x, IntArrayRef L, int64_t d) {
  const int64_t p = c.size();
  Tensor xt = to_front(x, d);
  DimVector fs = front_shape(L, d);
  Tensor recv = empty(fs, x.options());
  const int64_t inner = inner_bytes(fs, x.dtype());
  std::vector<int64_t> bytes;
  for (int64_t r = 0; r < p; ++r) bytes.push_back(balanced_piece(L[size_t(d)], p, r).size * inner);
  c.allgatherv(xt.data_ptr(), recv.data_ptr(), bytes);
  return from_front(recv, d);
}

Tensor reduce_scatter(Communicator& c, const Tensor& x, IntArrayRef L, int64_t d) {
  if (reduce_via_float(x.dtype()))
    return kernel_cast(reduce_scatter(c, kernel_cast(x, kFloat32), L, d), x.dtype());
  const int64_t p = c.size();
  Tensor xt = to_front(x, d);
  DimVector fs = front_shape(L, d);
  const int64_t inner = inner_bytes(fs, x.dtype()) / int64_t(itemsize(x.dtype()));
  const Range mine = balanced_piece(L[size_t(d)], p, c.rank());
  fs[0] = mine.size;
  Tensor recv = empty(fs, x.options());
  std::vector<int64_t> counts;
  for (int64_t r = 0; r < p; ++r) counts.push_back(balanced_piece(L[size_t(d)], p, r).size * inner);
  c.reduce_scatterv_sum(xt.data_ptr(), recv.data_ptr(), counts, x.dtype());
  return from_front(recv, d);
}

// The slice [r.start, r.start + r.size) along dim d of a dense row-major tensor of `sizes`
// (item bytes per element) as a strided block.
Communicator::StridedBlock dim_block(IntArrayRef sizes, int64_t d, Range r, int64_t item) {
  int64_t outer = 1, inner = item;
  for (int64_t k = 0; k < d; ++k) outer *= sizes[size_t(k)];
  for (size_t k = size_t(d) + 1; k < sizes.size(); ++k) inner *= sizes[k];
  Communicator::StridedBlock b;
  b.offset = r.start * inner;
  b.rows = r.size ? outer : 0;
  b.row_bytes = r.size * inner;
  b.stride = sizes[size_t(d)] * inner;
  if (b.rows == 0 || b.row_bytes == 0) b = {};
  return b;
}

// S(i) -> S(j): this rank sends the slice of its piece along j that peer q keeps, and receives
// peer q's rows along i into the slice of its new piece along i; both are strided blocks of the
// dense tensors themselves (NOTE [Strided all-to-all]), so nothing is staged in between.
Tensor all_to_all(Communicator& c, const Tensor& x, IntArrayRef L, int64_t i, int64_t j) {
  const int64_t p = c.size(), me = c.rank();
  const int64_t item = int64_t(itemsize(x.dtype()));
  const Tensor src = kernel_contiguous(x);
  DimVector os(L.begin(), L.end());
  os[size_t(j)] = balanced_piece(L[size_t(j)], p, me).size;
  Tensor out = empty(os, x.options());
  std::vector<Communicator::StridedBlock> send, recv;
  for (int64_t q = 0; q < p; ++q) {
    send.push_back(dim_block(src.sizes(), j, balanced_piece(L[size_t(j)], p, q), item));
    recv.push_back(dim_block(os, i, balanced_piece(L[size_t(i)], p, q), item));
  }
  c.alltoall_blocks(src.data_ptr(), send, out.data_ptr(), recv);
  return out;
}

// One mesh axis: x is this rank's piece, under `from`, of a tensor of shape L on communicator c.
Tensor box_1d(Communicator& c, const Tensor& x, IntArrayRef L, Sbp from, Sbp to) {
  if (from == to) return x;
  const int64_t p = c.size(), me = c.rank();
  if (to.is_broadcast()) {
    if (from.is_partial_sum()) return allreduce(c, x);
    return allgather(c, x, L, from.dim());
  }
  if (to.is_split()) {
    const int64_t d = to.dim();
    if (from.is_partial_sum()) return reduce_scatter(c, x, L, d);
    if (from.is_broadcast()) {
      const Range r = balanced_piece(L[size_t(d)], p, me);
      return kernel_contiguous(kernel_narrow(x, d, r.start, r.size));
    }
    return all_to_all(c, x, L, from.dim(), d);
  }
  // to partial sum: the first rank keeps the value, or every rank its piece among zeros
  if (from.is_broadcast()) return me == 0 ? kernel_cast(x, x.dtype()) : zeros_piece(L, x.options());
  Tensor out = zeros_piece(L, x.options());
  const Range r = balanced_piece(L[size_t(from.dim())], p, me);
  kernel_copy_into(kernel_narrow(out, from.dim(), r.start, r.size), x);
  return out;
}

// The shape of the tensor whose piece axis `a` holds: `logical` after the axes before `a`.
DimVector axis_shape(IntArrayRef logical, const NdSbp& sbp, const Placement& pl,
                     const std::vector<int64_t>& coord, size_t a) {
  NdSbp before = sbp;
  for (size_t k = a; k < before.size(); ++k) before[k] = Sbp::broadcast();
  return piece_box(logical, before, pl, coord).size;
}

}  // namespace

namespace {
// The global layer's ops (NOTE [Attribute schemas]): a placement's ranks, mesh shape and device
// ("cpu" / "cuda") first, then what the op converts; SBPs as codes (code_of), a list per mesh
// axis. move_pieces' dtype is a ScalarType's integer value.
using PlacementAttrs =
    AttrSchema<Attr<"ranks", DimVector>, Attr<"hierarchy", DimVector>, Attr<"device", std::string>>;
using GlobalAttrs = PlacementAttrs::with<Attr<"sbp", DimVector>, Attr<"logical", DimVector>>;
using BoxingAttrs = PlacementAttrs::with<Attr<"from", DimVector>, Attr<"logical", DimVector>>;
using BoxAxisAttrs = PlacementAttrs::with<Attr<"axis", int64_t>, Attr<"shape", DimVector>,
                                          Attr<"from", int64_t>, Attr<"to", int64_t>>;
using MovePiecesAttrs =
    BoxingAttrs::with<Attr<"to_ranks", DimVector>, Attr<"to_hierarchy", DimVector>,
                      Attr<"to", DimVector>, Attr<"dtype", int64_t>,
                      Attr<"piece_device", std::string>>;
static_assert(GlobalAttrs::index<"sbp">() == BoxingAttrs::index<"from">() &&
              GlobalAttrs::index<"logical">() == BoxingAttrs::index<"logical">());

Placement placement_of(const DimVector& r, const DimVector& h, const std::string& device);
// The placement of the attrs' first three fields.
Placement placement_from(const Attrs& a) {
  return placement_of(PlacementAttrs::get<"ranks">(a), PlacementAttrs::get<"hierarchy">(a),
                      PlacementAttrs::get<"device">(a));
}

// SBPs as integers in attrs: -1 B, -2 P, d >= 0 S(d).
int64_t code_of(Sbp s) { return s.is_split() ? s.dim() : (s.is_broadcast() ? -1 : -2); }
Sbp sbp_of_code(int64_t c) {
  return c >= 0 ? Sbp::split(c) : (c == -1 ? Sbp::broadcast() : Sbp::partial_sum());
}
// A placement's fields as attrs (PlacementAttrs): its ranks, its mesh shape, its device.
DimVector ranks_attr(const Placement& pl) {
  return DimVector(pl.ranks().begin(), pl.ranks().end());
}
DimVector mesh_attr(const Placement& pl) {
  return DimVector(pl.hierarchy().begin(), pl.hierarchy().end());
}
std::string device_attr(const Placement& pl) { return pl.device_type() == kCPU ? "cpu" : "cuda"; }

// NOTE [Traced boxing]: while a step of global tensors is recorded (of::jit::trace), each
// one-axis conversion runs as this op, so that the recorder sees it: a node whose kernel runs
// the collective on the axis' communicator, replayed in the recorded order on every rank (every
// rank records the same program, so the same collectives in the same order). Eagerly the
// conversion is called directly. Attrs: the placement (ranks, mesh shape, device), the mesh
// axis, the shape that axis converts (L), the source and target SBP codes.
void box_axis_meta(const TensorList& in, const Attrs& a, MetaList& out) {
  const Placement pl = placement_from(a);
  const int64_t axis = BoxAxisAttrs::get<"axis">(a);
  DimVector s = BoxAxisAttrs::get<"shape">(a);
  const int64_t to = BoxAxisAttrs::get<"to">(a);
  if (to >= 0) {
    const int64_t p = pl.hierarchy()[size_t(axis)];
    s[size_t(to)] = balanced_piece(s[size_t(to)], p, my_coord(pl, "boxing")[size_t(axis)]).size;
  }
  out.push_back({s, {}, 0, in[0].dtype(), in[0].device()});
}
void box_axis_cpu(const KernelArgs& k) {
  const Placement pl = placement_from(k.attrs);
  using A = BoxAxisAttrs;
  const int64_t axis = A::get<"axis">(k.attrs);
  Tensor y =
      box_1d(axis_data_comm(pl, axis, k.inputs[0].device()), k.inputs[0], A::get<"shape">(k.attrs),
             sbp_of_code(A::get<"from">(k.attrs)), sbp_of_code(A::get<"to">(k.attrs)));
  kernel_copy_into(k.outputs[0], y);
}
const OpDef& box_axis_op() { return OF_OP("boxing_axis"); }
// One mesh axis of a conversion: recorded as boxing_axis while tracing, else run directly.
Tensor box_axis(const Placement& pl, size_t a, const Tensor& x, IntArrayRef shape, Sbp from,
                Sbp to) {
  if (g_tracer && !in_kernel()) {
    Attrs at =
        BoxAxisAttrs::make(ranks_attr(pl), mesh_attr(pl), device_attr(pl), int64_t(a),
                           DimVector(shape.begin(), shape.end()), code_of(from), code_of(to));
    return dispatch1(box_axis_op(), {x}, std::move(at));
  }
  return box_1d(axis_data_comm(pl, int64_t(a), x.device()), x, shape, from, to);
}
}  // namespace

Tensor box_local(const Tensor& local, IntArrayRef logical, const Placement& pl, const NdSbp& from,
                 const NdSbp& to) {
  if (from == to) return local;
  NoGradGuard ng;
  const std::vector<int64_t> coord = my_coord(pl, "boxing");
  const size_t n = from.size();
  size_t first = 0;
  while (from[first] == to[first]) ++first;
  // NOTE [Boxing one axis under later splits]: when only axis `first` changes, later axes that
  // keep their SBP and split dims this conversion neither splits nor gathers only narrow the
  // box it works on: every rank of axis `first`'s group holds the same extent there, and the
  // later pieces stay what they are. Then axis `first` converts alone, on that box (a data-
  // parallel gradient (P, S(0)) -> (B, S(0)) is one all-reduce over the data-axis group, not an
  // all-gather over the tensor axis, the all-reduce and a slice).
  bool direct = true;
  DimVector box = axis_shape(logical, from, pl, coord, first);
  for (size_t a = first + 1; a < n && direct; ++a) {
    if (!(from[a] == to[a])) {
      direct = false;
    } else if (from[a].is_split()) {
      const int64_t e = from[a].dim();
      if ((from[first].is_split() && from[first].dim() == e) ||
          (to[first].is_split() && to[first].dim() == e))
        direct = false;
      else box[size_t(e)] = local.size(e);
    }
  }
  if (direct) return box_axis(pl, first, local, box, from[first], to[first]);
  NdSbp cur = from;
  Tensor x = local;
  for (size_t a = n; a-- > first;) {
    if (cur[a].is_broadcast()) continue;
    x = box_axis(pl, a, x, axis_shape(logical, cur, pl, coord, a), cur[a], Sbp::broadcast());
    cur[a] = Sbp::broadcast();
  }
  for (size_t a = first; a < n; ++a) {
    if (to[a].is_broadcast()) continue;
    x = box_axis(pl, a, x, axis_shape(logical, cur, pl, coord, a), Sbp::broadcast(), to[a]);
    cur[a] = to[a];
  }
  return x;
}

// ---------------------------------------------------------------- the boxing ops

namespace {

// Placement, SBPs and logical sizes travel in attrs: {ranks, mesh shape, device, sbp codes
// (-1 B, -2 P, d >= 0 S(d)), logical sizes}; the boxing op has the source codes in slot 4.
DimVector sbp_codes(const NdSbp& s) {
  DimVector c;
  for (const Sbp& x : s) c.push_back(code_of(x));
  return c;
}
NdSbp sbp_from_codes(IntArrayRef c) {
  NdSbp s;
  for (int64_t x : c) s.push_back(sbp_of_code(x));
  return s;
}
Attrs global_attrs(const Placement& pl, const NdSbp& sbp, IntArrayRef logical) {
  return GlobalAttrs::make(ranks_attr(pl), mesh_attr(pl), device_attr(pl), sbp_codes(sbp),
                           DimVector(logical.begin(), logical.end()));
}
// The placement of ranks `r` in a mesh of shape `h` on `device`.
Placement placement_of(const DimVector& r, const DimVector& h, const std::string& device) {
  std::vector<int> ranks(r.begin(), r.end());
  if (h.size() == 1) return Placement(device, ranks);
  std::vector<std::vector<int>> mesh;
  for (int64_t i = 0; i < h[0]; ++i)
    mesh.emplace_back(ranks.begin() + i * h[1], ranks.begin() + (i + 1) * h[1]);
  return Placement(device, mesh);
}

// The SBP a gradient takes (NOTE [Boxing gradients] in docs/GLOBAL.md): the gradient of a
// broadcast value is a partial sum and that of a partial sum is broadcast; splits stay.
NdSbp dual(const NdSbp& s) {
  NdSbp d = s;
  for (Sbp& x : d)
    if (x.is_broadcast()) x = Sbp::partial_sum();
    else if (x.is_partial_sum()) x = Sbp::broadcast();
  return d;
}

[[noreturn]] void direct_call(const char* op) {
  fail("[{}] is run by the global layer (Tensor::to_global / to_local), not dispatched", op);
}

Tensor local_to_global(const Tensor& x, const Placement& pl, const NdSbp& sbp, IntArrayRef logical);
Tensor global_to_local(const Tensor& t);

// NOTE [Boxing gradients]: the gradient of a boxing is the same logical tensor, whatever its
// SBP, so it is passed on as it is; the op that uses it (or a leaf's AccumulateGrad) boxes it
// where it must, which is never more communication than boxing here.
TensorList boxing_vjp(const VjpCtx&, const TensorList& g) { return {g[0]}; }
TensorList to_global_vjp(const VjpCtx& ctx, const TensorList& g) {
  // a local input's gradient is its piece; a rank's copy of a broadcast (or addend of a
  // partial) value gets the whole gradient, as in a single process
  return {global_to_local(
      boxing(g[0], partial_to_broadcast(sbp_from_codes(GlobalAttrs::get<"sbp">(ctx.attrs())))))};
}
TensorList to_local_vjp(const VjpCtx& ctx, const TensorList& g) {
  const Attrs& a = ctx.attrs();
  return {local_to_global(g[0], placement_from(a), dual(sbp_from_codes(GlobalAttrs::get<"sbp">(a))),
                          GlobalAttrs::get<"logical">(a))};
}

const OpDef& boxing_op() { return OF_OP("boxing"); }
const OpDef& to_global_op() { return OF_OP("to_global"); }
const OpDef& to_local_op() { return OF_OP("to_local"); }

void maybe_record(const OpDef& op, const Tensor& in, const Attrs& a, Tensor& out) {
  if (!grad_mode_enabled() || !in.requires_grad() || !is_floating_point(out.dtype())) return;
  TensorList outs{out};
  autograd::record(op, TensorList{in}, a, outs);
  out = outs[0];
}

Tensor local_to_global(const Tensor& x, const Placement& pl, const NdSbp& sbp,
                       IntArrayRef logical) {
  const Box b = piece_box(logical, sbp, pl, my_coord(pl, "to_global"));
  if (!(x.sizes() == IntArrayRef(b.size)))
    fail("[to_global] internal error: a piece of shape {} for logical {} under {}",
         shape_str(x.sizes()), shape_str(logical), sbp_str(sbp));
  Tensor out = make_global(x.detach(), logical, pl, sbp);
  maybe_record(to_global_op(), x, global_attrs(pl, sbp, logical), out);
  return out;
}

Tensor global_to_local(const Tensor& t) {
  const GlobalMeta& m = meta(t);
  if (!holds_piece(m.placement, "to_local")) return m.local.detach();  // a handle: no piece here
  Tensor out = m.local.detach();
  maybe_record(to_local_op(), t, global_attrs(m.placement, m.sbp, t.sizes()), out);
  return out;
}

// The logical sizes of the tensor whose pieces the placement's ranks hold as `x` (one
// all-gather of every rank's shape and dtype; every rank raises the same error on a mismatch).
DimVector logical_sizes(const Tensor& x, const Placement& pl, const NdSbp& sbp) {
  Communicator& c = placement_comm(pl);
  constexpr int64_t kMaxDims = 32;
  const int64_t nd = x.dim();
  std::vector<int64_t> mine(kMaxDims + 2, 0);
  mine[0] = nd <= kMaxDims ? nd : -1;
  mine[1] = int64_t(x.dtype());
  for (int64_t k = 0; k < std::min(nd, kMaxDims); ++k) mine[size_t(k + 2)] = x.size(k);
  if (c.size() == 1) return DimVector(x.sizes().begin(), x.sizes().end());
  std::vector<int64_t> all(mine.size() * size_t(c.size()));
  c.allgatherv(mine.data(), all.data(),
               std::vector<int64_t>(size_t(c.size()), int64_t(mine.size() * sizeof(int64_t))));
  // the world ranks of the communicator's ranks, ascending
  std::vector<int> members = pl.ranks();
  std::sort(members.begin(), members.end());
  auto rec = [&](size_t r) { return all.data() + r * mine.size(); };
  auto shape_of = [&](size_t r) {
    return DimVector(rec(r) + 2, rec(r) + 2 + std::max<int64_t>(rec(r)[0], 0));
  };
  for (size_t r = 0; r < members.size(); ++r) {
    if (rec(r)[0] < 0)
      fail("[to_global] rank {} has a piece of more than {} dims", members[r], kMaxDims);
    if (rec(r)[0] != rec(0)[0] || rec(r)[1] != rec(0)[1])
      fail(
          "[to_global] local pieces differ across ranks: rank {} has {} of dtype {}, rank {} has "
          "{} of dtype {}",
          members[0], shape_str(shape_of(0)), dtype_name(ScalarType(rec(0)[1])), members[r],
          shape_str(shape_of(r)), dtype_name(ScalarType(rec(r)[1])));
  }
  check_sbp("to_global", pl, sbp, nd);
  // each split dim is the sum of the pieces along the axes splitting it (coordinate 0 elsewhere)
  DimVector L = shape_of(0);
  for (int64_t d = 0; d < nd; ++d) {
    bool split = false;
    for (const Sbp& s : sbp) split |= s.is_split() && s.dim() == d;
    if (!split) continue;
    int64_t total = 0;
    for (size_t r = 0; r < members.size(); ++r) {
      std::vector<int64_t> cr = pl.coord_of(members[r]);
      bool on_line = true;
      for (size_t a = 0; a < sbp.size(); ++a)
        if (!(sbp[a].is_split() && sbp[a].dim() == d) && cr[a] != 0) on_line = false;
      if (on_line) total += shape_of(r)[size_t(d)];
    }
    L[size_t(d)] = total;
  }
  for (size_t r = 0; r < members.size(); ++r) {
    const Box b = piece_box(L, sbp, pl, pl.coord_of(members[r]));
    if (!(IntArrayRef(b.size) == IntArrayRef(shape_of(r))))
      fail(
          "[to_global] local pieces of inconsistent shapes under {}: rank {} has {}, but a "
          "logical {} needs {} there (pieces are balanced: the first n % p ranks one larger)",
          sbp_str(sbp), members[r], shape_str(shape_of(r)), shape_str(L), shape_str(b.size));
  }
  return L;
}

}  // namespace

Tensor boxing(const Tensor& t, const NdSbp& to) {
  const GlobalMeta& m = meta(t);
  check_sbp("to_global", m.placement, to, t.dim());
  if (m.sbp == to) return t;
  Tensor out = holds_piece(m.placement, "to_global")
                   ? make_global(box_local(m.local, t.sizes(), m.placement, m.sbp, to), t.sizes(),
                                 m.placement, to)
                   : make_handle(t.sizes(), t.dtype(), t.device(), m.placement, to);
  Attrs a = global_attrs(m.placement, to, t.sizes());
  // the VJP boxes back to the source SBP's dual
  a.values[BoxingAttrs::index<"from">()] = sbp_codes(m.sbp);
  maybe_record(boxing_op(), t, a, out);
  return out;
}

// NOTE [Moving between placements]: to_global onto another placement. Every rank of the source
// and of the target takes part (the others keep handles). The source ranks gather the value to
// broadcast among themselves (the boxing above, on the source's communicators); then each target
// rank's piece under the target SBP comes from one source rank: its own copy when the rank is in
// both placements, else one message (MPI point to point) from the source rank that serves it
// (round robin over the source ranks). Under a partial sum only the first rank of each P axis
// receives the value (the others take zeros), and empty pieces take no message. A rank either
// only sends (source only), only receives (target only) or neither (both), so the messages
// cannot deadlock. The gradient moves back the same way, onto the source placement under the
// source SBP with partial sums made broadcast.
// The box `b` of a whole value (a view).
Tensor box_slice(const Tensor& full, const Box& b) {
  Tensor v = full;
  for (size_t d = 0; d < b.size.size(); ++d)
    if (b.size[d] != full.size(int64_t(d))) v = v.narrow(int64_t(d), b.start[d], b.size[d]);
  return v;
}
// Whether the rank at `coord` holds the value under `sbp`'s partial sums (the first rank of each
// P axis does; the others hold zeros).
bool partial_keeper(const NdSbp& sbp, const std::vector<int64_t>& coord) {
  for (size_t a = 0; a < sbp.size(); ++a)
    if (sbp[a].is_partial_sum() && coord[a] != 0) return false;
  return true;
}

namespace {
constexpr int kMoveTag = 0x6f66;

Tensor move_pieces(const Tensor& local, IntArrayRef L, const Placement& src, const NdSbp& from,
                   bool in_src, const Placement& dst, const NdSbp& to, bool in_dst,
                   const TensorOptions& opts) {
  const int me = this_rank();
  // CPU pieces go over the world's host communicator; CUDA pieces over the NCCL communicator
  // of the ranks taking part (NOTE [Device communicators]), whose ranks are their positions
  // among those ranks
  std::vector<int> taking_part;
  if (!opts.device().is_cpu()) {
    taking_part = src.ranks();
    taking_part.insert(taking_part.end(), dst.ranks().begin(), dst.ranks().end());
    std::sort(taking_part.begin(), taking_part.end());
    taking_part.erase(std::unique(taking_part.begin(), taking_part.end()), taking_part.end());
  }
  Communicator& w = taking_part.empty() ? world() : ranks_data_comm(taking_part, opts.device());
  auto peer = [&](int world_rank) {
    if (taking_part.empty()) return world_rank;
    return int(std::lower_bound(taking_part.begin(), taking_part.end(), world_rank) -
               taking_part.begin());
  };
  // this rank's slice of a full tensor (a view made directly: NOTE [No kernel dispatches])
  auto slice_of = [](const Tensor& full, const Box& b) {
    Tensor v = full;
    for (size_t d = 0; d < b.size.size(); ++d)
      if (b.size[d] != full.size(int64_t(d)))
        v = kernel_narrow(v, int64_t(d), b.start[d], b.size[d]);
    return kernel_contiguous(v);
  };
  Tensor full;
  if (in_src)
    full = kernel_contiguous(box_local(local, L, src, from, NdSbp(from.size(), Sbp::broadcast())));
  const std::vector<int>& sr = src.ranks();
  const std::vector<int>& dr = dst.ranks();
  auto server = [&](size_t k) { return sr[k % sr.size()]; };
  if (in_src) {
    for (size_t k = 0; k < dr.size(); ++k) {
      const int j = dr[k];
      if (src.contains(j) || server(k) != me) continue;
      const std::vector<int64_t> cj = dst.coord_of(j);
      const Box b = piece_box(L, to, dst, cj);
      const Tensor s = slice_of(full, b);
      if (!partial_keeper(to, cj) || s.numel() == 0) continue;
      w.send(s.data_ptr(), int64_t(s.nbytes()), peer(j), kMoveTag);
    }
  }
  if (!in_dst) return Tensor();
  const std::vector<int64_t> c = dst.coord_of(me);
  const Box b = piece_box(L, to, dst, c);
  if (!partial_keeper(to, c)) return zeros_piece(b.size, opts);
  if (in_src) {
    Tensor s = slice_of(full, b);
    return s.is_same(full) && s.numel() ? kernel_cast(s, s.dtype()) : s;
  }
  Tensor r = empty(b.size, opts);
  if (r.numel() == 0) return r;
  size_t k = 0;
  while (dr[k] != me) ++k;
  w.recv(r.data_ptr(), int64_t(r.nbytes()), peer(server(k)), kMoveTag);
  return r;
}

TensorList move_vjp(const VjpCtx& ctx, const TensorList& g) {
  const Attrs& a = ctx.attrs();
  return {move_placement(g[0], placement_from(a),
                         partial_to_broadcast(sbp_from_codes(GlobalAttrs::get<"sbp">(a))))};
}
// A move recorded while tracing (NOTE [Moving between placements], traced): one node on each
// rank of the source or the target, run by the kernel below; the other ranks record nothing.
// Attrs: the source placement, SBP and logical sizes as global_attrs, then the target's ranks,
// mesh shape and SBP codes, the dtype and the pieces' device. A source-only rank's node has an
// empty output nothing reads, so it is kEffect: the passes keep it (the send is its effect).
// A target-only rank's node has no input.
// move_pieces' target placement (on the source's device type)
Placement target_placement(const Attrs& a) {
  return placement_of(MovePiecesAttrs::get<"to_ranks">(a), MovePiecesAttrs::get<"to_hierarchy">(a),
                      MovePiecesAttrs::get<"device">(a));
}
void move_pieces_meta(const TensorList&, const Attrs& a, MetaList& out) {
  using A = MovePiecesAttrs;
  const Placement dst = target_placement(a);
  const std::vector<int64_t> c = coord_in(dst, "to_global");
  DimVector s{0};
  if (!c.empty()) s = piece_box(A::get<"logical">(a), sbp_from_codes(A::get<"to">(a)), dst, c).size;
  out.push_back({s, {}, 0, ScalarType(A::get<"dtype">(a)), Device(A::get<"piece_device">(a))});
}
void move_pieces_cpu(const KernelArgs& k) {
  const Attrs& a = k.attrs;
  using A = MovePiecesAttrs;
  const Placement src = placement_from(a), dst = target_placement(a);
  const bool in_src = holds_piece(src, "to_global"), in_dst = holds_piece(dst, "to_global");
  Tensor p = move_pieces(
      in_src ? k.inputs[0] : Tensor(), A::get<"logical">(a), src, sbp_from_codes(A::get<"from">(a)),
      in_src, dst, sbp_from_codes(A::get<"to">(a)), in_dst,
      TensorOptions(ScalarType(A::get<"dtype">(a))).device(Device(A::get<"piece_device">(a))));
  if (in_dst) kernel_copy_into(k.outputs[0], p);
}
const OpDef& move_pieces_op() { return OF_OP("move_pieces"); }
// This rank's piece of the moved value (empty where the rank is not in the target).
Tensor moved_piece(const Tensor& local, IntArrayRef L, const Placement& src, const NdSbp& from,
                   bool in_src, const Placement& dst, const NdSbp& to, bool in_dst,
                   const TensorOptions& opts) {
  NoGradGuard ng;
  if (!g_tracer || in_kernel())
    return move_pieces(local, L, src, from, in_src, dst, to, in_dst, opts);
  Attrs a =
      MovePiecesAttrs::make(ranks_attr(src), mesh_attr(src), device_attr(src), sbp_codes(from),
                            DimVector(L.begin(), L.end()), ranks_attr(dst), mesh_attr(dst),
                            sbp_codes(to), int64_t(opts.dtype()), opts.device().str());
  TensorList ins;
  if (in_src) ins.push_back(local);
  return dispatch1(move_pieces_op(), std::move(ins), std::move(a));
}

const OpDef& move_op() { return OF_OP("move_placement"); }
}  // namespace

Tensor move_placement(const Tensor& t, const Placement& dst, const NdSbp& to) {
  const GlobalMeta& m = meta(t);
  const Placement src = m.placement;
  check_sbp("to_global", dst, to, t.dim());
  if (src == dst) return boxing(t, to);
  if (src.device_type() != dst.device_type())
    fail("[to_global] moving a tensor from {} to {}: both placements must be on one device type",
         src.str(), dst.str());
  const bool in_src = holds_piece(src, "to_global"), in_dst = holds_piece(dst, "to_global");
  Tensor piece;
  if (in_src || in_dst)
    piece = moved_piece(m.local, t.sizes(), src, m.sbp, in_src, dst, to, in_dst, t.options());
  Tensor out = in_dst ? make_global(piece, t.sizes(), dst, to)
                      : make_handle(t.sizes(), t.dtype(), t.device(), dst, to);
  maybe_record(move_op(), t, global_attrs(src, m.sbp, t.sizes()), out);
  return out;
}

}  // namespace global

// ---------------------------------------------------------------- Tensor methods

Tensor Tensor::to_global(const Placement& placement, const NdSbp& sbp) const {
  check_impl();
  if (g_tracer && !in_kernel() && !is_global())
    fail(
        "[to_global] a local tensor becomes global inside a traced function, which takes an "
        "all-gather of the pieces' shapes that a replay would not repeat: make the inputs "
        "global before the call (x.to_global(...)) and pass them in");
  if (is_global()) {
    const GlobalMeta& m = global::meta(*this);
    // (a conversion to what the tensor already is moves nothing and is not compared: a rank may
    // read a broadcast tensor's value alone)
    if (m.placement != placement || m.sbp != sbp) {
      // the target is checked first (a rank beyond the world, a bad SBP: the error of its own);
      // then the source placement's ranks compare, and the target's (a move: NOTE [Checked
      // global meta])
      global::check_sbp("to_global", placement, sbp, dim());
      (void)global::holds_piece(placement, "to_global");
      const std::vector<global::MetaField> fields{
          {"source placement", m.placement.str()}, {"source SBP", sbp_str(m.sbp)},
          {"logical shape", shape_str(sizes())},   {"dtype", std::string(dtype_name(dtype()))},
          {"placement", placement.str()},          {"SBP", sbp_str(sbp)}};
      global::check_same_meta(fields, global::ranks_of(m.placement));
      if (m.placement != placement) global::check_same_meta(fields, global::ranks_of(placement));
    }
    if (m.placement != placement) return global::move_placement(*this, placement, sbp);
    return global::boxing(*this, sbp);
  }
  if ((placement.device_type() == kCPU) != is_cpu())
    fail("[to_global] a tensor on {} can't be placed on {}", device().str(), placement.str());
  global::check_sbp("to_global", placement, sbp, dim());
  if (!global::holds_piece(placement, "to_global")) {
    // NOTE [Ranks outside a placement]: a rank outside the placement makes a handle; a split's
    // logical size is the sum of pieces it does not see
    for (const Sbp& s : sbp)
      if (s.is_split())
        fail(
            "[to_global] rank {} is not in {} and holds no piece of the {} tensor it makes, "
            "whose logical shape it therefore can't know: make it global where it is held, or "
            "broadcast, and move it with to_global(placement, sbp)",
            global::this_rank(), placement.str(), sbp_str(sbp));
    return global::make_handle(sizes(), dtype(), device(), placement, sbp);
  }
  {
    // a piece's sizes, except along split dims (NOTE [Checked global meta])
    std::string local = "(";
    for (int64_t d = 0; d < dim(); ++d) {
      bool split = false;
      for (const Sbp& s : sbp) split = split || (s.is_split() && s.dim() == d);
      local += (d ? ", " : "") + (split ? std::string("*") : std::to_string(size(d)));
    }
    local += dim() == 1 ? ",)" : ")";
    global::check_same_meta(
        std::vector<global::MetaField>{{"placement", placement.str()},
                                       {"SBP", sbp_str(sbp)},
                                       {"local shape (split dims as *)", local},
                                       {"dtype", std::string(dtype_name(dtype()))}},
        global::ranks_of(placement));
  }
  DimVector L = global::logical_sizes(*this, placement, sbp);
  return global::local_to_global(contiguous(), placement, sbp, L);
}

void Tensor::global_data_ptr_error() {
  fail(
      "[data_ptr] a global tensor's data lives in its ranks' pieces: call to_local() for this "
      "rank's piece, or to_vector() / item() for the logical value");
}

Tensor Tensor::to_local() const {
  check_impl();
  if (!is_global()) return *this;
  return global::global_to_local(*this);
}

Placement Tensor::placement() const {
  if (!is_global()) fail("[placement] the tensor is local: only global tensors have a placement");
  return impl()->global->placement;
}

NdSbp Tensor::sbp() const {
  if (!is_global()) fail("[sbp] the tensor is local: only global tensors have an SBP");
  return impl()->global->sbp;
}

namespace global {
Tensor piece_to_global(const Tensor& piece, const Placement& pl, const NdSbp& sbp,
                       IntArrayRef logical) {
  return local_to_global(piece, pl, sbp, logical);
}

namespace {
TensorList piece_of_vjp(const VjpCtx& ctx, const TensorList& g) {
  const Attrs& a = ctx.attrs();
  return {local_to_global(g[0], placement_from(a), sbp_from_codes(GlobalAttrs::get<"sbp">(a)),
                          GlobalAttrs::get<"logical">(a))};
}
const OpDef& piece_of_op() { return OF_OP("piece_of"); }
}  // namespace

Tensor piece_of(const Tensor& t) {
  const GlobalMeta& m = meta(t);
  for (const Sbp& s : m.sbp)
    if (s.is_partial_sum())
      fail("[piece_of] internal error: {} has a partial-sum axis", sbp_str(m.sbp));
  Tensor out = m.local.detach();
  maybe_record(piece_of_op(), t, global_attrs(m.placement, m.sbp, t.sizes()), out);
  return out;
}

// NOTE [Boxing ops]: the ops of the global layer, in the op table like every op (its checks, the
// README's list, the rows of tests/test_global.cpp): boxing, to_global, to_local, move_placement
// and piece_of are recorded for autograd by the calls above (they are not dispatched: their
// infer_meta says so); boxing_axis and move_pieces are the collectives a traced step records
// and replays (NOTE [Traced boxing]).
void register_boxing_ops() {
  register_op({.name = "boxing_axis",
               .traits = kCollective,
               .attr_names = BoxAxisAttrs::names(),
               .attr_types = BoxAxisAttrs::types(),
               .infer_meta = box_axis_meta,
               .cpu = box_axis_cpu,
               .cuda = box_axis_cpu});  // device-agnostic: the comm follows the piece
  register_op(
      {.name = "boxing",
       .traits = kCollective,
       .attr_names = BoxingAttrs::names(),
       .attr_types = BoxingAttrs::types(),
       .infer_meta = [](const TensorList&, const Attrs&, MetaList&) { direct_call("boxing"); },
       .vjp = boxing_vjp});
  register_op(
      {.name = "to_global",
       .traits = kCollective,
       .attr_names = GlobalAttrs::names(),
       .attr_types = GlobalAttrs::types(),
       .infer_meta = [](const TensorList&, const Attrs&, MetaList&) { direct_call("to_global"); },
       .vjp = to_global_vjp});
  register_op(
      {.name = "to_local",
       .attr_names = GlobalAttrs::names(),
       .attr_types = GlobalAttrs::types(),
       .infer_meta = [](const TensorList&, const Attrs&, MetaList&) { direct_call("to_local"); },
       .vjp = to_local_vjp});
  register_op({.name = "move_pieces",
               .traits = kCollective | kEffect,
               .attr_names = MovePiecesAttrs::names(),
               .attr_types = MovePiecesAttrs::types(),
               .infer_meta = move_pieces_meta,
               .cpu = move_pieces_cpu,
               .cuda = move_pieces_cpu});
  register_op(
      {.name = "move_placement",
       .traits = kCollective,
       .attr_names = GlobalAttrs::names(),
       .attr_types = GlobalAttrs::types(),
       .infer_meta = [](const TensorList&, const Attrs&, MetaList&) { direct_call("to_global"); },
       .vjp = move_vjp});
  register_op(
      {.name = "piece_of",
       .attr_names = GlobalAttrs::names(),
       .attr_types = GlobalAttrs::types(),
       .infer_meta = [](const TensorList&, const Attrs&, MetaList&) { direct_call("piece_of"); },
       .vjp = piece_of_vjp});
}

}  // namespace global

}  // namespace oneflow

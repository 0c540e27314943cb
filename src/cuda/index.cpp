// index.cpp: host side of the CUDA shape and indexing kernels (index.cu): cat, gather,
// scatter/scatter_add, tril/triu, flip, roll, repeat, pad and one_hot, with the CPU kernels'
// attrs, geometry and error messages (src/ops/index.cpp). Operands keep their strides (the
// kernels read any layout); outputs are the dense tensors dispatch allocates.
//
// NOTE [CUDA index checks] (here): on CUDA the op's infer_meta does not read the index (it
// lives on the device), so the kernel checks it before anything is written: one pass finds the
// first out-of-range value in row-major order, as the CPU's check meets it, and the error names
// it with the CPU's message. The check reads 16 bytes back (a host synchronization); inside a
// CUDA Graph capture it sets the graph's index flag instead, as src/cuda/nn.cpp's checks do,
// and the executor raises after the replay when it is set (the ops carry the kChecksIndices trait).
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/index.h"
#include "cuda/dims.h"
#include "cuda/module.h"
#include "cuda/nn.h"
#include "ops/index_attrs.h"

namespace oneflow::cuda_module {
namespace {

// the ops' attribute schemas (ops/index_attrs.h)
using index_detail::DimAttrs;
using index_detail::DimsAttrs;
using index_detail::OneHotAttrs;
using index_detail::PadAttrs;
using index_detail::RollAttrs;
using index_detail::TriAttrs;

// One operand's geometry.
Geometry<1> geometry_of(const Tensor& t, const char* op) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  std::vector<std::array<int64_t, 1>> st;
  for (int64_t d = 0; d < t.dim(); ++d) st.push_back({t.strides()[d]});
  return coalesce<1>(sizes, st, op, kMaxIndexDims);
}

// ---------------------------------------------------------------- index checks

// The first value of `index` (row-major) outside [0, size), if any (see the NOTE above).
std::optional<int64_t> first_bad_index(const Tensor& index, int64_t size, const char* op) {
  if (index.numel() == 0) return std::nullopt;
  OF_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32,
           "[{}] cuda: expected int64 or int32 indices, got {}", op, dtype_name(index.dtype()));
  if (capturing()) {  // NOTE [CUDA Graph capture]: no host read; the executor reads the flag
    int* flag = graph_flag();
    OF_CHECK(flag != nullptr,
             "[{}] cuda: checking the indices synchronizes the host, which a "
             "CUDA Graph capture cannot contain",
             op);
    const Tensor idx = kernel_contiguous(index);
    const int dev = resolve_device(idx.device().index());
    const cudaError_t err =
        launch_index_flag(idx.impl()->raw_data(), idx.dtype() == kInt64, idx.numel(), size, false,
                          0, flag, current_stream_of(dev));
    if (err != cudaSuccess) throw_cuda_error(err, op, __FILE__, __LINE__);
    return std::nullopt;
  }
  const int device = resolve_device(index.device().index());
  DeviceGuard guard(device);
  const Geometry<1> g = geometry_of(index, op);
  IndexCheckParams p;
  p.ndim = int(g.sizes.size());
  p.numel = g.numel;
  for (int d = 0; d < p.ndim; ++d) {
    p.sizes[d] = g.sizes[size_t(d)];
    p.strides[d] = g.strides[size_t(d)][0];
  }
  p.index = index.impl()->raw_data();
  p.index64 = index.dtype() == kInt64;
  p.size = size;
  const Tensor buf = make_empty({2}, kInt64, index.device());
  p.result = static_cast<int64_t*>(buf.impl()->raw_data());
  const cudaStream_t stream = current_stream_of(device);
  OF_CUDA_CHECK(cudaMemsetAsync(p.result, 0xff, 2 * sizeof(int64_t), stream));
  check_launch(launch_first_bad_index(p, stream), op, index.dtype());
  int64_t host[2] = {-1, 0};
  copy_bytes(host, Device(kCPU), p.result, index.device(), sizeof(host));
  if (host[0] == -1) return std::nullopt;
  return host[1];
}

// The CPU's check_bounds: "[op] index v is out of bounds for dimension d with size n".
void check_bounds(const Tensor& index, int64_t size, const char* op, int64_t dim) {
  if (const auto v = first_bad_index(index, size, op))
    fail("[{}] index {} is out of bounds for dimension {} with size {}", op, *v, dim, size);
}

// ---------------------------------------------------------------- remap launches

struct RemapDim {
  int64_t size, dst_stride, src_stride, src_size, arg;
  MapKind kind;
};

// dst = src mapped per dim; identity dims are dropped when of size 1 and merged when both
// operands allow it (the others keep their own dim).
void run_remap(const std::vector<RemapDim>& dims, const void* src, void* dst, ScalarType dtype,
               uint64_t fill_bits, const Tensor& out, const char* op) {
  int64_t numel = 1;
  for (const RemapDim& d : dims) numel *= d.size;
  if (numel == 0) return;
  std::vector<RemapDim> m;
  for (const RemapDim& d : dims) {
    const bool id = d.kind == MapKind::kIdentity;
    if (id && d.size == 1) continue;
    if (id && !m.empty() && m.back().kind == MapKind::kIdentity &&
        m.back().dst_stride == d.dst_stride * d.size &&
        m.back().src_stride == d.src_stride * d.size) {
      m.back().size *= d.size;
      m.back().src_size = m.back().size;
      m.back().dst_stride = d.dst_stride;
      m.back().src_stride = d.src_stride;
      continue;
    }
    m.push_back(d);
  }
  OF_CHECK(m.size() <= size_t(kMaxIndexDims),
           "[{}] cuda: at most {} non-mergeable dims, got shape {}", op, kMaxIndexDims,
           shape_str(out.sizes()));
  RemapParams p;
  p.ndim = int(m.size());
  p.numel = numel;
  for (int d = 0; d < p.ndim; ++d) {
    const RemapDim& r = m[size_t(d)];
    p.sizes[d] = r.size;
    p.dst_strides[d] = r.dst_stride;
    p.src_strides[d] = r.src_stride;
    p.src_sizes[d] = r.src_size;
    p.arg[d] = r.arg;
    p.kind[d] = r.kind;
  }
  p.src = src;
  p.dst = dst;
  p.dtype = dtype;
  p.fill_bits = fill_bits;
  const int device = resolve_device(out.device().index());
  DeviceGuard guard(device);
  check_launch(launch_remap(p, current_stream_of(device)), op, dtype);
}

// Identity dims: dst (a view of the output) = src, both with their strides.
std::vector<RemapDim> identity_dims(const Tensor& dst, const Tensor& src) {
  std::vector<RemapDim> dims;
  for (int64_t d = 0; d < src.dim(); ++d)
    dims.push_back({src.sizes()[d], dst.strides()[d], src.strides()[d], src.sizes()[d], 0,
                    MapKind::kIdentity});
  return dims;
}

// The dense output `out` (x's rank) reading x through per-dim maps; identity to start with.
std::vector<RemapDim> dense_dims(const Tensor& out, const Tensor& x) {
  std::vector<RemapDim> dims;
  for (int64_t d = 0; d < out.dim(); ++d)
    dims.push_back(
        {out.sizes()[d], out.strides()[d], x.strides()[d], x.sizes()[d], 0, MapKind::kIdentity});
  return dims;
}

void copy_into(const Tensor& dst, const Tensor& src, const char* op) {
  run_remap(identity_dims(dst, src), src.impl()->raw_data(), dst.impl()->raw_data(), dst.dtype(), 0,
            dst, op);
}

// ---------------------------------------------------------------- cat

// inputs: the tensors (one dtype, one device); attr dim
void cat_kernel(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  device_of(out, "cat");
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(k.attrs), out.dim(), "cat");
  int64_t off = 0;
  for (const Tensor& t : k.inputs) {
    if (t.numel() > 0) {
      OF_CHECK(t.is_cuda() && t.device() == out.device() && t.dtype() == out.dtype(),
               "[cat] cuda: every input must be a {} tensor on {}, got {} on {}",
               dtype_name(out.dtype()), out.device().str(), dtype_name(t.dtype()),
               t.device().str());
      const Tensor v =
          make_view(out, t.sizes(), out.strides(), out.storage_offset() + off * out.strides()[d]);
      copy_into(v, t, "cat");
    }
    off += t.sizes()[d];
  }
}

// ---------------------------------------------------------------- gather / scatter

// inputs x, index (int64, x's rank, or 0-d/1-element mixes with a 0-d/1-D x); attr dim
void gather_kernel(const KernelArgs& k) {
  const Tensor &x = k.inputs[0], &index = k.inputs[1];
  const Tensor& out = k.outputs[0];
  const int device = device_of(x, "gather");
  DeviceGuard guard(device);
  OF_CHECK(index.dtype() == kInt64, "[gather] expected index to have dtype int64, got {}",
           dtype_name(index.dtype()));
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(k.attrs), x.dim(), "gather");
  check_bounds(index, size_at(x, d), "gather", d);
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> st;
  GatherParams p;
  if (x.dim() != index.dim()) {  // 0-d / 1-element mixes: 1-D geometry, as the CPU kernel
    sizes.push_back(index.numel());
    st.push_back({1, stride_at(index, 0), 0});
    p.dim_size = size_at(x, 0);
    p.dim_stride = stride_at(x, 0);
  } else {
    for (int64_t i = 0; i < index.dim(); ++i) {
      sizes.push_back(index.sizes()[i]);
      st.push_back({out.strides()[i], index.strides()[i], i == d ? 0 : x.strides()[i]});
    }
    p.dim_size = size_at(x, d);
    p.dim_stride = stride_at(x, d);
  }
  const Geometry<3> g = coalesce<3>(sizes, st, "gather", kMaxIndexDims);
  if (g.numel == 0) return;
  p.ndim = int(g.sizes.size());
  p.numel = g.numel;
  for (int i = 0; i < p.ndim; ++i) {
    p.sizes[i] = g.sizes[size_t(i)];
    for (size_t o = 0; o < 3; ++o) p.strides[o][i] = g.strides[size_t(i)][o];
  }
  p.x = x.impl()->raw_data();
  p.index = static_cast<const int64_t*>(index.impl()->raw_data());
  p.out = out.impl()->raw_data();
  p.dtype = x.dtype();
  check_launch(launch_gather(p, current_stream_of(device)), "gather", p.dtype);
}

// inputs self, index (int64), src (self's dtype, all of one rank); attr dim: out = self, then
// out[... index[i] at dim ...] = src[i] (or += for scatter_add) over the index's shape
template <bool Add> void scatter_kernel(const KernelArgs& k) {
  const char* op = Add ? "scatter_add" : "scatter";
  const Tensor &self = k.inputs[0], &index = k.inputs[1], &src = k.inputs[2];
  const Tensor& out = k.outputs[0];
  const int device = device_of(self, op);
  DeviceGuard guard(device);
  OF_CHECK(index.dtype() == kInt64, "[{}] expected index to have dtype int64, got {}", op,
           dtype_name(index.dtype()));
  OF_CHECK(src.dtype() == out.dtype() && index.dim() == out.dim() && src.dim() == out.dim(),
           "[{}] cuda: expected index and src of self's rank and src of self's dtype", op);
  const int64_t d = wrap_dim(DimAttrs::get<"dim">(k.attrs), self.dim(), op);
  check_bounds(index, size_at(self, d), op, d);
  if (out.impl()->raw_data() != self.impl()->raw_data() || !(out.strides() == self.strides()))
    copy_into(out, self, op);
  ScatterParams p;
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> st;
  if (index.dim() > 0) {
    for (int64_t i = 0; i < index.dim(); ++i) {
      if (i == d) continue;
      sizes.push_back(index.sizes()[i]);
      st.push_back({index.strides()[i], src.strides()[i], out.strides()[i]});
    }
    p.n = index.sizes()[d];
    p.index_step = index.strides()[d];
    p.src_step = src.strides()[d];
  }
  p.dim_size = size_at(out, d);
  p.dim_stride = stride_at(out, d);
  const Geometry<3> g = coalesce<3>(sizes, st, op, kMaxIndexDims);
  if (g.numel == 0 || p.n == 0) return;
  p.ndim = int(g.sizes.size());
  p.lines = g.numel;
  for (int i = 0; i < p.ndim; ++i) {
    p.sizes[i] = g.sizes[size_t(i)];
    for (size_t o = 0; o < 3; ++o) p.strides[o][i] = g.strides[size_t(i)][o];
  }
  p.add = Add;
  p.index = static_cast<const int64_t*>(index.impl()->raw_data());
  p.src = src.impl()->raw_data();
  p.out = out.impl()->raw_data();
  p.dtype = out.dtype();
  check_launch(launch_scatter(p, current_stream_of(device)), op, p.dtype);
}

// ---------------------------------------------------------------- tril / triu

// input x (rank >= 2, any strides); attr diagonal
template <bool Lower> void tri_kernel(const KernelArgs& k) {
  const char* op = Lower ? "tril" : "triu";
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  const int device = device_of(x, op);
  DeviceGuard guard(device);
  const int64_t nd = x.dim();
  OF_CHECK(nd >= 2, "[{}] input tensor must have at least 2 dimensions, got shape {}", op,
           shape_str(x.sizes()));
  if (out.numel() == 0) return;
  // the batch dims coalesce (the output is dense); rows and cols stay
  std::vector<int64_t> bsz;
  std::vector<std::array<int64_t, 1>> bst;
  for (int64_t d = 0; d < nd - 2; ++d) {
    bsz.push_back(x.sizes()[d]);
    bst.push_back({x.strides()[d]});
  }
  const Geometry<1> b = coalesce<1>(bsz, bst, op, kMaxIndexDims);
  OF_CHECK(b.sizes.size() + 2 <= size_t(kMaxIndexDims),
           "[{}] cuda: at most {} non-mergeable dims, got shape {}", op, kMaxIndexDims,
           shape_str(x.sizes()));
  TriParams p;
  p.ndim = int(b.sizes.size()) + 2;
  for (size_t d = 0; d < b.sizes.size(); ++d) {
    p.sizes[d] = b.sizes[d];
    p.src_strides[d] = b.strides[d][0];
  }
  p.rows = x.sizes()[nd - 2];
  p.cols = x.sizes()[nd - 1];
  p.sizes[p.ndim - 2] = p.rows;
  p.sizes[p.ndim - 1] = p.cols;
  p.src_strides[p.ndim - 2] = x.strides()[nd - 2];
  p.src_strides[p.ndim - 1] = x.strides()[nd - 1];
  p.numel = out.numel();
  p.diag = TriAttrs::get<"diagonal">(k.attrs);
  p.lower = Lower;
  p.src = x.impl()->raw_data();
  p.dst = out.impl()->raw_data();
  p.dtype = x.dtype();
  check_launch(launch_tri(p, current_stream_of(device)), op, p.dtype);
}

// ---------------------------------------------------------------- flip / roll / repeat / pad

// attr dims (wrapped, distinct: flip_meta checked them)
void flip_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  device_of(x, "flip");
  std::vector<RemapDim> dims = dense_dims(out, x);
  if (x.dim() > 0)
    for (int64_t d : DimsAttrs::get<"dims">(k.attrs)) {
      RemapDim& r = dims[size_t(wrap_dim(d, x.dim(), "flip"))];
      if (r.size > 1) r.kind = MapKind::kFlip;
    }
  run_remap(dims, x.impl()->raw_data(), out.impl()->raw_data(), x.dtype(), 0, out, "flip");
}

// attrs shifts, dims: the shifts summed modulo each size, as the CPU kernel does
void roll_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  device_of(x, "roll");
  const DimVector &shifts = RollAttrs::get<"shifts">(k.attrs),
                  &rdims = RollAttrs::get<"dims">(k.attrs);
  OF_CHECK(shifts.size() == rdims.size(),
           "[roll] shifts and dimensions must align: got {} shifts "
           "and {} dims",
           shifts.size(), rdims.size());
  std::vector<int64_t> total(size_t(std::max<int64_t>(x.dim(), 1)), 0);
  for (size_t i = 0; i < rdims.size(); ++i) {
    const int64_t d = wrap_dim(rdims[i], x.dim(), "roll"), n = x.dim() ? x.sizes()[d] : 1;
    if (n) total[size_t(d)] = (total[size_t(d)] + shifts[i] % n) % n;
  }
  std::vector<RemapDim> dims = dense_dims(out, x);
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t n = x.sizes()[d];
    if (n == 0 || total[size_t(d)] == 0) continue;
    dims[size_t(d)].kind = MapKind::kRoll;
    dims[size_t(d)].arg = (total[size_t(d)] + n) % n;
  }
  run_remap(dims, x.impl()->raw_data(), out.impl()->raw_data(), x.dtype(), 0, out, "roll");
}

// attr repeats (rank >= x's): x viewed with leading size-1 dims, each dim read modulo its size
void repeat_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  device_of(x, "repeat");
  const int64_t nd = out.dim(), lead = nd - x.dim();
  OF_CHECK(lead >= 0, "[repeat] cuda: the output has fewer dims than the input");
  std::vector<RemapDim> dims;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t xsz = d < lead ? 1 : x.sizes()[d - lead];
    const int64_t xst = d < lead ? 0 : x.strides()[d - lead];
    const int64_t osz = out.sizes()[d];
    dims.push_back(
        {osz, out.strides()[d], xst, xsz, 0, osz == xsz ? MapKind::kIdentity : MapKind::kRepeat});
  }
  run_remap(dims, x.impl()->raw_data(), out.impl()->raw_data(), x.dtype(), 0, out, "repeat");
}

// attrs pad (pairs from the last dim backwards), mode, value
void pad_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  device_of(x, "pad");
  const DimVector& pads = PadAttrs::get<"pad">(k.attrs);
  const std::string& mode = PadAttrs::get<"mode">(k.attrs);
  MapKind kind;
  if (mode == "constant") kind = MapKind::kConstant;
  else if (mode == "reflect") kind = MapKind::kReflect;
  else if (mode == "replicate") kind = MapKind::kReplicate;
  else if (mode == "circular") kind = MapKind::kCircular;
  else
    fail(
        "[pad] unknown padding mode '{}'; expected 'constant', 'reflect', 'replicate' or "
        "'circular'",
        mode);
  OF_CHECK(pads.size() % 2 == 0 && int64_t(pads.size()) / 2 <= x.dim(),
           "[pad] cuda: {} pads for an input of shape {}", pads.size(), shape_str(x.sizes()));
  if (out.numel() == 0) return;
  std::vector<RemapDim> dims = dense_dims(out, x);
  const int64_t nd = x.dim(), np = int64_t(pads.size()) / 2;
  for (int64_t q = 0; q < np; ++q) {
    const int64_t d = nd - 1 - q, l = pads[size_t(2 * q)], r = pads[size_t(2 * q + 1)];
    OF_CHECK(out.sizes()[d] == x.sizes()[d] + l + r,
             "[pad] cuda: output size {} of dimension {} "
             "is not {} + {} + {}",
             out.sizes()[d], d, x.sizes()[d], l, r);
    if (l == 0 && r == 0) continue;
    dims[size_t(d)].kind = kind;
    dims[size_t(d)].arg = l;
  }
  uint64_t fill = 0;
  if (kind == MapKind::kConstant) {
    const double v = PadAttrs::get<"value">(k.attrs);
    dispatch_dtype(x.dtype(), [&](auto z) {
      using T = decltype(z);
      // the CPU's fill: an integer output saturates (NaN or out-of-range values)
      const T val = T(saturate_cast<compute_t<T>>(v));
      std::memcpy(&fill, &val, sizeof(T));
    });
  }
  run_remap(dims, x.impl()->raw_data(), out.impl()->raw_data(), x.dtype(), fill, out, "pad");
}

// ---------------------------------------------------------------- one_hot

// input x (int64, any shape and strides); attr num_classes (resolved, >= 0); out int64 [x..., c]
void one_hot_kernel(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  const int device = device_of(x, "one_hot");
  DeviceGuard guard(device);
  OF_CHECK(x.dtype() == kInt64,
           "[one_hot] is only applicable to index tensors of dtype int64, "
           "got {}",
           dtype_name(x.dtype()));
  const int64_t c = OneHotAttrs::get<"num_classes">(k.attrs);
  OF_CHECK(c >= 0, "[one_hot] num_classes must be positive or -1, got {}", c);
  if (const auto v = first_bad_index(x, c, "one_hot")) {
    if (*v < 0) fail("[one_hot] class values must be non-negative, got {}", *v);
    fail("[one_hot] class value {} must be smaller than num_classes {}", *v, c);
  }
  const Geometry<1> g = geometry_of(x, "one_hot");
  if (g.numel == 0 || c == 0) return;
  OneHotParams p;
  p.ndim = int(g.sizes.size());
  p.numel = g.numel;
  p.classes = c;
  for (int d = 0; d < p.ndim; ++d) {
    p.sizes[d] = g.sizes[size_t(d)];
    p.strides[d] = g.strides[size_t(d)][0];
  }
  p.x = static_cast<const int64_t*>(x.impl()->raw_data());
  p.out = static_cast<int64_t*>(out.impl()->raw_data());
  check_launch(launch_one_hot(p, current_stream_of(device)), "one_hot", kInt64);
}

}  // namespace

void register_index_kernels(const cuda_backend::CoreV1& core) {
  core.set_cuda_kernel("cat", cat_kernel);
  core.set_cuda_kernel("gather", gather_kernel);
  core.set_cuda_kernel("scatter", scatter_kernel<false>);
  core.set_cuda_kernel("scatter_add", scatter_kernel<true>);
  core.set_cuda_kernel("tril", tri_kernel<true>);
  core.set_cuda_kernel("triu", tri_kernel<false>);
  core.set_cuda_kernel("flip", flip_kernel);
  core.set_cuda_kernel("roll", roll_kernel);
  core.set_cuda_kernel("repeat", repeat_kernel);
  core.set_cuda_kernel("pad", pad_kernel);
  core.set_cuda_kernel("one_hot", one_hot_kernel);
}

}  // namespace oneflow::cuda_module

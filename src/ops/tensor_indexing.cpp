// libtorch-style indexing (include/oneflow/indexing.h) as views and differentiable gathers:
// integers select, slices slice, None unsqueezes, an ellipsis spans the unnamed dims; bool
// tensors become their nonzero() positions; integer tensors broadcast together and gather
// through one index_select over the flattened indexed dims. Results are placed as PyTorch
// does: where the indexed dims were when they are adjacent, else first.
#include <algorithm>

#include "oneflow/indexing.h"
#include "oneflow/ops.h"

namespace oneflow {

using indexing::TensorIndex;

namespace indexing {
TensorIndex::TensorIndex(const char* s) : kind_(Kind::kEllipsis) {
  if (!s || std::string_view(s) != "...")
    fail("[index] a string index must be \"...\" (an ellipsis), got \"{}\"", s ? s : "");
}
}  // namespace indexing

namespace {

// How many dims of the tensor an index consumes.
int64_t consumed(const TensorIndex& i) {
  switch (i.kind()) {
    case TensorIndex::Kind::kInteger:
    case TensorIndex::Kind::kSlice:
      return 1;
    case TensorIndex::Kind::kTensor:
      return i.tensor().dtype() == kBool || i.tensor().dtype() == kUInt8 ? i.tensor().dim() : 1;
    default:
      return 0;
  }
}

struct Indexed {
  Tensor view;                    // after the basic indices
  std::vector<int64_t> adv_dims;  // dims of `view` taken by tensor indices, in order
  std::vector<Tensor> adv;        // their int64 index tensors (one per dim)
};

Indexed apply_basic(const Tensor& self, const TensorIndex* idx, size_t n, const char* op) {
  if (!self.defined()) fail("[{}] tensor is undefined", op);
  int64_t needed = 0, ellipses = 0;
  for (size_t k = 0; k < n; ++k) {
    needed += consumed(idx[k]);
    ellipses += idx[k].kind() == TensorIndex::Kind::kEllipsis;
  }
  if (ellipses > 1) fail("[{}] an index can only have a single ellipsis ('...')", op);
  if (needed > self.dim())
    fail("[{}] too many indices for a tensor of dimension {} (got {})", op, self.dim(), needed);
  Indexed r;
  r.view = self;
  int64_t d = 0;  // the current dim of r.view
  for (size_t k = 0; k < n; ++k) {
    const TensorIndex& i = idx[k];
    switch (i.kind()) {
      case TensorIndex::Kind::kNone:
        r.view = r.view.unsqueeze(d++);
        break;
      case TensorIndex::Kind::kEllipsis:
        d += self.dim() - needed;
        break;
      case TensorIndex::Kind::kInteger: {
        const int64_t size = r.view.size(d);
        const int64_t v = i.integer();
        if (v < -size || v >= size)
          fail("[{}] index {} is out of bounds for dimension {} with size {}", op, v, d, size);
        r.view = r.view.select(d, v);
        break;
      }
      case TensorIndex::Kind::kBoolean: {
        r.view = r.view.unsqueeze(d);
        if (!i.boolean()) r.view = r.view.slice(d, 0, 0);
        ++d;
        break;
      }
      case TensorIndex::Kind::kSlice: {
        const int64_t step = i.slice().step().value_or(1);
        if (step <= 0) fail("[{}] slice step must be positive, got {}", op, step);
        const int64_t size = r.view.size(d);
        auto clampi = [&](std::optional<int64_t> v, int64_t dflt) {
          if (!v) return dflt;
          int64_t x = *v < 0 ? *v + size : *v;
          return std::clamp<int64_t>(x, 0, size);
        };
        const int64_t start = clampi(i.slice().start(), 0);
        const int64_t stop = std::max(start, clampi(i.slice().stop(), size));
        r.view = r.view.slice(d, start, stop, step);
        ++d;
        break;
      }
      case TensorIndex::Kind::kTensor: {
        const Tensor& t = i.tensor();
        if (!t.defined()) fail("[{}] index tensor is undefined", op);
        if (t.dtype() == kBool || t.dtype() == kUInt8) {
          for (int64_t j = 0; j < t.dim(); ++j)
            if (t.size(j) != r.view.size(d + j))
              fail(
                  "[{}] the shape of the mask {} at index {} does not match the shape of the "
                  "indexed tensor {} at index {}",
                  op, shape_str(t.sizes()), j, shape_str(r.view.sizes()), d + j);
          // positions of the true elements, one index tensor per mask dim (a host read)
          Tensor nz = nonzero(t.dtype() == kBool ? t : t.to(kBool));
          for (int64_t j = 0; j < t.dim(); ++j) {
            r.adv_dims.push_back(d + j);
            r.adv.push_back(nz.select(1, j));
          }
          d += t.dim();
        } else if (t.dtype() == kInt64 || t.dtype() == kInt32) {
          r.adv_dims.push_back(d);
          r.adv.push_back(t.to(kInt64));
          ++d;
        } else {
          fail("[{}] tensors used as indices must be long, int, byte or bool tensors, got {}", op,
               dtype_name(t.dtype()));
        }
        break;
      }
    }
  }
  return r;
}

struct Advanced {
  Tensor flat;        // the view with the indexed dims first, flattened into one
  Tensor linear;      // [N] positions in that flattened dim
  DimVector bshape;   // the broadcast shape of the index tensors
  DimVector rest;     // sizes of the other dims, in order
  DimVector perm;     // permutation that put the indexed dims first
  int64_t place = 0;  // where the result dims go (PyTorch's rule)
};

Advanced advanced(const Indexed& r, const char* op) {
  Advanced a;
  const Tensor& v = r.view;
  const int64_t nd = v.dim();
  // broadcast the index tensors together
  DimVector b = r.adv[0].sizes().dims();
  for (size_t k = 1; k < r.adv.size(); ++k) b = broadcast_shapes(b, r.adv[k].sizes());
  a.bshape = b;
  bool adjacent = true;
  for (size_t k = 1; k < r.adv_dims.size(); ++k) adjacent &= r.adv_dims[k] == r.adv_dims[k - 1] + 1;
  a.place = adjacent ? r.adv_dims[0] : 0;
  for (int64_t dd : r.adv_dims) a.perm.push_back(dd);
  for (int64_t dd = 0; dd < nd; ++dd)
    if (std::find(r.adv_dims.begin(), r.adv_dims.end(), dd) == r.adv_dims.end()) {
      a.perm.push_back(dd);
      a.rest.push_back(v.size(dd));
    }
  // linear position over the indexed dims (negative indices count from the end)
  Tensor lin;
  int64_t total = 1;
  for (size_t k = r.adv.size(); k-- > 0;) {
    const int64_t size = v.size(r.adv_dims[k]);
    Tensor ik = r.adv[k].expand(b);
    ik = where(ik < 0, ik + size, ik);
    lin = lin.defined() ? lin + ik * total : ik * total;
    total *= size;
  }
  a.linear = lin.reshape({-1});
  DimVector flat_shape{total};
  for (int64_t x : a.rest) flat_shape.push_back(x);
  a.flat = v.permute(a.perm).reshape(flat_shape);
  (void)op;
  return a;
}

// [N, rest...] gathered values -> the result layout (bshape at `place` among the rest dims).
Tensor place_result(const Advanced& a, const Tensor& gathered) {
  DimVector shape = a.bshape;
  for (int64_t x : a.rest) shape.push_back(x);
  Tensor y = gathered.reshape(shape);
  if (a.place == 0) return y;
  const int64_t nb = int64_t(a.bshape.size()), nr = int64_t(a.rest.size());
  DimVector perm;
  for (int64_t k = 0; k < a.place; ++k) perm.push_back(nb + k);
  for (int64_t k = 0; k < nb; ++k) perm.push_back(k);
  for (int64_t k = a.place; k < nr; ++k) perm.push_back(nb + k);
  return y.permute(perm);
}

Tensor index_impl(const Tensor& self, const TensorIndex* idx, size_t n) {
  Indexed r = apply_basic(self, idx, n, "index");
  if (r.adv.empty()) return r.view;
  Advanced a = advanced(r, "index");
  const int64_t total = a.flat.size(0);
  if (a.linear.numel() > 0) {
    // bounds, as PyTorch checks them (the indices are data: a host read)
    const int64_t lo = a.linear.amin().item<int64_t>(), hi = a.linear.amax().item<int64_t>();
    if (lo < 0 || hi >= total)
      fail("[index] an index is out of bounds for the indexed dims of size {}", total);
  }
  return place_result(a, a.flat.index_select(0, a.linear));
}

void index_put_impl(Tensor& self, const TensorIndex* idx, size_t n, const Tensor& value) {
  if (!value.defined()) fail("[index_put_] value is undefined");
  Indexed r = apply_basic(self, idx, n, "index_put_");
  if (r.adv.empty()) {
    r.view.copy_(value);
    return;
  }
  Advanced a = advanced(r, "index_put_");
  const int64_t total = a.flat.size(0), N = a.linear.numel();
  if (N == 0) return;
  const int64_t lo = a.linear.amin().item<int64_t>(), hi = a.linear.amax().item<int64_t>();
  if (lo < 0 || hi >= total)
    fail("[index_put_] an index is out of bounds for the indexed dims of size {}", total);
  // value broadcast to the result shape, then moved to [bshape, rest] order and flattened
  DimVector res_shape;
  {
    DimVector shape = a.bshape;
    for (int64_t x : a.rest) shape.push_back(x);
    const int64_t nb = int64_t(a.bshape.size());
    DimVector out;
    for (int64_t k = 0; k < a.place; ++k) out.push_back(a.rest[size_t(k)]);
    for (int64_t k = 0; k < nb; ++k) out.push_back(a.bshape[size_t(k)]);
    for (int64_t k = a.place; k < int64_t(a.rest.size()); ++k) out.push_back(a.rest[size_t(k)]);
    res_shape = out;
  }
  Tensor v = value.to(self.dtype()).expand(res_shape);
  if (a.place > 0) {
    const int64_t nb = int64_t(a.bshape.size()), nr = int64_t(a.rest.size());
    DimVector perm;  // inverse of place_result's
    for (int64_t k = 0; k < nb; ++k) perm.push_back(a.place + k);
    for (int64_t k = 0; k < a.place; ++k) perm.push_back(k);
    for (int64_t k = a.place; k < nr; ++k) perm.push_back(nb + k);
    v = v.permute(perm);
  }
  DimVector vshape{N};
  for (int64_t x : a.rest) vshape.push_back(x);
  v = v.reshape(vshape);
  // write through a contiguous copy of the permuted view, then back into self's memory
  Tensor perm_view = r.view.permute(a.perm);
  DimVector ishape{N};
  for (size_t k = 0; k < a.rest.size(); ++k) ishape.push_back(1);
  Tensor index = a.linear.reshape(ishape).expand(vshape);
  Tensor flat = perm_view.contiguous().reshape(a.flat.sizes()).scatter(0, index, v);
  perm_view.copy_(flat.reshape(perm_view.sizes()));
}

}  // namespace

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return index_impl(*this, indices.begin(), indices.size());
}
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  return index_impl(*this, indices.data(), indices.size());
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& value) {
  index_put_impl(*this, indices.begin(), indices.size(), value);
  return *this;
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Scalar& value) {
  index_put_impl(*this, indices.begin(), indices.size(), full({}, value, options()));
  return *this;
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& value) {
  index_put_impl(*this, indices.data(), indices.size(), value);
  return *this;
}

Tensor& Tensor::operator=(const Tensor& value) && {
  if (!defined()) fail("[operator=] cannot assign into an undefined tensor");
  copy_(value);
  return *this;
}
Tensor& Tensor::operator=(const Scalar& value) && {
  if (!defined()) fail("[operator=] cannot assign into an undefined tensor");
  fill_(value);
  return *this;
}

}  // namespace oneflow

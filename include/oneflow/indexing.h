// indexing.h: libtorch's tensor indexing, of::indexing::{Slice, None, Ellipsis, TensorIndex}:
//   x.index({Slice(), 0})                 -> x[:, 0]
//   x.index({Ellipsis, Slice(None, 2)})   -> x[..., :2]
//   x.index({None, mask})                 -> x[None, mask]   (bool tensor)
//   x.index({idx, Slice(1, None, 2)})     -> x[idx, 1::2]    (integer tensor)
//   x.index_put_({Slice(), 0}, 1.5);  x[0] = y;
#pragma once
#include <optional>

#include "oneflow/tensor.h"

namespace oneflow::indexing {

struct EllipsisIndexType {};
inline constexpr EllipsisIndexType Ellipsis;
struct NoneIndexType {};
inline constexpr NoneIndexType None;

// start:stop:step; a bound may be None (the default: the start, the end, step 1).
class Slice {
 public:
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step) {}
  Slice(NoneIndexType, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : stop_(stop), step_(step) {}
  Slice(std::optional<int64_t> start, NoneIndexType, std::optional<int64_t> step = std::nullopt)
      : start_(start), step_(step) {}
  Slice(NoneIndexType, NoneIndexType, std::optional<int64_t> step = std::nullopt) : step_(step) {}
  std::optional<int64_t> start() const { return start_; }
  std::optional<int64_t> stop() const { return stop_; }
  std::optional<int64_t> step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_, step_;
};

class TensorIndex {
 public:
  enum class Kind { kNone, kEllipsis, kInteger, kBoolean, kSlice, kTensor };
  TensorIndex(NoneIndexType) : kind_(Kind::kNone) {}
  TensorIndex(std::nullopt_t) : kind_(Kind::kNone) {}
  TensorIndex(EllipsisIndexType) : kind_(Kind::kEllipsis) {}
  TensorIndex(const char* s);  // "..." is an ellipsis, as in libtorch
  TensorIndex(int64_t i) : kind_(Kind::kInteger), integer_(i) {}
  TensorIndex(int i) : kind_(Kind::kInteger), integer_(i) {}
  TensorIndex(bool b) : kind_(Kind::kBoolean), boolean_(b) {}
  TensorIndex(Slice s) : kind_(Kind::kSlice), slice_(s) {}
  TensorIndex(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}
  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  bool boolean_ = false;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace oneflow::indexing

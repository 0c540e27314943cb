// placement.h: where a global tensor lives (Placement) and how it is laid out there (Sbp).
// NOTE [Global tensors]: a global tensor has one logical value; a Placement names the ranks
// that hold it, arranged as a 1-D or 2-D mesh, and an NdSbp gives, per mesh axis, how the
// logical value maps onto that axis' ranks: split(d) (balanced pieces along dim d, the first
// n % p ranks one larger), broadcast (every rank holds the whole value) or partial_sum (the
// value is the sum of the ranks' tensors). docs/GLOBAL.md explains the model.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "oneflow/device.h"
#include "oneflow/small_vector.h"

namespace oneflow {

class Sbp {
 public:
  enum class Kind : int8_t { Split, Broadcast, PartialSum };
  constexpr Sbp() = default;  // broadcast
  static constexpr Sbp split(int64_t dim) { return Sbp(Kind::Split, dim); }
  static constexpr Sbp broadcast() { return Sbp(Kind::Broadcast, -1); }
  static constexpr Sbp partial_sum() { return Sbp(Kind::PartialSum, -1); }
  Kind kind() const { return kind_; }
  bool is_split() const { return kind_ == Kind::Split; }
  bool is_broadcast() const { return kind_ == Kind::Broadcast; }
  bool is_partial_sum() const { return kind_ == Kind::PartialSum; }
  int64_t dim() const { return dim_; }  // split dim; -1 otherwise
  std::string str() const;              // "S(0)", "B", "P"
  friend bool operator==(Sbp a, Sbp b) { return a.kind_ == b.kind_ && a.dim_ == b.dim_; }
  friend bool operator!=(Sbp a, Sbp b) { return !(a == b); }

 private:
  constexpr Sbp(Kind k, int64_t d) : kind_(k), dim_(d) {}
  Kind kind_ = Kind::Broadcast;
  int64_t dim_ = -1;
};

// One Sbp per mesh axis of the placement.
using NdSbp = SmallVector<Sbp, 2>;
std::string sbp_str(const NdSbp& s);  // "(S(0), B)"
// The SBP with every partial sum made broadcast: what a partial-sum tensor is once its addends
// are summed, and what the *_like factories of one give.
inline NdSbp partial_to_broadcast(NdSbp s) {
  for (Sbp& x : s)
    if (x.is_partial_sum()) x = Sbp::broadcast();
  return s;
}

namespace sbp {
constexpr Sbp split(int64_t dim) { return Sbp::split(dim); }
constexpr Sbp broadcast() { return Sbp::broadcast(); }
constexpr Sbp partial_sum() { return Sbp::partial_sum(); }
}  // namespace sbp

struct PlacementImpl;

// Ranks of the world, as a mesh: Placement("cpu", {0, 1, 2, 3}) is 1-D, Placement("cpu",
// {{0, 1}, {2, 3}}) a 2x2 mesh (axis 0 runs down the rows). Cheap to copy; equal placements
// compare equal. Constructing one needs no communication.
class Placement {
 public:
  Placement(std::string_view device_type, std::vector<int> ranks);
  Placement(std::string_view device_type, std::vector<std::vector<int>> mesh);
  Placement(std::string_view device_type, std::initializer_list<int> ranks)
      : Placement(device_type, std::vector<int>(ranks)) {}
  Placement(std::string_view device_type, std::initializer_list<std::vector<int>> mesh)
      : Placement(device_type, std::vector<std::vector<int>>(mesh)) {}
  // Ranks as int64_t, as sizes and indices usually are: Placement("cpu", std::vector<int64_t>{
  // 0, 1}); a rank outside [0, 2^31) is a [Placement] error.
  Placement(std::string_view device_type, const std::vector<int64_t>& ranks);
  Placement(std::string_view device_type, const std::vector<std::vector<int64_t>>& mesh);
  // Every rank of the world as a 1-D mesh.
  static Placement all(std::string_view device_type = "cpu");

  DeviceType device_type() const;
  const std::vector<int>& ranks() const;          // row-major over the mesh
  const std::vector<int64_t>& hierarchy() const;  // the mesh shape: {4} or {2, 2}
  int64_t ndim() const { return int64_t(hierarchy().size()); }
  bool contains(int rank) const;
  // This process' coordinate on each mesh axis (empty when the rank is not in the placement).
  std::vector<int64_t> coord_of(int rank) const;
  std::string str() const;  // "Placement(cpu, ranks=[[0, 1], [2, 3]])"
  friend bool operator==(const Placement& a, const Placement& b);
  friend bool operator!=(const Placement& a, const Placement& b) { return !(a == b); }
  const std::shared_ptr<PlacementImpl>& impl() const { return impl_; }

 private:
  explicit Placement(std::shared_ptr<PlacementImpl> i) : impl_(std::move(i)) {}
  std::shared_ptr<PlacementImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Placement& p);
std::ostream& operator<<(std::ostream& os, const Sbp& s);

}  // namespace oneflow

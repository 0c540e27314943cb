// op_call.h: the op-call encoding shared by the op-table fuzzer (tests/fuzz/fuzz_ops.cpp) and
// the test that records op signatures and writes its seed corpus (tests/test_fuzz_support.cpp).
//
// An op's signature (which input counts it takes, which inputs may be undefined, the attribute
// types) is not part of OpDef: the public wrappers guarantee it. The signatures the table rows
// use are recorded into tests/fuzz/op_signatures.txt, one line per op:
//   name <TAB> arities (2,3) <TAB> undefined-input mask <TAB> attrs (per attribute: variant
//   indices seen, '/'-separated, then ':' and the strings seen, '/'-separated)
// The fuzzer keeps input counts and attribute types inside the signature and throws everything
// else at the op: values of attributes, shapes, strides, offsets, dtypes, undefined inputs, out=.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch.h"

namespace offuzz {

namespace of = oneflow;

struct OpSignature {
  std::string name;
  std::vector<int> arities;                       // sorted, distinct
  uint64_t undefined_ok = 0;                      // bit i: input i was seen undefined
  std::vector<std::vector<int>> attr_tags;        // per attribute: AttrValue indices seen
  std::vector<std::vector<std::string>> strings;  // per attribute: strings seen
};

inline std::string join_ints(const std::vector<int>& v, char sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? std::string(1, sep) : "") + std::to_string(v[i]);
  return s;
}

inline std::string format_signature(const OpSignature& s) {
  std::string line =
      s.name + "\t" + join_ints(s.arities, ',') + "\t" + std::to_string(s.undefined_ok) + "\t";
  for (size_t a = 0; a < s.attr_tags.size(); ++a) {
    if (a) line += ' ';
    line += s.attr_tags[a].empty() ? "-" : join_ints(s.attr_tags[a], '/');
    if (!s.strings[a].empty()) {
      line += ':';
      for (size_t k = 0; k < s.strings[a].size(); ++k) line += (k ? "/" : "") + s.strings[a][k];
    }
  }
  return line;
}

inline std::vector<int> split_ints(const std::string& s, char sep) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty() && item != "-") v.push_back(std::stoi(item));
  return v;
}

inline std::vector<OpSignature> parse_signatures(const std::string& text) {
  std::vector<OpSignature> out;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string field;
    while (std::getline(ls, field, '\t')) f.push_back(field);
    while (f.size() < 4) f.emplace_back();
    OpSignature s;
    s.name = f[0];
    s.arities = split_ints(f[1], ',');
    s.undefined_ok = std::stoull(f[2].empty() ? "0" : f[2]);
    std::stringstream as(f[3]);
    std::string spec;
    while (as >> spec) {
      const size_t colon = spec.find(':');
      s.attr_tags.push_back(split_ints(spec.substr(0, colon), '/'));
      std::vector<std::string> strs;
      if (colon != std::string::npos) {
        std::stringstream ss(spec.substr(colon + 1));
        std::string x;
        while (std::getline(ss, x, '/')) strs.push_back(x);
      }
      s.strings.push_back(std::move(strs));
    }
    out.push_back(std::move(s));
  }
  return out;
}

// ---- the byte stream: reads past the end give zeros (libFuzzer inputs are any length)
class Bytes {
 public:
  Bytes(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint8_t u8() { return pos_ < n_ ? p_[pos_++] : 0; }
  int8_t i8() { return int8_t(u8()); }
  uint16_t u16() { return uint16_t(u8() | (u8() << 8)); }
  uint64_t u64() {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v |= uint64_t(u8()) << (8 * k);
    return v;
  }
  double f64() {
    const uint64_t b = u64();
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
  }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

// The encoder mirrors Bytes.
struct Out {
  std::string buf;
  void u8(uint8_t v) { buf.push_back(char(v)); }
  void i8(int8_t v) { u8(uint8_t(v)); }
  void u16(uint16_t v) {
    u8(uint8_t(v));
    u8(uint8_t(v >> 8));
  }
  void u64(uint64_t v) {
    for (int k = 0; k < 8; ++k) u8(uint8_t(v >> (8 * k)));
  }
  void f64(double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof d);
    u64(b);
  }
};

constexpr int kMaxDims = 5;

// ---- integers and doubles: small values most of the time, raw bits and edge values sometimes
inline int64_t read_int(Bytes& b) {
  const uint8_t mode = b.u8() % 4;
  const int8_t small = b.i8();
  switch (mode) {
    case 0:
      return small % 6;
    case 1:
      return small;
    case 2:
      return int64_t(b.u64());
    default: {
      static const int64_t edge[] = {std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max(),
                                     -1,
                                     0,
                                     int64_t(1) << 31,
                                     int64_t(1) << 62,
                                     -(int64_t(1) << 40),
                                     65536};
      return edge[uint8_t(small) % 8];
    }
  }
}
inline void write_int(Out& o, int64_t v) {
  if (v >= -128 && v <= 127) {
    o.u8(1);
    o.i8(int8_t(v));
  } else {
    o.u8(2);
    o.i8(0);
    o.u64(uint64_t(v));
  }
}
inline double read_double(Bytes& b) {
  const uint8_t mode = b.u8() % 3;
  const int8_t small = b.i8();
  if (mode == 0) return small / 8.0;
  if (mode == 1) return b.f64();
  static const double edge[] = {std::nan(""), INFINITY, -INFINITY, 0.0, -0.0, 1e300, 1e-310, -1.0};
  return edge[uint8_t(small) % 8];
}
inline void write_double(Out& o, double v) {
  o.u8(1);
  o.i8(0);
  o.f64(v);
}

// ---- attributes, typed by the signature
inline of::AttrValue read_attr(Bytes& b, const OpSignature& s, size_t a) {
  const std::vector<int>& tags = s.attr_tags[a];
  const int tag = tags.empty() ? 0 : tags[b.u8() % tags.size()];
  switch (tag) {
    case 1:
      return read_int(b);
    case 2:
      return read_double(b);
    case 3:
      return bool(b.u8() & 1);
    case 4: {
      of::DimVector d;
      const int n = b.u8() % (kMaxDims + 2);
      for (int k = 0; k < n; ++k) d.push_back(read_int(b));
      return d;
    }
    case 5:
      return of::ScalarType(b.u8() % of::kNumScalarTypes);
    case 6: {
      const uint8_t k = b.u8();
      const auto& known = s.strings[a];
      if (!known.empty() && k < 224) return known[k % known.size()];
      std::string x;
      const int n = k % 6;
      for (int i = 0; i < n; ++i) x.push_back(char(b.u8()));
      return x;
    }
    case 7: {
      const uint8_t kind = b.u8() % 3;
      if (kind == 0) return of::Scalar(bool(b.u8() & 1));
      if (kind == 1) return of::Scalar(read_int(b));
      return of::Scalar(read_double(b));
    }
    default:
      return std::monostate{};
  }
}
inline void write_attr(Out& o, const OpSignature& s, size_t a, const of::AttrValue& v) {
  const std::vector<int>& tags = s.attr_tags[a];
  uint8_t choice = 0;
  for (size_t k = 0; k < tags.size(); ++k)
    if (tags[k] == int(v.index())) choice = uint8_t(k);
  o.u8(choice);
  switch (v.index()) {
    case 1:
      write_int(o, std::get<int64_t>(v));
      break;
    case 2:
      write_double(o, std::get<double>(v));
      break;
    case 3:
      o.u8(std::get<bool>(v));
      break;
    case 4: {
      const auto& d = std::get<of::DimVector>(v);
      o.u8(uint8_t(d.size()));
      for (int64_t x : d) write_int(o, x);
      break;
    }
    case 5:
      o.u8(uint8_t(std::get<of::ScalarType>(v)));
      break;
    case 6: {
      const auto& known = s.strings[a];
      uint8_t k = 0;
      for (size_t i = 0; i < known.size(); ++i)
        if (known[i] == std::get<std::string>(v)) k = uint8_t(i);
      o.u8(k);
      break;
    }
    case 7: {
      const of::Scalar& x = std::get<of::Scalar>(v);
      if (x.kind() == of::Scalar::Kind::Bool) {
        o.u8(0);
        o.u8(x.to_long() != 0);
      } else if (x.kind() == of::Scalar::Kind::Int) {
        o.u8(1);
        write_int(o, x.to_long());
      } else {
        o.u8(2);
        write_double(o, x.to_double());
      }
      break;
    }
    default:
      break;
  }
}

// ---- tensors
// flags: bit0 undefined (where the signature allows it), bit1 requires grad (floating dtypes),
// bits2-3 layout (0 contiguous, 1 as_strided with the given strides, 2 dims reversed, 3 size-1
// dims expanded by stride 0), bit4 storage one element short of what the strides need (the
// view must be refused).
struct TensorSpec {
  uint8_t flags = 0;
  uint8_t dtype = 1;
  std::vector<int64_t> sizes, strides;
  uint8_t offset = 0;
  uint8_t values = 1;  // 0 small integers, 1 pseudo-random in [-3, 3], 2 edge values
  uint8_t seed = 0;
};

inline int64_t read_size(Bytes& b) {
  const uint8_t v = b.u8();
  return v < 224 ? v % 5 : v % 17;
}

inline TensorSpec read_spec(Bytes& b) {
  TensorSpec t;
  t.flags = b.u8();
  t.dtype = b.u8() % of::kNumScalarTypes;
  const int nd = b.u8() % (kMaxDims + 1);
  for (int d = 0; d < nd; ++d) t.sizes.push_back(read_size(b));
  if (((t.flags >> 2) & 3) == 1)
    for (int d = 0; d < nd; ++d) t.strides.push_back(b.i8() % 9);
  t.offset = b.u8() % 8;
  t.values = b.u8() % 3;
  t.seed = b.u8();
  return t;
}

inline void write_spec(Out& o, const of::Tensor& t) {
  if (!t.defined()) {
    o.u8(1);
    for (int k = 0; k < 5; ++k) o.u8(0);
    return;
  }
  o.u8(t.requires_grad() ? 2 : 0);
  o.u8(uint8_t(t.dtype()));
  o.u8(uint8_t(t.dim()));
  for (int64_t s : t.sizes())  // read_size: v < 224 ? v % 5 : v % 17 (224 % 17 == 3)
    o.u8(uint8_t(s < 5 ? s : (s < 17 ? 224 + (s - 3 + 17) % 17 : 4)));
  o.u8(0);
  o.u8(t.is_floating_point() ? 1 : 0);
  o.u8(0);
}

// Host values for a storage of n elements.
inline std::vector<double> make_values(const TensorSpec& s, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  uint32_t x = 2463534242u ^ s.seed;
  static const double edge[] = {0.0,       -0.0, 1.0,   -1.0,  std::nan(""), INFINITY,
                                -INFINITY, 1e30, -1e30, 1e-40, 255.0,        3e9};
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    if (s.values == 0) v[size_t(i)] = double(int(x % 8) - 2);
    else if (s.values == 1) v[size_t(i)] = double(x % 6001) / 1000.0 - 3.0;
    else v[size_t(i)] = edge[x % 12];
  }
  return v;
}

// Builds the tensor a spec describes (of::Error where the public API refuses the view).
inline of::Tensor build_tensor(const TensorSpec& s, bool undefined_ok) {
  if ((s.flags & 1) && undefined_ok) return {};
  const auto dtype = of::ScalarType(s.dtype);
  const int layout = (s.flags >> 2) & 3;
  const size_t nd = s.sizes.size();
  std::vector<int64_t> sizes = s.sizes, strides(nd);
  if (layout == 1) {
    strides = s.strides;
  } else {
    int64_t st = 1;
    for (size_t d = nd; d-- > 0;) {
      strides[d] = st;
      st *= std::max<int64_t>(sizes[d], 1);
    }
    if (layout == 2)  // a transposed layout: column-major strides
      for (size_t d = 0, st2 = 1; d < nd; ++d) {
        strides[d] = int64_t(st2);
        st2 *= size_t(std::max<int64_t>(sizes[d], 1));
      }
    if (layout == 3)  // broadcast views: every size-1 dim is expanded to 3 with stride 0
      for (size_t d = 0; d < nd; ++d)
        if (sizes[d] == 1) {
          sizes[d] = 3;
          strides[d] = 0;
        }
  }
  int64_t hi = s.offset, lo = s.offset;
  bool empty = false;
  for (size_t d = 0; d < nd; ++d) {
    if (sizes[d] == 0) empty = true;
    else if (strides[d] > 0) hi += (sizes[d] - 1) * strides[d];
    else lo += (sizes[d] - 1) * strides[d];
  }
  int64_t n = empty ? s.offset : hi + 1;
  if (s.flags & 16) n = std::max<int64_t>(n - 1, 0);
  (void)lo;
  of::Tensor base = of::empty({n}, of::TensorOptions().dtype(of::kFloat64));
  const std::vector<double> v = make_values(s, n);
  if (n) std::memcpy(base.data_ptr(), v.data(), v.size() * sizeof(double));
  base = base.to(dtype);
  of::Tensor t = of::as_strided(base, sizes, strides, int64_t(s.offset));
  if ((s.flags & 2) && t.is_floating_point()) t.requires_grad_(true);
  return t;
}

}  // namespace offuzz

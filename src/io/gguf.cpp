// gguf.cpp: GGUF files (include/oneflow/gguf.h, docs/GGUF.md). NOTE [GGUF checks]: the reader
// takes nothing on trust. Counts are checked against the bytes left before anything is sized by
// them (io::ByteReader), metadata arrays are bounded in total elements and in nesting, keys and
// tensor names are unique, `general.alignment` is a power of two, and each tensor's type,
// dimensions (at most 4, a first dimension whole blocks), element count and byte size are
// overflow-checked, its offset aligned, and its bytes inside the file and apart from every
// other tensor's. Errors: "[gguf] <file>: <field>: <what>".
#include "oneflow/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "io/atomic_file.h"
#include "io/byte_reader.h"
#include "io/mapped_file.h"
#include "oneflow/dtype.h"
#include "oneflow/error.h"
#include "oneflow/ops.h"

namespace oneflow::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
constexpr size_t kMaxArrayDepth = 4;
// Metadata arrays hold at most this many elements in all (real files: a vocabulary of 262,144
// tokens and as many merges), so a file cannot make the reader allocate without bound.
constexpr uint64_t kMaxArrayElements = uint64_t(1) << 24;

struct TypeInfo {
  Type type;
  const char* name;
  int64_t block, bytes;
};
constexpr TypeInfo kTypes[] = {
    {Type::F32, "F32", 1, 4},       {Type::F16, "F16", 1, 2},       {Type::Q4_0, "Q4_0", 32, 18},
    {Type::Q4_1, "Q4_1", 32, 20},   {Type::Q5_0, "Q5_0", 32, 22},   {Type::Q5_1, "Q5_1", 32, 24},
    {Type::Q8_0, "Q8_0", 32, 34},   {Type::Q4_K, "Q4_K", 256, 144}, {Type::Q5_K, "Q5_K", 256, 176},
    {Type::Q6_K, "Q6_K", 256, 210}, {Type::BF16, "BF16", 1, 2},
};
const TypeInfo* info_of(Type t) {
  for (const TypeInfo& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}
const TypeInfo& need_info(Type t) {
  const TypeInfo* i = info_of(t);
  if (!i) fail("[gguf] tensor type {} is not supported", uint32_t(t));
  return *i;
}

// The scalar sizes of the value types (0: not a fixed-size scalar).
size_t scalar_bytes(ValueType t) {
  switch (t) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::Bool:
      return 1;
    case ValueType::UInt16:
    case ValueType::Int16:
      return 2;
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::Float32:
      return 4;
    case ValueType::UInt64:
    case ValueType::Int64:
    case ValueType::Float64:
      return 8;
    default:
      return 0;
  }
}
bool known_value_type(uint32_t t) { return t <= uint32_t(ValueType::Float64); }
bool is_integer(ValueType t) {
  return scalar_bytes(t) != 0 && t != ValueType::Float32 && t != ValueType::Float64;
}

float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Half::to_float(h);
}
void put_f16(uint8_t* p, float x) {
  const uint16_t h = Half::from_float(x);
  std::memcpy(p, &h, 2);
}

// The reader of one file: ByteReader with errors naming the file and the field being read.
class Reader : public io::ByteReader {
 public:
  Reader(const char* p, size_t n, const std::string& file) : ByteReader(p, n, file) {}
  std::string field = "header";
  [[noreturn]] void bad(const std::string& what) const override {
    fail("[gguf] {}: {}: {}", name(), field, what);
  }
  uint64_t elements = 0;  // metadata array elements read so far

  Value value(ValueType t, size_t depth) {
    Value v;
    v.type = t;
    switch (t) {
      case ValueType::UInt8:
        v.i = pod<uint8_t>();
        break;
      case ValueType::Int8:
        v.i = pod<int8_t>();
        break;
      case ValueType::UInt16:
        v.i = pod<uint16_t>();
        break;
      case ValueType::Int16:
        v.i = pod<int16_t>();
        break;
      case ValueType::UInt32:
        v.i = pod<uint32_t>();
        break;
      case ValueType::Int32:
        v.i = pod<int32_t>();
        break;
      case ValueType::Int64:
        v.i = pod<int64_t>();
        break;
      case ValueType::UInt64:
        v.u = pod<uint64_t>();
        break;
      case ValueType::Float32:
        v.f = pod<float>();
        break;
      case ValueType::Float64:
        v.f = pod<double>();
        break;
      case ValueType::Bool: {
        const uint8_t b = pod<uint8_t>();
        if (b > 1) bad("a bool of value " + std::to_string(b) + " (expected 0 or 1)");
        v.i = b;
        break;
      }
      case ValueType::String:
        v.s = str();
        break;
      case ValueType::Array: {
        if (depth >= kMaxArrayDepth)
          bad("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
        const uint32_t et = pod<uint32_t>();
        if (!known_value_type(et)) bad("an array of unknown value type " + std::to_string(et));
        v.elem = ValueType(et);
        const size_t each = v.elem == ValueType::String  ? 8
                            : v.elem == ValueType::Array ? 12
                                                         : scalar_bytes(v.elem);
        const uint64_t n = count_of(pod<uint64_t>(), each, "the array");
        if (n > kMaxArrayElements - elements)
          bad("metadata arrays hold more than " + std::to_string(kMaxArrayElements) +
              " elements in all");
        elements += n;
        v.items.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.items.push_back(value(v.elem, depth + 1));
        break;
      }
    }
    return v;
  }
};

}  // namespace

const char* type_name(Type t) {
  const TypeInfo* i = info_of(t);
  return i ? i->name : nullptr;
}
std::optional<Type> type_from_number(uint32_t n) {
  for (const TypeInfo& i : kTypes)
    if (uint32_t(i.type) == n) return i.type;
  return std::nullopt;
}
int64_t block_size(Type t) { return need_info(t).block; }
int64_t block_bytes(Type t) { return need_info(t).bytes; }

const char* value_type_name(ValueType t) {
  static const char* const names[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                      "int32",  "float32", "bool",   "string", "array",
                                      "uint64", "int64",   "float64"};
  return uint32_t(t) <= uint32_t(ValueType::Float64) ? names[uint32_t(t)] : "unknown";
}

// ---------------------------------------------------------------- values

Value Value::of_int(ValueType t, int64_t v) {
  OF_CHECK(is_integer(t) && t != ValueType::UInt64,
           "[gguf] Value::of_int: {} is not a signed-range integer type (of_uint64, of_bool)",
           value_type_name(t));
  const size_t b = scalar_bytes(t);
  const bool is_signed = t == ValueType::Int8 || t == ValueType::Int16 || t == ValueType::Int32 ||
                         t == ValueType::Int64;
  const int64_t lo =
      is_signed ? (b == 8 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (8 * b - 1))) : 0;
  const int64_t hi =
      b == 8 ? std::numeric_limits<int64_t>::max()
             : (is_signed ? (int64_t(1) << (8 * b - 1)) - 1 : (int64_t(1) << (8 * b)) - 1);
  OF_CHECK(t != ValueType::Bool && v >= lo && v <= hi, "[gguf] Value::of_int: {} does not fit a {}",
           v, value_type_name(t));
  Value x;
  x.type = t;
  x.i = v;
  return x;
}
Value Value::of_uint64(uint64_t v) {
  Value x;
  x.type = ValueType::UInt64;
  x.u = v;
  return x;
}
Value Value::of_float(ValueType t, double v) {
  OF_CHECK(t == ValueType::Float32 || t == ValueType::Float64,
           "[gguf] Value::of_float: {} is not a float type", value_type_name(t));
  Value x;
  x.type = t;
  x.f = t == ValueType::Float32 ? double(float(v)) : v;
  return x;
}
Value Value::of_bool(bool v) {
  Value x;
  x.type = ValueType::Bool;
  x.i = v;
  return x;
}
Value Value::of_string(std::string v) {
  Value x;
  x.type = ValueType::String;
  x.s = std::move(v);
  return x;
}
Value Value::of_array(ValueType elem, std::vector<Value> items) {
  for (const Value& v : items)
    OF_CHECK(v.type == elem, "[gguf] Value::of_array: an element of type {} in an array of {}",
             value_type_name(v.type), value_type_name(elem));
  Value x;
  x.type = ValueType::Array;
  x.elem = elem;
  x.items = std::move(items);
  return x;
}
std::optional<int64_t> Value::as_int() const {
  if (!is_integer(type)) return std::nullopt;
  if (type != ValueType::UInt64) return i;
  if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return int64_t(u);
}
std::optional<double> Value::as_float() const {
  if (type == ValueType::Float32 || type == ValueType::Float64) return f;
  if (type == ValueType::UInt64) return double(u);
  if (is_integer(type)) return double(i);
  return std::nullopt;
}
const std::string& Value::str() const {
  OF_CHECK(type == ValueType::String, "[gguf] the value is a {}, not a string",
           value_type_name(type));
  return s;
}
bool Value::operator==(const Value& o) const {
  if (type != o.type) return false;
  switch (type) {
    case ValueType::String:
      return s == o.s;
    case ValueType::Array:
      return elem == o.elem && items == o.items;
    case ValueType::UInt64:
      return u == o.u;
    case ValueType::Float32:
    case ValueType::Float64:
      return std::memcmp(&f, &o.f, sizeof f) == 0;
    default:
      return i == o.i;
  }
}

// ---------------------------------------------------------------- the reader

struct File::Impl {
  std::string name;
  std::shared_ptr<MappedFile> map;  // or
  std::string owned;                // the bytes of from_bytes
  const uint8_t* base = nullptr;
  size_t size = 0;
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment, data_offset = 0;
  std::vector<std::pair<std::string, Value>> metadata;
  std::unordered_map<std::string, size_t> by_key, by_name;
  std::vector<TensorInfo> tensors;

  void parse() {
    Reader r(reinterpret_cast<const char*>(base), size, name);
    if (r.pod<uint32_t>() != kMagic) r.bad("not a GGUF file (no GGUF magic)");
    r.field = "version";
    version = r.pod<uint32_t>();
    if (version != 2 && version != 3)
      r.bad("version " + std::to_string(version) + " is not supported (2 and 3 are)");
    r.field = "tensor_count";
    // (each tensor info: a name's length, n_dims, a dimension, type and offset at least)
    const uint64_t n_tensors = r.count_of(r.pod<uint64_t>(), 8 + 4 + 8 + 4 + 8, "tensor_count");
    r.field = "metadata_kv_count";
    const uint64_t n_kv = r.count_of(r.pod<uint64_t>(), 8 + 4 + 1, "metadata_kv_count");
    metadata.reserve(size_t(n_kv));
    for (uint64_t k = 0; k < n_kv; ++k) {
      r.field = "metadata[" + std::to_string(k) + "].key";
      std::string key = r.str();
      if (key.empty()) r.bad("an empty key");
      if (by_key.count(key)) r.bad("the key '" + key + "' appears twice");
      r.field = "metadata '" + key + "'";
      const uint32_t t = r.pod<uint32_t>();
      if (!known_value_type(t)) r.bad("unknown value type " + std::to_string(t));
      Value v = r.value(ValueType(t), 0);
      by_key.emplace(key, metadata.size());
      metadata.emplace_back(std::move(key), std::move(v));
    }
    if (auto it = by_key.find("general.alignment"); it != by_key.end()) {
      r.field = "metadata 'general.alignment'";
      const Value& a = metadata[it->second].second;
      if (a.type != ValueType::UInt32)
        r.bad(std::string("a ") + value_type_name(a.type) + " (expected uint32)");
      if (a.i == 0 || (a.i & (a.i - 1)) != 0) r.bad(std::to_string(a.i) + " is not a power of two");
      alignment = uint64_t(a.i);
    }
    tensors.reserve(size_t(n_tensors));
    for (uint64_t k = 0; k < n_tensors; ++k) {
      TensorInfo t;
      r.field = "tensor_infos[" + std::to_string(k) + "].name";
      t.name = r.str();
      if (t.name.empty()) r.bad("an empty name");
      if (by_name.count(t.name)) r.bad("the tensor '" + t.name + "' appears twice");
      r.field = "tensor '" + t.name + "'";
      const uint32_t n_dims = r.pod<uint32_t>();
      if (n_dims > uint32_t(kMaxDims))
        r.bad(std::to_string(n_dims) + " dimensions (at most " + std::to_string(kMaxDims) + ")");
      int64_t numel = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t n = r.pod<uint64_t>();
        if (n > uint64_t(std::numeric_limits<int64_t>::max()))
          r.bad("dimension " + std::to_string(d) + " is " + std::to_string(n));
        t.dims.push_back(int64_t(n));
        if (n != 0 && numel > std::numeric_limits<int64_t>::max() / int64_t(n))
          r.bad("its element count overflows");
        numel *= int64_t(n);
      }
      t.numel = numel;
      const uint32_t type = r.pod<uint32_t>();
      const std::optional<Type> ty = type_from_number(type);
      if (!ty) r.bad("tensor type " + std::to_string(type) + " is not supported");
      t.type = *ty;
      const TypeInfo& ti = need_info(t.type);
      const int64_t row = t.dims.empty() ? 1 : t.dims[0];
      if (row % ti.block != 0)
        r.bad(std::string("its first dimension ") + std::to_string(row) + " is not whole " +
              ti.name + " blocks of " + std::to_string(ti.block));
      const uint64_t blocks = uint64_t(numel) / uint64_t(ti.block);
      if (blocks > std::numeric_limits<uint64_t>::max() / uint64_t(ti.bytes))
        r.bad("its byte size overflows");
      t.nbytes = blocks * uint64_t(ti.bytes);
      t.offset = r.pod<uint64_t>();  // relative to the data section, fixed below
      if (t.offset % alignment != 0)
        r.bad("offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
              std::to_string(alignment));
      by_name.emplace(t.name, tensors.size());
      tensors.push_back(std::move(t));
    }
    r.field = "tensor data";
    const uint64_t here = r.position();
    data_offset = here + (alignment - here % alignment) % alignment;
    if (!tensors.empty() && data_offset > size) r.bad("the file ends before its data section");
    std::vector<std::pair<uint64_t, size_t>> order;
    for (size_t k = 0; k < tensors.size(); ++k) {
      TensorInfo& t = tensors[k];
      r.field = "tensor '" + t.name + "'";
      const uint64_t avail = size - std::min<uint64_t>(data_offset, size);
      if (t.offset > avail || t.nbytes > avail - t.offset)
        r.bad("its " + std::to_string(t.nbytes) + " bytes at data offset " +
              std::to_string(t.offset) + " pass the end of the file (" + std::to_string(avail) +
              " data bytes)");
      t.offset += data_offset;
      order.push_back({t.offset, k});
    }
    std::sort(order.begin(), order.end());
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& a = tensors[order[k - 1].second];
      const TensorInfo& b = tensors[order[k].second];
      if (b.offset < a.offset + a.nbytes) {
        r.field = "tensor '" + b.name + "'";
        r.bad("its bytes overlap the tensor '" + a.name + "'");
      }
    }
  }
};

File File::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->name = path;
  impl->map = MappedFile::open(path, "gguf");
  impl->base = reinterpret_cast<const uint8_t*>(impl->map->data());
  impl->size = impl->map->size();
  impl->parse();
  return File(std::move(impl));
}

File File::from_bytes(std::string_view bytes, std::string name) {
  auto impl = std::make_shared<Impl>();
  impl->name = std::move(name);
  impl->owned.assign(bytes);
  impl->base = reinterpret_cast<const uint8_t*>(impl->owned.data());
  impl->size = impl->owned.size();
  impl->parse();
  return File(std::move(impl));
}

uint32_t File::version() const { return impl_->version; }
uint64_t File::alignment() const { return impl_->alignment; }
uint64_t File::data_offset() const { return impl_->data_offset; }
const std::vector<std::pair<std::string, Value>>& File::metadata() const { return impl_->metadata; }
const Value* File::find(std::string_view key) const {
  auto it = impl_->by_key.find(std::string(key));
  return it == impl_->by_key.end() ? nullptr : &impl_->metadata[it->second].second;
}
const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }
const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = impl_->by_name.find(std::string(name));
  return it == impl_->by_name.end() ? nullptr : &impl_->tensors[it->second];
}
const uint8_t* File::data(const TensorInfo& t) const { return impl_->base + t.offset; }

Tensor File::dequantize(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  OF_CHECK(t, "[gguf] {}: no tensor named '{}'", impl_->name, name);
  Tensor out = empty(t->shape(), kFloat32);
  if (t->numel == 0) return out;
  dequantize_row(t->type, data(*t), out.data_ptr<float>(), t->numel);
  return out;
}

// ---------------------------------------------------------------- blocks

namespace {

// Q4_K and Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes.
void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void dequant_block(Type t, const uint8_t* b, float* y) {
  switch (t) {
    case Type::Q4_0: {
      const float d = f16(b);
      const uint8_t* qs = b + 2;
      for (int j = 0; j < 16; ++j) {
        y[j] = float(int(qs[j] & 0xF) - 8) * d;
        y[j + 16] = float(int(qs[j] >> 4) - 8) * d;
      }
      break;
    }
    case Type::Q4_1: {
      const float d = f16(b), m = f16(b + 2);
      const uint8_t* qs = b + 4;
      for (int j = 0; j < 16; ++j) {
        y[j] = float(qs[j] & 0xF) * d + m;
        y[j + 16] = float(qs[j] >> 4) * d + m;
      }
      break;
    }
    case Type::Q5_0: {
      const float d = f16(b);
      uint32_t qh;
      std::memcpy(&qh, b + 2, 4);
      const uint8_t* qs = b + 6;
      for (int j = 0; j < 16; ++j) {
        const int h0 = int(((qh >> j) << 4) & 0x10), h1 = int((qh >> (j + 12)) & 0x10);
        y[j] = float(int((qs[j] & 0xF) | h0) - 16) * d;
        y[j + 16] = float(int((qs[j] >> 4) | h1) - 16) * d;
      }
      break;
    }
    case Type::Q5_1: {
      const float d = f16(b), m = f16(b + 2);
      uint32_t qh;
      std::memcpy(&qh, b + 4, 4);
      const uint8_t* qs = b + 8;
      for (int j = 0; j < 16; ++j) {
        const int h0 = int(((qh >> j) << 4) & 0x10), h1 = int((qh >> (j + 12)) & 0x10);
        y[j] = float((qs[j] & 0xF) | h0) * d + m;
        y[j + 16] = float((qs[j] >> 4) | h1) * d + m;
      }
      break;
    }
    case Type::Q8_0: {
      const float d = f16(b);
      const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
      for (int j = 0; j < 32; ++j) y[j] = float(qs[j]) * d;
      break;
    }
    case Type::Q4_K:
    case Type::Q5_K: {
      const bool five = t == Type::Q5_K;
      const float d = f16(b), dmin = f16(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* qh = b + 16;
      const uint8_t* q = five ? b + 48 : b + 16;
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
        uint8_t sc, m;
        scale_min_k4(is, scales, sc, m);
        const float d1 = d * float(sc), m1 = dmin * float(m);
        scale_min_k4(is + 1, scales, sc, m);
        const float d2 = d * float(sc), m2 = dmin * float(m);
        for (int l = 0; l < 32; ++l) {
          const int h = five && (qh[l] & u1) ? 16 : 0;
          *y++ = d1 * float((q[l] & 0xF) + h) - m1;
        }
        for (int l = 0; l < 32; ++l) {
          const int h = five && (qh[l] & u2) ? 16 : 0;
          *y++ = d2 * float((q[l] >> 4) + h) - m2;
        }
        q += 32;
        u1 = uint8_t(u1 << 2);
        u2 = uint8_t(u2 << 2);
      }
      break;
    }
    case Type::Q6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16(b + 208);
      for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * float(sc[is]) * float(q1);
          y[l + 32] = d * float(sc[is + 2]) * float(q2);
          y[l + 64] = d * float(sc[is + 4]) * float(q3);
          y[l + 96] = d * float(sc[is + 6]) * float(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
      }
      break;
    }
    default:
      fail("[gguf] dequantize: {} is not a block type", type_name(t));
  }
}

// The reference quantizers' casts (C's (int8_t) and (uint8_t) of a float) where the value fits,
// which it does for every finite block; a value out of range (a block of extreme values, whose
// scale overflows or whose inverse does) is clamped instead of being undefined.
int8_t to_i8(float v) {
  if (!(v > -129.0f)) return v != v ? 0 : -128;
  return v < 128.0f ? int8_t(v) : 127;
}
uint8_t to_u8(float v) {
  if (!(v > -1.0f)) return 0;
  return v < 256.0f ? uint8_t(v) : 255;
}

// Q4_0 / Q5_0: the element of largest magnitude, its sign kept (ggml's reference).
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

void quant_block(Type t, const float* x, uint8_t* b) {
  switch (t) {
    case Type::Q8_0: {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;  // (ggml's)
      put_f16(b, d);
      for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(to_i8(std::roundf(x[j] * id)));
      break;
    }
    case Type::Q4_0: {
      const float d = signed_absmax(x, 32) / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
      put_f16(b, d);
      for (int j = 0; j < 16; ++j) {
        const uint8_t q0 = uint8_t(std::min(15, int(to_i8(x[j] * id + 8.5f))));
        const uint8_t q1 = uint8_t(std::min(15, int(to_i8(x[j + 16] * id + 8.5f))));
        b[2 + j] = uint8_t(q0 | (q1 << 4));
      }
      break;
    }
    case Type::Q4_1: {
      float lo = x[0], hi = x[0];
      for (int j = 1; j < 32; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
      }
      const float d = (hi - lo) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
      put_f16(b, d);
      put_f16(b + 2, lo);
      for (int j = 0; j < 16; ++j) {
        const uint8_t q0 = uint8_t(std::min(15, int(to_i8((x[j] - lo) * id + 0.5f))));
        const uint8_t q1 = uint8_t(std::min(15, int(to_i8((x[j + 16] - lo) * id + 0.5f))));
        b[4 + j] = uint8_t(q0 | (q1 << 4));
      }
      break;
    }
    case Type::Q5_0:
    case Type::Q5_1: {
      const bool one = t == Type::Q5_1;
      float d, lo = 0;
      if (one) {
        float hi = x[0];
        lo = x[0];
        for (int j = 1; j < 32; ++j) {
          lo = std::min(lo, x[j]);
          hi = std::max(hi, x[j]);
        }
        d = (hi - lo) / 31.0f;
      } else {
        d = signed_absmax(x, 32) / -16.0f;
      }
      const float id = d != 0 ? 1.0f / d : 0.0f;
      put_f16(b, d);
      if (one) put_f16(b + 2, lo);
      uint32_t qh = 0;
      uint8_t* qs = b + (one ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        uint8_t q0, q1;
        if (one) {
          q0 = to_u8((x[j] - lo) * id + 0.5f);
          q1 = to_u8((x[j + 16] - lo) * id + 0.5f);
        } else {
          q0 = uint8_t(std::min(31, int(to_i8(x[j] * id + 16.5f))));
          q1 = uint8_t(std::min(31, int(to_i8(x[j + 16] * id + 16.5f))));
        }
        qs[j] = uint8_t((q0 & 0x0F) | ((q1 & 0x0F) << 4));
        qh |= uint32_t((q0 & 0x10u) >> 4) << j;
        qh |= uint32_t((q1 & 0x10u) >> 4) << (j + 16);
      }
      std::memcpy(b + (one ? 4 : 2), &qh, 4);
      break;
    }
    default:
      fail("[gguf] quantize: {} is not built yet (the K types)", type_name(t));
  }
}

}  // namespace

void dequantize_row(Type t, const uint8_t* blocks, float* out, int64_t n) {
  const TypeInfo& ti = need_info(t);
  OF_CHECK(n >= 0 && n % ti.block == 0, "[gguf] dequantize: {} elements are not whole {} blocks", n,
           ti.name);
  switch (t) {
    case Type::F32:
      if (n) std::memcpy(out, blocks, size_t(n) * 4);
      return;
    case Type::F16:
      for (int64_t k = 0; k < n; ++k) out[k] = f16(blocks + 2 * k);
      return;
    case Type::BF16:
      for (int64_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, blocks + 2 * k, 2);
        out[k] = BFloat16::to_float(h);
      }
      return;
    default:
      for (int64_t k = 0; k < n / ti.block; ++k)
        dequant_block(t, blocks + k * ti.bytes, out + k * ti.block);
  }
}

std::vector<uint8_t> quantize_row(Type t, const float* x, int64_t n) {
  const TypeInfo& ti = need_info(t);
  OF_CHECK(n >= 0 && n % ti.block == 0, "[gguf] quantize: {} elements are not whole {} blocks", n,
           ti.name);
  if (ti.block > 1)  // (the block quantizers' float-to-integer steps need finite input)
    for (int64_t k = 0; k < n; ++k)
      OF_CHECK(std::isfinite(x[k]), "[gguf] quantize to {}: element {} is {}", ti.name, k, x[k]);
  std::vector<uint8_t> out(size_t(n / ti.block * ti.bytes));
  switch (t) {
    case Type::F32:
      if (n) std::memcpy(out.data(), x, size_t(n) * 4);
      break;
    case Type::F16:
      for (int64_t k = 0; k < n; ++k) put_f16(out.data() + 2 * k, x[k]);
      break;
    case Type::BF16:
      for (int64_t k = 0; k < n; ++k) {
        const uint16_t h = BFloat16::from_float(x[k]);
        std::memcpy(out.data() + 2 * k, &h, 2);
      }
      break;
    default:
      for (int64_t k = 0; k < n / ti.block; ++k)
        quant_block(t, x + k * ti.block, out.data() + k * ti.bytes);
  }
  return out;
}

// ---------------------------------------------------------------- the writer

namespace {

void put_raw(std::string& o, const void* p, size_t n) {
  if (n) o.append(static_cast<const char*>(p), n);  // (an empty vector's data() may be null)
}
template <class T> void put(std::string& o, T v) { put_raw(o, &v, sizeof v); }
void put_str(std::string& o, const std::string& s) {
  put<uint64_t>(o, s.size());
  o += s;
}

void put_value(std::string& o, const Value& v) {
  switch (v.type) {
    case ValueType::UInt8:
      put<uint8_t>(o, uint8_t(v.i));
      break;
    case ValueType::Int8:
      put<int8_t>(o, int8_t(v.i));
      break;
    case ValueType::UInt16:
      put<uint16_t>(o, uint16_t(v.i));
      break;
    case ValueType::Int16:
      put<int16_t>(o, int16_t(v.i));
      break;
    case ValueType::UInt32:
      put<uint32_t>(o, uint32_t(v.i));
      break;
    case ValueType::Int32:
      put<int32_t>(o, int32_t(v.i));
      break;
    case ValueType::Int64:
      put<int64_t>(o, v.i);
      break;
    case ValueType::UInt64:
      put<uint64_t>(o, v.u);
      break;
    case ValueType::Float32:
      put<float>(o, float(v.f));
      break;
    case ValueType::Float64:
      put<double>(o, v.f);
      break;
    case ValueType::Bool:
      put<uint8_t>(o, v.i ? 1 : 0);
      break;
    case ValueType::String:
      put_str(o, v.s);
      break;
    case ValueType::Array:
      put<uint32_t>(o, uint32_t(v.elem));
      put<uint64_t>(o, v.items.size());
      for (const Value& x : v.items) {
        OF_CHECK(x.type == v.elem, "[gguf] save: an element of type {} in an array of {}",
                 value_type_name(x.type), value_type_name(v.elem));
        put_value(o, x);
      }
      break;
  }
}

}  // namespace

std::string to_bytes(const std::vector<std::pair<std::string, Value>>& metadata,
                     const std::vector<SaveTensor>& tensors, uint64_t alignment) {
  OF_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0,
           "[gguf] save: alignment {} is not a power of two", alignment);
  std::vector<std::pair<std::string, Value>> meta = metadata;
  bool has_alignment = false;
  std::unordered_map<std::string, int> keys;
  for (const auto& [k, v] : meta) {
    OF_CHECK(!k.empty() && keys.emplace(k, 0).second, "[gguf] save: the key '{}' is empty or twice",
             k);
    if (k == "general.alignment") {
      OF_CHECK(v.type == ValueType::UInt32 && uint64_t(v.i) == alignment,
               "[gguf] save: metadata's general.alignment disagrees with the alignment {}",
               alignment);
      has_alignment = true;
    }
  }
  if (!has_alignment && alignment != kDefaultAlignment)
    meta.emplace_back("general.alignment", Value::of_int(ValueType::UInt32, int64_t(alignment)));
  std::string o;
  put<uint32_t>(o, kMagic);
  put<uint32_t>(o, 3);
  put<uint64_t>(o, tensors.size());
  put<uint64_t>(o, meta.size());
  for (const auto& [k, v] : meta) {
    put_str(o, k);
    put<uint32_t>(o, uint32_t(v.type));
    put_value(o, v);
  }
  std::unordered_map<std::string, int> names;
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const SaveTensor& t : tensors) {
    OF_CHECK(!t.name.empty() && names.emplace(t.name, 0).second,
             "[gguf] save: the tensor name '{}' is empty or twice", t.name);
    const TypeInfo& ti = need_info(t.type);
    OF_CHECK(t.dims.size() <= size_t(kMaxDims), "[gguf] save: tensor '{}' has {} dimensions",
             t.name, t.dims.size());
    int64_t numel = 1;
    for (int64_t d : t.dims)
      OF_CHECK(d >= 0 && !__builtin_mul_overflow(numel, d, &numel),
               "[gguf] save: tensor '{}' has a negative dimension or too many elements", t.name);
    OF_CHECK((t.dims.empty() ? 1 : t.dims[0]) % ti.block == 0 &&
                 uint64_t(numel / ti.block * ti.bytes) == t.bytes.size(),
             "[gguf] save: tensor '{}' ({}, {} elements) needs {} bytes of whole blocks, has {}",
             t.name, ti.name, numel, numel / ti.block * ti.bytes, t.bytes.size());
    put_str(o, t.name);
    put<uint32_t>(o, uint32_t(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(o, uint64_t(d));
    put<uint32_t>(o, uint32_t(t.type));
    put<uint64_t>(o, offset);
    offsets.push_back(offset);
    offset += t.bytes.size();
    offset += (alignment - offset % alignment) % alignment;
  }
  o.append(size_t((alignment - o.size() % alignment) % alignment), '\0');
  const size_t data_start = o.size();
  for (size_t k = 0; k < tensors.size(); ++k) {
    o.resize(data_start + size_t(offsets[k]), '\0');
    put_raw(o, tensors[k].bytes.data(), tensors[k].bytes.size());
  }
  return o;
}

void save(const std::string& path, const std::vector<std::pair<std::string, Value>>& metadata,
          const std::vector<SaveTensor>& tensors, uint64_t alignment) {
  const std::string bytes = to_bytes(metadata, tensors, alignment);
  write_file_atomically(
      path, [&](int fd) { write_fully(fd, bytes.data(), bytes.size(), path, "gguf.save"); },
      "gguf.save");
}

}  // namespace oneflow::gguf

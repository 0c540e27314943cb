// gguf.h: GGUF files (llama.cpp's format, docs/GGUF.md): a checked, memory-mapped reader of
// versions 2 and 3 — typed metadata, tensor infos, the tensors' bytes in their blocks — block
// dequantization and quantization, and a writer.
//
//   auto f = of::gguf::File::open("SmolLM2-135M-Instruct.Q4_1.gguf");
//   const of::gguf::Value* arch = f.find("general.architecture");   // arch->str() == "llama"
//   const of::gguf::TensorInfo* t = f.find_tensor("blk.0.attn_q.weight");   // Q4_1, [576, 576]
//   of::Tensor w = f.dequantize("blk.0.attn_q.weight");   // float32 [576, 576]
//
// Nothing in a file is trusted: every count, size, offset, type and dimension is checked before
// it is used, and a malformed file raises an of::Error naming the file and the field.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oneflow/tensor.h"

namespace oneflow::gguf {

// The tensor types (ggml's numbering) this library reads and writes.
enum class Type : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};
// "Q4_K" and so on; nullptr for a number that is no Type above.
const char* type_name(Type t);
std::optional<Type> type_from_number(uint32_t n);
// Elements per block (1 for the float types, 32, 256) and bytes per block.
int64_t block_size(Type t);
int64_t block_bytes(Type t);

// The metadata value types (GGUF's numbering).
enum class ValueType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value: a scalar, a string, or an array of one element type (arrays of arrays
// included).
struct Value {
  ValueType type = ValueType::UInt8;
  // a scalar: integers and Bool in `i`, UInt64 in `u`, floats in `f`
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;                      // String
  ValueType elem = ValueType::UInt8;  // Array: its element type
  std::vector<Value> items;           // Array: its elements

  static Value of_int(ValueType t, int64_t v);
  static Value of_uint64(uint64_t v);
  static Value of_float(ValueType t, double v);  // Float32 or Float64
  static Value of_bool(bool v);
  static Value of_string(std::string v);
  static Value of_array(ValueType elem, std::vector<Value> items);

  // The value as a number (any integer type, Bool; nothing for others) or text.
  std::optional<int64_t> as_int() const;
  std::optional<double> as_float() const;  // the float types and the integers
  const std::string& str() const;          // String; raises for another type
  bool operator==(const Value& o) const;
};

struct TensorInfo {
  std::string name;
  Type type = Type::F32;
  // GGUF's order: dims[0] is the fastest (a row's length); the tensor's shape in this library
  // (row-major) is dims reversed.
  std::vector<int64_t> dims;
  uint64_t offset = 0;  // from the start of the file
  uint64_t nbytes = 0;
  int64_t numel = 0;
  std::vector<int64_t> shape() const { return {dims.rbegin(), dims.rend()}; }
};

class File {
 public:
  // Maps and checks the whole file (header, metadata, tensor infos, that every tensor's bytes
  // lie inside the file, aligned, apart).
  static File open(const std::string& path);
  // The same over bytes in memory (copied); `name` names them in errors.
  static File from_bytes(std::string_view bytes, std::string name = "gguf");

  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t data_offset() const;  // where the tensor data section starts
  // In file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const;
  const Value* find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find_tensor(std::string_view name) const;
  // A tensor's bytes (its blocks as stored).
  const uint8_t* data(const TensorInfo& t) const;
  // A tensor as float32 (any type), shape dims reversed; raises for an unknown name.
  Tensor dequantize(std::string_view name) const;

  struct Impl;

 private:
  explicit File(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// `n` elements (a multiple of the block size) from their blocks, as ggml's dequantize_row_*.
void dequantize_row(Type t, const uint8_t* blocks, float* out, int64_t n);
// `n` floats (a multiple of the block size) into blocks, as ggml's reference quantizers
// (quantize_row_*_ref): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; the K types raise (not
// built yet).
std::vector<uint8_t> quantize_row(Type t, const float* x, int64_t n);

struct SaveTensor {
  std::string name;
  Type type = Type::F32;
  std::vector<int64_t> dims;  // GGUF's order (dims[0] fastest)
  std::vector<uint8_t> bytes;
};
// Writes a GGUF v3 file (atomically: a new file renamed over `path`); `general.alignment` is
// added when alignment is not 32 (a power of two) and must agree if metadata has it.
void save(const std::string& path, const std::vector<std::pair<std::string, Value>>& metadata,
          const std::vector<SaveTensor>& tensors, uint64_t alignment = 32);
// The same file's bytes.
std::string to_bytes(const std::vector<std::pair<std::string, Value>>& metadata,
                     const std::vector<SaveTensor>& tensors, uint64_t alignment = 32);

}  // namespace oneflow::gguf

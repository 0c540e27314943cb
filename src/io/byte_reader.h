// byte_reader.h (internal): a bounds-checked reader over bytes in memory (a mapped file, a
// buffer read whole), for the binary file formats (graph files; the GGUF reader to come). Every
// read checks that it fits in what is left before it touches a byte, and a count read from
// the file is checked against the bytes left before anything is allocated for it, so a short or
// hostile file fails with an error naming the file and what was wrong, never a read past the
// end or an allocation sized by the file. Values are read as stored (little-endian on every
// machine this library builds for).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace oneflow::io {

class ByteReader {
 public:
  // `name` names the bytes in errors ("[<name>] <what>"); a format may raise its own way
  // instead by overriding bad().
  ByteReader(const char* p, size_t n, std::string name) : p_(p), n_(n), name_(std::move(name)) {}
  virtual ~ByteReader() = default;

  template <class T> T pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // A string stored as a uint64 byte count, then the bytes.
  std::string str() {
    const uint64_t n = pod<uint64_t>();
    need(n);
    std::string s(p_ + pos_, size_t(n));
    pos_ += size_t(n);
    return s;
  }
  // A uint64 byte count, then the bytes: their start (inside the buffer), `n` set to the count.
  const char* bytes(uint64_t& n) {
    n = pod<uint64_t>();
    need(n);
    const char* r = p_ + pos_;
    pos_ += size_t(n);
    return r;
  }
  // `n` bytes with no count before them.
  std::string_view raw(uint64_t n) {
    need(n);
    std::string_view r(p_ + pos_, size_t(n));
    pos_ += size_t(n);
    return r;
  }
  // A count of items of `each` bytes that the file is about to hold: raises unless that many
  // bytes are left (so a container may be sized by it), else returns it.
  uint64_t count_of(uint64_t count, uint64_t each, const char* what) const {
    if (each != 0 && count > remaining() / each)
      bad(std::string(what) + " counts more items than the bytes left could hold");
    return count;
  }
  void skip(uint64_t k) {
    need(k);
    pos_ += size_t(k);
  }
  // Moves to absolute offset `at` (at most the size).
  void seek(uint64_t at) {
    if (at > n_) bad("an offset past the end");
    pos_ = size_t(at);
  }
  bool done() const { return pos_ == n_; }
  size_t remaining() const { return n_ - pos_; }
  size_t position() const { return pos_; }
  size_t size() const { return n_; }
  const char* here() const { return p_ + pos_; }
  const std::string& name() const { return name_; }
  void need(uint64_t k) const {
    if (k > n_ - pos_) bad("it ends early (truncated)");
  }
  [[noreturn]] virtual void bad(const std::string& what) const;

 private:
  const char* p_;
  size_t n_, pos_ = 0;
  std::string name_;
};

}  // namespace oneflow::io

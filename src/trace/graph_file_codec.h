// graph_file_codec.h (internal): the byte-level pieces graph files are written and read with
// (docs/TRACING.md, "File format"): the header's magic, version and size, a writer of plain
// values, and a bounds-checked reader (io::ByteReader's) whose every read fails cleanly on a
// short or hostile file.
// trace/serialize.cpp writes files; trace/graph_reader.cpp reads and checks them.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "io/byte_reader.h"
#include "oneflow/tensor.h"
#include "trace/graph_checks.h"

namespace oneflow::trace::codec {

inline constexpr char kMagic[8] = {'O', 'F', 'T', 'R', 'A', 'C', 'E', '\0'};
// 1: one graph, captured bytes inline; 2: a kind byte, a blob table, then one graph or the
// structures of a symbolic graph (NOTE [Graph file blobs]); 3: as 2, with the convolution
// family's one attribute order. All three are read (NOTE [Graph file versions]).
inline constexpr uint32_t kVersion = 3;
inline constexpr size_t kHeaderBytes =
    sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t) + sizeof(uint32_t);

class Writer {
 public:
  std::string buf;
  template <class T> void pod(const T& v) {
    buf.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    pod(uint64_t(s.size()));
    buf += s;
  }
  void dims(const DimVector& d) {
    pod(uint32_t(d.size()));
    for (int64_t x : d) pod(x);
  }
  void bytes(const void* p, size_t n) {
    pod(uint64_t(n));
    buf.append(static_cast<const char*>(p), n);
  }
};

// The graph files' reader: io::ByteReader (every read bounds-checked) raising the graph file's
// errors, with the format's dims.
class Reader : public io::ByteReader {
 public:
  Reader(const char* p, size_t n, std::string path) : ByteReader(p, n, path), path_(path) {}
  DimVector dims() {
    const uint32_t n = pod<uint32_t>();
    if (n > 64) bad("a tensor with more than 64 dimensions");
    DimVector d;
    for (uint32_t i = 0; i < n; ++i) d.push_back(pod<int64_t>());
    return d;
  }
  [[noreturn]] void bad(const std::string& what) const override { FileErrors{path_}.bad(what); }
  FileErrors errors() const { return {path_}; }

 private:
  std::string path_;
};

}  // namespace oneflow::trace::codec

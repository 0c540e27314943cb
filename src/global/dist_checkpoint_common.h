// dist_checkpoint_common.h (internal): what saving (dist_checkpoint.cpp) and loading
// (dist_checkpoint_load.cpp) a sharded checkpoint share: the index's fields, the pieces a
// checkpoint holds and their runs of elements, the collectives over the world, the files, the
// optimizer's layout (NOTE [Sharded checkpoints]).
#pragma once
#include "oneflow/dist_checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "io/atomic_file.h"
#include "generator.h"
#include "global/dist_checkpoint_testing.h"
#include "io/dtype_codes.h"
#include "io/json.h"
#include "global/global.h"
#include "oneflow/serialize.h"
#include "oneflow/zero.h"

namespace oneflow::distributed::ckpt {

inline constexpr const char* kFormat = "oneflow-sharded-checkpoint-1";
inline constexpr const char* kIndexName = "index.json";
inline constexpr const char* kSaveOp = "save_checkpoint";
inline constexpr const char* kLoadOp = "load_checkpoint";

inline std::string join_path(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

// ---------------------------------------------------------------- JSON (the index)
// io/json.h's parser and writer (NOTE [One JSON parser]).
using io::append_json_string;
using io::json_ints;
using Json = io::JsonValue;

inline Json parse_index(std::string_view text, const std::string& where) {
  return io::parse_json(
      text,
      {fmt::format("[{}] {}: the index is malformed at byte", kLoadOp, where), "the end", 16});
}

// A field of an index object, of the kind the format says, or an error naming it.
inline const Json& field(const Json& o, std::string_view key, Json::Kind kind,
                         const std::string& where) {
  const Json* v = o.find(key);
  if (!v || v->kind != kind)
    fail("[{}] {}: the index lacks the field '{}' (or it has the wrong type)", kLoadOp, where, key);
  return *v;
}
inline int64_t int_field(const Json& o, std::string_view key, const std::string& where) {
  const std::optional<int64_t> i = field(o, key, Json::Number, where).int64();
  if (!i) fail("[{}] {}: the index field '{}' is not an integer", kLoadOp, where, key);
  return *i;
}
inline DimVector int_list(const Json& o, std::string_view key, const std::string& where) {
  DimVector out;
  for (const Json& x : field(o, key, Json::Array, where).arr) {
    const std::optional<int64_t> i = x.int64();
    if (!i) fail("[{}] {}: '{}' must list integers", kLoadOp, where, key);
    out.push_back(*i);
  }
  return out;
}

// ---------------------------------------------------------------- what a checkpoint holds

// A saved piece: a box [start, end) of the logical tensor, or (flat) the row-major elements
// [start[0], end[0]).
struct PieceDesc {
  std::string entry;
  bool flat = false;
  DimVector start, end;
  int64_t file = -1;  // the rank whose file holds it
  uint32_t crc = 0;   // CRC-32 of its bytes
  int64_t numel() const {
    int64_t n = 1;
    for (size_t d = 0; d < start.size(); ++d) n *= end[d] - start[d];
    return n;
  }
};

struct EntryDesc {
  std::string name;
  ScalarType dtype = kFloat32;
  DimVector shape;
  std::string placement, sbp;  // as saved (for messages and readers)
  std::vector<PieceDesc> pieces;
  std::string describe() const {
    return fmt::format("'{}' ({} {}, saved on {} as {})", name, shape_str(shape), dtype_name(dtype),
                       placement, sbp);
  }
};

inline std::string piece_json(const PieceDesc& p) {
  std::string s = "{\"entry\":";
  append_json_string(s, p.entry);
  s += fmt::format(",\"crc32\":{}", p.crc);
  if (p.flat) s += fmt::format(",\"flat\":[{},{}]}}", p.start[0], p.end[0]);
  else s += ",\"start\":" + json_ints(p.start) + ",\"end\":" + json_ints(p.end) + "}";
  return s;
}

inline uint32_t bytes_crc32(const void* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t done = 0; done < n;) {  // crc32 takes at most 4 GiB at a time
    const size_t k = std::min<size_t>(n - done, size_t(1) << 30);
    crc = crc32(crc, p + done, uInt(k));
    done += k;
  }
  return uint32_t(crc);
}

// ---------------------------------------------------------------- runs of elements

// A contiguous run of a tensor's row-major elements [begin, begin + len), found at element
// `off` of a buffer that holds a region of the tensor.
struct Run {
  int64_t begin = 0, len = 0, off = 0;
};

// The runs of the box [start, start + size) of a row-major tensor of `shape`, in increasing
// order, for a buffer holding the box contiguously (trailing full dims merge into one run).
inline std::vector<Run> box_runs(IntArrayRef shape, IntArrayRef start, IntArrayRef size) {
  const int64_t nd = int64_t(shape.size());
  std::vector<Run> runs;
  for (int64_t d = 0; d < nd; ++d)
    if (size[d] == 0) return runs;
  if (nd == 0) return {{0, 1, 0}};
  DimVector stride(size_t(nd), 1);
  for (int64_t d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  int64_t k = nd - 1;  // dims after k are whole: one run spans dim k's extent
  while (k > 0 && start[k] == 0 && size[k] == shape[k]) --k;
  const int64_t len = size[k] * stride[k];
  DimVector idx(size_t(k), 0);
  int64_t off = 0;
  while (true) {
    int64_t begin = start[k] * stride[k];
    for (int64_t d = 0; d < k; ++d) begin += (start[d] + idx[d]) * stride[d];
    runs.push_back({begin, len, off});
    off += len;
    int64_t d = k - 1;
    while (d >= 0 && ++idx[d] == size[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  return runs;
}

inline std::vector<Run> piece_runs(const PieceDesc& p, IntArrayRef shape) {
  if (p.flat) {
    if (p.end[0] <= p.start[0]) return {};
    return {{p.start[0], p.end[0] - p.start[0], 0}};
  }
  DimVector size(p.start.size());
  for (size_t d = 0; d < size.size(); ++d) size[d] = p.end[d] - p.start[d];
  return box_runs(shape, p.start, size);
}

// Calls f(dst_off, src_off, len) for every stretch the two sorted run lists share; returns the
// number of shared elements.
template <class F>
inline int64_t intersect(const std::vector<Run>& dst, const std::vector<Run>& src, F f) {
  int64_t shared = 0;
  size_t a = 0, b = 0;
  while (a < dst.size() && b < src.size()) {
    const Run &x = dst[a], &y = src[b];
    const int64_t lo = std::max(x.begin, y.begin);
    const int64_t hi = std::min(x.begin + x.len, y.begin + y.len);
    if (lo < hi) {
      f(x.off + (lo - x.begin), y.off + (lo - y.begin), hi - lo);
      shared += hi - lo;
    }
    if (x.begin + x.len <= y.begin + y.len) ++a;
    else ++b;
  }
  return shared;
}

// ---------------------------------------------------------------- collectives on the world

inline global::Communicator& world() { return global::world(); }

inline std::vector<std::string> allgather_strings(const std::string& mine) {
  global::Communicator& c = world();
  const int n = c.size();
  std::vector<int64_t> sizes(static_cast<size_t>(n)), eight(static_cast<size_t>(n), 8);
  const int64_t my = int64_t(mine.size());
  c.allgatherv(&my, sizes.data(), eight);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::string all(size_t(total), '\0');
  c.allgatherv(mine.data(), all.data(), sizes);
  std::vector<std::string> out;
  int64_t off = 0;
  for (int r = 0; r < n; ++r) {
    out.push_back(all.substr(size_t(off), size_t(sizes[size_t(r)])));
    off += sizes[size_t(r)];
  }
  return out;
}

inline std::string broadcast_string(std::string s, int root) {
  global::Communicator& c = world();
  int64_t n = int64_t(s.size());
  c.broadcast(&n, 8, root);
  s.resize(size_t(n));
  if (n > 0) c.broadcast(s.data(), n, root);
  return s;
}

// Every rank passes its error ("" if none); if any rank has one, every rank raises the first
// (naming the rank when it is not the same on every rank).
inline void agree_or_raise(const std::string& error) {
  const std::vector<std::string> all = allgather_strings(error);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    const bool everywhere =
        std::all_of(all.begin(), all.end(), [&](auto& e) { return e == all[r]; });
    if (everywhere || all.size() == 1) throw Error(all[r]);
    throw Error(fmt::format("{} (raised on rank {})", all[r], r));
  }
}

// ---------------------------------------------------------------- files

inline uint32_t file_crc32(const std::string& path, uint64_t* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open it: {}", std::strerror(errno));
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> buf(size_t(1) << 20);
  uint64_t total = 0;
  while (true) {
    const ssize_t k = ::read(fd, buf.data(), buf.size());
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      const int e = errno;
      ::close(fd);
      fail("reading it failed: {}", std::strerror(e));
    }
    if (k == 0) break;
    crc = crc32(crc, buf.data(), uInt(k));
    total += uint64_t(k);
  }
  ::close(fd);
  *bytes = total;
  return uint32_t(crc);
}

inline std::string rank_file_name(int rank, int64_t generation) {
  return fmt::format("rank-{}.gen-{}.safetensors", rank, generation);
}

// The generation of a rank file's name, or -1.
inline int64_t generation_of(const std::string& name) {
  int r = 0;
  long long g = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "rank-%d.gen-%lld.safetensors%n", &r, &g, &used) == 2 &&
      size_t(used) == name.size())
    return g;
  return -1;
}

inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

inline std::string read_text(const std::string& path, bool* missing) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (missing) *missing = errno == ENOENT;
    fail("cannot open it: {}", std::strerror(errno));
  }
  std::string s;
  char buf[65536];
  while (true) {
    const ssize_t k = ::read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    s.append(buf, size_t(k));
  }
  ::close(fd);
  return s;
}

// ---------------------------------------------------------------- the optimizer's layout

inline std::string optimizer_kind(const optim::Optimizer& o) {
  if (dynamic_cast<const ZeroRedundancyAdam*>(&o)) return "ZeroRedundancyAdam";
  if (dynamic_cast<const optim::AdamW*>(&o)) return "AdamW";
  if (dynamic_cast<const optim::Adam*>(&o)) return "Adam";
  if (dynamic_cast<const optim::SGD*>(&o)) return "SGD";
  if (dynamic_cast<const optim::RMSprop*>(&o)) return "RMSprop";
  if (dynamic_cast<const optim::Adagrad*>(&o)) return "Adagrad";
  return "Optimizer";
}

inline std::vector<int64_t> group_sizes(const optim::Optimizer& o) {
  std::vector<int64_t> s;
  for (const auto& g : o.param_groups()) s.push_back(int64_t(g.params().size()));
  return s;
}

// "optim/state.<i>.<buffer>" -> (i, buffer); false for other names.
inline bool parse_state_name(const std::string& name, int64_t* index, std::string* buffer) {
  constexpr std::string_view prefix = "optim/state.";
  if (name.rfind(prefix, 0) != 0) return false;
  size_t pos = prefix.size(), dot = name.find('.', pos);
  if (dot == std::string::npos || dot == pos) return false;
  int64_t i = 0;
  for (size_t k = pos; k < dot; ++k) {
    if (name[k] < '0' || name[k] > '9' || i > (INT64_MAX - 9) / 10) return false;
    i = i * 10 + (name[k] - '0');
  }
  *index = i;
  *buffer = name.substr(dot + 1);
  return !buffer->empty();
}

// Completes the save not yet published, if any (a new save or load waits for it).
void finish_pending();

}  // namespace oneflow::distributed::ckpt

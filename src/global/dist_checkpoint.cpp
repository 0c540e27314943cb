// Sharded checkpoints of global tensors (NOTE [Sharded checkpoints]; docs/GLOBAL.md).
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

// NOTE [Sharded checkpoints]: a checkpoint is a directory holding one safetensors file per
// rank, `rank-<R>.gen-<G>.safetensors`, with the pieces that rank holds of every tensor (one
// copy of each broadcast piece, the copies' holders taking turns by bytes so that data-parallel
// ranks share the writing; partial sums are reduced to broadcast before saving), and
// `index.json`, which rank 0 writes last, once every rank's file is complete: the format, the
// generation G, the world size, each file's size and CRC-32, and per tensor its dtype, logical
// shape, saved placement and SBP and its pieces (file, CRC-32 of the piece's bytes, and the box
// [start, end) per dim of the logical tensor, or a range of its row-major elements for ZeRO's
// flat state). Every file is replaced atomically (NOTE [Atomic file replacement]) and a new save
// writes generation G + 1 beside the files of G, so until the new index is renamed into place
// the old one names complete files: a save that fails or is killed leaves the previous
// checkpoint loadable. After publishing, rank 0 removes the other generations' rank files.
//
// Loading needs no communication but an agreement at the end: each rank computes the box (or
// the flat range, for ZeRO's state) of its current pieces, maps only the files holding saved
// pieces that overlap it (their sizes checked against the index), checks each piece it uses
// against its CRC-32 (so the pages of the other pieces are never read) and assembles its pieces
// from the runs of elements the saved and the wanted regions share. Every rank then all-gathers
// its error (if any), so all raise the same of::Error before any tensor changes, or all apply
// their pieces. Optimizer state is saved per parameter (`optim/state.<i>.<buffer>`, the
// parameter's logical shape, i counting the optimizer's parameters in group order): a
// ZeroRedundancyAdam's flat split state becomes flat ranges of those entries, so Adam and ZeRO
// load each other's checkpoints on any number of ranks.

namespace oneflow::distributed {

namespace testing {
namespace {
IndexFault g_index_fault = IndexFault::kNone;
LoadStats g_load_stats;
}  // namespace
IndexFault set_index_fault(IndexFault fault) { return std::exchange(g_index_fault, fault); }
LoadStats last_load_stats() { return g_load_stats; }
}  // namespace testing

namespace {

constexpr const char* kFormat = "oneflow-sharded-checkpoint-1";
constexpr const char* kIndexName = "index.json";
constexpr const char* kSaveOp = "save_checkpoint";
constexpr const char* kLoadOp = "load_checkpoint";

std::string join_path(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

// ---------------------------------------------------------------- JSON (the index)
// io/json.h's parser and writer (NOTE [One JSON parser]).
using io::append_json_string;
using io::json_ints;
using Json = io::JsonValue;

Json parse_index(std::string_view text, const std::string& where) {
  if (const size_t bad = io::find_bad_utf8(text); bad != std::string_view::npos)
    fail("[{}] {}: the index is malformed at byte {}: not valid UTF-8", kLoadOp, where, bad);
  return io::parse_json(
      text,
      {fmt::format("[{}] {}: the index is malformed at byte", kLoadOp, where), "the end", 16});
}

// A field of an index object, of the kind the format says, or an error naming it.
const Json& field(const Json& o, std::string_view key, Json::Kind kind, const std::string& where) {
  const Json* v = o.find(key);
  if (!v || v->kind != kind)
    fail("[{}] {}: the index lacks the field '{}' (or it has the wrong type)", kLoadOp, where, key);
  return *v;
}
int64_t int_field(const Json& o, std::string_view key, const std::string& where) {
  const std::optional<int64_t> i = field(o, key, Json::Number, where).int64();
  if (!i) fail("[{}] {}: the index field '{}' is not an integer", kLoadOp, where, key);
  return *i;
}
DimVector int_list(const Json& o, std::string_view key, const std::string& where) {
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

std::string piece_json(const PieceDesc& p) {
  std::string s = "{\"entry\":";
  append_json_string(s, p.entry);
  s += fmt::format(",\"crc32\":{}", p.crc);
  if (p.flat) s += fmt::format(",\"flat\":[{},{}]}}", p.start[0], p.end[0]);
  else s += ",\"start\":" + json_ints(p.start) + ",\"end\":" + json_ints(p.end) + "}";
  return s;
}

uint32_t bytes_crc32(const void* data, size_t n) {
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
std::vector<Run> box_runs(IntArrayRef shape, IntArrayRef start, IntArrayRef size) {
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

std::vector<Run> piece_runs(const PieceDesc& p, IntArrayRef shape) {
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
int64_t intersect(const std::vector<Run>& dst, const std::vector<Run>& src, F f) {
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

global::Communicator& world() { return global::world(); }

std::vector<std::string> allgather_strings(const std::string& mine) {
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

std::string broadcast_string(std::string s, int root) {
  global::Communicator& c = world();
  int64_t n = int64_t(s.size());
  c.broadcast(&n, 8, root);
  s.resize(size_t(n));
  if (n > 0) c.broadcast(s.data(), n, root);
  return s;
}

// Every rank passes its error ("" if none); if any rank has one, every rank raises the first
// (naming the rank when it is not the same on every rank).
void agree_or_raise(const std::string& error) {
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

uint32_t file_crc32(const std::string& path, uint64_t* bytes) {
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

std::string rank_file_name(int rank, int64_t generation) {
  return fmt::format("rank-{}.gen-{}.safetensors", rank, generation);
}

// The generation of a rank file's name, or -1.
int64_t generation_of(const std::string& name) {
  int r = 0;
  long long g = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "rank-%d.gen-%lld.safetensors%n", &r, &g, &used) == 2 &&
      size_t(used) == name.size())
    return g;
  return -1;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

std::string read_text(const std::string& path, bool* missing) {
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

std::string optimizer_kind(const optim::Optimizer& o) {
  if (dynamic_cast<const ZeroRedundancyAdam*>(&o)) return "ZeroRedundancyAdam";
  if (dynamic_cast<const optim::AdamW*>(&o)) return "AdamW";
  if (dynamic_cast<const optim::Adam*>(&o)) return "Adam";
  if (dynamic_cast<const optim::SGD*>(&o)) return "SGD";
  if (dynamic_cast<const optim::RMSprop*>(&o)) return "RMSprop";
  if (dynamic_cast<const optim::Adagrad*>(&o)) return "Adagrad";
  return "Optimizer";
}

std::vector<int64_t> group_sizes(const optim::Optimizer& o) {
  std::vector<int64_t> s;
  for (const auto& g : o.param_groups()) s.push_back(int64_t(g.params().size()));
  return s;
}

// "optim/state.<i>.<buffer>" -> (i, buffer); false for other names.
bool parse_state_name(const std::string& name, int64_t* index, std::string* buffer) {
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

}  // namespace

// ---------------------------------------------------------------- saving

struct CheckpointHandle::State {
  std::string dir, file;
  int64_t generation = 0;
  int rank = 0;
  std::vector<EntryDesc> entries;  // what every rank saves (the same list on every rank)
  std::vector<PieceDesc> pieces;   // this rank's
  std::vector<std::pair<std::string, Tensor>> data;
  std::string optimizer_json;  // the index's "optimizer" member, or empty
  std::thread writer;
  std::string error;  // this rank's write failure
  uint64_t bytes = 0;
  uint32_t crc = 0;
  bool done = false;
  ~State() {
    if (writer.joinable()) writer.join();
  }
};

namespace {

using State = CheckpointHandle::State;

// The save that has not been published yet (at most one: a new save or load waits for it).
std::shared_ptr<State>& pending_save() {
  static std::shared_ptr<State> p;
  return p;
}

struct SaveList {
  std::vector<EntryDesc> entries;
  std::vector<std::pair<PieceDesc, Tensor>> mine;
  int rank = 0;
  // bytes charged so far to each copy of broadcast pieces, per placement and set of broadcast
  // axes: a broadcast piece goes to the least charged copy, so that data-parallel ranks share
  // the writing instead of rank 0 writing everything
  std::map<std::string, std::vector<int64_t>> copy_bytes;
};

// Which copy (the index over the broadcast axes) writes a tensor's pieces. Computed from the
// metadata alone, on every rank for every tensor (holding a piece or not), so all agree.
int64_t writer_copy(SaveList& out, const Tensor& t, const NdSbp& sbp) {
  const Placement pl = t.placement();
  int64_t copies = 1, splits = 1;
  std::string key = pl.str() + "|";
  for (size_t a = 0; a < sbp.size(); ++a) {
    const bool b = sbp[a].is_broadcast();
    (b ? copies : splits) *= pl.hierarchy()[a];
    key += b ? 'B' : 'S';
  }
  std::vector<int64_t>& load = out.copy_bytes[key];
  load.resize(size_t(copies), 0);
  const size_t pick = size_t(std::min_element(load.begin(), load.end()) - load.begin());
  load[pick] += t.numel() * int64_t(itemsize(t.dtype())) / splits;
  return int64_t(pick);
}

// A global tensor: its entry, and this rank's piece when this rank is the one that writes it.
void add_global(SaveList& out, const std::string& name, Tensor t, const char* what) {
  if (!t.is_global())
    fail(
        "[{}] {} '{}' is a local tensor: a sharded checkpoint holds global tensors (make the "
        "model global with to_global, or save a local model with of::save)",
        kSaveOp, what, name);
  const Placement pl = t.placement();
  const NdSbp saved_sbp = t.sbp();
  NdSbp sbp = global::partial_to_broadcast(saved_sbp);
  if (sbp != saved_sbp) {  // partial sums are saved reduced (collective over the placement)
    NoGradGuard ng;
    t = t.to_global(pl, sbp);
  }
  out.entries.push_back(EntryDesc{name,
                                  t.dtype(),
                                  DimVector(t.sizes().begin(), t.sizes().end()),
                                  pl.str(),
                                  sbp_str(saved_sbp),
                                  {}});
  const int64_t writer = writer_copy(out, t, sbp);
  const std::vector<int64_t> coord = global::coord_in(pl, kSaveOp);
  if (coord.empty()) return;
  int64_t copy = 0;  // this rank's index among the ranks holding the same piece
  for (size_t a = 0; a < sbp.size(); ++a)
    if (sbp[a].is_broadcast()) copy = copy * pl.hierarchy()[a] + coord[a];
  if (copy != writer) return;  // another rank writes this copy
  const global::Box box = global::piece_box(t.sizes(), sbp, pl, coord);
  PieceDesc p{name, false, box.start, box.start, -1};
  for (size_t d = 0; d < p.end.size(); ++d) p.end[d] += box.size[d];
  if (p.numel() == 0) return;
  out.mine.emplace_back(std::move(p), global::meta(t).local.detach());
}

// A value every rank holds the same (step counts, options): rank 0 writes it.
void add_replicated(SaveList& out, const std::string& name, const Tensor& t) {
  OF_CHECK(!t.is_global(), "[{}] '{}' is expected to be a local value", kSaveOp, name);
  out.entries.push_back(EntryDesc{name,
                                  t.dtype(),
                                  DimVector(t.sizes().begin(), t.sizes().end()),
                                  "every rank (replicated)",
                                  "-",
                                  {}});
  if (out.rank != 0 || t.numel() == 0) return;
  PieceDesc p{name, false, DimVector(t.dim(), 0), DimVector(t.sizes().begin(), t.sizes().end()),
              -1};
  out.mine.emplace_back(std::move(p), t.detach().contiguous());
}

std::string optimizer_json(const optim::Optimizer& o) {
  std::string s = "{\"kind\":";
  append_json_string(s, optimizer_kind(o));
  s += ",\"groups\":" + json_ints(group_sizes(o)) + "}";
  return s;
}

void add_optimizer(SaveList& out, const optim::Optimizer& opt) {
  const std::vector<Tensor> params = opt.parameters();
  std::map<const TensorImpl*, int64_t> index_of;
  for (size_t i = 0; i < params.size(); ++i) index_of.emplace(params[i].impl(), int64_t(i));
  for (const auto& kv : opt.state_dict()) {
    const std::string name = "optim/" + kv.key();
    int64_t i = 0;
    std::string buffer;
    if (parse_state_name(name, &i, &buffer) && buffer != "step")
      add_global(out, name, kv.value(), "optimizer state");
    else add_replicated(out, name, kv.value());
  }
  const auto* zero = dynamic_cast<const ZeroRedundancyAdam*>(&opt);
  if (!zero) return;
  // NOTE [Sharded checkpoints]: the flat split state as flat ranges of per-parameter entries
  const auto groups = zero->split_state();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& st = groups[g];
    if (st.params.empty() || !st.step.defined()) continue;
    std::vector<int64_t> idx, off;
    int64_t total = 0;
    for (const Tensor& p : st.params) {
      idx.push_back(index_of.at(p.impl()));
      off.push_back(total);
      total += p.numel();
    }
    for (size_t k = 0; k < st.params.size(); ++k)
      add_replicated(out, fmt::format("optim/state.{}.step", idx[k]), st.step.to(kInt64));
    for (const auto& [bname, buf] : st.buffers) {
      const Placement pl = buf.placement();
      const NdSbp sbp = buf.sbp();
      for (size_t k = 0; k < st.params.size(); ++k)
        out.entries.push_back(EntryDesc{
            fmt::format("optim/state.{}.{}", idx[k], bname),
            buf.dtype(),
            DimVector(st.params[k].sizes().begin(), st.params[k].sizes().end()),
            pl.str(),
            fmt::format("ZeRO: {} of group {}'s flat vector of {}", sbp_str(sbp), g, total),
            {}});
      const std::vector<int64_t> coord = global::coord_in(pl, kSaveOp);
      if (coord.empty()) continue;
      bool writer = true;
      for (size_t a = 0; a < sbp.size(); ++a)
        writer = writer && !(sbp[a].is_broadcast() && coord[a]);
      if (!writer) continue;
      const global::Box box = global::piece_box(buf.sizes(), sbp, pl, coord);
      const int64_t a0 = box.start[0], n = box.size[0];
      const Tensor local = global::meta(buf).local.detach();
      for (size_t k = 0; k < st.params.size(); ++k) {
        const int64_t lo = std::max(a0, off[k]);
        const int64_t hi = std::min(a0 + n, off[k] + st.params[k].numel());
        if (lo >= hi) continue;
        PieceDesc p{fmt::format("optim/state.{}.{}", idx[k], bname),
                    true,
                    {lo - off[k]},
                    {hi - off[k]},
                    -1};
        out.mine.emplace_back(std::move(p), local.narrow(0, lo - a0, hi - lo));
      }
    }
  }
}

// This rank's file: its pieces (and their CRC-32s), then its size and CRC-32 (read back).
void write_rank_file(State& s) {
  try {
    for (size_t k = 0; k < s.data.size(); ++k)
      s.pieces[k].crc = bytes_crc32(s.data[k].second.data_ptr(), s.data[k].second.nbytes());
    const std::string path = join_path(s.dir, s.file);
    save_tensors(s.data, path,
                 {{"content", "sharded-checkpoint"},
                  {"rank", std::to_string(s.rank)},
                  {"generation", std::to_string(s.generation)}});
    try {
      s.crc = file_crc32(path, &s.bytes);
    } catch (const Error& e) { fail("[{}] {}: {}", kSaveOp, path, e.what()); }
  } catch (const std::exception& e) { s.error = e.what(); }
  s.data.clear();
}

std::string index_json(const State& s, const std::vector<Json>& ranks) {
  std::map<std::string, size_t> at;
  std::vector<std::vector<std::string>> pieces(s.entries.size());
  for (size_t e = 0; e < s.entries.size(); ++e) at.emplace(s.entries[e].name, e);
  std::string files;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Json& j = ranks[r];
    const std::string where = "rank " + std::to_string(r);
    std::string f = "{\"name\":";
    append_json_string(f, rank_file_name(int(r), s.generation));
    f += fmt::format(",\"bytes\":{},\"crc32\":{}}}", int_field(j, "bytes", where),
                     int_field(j, "crc32", where));
    files += (r ? ",\n    " : "") + f;
    for (const Json& p : field(j, "pieces", Json::Array, where).arr) {
      const std::string entry = field(p, "entry", Json::String, where).s;
      auto it = at.find(entry);
      OF_CHECK(it != at.end(), "[{}] rank {} saved a piece of '{}', which rank 0 does not know",
               kSaveOp, r, entry);
      std::string text = fmt::format("{{\"file\":{},\"crc32\":{}", r, int_field(p, "crc32", where));
      if (p.find("flat")) {
        const DimVector flat = int_list(p, "flat", where);
        OF_CHECK(flat.size() == 2, "[{}] {}: a flat piece lists {} bounds", kSaveOp, where,
                 flat.size());
        text += fmt::format(",\"flat\":[{},{}]}}", flat[0], flat[1]);
      } else {
        text += fmt::format(",\"start\":{},\"end\":{}}}", json_ints(int_list(p, "start", where)),
                            json_ints(int_list(p, "end", where)));
      }
      pieces[it->second].push_back(std::move(text));
    }
  }
  std::string out = "{\n  \"format\": ";
  append_json_string(out, kFormat);
  out +=
      fmt::format(",\n  \"generation\": {},\n  \"world_size\": {},\n", s.generation, ranks.size());
  if (!s.optimizer_json.empty()) out += "  \"optimizer\": " + s.optimizer_json + ",\n";
  out += "  \"files\": [\n    " + files + "\n  ],\n  \"entries\": [";
  for (size_t e = 0; e < s.entries.size(); ++e) {
    const EntryDesc& d = s.entries[e];
    out += e ? ",\n    {\"name\":" : "\n    {\"name\":";
    append_json_string(out, d.name);
    out += ",\"dtype\":";
    append_json_string(out, safetensors_dtype(d.dtype));
    out += ",\"shape\":" + json_ints(d.shape) + ",\"placement\":";
    append_json_string(out, d.placement);
    out += ",\"sbp\":";
    append_json_string(out, d.sbp);
    out += ",\"pieces\":[";
    for (size_t k = 0; k < pieces[e].size(); ++k) out += (k ? "," : "") + pieces[e][k];
    out += "]}";
  }
  return out + "\n  ]\n}\n";
}

// Publishes a written save: every rank's outcome is all-gathered; rank 0 writes the index and
// tells the others how that went; then rank 0 removes the other generations' files.
void complete(State& s) {
  if (s.done) return;
  if (s.writer.joinable()) s.writer.join();
  s.done = true;
  if (pending_save().get() == &s) pending_save().reset();
  std::string mine = "{\"error\":";
  append_json_string(mine, s.error);
  mine += fmt::format(",\"bytes\":{},\"crc32\":{},\"pieces\":[", s.bytes, s.crc);
  for (size_t k = 0; k < s.pieces.size(); ++k) mine += (k ? "," : "") + piece_json(s.pieces[k]);
  mine += "]}";
  const std::vector<std::string> all = allgather_strings(mine);
  std::string status;
  if (s.rank == 0) {
    try {
      std::vector<Json> ranks;
      for (size_t r = 0; r < all.size(); ++r) {
        ranks.push_back(parse_index(all[r], "rank " + std::to_string(r)));
        const std::string& err = ranks.back().find("error")->s;
        if (!err.empty()) fail("{} (rank {}; the previous checkpoint stays current)", err, r);
      }
      const std::string text = index_json(s, ranks);
      const std::string path = join_path(s.dir, kIndexName);
      if (testing::g_index_fault == testing::IndexFault::kKill) std::raise(SIGKILL);
      if (testing::g_index_fault == testing::IndexFault::kFail)
        fail("[{}] {}: writing the index failed (injected by the test hook)", kSaveOp, path);
      write_file_atomically(
          path, [&](int fd) { write_fully(fd, text.data(), text.size(), path, kSaveOp); }, kSaveOp);
    } catch (const std::exception& e) {
      status = e.what();
      if (status.empty()) status = "[save_checkpoint] writing the index failed";
    }
  }
  status = broadcast_string(status, 0);
  if (!status.empty()) throw Error(status);
  if (s.rank == 0)
    for (const std::string& name : list_dir(s.dir)) {
      const int64_t g = generation_of(name);
      if (g >= 0 && g != s.generation) ::unlink(join_path(s.dir, name).c_str());
    }
}

void finish_pending() {
  if (std::shared_ptr<State> p = pending_save()) complete(*p);
}

// The highest generation this rank sees in `dir` (its index and its rank files), or 0.
int64_t latest_generation(const std::string& dir) {
  int64_t g = 0;
  for (const std::string& name : list_dir(dir)) g = std::max(g, generation_of(name));
  try {
    const std::string path = join_path(dir, kIndexName);
    const Json idx = parse_index(read_text(path, nullptr), path);
    if (const Json* gen = idx.find("generation"); gen && gen->int64())
      g = std::max(g, *gen->int64());
  } catch (const std::exception&) {  // no index, or one a crash left unreadable: files decide
  }
  return g;
}

}  // namespace

CheckpointHandle save_checkpoint(const std::string& dir, const nn::Module& module,
                                 const optim::Optimizer* optimizer, CheckpointOptions options) {
  finish_pending();
  init();
  OF_CHECK(!dir.empty(), "[{}] the directory is empty", kSaveOp);
  SaveList list;
  list.rank = rank();
  for (const auto& kv : module.state_dict())
    add_global(list, "param/" + kv.key(), kv.value(), "module tensor");
  if (optimizer) add_optimizer(list, *optimizer);
  for (const auto& [name, t] : options.extra) {
    OF_CHECK(
        !name.empty() && t.defined() && !t.is_global(),
        "[{}] extra value '{}' must be a named, defined, local tensor (the same on every rank)",
        kSaveOp, name);
    add_replicated(list, "extra/" + name, t);
  }
  // every rank's default generator, each in its own file (RestoreOptions::random_state)
  for (int r = 0; r < world_size(); ++r)
    list.entries.push_back(EntryDesc{fmt::format("rng/{}", r),
                                     kInt64,
                                     {2},
                                     fmt::format("rank {}'s default generator", r),
                                     "-",
                                     {}});
  {
    const GeneratorState g = random_state();
    Tensor state = empty({2}, TensorOptions(kInt64));
    state.data_ptr<int64_t>()[0] = int64_t(g.seed);
    state.data_ptr<int64_t>()[1] = int64_t(g.offset);
    list.mine.emplace_back(PieceDesc{fmt::format("rng/{}", list.rank), false, {0}, {2}, -1}, state);
  }

  auto s = std::make_shared<State>();
  s->dir = dir;
  s->rank = list.rank;
  s->entries = std::move(list.entries);
  if (optimizer) s->optimizer_json = optimizer_json(*optimizer);
  // the directory and the generation: agreed by every rank (an error anywhere stops all)
  std::string error;
  int64_t latest = 0;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail("[{}] {}: cannot create the directory: {}", kSaveOp, dir, ec.message());
    latest = latest_generation(dir);
  } catch (const std::exception& e) { error = e.what(); }
  agree_or_raise(error);
  for (const std::string& g : allgather_strings(std::to_string(latest)))
    latest = std::max(latest, int64_t(std::stoll(g)));
  s->generation = latest + 1;
  s->file = rank_file_name(s->rank, s->generation);
  {
    NoGradGuard ng;
    for (auto& [piece, t] : list.mine) {
      Tensor host = t.is_cpu() ? t : t.to(Device(kCPU));
      // async: a copy of its own (training goes on writing the parameters); sync: written now
      if (options.async && host.impl() == t.impl()) host = host.contiguous().clone();
      else if (!host.is_contiguous()) host = host.contiguous();
      s->data.emplace_back(piece.entry, std::move(host));
      s->pieces.push_back(std::move(piece));
    }
  }
  CheckpointHandle h(s);
  if (options.async) {
    pending_save() = s;
    State* raw = s.get();
    s->writer = std::thread([raw] { write_rank_file(*raw); });
  } else {
    write_rank_file(*s);
    complete(*s);
  }
  return h;
}

CheckpointHandle& CheckpointHandle::operator=(CheckpointHandle&& other) noexcept {
  if (this != &other) {
    this->~CheckpointHandle();
    new (this) CheckpointHandle(std::move(other));
  }
  return *this;
}

CheckpointHandle::~CheckpointHandle() {
  if (!state_ || state_->done) return;
  if (std::uncaught_exceptions() > 0) {  // no collectives while unwinding: abandon the save
    if (state_->writer.joinable()) state_->writer.join();
    state_->done = true;
    if (pending_save() == state_) pending_save().reset();
    return;
  }
  try {
    complete(*state_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[%s] %s: the save was not published: %s\n", kSaveOp, state_->dir.c_str(),
                 e.what());
  }
}

void CheckpointHandle::wait() {
  if (state_) complete(*state_);
}
bool CheckpointHandle::done() const { return state_ && state_->done; }
int64_t CheckpointHandle::generation() const { return state_ ? state_->generation : 0; }

// ---------------------------------------------------------------- loading

namespace {

struct Index {
  std::string dir;
  int64_t generation = 0, world_size = 0;
  struct File {
    std::string name;
    uint64_t bytes = 0;
    uint32_t crc = 0;
  };
  std::vector<File> files;
  std::vector<EntryDesc> entries;
  std::map<std::string, size_t> by_name;
  bool has_optimizer = false;
  std::string optimizer_kind;
  std::vector<int64_t> groups;
  const EntryDesc* find(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &entries[it->second];
  }
};

Index read_index(const std::string& dir) {
  const std::string path = join_path(dir, kIndexName);
  bool missing = false;
  std::string text;
  try {
    text = read_text(path, &missing);
  } catch (const Error& e) {
    if (missing)
      fail("[{}] {}: no checkpoint here ({} is missing; a save that did not complete writes none)",
           kLoadOp, dir, kIndexName);
    fail("[{}] {}: {}", kLoadOp, path, e.what());
  }
  const Json j = parse_index(text, path);
  Index idx;
  idx.dir = dir;
  if (field(j, "format", Json::String, path).s != kFormat)
    fail("[{}] {}: the format is '{}', expected '{}'", kLoadOp, path, j.find("format")->s, kFormat);
  idx.generation = int_field(j, "generation", path);
  idx.world_size = int_field(j, "world_size", path);
  for (const Json& f : field(j, "files", Json::Array, path).arr) {
    Index::File file;
    file.name = field(f, "name", Json::String, path).s;
    file.bytes = uint64_t(int_field(f, "bytes", path));
    file.crc = uint32_t(int_field(f, "crc32", path));
    if (file.name.find('/') != std::string::npos)
      fail("[{}] {}: the file name '{}' is not a name in the directory", kLoadOp, path, file.name);
    idx.files.push_back(std::move(file));
  }
  if (int64_t(idx.files.size()) != idx.world_size)
    fail("[{}] {}: {} files listed for a world of {}", kLoadOp, path, idx.files.size(),
         idx.world_size);
  if (const Json* o = j.find("optimizer")) {
    idx.has_optimizer = true;
    idx.optimizer_kind = field(*o, "kind", Json::String, path).s;
    for (int64_t g : int_list(*o, "groups", path)) idx.groups.push_back(g);
  }
  for (const Json& e : field(j, "entries", Json::Array, path).arr) {
    EntryDesc d;
    d.name = field(e, "name", Json::String, path).s;
    const std::string code = field(e, "dtype", Json::String, path).s;
    if (!io::dtype_from_code(code, &d.dtype))
      fail("[{}] {}: '{}' has the unknown dtype '{}'", kLoadOp, path, d.name, code);
    d.shape = int_list(e, "shape", path);
    d.placement = field(e, "placement", Json::String, path).s;
    d.sbp = field(e, "sbp", Json::String, path).s;
    int64_t numel = 1;
    for (int64_t n : d.shape) {
      if (n < 0 || __builtin_mul_overflow(numel, n, &numel))
        fail("[{}] {}: '{}' has the impossible shape {}", kLoadOp, path, d.name,
             json_ints(d.shape));
    }
    int64_t covered = 0;
    for (const Json& pj : field(e, "pieces", Json::Array, path).arr) {
      PieceDesc p;
      p.entry = d.name;
      p.file = int_field(pj, "file", path);
      p.crc = uint32_t(int_field(pj, "crc32", path));
      if (p.file < 0 || p.file >= idx.world_size)
        fail("[{}] {}: a piece of '{}' names file {} of {}", kLoadOp, path, d.name, p.file,
             idx.world_size);
      if (pj.find("flat")) {
        DimVector r = int_list(pj, "flat", path);
        if (r.size() != 2 || r[0] < 0 || r[0] > r[1] || r[1] > numel)
          fail("[{}] {}: a flat piece of '{}' lies outside its {} elements", kLoadOp, path, d.name,
               numel);
        p.flat = true;
        p.start = {r[0]};
        p.end = {r[1]};
      } else {
        p.start = int_list(pj, "start", path);
        p.end = int_list(pj, "end", path);
        bool ok = p.start.size() == d.shape.size() && p.end.size() == d.shape.size();
        for (size_t k = 0; ok && k < d.shape.size(); ++k)
          ok = 0 <= p.start[k] && p.start[k] <= p.end[k] && p.end[k] <= d.shape[k];
        if (!ok)
          fail("[{}] {}: a piece of '{}' ({}..{}) lies outside its shape {}", kLoadOp, path, d.name,
               json_ints(p.start), json_ints(p.end), shape_str(d.shape));
      }
      covered += p.numel();
      d.pieces.push_back(std::move(p));
    }
    if (covered != numel)
      fail("[{}] {}: the pieces of '{}' hold {} elements, its shape {} has {}", kLoadOp, path,
           d.name, covered, shape_str(d.shape), numel);
    if (!idx.by_name.emplace(d.name, idx.entries.size()).second)
      fail("[{}] {}: '{}' is listed twice", kLoadOp, path, d.name);
    idx.entries.push_back(std::move(d));
  }
  return idx;
}

// What this rank reads of one saved entry: the runs (in the entry's row-major elements) that
// land in `out` at their offsets.
struct Want {
  const EntryDesc* entry = nullptr;
  std::vector<Run> runs;
  Tensor out;  // contiguous CPU, the entry's dtype
  int64_t need = 0;
  std::string target;  // what receives it, for messages
};

std::string where_str(const Tensor& t) {
  if (!t.is_global()) return "a local tensor";
  return fmt::format("{} as {}", t.placement().str(), sbp_str(t.sbp()));
}

// This rank's piece of `like` (a module tensor or a parameter's buffer): the box it holds of
// the logical tensor, read from `e`. Returns an undefined tensor on a rank outside the
// placement. Partial-sum axes: the rank at coordinate 0 takes the value, the others zeros.
Tensor want_piece(std::vector<Want>& wants, const EntryDesc& e, const Tensor& like,
                  const std::string& target, bool partial_as_broadcast = false) {
  if (!like.is_global()) {
    Tensor out = empty(like.sizes(), TensorOptions(e.dtype));
    wants.push_back(
        {&e, box_runs(e.shape, DimVector(e.shape.size(), 0), e.shape), out, like.numel(), target});
    return out;
  }
  const Placement pl = like.placement();
  const NdSbp sbp = partial_as_broadcast ? global::partial_to_broadcast(like.sbp()) : like.sbp();
  const std::vector<int64_t> coord = global::coord_in(pl, kLoadOp);
  if (coord.empty()) return Tensor();
  const global::Box box = global::piece_box(like.sizes(), sbp, pl, coord);
  for (size_t a = 0; a < sbp.size(); ++a)
    if (sbp[a].is_partial_sum() && coord[a] != 0) return zeros(box.size, TensorOptions(e.dtype));
  Tensor out = empty(box.size, TensorOptions(e.dtype));
  wants.push_back({&e, box_runs(e.shape, box.start, box.size), out, out.numel(), target});
  return out;
}

void check_entry(const std::string& dir, const EntryDesc& e, const Tensor& t,
                 const std::string& what) {
  if (!(IntArrayRef(e.shape) == t.sizes()))
    fail("[{}] {}: shape mismatch for {}: the checkpoint holds {}, the {} is {} on {}", kLoadOp,
         dir, e.describe(), shape_str(e.shape), what, shape_str(t.sizes()), where_str(t));
  if (e.dtype != t.dtype())
    fail("[{}] {}: dtype mismatch for {}: the checkpoint holds {}, the {} is {} ({} on {})",
         kLoadOp, dir, e.describe(), dtype_name(e.dtype), what, dtype_name(t.dtype()),
         shape_str(t.sizes()), where_str(t));
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Reads every wanted region: the files holding overlapping pieces (and only those) are
// checked against the index (size, their own metadata) and mapped; each piece used is checked
// against its CRC-32, so only the pages of the pieces this rank needs are read.
void read_wants(const Index& idx, std::vector<Want>& wants) {
  testing::LoadStats& stats = testing::g_load_stats;
  stats = {};
  std::map<int64_t, const EntryDesc*> files;  // file -> the first entry needing it
  for (const Want& w : wants)
    for (const PieceDesc& p : w.entry->pieces)
      if (!files.count(p.file) &&
          intersect(w.runs, piece_runs(p, w.entry->shape), [](int64_t, int64_t, int64_t) {}) > 0)
        files.emplace(p.file, w.entry);
  std::map<int64_t, std::map<std::string, Tensor>> loaded;
  for (const auto& fe : files) {  // (no structured binding: clang 14 lambdas cannot capture one)
    const int64_t f = fe.first;
    const EntryDesc* first = fe.second;
    const Index::File& file = idx.files[size_t(f)];
    const std::string path = join_path(idx.dir, file.name);
    auto bad = [&](const std::string& why) {
      fail("[{}] {}: {} has a piece in {}, which {}", kLoadOp, idx.dir, first->describe(), path,
           why);
    };
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      bad(fmt::format("cannot be read: {}", std::strerror(errno)));
    if (uint64_t(st.st_size) != file.bytes)
      bad(fmt::format("has {} bytes where the index says {} (truncated or replaced)",
                      uint64_t(st.st_size), file.bytes));
    ++stats.files;
    std::map<std::string, std::string> meta;
    std::vector<std::pair<std::string, Tensor>> tensors;
    try {
      tensors = load_tensors(path, LoadOptions().mmap(true), &meta);
    } catch (const Error& e) { bad(fmt::format("cannot be loaded: {}", e.what())); }
    if (meta["rank"] != std::to_string(f) || meta["generation"] != std::to_string(idx.generation))
      bad(fmt::format("belongs to rank {} of generation {}, not rank {} of generation {}",
                      meta["rank"], meta["generation"], f, idx.generation));
    auto& m = loaded[f];
    for (auto& [name, t] : tensors) m.emplace(name, t);
  }
  std::set<std::pair<int64_t, std::string>> verified;  // (file, entry) pieces checked
  for (Want& w : wants) {
    const EntryDesc& e = *w.entry;
    const size_t es = itemsize(e.dtype);
    char* dst = static_cast<char*>(w.out.data_ptr());
    int64_t covered = 0;
    for (const PieceDesc& p : e.pieces) {
      auto lf = loaded.find(p.file);
      if (lf == loaded.end()) continue;  // no overlap
      const std::vector<Run> src_runs = piece_runs(p, e.shape);
      auto it = lf->second.find(e.name);
      const std::string path = join_path(idx.dir, idx.files[size_t(p.file)].name);
      if (it == lf->second.end()) {
        if (intersect(w.runs, src_runs, [](int64_t, int64_t, int64_t) {}) == 0) continue;
        fail("[{}] {}: {} has a piece in {}, which does not hold it", kLoadOp, idx.dir,
             e.describe(), path);
      }
      const Tensor& src = it->second;
      if (src.dtype() != e.dtype || src.numel() != p.numel())
        fail("[{}] {}: {}: its piece in {} is {} {}, the index says {} elements of {}", kLoadOp,
             idx.dir, e.describe(), path, shape_str(src.sizes()), dtype_name(src.dtype()),
             p.numel(), dtype_name(e.dtype));
      const char* s = static_cast<const char*>(src.data_ptr());
      if (intersect(w.runs, src_runs, [](int64_t, int64_t, int64_t) {}) == 0) continue;
      if (verified.emplace(p.file, e.name).second) {
        const uint32_t crc = bytes_crc32(s, src.nbytes());
        if (crc != p.crc)
          fail(
              "[{}] {}: {} has a piece in {}, which is corrupt: the piece's CRC-32 is {:08x}, "
              "the index says {:08x}",
              kLoadOp, idx.dir, e.describe(), path, crc, p.crc);
        stats.piece_bytes += int64_t(src.nbytes());
      }
      covered += intersect(w.runs, src_runs, [&](int64_t d, int64_t o, int64_t n) {
        std::memcpy(dst + size_t(d) * es, s + size_t(o) * es, size_t(n) * es);
      });
    }
    if (covered != w.need)
      fail("[{}] {}: {}: the saved pieces cover {} of the {} elements this rank needs for {}",
           kLoadOp, idx.dir, e.describe(), covered, w.need, w.target);
  }
}

// What load_checkpoint gives the optimizer once every rank has read its pieces (tensors become
// global, and move to the parameters' device, only then: until read_wants they are empty).
struct OptimizerPlan {
  struct Item {
    std::string key;     // load_state_dict's name
    Tensor piece;        // this rank's piece (CPU), a handle, or the whole value of a local item
    int64_t param = -1;  // the parameter whose placement and SBP the item takes; -1: local
  };
  std::vector<Item> items;
  std::vector<ZeroRedundancyAdam::SplitState> split;  // ZeRO's state (buffers: CPU pieces)
  std::vector<std::vector<Tensor>> zero_steps;        // per group: the steps of its params
};

void plan_optimizer(const Index& idx, optim::Optimizer& opt, std::vector<Want>& wants,
                    OptimizerPlan& plan) {
  const std::string& dir = idx.dir;
  if (!idx.has_optimizer)
    fail("[{}] {}: the checkpoint holds no optimizer state (saved without an optimizer)", kLoadOp,
         dir);
  if (idx.groups != group_sizes(opt))
    fail(
        "[{}] {}: the optimizer's parameter groups have {} parameters, the checkpoint's ({}) have "
        "{}",
        kLoadOp, dir, json_ints(group_sizes(opt)), idx.optimizer_kind, json_ints(idx.groups));
  const std::vector<Tensor> params = opt.parameters();
  // the group options: the same names on both sides (another optimizer family is refused)
  std::vector<std::string> missing, unexpected;
  std::set<std::string> own;
  for (const auto& kv : opt.state_dict())
    if (kv.key().rfind("param_groups.", 0) == 0) own.insert("optim/" + kv.key());
  for (const std::string& k : own)
    if (!idx.find(k)) missing.push_back(k);
  // per parameter: its saved buffers
  std::map<int64_t, std::map<std::string, const EntryDesc*>> state;
  for (const EntryDesc& e : idx.entries) {
    if (e.name.rfind("optim/", 0) != 0) continue;
    if (e.name.rfind("optim/param_groups.", 0) == 0) {
      if (!own.count(e.name)) unexpected.push_back(e.name);
      continue;
    }
    int64_t i = 0;
    std::string buffer;
    if (!parse_state_name(e.name, &i, &buffer)) {
      unexpected.push_back(e.name);
      continue;
    }
    if (i >= int64_t(params.size()))
      fail("[{}] {}: {} belongs to parameter {}, the optimizer has {}", kLoadOp, dir, e.describe(),
           i, params.size());
    state[i][buffer] = &e;
  }
  if (!missing.empty() || !unexpected.empty())
    fail(
        "[{}] {}: the optimizer's options differ from the checkpoint's ({} there): missing from "
        "the checkpoint: [{}]; not in the optimizer: [{}]",
        kLoadOp, dir, idx.optimizer_kind, join(missing), join(unexpected));
  for (const std::string& k : own) {
    const EntryDesc& e = *idx.find(k);
    Tensor like = zeros({}, TensorOptions(e.dtype));
    if (!e.shape.empty()) check_entry(dir, e, like, "option");
    plan.items.push_back({k.substr(6), want_piece(wants, e, like, k), -1});
  }
  for (const auto& [i, bufs] : state) {
    const Tensor& p = params[size_t(i)];
    const std::string pname = fmt::format("optimizer parameter {}", i);
    for (const auto& [buffer, e] : bufs) {
      if (buffer == "step") {
        if (!e->shape.empty())
          fail("[{}] {}: {}: a step count must be a single number", kLoadOp, dir, e->describe());
        continue;
      }
      check_entry(dir, *e, p, pname + "'s " + buffer + " (its parameter)");
    }
    if (!bufs.count("step"))
      fail("[{}] {}: optimizer parameter {} has saved buffers but no step count", kLoadOp, dir, i);
  }
  auto* zero = dynamic_cast<ZeroRedundancyAdam*>(&opt);
  if (!zero) {
    for (const auto& [i, bufs] : state) {
      const Tensor& p = params[size_t(i)];
      for (const auto& [buffer, e] : bufs) {
        const std::string key = fmt::format("state.{}.{}", i, buffer);
        if (buffer == "step") {
          plan.items.push_back(
              {key, want_piece(wants, *e, zeros({}, TensorOptions(e->dtype)), key), -1});
          continue;
        }
        // a buffer of the parameter's placement and SBP (partial sums held as broadcast)
        plan.items.push_back({key, want_piece(wants, *e, p, key, true), p.is_global() ? i : -1});
      }
    }
    return;
  }
  // ZeRO: per group, the parameters with saved state form the flat vector, split S(0)
  int64_t first = 0;
  for (const auto& group : opt.param_groups()) {
    ZeroRedundancyAdam::SplitState st;
    std::vector<int64_t> idxs;
    for (size_t k = 0; k < group.params().size(); ++k)
      if (state.count(first + int64_t(k))) idxs.push_back(first + int64_t(k));
    first += int64_t(group.params().size());
    plan.zero_steps.emplace_back();
    if (idxs.empty()) {
      plan.split.push_back(std::move(st));
      continue;
    }
    const Tensor& p0 = params[size_t(idxs[0])];
    std::set<std::string> names;
    for (const auto& kv : state[idxs[0]]) names.insert(kv.first);
    int64_t total = 0;
    std::vector<int64_t> off;
    for (int64_t i : idxs) {
      const Tensor& p = params[size_t(i)];
      bool broadcast = p.is_global();
      if (broadcast)
        for (const Sbp& s : p.sbp()) broadcast = broadcast && s.is_broadcast();
      if (!broadcast)
        fail(
            "[{}] {}: ZeroRedundancyAdam holds state only for global broadcast parameters; "
            "optimizer parameter {} is {} {}",
            kLoadOp, dir, i, shape_str(p.sizes()), where_str(p));
      if (p.placement() != p0.placement() || p.dtype() != p0.dtype())
        fail("[{}] {}: optimizer parameters {} ({} {}) and {} ({} {}) of one ZeRO group differ",
             kLoadOp, dir, idxs[0], dtype_name(p0.dtype()), where_str(p0), i, dtype_name(p.dtype()),
             where_str(p));
      std::set<std::string> mine;
      for (const auto& kv : state[i]) mine.insert(kv.first);
      if (mine != names)
        fail("[{}] {}: optimizer parameters {} and {} have different saved buffers", kLoadOp, dir,
             idxs[0], i);
      off.push_back(total);
      total += p.numel();
      st.params.push_back(p);
      const EntryDesc& se = *state[i]["step"];
      plan.zero_steps.back().push_back(
          want_piece(wants, se, zeros({}, TensorOptions(se.dtype)), "the ZeRO step count"));
    }
    const Placement pl = p0.placement();
    const NdSbp split(size_t(pl.ndim()), Sbp::split(0));
    const std::vector<int64_t> coord = global::coord_in(pl, kLoadOp);
    for (const std::string& name : names) {
      if (name == "step") continue;
      if (coord.empty()) {
        st.buffers.emplace_back(name,
                                global::make_handle({total}, p0.dtype(), p0.device(), pl, split));
        continue;
      }
      const global::Box box = global::piece_box({total}, split, pl, coord);
      const int64_t a = box.start[0], n = box.size[0];
      Tensor out = empty({n}, TensorOptions(p0.dtype()));
      for (size_t k = 0; k < idxs.size(); ++k) {
        const int64_t lo = std::max(a, off[k]), hi = std::min(a + n, off[k] + st.params[k].numel());
        if (lo >= hi) continue;
        const EntryDesc& e = *state[idxs[k]][name];
        wants.push_back({&e,
                         {{lo - off[k], hi - lo, lo - a}},
                         out,
                         hi - lo,
                         fmt::format("ZeRO's {} of group {}", name, plan.split.size())});
      }
      st.buffers.emplace_back(name, out);
    }
    plan.split.push_back(std::move(st));
  }
}

}  // namespace

std::map<std::string, Tensor> load_checkpoint(const std::string& dir, nn::Module& module,
                                              optim::Optimizer* optimizer, RestoreOptions options) {
  finish_pending();
  init();
  std::map<std::string, Tensor> extras;
  Tensor rng;
  struct ModuleTarget {
    Tensor dst, piece;
  };
  std::vector<ModuleTarget> targets;
  OptimizerPlan plan;
  std::string error;
  try {
    const Index idx = read_index(dir);
    std::vector<Want> wants;
    // the module: the same key set, then each tensor's shape and dtype
    const auto own = module.state_dict();
    std::vector<std::string> missing, unexpected;
    for (const auto& kv : own)
      if (!idx.find("param/" + kv.key())) missing.push_back(kv.key());
    for (const EntryDesc& e : idx.entries)
      if (e.name.rfind("param/", 0) == 0 && !own.contains(e.name.substr(6)))
        unexpected.push_back(e.name.substr(6));
    if (!missing.empty() || !unexpected.empty())
      fail(
          "[{}] {}: the module's keys differ from the checkpoint's: missing from the checkpoint: "
          "[{}]; not in the module: [{}]",
          kLoadOp, dir, join(missing), join(unexpected));
    for (const auto& kv : own) {
      const EntryDesc& e = *idx.find("param/" + kv.key());
      check_entry(dir, e, kv.value(), "module's tensor");
      Tensor piece = want_piece(wants, e, kv.value(), "the module's '" + kv.key() + "'");
      if (piece.defined()) targets.push_back({kv.value(), piece});
    }
    if (optimizer) plan_optimizer(idx, *optimizer, wants, plan);
    for (const EntryDesc& e : idx.entries)
      if (e.name.rfind("extra/", 0) == 0)
        extras[e.name.substr(6)] =
            want_piece(wants, e, zeros(e.shape, TensorOptions(e.dtype)), "the extra value");
    if (options.random_state) {
      if (idx.world_size != world_size())
        fail(
            "[{}] {}: the random generators were saved by {} ranks; they are restored only onto "
            "as many (this world has {})",
            kLoadOp, dir, idx.world_size, world_size());
      const EntryDesc* e = idx.find(fmt::format("rng/{}", rank()));
      if (!e || e->dtype != kInt64 || e->shape != DimVector{2})
        fail("[{}] {}: the checkpoint holds no generator state of rank {}", kLoadOp, dir, rank());
      rng = want_piece(wants, *e, zeros({2}, TensorOptions(kInt64)), "the generator state");
    }
    read_wants(idx, wants);
    for (size_t g = 0; g < plan.zero_steps.size(); ++g) {
      const auto& steps = plan.zero_steps[g];
      for (size_t k = 1; k < steps.size(); ++k)
        if (steps[k].item<int64_t>() != steps[0].item<int64_t>())
          fail(
              "[{}] {}: the parameters of ZeRO group {} were saved with different step counts "
              "({} and {}); ZeroRedundancyAdam keeps one per group",
              kLoadOp, dir, g, steps[0].item<int64_t>(), steps[k].item<int64_t>());
    }
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = fmt::format("[{}] {}: failed", kLoadOp, dir);
  }
  agree_or_raise(error);  // every rank checked and read everything; now all of them apply
  NoGradGuard ng;
  for (auto& t : targets) {
    Tensor dst = t.dst.is_global() ? global::meta(t.dst).local : t.dst;
    dst.copy_(t.piece);
  }
  if (rng.defined())
    set_random_state(
        GeneratorState{uint64_t(rng.data_ptr<int64_t>()[0]), uint64_t(rng.data_ptr<int64_t>()[1])});
  if (!optimizer) return extras;
  const std::vector<Tensor> params = optimizer->parameters();
  OrderedDict<std::string, Tensor> dict;
  for (auto& item : plan.items) {
    if (item.param < 0 || item.piece.is_global()) {
      dict.insert(item.key, item.piece);
      continue;
    }
    const Tensor& p = params[size_t(item.param)];
    const NdSbp sbp = global::partial_to_broadcast(p.sbp());
    dict.insert(item.key,
                item.piece.defined()
                    ? global::make_global(item.piece.to(p.device()), p.sizes(), p.placement(), sbp)
                    : global::make_handle(p.sizes(), p.dtype(), p.device(), p.placement(), sbp));
  }
  optimizer->load_state_dict(dict);
  if (auto* zero = dynamic_cast<ZeroRedundancyAdam*>(optimizer)) {
    for (size_t g = 0; g < plan.split.size(); ++g) {
      auto& st = plan.split[g];
      if (st.params.empty()) continue;
      st.step = plan.zero_steps[g][0].to(kFloat64).reshape({});
      const Placement pl = st.params[0].placement();
      const NdSbp split(size_t(pl.ndim()), Sbp::split(0));
      int64_t total = 0;
      for (const Tensor& p : st.params) total += p.numel();
      for (auto& [name, t] : st.buffers)
        if (!t.is_global())
          t = global::make_global(t.to(st.params[0].device()), {total}, pl, split);
    }
    zero->set_split_state(plan.split);
  }
  return extras;
}

// ---------------------------------------------------------------- ZeRO's split state

std::vector<ZeroRedundancyAdam::SplitState> ZeroRedundancyAdam::split_state() const {
  std::vector<SplitState> out(groups_.size());
  for (size_t g = 0; g < zero_.size() && g < groups_.size(); ++g) {
    const GroupState& z = zero_[g];
    for (const TensorImpl* impl : z.layout)
      for (const Tensor& p : groups_[g].params())
        if (p.impl() == impl) out[g].params.push_back(p);
    out[g].step = z.state.step;
    for (const auto& item : z.state.buffers.items())
      out[g].buffers.emplace_back(item.key(), item.value());
  }
  return out;
}

void ZeroRedundancyAdam::set_split_state(const std::vector<SplitState>& state) {
  OF_CHECK(state.size() == groups_.size(),
           "[ZeroRedundancyAdam] set_split_state: {} groups given, the optimizer has {}",
           state.size(), groups_.size());
  std::vector<GroupState> zero(groups_.size());
  for (size_t g = 0; g < state.size(); ++g) {
    for (const Tensor& p : state[g].params) zero[g].layout.push_back(p.impl());
    zero[g].state.step = state[g].step;
    for (const auto& [name, t] : state[g].buffers) zero[g].state.buffers.insert(name, t);
  }
  zero_ = std::move(zero);
}

}  // namespace oneflow::distributed

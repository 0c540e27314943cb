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

#include "global/dist_checkpoint_common.h"

namespace oneflow::distributed {
using namespace ckpt;

namespace testing {
namespace {
IndexFault g_index_fault = IndexFault::kNone;
}  // namespace
IndexFault set_index_fault(IndexFault fault) { return std::exchange(g_index_fault, fault); }
}  // namespace testing

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
  NdSbp sbp = partial_to_broadcast(saved_sbp);
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

}  // namespace
void ckpt::finish_pending() {
  if (std::shared_ptr<State> p = pending_save()) complete(*p);
}
namespace {

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

}  // namespace oneflow::distributed

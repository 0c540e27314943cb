// dist_checkpoint_load.cpp: loading a sharded checkpoint onto any placement and SBP (NOTE
// [Sharded checkpoints], dist_checkpoint.cpp).
#include "oneflow/dist_checkpoint.h"

#include "global/dist_checkpoint_common.h"

namespace oneflow::distributed {
using namespace ckpt;

namespace testing {
namespace {
LoadStats g_load_stats;
}  // namespace
LoadStats last_load_stats() { return g_load_stats; }
}  // namespace testing

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
  const NdSbp sbp = partial_as_broadcast ? partial_to_broadcast(like.sbp()) : like.sbp();
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
    const NdSbp sbp = partial_to_broadcast(p.sbp());
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

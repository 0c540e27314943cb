// src/io/safetensors.cpp: the safetensors reader/writer (see include/oneflow/serialize.h and
// docs/CHECKPOINT_FORMAT.md). Its JSON is io/json.h's (NOTE [One JSON parser]);
// files are written by write_file_atomically (io/atomic_file.h) and read through a mapping
// (io/mapped_file.h) or pread.
#include "oneflow/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "io/atomic_file.h"
#include "io/dtype_codes.h"
#include "io/json.h"
#include "io/mapped_file.h"
#include "oneflow/ops.h"

namespace oneflow {

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;  // the reference implementation's limit
constexpr int kMaxJsonDepth = 64;

using io::dtype_from_code;

// JSON: io/json.h (NOTE [One JSON parser]).
using io::append_json_string;
using io::find_bad_utf8;
using io::JsonValue;
std::string quoted(std::string_view s) { return io::json_quoted(s); }

// ------------------------------------------------------------------ file helpers

std::string errno_text(int err) { return std::string(std::strerror(err)); }

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at `offset`; false on a short read (the file shrank under us).
bool pread_all(int fd, void* data, size_t n, uint64_t offset, int* err) {
  char* p = static_cast<char*>(data);
  *err = 0;
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t(1) << 30);
    ssize_t r = ::pread(fd, p, chunk, off_t(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (r == 0) return false;
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return true;
}

struct Entry {
  std::string name;
  ScalarType dtype;
  DimVector shape;
  uint64_t begin = 0, end = 0;
  size_t header_index = 0;
  std::string new_name;  // after LoadOptions::rename; empty: dropped
};

// Shapes as the header writes them: [2, 3].
std::string shape_text(const DimVector& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::string_view safetensors_dtype(ScalarType t) {
  if (const char* code = io::safetensors_code(t)) return code;
  fail("[save] dtype {} has no safetensors code", dtype_name(t));
}

// ==================================================================== save

void save_tensors(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& path,
                  const std::map<std::string, std::string>& metadata) {
  OF_CHECK(!path.empty(), "[save] the path is empty");
  if constexpr (std::endian::native != std::endian::little)
    fail("[save] {}: only little-endian hosts are supported", path);

  // 1. Validate everything and make contiguous CPU copies before touching the file system.
  std::set<std::string> names;
  std::vector<Tensor> data;
  data.reserve(named.size());
  {
    NoGradGuard ng;
    for (size_t i = 0; i < named.size(); ++i) {
      const auto& [name, t] = named[i];
      OF_CHECK(!name.empty(), "[save] {}: tensor #{} has an empty name", path, i);
      OF_CHECK(name != "__metadata__",
               "[save] {}: tensor #{} is named \"__metadata__\", which is reserved", path, i);
      OF_CHECK(find_bad_utf8(name) == std::string_view::npos,
               "[save] {}: tensor #{} has a name that is not valid UTF-8: {}", path, i,
               quoted(name));
      OF_CHECK(names.insert(name).second, "[save] {}: duplicate tensor name {} (tensor #{})", path,
               quoted(name), i);
      OF_CHECK(t.defined(), "[save] {}: tensor {} is undefined", path, quoted(name));
      OF_CHECK(!t.is_global(), "[save] {}: tensor {} is a global tensor; save a local tensor", path,
               quoted(name));
      (void)safetensors_dtype(t.dtype());
      Tensor c = t.detach();
      if (!c.is_cpu()) c = c.to(Device(kCPU));
      if (!c.is_contiguous()) c = c.contiguous();
      data.push_back(std::move(c));
    }
  }
  std::map<std::string, std::string> meta = metadata;
  meta.emplace("format", kCheckpointFormat);  // keeps a caller-supplied "format"
  for (const auto& [k, v] : meta) {
    OF_CHECK(find_bad_utf8(k) == std::string_view::npos,
             "[save] {}: metadata key {} is not valid UTF-8", path, quoted(k));
    OF_CHECK(find_bad_utf8(v) == std::string_view::npos,
             "[save] {}: metadata value for key {} is not valid UTF-8", path, quoted(k));
  }

  // 2. The header: compact JSON, __metadata__ first, tensors in the given order.
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [k, v] : meta) {
    if (!first) header += ',';
    first = false;
    append_json_string(header, k);
    header += ':';
    append_json_string(header, v);
  }
  header += '}';
  uint64_t offset = 0;
  for (size_t i = 0; i < named.size(); ++i) {
    const Tensor& c = data[i];
    header += ',';
    append_json_string(header, named[i].first);
    header += ":{\"dtype\":\"";
    header += safetensors_dtype(c.dtype());
    header += "\",\"shape\":[";
    for (int64_t d = 0; d < c.dim(); ++d) {
      if (d) header += ',';
      header += std::to_string(c.size(d));
    }
    uint64_t nbytes = uint64_t(c.nbytes());
    header += fmt::format("],\"data_offsets\":[{},{}]}}", offset, offset + nbytes);
    offset += nbytes;
  }
  header += '}';
  while (header.size() % 8 != 0) header += ' ';
  OF_CHECK(header.size() <= kMaxHeaderBytes,
           "[save] {}: the header would be {} bytes, over the 100 MiB safetensors limit", path,
           header.size());

  // 3. Write it (NOTE [Atomic file replacement]).
  write_file_atomically(
      path,
      [&](int fd) {
        unsigned char len[8];
        uint64_t n = header.size();
        for (int k = 0; k < 8; ++k) len[k] = static_cast<unsigned char>((n >> (8 * k)) & 0xFF);
        write_fully(fd, len, 8, path, "save");
        write_fully(fd, header.data(), header.size(), path, "save");
        for (const Tensor& c : data)
          if (c.nbytes() > 0) write_fully(fd, c.data_ptr(), c.nbytes(), path, "save");
      },
      "save");
}

void save(const Tensor& t, const std::string& path) {
  OF_CHECK(t.defined(), "[save] {}: the tensor is undefined", path);
  save_tensors({{"tensor", t}}, path);
}

// ==================================================================== load

std::vector<std::pair<std::string, Tensor>> load_tensors(
    const std::string& path, std::map<std::string, std::string>* metadata) {
  return load_tensors(path, LoadOptions(), metadata);
}

std::vector<std::pair<std::string, Tensor>> load_tensors(
    const std::string& path, const LoadOptions& options,
    std::map<std::string, std::string>* metadata) {
  if constexpr (std::endian::native != std::endian::little)
    fail("[load] {}: only little-endian hosts are supported", path);
  // Temporaries of this path whose savers were killed (NOTE [Atomic file replacement]).
  remove_stale_temporaries(path);
  // The bytes come from the mapping (NOTE [Mapped checkpoints]) or from pread on `f`.
  std::shared_ptr<MappedFile> map;
  Fd f;
  uint64_t file_size = 0;
  if (options.mmap()) {
    map = MappedFile::open(path, "load");
    file_size = map->size();
  } else {
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) fail("[load] {}: cannot open: {}", path, errno_text(errno));
    struct stat st;
    if (::fstat(f.fd, &st) != 0) fail("[load] {}: cannot stat: {}", path, errno_text(errno));
    if (!S_ISREG(st.st_mode)) fail("[load] {}: not a regular file", path);
    file_size = uint64_t(st.st_size);
  }
  int err = 0;
  auto read_at = [&](void* dst, size_t count, uint64_t offset) {
    if (map) {
      std::memcpy(dst, map->data() + offset, count);  // offset + count <= file_size: checked
      return true;
    }
    return pread_all(f.fd, dst, count, offset, &err);
  };

  // 1. Length field and header.
  if (file_size < 8)
    fail("[load] {}: truncated: the file is {} bytes, shorter than the 8-byte header length field",
         path, file_size);
  unsigned char len[8];
  if (!read_at(len, 8, 0))
    fail("[load] {}: reading the length field failed: {}", path,
         err ? errno_text(err) : "short read");
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= uint64_t(len[k]) << (8 * k);
  if (n > file_size - 8)
    fail(
        "[load] {}: truncated: header says {} header bytes, file has {} bytes after the length "
        "field",
        path, n, file_size - 8);
  if (n > kMaxHeaderBytes)
    fail("[load] {}: header length {} is over the 100 MiB safetensors limit", path, n);
  if (n < 2) fail("[load] {}: header length {} is too short for a JSON object", path, n);
  std::string header_copy;
  std::string_view header;
  if (map) {
    header = std::string_view(map->data() + 8, size_t(n));
  } else {
    header_copy.resize(size_t(n));
    if (!read_at(header_copy.data(), header_copy.size(), 8))
      fail("[load] {}: reading the header failed: {}", path, err ? errno_text(err) : "file shrank");
    header = header_copy;
  }
  if (header[0] != '{')
    fail("[load] {}: header does not start with '{{' (not a safetensors file?)", path);
  JsonValue root =
      io::parse_json(header, {fmt::format("[load] {}: malformed header JSON at header byte", path),
                              "end of header", kMaxJsonDepth});
  if (root.kind != JsonValue::Object) fail("[load] {}: header is not a JSON object", path);

  // 2. Entries.
  std::map<std::string, std::string> meta;
  std::vector<Entry> entries;
  for (auto& [key, v] : root.obj) {
    if (key == "__metadata__") {
      if (v.kind != JsonValue::Object)
        fail("[load] {}: \"__metadata__\" must be an object of strings, found {}", path,
             v.kind_name());
      for (auto& [mk, mv] : v.obj) {
        if (mv.kind != JsonValue::String)
          fail("[load] {}: \"__metadata__\" value for key {} must be a string, found {}", path,
               quoted(mk), mv.kind_name());
        meta[mk] = mv.s;
      }
      continue;
    }
    std::string qn = quoted(key);
    if (v.kind != JsonValue::Object)
      fail("[load] {}: tensor {}: expected an object, found {}", path, qn, v.kind_name());
    const JsonValue *dt = nullptr, *shape = nullptr, *offs = nullptr;
    for (auto& [fk, fv] : v.obj) {
      if (fk == "dtype") dt = &fv;
      else if (fk == "shape") shape = &fv;
      else if (fk == "data_offsets") offs = &fv;
      else fail("[load] {}: tensor {}: unknown field {}", path, qn, quoted(fk));
    }
    if (!dt || !shape || !offs)
      fail("[load] {}: tensor {}: missing field \"{}\"", path, qn,
           !dt      ? "dtype"
           : !shape ? "shape"
                    : "data_offsets");
    Entry e;
    e.name = key;
    e.header_index = entries.size();
    if (dt->kind != JsonValue::String)
      fail("[load] {}: tensor {}: dtype must be a string, found {}", path, qn, dt->kind_name());
    if (!dtype_from_code(dt->s, &e.dtype))
      fail(
          "[load] {}: tensor {}: unknown or unsupported dtype {} (supported: F32 F64 F16 BF16 I32 "
          "I64 U8 BOOL)",
          path, qn, quoted(dt->s));
    if (shape->kind != JsonValue::Array)
      fail("[load] {}: tensor {}: shape must be an array, found {}", path, qn, shape->kind_name());
    // numel * itemsize, with overflow checks
    unsigned __int128 bytes = itemsize(e.dtype);
    bool too_big = false;
    for (const JsonValue& d : shape->arr) {
      if (d.kind != JsonValue::Number || !d.is_uint ||
          d.u > uint64_t(std::numeric_limits<int64_t>::max()))
        fail("[load] {}: tensor {}: shape entries must be non-negative integers, found {}", path,
             qn, d.kind == JsonValue::Number ? d.s : std::string(d.kind_name()));
      e.shape.push_back(int64_t(d.u));
      bytes *= d.u;
      if (bytes > std::numeric_limits<uint64_t>::max()) too_big = true, bytes = 0;
    }
    if (offs->kind != JsonValue::Array || offs->arr.size() != 2)
      fail("[load] {}: tensor {}: data_offsets must be an array [begin, end]", path, qn);
    for (const JsonValue& o : offs->arr)
      if (o.kind != JsonValue::Number || !o.is_uint)
        fail("[load] {}: tensor {}: data_offsets must be non-negative integers, found {}", path, qn,
             o.kind == JsonValue::Number ? o.s : std::string(o.kind_name()));
    e.begin = offs->arr[0].u;
    e.end = offs->arr[1].u;
    if (e.begin > e.end)
      fail("[load] {}: tensor {}: data_offsets [{}, {}] end before they begin", path, qn, e.begin,
           e.end);
    if (too_big || uint64_t(bytes) != e.end - e.begin)
      fail("[load] {}: tensor {}: shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}",
           path, qn, shape_text(e.shape), dt->s,
           too_big ? std::string("more than 2^64") : std::to_string(uint64_t(bytes)), e.begin,
           e.end, e.end - e.begin);
    entries.push_back(std::move(e));
  }
  if (auto it = meta.find("format"); it != meta.end()) {
    std::string_view fmt_v = it->second;
    if (fmt_v.starts_with("oneflow-safetensors-") && fmt_v != kCheckpointFormat)
      fail("[load] {}: written in format {}, this build reads {}", path, quoted(fmt_v),
           kCheckpointFormat);
  }

  // 3. Offsets: sorted, starting at 0, back to back, covering the data section exactly.
  const uint64_t data_start = 8 + n, data_len = file_size - data_start;
  std::vector<Entry*> order;
  for (auto& e : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  for (const Entry* e : order) expected = std::max(expected, e->end);
  if (expected > data_len)
    fail("[load] {}: truncated: header says {} data bytes, file has {}", path, expected, data_len);
  uint64_t cursor = 0;
  for (const Entry* e : order) {
    if (e->begin != cursor)
      fail("[load] {}: tensor {}: data_offsets [{}, {}] {} (expected it to begin at {})", path,
           quoted(e->name), e->begin, e->end,
           e->begin < cursor ? "overlap the previous tensor" : "leave a gap", cursor);
    cursor = e->end;
  }
  if (cursor != data_len)
    fail("[load] {}: trailing garbage: header says {} data bytes, file has {}", path, cursor,
         data_len);

  // 4. Names: the caller's renaming; two tensors may not end up under one name.
  if (const auto& rename = options.rename()) {
    std::map<std::string, const Entry*> by_new_name;
    for (Entry& e : entries) {
      e.new_name = rename(e.name);
      if (e.new_name.empty()) continue;
      auto [it, fresh] = by_new_name.emplace(e.new_name, &e);
      if (!fresh)
        fail("[load] {}: the rename function maps both {} and {} to {}", path,
             quoted(it->second->name), quoted(e.name), quoted(e.new_name));
    }
  } else {
    for (Entry& e : entries) e.new_name = e.name;
  }

  // 5. Data: tensors over the mapping where aligned, else fresh CPU tensors; nothing is
  // returned until all of it is checked.
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(order.size());
  for (const Entry* e : order) {
    if (e->new_name.empty()) continue;
    const size_t nbytes = size_t(e->end - e->begin);
    const uint64_t at = data_start + e->begin;
    Tensor t;
    const char* bytes = nullptr;
    if (map && nbytes > 0 &&
        reinterpret_cast<uintptr_t>(map->data() + at) % itemsize(e->dtype) == 0) {
      t = map->tensor(size_t(at), e->shape, e->dtype);
      bytes = map->data() + at;
    } else {
      try {
        t = empty(e->shape, TensorOptions(e->dtype));
      } catch (const std::exception& ex) {
        fail("[load] {}: tensor {}: cannot allocate shape {} of {}: {}", path, quoted(e->name),
             shape_text(e->shape), safetensors_dtype(e->dtype), ex.what());
      }
      if (nbytes > 0 && !read_at(t.data_ptr(), nbytes, at))
        fail("[load] {}: reading tensor {} failed: {}", path, quoted(e->name),
             err ? errno_text(err) : "the file shrank while being read");
      bytes = static_cast<const char*>(t.data_ptr());
    }
    if (e->dtype == kBool) {
      const unsigned char* b = reinterpret_cast<const unsigned char*>(bytes);
      for (size_t i = 0; i < nbytes; ++i)
        if (b[i] > 1)
          fail("[load] {}: tensor {}: BOOL element {} has byte value {} (must be 0 or 1)", path,
               quoted(e->name), i, unsigned(b[i]));
    }
    out.emplace_back(e->new_name, std::move(t));
  }
  if (metadata) *metadata = std::move(meta);
  return out;
}

void load(Tensor& t, const std::string& path) {
  auto all = load_tensors(path);
  Tensor v;
  for (auto& [name, x] : all)
    if (name == "tensor") v = x;
  if (!v.defined()) {
    if (all.size() == 1) {
      v = all[0].second;
    } else {
      std::string names;
      for (auto& [name, x] : all) names += (names.empty() ? "" : ", ") + quoted(name);
      fail("[load] {}: expected one tensor (named \"tensor\"), found {}: {}", path, all.size(),
           names.empty() ? std::string("none") : names);
    }
  }
  bool rg = t.defined() && t.requires_grad();
  if (rg && !is_floating_point(v.dtype()))
    fail("[load] {}: the tensor being loaded into requires grad, but the file holds {}", path,
         dtype_name(v.dtype()));
  if (t.defined() && !t.is_cpu()) {
    NoGradGuard ng;
    v = v.to(t.device());
  }
  if (rg) v.set_requires_grad(true);
  t = std::move(v);
}

}  // namespace oneflow

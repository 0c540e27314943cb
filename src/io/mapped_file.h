// mapped_file.h (internal): a whole file mapped into memory, copy-on-write, shared by the
// tensors made over it.
//
// NOTE [Mapped checkpoints]: checkpoint loaders map the file (opened read-only; mmap
// MAP_PRIVATE, PROT_READ | PROT_WRITE) and make tensors whose storage points into the mapping,
// so a load copies nothing and touches no page: pages come in on first touch (from the page
// cache when the file was read recently). Each tensor's StorageImpl holds a reference to the
// MappedFile; the file is unmapped when the last such tensor goes. Writing to such a tensor
// copies the touched page (MAP_PRIVATE): the file never changes. Pages not yet written do show
// later in-place writes to the file by other programs (Linux MAP_PRIVATE semantics), and a file
// truncated under the mapping raises SIGBUS on touch; our own savers never do either
// (NOTE [Atomic file replacement] writes a new inode and renames it).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "oneflow/tensor.h"

namespace oneflow {

class MappedFile : public std::enable_shared_from_this<MappedFile> {
 public:
  // Maps the regular file `path` whole. Errors: "[<op>] <path>: cannot open: ...", "not a
  // regular file", "cannot map: ...". An empty file maps to data() == nullptr, size() == 0.
  static std::shared_ptr<MappedFile> open(const std::string& path, const char* op);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // A CPU storage over bytes [offset, offset + nbytes) that keeps this mapping alive.
  Storage storage(size_t offset, size_t nbytes);
  // A contiguous CPU tensor of `shape` and `dtype` over the bytes at `offset` (which the caller
  // has checked: inside the file and aligned to the dtype's size), keeping the mapping alive.
  Tensor tensor(size_t offset, IntArrayRef shape, ScalarType dtype);

 private:
  MappedFile(std::string path, char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  char* data_;
  size_t size_;
};

}  // namespace oneflow

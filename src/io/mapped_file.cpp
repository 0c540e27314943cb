// mapped_file.cpp: NOTE [Mapped checkpoints] (io/mapped_file.h).
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "oneflow/ops.h"

namespace oneflow {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path, const char* op) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("[{}] {}: cannot open: {}", op, path, std::strerror(errno));
  struct stat st;
  const int stat_rc = ::fstat(fd, &st);
  const int stat_err = errno;
  if (stat_rc != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    if (stat_rc != 0) fail("[{}] {}: cannot stat: {}", op, path, std::strerror(stat_err));
    fail("[{}] {}: not a regular file", op, path);
  }
  const size_t size = size_t(st.st_size);
  void* p = nullptr;
  if (size > 0) {
    // Writable private pages: tensors over them may be written in place (copy-on-write).
    // MAP_NORESERVE: no swap is reserved for pages that are only read.
    p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail("[{}] {}: cannot map {} bytes: {}", op, path, size, std::strerror(err));
    }
  }
  ::close(fd);  // the mapping keeps the file open
  return std::shared_ptr<MappedFile>(new MappedFile(path, static_cast<char*>(p), size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

Storage MappedFile::storage(size_t offset, size_t nbytes) {
  OF_CHECK(offset <= size_ && nbytes <= size_ - offset,
           "[mmap] {}: bytes [{}, {}) are outside the {}-byte file", path_, offset, offset + nbytes,
           size_);
  return std::make_shared<StorageImpl>(data_ + offset, nbytes, Device(kCPU),
                                       [keep = shared_from_this()](void*) {});
}

Tensor MappedFile::tensor(size_t offset, IntArrayRef shape, ScalarType dtype) {
  unsigned __int128 bytes = itemsize(dtype);
  for (size_t d = 0; d < shape.size(); ++d) {
    OF_CHECK(shape[d] >= 0, "[mmap] {}: negative size {} in a tensor shape", path_, shape[d]);
    bytes = std::min<unsigned __int128>(bytes * uint64_t(shape[d]), ~uint64_t(0));
  }
  OF_CHECK(offset <= size_ && bytes <= size_ - offset &&
               reinterpret_cast<uintptr_t>(data_ + offset) % itemsize(dtype) == 0,
           "[mmap] {}: a {} tensor of {} bytes does not fit at byte {} of the {}-byte file", path_,
           dtype_name(dtype), uint64_t(bytes), offset, size_);
  return from_blob(
      data_ + offset, shape, [keep = shared_from_this()](void*) {}, TensorOptions(dtype));
}

}  // namespace oneflow

// atomic_file.h (internal): replacing a file atomically without leaking temporaries.
//
// NOTE [Atomic file replacement]: the new bytes are written to a file of their own in the
// target's directory, fsync'ed, and renamed over the target, so a reader sees either the old
// file or the whole new one. The temporary is an O_TMPFILE inode (no name: a process killed
// while writing leaves nothing behind; the kernel frees the inode), which is given a name only
// once complete (linkat through /proc/self/fd) and then renamed over the target. Where
// O_TMPFILE or /proc is missing, the temporary is the named file `.<basename>.oftmp.<pid>.<n>`
// instead. Either way the temporary is flock'ed while it exists, and every save or load of the
// same path first removes the temporaries of that path left by processes that are gone
// (kill(pid, 0) says ESRCH and the lock is free), including the `<basename>.tmp.<pid>` files
// of earlier versions.
#pragma once
#include <functional>
#include <string>

namespace oneflow {

// Writes `path` by calling `write(fd)` on a fresh temporary in the same directory, then fsync,
// rename over `path`, fsync of the directory (best effort). On any failure (write throwing
// included) the temporary is gone and an existing `path` is untouched; errors are of::Error
// "[<op>] <path>: ...". `write` must write the whole content from the start of fd.
void write_file_atomically(const std::string& path, const std::function<void(int fd)>& write,
                           const char* op);

// write(2) of all n bytes, retrying short writes and EINTR; "[<op>] <path>: writing ... failed".
void write_fully(int fd, const void* data, size_t n, const std::string& path, const char* op);

// Removes the temporaries of `path` (both name patterns above) whose writer is gone; never
// throws, and leaves alone anything it cannot prove stale. Returns how many it removed.
int remove_stale_temporaries(const std::string& path);

// Testing hook: false makes write_file_atomically use the named temporary even where
// O_TMPFILE works (process-wide; returns the previous setting).
bool set_atomic_write_tmpfile(bool enabled);

}  // namespace oneflow

// serialize.h: of::save / of::load and named-tensor checkpoints in the safetensors layout.
//
// File = 8-byte little-endian u64 N, N bytes of UTF-8 JSON header (padded with spaces to a
// multiple of 8), then the raw little-endian tensor bytes, row-major, back to back in header
// order. See docs/CHECKPOINT_FORMAT.md. Files written here are readable by the safetensors
// reference tools, and files written by them (with the dtypes below) are readable here.
//
// Writes are atomic: the file goes to an unnamed temporary in the same directory, is fsync'ed
// and renamed over `path`; a save that fails or is killed leaves no temporary behind and an
// existing `path` untouched. Loads map the file and make tensors over its bytes (no copy;
// LoadOptions().mmap(false) reads into owned memory instead). They check the whole file
// before returning anything; every problem is an of::Error that starts with
// "[load] <path>: ..." ("[save] <path>: ..." for writes).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "oneflow/tensor.h"

namespace oneflow {

// The value save_tensors stores under the "format" metadata key unless the caller sets one.
inline constexpr const char* kCheckpointFormat = "oneflow-safetensors-1";

// The safetensors dtype code of `t` ("F32", "F64", "F16", "BF16", "I32", "I64", "U8", "BOOL").
std::string_view safetensors_dtype(ScalarType t);

// Writes `named` in order. Names must be non-empty, unique, valid UTF-8 and not
// "__metadata__"; tensors must be defined (CUDA or non-contiguous tensors are written from a
// contiguous CPU copy; autograd state is not saved). `metadata` goes to "__metadata__";
// "format" = kCheckpointFormat is added unless `metadata` has a "format" key of its own.
void save_tensors(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& path,
                  const std::map<std::string, std::string>& metadata = {});

// How a checkpoint is read: load_tensors and of::load(module, path, options) (checkpoint.h).
class LoadOptions {
 public:
  // true (default): map the file and make tensors over its bytes where their alignment allows
  // (no copy at load; pages come in on first touch; writing to such a tensor copies the page,
  // the file never changes; the mapping lives as long as any tensor over it). false: read
  // every tensor into memory of its own.
  LoadOptions& mmap(bool on) {
    mmap_ = on;
    return *this;
  }
  bool mmap() const { return mmap_; }
  // Renames each tensor of the file (e.g. Hugging Face names to this model's); returning ""
  // drops the tensor. Two names renamed to one are an error.
  LoadOptions& rename(std::function<std::string(const std::string&)> f) {
    rename_ = std::move(f);
    return *this;
  }
  const std::function<std::string(const std::string&)>& rename() const { return rename_; }
  // Module loads only: true (default) raises on missing or unexpected keys; false loads the
  // keys both sides have and reports the others (IncompatibleKeys).
  LoadOptions& strict(bool on) {
    strict_ = on;
    return *this;
  }
  bool strict() const { return strict_; }

 private:
  bool mmap_ = true;
  bool strict_ = true;
  std::function<std::string(const std::string&)> rename_;
};

// Reads every tensor of a safetensors file, as contiguous CPU tensors, in the order of their
// data in the file (which is the order they were given to save_tensors). When `metadata` is
// non-null it receives the "__metadata__" entries (cleared first; left empty if none).
std::vector<std::pair<std::string, Tensor>> load_tensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr);
// The same, mapped or read as `options` says, under the names options.rename() gives.
std::vector<std::pair<std::string, Tensor>> load_tensors(
    const std::string& path, const LoadOptions& options,
    std::map<std::string, std::string>* metadata = nullptr);

// libtorch's torch::save(tensor, path): one tensor, stored under the name "tensor".
void save(const Tensor& t, const std::string& path);

// libtorch's torch::load(tensor, path): `t` is replaced by the stored tensor (the entry named
// "tensor", or the only entry of a one-tensor file). The new value has the file's dtype and
// shape and is a fresh leaf; if `t` was defined on a non-CPU device it is moved there, and if
// `t` required grad the new value requires grad too. Other handles to t's old value are not
// changed (to update parameters in place, load_tensors and copy_ under NoGradGuard).
void load(Tensor& t, const std::string& path);

}  // namespace oneflow

// checkpoint.h: of::save / of::load for modules and optimizers (libtorch's torch::save /
// torch::load spellings), on the safetensors files of serialize.h (docs/CHECKPOINT_FORMAT.md).
#pragma once
#include <memory>
#include <string>
#include <type_traits>

#include "oneflow/nn/module.h"
#include "oneflow/optim.h"
#include "oneflow/serialize.h"

namespace oneflow {

using nn::IncompatibleKeys;

// Writes the module's state dict (parameters and buffers by dotted name, PyTorch's names),
// atomically; PyTorch's safetensors.torch.load_file + load_state_dict read it back exactly.
void save(const nn::Module& module, const std::string& path);
// Reads a file written by save(module) into the module. The file is verified completely and
// every key/shape/dtype checked before any parameter changes (strict: key sets must match).
void load(nn::Module& module, const std::string& path, bool strict = true);
// The same for any safetensors state dict (PyTorch's, Hugging Face's): names pass through
// options.rename() ("" drops one); F16/BF16/F32/F64 entries are converted to the parameter's
// dtype; options.strict(false) loads the keys both sides have and returns the others.
IncompatibleKeys load(nn::Module& module, const std::string& path, const LoadOptions& options);
// Optimizer state (per-parameter buffers, step counts, group options).
void save(const optim::Optimizer& optimizer, const std::string& path);
void load(optim::Optimizer& optimizer, const std::string& path);

template <class Impl> void save(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  save(static_cast<const nn::Module&>(*module), path);
}
template <class Impl>
void load(nn::ModuleHolder<Impl>& module, const std::string& path, bool strict = true) {
  load(static_cast<nn::Module&>(*module), path, strict);
}
template <class Impl>
IncompatibleKeys load(nn::ModuleHolder<Impl>& module, const std::string& path,
                      const LoadOptions& options) {
  return load(static_cast<nn::Module&>(*module), path, options);
}
template <class M, class = std::enable_if_t<std::is_base_of_v<nn::Module, M>>>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  save(static_cast<const nn::Module&>(*module), path);
}
template <class M, class = std::enable_if_t<std::is_base_of_v<nn::Module, M>>>
void load(const std::shared_ptr<M>& module, const std::string& path, bool strict = true) {
  load(static_cast<nn::Module&>(*module), path, strict);
}
template <class M, class = std::enable_if_t<std::is_base_of_v<nn::Module, M>>>
IncompatibleKeys load(const std::shared_ptr<M>& module, const std::string& path,
                      const LoadOptions& options) {
  return load(static_cast<nn::Module&>(*module), path, options);
}

}  // namespace oneflow

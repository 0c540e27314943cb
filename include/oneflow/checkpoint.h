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

// Writes the module's state dict (parameters and buffers by dotted name), atomically.
void save(const nn::Module& module, const std::string& path);
// Reads a file written by save(module) into the module. The file is verified completely and
// every key/shape/dtype checked before any parameter changes (strict: key sets must match).
void load(nn::Module& module, const std::string& path, bool strict = true);
// Optimizer state (per-parameter buffers, step counts, group options).
void save(const optim::Optimizer& optimizer, const std::string& path);
void load(optim::Optimizer& optimizer, const std::string& path);

template <class Impl>
void save(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  save(static_cast<const nn::Module&>(*module), path);
}
template <class Impl>
void load(nn::ModuleHolder<Impl>& module, const std::string& path, bool strict = true) {
  load(static_cast<nn::Module&>(*module), path, strict);
}
template <class M, class = std::enable_if_t<std::is_base_of_v<nn::Module, M>>>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  save(static_cast<const nn::Module&>(*module), path);
}
template <class M, class = std::enable_if_t<std::is_base_of_v<nn::Module, M>>>
void load(const std::shared_ptr<M>& module, const std::string& path, bool strict = true) {
  load(static_cast<nn::Module&>(*module), path, strict);
}

}  // namespace oneflow

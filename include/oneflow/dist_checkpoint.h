// dist_checkpoint.h: sharded checkpoints of global models and their optimizers, written piece by
// piece on every rank (nothing is gathered) and read back onto whatever placements and SBPs the
// loading program uses: saved on 4 data-parallel ranks, loaded on 2; saved tensor parallel,
// loaded on one process; saved under ZeRO, loaded by plain Adam and back. docs/GLOBAL.md,
// "Sharded checkpoints", describes the directory layout and the guarantees.
//
//   of::distributed::save_checkpoint("ckpt", *model, optimizer);          // every rank calls it
//   auto h = of::distributed::save_checkpoint("ckpt", *model, optimizer, {.async = true});
//   ... training steps ...;  h.wait();                                    // every rank
//   of::distributed::load_checkpoint("ckpt", *model, optimizer);          // any world size
//
// Local (non-global) modules keep using of::save / of::load (checkpoint.h).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oneflow/nn/module.h"
#include "oneflow/optim.h"

namespace oneflow::distributed {

struct CheckpointOptions {
  // false: save_checkpoint returns once the checkpoint is complete. true: it copies this rank's
  // pieces to host buffers and returns; a background thread writes them, and the handle's
  // wait() (collective) publishes the index once every rank's file is written.
  bool async = false;
  // Named values saved beside the model (a training loop's step, its data order): local
  // tensors holding the same value on every rank, written by rank 0 (copied at the call);
  // load_checkpoint returns them.
  std::vector<std::pair<std::string, Tensor>> extra;
};

struct RestoreOptions {
  // Also set each rank's default random generator (of::manual_seed's) to the state it had when
  // the checkpoint was saved (every save records it): a resumed run draws what the interrupted
  // one would have. Only onto the world size the checkpoint was saved on.
  bool random_state = false;
};

// A save in progress. wait() is collective (every rank calls it): it waits for this rank's file,
// then rank 0 writes the index that makes the checkpoint the directory's current one, and every
// rank raises the same of::Error if any rank's write failed (the previous checkpoint then stays
// current). A synchronous save returns a handle that is already complete. The next
// save_checkpoint or load_checkpoint waits for an unfinished save first, and so does the
// destructor (except while an exception unwinds: the save is then abandoned, not published).
class CheckpointHandle {
 public:
  CheckpointHandle() = default;
  CheckpointHandle(CheckpointHandle&&) noexcept = default;
  CheckpointHandle& operator=(CheckpointHandle&& other) noexcept;
  ~CheckpointHandle();
  void wait();
  // True once wait() has published the checkpoint (or a synchronous save returned).
  bool done() const;
  // The checkpoint's generation (1 for the first save into a directory, then 2, 3, ...).
  int64_t generation() const;
  struct State;

 private:
  explicit CheckpointHandle(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
  friend CheckpointHandle save_checkpoint(const std::string&, const nn::Module&,
                                          const optim::Optimizer*, CheckpointOptions);
};

// Writes `module`'s state dict (parameters and buffers, which must be global tensors) and, when
// given, the optimizer's state (per-parameter buffers and step counts, the split state of
// ZeroRedundancyAdam included, and the group options) to `dir`: each rank writes the pieces it
// holds (one copy of each broadcast piece) to its own file, then rank 0 writes `index.json`.
// Collective over the world; `dir` is created if needed and must be shared by the ranks.
CheckpointHandle save_checkpoint(const std::string& dir, const nn::Module& module,
                                 const optim::Optimizer* optimizer, CheckpointOptions options = {});
inline CheckpointHandle save_checkpoint(const std::string& dir, const nn::Module& module,
                                        const optim::Optimizer& optimizer,
                                        CheckpointOptions options = {}) {
  return save_checkpoint(dir, module, &optimizer, options);
}
inline CheckpointHandle save_checkpoint(const std::string& dir, const nn::Module& module,
                                        CheckpointOptions options = {}) {
  return save_checkpoint(dir, module, nullptr, options);
}

// Reads the directory's current checkpoint into `module` (and the optimizer's state, when
// given) on their current placements and SBPs: each rank reads only the saved pieces that
// overlap the pieces it holds. Every check (index, files and their checksums, key sets,
// shapes, dtypes) passes on every rank before anything changes; otherwise every rank raises an
// of::Error naming the tensor. A local tensor of the module receives the whole value. Returns
// the values saved with CheckpointOptions::extra, by name. Collective over the world.
std::map<std::string, Tensor> load_checkpoint(const std::string& dir, nn::Module& module,
                                              optim::Optimizer* optimizer,
                                              RestoreOptions options = {});
inline std::map<std::string, Tensor> load_checkpoint(const std::string& dir, nn::Module& module,
                                                     optim::Optimizer& optimizer,
                                                     RestoreOptions options = {}) {
  return load_checkpoint(dir, module, &optimizer, options);
}
inline std::map<std::string, Tensor> load_checkpoint(const std::string& dir, nn::Module& module,
                                                     RestoreOptions options = {}) {
  return load_checkpoint(dir, module, nullptr, options);
}

// The same for module holders (nn::Sequential, nn::Linear, ...) and shared pointers to modules.
template <class H>
concept ModuleHandle = requires(H& h) {
  static_cast<nn::Module&>(*h);
};
template <ModuleHandle H>
CheckpointHandle save_checkpoint(const std::string& dir, const H& module,
                                 const optim::Optimizer& optimizer,
                                 CheckpointOptions options = {}) {
  return save_checkpoint(dir, static_cast<const nn::Module&>(*module), &optimizer, options);
}
template <ModuleHandle H>
CheckpointHandle save_checkpoint(const std::string& dir, const H& module,
                                 CheckpointOptions options = {}) {
  return save_checkpoint(dir, static_cast<const nn::Module&>(*module), nullptr, options);
}
template <ModuleHandle H>
std::map<std::string, Tensor> load_checkpoint(const std::string& dir, H& module,
                                              optim::Optimizer& optimizer,
                                              RestoreOptions options = {}) {
  return load_checkpoint(dir, static_cast<nn::Module&>(*module), &optimizer, options);
}
template <ModuleHandle H>
std::map<std::string, Tensor> load_checkpoint(const std::string& dir, H& module,
                                              RestoreOptions options = {}) {
  return load_checkpoint(dir, static_cast<nn::Module&>(*module), nullptr, options);
}

}  // namespace oneflow::distributed

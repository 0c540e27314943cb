// graph_io.h (internal): writing and reading graph files (the format and its validation:
// trace/serialize.cpp, trace/file_format.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "trace/graph.h"

namespace oneflow::trace {

void save_graph(const Graph& g, const std::string& path);
// Whether a graph is a training step (it reads or sets the .grad of tensors).
bool is_training_step(const Graph& g);
// Saves a training step with its state (NOTE [Saved training steps]); `names` name the
// tensors it reads or updates (parameters, buffers, optimizer state), the rest get generic ones.
void save_training(const Graph& g, const std::string& path,
                   const std::vector<std::pair<std::string, Tensor>>& names);
Graph load_graph(const std::string& path);

}  // namespace oneflow::trace

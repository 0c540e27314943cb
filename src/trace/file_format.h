// file_format.h (internal): the parts of a traced-graph file (docs/TRACING.md, "File format"),
// as serialize.cpp reads them after checking everything, and a writer of such parts that checks
// nothing: the tests forge files with it (a valid file read, one field changed, written again
// with a valid checksum) to show that the loader refuses each kind of lie.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "generator.h"
#include "trace/graph.h"
#include "trace/symbolic.h"

namespace oneflow::trace {

// One entry of a saved training step's state table (NOTE [Saved training steps]).
struct StateEntry {
  std::string name;
  int buffer = -1;
  ScalarType dtype = kFloat32;
  DimVector sizes, strides;
  int64_t offset = 0;
};

struct GraphFile {
  uint8_t kind = 0;  // 0: one graph; 1: the structures of a symbolic graph; 2: a training step
  Graph graph;
  std::vector<SymbolicGraph> structures;
  std::vector<StateEntry> state;  // kind 2 (NOTE [Saved training steps])
  bool has_rng = false;
  GeneratorState rng{0, 0};
};

// Reads and checks a file completely (an of::Error names the file and what is wrong).
GraphFile read_file(const std::string& path);
// Writes a training step's file: the graph, its state table and its generator state (NOTE
// [Saved training steps]).
void write_training_file(const std::string& path, const Graph& g,
                         const std::vector<StateEntry>& state, bool has_rng, GeneratorState rng);
// The checks read_file runs on each graph it reads (node order, op signatures, geometry:
// NOTE [Loaded node order], NOTE [Loaded op signatures]), for a graph the runtime derives from
// a file's (a symbolic structure instantiated at new sizes); errors name `path`.
void check_loaded_graph(const Graph& g, const std::string& path);
// Tests: writes `file` in the current format as it is, without any check.
void write_file_for_testing(const GraphFile& file, const std::string& path);

}  // namespace oneflow::trace

// forge_util.h: helpers of the tests that forge traced-graph files (test_serving.cpp,
// test_trust.cpp, test_fuzz_regressions.cpp): a payload wrapped in the header and checksum
// of::jit::load expects (as tests/fuzz/fuzz_jit_load.cpp writes them), and finding a node.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <string>

#include "trace/graph.h"

namespace forge {

// A traced-graph file of format `version` around `payload`.
inline std::string oftrace_file(const std::string& payload, uint32_t version = 1) {
  const char magic[8] = {'O', 'F', 'T', 'R', 'A', 'C', 'E', '\0'};
  const uint64_t n = payload.size();
  const uint32_t crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), uInt(n)));
  std::string file(magic, 8);
  file.append(reinterpret_cast<const char*>(&version), 4);
  file.append(reinterpret_cast<const char*>(&n), 8);
  file.append(reinterpret_cast<const char*>(&crc), 4);
  return file + payload;
}

// The first node of op `op` (-1: none).
inline int find_node(const oneflow::trace::Graph& g, const std::string& op) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op->name == op) return int(i);
  return -1;
}

}  // namespace forge

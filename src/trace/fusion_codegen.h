// fusion_codegen.h (internal): CUDA C++ source for a fused elementwise group of a traced graph,
// compiled at run time with NVRTC by the CUDA module (src/cuda/fusion.cpp). Core side: no CUDA
// dependency; the source embeds the functors it needs (NOTE [NVRTC prelude]).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fused_kernel_abi.h"
#include "trace/graph.h"
#include "trace/passes.h"

namespace oneflow::trace {

// NOTE [Fused kernel parameters]: the kernel takes one struct by value whose fields are all
// 8 bytes, so its layout is a plain array of 64-bit words:
//   [0] numel  [1] zero (always 0: NOTE [Fused rounding])
//   sizes[ndim]                  the group's shape, size-1 dims dropped and dims merged
//   strides[k][ndim]             per broadcast/strided input k, in its own elements
//   input pointers               one per input_values entry, in order
//   output pointers              one per output_values entry, in order
// Pointers are each value's data pointer (storage offset applied). Dense inputs and every
// output are indexed by the flat index, 0-d/one-element inputs by 0; only the strided inputs
// use the index math, so the sizes and strides are parameters (not constants of the source)
// and groups of the same ops and layouts share one compiled kernel across shapes.
struct FusedKernelSource {
  std::string name;    // the kernel's extern "C" name: of_fused_<ops>
  std::string source;  // self-contained CUDA C++ for NVRTC
  uint64_t hash = 0;   // FNV-1a of `source`: the compiled-kernel cache key
  std::vector<int> input_values, output_values;  // value ids, in parameter order
  std::vector<int64_t> static_params;  // the words before the pointers (numel, 0, sizes, strides)
  int64_t numel = 0;
  bool ok = false;
  std::string why_not;  // when !ok: "[op] ..." naming the member that has no generated form
};

// The kernel of g.groups[group]; ok = false (with why_not) when a member has no generated form,
// in which case the group runs unfused.
FusedKernelSource generate_fused_kernel(const Graph& g, int group);

// Why node n of g cannot be a member of a generated kernel ("" when it can): the fuse pass asks
// this for CUDA graphs (a group of members that all can never fails generation).
std::string fused_unsupported(const Graph& g, const Node& n);

// The parameter block of one launch (NOTE [Fused kernel parameters]).
std::vector<uint64_t> fused_kernel_params(const FusedKernelSource& k,
                                          const std::vector<const void*>& inputs,
                                          const std::vector<void*>& outputs);

// The headers embedded into every source (NOTE [NVRTC prelude]).
std::string_view fused_kernel_prelude();

using fused_abi::fnv1a64;
using fused_abi::kFusedThreads;

}  // namespace oneflow::trace

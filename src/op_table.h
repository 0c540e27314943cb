// op_table.h (internal): the op table: every op registered once, by family, and found by
// name (OF_OP). The families' registration functions are listed here and called, in this
// order, by op_table.cpp the first time the table is used.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "op_def.h"

namespace oneflow {

// Registers an op (called from the register_*_ops functions); names are unique.
const OpDef* register_op(OpDef def);
// The op with this name; throws of::Error if there is none.
const OpDef& find_op(std::string_view name);
// Fills the CUDA kernel slot of the op named `name`: the CUDA module does this once, when it is
// loaded (NOTE [CUDA module] in cuda_loader.cpp), before any CUDA tensor exists.
void set_op_cuda_kernel(std::string_view name, KernelFn fn);
// Marks its CUDA kernel as taking float16/bfloat16 operands (OpDef::cuda_16bit); same caller.
void set_op_cuda_16bit(std::string_view name);
// Every registered op, in registration order.
std::vector<const OpDef*> all_ops();
// Builds the op table if needed.
void ensure_op_table();
// NOTE [Reaching an op]: code reaches an op of the table one way: OF_OP("name"), a lookup by
// name made once per call site and kept in a function-local static (building the table on
// first use). The table-driven unary/binary families look their rows up by name the same way.
#define OF_OP(name)                                                       \
  (*[]() -> const ::oneflow::OpDef* {                                     \
    static const ::oneflow::OpDef* const op_ = &::oneflow::find_op(name); \
    return op_;                                                           \
  }())

// Registration entry points, one per op family (called once by the op table).
void register_core_ops();
void register_unary_ops();
void register_binary_ops();
void register_reduce_ops();
void register_linalg_ops();
void register_shape_ops();
void register_index_ops();
void register_random_ops();
void register_global_ops();  // the boxing ops; installs the global dispatch hook
void register_conv_ops();
void register_nn_ops();
void register_nn_extra_ops();
void register_rnn_ops();

}  // namespace oneflow

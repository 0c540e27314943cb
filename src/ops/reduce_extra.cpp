#include "dispatch.h"
namespace oneflow {
void register_reduce_ops_extra() {}
}  // namespace oneflow

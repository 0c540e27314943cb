// allocator.h (internal): the CPU caching allocator and device-generic storage allocation.
#pragma once
#include "oneflow/runtime.h"
#include "oneflow/tensor.h"

namespace oneflow {

// A storage of nbytes on `device` (CPU: caching, size-bucketed, 64-byte aligned).
Storage allocate_storage(size_t nbytes, Device device);
// A fresh TensorImpl (control block and object from a per-thread free list of blocks).
std::shared_ptr<TensorImpl> new_tensor_impl();
// Copies n bytes between any two devices (blocking).
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);

}  // namespace oneflow

#pragma once
// NOTE [Counting owners before a write]: shared_ptr::use_count is a relaxed load. Seeing a count
// drop to what we hold ourselves does not order another thread's last reads of the object (made
// before it released its reference) before our next write into it: ThreadSanitizer reports the
// pair, and the C++ memory model agrees. Copying the pointer is an acquire-release increment on
// the same counter, which reads the latest count and synchronizes with every release before it;
// the count read after it is the synchronized one. Used wherever a count decides that memory may
// be overwritten in place (replay reusing an escaping buffer, .grad accumulated in place).
#include <memory>

namespace oneflow {

template <class T> long owners_synchronized(const std::shared_ptr<T>& p) {
  if (!p) return 0;
  std::shared_ptr<T> probe = p;  // acq_rel on the control block's count
  return probe.use_count() - 1;
}

}  // namespace oneflow

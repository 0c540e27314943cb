// shape.cpp: the CPU kernel of view_scatter (the VJP of the view ops that select elements); its
// meta, decomposition, VJP and registration are in ops/shape.cpp.
#include "cpu/shape.h"

#include <cstdint>

#include "cpu/loops.h"
#include "kernel_support.h"
#include "ops/shape_attrs.h"
#include "thread_pool.h"

namespace oneflow::cpu {
using namespace shape_detail;

void view_scatter(const KernelArgs& k) {
  const Tensor& out = k.outputs[0];
  const Tensor& g = k.inputs[0];
  kernel_fill(out, 0);
  using A = ViewScatterAttrs;
  Tensor v =
      make_view(out, A::get<"size">(k.attrs), A::get<"stride">(k.attrs), A::get<"offset">(k.attrs));
  const bool overlap = A::get<"may_overlap">(k.attrs);
  dispatch_dtype(out.dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::cpu_kernel<T, T, T>(
        v, {&v, &g}, [](compute_t<T> a, compute_t<T> b) { return a + b; },
        overlap ? INT64_MAX : kParallelGrain);
  });
}

}  // namespace oneflow::cpu

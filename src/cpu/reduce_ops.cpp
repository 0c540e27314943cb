// reduce_ops.cpp: the CPU kernels of sum, mean, all and any (ops/reduce.cpp registers them), on
// the reduction engine (cpu/reduce.h, NOTE [Reductions]).
#include <cmath>
#include <tuple>

#include "cpu/reduce.h"
#include "cpu/reduce_ops.h"
#include "ops/reduce_common.h"

namespace oneflow::cpu {

using namespace reduce_detail;

namespace {

template <class C> struct SumOp {
  static constexpr bool kPlainSum = true;  // lets the engine sum float blocks in float lanes
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
  static Acc init() { return Acc(0); }
  // Integer sums wrap on overflow, as libtorch's do in practice (two's complement through
  // uint64: defined behaviour; fuzz_checkpoint summed int64 extremes).
  static Acc add(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<Acc>) return a + b;
    else return Acc(uint64_t(a) + uint64_t(b));
  }
  static Acc step(Acc a, C x) { return add(a, Acc(x)); }
  static Acc merge(Acc a, Acc b) { return add(a, b); }
  static Acc finish(Acc a, int64_t) { return a; }
};
template <class C> struct MeanOp : SumOp<C> {
  using Acc = double;
  static Acc init() { return 0; }
  static Acc step(Acc a, C x) { return a + Acc(x); }
  // its own merge: SumOp's takes integer accumulators for integer inputs, which would convert
  // the double partial sums back to int64 (UB beyond 2^63: fuzz_ops, a mean of int64 extremes)
  static Acc merge(Acc a, Acc b) { return a + b; }
  static Acc finish(Acc a, int64_t n) { return n ? a / double(n) : NAN; }
};
template <class C> struct AllOp {
  using Acc = bool;
  static Acc init() { return true; }
  static Acc step(Acc a, C x) { return a && bool(x); }
  static Acc merge(Acc a, Acc b) { return a && b; }
  static Acc finish(Acc a, int64_t) { return a; }
};
template <class C> struct AnyOp {
  using Acc = bool;
  static Acc init() { return false; }
  static Acc step(Acc a, C x) { return a || bool(x); }
  static Acc merge(Acc a, Acc b) { return a || b; }
  static Acc finish(Acc a, int64_t) { return a; }
};

// Float inputs accumulate in double inside each output (see NOTE [Reductions]). The kernel is
// instantiated for the input's own type (when SameOut) and the Outs listed per op; any other
// requested dtype is written through a temporary of one of those and copied (instantiating
// every input x output pair made this file take minutes to compile).
template <template <class> class Op, bool SameOut, class... Outs>
void reduce_cpu(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& out = k.outputs[0];
  const IntArrayRef dims = ReduceAttrs::get<"dims">(k.attrs);
  const ScalarType od = out.dtype();
  dispatch_dtype(x.dtype(), [&](auto zi) {
    using T = decltype(zi);
    if constexpr (SameOut) {
      if (od == x.dtype()) return cpu::reduce_as<Op, T, T>(x, dims, out);
    }
    const bool done =
        ((od == scalar_type_of<Outs> && (cpu::reduce_as<Op, T, Outs>(x, dims, out), true)) || ...);
    if (done) return;
    // through a temporary of the first listed type of the same kind (floating or not)
    auto via = [&]<class O>() {
      const Tensor tmp = make_empty(out.sizes(), scalar_type_of<O>, out.device());
      cpu::reduce_as<Op, T, O>(x, dims, tmp);
      kernel_copy_into(out, tmp);
      return true;
    };
    const bool via_kind = ((is_floating_point(scalar_type_of<Outs>) == is_floating_point(od) &&
                            via.template operator()<Outs>()) ||
                           ...);
    if (!via_kind) via.template operator()<std::tuple_element_t<0, std::tuple<Outs...>>>();
  });
}

}  // namespace

void sum(const KernelArgs& k) { reduce_cpu<SumOp, true, double, int64_t>(k); }
void mean(const KernelArgs& k) { reduce_cpu<MeanOp, true, double>(k); }
void all(const KernelArgs& k) { reduce_cpu<AllOp, false, bool>(k); }
void any(const KernelArgs& k) { reduce_cpu<AnyOp, false, bool>(k); }

}  // namespace oneflow::cpu

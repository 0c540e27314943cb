// functional_detail.h (internal): helpers the nn function files share.
#pragma once
#include "oneflow/tensor.h"

namespace oneflow::nn::functional {
// clamp(x, lo, hi) with libtorch's hardtanh gradient: 1 strictly inside (lo, hi), 0 at the
// ends, where clamp's is 1 (NOTE [Edge gradients], tests/test_edge_grads.cpp). hardtanh, relu6
// and hardsigmoid use it.
Tensor detail_hardtanh(const Tensor& x, double lo, double hi);
}  // namespace oneflow::nn::functional

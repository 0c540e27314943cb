// oneflow.h: everything. `#include <oneflow/oneflow.h>` and `namespace of = oneflow;`.
#pragma once
// The standard headers a libtorch program gets through <torch/torch.h> and relies on without
// naming them (std::isnan, std::cout, std::vector, ...): ported programs compile unchanged.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "oneflow/device.h"
#include "oneflow/dtype.h"
#include "oneflow/error.h"
#include "oneflow/ops.h"
#include "oneflow/ops_conv.h"
#include "oneflow/ops_nn.h"
#include "oneflow/nn.h"
#include "oneflow/optim.h"
#include "oneflow/data.h"
#include "oneflow/serialize.h"
#include "oneflow/checkpoint.h"
#include "oneflow/compat.h"
#include "oneflow/activations.h"
#include "oneflow/amp.h"
#include "oneflow/context.h"
#include "oneflow/cuda.h"
#include "oneflow/autograd.h"
#include "oneflow/jit.h"
#include "oneflow/generate.h"
#include "oneflow/text.h"
#include "oneflow/global.h"
#include "oneflow/nn/graph.h"
#include "oneflow/nn/extra.h"
#include "oneflow/nn/losses.h"
#include "oneflow/runtime.h"
#include "oneflow/scalar.h"
#include "oneflow/tensor.h"
#include "oneflow/indexing.h"

namespace of = oneflow;

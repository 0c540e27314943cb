// oneflow.h: everything. `#include <oneflow/oneflow.h>` and `namespace of = oneflow;`.
#pragma once
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
#include "oneflow/autograd.h"
#include "oneflow/jit.h"
#include "oneflow/nn/graph.h"
#include "oneflow/runtime.h"
#include "oneflow/scalar.h"
#include "oneflow/tensor.h"
#include "oneflow/indexing.h"

namespace of = oneflow;

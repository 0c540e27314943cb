// serialize.h: of::save / of::load (safetensors layout).
#pragma once
#include "oneflow/tensor.h"

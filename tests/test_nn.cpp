// test_nn.cpp
#include <doctest/doctest.h>

#include "harness.h"

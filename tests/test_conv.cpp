// test_conv.cpp
#include <doctest/doctest.h>

#include "harness.h"

// test_module.cpp
#include <doctest/doctest.h>

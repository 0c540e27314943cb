// test_optim.cpp
#include <doctest/doctest.h>

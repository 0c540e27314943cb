// test_data.cpp
#include <doctest/doctest.h>

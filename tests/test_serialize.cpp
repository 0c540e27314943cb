// test_serialize.cpp
#include <doctest/doctest.h>

// The suite's main: doctest, then NOTE [No kernel dispatches] over everything the run did: a
// kernel that dispatched an op anywhere in the suite fails the run, naming both ops.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "dispatch.h"

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit()) return rc;
  const auto nested = oneflow::nested_dispatches();
  for (const auto& [kernel, op] : nested)
    std::fprintf(stderr, "NOTE [No kernel dispatches]: the kernel of %s dispatched the op %s\n",
                 kernel.c_str(), op.c_str());
  return nested.empty() ? rc : 1;
}

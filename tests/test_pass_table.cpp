// NOTE [Pass table] (src/trace/pass_table.h): the recipe derives from the table's rows — where
// dce runs again, what exact() and OF_TRACE_PASSES switch — and a traced function runs exactly
// that recipe.
#include <cstdlib>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "harness.h"
#include "oneflow/oneflow.h"
#include "trace/pass_table.h"

namespace {

std::string names(const std::vector<const of::trace::PassRow*>& r) {
  std::string s;
  for (const auto* p : r) s += (s.empty() ? "" : " ") + std::string(p->name);
  return s;
}

std::string recipe(const of::jit::TraceOptions& o) {
  return names(of::trace::pass_recipe(of::trace::pass_switches(o)));
}

struct EnvPasses {
  explicit EnvPasses(const char* v) { ::setenv("OF_TRACE_PASSES", v, 1); }
  ~EnvPasses() { ::unsetenv("OF_TRACE_PASSES"); }
};

}  // namespace

TEST_CASE("pass table: the recipe, dce after each family that leaves dead nodes") {
  using TO = of::jit::TraceOptions;
  // the recipe as it was written by hand before the table (NOTE [The pass recipe])
  CHECK(recipe(TO()) ==
        "dce cse fold dce attention add_norm epilogue dce remat schedule fuse inplace memplan");
  CHECK(recipe(TO().quantize_int8(true)) ==
        "dce cse fold dce attention add_norm quantize "
        "epilogue dce remat schedule fuse inplace memplan");
  CHECK(recipe(TO().exact()) == "dce cse fold dce remat schedule fuse inplace memplan");
  CHECK(recipe(TO().cse(false).fold(false)) ==
        "dce attention add_norm epilogue dce remat schedule fuse inplace memplan");
  CHECK(recipe(TO().dce(false)) ==
        "cse fold attention add_norm epilogue remat schedule fuse inplace memplan");
  CHECK(recipe(TO().exact().remat(false).schedule(false).fuse(false).inplace(false).memplan(
            false)) == "dce cse fold dce");
  {
    EnvPasses env("-cse,-fold,+quantize");
    CHECK(recipe(TO()) ==
          "dce attention add_norm quantize epilogue dce remat schedule fuse "
          "inplace memplan");
    // exact() wins over the environment
    CHECK(recipe(TO().exact()) == "dce quantize dce remat schedule fuse inplace memplan");
  }
  {
    EnvPasses env("-cse,nope");
    std::string msg;
    CHECK(th::throws_with([&] { (void)recipe(TO()); },
                          {"OF_TRACE_PASSES names an unknown pass 'nope'",
                           "(dce, cse, fold, attention, add_norm, quantize, epilogue, remat, "
                           "schedule, fuse, inplace, memplan)"},
                          &msg));
  }
  // every row with a TraceOptions switch follows it
  const auto rows = of::trace::pass_rows();
  for (size_t k = 0; k < rows.size(); ++k) {
    const of::trace::PassRow& row = rows[k];
    CAPTURE(row.name);
    REQUIRE(row.option != nullptr);
    TO o;
    o.*row.option = !(TO().*row.option);
    CHECK(of::trace::pass_switches(o)[k] == !of::trace::pass_switches(TO())[k]);
  }
}

TEST_CASE("pass table: a traced function runs the table's recipe, in its order") {
  of::Tensor w = of::randn({8, 8});
  auto fn = [&](const of::Tensor& x) { return of::relu(of::matmul(x, w) + 1.0).sum(); };
  for (const auto& o : {of::jit::TraceOptions(), of::jit::TraceOptions().exact(),
                        of::jit::TraceOptions().cse(false).fuse(false)}) {
    auto traced = of::jit::trace(fn, o);
    const of::Tensor x = of::randn({4, 8});
    (void)traced(x);
    std::string ran;
    for (const auto& p : traced.stats().passes) ran += (ran.empty() ? "" : " ") + p.name;
    CHECK(ran == recipe(o));
  }
}

// Sharded checkpoints (include/oneflow/dist_checkpoint.h) under mpirun: the in-process cases of
// ckpt_worker on 1, 2 and 4 ranks, and saves and loads in separate launches of different world
// sizes sharing a directory (resharding, and a save killed before its index).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

// ckpt_worker is built beside global_worker (tests/meson.build).
std::string ckpt_worker() {
  std::string path = ONEFLOW_GLOBAL_WORKER;
  return path.substr(0, path.rfind('/') + 1) + "ckpt_worker";
}

int launch(int n, const std::string& args, std::string* out, int deadline_s = 240) {
  const std::string cmd = fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "timeout -k 5 {} mpirun --oversubscribe -np {} {} {} 2>&1",
      deadline_s, n, ckpt_worker(), args);
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof buf, p)) out->append(buf, k);
  const int st = pclose(p);
  if (out->size() > 8000) *out = out->substr(out->size() - 8000);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

}  // namespace

TEST_CASE("dist checkpoint: the in-process cases under mpirun -np 1, 2 and 4") {
#if ONEFLOW_HAVE_MPI
  for (int n : {1, 2, 4}) {
    CAPTURE(n);
    std::string out;
    const int rc = launch(n, "", &out);
    INFO(out);
    CHECK(rc == 0);
  }
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank cases run in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

TEST_CASE("dist checkpoint: saved on one world size and layout, loaded on another, values equal") {
#if ONEFLOW_HAVE_MPI
  struct Case {
    int save_ranks;
    const char* save_layout;
    int load_ranks;
    const char* load_layout;
  };
  const Case cases[] = {
      {4, "dp", 2, "dp"},    // data parallel on 4, loaded on 2
      {2, "tp", 1, "dp"},    // tensor parallel on 2, loaded on one process
      {4, "zero", 2, "dp"},  // ZeRO's split state, loaded by plain Adam
      {2, "dp", 4, "zero"},  // and back, onto more ranks
      {4, "hybrid", 2, "tp"}, {1, "dp", 4, "tp"},
  };
  for (const Case& c : cases) {
    const std::string what = fmt::format("saved {} on {}, loaded {} on {}", c.save_layout,
                                         c.save_ranks, c.load_layout, c.load_ranks);
    CAPTURE(what);
    const std::string dir = fmt::format("/tmp/of_ckpt_reshard.{}{}.{}{}", c.save_layout,
                                        c.save_ranks, c.load_layout, c.load_ranks);
    std::filesystem::remove_all(dir);
    std::string out;
    const int saved = launch(c.save_ranks, fmt::format("save {} {}", dir, c.save_layout), &out);
    INFO(out);
    REQUIRE(saved == 0);
    out.clear();
    const int loaded = launch(c.load_ranks, fmt::format("load {} {}", dir, c.load_layout), &out);
    INFO(out);
    CHECK(loaded == 0);
    CHECK(out.find(" 0 difference(s)") != std::string::npos);
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".ref.safetensors");
  }
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank cases run in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

TEST_CASE("dist checkpoint: a save killed before its index leaves the previous checkpoint") {
#if ONEFLOW_HAVE_MPI
  const std::string dir = "/tmp/of_ckpt_crash";
  std::filesystem::remove_all(dir);
  std::string out;
  // generation 1 completes; rank 0 is killed while publishing generation 2
  const int crashed = launch(2, fmt::format("crash {} dp", dir), &out, 120);
  INFO(out);
  CHECK(crashed != 0);
  CHECK(out.find("should have crashed") == std::string::npos);
  CHECK(std::filesystem::exists(dir + "/rank-1.gen-2.safetensors"));
  // the index still names generation 1, whose files are complete: it loads, on other ranks too
  for (auto [n, layout] : {std::pair{2, "dp"}, std::pair{4, "zero"}}) {
    CAPTURE(n);
    out.clear();
    const int loaded = launch(n, fmt::format("load {} {}", dir, layout), &out);
    INFO(out);
    CHECK(loaded == 0);
    CHECK(out.find(" 0 difference(s)") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove(dir + ".ref.safetensors");
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank cases run in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

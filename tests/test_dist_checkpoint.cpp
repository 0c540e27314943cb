// Sharded checkpoints (include/oneflow/dist_checkpoint.h) under mpirun: the in-process cases of
// ckpt_worker on 1, 2 and 4 ranks, and saves and loads in separate launches of different world
// sizes sharing a directory (resharding, and a save killed before its index).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/wait.h>

#include <oneflow/oneflow.h>

#include "harness.h"
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace {

// ckpt_worker is built beside global_worker (tests/meson.build).
std::string ckpt_worker() {
  std::string path = ONEFLOW_GLOBAL_WORKER;
  return path.substr(0, path.rfind('/') + 1) + "ckpt_worker";
}

// examples/data_parallel, built beside the tests.
std::string data_parallel_example() {
  std::string path = ONEFLOW_GLOBAL_WORKER;
  path = path.substr(0, path.rfind('/'));
  return path.substr(0, path.rfind('/') + 1) + "examples/data_parallel";
}

std::string mpirun_command(int n, const std::string& program, const std::string& args,
                           int deadline_s) {
  return fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "timeout -k 5 {} mpirun --oversubscribe -np {} {} {} 2>&1",
      deadline_s, n, program, args);
}

int launch(int n, const std::string& args, std::string* out, int deadline_s = 240,
           const std::string& program = ckpt_worker()) {
  return th::run_capture(mpirun_command(n, program, args, deadline_s), out);
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

TEST_CASE("dist checkpoint: data_parallel killed mid-run resumes to the uninterrupted parameters") {
#if ONEFLOW_HAVE_MPI
  namespace of = oneflow;
  const std::string example = data_parallel_example();
  REQUIRE_MESSAGE(std::filesystem::exists(example), example << " is not built");
  if (!std::filesystem::exists(of::data::kFashionMnistDir)) {
    MESSAGE("Fashion-MNIST is not at " << of::data::kFashionMnistDir << ": skipped");
    return;
  }
  for (std::string mode : {"", "zero"}) {
    CAPTURE(mode);
    const std::string base = "/tmp/of_ckpt_resume" + mode;
    const std::string common = fmt::format("1000 '' {} --ckpt-every 100", mode);
    std::filesystem::remove_all(base + ".ref");
    std::filesystem::remove_all(base + ".run");
    // the uninterrupted run (checkpointing too: saving must not change the training)
    std::string out;
    CHECK(launch(2, fmt::format("{} --ckpt {}.ref --final {}.ref.final", common, base, base), &out,
                 240, example) == 0);
    INFO(out);
    // the same run, rank 1 killed once step 300 is logged
    const std::string run_args =
        fmt::format("{} --ckpt {}.run --final {}.run.final", common, base, base);
    FILE* p = popen(mpirun_command(2, example, run_args, 240).c_str(), "r");
    REQUIRE(p != nullptr);
    std::string log;
    int victim = -1;
    bool killed = false;
    char line[4096];
    while (std::fgets(line, sizeof line, p)) {
      log += line;
      std::sscanf(line, "rank 1 pid %d", &victim);
      if (!killed && victim > 0 && std::strstr(line, "step  300"))
        killed = ::kill(victim, SIGKILL) == 0;
    }
    const int st = pclose(p);
    INFO(log);
    CHECK(killed);
    CHECK((!WIFEXITED(st) || WEXITSTATUS(st) != 0));   // the job ends non-zero
    CHECK(log.find("steps in") == std::string::npos);  // it did not finish
    // rerun with --resume: from the last complete checkpoint, to the same final parameters
    out.clear();
    CHECK(launch(2, fmt::format("{} --resume {}.run", run_args, base), &out, 240, example) == 0);
    INFO(out);
    long long resumed_at = -1;
    if (const size_t at = out.find("at step "); at != std::string::npos)
      resumed_at = std::atoll(out.c_str() + at + 8);
    CHECK(resumed_at >= 100);
    CHECK(resumed_at <= 300);
    const auto ref = of::load_tensors(base + ".ref.final");
    const auto got = of::load_tensors(base + ".run.final");
    REQUIRE(ref.size() == got.size());
    CHECK(ref.size() == 4);
    for (size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(ref[i].first);
      CHECK(ref[i].first == got[i].first);
      CHECK(ref[i].second.sizes() == got[i].second.sizes());
      CHECK(std::memcmp(ref[i].second.data_ptr(), got[i].second.data_ptr(),
                        ref[i].second.nbytes()) == 0);
    }
    std::filesystem::remove_all(base + ".ref");
    std::filesystem::remove_all(base + ".run");
    std::filesystem::remove(base + ".ref.final");
    std::filesystem::remove(base + ".run.final");
  }
#elif ONEFLOW_STATIC_CORE
  MESSAGE("static core (the sanitized build): the multi-rank cases run in the regular build");
#else
  FAIL("built without Open MPI's development files (libopenmpi-dev); ./run installs them");
#endif
}

// NOTE [Layer check] (tools/check_layers.py): the build refuses a kernel file that reaches the
// public op API, the dispatcher, autograd or the tracer, and a runtime file (allocator,
// generator, thread pool) that reaches the op table. These cases check that the checker passes
// this tree and refuses planted violations, naming the include chain.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include "harness.h"

namespace fs = std::filesystem;

namespace {

const std::string kRoot = ONEFLOW_SOURCE_ROOT;

int run_checker(const std::string& root, std::string* out) {
  return th::run_capture("python3 " + kRoot + "/tools/check_layers.py '" + root + "' 2>&1", out);
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("layers: this tree passes the layer check") {
  std::string out;
  const int rc = run_checker(kRoot, &out);
  INFO(out);
  CHECK(rc == 0);
}

TEST_CASE(
    "layers: a kernel that reaches the public ops, the runtime the op table, or an op file the "
    "global layer, is refused") {
  const fs::path root = fs::temp_directory_path() / ("of_layers_" + std::to_string(::getpid()));
  fs::remove_all(root);
  write(root / "include/oneflow/tensor.h", "#pragma once\n");
  write(root / "include/oneflow/ops.h", "#pragma once\n#include \"oneflow/tensor.h\"\n");
  write(root / "src/kernel_support.h", "#pragma once\n#include \"oneflow/tensor.h\"\n");
  write(root / "src/dispatch.h", "#pragma once\n#include \"oneflow/ops.h\"\n");
  write(root / "src/op_table.h", "#pragma once\n");
  write(root / "src/cpu/good.cpp", "#include \"kernel_support.h\"\n");
  std::string out;
  CHECK(run_checker(root.string(), &out) == 0);

  SUBCASE("a kernel through a shared header of src/ops") {
    write(root / "src/ops/nn_common.h", "#pragma once\n#include \"dispatch.h\"\n");
    write(root / "src/cpu/bad.cpp",
          "#include \"kernel_support.h\"\n#include \"ops/nn_common.h\"\n");
    CHECK(run_checker(root.string(), &out) == 1);
    INFO(out);
    CHECK(out.find("kernel file src/cpu/bad.cpp reaches src/dispatch.h: src/cpu/bad.cpp -> "
                   "src/ops/nn_common.h -> src/dispatch.h") != std::string::npos);
    CHECK(out.find("kernel file src/ops/nn_common.h reaches src/dispatch.h") != std::string::npos);
  }
  SUBCASE("a CUDA kernel, directly, under a preprocessor condition") {
    write(root / "src/cuda/bad.cu", "#if 0\n#include \"oneflow/ops.h\"\n#endif\n");
    CHECK(run_checker(root.string(), &out) == 1);
    INFO(out);
    CHECK(out.find("kernel file src/cuda/bad.cu reaches include/oneflow/ops.h") !=
          std::string::npos);
  }
  SUBCASE("the tracer") {
    write(root / "src/trace/graph.h", "#pragma once\n");
    write(root / "src/cpu/bad.h", "#pragma once\n#include \"trace/graph.h\"\n");
    CHECK(run_checker(root.string(), &out) == 1);
    CHECK(out.find("kernel file src/cpu/bad.h reaches src/trace/graph.h") != std::string::npos);
  }
  SUBCASE("an op file reaching the global layer beyond its SBP rules") {
    write(root / "src/global/rules.h", "#pragma once\n");
    write(root / "src/global/global.h", "#pragma once\n");
    write(root / "src/ops/good.cpp", "#include \"global/rules.h\"\n");
    CHECK(run_checker(root.string(), &out) == 0);
    write(root / "src/ops/nn_helpers.h", "#pragma once\n#include \"global/global.h\"\n");
    write(root / "src/ops/bad.cpp", "#include \"ops/nn_helpers.h\"\n");
    CHECK(run_checker(root.string(), &out) == 1);
    INFO(out);
    CHECK(out.find("op file src/ops/bad.cpp reaches src/global/global.h: src/ops/bad.cpp -> "
                   "src/ops/nn_helpers.h -> src/global/global.h") != std::string::npos);
  }
  SUBCASE("the generator reaching the op table") {
    write(root / "src/generator.cpp", "#include \"op_table.h\"\n");
    CHECK(run_checker(root.string(), &out) == 1);
    CHECK(out.find("runtime file src/generator.cpp reaches src/op_table.h") != std::string::npos);
  }
  fs::remove_all(root);
}

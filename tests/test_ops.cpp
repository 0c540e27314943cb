// Runs every row of the op table (see harness.h) and checks op-table coverage.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "dispatch.h"
#include "harness.h"

namespace {

using th::is_nondiff;
using th::make_inputs;

std::vector<of::Tensor> cast_inputs(const th::OpRow& row, const std::vector<of::Tensor>& in,
                                    of::ScalarType dt, bool nc) {
  std::vector<of::Tensor> r;
  for (size_t i = 0; i < in.size(); ++i) {
    of::Tensor t = in[i];
    if (t.is_floating_point() && !is_nondiff(row, i)) t = t.to(dt);
    if (nc) t = th::noncontig(t);
    r.push_back(t);
  }
  return r;
}

std::vector<th::Ref> refs_of(const std::vector<of::Tensor>& in) {
  std::vector<th::Ref> r;
  for (auto& t : in) r.push_back(th::to_ref(t));
  return r;
}

}  // namespace

TEST_CASE("op table: forward vs float64 reference, contiguous and non-contiguous") {
  REQUIRE(!th::rows().empty());
  for (const auto& row : th::rows()) {
    std::vector<of::Tensor> in64 = make_inputs(row, 42);
    for (of::ScalarType dt : {of::kFloat64, of::kFloat32}) {
      if (dt == of::kFloat32 && !row.float32) continue;
      for (bool nc : {false, true}) {
        if (nc && !row.noncontig) continue;
        std::vector<of::Tensor> in = cast_inputs(row, in64, dt, nc);
        th::Ref expect = row.ref(refs_of(in));  // reference sees the (rounded) input values
        std::string err;
        try {
          of::Tensor out = row.fn(in);
          if (out.is_floating_point() && dt == of::kFloat32 && out.dtype() != of::kFloat32)
            err = "float32 inputs gave a " + std::string(of::dtype_name(out.dtype())) + " result";
          else
            err = th::compare(out, expect, dt == of::kFloat64 ? row.rtol64 : row.rtol,
                              dt == of::kFloat64 ? row.atol64 : row.atol);
        } catch (const std::exception& e) {
          err = std::string("threw: ") + e.what();
        }
        const std::string where = "row " + row.name + " dtype " +
                                  std::string(of::dtype_name(dt)) +
                                  (nc ? " non-contiguous" : " contiguous");
        INFO(where);
        CHECK_MESSAGE(err.empty(), err);
      }
    }
  }
}

TEST_CASE("op table: VJP vs central finite differences (float64)") {
  for (const auto& row : th::rows()) {
    if (!row.grad) continue;
    std::vector<of::Tensor> in = make_inputs(row, 7);
    std::string err;
    try {
      err = th::gradcheck(row.fn, in, row.nondiff);
    } catch (const std::exception& e) {
      err = std::string("threw: ") + e.what();
    }
    const std::string where = "row " + row.name;
    INFO(where);
    CHECK_MESSAGE(err.empty(), err);
  }
}

// Issue 10: the op table on CUDA against the CPU, forward and gradients, float32 (and float64),
// contiguous and non-contiguous. Rows that reach an op with no CUDA kernel yet are counted and
// listed, not failed; everything else must match. Skips without a device.
TEST_CASE("op table: CUDA vs CPU, forward and gradients (rows whose ops have CUDA kernels)") {
  if (!of::cuda::is_available()) {
    MESSAGE("no CUDA device: skipped");
    return;
  }
  const of::Device gpu("cuda:0");
  auto missing_kernel = [](const std::string& what) {
    return what.find("has no CUDA implementation") != std::string::npos;
  };
  size_t ran = 0, uncovered = 0;
  std::set<std::string> missing;
  for (const auto& row : th::rows()) {
    std::vector<of::Tensor> in64 = make_inputs(row, 42);
    for (of::ScalarType dt : {of::kFloat32, of::kFloat64}) {
      if (dt == of::kFloat32 && !row.float32) continue;
      for (bool nc : {false, true}) {
        if (nc && !row.noncontig) continue;
        const std::string where = "row " + row.name + " dtype " + std::string(of::dtype_name(dt)) +
                                  (nc ? " non-contiguous" : " contiguous");
        INFO(where);
        const double rtol = dt == of::kFloat64 ? std::max(row.rtol64, 1e-9) : row.rtol;
        const double atol = dt == of::kFloat64 ? std::max(row.atol64, 1e-9) : row.atol;
        std::string err;
        try {
          std::vector<of::Tensor> cpu_in = cast_inputs(row, in64, dt, nc), gpu_in;
          for (size_t i = 0; i < cpu_in.size(); ++i) {
            const bool diff = row.grad && cpu_in[i].is_floating_point() && !is_nondiff(row, i);
            of::Tensor g = cpu_in[i].to(gpu);
            if (nc) g = th::noncontig(g);
            if (diff) {
              cpu_in[i] = cpu_in[i].detach().requires_grad_(true);
              g = g.detach().requires_grad_(true);
            }
            gpu_in.push_back(g);
          }
          of::Tensor want = row.fn(cpu_in), got = row.fn(gpu_in);
          err = th::compare(got.cpu(), th::to_ref(want.detach()), rtol, atol);
          if (err.empty() && row.grad && want.requires_grad() && want.is_floating_point()) {
            const of::Tensor gout = of::randn(want.sizes()).to(want.dtype());
            want.backward(gout);
            got.backward(gout.to(gpu));
            for (size_t i = 0; i < cpu_in.size() && err.empty(); ++i) {
              if (!cpu_in[i].requires_grad() || !cpu_in[i].grad().defined()) continue;
              REQUIRE(gpu_in[i].grad().defined());
              err = th::compare(gpu_in[i].grad().cpu(), th::to_ref(cpu_in[i].grad()), 10 * rtol,
                                10 * atol);
              if (!err.empty()) err = "gradient of input " + std::to_string(i) + ": " + err;
            }
          }
        } catch (const std::exception& e) {
          err = e.what();
          if (missing_kernel(err)) {
            ++uncovered;
            missing.insert(err.substr(0, err.find(']') + 1));
            continue;
          }
          err = "threw: " + err;
        }
        ++ran;
        CHECK_MESSAGE(err.empty(), err);
      }
    }
  }
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : " ") + m;
  MESSAGE("CUDA vs CPU: ", ran, " row runs compared, ", uncovered,
          " reached an op without a CUDA kernel: ", list);
}

TEST_CASE("op table: every op has a table row") {
  std::set<std::string> covered;
  for (const auto& row : th::rows())
    for (const auto& o : row.ops) covered.insert(o);
  std::vector<std::string> missing;
  for (const of::OpDef* op : of::all_ops()) {
    if (!covered.count(op->name)) missing.push_back(op->name);
  }
  std::string list;
  for (auto& m : missing) list += m + " ";
  CHECK_MESSAGE(missing.empty(), "ops without a table row: ", list);
  for (const auto& name : covered) {
    bool known = false;
    for (const of::OpDef* op : of::all_ops()) known |= op->name == name;
    CHECK_MESSAGE(known, "a row names op '", name, "' which is not in the op table");
  }
}

TEST_CASE("README lists exactly the ops in the op table") {
  std::ifstream f(ONEFLOW_SOURCE_ROOT "/README.md");
  REQUIRE_MESSAGE(f.good(), "README.md not found");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  auto b = text.find("<!-- ops:begin -->"), e = text.find("<!-- ops:end -->");
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  std::string block = text.substr(b, e - b);
  std::set<std::string> listed;
  for (size_t p = 0; (p = block.find('`', p)) != std::string::npos;) {
    size_t q = block.find('`', p + 1);
    if (q == std::string::npos) break;
    listed.insert(block.substr(p + 1, q - p - 1));
    p = q + 1;
  }
  std::set<std::string> table;
  for (const of::OpDef* op : of::all_ops()) table.insert(op->name);
  for (auto& n : table) CHECK_MESSAGE(listed.count(n), "op '", n, "' is missing from README");
  for (auto& n : listed) CHECK_MESSAGE(table.count(n), "README lists '", n, "' which is not an op");
}

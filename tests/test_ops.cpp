// Runs every row of the op table (see harness.h) and checks op-table coverage.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "dispatch.h"
#include "kernel_support.h"
#include "harness.h"
#include "trace/graph.h"
#include "trace/executor.h"
#include "trace/passes.h"
#include "trace/recording.h"

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
        } catch (const std::exception& e) { err = std::string("threw: ") + e.what(); }
        const std::string where = "row " + row.name + " dtype " + std::string(of::dtype_name(dt)) +
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
    } catch (const std::exception& e) { err = std::string("threw: ") + e.what(); }
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

// NOTE [One source per op property]: what used to be name lists beside the table (autocast's
// three lists, the 16-bit widening list, the replayed index checks, fold identities, the
// codegen's special forms, SBP rules chosen by name) are fields and traits of each op, set where
// it is registered. These cases hold the intended values (libtorch 2.x's autocast lists, the nn
// ops whose kernels compute in float32/float64 only, the ops that validate indices) and the
// rules that tie the fields together, so a forgotten or wrong field fails here.
TEST_CASE("op table: autocast policy, 16-bit widening and index checks are fields of each op") {
  using P = of::AutocastPolicy;
  const std::map<std::string, P> autocast = [] {
    std::map<std::string, P> m;
    for (const char* n : {"mm", "bmm", "addmm", "baddbmm", "linear", "conv2d", "conv3d",
                          "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention"})
      m[n] = P::kLower;
    for (const char* n :
         {"exp",        "expm1",      "log",           "log2",       "log1p",
          "reciprocal", "rsqrt",      "tan",           "pow",        "pow_scalar",
          "sum",        "prod",       "cumsum",        "cumprod",    "logsumexp",
          "norm",       "softmax",    "log_softmax",   "layer_norm", "group_norm",
          "rms_norm",   "batch_norm", "cross_entropy", "ctc_loss",   "binary_cross_entropy"})
      m[n] = P::kFloat32;
    for (const char* n : {"cat", "index_add", "scatter_add", "lstm_cell", "lstm_layer"})
      m[n] = P::kPromote;
    return m;
  }();
  const std::set<std::string> widened = {"batch_norm",
                                         "layer_norm",
                                         "group_norm",
                                         "rms_norm",
                                         "dropout",
                                         "cross_entropy",
                                         "scaled_dot_product_attention",
                                         "conv2d",
                                         "conv3d",
                                         "conv_transpose2d",
                                         "conv_transpose3d",
                                         "conv2d_backward_weight",
                                         "conv3d_backward_weight",
                                         "max_pool2d_with_indices",
                                         "max_pool3d_with_indices",
                                         "adaptive_max_pool2d",
                                         "adaptive_max_pool3d",
                                         "avg_pool2d",
                                         "avg_pool3d",
                                         "adaptive_avg_pool2d",
                                         "adaptive_avg_pool3d",
                                         "upsample_nearest2d",
                                         "upsample_bilinear2d",
                                         "im2col",
                                         "col2im",
                                         "ctc_loss",
                                         "lstm_cell",
                                         "lstm_layer"};
  const std::set<std::string> checks = {"cross_entropy", "cross_entropy_backward",
                                        "embedding",     "index_select",
                                        "index_add",     "gather",
                                        "scatter",       "scatter_add",
                                        "one_hot",       "embedding_layer_norm"};
  std::set<std::string> names;
  for (const of::OpDef* op : of::all_ops()) names.insert(op->name);
  for (const auto& kv : autocast)  // (no structured binding: clang 14's doctest lambdas)
    CHECK_MESSAGE(names.count(kv.first), "autocast names '", kv.first, "'");
  for (const auto& n : widened) CHECK_MESSAGE(names.count(n), "widening names '", n, "'");
  for (const auto& n : checks) CHECK_MESSAGE(names.count(n), "index checks name '", n, "'");
  for (const of::OpDef* op : of::all_ops()) {
    const std::string& n = op->name;
    auto it = autocast.find(n);
    CHECK_MESSAGE(op->autocast == (it == autocast.end() ? P::kNone : it->second), "[", n,
                  "] has the wrong autocast policy");
    // a widened op's backward (its fused gradient kernel) computes in the same dtypes
    const bool backward = n.size() > 9 && n.compare(n.size() - 9, 9, "_backward") == 0;
    const std::string forward = backward ? n.substr(0, n.size() - 9) : n;
    const bool want = widened.count(forward) != 0 && (names.count(forward) != 0);
    CHECK_MESSAGE(op->has(of::kWidens16Bit) == want, "[", n, "] kWidens16Bit should be ", want);
    CHECK_MESSAGE(op->has(of::kChecksIndices) == (checks.count(n) != 0), "[", n,
                  "] kChecksIndices is wrong");
    if (op->has(of::kChecksIndices))  // a replay validates by running infer_meta again
      CHECK_MESSAGE(bool(op->infer_meta), "[", n, "] checks indices without infer_meta");
    if (op->autocast != P::kNone) CHECK_MESSAGE(!op->has(of::kView), "[", n, "] is a view");
  }
}

TEST_CASE("op table: every elementwise op has a fused form, and fold identities are sound") {
  for (const of::OpDef* op : of::all_ops()) {
    const std::string& n = op->name;
    if (op->has(of::kElementwise) && !op->has(of::kRandom))
      CHECK_MESSAGE((op->functor != nullptr) != (op->fused_form != of::FusedForm::kFunctor), "[", n,
                    "] needs exactly one of a functor and a special fused form");
    if (!op->has(of::kElementwise)) {
      CHECK_MESSAGE(op->fused_form == of::FusedForm::kFunctor, "[", n, "] is not elementwise");
      CHECK_MESSAGE(op->fold_identities.empty(), "[", n, "] folds but is not elementwise");
    }
    for (const of::FoldIdentity& id : op->fold_identities) {
      CHECK_MESSAGE((id.keep == 0 || id.keep == 1), "[", n, "] keeps input ", int(id.keep));
      if (id.kind != of::FoldIdentity::kOtherInputIs) CHECK(id.keep == 0);
    }
  }
  CHECK(of::find_op("add").fold_identities.size() == 2);  // x+0 and 0+x
  CHECK(of::find_op("sub").fold_identities.size() == 1);  // x-0 only
  CHECK(of::find_op("div").fold_identities.size() == 1);  // x/1 only
}

// NOTE [Elementwise kinds]: a row op's kind is its functor's (the row table reads it from the
// functor), and the CUDA module's list names every row op with the same functor: adding an
// elementwise op is its functor (with its kind), its row, its test, and this list's line, which
// this test asks for by name.
TEST_CASE("op table: every row functor has one kind, and a CUDA kernel entry") {
  const std::string text = [] {
    std::ifstream f(ONEFLOW_SOURCE_ROOT "/src/cuda/elementwise.h");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  std::map<std::string, std::string> cuda;  // op name -> functor
  const std::regex entry(R"re(X\((\w+), (\w+)\))re");
  for (std::sregex_iterator it(text.begin(), text.end(), entry), end; it != end; ++it)
    cuda[(*it)[1].str()] = "fn::" + (*it)[2].str();
  CHECK(cuda.size() > 40);
  size_t rows = 0;
  for (const of::OpDef* op : of::all_ops()) {
    const std::string& n = op->name;
    CHECK_MESSAGE((op->functor != nullptr) == (op->elem_kind != of::ElemKind::kNone), "[", n,
                  "] has a functor without a kind, or a kind without a functor");
    if (!op->functor) continue;
    ++rows;
    CHECK_MESSAGE(cuda.count(n) == 1, "[", n,
                  "] has no line X(name, functor) in OF_CUDA_*_OPS of src/cuda/elementwise.h");
    if (cuda.count(n)) CHECK_MESSAGE(cuda[n] == op->functor, "[", n, "] CUDA functor differs");
  }
  CHECK(rows == cuda.size());  // and the CUDA list names no op the table lacks
  // the kinds as the rows use them
  CHECK(of::find_op("exp").elem_kind == of::ElemKind::kFloat);
  CHECK(of::find_op("add").elem_kind == of::ElemKind::kAll);
  CHECK(of::find_op("fmod").elem_kind == of::ElemKind::kIntUnsafe);
  CHECK(of::find_op("lt").elem_kind == of::ElemKind::kCompare);
  CHECK(of::find_op("logical_not").elem_kind == of::ElemKind::kLogical);
  CHECK(of::find_op("isnan").elem_kind == of::ElemKind::kCompare);
}

// The source tree keeps no list or comparison of op names outside the table: code selects ops
// by their fields and traits (OF_OP("name") reaches one op; a kernel registration names one).
// What counts as one: a comparison of a name-like expression (name, n, op, op_name, ->name,
// .name) with an op's name; a braced list of string literals that are all op names; and,
// outside the op files of src/ops (whose row tables are the table), an array initializer
// (`x[] = {...}`) naming an op in a string literal (a table keyed by op names).
namespace {
std::vector<std::string> op_name_findings(const std::string& text, const std::string& file,
                                          bool op_file, const std::set<std::string>& names) {
  static const std::regex compare(
      R"re((\bname|\bn|\bop_name|name\(\)|\bop|->name|\.name)\s*[!=]=\s*"(\w+)"|"(\w+)"\s*[!=]=\s*(name|n|op_name|op)\b)re");
  static const std::regex list(R"re(\{\s*"\w+"(\s*,\s*"\w+")+\s*\})re");
  static const std::regex literal(R"re("(\w+)")re");
  static const std::regex array(R"re(\[\]\s*=\s*\{)re");
  std::vector<std::string> found;
  auto where = [&](size_t pos) {
    return file + ":" +
           std::to_string(std::count(text.begin(), text.begin() + long(pos), '\n') + 1);
  };
  const std::sregex_iterator end;
  for (std::sregex_iterator it(text.begin(), text.end(), compare); it != end; ++it) {
    const std::string n = (*it)[2].matched ? (*it)[2].str() : (*it)[3].str();
    if (names.count(n)) found.push_back(where(size_t(it->position())) + " " + it->str());
  }
  for (std::sregex_iterator it(text.begin(), text.end(), list); it != end; ++it) {
    const std::string m = it->str();
    bool all_ops = true;
    for (std::sregex_iterator l(m.begin(), m.end(), literal); l != end && all_ops; ++l)
      all_ops = names.count((*l)[1].str()) != 0;
    if (all_ops) found.push_back(where(size_t(it->position())) + " " + m.substr(0, 60));
  }
  if (!op_file) {
    for (std::sregex_iterator it(text.begin(), text.end(), array); it != end; ++it) {
      const size_t from = size_t(it->position() + it->length());
      const size_t to = std::min(text.find("};", from), text.size());
      const std::string body = text.substr(from, to - from);
      for (std::sregex_iterator l(body.begin(), body.end(), literal); l != end; ++l)
        if (names.count((*l)[1].str())) {
          found.push_back(where(size_t(it->position())) + " a table naming " + l->str());
          break;
        }
    }
  }
  return found;
}
}  // namespace

TEST_CASE("op table: no op-name list or op-name comparison outside the op table") {
  std::set<std::string> names;
  for (const of::OpDef* op : of::all_ops()) names.insert(op->name);
  // the scan finds each kind it looks for (the three lists that once came back, as written)
  const std::string planted =
      "constexpr Act kActs[] = {\n  {\"relu\", act_rows<fn::Relu>},\n};\n"
      "const std::pair<const OpDef*, const char*> acts[] = {{&OF_OP(\"silu\"), \"silu\"}};\n"
      "if (op == \"conv_transpose2d\") return &order;\n"
      "if (n.op->name != \"mm\") return;\n"
      "const char* ops[] = {\"add\", \"mul\"};\n";
  CHECK(op_name_findings(planted, "planted", false, names).size() == 6);  // the last twice
  // ... in an op file, its row tables are the table; a comparison still counts
  CHECK(op_name_findings(planted, "planted", true, names).size() == 3);
  // not a comparison of a name: an attribute's value that happens to be an op's name
  CHECK(op_name_findings("if (GeluAttrs::get<\"approximate\">(a) == \"tanh\") x = 1;\n"
                         "if (*mode == \"floor\") return 2;\n",
                         "planted", false, names)
            .empty());
  std::vector<std::string> found;
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(ONEFLOW_SOURCE_ROOT "/src")) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh"))
      continue;
    ++files;
    const std::string rel = std::filesystem::relative(e.path(), ONEFLOW_SOURCE_ROOT).string();
    const bool op_file = rel.rfind("src/ops/", 0) == 0;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    for (const std::string& f : op_name_findings(text.str(), rel, op_file, names))
      found.push_back(f);
  }
  CHECK(files > 100);  // the scan saw the tree
  std::string list_str;
  for (const auto& f : found) list_str += "\n  " + f;
  CHECK_MESSAGE(found.empty(), "op names listed or compared outside the op table:", list_str);
}

// NOTE [Epilogue activations]: the activations a fused linear epilogue applies are fields of
// their ops, each form with the CPU loops of the op's own kernel.
TEST_CASE("op table: the epilogue activations are their ops' fields") {
  std::vector<std::string> forms;
  for (const of::OpDef* op : of::all_ops())
    for (const of::EpilogueAct& e : op->epilogue_acts) {
      forms.push_back(e.name);
      CHECK(op->has(of::kElementwise));
      CHECK(of::find_epilogue_act(e.name) == &e);
    }
  std::sort(forms.begin(), forms.end());
  CHECK(forms == std::vector<std::string>{"gelu", "gelu_tanh", "relu", "silu", "tanh"});
  CHECK(of::find_epilogue_act("sigmoid") == nullptr);
  const of::OpDef& gelu = of::find_op("gelu");
  REQUIRE(bool(gelu.epilogue_form));
  of::Attrs tanh_form;
  tanh_form.values = {std::string("tanh")};
  CHECK(std::string(gelu.epilogue_acts[gelu.epilogue_form(tanh_form)].name) == "gelu_tanh");
  // each form computes what its op's kernel does, bit for bit (float32 rows and a float64 tensor)
  of::manual_seed(8);
  const of::Tensor x = of::randn({257}) * 3.0;
  for (const char* name : {"relu", "silu", "tanh"}) {
    INFO(name);
    const of::EpilogueAct* e = of::find_epilogue_act(name);
    REQUIRE(e != nullptr);
    of::Tensor r = x.clone();
    e->rows_f32(r.data_ptr<float>(), r.numel());
    const of::Tensor want = of::dispatch(of::find_op(name), {x}, {})[0];
    CHECK(th::same_bits(r, want));
    of::Tensor t = x.to(of::kFloat64);
    e->tensor(t);
    CHECK(th::same_bits(t, of::dispatch(of::find_op(name), {x.to(of::kFloat64)}, {})[0]));
  }
  CHECK(th::throws_with(
      [&] {
        of::Attrs a;
        a.values = {std::string("softsign")};
        of::dispatch(of::find_op("linear_act"), {of::ones({2, 2}), of::ones({2, 2}), of::Tensor()},
                     a);
      },
      {"[linear_act] unknown activation 'softsign'", "gelu, gelu_tanh"}));
}

TEST_CASE("op wrappers: an undefined argument is named, in one wording (ops/checks.h)") {
  const of::Tensor a = of::ones({2, 2}), none;
  CHECK(th::throws_with([&] { of::mm(a, none); }, {"[mm]", "mat2 is undefined"}));
  CHECK(th::throws_with([&] { of::addmm(a, none, a); }, {"[addmm]", "mat1 is undefined"}));
  CHECK(th::throws_with([&] { of::gather(none, 0, a); }, {"[gather]", "input is undefined"}));
  CHECK(th::throws_with([&] { of::index_select(a, 0, none); },
                        {"[index_select]", "index is undefined"}));
  CHECK(th::throws_with([&] { of::logsumexp(none, {0}); }, {"[logsumexp]", "input is undefined"}));
  // linear refuses mixed dtypes in its infer_meta (dispatch runs it before any 16-bit widening,
  // after autocast's casts): the wrapper neither checks dtypes nor runs twice
  CHECK(th::throws_with(
      [&] { of::linear(a.to(of::kBFloat16), a); },
      {"[linear]", "expected weight to have the input's dtype bfloat16", "float32"}));
  CHECK(th::throws_with([&] { of::linear(a, a, of::ones({2}, of::kFloat64)); },
                        {"[linear]", "bias", "float64"}));
  {
    of::autocast::Guard ac(of::kCPU, of::kBFloat16);
    const of::Tensor y = of::linear(of::ones({3, 2}), a.to(of::kBFloat16), of::ones({2}));
    CHECK(y.dtype() == of::kBFloat16);
    CHECK(of::layer_norm(of::ones({2, 4}).to(of::kBFloat16), {4}).dtype() == of::kFloat32);
  }
}

// ---------------------------------------------------------------- NOTE [No kernel dispatches]

namespace {
std::string nested_list() {
  std::string s;
  for (const auto& [k, op] : of::nested_dispatches()) s += "\n  kernel of " + k + " -> " + op;
  return s;
}
std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("kernels dispatch no op: the kernels that once did, on the inputs that made them") {
  // (tests/main.cpp checks the same over the whole run)
  of::manual_seed(3);
  const of::Tensor a = of::randn({6, 8}, of::kFloat64), b = of::randn({8, 5}, of::kFloat64);
  // strided in both dims: the GEMM's own scratch copy
  const of::Tensor as = of::randn({12, 16}, of::kFloat64).slice(0, 0, 12, 2).slice(1, 0, 16, 2);
  CHECK(of::allclose(of::mm(as, b), of::mm(as.contiguous(), b), 1e-12, 1e-12));
  CHECK(of::allclose(of::addmm(of::ones({5}, of::kFloat64), as, b, 0.5, 2.0),
                     of::mm(as.contiguous(), b) * 2.0 + 0.5, 1e-12, 1e-12));
  CHECK(of::allclose(
      of::mm(a.to(of::kBFloat16), b.to(of::kBFloat16)).to(of::kFloat64),
      of::mm(a.to(of::kBFloat16).to(of::kFloat64), b.to(of::kBFloat16).to(of::kFloat64)), 1e-2,
      1e-1));
  // linear (the weight read transposed), its bias
  const of::Tensor w = of::randn({5, 8}, of::kFloat64), bias = of::randn({5}, of::kFloat64);
  CHECK(of::allclose(of::linear(a, w, bias), of::mm(a, w.t()) + bias, 1e-12, 1e-12));
  // general-p norm, also over dims that are not consecutive, against a float64 reference
  const of::Tensor x = of::randn({3, 4, 5}, of::kFloat64).permute({2, 0, 1});
  const of::Tensor ref = x.abs().pow(3.0).sum({0, 2}).pow(1.0 / 3);
  CHECK(of::allclose(of::norm(x, 3.0, {0, 2}), ref, 1e-12, 1e-12));
  CHECK(of::allclose(of::norm(x.to(of::kFloat32), 3.0, {0, 2}).to(of::kFloat64), ref, 1e-5, 1e-6));
  CHECK(of::allclose(of::norm(x, 0.5), x.abs().pow(0.5).sum().pow(2.0), 1e-12, 1e-12));
  // var / std / logsumexp over non-consecutive dims (reduced dims moved last)
  CHECK(of::allclose(x.var({0, 2}), ((x - x.mean({0, 2}, true)).pow(2.0)).sum({0, 2}) / 19.0, 1e-12,
                     1e-12));
  CHECK(of::allclose(of::logsumexp(x, {0, 2}), x.exp().sum({0, 2}).log(), 1e-12, 1e-12));
  // a slice's gradient (view_scatter), a sum into another dtype, multinomial on strided rows
  const of::Tensor leaf = of::randn({4, 6}).requires_grad_();
  leaf.slice(1, 1, 5, 2).sum().backward();
  CHECK(leaf.grad().sum().item<double>() == 8.0);
  CHECK(of::arange(10, of::kInt32).sum({0}, false, of::kFloat32).item<double>() == 45.0);
  const of::Tensor probs = of::rand({5, 4}).t();
  CHECK(of::multinomial(probs, 2).sizes() == of::IntArrayRef({4, 2}));
  // norms' backward kernels given strided gradients
  const of::Tensor xn = of::randn({4, 6}).requires_grad_();
  (of::layer_norm(xn, {6}) * of::randn({6, 4}).t()).sum().backward();
  CHECK(xn.grad().defined());
  CHECK_MESSAGE(of::nested_dispatches().empty(), "nested dispatches:", nested_list());
}

TEST_CASE("kernels dispatch no op: the kernel files use no public op (a scan)") {
  // CPU kernels are checked at run time (above, and over the whole suite by tests/main.cpp); the
  // CUDA host code cannot run here. Both kernel folders are scanned: no public-op header, and
  // none of the Tensor methods that dispatch (kernel_contiguous, kernel_view, ... of
  // kernel_support.h instead). The CPU kernels live in src/cpu/ only: an op file holds meta, VJP,
  // rules, registration and public functions.
  const std::regex header(R"re(#include\s+"oneflow/(ops|ops_nn|ops_conv|functional|nn)\.h")re");
  const std::regex method(
      R"re(\.(t|view|copy_|zero_|fill_|to|sum|mean|narrow|contiguous|clone|reshape|permute|transpose|select|expand|abs|pow|exp|item|to_vector|sqrt|reciprocal|mm|bmm)\()re");
  std::vector<std::string> found;
  std::map<std::string, size_t> files;
  for (const char* dir : {"/src/cuda", "/src/cpu"})
    for (const auto& e :
         std::filesystem::directory_iterator(ONEFLOW_SOURCE_ROOT + std::string(dir))) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      ++files[dir];
      std::istringstream lines(read_text(e.path()));
      std::string line;
      for (int n = 1; std::getline(lines, line); ++n) {
        const size_t c = line.find("//");
        const std::string code = c == std::string::npos ? line : line.substr(0, c);
        if (std::regex_search(code, header) || std::regex_search(code, method))
          found.push_back(dir + ("/" + e.path().filename().string()) + ":" + std::to_string(n) +
                          " " + code);
      }
    }
  CHECK(files["/src/cuda"] > 20);  // the scan saw both trees
  CHECK(files["/src/cpu"] > 30);
  std::string s;
  for (const auto& f : found) s += "\n  " + f;
  CHECK_MESSAGE(found.empty(), "public ops in kernel files:", s);
  // every CPU kernel an op file registers is one of src/cpu/'s (to_device, which copies between
  // devices and is registered for both, excepted)
  const std::regex kernel(R"re(\s\.cpu = (\w+))re");
  std::vector<std::string> local;
  size_t registered = 0;
  for (const auto& e : std::filesystem::directory_iterator(ONEFLOW_SOURCE_ROOT "/src/ops")) {
    if (e.path().extension() != ".cpp") continue;
    const std::string text = read_text(e.path());
    for (std::sregex_iterator m(text.begin(), text.end(), kernel), end; m != end; ++m) {
      ++registered;
      if ((*m)[1] != "cpu" && (*m)[1] != "to_device_kernel")
        local.push_back(e.path().filename().string() + ": " + (*m)[0].str());
    }
  }
  CHECK(registered > 80);
  std::string l;
  for (const auto& f : local) l += "\n  " + f;
  CHECK_MESSAGE(local.empty(), "CPU kernels defined in op files:", l);
}

// ---------------------------------------------------------------- NOTE [Decompositions]

TEST_CASE("decompositions: addmm and baddbmm match their kernels (the CUDA path, run here)") {
  of::manual_seed(4);
  const of::Tensor self = of::randn({3, 5}, of::kFloat64), m1 = of::randn({3, 4}, of::kFloat64),
                   m2 = of::randn({4, 5}, of::kFloat64);
  const of::Tensor bself = of::randn({2, 3, 5}, of::kFloat64),
                   b1 = of::randn({2, 3, 4}, of::kFloat64), b2 = of::randn({2, 4, 5}, of::kFloat64);
  const of::Tensor nan_self = of::full({3, 5}, NAN, of::kFloat64);
  for (const std::pair<double, double>& ba : {std::pair{1.0, 1.0}, {0.5, 2.0}, {0.0, 1.5}}) {
    const double beta = ba.first, alpha = ba.second;
    const of::Tensor k1 = of::addmm(self, m1, m2, beta, alpha);
    const of::Tensor k2 = of::baddbmm(bself, b1, b2, beta, alpha);
    const of::Tensor k3 = of::addmm(nan_self, m1, m2, beta, alpha);
    of::PreferDecompositions use;
    CHECK(of::allclose(of::addmm(self, m1, m2, beta, alpha), k1, 1e-12, 1e-12));
    CHECK(of::allclose(of::baddbmm(bself, b1, b2, beta, alpha), k2, 1e-12, 1e-12));
    // beta = 0 ignores self, NaN included
    CHECK(of::addmm(nan_self, m1, m2, beta, alpha).isnan().any().item<bool>() ==
          k3.isnan().any().item<bool>());
  }
}

namespace {
// Calls f(mask, causal, dropout_p) for every attention case the public function takes: no mask,
// a bool mask (every row attends to its first key), an additive float64 mask, causal, and
// dropout 0 and 0.25.
void for_attention_cases(int64_t B, int64_t L, int64_t S,
                         const std::function<void(const of::Tensor&, bool, double)>& f) {
  for (int mask_kind = 0; mask_kind < 3; ++mask_kind) {
    for (bool causal : {false, true}) {
      if (causal && mask_kind != 0) continue;  // the public function takes one or the other
      for (double p : {0.0, 0.25}) {
        CAPTURE(mask_kind);
        CAPTURE(causal);
        CAPTURE(p);
        of::Tensor mask;
        if (mask_kind == 1) {
          mask = of::rand({B, L, S}) > 0.3;
          mask.select(2, 0).fill_(true);  // every row attends to something
        } else if (mask_kind == 2) {
          mask = of::randn({B, L, S}, of::kFloat64);
        }
        f(mask, causal, p);
      }
    }
  }
}
}  // namespace

TEST_CASE("decompositions: attention (the CUDA path) matches the kernel, forward and backward") {
  of::manual_seed(5);
  const int64_t B = 2, L = 5, S = 6, E = 4;
  for_attention_cases(B, L, S, [&](const of::Tensor& mask, bool causal, double p) {
    const of::Tensor q = of::randn({B, L, E}, of::kFloat64), k = of::randn({B, S, E}, of::kFloat64),
                     v = of::randn({B, S, E}, of::kFloat64), g = of::randn({B, L, E}, of::kFloat64);
    auto run = [&](bool decompose) {
      std::optional<of::PreferDecompositions> use;
      if (decompose) use.emplace();
      of::manual_seed(9);  // the same dropout draw on both sides
      const of::Tensor qq = q.clone().requires_grad_(), kk = k.clone().requires_grad_(),
                       vv = v.clone().requires_grad_();
      const of::Tensor o = of::scaled_dot_product_attention(qq, kk, vv, mask, p, causal);
      (o * g).sum().backward();
      return std::vector<of::Tensor>{o, qq.grad(), kk.grad(), vv.grad()};
    };
    const auto kern = run(false), dec = run(true);
    for (size_t i = 0; i < kern.size(); ++i) {
      CAPTURE(i);
      CHECK(of::allclose(dec[i], kern[i], 1e-10, 1e-10));
    }
  });
}

// The float32 attention kernels (their block GEMMs on the float32 kernel, the exponentials and
// sums on 16 lanes where the CPU has AVX-512) against the float64 ones, forward and backward:
// 37 keys (two 16-lane steps and a tail), every mask kind, causal, dropout (the same draw).
TEST_CASE("attention: the float32 kernels match float64, forward and backward") {
  of::manual_seed(15);
  const int64_t B = 2, L = 19, S = 37, E = 8, Ev = 5;
  for_attention_cases(B, L, S, [&](const of::Tensor& mask, bool causal, double p) {
    const of::Tensor q = of::randn({B, L, E}, of::kFloat64), k = of::randn({B, S, E}, of::kFloat64),
                     v = of::randn({B, S, Ev}, of::kFloat64),
                     g = of::randn({B, L, Ev}, of::kFloat64);
    auto run = [&](of::ScalarType dt) {
      of::manual_seed(9);  // the same dropout draw in both dtypes
      const of::Tensor qq = q.to(dt).requires_grad_(), kk = k.to(dt).requires_grad_(),
                       vv = v.to(dt).requires_grad_();
      const of::Tensor m = mask.defined() && mask.is_floating_point() ? mask.to(dt) : mask;
      const of::Tensor o = of::scaled_dot_product_attention(qq, kk, vv, m, p, causal);
      (o * g.to(dt)).sum().backward();
      return std::vector<of::Tensor>{o, qq.grad(), kk.grad(), vv.grad()};
    };
    const auto f32 = run(of::kFloat32), f64 = run(of::kFloat64);
    for (size_t i = 0; i < f32.size(); ++i) {
      CAPTURE(i);
      CHECK(f32[i].dtype() == of::kFloat32);
      CHECK(of::allclose(f32[i].to(of::kFloat64), f64[i], 1e-4, 1e-4));
    }
  });
}

TEST_CASE("decompositions: traced, the inner ops are recorded and replay bitwise") {
  of::manual_seed(6);
  const of::Tensor self = of::randn({3, 5}), w = of::randn({4, 5});
  auto fn = [&](const std::vector<of::Tensor>& x) {
    return std::vector<of::Tensor>{of::addmm(self, x[0], w, 0.5, 2.0).relu()};
  };
  const of::Tensor x = of::randn({3, 4});
  of::PreferDecompositions use;
  const of::trace::Graph g = of::trace::record(fn, {x}).graph;
  size_t addmm = 0, mm = 0;
  for (const auto& n : g.nodes) {
    addmm += n.op->name == "addmm";
    mm += n.op->name == "mm";
  }
  CHECK(addmm == 0);  // the decomposition ran: its ops are what the graph holds
  CHECK(mm == 1);
  auto f = of::jit::trace([&](const of::Tensor& a) { return fn({a})[0]; });
  const of::Tensor eager = fn({x})[0];
  CHECK(th::same_bits(f(x), eager));
  CHECK(th::same_bits(f(x), eager));
  CHECK(f.stats().replays >= 1);
  CHECK(f.graph().find("addmm") == std::string::npos);
}

TEST_CASE("decompositions: the ops that have one are the ones the tests above check") {
  std::vector<std::string> with;
  for (const of::OpDef* op : of::all_ops())
    if (op->decompose) with.push_back(op->name);
  std::sort(with.begin(), with.end());
  CHECK(with == std::vector<std::string>{"addmm", "baddbmm", "binary_cross_entropy",
                                         "scaled_dot_product_attention",
                                         "scaled_dot_product_attention_backward", "view_scatter"});
}

TEST_CASE(
    "decompositions: view_scatter (the CUDA path) matches its kernel, overlapping views too") {
  // the VJP of every view op that selects elements; CUDA has no kernel for it (the first GPU
  // run's model benchmarks stopped at it)
  of::manual_seed(6);
  const of::Tensor x = of::randn({4, 6, 5}, of::kFloat64);
  using F = std::function<of::Tensor(const of::Tensor&)>;
  const std::vector<std::pair<const char*, F>> views = {
      {"narrow", [](const of::Tensor& t) { return t.narrow(1, 2, 3); }},
      {"select", [](const of::Tensor& t) { return t.select(0, 2); }},
      {"strided slice", [](const of::Tensor& t) { return t.slice(2, 1, 5, 2).transpose(0, 1); }},
      {"overlapping as_strided",
       [](const of::Tensor& t) {
         return t.as_strided({3, 4, 6}, {10, 7, 1}, 3);
       }},
  };
  for (const auto& named : views) {  // (no structured binding: clang 14 cannot capture one)
    const char* name = named.first;
    const F& view = named.second;
    CAPTURE(name);
    auto grad = [&] {
      const of::Tensor xi = x.detach().requires_grad_(true);
      const of::Tensor y = view(xi);
      (y * of::arange(y.numel(), of::kFloat64).view(y.sizes())).sum().backward();
      return xi.grad();
    };
    const of::Tensor want = grad();
    of::PreferDecompositions use;
    const of::Tensor got = grad();
    CHECK(got.sizes() == want.sizes());
    CHECK(of::allclose(got, want, 1e-12, 1e-12));
  }
}

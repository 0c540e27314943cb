// The op-table fuzzer's signature table (tests/fuzz/op_signatures.txt) and seed corpus
// (tests/fuzz/corpus/ops/): recorded from the table rows, checked here to be current.
// Regenerate after adding or changing ops:
//   OF_FUZZ_WRITE=1 ./build/tests/oneflow_tests -tc='fuzz support*'
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "fuzz/op_call.h"
#include "ops/attr_schema.h"
#include "harness.h"

namespace {

struct SignatureRecorder : of::TraceObserver {
  std::map<std::string, offuzz::OpSignature> sigs;
  std::map<std::string, std::string> seeds;  // op -> one encoded call (filled in a second pass)
  std::map<std::string, std::pair<std::vector<of::Tensor>, of::Attrs>> first_call;
  void before_op(const of::OpDef&) override {}
  void on_op(const of::OpDef& op, const of::TensorList& inputs, const of::Attrs& attrs,
             const of::TensorList&, const of::Tensor* out) override {
    auto& s = sigs[op.name];
    s.name = op.name;
    const int n = int(inputs.size());
    if (std::find(s.arities.begin(), s.arities.end(), n) == s.arities.end()) {
      s.arities.push_back(n);
      std::sort(s.arities.begin(), s.arities.end());
    }
    for (int i = 0; i < n && i < 64; ++i)
      if (!inputs[size_t(i)].defined()) s.undefined_ok |= uint64_t(1) << i;
    if (s.attr_tags.size() < attrs.size()) {
      s.attr_tags.resize(attrs.size());
      s.strings.resize(attrs.size());
    }
    for (size_t a = 0; a < attrs.size(); ++a) {
      const int tag = int(attrs.values[a].index());
      auto& tags = s.attr_tags[a];
      if (std::find(tags.begin(), tags.end(), tag) == tags.end()) {
        tags.push_back(tag);
        std::sort(tags.begin(), tags.end());
      }
      if (tag == 6) {
        const std::string& str = std::get<std::string>(attrs.values[a]);
        auto& strs = s.strings[a];
        if (str.find_first_of(" \t/:\n") == std::string::npos &&
            std::find(strs.begin(), strs.end(), str) == strs.end())
          strs.push_back(str);
      }
    }
    if (!first_call.count(op.name) && !out)
      first_call[op.name] = {std::vector<of::Tensor>(inputs.begin(), inputs.end()), attrs};
  }
  void on_grad_access(const std::shared_ptr<of::TensorImpl>&) override {}
  void on_host_read(const char*) override {}
  void on_random(uint64_t, uint64_t, uint64_t) override {}
};

std::vector<of::Tensor> row_inputs(const th::OpRow& row) {
  if (row.make) return row.make(42);
  of::manual_seed(42);
  std::vector<of::Tensor> in;
  for (auto& s : row.shapes) in.push_back(of::rand(s, of::kFloat64) * (row.hi - row.lo) + row.lo);
  return in;
}

// Every row forward (and backward where it has a gradient), its dispatched ops observed.
SignatureRecorder record_rows() {
  SignatureRecorder rec;
  for (const auto& row : th::rows()) {
    if (row.global_layer) continue;  // collectives: the op fuzzer cannot match ranks
    std::vector<of::Tensor> in;
    try {
      in = row_inputs(row);
    } catch (const std::exception&) { continue; }
    for (size_t i = 0; i < in.size(); ++i)
      if (row.grad && in[i].is_floating_point() &&
          std::find(row.nondiff.begin(), row.nondiff.end(), int(i)) == row.nondiff.end())
        in[i] = in[i].detach().requires_grad_(true);
    of::g_tracer = &rec;
    try {
      of::Tensor out = row.fn(in);
      if (row.grad && out.requires_grad()) out.sum().backward();
    } catch (const std::exception&) {
      // rows that trace (a trace inside the recorder is refused) still add what they ran
    }
    of::g_tracer = nullptr;
  }
  return rec;
}

std::string signature_text(const SignatureRecorder& rec) {
  std::string text =
      "# op signatures for tests/fuzz/fuzz_ops.cpp, recorded from the table rows by\n"
      "# tests/test_fuzz_support.cpp (OF_FUZZ_WRITE=1 ./build/tests/oneflow_tests "
      "-tc='fuzz support*')\n";
  for (const auto& [name, s] : rec.sigs) text += offuzz::format_signature(s) + "\n";
  return text;
}

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("fuzz support: the op signatures and seed corpus are current") {
  SignatureRecorder rec = record_rows();
  const std::string text = signature_text(rec);
  const std::string root = ONEFLOW_SOURCE_ROOT "/tests/fuzz/";
  const std::vector<offuzz::OpSignature> sigs = offuzz::parse_signatures(text);
  // the text round-trips
  CHECK(signature_text(rec) == text);
  REQUIRE(sigs.size() == rec.sigs.size());
  for (const auto& s : sigs)
    CHECK(offuzz::format_signature(s) == offuzz::format_signature(rec.sigs[s.name]));
  if (const char* w = std::getenv("OF_FUZZ_WRITE"); w && *w == '1') {
    std::ofstream(root + "op_signatures.txt", std::ios::binary) << text;
    const std::string dir = root + "corpus/ops/";
    std::filesystem::create_directories(dir);
    for (size_t k = 0; k < sigs.size(); ++k) {
      const auto& s = sigs[k];
      auto it = rec.first_call.find(s.name);
      if (it == rec.first_call.end()) continue;
      const auto& [inputs, attrs] = it->second;
      offuzz::Out o;
      o.u16(uint16_t(k));
      uint8_t ar = 0;
      for (size_t a = 0; a < s.arities.size(); ++a)
        if (s.arities[a] == int(inputs.size())) ar = uint8_t(a);
      o.u8(ar);
      o.u8(0);  // no out=, no backward
      for (const auto& t : inputs) offuzz::write_spec(o, t);
      for (size_t a = 0; a < s.attr_tags.size(); ++a)
        offuzz::write_attr(o, s, a, a < attrs.size() ? attrs.values[a] : of::AttrValue{});
      std::ofstream(dir + s.name + ".bin", std::ios::binary) << o.buf;
    }
  }
  const std::string committed = read_file(root + "op_signatures.txt");
  CHECK_MESSAGE(committed == text,
                "tests/fuzz/op_signatures.txt is out of date: run OF_FUZZ_WRITE=1 "
                "./build/tests/oneflow_tests -tc='fuzz support*' and commit it with the corpus");
  // every call of an op with an attribute schema passed its fields' types, no more of them
  // (NOTE [Attribute schemas]: a schema that disagrees with its op's calls fails here)
  for (const of::OpDef* op : of::all_ops()) {
    auto it = rec.sigs.find(op->name);
    if (op->attr_types.empty() || it == rec.sigs.end()) continue;
    INFO(op->name);
    const auto& tags = it->second.attr_tags;
    CHECK(tags.size() <= op->attr_types.size());
    for (size_t a = 0; a < tags.size() && a < op->attr_types.size(); ++a) {
      INFO("attribute ", op->attr_names[a]);
      CHECK(!tags[a].empty());
      for (int t : tags[a]) CHECK(of::field_takes(op->attr_types[a], uint8_t(t)));
    }
  }
  // every op with attributes declares them with a schema (an optional field, such as argmax's
  // dim, takes its value's type or none)
  std::vector<std::string> untyped;
  for (const of::OpDef* op : of::all_ops())
    if (!op->attr_names.empty() && op->attr_types.empty()) untyped.push_back(op->name);
  CHECK(untyped.empty());
  CHECK(of::field_takes(of::find_op("argmax").attr_types[0], 0));    // none
  CHECK(of::field_takes(of::find_op("argmax").attr_types[0], 1));    // an int64
  CHECK(!of::field_takes(of::find_op("argmax").attr_types[0], 2));   // not a double
  CHECK(!of::field_takes(of::find_op("max_dim").attr_types[0], 0));  // a plain field: no none
  // every op of the table is reached by some row's dispatch (internal-only ops excepted)
  std::vector<std::string> missing;
  for (const of::OpDef* op : of::all_ops())
    if (!rec.sigs.count(op->name)) missing.push_back(op->name);
  MESSAGE("ops only dispatched inside kernels (not fuzzed directly): ", missing.size());
}

TEST_CASE("fuzz support: seed corpora of the file readers") {
  const std::string root = ONEFLOW_SOURCE_ROOT "/tests/fuzz/corpus/";
  if (const char* w = std::getenv("OF_FUZZ_WRITE"); w && *w == '1') {
    for (const char* t : {"checkpoint", "idx", "jit_load"})
      std::filesystem::create_directories(root + t);
    of::manual_seed(1);
    // checkpoints: one tensor, a module's state, several dtypes
    of::save(of::arange(6, of::kFloat32).reshape({2, 3}), root + "checkpoint/tensor.safetensors");
    of::nn::Linear lin(2, 3);
    of::save(lin, root + "checkpoint/linear.safetensors");
    of::save_tensors({{"a", of::tensor({1, 2, 3}, of::kInt64)},
                      {"b", of::tensor({true, false})},
                      {"c", of::ones({2, 2}, of::kFloat64)}},
                     root + "checkpoint/dtypes.safetensors", {{"note", "seed"}});
    // IDX: mode byte (0 plain, 1 gzip'd by the harness), then the file
    auto idx = [&](const std::string& name, uint8_t mode, std::vector<uint8_t> bytes) {
      bytes.insert(bytes.begin(), mode);
      std::ofstream(root + "idx/" + name, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    };
    idx("u8_2x3", 0, {0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6});
    idx("u8_2x3_gz", 1, {0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6});
    idx("i16_3", 0, {0, 0, 0x0B, 1, 0, 0, 0, 3, 0, 1, 0xFF, 0xFE, 0x7F, 0xFF});
    idx("f32_2", 1, {0, 0, 0x0D, 1, 0, 0, 0, 2, 0x3F, 0x80, 0, 0, 0xC0, 0, 0, 0});
    idx("f64_1", 0, {0, 0, 0x0E, 1, 0, 0, 0, 1, 0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18});
    idx("i8_empty", 0, {0, 0, 0x09, 2, 0, 0, 0, 0, 0, 0, 0, 4});
    // traced graphs: the payload (the harness writes the header), and one whole file (0xFF)
    of::NoGradGuard ng;
    auto f =
        of::jit::trace([](const of::Tensor& x) { return (x.matmul(x.t()) + 1).relu().sum(1); });
    (void)f(of::randn({3, 4}));
    const std::string tmp = root + "jit_load/tmp.oftrace";
    of::jit::save(f, tmp);
    const std::string file = read_file(tmp);
    std::remove(tmp.c_str());
    const size_t head = 8 + 4 + 8 + 4;
    std::ofstream(root + "jit_load/matmul_relu", std::ios::binary) << file.substr(head);
    std::ofstream(root + "jit_load/whole_file", std::ios::binary) << std::string(1, '\xFF') + file;
    // a saved training step with its state (kind 2; NOTE [Saved training steps]): SGD with
    // momentum over a linear layer with dropout, behind a version-3 header (0xFC)
    {
      of::EnableGradGuard eg;
      of::nn::Linear fc(4, 2);
      of::optim::SGD opt(fc->parameters(), of::optim::SGDOptions(0.1).momentum(0.9));
      auto step = of::jit::trace([&](const of::Tensor& x) {
        opt.zero_grad();
        of::Tensor loss = of::dropout(fc(x), 0.5, true).square().mean();
        loss.backward();
        opt.step();
        return loss;
      });
      for (int i = 0; i < 3; ++i) (void)step(of::randn({3, 4}));
      of::jit::save(step, tmp, of::jit::state_names(*fc, opt));
      const std::string train = read_file(tmp);
      std::remove(tmp.c_str());
      std::ofstream(root + "jit_load/train_step", std::ios::binary)
          << std::string(1, '\xFC') + train.substr(head);
    }
  }
  for (const char* t : {"checkpoint", "idx", "jit_load", "ops"}) {
    size_t n = 0;
    if (std::filesystem::is_directory(root + t))
      for (const auto& e : std::filesystem::directory_iterator(root + t)) n += e.is_regular_file();
    CHECK_MESSAGE(n > 0, "tests/fuzz/corpus/", t,
                  " is empty: run OF_FUZZ_WRITE=1 "
                  "./build/tests/oneflow_tests -tc='fuzz support*'");
  }
}

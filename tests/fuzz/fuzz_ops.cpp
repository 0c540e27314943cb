// libFuzzer target: every op of the op table, called through dispatch with the input counts
// and attribute types of its signature (op_signatures.txt, see op_call.h) and everything else
// from the fuzzer: shapes, strides (as_strided views, non-contiguous, zero-size, broadcast),
// storage offsets, dtypes, undefined inputs, attribute values, out= / in-place, backward.
// Each call must raise of::Error or succeed: any other exception aborts, and ASan/UBSan
// report crashes, out-of-bounds accesses and undefined behaviour.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <oneflow/oneflow.h>

#include "fuzz_file.h"
#include "op_call.h"

namespace {

std::vector<offuzz::OpSignature> g_sigs;
std::vector<const oneflow::OpDef*> g_ops;

constexpr size_t kMaxOutputBytes = size_t(64) << 20;

// OF_FUZZ_TRACE=1: print each call (op, inputs, attributes, mode) to stderr before it runs,
// to see what a reproducer does.
bool g_trace = false;

void print_call(const oneflow::OpDef& op, const oneflow::TensorList& inputs,
                const oneflow::Attrs& attrs, uint8_t mode) {
  namespace of = oneflow;
  std::string s = "fuzz_ops: " + op.name + " mode " + std::to_string(mode);
  for (const of::Tensor& t : inputs) {
    if (!t.defined()) {
      s += "\n  input: undefined";
      continue;
    }
    s += "\n  input: sizes " + of::shape_str(t.sizes()) + " strides " + of::shape_str(t.strides()) +
         " offset " + std::to_string(t.storage_offset()) + " " +
         std::string(of::dtype_name(t.scalar_type())) + (t.requires_grad() ? " requires_grad" : "");
  }
  for (size_t a = 0; a < attrs.values.size(); ++a) {
    s += "\n  attr " + std::to_string(a) + ": ";
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::monostate>) s += "none";
          else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>)
            s += std::to_string(x);
          else if constexpr (std::is_same_v<T, bool>) s += x ? "true" : "false";
          else if constexpr (std::is_same_v<T, of::DimVector>) s += of::shape_str(x);
          else if constexpr (std::is_same_v<T, of::ScalarType>) s += of::dtype_name(x);
          else if constexpr (std::is_same_v<T, std::string>) s += "\"" + x + "\"";
          else s += std::to_string(x.to_double());
        },
        attrs.values[a]);
  }
  std::fprintf(stderr, "%s\n", s.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  oneflow::ensure_op_table();
  offuzz::cap_memory();
  g_trace = std::getenv("OF_FUZZ_TRACE") != nullptr;
  std::ifstream f(ONEFLOW_SOURCE_ROOT "/tests/fuzz/op_signatures.txt", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  for (auto& s : offuzz::parse_signatures(ss.str())) {
    const oneflow::OpDef* op = nullptr;
    for (const oneflow::OpDef* o : oneflow::all_ops())
      if (o->name == s.name) op = o;
    if (!op || s.arities.empty()) continue;
    g_sigs.push_back(std::move(s));
    g_ops.push_back(op);
  }
  if (g_sigs.empty()) {
    std::fprintf(stderr, "fuzz_ops: no op signatures in tests/fuzz/op_signatures.txt\n");
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace of = oneflow;
  offuzz::Bytes b(data, size);
  const size_t k = b.u16() % g_sigs.size();
  const offuzz::OpSignature& sig = g_sigs[k];
  const of::OpDef& op = *g_ops[k];
  const int arity = sig.arities[b.u8() % sig.arities.size()];
  const uint8_t mode = b.u8();  // bit0 out=, bit1 in-place into input 0, bit2 backward
  try {
    of::TensorList inputs;
    for (int i = 0; i < arity; ++i) {
      offuzz::TensorSpec s = offuzz::read_spec(b);
      inputs.push_back(offuzz::build_tensor(s, i < 64 && ((sig.undefined_ok >> i) & 1)));
    }
    of::Attrs attrs;
    for (size_t a = 0; a < sig.attr_tags.size(); ++a)
      attrs.values.push_back(offuzz::read_attr(b, sig, a));
    of::Tensor out;
    if (mode & 1) out = offuzz::build_tensor(offuzz::read_spec(b), false);
    else if ((mode & 2) && !inputs.empty() && inputs[0].defined()) out = inputs[0];
    if (g_trace) print_call(op, inputs, attrs, mode);
    // results too large to be a test (a factory asked for 2^40 elements) are skipped; the
    // shape checks that raise come first, in infer_meta
    {
      of::MetaList metas;
      op.infer_meta(inputs, attrs, metas);
      size_t bytes = 0;
      for (const of::TensorMeta& m : metas) {
        size_t n = 1;
        for (int64_t d : m.sizes) {
          if (d < 0) {
            std::fprintf(stderr, "fuzz_ops: [%s] infer_meta gave a negative size\n",
                         op.name.c_str());
            std::abort();
          }
          n = (d != 0 && n > kMaxOutputBytes / size_t(d)) ? kMaxOutputBytes + 1 : n * size_t(d);
        }
        bytes += n * of::itemsize(m.dtype);
      }
      if (bytes > kMaxOutputBytes) return 0;
    }
    of::TensorList r = of::dispatch(op, inputs, attrs, out.defined() ? &out : nullptr);
    if ((mode & 4) && !r.empty() && r[0].defined() && r[0].requires_grad()) r[0].sum().backward();
  } catch (const of::Error&) {
    // refused with a message: fine
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_ops: [%s] threw a non-of::Error exception: %s\n", op.name.c_str(),
                 e.what());
    std::abort();
  }
  return 0;
}

// op_def.h (internal): what an op of the table is: OpDef (traits, meta inference, kernels, VJP,
// decomposition, SBP rule, fusion and folding facts), its attributes (Attrs), its outputs'
// metadata (TensorMeta) and the arguments a kernel receives (KernelArgs). Kernels and op
// definitions include it; it reaches no op, no dispatcher and no public op API.
#pragma once
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "oneflow/tensor.h"
#include "ops/elem_kind.h"

namespace oneflow {

// Thread-locals of the library use the initial-exec model (no __tls_get_addr call per access;
// the library is linked, not dlopen'ed late, and these few bytes fit the static TLS reserve).
#define OF_TLS thread_local __attribute__((tls_model("initial-exec")))

using TensorList = SmallVector<Tensor, 4>;
using AttrValue =
    std::variant<std::monostate, int64_t, double, bool, DimVector, ScalarType, std::string, Scalar>;

// Op attributes, positional; names live in OpDef::attr_names (for printing and serialization),
// and a family's code reads them by name through its schema (NOTE [Attribute schemas]).
struct Attrs {
  SmallVector<AttrValue, 4> values;
  Attrs() = default;
  Attrs(std::initializer_list<AttrValue> il) : values(il) {}
  // Checked reads: a node from a graph file may hold fewer attributes than its op reads (an
  // of::Error), or one of another type (std::bad_variant_access; the loader refuses both).
  const AttrValue& at(size_t k) const {
    if (k >= values.size()) missing(k);
    return values[k];
  }
  int64_t i(size_t k) const { return std::get<int64_t>(at(k)); }
  double f(size_t k) const { return std::get<double>(at(k)); }
  bool b(size_t k) const { return std::get<bool>(at(k)); }
  const DimVector& ints(size_t k) const { return std::get<DimVector>(at(k)); }
  ScalarType dtype(size_t k) const { return std::get<ScalarType>(at(k)); }
  const std::string& str(size_t k) const { return std::get<std::string>(at(k)); }
  const Scalar& scalar(size_t k) const { return std::get<Scalar>(at(k)); }
  size_t size() const { return values.size(); }
  [[noreturn]] void missing(size_t k) const;
};

// What infer_meta produces for each output. view_of >= 0 makes the output a view of that
// input's storage with the given strides and offset (no kernel runs for it).
struct TensorMeta {
  DimVector sizes;
  DimVector strides;  // empty: contiguous (only used for views)
  int64_t offset = 0;
  ScalarType dtype = kFloat32;
  Device device;
  int view_of = -1;
};
using MetaList = SmallVector<TensorMeta, 2>;

enum OpTrait : uint32_t {
  kElementwise = 1u << 0,
  kReduction = 1u << 1,
  kView = 1u << 2,
  // out may alias input 0: elementwise with the same indexing, or a kernel that starts by
  // copying input 0 into out and skips that copy when they are one (scatter_add)
  kInplaceOk = 1u << 3,
  kRandom = 1u << 4,     // consumes the generator
  kSyncsHost = 1u << 5,  // reads tensor data on the host to know output shapes
  kCollective = 1u << 6,
  // (1u << 7 was kNonDifferentiable, never read: an op without a vjp is not differentiable)
  kFactory = 1u << 8,  // no tensor inputs
  // effects beyond its outputs (a point-to-point send or receive): a traced graph never
  // removes, merges or folds the node, whatever uses its outputs on this rank
  kEffect = 1u << 9,
  // one deterministic pass over its inputs (normalizations, softmax): rematerialization may run
  // it again instead of keeping its result alive (NOTE [Rematerialization])
  kCheapRecompute = 1u << 10,
  // validates its index values (embedding ids, class targets, gather/scatter indices) in
  // infer_meta and its CPU kernel trusts them, so a replay runs infer_meta first (NOTE
  // [Replayed index checks]); its CUDA kernel raises the replay's error flag instead
  kChecksIndices = 1u << 11,
  // its kernels compute in float32/float64 only: dispatch widens float16/bfloat16 inputs around
  // it unless its CUDA kernel takes them (NOTE [Reduced-precision fallback] in amp.cpp)
  kWidens16Bit = 1u << 12,
};

// What autocast does to the op's floating inputs (NOTE [Autocast] in amp.cpp): nothing, run in
// the autocast dtype, go up to float32, or promote to the widest of them.
enum class AutocastPolicy : uint8_t { kNone, kLower, kFloat32, kPromote };

// How a generated fused kernel (trace/fusion_codegen.cpp) computes one element of a
// kElementwise op: by its functor (OpDef::functor), or by one of the forms that read attributes
// or write into their input 0 (fill_ and copy_ do not read it).
enum class FusedForm : uint8_t {
  kFunctor,
  kGelu,
  kWhere,
  kFill,
  kCopyInto,
  kCast,
  kPowScalar,
  kClamp
};

// An algebraic identity the trace's fold pass applies (x*1, x+0, x/1, x**1, a copy that changes
// nothing): the node's output is its input `keep`, unchanged, when
//   kOtherInputIs  the other input (binary ops) is a constant scalar equal to `value`,
//   kScalarAttrIs  the op's one attribute (a Scalar or a double) equals `value`,
//   kSameLayout    the input is contiguous (a copy or cast into its own dtype and layout);
// in every case the kept input's dtype, sizes and strides must equal the output's.
struct FoldIdentity {
  enum Kind : uint8_t { kOtherInputIs, kScalarAttrIs, kSameLayout };
  Kind kind = kOtherInputIs;
  int8_t keep = -1;  // -1: no identity (an unused slot of a row table's fixed array)
  double value = 0;
};

// NOTE [Epilogue activations]: an elementwise activation that a fused linear epilogue can apply
// (trace/rewrite_epilogue.cpp makes linear_act nodes; their `act` attribute names the form).
// An op has one form per value of the attribute that selects it: gelu's are "gelu"
// (approximate 'none') and "gelu_tanh" ('tanh'); relu, silu and tanh have one each. A form
// carries the CPU loops that compute it exactly as the op's own kernel does.
struct EpilogueAct {
  const char* name = nullptr;                       // linear_act's `act` value
  void (*rows_f32)(float* p, int64_t n) = nullptr;  // in place over a float32 row segment
  void (*tensor)(const Tensor& t) = nullptr;        // in place over a float tensor, any dtype
};

struct KernelArgs {
  const TensorList& inputs;
  const Attrs& attrs;
  TensorList& outputs;
};

class VjpCtx;  // defined in autograd/node.h

using InferMetaFn = void (*)(const TensorList& inputs, const Attrs& attrs, MetaList& out);
using KernelFn = void (*)(const KernelArgs& args);
// Gradients for each input (undefined where none), written with public ops.
using VjpFn = TensorList (*)(const VjpCtx& ctx, const TensorList& grad_outputs);
// NOTE [Decompositions]: an op computed by other ops of the table, written with public ops.
// Dispatch runs it, after infer_meta has validated the call, for a device where the op has no
// kernel: outside any kernel scope (the tracer records the inner ops, so memplan and fusion plan
// them) and without autograd recording (autograd records this op, with its own VJP: the same
// gradients on every device). It returns the op's outputs, with infer_meta's sizes and dtypes.
using DecomposeFn = TensorList (*)(const TensorList& inputs, const Attrs& attrs);

// NOTE [SBP rules] (src/global/dispatch.cpp): how an op runs on global tensors. `signatures`
// lists 1-D signatures (an Sbp per input and per output) over the logical shapes; the global
// layer picks one per mesh axis (an exact match of the inputs' SBPs first, else the least
// bytes moved), boxes the inputs and runs the op on the local pieces. `localize` rewrites
// attrs that name sizes (view, expand) for the local pieces. Ops without a rule get a default
// from their traits (elementwise, reductions); an op with neither raises on global inputs, and
// one that is right on gathered whole values says so with sbp_rules::kWholeValues.
struct SbpSig {
  SmallVector<Sbp, 4> in;
  SmallVector<Sbp, 2> out;
};
struct SbpRuleCtx {
  const struct OpDef& op;
  const TensorList& inputs;  // global, logical shapes
  const Attrs& attrs;
  const MetaList& metas;  // logical output metas
};
struct SbpRule {
  void (*signatures)(const SbpRuleCtx& ctx, std::vector<SbpSig>& out) = nullptr;
  // attrs for the local op, given each output's local sizes; null: the attrs as they are
  void (*localize)(const SbpRuleCtx& ctx, const std::vector<DimVector>& local_out_sizes,
                   Attrs& attrs) = nullptr;
};

// Masks of an op's inputs and outputs (OpDef::save_inputs, save_outputs, nondiff_inputs,
// contiguous_inputs): `in(0) | in(2)`, `out(1)`, `kEveryInput`.
constexpr uint32_t in(int k) { return 1u << k; }
constexpr uint32_t out(int k) { return 1u << k; }
constexpr uint32_t kEveryInput = ~0u;

struct OpDef {
  std::string name;
  uint32_t traits = 0;
  std::vector<std::string> attr_names;
  // The AttrValue alternative of each attribute, from the op's schema (NOTE [Attribute
  // schemas]; bit 0x80 marks an optional field, which may also hold none); empty for ops
  // without attributes. register_op checks it against attr_names.
  std::vector<uint8_t> attr_types;
  InferMetaFn infer_meta = nullptr;
  KernelFn cpu = nullptr;
  KernelFn cuda = nullptr;            // null: the decomposition, else "[op] has no CUDA ..."
  DecomposeFn decompose = nullptr;    // NOTE [Decompositions]
  VjpFn vjp = nullptr;                // null: not differentiable
  uint32_t save_inputs = 0;           // bitmask of inputs the VJP reads
  uint32_t save_outputs = 0;          // bitmask of outputs the VJP reads
  uint32_t nondiff_inputs = 0;        // bitmask of inputs that never receive gradients
  const SbpRule* sbp_rule = nullptr;  // null: the default of the traits (NOTE [SBP rules])
  // kRandom ops: index of the `seed` attr (`offset` follows it); the tracer re-draws both at
  // every replay so that a replay advances the generator exactly as the eager call did.
  int rng_seed_attr = -1;
  // kElementwise ops: the functor (ops/functors.h) computing one element, e.g. "fn::Tanh"
  // (generated fused kernels name it; the CPU fuser calls the op's own kernel per block).
  const char* functor = nullptr;
  // The functor's kind (NOTE [Elementwise kinds]): set by the row tables from the functor.
  ElemKind elem_kind = ElemKind::kNone;
  // Inputs the kernel reads as dense row-major buffers: dispatch makes them contiguous first
  // (a recorded, differentiable copy), so kernels never allocate behind the tracer's planner.
  uint32_t contiguous_inputs = 0;
  // The CUDA kernel takes float16/bfloat16 operands itself (accumulating in float): dispatch
  // does not widen them for it (NOTE [Reduced-precision fallback]). Set by the CUDA module.
  bool cuda_16bit = false;
  AutocastPolicy autocast = AutocastPolicy::kNone;
  // The input that is usually a weight (linear's, mm's right operand): where a traced graph
  // only reads it, a replay names its storage to the kernel, which may keep work derived from
  // it between calls (NOTE [Prepacked weights]); -1: none.
  int weight_input = -1;
  std::vector<FoldIdentity> fold_identities;
  FusedForm fused_form = FusedForm::kFunctor;
  // NOTE [Epilogue activations]: the op's forms (empty: no epilogue activation), and which
  // form a node of the op is, from its attributes (null: the first).
  std::vector<EpilogueAct> epilogue_acts;
  size_t (*epilogue_form)(const Attrs& attrs) = nullptr;
  // Graph files before format 3 kept this op's attributes in another order (NOTE [Attribute
  // order of old graph files] in trace/graph_reader.cpp): for each current position, the
  // position it had then; empty: unchanged.
  std::vector<int> attr_order_before_v3;
  bool has(OpTrait t) const { return (traits & t) != 0; }
};

// Equality and hashing of attrs (common-subexpression elimination, trace cache keys).
bool scalar_equal(const Scalar& a, const Scalar& b);
size_t hash_scalar(const Scalar& s);
bool operator==(const Attrs& a, const Attrs& b);
size_t hash_attrs(const Attrs& a);

}  // namespace oneflow

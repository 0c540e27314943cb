// dispatch.h (internal): OpDef, the op table, and the one dispatch path every op runs through.
// NOTE [Dispatch path]: validate + infer meta -> [global hook] -> allocate -> kernel ->
// [autograd: record node] -> [tracer hook]. Ops never allocate or record on their own.
#pragma once
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "oneflow/ops.h"
#include "oneflow/tensor.h"
#include "ops/elem_kind.h"

namespace oneflow {

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
  kNonDifferentiable = 1u << 7,
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
  Kind kind;
  int8_t keep;
  double value = 0;
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
// from their traits (elementwise, reductions); anything else runs on broadcast inputs.
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
  bool has(OpTrait t) const { return (traits & t) != 0; }
};

// Equality and hashing of attrs (common-subexpression elimination, trace cache keys).
bool scalar_equal(const Scalar& a, const Scalar& b);
size_t hash_scalar(const Scalar& s);
bool operator==(const Attrs& a, const Attrs& b);
size_t hash_attrs(const Attrs& a);

// NOTE [Prepacked weights]: a replayed step whose op has a weight_input that is a root of the
// graph (a parameter or constant) no node of the graph writes runs its kernel inside a
// ConstantOperandScope naming that input's storage. A kernel may then keep a transformed copy
// of the operand (the bfloat16 GEMM's packed strips, cpu/gemm_bf16.cpp) keyed by the storage,
// the view and the storage's version, and reuse it while the version is unchanged: every write
// through the library (in-place ops, copy_, an optimizer step, a replay's in-place write)
// bumps the version. Memory written behind the library's back (through data_ptr) is not seen,
// as ONNX Runtime's and a frozen TorchScript module's prepacked weights do not see it. Eager
// calls never name a constant operand.
const StorageImpl* constant_operand_storage();
class ConstantOperandScope {
 public:
  explicit ConstantOperandScope(const StorageImpl* s);
  ~ConstantOperandScope();
  ConstantOperandScope(const ConstantOperandScope&) = delete;
  ConstantOperandScope& operator=(const ConstantOperandScope&) = delete;

 private:
  const StorageImpl* prev_;
};

// Registers an op (called from the register_*_ops functions); names are unique.
const OpDef* register_op(OpDef def);
// The op with this name; throws of::Error if there is none.
const OpDef& find_op(std::string_view name);
// Fills the CUDA kernel slot of the op named `name`: the CUDA module does this once, when it is
// loaded (NOTE [CUDA module] in cuda_loader.cpp), before any CUDA tensor exists.
void set_op_cuda_kernel(std::string_view name, KernelFn fn);
// Marks its CUDA kernel as taking float16/bfloat16 operands (OpDef::cuda_16bit); same caller.
void set_op_cuda_16bit(std::string_view name);
// Every registered op, in registration order.
std::vector<const OpDef*> all_ops();
// Builds the op table if needed.
void ensure_op_table();
// NOTE [Reaching an op]: code reaches an op of the table one way: OF_OP("name"), a lookup by
// name made once per call site and kept in a function-local static (building the table on
// first use). The table-driven unary/binary families look their rows up by name the same way.
#define OF_OP(name)                                                       \
  (*[]() -> const ::oneflow::OpDef* {                                     \
    static const ::oneflow::OpDef* const op_ = &::oneflow::find_op(name); \
    return op_;                                                           \
  }())

// Runs `op` on `inputs`. `out`, when given, receives the result (out= and in-place forms):
// its shape must equal the inferred one and the result dtype must be castable to its dtype.
TensorList dispatch(const OpDef& op, TensorList inputs, Attrs attrs = {}, Tensor* out = nullptr);
inline Tensor dispatch1(const OpDef& op, TensorList inputs, Attrs attrs = {},
                        Tensor* out = nullptr) {
  TensorList r = dispatch(op, std::move(inputs), std::move(attrs), out);
  return std::move(r[0]);
}

// Thread-locals of the library use the initial-exec model (no __tls_get_addr call per access;
// the library is linked, not dlopen'ed late, and these few bytes fit the static TLS reserve).
#define OF_TLS thread_local __attribute__((tls_model("initial-exec")))

// NOTE [Trace observer]: while of::jit::trace records on a thread, this observer sees every
// op dispatched there (not the ops kernels run internally), every access to a leaf's .grad,
// every host read and every draw from the generator. Null when nothing records.
struct TraceObserver {
  virtual ~TraceObserver() = default;
  // Before anything runs: refuses ops that read data on the host to know their shapes.
  virtual void before_op(const OpDef& op) = 0;
  // After the kernel: `out` is the caller's out=/in-place tensor (outputs[0] is written into
  // it), null when every output was freshly allocated.
  virtual void on_op(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                     const TensorList& outputs, const Tensor* out) = 0;
  // The .grad of `leaf` is about to be read or rebound.
  virtual void on_grad_access(const std::shared_ptr<TensorImpl>& leaf) = 0;
  // A host read of tensor data (item, to_vector, printing): raises while recording.
  virtual void on_host_read(const char* what) = 0;
  // `counters` Philox counters were reserved at (seed, offset).
  virtual void on_random(uint64_t seed, uint64_t offset, uint64_t counters) = 0;
};
extern OF_TLS TraceObserver* g_tracer;
// What dispatch wraps around a kernel call (executors that call kernels directly use it too):
// no autograd recording, and ops the kernel dispatches count as internal.
struct KernelScope {
  NoGradGuard no_grad;
  KernelScope();
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
};
// True while a kernel runs on this thread (ops it dispatches are internal, never recorded).
bool in_kernel();
// While one lives on a thread, ops with a decomposition run it even where they have a kernel
// (tests check decompositions on the CPU against the kernels; NOTE [Decompositions]).
struct PreferDecompositions {
  PreferDecompositions();
  ~PreferDecompositions();
  PreferDecompositions(const PreferDecompositions&) = delete;

 private:
  bool prev_;
};
// Every (kernel's op, op it dispatched) pair seen in this process (NOTE [No kernel dispatches]).
std::vector<std::pair<std::string, std::string>> nested_dispatches();
// Tells the recorder, if one is active and no kernel runs, about a host read of `t`'s data.
void note_host_read(const Tensor& t, const char* what);
using GlobalDispatchHook = TensorList (*)(const OpDef& op, TensorList inputs, Attrs attrs,
                                          Tensor* out);
// What dispatch decides about autograd before anything runs (the global layer shares it):
// whether the result records a node, and the pre-write copy of an in-place op's input.
struct GradPlan {
  bool needs_grad = false;
  TensorList snapshot;
};
GradPlan plan_autograd(const OpDef& op, const TensorList& inputs, const Tensor* out);
extern GlobalDispatchHook g_global_dispatch_hook;

// ---- helpers shared by op definitions ----
// Normalizes a possibly negative dim against `ndim`; [op] error when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
DimVector contiguous_strides(IntArrayRef sizes);
int64_t checked_numel(IntArrayRef sizes, const char* op);  // errors on negative/overflowing sizes
// a * b of sizes taken from attributes or shapes (a direct dispatch or a loaded graph may hold
// any int64): [op] error naming `what` when the product overflows int64.
inline int64_t checked_mul(int64_t a, int64_t b, const char* op, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("[{}] {} overflows int64 ({} * {})", op, what, a, b);
  return r;
}
// The device a (device_type, device_index) attribute pair names; [op] error for another type
// or an index outside -1..127 (attributes of a direct dispatch or a loaded graph are any int).
Device device_from_attrs(int64_t type, int64_t index, const char* op);
// Elements a strided view (non-negative strides, offset >= 0) needs in its storage: 0 when
// it is empty, else its last element + 1; [op] error on bad or overflowing geometry.
int64_t view_extent(IntArrayRef sizes, IntArrayRef strides, int64_t offset, const char* op);
std::string shape_str(IntArrayRef sizes);  // "(2, 3)"
// Allocates an uninitialized contiguous tensor (no autograd, no dispatch).
Tensor make_empty(IntArrayRef sizes, ScalarType dtype, Device device);
// A new impl viewing `base`'s storage.
Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t offset);
// For kernels, which dispatch no op (NOTE [No kernel dispatches]): `t` itself when it is
// row-major, else a row-major scratch copy made by the copy kernel of t's device, nothing
// dispatched (the scratch lives while the kernel holds it).
Tensor kernel_contiguous(const Tensor& t);
// For kernels: a fresh row-major copy of `t` converted to `dtype` (the copy kernel; clone()
// when dtype is t's own).
Tensor kernel_cast(const Tensor& t, ScalarType dtype);
// For kernels: a view of `t` with its dims taken in `perm` order (t.permute(perm)), or the last
// two swapped (t.t() of a matrix), made directly.
Tensor kernel_permute(const Tensor& t, IntArrayRef perm);
Tensor kernel_transpose(const Tensor& t);
// For kernels: a row-major `t` seen with other sizes of the same count (t.view(sizes)), and
// t.narrow(dim, start, length); views made directly.
Tensor kernel_view(const Tensor& t, IntArrayRef sizes);
Tensor kernel_narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
// For kernels: dst <- src (cast to dst's dtype, broadcast) by the copy_ kernel of dst's device,
// and t <- v by the fill_ kernel; nothing dispatched.
void kernel_copy_into(const Tensor& dst, const Tensor& src);
void kernel_fill(const Tensor& t, const Scalar& v);
// A 0-d tensor from a Scalar, marked as a wrapped number for promotion.
Tensor wrap_scalar(const Scalar& s, ScalarType dtype, Device device);
// PyTorch's result type over tensors (with wrapped numbers ranked lower).
ScalarType result_type(const TensorList& operands);
// Casts (through the dispatched `to` op, so it is differentiable) when dtypes differ.
Tensor cast_if_needed(const Tensor& t, ScalarType dtype);
bool grad_mode_enabled();

// Registration entry points, one per op family (called once by the op table).
void register_core_ops();
void register_unary_ops();
void register_binary_ops();
void register_reduce_ops();
void register_linalg_ops();
void register_shape_ops();
void register_index_ops();
void register_random_ops();
void register_global_ops();  // installs the global dispatch hook

}  // namespace oneflow

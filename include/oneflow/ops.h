// ops.h: the public op functions (libtorch's names and argument orders, of:: for torch::).
#pragma once
#include <array>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "oneflow/guards.h"
#include "oneflow/tensor.h"

namespace oneflow {

// ---------------------------------------------------------------- factories
Tensor empty(IntArrayRef size, TensorOptions options = {});
// libtorch's empty(size, options, memory_format): ChannelsLast(3d) gives channels-last strides.
Tensor empty(IntArrayRef size, TensorOptions options, std::optional<MemoryFormat> memory_format);
Tensor empty_strided(IntArrayRef size, IntArrayRef stride, TensorOptions options = {});
Tensor zeros(IntArrayRef size, TensorOptions options = {});
Tensor ones(IntArrayRef size, TensorOptions options = {});
Tensor full(IntArrayRef size, const Scalar& fill_value, TensorOptions options = {});
// A 0-d tensor holding `value` (libtorch's torch::tensor(3.5)): float32 for floating values,
// int64 for integers, bool for bools, unless `options` give a dtype.
Tensor tensor(const Scalar& value, TensorOptions options = {});
// Constant padding, libtorch's constant_pad_nd: `pad` as (left, right) pairs from the last dim.
Tensor constant_pad_nd(const Tensor& x, IntArrayRef pad, const Scalar& value = 0);
Tensor scalar_tensor(const Scalar& s, TensorOptions options = {});
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step,
              TensorOptions options = {});
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m, TensorOptions options = {});
Tensor rand(IntArrayRef size, TensorOptions options = {});
Tensor randn(IntArrayRef size, TensorOptions options = {});
Tensor randint(int64_t high, IntArrayRef size, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions options = {});
Tensor randperm(int64_t n, TensorOptions options = kInt64);
// Indices drawn from the categorical distribution(s) of the rows of `input` (weights >= 0, not
// necessarily normalized): shape (num_samples) or (rows, num_samples), int64. Not
// differentiable; replayed by a traced function with fresh draws each call.
Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement = false);
Tensor empty_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& v,
                 std::optional<TensorOptions> options = std::nullopt);
Tensor rand_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
// Wraps memory without copying; the tensor does not own it (or calls `deleter` when freed).
Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options = {});
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {});
Tensor from_blob(void* data, IntArrayRef sizes, std::function<void(void*)> deleter,
                 TensorOptions options = {});
// A new tensor holding a copy of `values`, shaped `shape` (1-D when shape is empty).
template <class T>
Tensor tensor(const std::vector<T>& values, IntArrayRef shape = {}, TensorOptions options = {});
template <class T> Tensor tensor(std::initializer_list<T> values, TensorOptions options = {}) {
  return tensor(std::vector<T>(values), {}, options);
}

// Seeds the global counter-based generator (results do not depend on the thread count).
void manual_seed(uint64_t seed);
// ---------------------------------------------------------------- views and copies
Tensor view(const Tensor& t, IntArrayRef size);
Tensor reshape(const Tensor& t, IntArrayRef size);
Tensor permute(const Tensor& t, IntArrayRef dims);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor t(const Tensor& t);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& t, int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, IntArrayRef size);
Tensor squeeze(const Tensor& t);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor as_strided(const Tensor& t, IntArrayRef size, IntArrayRef stride,
                  std::optional<int64_t> storage_offset = std::nullopt);
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
Tensor detach(const Tensor& t);
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& ts);
DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b);

// ---------------------------------------------------------------- elementwise
#define OF_UNARY_FN(name)       \
  Tensor name(const Tensor& x); \
  Tensor& name##_(Tensor& x);
// clang-format off
OF_UNARY_FN(neg)
OF_UNARY_FN(abs)
OF_UNARY_FN(sign)
OF_UNARY_FN(exp)
OF_UNARY_FN(exp2)
OF_UNARY_FN(log)
OF_UNARY_FN(log2)
OF_UNARY_FN(log1p)
OF_UNARY_FN(expm1)
OF_UNARY_FN(sqrt)
OF_UNARY_FN(rsqrt)
OF_UNARY_FN(reciprocal)
OF_UNARY_FN(square)
OF_UNARY_FN(sin)
OF_UNARY_FN(cos)
OF_UNARY_FN(tan)
OF_UNARY_FN(tanh)
OF_UNARY_FN(sigmoid)
OF_UNARY_FN(relu)
OF_UNARY_FN(silu)
OF_UNARY_FN(erf)
OF_UNARY_FN(floor)
OF_UNARY_FN(ceil)
OF_UNARY_FN(round)
OF_UNARY_FN(trunc)
#undef OF_UNARY_FN
// clang-format on
Tensor gelu(const Tensor& x, std::string_view approximate = "none");  // "none" | "tanh"
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min,
             const std::optional<Tensor>& max = {});
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor pow(const Tensor& base, const Scalar& exponent);
Tensor pow(const Scalar& base, const Tensor& exponent);
Tensor where(const Tensor& condition, const Tensor& x, const Tensor& y);
Tensor where(const Tensor& condition, const Scalar& x, const Tensor& y);
Tensor where(const Tensor& condition, const Tensor& x, const Scalar& y);
Tensor where(const Tensor& condition, const Scalar& x, const Scalar& y);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor rsub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor div(const Tensor& a, const Tensor& b,
           std::optional<std::string_view> rounding_mode = std::nullopt);
Tensor div(const Tensor& a, const Scalar& b,
           std::optional<std::string_view> rounding_mode = std::nullopt);
Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b);
#define OF_BINARY_FN(name)                       \
  Tensor name(const Tensor& a, const Tensor& b); \
  Tensor name(const Tensor& a, const Scalar& b);
// clang-format off
OF_BINARY_FN(mul)
OF_BINARY_FN(maximum)
OF_BINARY_FN(minimum)
OF_BINARY_FN(fmod)
OF_BINARY_FN(remainder)
OF_BINARY_FN(atan2)
OF_BINARY_FN(eq)
OF_BINARY_FN(ne)
OF_BINARY_FN(lt)
OF_BINARY_FN(le)
OF_BINARY_FN(gt)
OF_BINARY_FN(ge)
OF_BINARY_FN(logical_and)
OF_BINARY_FN(logical_or)
OF_BINARY_FN(logical_xor)
#undef OF_BINARY_FN
// clang-format on
// Whether all elements are close: |a - b| <= atol + rtol * |b| (NaNs equal when equal_nan).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);
// The dtype of an op on these operands under PyTorch's promotion rules.
ScalarType result_type(const Tensor& a, const Tensor& b);
ScalarType result_type(const Tensor& a, const Scalar& b);

// ---------------------------------------------------------------- reductions
Tensor sum(const Tensor& x, std::optional<ScalarType> dtype = std::nullopt);
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim = false,
           std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& x, std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& x, std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
Tensor max(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, bool unbiased = true);
Tensor var(const Tensor& x, IntArrayRef dims, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& x, std::optional<IntArrayRef> dims, std::optional<int64_t> correction,
           bool keepdim = false);
Tensor std(const Tensor& x, bool unbiased = true);
Tensor std(const Tensor& x, IntArrayRef dims, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, std::optional<IntArrayRef> dims, std::optional<int64_t> correction,
           bool keepdim = false);
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);
Tensor norm(const Tensor& x, const Scalar& p = 2);
Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dims, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
// Sums broadcast dimensions away so the result has shape `size` (the VJP of broadcasting).
Tensor sum_to_size(const Tensor& x, IntArrayRef size);

// ---------------------------------------------------------------- linear algebra
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);
Tensor baddbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const Scalar& beta = 1,
               const Scalar& alpha = 1);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

// ---------------------------------------------------------------- shape and indexing
Tensor cat(const std::vector<Tensor>& ts, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& ts, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, IntArrayRef split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor nonzero(const Tensor& x);
Tensor take_along_dim(const Tensor& x, const Tensor& indices,
                      std::optional<int64_t> dim = std::nullopt);
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
// Pads listed from the last dimension backwards; mode "constant" | "reflect" | "replicate" |
// "circular".
Tensor pad(const Tensor& x, IntArrayRef pad, std::string_view mode = "constant", double value = 0);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor flip(const Tensor& x, IntArrayRef dims);
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims = {});
Tensor repeat(const Tensor& x, IntArrayRef repeats);
Tensor repeat_interleave(const Tensor& x, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt);
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
// Row lookup: weight [num, dim], indices any shape of int64/int32 -> [..., dim]. Weight first.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1,
                 bool scale_grad_by_freq = false, bool sparse = false);

namespace autograd {
// Gradients of `outputs` w.r.t. `inputs`. With create_graph the result is itself differentiable.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);
}  // namespace autograd

}  // namespace oneflow

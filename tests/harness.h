// harness.h: the table-driven op test harness. Each op family's test file registers OpRows;
// test_ops.cpp runs every row: forward vs an independent float64 reference (float32 and
// float64, contiguous and non-contiguous inputs), and VJP vs central finite differences.
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <oneflow/oneflow.h>

namespace th {

using Shape = std::vector<int64_t>;

// Host data in row-major order: what reference implementations read and write.
struct Ref {
  Shape shape;
  std::vector<double> v;
  Ref() = default;
  Ref(Shape s) : shape(std::move(s)), v(size_t(numel(shape)), 0.0) {}
  Ref(Shape s, std::vector<double> d) : shape(std::move(s)), v(std::move(d)) {}
  static int64_t numel(const Shape& s) {
    int64_t n = 1;
    for (auto x : s) n *= x;
    return n;
  }
  int64_t numel() const { return int64_t(v.size()); }
  int64_t dim() const { return int64_t(shape.size()); }
  // Row-major strides of `shape`.
  Shape strides() const {
    Shape st(shape.size(), 1);
    for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
    return st;
  }
  // Multi-index of flat position i.
  Shape index(int64_t i) const {
    Shape idx(shape.size());
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      idx[d] = i % shape[d];
      i /= shape[d];
    }
    return idx;
  }
  int64_t flat(const Shape& idx) const {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
    return f;
  }
  double at(const Shape& idx) const { return v[size_t(flat(idx))]; }
  // Value at a broadcast index (idx has the broadcast result's rank).
  double at_broadcast(const Shape& idx) const {
    int64_t f = 0, off = int64_t(idx.size()) - int64_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + (shape[d] == 1 ? 0 : idx[off + d]);
    return v[size_t(f)];
  }
};

Ref to_ref(const of::Tensor& t);
// Bitwise equality of two tensors (defined-ness, dtype, shape and every byte of the values).
bool same_bits(const of::Tensor& a, const of::Tensor& b);
Shape broadcast(const Shape& a, const Shape& b);
// Elementwise reference over broadcast operands.
Ref map_ref(const std::vector<Ref>& in, const std::function<double(const std::vector<double>&)>& f);

struct OpRow {
  std::string name;              // "add/broadcast" -- shown on failure
  std::vector<std::string> ops;  // op-table names this row exercises (for the coverage check)
  std::vector<Shape> shapes;     // floating inputs, uniform in [lo, hi]
  std::function<of::Tensor(const std::vector<of::Tensor>&)> fn;
  std::function<Ref(const std::vector<Ref>&)> ref;
  double lo = -2, hi = 2;
  double rtol = 1e-5, atol = 1e-6;  // float32 forward tolerances
  double rtol64 = 1e-10,
         atol64 = 1e-10;  // float64 forward tolerances (statistical rows widen them)
  bool grad = true;       // run the finite-difference check
  bool noncontig = true;  // also run with non-contiguous inputs
  bool float32 = true;    // also run in float32
  // Optional: custom input generator (float64); default draws `shapes` from [lo, hi].
  std::function<std::vector<of::Tensor>(uint64_t seed)> make;
  // Inputs that are not differentiable (indices, masks) are never perturbed.
  std::vector<int> nondiff;
  // The row makes global tensors of its local inputs itself (the global layer's own ops, NOTE
  // [Boxing ops]): the forward, gradient and coverage checks run it; the trace, global op table
  // and fuzz-signature passes skip it (a trace refuses making a local tensor global, the op
  // fuzzer cannot give a collective matched ranks; test_global.cpp traces the boxing ops).
  bool global_layer = false;
};

// A row with the given float32 tolerances.
OpRow make_row_tol(std::string name, std::vector<std::string> ops, std::vector<Shape> shapes,
                   std::function<of::Tensor(const std::vector<of::Tensor>&)> fn,
                   std::function<Ref(const std::vector<Ref>&)> ref, double rtol, double atol);
// A row with the float32 tolerances most families use (rtol 1e-4, atol 1e-5).
OpRow make_row(std::string name, std::vector<std::string> ops, std::vector<Shape> shapes,
               std::function<of::Tensor(const std::vector<of::Tensor>&)> fn,
               std::function<Ref(const std::vector<Ref>&)> ref);

// The row's float64 inputs for a seed: its `make`, else `shapes` drawn uniformly from [lo, hi].
std::vector<of::Tensor> make_inputs(const OpRow& row, uint64_t seed);
// Whether input i is one the row marks as not differentiable (indices, masks).
bool is_nondiff(const OpRow& row, size_t i);

// A constant a row's fn builds (an index list, running statistics, an output buffer) placed
// like `ref`: on its device when ref is local (the CUDA run of the table), else broadcast on
// ref's placement (a collective over it: every rank calls it alike). The global op table runs
// the same fns on global inputs.
of::Tensor like(const of::Tensor& value, const of::Tensor& ref);

// Adds rows to the global table (call from a static initializer: see TH_ROWS).
int add_rows(std::vector<OpRow> rows);
std::vector<OpRow>& rows();

// A non-contiguous tensor with the same values as t (an every-other-element view of a
// larger buffer, or a transpose of a contiguous copy).
of::Tensor noncontig(const of::Tensor& t);
// VJP vs central finite differences in float64 (eps 1e-6, atol 1e-5, rtol 1e-3).
// Returns an empty string on success, else a description of the worst mismatch.
std::string gradcheck(const std::function<of::Tensor(const std::vector<of::Tensor>&)>& fn,
                      const std::vector<of::Tensor>& inputs, const std::vector<int>& nondiff = {},
                      double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);
// Compares t with a reference; returns an empty string on success.
std::string compare(const of::Tensor& t, const Ref& r, double rtol, double atol);
// This test program's own path (tests that run a case in a fresh process of it).
std::string self_exe();
// Runs a shell command, appending its output to *out (the last `tail` bytes kept); returns its
// exit status (128 when it did not exit normally). Multi-process tests wrap mpirun in it.
int run_capture(const std::string& cmd, std::string* out, size_t tail = 8000);
// Error-path helper: checks fn throws of::Error whose message contains every `needle`.
bool throws_with(const std::function<void()>& fn, const std::vector<std::string>& needles,
                 std::string* msg = nullptr);

}  // namespace th

#define TH_CONCAT2(a, b) a##b
#define TH_CONCAT(a, b) TH_CONCAT2(a, b)
// TH_ROWS({ row, row, ... }); at namespace scope in a test file.
#define TH_ROWS(...) static const int TH_CONCAT(th_rows_, __LINE__) = th::add_rows(__VA_ARGS__)

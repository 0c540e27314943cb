// nn/rnn.h: recurrent layers (RNN, LSTM, GRU and their cells) with libtorch 1.13's options,
// parameter names, initialization and forward signatures, and of::nn::utils::rnn (pad_sequence,
// PackedSequence, pack_padded_sequence, pad_packed_sequence). The layers are composites of
// public ops, so autograd, dtypes and devices come from those ops.
#pragma once
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "oneflow/enum.h"
#include "oneflow/nn/module.h"
#include "oneflow/ops.h"

namespace oneflow::nn {

// ---------------------------------------------------------------- packed sequences

namespace utils::rnn {

// The inverse of a permutation of 0..n-1 (undefined in, undefined out).
Tensor invert_permutation(const Tensor& permutation);

// Sequences of different lengths packed time step by time step: data [sum(batch_sizes), *],
// batch_sizes (int64, CPU, non-increasing) the number of sequences alive at each step;
// sorted_indices maps packed order to the caller's batch order (undefined: already sorted).
class PackedSequence {
 public:
  explicit PackedSequence(Tensor data, Tensor batch_sizes, Tensor sorted_indices = {},
                          Tensor unsorted_indices = {});
  const Tensor& data() const { return data_; }
  const Tensor& batch_sizes() const { return batch_sizes_; }
  const Tensor& sorted_indices() const { return sorted_indices_; }
  const Tensor& unsorted_indices() const { return unsorted_indices_; }
  // A copy with data on another device or dtype (batch_sizes stays on the CPU).
  PackedSequence to(TensorOptions options) const;
  PackedSequence cpu() const { return to(kCPU); }
  bool is_cuda() const { return data_.is_cuda(); }

 private:
  Tensor data_, batch_sizes_, sorted_indices_, unsorted_indices_;
};

// Packs a padded batch [T, B, *] ([B, T, *] when batch_first) with per-sequence lengths; with
// enforce_sorted the lengths must be non-increasing, else they are sorted here.
PackedSequence pack_padded_sequence(Tensor input, Tensor lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
// The inverse: (padded [T, B, *] or [B, T, *], lengths int64) in the caller's batch order.
std::tuple<Tensor, Tensor> pad_packed_sequence(PackedSequence sequence, bool batch_first = false,
                                               double padding_value = 0.0,
                                               std::optional<int64_t> total_length = std::nullopt);
// Stacks sequences [L_i, *] into [max L, B, *] ([B, max L, *] when batch_first), padded.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false,
                    double padding_value = 0);
// pack_padded_sequence of pad_sequence(sequences).
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace utils::rnn

// ---------------------------------------------------------------- options

struct RNNOptions {
  typedef std::variant<enumtype::kTanh, enumtype::kReLU> nonlinearity_t;
  RNNOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  OF_ARG(int64_t, input_size);
  OF_ARG(int64_t, hidden_size);
  OF_ARG(int64_t, num_layers) = 1;
  OF_ARG(nonlinearity_t, nonlinearity) = kTanh;
  OF_ARG(bool, bias) = true;
  OF_ARG(bool, batch_first) = false;
  // Dropout on the outputs of every layer but the last, while training.
  OF_ARG(double, dropout) = 0.0;
  OF_ARG(bool, bidirectional) = false;
};

struct LSTMOptions {
  LSTMOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  OF_ARG(int64_t, input_size);
  OF_ARG(int64_t, hidden_size);
  OF_ARG(int64_t, num_layers) = 1;
  OF_ARG(bool, bias) = true;
  OF_ARG(bool, batch_first) = false;
  OF_ARG(double, dropout) = 0.0;
  OF_ARG(bool, bidirectional) = false;
  // > 0: h is projected to proj_size features by weight_hr_l{k} (h_n and output use it).
  OF_ARG(int64_t, proj_size) = 0;
};

struct GRUOptions {
  GRUOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  OF_ARG(int64_t, input_size);
  OF_ARG(int64_t, hidden_size);
  OF_ARG(int64_t, num_layers) = 1;
  OF_ARG(bool, bias) = true;
  OF_ARG(bool, batch_first) = false;
  OF_ARG(double, dropout) = 0.0;
  OF_ARG(bool, bidirectional) = false;
};

struct RNNCellOptions {
  typedef std::variant<enumtype::kTanh, enumtype::kReLU> nonlinearity_t;
  RNNCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  OF_ARG(int64_t, input_size);
  OF_ARG(int64_t, hidden_size);
  OF_ARG(bool, bias) = true;
  OF_ARG(nonlinearity_t, nonlinearity) = kTanh;
};

struct LSTMCellOptions {
  LSTMCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  OF_ARG(int64_t, input_size);
  OF_ARG(int64_t, hidden_size);
  OF_ARG(bool, bias) = true;
};

struct GRUCellOptions {
  GRUCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  OF_ARG(int64_t, input_size);
  OF_ARG(int64_t, hidden_size);
  OF_ARG(bool, bias) = true;
};

namespace detail {

// The recurrence a layer runs (libtorch's RNNOptionsBase::mode).
enum class RNNMode { kRNN_TANH, kRNN_RELU, kLSTM, kGRU };

// What RNN, LSTM and GRU share (libtorch's detail::RNNOptionsBase, mode as an enum).
struct RNNOptionsBase {
  RNNOptionsBase(RNNMode mode, int64_t input_size, int64_t hidden_size)
      : mode_(mode), input_size_(input_size), hidden_size_(hidden_size) {}
  OF_ARG(RNNMode, mode);
  OF_ARG(int64_t, input_size);
  OF_ARG(int64_t, hidden_size);
  OF_ARG(int64_t, num_layers) = 1;
  OF_ARG(bool, bias) = true;
  OF_ARG(bool, batch_first) = false;
  OF_ARG(double, dropout) = 0.0;
  OF_ARG(bool, bidirectional) = false;
  OF_ARG(int64_t, proj_size) = 0;
};

// Parameters weight_ih_l{k}[_reverse], weight_hh_l{k}..., bias_ih_l{k}..., bias_hh_l{k}...,
// weight_hr_l{k}... in libtorch's order, each ~ U(+-1/sqrt(hidden_size)).
class RNNImplBase : public Module {
 public:
  RNNImplBase(const RNNOptionsBase& options, std::string name);
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  // A no-op kept for ports (libtorch packs weights for cuDNN here).
  void flatten_parameters() {}
  // The parameters of every layer and direction, in registration order.
  std::vector<Tensor> all_weights() const;
  RNNOptionsBase options_base;

 protected:
  // The shared recurrence. input: padded [T, B, F] / [B, T, F] / unbatched [T, F], or packed
  // data [N, F] when batch_sizes is given. hx (and cx for LSTM) [L * D, B, H] or undefined.
  // Returns (output, h_n, c_n); c_n undefined except for LSTM.
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input,
                                         const std::vector<int64_t>* batch_sizes, Tensor hx,
                                         Tensor cx);
  // RNN's and GRU's forward forms (one hidden state): (output, h_n).
  std::tuple<Tensor, Tensor> run_single_state(const Tensor& input, Tensor hx);
  std::tuple<utils::rnn::PackedSequence, Tensor> run_single_state_packed(
      const utils::rnn::PackedSequence& packed_input, Tensor hx);
  // The parameters of layer l, direction d: w_ih, w_hh, b_ih, b_hh, w_hr (undefined if absent).
  std::vector<std::vector<Tensor>> flat_weights_;
};

// weight_ih [G * H, in], weight_hh [G * H, H], bias_ih and bias_hh [G * H], U(+-1/sqrt(H)).
class RNNCellImplBase : public Module {
 public:
  RNNCellImplBase(int64_t input_size, int64_t hidden_size, bool bias, int64_t num_chunks,
                  std::string name);
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  // Checks input [B, in] or [in] and a hidden state of the matching shape (label "hx", "cx").
  void check_forward_input(const Tensor& input) const;
  void check_forward_hidden(const Tensor& input, const Tensor& hx, const char* label) const;
  virtual std::string get_nonlinearity_str() const { return ""; }
  int64_t input_size_, hidden_size_;
  bool bias_;
};

}  // namespace detail

// ---------------------------------------------------------------- layers

// Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu.
class RNNImpl : public detail::RNNImplBase {
 public:
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RNNOptions& options);
  // (output [T, B, D * H], h_n [L * D, B, H]); hx defaults to zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  // The same over a PackedSequence: (packed output, h_n in the caller's batch order).
  std::tuple<utils::rnn::PackedSequence, Tensor> forward_with_packed_input(
      const utils::rnn::PackedSequence& packed_input, Tensor hx = {});
  RNNOptions options;
};
OF_MODULE(RNN);

// LSTM with gates (i, f, g, o) in libtorch's order, optional projection (proj_size).
class LSTMImpl : public detail::RNNImplBase {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size)
      : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const LSTMOptions& options);
  // (output [T, B, D * (proj_size or H)], (h_n, c_n)); hx_opt = (h_0, c_0) defaults to zeros.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(
      const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx_opt = {});
  // The same over a PackedSequence.
  std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> forward_with_packed_input(
      const utils::rnn::PackedSequence& packed_input,
      std::optional<std::tuple<Tensor, Tensor>> hx_opt = {});
  LSTMOptions options;
};
OF_MODULE(LSTM);

// GRU with gates (r, z, n) in libtorch's order; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
class GRUImpl : public detail::RNNImplBase {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const GRUOptions& options);
  // (output [T, B, D * H], h_n [L * D, B, H]); hx defaults to zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  // The same over a PackedSequence.
  std::tuple<utils::rnn::PackedSequence, Tensor> forward_with_packed_input(
      const utils::rnn::PackedSequence& packed_input, Tensor hx = {});
  GRUOptions options;
};
OF_MODULE(GRU);

// ---------------------------------------------------------------- cells

// One RNN step: input [B, in] or [in], hx [B, H] or [H] (zeros when undefined) -> h'.
class RNNCellImpl : public detail::RNNCellImplBase {
 public:
  RNNCellImpl(int64_t input_size, int64_t hidden_size)
      : RNNCellImpl(RNNCellOptions(input_size, hidden_size)) {}
  explicit RNNCellImpl(const RNNCellOptions& options);
  Tensor forward(const Tensor& input, Tensor hx = {});
  RNNCellOptions options;

 protected:
  std::string get_nonlinearity_str() const override;
};
OF_MODULE(RNNCell);

// One LSTM step: (h', c') from input and (h, c) (zeros when absent).
class LSTMCellImpl : public detail::RNNCellImplBase {
 public:
  LSTMCellImpl(int64_t input_size, int64_t hidden_size)
      : LSTMCellImpl(LSTMCellOptions(input_size, hidden_size)) {}
  explicit LSTMCellImpl(const LSTMCellOptions& options);
  std::tuple<Tensor, Tensor> forward(const Tensor& input,
                                     std::optional<std::tuple<Tensor, Tensor>> hx_opt = {});
  LSTMCellOptions options;
};
OF_MODULE(LSTMCell);

// One GRU step: h' from input and h (zeros when undefined).
class GRUCellImpl : public detail::RNNCellImplBase {
 public:
  GRUCellImpl(int64_t input_size, int64_t hidden_size)
      : GRUCellImpl(GRUCellOptions(input_size, hidden_size)) {}
  explicit GRUCellImpl(const GRUCellOptions& options);
  Tensor forward(const Tensor& input, Tensor hx = {});
  GRUCellOptions options;
};
OF_MODULE(GRUCell);

}  // namespace oneflow::nn

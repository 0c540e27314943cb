// Recurrent layers and cells (libtorch 1.13 semantics) and the packed-sequence utilities, as
// composites of public ops (and, for the LSTM gate arithmetic, the fused lstm_cell op:
// NOTE [Fused LSTM cell] in ops/nn_rnn.cpp): autograd differentiates them through those ops.
//
// NOTE [RNN time loop]: every layer and direction works on "packed" rows [N, F] (a padded
// batch [T, B, F] is the packed form with B rows per step), so padded and packed input share
// one loop. The input projection (and, except for GRU, both biases) of all time steps is one
// GEMM per layer and direction; each step then costs one addmm for the hidden projection plus
// the gate arithmetic. Packed batches shrink over time: forward, rows that finish are set aside
// as their h_n; reverse, the state starts with the shortest batch and grows by rows of h_0.
#include "oneflow/nn/rnn.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "oneflow/nn.h"
#include "ops/rnn_ops.h"

namespace oneflow::nn {

using detail::RNNMode;

// ---------------------------------------------------------------- packed sequences

namespace utils::rnn {

Tensor invert_permutation(const Tensor& permutation) {
  if (!permutation.defined()) return {};
  const int64_t n = permutation.numel();
  return scatter(
      empty_like(permutation), 0, permutation,
      arange(n, TensorOptions().dtype(permutation.dtype()).device(permutation.device())));
}

PackedSequence::PackedSequence(Tensor data, Tensor batch_sizes, Tensor sorted_indices,
                               Tensor unsorted_indices) {
  OF_CHECK(batch_sizes.defined() && batch_sizes.is_cpu() && batch_sizes.dim() == 1,
           "[PackedSequence] batch_sizes must be a 1-D CPU tensor (build packed sequences with "
           "pack_padded_sequence or pack_sequence)");
  if (!unsorted_indices.defined()) unsorted_indices = invert_permutation(sorted_indices);
  data_ = std::move(data);
  batch_sizes_ = std::move(batch_sizes);
  sorted_indices_ = std::move(sorted_indices);
  unsorted_indices_ = std::move(unsorted_indices);
}

PackedSequence PackedSequence::to(TensorOptions options) const {
  Tensor data = data_.to(options);
  if (data.is_same(data_)) return *this;
  auto move = [&](const Tensor& t) { return t.defined() ? t.to(data.device()) : Tensor(); };
  return PackedSequence(data, batch_sizes_, move(sorted_indices_), move(unsorted_indices_));
}

PackedSequence pack_padded_sequence(Tensor input, Tensor lengths, bool batch_first,
                                    bool enforce_sorted) {
  OF_CHECK(input.defined() && input.dim() >= 2,
           "[pack_padded_sequence] input must be at least 2-D ([T, B, *] or [B, T, *])");
  OF_CHECK(lengths.defined() && lengths.dim() == 1,
           "[pack_padded_sequence] lengths must be a 1-D tensor");
  const int64_t bdim = batch_first ? 0 : 1, tdim = 1 - bdim;
  const int64_t B = input.size(bdim), T = input.size(tdim);
  OF_CHECK(lengths.numel() == B,
           "[pack_padded_sequence] {} lengths for a batch of {} (input of shape {})",
           lengths.numel(), B, shape_str(input.sizes()));
  std::vector<int64_t> len = lengths.to(kInt64).cpu().to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    OF_CHECK(
        len[size_t(b)] > 0 && len[size_t(b)] <= T,
        "[pack_padded_sequence] length {} of sequence {} is outside [1, {}] (input of shape {})",
        len[size_t(b)], b, T, shape_str(input.sizes()));
  Tensor sorted_indices;
  if (enforce_sorted) {
    for (int64_t b = 1; b < B; ++b)
      OF_CHECK(len[size_t(b)] <= len[size_t(b - 1)],
               "[pack_padded_sequence] lengths must be non-increasing when enforce_sorted is "
               "true, got {} after {} (pass enforce_sorted=false to sort them)",
               len[size_t(b)], len[size_t(b - 1)]);
  } else {
    Tensor sorted_len;
    std::tie(sorted_len, sorted_indices) = tensor(len).sort(-1, /*descending=*/true);
    len = sorted_len.to_vector<int64_t>();
    sorted_indices = sorted_indices.to(input.device());
    input = input.index_select(bdim, sorted_indices);
  }
  // batch_sizes[t] = number of sequences longer than t
  const int64_t steps = B ? len[0] : 0;
  std::vector<int64_t> bs(size_t(steps), 0);
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t b = 0; b < B && len[size_t(b)] > t; ++b) ++bs[size_t(t)];
  std::vector<Tensor> pieces;
  for (int64_t t = 0; t < steps; ++t)
    pieces.push_back(input.select(tdim, t).narrow(0, 0, bs[size_t(t)]));
  Tensor data = pieces.size() == 1 ? pieces[0].contiguous() : cat(pieces, 0);
  return PackedSequence(data, tensor(bs), sorted_indices, {});
}

std::tuple<Tensor, Tensor> pad_packed_sequence(PackedSequence sequence, bool batch_first,
                                               double padding_value,
                                               std::optional<int64_t> total_length) {
  const std::vector<int64_t> bs = sequence.batch_sizes().to(kInt64).to_vector<int64_t>();
  int64_t T = int64_t(bs.size());
  if (total_length) {
    OF_CHECK(*total_length >= T,
             "[pad_packed_sequence] total_length {} is less than the longest sequence length {}",
             *total_length, T);
    T = *total_length;
  }
  const Tensor& data = sequence.data();
  const int64_t B = bs.empty() ? 0 : bs[0];
  DimVector row_shape = data.sizes().dims();  // [B, *] per step
  row_shape[0] = B;
  std::vector<Tensor> steps;
  int64_t off = 0;
  for (size_t t = 0; t < bs.size(); ++t) {
    Tensor piece = data.narrow(0, off, bs[t]);
    off += bs[t];
    if (bs[t] < B) {
      DimVector pad_shape = row_shape;
      pad_shape[0] = B - bs[t];
      piece = cat({piece, full(pad_shape, padding_value, data.options())}, 0);
    }
    steps.push_back(piece);
  }
  for (int64_t t = int64_t(bs.size()); t < T; ++t)
    steps.push_back(full(row_shape, padding_value, data.options()));
  Tensor padded = stack(steps, batch_first ? 1 : 0);
  std::vector<int64_t> len(size_t(B), 0);
  for (int64_t b = 0; b < B; ++b)
    for (size_t t = 0; t < bs.size() && bs[t] > b; ++t) ++len[size_t(b)];
  Tensor lengths = tensor(len);
  const Tensor& unsorted = sequence.unsorted_indices();
  if (unsorted.defined()) {
    padded = padded.index_select(batch_first ? 0 : 1, unsorted);
    lengths = lengths.index_select(0, unsorted.cpu());
  }
  return {padded, lengths};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  OF_CHECK(!sequences.empty(), "[pad_sequence] expects a non-empty list of sequences");
  int64_t max_len = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    OF_CHECK(s.defined() && s.dim() >= 1, "[pad_sequence] sequence {} must be at least 1-D", i);
    OF_CHECK(s.dim() == sequences[0].dim() && std::equal(s.sizes().begin() + 1, s.sizes().end(),
                                                         sequences[0].sizes().begin() + 1),
             "[pad_sequence] sequence {} of shape {} does not match the trailing dims of sequence "
             "0 of shape {}",
             i, shape_str(s.sizes()), shape_str(sequences[0].sizes()));
    max_len = std::max(max_len, s.size(0));
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) {
    if (s.size(0) == max_len) {
      padded.push_back(s);
      continue;
    }
    DimVector pad_shape = s.sizes().dims();
    pad_shape[0] = max_len - s.size(0);
    padded.push_back(cat({s, full(pad_shape, padding_value, s.options())}, 0));
  }
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> len;
  for (const Tensor& s : sequences) len.push_back(s.defined() && s.dim() >= 1 ? s.size(0) : 0);
  return pack_padded_sequence(pad_sequence(sequences), tensor(len), false, enforce_sorted);
}

}  // namespace utils::rnn

namespace {

const char* bool_str(bool b) { return b ? "true" : "false"; }

int64_t gate_count(RNNMode mode) {
  switch (mode) {
    case RNNMode::kLSTM:
      return 4;
    case RNNMode::kGRU:
      return 3;
    default:
      return 1;
  }
}

// The weights of one layer and direction (undefined where absent); w_hh_t is w_hh^T.
struct DirWeights {
  Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
};

// One time step of the recurrence on rows xp [b, G*H] (the input projection, including b_ih,
// and for RNN/LSTM also b_hh) and state h [b, P], c [b, H]. Updates h (and c).
void step(RNNMode mode, const Tensor& xp, Tensor& h, Tensor& c, const DirWeights& w,
          const Tensor& w_hh_t, const Tensor& w_hr_t) {
  switch (mode) {
    case RNNMode::kRNN_TANH:
      h = addmm(xp, h, w_hh_t).tanh();
      return;
    case RNNMode::kRNN_RELU:
      h = addmm(xp, h, w_hh_t).relu();
      return;
    case RNNMode::kLSTM: {
      std::tie(h, c) = lstm_cell_update(addmm(xp, h, w_hh_t), c);  // NOTE [Fused LSTM cell]
      if (w_hr_t.defined()) h = mm(h, w_hr_t);
      return;
    }
    case RNNMode::kGRU: {
      // b_hh stays inside the step: r multiplies W_hn h + b_hn, not b_hn alone
      const int64_t H = xp.size(1) / 3;
      Tensor hp = w.b_hh.defined() ? addmm(w.b_hh, h, w_hh_t) : mm(h, w_hh_t);
      Tensor rz = add(xp.narrow(1, 0, 2 * H), hp.narrow(1, 0, 2 * H)).sigmoid();
      Tensor n =
          add(xp.narrow(1, 2 * H, H), mul(rz.narrow(1, 0, H), hp.narrow(1, 2 * H, H))).tanh();
      h = lerp(n, h, rz.narrow(1, H, H));  // (1 - z) n + z h
      return;
    }
  }
}

// The input projection x [N, F] -> [N, G*H] with the biases that can be folded into it.
Tensor project_input(RNNMode mode, const Tensor& x, const DirWeights& w) {
  Tensor bias = w.b_ih;
  if (bias.defined() && mode != RNNMode::kGRU) bias = add(w.b_ih, w.b_hh);
  return linear(x, w.w_ih, bias);
}

// The row blocks [off[t], off[t] + bs[t]) of x for t in [lo, hi), split in halves recursively:
// a slice's gradient is scattered into a zero tensor of its parent's size, so slicing T blocks
// straight off x would cost T full-size scatters and sums in backward; halving costs log2(T).
void split_rows(const Tensor& x, const std::vector<int64_t>& off, const std::vector<int64_t>& bs,
                size_t lo, size_t hi, std::vector<Tensor>& out) {
  if (hi - lo == 1) {
    out[lo] = x;
    return;
  }
  const size_t mid = (lo + hi) / 2;
  const int64_t left = off[mid] - off[lo], total = off[hi - 1] + bs[hi - 1] - off[lo];
  split_rows(x.narrow(0, 0, left), off, bs, lo, mid, out);
  split_rows(x.narrow(0, left, total - left), off, bs, mid, hi, out);
}

// One layer in one direction over packed rows x [N, F] with per-step batch sizes bs; h0 [B, P],
// c0 [B, H]. Returns the output rows [N, P]; sets h_n (and c_n) in batch order.
Tensor run_direction(RNNMode mode, const Tensor& x, const DirWeights& w,
                     const std::vector<int64_t>& bs, bool reverse, const Tensor& h0,
                     const Tensor& c0, Tensor& h_n, Tensor& c_n) {
  const bool lstm = mode == RNNMode::kLSTM;
  const int64_t T = int64_t(bs.size());
  const Tensor xp = project_input(mode, x, w);
  // Equal-length steps without a projection: the whole time loop is one fused op (NOTE [Fused
  // LSTM layer]); packed batches that shrink and proj_size take the step loop below.
  if (lstm && T > 0 && !w.w_hr.defined() &&
      std::all_of(bs.begin(), bs.end(), [&](int64_t b) { return b == bs[0]; })) {
    const int64_t B = bs[0];
    auto [out, cs, gates] = lstm_layer(xp, h0, c0, w.w_hh, T, reverse);
    const int64_t last = reverse ? 0 : (T - 1) * B;
    h_n = out.narrow(0, last, B);
    c_n = cs.narrow(0, last, B);
    return out;
  }
  const Tensor w_hh_t = w.w_hh.t();
  const Tensor w_hr_t = w.w_hr.defined() ? w.w_hr.t() : Tensor();
  std::vector<int64_t> off(size_t(T), 0);
  for (int64_t t = 1; t < T; ++t) off[size_t(t)] = off[size_t(t - 1)] + bs[size_t(t - 1)];
  std::vector<Tensor> outs(static_cast<size_t>(T)), xps(static_cast<size_t>(T));
  split_rows(xp, off, bs, 0, size_t(T), xps);
  Tensor h = h0, c = c0;
  int64_t cur = bs[0];
  if (!reverse) {
    std::vector<Tensor> done_h, done_c;  // rows [b_t, cur) as they finish, highest first
    for (int64_t t = 0; t < T; ++t) {
      const int64_t b = bs[size_t(t)];
      if (b < cur) {
        done_h.push_back(h.narrow(0, b, cur - b));
        h = h.narrow(0, 0, b);
        if (lstm) {
          done_c.push_back(c.narrow(0, b, cur - b));
          c = c.narrow(0, 0, b);
        }
        cur = b;
      }
      step(mode, xps[size_t(t)], h, c, w, w_hh_t, w_hr_t);
      outs[size_t(t)] = h;
    }
    auto assemble = [](Tensor last, std::vector<Tensor>& done) {
      if (done.empty()) return last;
      std::vector<Tensor> parts{last};
      parts.insert(parts.end(), done.rbegin(), done.rend());
      return cat(parts, 0);
    };
    h_n = assemble(h, done_h);
    if (lstm) c_n = assemble(c, done_c);
  } else {
    cur = bs[size_t(T - 1)];
    if (cur < h.size(0)) {
      h = h.narrow(0, 0, cur);
      if (lstm) c = c.narrow(0, 0, cur);
    }
    for (int64_t t = T - 1; t >= 0; --t) {
      const int64_t b = bs[size_t(t)];
      if (b > cur) {  // sequences that start here (in reverse) join with their h_0 rows
        h = cat({h, h0.narrow(0, cur, b - cur)}, 0);
        if (lstm) c = cat({c, c0.narrow(0, cur, b - cur)}, 0);
        cur = b;
      }
      step(mode, xps[size_t(t)], h, c, w, w_hh_t, w_hr_t);
      outs[size_t(t)] = h;
    }
    h_n = h;
    if (lstm) c_n = c;
  }
  return T == 1 ? outs[0] : cat(outs, 0);
}

}  // namespace

// ---------------------------------------------------------------- RNNImplBase

namespace detail {

RNNImplBase::RNNImplBase(const RNNOptionsBase& o, std::string name)
    : Module(name), options_base(o) {
  const char* n = this->name().c_str();
  OF_CHECK(o.input_size() > 0 && o.hidden_size() > 0 && o.num_layers() > 0,
           "[{}] input_size, hidden_size and num_layers must be positive, got {}, {}, {}", n,
           o.input_size(), o.hidden_size(), o.num_layers());
  OF_CHECK(o.dropout() >= 0 && o.dropout() <= 1,
           "[{}] dropout must be a probability in [0, 1], got {}", n, o.dropout());
  OF_CHECK(o.proj_size() >= 0, "[{}] proj_size must be non-negative, got {}", n, o.proj_size());
  OF_CHECK(o.proj_size() < o.hidden_size(), "[{}] proj_size {} must be smaller than hidden_size {}",
           n, o.proj_size(), o.hidden_size());
  OF_CHECK(o.proj_size() == 0 || o.mode() == RNNMode::kLSTM,
           "[{}] proj_size is only supported by LSTM", n);
  const int64_t G = gate_count(o.mode()) * o.hidden_size();
  const int64_t P = o.proj_size() > 0 ? o.proj_size() : o.hidden_size();
  const int64_t D = o.bidirectional() ? 2 : 1;
  for (int64_t l = 0; l < o.num_layers(); ++l) {
    const int64_t in = l == 0 ? o.input_size() : P * D;
    for (int64_t d = 0; d < D; ++d) {
      const std::string sfx = std::to_string(l) + (d == 1 ? "_reverse" : "");
      std::vector<Tensor> ws(5);
      ws[0] = register_parameter("weight_ih_l" + sfx, oneflow::empty({G, in}));
      ws[1] = register_parameter("weight_hh_l" + sfx, oneflow::empty({G, P}));
      if (o.bias()) {
        ws[2] = register_parameter("bias_ih_l" + sfx, oneflow::empty({G}));
        ws[3] = register_parameter("bias_hh_l" + sfx, oneflow::empty({G}));
      }
      if (o.proj_size() > 0)
        ws[4] = register_parameter("weight_hr_l" + sfx,
                                   oneflow::empty({o.proj_size(), o.hidden_size()}));
      flat_weights_.push_back(std::move(ws));
    }
  }
  reset_parameters();
}

void RNNImplBase::reset_parameters() {
  const double stdv = 1.0 / std::sqrt(double(options_base.hidden_size()));
  for (auto& ws : flat_weights_)
    for (auto& w : ws)
      if (w.defined()) init::uniform_(w, -stdv, stdv);
}

std::vector<Tensor> RNNImplBase::all_weights() const {
  std::vector<Tensor> r;
  for (const auto& ws : flat_weights_)
    for (const auto& w : ws)
      if (w.defined()) r.push_back(w);
  return r;
}

void RNNImplBase::pretty_print(std::ostream& s) const {
  const auto& o = options_base;
  s << name() << "(input_size=" << o.input_size() << ", hidden_size=" << o.hidden_size()
    << ", num_layers=" << o.num_layers() << ", bias=" << bool_str(o.bias())
    << ", batch_first=" << bool_str(o.batch_first()) << ", dropout=" << o.dropout()
    << ", bidirectional=" << bool_str(o.bidirectional());
  if (o.proj_size() > 0) s << ", proj_size=" << o.proj_size();
  s << ")";
}

std::tuple<Tensor, Tensor, Tensor> RNNImplBase::run(const Tensor& input,
                                                    const std::vector<int64_t>* batch_sizes,
                                                    Tensor hx, Tensor cx) {
  const auto& o = options_base;
  const char* n = name().c_str();
  const RNNMode mode = o.mode();
  const bool lstm = mode == RNNMode::kLSTM;
  const int64_t H = o.hidden_size(), P = o.proj_size() > 0 ? o.proj_size() : H;
  const int64_t L = o.num_layers(), D = o.bidirectional() ? 2 : 1, F = o.input_size();
  OF_CHECK(input.defined(), "[{}] input is undefined", n);
  OF_CHECK(input.is_floating_point(), "[{}] input must be floating point, got {}", n,
           dtype_name(input.dtype()));
  // ---- shapes (all checks before any computation)
  const bool packed = batch_sizes != nullptr;
  bool unbatched = false;
  Tensor x;  // packed rows [N, F]
  std::vector<int64_t> bs;
  int64_t T = 0, B = 0;
  if (packed) {
    OF_CHECK(input.dim() == 2, "[{}] packed data of shape {} must be 2-D [N, features]", n,
             shape_str(input.sizes()));
    OF_CHECK(input.size(1) == F, "[{}] packed data of shape {} has {} features, expected {}", n,
             shape_str(input.sizes()), input.size(1), F);
    bs = *batch_sizes;
    T = int64_t(bs.size());
    OF_CHECK(T > 0, "[{}] packed sequence has no time steps", n);
    B = bs[0];
    int64_t total = 0;
    for (int64_t t = 0; t < T; ++t) {
      OF_CHECK(bs[size_t(t)] > 0 && bs[size_t(t)] <= (t ? bs[size_t(t - 1)] : B),
               "[{}] batch_sizes must be positive and non-increasing", n);
      total += bs[size_t(t)];
    }
    OF_CHECK(total == input.size(0), "[{}] batch_sizes add up to {} rows, packed data has {}", n,
             total, input.size(0));
    x = input;
  } else {
    OF_CHECK(input.dim() == 2 || input.dim() == 3,
             "[{}] input of shape {} must be 3-D ([T, B, features], or [B, T, features] with "
             "batch_first) or 2-D (unbatched)",
             n, shape_str(input.sizes()));
    OF_CHECK(input.size(-1) == F, "[{}] input of shape {} has {} features, expected {}", n,
             shape_str(input.sizes()), input.size(-1), F);
    unbatched = input.dim() == 2;
    Tensor x3 = unbatched ? input.unsqueeze(1) : o.batch_first() ? input.transpose(0, 1) : input;
    T = x3.size(0);
    B = x3.size(1);
    OF_CHECK(T > 0 && B > 0, "[{}] input of shape {} is empty", n, shape_str(input.sizes()));
    bs.assign(size_t(T), B);
    x = x3.reshape({T * B, F});
  }
  auto check_state = [&](Tensor& s, int64_t feat, const char* label) {
    const DimVector want = unbatched ? DimVector{L * D, feat} : DimVector{L * D, B, feat};
    if (!s.defined()) return;
    OF_CHECK(s.sizes() == IntArrayRef(want), "[{}] {} of shape {} does not match the expected {}",
             n, label, shape_str(s.sizes()), shape_str(want));
    OF_CHECK(s.dtype() == input.dtype() && s.device() == input.device(),
             "[{}] {} ({}, {}) must have the input's dtype and device ({}, {})", n, label,
             dtype_name(s.dtype()), s.device().str(), dtype_name(input.dtype()),
             input.device().str());
  };
  check_state(hx, P, lstm ? "h_0" : "hx");
  if (lstm) check_state(cx, H, "c_0");
  if (!hx.defined()) hx = zeros({L * D, B, P}, x.options());
  else if (unbatched) hx = hx.unsqueeze(1);
  if (lstm) {
    if (!cx.defined()) cx = zeros({L * D, B, H}, x.options());
    else if (unbatched) cx = cx.unsqueeze(1);
  }
  // ---- layers
  std::vector<Tensor> h_n(size_t(L * D)), c_n(size_t(L * D));
  Tensor layer_in = x;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Tensor> outs(static_cast<size_t>(D));
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = l * D + d;
      const auto& ws = flat_weights_[size_t(k)];
      const DirWeights w{ws[0], ws[1], ws[2], ws[3], ws[4]};
      outs[size_t(d)] =
          run_direction(mode, layer_in, w, bs, d == 1, hx.select(0, k),
                        lstm ? cx.select(0, k) : Tensor(), h_n[size_t(k)], c_n[size_t(k)]);
    }
    layer_in = D == 1 ? outs[0] : cat(outs, 1);
    if (o.dropout() > 0 && is_training() && l + 1 < L)
      layer_in = dropout(layer_in, o.dropout(), true);
  }
  Tensor output = layer_in, hn = stack(h_n, 0), cn = lstm ? stack(c_n, 0) : Tensor();
  if (!packed) {
    output = output.view({T, B, D * P});
    if (unbatched) {
      output = output.squeeze(1);
      hn = hn.squeeze(1);
      if (lstm) cn = cn.squeeze(1);
    } else if (o.batch_first()) {
      output = output.transpose(0, 1);
    }
  }
  return {output, hn, cn};
}

}  // namespace detail

// ---------------------------------------------------------------- RNN, LSTM, GRU

namespace {

detail::RNNOptionsBase base_of(const RNNOptions& o) {
  const RNNMode mode = std::holds_alternative<enumtype::kTanh>(o.nonlinearity())
                           ? RNNMode::kRNN_TANH
                           : RNNMode::kRNN_RELU;
  return detail::RNNOptionsBase(mode, o.input_size(), o.hidden_size())
      .num_layers(o.num_layers())
      .bias(o.bias())
      .batch_first(o.batch_first())
      .dropout(o.dropout())
      .bidirectional(o.bidirectional());
}
detail::RNNOptionsBase base_of(const LSTMOptions& o) {
  return detail::RNNOptionsBase(RNNMode::kLSTM, o.input_size(), o.hidden_size())
      .num_layers(o.num_layers())
      .bias(o.bias())
      .batch_first(o.batch_first())
      .dropout(o.dropout())
      .bidirectional(o.bidirectional())
      .proj_size(o.proj_size());
}
detail::RNNOptionsBase base_of(const GRUOptions& o) {
  return detail::RNNOptionsBase(RNNMode::kGRU, o.input_size(), o.hidden_size())
      .num_layers(o.num_layers())
      .bias(o.bias())
      .batch_first(o.batch_first())
      .dropout(o.dropout())
      .bidirectional(o.bidirectional());
}

// batch_sizes of a PackedSequence as host integers; h (when given) reordered to packed order.
std::vector<int64_t> packed_sizes(const utils::rnn::PackedSequence& p) {
  return p.batch_sizes().to(kInt64).to_vector<int64_t>();
}
Tensor to_packed_order(const Tensor& h, const utils::rnn::PackedSequence& p) {
  return h.defined() && p.sorted_indices().defined() ? h.index_select(1, p.sorted_indices()) : h;
}
Tensor to_caller_order(const Tensor& h, const utils::rnn::PackedSequence& p) {
  return h.defined() && p.unsorted_indices().defined() ? h.index_select(1, p.unsorted_indices())
                                                       : h;
}

}  // namespace

RNNImpl::RNNImpl(const RNNOptions& o) : RNNImplBase(base_of(o), "RNN"), options(o) {}

std::tuple<Tensor, Tensor> detail::RNNImplBase::run_single_state(const Tensor& input, Tensor hx) {
  auto [out, hn, cn] = run(input, nullptr, std::move(hx), {});
  return {out, hn};
}

std::tuple<utils::rnn::PackedSequence, Tensor> detail::RNNImplBase::run_single_state_packed(
    const utils::rnn::PackedSequence& p, Tensor hx) {
  const std::vector<int64_t> bs = packed_sizes(p);
  auto [out, hn, cn] = run(p.data(), &bs, to_packed_order(hx, p), {});
  return {
      utils::rnn::PackedSequence(out, p.batch_sizes(), p.sorted_indices(), p.unsorted_indices()),
      to_caller_order(hn, p)};
}

std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, Tensor hx) {
  return run_single_state(input, std::move(hx));
}

std::tuple<utils::rnn::PackedSequence, Tensor> RNNImpl::forward_with_packed_input(
    const utils::rnn::PackedSequence& p, Tensor hx) {
  return run_single_state_packed(p, std::move(hx));
}

LSTMImpl::LSTMImpl(const LSTMOptions& o) : RNNImplBase(base_of(o), "LSTM"), options(o) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTMImpl::forward(
    const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx_opt) {
  Tensor h0, c0;
  if (hx_opt) std::tie(h0, c0) = *hx_opt;
  auto [out, hn, cn] = run(input, nullptr, h0, c0);
  return {out, {hn, cn}};
}

std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>>
LSTMImpl::forward_with_packed_input(const utils::rnn::PackedSequence& p,
                                    std::optional<std::tuple<Tensor, Tensor>> hx_opt) {
  Tensor h0, c0;
  if (hx_opt) std::tie(h0, c0) = *hx_opt;
  const std::vector<int64_t> bs = packed_sizes(p);
  auto [out, hn, cn] = run(p.data(), &bs, to_packed_order(h0, p), to_packed_order(c0, p));
  return {
      utils::rnn::PackedSequence(out, p.batch_sizes(), p.sorted_indices(), p.unsorted_indices()),
      {to_caller_order(hn, p), to_caller_order(cn, p)}};
}

GRUImpl::GRUImpl(const GRUOptions& o) : RNNImplBase(base_of(o), "GRU"), options(o) {}

std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, Tensor hx) {
  return run_single_state(input, std::move(hx));
}

std::tuple<utils::rnn::PackedSequence, Tensor> GRUImpl::forward_with_packed_input(
    const utils::rnn::PackedSequence& p, Tensor hx) {
  return run_single_state_packed(p, std::move(hx));
}

// ---------------------------------------------------------------- cells

namespace detail {

RNNCellImplBase::RNNCellImplBase(int64_t input_size, int64_t hidden_size, bool bias,
                                 int64_t num_chunks, std::string name)
    : Module(std::move(name)), input_size_(input_size), hidden_size_(hidden_size), bias_(bias) {
  OF_CHECK(input_size > 0 && hidden_size > 0,
           "[{}] input_size and hidden_size must be positive, got {} and {}", this->name(),
           input_size, hidden_size);
  weight_ih =
      register_parameter("weight_ih", oneflow::empty({num_chunks * hidden_size, input_size}));
  weight_hh =
      register_parameter("weight_hh", oneflow::empty({num_chunks * hidden_size, hidden_size}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", oneflow::empty({num_chunks * hidden_size}));
    bias_hh = register_parameter("bias_hh", oneflow::empty({num_chunks * hidden_size}));
  }
  reset_parameters();
}

void RNNCellImplBase::reset_parameters() {
  const double stdv = 1.0 / std::sqrt(double(hidden_size_));
  for (Tensor* w : {&weight_ih, &weight_hh, &bias_ih, &bias_hh})
    if (w->defined()) init::uniform_(*w, -stdv, stdv);
}

void RNNCellImplBase::pretty_print(std::ostream& s) const {
  s << name() << "(" << input_size_ << ", " << hidden_size_;
  if (!bias_) s << ", bias=false";
  const std::string nl = get_nonlinearity_str();
  if (!nl.empty() && nl != "kTanh") s << ", nonlinearity=" << nl;
  s << ")";
}

void RNNCellImplBase::check_forward_input(const Tensor& input) const {
  OF_CHECK(input.defined(), "[{}] input is undefined", name());
  OF_CHECK(input.dim() == 1 || input.dim() == 2,
           "[{}] input of shape {} must be 2-D [B, features] or 1-D (unbatched)", name(),
           shape_str(input.sizes()));
  OF_CHECK(input.size(-1) == input_size_, "[{}] input of shape {} has {} features, expected {}",
           name(), shape_str(input.sizes()), input.size(-1), input_size_);
}

void RNNCellImplBase::check_forward_hidden(const Tensor& input, const Tensor& hx,
                                           const char* label) const {
  if (!hx.defined()) return;
  DimVector want = input.sizes().dims();
  want.back() = hidden_size_;
  OF_CHECK(hx.sizes() == IntArrayRef(want),
           "[{}] {} of shape {} does not match the expected {} "
           "(input of shape {})",
           name(), label, shape_str(hx.sizes()), shape_str(want), shape_str(input.sizes()));
  OF_CHECK(hx.dtype() == input.dtype(), "[{}] {} dtype {} does not match the input's {}", name(),
           label, dtype_name(hx.dtype()), dtype_name(input.dtype()));
}

}  // namespace detail

namespace {

// A cell step on a batched input [B, in] through the same step function as the layers.
Tensor cell_state(const Tensor& s, const Tensor& x, int64_t H) {
  if (s.defined()) return x.dim() == 1 ? s.unsqueeze(0) : s;
  return zeros({x.dim() == 1 ? 1 : x.size(0), H}, x.options());
}

}  // namespace

RNNCellImpl::RNNCellImpl(const RNNCellOptions& o)
    : RNNCellImplBase(o.input_size(), o.hidden_size(), o.bias(), 1, "RNNCell"), options(o) {}

std::string RNNCellImpl::get_nonlinearity_str() const {
  return enumtype::get_enum_name(options.nonlinearity());
}

Tensor RNNCellImpl::forward(const Tensor& input, Tensor hx) {
  check_forward_input(input);
  check_forward_hidden(input, hx, "hx");
  const RNNMode mode = std::holds_alternative<enumtype::kTanh>(options.nonlinearity())
                           ? RNNMode::kRNN_TANH
                           : RNNMode::kRNN_RELU;
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;
  Tensor h = cell_state(hx, input, hidden_size_), c;
  const DirWeights w{weight_ih, weight_hh, bias_ih, bias_hh, {}};
  step(mode, project_input(mode, x, w), h, c, w, weight_hh.t(), {});
  return input.dim() == 1 ? h.squeeze(0) : h;
}

LSTMCellImpl::LSTMCellImpl(const LSTMCellOptions& o)
    : RNNCellImplBase(o.input_size(), o.hidden_size(), o.bias(), 4, "LSTMCell"), options(o) {}

std::tuple<Tensor, Tensor> LSTMCellImpl::forward(const Tensor& input,
                                                 std::optional<std::tuple<Tensor, Tensor>> hx_opt) {
  check_forward_input(input);
  Tensor h0, c0;
  if (hx_opt) std::tie(h0, c0) = *hx_opt;
  check_forward_hidden(input, h0, "hx[0]");
  check_forward_hidden(input, c0, "hx[1]");
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;
  Tensor h = cell_state(h0, input, hidden_size_), c = cell_state(c0, input, hidden_size_);
  const DirWeights w{weight_ih, weight_hh, bias_ih, bias_hh, {}};
  step(RNNMode::kLSTM, project_input(RNNMode::kLSTM, x, w), h, c, w, weight_hh.t(), {});
  if (input.dim() == 1) return {h.squeeze(0), c.squeeze(0)};
  return {h, c};
}

GRUCellImpl::GRUCellImpl(const GRUCellOptions& o)
    : RNNCellImplBase(o.input_size(), o.hidden_size(), o.bias(), 3, "GRUCell"), options(o) {}

Tensor GRUCellImpl::forward(const Tensor& input, Tensor hx) {
  check_forward_input(input);
  check_forward_hidden(input, hx, "hx");
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;
  Tensor h = cell_state(hx, input, hidden_size_), c;
  const DirWeights w{weight_ih, weight_hh, bias_ih, bias_hh, {}};
  step(RNNMode::kGRU, project_input(RNNMode::kGRU, x, w), h, c, w, weight_hh.t(), {});
  return input.dim() == 1 ? h.squeeze(0) : h;
}

}  // namespace oneflow::nn

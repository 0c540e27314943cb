// nn.cpp: the CPU kernels of dropout and linear (their metas, VJPs and registrations:
// ops/nn.cpp; what the nn kernels share: ops/nn_common.h).
// NOTE [nn kernels]: the fused ops (batch_norm, layer_norm, group_norm, rms_norm, dropout,
// cross_entropy) and their backward ops run on contiguous copies of their inputs. Statistics
// accumulate in double (two passes over data that is in cache: mean, then squared deviations),
// work is split over rows/channels only and reductions across rows are merged in a fixed order,
// so results do not depend on the thread count. (That the backward ops are not differentiable
// themselves, and which losses are compositions of public ops: ops/nn.cpp.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "cpu/nn.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "cpu/blas.h"
#include "cpu/elementwise.h"
#include "cpu/gemm_s8.h"
#include "generator.h"
#include "ops/nn_common.h"

namespace oneflow::cpu {
using namespace nn_detail;

// ================================================================ dropout
// which elements are kept (Philox words, the same on CUDA): ops/nn.cpp

void dropout(const KernelArgs& k) {
  const Tensor x = kernel_contiguous(k.inputs[0]);
  const double p = DropoutAttrs::get<"p">(k.attrs);
  const uint64_t seed = uint64_t(DropoutAttrs::get<"seed">(k.attrs)),
                 offset = uint64_t(DropoutAttrs::get<"offset">(k.attrs));
  const uint32_t thr = uint32_t(std::ceil(p * 16777216.0));
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  dispatch_f(x.dtype(), "dropout", [&](auto z) {
    using T = decltype(z);
    const T* px = cptr<T>(x);
    T* py = mptr<T>(k.outputs[0]);
    bool* pm = mptr<bool>(k.outputs[1]);
    const int64_t n = x.numel();
    const T s = T(scale);
    parallel_for(0, (n + 3) / 4, 4096, [&](int64_t c0, int64_t c1) {
      constexpr int64_t kChunk = 1024;
      alignas(64) uint32_t wd[kChunk];
      const int64_t e1 = std::min(c1 * 4, n);
      for (int64_t e0 = c0 * 4; e0 < e1; e0 += kChunk) {
        const int64_t m = std::min(kChunk, e1 - e0);
        philox_words(seed, offset, uint64_t(e0), m, wd);
        // restrict: the bool stores could alias anything otherwise, and the loop would not
        // vectorize
        const T* __restrict xi = px + e0;
        T* __restrict yi = py + e0;
        bool* __restrict mi = pm + e0;
        const uint32_t* __restrict wi = wd;
        for (int64_t j = 0; j < m; ++j) {
          const bool keep = (wi[j] >> 8) >= thr;
          const T v = xi[j] * s;  // computed either way: a select, not a mispredicted branch
          mi[j] = keep;
          yi[j] = keep ? v : T(0);
        }
      }
    });
  });
}

// ================================================================ linear
// One GEMM: on the float32 kernel the bias enters in its epilogue (NOTE [GEMM epilogues]);
// elsewhere it is preloaded into the output (beta = 1), as addmm. linear_act (the trace's
// epilogue rewrite) applies its activation in the same epilogue, or after the GEMM.

namespace {
// linear, then `act` (empty: none), then * scale (unless 1), then + residual (k.inputs[3] when
// there is one): each step rounded as its unfused op rounds.
void linear_then(const KernelArgs& k, std::string_view act_name, double scale = 1.0) {
  // the activation's form (NOTE [Epilogue activations]; linear_act's infer_meta checked it)
  const EpilogueAct* act = act_name.empty() ? nullptr : find_epilogue_act(act_name);
  OF_CHECK(act_name.empty() || act, "[linear_act] unknown activation '{}'", act_name);
  const Tensor& x = k.inputs[0];
  const Tensor& w = k.inputs[1];
  const Tensor& out = k.outputs[0];
  const bool has_bias = k.inputs[2].defined();
  const Tensor residual = k.inputs.size() > 3 ? k.inputs[3] : Tensor();
  if (cpu::gemm_epilogue(x, kernel_transpose(w), out, k.inputs[2], act ? act->rows_f32 : nullptr,
                         float(scale), residual))
    return;
  if (has_bias && out.numel() > 0) {
    const Tensor b = kernel_contiguous(k.inputs[2]);
    const int64_t R = out.size(0), O = out.size(1);
    const size_t bytes = size_t(O) * b.element_size();
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t r = 0; r < R; ++r) std::memcpy(dst + size_t(r) * bytes, b.data_ptr(), bytes);
  }
  cpu::gemm(x, kernel_transpose(w), out, Scalar(1), has_bias ? Scalar(1) : Scalar(0), "linear");
  if (act) act->tensor(out);
  if (scale == 1.0 && !residual.defined()) return;
  dispatch_float(out.dtype(), "linear_act", [&](auto z) {
    using T = decltype(z);
    using C = compute_t<T>;
    T* p = static_cast<T*>(out.data_ptr());
    const int64_t n = out.numel();
    const C s = C(scale);
    // separate passes: the multiply and the add round apart (see cpu/gemm_f32.cpp)
    if (scale != 1.0)
      for (int64_t i = 0; i < n; ++i) p[i] = T(C(p[i]) * s);
    if (residual.defined()) {
      const Tensor r = kernel_contiguous(residual);
      const T* q = static_cast<const T*>(r.data_ptr());
      for (int64_t i = 0; i < n; ++i) p[i] = T(C(p[i]) + C(q[i]));
    }
  });
}
}  // namespace

void linear(const KernelArgs& k) { linear_then(k, {}); }

namespace {
std::atomic<int> g_s8_path{int(gemm_s8_best())};
}  // namespace
S8Path set_linear_int8_path(S8Path p) { return S8Path(g_s8_path.exchange(int(p))); }

// linear_dynamic_int8 (NOTE [Dynamic int8 linear] in cpu/gemm_s8.cpp): the weight quantized per
// call, or once for a replay's constant weight (NOTE [Prepacked weights]).
void linear_dynamic_int8(const KernelArgs& k) {
  const Tensor& x = k.inputs[0];
  const Tensor& w = k.inputs[1];
  const Tensor& out = k.outputs[0];
  if (out.numel() == 0) return;
  const Tensor b = k.inputs[2].defined() ? kernel_contiguous(k.inputs[2]) : Tensor();
  // (one captured reference: the std::function cached_form takes holds it without allocating,
  // at every replay call)
  auto quantize = [&w] {
    return std::shared_ptr<const void>(std::make_shared<const QuantizedWeight>(quantize_weight(
        static_cast<const float*>(w.data_ptr()), w.size(0), w.size(1), w.stride(0))));
  };
  std::shared_ptr<const void> q =
      constant_operand_storage() == w.impl()->storage.get()
          ? cached_form(w, ConstantForm::kInt8Weight, quantize,
                        [](const void* p) {
                          const auto* qw = static_cast<const QuantizedWeight*>(p);
                          return qw->packed.size() + 8 * qw->scale.size();
                        })
          : quantize();
  linear_s8(static_cast<const float*>(x.data_ptr()), x.size(0), x.stride(0),
            *static_cast<const QuantizedWeight*>(q.get()),
            b.defined() ? static_cast<const float*>(b.data_ptr()) : nullptr,
            static_cast<float*>(out.data_ptr()), out.stride(0),
            S8Path(g_s8_path.load(std::memory_order_relaxed)));
}
void linear_act(const KernelArgs& k) {
  const std::string& act = LinearActAttrs::get<"act">(k.attrs);
  linear_then(k, act == "none" ? std::string_view() : std::string_view(act),
              LinearActAttrs::has<"scale">(k.attrs) ? LinearActAttrs::get<"scale">(k.attrs) : 1.0);
}

}  // namespace oneflow::cpu

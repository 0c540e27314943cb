// Printing: numpy/torch-like layout, summarized for large tensors, with dtype/device/grad info.
#include <cmath>
#include <sstream>

#include "autograd/node.h"
#include "dispatch.h"
#include "global/global.h"

namespace oneflow {
namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  bool is_float = false, is_bool = false, use_sci = false, all_int_valued = true;
  int width = 1;
  int precision = 4;

  void prepare(const std::vector<double>& vals) {
    double max_abs = 0, min_abs = INFINITY;
    for (double v : vals) {
      if (!std::isfinite(v)) continue;
      double a = std::fabs(v);
      max_abs = std::max(max_abs, a);
      if (a > 0) min_abs = std::min(min_abs, a);
      if (v != std::floor(v)) all_int_valued = false;
    }
    if (is_float && (max_abs >= 1e8 || (min_abs < 1e-4 && min_abs > 0) ||
                     (min_abs != INFINITY && max_abs / min_abs > 1e3 && max_abs >= 1e3)))
      use_sci = true;
    for (double v : vals) width = std::max(width, int(fmt_one(v).size()));
  }
  std::string fmt_one(double v) const {
    if (is_bool) return v != 0 ? "true" : "false";
    if (!is_float) return fmt::format("{}", int64_t(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (use_sci) return fmt::format("{:.{}e}", v, precision);
    if (all_int_valued) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.{}f}", v, precision);
  }
};

void print_rec(std::string& s, const Tensor& t, const Formatter& f, int64_t dim, bool summarize,
               int indent) {
  if (t.dim() == 0) {
    s += fmt::format("{:>{}}", f.fmt_one(t.item<double>()), f.width);
    return;
  }
  int64_t n = t.size(0);
  s += "[";
  auto emit = [&](int64_t i) {
    if (t.dim() == 1) {
      s += fmt::format("{:>{}}", f.fmt_one(t.select(0, i).item<double>()), f.width);
    } else {
      print_rec(s, t.select(0, i), f, dim + 1, summarize, indent + 1);
    }
  };
  auto sep = [&]() {
    if (t.dim() == 1) {
      s += ", ";
    } else {
      s += ",";
      s += std::string(size_t(t.dim() - 1), '\n');
      s += std::string(size_t(indent + 1), ' ');
    }
  };
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) {
      emit(i);
      sep();
    }
    s += "...";
    sep();
    for (int64_t i = n - kEdgeItems; i < n; ++i) {
      emit(i);
      if (i + 1 < n) sep();
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      emit(i);
      if (i + 1 < n) sep();
    }
  }
  s += "]";
}

}  // namespace

std::string format_tensor(const Tensor& t0) {
  if (!t0.defined()) return "[ Tensor (undefined) ]";
  NoGradGuard ng;
  // A global tensor shows its logical value (gathered on every rank: printing is collective).
  Tensor t = t0.is_global() ? global::logical_value(t0) : t0.detach();
  if (!t.is_cpu()) t = t.to(Device(kCPU));
  Formatter f;
  f.is_float = t.is_floating_point();
  f.is_bool = t.dtype() == kBool;
  bool summarize = t.numel() > kSummarizeThreshold;
  // Values that will be shown decide the column width.
  std::vector<double> vals;
  if (t.numel() > 0) {
    if (summarize) {
      Tensor flat = t.contiguous().reshape({-1});
      std::vector<double> all = flat.to_vector<double>();
      size_t k = std::min<size_t>(all.size(), 200);
      vals.assign(all.begin(), all.begin() + long(k));
      vals.insert(vals.end(), all.end() - long(k), all.end());
    } else {
      vals = t.to_vector<double>();
    }
  }
  f.prepare(vals);
  std::string s = "tensor(";
  if (t.numel() == 0 && t.dim() > 0) s += "[]";
  else print_rec(s, t, f, 0, summarize, 7);
  std::vector<std::string> extra;
  if (t.numel() == 0 || t.dim() == 0 || summarize) extra.push_back("size=" + shape_str(t.sizes()));
  if (t0.dtype() != kFloat32 && t0.dtype() != kInt64 && t0.dtype() != kBool)
    extra.push_back(fmt::format("dtype={}", dtype_name(t0.dtype())));
  else if (t0.dtype() != kFloat32) extra.push_back(fmt::format("dtype={}", dtype_name(t0.dtype())));
  if (t0.is_global()) {
    extra.push_back("placement=" + t0.placement().str());
    extra.push_back("sbp=" + sbp_str(t0.sbp()));
  } else if (!t0.is_cpu()) {
    extra.push_back("device='" + t0.device().str() + "'");
  }
  if (t0.grad_fn()) extra.push_back("grad_fn=<" + t0.grad_fn()->name() + ">");
  else if (t0.requires_grad()) extra.push_back("requires_grad=True");
  for (auto& e : extra) s += ", " + e;
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  note_host_read(t, "printing a tensor");
  return os << format_tensor(t);
}

}  // namespace oneflow

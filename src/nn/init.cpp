// of::nn::init: PyTorch's initializers (in place, outside autograd).
#include <cmath>

#include "oneflow/nn.h"

namespace oneflow::nn::init {

double calculate_gain(NonlinearityType n, double param) {
  if (std::holds_alternative<enumtype::kTanh>(n)) return 5.0 / 3.0;
  if (std::holds_alternative<enumtype::kReLU>(n)) return std::sqrt(2.0);
  if (std::holds_alternative<enumtype::kLeakyReLU>(n)) return std::sqrt(2.0 / (1 + param * param));
  return 1.0;  // Linear, Conv*, ConvTranspose*, Sigmoid
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  OF_CHECK(t.dim() >= 2,
           "[init] fan in and fan out can not be computed for a tensor with fewer than 2 "
           "dimensions (shape {})",
           shape_str(t.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor uniform_(Tensor t, double low, double high) {
  NoGradGuard g;
  return t.uniform_(low, high);
}

Tensor normal_(Tensor t, double mean, double std) {
  NoGradGuard g;
  return t.normal_(mean, std);
}

Tensor constant_(Tensor t, double value) {
  NoGradGuard g;
  return t.fill_(value);
}

Tensor ones_(Tensor t) { return constant_(t, 1); }
Tensor zeros_(Tensor t) { return constant_(t, 0); }

Tensor xavier_uniform_(Tensor t, double gain) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double std = gain * std::sqrt(2.0 / double(fan_in + fan_out));
  const double a = std::sqrt(3.0) * std;
  return uniform_(t, -a, a);
}

Tensor xavier_normal_(Tensor t, double gain) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0, gain * std::sqrt(2.0 / double(fan_in + fan_out)));
}

namespace {
double kaiming_std(const Tensor& t, double a, FanModeType mode, NonlinearityType n) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = std::holds_alternative<enumtype::kFanIn>(mode) ? fan_in : fan_out;
  OF_CHECK(fan > 0, "[init] kaiming initialization of a tensor with zero fan ({})",
           shape_str(t.sizes()));
  return calculate_gain(n, a) / std::sqrt(double(fan));
}
}  // namespace

Tensor kaiming_uniform_(Tensor t, double a, FanModeType mode, NonlinearityType n) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, n);
  return uniform_(t, -bound, bound);
}

Tensor kaiming_normal_(Tensor t, double a, FanModeType mode, NonlinearityType n) {
  return normal_(t, 0, kaiming_std(t, a, mode, n));
}

}  // namespace oneflow::nn::init

// fmt.h: fmt::format("{}", tensor) for programs that use fmt themselves. Not part of
// <oneflow/oneflow.h>, which keeps fmt out of the program's namespaces (NOTE [No fmt in public
// headers], error.h); a program that includes this header links fmt too.
#pragma once
#include <string_view>

#include <fmt/format.h>

#include "oneflow/tensor.h"

template <> struct fmt::formatter<oneflow::Tensor> : fmt::formatter<std::string_view> {
  template <class Ctx> auto format(const oneflow::Tensor& t, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(oneflow::format_tensor(t), ctx);
  }
};

// enum.h: libtorch's option tags (of::kMean, of::kSame, of::kReLU, ...). Each tag is the one
// value of its own empty type in of::enumtype, and an option holds a std::variant of the tags it
// allows, so `.reduction(of::kSame)` does not compile, as with torch::enumtype.
#pragma once
#include <string>
#include <type_traits>
#include <variant>

namespace oneflow {

namespace enumtype {
// clang-format off
#define OF_ENUM_TAGS(X)                                                                          \
  X(Linear) X(Conv1D) X(Conv2D) X(Conv3D) X(ConvTranspose1D) X(ConvTranspose2D)                 \
  X(ConvTranspose3D) X(Sigmoid) X(Tanh) X(ReLU) X(GELU) X(SiLU) X(Mish) X(LeakyReLU) X(FanIn)    \
  X(FanOut) X(Constant) X(Reflect) X(Replicate) X(Circular) X(Nearest) X(Bilinear) X(Bicubic)    \
  X(Trilinear) X(Area) X(NearestExact) X(Sum) X(Mean) X(Max) X(None) X(BatchMean) X(Zeros)       \
  X(Border) X(Reflection) X(Valid) X(Same)
// clang-format on

#define OF_ENUM_TYPE(name)                                     \
  struct k##name {                                             \
    static constexpr const char* enum_name = "k" #name;        \
    constexpr bool operator==(const k##name&) const = default; \
  };
OF_ENUM_TAGS(OF_ENUM_TYPE)
#undef OF_ENUM_TYPE

// "kMean" for a variant holding kMean (torch::enumtype::get_enum_name); "<function>" for a
// variant alternative that is not a tag (TransformerEncoderLayer's activation callable).
template <class... Ts> std::string get_enum_name(const std::variant<Ts...>& v) {
  return std::visit(
      [](const auto& t) -> std::string {
        using T = std::decay_t<decltype(t)>;
        if constexpr (requires { T::enum_name; }) return T::enum_name;
        else return "<function>";
      },
      v);
}
}  // namespace enumtype

#define OF_ENUM_CONSTANT(name) inline constexpr enumtype::k##name k##name{};
OF_ENUM_TAGS(OF_ENUM_CONSTANT)
#undef OF_ENUM_CONSTANT
#undef OF_ENUM_TAGS

}  // namespace oneflow

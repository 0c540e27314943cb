// attr_schema.h (internal): named, typed views of an op family's attributes.
// NOTE [Attribute schemas]: an op's attributes travel positionally (Attrs: CSE keys, graph
// files), but code names them: a family declares its schema once,
//   using ConvAttrs = AttrSchema<Attr<"stride", DimVector>, Attr<"padding", DimVector>, ...>;
// registers `.attr_names = ConvAttrs::names(), .attr_types = ConvAttrs::types()`, builds
// attributes with `ConvAttrs::make(stride, padding, ...)` (each argument converts to its field's
// type) and reads them with `ConvAttrs::get<"groups">(attrs)` (the field's type; a name the
// schema lacks does not compile). A schema extended with `::with<...>` keeps its fields'
// positions, so one reader serves a whole family (conv, conv_transpose, the weight gradient).
// A field may be optional (Attr<"dim", std::optional<int64_t>>: argmax's dim or none, stored as
// the value or AttrValue's monostate; its type tag is the value's with kOptionalAttr set).
// register_op checks that the names and types agree, and test_fuzz_support that every call
// the suite makes passes attributes of the declared types.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "kernel_support.h"

namespace oneflow {

// A string literal usable as a template argument: Attr<"stride", DimVector>.
template <size_t N> struct AttrName {
  char s[N]{};
  constexpr AttrName(const char (&x)[N]) { std::copy_n(x, N, s); }
  constexpr std::string_view view() const { return {s, N - 1}; }
};

template <AttrName Name, class T> struct Attr {
  using type = T;
  static constexpr std::string_view name = Name.view();
};

// The AttrValue alternative index of T (the type tag graph files and op_signatures.txt use).
template <class T, size_t I = 0> constexpr uint8_t attr_tag() {
  static_assert(I < std::variant_size_v<AttrValue>, "not an attribute type");
  if constexpr (std::is_same_v<T, std::variant_alternative_t<I, AttrValue>>) return uint8_t(I);
  else return attr_tag<T, I + 1>();
}

template <class T> struct optional_field : std::false_type {};
template <class U> struct optional_field<std::optional<U>> : std::true_type {};
template <class T> constexpr bool is_optional_field = optional_field<T>::value;

// The type tag of a field: its AttrValue alternative, kOptionalAttr set for an optional one.
constexpr uint8_t kOptionalAttr = 0x80;
template <class T> constexpr uint8_t field_tag() {
  if constexpr (is_optional_field<T>) return kOptionalAttr | attr_tag<typename T::value_type>();
  else return attr_tag<T>();
}
// Whether a field of type tag `field` takes a value of AttrValue alternative `value` (an
// optional field: its value's, or none).
constexpr bool field_takes(uint8_t field, uint8_t value) {
  if (!(field & kOptionalAttr)) return field == value;
  return value == 0 || value == uint8_t(field & ~kOptionalAttr);
}

template <class... F> struct AttrSchema {
  static constexpr size_t size = sizeof...(F);
  template <class... G> using with = AttrSchema<F..., G...>;

  // The position of the field named N (a compile error when there is none).
  template <AttrName N> static consteval size_t index() {
    constexpr std::array<std::string_view, size> names{F::name...};
    for (size_t k = 0; k < size; ++k)
      if (names[k] == N.view()) return k;
    throw "no attribute of this name in the schema";  // not a constant: does not compile
  }
  template <AttrName N>
  using type = std::tuple_element_t<index<N>(), std::tuple<typename F::type...>>;

  // The attribute named N of `a` (std::bad_variant_access or an of::Error, as Attrs' reads);
  // an optional field's by value (none where `a` holds a monostate).
  template <AttrName N>
  requires(!is_optional_field<type<N>>) static const type<N>& get(const Attrs& a) {
    return std::get<type<N>>(a.at(index<N>()));
  }
  template <AttrName N>
  requires is_optional_field<type<N>>
  static type<N> get(const Attrs& a) {
    const AttrValue& v = a.at(index<N>());
    if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
    return std::get<typename type<N>::value_type>(v);
  }
  // Whether `a` holds the field (calls of some ops leave trailing fields out).
  template <AttrName N> static bool has(const Attrs& a) { return index<N>() < a.size(); }
  // The field when `a` holds it with the field's type, else null (never throws: the fuser
  // checks a loaded node's attributes with it before generating code).
  template <AttrName N>
  requires(!is_optional_field<type<N>>) static const type<N>* find(const Attrs& a) {
    return index<N>() < a.size() ? std::get_if<type<N>>(&a.values[index<N>()]) : nullptr;
  }

  static Attrs make(typename F::type... v) {
    Attrs a;
    (a.values.push_back(value_of(std::move(v))), ...);
    return a;
  }
  static std::vector<std::string> names() { return {std::string(F::name)...}; }
  static std::vector<uint8_t> types() { return {field_tag<typename F::type>()...}; }

 private:
  template <class T> static AttrValue value_of(T v) {
    if constexpr (is_optional_field<T>) return v ? AttrValue(*v) : AttrValue();
    else return AttrValue(std::move(v));
  }
};

}  // namespace oneflow

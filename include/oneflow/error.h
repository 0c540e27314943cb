// error.h: of::Error, the one exception type for misuse and backend failures.
// NOTE [No fmt in public headers]: the library formats its messages with fmt, but a program
// that includes <oneflow/oneflow.h> must not get fmt's namespace: a user's own `fmt` (a free
// function `int fmt(int)`, a variable, a namespace) would clash with ::fmt ("redeclared as
// different kind of entity", "reference to 'fmt' is ambiguous"). So the installed headers
// never include fmt:
//  - their inline code throws through throw_error, which fills "{}" placeholders with each
//    argument printed by operator<< (the same function in the library and in programs);
//  - a program's `of::fail` / `OF_CHECK` are that formatter too;
//  - the library's own sources (compiled with ONEFLOW_BUILDING) get fail / OF_CHECK on top of
//    fmt::format instead (format specs, fmt::join, ranges), and fmt itself.
// <oneflow/fmt.h> opts in to fmt::formatter<of::Tensor> for programs that use fmt themselves.
#pragma once
#include <charconv>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#ifdef ONEFLOW_BUILDING
#include <fmt/format.h>
#endif

namespace oneflow {

// Every user-facing error: the message starts with "[op_name]" and names the bad values.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
// Throws Error(format with its placeholders filled): "{}" (or "{N}", or "{:spec}" with the spec
// ignored) takes the next argument (argument N); "{{" and "}}" are braces.
[[noreturn]] void throw_formatted(std::string_view format, const std::string* args, size_t n);

// One argument as fmt's "{}" prints it: bools as true/false, small integer types as numbers,
// floating point in the shortest form that reads back exactly, anything else by operator<<.
template <class T> std::string format_arg(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, char>) {
    return std::string(1, v);
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return std::string(std::string_view(v));
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  } else {
    std::ostringstream os;
    os << v;
    return std::move(os).str();
  }
}
}  // namespace detail

// Throws Error with "{}" placeholders filled in order by args (printed with operator<<): what
// the installed headers' inline code throws with (NOTE [No fmt in public headers]).
template <class... Args>
[[noreturn]] void throw_error(std::string_view format, const Args&... args) {
  const std::string formatted[] = {detail::format_arg(args)..., std::string()};
  detail::throw_formatted(format, formatted, sizeof...(Args));
}

#ifdef ONEFLOW_BUILDING
template <class... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}
#else
// Programs: the same as throw_error.
template <class... Args> [[noreturn]] void fail(std::string_view format, const Args&... args) {
  throw_error(format, args...);
}
#endif

}  // namespace oneflow

// OF_CHECK(cond, "[op] fmt {}", args...): throws of::Error when cond is false.
#define OF_CHECK(cond, ...)                    \
  do {                                         \
    if (!(cond)) ::oneflow::fail(__VA_ARGS__); \
  } while (0)

// The same for inline code in the installed headers, which must format alike in the library
// and in programs (NOTE [No fmt in public headers]).
#define OF_HEADER_CHECK(cond, ...)                    \
  do {                                                \
    if (!(cond)) ::oneflow::throw_error(__VA_ARGS__); \
  } while (0)

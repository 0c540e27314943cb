// compat.h: the libtorch names that ported programs write and that a `torch::` -> `of::` swap
// leaves untouched — TORCH_CHECK / AT_ASSERT / TORCH_INTERNAL_ASSERT (throwing of::Error),
// TORCH_WARN / TORCH_WARN_ONCE (stderr), of::str, of::optional / of::nullopt,
// of::intrusive_ptr / of::make_intrusive, and the `c10::` and `at::` namespaces as aliases of
// oneflow. Define ONEFLOW_NO_TORCH_NAMES before including
// oneflow.h to leave the macros and the two aliases out (for example next to real libtorch).
#pragma once
#include <concepts>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "oneflow/error.h"

namespace oneflow {

template <class T> using optional = std::optional<T>;
inline constexpr std::nullopt_t nullopt = std::nullopt;

// Concatenates anything streamable (libtorch's c10::str / torch::str).
template <class... A> std::string str(const A&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// NOTE [intrusive_ptr]: libtorch 1.13 hands out process groups and their works as
// c10::intrusive_ptr, older programs hold them as std::shared_ptr. Here intrusive_ptr<T> *is* a
// std::shared_ptr<T> (a subclass adding nothing but libtorch's spellings), so a value converts
// to std::shared_ptr<T> (or to a base's) implicitly and back, and both spellings compile.
template <class T> class intrusive_ptr : public std::shared_ptr<T> {
 public:
  intrusive_ptr() noexcept = default;
  intrusive_ptr(std::nullptr_t) noexcept {}
  template <class U>
  requires std::convertible_to<U*, T*> intrusive_ptr(const std::shared_ptr<U>& p)
  noexcept : std::shared_ptr<T>(p) {}
  template <class U>
  requires std::convertible_to<U*, T*> intrusive_ptr(std::shared_ptr<U>&& p)
  noexcept : std::shared_ptr<T>(std::move(p)) {}
  // True when it points at an object (libtorch's name for operator bool).
  bool defined() const noexcept { return bool(*this); }
};

// A new T owned by an intrusive_ptr (libtorch's c10::make_intrusive).
template <class T, class... Args> intrusive_ptr<T> make_intrusive(Args&&... args) {
  return std::make_shared<T>(std::forward<Args>(args)...);
}

namespace detail {
[[noreturn]] inline void torch_check_failed(const char* kind, const char* cond, const char* file,
                                            int line, const std::string& msg) {
  throw Error("[" + std::string(kind) + "] " + msg + (msg.empty() ? "" : " ") + "(" + cond +
              " at " + file + ":" + std::to_string(line) + ")");
}
inline void torch_warn(const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "Warning: %s (%s:%d)\n", msg.c_str(), file, line);
}
}  // namespace detail

}  // namespace oneflow

#ifndef ONEFLOW_NO_TORCH_NAMES
namespace c10 = ::oneflow;
namespace at = ::oneflow;

#define OF_TORCH_CHECK_(kind, cond, ...)                                                    \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::oneflow::detail::torch_check_failed(kind, #cond, __FILE__, __LINE__,                \
                                            ::oneflow::str("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
#define TORCH_CHECK(cond, ...) OF_TORCH_CHECK_("TORCH_CHECK", cond __VA_OPT__(, ) __VA_ARGS__)
#define AT_ASSERT(cond, ...) OF_TORCH_CHECK_("AT_ASSERT", cond __VA_OPT__(, ) __VA_ARGS__)
#define TORCH_INTERNAL_ASSERT(cond, ...) \
  OF_TORCH_CHECK_("TORCH_INTERNAL_ASSERT", cond __VA_OPT__(, ) __VA_ARGS__)
#define TORCH_WARN(...) \
  ::oneflow::detail::torch_warn(__FILE__, __LINE__, ::oneflow::str(__VA_ARGS__))
#define TORCH_WARN_ONCE(...)        \
  do {                              \
    static bool of_warned_ = false; \
    if (!of_warned_) {              \
      of_warned_ = true;            \
      TORCH_WARN(__VA_ARGS__);      \
    }                               \
  } while (0)
#endif

// compat.h: the libtorch names that ported programs write and that a `torch::` -> `of::` swap
// leaves untouched — TORCH_CHECK / AT_ASSERT / TORCH_INTERNAL_ASSERT (throwing of::Error),
// TORCH_WARN / TORCH_WARN_ONCE (stderr), of::str, of::optional / of::nullopt, and the `c10::`
// and `at::` namespaces as aliases of oneflow. Define ONEFLOW_NO_TORCH_NAMES before including
// oneflow.h to leave the macros and the two aliases out (for example next to real libtorch).
#pragma once
#include <cstdio>
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

namespace detail {
[[noreturn]] inline void torch_check_failed(const char* kind, const char* cond, const char* file,
                                            int line, const std::string& msg) {
  throw Error(fmt::format("[{}] {}{}({} at {}:{})", kind, msg, msg.empty() ? "" : " ", cond, file,
                          line));
}
inline void torch_warn(const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "Warning: %s (%s:%d)\n", msg.c_str(), file, line);
}
}  // namespace detail

}  // namespace oneflow

#ifndef ONEFLOW_NO_TORCH_NAMES
namespace c10 = ::oneflow;
namespace at = ::oneflow;

#define OF_TORCH_CHECK_(kind, cond, ...)                                                     \
  do {                                                                                       \
    if (!(cond))                                                                             \
      ::oneflow::detail::torch_check_failed(kind, #cond, __FILE__, __LINE__,                 \
                                            ::oneflow::str("" __VA_OPT__(, ) __VA_ARGS__));  \
  } while (0)
#define TORCH_CHECK(cond, ...) OF_TORCH_CHECK_("TORCH_CHECK", cond __VA_OPT__(, ) __VA_ARGS__)
#define AT_ASSERT(cond, ...) OF_TORCH_CHECK_("AT_ASSERT", cond __VA_OPT__(, ) __VA_ARGS__)
#define TORCH_INTERNAL_ASSERT(cond, ...) \
  OF_TORCH_CHECK_("TORCH_INTERNAL_ASSERT", cond __VA_OPT__(, ) __VA_ARGS__)
#define TORCH_WARN(...) \
  ::oneflow::detail::torch_warn(__FILE__, __LINE__, ::oneflow::str(__VA_ARGS__))
#define TORCH_WARN_ONCE(...)                                                                 \
  do {                                                                                       \
    static bool of_warned_ = false;                                                          \
    if (!of_warned_) {                                                                       \
      of_warned_ = true;                                                                     \
      TORCH_WARN(__VA_ARGS__);                                                               \
    }                                                                                        \
  } while (0)
#endif

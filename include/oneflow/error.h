// error.h: of::Error, the one exception type for misuse and backend failures.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace oneflow {

// Every user-facing error: the message starts with "[op_name]" and names the bad values.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

template <class... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace oneflow

// OF_CHECK(cond, "[op] fmt {}", args...): throws of::Error when cond is false.
#define OF_CHECK(cond, ...)                       \
  do {                                            \
    if (!(cond)) ::oneflow::fail(__VA_ARGS__);    \
  } while (0)

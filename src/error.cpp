// error.cpp: the placeholder formatter of the public headers' errors (NOTE [No fmt in public
// headers], oneflow/error.h).
#include "oneflow/error.h"

namespace oneflow::detail {

void throw_formatted(std::string_view format, const std::string* args, size_t n) {
  std::string out;
  out.reserve(format.size() + 16 * n);
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out += c;  // "{{" or "}}"
      ++i;
      continue;
    }
    const size_t close = c == '{' ? format.find('}', i) : std::string_view::npos;
    if (close == std::string_view::npos) {
      out += c;
      continue;
    }
    // "{}", "{N}" or "{...:spec}": the index before ':' when there is one, else the next
    const std::string_view field = format.substr(i + 1, close - i - 1);
    const std::string_view id = field.substr(0, field.find(':'));
    size_t k = next;
    if (!id.empty()) {
      k = 0;
      for (char d : id) k = (d >= '0' && d <= '9') ? k * 10 + size_t(d - '0') : n;
    } else {
      ++next;
    }
    if (k < n) out += args[k];
    else out.append(format.substr(i, close - i + 1));  // no such argument: left as written
    i = close;
  }
  throw Error(out);
}

}  // namespace oneflow::detail

// Errors. User input (configs, files, CLI arguments, shapes) is reported by throwing lathe::Error,
// whose message names what went wrong and where; the CLI catches it, prints one line and exits
// non-zero. Internal invariants use LATHE_ASSERT, which aborts: a failed assertion is a bug in
// lathe, never the user's fault.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lathe {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  // Returns a new error whose message is "context: <this message>".
  Error with_context(const std::string& context) const { return Error(context + ": " + what()); }
};

// Concatenates any streamable values into a string: str_cat("m=", 3, " n=", 4).
template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <class... Parts>
[[noreturn]] void throw_error(const Parts&... parts) {
  throw Error(str_cat(parts...));
}

[[noreturn]] void assertion_failed(const char* condition, const char* file, int line);

}  // namespace lathe

// Validates user-controlled input; throws lathe::Error with the streamed message parts.
#define LATHE_CHECK(condition, ...)                  \
  do {                                               \
    if (!(condition)) ::lathe::throw_error(__VA_ARGS__); \
  } while (0)

// Checks an internal invariant; aborts with file and line when it does not hold.
#define LATHE_ASSERT(condition)                                             \
  do {                                                                      \
    if (!(condition)) ::lathe::assertion_failed(#condition, __FILE__, __LINE__); \
  } while (0)

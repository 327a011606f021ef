// Making user input safe to quote in an error message (user input never floods a terminal or a log).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lathe {

// User input quoted in a message: control characters escaped (\n, \t, \x1b, ...) and at most
// `limit` characters of the text kept (cut at a UTF-8 boundary), then "... (N bytes)".
std::string quote_input(std::string_view text, size_t limit = 200);

// A whole message made safe to print: control characters other than the newlines that separate
// problems are escaped, and a line longer than kMaxErrorLineCharacters keeps its beginning and
// end around a note of what was left out. The CLI prints every error through it.
inline constexpr size_t kMaxErrorLineCharacters = 1000;
std::string printable_error_message(const std::string& message);

}  // namespace lathe

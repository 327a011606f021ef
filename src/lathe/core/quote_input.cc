#include "lathe/core/quote_input.h"

#include <cstdio>

namespace lathe {

namespace {

void append_escaped(std::string& out, unsigned char c) {
  switch (c) {
    case '\n':
      out += "\\n";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\r':
      out += "\\r";
      return;
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
}

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

// The start of the UTF-8 sequence that holds byte `index` (so a cut never splits a character).
size_t character_start(std::string_view text, size_t index) {
  while (index > 0 && index < text.size() && (static_cast<unsigned char>(text[index]) & 0xC0) == 0x80) --index;
  return index;
}

}  // namespace

std::string quote_input(std::string_view text, size_t limit) {
  const size_t kept = text.size() <= limit ? text.size() : character_start(text, limit);
  std::string out;
  out.reserve(kept + 16);
  for (size_t i = 0; i < kept; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_control(c))
      append_escaped(out, c);
    else
      out += static_cast<char>(c);
  }
  if (kept < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string printable_error_message(const std::string& message) {
  bool clean = true;
  size_t line_length = 0;
  for (const char character : message) {
    const auto c = static_cast<unsigned char>(character);
    line_length = c == '\n' ? 0 : line_length + 1;
    if ((is_control(c) && c != '\n') || line_length > kMaxErrorLineCharacters) {
      clean = false;
      break;
    }
  }
  if (clean) return message;
  std::string out;
  for (size_t begin = 0; begin <= message.size();) {
    size_t end = message.find('\n', begin);
    if (end == std::string::npos) end = message.size();
    std::string_view line(message.data() + begin, end - begin);
    if (line.size() > kMaxErrorLineCharacters) {
      const size_t head = character_start(line, kMaxErrorLineCharacters * 3 / 4);
      const size_t tail = character_start(line, line.size() - kMaxErrorLineCharacters / 4);
      out += quote_input(line.substr(0, head), head);
      out += " [... " + std::to_string(tail - head) + " bytes left out ...] ";
      out += quote_input(line.substr(tail), line.size() - tail);
    } else {
      out += quote_input(line, line.size());
    }
    if (end < message.size()) out += '\n';
    begin = end + 1;
  }
  return out;
}

}  // namespace lathe

#include "lathe/io/utf8.h"

#include "lathe/core/error.h"

namespace lathe {
namespace {

// Expected sequence length for a lead byte, 0 when the byte cannot start a sequence.
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

// Valid range of the second byte of a sequence; the first continuation byte is where overlong
// forms (e0, f0), surrogates (ed) and values beyond U+10FFFF (f4) are ruled out.
bool second_byte_valid(unsigned char lead, unsigned char second) {
  switch (lead) {
    case 0xe0:
      return second >= 0xa0 && second <= 0xbf;
    case 0xed:
      return second >= 0x80 && second <= 0x9f;
    case 0xf0:
      return second >= 0x90 && second <= 0xbf;
    case 0xf4:
      return second >= 0x80 && second <= 0x8f;
    default:
      return second >= 0x80 && second <= 0xbf;
  }
}

bool is_continuation(unsigned char byte) { return (byte & 0xc0) == 0x80; }

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  size_t i = 0;
  const size_t size = text.size();
  while (i < size) {
    unsigned char lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    int length = sequence_length(lead);
    if (length == 0 || i + length > size) return i;
    if (!second_byte_valid(lead, static_cast<unsigned char>(text[i + 1]))) return i;
    for (int k = 2; k < length; ++k)
      if (!is_continuation(static_cast<unsigned char>(text[i + k]))) return i;
    i += length;
  }
  return std::string_view::npos;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // Look back over at most 3 bytes for the lead byte of a trailing sequence.
  const size_t size = bytes.size();
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    unsigned char byte = static_cast<unsigned char>(bytes[size - back]);
    if (is_continuation(byte)) continue;
    int length = sequence_length(byte);
    if (length <= 1 || static_cast<size_t>(length) <= back) return size;  // ASCII, invalid, or complete
    // Incomplete: hold it back only if what we have so far can still become valid.
    if (back >= 2 && !second_byte_valid(byte, static_cast<unsigned char>(bytes[size - back + 1]))) return size;
    return size - back;
  }
  return size;
}

void append_utf8(std::string& out, uint32_t code_point) {
  LATHE_ASSERT(code_point < 0x110000);
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xc0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xe0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  }
}

}  // namespace lathe

#include "lathe/text/pretokenize.h"

#include <array>

#include "lathe/core/error.h"
#include "lathe/io/utf8.h"

namespace lathe {
namespace {

enum class CharClass : uint8_t { letter, digit, space, other };

constexpr std::array<CharClass, 256> make_classes() {
  std::array<CharClass, 256> classes{};
  for (int b = 0; b < 256; ++b) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b >= 0x80)
      classes[b] = CharClass::letter;
    else if (b >= '0' && b <= '9')
      classes[b] = CharClass::digit;
    else if (b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f')
      classes[b] = CharClass::space;
    else
      classes[b] = CharClass::other;
  }
  return classes;
}
constexpr std::array<CharClass, 256> kClasses = make_classes();

CharClass class_at(std::string_view text, size_t i) { return kClasses[static_cast<unsigned char>(text[i])]; }

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Length of a contraction at text[0] == '\'' (0 when none).
size_t contraction_length(std::string_view text) {
  if (text.size() >= 3) {
    char a = lower(text[1]), b = lower(text[2]);
    if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return 3;
  }
  if (text.size() >= 2) {
    char a = lower(text[1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  }
  return 0;
}

size_t run_of(std::string_view text, size_t start, CharClass wanted) {
  size_t end = start;
  while (end < text.size() && class_at(text, end) == wanted) ++end;
  return end;
}

// Byte -> code point of the byte-level alphabet, and the inverse for code points below 0x144.
struct ByteLevelTables {
  std::array<uint32_t, 256> code_point{};
  std::array<int16_t, 0x144> byte{};
  ByteLevelTables() {
    byte.fill(-1);
    uint32_t next_unprintable = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      code_point[b] = printable ? static_cast<uint32_t>(b) : next_unprintable++;
      byte[code_point[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables tables;
  return tables;
}

}  // namespace

// The same split in code points: a non-ASCII character is a letter (all its bytes are >= 0x80),
// classes and case folding are ASCII only, so `tokenizers` reproduces the split on any text.
const char* const kPretokenizePattern =
    "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]| ?[A-Za-z\\x{80}-\\x{10FFFF}]+|[0-9]{1,3}"
    "| ?[^\\t\\n\\x0B\\x0C\\r A-Za-z0-9\\x{80}-\\x{10FFFF}]+|[\\t\\n\\x0B\\x0C\\r ]+(?![^\\t\\n\\x0B\\x0C\\r "
    "])|[\\t\\n\\x0B\\x0C\\r ]+";

size_t pretoken_length(std::string_view text) {
  LATHE_ASSERT(!text.empty());
  if (text[0] == '\'') {
    if (size_t length = contraction_length(text)) return length;
  }
  CharClass first = class_at(text, 0);
  if (first == CharClass::digit) {
    size_t end = 1;
    while (end < 3 && end < text.size() && class_at(text, end) == CharClass::digit) ++end;
    return end;
  }
  // An optional single leading space joins the letter or punctuation run that follows it.
  size_t start = (text[0] == ' ' && text.size() > 1) ? 1 : 0;
  CharClass body = class_at(text, start);
  if (body == CharClass::letter || body == CharClass::other) return run_of(text, start, body);
  // Whitespace: leave the last whitespace byte to a following word (GPT-2's \s+(?!\S)), unless
  // the run is a single byte or reaches the end of the text.
  size_t end = run_of(text, 0, CharClass::space);
  if (end < text.size() && end >= 2) return end - 1;
  return end;
}

std::vector<std::string_view> split_pretokens(std::string_view text) {
  std::vector<std::string_view> pieces;
  for_each_pretoken(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& tables = byte_level_tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, tables.code_point[b]);
  return out;
}

bool byte_level_to_bytes(std::string_view text, std::string& bytes) {
  const auto& tables = byte_level_tables();
  bytes.clear();
  size_t i = 0;
  while (i < text.size()) {
    unsigned char lead = static_cast<unsigned char>(text[i]);
    uint32_t code_point;
    if (lead < 0x80) {
      code_point = lead;
      i += 1;
    } else if ((lead & 0xe0) == 0xc0 && i + 1 < text.size() && (text[i + 1] & 0xc0) == 0x80) {
      code_point = ((lead & 0x1fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3fu);
      i += 2;
    } else {
      return false;  // every byte-level code point is below U+0800: two bytes at most
    }
    if (code_point >= tables.byte.size() || tables.byte[code_point] < 0) return false;
    bytes += static_cast<char>(tables.byte[code_point]);
  }
  return true;
}

}  // namespace lathe

// Unicode text helpers for the Hugging Face tokenizer pipeline: code point decoding, general
// categories (\p{L}, \p{N}, ...), the White_Space property (regex \s) and NFC normalisation.
// The data tables are generated from one pinned Unicode version (unicode_tables.h); Hugging Face
// `tokenizers` uses Oniguruma's tables, which may be a newer version: code points assigned after
// that version count as unassigned (Cn) here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// Two-letter general category as in the Unicode database: major ('L', 'M', 'N', 'P', 'S', 'Z',
// 'C') and minor ('u', 'l', 'd', ... ; unassigned code points are "Cn").
struct UnicodeCategory {
  char major, minor;
};
UnicodeCategory unicode_category(uint32_t code_point);
bool is_unicode_white_space(uint32_t code_point);  // the White_Space property, as regex \s
uint8_t canonical_combining_class(uint32_t code_point);

// Code points of well-formed UTF-8 text with each one's byte offset (offsets has one extra entry:
// text.size()). Throws lathe::Error naming `what` and the byte offset when text is not UTF-8.
void decode_utf8(std::string_view text, std::vector<uint32_t>& code_points, std::vector<size_t>& offsets,
                 const char* what = "text");
std::string encode_utf8(const std::vector<uint32_t>& code_points);

// Unicode Normalization Form C (canonical decomposition, canonical ordering, composition) of
// well-formed UTF-8 text.
std::string normalize_nfc(std::string_view text);

}  // namespace lathe

// UTF-8 helpers shared by the tokenizer (byte-level token strings, streaming decode) and the corpus
// reader (rejecting files that are not text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lathe {

// Offset of the first byte that does not belong to a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are ill-formed), or npos when the whole text is valid.
size_t find_invalid_utf8(std::string_view text);

// Length of the prefix of `bytes` that can be shown now: everything except a trailing, still
// incomplete but so far well-formed multi-byte sequence (at most 3 bytes held back). Bytes that can
// never become valid are not held back, so a stream of arbitrary bytes always makes progress.
size_t complete_utf8_prefix(std::string_view bytes);

// Appends the UTF-8 encoding of a code point (< 0x110000).
void append_utf8(std::string& out, uint32_t code_point);

}  // namespace lathe

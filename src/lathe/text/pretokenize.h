// Pre-tokenisation for byte-level BPE: text is first cut into "words" that merges never cross, in
// the spirit of the GPT-2 / Llama-3 split pattern, written by hand (no regex library):
//   contractions      's 't 're 've 'm 'll 'd (any case)
//   letters           a run of letters with an optional single leading space (" hello")
//   digits            groups of 1-3 digits ("12345" -> "123", "45")
//   punctuation       a run of other characters with an optional single leading space (" ...")
//   whitespace        a run of whitespace; when a word follows, its last space is left to that word
// Every byte >= 0x80 counts as a letter, so a non-ASCII UTF-8 sequence (and any invalid byte) joins
// the letter runs and the split is total: the pieces always concatenate back to the input.
//
// The byte-level alphabet (GPT-2's bytes_to_unicode) names each of the 256 bytes by a printable
// code point, so token strings in tokenizer.json are readable text: printable Latin-1 bytes stand
// for themselves, the others (space, control bytes, ...) map to U+0100 onwards (' ' -> 'Ġ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// Calls visit(piece) for each pre-token of text, in order.
template <class Visit>
void for_each_pretoken(std::string_view text, Visit&& visit);
std::vector<std::string_view> split_pretokens(std::string_view text);

// A regular expression (Oniguruma / HF `Split` syntax) describing exactly the same split on any
// UTF-8 text, written into tokenizer.json so `tokenizers` (and HfTokenizer) encode identically.
extern const char* const kPretokenizePattern;

// Byte-level names: raw bytes <-> the printable string stored in tokenizer.json.
std::string bytes_to_byte_level(std::string_view bytes);
// Returns false when a code point is not in the byte-level alphabet (or the text is not UTF-8).
bool byte_level_to_bytes(std::string_view text, std::string& bytes);

// Length of the pre-token starting at text[0] (text non-empty); the implementation of the split.
size_t pretoken_length(std::string_view text);

template <class Visit>
void for_each_pretoken(std::string_view text, Visit&& visit) {
  while (!text.empty()) {
    size_t length = pretoken_length(text);
    visit(text.substr(0, length));
    text.remove_prefix(length);
  }
}

}  // namespace lathe

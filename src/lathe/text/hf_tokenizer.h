// Any Hugging Face tokenizer.json of the two BPE families, encoding and decoding exactly as the
// `tokenizers` library does:
//   byte-level BPE (GPT-2, Llama 3, Qwen 2/3): pre-tokenizer Split(regex) + ByteLevel, decoder ByteLevel;
//   SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Gemma): normalizer Prepend("▁") +
//     Replace(" ", "▁") or pre-tokenizer Metaspace, <0xNN> byte tokens, decoders Replace, ByteFallback,
//     Fuse, Strip, Metaspace.
// Pipeline of encode(): added tokens are cut out of the raw text first (non-normalized ones), the
// rest is normalized (NFC, Prepend, Replace), normalized added tokens are cut out, the pre-tokenizer
// (Sequence of Split / ByteLevel / Metaspace) makes words and BPE turns each word into ids (merges by
// rank, lowest first, leftmost on ties; byte fallback; unk). With add_special_tokens a
// TemplateProcessing post-processor adds BOS/EOS ids.
//
// Anything outside this set (another model type, an unknown normalizer / pre-tokenizer / decoder /
// post-processor, a split regex outside text/split_regex.h's subset) is a lathe::Error naming the file
// and the key, as are malformed files (bad JSON, merges naming unknown tokens, ids out of range).
// The trainer's own tokenizer class is BpeTokenizer (text/bpe_tokenizer.h); it writes files this loads.
// encode() and decode() are const and safe to call from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/core/json.h"

namespace lathe {

class HfTokenizer {
 public:
  static HfTokenizer load(const std::string& path);
  // `source` names the origin in error messages (a file path).
  static HfTokenizer from_json(const Json& json, const std::string& source);

  // text: UTF-8 (throws otherwise). add_special_tokens applies the post-processor (e.g. BOS).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Runs the decoder over the ids' tokens; skip_special_tokens drops added tokens marked special.
  // Ill-formed UTF-8 produced by byte tokens becomes U+FFFD as in `tokenizers`. Throws on an id
  // that is no token.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;                         // largest id + 1
  int32_t token_to_id(std::string_view token) const;  // -1 when absent
  std::string id_to_token(int32_t id) const;          // throws when id is no token

  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;
  ~HfTokenizer();

  struct Parts;  // the parsed pipeline (text/hf_tokenizer_parts.h)

 private:
  explicit HfTokenizer(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace lathe

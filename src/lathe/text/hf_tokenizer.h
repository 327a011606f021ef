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
// It implements the Tokenizer interface (text/tokenizer.h; BOS and EOS as described there).
// The trainer's own tokenizer class is BpeTokenizer (text/bpe_tokenizer.h); it writes files this loads.
// encode() and decode() are const and safe to call from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/text/tokenizer.h"

namespace lathe {

class HfTokenizer final : public Tokenizer {
 public:
  static HfTokenizer load(const std::string& path);
  // `source` names the origin in error messages (a file path).
  static HfTokenizer from_json(const Json& json, const std::string& source);

  // text: UTF-8 (throws otherwise). add_special_tokens applies the post-processor (e.g. BOS).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // The interface's; split_special_tokens leaves added tokens marked special unmatched (as
  // `tokenizers`' encode_special_tokens: their text goes through the model as ordinary text).
  using Tokenizer::encode;
  void encode_append(std::string_view text, std::vector<int32_t>& ids, const EncodeOptions& options) const override;
  // Runs the decoder over the ids' tokens; skip_special_tokens drops added tokens marked special.
  // Ill-formed UTF-8 produced by byte tokens becomes U+FFFD as in `tokenizers`. Throws on an id
  // that is no token.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const override;

  int64_t vocab_size() const override;                         // largest id + 1
  int32_t token_to_id(std::string_view token) const override;  // -1 when absent
  std::string id_to_token(int32_t id) const override;          // throws when id is no token
  bool is_special(int32_t id) const override;                  // an added token marked special
  int32_t added_token_id(std::string_view spelling) const override;
  std::optional<int32_t> bos_token_id() const override;
  std::optional<int32_t> eos_token_id() const override;
  std::string kind() const override;

  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;
  ~HfTokenizer();

  struct Parts;  // the parsed pipeline (text/hf_tokenizer_parts.h)

 private:
  explicit HfTokenizer(std::unique_ptr<Parts> parts);
  void encode_into(std::string_view text, std::vector<int32_t>& ids, bool add_special_tokens,
                   bool split_special_tokens) const;
  std::unique_ptr<Parts> parts_;
};

}  // namespace lathe

// One interface for every tokenizer lathe reads: its own byte-level BPE (text/bpe_tokenizer.h,
// trained by `lathe train` and `lathe tokenizer train`) and any Hugging Face tokenizer.json of the
// supported kinds (text/hf_tokenizer.h: byte-level BPE as GPT-2 / Llama 3 / Qwen; SentencePiece-style
// BPE with byte fallback as Llama 2 / Mistral / Gemma). `lathe generate`, dataset preparation and SFT
// read tokenizers through load_tokenizer(), so any supported file works in all three.
//
// load_tokenizer(path) picks the implementation by the file's content: a file laid out exactly as
// BpeTokenizer writes it (its split pattern, today's or the first one, then ByteLevel; no
// normalizer or post-processor; only special added tokens) loads as BpeTokenizer, which encodes
// with the split lathe trained with (byte for byte the ids the data pipeline always produced);
// every other file loads as HfTokenizer. Malformed or unsupported files throw lathe::Error naming
// the file and the key at fault.
//
// Special tokens, in Hugging Face's terms (EncodeOptions):
//   add_special_tokens    adds what the file's post-processor puts around a text: BOS for Llama,
//                         Mistral and Gemma files; nothing for lathe's own and Qwen's.
//   split_special_tokens  special-token text inside the input ("<|im_end|>") is encoded as ordinary
//                         text instead of becoming that token's id. Text that must not inject
//                         control tokens (pre-training documents) sets it; `tokenizers` and chat
//                         templates leave it off.
// bos_token_id(): the token add_special_tokens puts first; absent when it adds none.
// eos_token_id(): the end-of-text token: what the post-processor appends, else the token spelled
//   <|endoftext|>, <|end_of_text|>, </s> or <eos> (first found); absent when there is none. lathe's
//   pre-training puts it after every document; `lathe generate --stop-at-eos` stops at it.
//
// Decoding: lathe's BPE returns the tokens' raw bytes (a cut multi-byte character stays cut); a
// Hugging Face decoder turns ill-formed UTF-8 into U+FFFD as `tokenizers` does.
// Every const method is safe to call from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/core/json.h"

namespace lathe {

struct EncodeOptions {
  bool add_special_tokens = false;    // the post-processor's tokens (BOS, ...) around the text
  bool split_special_tokens = false;  // special-token text in the input stays ordinary text
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` to `ids`. Throws when text is not UTF-8 (Hugging Face files).
  virtual void encode_append(std::string_view text, std::vector<int32_t>& ids, const EncodeOptions& options) const = 0;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const;
  // skip_special_tokens leaves out the ids is_special() marks. Throws on an id that is no token.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const = 0;

  virtual int64_t vocab_size() const = 0;                         // largest id + 1
  virtual int32_t token_to_id(std::string_view token) const = 0;  // spelling as in the file; -1 when absent
  virtual std::string id_to_token(int32_t id) const = 0;          // throws when id is no token
  // A special token (decode's skip_special_tokens drops it). False for any other id, in range or not.
  virtual bool is_special(int32_t id) const = 0;
  // The id of the token spelled `spelling` when encoding matches it whole in text (a special or
  // other added token, e.g. "<|im_start|>"); -1 otherwise, also for ordinary vocabulary entries.
  virtual int32_t added_token_id(std::string_view spelling) const = 0;
  virtual std::optional<int32_t> bos_token_id() const = 0;
  virtual std::optional<int32_t> eos_token_id() const = 0;
  // For messages: "lathe byte-level BPE", "Hugging Face byte-level BPE", ...
  virtual std::string kind() const = 0;

  std::vector<int32_t> special_token_ids() const;  // ascending
};

// Reads a tokenizer.json (see above for which implementation it gets).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// The same from parsed JSON; `source` names the origin in error messages (a file path).
std::unique_ptr<Tokenizer> tokenizer_from_json(const Json& json, const std::string& source);
// Whether a tokenizer.json is laid out exactly as BpeTokenizer::to_json writes it.
bool is_lathe_tokenizer_json(const Json& json);

}  // namespace lathe

// Byte-level BPE tokenizer (GPT-2 style): the 256 single-byte tokens always exist, so any byte
// string encodes; learned merges build longer tokens; special tokens ("<|endoftext|>", the EOS
// between documents) come last. Text is split into pre-tokens first (text/pretokenize.h) and merges
// never cross a pre-token boundary.
//
// Files are Hugging Face style tokenizer.json: model.type "BPE" with a vocab map (token string ->
// id, tokens spelled in the byte-level alphabet, ' ' -> 'Ġ') and a merges list ("a b" or ["a","b"]),
// a byte-level pre-tokenizer and decoder, and added_tokens for the special tokens.
// Malformed files throw lathe::Error naming the file and the key at fault.
//
// It implements the Tokenizer interface (text/tokenizer.h): no BOS, <|endoftext|> as EOS, every
// added token special. Token ids are int32. encode() is safe to call from several threads (its word
// cache is locked).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/text/tokenizer.h"

namespace lathe {

inline constexpr const char* kEndOfText = "<|endoftext|>";

class BpeTokenizer final : public Tokenizer {
 public:
  struct Merge {
    int32_t left, right, result;  // result's bytes = left's bytes + right's bytes
  };
  // Called now and then during training with the merges learned so far and the number wanted.
  using TrainProgress = std::function<void(int64_t merges_done, int64_t merges_wanted)>;

  // Learns merges until the vocabulary (256 bytes + merges + special tokens) reaches vocab_size
  // or no pair of adjacent tokens is left to merge. Each step merges the most frequent adjacent
  // pair over all pre-tokens; ties go to the pair with the smaller (left id, right id), so the
  // result depends only on the documents. Throws when vocab_size < 256 + special tokens.
  static BpeTokenizer train(const std::vector<std::string>& documents, int64_t vocab_size,
                            const std::vector<std::string>& special_tokens = {kEndOfText},
                            const TrainProgress& progress = {});

  static BpeTokenizer load(const std::string& path);
  // `source` names the origin in error messages (a file path).
  static BpeTokenizer from_json(const Json& json, const std::string& source);
  // Writes atomically (temporary file, then rename).
  void save(const std::string& path) const;
  Json to_json() const;

  // With allow_special, occurrences of special token text (e.g. "<|endoftext|>") become their ids;
  // otherwise they are encoded as ordinary text.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
  void encode_append(std::string_view text, std::vector<int32_t>& ids, bool allow_special = false) const;
  // The interface's: allow_special = !split_special_tokens; add_special_tokens adds nothing.
  using Tokenizer::encode;
  void encode_append(std::string_view text, std::vector<int32_t>& ids, const EncodeOptions& options) const override;
  // Concatenated bytes of the tokens (special tokens as their text, or left out with
  // skip_special_tokens). Throws on an id out of range.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const override;
  const std::string& token_bytes(int32_t id) const;  // raw bytes of one token

  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  bool has_eos() const { return eos_id_ >= 0; }
  int32_t eos_id() const;  // the id of "<|endoftext|>"; throws when the tokenizer has none
  // Tokens as spelled in tokenizer.json ("Ġthe"); special tokens are their own text.
  int32_t token_to_id(std::string_view token) const override;  // -1 when absent
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override {
    return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)];
  }
  int32_t added_token_id(std::string_view spelling) const override;
  std::optional<int32_t> bos_token_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_token_id() const override;
  std::string kind() const override { return "lathe byte-level BPE"; }
  const std::vector<Merge>& merges() const { return merges_; }

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

 private:
  struct WordCache;
  BpeTokenizer();
  // Builds the lookup tables from token_bytes_, special_ and merges_; checks their consistency.
  void build_tables(const std::string& source);
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const;

  std::vector<std::string> token_bytes_;  // id -> raw bytes (special tokens: their text)
  std::vector<bool> special_;             // id -> is a special token
  std::vector<Merge> merges_;             // in rank order
  std::array<int32_t, 256> byte_ids_{};   // byte value -> id of its single-byte token
  int32_t eos_id_ = -1;
  struct Tables;
  std::unique_ptr<Tables> tables_;  // merge ranks, spelling -> id
  std::unique_ptr<WordCache> cache_;
};

}  // namespace lathe

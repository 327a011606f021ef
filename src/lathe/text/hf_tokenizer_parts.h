// The parsed pieces of an HfTokenizer pipeline, shared by the loader (hf_tokenizer_json.cc) and
// the encoder/decoder (hf_tokenizer.cc). Internal to text/.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/text/hf_tokenizer.h"
#include "lathe/text/split_regex.h"

namespace lathe {

struct HfAddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

struct HfNormalizerStep {
  enum class Kind { nfc, prepend, replace } kind;
  std::string text;         // prepend: what to prepend; replace: the literal to replace
  std::string replacement;  // replace
};

enum class HfSplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct HfPreTokenizerStep {
  enum class Kind { split, byte_level, metaspace } kind;
  // split: a regex, or a literal when regex is null
  std::shared_ptr<SplitRegex> regex;
  std::string literal;
  HfSplitBehavior behavior = HfSplitBehavior::isolated;
  bool invert = false;
  // byte_level
  bool add_prefix_space = false, use_regex = true;
  // metaspace
  std::string replacement;
  enum class PrependScheme { always, first, never } prepend_scheme = PrependScheme::always;
  bool split = true;
};

struct HfDecoderStep {
  enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace } kind;
  std::string pattern, content;  // replace: pattern -> content; strip: content (one character)
  int start = 0, stop = 0;       // strip
  bool prepend = true;           // metaspace: prepend_scheme != never
};

struct HfBpeModel {
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
  };
  struct Merge {
    int32_t rank, result;
  };
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab;
  std::unordered_map<uint64_t, Merge> merges;  // (left id << 32 | right id) -> rank, result
  int32_t unk_id = -1;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
};

// Word -> ids, so that repeated words skip BPE; stops growing past a limit (only speed changes).
struct HfWordCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, HfBpeModel::StringHash, std::equal_to<>> words;
};

struct HfTokenizer::Parts {
  std::vector<HfAddedToken> added_tokens;
  std::vector<HfNormalizerStep> normalizer;
  std::vector<HfPreTokenizerStep> pre_tokenizer;
  HfBpeModel model;
  bool has_decoder = false;
  std::vector<HfDecoderStep> decoder;
  std::vector<int32_t> template_before, template_after;  // TemplateProcessing "single" around $A
  std::vector<std::string> id_to_token;                  // "" where no token has the id
  int64_t id_limit = 0;                                  // ids must be below it (text/hf_tokenizer_json.cc)
  std::vector<int8_t> id_kind;                           // 0 none, 1 model token, 2 added, 3 added special
  std::unique_ptr<HfWordCache> cache = std::make_unique<HfWordCache>();
  // added_index[normalized][first byte]: the added tokens to try there, longest first.
  std::array<std::vector<const HfAddedToken*>, 256> added_index[2];
};

// Builds Parts::added_index once added_tokens is final.
void index_hf_added_tokens(HfTokenizer::Parts& parts);

// Applies the normalizer steps to text (used for normalized added tokens too).
std::string apply_hf_normalizer(const std::vector<HfNormalizerStep>& steps, std::string text);

}  // namespace lathe

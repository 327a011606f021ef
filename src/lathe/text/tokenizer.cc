#include "lathe/text/tokenizer.h"

#include "lathe/io/durable_file.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/hf_tokenizer.h"
#include "lathe/text/pretokenize.h"

namespace lathe {
namespace {

// The split pattern BpeTokenizer wrote before it described its split exactly (files from then
// still say it; BpeTokenizer encodes them with the split they were trained with).
constexpr const char* kFirstPretokenizePattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)| ?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

bool is_null_or(const Json& value, bool (*check)(const Json&)) { return value.is_null() || check(value); }
bool is_false(const Json& value) { return value.kind() == Json::Kind::boolean && !value.as_bool(); }
bool is_true(const Json& value) { return value.kind() == Json::Kind::boolean && value.as_bool(); }
bool is_empty_string(const Json& value) { return value.is_string() && value.as_string().empty(); }
bool has_type(const Json& value, const char* type) {
  return value.is_object() && value.get("type").is_string() && value.get("type").as_string() == type;
}

bool is_lathe_pre_tokenizer(const Json& pre_tokenizer) {
  if (!has_type(pre_tokenizer, "Sequence")) return false;
  const Json& steps = pre_tokenizer.get("pretokenizers");
  if (!steps.is_array() || steps.size() != 2) return false;
  const Json& split = steps.items()[0];
  const Json& byte_level = steps.items()[1];
  if (!has_type(split, "Split") || !has_type(byte_level, "ByteLevel")) return false;
  const Json& pattern = split.get("pattern");
  if (!pattern.is_object() || !pattern.get("Regex").is_string()) return false;
  const std::string& regex = pattern.get("Regex").as_string();
  return (regex == kPretokenizePattern || regex == kFirstPretokenizePattern) && split.get("behavior").is_string() &&
         split.get("behavior").as_string() == "Isolated" && is_null_or(split.get("invert"), is_false) &&
         is_null_or(byte_level.get("add_prefix_space"), is_false) && is_false(byte_level.get("use_regex"));
}

bool is_lathe_model(const Json& model) {
  if (!has_type(model, "BPE")) return false;
  for (const char* key : {"byte_fallback", "ignore_merges"})
    if (!is_null_or(model.get(key), is_false)) return false;
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!is_null_or(model.get(key), is_empty_string)) return false;
  return model.get("unk_token").is_null() && model.get("dropout").is_null();
}

// Only special tokens, matched verbatim (what BpeTokenizer's encode_append recognises).
bool is_lathe_added_tokens(const Json& added_tokens) {
  if (added_tokens.is_null()) return true;
  if (!added_tokens.is_array()) return false;
  for (const Json& token : added_tokens.items()) {
    if (!token.is_object() || !is_true(token.get("special"))) return false;
    for (const char* key : {"normalized", "lstrip", "rstrip", "single_word"})
      if (!is_null_or(token.get(key), is_false)) return false;
  }
  return true;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  encode_append(text, ids, options);
  return ids;
}

std::vector<int32_t> Tokenizer::special_token_ids() const {
  std::vector<int32_t> ids;
  for (int64_t id = 0; id < vocab_size(); ++id)
    if (is_special(static_cast<int32_t>(id))) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

bool is_lathe_tokenizer_json(const Json& json) {
  return json.is_object() && json.get("normalizer").is_null() && json.get("post_processor").is_null() &&
         is_lathe_model(json.get("model")) && is_lathe_pre_tokenizer(json.get("pre_tokenizer")) &&
         has_type(json.get("decoder"), "ByteLevel") && is_lathe_added_tokens(json.get("added_tokens"));
}

std::unique_ptr<Tokenizer> tokenizer_from_json(const Json& json, const std::string& source) {
  if (is_lathe_tokenizer_json(json)) return std::make_unique<BpeTokenizer>(BpeTokenizer::from_json(json, source));
  return std::make_unique<HfTokenizer>(HfTokenizer::from_json(json, source));
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  return tokenizer_from_json(read_json_file(path), path);
}

}  // namespace lathe

// Loading tokenizer.json into HfTokenizer::Parts: every component is checked and an unsupported or
// malformed one is named in a one-line lathe::Error.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "lathe/core/error.h"
#include "lathe/core/quote_input.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/utf8.h"
#include "lathe/text/hf_tokenizer_parts.h"
#include "lathe/text/unicode_text.h"

namespace lathe {
namespace {

// The split GPT-2's ByteLevel pre-tokenizer applies when use_regex is true.
const char* const kGpt2SplitPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw_error(source_, ": ", where, " ", what);
  }
  const Json& object(const Json& value, const std::string& where) const {
    if (!value.is_object()) fail(where, "must be an object");
    return value;
  }
  std::string type_of(const Json& value, const std::string& where) const {
    object(value, where);
    const Json& type = value.get("type");
    if (!type.is_string()) fail(where, "has no string 'type'");
    return type.as_string();
  }
  bool boolean(const Json& parent, const std::string& key, bool fallback, const std::string& where) const {
    const Json& value = parent.get(key);
    if (value.is_null()) return fallback;
    if (value.kind() != Json::Kind::boolean) fail(where + "." + key, "must be true or false");
    return value.as_bool();
  }
  std::string string(const Json& parent, const std::string& key, const std::string& where) const {
    const Json& value = parent.get(key);
    if (!value.is_string()) fail(where + "." + key, "must be a string");
    return value.as_string();
  }
  int64_t integer(const Json& value, const std::string& where) const {
    if (!value.is_number() || std::floor(value.as_number()) != value.as_number() || value.as_number() < 0 ||
        value.as_number() > 2147483647.0)
      fail(where, "must be a non-negative integer, found " + value.dump(0));
    return static_cast<int64_t>(value.as_number());
  }
  const std::vector<Json>& array(const Json& parent, const std::string& key, const std::string& where) const {
    const Json& value = parent.get(key);
    if (!value.is_array()) fail(where + "." + key, "must be an array");
    return value.items();
  }
  // A Split / Replace pattern: {"String": "..."} or {"Regex": "..."}.
  void pattern(const Json& parent, const std::string& where, std::string& literal,
               std::shared_ptr<SplitRegex>& regex) const {
    const Json& value = parent.get("pattern");
    if (value.is_object() && value.get("String").is_string()) {
      literal = value.get("String").as_string();
      if (literal.empty()) fail(where + ".pattern", "must not be empty");
      return;
    }
    if (value.is_object() && value.get("Regex").is_string()) {
      try {
        regex = std::make_shared<SplitRegex>(value.get("Regex").as_string());
      } catch (const Error& error) {
        fail(where + ".pattern", std::string("is not supported: ") + error.what());
      }
      return;
    }
    fail(where + ".pattern", "must be {\"String\": ...} or {\"Regex\": ...}");
  }

  const std::string& source() const { return source_; }

 private:
  const std::string& source_;
};

void read_normalizer(const Reader& reader, const Json& value, const std::string& where,
                     std::vector<HfNormalizerStep>& steps) {
  if (value.is_null()) return;
  std::string type = reader.type_of(value, where);
  if (type == "Sequence") {
    const auto& items = reader.array(value, "normalizers", where);
    for (size_t i = 0; i < items.size(); ++i)
      read_normalizer(reader, items[i], where + ".normalizers[" + std::to_string(i) + "]", steps);
  } else if (type == "NFC") {
    steps.push_back({HfNormalizerStep::Kind::nfc, "", ""});
  } else if (type == "Prepend") {
    steps.push_back({HfNormalizerStep::Kind::prepend, reader.string(value, "prepend", where), ""});
  } else if (type == "Replace") {
    std::string literal;
    std::shared_ptr<SplitRegex> regex;
    reader.pattern(value, where, literal, regex);
    if (regex) reader.fail(where + ".pattern", "Regex is not supported in a Replace normalizer (only String)");
    steps.push_back({HfNormalizerStep::Kind::replace, literal, reader.string(value, "content", where)});
  } else {
    reader.fail(where, "has unsupported normalizer type \"" + type + "\" (supported: Sequence, NFC, Prepend, Replace)");
  }
}

HfSplitBehavior read_behavior(const Reader& reader, const Json& value, const std::string& where) {
  const Json& behavior = value.get("behavior");
  std::string name = behavior.is_string() ? behavior.as_string() : "";
  if (name == "Removed") return HfSplitBehavior::removed;
  if (name == "Isolated") return HfSplitBehavior::isolated;
  if (name == "MergedWithPrevious") return HfSplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return HfSplitBehavior::merged_with_next;
  if (name == "Contiguous") return HfSplitBehavior::contiguous;
  reader.fail(where + ".behavior",
              "must be Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous, found " + behavior.dump(0));
}

HfPreTokenizerStep::PrependScheme read_prepend_scheme(const Reader& reader, const Json& value,
                                                      const std::string& where) {
  const Json& scheme = value.get("prepend_scheme");
  if (scheme.is_null()) {  // files before tokenizers 0.14: add_prefix_space
    return reader.boolean(value, "add_prefix_space", true, where) ? HfPreTokenizerStep::PrependScheme::always
                                                                  : HfPreTokenizerStep::PrependScheme::never;
  }
  std::string name = scheme.is_string() ? scheme.as_string() : "";
  if (name == "always") return HfPreTokenizerStep::PrependScheme::always;
  if (name == "first") return HfPreTokenizerStep::PrependScheme::first;
  if (name == "never") return HfPreTokenizerStep::PrependScheme::never;
  reader.fail(where + ".prepend_scheme", "must be \"always\", \"first\" or \"never\", found " + scheme.dump(0));
}

void read_pre_tokenizer(const Reader& reader, const Json& value, const std::string& where,
                        std::vector<HfPreTokenizerStep>& steps) {
  if (value.is_null()) return;
  std::string type = reader.type_of(value, where);
  HfPreTokenizerStep step;
  if (type == "Sequence") {
    const auto& items = reader.array(value, "pretokenizers", where);
    for (size_t i = 0; i < items.size(); ++i)
      read_pre_tokenizer(reader, items[i], where + ".pretokenizers[" + std::to_string(i) + "]", steps);
    return;
  } else if (type == "Split") {
    step.kind = HfPreTokenizerStep::Kind::split;
    reader.pattern(value, where, step.literal, step.regex);
    step.behavior = read_behavior(reader, value, where);
    step.invert = reader.boolean(value, "invert", false, where);
  } else if (type == "ByteLevel") {
    step.kind = HfPreTokenizerStep::Kind::byte_level;
    step.add_prefix_space = reader.boolean(value, "add_prefix_space", true, where);
    step.use_regex = reader.boolean(value, "use_regex", true, where);
    if (step.use_regex) step.regex = std::make_shared<SplitRegex>(kGpt2SplitPattern);
  } else if (type == "Digits") {
    // Rust's char::is_numeric (Nd, Nl, No) runs, each digit alone or contiguous.
    step.kind = HfPreTokenizerStep::Kind::split;
    step.regex = std::make_shared<SplitRegex>("\\p{N}");
    step.behavior = reader.boolean(value, "individual_digits", false, where) ? HfSplitBehavior::isolated
                                                                             : HfSplitBehavior::contiguous;
  } else if (type == "Metaspace") {
    step.kind = HfPreTokenizerStep::Kind::metaspace;
    step.replacement = reader.string(value, "replacement", where);
    std::vector<uint32_t> code_points;
    std::vector<size_t> offsets;
    decode_utf8(step.replacement, code_points, offsets, "Metaspace replacement");
    if (code_points.size() != 1) reader.fail(where + ".replacement", "must be one character");
    step.prepend_scheme = read_prepend_scheme(reader, value, where);
    step.split = reader.boolean(value, "split", true, where);
  } else {
    reader.fail(where, "has unsupported pre-tokenizer type \"" + type +
                           "\" (supported: Sequence, Split, ByteLevel, Metaspace, Digits)");
  }
  steps.push_back(std::move(step));
}

void read_decoder(const Reader& reader, const Json& value, const std::string& where,
                  std::vector<HfDecoderStep>& steps) {
  std::string type = reader.type_of(value, where);
  HfDecoderStep step;
  if (type == "Sequence") {
    const auto& items = reader.array(value, "decoders", where);
    for (size_t i = 0; i < items.size(); ++i)
      read_decoder(reader, items[i], where + ".decoders[" + std::to_string(i) + "]", steps);
    return;
  } else if (type == "ByteLevel") {
    step.kind = HfDecoderStep::Kind::byte_level;
  } else if (type == "Replace") {
    step.kind = HfDecoderStep::Kind::replace;
    std::shared_ptr<SplitRegex> regex;
    reader.pattern(value, where, step.pattern, regex);
    if (regex) reader.fail(where + ".pattern", "Regex is not supported in a Replace decoder (only String)");
    step.content = reader.string(value, "content", where);
  } else if (type == "ByteFallback") {
    step.kind = HfDecoderStep::Kind::byte_fallback;
  } else if (type == "Fuse") {
    step.kind = HfDecoderStep::Kind::fuse;
  } else if (type == "Strip") {
    step.kind = HfDecoderStep::Kind::strip;
    step.content = reader.string(value, "content", where);
    step.start = static_cast<int>(reader.integer(value.get("start"), where + ".start"));
    step.stop = static_cast<int>(reader.integer(value.get("stop"), where + ".stop"));
  } else if (type == "Metaspace") {
    step.kind = HfDecoderStep::Kind::metaspace;
    step.content = reader.string(value, "replacement", where);
    step.prepend = read_prepend_scheme(reader, value, where) != HfPreTokenizerStep::PrependScheme::never;
  } else {
    reader.fail(where, "has unsupported decoder type \"" + type +
                           "\" (supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)");
  }
  steps.push_back(std::move(step));
}

void read_post_processor(const Reader& reader, const Json& value, const std::string& where, HfTokenizer::Parts& parts) {
  if (value.is_null()) return;
  std::string type = reader.type_of(value, where);
  if (type == "Sequence") {
    const auto& items = reader.array(value, "processors", where);
    for (size_t i = 0; i < items.size(); ++i)
      read_post_processor(reader, items[i], where + ".processors[" + std::to_string(i) + "]", parts);
  } else if (type == "ByteLevel") {
    // Only trims offsets; ids are unchanged.
  } else if (type == "TemplateProcessing") {
    const Json& special_tokens = reader.object(value.get("special_tokens"), where + ".special_tokens");
    const auto& single = reader.array(value, "single", where);
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      std::string item_where = where + ".single[" + std::to_string(i) + "]";
      const Json& item = reader.object(single[i], item_where);
      if (item.get("Sequence").is_object()) {
        if (seen_sequence) reader.fail(item_where, "repeats the sequence");
        seen_sequence = true;
        continue;
      }
      const Json& special = item.get("SpecialToken");
      if (!special.is_object() || !special.get("id").is_string())
        reader.fail(item_where, "must be {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
      const std::string& name = special.get("id").as_string();
      const Json& entry = special_tokens.get(name);
      if (!entry.is_object())
        reader.fail(item_where, "names \"" + quote_input(name) + "\", which special_tokens does not define");
      for (const Json& id : reader.array(entry, "ids", where + ".special_tokens." + name))
        (seen_sequence ? parts.template_after : parts.template_before)
            .push_back(static_cast<int32_t>(reader.integer(id, where + ".special_tokens." + name + ".ids")));
    }
  } else {
    reader.fail(where, "has unsupported post-processor type \"" + type +
                           "\" (supported: Sequence, ByteLevel, TemplateProcessing)");
  }
}

// "a b" (one space) or ["a", "b"].
std::pair<std::string, std::string> read_merge(const Reader& reader, const Json& entry, const std::string& where) {
  if (entry.is_string()) {
    const std::string& text = entry.as_string();
    size_t space = text.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == text.size() ||
        text.find(' ', space + 1) != std::string::npos)
      reader.fail(where, "must be \"left right\" (two tokens, one space), found \"" + quote_input(text) + "\"");
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (!entry.is_array() || entry.size() != 2 || !entry.items()[0].is_string() || !entry.items()[1].is_string())
    reader.fail(where, "must be a string \"left right\" or an array of two strings");
  return {entry.items()[0].as_string(), entry.items()[1].as_string()};
}

// Ids index a table: one far beyond the entries the file lists would allocate gigabytes for
// nothing. Published vocabularies are dense or nearly so; allow gaps up to this many ids.
constexpr int64_t kTokenIdGapAllowance = 65536;

// The largest id + 1 a tokenizer.json may use: its vocabulary and added tokens, plus the gaps.
int64_t token_id_limit(const Json& json) {
  const Json& vocab = json.get("model").get("vocab");  // null when absent: get() on a non-object
  const Json& added = json.get("added_tokens");
  return static_cast<int64_t>((vocab.is_object() ? vocab.size() : 0) + (added.is_array() ? added.size() : 0)) +
         kTokenIdGapAllowance;
}

void place_token(const Reader& reader, HfTokenizer::Parts& parts, int64_t id, const std::string& token, int8_t kind,
                 const std::string& where) {
  if (id >= parts.id_limit)
    reader.fail(where, "has id " + std::to_string(id) +
                           ", beyond what a vocabulary of its entries can use (ids below " +
                           std::to_string(parts.id_limit) + ")");
  size_t index = static_cast<size_t>(id);
  if (parts.id_to_token.size() <= index) {
    parts.id_to_token.resize(index + 1);
    parts.id_to_token.shrink_to_fit();
    parts.id_kind.resize(index + 1, 0);
  }
  int8_t existing = parts.id_kind[index];
  if (existing != 0) {
    // An added token may also be a vocabulary entry with the same id and text; nothing else shares.
    if (parts.id_to_token[index] != token || (existing >= 2) == (kind >= 2))
      reader.fail(where, "gives id " + std::to_string(id) + " to \"" + quote_input(token) + "\", already used by \"" +
                             parts.id_to_token[index] + "\"");
    kind = std::max(kind, existing);
  }
  parts.id_to_token[index] = token;
  parts.id_kind[index] = kind;
}

void read_model(const Reader& reader, const Json& json, HfTokenizer::Parts& parts) {
  const Json& model = json.get("model");
  std::string type = reader.type_of(model, "model");
  if (type != "BPE") reader.fail("model.type", "\"" + type + "\" is not supported (only \"BPE\")");
  const Json& dropout = model.get("dropout");
  if (!dropout.is_null() && !(dropout.is_number() && dropout.as_number() == 0.0))
    reader.fail("model.dropout", "must be null (BPE dropout is not supported)");
  HfBpeModel& bpe = parts.model;
  bpe.fuse_unk = reader.boolean(model, "fuse_unk", false, "model");
  bpe.byte_fallback = reader.boolean(model, "byte_fallback", false, "model");
  bpe.ignore_merges = reader.boolean(model, "ignore_merges", false, "model");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json& value = model.get(key);
    if (value.is_null()) continue;
    if (!value.is_string()) reader.fail(std::string("model.") + key, "must be null or a string");
    (std::string(key) == "end_of_word_suffix" ? bpe.end_of_word_suffix : bpe.continuing_subword_prefix) =
        value.as_string();
  }
  const Json& vocab = reader.object(model.get("vocab"), "model.vocab");
  bpe.vocab.reserve(vocab.size());
  for (const auto& [token, id_value] : vocab.members()) {
    std::string where = "model.vocab[\"" + quote_input(token) + "\"]";
    if (token.empty()) reader.fail("model.vocab", "has an empty token");
    int64_t id = reader.integer(id_value, where);
    place_token(reader, parts, id, token, 1, where);
    bpe.vocab.emplace(token, static_cast<int32_t>(id));
  }
  const Json& unk = model.get("unk_token");
  if (!unk.is_null()) {
    if (!unk.is_string()) reader.fail("model.unk_token", "must be null or a string");
    auto found = bpe.vocab.find(unk.as_string());
    if (found == bpe.vocab.end())
      reader.fail("model.unk_token", "\"" + unk.as_string() + "\" is not a token of model.vocab");
    bpe.unk_id = found->second;
  }
  const auto& merges = reader.array(model, "merges", "model");
  bpe.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    std::string where = "model.merges[" + std::to_string(rank) + "]";
    auto [left, right] = read_merge(reader, merges[rank], where);
    auto left_id = bpe.vocab.find(left), right_id = bpe.vocab.find(right);
    if (left_id == bpe.vocab.end())
      reader.fail(where, "uses \"" + quote_input(left) + "\", which is not a token of model.vocab");
    if (right_id == bpe.vocab.end())
      reader.fail(where, "uses \"" + quote_input(right) + "\", which is not a token of model.vocab");
    std::string joined = left + right;
    if (!bpe.continuing_subword_prefix.empty() &&
        right.compare(0, bpe.continuing_subword_prefix.size(), bpe.continuing_subword_prefix) == 0)
      joined = left + right.substr(bpe.continuing_subword_prefix.size());
    auto result = bpe.vocab.find(joined);
    if (result == bpe.vocab.end()) reader.fail(where, "makes \"" + joined + "\", which is not in model.vocab");
    uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(left_id->second)) << 32) | static_cast<uint32_t>(right_id->second);
    // A repeated merge keeps its last rank, as the map tokenizers builds from the list does.
    bpe.merges[key] = HfBpeModel::Merge{static_cast<int32_t>(rank), result->second};
  }
}

void read_added_tokens(const Reader& reader, const Json& json, HfTokenizer::Parts& parts) {
  const Json& added = json.get("added_tokens");
  if (added.is_null()) return;
  if (!added.is_array()) reader.fail("added_tokens", "must be an array");
  for (size_t i = 0; i < added.size(); ++i) {
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    const Json& entry = reader.object(added.items()[i], where);
    HfAddedToken token;
    token.content = reader.string(entry, "content", where);
    if (token.content.empty()) reader.fail(where + ".content", "must not be empty");
    token.id = static_cast<int32_t>(reader.integer(entry.get("id"), where + ".id"));
    token.special = reader.boolean(entry, "special", false, where);
    token.lstrip = reader.boolean(entry, "lstrip", false, where);
    token.rstrip = reader.boolean(entry, "rstrip", false, where);
    token.single_word = reader.boolean(entry, "single_word", false, where);
    token.normalized = reader.boolean(entry, "normalized", !token.special, where);
    place_token(reader, parts, token.id, token.content, token.special ? 3 : 2, where);
    parts.added_tokens.push_back(std::move(token));
  }
}

}  // namespace

HfTokenizer HfTokenizer::from_json(const Json& json, const std::string& source) {
  Reader reader(source);
  if (!json.is_object()) throw_error(source, ": a tokenizer.json must be a JSON object");
  auto parts = std::make_unique<Parts>();
  parts->id_limit = token_id_limit(json);
  read_added_tokens(reader, json, *parts);
  read_model(reader, json, *parts);
  read_normalizer(reader, json.get("normalizer"), "normalizer", parts->normalizer);
  read_pre_tokenizer(reader, json.get("pre_tokenizer"), "pre_tokenizer", parts->pre_tokenizer);
  if (!json.get("decoder").is_null()) {
    parts->has_decoder = true;
    read_decoder(reader, json.get("decoder"), "decoder", parts->decoder);
  }
  read_post_processor(reader, json.get("post_processor"), "post_processor", *parts);
  // tokenizers matches and names a normalized added token by its normalized text (with the Llama 2
  // normalizer "hello world" becomes "▁hello▁world").
  for (HfAddedToken& token : parts->added_tokens) {
    if (!token.normalized || parts->normalizer.empty()) continue;
    token.content = apply_hf_normalizer(parts->normalizer, token.content);
    if (token.content.empty()) reader.fail("added_tokens", "has a token that normalizes to nothing");
    parts->id_to_token[static_cast<size_t>(token.id)] = token.content;
  }
  index_hf_added_tokens(*parts);
  for (int32_t id : parts->template_before)
    if (id >= static_cast<int64_t>(parts->id_kind.size()) || parts->id_kind[static_cast<size_t>(id)] == 0)
      reader.fail("post_processor", "adds id " + std::to_string(id) + ", which is no token");
  for (int32_t id : parts->template_after)
    if (id >= static_cast<int64_t>(parts->id_kind.size()) || parts->id_kind[static_cast<size_t>(id)] == 0)
      reader.fail("post_processor", "adds id " + std::to_string(id) + ", which is no token");
  return HfTokenizer(std::move(parts));
}

HfTokenizer HfTokenizer::load(const std::string& path) { return from_json(read_json_file(path), path); }

}  // namespace lathe

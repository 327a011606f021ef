#include "lathe/text/bpe_tokenizer.h"

#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "lathe/core/error.h"
#include "lathe/core/quote_input.h"
#include "lathe/io/durable_file.h"
#include "lathe/text/pretokenize.h"

namespace lathe {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
};
template <class Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Past this many distinct words the cache stops growing; encoding stays correct, only slower.
constexpr size_t kMaxCachedWords = 1 << 20;

}  // namespace

struct BpeTokenizer::Tables {
  struct Rank {
    int32_t rank, result;
  };
  std::unordered_map<uint64_t, Rank> merge_ranks;  // pair_key(left, right) -> rank, result
  StringMap<int32_t> spelling_to_id;               // tokenizer.json spelling -> id
  std::vector<std::pair<std::string, int32_t>> special_tokens;
};

// Pre-token -> its ids, stored in one flat pool to keep millions of short entries cheap.
struct BpeTokenizer::WordCache {
  struct Span {
    uint32_t offset, length;
  };
  std::mutex mutex;
  StringMap<Span> spans;
  std::vector<int32_t> pool;
};

BpeTokenizer::BpeTokenizer() : tables_(std::make_unique<Tables>()), cache_(std::make_unique<WordCache>()) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

void BpeTokenizer::build_tables(const std::string& source) {
  Tables& tables = *tables_;
  tables.merge_ranks.clear();
  tables.spelling_to_id.clear();
  tables.special_tokens.clear();
  byte_ids_.fill(-1);
  eos_id_ = -1;
  LATHE_ASSERT(special_.size() == token_bytes_.size());
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    int32_t token = static_cast<int32_t>(id);
    const std::string& bytes = token_bytes_[id];
    std::string spelling = special_[id] ? bytes : bytes_to_byte_level(bytes);
    if (!tables.spelling_to_id.emplace(spelling, token).second)
      throw_error(source, ": token '", spelling, "' appears twice (ids ", tables.spelling_to_id[spelling], " and ", id,
                  ")");
    if (special_[id]) {
      tables.special_tokens.emplace_back(bytes, token);
      if (bytes == kEndOfText) eos_id_ = token;
    } else if (bytes.size() == 1) {
      byte_ids_[static_cast<unsigned char>(bytes[0])] = token;
    }
  }
  for (int b = 0; b < 256; ++b)
    LATHE_CHECK(byte_ids_[b] >= 0, source, ": the vocabulary lacks the single-byte token for byte ", b, " ('",
                bytes_to_byte_level(std::string(1, static_cast<char>(b))), "'); byte-level BPE needs all 256");
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const Merge& merge = merges_[rank];
    bool inserted =
        tables.merge_ranks
            .emplace(pair_key(merge.left, merge.right), Tables::Rank{static_cast<int32_t>(rank), merge.result})
            .second;
    LATHE_CHECK(inserted, source, ": merge ", rank, " ('", id_to_token(merge.left), " ", id_to_token(merge.right),
                "') repeats an earlier merge");
  }
}

int32_t BpeTokenizer::eos_id() const {
  LATHE_CHECK(eos_id_ >= 0, "the tokenizer has no ", kEndOfText, " token (needed as end-of-document marker)");
  return eos_id_;
}

int32_t BpeTokenizer::token_to_id(std::string_view token) const {
  auto found = tables_->spelling_to_id.find(token);
  return found == tables_->spelling_to_id.end() ? -1 : found->second;
}

std::string BpeTokenizer::id_to_token(int32_t id) const {
  const std::string& bytes = token_bytes(id);
  return special_[static_cast<size_t>(id)] ? bytes : bytes_to_byte_level(bytes);
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  LATHE_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " is out of range (vocabulary has ", vocab_size(),
              " tokens)");
  return token_bytes_[static_cast<size_t>(id)];
}

// Applies merges in rank order: repeatedly merge every occurrence (left to right) of the adjacent
// pair with the lowest rank, as training did.
void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  for (unsigned char b : word) symbols.push_back(byte_ids_[b]);
  const auto& ranks = tables_->merge_ranks;
  while (symbols.size() > 1) {
    int32_t best_rank = INT32_MAX, best_result = -1, best_left = -1, best_right = -1;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto found = ranks.find(pair_key(symbols[i], symbols[i + 1]));
      if (found != ranks.end() && found->second.rank < best_rank) {
        best_rank = found->second.rank;
        best_result = found->second.result;
        best_left = symbols[i];
        best_right = symbols[i + 1];
      }
    }
    if (best_result < 0) break;
    size_t out = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == best_left && symbols[i + 1] == best_right) {
        symbols[out++] = best_result;
        ++i;
      } else {
        symbols[out++] = symbols[i];
      }
    }
    symbols.resize(out);
  }
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const {
  WordCache& cache = *cache_;
  std::vector<int32_t> word_ids;
  for_each_pretoken(text, [&](std::string_view word) {
    {
      std::lock_guard<std::mutex> lock(cache.mutex);
      auto found = cache.spans.find(word);
      if (found != cache.spans.end()) {
        const int32_t* begin = cache.pool.data() + found->second.offset;
        ids.insert(ids.end(), begin, begin + found->second.length);
        return;
      }
    }
    word_ids.clear();
    encode_word(word, word_ids);
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.spans.size() < kMaxCachedWords && cache.pool.size() + word_ids.size() < UINT32_MAX) {
      WordCache::Span span{static_cast<uint32_t>(cache.pool.size()), static_cast<uint32_t>(word_ids.size())};
      if (cache.spans.emplace(std::string(word), span).second)
        cache.pool.insert(cache.pool.end(), word_ids.begin(), word_ids.end());
    }
  });
}

void BpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids, bool allow_special) const {
  const auto& specials = tables_->special_tokens;
  if (!allow_special || specials.empty()) {
    encode_ordinary(text, ids);
    return;
  }
  while (!text.empty()) {
    // The earliest special token; at equal positions the longest wins.
    size_t best_position = std::string_view::npos, best_length = 0;
    int32_t best_id = -1;
    for (const auto& [content, id] : specials) {
      size_t position = text.find(content);
      if (position == std::string_view::npos) continue;
      if (position < best_position || (position == best_position && content.size() > best_length)) {
        best_position = position;
        best_length = content.size();
        best_id = id;
      }
    }
    if (best_id < 0) {
      encode_ordinary(text, ids);
      return;
    }
    encode_ordinary(text.substr(0, best_position), ids);
    ids.push_back(best_id);
    text.remove_prefix(best_position + best_length);
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  encode_append(text, ids, allow_special);
  return ids;
}

void BpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids, const EncodeOptions& options) const {
  encode_append(text, ids, /*allow_special=*/!options.split_special_tokens);
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string text;
  for (int32_t id : ids) {
    const std::string& bytes = token_bytes(id);
    if (!(skip_special_tokens && special_[static_cast<size_t>(id)])) text += bytes;
  }
  return text;
}

int32_t BpeTokenizer::added_token_id(std::string_view spelling) const {
  const int32_t id = token_to_id(spelling);
  return id >= 0 && special_[static_cast<size_t>(id)] ? id : -1;
}

std::optional<int32_t> BpeTokenizer::eos_token_id() const {
  return eos_id_ >= 0 ? std::optional<int32_t>(eos_id_) : std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json

Json BpeTokenizer::to_json() const {
  Json added_tokens = Json::array();
  for (const auto& [content, id] : tables_->special_tokens) {
    Json token = Json::object();
    token.set("id", id);
    token.set("content", content);
    token.set("single_word", false);
    token.set("lstrip", false);
    token.set("rstrip", false);
    token.set("normalized", false);
    token.set("special", true);
    added_tokens.push(std::move(token));
  }
  // Split by our pattern, then map bytes to the byte-level alphabet (the Llama-3 arrangement).
  Json split = Json::object();
  split.set("type", "Split");
  split.set("pattern", Json::object()).set("Regex", kPretokenizePattern);
  split.set("behavior", "Isolated");
  split.set("invert", false);
  Json byte_level = Json::object();
  byte_level.set("type", "ByteLevel");
  byte_level.set("add_prefix_space", false);
  byte_level.set("trim_offsets", true);
  byte_level.set("use_regex", false);
  Json pre_tokenizers = Json::array();
  pre_tokenizers.push(std::move(split));
  pre_tokenizers.push(std::move(byte_level));
  Json pre_tokenizer = Json::object();
  pre_tokenizer.set("type", "Sequence");
  pre_tokenizer.set("pretokenizers", std::move(pre_tokenizers));
  Json decoder = Json::object();
  decoder.set("type", "ByteLevel");
  decoder.set("add_prefix_space", true);
  decoder.set("trim_offsets", true);
  decoder.set("use_regex", true);

  Json vocab = Json::object();
  for (int32_t id = 0; id < vocab_size(); ++id) vocab.append_member(id_to_token(id), id);  // spellings are unique
  Json merges = Json::array();
  for (const Merge& merge : merges_) merges.push(id_to_token(merge.left) + " " + id_to_token(merge.right));
  Json model = Json::object();
  model.set("type", "BPE");
  model.set("dropout", nullptr);
  model.set("unk_token", nullptr);
  model.set("continuing_subword_prefix", nullptr);
  model.set("end_of_word_suffix", nullptr);
  model.set("fuse_unk", false);
  model.set("byte_fallback", false);
  model.set("ignore_merges", false);
  model.set("vocab", std::move(vocab));
  model.set("merges", std::move(merges));

  Json json = Json::object();
  json.set("version", "1.0");
  json.set("truncation", nullptr);
  json.set("padding", nullptr);
  json.set("added_tokens", std::move(added_tokens));
  json.set("normalizer", nullptr);
  json.set("pre_tokenizer", std::move(pre_tokenizer));
  json.set("post_processor", nullptr);
  json.set("decoder", std::move(decoder));
  json.set("model", std::move(model));
  return json;
}

void BpeTokenizer::save(const std::string& path) const {
  std::string text = to_json().dump(2) + "\n";
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    LATHE_CHECK(out, "cannot write tokenizer file ", temporary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    LATHE_CHECK(out, "cannot write tokenizer file ", temporary, " (disk full?)");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw_error("cannot rename ", temporary, " to ", path);
  }
}

namespace {

// The two halves of a merge entry: "a b" (tokenizers < 0.20) or ["a", "b"].
std::pair<std::string, std::string> split_merge(const Json& entry, const std::string& where) {
  if (entry.is_string()) {
    const std::string& text = entry.as_string();
    size_t space = text.find(' ');
    LATHE_CHECK(space != std::string::npos && space > 0 && space + 1 < text.size() &&
                    text.find(' ', space + 1) == std::string::npos,
                where, " must be \"left right\" (two tokens, one space), found \"", text, "\"");
    return {text.substr(0, space), text.substr(space + 1)};
  }
  LATHE_CHECK(entry.is_array() && entry.size() == 2 && entry.items()[0].is_string() && entry.items()[1].is_string(),
              where, " must be a string \"left right\" or an array of two strings");
  return {entry.items()[0].as_string(), entry.items()[1].as_string()};
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(const Json& json, const std::string& source) {
  LATHE_CHECK(json.is_object(), source, ": a tokenizer.json must be a JSON object");
  const Json& model = json.get("model");
  LATHE_CHECK(model.is_object(), source, ": missing object 'model'");
  const Json& type = model.get("type");
  LATHE_CHECK(type.is_string() && type.as_string() == "BPE", source, ": model.type must be \"BPE\", found ",
              type.is_null() ? std::string("nothing") : type.dump(0));
  for (const char* key : {"normalizer", "post_processor"}) {
    const Json& value = json.get(key);
    LATHE_CHECK(value.is_null() || (value.is_object() && value.get("type").is_string()), source, ": '", key,
                "' must be null or an object with a type");
  }
  const Json& byte_fallback = model.get("byte_fallback");
  LATHE_CHECK(byte_fallback.is_null() || (byte_fallback.kind() == Json::Kind::boolean && !byte_fallback.as_bool()),
              source, ": model.byte_fallback is not supported (only byte-level BPE)");

  const Json& vocab = model.get("vocab");
  LATHE_CHECK(vocab.is_object(), source, ": model.vocab must be an object mapping token -> id");
  const Json& added = json.get("added_tokens");
  LATHE_CHECK(added.is_null() || added.is_array(), source, ": added_tokens must be an array");
  // Ids must run from 0 without gaps, so no id can reach the number of entries.
  const int64_t max_tokens = static_cast<int64_t>(vocab.size() + added.size());
  std::vector<std::string> spellings;
  auto place = [&](const Json& id_value, const std::string& spelling, const std::string& where) -> int64_t {
    double number = id_value.is_number() ? id_value.as_number() : -1;
    LATHE_CHECK(number >= 0 && number < static_cast<double>(max_tokens) && std::floor(number) == number, source, ": ",
                where, " has id ", id_value.dump(0), "; ids must be integers from 0 to ", max_tokens - 1);
    size_t id = static_cast<size_t>(number);
    if (spellings.size() <= id) spellings.resize(id + 1);
    LATHE_CHECK(spellings[id].empty() || spellings[id] == spelling, source, ": id ", id, " is given to both '",
                quote_input(spellings[id]), "' and '", quote_input(spelling), "'");
    spellings[id] = spelling;
    return static_cast<int64_t>(id);
  };
  for (const auto& [spelling, id] : vocab.members()) {
    LATHE_CHECK(!spelling.empty(), source, ": model.vocab has an empty token");
    place(id, spelling, "model.vocab[\"" + quote_input(spelling) + "\"]");
  }
  std::vector<int64_t> added_ids;
  if (added.is_array()) {
    for (size_t i = 0; i < added.size(); ++i) {
      const Json& token = added.items()[i];
      std::string where = "added_tokens[" + std::to_string(i) + "]";
      LATHE_CHECK(token.is_object() && token.get("content").is_string(), source, ": ", where,
                  " must be an object with an 'id' and a string 'content'");
      const std::string& content = token.get("content").as_string();
      LATHE_CHECK(!content.empty(), source, ": ", where, " has empty content");
      added_ids.push_back(place(token.get("id"), content, where));
    }
  }
  BpeTokenizer tokenizer;
  tokenizer.token_bytes_.resize(spellings.size());
  tokenizer.special_.assign(spellings.size(), false);
  for (int64_t id : added_ids) tokenizer.special_[static_cast<size_t>(id)] = true;
  for (size_t id = 0; id < spellings.size(); ++id) {
    LATHE_CHECK(!spellings[id].empty(), source, ": no token has id ", id, " (ids must run from 0 to ",
                spellings.size() - 1, " without gaps)");
    if (tokenizer.special_[id]) {
      tokenizer.token_bytes_[id] = spellings[id];
    } else {
      LATHE_CHECK(byte_level_to_bytes(spellings[id], tokenizer.token_bytes_[id]), source, ": model.vocab token '",
                  spellings[id], "' (id ", id, ") is not in the byte-level alphabet");
    }
  }
  tokenizer.build_tables(source);

  const Json& merges = model.get("merges");
  LATHE_CHECK(merges.is_array(), source, ": model.merges must be an array");
  tokenizer.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    std::string where = "model.merges[" + std::to_string(rank) + "]";
    auto [left, right] = split_merge(merges.items()[rank], source + ": " + where);
    int32_t left_id = tokenizer.token_to_id(left), right_id = tokenizer.token_to_id(right);
    int32_t result_id = tokenizer.token_to_id(left + right);
    LATHE_CHECK(left_id >= 0 && !tokenizer.special_[static_cast<size_t>(left_id)], source, ": ", where, " uses '", left,
                "', which is not a token of model.vocab");
    LATHE_CHECK(right_id >= 0 && !tokenizer.special_[static_cast<size_t>(right_id)], source, ": ", where, " uses '",
                right, "', which is not a token of model.vocab");
    LATHE_CHECK(result_id >= 0, source, ": ", where, " makes '", left + right, "', which is not in model.vocab");
    tokenizer.merges_.push_back({left_id, right_id, result_id});
  }
  tokenizer.build_tables(source);
  return tokenizer;
}

BpeTokenizer BpeTokenizer::load(const std::string& path) { return from_json(read_json_file(path), path); }

}  // namespace lathe

#include "lathe/data/dataset.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "lathe/core/clock.h"
#include "lathe/core/error.h"
#include "lathe/core/json.h"
#include "lathe/data/corpus.h"
#include "lathe/data/shuffle.h"
#include "lathe/io/hash64.h"
#include "lathe/io/token_shard.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/tokenizer.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

// Bump when tokenization, the split or the manifest changes, so old caches are not reused.
// v2: the manifest records the tokenizer's hash and each shard's payload checksum.
constexpr const char* kDatasetFormat = "lathe-dataset-v2";

// 1234 -> "1234", 38123 -> "38k", 1923456 -> "1.9M".
std::string short_count(int64_t count) {
  char buffer[32];
  if (count < 10000)
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(count));
  else if (count < 1000000)
    std::snprintf(buffer, sizeof buffer, "%.0fk", count / 1e3);
  else if (count < 1000000000)
    std::snprintf(buffer, sizeof buffer, "%.1fM", count / 1e6);
  else
    std::snprintf(buffer, sizeof buffer, "%.2fB", count / 1e9);
  return buffer;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  LATHE_CHECK(in, what, ": cannot open ", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    LATHE_CHECK(out, "cannot write ", temporary);
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  LATHE_CHECK(!error, "cannot rename ", temporary, " to ", path, " (", error.message(), ")");
}

uint64_t hash_value(uint64_t value, uint64_t hash) { return hash_bytes(&value, sizeof value, hash); }

uint64_t dataset_key(const Corpus& corpus, int64_t vocab_size, double val_fraction, uint64_t seed,
                     const std::string& tokenizer_text) {
  uint64_t hash = hash_string(kDatasetFormat);
  hash = hash_value(corpus.documents.size(), hash);
  for (const std::string& document : corpus.documents) hash = hash_string(document, hash_value(document.size(), hash));
  hash = hash_value(static_cast<uint64_t>(vocab_size), hash);
  hash = hash_bytes(&val_fraction, sizeof val_fraction, hash);
  hash = hash_value(seed, hash);
  return hash_string(tokenizer_text, hash_value(tokenizer_text.size(), hash));
}

// Fills `result` from a finished cache folder; false when it is missing, incomplete or changed
// since it was made (then `problem` says what, for the note before the rebuild). The tokenizer's
// hash and the shards' payload checksums (verified by TokenShard::open against their own bytes)
// must equal those the manifest recorded: a valid but different file (an edited tokenizer.json, a
// shard of another dataset) is caught, not trained on.
bool load_cached(PreparedDataset& result, std::string& problem) {
  std::string manifest_path = result.folder + "/dataset.json";
  if (!fs::exists(manifest_path)) return false;
  try {
    Json manifest = Json::parse(read_file(manifest_path, "dataset cache"));
    TokenShard train = TokenShard::open(result.train_shard_path);
    TokenShard val = TokenShard::open(result.val_shard_path);
    const std::string tokenizer_hash = hex64(hash_string(read_file(result.tokenizer_path, "dataset cache")));
    for (const auto& [key, actual, file] : {std::tuple{"tokenizer_hash", tokenizer_hash, "tokenizer.json"},
                                            std::tuple{"train_checksum", hex64(train.checksum()), "train.bin"},
                                            std::tuple{"val_checksum", hex64(val.checksum()), "val.bin"}}) {
      const std::string recorded = manifest.get(key).as_string(key);
      if (recorded != actual) {
        problem = str_cat(file, " has hash ", actual, ", not the ", recorded, " recorded when the cache was made");
        return false;
      }
    }
    result.vocab_size = manifest.get("vocab_size").as_int("vocab_size");
    result.train_documents = manifest.get("train_documents").as_int("train_documents");
    result.val_documents = manifest.get("val_documents").as_int("val_documents");
    result.train_tokens = train.size();
    result.val_tokens = val.size();
    return train.vocab_size() == result.vocab_size && val.vocab_size() == result.vocab_size;
  } catch (const Error& error) {
    problem = error.what();
    return false;  // a damaged cache is rebuilt
  }
}

// Special-token text inside a document stays text: only the separators are end-of-text tokens.
std::vector<int32_t> encode_documents(const Tokenizer& tokenizer, const std::vector<std::string>& documents,
                                      const std::vector<int64_t>& order, size_t begin, size_t end) {
  std::vector<int32_t> tokens;
  const int32_t eos = *tokenizer.eos_token_id();
  for (size_t i = begin; i < end; ++i) {
    tokenizer.encode_append(documents[static_cast<size_t>(order[i])], tokens, {.split_special_tokens = true});
    tokens.push_back(eos);
  }
  return tokens;
}

}  // namespace

PreparedDataset prepare_dataset(const DataOptions& data, int64_t vocab_size, uint64_t seed,
                                const std::string& cache_dir, std::FILE* log) {
  const double start = now_seconds();
  LATHE_CHECK(!data.path.empty(), "data.path is empty: give a text file or a folder of text files");
  LATHE_CHECK(data.val_fraction > 0 && data.val_fraction < 1,
              "data.val_fraction must be between 0 and 1 (exclusive), got ", data.val_fraction);
  LATHE_CHECK(!cache_dir.empty(), "data.cache_dir is empty");
  LATHE_CHECK(!data.tokenizer.empty() || vocab_size >= 257, "model.vocab_size ", vocab_size,
              " is too small to train a tokenizer: byte-level BPE needs 256 byte tokens + <|endoftext|>");

  Corpus corpus = read_corpus(data.path, log ? stderr : nullptr, data.jsonl_field);
  const int64_t documents = static_cast<int64_t>(corpus.documents.size());
  LATHE_CHECK(documents >= 2, "data.path ", data.path, " has only ", documents,
              " document: at least 2 are needed (one for training, one for validation)");
  int64_t val_documents = std::llround(static_cast<double>(documents) * data.val_fraction);
  val_documents = std::clamp<int64_t>(val_documents, 1, documents - 1);

  std::string tokenizer_text = data.tokenizer.empty() ? "" : read_file(data.tokenizer, "data.tokenizer");
  Json tokenizer_json;
  if (!data.tokenizer.empty()) {
    try {
      tokenizer_json = Json::parse(tokenizer_text);
    } catch (const Error& parse_error) {
      throw parse_error.with_context("data.tokenizer " + data.tokenizer);
    }
  }
  uint64_t key = dataset_key(corpus, vocab_size, data.val_fraction, seed, tokenizer_text);
  // Files other than lathe's own were once encoded with lathe's split; their caches are not reused.
  if (!data.tokenizer.empty() && !is_lathe_tokenizer_json(tokenizer_json)) key = hash_string("hf-pipeline", key);
  PreparedDataset result;
  result.folder = (fs::path(cache_dir) / hex64(key)).string();
  result.tokenizer_path = result.folder + "/tokenizer.json";
  result.train_shard_path = result.folder + "/train.bin";
  result.val_shard_path = result.folder + "/val.bin";
  std::string cache_problem;
  if (load_cached(result, cache_problem)) {
    result.from_cache = true;
    if (log)
      std::fprintf(log, "data: reusing %s (%lld-token tokenizer; %s train / %s val tokens) in %.2f s\n",
                   result.folder.c_str(), static_cast<long long>(result.vocab_size),
                   short_count(result.train_tokens).c_str(), short_count(result.val_tokens).c_str(),
                   seconds_since(start));
    return result;
  }
  if (!cache_problem.empty())
    std::fprintf(stderr, "data: the cache %s changed since it was made (%s): rebuilding it\n", result.folder.c_str(),
                 cache_problem.c_str());
  std::error_code error;
  fs::create_directories(result.folder, error);
  LATHE_CHECK(!error, "data.cache_dir: cannot create ", result.folder, " (", error.message(), ")");

  // Held-out documents first in the shuffled order; each split keeps that order.
  std::vector<int64_t> order = shuffled_indices(documents, seed, kDocumentSplitStream);
  const size_t split = static_cast<size_t>(val_documents);
  std::string tokenizer_note;
  double step_start = now_seconds();
  std::unique_ptr<Tokenizer> tokenizer = [&]() -> std::unique_ptr<Tokenizer> {
    if (!data.tokenizer.empty()) {
      std::unique_ptr<Tokenizer> loaded = tokenizer_from_json(tokenizer_json, data.tokenizer);
      LATHE_CHECK(loaded->vocab_size() <= vocab_size, "data.tokenizer ", data.tokenizer, " has ", loaded->vocab_size(),
                  " tokens, more than model.vocab_size ", vocab_size);
      LATHE_CHECK(loaded->eos_token_id().has_value(), "data.tokenizer ", data.tokenizer, " has no end-of-text token (",
                  kEndOfText, ", <|end_of_text|>, </s> or <eos>; needed between ", "documents)");
      tokenizer_note =
          str_cat("loaded tokenizer ", data.tokenizer, " (", loaded->kind(), ", ", loaded->vocab_size(), " tokens)");
      write_file_atomically(result.tokenizer_path, tokenizer_text);  // as given, byte for byte
      return loaded;
    }
    std::vector<std::string> train_documents;
    train_documents.reserve(order.size() - split);
    for (size_t i = split; i < order.size(); ++i)
      train_documents.push_back(corpus.documents[static_cast<size_t>(order[i])]);
    auto trained = std::make_unique<BpeTokenizer>(BpeTokenizer::train(train_documents, vocab_size));
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", seconds_since(step_start));
    tokenizer_note = str_cat("trained tokenizer (", trained->vocab_size(), " tokens) in ", seconds, " s");
    trained->save(result.tokenizer_path);
    return trained;
  }();

  step_start = now_seconds();
  std::vector<int32_t> val_tokens = encode_documents(*tokenizer, corpus.documents, order, 0, split);
  std::vector<int32_t> train_tokens = encode_documents(*tokenizer, corpus.documents, order, split, order.size());
  double encode_seconds = seconds_since(step_start);
  write_token_shard(result.train_shard_path, train_tokens, tokenizer->vocab_size());
  write_token_shard(result.val_shard_path, val_tokens, tokenizer->vocab_size());
  // What load_cached checks a reused cache against.
  const std::string tokenizer_hash = hex64(hash_string(read_file(result.tokenizer_path, "dataset cache")));
  const std::string train_checksum = hex64(TokenShard::open(result.train_shard_path).checksum());
  const std::string val_checksum = hex64(TokenShard::open(result.val_shard_path).checksum());

  result.vocab_size = tokenizer->vocab_size();
  result.train_tokens = static_cast<int64_t>(train_tokens.size());
  result.val_tokens = static_cast<int64_t>(val_tokens.size());
  result.train_documents = documents - val_documents;
  result.val_documents = val_documents;
  Json manifest = Json::object();
  manifest.set("format", kDatasetFormat);
  manifest.set("corpus", data.path);
  manifest.set("corpus_bytes", corpus.bytes);
  manifest.set("tokenizer_source", data.tokenizer.empty() ? std::string("trained") : data.tokenizer);
  manifest.set("vocab_size", result.vocab_size);
  manifest.set("val_fraction", data.val_fraction);
  manifest.set("seed", std::to_string(seed));
  manifest.set("train_documents", result.train_documents);
  manifest.set("val_documents", result.val_documents);
  manifest.set("train_tokens", result.train_tokens);
  manifest.set("val_tokens", result.val_tokens);
  manifest.set("tokenizer_hash", tokenizer_hash);
  manifest.set("train_checksum", train_checksum);
  manifest.set("val_checksum", val_checksum);
  write_file_atomically(result.folder + "/dataset.json", manifest.dump(2) + "\n");  // written last: marks completion
  if (log)
    std::fprintf(log, "data: %s; encoded %.2f MB in %.2f s; %s train / %s val tokens (%lld / %lld documents) -> %s\n",
                 tokenizer_note.c_str(), corpus.bytes / 1e6, encode_seconds, short_count(result.train_tokens).c_str(),
                 short_count(result.val_tokens).c_str(), static_cast<long long>(result.train_documents),
                 static_cast<long long>(result.val_documents), result.folder.c_str());
  return result;
}

}  // namespace lathe

// Dataset preparation: corpus -> tokenizer -> train/validation token shards, cached.
//
// The corpus (data.path, data/corpus.h) is split into training and validation documents: a
// deterministic shuffle of the documents for the seed, the first round(val_fraction * documents)
// (at least one, and at least one left for training) held out. The tokenizer is data.tokenizer
// when given (any tokenizer.json text/tokenizer.h reads; it must fit model.vocab_size and have an
// end-of-text token), else a BpeTokenizer trained on the training documents with vocab_size tokens.
// Each split is one token stream, every document followed by the end-of-text token (<|endoftext|>
// for lathe's own), in shuffled document order; special-token text inside a document is encoded as
// ordinary text.
//
// Results live in cache_dir/<key>/ (tokenizer.json, train.bin, val.bin, dataset.json), the key a
// hash of the corpus documents, vocab_size, val_fraction, seed and the tokenizer file's bytes, so
// a second run with the same inputs only re-reads the corpus to hash it and reuses the files. The
// documents are hashed as decoded (after gzip / zstd, after JSONL): recompressing a corpus, or
// moving its text between a .txt and a .txt.zst, still hits the cache; changing any document's
// text (or data.jsonl_field) misses it.
// dataset.json records the tokenizer's hash and each shard's payload checksum; a cache whose
// files no longer match them (edited, replaced, damaged) is rebuilt with a note on stderr, never
// trained on.
// Progress lines with timings go to `log` (nullptr: silent). Errors name the config key at fault.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "lathe/data/data_options.h"

namespace lathe {

struct PreparedDataset {
  std::string folder;  // cache_dir/<key>
  std::string tokenizer_path;
  std::string train_shard_path;
  std::string val_shard_path;
  int64_t vocab_size = 0;  // the tokenizer's (at most the vocab_size asked for)
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_documents = 0, val_documents = 0;
  bool from_cache = false;
};

// cache_dir: the resolved cache folder (the trainer passes data.cache_dir or <run_dir>/data).
PreparedDataset prepare_dataset(const DataOptions& data, int64_t vocab_size, uint64_t seed,
                                const std::string& cache_dir, std::FILE* log = stdout);

}  // namespace lathe

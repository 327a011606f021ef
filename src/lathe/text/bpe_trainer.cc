// BpeTokenizer::train: count pre-token frequencies once, then merge the most frequent adjacent
// pair repeatedly, updating pair counts only in the words that contain the merged pair.
//
// Data structures: each distinct pre-token ("word") is a symbol sequence with a count; pair_counts
// holds the weighted count of every adjacent pair; pair_words lists the words a pair occurs in
// (possibly with duplicates and stale entries, cleaned when the pair is merged). A max-heap holds
// (count, pair) entries lazily: a count that grows gets a new entry; an entry whose count is out of
// date is re-pushed with the current count when it reaches the top. Because a pair of existing
// tokens never gains occurrences (only pairs involving the new token appear), a popped entry that
// matches the current count is the true maximum.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "lathe/core/error.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/pretokenize.h"

namespace lathe {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

struct HeapEntry {
  int64_t count;
  uint64_t pair;
  // Lower priority: smaller count, or equal count and a larger pair (ties go to the smaller pair).
  bool operator<(const HeapEntry& other) const {
    return count < other.count || (count == other.count && pair > other.pair);
  }
};

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

}  // namespace

BpeTokenizer BpeTokenizer::train(const std::vector<std::string>& documents, int64_t vocab_size,
                                 const std::vector<std::string>& special_tokens, const TrainProgress& progress) {
  const int64_t base_size = 256 + static_cast<int64_t>(special_tokens.size());
  LATHE_CHECK(vocab_size >= base_size, "vocab_size ", vocab_size,
              " is too small: byte-level BPE needs 256 byte tokens + ", special_tokens.size(),
              " special token(s) = ", base_size);
  LATHE_CHECK(vocab_size <= (int64_t{1} << 30), "vocab_size ", vocab_size, " is too large");
  for (size_t i = 0; i < special_tokens.size(); ++i) {
    LATHE_CHECK(!special_tokens[i].empty(), "special token ", i, " is empty");
    for (size_t j = 0; j < i; ++j)
      LATHE_CHECK(special_tokens[i] != special_tokens[j], "special token '", special_tokens[i], "' is given twice");
  }
  const int64_t merges_wanted = vocab_size - base_size;

  // Distinct pre-tokens and their counts (views into the documents, which outlive training).
  std::unordered_map<std::string_view, int64_t> word_counts;
  for (const std::string& document : documents)
    for_each_pretoken(document, [&](std::string_view word) { ++word_counts[word]; });
  std::vector<Word> words;
  words.reserve(word_counts.size());
  for (const auto& [text, count] : word_counts) {
    if (text.size() < 2) continue;  // a single byte has no pair to merge
    Word word;
    word.symbols.assign(reinterpret_cast<const unsigned char*>(text.data()),
                        reinterpret_cast<const unsigned char*>(text.data()) + text.size());
    word.count = count;
    words.push_back(std::move(word));
  }
  word_counts.clear();

  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;
  for (size_t w = 0; w < words.size(); ++w) {
    const auto& symbols = words[w].symbols;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      uint64_t key = pair_key(symbols[i], symbols[i + 1]);
      pair_counts[key] += words[w].count;
      auto& list = pair_words[key];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
    }
  }
  std::priority_queue<HeapEntry> heap;
  for (const auto& [key, count] : pair_counts) heap.push({count, key});

  BpeTokenizer tokenizer;
  for (int b = 0; b < 256; ++b) tokenizer.token_bytes_.push_back(std::string(1, static_cast<char>(b)));
  std::unordered_set<std::string> known_tokens(tokenizer.token_bytes_.begin(), tokenizer.token_bytes_.end());
  std::unordered_set<uint64_t> unmergeable_pairs;
  std::unordered_map<uint64_t, int64_t> delta;
  std::vector<int32_t> rewritten;
  const int64_t report_every = std::max<int64_t>(1, merges_wanted / 100);

  while (static_cast<int64_t>(tokenizer.merges_.size()) < merges_wanted && !heap.empty()) {
    HeapEntry top = heap.top();
    heap.pop();
    auto current = pair_counts.find(top.pair);
    int64_t count = current == pair_counts.end() ? 0 : current->second;
    if (count != top.count) {
      if (count > 0) heap.push({count, top.pair});
      continue;
    }
    if (count <= 0) continue;
    const int32_t left = left_of(top.pair), right = right_of(top.pair);
    std::string merged = tokenizer.token_bytes_[left] + tokenizer.token_bytes_[right];
    // Another split of the same bytes was merged already; keeping one id per byte string keeps
    // the vocabulary a map. The pair stays unmerged.
    if (unmergeable_pairs.count(top.pair) || !known_tokens.insert(merged).second) {
      unmergeable_pairs.insert(top.pair);
      continue;
    }
    const int32_t result = static_cast<int32_t>(tokenizer.token_bytes_.size());
    tokenizer.token_bytes_.push_back(std::move(merged));
    tokenizer.merges_.push_back({left, right, result});

    std::vector<int32_t> affected = std::move(pair_words[top.pair]);
    pair_words.erase(top.pair);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    delta.clear();
    for (int32_t w : affected) {
      Word& word = words[static_cast<size_t>(w)];
      auto& symbols = word.symbols;
      rewritten.clear();
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          rewritten.push_back(result);
          ++i;
        } else {
          rewritten.push_back(symbols[i]);
        }
      }
      if (rewritten.size() == symbols.size()) continue;  // stale entry: no longer contains the pair
      for (size_t i = 0; i + 1 < symbols.size(); ++i) delta[pair_key(symbols[i], symbols[i + 1])] -= word.count;
      for (size_t i = 0; i + 1 < rewritten.size(); ++i) {
        uint64_t key = pair_key(rewritten[i], rewritten[i + 1]);
        delta[key] += word.count;
        if (rewritten[i] == result || rewritten[i + 1] == result) {
          auto& list = pair_words[key];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
      symbols.swap(rewritten);
    }
    for (const auto& [key, change] : delta) {
      if (change == 0) continue;
      int64_t& value = pair_counts[key];
      value += change;
      LATHE_ASSERT(value >= 0);
      if (change > 0) heap.push({value, key});
    }
    LATHE_ASSERT(pair_counts[top.pair] == 0);
    pair_counts.erase(top.pair);
    if (progress && static_cast<int64_t>(tokenizer.merges_.size()) % report_every == 0)
      progress(static_cast<int64_t>(tokenizer.merges_.size()), merges_wanted);
  }
  if (progress) progress(static_cast<int64_t>(tokenizer.merges_.size()), merges_wanted);

  for (const std::string& special : special_tokens) tokenizer.token_bytes_.push_back(special);
  tokenizer.special_.assign(tokenizer.token_bytes_.size(), false);
  for (size_t i = 0; i < special_tokens.size(); ++i) tokenizer.special_[tokenizer.special_.size() - 1 - i] = true;
  tokenizer.build_tables("trained tokenizer");
  return tokenizer;
}

}  // namespace lathe

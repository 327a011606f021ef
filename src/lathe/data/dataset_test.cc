// Dataset preparation: the split keeps every document exactly once with EOS after each, is
// deterministic for the seed, is cached, and reports unusable settings by config key.
#include "lathe/data/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "compress_for_tests.h"
#include "lathe/core/error.h"
#include "lathe/core/json.h"
#include "lathe/data/corpus.h"
#include "lathe/io/token_shard.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/hf_tokenizer.h"
#include "sentencepiece_tokenizer_json.h"
#include "test_seed.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("lathe_dataset_test_" + std::to_string(::getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    std::string text;
    for (int d = 0; d < 20; ++d) {
      documents_.push_back("fortune number " + std::to_string(d) + ": the cat sat on the mat.\n");
      text += documents_.back() + "%\n";
    }
    data_.path = (root_ / "fortunes").string();
    std::ofstream(data_.path) << text;
    data_.val_fraction = 0.1;
  }
  void TearDown() override { fs::remove_all(root_); }

  // The documents of a shard: its tokens decoded and split at EOS (the last token must be EOS).
  std::vector<std::string> documents_of(const std::string& shard_path, const BpeTokenizer& tokenizer) {
    TokenShard shard = TokenShard::open(shard_path);
    std::vector<int32_t> tokens = shard.tokens(0, shard.size());
    EXPECT_EQ(tokens.back(), tokenizer.eos_id());
    std::vector<std::string> documents;
    std::vector<int32_t> current;
    for (int32_t token : tokens) {
      if (token == tokenizer.eos_id()) {
        documents.push_back(tokenizer.decode(current));
        current.clear();
      } else {
        current.push_back(token);
      }
    }
    return documents;
  }

  fs::path root_;
  DataOptions data_;
  std::vector<std::string> documents_;
};

TEST_F(DatasetTest, SplitHoldsEveryDocumentOnceFollowedByEos) {
  std::FILE* log = std::tmpfile();
  PreparedDataset prepared = prepare_dataset(data_, 270, test_seed(), (root_ / "cache").string(), log);
  EXPECT_FALSE(prepared.from_cache);
  EXPECT_EQ(prepared.val_documents, 2);  // round(20 * 0.1)
  EXPECT_EQ(prepared.train_documents, 18);
  EXPECT_EQ(prepared.vocab_size, 270);
  BpeTokenizer tokenizer = BpeTokenizer::load(prepared.tokenizer_path);
  std::vector<std::string> train = documents_of(prepared.train_shard_path, tokenizer);
  std::vector<std::string> val = documents_of(prepared.val_shard_path, tokenizer);
  EXPECT_EQ(train.size(), 18u);
  EXPECT_EQ(val.size(), 2u);
  std::vector<std::string> all = train;
  all.insert(all.end(), val.begin(), val.end());
  std::sort(all.begin(), all.end());
  std::vector<std::string> expected = documents_;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected) << "seed " << test_seed();
  EXPECT_EQ(prepared.train_tokens, TokenShard::open(prepared.train_shard_path).size());

  // The second run reuses the cache; a fresh cache folder gives byte-identical shards.
  PreparedDataset again = prepare_dataset(data_, 270, test_seed(), (root_ / "cache").string(), log);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.train_shard_path, prepared.train_shard_path);
  EXPECT_EQ(again.train_tokens, prepared.train_tokens);
  EXPECT_EQ(again.val_documents, 2);
  PreparedDataset fresh = prepare_dataset(data_, 270, test_seed(), (root_ / "other_cache").string(), nullptr);
  EXPECT_EQ(TokenShard::open(fresh.train_shard_path).checksum(),
            TokenShard::open(prepared.train_shard_path).checksum());
  // Another seed is another split (a different key and folder).
  PreparedDataset reseeded = prepare_dataset(data_, 270, test_seed() + 1, (root_ / "cache").string(), nullptr);
  EXPECT_NE(reseeded.folder, prepared.folder);

  std::rewind(log);
  char line[512];
  ASSERT_NE(std::fgets(line, sizeof line, log), nullptr);
  EXPECT_EQ(std::string(line).rfind("data: trained tokenizer (270 tokens)", 0), 0u) << line;
  ASSERT_NE(std::fgets(line, sizeof line, log), nullptr);
  EXPECT_EQ(std::string(line).rfind("data: reusing ", 0), 0u) << line;
  std::fclose(log);
}

// The cache keys on the decoded documents: the same corpus as gzip JSONL, again, or recompressed
// as zstd hits; one changed document (inside the compressed bytes) misses.
TEST_F(DatasetTest, CompressedJsonlCorpusHitsTheCacheOnlyWhileItsTextIsUnchanged) {
  auto jsonl = [](const std::vector<std::string>& documents) {
    std::string text;
    for (const std::string& document : documents) {
      Json line = Json::object();
      line.set("text", document);
      text += line.dump(0) + "\n";
    }
    return text;
  };
  const std::string cache = (root_ / "cache").string();
  data_.path = (root_ / "corpus.jsonl.gz").string();
  std::ofstream(data_.path, std::ios::binary) << gzip_compress(jsonl(documents_));
  PreparedDataset first = prepare_dataset(data_, 270, 5, cache, nullptr);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.train_documents + first.val_documents, 20);
  PreparedDataset again = prepare_dataset(data_, 270, 5, cache, nullptr);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.folder, first.folder);

  data_.path = (root_ / "corpus.jsonl.zst").string();
  std::ofstream(data_.path, std::ios::binary) << zstd_compress(jsonl(documents_));
  PreparedDataset recompressed = prepare_dataset(data_, 270, 5, cache, nullptr);
  EXPECT_TRUE(recompressed.from_cache);
  EXPECT_EQ(recompressed.folder, first.folder);

  std::vector<std::string> changed = documents_;
  changed[7].back() = '!';
  std::ofstream(data_.path, std::ios::binary | std::ios::trunc) << zstd_compress(jsonl(changed));
  PreparedDataset after_change = prepare_dataset(data_, 270, 5, cache, nullptr);
  EXPECT_FALSE(after_change.from_cache);
  EXPECT_NE(after_change.folder, first.folder);
}

TEST_F(DatasetTest, UsesAGivenTokenizer) {
  std::string tokenizer_path = (root_ / "given.json").string();
  BpeTokenizer::train({"completely different text"}, 270).save(tokenizer_path);
  data_.tokenizer = tokenizer_path;
  PreparedDataset prepared = prepare_dataset(data_, 4096, 1, (root_ / "cache").string(), nullptr);
  EXPECT_EQ(prepared.vocab_size, 270);
  EXPECT_EQ(BpeTokenizer::load(prepared.tokenizer_path).to_json().dump(),
            BpeTokenizer::load(tokenizer_path).to_json().dump());
  try {
    prepare_dataset(data_, 260, 1, (root_ / "cache").string(), nullptr);
    ADD_FAILURE() << "a 270-token tokenizer was accepted for vocab_size 260";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("more than model.vocab_size 260"), std::string::npos) << error.what();
  }
}

// A Hugging Face SentencePiece-style file (Llama 2 layout): byte fallback for every byte, a few
// merges, </s> as the end-of-text token.
//   ids: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, ▁ 259, t 260, h 261, e 262, th 263, the 264, ▁the 265
std::string byte_fallback_tokenizer_text() {
  Json vocab = Json::object();
  int64_t id = 0;
  for (const char* token : {"<unk>", "<s>", "</s>"}) vocab.append_member(token, id++);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    vocab.append_member(name, id++);
  }
  for (const char* token : {"\u2581", "t", "h", "e", "th", "the", "\u2581the"}) vocab.append_member(token, id++);
  return sentencepiece_tokenizer_json(vocab, Json::parse(R"(["t h", "th e", "\u2581 the"])"), llama2_added_tokens(), 1)
      .dump(2);
}

TEST_F(DatasetTest, UsesAHuggingFaceTokenizer) {
  // Special-token text inside a document stays text: only the separators are </s>.
  std::string text;
  documents_ = {"the cat sat on the mat.\n", "a </s> inside and <s> too\n", "caf\u00e9 \u20ac5 \U0001F600 the  end\n"};
  for (int copy = 0; copy < 3; ++copy)
    for (const std::string& document : documents_) text += document + "%\n";
  std::ofstream(data_.path) << text;
  data_.tokenizer = (root_ / "hf_tokenizer.json").string();
  const std::string tokenizer_text = byte_fallback_tokenizer_text();
  std::ofstream(data_.tokenizer) << tokenizer_text;
  std::FILE* log = std::tmpfile();
  PreparedDataset prepared = prepare_dataset(data_, 300, 1, (root_ / "cache").string(), log);
  EXPECT_EQ(prepared.vocab_size, 266);
  std::ifstream copied(prepared.tokenizer_path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(copied), {}), tokenizer_text);  // byte for byte

  const HfTokenizer tokenizer = HfTokenizer::load(prepared.tokenizer_path);
  std::vector<std::string> all;
  for (const std::string& shard : {prepared.train_shard_path, prepared.val_shard_path}) {
    std::vector<int32_t> tokens = TokenShard::open(shard).tokens(0, TokenShard::open(shard).size());
    ASSERT_FALSE(tokens.empty());
    EXPECT_EQ(tokens.back(), 2);
    EXPECT_EQ(std::count(tokens.begin(), tokens.end(), 1), 0);  // no BOS: documents are not encoded with specials
    std::vector<int32_t> current;
    for (int32_t token : tokens) {
      if (token == 2) {
        all.push_back(tokenizer.decode(current));
        current.clear();
      } else {
        current.push_back(token);
      }
    }
  }
  std::vector<std::string> expected;
  for (int copy = 0; copy < 3; ++copy)
    for (const std::string& document : documents_) expected.push_back(document);
  std::sort(all.begin(), all.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
  std::rewind(log);
  char line[512];
  ASSERT_NE(std::fgets(line, sizeof line, log), nullptr);
  EXPECT_NE(std::string(line).find("Hugging Face SentencePiece-style BPE, 266 tokens"), std::string::npos) << line;
  std::fclose(log);
}

TEST_F(DatasetTest, UnusableSettingsNameTheKey) {
  auto error_of = [&](const DataOptions& data, int64_t vocab_size) {
    try {
      prepare_dataset(data, vocab_size, 1, (root_ / "cache").string(), nullptr);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  DataOptions data = data_;
  data.val_fraction = 0;
  EXPECT_NE(error_of(data, 300).find("data.val_fraction"), std::string::npos);
  EXPECT_NE(error_of(data_, 100).find("model.vocab_size"), std::string::npos);
  data = data_;
  data.path = (root_ / "one").string();
  std::ofstream(data.path) << "a single document\n";
  EXPECT_NE(error_of(data, 300).find("at least 2"), std::string::npos) << error_of(data, 300);
  data = data_;
  data.tokenizer = (root_ / "missing.json").string();
  EXPECT_NE(error_of(data, 300).find("data.tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace lathe

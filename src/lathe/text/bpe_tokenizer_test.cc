// Byte-level BPE: the pre-token split, hand-derived training results, encode/decode round trips,
// streaming decode, tokenizer.json round trip and malformed-file errors.
#include "lathe/text/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "lathe/core/error.h"
#include "lathe/io/utf8.h"
#include "lathe/text/pretokenize.h"
#include "lathe/text/streaming_decoder.h"
#include "test_seed.h"

namespace lathe {
namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> pieces;
  for (auto piece : split_pretokens(text)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

// Expected pieces follow the GPT-2 / Llama-3 pattern by hand (see pretokenize.h).
TEST(Pretokenize, SplitsLikeThePattern) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("don't"), (Pieces{"don", "'t"}));
  EXPECT_EQ(split("I'LL we've"), (Pieces{"I", "'LL", " we", "'ve"}));
  EXPECT_EQ(split("12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(split(" 42"), (Pieces{" ", "42"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split("end.  "), (Pieces{"end", ".", "  "}));
  EXPECT_EQ(split("wait ...!"), (Pieces{"wait", " ...!"}));
  EXPECT_EQ(split("café au lait"), (Pieces{"café", " au", " lait"}));
  EXPECT_EQ(split("日本 語"), (Pieces{"日本", " 語"}));
  EXPECT_EQ(split("'"), (Pieces{"'"}));
  EXPECT_EQ(split(" "), (Pieces{" "}));
  EXPECT_TRUE(split("").empty());
}

TEST(Pretokenize, PiecesConcatenateToTheInput) {
  std::mt19937_64 random(test_seed());
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(random() % 64, '\0');
    for (char& c : text) c = static_cast<char>(random() % 4 ? " a1'.\n\xc3\xa9"[random() % 9] : random() % 256);
    std::string joined;
    for (auto piece : split_pretokens(text)) {
      ASSERT_FALSE(piece.empty());
      joined += piece;
    }
    ASSERT_EQ(joined, text) << "seed " << test_seed();
  }
}

TEST(ByteLevel, AlphabetRoundTripsEveryByte) {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  std::string spelled = bytes_to_byte_level(all_bytes), back;
  ASSERT_TRUE(byte_level_to_bytes(spelled, back));
  EXPECT_EQ(back, all_bytes);
  EXPECT_EQ(bytes_to_byte_level(" the"), "\xc4\xa0the");    // 'Ġ' is U+0120
  EXPECT_EQ(bytes_to_byte_level("\n"), "\xc4\x8a");         // 'Ċ' is U+010A
  EXPECT_FALSE(byte_level_to_bytes("\xe4\xb8\x80", back));  // U+4E00 is not in the alphabet
}

std::vector<std::string> merge_strings(const BpeTokenizer& tokenizer) {
  std::vector<std::string> merges;
  for (const auto& merge : tokenizer.merges())
    merges.push_back(tokenizer.token_bytes(merge.left) + "|" + tokenizer.token_bytes(merge.right));
  return merges;
}

// "ab ab ab abc" splits into "ab", " ab" x2, " abc". Pair counts: (a,b) 4, (' ',a) 3, (b,c) 1.
//   merge 1: a+b -> "ab" (256).     words: [ab], [' ',ab] x2, [' ',ab,c]; pairs (' ',ab) 3, (ab,c) 1
//   merge 2: ' '+ab -> " ab" (257). words: [ab], [" ab"] x2, [" ab",c];   pairs (" ab",c) 1
//   merge 3: " ab"+c -> " abc" (258). Nothing left to merge, so training stops below the asked size.
TEST(BpeTrain, HandDerivedMerges) {
  BpeTokenizer tokenizer = BpeTokenizer::train({"ab ab ab abc"}, 300);
  EXPECT_EQ(merge_strings(tokenizer), (std::vector<std::string>{"a|b", " |ab", " ab|c"}));
  EXPECT_EQ(tokenizer.vocab_size(), 256 + 3 + 1);
  EXPECT_EQ(tokenizer.eos_id(), 259);
  EXPECT_EQ(tokenizer.token_bytes(258), " abc");
  // "abc ab": "abc" -> [ab, c] (no merge ab+c exists), " ab" -> [" ab"].
  EXPECT_EQ(tokenizer.encode("abc ab"), (std::vector<int32_t>{256, 'c', 257}));
}

// "cd ab": pairs (c,d), (' ',a), (a,b) all count 1; the tie goes to the smallest (left, right):
// (' '=32, a=97). Then (c,d)=(99,100) beats (" a"=256, b=98). Then " a"+b.
TEST(BpeTrain, TiesGoToTheSmallestPair) {
  BpeTokenizer tokenizer = BpeTokenizer::train({"cd ab"}, 256 + 2 + 1);  // room for two merges
  EXPECT_EQ(merge_strings(tokenizer), (std::vector<std::string>{" |a", "c|d"}));
  EXPECT_EQ(tokenizer.vocab_size(), 259);
}

std::vector<std::string> sample_documents(uint64_t seed, int count) {
  std::mt19937_64 random(seed);
  const char* words[] = {"the", "cat", "sat", "on", "mat", "naïve", "café", "日本語", "🎉", "don't", "42", "!", "\n"};
  std::vector<std::string> documents;
  for (int d = 0; d < count; ++d) {
    std::string document;
    int length = 5 + static_cast<int>(random() % 40);
    for (int w = 0; w < length; ++w) document += std::string(random() % 3 ? " " : "") + words[random() % 13];
    documents.push_back(document);
  }
  return documents;
}

TEST(BpeTrain, DeterministicAndIndependentOfDocumentOrder) {
  auto documents = sample_documents(test_seed(), 60);
  BpeTokenizer first = BpeTokenizer::train(documents, 400);
  BpeTokenizer again = BpeTokenizer::train(documents, 400);
  std::reverse(documents.begin(), documents.end());
  BpeTokenizer reversed = BpeTokenizer::train(documents, 400);
  EXPECT_EQ(first.to_json().dump(), again.to_json().dump()) << "seed " << test_seed();
  EXPECT_EQ(first.to_json().dump(), reversed.to_json().dump()) << "seed " << test_seed();
}

// The obvious trainer: recount every pair after every merge. The incremental trainer must agree.
std::vector<std::string> naive_merges(const std::vector<std::string>& documents, int merges_wanted) {
  std::map<std::string, int64_t> word_counts;
  for (const auto& document : documents)
    for (auto word : split_pretokens(document)) ++word_counts[std::string(word)];
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [text, count] : word_counts)
    words.push_back({std::vector<int32_t>(text.begin(), text.end()), count});
  for (auto& word : words)
    for (auto& symbol : word.first) symbol &= 0xff;
  std::vector<std::string> token_bytes;
  for (int b = 0; b < 256; ++b) token_bytes.push_back(std::string(1, static_cast<char>(b)));
  std::set<std::string> known(token_bytes.begin(), token_bytes.end());
  std::set<std::pair<int32_t, int32_t>> unmergeable;
  std::vector<std::string> merges;
  while (static_cast<int>(merges.size()) < merges_wanted) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (const auto& [symbols, count] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) counts[{symbols[i], symbols[i + 1]}] += count;
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [pair, count] : counts)  // map order: the first maximum is the smallest pair
      if (count > best_count && !unmergeable.count(pair)) best = pair, best_count = count;
    if (best_count == 0) break;
    std::string merged = token_bytes[best.first] + token_bytes[best.second];
    if (!known.insert(merged).second) {
      unmergeable.insert(best);
      continue;
    }
    int32_t result = static_cast<int32_t>(token_bytes.size());
    token_bytes.push_back(merged);
    merges.push_back(token_bytes[best.first] + "|" + token_bytes[best.second]);
    for (auto& [symbols, count] : words) {
      std::vector<int32_t> rewritten;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == best.first && symbols[i + 1] == best.second) {
          rewritten.push_back(result);
          ++i;
        } else {
          rewritten.push_back(symbols[i]);
        }
      }
      symbols = rewritten;
    }
  }
  return merges;
}

TEST(BpeTrain, IncrementalCountsMatchFullRecount) {
  for (int trial = 0; trial < 3; ++trial) {
    auto documents = sample_documents(test_seed() + 10 + trial, 30);
    BpeTokenizer tokenizer = BpeTokenizer::train(documents, 256 + 150 + 1);
    EXPECT_EQ(merge_strings(tokenizer), naive_merges(documents, 150)) << "seed " << test_seed();
  }
  // Repetitive text: many equal counts and overlapping pairs ("aaaa").
  std::vector<std::string> repetitive = {"aaaa aaa aa a abab ababab baba", "aaaaaaa bbbbbb abba"};
  EXPECT_EQ(merge_strings(BpeTokenizer::train(repetitive, 256 + 40 + 1)), naive_merges(repetitive, 40));
}

TEST(BpeTrain, RejectsTooSmallVocabulary) {
  EXPECT_THROW(BpeTokenizer::train({"abc"}, 256), Error);  // no room for <|endoftext|>
  EXPECT_THROW(BpeTokenizer::train({"abc"}, 300, {"<s>", "<s>"}), Error);
}

TEST(BpeEncode, RoundTripsRandomBytesAndTrickyUnicode) {
  auto documents = sample_documents(test_seed() + 1, 80);
  BpeTokenizer tokenizer = BpeTokenizer::train(documents, 500);
  std::mt19937_64 random(test_seed());
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(random() % 100, '\0');
    for (char& c : bytes) c = static_cast<char>(random() % 256);
    ASSERT_EQ(tokenizer.decode(tokenizer.encode(bytes)), bytes) << "seed " << test_seed();
  }
  const char* tricky[] = {"naïve café 日本語 🎉 emoji",
                          "\r\n\ttabs\t\t and  spaces  ",
                          "👩‍👩‍👧 ZWJ family",
                          "e\xcc\x81 combining",
                          "\xef\xbb\xbf BOM",
                          "the cat's mat",
                          "a",
                          "",
                          "trailing space ",
                          "<|endoftext|> as text"};
  for (const char* text : tricky) EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  // Encoding twice (the second time from the word cache) gives the same ids.
  EXPECT_EQ(tokenizer.encode(documents[0]), tokenizer.encode(documents[0]));
}

TEST(BpeEncode, SpecialTokensOnlyWhenAllowed) {
  BpeTokenizer tokenizer = BpeTokenizer::train({"ab ab ab abc"}, 300);
  std::vector<int32_t> plain = tokenizer.encode("ab<|endoftext|>ab");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), tokenizer.eos_id()), 0);
  EXPECT_EQ(tokenizer.encode("ab<|endoftext|>ab", true), (std::vector<int32_t>{256, tokenizer.eos_id(), 256}));
  EXPECT_EQ(tokenizer.decode({256, tokenizer.eos_id()}), "ab<|endoftext|>");
  EXPECT_THROW(tokenizer.decode({static_cast<int32_t>(tokenizer.vocab_size())}), Error);
}

TEST(BpeEncode, TokenSpellings) {
  BpeTokenizer tokenizer = BpeTokenizer::train({"ab ab ab abc"}, 300);
  EXPECT_EQ(tokenizer.id_to_token(257),
            "\xc4\xa0"
            "ab");  // "Ġab"
  EXPECT_EQ(tokenizer.token_to_id("\xc4\xa0"
                                  "ab"),
            257);
  EXPECT_EQ(tokenizer.token_to_id("<|endoftext|>"), tokenizer.eos_id());
  EXPECT_EQ(tokenizer.token_to_id("zzz"), -1);
}

TEST(StreamingDecoder, HoldsBackIncompleteUtf8) {
  BpeTokenizer bytes_only = BpeTokenizer::train({"x"}, 257);  // no merges: one token per byte
  std::vector<int32_t> ids = bytes_only.encode("a日🎉");
  ASSERT_EQ(ids.size(), 1u + 3u + 4u);
  StreamingDecoder decoder(bytes_only);
  std::vector<std::string> outputs;
  for (int32_t id : ids) outputs.push_back(decoder.push(id));
  EXPECT_EQ(outputs, (std::vector<std::string>{"a", "", "", "日", "", "", "", "🎉"}));
  EXPECT_EQ(decoder.finish(), "");
  // A lone continuation byte or a broken sequence is passed through, not held forever.
  StreamingDecoder broken(bytes_only);
  EXPECT_EQ(broken.push(0xe6), "");
  EXPECT_EQ(broken.push('A'),
            "\xe6"
            "A");
  EXPECT_EQ(broken.push(0x80), "\x80");
  EXPECT_EQ(broken.push(0xf0), "");
  EXPECT_EQ(broken.finish(), "\xf0");
}

TEST(StreamingDecoder, ConcatenationEqualsDecode) {
  auto documents = sample_documents(test_seed() + 2, 40);
  BpeTokenizer tokenizer = BpeTokenizer::train(documents, 350);
  for (const auto& document : documents) {
    std::vector<int32_t> ids = tokenizer.encode(document);
    StreamingDecoder decoder(tokenizer);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = decoder.push(id);
      ASSERT_EQ(find_invalid_utf8(piece), std::string::npos) << "seed " << test_seed();
      streamed += piece;
    }
    streamed += decoder.finish();
    ASSERT_EQ(streamed, document) << "seed " << test_seed();
  }
}

std::string temporary_path(const std::string& name) {
  return (::testing::TempDir() + "lathe_tokenizer_test_" + std::to_string(test_seed()) + "_" + name);
}

TEST(BpeFile, SaveLoadRoundTrip) {
  auto documents = sample_documents(test_seed() + 3, 50);
  BpeTokenizer tokenizer = BpeTokenizer::train(documents, 420, {kEndOfText, "<|pad|>"});
  std::string path = temporary_path("roundtrip.json");
  tokenizer.save(path);
  BpeTokenizer loaded = BpeTokenizer::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.to_json().dump(), tokenizer.to_json().dump());
  EXPECT_EQ(loaded.vocab_size(), tokenizer.vocab_size());
  EXPECT_GT(loaded.vocab_size(), 300);  // training may run out of pairs before 420
  EXPECT_EQ(loaded.eos_id(), tokenizer.eos_id());
  EXPECT_TRUE(loaded.is_special(loaded.token_to_id("<|pad|>")));
  for (const auto& document : documents) ASSERT_EQ(loaded.encode(document), tokenizer.encode(document));
}

TEST(BpeFile, AcceptsMergesAsPairs) {
  BpeTokenizer tokenizer = BpeTokenizer::train({"ab ab ab abc"}, 300);
  Json json = tokenizer.to_json();
  Json pairs = Json::array();
  for (const Json& merge : json.get("model").get("merges").items()) {
    const std::string& text = merge.as_string();
    Json pair = Json::array();
    pair.push(text.substr(0, text.find(' ')));
    pair.push(text.substr(text.find(' ') + 1));
    pairs.push(pair);
  }
  Json model = json.get("model");
  model.set("merges", pairs);
  json.set("model", model);
  BpeTokenizer loaded = BpeTokenizer::from_json(json, "pairs.json");
  EXPECT_EQ(loaded.encode("abc ab"), tokenizer.encode("abc ab"));
}

// Each broken variant must throw one Error whose message names the file and the problem.
TEST(BpeFile, MalformedFilesGiveClearErrors) {
  BpeTokenizer tokenizer = BpeTokenizer::train({"ab ab ab abc"}, 300);
  const Json good = tokenizer.to_json();
  auto expect_error = [&](const Json& json, const std::string& expected) {
    try {
      BpeTokenizer::from_json(json, "bad.json");
      ADD_FAILURE() << "no error; expected one mentioning: " << expected;
    } catch (const Error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("bad.json"), std::string::npos) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << message;
    }
  };
  auto with_model = [&](const std::string& key, Json value) {
    Json json = good, model = good.get("model");
    model.set(key, std::move(value));
    json.set("model", model);
    return json;
  };
  expect_error(Json::array(), "JSON object");
  expect_error(with_model("type", "WordPiece"), "model.type");
  expect_error(with_model("vocab", Json::array()), "model.vocab");
  Json merges = good.get("model").get("merges");
  merges.push("zz qq");
  expect_error(with_model("merges", merges), "not a token");
  Json bad_format = Json::array();
  bad_format.push("ab");
  expect_error(with_model("merges", bad_format), "model.merges[0]");
  Json repeated = Json::array();
  repeated.push("a b");
  repeated.push("a b");
  expect_error(with_model("merges", repeated), "repeats");
  Json vocab = good.get("model").get("vocab");
  Json without_byte = Json::object();
  for (const auto& [spelling, id] : vocab.members())
    if (spelling != "a") without_byte.set(spelling, id);
  expect_error(with_model("vocab", without_byte), "no token has id 97");
  Json shifted = vocab;
  shifted.set("a", 5000);
  expect_error(with_model("vocab", shifted), "has id 5000; ids must be integers from 0 to");
  Json fractional = vocab;
  fractional.set("a", 97.5);
  expect_error(with_model("vocab", fractional), "has id 97.5");
  Json clash = vocab;
  clash.set("b", 97);
  expect_error(with_model("vocab", clash), "id 97 is given to both");
  Json foreign = without_byte;
  foreign.set("\xe4\xb8\x80", 97);
  expect_error(with_model("vocab", foreign), "byte-level alphabet");

  std::string path = temporary_path("not_json.json");
  std::ofstream(path) << "{\"model\": ";
  try {
    BpeTokenizer::load(path);
    ADD_FAILURE() << "truncated file loaded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  std::remove(path.c_str());
  EXPECT_THROW(BpeTokenizer::load(temporary_path("missing.json")), Error);
}

}  // namespace
}  // namespace lathe

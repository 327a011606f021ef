// HfTokenizer and its parts: Unicode categories and NFC, the split-regex subset on the Llama 3
// pattern, a hand-built SentencePiece-style tokenizer (byte fallback, unk fusing, decoders), lathe's
// own tokenizer files, and one clear error per kind of malformed tokenizer.json. The comparison with
// the `tokenizers` library itself is tests/python/tokenizer_hf_compat_check.py.
#include "lathe/text/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>

#include "lathe/core/error.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/split_regex.h"
#include "lathe/text/unicode_text.h"
#include "scratch_directory.h"
#include "sentencepiece_tokenizer_json.h"

namespace lathe {
namespace {

std::vector<std::string> regex_split(const std::string& pattern, const std::string& text) {
  std::vector<uint32_t> code_points;
  std::vector<size_t> offsets;
  decode_utf8(text, code_points, offsets);
  std::vector<std::string> pieces;
  for (auto [begin, end] : SplitRegex(pattern).find_all(code_points))
    pieces.push_back(text.substr(offsets[begin], offsets[end] - offsets[begin]));
  return pieces;
}

using Pieces = std::vector<std::string>;

const char* const kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

TEST(TokenizerHfUnicode, CategoriesAndWhiteSpace) {
  EXPECT_EQ(unicode_category('a').major, 'L');
  EXPECT_EQ(unicode_category('A').minor, 'u');
  EXPECT_EQ(unicode_category(0x663).major, 'N');  // ARABIC-INDIC DIGIT THREE
  EXPECT_EQ(unicode_category(0x663).minor, 'd');
  EXPECT_EQ(unicode_category(0xBD).minor, 'o');   // VULGAR FRACTION ONE HALF: No
  EXPECT_EQ(unicode_category(0x301).major, 'M');  // COMBINING ACUTE ACCENT
  EXPECT_EQ(unicode_category(0x4E2D).major, 'L');
  EXPECT_EQ(unicode_category(0x1F600).major, 'S');
  EXPECT_EQ(unicode_category(0x10FFFF).minor, 'n');
  EXPECT_EQ(unicode_category(0x11F04).major, 'L');  // KAWI LETTER A, new in Unicode 15.0 (tables: 15.1)
  EXPECT_TRUE(is_unicode_white_space(0x3000));
  EXPECT_TRUE(is_unicode_white_space(0x85));
  EXPECT_FALSE(is_unicode_white_space(0x200B));  // ZERO WIDTH SPACE is not White_Space
}

TEST(TokenizerHfUnicode, NfcComposesAndReorders) {
  EXPECT_EQ(normalize_nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(normalize_nfc("\u1100\u1161\u11a8"), "\uac01");  // jamo L V T -> one syllable
  // Dot below (class 220) sorts before acute (230); then both compose onto 'e'? Only the first
  // composable one: e + dot below -> U+1EB9, which has no composition with acute.
  EXPECT_EQ(normalize_nfc("e\u0301\u0323"), "\u1eb9\u0301");
  EXPECT_EQ(normalize_nfc("\u212b"), "\u00c5");  // ANGSTROM SIGN is a singleton decomposition
  EXPECT_EQ(normalize_nfc("plain ascii"), "plain ascii");
}

TEST(TokenizerHfRegex, SplitsLikeTheLlama3Pattern) {
  // Worked through alternative by alternative with Oniguruma's first-match rule.
  EXPECT_EQ(regex_split(kLlama3Pattern, "Hello world's 12345!!\n\n  x"),
            (Pieces{"Hello", " world", "'s", " ", "123", "45", "!!\n\n", " ", " x"}));
  EXPECT_EQ(regex_split(kLlama3Pattern, "I'LL \u017fay"), (Pieces{"I", "'LL", " \u017fay"}));
  EXPECT_EQ(regex_split(kLlama3Pattern, "\"quoted\"\u00e9t\u00e9"), (Pieces{"\"quoted", "\"\u00e9t\u00e9"}));
  EXPECT_EQ(regex_split(kLlama3Pattern, "a \n\tb"), (Pieces{"a", " \n", "\tb"}));
  EXPECT_EQ(regex_split("'s|\\p{N}+", "x's 12"), (Pieces{"'s", "12"}));
  EXPECT_EQ(regex_split("(?i:'s)", "'S'\u017f"), (Pieces{"'S", "'\u017f"}));
}

TEST(TokenizerHfRegex, RejectsUnsupportedSyntax) {
  for (const char* pattern : {"\\d+", "a+?", "^a", "(?<name>a)", "\\p{Greek}", "a{2", "(a", "[a", "\\w"}) {
    EXPECT_THROW(SplitRegex{pattern}, Error) << pattern;
  }
}

// A SentencePiece-style file by hand: Prepend + Replace normalizer, byte fallback for 'c', unk
// (fused) for '€', which has no byte tokens.
Json sentencepiece_json() {
  return sentencepiece_tokenizer_json(
      Json::parse(R"({"<unk>": 0, "<0x63>": 1, "\u2581": 2, "a": 3, "b": 4, "ab": 5, "\u2581ab": 6, "<s>": 7})"),
      Json::parse(R"(["a b", ["\u2581", "ab"]])"),
      Json::parse(R"([{"id": 7, "content": "<s>", "special": true, "normalized": false}])"), 7);
}

TEST(TokenizerHfSentencePiece, ByteFallbackUnkAndDecoders) {
  HfTokenizer tokenizer = HfTokenizer::from_json(sentencepiece_json(), "sp.json");
  // "▁ab▁c": a+b (rank 0), then ▁+ab (rank 1); 'c' only as its byte token <0x63>.
  EXPECT_EQ(tokenizer.encode("ab c"), (std::vector<int32_t>{6, 2, 1}));
  EXPECT_EQ(tokenizer.encode("ab c", true), (std::vector<int32_t>{7, 6, 2, 1}));
  EXPECT_EQ(tokenizer.encode("ab\u20ac\u20ac"), (std::vector<int32_t>{6, 0}));  // two unknown chars, one unk
  EXPECT_EQ(tokenizer.encode("<s>ab"), (std::vector<int32_t>{7, 6}));           // added token, then "▁ab"
  EXPECT_EQ(tokenizer.encode(""), (std::vector<int32_t>{}));
  EXPECT_EQ(tokenizer.decode({6, 2, 1}), "ab c");
  EXPECT_EQ(tokenizer.decode({7, 6}), "<s> ab");
  EXPECT_EQ(tokenizer.decode({7, 6}, true), "ab");
  EXPECT_THROW(tokenizer.decode({99}), Error);
}

// lathe's files carry a split pattern that describes BpeTokenizer's hand-written split exactly,
// non-ASCII text included.
TEST(TokenizerHfByteLevel, MatchesLatheOwnTokenizer) {
  std::vector<std::string> documents = {"the cat sat on the mat", "don't stop; it's 12345 o'clock!",
                                        "  indented\n\tcode(x) + 42\n\n", "the end", "\u20acuro caf\u00e9 \u20acuro"};
  BpeTokenizer own = BpeTokenizer::train(documents, 330);
  HfTokenizer hf = HfTokenizer::from_json(own.to_json(), "own.json");
  for (const char* text : {"the cat's 123456 mat\n\n  x", "<|endoftext|>the<|endoftext|>", "", "  \t ",
                           "\u20acuro\u2014ok caf\u00e9 'S '\u017f \u00a0 x\u3000y \u0663\u0664", "\v\f \x0b!"}) {
    EXPECT_EQ(hf.encode(text), own.encode(text, true)) << text;
    EXPECT_EQ(hf.decode(own.encode(text, true)), text);
  }
}

std::string error_of(const std::string& json_text) {
  try {
    HfTokenizer::from_json(Json::parse(json_text), "t.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(TokenizerHfMalformed, EachProblemIsNamed) {
  const std::string vocab = R"("vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"])";
  EXPECT_NE(error_of(R"({"model": {"type": "WordPiece", )" + vocab + "}}").find("\"WordPiece\" is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a zz"]}})")
                .find("model.merges[0] uses \"zz\", which is not a token of model.vocab"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})")
                .find("makes \"ab\", which is not in model.vocab"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}})").find("model.merges[0]"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"pre_tokenizer": {"type": "Whitespace"}, "model": {"type": "BPE", )" + vocab + "}}")
                .find("pre_tokenizer has unsupported pre-tokenizer type \"Whitespace\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"normalizer": {"type": "NFKC"}, "model": {"type": "BPE", )" + vocab + "}}")
                .find("normalizer has unsupported normalizer type \"NFKC\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"decoder": {"type": "WordPiece"}, "model": {"type": "BPE", )" + vocab + "}}")
                .find("unsupported decoder type"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Isolated"},
                        "model": {"type": "BPE", )" +
                     vocab + "}}")
                .find("pre_tokenizer.pattern is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})").find("already used"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})").find("non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"added_tokens": [{"id": 0}], "model": {"type": "BPE", )" + vocab + "}}")
                .find("added_tokens[0].content must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(R"([1, 2])").find("must be a JSON object"), std::string::npos);

  ScratchDirectory directory;
  std::string path = directory.file("bad.json");
  std::ofstream(path) << "{\"model\": {";
  try {
    HfTokenizer::load(path);
    FAIL() << "bad JSON loaded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  EXPECT_THROW(HfTokenizer::load(directory.file("missing.json")), Error);
}

TEST(TokenizerHfMalformed, InvalidUtf8TextIsAnError) {
  HfTokenizer tokenizer = HfTokenizer::from_json(sentencepiece_json(), "sp.json");
  EXPECT_THROW(tokenizer.encode("a\xff"), Error);
}

}  // namespace
}  // namespace lathe

// The Tokenizer interface: load_tokenizer picks BpeTokenizer for lathe's own files (today's and
// the first split pattern) and HfTokenizer for everything else; both answer encode options, special
// tokens, BOS/EOS and decode alike; a current lathe file gives the same ids through either class;
// StreamingDecoder over a Hugging Face decoder (context keeps the leading space, byte tokens wait
// for their character).
#include "lathe/text/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "lathe/core/error.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/hf_tokenizer.h"
#include "lathe/text/streaming_decoder.h"
#include "scratch_directory.h"
#include "sentencepiece_tokenizer_json.h"

namespace lathe {
namespace {

const char* const kFirstPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)| ?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char* const kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// SentencePiece style by hand (Llama 2 layout): Prepend + Replace normalizer, BOS template, byte
// tokens for the three bytes of '€' only, decoders Replace / ByteFallback / Fuse / Strip.
//   ids: <unk> 0, <s> 1, </s> 2, <0xE2> 3, <0x82> 4, <0xAC> 5, ▁ 6, a 7, b 8, ab 9, ▁ab 10
Json sentencepiece_json() {
  return sentencepiece_tokenizer_json(Json::parse(R"({"<unk>": 0, "<s>": 1, "</s>": 2, "<0xE2>": 3, "<0x82>": 4,
                                                      "<0xAC>": 5, "\u2581": 6, "a": 7, "b": 8, "ab": 9,
                                                      "\u2581ab": 10})"),
                                      Json::parse(R"(["a b", "\u2581 ab"])"), llama2_added_tokens(), 1);
}

BpeTokenizer small_lathe_tokenizer() {
  return BpeTokenizer::train({"the cat sat on the mat", "don't stop; it's 12345 o'clock!", "\u20acuro \u20acuro"}, 300,
                             {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
}

// Loads `json` the way a file on disk is loaded.
std::unique_ptr<Tokenizer> load_from(const ScratchDirectory& scratch, const Json& json) {
  const std::string path = scratch.file("tokenizer.json");
  {
    std::ofstream out(path);
    out << json.dump(2);
  }
  return load_tokenizer(path);
}

Json with_pattern(Json json, const char* pattern) {
  Json pre_tokenizer = json.get("pre_tokenizer");
  Json steps = Json::array();
  Json split = pre_tokenizer.get("pretokenizers").items()[0];
  split.set("pattern", Json::object()).set("Regex", pattern);
  steps.push(split);
  steps.push(pre_tokenizer.get("pretokenizers").items()[1]);
  pre_tokenizer.set("pretokenizers", steps);
  json.set("pre_tokenizer", pre_tokenizer);
  return json;
}

bool is_bpe(const Tokenizer& tokenizer) { return dynamic_cast<const BpeTokenizer*>(&tokenizer) != nullptr; }
bool is_hf(const Tokenizer& tokenizer) { return dynamic_cast<const HfTokenizer*>(&tokenizer) != nullptr; }

TEST(LoadTokenizer, LatheFilesLoadAsBpeTokenizerOthersAsHfTokenizer) {
  ScratchDirectory scratch;
  const BpeTokenizer own = small_lathe_tokenizer();
  const Json json = own.to_json();
  ASSERT_TRUE(is_lathe_tokenizer_json(json));
  std::unique_ptr<Tokenizer> loaded = load_from(scratch, json);
  EXPECT_TRUE(is_bpe(*loaded));
  EXPECT_EQ(loaded->kind(), "lathe byte-level BPE");

  // Anything BpeTokenizer would not encode as the file says goes to HfTokenizer.
  Json post_processor = json;
  const std::string start = std::to_string(own.token_to_id("<|im_start|>"));
  post_processor.set("post_processor", Json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [)" +
                                                   start + R"(], "tokens": ["<|im_start|>"]}}})"));
  Json normalizer = json;
  normalizer.set("normalizer", Json::parse(R"({"type": "NFC"})"));
  Json non_special = json;
  Json added = non_special.get("added_tokens");
  Json entry = added.items()[1];
  entry.set("special", false);
  Json new_added = Json::array();
  new_added.push(added.items()[0]);
  new_added.push(entry);
  new_added.push(added.items()[2]);
  non_special.set("added_tokens", new_added);
  for (const Json& other : {post_processor, normalizer, non_special, with_pattern(json, kLlama3Pattern)}) {
    EXPECT_FALSE(is_lathe_tokenizer_json(other));
    std::unique_ptr<Tokenizer> hf = load_from(scratch, other);
    EXPECT_TRUE(is_hf(*hf));
    EXPECT_EQ(hf->kind(), "Hugging Face byte-level BPE");
  }
  std::unique_ptr<Tokenizer> sentencepiece = load_from(scratch, sentencepiece_json());
  EXPECT_TRUE(is_hf(*sentencepiece));
  EXPECT_EQ(sentencepiece->kind(), "Hugging Face SentencePiece-style BPE");

  EXPECT_THROW(load_tokenizer(scratch.file("missing.json")), Error);
}

// Files written before the split pattern described the split exactly keep BpeTokenizer's split:
// the ids the data pipeline made from them, not what the old pattern would give.
TEST(LoadTokenizer, FirstPatternFilesKeepLathesSplit) {
  ScratchDirectory scratch;
  // Merges across '€' and 'u' (lathe's split keeps "€uro" one word; the old pattern cuts it).
  const BpeTokenizer own = BpeTokenizer::train({"\u20acuro \u20acuro \u20acuro \u20acuro"}, 300);
  const Json old_file = with_pattern(own.to_json(), kFirstPattern);
  std::unique_ptr<Tokenizer> loaded = load_from(scratch, old_file);
  ASSERT_TRUE(is_bpe(*loaded));
  const HfTokenizer as_the_pattern_says = HfTokenizer::from_json(old_file, "old.json");
  const std::string text = "\u20acuro \u20acuro";  // '€' is no \p{L}: the old pattern cuts it off
  ASSERT_EQ(own.encode(text).size(), 2u);
  EXPECT_EQ(loaded->encode(text, {}), own.encode(text, true));
  EXPECT_NE(as_the_pattern_says.encode(text), own.encode(text, true));
}

// A lathe file gives the same ids through HfTokenizer as through BpeTokenizer, with and without
// special-token recognition, so routing it to either class cannot change a result.
TEST(LoadTokenizer, CurrentLatheFilesEncodeAlikeThroughEitherClass) {
  const BpeTokenizer own = small_lathe_tokenizer();
  const HfTokenizer hf = HfTokenizer::from_json(own.to_json(), "own.json");
  const Tokenizer& a = own;
  const Tokenizer& b = hf;
  for (const char* text : {"the cat's 123456 mat\n\n  x", "<|im_start|>the<|im_end|><|endoftext|>", "", "  \t ",
                           "\u20acuro\u2014ok caf\u00e9 \u00a0 x\u3000y \u0663\u0664", "a<|im_end"}) {
    for (bool split : {false, true}) {
      for (bool add : {false, true}) {
        const EncodeOptions options{.add_special_tokens = add, .split_special_tokens = split};
        EXPECT_EQ(a.encode(text, options), b.encode(text, options)) << text << " split " << split;
        EXPECT_EQ(a.decode(a.encode(text, options)), text);
        EXPECT_EQ(b.decode(a.encode(text, options)), text);
      }
    }
  }
  EXPECT_FALSE(a.bos_token_id().has_value());
  EXPECT_FALSE(b.bos_token_id().has_value());
  EXPECT_EQ(a.eos_token_id().value_or(-1), b.eos_token_id().value_or(-2));
  EXPECT_EQ(a.special_token_ids(), b.special_token_ids());
}

TEST(TokenizerInterface, LatheBpeSpecialTokens) {
  const BpeTokenizer own = small_lathe_tokenizer();
  const Tokenizer& tokenizer = own;
  const int32_t end = own.token_to_id("<|im_end|>");
  ASSERT_GE(end, 256);
  const std::vector<int32_t> recognised = tokenizer.encode("x<|im_end|>", {});
  EXPECT_EQ(recognised.back(), end);
  const std::vector<int32_t> as_text = tokenizer.encode("x<|im_end|>", {.split_special_tokens = true});
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), end), 0);
  EXPECT_EQ(tokenizer.encode("x", {.add_special_tokens = true}), tokenizer.encode("x", {}));  // no post-processor
  EXPECT_FALSE(tokenizer.bos_token_id().has_value());
  EXPECT_EQ(tokenizer.eos_token_id().value_or(-1), own.token_to_id("<|endoftext|>"));
  EXPECT_TRUE(tokenizer.is_special(end));
  EXPECT_FALSE(tokenizer.is_special('x'));
  EXPECT_FALSE(tokenizer.is_special(-1));
  EXPECT_FALSE(tokenizer.is_special(static_cast<int32_t>(tokenizer.vocab_size())));
  EXPECT_EQ(tokenizer.added_token_id("<|im_end|>"), end);
  EXPECT_EQ(tokenizer.added_token_id("x"), -1);  // a byte token is no added token
  EXPECT_EQ(tokenizer.special_token_ids().size(), 3u);
  EXPECT_EQ(tokenizer.decode(recognised), "x<|im_end|>");
  EXPECT_EQ(tokenizer.decode(recognised, /*skip_special_tokens=*/true), "x");
}

TEST(TokenizerInterface, HuggingFaceSentencePieceSpecialTokens) {
  const HfTokenizer hf = HfTokenizer::from_json(sentencepiece_json(), "sp.json");
  const Tokenizer& tokenizer = hf;
  // "▁ab▁ab": a+b (rank 0) twice, then ▁+ab (rank 1) twice.
  EXPECT_EQ(tokenizer.encode("ab ab", {}), (std::vector<int32_t>{10, 10}));
  EXPECT_EQ(tokenizer.encode("ab ab", {.add_special_tokens = true}), (std::vector<int32_t>{1, 10, 10}));
  EXPECT_EQ(tokenizer.encode("\u20ac", {}), (std::vector<int32_t>{6, 3, 4, 5}));  // ▁, then bytes E2 82 AC
  // "<s>" cut out before normalization, the rest normalized on its own ("▁ab")...
  EXPECT_EQ(tokenizer.encode("<s>ab", {}), (std::vector<int32_t>{1, 10}));
  // ...or left in the text: "▁<s>ab" where '<', 's', '>' have no token and no byte token (one fused unk).
  EXPECT_EQ(tokenizer.encode("<s>ab", {.split_special_tokens = true}), (std::vector<int32_t>{6, 0, 9}));
  EXPECT_EQ(tokenizer.bos_token_id().value_or(-1), 1);
  EXPECT_EQ(tokenizer.eos_token_id().value_or(-1), 2);  // spelled </s>
  EXPECT_EQ(tokenizer.special_token_ids(), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(tokenizer.added_token_id("</s>"), 2);
  EXPECT_EQ(tokenizer.added_token_id("ab"), -1);  // a vocabulary entry, not an added token
  EXPECT_EQ(tokenizer.token_to_id("ab"), 9);
  EXPECT_EQ(tokenizer.decode({1, 10, 10, 2}), "<s> ab ab</s>");
  EXPECT_EQ(tokenizer.decode({1, 10, 10, 2}, /*skip_special_tokens=*/true), "ab ab");
}

TEST(TokenizerInterface, EosOnlyWhereTheTokenizerHasOne) {
  Json json = sentencepiece_json();
  json.set("post_processor", nullptr);
  Json added = Json::array();
  added.push(json.get("added_tokens").items()[0]);
  json.set("added_tokens", added);
  Json model = json.get("model");
  Json vocab = Json::object();
  for (const auto& [token, id] : model.get("vocab").members())
    if (token != "<s>" && token != "</s>") vocab.append_member(token, id);
  model.set("vocab", vocab);
  json.set("model", model);
  const HfTokenizer hf = HfTokenizer::from_json(json, "no_specials.json");
  EXPECT_FALSE(hf.bos_token_id().has_value());
  EXPECT_FALSE(hf.eos_token_id().has_value());
}

TEST(StreamingDecoderHf, ContextKeepsTheLeadingSpaceAndByteTokensWaitForTheirCharacter) {
  const HfTokenizer hf = HfTokenizer::from_json(sentencepiece_json(), "sp.json");
  // After <s>, "▁ab" shows its space, as in decode({1, 10}) = "<s> ab".
  StreamingDecoder after_bos(hf, {1});
  EXPECT_EQ(after_bos.push(10), " ab");
  EXPECT_EQ(after_bos.push(3), "");  // E2: U+FFFD for now, held back
  EXPECT_EQ(after_bos.push(4), "");  // E2 82
  EXPECT_EQ(after_bos.push(5), "\u20ac");
  EXPECT_EQ(after_bos.push(10), " ab");
  EXPECT_EQ(after_bos.finish(), "");
  // Without context the first token reads as decode() gives it alone.
  StreamingDecoder fresh(hf);
  EXPECT_EQ(fresh.push(10), "ab");
  EXPECT_EQ(fresh.push(3), "");
  EXPECT_EQ(fresh.finish(), "\ufffd");  // a character that never completed, as decode() shows it
  // Long streams: the pieces always add up to decode() of the whole.
  std::vector<int32_t> ids = {1};
  std::string streamed;
  StreamingDecoder long_stream(hf, ids);
  for (int i = 0; i < 50; ++i) {
    for (int32_t id : {10, 6, 3, 4, 5, 9, 2}) {
      ids.push_back(id);
      streamed += long_stream.push(id);
    }
  }
  streamed += long_stream.finish();
  EXPECT_EQ(hf.decode({1}) + streamed, hf.decode(ids));
}

}  // namespace
}  // namespace lathe

// SFT data: JSONL parsing and its errors, tokenization with the response-only mask (exact ids and
// targets worked out by hand for a byte tokenizer: every byte is its own id, special tokens
// 1000+), truncation and dropping, the train/validation split with a real BpeTokenizer, and the
// loader's order, batch-size independence and state/restore.
#include "lathe/data/sft_dataset.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "lathe/core/error.h"
#include "lathe/data/sft_data_loader.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/hf_tokenizer.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Bytes are their own ids; <|im_start|> = 1000, <|im_end|> = 1001.
TextEncoder byte_encoder() {
  TextEncoder encoder;
  encoder.encode_text = [](std::string_view text, std::vector<int32_t>& ids) {
    for (unsigned char byte : text) ids.push_back(byte);
  };
  encoder.special_token_id = [](std::string_view spelling) {
    static const std::map<std::string, int32_t, std::less<>> kIds = {{"<|im_start|>", 1000}, {"<|im_end|>", 1001}};
    auto found = kIds.find(spelling);
    return found == kIds.end() ? -1 : found->second;
  };
  return encoder;
}

TokenizedExample chatml_hi_ok() {
  auto has = [](std::string_view spelling) { return byte_encoder().special_token_id(spelling) >= 0; };
  return tokenize_pieces(format_chat(ChatTemplate::chatml, {{ChatRole::user, "hi"}, {ChatRole::assistant, "ok"}}, has),
                         byte_encoder());
}

TEST(SftRecord, PromptResponseBecomesUserThenAssistant) {
  SftConversation conversation =
      parse_sft_record(Json::parse(R"({"prompt": "2+2?", "response": "4", "id": 7})"), "f:1");
  ASSERT_EQ(conversation.messages.size(), 2u);
  EXPECT_EQ(conversation.messages[0].role, ChatRole::user);
  EXPECT_EQ(conversation.messages[0].content, "2+2?");
  EXPECT_EQ(conversation.messages[1].role, ChatRole::assistant);
  EXPECT_EQ(conversation.messages[1].content, "4");
}

TEST(SftRecord, MessagesKeepTheirRolesInOrder) {
  SftConversation conversation = parse_sft_record(
      Json::parse(R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},)"
                  R"( {"role": "assistant", "content": "a"}]})"),
      "f:1");
  ASSERT_EQ(conversation.messages.size(), 3u);
  EXPECT_EQ(conversation.messages[0].role, ChatRole::system);
  EXPECT_EQ(conversation.messages[2].content, "a");
}

TEST(SftRecord, BadRecordsNameTheLocationAndTheProblem) {
  auto parse = [](const char* text) { return error_of([&] { parse_sft_record(Json::parse(text), "d.jsonl:4"); }); };
  EXPECT_EQ(parse(R"({"prompt": "x"})"),
            "d.jsonl:4: expected \"prompt\" and \"response\", or \"messages\" "
            "(\"response\" is missing)");
  EXPECT_EQ(parse(R"({"prompt": "x", "response": 3})"), "d.jsonl:4: \"response\" must be a string, got 3");
  EXPECT_EQ(parse(R"([1])"), "d.jsonl:4: expected a JSON object with \"prompt\"/\"response\" or \"messages\"");
  EXPECT_EQ(parse(R"({"messages": [{"role": "bot", "content": "x"}]})"),
            "d.jsonl:4: messages[0]: unknown role \"bot\" (expected system, user or assistant)");
  EXPECT_EQ(parse(R"({"messages": [{"role": "user"}]})"),
            "d.jsonl:4: messages[0]: expected an object with \"role\" and \"content\"");
  EXPECT_EQ(parse(R"({"messages": [{"role": "user", "content": "x"}]})"),
            "d.jsonl:4: no assistant message, so nothing to learn");
  EXPECT_EQ(parse(R"({"messages": "x"})"), "d.jsonl:4: \"messages\" must be an array, got \"x\"");
  EXPECT_NE(parse(R"({"messages": [], "prompt": "x"})").find("has both"), std::string::npos);
}

TEST(SftJsonl, SkipsBlankLinesAndReportsTheLineOfABadOne) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("data.jsonl");
  write_text(path, "{\"prompt\": \"a\", \"response\": \"b\"}\n\n{\"prompt\": \"c\", \"response\": \"d\"}\r\n");
  std::vector<SftConversation> conversations = read_sft_jsonl(path);
  ASSERT_EQ(conversations.size(), 2u);
  EXPECT_EQ(conversations[1].line, 3);
  EXPECT_EQ(conversations[1].messages[1].content, "d");

  write_text(path, "{\"prompt\": \"a\", \"response\": \"b\"}\n{\"prompt\": \"a\", \"response\": \n");
  EXPECT_EQ(error_of([&] { read_sft_jsonl(path); }).rfind(path + ":2: invalid JSON", 0), 0u);
  write_text(path, "\n\n");
  EXPECT_NE(error_of([&] { read_sft_jsonl(path); }).find("no conversations"), std::string::npos);
  EXPECT_NE(error_of([&] { read_sft_jsonl(scratch.file("missing.jsonl")); }).find("cannot open"), std::string::npos);
}

// ids: <|im_start|> u s e r \n h i <|im_end|> \n <|im_start|> a s s i s t a n t \n o k <|im_end|> \n
//      0            1-5        6-7 8          9  10           11-20               21-22 23       24
TEST(SftTokenize, ChatmlMaskCoversOnlyTheAnswerAndItsEndToken) {
  TokenizedExample example = chatml_hi_ok();
  std::vector<int32_t> expected_ids = {1000, 'u', 's', 'e', 'r', '\n', 'h', 'i',  1001, '\n', 1000, 'a', 's',
                                       's',  'i', 's', 't', 'a', 'n',  't', '\n', 'o',  'k',  1001, '\n'};
  EXPECT_EQ(example.ids, expected_ids);
  std::vector<uint8_t> expected_trainable(25, 0);
  expected_trainable[21] = expected_trainable[22] = expected_trainable[23] = 1;
  EXPECT_EQ(example.trainable, expected_trainable);
}

TEST(SftTokenize, RowIsShiftedMaskedAndPadded) {
  TokenizedExample example = chatml_hi_ok();
  constexpr int64_t kSeqLen = 30;
  std::vector<int32_t> inputs(kSeqLen, 77), targets(kSeqLen, 77);  // poison
  EXPECT_EQ(fill_sft_row(example, kSeqLen, inputs.data(), targets.data()), 3);
  for (int64_t t = 0; t < kSeqLen; ++t) {
    EXPECT_EQ(inputs[t], t < 25 ? example.ids[t] : kPadInput) << t;
    const int32_t expected = t == 20 ? 'o' : t == 21 ? 'k' : t == 22 ? 1001 : kIgnoreTarget;
    EXPECT_EQ(targets[t], expected) << t;
  }
}

TEST(SftTokenize, TruncationKeepsTheStartAndDropsExamplesWithoutATarget) {
  TokenizedExample example = chatml_hi_ok();
  EXPECT_TRUE(has_trainable_target(example, 22));   // tokens 0..22 reach o, k
  EXPECT_TRUE(has_trainable_target(example, 21));   // token 21 ('o') is the target of position 20
  EXPECT_FALSE(has_trainable_target(example, 20));  // tokens 0..20: no answer token left
  std::vector<int32_t> inputs(22), targets(22);
  EXPECT_EQ(fill_sft_row(example, 22, inputs.data(), targets.data()), 2);  // o, k; <|im_end|> cut off
  EXPECT_EQ(inputs[21], 'o');
  EXPECT_EQ(targets[20], 'o');
  EXPECT_EQ(targets[21], 'k');
  EXPECT_EQ(targets[19], kIgnoreTarget);
}

// Bytes are their own ids, except that "ab" is one token (500): a merge across a piece boundary.
TextEncoder merging_encoder() {
  TextEncoder encoder = byte_encoder();
  encoder.encode_text = [](std::string_view text, std::vector<int32_t>& ids) {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.substr(i, 2) == "ab") {
        ids.push_back(500);
        ++i;
      } else {
        ids.push_back(static_cast<unsigned char>(text[i]));
      }
    }
  };
  return encoder;
}

TEST(SftTokenize, TextRunsEncodeJoinedWhenBoundariesAreTokenBoundariesElsePieceByPiece) {
  const TextEncoder encoder = merging_encoder();
  // "xa" + "c": ids of "xa" are a prefix of those of "xac": the joined encoding, mask after 'a'.
  TokenizedExample clean = tokenize_pieces({{"xa", false, false}, {"c", false, true}}, encoder);
  EXPECT_EQ(clean.ids, (std::vector<int32_t>{'x', 'a', 'c'}));
  EXPECT_EQ(clean.trainable, (std::vector<uint8_t>{0, 0, 1}));
  // "xab" joined is x, 500 and both ends in "ab" across the boundary: each piece on its own.
  TokenizedExample split = tokenize_pieces({{"xa", false, false}, {"b", false, true}}, encoder);
  EXPECT_EQ(split.ids, (std::vector<int32_t>{'x', 'a', 'b'}));
  EXPECT_EQ(split.trainable, (std::vector<uint8_t>{0, 0, 1}));
  // Neighbouring pieces with the same mask are encoded as one; a special token ends a run.
  TokenizedExample merged = tokenize_pieces(
      {{"ab", false, false}, {"<|im_end|>", true, true}, {"a", false, false}, {"b", false, false}}, encoder);
  EXPECT_EQ(merged.ids, (std::vector<int32_t>{500, 1001, 500}));
  EXPECT_EQ(merged.trainable, (std::vector<uint8_t>{0, 1, 0}));
}

TEST(SftTokenize, ChatmlIdsEqualTheWholeRenderedTextEncodedAtOnce) {
  BpeTokenizer tokenizer = BpeTokenizer::train({"user: what is the answer?\nassistant: the answer is 42.\n"}, 256 + 40,
                                               {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  const TextEncoder encoder = text_encoder_for(tokenizer, /*split_special_tokens=*/true);
  auto has = [&](std::string_view spelling) { return encoder.special_token_id(spelling) >= 0; };
  TokenizedExample example = tokenize_pieces(
      format_chat(ChatTemplate::chatml,
                  {{ChatRole::user, "what is the answer?"}, {ChatRole::assistant, "the answer is 42."}}, has),
      encoder);
  const std::string rendered =
      "<|im_start|>user\nwhat is the answer?<|im_end|>\n<|im_start|>assistant\nthe answer is 42.<|im_end|>\n";
  EXPECT_EQ(example.ids, tokenizer.encode(rendered, /*allow_special=*/true));
  // The trainer reads tokenizers through HfTokenizer (any HF tokenizer.json): the same ids.
  const HfTokenizer hf_tokenizer = HfTokenizer::from_json(tokenizer.to_json(), "ours.json");
  const TextEncoder hf_encoder = text_encoder_for(hf_tokenizer, /*split_special_tokens=*/false);
  EXPECT_EQ(tokenize_pieces(
                format_chat(ChatTemplate::chatml,
                            {{ChatRole::user, "what is the answer?"}, {ChatRole::assistant, "the answer is 42."}}, has),
                hf_encoder)
                .ids,
            example.ids);
  // The trainable ids decode to the answer and its end token.
  std::vector<int32_t> trainable_ids;
  for (size_t i = 0; i < example.ids.size(); ++i)
    if (example.trainable[i]) trainable_ids.push_back(example.ids[i]);
  EXPECT_EQ(tokenizer.decode(trainable_ids), "the answer is 42.<|im_end|>");
}

TEST(SftTokenize, MessageTextCannotInjectSpecialTokens) {
  BpeTokenizer tokenizer =
      BpeTokenizer::train({"hello there"}, 256 + 3, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  TextEncoder encoder = text_encoder_for(tokenizer, /*split_special_tokens=*/true);
  std::vector<int32_t> ids;
  encoder.encode_text("<|im_end|>", ids);
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(encoder.special_token_id("<|im_end|>"), tokenizer.token_to_id("<|im_end|>"));
  EXPECT_EQ(encoder.special_token_id("<|nope|>"), -1);
  EXPECT_EQ(encoder.special_token_id("h"), -1);  // a byte token is not a special token
}

// n conversations "question i" -> "answer i" in a JSONL file.
std::string write_conversations(const ScratchDirectory& scratch, int n, int long_prompt_every = 0) {
  const std::string path = scratch.file("conversations.jsonl");
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    std::string prompt = "question " + std::to_string(i);
    if (long_prompt_every > 0 && i % long_prompt_every == 0) prompt += std::string(200, 'x');
    out << "{\"prompt\": \"" << prompt << "\", \"response\": \"answer " << i << "\"}\n";
  }
  return path;
}

TEST(SftDatasetPrepare, SplitsDropsTooLongPromptsAndPicksChatmlFromTheTokenizer) {
  ScratchDirectory scratch;
  BpeTokenizer tokenizer =
      BpeTokenizer::train({"question answer"}, 256 + 3, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  SftDatasetOptions options;
  options.path = write_conversations(scratch, 40, /*long_prompt_every=*/10);
  options.seq_len = 64;
  options.val_fraction = 0.1;
  options.seed = test_seed();
  SftDataset dataset =
      prepare_sft_dataset(options, text_encoder_for(tokenizer, /*split_special_tokens=*/true), nullptr);
  EXPECT_EQ(dataset.chat_template, ChatTemplate::chatml);
  EXPECT_EQ(dataset.conversations, 40);
  EXPECT_EQ(dataset.dropped, 4);  // conversations 0, 10, 20, 30: 200 prompt bytes > 65 tokens
  EXPECT_EQ(dataset.truncated, 0);
  EXPECT_EQ(dataset.train.size() + dataset.validation.size(), 36u);
  EXPECT_LE(dataset.validation.size(), 4u);  // round(0.1 * 40) held out, minus any dropped among them
  for (const auto* split : {&dataset.train, &dataset.validation})
    for (const TokenizedExample& example : *split) EXPECT_LE(example.ids.size(), 65u);

  options.chat_template = "llama3";
  const std::string error = error_of(
      [&] { prepare_sft_dataset(options, text_encoder_for(tokenizer, /*split_special_tokens=*/true), nullptr); });
  EXPECT_NE(error.find("conversations.jsonl:"), std::string::npos) << error;  // the first line in shuffled order
  EXPECT_NE(error.find(": chat template llama3 needs the special token <|begin_of_text|>"), std::string::npos) << error;
}

std::vector<TokenizedExample> numbered_examples(int count) {
  std::vector<TokenizedExample> examples;
  for (int i = 0; i < count; ++i) examples.push_back({{i, i + 100, i + 200}, {0, 1, 1}});
  return examples;
}

// Rows of a batch, as the first input id of each (= the example number).
std::vector<int32_t> take_batch(SftDataLoader& loader, int64_t rows, int64_t seq_len) {
  Tensor inputs = Tensor::empty({rows, seq_len}, DType::i32), targets = Tensor::empty({rows, seq_len}, DType::i32);
  loader.next_batch(inputs, targets);
  std::vector<int32_t> firsts;
  for (int64_t row = 0; row < rows; ++row) {
    firsts.push_back(inputs.ptr<int32_t>()[row * seq_len]);
    const int32_t* target = targets.ptr<int32_t>() + row * seq_len;
    EXPECT_EQ(target[0], firsts.back() + 100);
    EXPECT_EQ(target[1], firsts.back() + 200);
    EXPECT_EQ(target[2], kIgnoreTarget);
  }
  return firsts;
}

TEST(SftDataLoader, EachEpochVisitsEveryExampleOnceIndependentOfBatchSize) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << seed);
  SftDataLoader by_two(numbered_examples(6), {}, 4, seed), by_six(numbered_examples(6), {}, 4, seed);
  std::vector<int32_t> pairs;
  for (int i = 0; i < 9; ++i)
    for (int32_t id : take_batch(by_two, 2, 4)) pairs.push_back(id);
  std::vector<int32_t> sixes = take_batch(by_six, 6, 4);
  for (int32_t id : take_batch(by_six, 6, 4)) sixes.push_back(id);
  for (int32_t id : take_batch(by_six, 6, 4)) sixes.push_back(id);
  EXPECT_EQ(pairs, sixes);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<int32_t> seen(sixes.begin() + epoch * 6, sixes.begin() + epoch * 6 + 6);
    EXPECT_EQ(seen.size(), 6u) << "epoch " << epoch;
  }
  EXPECT_EQ(by_six.epoch(), 3);
}

TEST(SftDataLoader, RestoredLoaderContinuesExactlyAndRejectsOtherData) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << seed);
  SftDataLoader original(numbered_examples(5), {}, 4, seed);
  take_batch(original, 3, 4);
  take_batch(original, 3, 4);
  const Json state = Json::parse(original.state().dump());
  SftDataLoader resumed(numbered_examples(5), {}, 4, seed);
  resumed.restore(state);
  EXPECT_EQ(resumed.epoch(), 1);
  EXPECT_EQ(resumed.index_in_epoch(), 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(take_batch(resumed, 3, 4), take_batch(original, 3, 4));

  SftDataLoader other_seed(numbered_examples(5), {}, 4, seed + 1);
  EXPECT_NE(error_of([&] { other_seed.restore(state); }).find("seed"), std::string::npos);
  SftDataLoader other_length(numbered_examples(5), {}, 8, seed);
  EXPECT_NE(error_of([&] { other_length.restore(state); }).find("train.seq_len"), std::string::npos);
  std::vector<TokenizedExample> changed = numbered_examples(5);
  changed[2].trainable[1] = 0;
  SftDataLoader other_data(std::move(changed), {}, 4, seed);
  EXPECT_NE(error_of([&] { other_data.restore(state); }).find("changed since the checkpoint"), std::string::npos);
  Json text_state = Json::object();
  text_state.set("seq_len", 4);
  EXPECT_NE(error_of([&] { other_seed.restore(text_state); }).find("not from an SFT run"), std::string::npos);
}

TEST(SftDataLoader, ValidationBatchesWalkTheHeldOutExamplesInOrder) {
  SftDataLoader loader(numbered_examples(2), numbered_examples(3), 4, 1);
  ASSERT_TRUE(loader.has_validation());
  EXPECT_EQ(loader.validation_batch_count(2), 2);
  Tensor inputs = Tensor::empty({2, 4}, DType::i32), targets = Tensor::empty({2, 4}, DType::i32);
  loader.validation_batch(1, inputs, targets);
  EXPECT_EQ(inputs.ptr<int32_t>()[0], 2);  // example 2
  EXPECT_EQ(inputs.ptr<int32_t>()[4], 0);  // example 3 mod 3 = 0
  EXPECT_EQ(inputs.ptr<int32_t>()[3], kPadInput);
  EXPECT_EQ(targets.ptr<int32_t>()[3], kIgnoreTarget);
}

}  // namespace
}  // namespace lathe

// Chat templates: the exact pieces of each built-in template for a small conversation (written out
// by hand from the format descriptions in chat_template.h), the trainable marks, the system-message
// folding of Gemma and Mistral, auto selection, and the errors for a missing special token.
#include "lathe/data/chat_template.h"

#include <gtest/gtest.h>

#include <set>

#include "lathe/core/error.h"

namespace lathe {
namespace {

HasSpecialToken tokens(std::set<std::string> spellings) {
  return [spellings = std::move(spellings)](std::string_view spelling) {
    return spellings.count(std::string(spelling)) > 0;
  };
}

// One line per piece: "S:" special or "T:" text, "*" when trainable.
std::vector<std::string> describe(const std::vector<ChatPiece>& pieces) {
  std::vector<std::string> lines;
  for (const ChatPiece& piece : pieces)
    lines.push_back(std::string(piece.special ? "S:" : "T:") + piece.text + (piece.trainable ? "*" : ""));
  return lines;
}

const std::vector<ChatMessage> kConversation = {
    {ChatRole::system, "Be brief."}, {ChatRole::user, "Hi"}, {ChatRole::assistant, "Hello"}};

TEST(ChatTemplate, ChatmlMarksAssistantContentAndImEndTrainable) {
  auto pieces = format_chat(ChatTemplate::chatml, kConversation, tokens({"<|im_start|>", "<|im_end|>"}));
  std::vector<std::string> expected = {"S:<|im_start|>", "T:system\n",    "T:Be brief.", "S:<|im_end|>",  "T:\n",
                                       "S:<|im_start|>", "T:user\n",      "T:Hi",        "S:<|im_end|>",  "T:\n",
                                       "S:<|im_start|>", "T:assistant\n", "T:Hello*",    "S:<|im_end|>*", "T:\n"};
  EXPECT_EQ(describe(pieces), expected);
}

TEST(ChatTemplate, Llama3StartsWithBeginOfTextAndEndsTurnsWithEotId) {
  auto pieces = format_chat(ChatTemplate::llama3, {{ChatRole::user, "Hi"}, {ChatRole::assistant, "Hello"}},
                            tokens({"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}));
  std::vector<std::string> expected = {
      "S:<|begin_of_text|>", "S:<|start_header_id|>", "T:user",      "S:<|end_header_id|>", "T:\n\n", "T:Hi",
      "S:<|eot_id|>",        "S:<|start_header_id|>", "T:assistant", "S:<|end_header_id|>", "T:\n\n", "T:Hello*",
      "S:<|eot_id|>*"};
  EXPECT_EQ(describe(pieces), expected);
}

TEST(ChatTemplate, GemmaFoldsTheSystemMessageIntoTheFirstUserTurn) {
  auto pieces = format_chat(ChatTemplate::gemma, kConversation, tokens({"<bos>", "<start_of_turn>", "<end_of_turn>"}));
  std::vector<std::string> expected = {
      "S:<bos>", "S:<start_of_turn>", "T:user\n",  "T:Be brief.\n\nHi", "S:<end_of_turn>",
      "T:\n",    "S:<start_of_turn>", "T:model\n", "T:Hello*",          "S:<end_of_turn>*",
      "T:\n"};
  EXPECT_EQ(describe(pieces), expected);
}

TEST(ChatTemplate, MistralUsesInstTokensWhenTheTokenizerHasThemElseText) {
  const std::vector<std::string> expected_special = {"S:<s>",     "S:[INST]",  "T: Be brief.\n\nHi ",
                                                     "S:[/INST]", "T: Hello*", "S:</s>*"};
  EXPECT_EQ(describe(format_chat(ChatTemplate::mistral, kConversation, tokens({"<s>", "</s>", "[INST]", "[/INST]"}))),
            expected_special);
  const std::vector<std::string> expected_text = {"S:<s>",     "T:[INST]",  "T: Be brief.\n\nHi ",
                                                  "T:[/INST]", "T: Hello*", "S:</s>*"};
  EXPECT_EQ(describe(format_chat(ChatTemplate::mistral, kConversation, tokens({"<s>", "</s>"}))), expected_text);
}

TEST(ChatTemplate, PlainEndsEachAnswerWithTheTokenizersEndToken) {
  const std::vector<ChatMessage> two_turns = {
      {ChatRole::user, "a"}, {ChatRole::assistant, "b"}, {ChatRole::user, "c"}, {ChatRole::assistant, "d"}};
  std::vector<std::string> expected = {"T:a\n", "T:b*", "S:</s>*", "T:c\n", "T:d*", "S:</s>*"};
  EXPECT_EQ(describe(format_chat(ChatTemplate::plain, two_turns, tokens({"</s>", "<s>"}))), expected);
  EXPECT_EQ(format_chat(ChatTemplate::plain, two_turns, tokens({"<|endoftext|>"}))[2].text, "<|endoftext|>");
}

TEST(ChatTemplate, MissingSpecialTokenNamesTemplateAndToken) {
  try {
    format_chat(ChatTemplate::chatml, kConversation, tokens({"<|im_start|>"}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("chatml needs the special token <|im_end|>"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(format_chat(ChatTemplate::plain, kConversation, tokens({})), Error);
}

TEST(ChatTemplate, AutoPicksByTokenizerTokensThenFamily) {
  // The second argument is the family's default template (each family's is tested in
  // models/family_spec_test.cc).
  EXPECT_EQ(resolve_chat_template("auto", "plain", tokens({"<|im_start|>"})), ChatTemplate::chatml);
  EXPECT_EQ(resolve_chat_template("auto", "plain", tokens({"<|start_header_id|>"})), ChatTemplate::llama3);
  EXPECT_EQ(resolve_chat_template("auto", "plain", tokens({"<start_of_turn>"})), ChatTemplate::gemma);
  EXPECT_EQ(resolve_chat_template("auto", "plain", tokens({"[INST]"})), ChatTemplate::mistral);
  EXPECT_EQ(resolve_chat_template("auto", "gemma", tokens({})), ChatTemplate::gemma);
  EXPECT_EQ(resolve_chat_template("auto", "mistral", tokens({})), ChatTemplate::mistral);
  EXPECT_EQ(resolve_chat_template("auto", "chatml", tokens({})), ChatTemplate::chatml);
  EXPECT_EQ(resolve_chat_template("auto", "plain", tokens({"<|endoftext|>"})), ChatTemplate::plain);
  EXPECT_EQ(resolve_chat_template("llama3", "gemma", tokens({"<|im_start|>"})), ChatTemplate::llama3);
  EXPECT_THROW(resolve_chat_template("vicuna", "plain", tokens({})), Error);
}

// The generation prompt is the conversation with an empty assistant turn, cut where the reply's
// content begins (pieces written out by hand from the formats in chat_template.h).
TEST(ChatTemplate, GenerationPromptsEndWhereTheAssistantsContentBegins) {
  const std::vector<ChatMessage> question = {{ChatRole::system, "Be brief."}, {ChatRole::user, "Hi"}};
  EXPECT_EQ(
      describe(format_generation_prompt(ChatTemplate::chatml, question, tokens({"<|im_start|>", "<|im_end|>"}))),
      (std::vector<std::string>{"S:<|im_start|>", "T:system\n", "T:Be brief.", "S:<|im_end|>", "T:\n", "S:<|im_start|>",
                                "T:user\n", "T:Hi", "S:<|im_end|>", "T:\n", "S:<|im_start|>", "T:assistant\n"}));
  EXPECT_EQ(describe(format_generation_prompt(ChatTemplate::gemma, question,
                                              tokens({"<bos>", "<start_of_turn>", "<end_of_turn>"}))),
            (std::vector<std::string>{"S:<bos>", "S:<start_of_turn>", "T:user\n", "T:Be brief.\n\nHi",
                                      "S:<end_of_turn>", "T:\n", "S:<start_of_turn>", "T:model\n"}));
  EXPECT_EQ(describe(format_generation_prompt(ChatTemplate::mistral, {{ChatRole::user, "Hi"}},
                                              tokens({"<s>", "</s>", "[INST]", "[/INST]"}))),
            (std::vector<std::string>{"S:<s>", "S:[INST]", "T: Hi ", "S:[/INST]"}));
  EXPECT_EQ(describe(format_generation_prompt(ChatTemplate::plain, question, tokens({"</s>"}))),
            (std::vector<std::string>{"T:Be brief.\n", "T:Hi\n"}));
  // A second turn keeps the first reply as context.
  const std::vector<ChatMessage> second = {
      {ChatRole::user, "Hi"}, {ChatRole::assistant, "Hello"}, {ChatRole::user, "Bye"}};
  EXPECT_EQ(describe(format_generation_prompt(ChatTemplate::plain, second, tokens({"<|endoftext|>"}))),
            (std::vector<std::string>{"T:Hi\n", "T:Hello*", "S:<|endoftext|>*", "T:Bye\n"}));
}

TEST(ChatTemplate, EachTemplateNamesTheTokenThatEndsAnAssistantTurn) {
  EXPECT_EQ(assistant_turn_end_token(ChatTemplate::chatml, tokens({"<|im_start|>", "<|im_end|>"})), "<|im_end|>");
  EXPECT_EQ(assistant_turn_end_token(ChatTemplate::llama3, tokens({"<|begin_of_text|>", "<|start_header_id|>",
                                                                   "<|end_header_id|>", "<|eot_id|>"})),
            "<|eot_id|>");
  EXPECT_EQ(assistant_turn_end_token(ChatTemplate::gemma, tokens({"<bos>", "<start_of_turn>", "<end_of_turn>"})),
            "<end_of_turn>");
  EXPECT_EQ(assistant_turn_end_token(ChatTemplate::mistral, tokens({"<s>", "</s>"})), "</s>");
  EXPECT_EQ(assistant_turn_end_token(ChatTemplate::plain, tokens({"<eos>"})), "<eos>");
}

// The Jinja form is rendered by transformers in tests/python/hf_oracle_test.py (live checks); here
// only that it spells the template's tokens and refuses a tokenizer without them.
TEST(ChatTemplate, JinjaFormsNeedTheSameTokens) {
  EXPECT_NE(chat_template_jinja(ChatTemplate::plain, tokens({"</s>"})).find("'</s>'"), std::string::npos);
  EXPECT_NE(
      chat_template_jinja(ChatTemplate::chatml, tokens({"<|im_start|>", "<|im_end|>"})).find("add_generation_prompt"),
      std::string::npos);
  EXPECT_THROW(chat_template_jinja(ChatTemplate::gemma, tokens({"<bos>"})), Error);
}

}  // namespace
}  // namespace lathe

// Chat templates for supervised fine-tuning: a conversation (system / user / assistant messages)
// becomes a list of pieces, each either ordinary text or one special token, and each marked
// trainable when the model should learn to produce it (assistant content and the token that ends
// an assistant turn). The templates are written here, in our own code, after the formats the
// model families were trained with:
//   plain   content + "\n" for system/user messages; assistant content + the end token
//           (<|endoftext|>, </s>, <eos> or <|end_of_text|>, whichever the tokenizer has)
//   chatml  Qwen: <|im_start|>ROLE\nCONTENT<|im_end|>\n
//   llama3  <|begin_of_text|> then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
//   gemma   <bos> then <start_of_turn>user|model\nCONTENT<end_of_turn>\n (a system message is
//           prepended to the first user message, separated by a blank line: Gemma has no system role)
//   mistral <s> then [INST] USER [/INST] and " ASSISTANT</s>" (v1 style; [INST] and [/INST] are
//           special tokens when the tokenizer has them, else text; system as for gemma)
// auto (resolve_chat_template) picks by the tokenizer's special tokens first (<|im_start|> ->
// chatml, <|start_header_id|> -> llama3, <start_of_turn> -> gemma, [INST] -> mistral), then the
// model family's default (FamilySpec::default_chat_template: gemma for Gemma, mistral for Mistral,
// chatml for Qwen3, plain otherwise; whoever builds the options asks the family registry).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

enum class ChatRole { system, user, assistant };
const char* to_string(ChatRole role);

struct ChatMessage {
  ChatRole role;
  std::string content;
};

enum class ChatTemplate { plain, chatml, llama3, gemma, mistral };
const char* to_string(ChatTemplate chat_template);
// "plain", "chatml", ... -> the template; throws lathe::Error listing the names otherwise.
ChatTemplate parse_chat_template(const std::string& name);

struct ChatPiece {
  std::string text;  // ordinary text, or the spelling of one special token
  bool special = false;
  bool trainable = false;
};

// has_special_token(spelling): whether the tokenizer has that special token.
using HasSpecialToken = std::function<bool(std::string_view spelling)>;

// name: "auto" or a template name; family_default: the template name the model family falls back
// to. Returns the template to use.
ChatTemplate resolve_chat_template(const std::string& name, const std::string& family_default,
                                   const HasSpecialToken& has_special_token);

// The pieces of one conversation, in order. Throws lathe::Error when the template needs a special
// token the tokenizer lacks (naming the template and the token).
std::vector<ChatPiece> format_chat(ChatTemplate chat_template, const std::vector<ChatMessage>& messages,
                                   const HasSpecialToken& has_special_token);

// What prompts the model for the next assistant turn after `messages`: format_chat of the
// conversation plus an assistant message, cut where that message's content would begin (Hugging
// Face's add_generation_prompt). `lathe generate --chat` feeds this and samples the reply.
std::vector<ChatPiece> format_generation_prompt(ChatTemplate chat_template, const std::vector<ChatMessage>& messages,
                                                const HasSpecialToken& has_special_token);

// The special token that ends an assistant turn: <|im_end|>, <|eot_id|>, <end_of_turn>, </s>, or
// plain's end token. Generation in chat mode stops there; an HF export lists it among the
// generation config's eos_token_id.
std::string assistant_turn_end_token(ChatTemplate chat_template, const HasSpecialToken& has_special_token);

// The same template as a Jinja string for tokenizer_config.json's "chat_template": rendering
// `messages` gives format_chat's text (special pieces spelled out), and add_generation_prompt
// appends what format_generation_prompt adds. Throws as format_chat when a token is missing.
std::string chat_template_jinja(ChatTemplate chat_template, const HasSpecialToken& has_special_token);

}  // namespace lathe

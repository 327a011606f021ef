#include "lathe/data/chat_template.h"

#include <array>

#include "lathe/core/error.h"

namespace lathe {
namespace {

constexpr std::array<ChatTemplate, 5> kTemplates = {ChatTemplate::plain, ChatTemplate::chatml, ChatTemplate::llama3,
                                                    ChatTemplate::gemma, ChatTemplate::mistral};

class PieceList {
 public:
  explicit PieceList(ChatTemplate chat_template, const HasSpecialToken& has_special_token)
      : template_(chat_template), has_special_token_(has_special_token) {}

  void text(std::string text, bool trainable = false) {
    if (!text.empty()) pieces_.push_back({std::move(text), false, trainable});
  }
  void special(const std::string& spelling, bool trainable = false) {
    LATHE_CHECK(has_special_token_(spelling), "chat template ", to_string(template_), " needs the special token ",
                spelling,
                ", which the tokenizer does not have (set data.chat_template to one that fits the tokenizer)");
    pieces_.push_back({spelling, true, trainable});
  }
  // A special token when the tokenizer has it, else the same spelling as text.
  void special_or_text(const std::string& spelling) {
    if (has_special_token_(spelling))
      special(spelling);
    else
      text(spelling);
  }
  std::vector<ChatPiece> take() { return std::move(pieces_); }

 private:
  ChatTemplate template_;
  const HasSpecialToken& has_special_token_;
  std::vector<ChatPiece> pieces_;
};

// Gemma and Mistral have no system role: the system text goes before the first user message.
std::vector<ChatMessage> fold_system_into_user(const std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> folded;
  std::string pending_system;
  for (const ChatMessage& message : messages) {
    if (message.role == ChatRole::system) {
      pending_system += (pending_system.empty() ? "" : "\n\n") + message.content;
    } else if (message.role == ChatRole::user && !pending_system.empty()) {
      folded.push_back({ChatRole::user, pending_system + "\n\n" + message.content});
      pending_system.clear();
    } else {
      folded.push_back(message);
    }
  }
  if (!pending_system.empty()) folded.insert(folded.begin(), {ChatRole::user, pending_system});
  return folded;
}

const char* plain_end_token(const HasSpecialToken& has_special_token) {
  for (const char* spelling : {"<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>"})
    if (has_special_token(spelling)) return spelling;
  throw Error(
      "chat template plain needs an end token (<|endoftext|>, </s>, <eos> or <|end_of_text|>); the tokenizer has none");
}

}  // namespace

const char* to_string(ChatRole role) {
  switch (role) {
    case ChatRole::system:
      return "system";
    case ChatRole::user:
      return "user";
    case ChatRole::assistant:
      return "assistant";
  }
  return "?";
}

const char* to_string(ChatTemplate chat_template) {
  switch (chat_template) {
    case ChatTemplate::plain:
      return "plain";
    case ChatTemplate::chatml:
      return "chatml";
    case ChatTemplate::llama3:
      return "llama3";
    case ChatTemplate::gemma:
      return "gemma";
    case ChatTemplate::mistral:
      return "mistral";
  }
  return "?";
}

ChatTemplate parse_chat_template(const std::string& name) {
  for (ChatTemplate chat_template : kTemplates)
    if (name == to_string(chat_template)) return chat_template;
  throw Error(str_cat("unknown chat template '", name, "': expected auto, plain, chatml, llama3, gemma or mistral"));
}

ChatTemplate resolve_chat_template(const std::string& name, const std::string& family_default,
                                   const HasSpecialToken& has_special_token) {
  if (name != "auto") return parse_chat_template(name);
  if (has_special_token("<|im_start|>")) return ChatTemplate::chatml;
  if (has_special_token("<|start_header_id|>")) return ChatTemplate::llama3;
  if (has_special_token("<start_of_turn>")) return ChatTemplate::gemma;
  if (has_special_token("[INST]")) return ChatTemplate::mistral;
  return parse_chat_template(family_default);
}

std::vector<ChatPiece> format_chat(ChatTemplate chat_template, const std::vector<ChatMessage>& messages,
                                   const HasSpecialToken& has_special_token) {
  PieceList pieces(chat_template, has_special_token);
  switch (chat_template) {
    case ChatTemplate::plain: {
      const std::string end = plain_end_token(has_special_token);
      for (const ChatMessage& message : messages) {
        if (message.role == ChatRole::assistant) {
          pieces.text(message.content, true);
          pieces.special(end, true);
        } else {
          pieces.text(message.content + "\n");
        }
      }
      break;
    }
    case ChatTemplate::chatml:
      for (const ChatMessage& message : messages) {
        const bool trainable = message.role == ChatRole::assistant;
        pieces.special("<|im_start|>");
        pieces.text(std::string(to_string(message.role)) + "\n");
        pieces.text(message.content, trainable);
        pieces.special("<|im_end|>", trainable);
        pieces.text("\n");
      }
      break;
    case ChatTemplate::llama3:
      pieces.special("<|begin_of_text|>");
      for (const ChatMessage& message : messages) {
        const bool trainable = message.role == ChatRole::assistant;
        pieces.special("<|start_header_id|>");
        pieces.text(to_string(message.role));
        pieces.special("<|end_header_id|>");
        pieces.text("\n\n");
        pieces.text(message.content, trainable);
        pieces.special("<|eot_id|>", trainable);
      }
      break;
    case ChatTemplate::gemma:
      pieces.special("<bos>");
      for (const ChatMessage& message : fold_system_into_user(messages)) {
        const bool trainable = message.role == ChatRole::assistant;
        pieces.special("<start_of_turn>");
        pieces.text(trainable ? "model\n" : "user\n");
        pieces.text(message.content, trainable);
        pieces.special("<end_of_turn>", trainable);
        pieces.text("\n");
      }
      break;
    case ChatTemplate::mistral:
      pieces.special("<s>");
      for (const ChatMessage& message : fold_system_into_user(messages)) {
        if (message.role == ChatRole::assistant) {
          pieces.text(" " + message.content, true);
          pieces.special("</s>", true);
        } else {
          pieces.special_or_text("[INST]");
          pieces.text(" " + message.content + " ");
          pieces.special_or_text("[/INST]");
        }
      }
      break;
  }
  return pieces.take();
}

std::vector<ChatPiece> format_generation_prompt(ChatTemplate chat_template, const std::vector<ChatMessage>& messages,
                                                const HasSpecialToken& has_special_token) {
  std::vector<ChatMessage> with_reply = messages;
  with_reply.push_back({ChatRole::assistant, ""});
  std::vector<ChatPiece> pieces = format_chat(chat_template, with_reply, has_special_token);
  // The empty reply leaves only its trainable end (and maybe a separator after it): cut before it.
  size_t end = pieces.size();
  while (end > 0 && !pieces[end - 1].trainable) --end;
  while (end > 0 && pieces[end - 1].trainable) --end;
  pieces.resize(end);
  return pieces;
}

std::string assistant_turn_end_token(ChatTemplate chat_template, const HasSpecialToken& has_special_token) {
  const std::vector<ChatPiece> pieces =
      format_chat(chat_template, {{ChatRole::user, "u"}, {ChatRole::assistant, "a"}}, has_special_token);
  for (auto piece = pieces.rbegin(); piece != pieces.rend(); ++piece)
    if (piece->special && piece->trainable) return piece->text;
  throw Error(str_cat("chat template ", to_string(chat_template), " has no token that ends an assistant turn"));
}

namespace {

// Jinja string literal of `text` (single quotes).
std::string jinja_string(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') quoted += '\\';
    if (c == '\n') {
      quoted += "\\n";
      continue;
    }
    quoted += c;
  }
  return quoted + "'";
}

// Gemma and Mistral fold system messages into the next user message (fold_system_into_user).
constexpr const char* kFoldSystemJinja =
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{%- set ns.system = ns.system + ('\\n\\n' if ns.system else '') + message['content'] -%}"
    "{%- else -%}"
    "{%- set content = message['content'] -%}"
    "{%- if message['role'] == 'user' and ns.system -%}"
    "{%- set content = ns.system + '\\n\\n' + content -%}{%- set ns.system = '' -%}"
    "{%- endif -%}";

}  // namespace

std::string chat_template_jinja(ChatTemplate chat_template, const HasSpecialToken& has_special_token) {
  // Checks the tokenizer has what the template needs, with the same error as format_chat.
  format_chat(chat_template, {{ChatRole::system, "s"}, {ChatRole::user, "u"}, {ChatRole::assistant, "a"}},
              has_special_token);
  switch (chat_template) {
    case ChatTemplate::plain:
      return "{%- for message in messages -%}"
             "{%- if message['role'] == 'assistant' -%}{{ message['content'] + " +
             jinja_string(plain_end_token(has_special_token)) +
             " }}"
             "{%- else -%}{{ message['content'] + '\\n' }}{%- endif -%}"
             "{%- endfor -%}";
    case ChatTemplate::chatml:
      return "{%- for message in messages -%}"
             "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
             "{%- endfor -%}"
             "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";
    case ChatTemplate::llama3:
      return "{{- '<|begin_of_text|>' -}}"
             "{%- for message in messages -%}"
             "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] + "
             "'<|eot_id|>' }}"
             "{%- endfor -%}"
             "{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
             "{%- endif -%}";
    case ChatTemplate::gemma:
      return std::string("{{- '<bos>' -}}") + kFoldSystemJinja +
             "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\\n' + content + "
             "'<end_of_turn>\\n' }}"
             "{%- endif -%}{%- endfor -%}"
             "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}";
    case ChatTemplate::mistral:
      return std::string("{{- '<s>' -}}") + kFoldSystemJinja +
             "{%- if message['role'] == 'assistant' -%}{{ ' ' + content + '</s>' }}"
             "{%- else -%}{{ '[INST] ' + content + ' [/INST]' }}{%- endif -%}"
             "{%- endif -%}{%- endfor -%}";
  }
  return "";
}

}  // namespace lathe

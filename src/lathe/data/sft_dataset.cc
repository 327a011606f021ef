#include "lathe/data/sft_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "lathe/core/error.h"
#include "lathe/data/shuffle.h"
#include "lathe/io/compressed_file.h"
#include "lathe/text/tokenizer.h"

namespace lathe {
namespace {

const std::string& string_member(const Json& record, const char* key, const std::string& where) {
  const Json& value = record.get(key);
  LATHE_CHECK(value.is_string(), where, ": \"", key, "\" must be a string, got ", value.dump(0));
  return value.as_string();
}

ChatRole parse_role(const Json& value, const std::string& where) {
  LATHE_CHECK(value.is_string(), where, ": \"role\" must be a string, got ", value.dump(0));
  const std::string& role = value.as_string();
  for (ChatRole candidate : {ChatRole::system, ChatRole::user, ChatRole::assistant})
    if (role == to_string(candidate)) return candidate;
  throw Error(str_cat(where, ": unknown role \"", role, "\" (expected system, user or assistant)"));
}

}  // namespace

SftConversation parse_sft_record(const Json& record, const std::string& where) {
  LATHE_CHECK(record.is_object(), where, ": expected a JSON object with \"prompt\"/\"response\" or \"messages\"");
  const bool has_prompt = record.find("prompt") != nullptr, has_response = record.find("response") != nullptr;
  const bool has_messages = record.find("messages") != nullptr;
  SftConversation conversation;
  if (has_messages) {
    LATHE_CHECK(!has_prompt && !has_response, where,
                ": has both \"messages\" and \"prompt\"/\"response\" (expected one form)");
    const Json& messages = record.get("messages");
    LATHE_CHECK(messages.is_array(), where, ": \"messages\" must be an array, got ", messages.dump(0));
    for (size_t i = 0; i < messages.items().size(); ++i) {
      const Json& message = messages.items()[i];
      const std::string message_where = str_cat(where, ": messages[", i, "]");
      LATHE_CHECK(message.is_object() && message.find("role") && message.find("content"), message_where,
                  ": expected an object with \"role\" and \"content\"");
      conversation.messages.push_back(
          {parse_role(message.get("role"), message_where), string_member(message, "content", message_where)});
    }
  } else {
    LATHE_CHECK(has_prompt && has_response, where, ": expected \"prompt\" and \"response\", or \"messages\"",
                has_prompt     ? " (\"response\" is missing)"
                : has_response ? " (\"prompt\" is missing)"
                               : "");
    conversation.messages.push_back({ChatRole::user, string_member(record, "prompt", where)});
    conversation.messages.push_back({ChatRole::assistant, string_member(record, "response", where)});
  }
  const bool has_assistant =
      std::any_of(conversation.messages.begin(), conversation.messages.end(),
                  [](const ChatMessage& message) { return message.role == ChatRole::assistant; });
  LATHE_CHECK(has_assistant, where, ": no assistant message, so nothing to learn");
  return conversation;
}

std::vector<SftConversation> read_sft_jsonl(const std::string& path) {
  std::error_code error;
  LATHE_CHECK(!std::filesystem::exists(path, error) || std::filesystem::is_regular_file(path, error),
              "data.path: ", path, " is not a regular file (a FIFO or device would be read forever)");
  std::vector<SftConversation> conversations;
  for_each_decoded_line(path, [&](std::string_view line, int64_t number) {  // .gz / .zst too
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    const std::string where = str_cat(path, ":", number);
    Json record;
    try {
      record = Json::parse(std::string(line));
    } catch (const Error& error) {
      throw Error(str_cat(where, ": ", error.what()));
    }
    conversations.push_back(parse_sft_record(record, where));
    conversations.back().line = number;
  });
  LATHE_CHECK(!conversations.empty(), path, ": no conversations (expected JSONL lines with \"prompt\"/\"response\" ",
              "or \"messages\")");
  return conversations;
}

TextEncoder text_encoder_for(const Tokenizer& tokenizer, bool split_special_tokens) {
  TextEncoder encoder;
  encoder.encode_text = [&tokenizer, split_special_tokens](std::string_view text, std::vector<int32_t>& ids) {
    tokenizer.encode_append(text, ids, {.add_special_tokens = false, .split_special_tokens = split_special_tokens});
  };
  encoder.special_token_id = [&tokenizer](std::string_view spelling) { return tokenizer.added_token_id(spelling); };
  return encoder;
}

HasSpecialToken has_special_token_of(const Tokenizer& tokenizer) {
  return [&tokenizer](std::string_view spelling) { return tokenizer.added_token_id(spelling) >= 0; };
}

namespace {

struct TextSegment {
  std::string text;
  bool trainable;
};

// Encodes a run of text (no special token inside), in segments of alternating trainable flag. The
// joined text is encoded once; when the ids of every prefix of segments are a prefix of those ids,
// the mask boundaries fall on them and the result is exactly the joined encoding. Otherwise (a
// merge or a pre-token spans a boundary) each segment is encoded on its own.
void encode_text_run(const std::vector<TextSegment>& run, const TextEncoder& encoder, TokenizedExample& example) {
  std::string joined;
  for (const TextSegment& segment : run) joined += segment.text;
  std::vector<int32_t> joined_ids;
  encoder.encode_text(joined, joined_ids);
  std::vector<size_t> ends;  // the ids of segments 0..k end at ends[k]
  std::string prefix;
  for (size_t k = 0; k + 1 < run.size(); ++k) {
    prefix += run[k].text;
    std::vector<int32_t> prefix_ids;
    encoder.encode_text(prefix, prefix_ids);
    const bool clean = prefix_ids.size() <= joined_ids.size() &&
                       std::equal(prefix_ids.begin(), prefix_ids.end(), joined_ids.begin()) &&
                       (ends.empty() || prefix_ids.size() >= ends.back());
    if (!clean) {
      for (const TextSegment& segment : run) {
        encoder.encode_text(segment.text, example.ids);
        example.trainable.resize(example.ids.size(), segment.trainable ? 1 : 0);
      }
      return;
    }
    ends.push_back(prefix_ids.size());
  }
  ends.push_back(joined_ids.size());
  size_t begin = 0;
  for (size_t k = 0; k < run.size(); ++k) {
    example.ids.insert(example.ids.end(), joined_ids.begin() + static_cast<std::ptrdiff_t>(begin),
                       joined_ids.begin() + static_cast<std::ptrdiff_t>(ends[k]));
    example.trainable.resize(example.ids.size(), run[k].trainable ? 1 : 0);
    begin = ends[k];
  }
}

}  // namespace

TokenizedExample tokenize_pieces(const std::vector<ChatPiece>& pieces, const TextEncoder& encoder) {
  TokenizedExample example;
  std::vector<TextSegment> run;
  for (const ChatPiece& piece : pieces) {
    if (!piece.special) {
      if (!run.empty() && run.back().trainable == piece.trainable)
        run.back().text += piece.text;
      else
        run.push_back({piece.text, piece.trainable});
      continue;
    }
    if (!run.empty()) encode_text_run(run, encoder, example);
    run.clear();
    const int32_t id = encoder.special_token_id(piece.text);
    LATHE_ASSERT(id >= 0);  // format_chat checked the tokenizer has it
    example.ids.push_back(id);
    example.trainable.push_back(piece.trainable ? 1 : 0);
  }
  if (!run.empty()) encode_text_run(run, encoder, example);
  return example;
}

bool has_trainable_target(const TokenizedExample& example, int64_t seq_len) {
  const int64_t end = std::min<int64_t>(static_cast<int64_t>(example.ids.size()), seq_len + 1);
  for (int64_t t = 1; t < end; ++t)
    if (example.trainable[static_cast<size_t>(t)]) return true;
  return false;
}

int64_t fill_sft_row(const TokenizedExample& example, int64_t seq_len, int32_t* input_row, int32_t* target_row) {
  const int64_t length = static_cast<int64_t>(example.ids.size());
  int64_t valid = 0;
  for (int64_t t = 0; t < seq_len; ++t) {
    input_row[t] = t < length ? example.ids[static_cast<size_t>(t)] : kPadInput;
    const bool learn = t + 1 < length && example.trainable[static_cast<size_t>(t + 1)];
    target_row[t] = learn ? example.ids[static_cast<size_t>(t + 1)] : kIgnoreTarget;
    valid += learn ? 1 : 0;
  }
  return valid;
}

SftDataset prepare_sft_dataset(const SftDatasetOptions& options, const TextEncoder& encoder, std::FILE* log) {
  LATHE_CHECK(options.seq_len >= 1, "train.seq_len must be at least 1, got ", options.seq_len);
  const std::vector<SftConversation> conversations = read_sft_jsonl(options.path);
  const int64_t count = static_cast<int64_t>(conversations.size());
  LATHE_CHECK(count >= 2, options.path, " has ", count,
              " conversation; at least 2 are needed (one for training, one for validation)");
  SftDataset dataset;
  dataset.conversations = count;
  auto has_special_token = [&encoder](std::string_view spelling) { return encoder.special_token_id(spelling) >= 0; };
  dataset.chat_template = resolve_chat_template(options.chat_template, options.family_chat_template, has_special_token);

  const int64_t held_out = std::clamp<int64_t>(
      static_cast<int64_t>(std::llround(options.val_fraction * static_cast<double>(count))), 1, count - 1);
  const std::vector<int64_t> order = shuffled_indices(count, options.seed, kDocumentSplitStream);
  for (int64_t position = 0; position < count; ++position) {
    const SftConversation& conversation = conversations[static_cast<size_t>(order[static_cast<size_t>(position)])];
    TokenizedExample example;
    try {
      example = tokenize_pieces(format_chat(dataset.chat_template, conversation.messages, has_special_token), encoder);
    } catch (const Error& error) {
      throw error.with_context(str_cat(options.path, ":", conversation.line));
    }
    if (!has_trainable_target(example, options.seq_len)) {
      ++dataset.dropped;
      continue;
    }
    if (static_cast<int64_t>(example.ids.size()) > options.seq_len + 1) {
      ++dataset.truncated;
      example.ids.resize(static_cast<size_t>(options.seq_len + 1));
      example.trainable.resize(example.ids.size());
    }
    (position < held_out ? dataset.validation : dataset.train).push_back(std::move(example));
  }
  LATHE_CHECK(!dataset.train.empty() && !dataset.validation.empty(), options.path, ": after dropping ", dataset.dropped,
              " conversation(s) without a response token within train.seq_len=", options.seq_len, " no ",
              dataset.train.empty() ? "training" : "validation",
              " example is left (raise train.seq_len or shorten the prompts)");
  if (log)
    std::fprintf(log,
                 "data: %lld conversations from %s, chat template %s; %zu train, %zu validation; %lld truncated to "
                 "train.seq_len+1=%lld tokens, %lld dropped (no response token left)\n",
                 static_cast<long long>(count), options.path.c_str(), to_string(dataset.chat_template),
                 dataset.train.size(), dataset.validation.size(), static_cast<long long>(dataset.truncated),
                 static_cast<long long>(options.seq_len + 1), static_cast<long long>(dataset.dropped));
  return dataset;
}

}  // namespace lathe

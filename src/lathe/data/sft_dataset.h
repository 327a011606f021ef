// Supervised fine-tuning data: a JSONL file of conversations, tokenized with a chat template and
// masked so that only the assistant's tokens are learned.
//
// File format, one JSON object per line (blank lines are skipped, other keys ignored):
//   {"prompt": "...", "response": "..."}             = a user message and an assistant reply
//   {"messages": [{"role": "system|user|assistant", "content": "..."}, ...]}
// A conversation needs at least one assistant message. A bad line throws lathe::Error
// "FILE:LINE: what is wrong".
//
// Tokenization: special pieces become their one id; each run of text pieces between them is
// encoded as text_encoder_for says (special-token text recognised or not). A run is encoded
// joined, exactly as the whole text would be, when every boundary between trainable and
// untrainable text in it is also a token boundary of the joined ids (checked by encoding the
// prefixes); otherwise part by part, so mask boundaries always fall between tokens.
//
// A sample row of seq_len positions: inputs[t] = ids[t], targets[t] = ids[t + 1] when token t + 1
// is trainable, else kIgnoreTarget. Examples longer than seq_len + 1 tokens are truncated (the
// start is kept); one left without any trainable target is dropped (counted). Shorter ones are
// padded: inputs kPadInput (any valid id works: attention is causal, so padding after an example
// never changes its positions), targets kIgnoreTarget. No packing, so no example attends to another.
//
// Train/validation split: the examples in a Philox shuffle of (seed, kDocumentSplitStream), the
// first max(1, round(val_fraction * count)) held out; at least two examples are needed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/data/chat_template.h"

namespace lathe {

class Tokenizer;

inline constexpr int32_t kIgnoreTarget = -100;  // linear_cross_entropy's ignore_index
inline constexpr int32_t kPadInput = 0;

struct SftConversation {
  std::vector<ChatMessage> messages;
  int64_t line = 0;  // 1-based line in the file
};

// Throws on a missing/unreadable file, a bad line, or a file without any conversation.
std::vector<SftConversation> read_sft_jsonl(const std::string& path);
// One line's JSON (already parsed); `where` ("FILE:LINE") prefixes errors.
SftConversation parse_sft_record(const Json& record, const std::string& where);

// What tokenization needs from a tokenizer.
struct TextEncoder {
  std::function<void(std::string_view text, std::vector<int32_t>& ids)> encode_text;  // appends, no specials
  std::function<int32_t(std::string_view spelling)> special_token_id;                 // -1 when absent
};
// Any tokenizer (text/tokenizer.h); special pieces are its added tokens (added_token_id). With
// split_special_tokens, special-token text inside a message is encoded as ordinary text (a message
// cannot inject "<|im_end|>"); without it, it becomes the token, as transformers'
// apply_chat_template and the `tokenizers` library do (the trainer's choice).
TextEncoder text_encoder_for(const Tokenizer& tokenizer, bool split_special_tokens);
// What chat templates ask of a tokenizer: whether `spelling` is one of its added tokens.
HasSpecialToken has_special_token_of(const Tokenizer& tokenizer);

struct TokenizedExample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trainable;  // per id: 1 when the model learns to predict it
};
TokenizedExample tokenize_pieces(const std::vector<ChatPiece>& pieces, const TextEncoder& encoder);

// Whether a truncated example still has a target to learn.
bool has_trainable_target(const TokenizedExample& example, int64_t seq_len);
// Writes one sample row (see above); input_row, target_row: (seq_len) i32. Returns the number of
// valid (not ignored) targets.
int64_t fill_sft_row(const TokenizedExample& example, int64_t seq_len, int32_t* input_row, int32_t* target_row);

struct SftDataset {
  std::vector<TokenizedExample> train, validation;
  ChatTemplate chat_template = ChatTemplate::plain;
  int64_t conversations = 0;
  int64_t truncated = 0;  // longer than seq_len + 1 tokens, kept
  int64_t dropped = 0;    // no trainable target left after truncation
};

struct SftDatasetOptions {
  std::string path;                            // data.path
  std::string chat_template = "auto";          // data.chat_template
  std::string family_chat_template = "plain";  // the model family's default (FamilySpec), for auto
  int64_t seq_len = 0;
  double val_fraction = 0.02;
  uint64_t seed = 0;
};

// Reads, formats, tokenizes and splits. Counts and the template chosen go to `log` (nullptr: silent).
SftDataset prepare_sft_dataset(const SftDatasetOptions& options, const TextEncoder& encoder, std::FILE* log);

}  // namespace lathe

// Turns a stream of token ids back into text for printing while generating, with any Tokenizer:
// push() returns the text that can be shown now, finish() whatever is still held back. The text
// shown is decode(context + ids pushed) minus decode(context), so each token reads as it does
// inside the whole sequence (a SentencePiece "▁word" keeps its space after the prompt, where
// decoding it alone would strip it). Held back until later tokens settle it: an incomplete UTF-8
// sequence at the end (lathe's byte-level tokens, at most 3 bytes) and trailing U+FFFD (how a
// Hugging Face decoder shows bytes that a later byte token may still complete). Bytes that can
// never become valid are shown once a later token follows them: raw for lathe's BPE, U+FFFD for
// Hugging Face decoders, as decode() gives them.
//
// Cost: each push decodes the ids not yet fully shown plus a few already shown ones (for their
// context), so it stays short however long the stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/text/tokenizer.h"

namespace lathe {

class StreamingDecoder {
 public:
  // context: ids that come before the first push (e.g. the prompt); only its last few matter.
  explicit StreamingDecoder(const Tokenizer& tokenizer, const std::vector<int32_t>& context = {});
  std::string push(int32_t id);
  std::string finish();

 private:
  // Keeps the last few ids of window_ as context for what follows, all of it shown.
  void settle();

  const Tokenizer* tokenizer_;
  std::vector<int32_t> window_;  // context ids (shown), then the ids not fully shown yet
  std::string shown_;            // the prefix of decode(window_) already returned, or the context's text
};

}  // namespace lathe
